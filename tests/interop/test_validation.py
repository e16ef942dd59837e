"""Kafka's validation of produced batches, with clients written by others.

What a client can send is sent by the client: keyless records to a
compacted topic (refused with INVALID_RECORD, each refused record named in
the Produce response's per-record errors, KIP-467) and timestamps out of
`message.timestamp.before.max.ms` / `after.max.ms` (INVALID_TIMESTAMP).
What no client sends (a wrong record count, offset deltas out of order, a
cut varint inside a compressed batch) is built by hand (rawwire.py). After
every refusal the log end offset is unchanged: nothing was stored.

Then every codec goes through a topic whose `compression.type` names
another: the stored batches are in the topic's codec and librdkafka,
kafka-python and KafkaJS read the records back as sent.
"""
import gzip
import struct
import time

import pytest
from confluent_kafka import KafkaError

import rawwire as wire
from datapath import (
    assert_same,
    confluent_producer,
    consume_confluent,
    consume_kafka_python,
    create_topic,
    produce_confluent,
    sample_messages,
)
from test_kafkajs import kafkajs, reads_of

NONE = 0
CORRUPT_MESSAGE = 2
INVALID_TIMESTAMP = 32
INVALID_RECORD = 87
LATEST = -1
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def log_end_offset(port: int, topic: str) -> int:
    with wire.Connection(port) as connection:
        (result,) = wire.decode_list_offsets_v1(
            connection.call(wire.API_LIST_OFFSETS, 1, wire.list_offsets_v1_body(topic, 0, LATEST))
        )
        assert result[2] == NONE, result
        return result[4]


def deliveries(producer, topic: str, messages) -> list:
    """Produces (key, value, timestamp_ms) with librdkafka; returns each
    message's (error or None, offset)."""
    reports = [None] * len(messages)

    def on_delivery(index):
        def callback(error, message):
            reports[index] = (error, message.offset())

        return callback

    for index, (key, value, timestamp_ms) in enumerate(messages):
        kwargs = {"partition": 0, "on_delivery": on_delivery(index)}
        if key is not None:
            kwargs["key"] = key
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        producer.produce(topic, value, **kwargs)
    assert producer.flush(30) == 0, "messages not delivered or failed"
    return reports


# --- refusals a client can send --------------------------------------------


@pytest.mark.timeout(120)
def test_librdkafka_learns_which_keyless_records_a_compacted_topic_refused(broker):
    topic = "compacted-librdkafka"
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    # One batch: keyed, keyless, keyed, keyless.
    producer = confluent_producer(broker.bootstrap, **{"linger.ms": 200, "retries": 0})
    messages = [(b"k0", b"v0", None), (None, b"v1", None), (b"k2", b"v2", None), (None, b"v3", None)]
    reports = deliveries(producer, topic, messages)
    codes = [None if error is None else error.code() for error, _ in reports]
    # The refused records (KIP-467 batch indexes 1 and 3) fail with
    # INVALID_RECORD; librdkafka fails the others of the batch with its own
    # "invalid record in the same batch" code. Without per-record errors it
    # would give every message the partition's INVALID_RECORD.
    assert codes == [
        KafkaError._INVALID_DIFFERENT_RECORD,
        KafkaError.INVALID_RECORD,
        KafkaError._INVALID_DIFFERENT_RECORD,
        KafkaError.INVALID_RECORD,
    ], reports
    assert log_end_offset(broker.port, topic) == 0
    # Keyed records alone are stored.
    stored = deliveries(producer, topic, [(b"k", b"v", None)] * 3)
    assert [offset for _, offset in stored] == [0, 1, 2], stored
    assert all(error is None for error, _ in stored), stored


