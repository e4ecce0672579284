#!/usr/bin/env node
// kafkajs 2.2.4 against a running sluiced (driven by ../test_kafkajs.py).
//
//   node kafkajs_check.js HOST:PORT TOPIC N
//
// Runs the admin and producer calls kafkajs makes without consumer groups
// (kafkajs consumers need a group coordinator, which sluiced does not serve
// yet): createTopics (3 partitions, waited for), fetchTopicMetadata,
// producer.send of N keyed records with headers (acks -1, GZIP),
// fetchTopicOffsets, describeConfigs/alterConfigs (retention.ms),
// createPartitions, deleteTopics on a second topic. The produced topic is left
// in place so that the Python driver can read it back.
//
// Prints one JSON object on stdout: {"steps": [{name, ok, ...}], "sent": [...]}
// and exits 1 if any step failed. Every step runs even after a failure (the
// ones that depend on an earlier step are reported as failed with the cause).

'use strict'

const { Kafka, CompressionTypes, logLevel, ConfigResourceTypes } = require('kafkajs')

const [broker, topic, nArg] = process.argv.slice(2)
if (!broker || !topic) {
  console.error('usage: node kafkajs_check.js HOST:PORT TOPIC [N]')
  process.exit(2)
}
const N = parseInt(nArg || '300', 10)
const PARTITIONS = 3
const other = topic + '-extra'

const kafka = new Kafka({
  clientId: 'sluice-kafkajs-check',
  brokers: [broker],
  connectionTimeout: 10000,
  requestTimeout: 30000,
  retry: { retries: 3, initialRetryTime: 100 },
  logLevel: logLevel.ERROR,
  logCreator: () => ({ namespace, level, label, log }) => {
    process.stderr.write(`kafkajs ${label} ${namespace}: ${log.message} ${JSON.stringify(log)}\n`)
  }
})

const steps = []
const result = { broker, topic, steps, sent: [] }

async function step (name, fn) {
  const t0 = Date.now()
  try {
    const detail = await fn()
    steps.push(Object.assign({ name, ok: true, ms: Date.now() - t0 }, detail || {}))
    return true
  } catch (e) {
    steps.push({
      name,
      ok: false,
      ms: Date.now() - t0,
      error: `${e.name}: ${e.message}`,
      type: e.type,
      code: e.code,
      cause: e.originalError ? `${e.originalError.name}: ${e.originalError.message}` : undefined
    })
    return false
  }
}

function check (cond, msg) {
  if (!cond) throw new Error('check failed: ' + msg)
}

function records () {
  const out = []
  for (let i = 0; i < N; i++) {
    out.push({
      key: `key-${i}-${(i * 7919) % 1000}`,
      value: `value ${i} ` + 'x'.repeat(i % 50),
      headers: { 'h-index': String(i), 'h-kind': i % 2 ? 'odd' : 'even' }
    })
  }
  return out
}

