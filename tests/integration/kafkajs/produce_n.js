#!/usr/bin/env node
// kafkajs 2.2.4: N records to partition 0 of TOPIC, acks -1, one send per
// 50 records, retried through a leader change (driven by
// ../test_cluster_clients.py).
//
//   node produce_n.js HOST:PORT[,HOST:PORT...] TOPIC PREFIX N
//
// Values are PREFIX-0 .. PREFIX-(N-1). Prints {"acked": n} on stdout; exits
// 1 when a send failed after its retries.

'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [brokers, topic, prefix, nArg] = process.argv.slice(2)
if (!brokers || !topic || !prefix || !nArg) {
  console.error('usage: node produce_n.js HOST:PORT[,...] TOPIC PREFIX N')
  process.exit(2)
}
const N = parseInt(nArg, 10)
const kafka = new Kafka({
  clientId: 'sluice-leader-change',
  brokers: brokers.split(','),
  connectionTimeout: 5000,
  requestTimeout: 30000,
  retry: { retries: 12, initialRetryTime: 300, maxRetryTime: 5000 },
  logLevel: logLevel.NOTHING
})

async function main () {
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  let acked = 0
  for (let i = 0; i < N; i += 50) {
    const messages = []
    for (let j = i; j < Math.min(N, i + 50); j++) messages.push({ partition: 0, value: `${prefix}-${j}` })
    await producer.send({ topic, acks: -1, messages })
    acked += messages.length
  }
  await producer.disconnect()
  process.stdout.write(JSON.stringify({ acked }) + '\n')
}

main().catch((e) => {
  process.stderr.write(`produce_n: ${e.stack || e}\n`)
  process.exit(1)
})