@pytest.mark.timeout(120)
def test_kafka_python_keyless_records_to_a_compacted_topic_fail(broker):
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError, KafkaError

    topic = "compacted-kafka-python"
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, retries=0, linger_ms=100, enable_idempotence=False
    )
    try:
        futures = [producer.send(topic, value=b"v", key=key, partition=0) for key in (b"k", None)]
        producer.flush(timeout=30)
        # kafka-python reads the per-record errors (KIP-467): the keyless
        # record fails with INVALID_RECORD and its message, the keyed one
        # of the same batch with a generic error.
        with pytest.raises(InvalidRecordError) as refused:
            futures[1].get(timeout=30)
        assert "Compacted topic cannot accept message without key" in str(refused.value)
        with pytest.raises(KafkaError) as other:
            futures[0].get(timeout=30)
        assert not isinstance(other.value, InvalidRecordError), other.value
    finally:
        producer.close(timeout=10)
    assert log_end_offset(broker.port, topic) == 0


@pytest.mark.timeout(120)
def test_timestamps_out_of_bounds_are_refused_for_both_clients(broker):
    from kafka import KafkaProducer
    from kafka.errors import InvalidTimestampError

    topic = "bounded-time"
    create_topic(
        broker.bootstrap,
        topic,
        config={
            "message.timestamp.before.max.ms": "3600000",
            "message.timestamp.after.max.ms": "60000",
        },
    )
    now_ms = int(time.time() * 1000)
    producer = confluent_producer(broker.bootstrap, **{"retries": 0})
    for timestamp_ms in (now_ms - 7_200_000, now_ms + 600_000):
        [(error, _)] = deliveries(producer, topic, [(b"k", b"v", timestamp_ms)])
        assert error is not None and error.code() == KafkaError.INVALID_TIMESTAMP, error
    python_producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, retries=0, enable_idempotence=False
    )
    try:
        future = python_producer.send(topic, value=b"v", partition=0, timestamp_ms=now_ms - 7_200_000)
        with pytest.raises(InvalidTimestampError):
            future.get(timeout=30)
    finally:
        python_producer.close(timeout=10)
    assert log_end_offset(broker.port, topic) == 0
    # Within the bounds: stored.
    [(error, offset)] = deliveries(producer, topic, [(b"k", b"v", now_ms - 60_000)])
    assert (error, offset) == (None, 0)


# --- refusals no client sends, built by hand -------------------------------


def hand_built(encoded_records: bytes, record_count: int, last_offset_delta: int,
               codec: int = 0) -> bytes:
    """A batch around already-encoded records, compressed by `codec` (0 or
    gzip), with a correct CRC."""
    payload = gzip.compress(encoded_records) if codec == 1 else encoded_records
    now_ms = int(time.time() * 1000)
    after_crc = struct.pack(
        ">hiqqqhii", codec, last_offset_delta, now_ms, now_ms, -1, -1, -1, record_count
    ) + payload
    batch_length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", 0, batch_length, -1, 2, wire.crc32c(after_crc)) + after_crc


def produce_raw(port: int, topic: str, batch: bytes) -> int:
    with wire.Connection(port) as connection:
        (result,) = wire.decode_produce_v3(
            connection.call(wire.API_PRODUCE, 3, wire.produce_v3_body(topic, 0, batch))
        )
        return result[2]


def records(count: int) -> bytes:
    return b"".join(wire.record(index, b"k", b"v") for index in range(count))


