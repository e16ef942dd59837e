// KafkaJS over SASL_SSL with SCRAM-SHA-512: produces COUNT messages
// ("js-0", ...) to TOPIC, consumes them in GROUP, prints one JSON line.
//
//   node kafkajs_sasl.js BOOTSTRAP CA_FILE USER PASSWORD TOPIC GROUP COUNT
'use strict';

const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

async function main() {
  const [bootstrap, caFile, username, password, topic, group, countText] = process.argv.slice(2);
  const count = Number(countText);
  const kafka = new Kafka({
    clientId: 'strom-interop-kafkajs-sasl',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    ssl: { ca: [fs.readFileSync(caFile, 'utf-8')] },
    sasl: { mechanism: 'scram-sha-512', username, password },
    connectionTimeout: 5000,
    requestTimeout: 30000,
  });
  const producer = kafka.producer();
  await producer.connect();
  const messages = [];
  for (let i = 0; i < count; i++) messages.push({ value: `js-${i}` });
  await producer.send({ topic, messages });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: group });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const consumed = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out consuming')), 60000);
    consumer.run({
      eachMessage: async ({ message }) => {
        consumed.push(message.value.toString());
        if (consumed.length === count) {
          clearTimeout(timer);
          resolve();
        }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  console.log(JSON.stringify({ produced: count, consumed }));
}

main().catch((error) => {
  console.error('FAILED', error);
  process.exit(1);
});