async function main () {
  const admin = kafka.admin()
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await step('admin.connect', () => admin.connect())

  await step('admin.createTopics', async () => {
    const created = await admin.createTopics({
      waitForLeaders: true,
      timeout: 30000,
      topics: [
        { topic, numPartitions: PARTITIONS, replicationFactor: 1 },
        { topic: other, numPartitions: 1, replicationFactor: 1 }
      ]
    })
    check(created === true, `createTopics returned ${created} (false = already existed)`)
    return { created }
  })

  await step('admin.listTopics', async () => {
    const topics = await admin.listTopics()
    check(topics.includes(topic) && topics.includes(other), `listTopics: ${JSON.stringify(topics)}`)
    return { topics }
  })

  await step('admin.fetchTopicMetadata', async () => {
    const md = await admin.fetchTopicMetadata({ topics: [topic] })
    const t = md.topics.find(x => x.name === topic)
    check(t, `topic missing from ${JSON.stringify(md)}`)
    const parts = t.partitions.map(p => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr, error: p.partitionErrorCode }))
    parts.sort((a, b) => a.partition - b.partition)
    check(parts.length === PARTITIONS, `${parts.length} partitions`)
    parts.forEach((p, i) => {
      check(p.partition === i, `partition ids ${JSON.stringify(parts)}`)
      check(p.leader >= 0 && p.error === 0, `partition ${i} leader ${p.leader} error ${p.error}`)
    })
    return { partitions: parts }
  })

  await step('producer.connect', () => producer.connect())

  const msgs = records()
  await step('producer.send', async () => {
    // in several sends so that each partition gets more than one batch
    const chunk = Math.max(1, Math.ceil(N / 4))
    const acks = []
    for (let i = 0; i < N; i += chunk) {
      const part = msgs.slice(i, i + chunk)
      const meta = await producer.send({ topic, acks: -1, timeout: 30000, compression: CompressionTypes.GZIP, messages: part })
      for (const m of meta) {
        check(m.errorCode === 0, `produce error ${JSON.stringify(m)}`)
        acks.push({ partition: m.partition, baseOffset: m.baseOffset })
      }
    }
    result.sent = msgs
    return { sends: acks.length, acks }
  })

  await step('admin.fetchTopicOffsets', async () => {
    const offs = await admin.fetchTopicOffsets(topic)
    const sum = offs.reduce((s, o) => s + Number(o.high), 0)
    check(offs.length === PARTITIONS, `${offs.length} partitions in offsets`)
    check(offs.every(o => Number(o.low) === 0), `low offsets ${JSON.stringify(offs)}`)
    check(sum === N, `high watermarks sum to ${sum}, sent ${N}`)
    return { offsets: offs.map(o => ({ partition: o.partition, low: o.low, high: o.high })) }
  })

  const resource = { type: ConfigResourceTypes.TOPIC, name: topic }
  await step('admin.describeConfigs', async () => {
    const r = await admin.describeConfigs({ includeSynonyms: false, resources: [Object.assign({ configNames: ['retention.ms'] }, resource)] })
    const res = r.resources[0]
    check(res && res.errorCode === 0, `describeConfigs ${JSON.stringify(r)}`)
    const e = res.configEntries.find(c => c.configName === 'retention.ms')
    check(e, `no retention.ms in ${JSON.stringify(res.configEntries)}`)
    return { retention_ms: e.configValue, isDefault: e.isDefault }
  })

  await step('admin.alterConfigs', async () => {
    const r = await admin.alterConfigs({ validateOnly: false, resources: [Object.assign({ configEntries: [{ name: 'retention.ms', value: '3600000' }] }, resource)] })
    const res = r.resources[0]
    check(res && res.errorCode === 0, `alterConfigs ${JSON.stringify(r)}`)
    const d = await admin.describeConfigs({ includeSynonyms: false, resources: [Object.assign({ configNames: ['retention.ms'] }, resource)] })
    const e = d.resources[0].configEntries.find(c => c.configName === 'retention.ms')
    check(e && e.configValue === '3600000', `retention.ms after alter: ${JSON.stringify(e)}`)
    return { retention_ms: e.configValue }
  })

  await step('admin.createPartitions', async () => {
    // resolves to undefined in kafkajs 2.2.4 (it throws on an error code)
    await admin.createPartitions({ timeout: 30000, topicPartitions: [{ topic: other, count: 4 }] })
    const md = await admin.fetchTopicMetadata({ topics: [other] })
    const n = md.topics[0].partitions.length
    check(n === 4, `${other} has ${n} partitions after createPartitions to 4`)
    return { partitions: n }
  })

  await step('admin.deleteTopics', async () => {
    await admin.deleteTopics({ topics: [other], timeout: 30000 })
    const topics = await admin.listTopics()
    check(!topics.includes(other), `${other} still listed: ${JSON.stringify(topics)}`)
    check(topics.includes(topic), `${topic} gone too: ${JSON.stringify(topics)}`)
    return { topics }
  })

  await step('producer.disconnect', () => producer.disconnect())
  await step('admin.disconnect', () => admin.disconnect())
}

const guard = setTimeout(() => {
  steps.push({ name: 'hang-guard', ok: false, error: 'kafkajs_check.js did not finish in 100 s' })
  finish()
}, 100000)

function finish () {
  clearTimeout(guard)
  process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(steps.every(s => s.ok) ? 0 : 1))
}

main().then(finish, e => {
  steps.push({ name: 'main', ok: false, error: String(e && e.stack) })
  finish()
})
