"""Round trips through a Strom broker with two independent clients: each
consumes what the other produced, checked record by record."""
import ctypes
import mmap
import os
import time

import pytest

from datapath import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    assert_same,
    sample_messages,
    consume_confluent,
    consume_kafka_python,
    confluent_producer,
    create_topic,
    produce_confluent,
    produce_kafka_python,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def produce_all(producer, topic: str, records) -> None:
    """Sends (key, value) pairs to partition 0 in order, waiting whenever
    the client's queue is full, and waits for every acknowledgement."""
    for index, (key, value) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value, key=key, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        if index % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


@pytest.mark.timeout(90)
@pytest.mark.parametrize("codec", CODECS)
def test_each_client_reads_what_the_other_wrote(broker, codec):
    base_timestamp_ms = int(time.time() * 1000) - 3_600_000
    messages = sample_messages(300, base_timestamp_ms)

    create_topic(broker.bootstrap, "from-librdkafka")
    producer = confluent_producer(broker.bootstrap, **{"compression.type": codec})
    offsets = produce_confluent(producer, "from-librdkafka", messages)
    assert offsets == list(range(len(messages)))
    reads = consume_kafka_python(broker.bootstrap, "from-librdkafka", len(messages))
    assert_same(messages, reads, offsets)

    create_topic(broker.bootstrap, "from-kafka-python")
    compression = None if codec == "none" else codec
    offsets = produce_kafka_python(
        broker.bootstrap, "from-kafka-python", messages, compression_type=compression
    )
    assert offsets == list(range(len(messages)))
    reads = consume_confluent(broker.bootstrap, "from-kafka-python", len(messages))
    assert_same(messages, reads, offsets)


