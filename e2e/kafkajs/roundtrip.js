// roundtrip.js: the kafkajs half of e2e/kafkajs_test.go.
//
//   node roundtrip.js <broker host:port> <topic> <none|gzip>
//
// Creates <topic> with 3 partitions through the admin client, produces
// 2,000 keyed records (50 keys, value "<seq per key>-<padding>") with a
// non-idempotent producer at acks=-1 and kafkajs's DefaultPartitioner
// (murmur2, Java-compatible since kafkajs 2.0), in 20 send() calls of 100
// records, then prints one JSON line on stdout:
//
//   {"created":true,"acks":[{"partition":0,"baseOffset":"0"},...],
//    "offsets":[{"partition":0,"low":"0","high":"672"},...],
//    "records":[[0,0,"k1","0-vvv..."],...],
//    "committed":[{"partition":0,"offset":"672"},...]}
//
// acks are the per-partition produce responses, offsets the result of
// admin.fetchTopicOffsets; then a kafkajs group consumer reads the topic
// back, commits and the admin client reads the group's offsets (records and
// committed, see consumeAsGroup). The Go test consumes the topic with franz-go and
// checks both. kafkajs logs go to stderr so stdout carries only the JSON.
// Any failure exits non-zero with the error on stderr.
'use strict'

const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const RECORDS = 2000
const KEYS = 50
const PER_SEND = 100
const PARTITIONS = 3

function stderrLogger() {
  return ({ namespace, level, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${label} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  }
}

async function main() {
  const [broker, topic, codec] = process.argv.slice(2)
  if (!broker || !topic || !['none', 'gzip'].includes(codec)) {
    throw new Error('usage: node roundtrip.js <broker host:port> <topic> <none|gzip>')
  }
  const compression = codec === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None

  const kafka = new Kafka({
    clientId: 'strata-e2e-kafkajs',
    brokers: [broker],
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 3 },
  })

  const admin = kafka.admin()
  const producer = kafka.producer({ idempotent: false, allowAutoTopicCreation: false })
  await admin.connect()
  try {
    const created = await admin.createTopics({
      topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }],
      waitForLeaders: true,
      timeout: 10000,
    })

    await producer.connect()
    const acks = []
    const pad = 'v'.repeat(100)
    for (let start = 0; start < RECORDS; start += PER_SEND) {
      const messages = []
      for (let i = start; i < start + PER_SEND; i++) {
        messages.push({ key: `k${i % KEYS}`, value: `${Math.floor(i / KEYS)}-${pad}` })
      }
      const meta = await producer.send({ topic, acks: -1, timeout: 30000, compression, messages })
      for (const m of meta) {
        if (m.errorCode !== 0) {
          throw new Error(`produce to ${m.topicName}/${m.partition}: error code ${m.errorCode}`)
        }
        acks.push({ partition: m.partition, baseOffset: m.baseOffset })
      }
    }

    const offsets = (await admin.fetchTopicOffsets(topic)).map(o => ({
      partition: o.partition,
      low: o.low,
      high: o.high,
    }))
    const { records, committed } = await consumeAsGroup(kafka, admin, topic, `${topic}-group`)
    process.stdout.write(JSON.stringify({ created, acks, offsets, records, committed }) + '\n')
  } finally {
    await producer.disconnect()
    await admin.disconnect()
  }
}

// consumeAsGroup reads every record of topic from the start with a kafkajs
// consumer in group groupId (FindCoordinator, JoinGroup, SyncGroup,
// Heartbeat, OffsetFetch, Fetch), commits each partition's next offset with
// commitOffsets, leaves the group and reads the group's offsets back with
// admin.fetchOffsets. records are [partition, offset, key, value] in the
// order eachMessage saw them; committed is [{partition, offset}].
async function consumeAsGroup(kafka, admin, topic, groupId) {
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000, maxWaitTimeInMs: 100 })
  const records = []
  const next = new Map()
  let timer
  try {
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await new Promise((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`group consumer read ${records.length} of ${RECORDS} records in 60 s`)), 60000)
      consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          const offset = Number(message.offset)
          records.push([partition, offset, message.key.toString(), message.value.toString()])
          next.set(partition, offset + 1)
          if (records.length === RECORDS) resolve()
        },
      }).catch(reject)
    })
    await consumer.commitOffsets([...next].map(([partition, offset]) => ({ topic, partition, offset: String(offset) })))
  } finally {
    clearTimeout(timer)
    await consumer.disconnect()
  }
  const fetched = await admin.fetchOffsets({ groupId, topics: [topic] })
  const committed = fetched.flatMap(t => t.partitions.map(p => ({ partition: p.partition, offset: p.offset })))
  return { records, committed }
}

main().catch(err => {
  process.stderr.write(`roundtrip.js: ${err && err.stack ? err.stack : err}\n`)
  process.exit(1)
})
