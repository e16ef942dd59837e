// A small command-line wrapper around KafkaJS for Strom's interop suite.
// The Python tests run it against a broker they started and check what it
// prints: one JSON document per line. Record bytes travel as base64 (null
// stays null). Any failure prints "FAILED ..." on stderr and exits 1.
//
//   node kafkajs_client.js produce BOOTSTRAP TOPIC PARTITION CODEC FILE
//   node kafkajs_client.js consume BOOTSTRAP TOPIC COUNT GROUP
//   node kafkajs_client.js admin BOOTSTRAP
//   node kafkajs_client.js handover BOOTSTRAP TOPIC PARTITIONS COUNT GROUP
//   node kafkajs_client.js group-admin BOOTSTRAP TOPIC PARTITIONS END GROUP
//   node kafkajs_client.js delete-group BOOTSTRAP GROUP
//   node kafkajs_client.js live-group BOOTSTRAP TOPIC COUNT GROUP
//   node kafkajs_client.js offsets-by-time BOOTSTRAP TOPIC TIMESTAMP_MS
//   node kafkajs_client.js cluster BOOTSTRAP TOPIC PARTITIONS GROUP REPLICATION_FACTOR
//   node kafkajs_client.js commit-through BOOTSTRAP TOPIC COUNT GROUP
'use strict';

const fs = require('fs');
const assert = require('assert');
const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = require('kafkajs');
const SnappyCodec = require('kafkajs-snappy');

// Snappy comes as a plugin (raw snappy blocks out, raw or xerial-framed in).
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec;

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

/** Messages per `send` of the produce command. */
const SEND_MESSAGES = 250;

/** How long any one step may take before the command gives up. */
const STEP_TIMEOUT_MS = 30000;

function client(bootstrap) {
  return new Kafka({
    clientId: 'strom-interop-kafkajs',
    brokers: bootstrap.split(','),
    logLevel: logLevel.WARN,
    connectionTimeout: 5000,
    requestTimeout: STEP_TIMEOUT_MS,
    retry: { retries: 8, initialRetryTime: 100 },
  });
}

/** Prints one JSON document as a line, synchronously: `console.log` to a
 * pipe is asynchronous, and `process.exit` would cut it short. */
function emit(document) {
  fs.writeSync(1, JSON.stringify(document) + '\n');
}

const fromBase64 = (text) => (text === null ? null : Buffer.from(text, 'base64'));
const toBase64 = (bytes) => (bytes === null || bytes === undefined ? null : bytes.toString('base64'));

/** `promise`, or an error naming `what` (a string, or a function giving
 * one when the time is up) after STEP_TIMEOUT_MS. */
function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const label = typeof what === 'function' ? what() : what;
      reject(new Error(`${label}: no progress in ${STEP_TIMEOUT_MS} ms`));
    }, STEP_TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Produces the messages of FILE (a JSON array of {key, value, headers:
 * [[name, value]], timestamp}) to one partition with an idempotent producer
 * (acks=all), SEND_MESSAGES per send; prints the base offset of each send. */
async function produce(bootstrap, topic, partition, codec, file) {
  const messages = JSON.parse(fs.readFileSync(file, 'utf8')).map((message) => {
    const headers = {};
    for (const [name, value] of message.headers) headers[name] = fromBase64(value);
    return {
      key: fromBase64(message.key),
      value: fromBase64(message.value),
      headers,
      timestamp: String(message.timestamp),
      partition: Number(partition),
    };
  });
  const compression = {
    none: CompressionTypes.None,
    gzip: CompressionTypes.GZIP,
    snappy: CompressionTypes.Snappy,
  }[codec];
  assert.notStrictEqual(compression, undefined, `codec ${codec}`);
  const producer = client(bootstrap).producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    // KafkaJS sends each `send` as one batch: keep them under the broker's
    // message.max.bytes (1 MB by default), as an application must.
    const baseOffsets = [];
    for (let first = 0; first < messages.length; first += SEND_MESSAGES) {
      const results = await withTimeout(
        producer.send({ topic, messages: messages.slice(first, first + SEND_MESSAGES), acks: -1, compression }),
        'send'
      );
      assert.strictEqual(results.length, 1, 'one partition written');
      assert.strictEqual(results[0].errorCode, 0, 'no error');
      baseOffsets.push(Number(results[0].baseOffset));
    }
    emit({ baseOffsets });
  } finally {
    await producer.disconnect();
  }
}