@pytest.mark.timeout(90)
def test_a_900_kib_record_round_trips_with_both_clients(broker):
    create_topic(broker.bootstrap, "large")
    big = bytes(range(256)) * (900 * 1024 // 256)
    assert len(big) == 900 * 1024
    timestamp_ms = int(time.time() * 1000)
    messages = [(b"big-1", big, [], timestamp_ms), (b"small", b"x", [], timestamp_ms)]
    producer = confluent_producer(broker.bootstrap, **{"message.max.bytes": 2_000_000})
    offsets = produce_confluent(producer, "large", messages)
    offsets += produce_kafka_python(
        broker.bootstrap, "large", [(b"big-2", big[::-1], [], timestamp_ms)],
        max_request_size=2_000_000,
    )
    expected = messages + [(b"big-2", big[::-1], [], timestamp_ms)]
    assert offsets == [0, 1, 2]
    assert_same(expected, consume_confluent(broker.bootstrap, "large", 3), offsets)
    assert_same(expected, consume_kafka_python(broker.bootstrap, "large", 3), offsets)
    # KIP-74: a batch larger than the fetch limits still comes back whole.
    small_fetches = consume_confluent(
        broker.bootstrap, "large", 3,
        **{"max.partition.fetch.bytes": 65536, "fetch.max.bytes": 100_000, "message.max.bytes": 100_000},
    )
    assert_same(expected, small_fetches, offsets)
    small_fetches = consume_kafka_python(
        broker.bootstrap, "large", 3, max_partition_fetch_bytes=65536, fetch_max_bytes=100_000
    )
    assert_same(expected, small_fetches, offsets)


@pytest.mark.timeout(120)
def test_100000_records_come_back_in_order(broker):
    create_topic(broker.bootstrap, "many")
    count = 100_000
    producer = confluent_producer(
        broker.bootstrap, **{"linger.ms": 20, "compression.type": "lz4", "batch.num.messages": 5000}
    )
    produce_all(producer, "many", ((None, f"{index:06d}".encode()) for index in range(count)))
    for consume in (consume_confluent, consume_kafka_python):
        reads = consume(broker.bootstrap, "many", count, timeout_s=60)
        assert len(reads) == count, consume.__name__
        for index, read in enumerate(reads):
            assert read.offset == index, consume.__name__
            assert read.value == f"{index:06d}".encode(), consume.__name__


@pytest.mark.timeout(60)
def test_log_append_time_topic_stamps_broker_time(broker):
    create_topic(broker.bootstrap, "append-time", config={"message.timestamp.type": "LogAppendTime"})
    client_timestamp_ms = 1_000_000_000_000  # 2001, far from now
    messages = [(f"k{i}".encode(), f"v{i}".encode(), [], client_timestamp_ms) for i in range(20)]
    before_ms = int(time.time() * 1000)
    produce_confluent(confluent_producer(broker.bootstrap), "append-time", messages[:10])
    produce_kafka_python(broker.bootstrap, "append-time", messages[10:])
    after_ms = int(time.time() * 1000)
    for reads in (
        consume_confluent(broker.bootstrap, "append-time", 20),
        consume_kafka_python(broker.bootstrap, "append-time", 20),
    ):
        assert [read.offset for read in reads] == list(range(20))
        for read, (key, value, _, _) in zip(reads, messages):
            assert (read.key, read.value) == (key, value)
            assert read.timestamp_type == LOG_APPEND_TIME
            # 1 s slack for clock granularity between the test and the broker
            assert before_ms - 1000 <= read.timestamp_ms <= after_ms + 1000


@pytest.mark.timeout(30)
def test_produce_answers_carry_the_log_append_time_only_for_such_topics(broker):
    import rawwire as wire

    create_topic(broker.bootstrap, "stamped", config={"message.timestamp.type": "LogAppendTime"})
    create_topic(broker.bootstrap, "unstamped")
    client_timestamp_ms = 1_000_000_000_000
    with wire.Connection(broker.port) as connection:
        for topic in ("stamped", "unstamped"):
            before_ms = int(time.time() * 1000)
            batch = wire.record_batch([(b"k", b"v"), (b"k", b"w")], base_timestamp_ms=client_timestamp_ms)
            (result,) = wire.decode_produce_v3(
                connection.call(wire.API_PRODUCE, 3, wire.produce_v3_body(topic, 0, batch))
            )
            after_ms = int(time.time() * 1000)
            _, _, error_code, base_offset, log_append_time_ms = result
            assert (error_code, base_offset) == (0, 0)
            if topic == "stamped":
                assert before_ms - 1000 <= log_append_time_ms <= after_ms + 1000
            else:
                assert log_append_time_ms == -1
    reads = consume_confluent(broker.bootstrap, "unstamped", 2)
    assert [(read.timestamp_type, read.timestamp_ms) for read in reads] == [
        (CREATE_TIME, client_timestamp_ms)
    ] * 2
    reads = consume_kafka_python(broker.bootstrap, "stamped", 2)
    assert [read.timestamp_type for read in reads] == [LOG_APPEND_TIME] * 2
    assert reads[0].timestamp_ms == reads[1].timestamp_ms != client_timestamp_ms


# kafka-python pinned to older broker eras speaks older request versions
# (Produce v3+, Fetch v4+, ListOffsets v1+): every version the broker serves
# must encode its answers.
KAFKA_ERAS = [(0, 11), (1, 0), (2, 0), (2, 1), (2, 5), (3, 0), (4, 0)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("era", KAFKA_ERAS, ids=lambda era: "kafka-%d.%d" % era)
def test_kafka_python_pinned_to_older_protocol_versions(broker, era):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    create_topic(broker.bootstrap, "eras")
    base_timestamp_ms = int(time.time() * 1000) - 60_000
    messages = [
        (f"k{i}".encode(), f"v{i}".encode(), [("h", str(i).encode())], base_timestamp_ms + i)
        for i in range(5)
    ]
    offsets = produce_kafka_python(
        broker.bootstrap, "eras", messages, api_version=era, compression_type="gzip"
    )
    assert offsets == list(range(5))
    assert_same(messages, consume_kafka_python(broker.bootstrap, "eras", 5, api_version=era), offsets)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=era)
    try:
        partition = KpTopicPartition("eras", 0)
        assert consumer.beginning_offsets([partition]) == {partition: 0}
        assert consumer.end_offsets([partition]) == {partition: 5}
        found = consumer.offsets_for_times({partition: base_timestamp_ms + 2})[partition]
        assert (found.offset, found.timestamp) == (2, base_timestamp_ms + 2)
    finally:
        consumer.close()


@pytest.mark.timeout(90)
def test_one_consumer_reads_several_partitions_under_small_fetch_limits(broker):
    """The response-wide fetch.max.bytes budget is shared across partitions,
    and every partition is read to its end, in order."""
    create_topic(broker.bootstrap, "spread", partitions=3)
    per_partition = 2000
    producer = confluent_producer(broker.bootstrap, **{"linger.ms": 10})
    for partition in range(3):
        messages = [(None, f"p{partition}-{i:05d}".encode(), [], None) for i in range(per_partition)]
        assert produce_confluent(producer, "spread", messages, partition=partition) == list(range(per_partition))

    from confluent_kafka import Consumer, TopicPartition

    from datapath import plain_consumer_config

    consumer = Consumer({
        **plain_consumer_config(broker.bootstrap),
        "fetch.max.bytes": 20_000,
        "max.partition.fetch.bytes": 8_000,
        "message.max.bytes": 20_000,
    })
    seen = {partition: [] for partition in range(3)}
    try:
        consumer.assign([TopicPartition("spread", partition, 0) for partition in range(3)])
        deadline = time.monotonic() + 60
        while sum(map(len, seen.values())) < 3 * per_partition and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                assert message.error() is None, message.error()
                seen[message.partition()].append((message.offset(), message.value()))
    finally:
        consumer.close()
    for partition, reads in seen.items():
        assert reads == [(i, f"p{partition}-{i:05d}".encode()) for i in range(per_partition)]

    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        fetch_max_bytes=20_000,
        max_partition_fetch_bytes=8_000,
    )
    seen = {partition: [] for partition in range(3)}
    try:
        partitions = [KpTopicPartition("spread", partition) for partition in range(3)]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 60
        while sum(map(len, seen.values())) < 3 * per_partition and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                seen[tp.partition].extend((record.offset, record.value) for record in records)
    finally:
        consumer.close()
    for partition, reads in seen.items():
        assert reads == [(i, f"p{partition}-{i:05d}".encode()) for i in range(per_partition)]


