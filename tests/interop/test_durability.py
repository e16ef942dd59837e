"""Durability: acknowledged records survive kill -9 (with an fsync per
append), and a SIGTERM restart keeps everything and shuts down cleanly."""
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from datapath import (
    plain_consumer_config,
    consume_confluent,
    consume_kafka_python,
    confluent_producer,
    create_topic,
    produce_confluent,
)

FSYNC_EVERY_APPEND = {"log.flush.interval.messages": 1}


def watermarks(bootstrap: str, topic: str):
    consumer = Consumer(plain_consumer_config(bootstrap))
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        consumer.close()


@pytest.mark.timeout(120)
def test_kill_9_mid_stream_loses_no_acknowledged_record(broker_factory):
    broker = broker_factory(**FSYNC_EVERY_APPEND)
    create_topic(broker.bootstrap, "durable")
    acked = {}  # offset -> value
    failed = []

    def on_delivery(error, message):
        if error is None:
            acked[message.offset()] = message.value()
        else:
            failed.append(error)

    producer = confluent_producer(
        broker.bootstrap,
        **{"linger.ms": 1, "message.timeout.ms": 60000, "retry.backoff.ms": 100},
    )
    sent = 0
    killed_at_sent = None
    deadline = time.monotonic() + 60
    # Produce continuously (at most 500 unacknowledged); kill the broker once
    # 2,000 records are acked, while more are in flight, then keep producing
    # 1,000 more into the restarted broker.
    while time.monotonic() < deadline:
        if killed_at_sent is not None and sent >= killed_at_sent + 1000:
            break
        if sent - len(acked) - len(failed) < 500:
            try:
                producer.produce("durable", f"record-{sent:05d}".encode(), partition=0, on_delivery=on_delivery)
                sent += 1
            except BufferError:
                pass
            producer.poll(0)
        else:
            producer.poll(0.01)
        # Kill only while some records are unacknowledged (a fast broker can
        # have acked everything sent at the moment the 2,000th ack arrives).
        if killed_at_sent is None and len(acked) >= 2000 and sent > len(acked) + len(failed):
            in_flight_at_kill = sent - len(acked)
            broker.kill()
            acked_at_kill = dict(acked)
            killed_at_sent = sent
            broker.start()
    killed = killed_at_sent is not None
    assert killed, f"only {len(acked)} records acked in time"
    assert in_flight_at_kill > 0, "the kill did not land mid-stream"
    assert producer.flush(60) == 0
    assert not failed, failed[:3]

    low, high = watermarks(broker.bootstrap, "durable")
    assert low == 0
    assert high >= len(acked_at_kill)
    reads = consume_confluent(broker.bootstrap, "durable", high, timeout_s=60)
    stored = {read.offset: read.value for read in reads}
    assert len(stored) == high
    for offset, value in acked.items():
        assert stored.get(offset) == value, f"acknowledged offset {offset} lost or changed"
    # What was acked before the crash is a prefix of the log, without gaps.
    assert sorted(acked_at_kill) == list(range(len(acked_at_kill)))


@pytest.mark.timeout(90)
def test_sigterm_restart_keeps_everything_and_shuts_down_cleanly(broker_factory):
    broker = broker_factory(**FSYNC_EVERY_APPEND)
    create_topic(broker.bootstrap, "kept", partitions=2)
    messages = [(f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())], None) for i in range(500)]
    produce_confluent(confluent_producer(broker.bootstrap), "kept", messages, partition=0)
    produce_confluent(confluent_producer(broker.bootstrap), "kept", messages[:100], partition=1)
    before = consume_confluent(broker.bootstrap, "kept", 500)

    assert broker.stop() == 0
    assert "Strom broker stopped cleanly" in broker.log_text()
    assert (Path(broker.data_dir) / ".kafka_cleanshutdown").exists()

    broker.start()
    assert watermarks(broker.bootstrap, "kept") == (0, 500)
    after = consume_kafka_python(broker.bootstrap, "kept", 500)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp_ms) for r in after] == [
        (r.offset, r.key, r.value, r.headers, r.timestamp_ms) for r in before
    ]
    assert len(consume_confluent(broker.bootstrap, "kept", 100, partition=1)) == 100
    # The log keeps appending where it left off.
    offsets = produce_confluent(confluent_producer(broker.bootstrap), "kept", messages[:5])
    assert offsets == [500, 501, 502, 503, 504]


@pytest.mark.timeout(90)
def test_a_torn_tail_after_kill_9_is_cut_off_and_appends_continue(broker_factory):
    broker = broker_factory(**FSYNC_EVERY_APPEND)
    create_topic(broker.bootstrap, "torn")
    base_ms = int(time.time() * 1000) - 100_000
    messages = [(None, f"v{i}".encode(), [], base_ms + i * 10) for i in range(300)]
    offsets = produce_confluent(confluent_producer(broker.bootstrap), "torn", messages)
    assert offsets == list(range(300))
    broker.kill()
    # A crash in the middle of writing a batch: half a batch header at the
    # end of the active segment.
    (segment,) = sorted((Path(broker.data_dir) / "torn-0").glob("*.log"))
    size_before = segment.stat().st_size
    with open(segment, "ab") as log:
        log.write(struct.pack(">qi", 300, 4000) + b"\xde\xad\xbe\xef" * 5)
    broker.start()
    assert watermarks(broker.bootstrap, "torn") == (0, 300)
    assert segment.stat().st_size == size_before
    # The time index was rebuilt: lookups by time still find exact records.
    consumer = Consumer(plain_consumer_config(broker.bootstrap))
    try:
        for query, expected in ((base_ms + 1505, 151), (base_ms, 0), (base_ms + 2990, 299), (base_ms + 3000, -1)):
            (found,) = consumer.offsets_for_times([TopicPartition("torn", 0, query)], timeout=10)
            assert found.offset == expected, f"{query - base_ms} ms after base"
    finally:
        consumer.close()
    more = produce_confluent(confluent_producer(broker.bootstrap), "torn", messages[:20])
    assert more == list(range(300, 320))
    reads = consume_kafka_python(broker.bootstrap, "torn", 320)
    assert [read.value for read in reads] == [m[1] for m in messages] + [m[1] for m in messages[:20]]
    assert [read.offset for read in reads] == list(range(320))