/** Connects CONSUMER, subscribes it to TOPIC from the beginning and runs it
 * with the handlers `handlers(finish)` gives, until they call `finish()`
 * (or the time is up: `what()` names what was awaited); then disconnects. */
async function runUntilFinished(consumer, topic, what, handlers) {
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await withTimeout(
      new Promise((resolve, reject) => {
        consumer.run(handlers(resolve)).catch(reject);
      }),
      what
    );
  } finally {
    await consumer.disconnect();
  }
}

/** Reads COUNT records of TOPIC from the beginning as a member of GROUP,
 * committing as it goes; prints each record. */
async function consume(bootstrap, topic, count, group) {
  const consumer = client(bootstrap).consumer({ groupId: group, maxWaitTimeInMs: 500 });
  const records = [];
  await runUntilFinished(
    consumer,
    topic,
    () => `consume ${count} records (got ${records.length})`,
    (finish) => ({
      eachMessage: async ({ partition, message }) => {
        if (records.length >= count) return;
        // KafkaJS gathers repeated header names into an array.
        const headers = Object.entries(message.headers || {}).flatMap(([name, value]) =>
          (Array.isArray(value) ? value : [value]).map((one) => [name, toBase64(one)])
        );
        records.push({
          partition,
          offset: Number(message.offset),
          key: toBase64(message.key),
          value: toBase64(message.value),
          headers,
          timestamp: Number(message.timestamp),
        });
        if (records.length === count) finish();
      },
    })
  );
  for (const record of records) emit(record);
}

/** The admin API end to end, checking each answer. */
async function admin(bootstrap) {
  const admin = client(bootstrap).admin();
  await admin.connect();
  try {
    const topic = 'kafkajs-admin';
    // validate_only creates nothing.
    assert.strictEqual(
      await admin.createTopics({ validateOnly: true, waitForLeaders: false, topics: [{ topic, numPartitions: 2 }] }),
      true
    );
    assert.ok(!(await admin.listTopics()).includes(topic), 'validate-only created nothing');
    const created = await admin.createTopics({
      waitForLeaders: true,
      topics: [
        {
          topic,
          numPartitions: 2,
          replicationFactor: 1,
          configEntries: [{ name: 'retention.ms', value: '3600000' }],
        },
      ],
    });
    assert.strictEqual(created, true, 'created');
    // A second create of the same topic: KafkaJS reports it as not created.
    assert.strictEqual(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] }), false);
    await admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] });
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
    assert.strictEqual(metadata.topics[0].partitions.length, 5, 'five partitions');
    for (const partition of metadata.topics[0].partitions) {
      assert.strictEqual(partition.partitionErrorCode, 0);
      assert.deepStrictEqual(partition.isr, [partition.leader]);
    }
    const describe = async () => {
      const answer = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: 2, name: topic, configNames: ['retention.ms', 'cleanup.policy'] }],
      });
      const entries = {};
      for (const entry of answer.resources[0].configEntries) entries[entry.configName] = entry.configValue;
      return entries;
    };
    assert.deepStrictEqual(await describe(), { 'retention.ms': '3600000', 'cleanup.policy': 'delete' });
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: 2, name: topic, configEntries: [{ name: 'retention.ms', value: '7200000' }] }],
    });
    assert.strictEqual((await describe())['retention.ms'], '7200000', 'altered');
    const cluster = await admin.describeCluster();
    assert.strictEqual(cluster.brokers.length, 1, 'one broker');
    assert.strictEqual(cluster.controller, cluster.brokers[0].nodeId, 'it is the controller');
    await admin.deleteTopics({ topics: [topic] });
    assert.ok(!(await admin.listTopics()).includes(topic), 'deleted');
    emit({ admin: 'ok', partitions: metadata.topics[0].partitions.length });
  } finally {
    await admin.disconnect();
  }
}

/** One member of GROUP takes about half of COUNT records of TOPIC and
 * commits exactly what it took; a second member then reads the rest. Prints
 * what each took, as {member, partition, offset}. */
