"""ListOffsets (by time, earliest, latest), watermarks, and the long-poll
fetch, with both clients."""
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from datapath import plain_consumer_config, confluent_producer, create_topic, produce_confluent

COUNT = 10


def produce_timed(bootstrap: str, topic: str, codec: str = "none") -> int:
    """COUNT records with timestamps base, base+1 s, ...; returns base.
    They go out in one or few batches, so lookups must look inside them."""
    base_timestamp_ms = int(time.time() * 1000) - 600_000
    messages = [
        (None, f"v{i}".encode(), [], base_timestamp_ms + i * 1000) for i in range(COUNT)
    ]
    producer = confluent_producer(bootstrap, **{"linger.ms": 50, "compression.type": codec})
    assert produce_confluent(producer, topic, messages) == list(range(COUNT))
    return base_timestamp_ms


@pytest.mark.timeout(60)
def test_offsets_by_time_and_watermarks_with_librdkafka(broker):
    create_topic(broker.bootstrap, "timed")
    consumer = Consumer(plain_consumer_config(broker.bootstrap))
    try:
        assert consumer.get_watermark_offsets(TopicPartition("timed", 0), timeout=10, cached=False) == (0, 0)
        base = produce_timed(broker.bootstrap, "timed", codec="lz4")
        assert consumer.get_watermark_offsets(TopicPartition("timed", 0), timeout=10, cached=False) == (0, COUNT)
        queries = {
            base - 50_000: 0,  # before everything: the first record
            base: 0,
            base + 1: 1,  # first timestamp >= the query
            base + 3_500: 4,
            base + (COUNT - 1) * 1000: COUNT - 1,
            base + COUNT * 1000: -1,  # after everything: no offset (end)
        }
        # The special timestamps: -2 is the earliest offset, -1 the latest.
        queries[-2] = 0
        queries[-1] = COUNT
        for query, expected in queries.items():
            (found,) = consumer.offsets_for_times([TopicPartition("timed", 0, query)], timeout=10)
            assert found.error is None
            assert found.offset == expected, f"timestamp {query - base} ms after base"
    finally:
        consumer.close()


@pytest.mark.timeout(60)
def test_offsets_by_time_and_watermarks_with_kafka_python(broker):
    create_topic(broker.bootstrap, "timed")
    base = produce_timed(broker.bootstrap, "timed")
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        partition = KpTopicPartition("timed", 0)
        assert consumer.beginning_offsets([partition]) == {partition: 0}
        assert consumer.end_offsets([partition]) == {partition: COUNT}
        found = consumer.offsets_for_times({partition: base + 3_500})[partition]
        assert (found.offset, found.timestamp) == (4, base + 4_000)
        found = consumer.offsets_for_times({partition: base - 1})[partition]
        assert (found.offset, found.timestamp) == (0, base)
        assert consumer.offsets_for_times({partition: base + COUNT * 1000})[partition] is None
    finally:
        consumer.close()


def produce_later(bootstrap: str, topic: str, delay_s: float, produced_at: list) -> None:
    time.sleep(delay_s)
    producer = confluent_producer(bootstrap, **{"linger.ms": 0})
    produced_at.append(time.monotonic())
    producer.produce(topic, b"late", partition=0)
    assert producer.flush(10) == 0


@pytest.mark.timeout(60)
def test_long_poll_fetch_returns_when_data_arrives_librdkafka(broker):
    create_topic(broker.bootstrap, "long-poll")
    consumer = Consumer({
        **plain_consumer_config(broker.bootstrap),
        "fetch.wait.max.ms": 5000,
        "fetch.min.bytes": 1,
    })
    try:
        consumer.assign([TopicPartition("long-poll", 0, 0)])
        # Let the consumer settle into waiting fetches first.
        assert consumer.poll(1.0) is None
        produced_at = []
        thread = threading.Thread(
            target=produce_later, args=(broker.bootstrap, "long-poll", 1.0, produced_at)
        )
        thread.start()
        message = None
        deadline = time.monotonic() + 15
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.1)
        received_at = time.monotonic()
        thread.join()
        assert message is not None and message.error() is None
        assert message.value() == b"late"
        latency_s = received_at - produced_at[0]
        assert latency_s < 2.0, f"record arrived {latency_s:.2f}s after it was produced"
    finally:
        consumer.close()


@pytest.mark.timeout(60)
def test_long_poll_fetch_returns_when_data_arrives_kafka_python(broker):
    create_topic(broker.bootstrap, "long-poll")
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, fetch_max_wait_ms=5000, fetch_min_bytes=1
    )
    try:
        partition = KpTopicPartition("long-poll", 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        assert consumer.poll(timeout_ms=1000) == {}
        produced_at = []
        thread = threading.Thread(
            target=produce_later, args=(broker.bootstrap, "long-poll", 1.0, produced_at)
        )
        thread.start()
        records = []
        deadline = time.monotonic() + 15
        while not records and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=100).values():
                records.extend(batch)
        received_at = time.monotonic()
        thread.join()
        assert [record.value for record in records] == [b"late"]
        latency_s = received_at - produced_at[0]
        assert latency_s < 2.0, f"record arrived {latency_s:.2f}s after it was produced"
    finally:
        consumer.close()
