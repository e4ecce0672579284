#!/usr/bin/env node
// kafkajs 2.2.4 transactions against a running sluiced (driven by
// ../test_txn_clients.py).
//
//   node txn_check.js HOST:PORT TOPIC PREFIX N
//
// TOPIC gets 2 partitions. A transactional producer (transactionalId
// PREFIX-tx: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
// TxnOffsetCommit, EndTxn) runs three transactions, each sending N records
// to each partition with keys TAG-PARTITION-I:
//   c1: committed, with sendOffsets of PREFIX-offsets / partition 0 = 7
//   ab: aborted,   with sendOffsets of PREFIX-offsets / partition 0 = 99
//   c3: committed (the last records, so a consumer that has read them has
//       read everything before them)
// Then consumer rc (group PREFIX-rc, read_committed: the kafkajs default)
// and consumer ru (group PREFIX-ru, readUncommitted: true) read the topic
// from the beginning until each has the c3 records of both partitions.
// Reports both consumers' records, admin.fetchOffsets of PREFIX-offsets and
// admin.fetchTopicOffsets of TOPIC.
//
// Prints one JSON object on stdout ({ok, error, ...}); exits 1 on failure.
// Waits are conditions under a hang guard, not timing thresholds.

'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [broker, topic, prefix, nArg] = process.argv.slice(2)
if (!broker || !topic || !prefix || !nArg) {
  console.error('usage: node txn_check.js HOST:PORT TOPIC PREFIX N')
  process.exit(2)
}
const N = parseInt(nArg, 10)
const PARTITIONS = 2
const HANG_GUARD = parseInt(process.env.SLUICE_HANG_GUARD || '120', 10) * 1000

const kafka = new Kafka({
  clientId: 'sluice-kafkajs-txn',
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

function messages (tag) {
  const out = []
  for (let p = 0; p < PARTITIONS; p++) {
    for (let i = 0; i < N; i++) out.push({ partition: p, key: `${tag}-${p}-${i}`, value: `value-${tag}-${i}` })
  }
  return out
}

async function transaction (producer, tag, offset, commit) {
  const txn = await producer.transaction()
  await txn.send({ topic, acks: -1, messages: messages(tag) })
  if (offset !== null) {
    await txn.sendOffsets({
      consumerGroupId: `${prefix}-offsets`,
      topics: [{ topic, partitions: [{ partition: 0, offset: String(offset) }] }]
    })
  }
  if (commit) await txn.commit()
  else await txn.abort()
}

async function consume (name, readUncommitted) {
  const consumer = kafka.consumer({
    groupId: `${prefix}-${name}`,
    readUncommitted,
    sessionTimeout: 10000,
    rebalanceTimeout: 20000,
    heartbeatInterval: 300,
    maxWaitTimeInMs: 200,
    retry: { retries: 10, initialRetryTime: 100 }
  })
  const state = { name, records: [], crashed: null }
  consumer.on(consumer.events.CRASH, e => {
    state.crashed = `${e.payload.error.name}: ${e.payload.error.message}`
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      state.records.push({ partition, offset: Number(message.offset), key: message.key.toString() })
    }
  })
  const last = p => `c3-${p}-${N - 1}`
  await waitFor(() => state.crashed ||
    [...Array(PARTITIONS).keys()].every(p => state.records.some(r => r.partition === p && r.key === last(p))),
  () => `${name} read ${state.records.length} records, not yet the last c3 of each partition`)
  if (state.crashed) throw new Error(`${name} crashed: ${state.crashed}`)
  await sleep(300) // anything delivered twice or late would show up now
  await consumer.disconnect()
  return state
}

async function main () {
  const out = { ok: false, topic, prefix, n: N }
  const t0 = Date.now()
  try {
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: PARTITIONS }] })
    const producer = kafka.producer({
      transactionalId: `${prefix}-tx`,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: 30000
    })
    await producer.connect()
    await transaction(producer, 'c1', 7, true)
    out.steps = ['c1 committed']
    await transaction(producer, 'ab', 99, false)
    out.steps.push('ab aborted')
    await transaction(producer, 'c3', null, true)
    out.steps.push('c3 committed')
    await producer.disconnect()

    out.committedOffsets = (await admin.fetchOffsets({ groupId: `${prefix}-offsets`, topics: [topic] }))[0]
      .partitions.map(p => ({ partition: p.partition, offset: p.offset }))
      .sort((a, b) => a.partition - b.partition)
    out.topicOffsets = (await admin.fetchTopicOffsets(topic))
      .map(p => ({ partition: p.partition, high: p.high, low: p.low }))
      .sort((a, b) => a.partition - b.partition)

    out.rc = await consume('rc', false)
    out.ru = await consume('ru', true)
    await admin.disconnect()
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