async function handover(bootstrap, topic, partitions, count, group) {
  const kafka = client(bootstrap);
  const taken = [];
  const member = async (name, limit) => {
    const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 500 });
    const mine = [];
    await runUntilFinished(
      consumer,
      topic,
      () => `${name} takes ${limit} records (took ${mine.length})`,
      (finish) => ({
        autoCommit: false,
        eachBatch: async ({ batch }) => {
          // Whole batches only, so that the commit marks exactly what this
          // member took.
          if (mine.length >= limit) return;
          for (const message of batch.messages) {
            mine.push({ member: name, partition: batch.partition, offset: Number(message.offset) });
          }
          const next = Number(batch.messages[batch.messages.length - 1].offset) + 1;
          await consumer.commitOffsets([{ topic, partition: batch.partition, offset: String(next) }]);
          if (mine.length >= limit) finish();
        },
      })
    );
    taken.push(...mine);
    return mine.length;
  };
  const first = await member('first', Math.floor(count / 2));
  await member('second', count - first);
  for (const record of taken) emit(record);
  assert.ok(partitions > 0);
}

/** The group and record admin calls on GROUP, which has committed the end
 * of every partition of TOPIC and has no members: describe, list and fetch
 * offsets, set them, delete the records of partition 1 before 500, and
 * reset the group to the earliest offsets. */
async function groupAdmin(bootstrap, topic, partitions, end, group) {
  const admin = client(bootstrap).admin();
  await admin.connect();
  try {
    const committed = async () => {
      const [answer] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
      return answer.partitions
        .map(({ partition, offset }) => [partition, Number(offset)])
        .sort((a, b) => a[0] - b[0]);
    };
    const everyPartition = (offset) => Array.from({ length: partitions }, (_, partition) => [partition, offset]);
    assert.deepStrictEqual(await committed(), everyPartition(end), 'the end is committed');
    const { groups } = await admin.describeGroups([group]);
    assert.strictEqual(groups[0].state, 'Empty');
    assert.strictEqual(groups[0].protocolType, 'consumer');
    assert.ok((await admin.listGroups()).groups.some(({ groupId }) => groupId === group), 'listed');
    await admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: '10' }] });
    assert.deepStrictEqual((await committed())[0], [0, 10], 'set');
    await admin.deleteTopicRecords({ topic, partitions: [{ partition: 1, offset: '500' }] });
    const low = (await admin.fetchTopicOffsets(topic)).find(({ partition }) => partition === 1).low;
    assert.strictEqual(Number(low), 500, 'records before 500 deleted');
    // KafkaJS commits the EARLIEST sentinel itself (-2), as it does with
    // Kafka, which stores any offset; its consumers then start at the log
    // start.
    await admin.resetOffsets({ groupId: group, topic, earliest: true });
    assert.deepStrictEqual(await committed(), everyPartition(-2), 'reset to the earliest');
    emit({ groupAdmin: 'ok' });
  } finally {
    await admin.disconnect();
  }
}

/** Deletes GROUP (which has no members) and checks that it is gone. */
async function deleteGroup(bootstrap, group) {
  const admin = client(bootstrap).admin();
  await admin.connect();
  try {
    assert.ok((await admin.listGroups()).groups.some(({ groupId }) => groupId === group), 'listed');
    await admin.deleteGroups([group]);
    assert.ok(!(await admin.listGroups()).groups.some(({ groupId }) => groupId === group), 'deleted');
    const [answer] = await admin.fetchOffsets({ groupId: group, topics: [] });
    emit({ deleted: group, offsetsLeft: answer ? answer.partitions.length : 0 });
  } finally {
    await admin.disconnect();
  }
}

/** A group that grows while records arrive: member "a" joins and reads,
 * a producer sends COUNT records in sends of 100 spread over time, member
 * "b" joins halfway (a rebalance while "a" is reading), and both read until
 * every record has been seen. Prints what each member saw, as {member,
 * partition, offset}, and the number of times each member was assigned
 * partitions. */
async function liveGroup(bootstrap, topic, count, group) {
  const kafka = client(bootstrap);
  const seen = new Set();
  const records = [];
  const assignments = { a: 0, b: 0 };
  let allSeen;
  const done = new Promise((resolve) => {
    allSeen = resolve;
  });
  const member = async (name) => {
    const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 200, heartbeatInterval: 500 });
    consumer.on(consumer.events.GROUP_JOIN, () => {
      assignments[name] += 1;
    });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        records.push({ member: name, partition, offset: Number(message.offset) });
        seen.add(`${partition}:${message.offset}`);
        if (seen.size === count) allSeen();
      },
    });
    return consumer;
  };
  const producer = kafka.producer();
  await producer.connect();
  const a = await member('a');
  let b;
  for (let sent = 0; sent < count; sent += 100) {
    if (sent === count / 2) b = await member('b');
    const messages = Array.from({ length: Math.min(100, count - sent) }, (_, index) => ({
      value: `live-${sent + index}`,
    }));
    await withTimeout(producer.send({ topic, messages, acks: -1 }), 'send');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await withTimeout(done, `every record seen (seen ${seen.size} of ${count})`);
  await producer.disconnect();
  await Promise.all([a.disconnect(), b.disconnect()]);
  for (const record of records) emit(record);
  emit({ assignments });
}

