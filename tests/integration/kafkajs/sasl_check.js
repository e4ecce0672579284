#!/usr/bin/env node
// kafkajs 2.2.4 over a SASL listener (driven by ../test_sasl.py): log in
// with MECHANISM as USER, produce N records to TOPIC and read the
// partition's end offset back. With ROUNDS and PAUSE_MS: ROUNDS times
// produce N records and wait PAUSE_MS, then consume all of them back with a
// consumer group (KIP-368: kafkajs re-authenticates on its connections as
// their sessions near their end, reauthenticationThreshold before it).
//
//   node sasl_check.js HOST:PORT MECHANISM USER PASSWORD TOPIC N [ROUNDS PAUSE_MS]
//
// Prints {"ok": true, "end": n} on stdout, or {"ok": false, "error": ...}
// and exits 1.

'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [broker, mechanism, username, password, topic, nArg, roundsArg, pauseArg] = process.argv.slice(2)
const rounds = parseInt(roundsArg || '1', 10)
const pauseMs = parseInt(pauseArg || '0', 10)
if (!broker || !mechanism || !username || !password || !topic || !nArg) {
  console.error('usage: node sasl_check.js HOST:PORT MECHANISM USER PASSWORD TOPIC N')
  process.exit(2)
}
const kafka = new Kafka({
  clientId: 'sluice-sasl',
  brokers: [broker],
  sasl: { mechanism: mechanism.toLowerCase(), username, password },
  connectionTimeout: 5000,
  requestTimeout: 30000,
  retry: { retries: 2 },
  reauthenticationThreshold: 1000,
  logLevel: logLevel.NOTHING
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function consumeAll (n) {
  const consumer = kafka.consumer({ groupId: 'g-' + topic })
  let got = 0
  try {
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    await new Promise((resolve, reject) => {
      consumer.on(consumer.events.CRASH, (e) => reject(e.payload.error))
      consumer.run({
        eachMessage: async () => {
          if (++got >= n) resolve()
        }
      }).catch(reject)
    })
  } finally {
    await consumer.disconnect().catch(() => {})
  }
  return got
}

async function main () {
  const producer = kafka.producer()
  const admin = kafka.admin()
  try {
    await producer.connect()
    const messages = []
    for (let i = 0; i < parseInt(nArg, 10); i++) messages.push({ value: 'kjs-' + i })
    await admin.connect()
    for (let r = 0; r < rounds; r++) {
      await producer.send({ topic, acks: -1, messages })
      await admin.fetchTopicOffsets(topic)
      if (pauseMs) await sleep(pauseMs)
    }
    const offsets = await admin.fetchTopicOffsets(topic)
    const end = offsets.reduce((s, o) => s + parseInt(o.high, 10), 0)
    const res = { ok: true, end }
    if (roundsArg) res.consumed = await consumeAll(end)
    console.log(JSON.stringify(res))
  } catch (e) {
    console.log(JSON.stringify({ ok: false, error: String(e && (e.type || e.name)) + ': ' + String(e && e.message) }))
    process.exitCode = 1
  } finally {
    await producer.disconnect().catch(() => {})
    await admin.disconnect().catch(() => {})
  }
}

main()
