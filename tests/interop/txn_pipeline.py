"""The consume-transform-produce pipeline of the transaction tests and
its checks, shared by test_transactions.py and test_chaos.py."""
import os
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

import clusterwire as cw


def transactional_producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    config = {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "linger.ms": 5,
    }
    config.update(extra)
    producer = Producer(config)
    producer.init_transactions(30)
    return producer


def read_all(bootstrap: str, topic: str, isolation: str, expected: int, partitions: int = 1,
             timeout_s: float = 20.0, settle_s: float = 1.0) -> list:
    """Every record of `topic` from the start at `isolation`: waits for
    `expected` records, then `settle_s` more for any surplus."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "auto.offset.reset": "earliest",
    })
    consumer.assign([TopicPartition(topic, partition, 0) for partition in range(partitions)])
    values = []
    deadline = time.monotonic() + timeout_s
    settle_until = None
    while time.monotonic() < deadline:
        if len(values) >= expected:
            settle_until = settle_until or time.monotonic() + settle_s
            if time.monotonic() >= settle_until:
                break
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise KafkaException(message.error())
        values.append(message.value().decode())
    consumer.close()
    return values


def check_exactly_once(bootstrap: str, source: str, sink: str, group: str, total: int,
                       partitions: int) -> None:
    outputs = read_all(bootstrap, sink, "read_committed", total, partitions)
    expected = sorted(f"out-{i}" for i in range(total))
    assert sorted(outputs) == expected, (
        f"{len(outputs)} outputs for {total} inputs; duplicates: "
        f"{len(outputs) - len(set(outputs))}"
    )
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committed = reader.committed([TopicPartition(source, p) for p in range(partitions)], 10)
    reader.close()
    ends = {}
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4()}"})
    for partition in range(partitions):
        ends[partition] = probe.get_watermark_offsets(TopicPartition(source, partition), 10)[1]
    probe.close()
    assert {tp.partition: tp.offset for tp in committed} == ends


def fill_source(bootstrap: str, topic: str, total: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index in range(total):
        producer.produce(topic, key=str(index), value=str(index), partition=index % partitions)
    assert producer.flush(30) == 0


def transaction_partition(transactional_id: str, partitions: int) -> int:
    """Kafka's (and Strom's) partition of `__transaction_state` for an id."""
    hashed = cw.java_string_hash(transactional_id)
    return (0 if hashed == -(1 << 31) else abs(hashed)) % partitions


class ResilientPipeline:
    """The pipeline of `run_pipeline`, which survives broker failures as
    librdkafka's documentation says an application must: a retriable
    commit is retried, an abortable error aborts and rewinds the input to
    the committed offsets, and a fatal one (the producer was fenced)
    recreates the producer and the consumer, which resume from the
    committed offsets."""

    def __init__(self, bootstrap, source, sink, group, transactional_id):
        self.bootstrap, self.source, self.sink = bootstrap, source, sink
        self.group, self.transactional_id = group, transactional_id
        self.counts = {"committed": 0, "aborted": 0, "recreated": 0, "retried": 0}
        self.errors = []
        self.consumer = self.producer = None
        self.open()

    def open(self):
        self.consumer = Consumer({
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        })
        self.consumer.subscribe([self.source])
        extra = {"transaction.timeout.ms": 10000}
        if os.environ.get("STROM_TXN_DEBUG"):
            extra["debug"] = os.environ["STROM_TXN_DEBUG"]
        self.producer = transactional_producer(self.bootstrap, self.transactional_id, **extra)

    def close(self):
        for closing in (lambda: self.consumer.close(),):
            try:
                closing()
            except KafkaException:
                pass

    def rewind(self):
        assignment = self.consumer.assignment()
        if assignment:
            for committed in self.consumer.committed(assignment, 10):
                self.consumer.seek(TopicPartition(committed.topic, committed.partition,
                                                  max(committed.offset, 0)))

    def step(self) -> None:
        messages = [m for m in self.consumer.consume(25, 0.5) if not m.error()]
        if not messages:
            return
        try:
            self.producer.begin_transaction()
            for message in messages:
                self.producer.produce(self.sink, key=message.key(),
                                      value=b"out-" + message.value(),
                                      partition=message.partition())
            positions = self.consumer.position(self.consumer.assignment())
            self.producer.send_offsets_to_transaction(
                positions, self.consumer.consumer_group_metadata(), 30)
            self.commit()
        except KafkaException as raised:
            self.recover(raised.args[0])

    def commit(self):
        for _ in range(10):
            try:
                self.producer.commit_transaction(30)
                self.counts["committed"] += 1
                return
            except KafkaException as raised:
                if not raised.args[0].retriable():
                    raise
                self.counts["retried"] += 1
                self.errors.append(str(raised.args[0]))
        raise AssertionError(f"commit still failing after 10 tries: {self.errors[-3:]}")

    def recover(self, error):
        self.errors.append(str(error))
        if error.txn_requires_abort():
            self.producer.abort_transaction(30)
            self.counts["aborted"] += 1
            self.rewind()
        else:
            self.counts["recreated"] += 1
            self.close()
            self.open()


def caught_up(bootstrap: str, source: str, group: str, partitions: int) -> bool:
    """Whether the group's committed offsets reached the source's ends."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committed = reader.committed([TopicPartition(source, p) for p in range(partitions)], 10)
        ends = [reader.get_watermark_offsets(TopicPartition(source, p), 10)[1]
                for p in range(partitions)]
    except KafkaException:
        return False
    finally:
        reader.close()
    return [tp.offset for tp in committed] == ends