/** Commits OFFSETS ({partition: next offset}) of TOPIC for CONSUMER; emits
 * {committed} once the coordinator acknowledged them, {commitError} if not.
 * Returns whether they were acknowledged. */
async function commitPositions(consumer, topic, offsets) {
  const entries = Object.entries(offsets);
  if (entries.length === 0) return true;
  try {
    await consumer.commitOffsets(
      entries.map(([partition, offset]) => ({ topic, partition: Number(partition), offset: String(offset) }))
    );
    emit({ committed: offsets });
    return true;
  } catch (error) {
    emit({ commitError: String(error && (error.type || error.message)) });
    return false;
  }
}

/** One member of GROUP reads TOPIC from the beginning until it has seen
 * COUNT distinct record values, slowly (a few ms a record), committing its
 * positions every 25 records and at the end with manual commits; prints
 * every commit the coordinator acknowledged ({committed: {partition:
 * offset}}) and every refused one, as it happens, then {seen}. Meant to
 * run while the coordinator's broker is killed: errors are ridden through. */
async function commitThrough(bootstrap, topic, count, group) {
  const consumer = client(bootstrap).consumer({
    groupId: group,
    maxWaitTimeInMs: 200,
    sessionTimeout: 10000,
    heartbeatInterval: 1000,
    retry: { retries: 30, initialRetryTime: 200, maxRetryTime: 2000 },
  });
  const seen = new Set();
  const positions = {};
  let sinceCommit = 0;
  let allSeen;
  const done = new Promise((resolve) => {
    allSeen = resolve;
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      seen.add(message.value.toString());
      positions[partition] = Number(message.offset) + 1;
      sinceCommit += 1;
      await new Promise((resolve) => setTimeout(resolve, 3));
      if (sinceCommit >= 25) {
        sinceCommit = 0;
        await commitPositions(consumer, topic, { ...positions });
      }
      if (seen.size >= count) allSeen();
    },
  });
  const deadline = Date.now() + 120000;
  await Promise.race([
    done,
    new Promise((_, reject) =>
      setTimeout(() => reject(new Error(`saw ${seen.size} of ${count} records`)), 120000)
    ),
  ]);
  await consumer.pause([{ topic }]);
  while (!(await commitPositions(consumer, topic, { ...positions }))) {
    if (Date.now() > deadline) throw new Error('the final commit was never acknowledged');
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  await consumer.disconnect();
  emit({ seen: seen.size });
}

/** Prints the offsets KafkaJS finds for TIMESTAMP_MS in each partition. */
async function offsetsByTime(bootstrap, topic, timestamp) {
  const admin = client(bootstrap).admin();
  await admin.connect();
  try {
    const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, Number(timestamp));
    const latest = await admin.fetchTopicOffsets(topic);
    emit({
      byTime: byTime.map(({ partition, offset }) => [partition, Number(offset)]),
      latest: latest.map(({ partition, high, low }) => [partition, Number(low), Number(high)]),
    });
  } finally {
    await admin.disconnect();
  }
}

/** A cluster seen from one bootstrap node: the brokers KafkaJS learns,
 * TOPIC created with PARTITIONS partitions and REPLICATION_FACTOR replicas
 * (3 unless given; its partitions as KafkaJS reads them back), and GROUP
 * joined by a consumer that commits offset 0 of partition 0. Prints
 * {brokers, partitions, coordinators}: `coordinators` are the brokers
 * ("host:port") KafkaJS sent the group's JoinGroup, SyncGroup and
 * OffsetCommit requests to. */