CUT_VARINT = records(1) + wire.zigzag_varint(40) + b"\x00\x02"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "case, batch, code",
    [
        ("record count above the offset range", lambda: hand_built(records(3), 4, 2), INVALID_RECORD),
        ("fewer records than declared", lambda: hand_built(records(2), 3, 2), INVALID_RECORD),
        ("gzip: fewer records than declared", lambda: hand_built(records(2), 3, 2, 1), INVALID_RECORD),
        (
            "offset deltas out of order",
            lambda: hand_built(wire.record(0, b"a", b"v") + wire.record(2, b"b", b"v") + wire.record(1, b"c", b"v"), 3, 2),
            INVALID_RECORD,
        ),
        (
            "gzip: offset deltas out of order",
            lambda: hand_built(wire.record(1, b"a", b"v") + wire.record(0, b"b", b"v"), 2, 1, 1),
            INVALID_RECORD,
        ),
        ("gzip: a cut varint in the second record", lambda: hand_built(CUT_VARINT, 2, 1, 1), INVALID_RECORD),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_hand_built_batches_are_refused_and_nothing_is_stored(broker_factory, case, batch, code):
    broker = broker_factory()
    topic = "hand-built"
    create_topic(broker.bootstrap, topic)
    assert produce_raw(broker.port, topic, wire.record_batch([(b"k", b"v")] * 2)) == NONE
    assert produce_raw(broker.port, topic, batch()) == code, case
    assert log_end_offset(broker.port, topic) == 2, case


@pytest.mark.timeout(120)
def test_gzip_that_does_not_decompress_is_corrupt(broker):
    topic = "not-gzip"
    create_topic(broker.bootstrap, topic)
    now_ms = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", 1, 1, now_ms, now_ms, -1, -1, -1, 2) + b"\x1f\x8b" + b"\x5a" * 40
    batch = struct.pack(">qiibI", 0, 9 + len(after_crc), -1, 2, wire.crc32c(after_crc)) + after_crc
    assert produce_raw(broker.port, topic, batch) == CORRUPT_MESSAGE
    assert log_end_offset(broker.port, topic) == 0


# --- compression.type ------------------------------------------------------


def stored_codecs(port: int, topic: str) -> set:
    """The codec ids of the batches stored from offset 0 (raw fetch)."""
    with wire.Connection(port) as connection:
        (fetched,) = wire.decode_fetch_v4(
            connection.call(wire.API_FETCH, 4, wire.fetch_v4_body(topic, 0, 0))
        )
    assert fetched[2] == NONE, fetched
    data = fetched[4]
    codecs = set()
    position = 0
    while position + 61 <= len(data):
        (batch_length,) = struct.unpack_from(">i", data, position + 8)
        (attributes,) = struct.unpack_from(">h", data, position + 21)
        codecs.add(attributes & 0x07)
        position += 12 + batch_length
    return codecs


# (producer codec, topic compression.type): every codec is sent and every
# codec is stored. KafkaJS reads the topics stored in a codec it has
# (none, gzip, snappy; its lz4 and zstd plugins need native builds).
CONVERSIONS = [
    ("none", "gzip"),
    ("gzip", "snappy"),
    ("snappy", "uncompressed"),
    ("lz4", "gzip"),
    ("zstd", "uncompressed"),
    ("gzip", "lz4"),
    ("snappy", "zstd"),
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("producer_codec, topic_codec", CONVERSIONS)
def test_every_codec_is_stored_in_the_topics_codec_and_read_back(broker, producer_codec, topic_codec):
    topic = f"{producer_codec}-as-{topic_codec}"
    create_topic(broker.bootstrap, topic, config={"compression.type": topic_codec})
    messages = sample_messages(
        600, int(time.time() * 1000) - 3_600_000, longest_repeat=40, repeated_header=False
    )
    producer = confluent_producer(broker.bootstrap, **{"compression.type": producer_codec})
    assert produce_confluent(producer, topic, messages) == list(range(len(messages)))
    stored_id = CODEC_IDS["none" if topic_codec == "uncompressed" else topic_codec]
    assert stored_codecs(broker.port, topic) == {stored_id}
    offsets = list(range(len(messages)))
    assert_same(messages, consume_confluent(broker.bootstrap, topic, len(messages)), offsets)
    assert_same(messages, consume_kafka_python(broker.bootstrap, topic, len(messages)), offsets)
    if topic_codec in ("uncompressed", "gzip", "snappy"):
        documents = kafkajs("consume", broker.bootstrap, topic, len(messages), f"kafkajs-{topic}")
        assert_same(messages, reads_of(documents), offsets)
