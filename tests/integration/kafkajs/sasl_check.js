#!/usr/bin/env node
// kafkajs 2.2.4 over a SASL listener (driven by ../test_sasl.py): log in
// with MECHANISM as USER, produce N records to TOPIC and read the
// partition's end offset back.
//
//   node sasl_check.js HOST:PORT MECHANISM USER PASSWORD TOPIC N
//
// Prints {"ok": true, "end": n} on stdout, or {"ok": false, "error": ...}
// and exits 1.

'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [broker, mechanism, username, password, topic, nArg] = process.argv.slice(2)
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
  logLevel: logLevel.NOTHING
})

async function main () {
  const producer = kafka.producer()
  const admin = kafka.admin()
  try {
    await producer.connect()
    const messages = []
    for (let i = 0; i < parseInt(nArg, 10); i++) messages.push({ value: 'kjs-' + i })
    await producer.send({ topic, acks: -1, messages })
    await admin.connect()
    const offsets = await admin.fetchTopicOffsets(topic)
    const end = offsets.reduce((s, o) => s + parseInt(o.high, 10), 0)
    console.log(JSON.stringify({ ok: true, end }))
  } catch (e) {
    console.log(JSON.stringify({ ok: false, error: String(e && (e.type || e.name)) + ': ' + String(e && e.message) }))
    process.exitCode = 1
  } finally {
    await producer.disconnect().catch(() => {})
    await admin.disconnect().catch(() => {})
  }
}

main()
