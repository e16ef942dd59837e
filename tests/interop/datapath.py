"""Helpers of the data-path tests: topics, and reading a partition back with
either client, record by record, without consumer groups (plain assignment).
"""
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

# Timestamp types as Kafka numbers them (CreateTime 0, LogAppendTime 1).
CREATE_TIME = 0
LOG_APPEND_TIME = 1


@dataclass
class Read:
    """One consumed record, in a client-neutral form."""

    offset: int
    key: bytes
    value: bytes
    headers: list
    timestamp_type: int
    timestamp_ms: int


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=10,
        request_timeout=10,
    )
    futures[name].result(timeout=15)
    wait_for_leader(bootstrap, name, partitions)


def wait_for_leader(bootstrap: str, name: str, partitions: int, timeout_s: float = 10.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        metadata = admin.list_topics(name, timeout=5)
        topic = metadata.topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions and all(
            p.leader >= 0 for p in topic.partitions.values()
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {name} has no leaders after {timeout_s}s")


def plain_consumer_config(bootstrap: str) -> dict:
    """A librdkafka consumer that only ever uses assign(): it needs a group
    id to be created, but never joins the group nor commits."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "strom-interop-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
    }


def confluent_producer(bootstrap: str, **extra) -> Producer:
    config = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    config.update(extra)
    return Producer(config)


def produce_confluent(producer: Producer, topic: str, messages, partition: int = 0) -> list:
    """Produces (key, value, headers, timestamp_ms) tuples; returns the
    delivered offsets in send order, failing on any delivery error."""
    reports = [None] * len(messages)

    def on_delivery(index):
        def callback(error, message):
            reports[index] = error if error is not None else message.offset()

        return callback

    for index, (key, value, headers, timestamp_ms) in enumerate(messages):
        kwargs = {"partition": partition, "on_delivery": on_delivery(index)}
        if key is not None:
            kwargs["key"] = key
        if headers:
            kwargs["headers"] = headers
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        while True:
            try:
                producer.produce(topic, value, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} messages not delivered"
    errors = [report for report in reports if not isinstance(report, int)]
    assert not errors, f"delivery errors: {errors[:3]}"
    return reports


def produce_kafka_python(bootstrap: str, topic: str, messages, partition: int = 0, **extra) -> list:
    from kafka import KafkaProducer

    config = {"acks": "all", "linger_ms": 5, "enable_idempotence": False}
    config.update(extra)
    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    try:
        futures = [
            producer.send(
                topic,
                value=value,
                key=key,
                headers=list(headers or []),
                partition=partition,
                timestamp_ms=timestamp_ms,
            )
            for key, value, headers, timestamp_ms in messages
        ]
        producer.flush(timeout=60)
        return [future.get(timeout=30).offset for future in futures]
    finally:
        producer.close(timeout=10)


def consume_confluent(bootstrap: str, topic: str, count: int, partition: int = 0,
                      start_offset: int = 0, timeout_s: float = 30.0, **extra) -> list:
    """Reads `count` records from `start_offset` by assignment (no group)."""
    config = plain_consumer_config(bootstrap)
    config.update(extra)
    consumer = Consumer(config)
    out = []
    try:
        consumer.assign([TopicPartition(topic, partition, start_offset)])
        deadline = time.monotonic() + timeout_s
        while len(out) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10000, timeout=0.5):
                if message.error():
                    raise KafkaException(message.error())
                timestamp_type, timestamp_ms = message.timestamp()
                out.append(
                    Read(
                        offset=message.offset(),
                        key=message.key(),
                        value=message.value(),
                        headers=list(message.headers() or []),
                        # librdkafka numbers them 1 (create) and 2 (append).
                        timestamp_type=timestamp_type - 1,
                        timestamp_ms=timestamp_ms,
                    )
                )
    finally:
        consumer.close()
    return out


def consume_kafka_python(bootstrap: str, topic: str, count: int, partition: int = 0,
                         start_offset: int = 0, timeout_s: float = 30.0, **extra) -> list:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        **extra,
    )
    out = []
    try:
        assigned = KpTopicPartition(topic, partition)
        consumer.assign([assigned])
        consumer.seek(assigned, start_offset)
        deadline = time.monotonic() + timeout_s
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for message in records:
                    out.append(
                        Read(
                            offset=message.offset,
                            key=message.key,
                            value=message.value,
                            headers=[(k, v) for k, v in (message.headers or [])],
                            timestamp_type=message.timestamp_type,
                            timestamp_ms=message.timestamp,
                        )
                    )
    finally:
        consumer.close()
    return out


def assert_same(messages, reads, offsets):
    """Checks reads against (key, value, headers, timestamp_ms) messages
    stored at `offsets`, record by record (CreateTime timestamps)."""
    assert len(reads) == len(messages), f"read {len(reads)} of {len(messages)}"
    for (key, value, headers, timestamp_ms), offset, read in zip(messages, offsets, reads):
        assert read.offset == offset
        assert read.key == key, f"offset {offset}"
        assert read.value == value, f"offset {offset}"
        assert read.headers == list(headers), f"offset {offset}"
        assert read.timestamp_type == CREATE_TIME, f"offset {offset}"
        assert read.timestamp_ms == timestamp_ms, f"offset {offset}"


def sample_messages(count: int, base_timestamp_ms: int, longest_repeat: int = 13,
                    repeated_header: bool = True):
    """Keys (some null), values (some null, some empty, the rest `value-N-`
    repeated up to `longest_repeat` times), headers on every third (with a
    repeated name unless `repeated_header` is false), and explicit
    timestamps one second apart."""
    messages = []
    for index in range(count):
        key = None if index % 5 == 0 else f"key-{index}".encode()
        if index % 7 == 3 and key is not None:
            value = None
        elif index % 7 == 5:
            value = b""
        else:
            value = (f"value-{index}-" * (1 + index % longest_repeat)).encode()
        headers = []
        if index % 3 == 0:
            headers = [("trace", f"t{index}".encode()), ("empty", b"")]
            if repeated_header:
                headers.append(("trace", b"dup"))
        messages.append((key, value, headers, base_timestamp_ms + index * 1000))
    return messages