def cached_fraction(path) -> float:
    """The share of the file's pages in the page cache (`mincore` on a
    mapping that is never read, so it caches nothing itself)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    size = os.path.getsize(path)
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    residency = ctypes.create_string_buffer(pages)
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert address not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        try:
            assert libc.mincore(address, size, residency) == 0, os.strerror(ctypes.get_errno())
        finally:
            libc.munmap(address, size)
    finally:
        os.close(fd)
    return sum(byte & 1 for byte in residency.raw[:pages]) / pages


@pytest.mark.timeout(180)
def test_records_dropped_from_the_page_cache_come_back_from_disk(broker_factory):
    # Drop-behind with nothing retained: every range is written out and
    # dropped from the page cache soon after it is appended, so the reads
    # below come from the disk (docs/operations.md, the strom.* keys).
    broker = broker_factory(
        strom_log_writeback_interval_bytes=65536,
        strom_log_page_cache_retain_bytes=0,
    )
    create_topic(broker.bootstrap, "dropped", config={"segment.bytes": str(1 << 20)})
    count = 20_000

    def value(index):
        return f"{index:08d}".encode() * 125  # 1,000 bytes

    producer = confluent_producer(broker.bootstrap, **{"linger.ms": 5})
    produce_all(producer, "dropped", ((str(index).encode(), value(index)) for index in range(count)))
    # The broker's first segment (1 MiB, long behind the end) leaves the
    # page cache; without the hint the kernel would keep all of it.
    first_segment = broker.data_dir / "dropped-0" / ("0" * 20 + ".log")
    deadline = time.monotonic() + 10
    while cached_fraction(first_segment) > 0.1:
        assert time.monotonic() < deadline, f"{cached_fraction(first_segment):.2f} still cached"
        time.sleep(0.1)

    def check(reads, who):
        assert len(reads) == count, who
        for index, read in enumerate(reads):
            assert read.offset == index, who
            assert read.key == str(index).encode(), who
            assert read.value == value(index), who

    check(consume_confluent(broker.bootstrap, "dropped", count, timeout_s=60), "confluent")
    check(consume_kafka_python(broker.bootstrap, "dropped", count, timeout_s=60), "kafka-python")
    broker.restart()
    check(consume_confluent(broker.bootstrap, "dropped", count, timeout_s=60), "after restart")