async function clusterView(bootstrap, topic, partitions, group, replicationFactor) {
  const kafka = client(bootstrap);
  const admin = kafka.admin();
  await admin.connect();
  try {
    const cluster = await withTimeout(admin.describeCluster(), 'describeCluster');
    const created = await withTimeout(
      admin.createTopics({
        waitForLeaders: true,
        topics: [{ topic, numPartitions: partitions, replicationFactor }],
      }),
      'createTopics'
    );
    assert.strictEqual(created, true, 'created');
    const metadata = await withTimeout(admin.fetchTopicMetadata({ topics: [topic] }), 'fetchTopicMetadata');
    const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 200 });
    const coordinators = new Set();
    const groupApis = new Set(['JoinGroup', 'SyncGroup', 'OffsetCommit']);
    consumer.on(consumer.events.REQUEST, ({ payload }) => {
      if (groupApis.has(payload.apiName)) coordinators.add(payload.broker);
    });
    let joined;
    const join = new Promise((resolve) => {
      joined = resolve;
    });
    consumer.on(consumer.events.GROUP_JOIN, () => joined());
    await consumer.connect();
    try {
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({ autoCommit: false, eachMessage: async () => {} });
      await withTimeout(join, `join ${group}`);
      await withTimeout(consumer.commitOffsets([{ topic, partition: 0, offset: '0' }]), 'commitOffsets');
    } finally {
      await consumer.disconnect();
    }
    emit({
      brokers: cluster.brokers.map(({ nodeId, host, port }) => ({ nodeId, host, port })),
      partitions: metadata.topics[0].partitions.map(({ partitionId, leader, replicas, isr }) => ({
        partitionId,
        leader,
        replicas,
        isr,
      })),
      coordinators: [...coordinators],
    });
  } finally {
    await admin.disconnect();
  }
}

/** Two transactions of one transactional producer on TOPIC: the first
 * sends COUNT records "js-committed-<i>" and the offset OFFSET of partition
 * 0 of TOPIC for GROUP (sendOffsets), then commits; the second sends COUNT
 * records "js-aborted-<i>" and aborts. Prints {committed, aborted}. */
async function transactions(bootstrap, topic, transactionalId, count, group, offset) {
  const kafka = client(bootstrap);
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  await withTimeout(producer.connect(), 'connect');
  try {
    const messages = (prefix) =>
      Array.from({ length: count }, (_, i) => ({ key: String(i), value: `${prefix}-${i}` }));
    const first = await withTimeout(producer.transaction(), 'transaction');
    await withTimeout(first.send({ topic, messages: messages('js-committed') }), 'send');
    await withTimeout(
      first.sendOffsets({
        consumerGroupId: group,
        topics: [{ topic, partitions: [{ partition: 0, offset: String(offset) }] }],
      }),
      'sendOffsets'
    );
    await withTimeout(first.commit(), 'commit');
    const second = await withTimeout(producer.transaction(), 'transaction');
    await withTimeout(second.send({ topic, messages: messages('js-aborted') }), 'send');
    await withTimeout(second.abort(), 'abort');
    emit({ committed: count, aborted: count });
  } finally {
    await producer.disconnect();
  }
}

const commands = {
  transactions: (args) =>
    transactions(args[0], args[1], args[2], Number(args[3]), args[4], Number(args[5])),
  produce: (args) => produce(args[0], args[1], args[2], args[3], args[4]),
  consume: (args) => consume(args[0], args[1], Number(args[2]), args[3]),
  admin: (args) => admin(args[0]),
  handover: (args) => handover(args[0], args[1], Number(args[2]), Number(args[3]), args[4]),
  'group-admin': (args) => groupAdmin(args[0], args[1], Number(args[2]), Number(args[3]), args[4]),
  'delete-group': (args) => deleteGroup(args[0], args[1]),
  'live-group': (args) => liveGroup(args[0], args[1], Number(args[2]), args[3]),
  'offsets-by-time': (args) => offsetsByTime(args[0], args[1], args[2]),
  cluster: (args) => clusterView(args[0], args[1], Number(args[2]), args[3], Number(args[4] || 3)),
  'commit-through': (args) => commitThrough(args[0], args[1], Number(args[2]), args[3]),
};

const [command, ...args] = process.argv.slice(2);
if (!commands[command]) {
  console.error(`FAILED unknown command ${command}`);
  process.exit(2);
}
commands[command](args).then(
  () => process.exit(0),
  (error) => {
    console.error('FAILED', error && error.stack ? error.stack : error);
    // An aggregate (KafkaJS's per-topic errors) names each error's type.
    for (const inner of (error && error.errors) || []) {
      console.error('  caused by', inner.topic || '', inner.type || '', inner.message);
    }
    process.exit(1);
  }
);
