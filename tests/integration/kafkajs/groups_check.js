#!/usr/bin/env node
// kafkajs 2.2.4 consumers in groups against a running sluiced (driven by
// ../test_groups_kafkajs.py).
//
//   node groups_check.js HOST:PORT resume TOPIC GROUP
//   node groups_check.js HOST:PORT share TOPIC GROUP
//
// resume: 3 partitions, 20 keyed records per partition; consumer 1 in GROUP
//   (read_committed, the kafkajs default) reads them, commits offset 20 on
//   partitions 1 and 2 and 15 on partition 0 (records 15..19 stay
//   uncommitted), disconnects (LeaveGroup); 10 more records per partition;
//   consumer 2 in the same group resumes. Reports what each consumer read,
//   admin.fetchOffsets after the commit, describeGroups/listGroups while a
//   member is in and after it left.
// share: 4 partitions; consumers A and B in GROUP; once their latest
//   GROUP_JOIN assignments are disjoint and cover the topic, 20 records per
//   partition are produced; reports each consumer's assignment and records
//   and describeGroups while both are in.
//
// Prints one JSON object on stdout ({ok, error, ...}); exits 1 on failure.
// Waits are conditions under a hang guard, not timing thresholds.

'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [broker, scenario, topic, groupId] = process.argv.slice(2)
if (!broker || !scenario || !topic || !groupId) {
  console.error('usage: node groups_check.js HOST:PORT resume|share TOPIC GROUP')
  process.exit(2)
}
const HANG_GUARD = parseInt(process.env.SLUICE_HANG_GUARD || '120', 10) * 1000

const kafka = new Kafka({
  clientId: 'sluice-kafkajs-groups',
  brokers: [broker],
  connectionTimeout: 10000,
  requestTimeout: 30000,
  retry: { retries: 5, initialRetryTime: 100 },
  logLevel: logLevel.ERROR,
  logCreator: () => ({ namespace, level, label, log }) => {
    process.stderr.write(`kafkajs ${label} ${namespace}: ${log.message} ${JSON.stringify(log)}\n`)
  }
})

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function waitFor (cond, what) {
  const deadline = Date.now() + HANG_GUARD
  for (;;) {
    if (await cond()) return
    if (Date.now() > deadline) throw new Error('hang guard waiting for: ' + (typeof what === 'function' ? what() : what))
    await sleep(50)
  }
}

function makeConsumer (name) {
  const consumer = kafka.consumer({
    groupId,
    sessionTimeout: 10000,
    rebalanceTimeout: 20000,
    heartbeatInterval: 300,
    maxWaitTimeInMs: 200,
    retry: { retries: 10, initialRetryTime: 100 }
  })
  const state = { name, records: [], joins: [], crashed: null }
  consumer.on(consumer.events.GROUP_JOIN, e => {
    state.joins.push({
      memberId: e.payload.memberId,
      leaderId: e.payload.leaderId,
      isLeader: e.payload.isLeader,
      protocol: e.payload.groupProtocol,
      assignment: e.payload.memberAssignment[topic] || []
    })
  })
  consumer.on(consumer.events.CRASH, e => {
    state.crashed = `${e.payload.error.name}: ${e.payload.error.message}`
  })
  return { consumer, state }
}

async function start ({ consumer, state }) {
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      state.records.push({ partition, offset: Number(message.offset), key: message.key.toString() })
    }
  })
}

async function produce (producer, partitions, perPartition, tag) {
  const messages = []
  for (let p = 0; p < partitions; p++) {
    for (let i = 0; i < perPartition; i++) messages.push({ partition: p, key: `${tag}-${p}-${i}`, value: 'v' })
  }
  await producer.send({ topic, acks: -1, messages })
}

function describeSummary (d) {
  const g = d.groups[0]
  return {
    groupId: g.groupId,
    errorCode: g.errorCode,
    state: g.state,
    protocolType: g.protocolType,
    protocol: g.protocol,
    members: g.members.map(m => ({ memberId: m.memberId, clientId: m.clientId, clientHost: m.clientHost }))
  }
}

async function resume (out) {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 3 }] })
  const producer = kafka.producer()
  await producer.connect()
  await produce(producer, 3, 20, 'one')

  const c1 = makeConsumer('c1')
  out.c1 = c1.state
  await start(c1)
  await waitFor(() => c1.state.records.length >= 60 || c1.state.crashed,
    () => `c1 read ${c1.state.records.length} of 60`)
  if (c1.state.crashed) throw new Error('c1 crashed: ' + c1.state.crashed)
  out.describeWhileIn = describeSummary(await admin.describeGroups([groupId]))
  out.listWhileIn = (await admin.listGroups()).groups
  await c1.consumer.commitOffsets([
    { topic, partition: 0, offset: '15' },
    { topic, partition: 1, offset: '20' },
    { topic, partition: 2, offset: '20' }
  ])
  out.committed = (await admin.fetchOffsets({ groupId, topics: [topic] }))[0].partitions
    .map(p => ({ partition: p.partition, offset: p.offset }))
    .sort((a, b) => a.partition - b.partition)
  await sleep(300) // anything read twice would show up now
  await c1.consumer.disconnect()
  out.describeAfterLeave = describeSummary(await admin.describeGroups([groupId]))

  await produce(producer, 3, 10, 'two')
  const c2 = makeConsumer('c2')
  out.c2 = c2.state
  await start(c2)
  await waitFor(() => c2.state.records.length >= 35 || c2.state.crashed,
    () => `c2 read ${c2.state.records.length} of 35`)
  if (c2.state.crashed) throw new Error('c2 crashed: ' + c2.state.crashed)
  await sleep(300)
  await c2.consumer.disconnect()
  await producer.disconnect()
  await admin.disconnect()
}

async function share (out) {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 4 }] })
  const a = makeConsumer('a')
  const b = makeConsumer('b')
  out.a = a.state
  out.b = b.state
  await start(a)
  await waitFor(() => a.state.joins.length > 0, 'a joined')
  await start(b)
  const last = s => s.joins.length ? s.joins[s.joins.length - 1].assignment : []
  await waitFor(() => {
    if (a.state.crashed || b.state.crashed) return true
    const la = last(a.state)
    const lb = last(b.state)
    return la.length === 2 && lb.length === 2 && new Set([...la, ...lb]).size === 4
  }, () => `split: a ${JSON.stringify(last(a.state))} b ${JSON.stringify(last(b.state))}`)
  if (a.state.crashed || b.state.crashed) throw new Error(`crashed: a ${a.state.crashed} b ${b.state.crashed}`)
  out.describe = describeSummary(await admin.describeGroups([groupId]))

  const producer = kafka.producer()
  await producer.connect()
  await produce(producer, 4, 20, 'share')
  await waitFor(() => a.state.records.length + b.state.records.length >= 80,
    () => `read a ${a.state.records.length} + b ${b.state.records.length} of 80`)
  await sleep(300)
  await producer.disconnect()
  await Promise.all([a.consumer.disconnect(), b.consumer.disconnect()])
  await admin.disconnect()
}

async function main () {
  const out = { ok: false, scenario, topic, groupId }
  const t0 = Date.now()
  try {
    if (scenario === 'resume') await resume(out)
    else if (scenario === 'share') await share(out)
    else throw new Error('unknown scenario ' + scenario)
    out.ok = true
  } catch (e) {
    out.error = `${e.name}: ${e.message}`
    out.type = e.type
    out.stack = e.stack
  }
  out.ms = Date.now() - t0
  process.stdout.write(JSON.stringify(out) + '\n')
  process.exit(out.ok ? 0 : 1)
}

main()
