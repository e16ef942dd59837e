"""Bad input on raw sockets, and response ordering on one connection.

After each bad input the broker must still serve a new connection, and
what it stored before must be unchanged (watermarks and record bytes).
Requests are encoded by hand (see rawwire.py).
"""
import struct
import time

import pytest

import rawwire as wire
from datapath import create_topic

TOPIC = "guarded"
MAX_REQUEST_BYTES = 200_000
NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
UNSUPPORTED_VERSION = 35
EARLIEST = -2
LATEST = -1


@pytest.fixture
def guarded(broker_factory):
    """A broker with a small request limit and five stored records."""
    broker = broker_factory(**{"socket.request.max.bytes": MAX_REQUEST_BYTES})
    create_topic(broker.bootstrap, TOPIC)
    with wire.Connection(broker.port) as connection:
        batch = wire.record_batch([(f"k{i}".encode(), f"v{i}".encode()) for i in range(5)])
        (result,) = wire.decode_produce_v3(
            connection.call(wire.API_PRODUCE, 3, wire.produce_v3_body(TOPIC, 0, batch))
        )
        assert result[:4] == (TOPIC, 0, NONE, 0)
    broker.stored = snapshot(broker.port)
    assert broker.stored[:2] == (0, 5)
    return broker


def list_offset(connection, timestamp):
    (result,) = wire.decode_list_offsets_v1(
        connection.call(wire.API_LIST_OFFSETS, 1, wire.list_offsets_v1_body(TOPIC, 0, timestamp))
    )
    assert result[2] == NONE, result
    return result[4]


def snapshot(port):
    """(earliest, latest, record bytes from offset 0), on a new connection."""
    with wire.Connection(port) as connection:
        earliest = list_offset(connection, EARLIEST)
        latest = list_offset(connection, LATEST)
        (fetched,) = wire.decode_fetch_v4(
            connection.call(wire.API_FETCH, 4, wire.fetch_v4_body(TOPIC, 0, 0))
        )
        assert fetched[2] == NONE, fetched
        return earliest, latest, fetched[4]


def assert_still_serving_and_unchanged(broker):
    with wire.Connection(broker.port) as connection:
        error_code, versions = wire.decode_api_versions_v0(
            connection.call(wire.API_VERSIONS, 0, b"")
        )
        assert error_code == NONE and versions
    assert snapshot(broker.port) == broker.stored


@pytest.mark.timeout(30)
def test_a_frame_over_socket_request_max_bytes_closes_the_connection(guarded):
    with wire.Connection(guarded.port) as connection:
        connection.send_raw(struct.pack(">i", MAX_REQUEST_BYTES + 1) + b"\x00" * 1024)
        assert connection.closed_by_peer()
    assert_still_serving_and_unchanged(guarded)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # a huge "length"
        struct.pack(">i", -5) + b"\x01\x02\x03",  # a negative length
        struct.pack(">i", 3) + b"\xff\xff\xff",  # shorter than a header
        # A Produce v3 header followed by a body cut short mid-array.
        struct.pack(">i", 18) + struct.pack(">hhih", 0, 3, 1, 0) + struct.pack(">hhi", -1, -1, 5000),
        # A Produce v3 whose topic count claims two billion entries.
        struct.pack(">i", 22) + struct.pack(">hhih", 0, 3, 1, 0) + struct.pack(">hhii", -1, -1, 5000, 0x7FFFFFFF),
    ],
    ids=["http", "negative-length", "short-frame", "truncated-produce", "huge-array"],
)
def test_garbage_closes_the_connection(guarded, garbage):
    with wire.Connection(guarded.port) as connection:
        connection.send_raw(garbage)
        assert connection.closed_by_peer()
    assert_still_serving_and_unchanged(guarded)


@pytest.mark.timeout(30)
def test_an_unknown_api_key_closes_the_connection(guarded):
    with wire.Connection(guarded.port) as connection:
        connection.send(999, 0, 3, b"")
        assert connection.closed_by_peer()
    assert_still_serving_and_unchanged(guarded)


@pytest.mark.timeout(30)
def test_api_versions_at_a_too_high_version_gets_unsupported_version_and_the_list(guarded):
    with wire.Connection(guarded.port) as connection:
        connection.send(wire.API_VERSIONS, 99, 41, b"\x00" * 8)
        correlation_id, body = connection.receive()
        assert correlation_id == 41
        error_code, versions = wire.decode_api_versions_v0(body)
        assert error_code == UNSUPPORTED_VERSION
        served = {api_key: (low, high) for api_key, low, high in versions}
        assert served[wire.API_VERSIONS][0] == 0 and served[wire.API_VERSIONS][1] >= 3
        for api_key in (wire.API_PRODUCE, wire.API_FETCH, wire.API_LIST_OFFSETS, wire.API_METADATA):
            assert api_key in served
        # The connection stays usable for a request at a supported version.
        error_code, again = wire.decode_api_versions_v0(
            connection.call(wire.API_VERSIONS, 0, b"", correlation_id=42)
        )
        assert error_code == NONE and sorted(again) == sorted(versions)
    assert_still_serving_and_unchanged(guarded)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("api_key", [wire.API_PRODUCE, wire.API_FETCH, wire.API_METADATA])
def test_other_apis_at_an_unsupported_version_close_the_connection(guarded, api_key):
    with wire.Connection(guarded.port) as connection:
        connection.send(api_key, 99, 5, b"\x00" * 16)
        assert connection.closed_by_peer()
    assert_still_serving_and_unchanged(guarded)


@pytest.mark.timeout(30)
def test_a_batch_with_a_wrong_crc_is_corrupt_and_not_stored(guarded):
    batch = wire.record_batch([(b"bad", b"crc")], corrupt_crc=True)
    with wire.Connection(guarded.port) as connection:
        (result,) = wire.decode_produce_v3(
            connection.call(wire.API_PRODUCE, 3, wire.produce_v3_body(TOPIC, 0, batch))
        )
        assert result[:3] == (TOPIC, 0, CORRUPT_MESSAGE)
        # The connection stays open for the next request.
        assert list_offset(connection, LATEST) == 5
    assert_still_serving_and_unchanged(guarded)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("topic, partition", [(TOPIC, 7), ("no-such-topic", 0)])
def test_produce_to_a_missing_partition_is_unknown(guarded, topic, partition):
    batch = wire.record_batch([(b"k", b"v")])
    with wire.Connection(guarded.port) as connection:
        (result,) = wire.decode_produce_v3(
            connection.call(wire.API_PRODUCE, 3, wire.produce_v3_body(topic, partition, batch))
        )
        assert result[:3] == (topic, partition, UNKNOWN_TOPIC_OR_PARTITION)
    assert_still_serving_and_unchanged(guarded)


@pytest.mark.timeout(30)
def test_pipelined_produces_are_answered_in_request_order(guarded):
    with wire.Connection(guarded.port) as connection:
        requests = []
        for correlation_id in range(100, 120):
            batch = wire.record_batch([(None, f"p{correlation_id}".encode())] * 3)
            requests.append(
                wire.request_frame(wire.API_PRODUCE, 3, correlation_id, wire.produce_v3_body(TOPIC, 0, batch))
            )
        connection.send_raw(b"".join(requests))
        base_offsets = []
        for correlation_id in range(100, 120):
            received_id, body = connection.receive()
            assert received_id == correlation_id
            (result,) = wire.decode_produce_v3(body)
            assert result[2] == NONE
            base_offsets.append(result[3])
    assert base_offsets == list(range(5, 5 + 3 * 20, 3))


@pytest.mark.timeout(30)
def test_a_deferred_answer_keeps_its_place_in_the_order(guarded):
    """A long-polling fetch (answered late) is followed on the same
    connection by requests answered at once: their answers must wait."""
    with wire.Connection(guarded.port) as connection:
        started = time.monotonic()
        connection.send_raw(
            wire.request_frame(wire.API_FETCH, 4, 1, wire.fetch_v4_body(TOPIC, 0, 5, max_wait_ms=1500))
            + wire.request_frame(wire.API_VERSIONS, 0, 2, b"")
            + wire.request_frame(wire.API_LIST_OFFSETS, 1, 3, wire.list_offsets_v1_body(TOPIC, 0, LATEST))
        )
        first_id, first = connection.receive()
        waited_s = time.monotonic() - started
        assert first_id == 1
        (fetched,) = wire.decode_fetch_v4(first)
        assert fetched[2] == NONE and not fetched[4]
        # The fetch really was held for its max wait: nothing arrived.
        assert waited_s >= 1.3, f"fetch answered after {waited_s:.2f}s"
        assert connection.receive()[0] == 2
        assert connection.receive()[0] == 3


@pytest.mark.timeout(30)
def test_a_long_poll_woken_by_a_produce_on_another_connection(guarded):
    with wire.Connection(guarded.port) as consumer, wire.Connection(guarded.port) as producer:
        started = time.monotonic()
        consumer.send(wire.API_FETCH, 4, 9, wire.fetch_v4_body(TOPIC, 0, 5, max_wait_ms=5000))
        time.sleep(0.5)
        batch = wire.record_batch([(b"wake", b"up")])
        (result,) = wire.decode_produce_v3(
            producer.call(wire.API_PRODUCE, 3, wire.produce_v3_body(TOPIC, 0, batch))
        )
        assert result[2:4] == (NONE, 5)
        correlation_id, body = consumer.receive()
        waited_s = time.monotonic() - started
        assert correlation_id == 9
        (fetched,) = wire.decode_fetch_v4(body)
        assert fetched[2:4] == (NONE, 6) and fetched[4] and b"wake" in fetched[4]
        assert waited_s < 2.5, f"fetch answered after {waited_s:.2f}s"


MESSAGE_TOO_LARGE = 10
OFFSET_OUT_OF_RANGE = 1


@pytest.mark.timeout(30)
def test_a_batch_over_max_message_bytes_is_too_large_and_not_stored(guarded):
    create_topic(guarded.bootstrap, "small-records", config={"max.message.bytes": "1000"})
    batch = wire.record_batch([(b"big", b"x" * 2000)])
    with wire.Connection(guarded.port) as connection:
        (result,) = wire.decode_produce_v3(
            connection.call(wire.API_PRODUCE, 3, wire.produce_v3_body("small-records", 0, batch))
        )
        assert result[:3] == ("small-records", 0, MESSAGE_TOO_LARGE)
        (latest,) = wire.decode_list_offsets_v1(
            connection.call(wire.API_LIST_OFFSETS, 1, wire.list_offsets_v1_body("small-records", 0, LATEST))
        )
        assert latest[2:] == (NONE, -1, 0)
    assert_still_serving_and_unchanged(guarded)


@pytest.mark.timeout(30)
def test_a_fetch_past_the_log_end_is_out_of_range(guarded):
    with wire.Connection(guarded.port) as connection:
        (fetched,) = wire.decode_fetch_v4(
            connection.call(wire.API_FETCH, 4, wire.fetch_v4_body(TOPIC, 0, 6))
        )
        assert fetched[2] == OFFSET_OUT_OF_RANGE
        assert fetched[3] == 5  # the high watermark still comes back
        assert not fetched[4]
    assert_still_serving_and_unchanged(guarded)


@pytest.mark.timeout(30)
def test_a_client_that_leaves_during_a_long_poll_does_no_harm(guarded):
    for _ in range(5):
        connection = wire.Connection(guarded.port)
        connection.send(wire.API_FETCH, 4, 1, wire.fetch_v4_body(TOPIC, 0, 5, max_wait_ms=10_000))
        connection.close()
    # Wake the abandoned fetches with a produce, then check nothing broke.
    with wire.Connection(guarded.port) as connection:
        batch = wire.record_batch([(b"after", b"abandoned")])
        (result,) = wire.decode_produce_v3(
            connection.call(wire.API_PRODUCE, 3, wire.produce_v3_body(TOPIC, 0, batch))
        )
        assert result[2:4] == (NONE, 5)
        assert list_offset(connection, LATEST) == 6


@pytest.mark.timeout(30)
def test_an_acks_0_produce_gets_no_answer_and_keeps_the_order(guarded):
    batch = wire.record_batch([(b"fire", b"forget")])
    with wire.Connection(guarded.port) as connection:
        connection.send_raw(
            wire.request_frame(wire.API_PRODUCE, 3, 1, wire.produce_v3_body(TOPIC, 0, batch, acks=0))
            + wire.request_frame(wire.API_LIST_OFFSETS, 1, 2, wire.list_offsets_v1_body(TOPIC, 0, LATEST))
        )
        correlation_id, body = connection.receive()
        assert correlation_id == 2
        (result,) = wire.decode_list_offsets_v1(body)
        assert result[2:] == (NONE, -1, 6)


@pytest.mark.timeout(60)
def test_hundreds_of_pipelined_requests_are_all_answered_in_order(guarded):
    count = 600  # several times the broker's per-connection in-flight limit
    frames = []
    for correlation_id in range(count):
        if correlation_id % 3 == 0:
            body = wire.produce_v3_body(TOPIC, 0, wire.record_batch([(None, b"p")]))
            frames.append(wire.request_frame(wire.API_PRODUCE, 3, correlation_id, body))
        elif correlation_id % 3 == 1:
            frames.append(wire.request_frame(wire.API_VERSIONS, 0, correlation_id, b""))
        else:
            body = wire.list_offsets_v1_body(TOPIC, 0, LATEST)
            frames.append(wire.request_frame(wire.API_LIST_OFFSETS, 1, correlation_id, body))
    with wire.Connection(guarded.port) as connection:
        connection.send_raw(b"".join(frames))
        produced = 0
        for correlation_id in range(count):
            received_id, body = connection.receive()
            assert received_id == correlation_id
            if correlation_id % 3 == 0:
                (result,) = wire.decode_produce_v3(body)
                assert result[2:4] == (NONE, 5 + produced)
                produced += 1
            elif correlation_id % 3 == 2:
                (result,) = wire.decode_list_offsets_v1(body)
                # Every produce before this request is visible to it.
                assert result[2:] == (NONE, -1, 5 + produced)


def batch_of_exact_size(size: int) -> bytes:
    value_bytes = size - 100
    while True:
        batch = wire.record_batch([(None, b"z" * value_bytes)])
        if len(batch) == size:
            return batch
        value_bytes += size - len(batch)


def produce_one(port: int, topic: str, batch: bytes):
    with wire.Connection(port, timeout_s=30) as connection:
        (result,) = wire.decode_produce_v3(
            connection.call(wire.API_PRODUCE, 3, wire.produce_v3_body(topic, 0, batch))
        )
        return result[2:4]


@pytest.mark.timeout(60)
def test_the_default_max_message_bytes_boundary_is_exact(broker):
    create_topic(broker.bootstrap, "boundary")
    limit = 1_048_588
    assert produce_one(broker.port, "boundary", batch_of_exact_size(limit + 1)) == (MESSAGE_TOO_LARGE, -1)
    assert produce_one(broker.port, "boundary", batch_of_exact_size(limit)) == (NONE, 0)


@pytest.mark.timeout(60)
def test_the_broker_message_max_bytes_is_the_topic_default(broker_factory):
    broker = broker_factory(**{"message.max.bytes": 5000})
    create_topic(broker.bootstrap, "capped")
    create_topic(broker.bootstrap, "overridden", config={"max.message.bytes": "6000"})
    batch = batch_of_exact_size(5500)
    assert produce_one(broker.port, "capped", batch) == (MESSAGE_TOO_LARGE, -1)
    assert produce_one(broker.port, "overridden", batch) == (NONE, 0)


INVALID_RECORD = 87
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43


def malformed_batches():
    good = wire.record_batch([(b"k", b"v"), (b"k2", b"v2")])
    miscounted = bytearray(good)
    struct.pack_into(">i", miscounted, 57, 3)  # declares 3 records, holds 2
    struct.pack_into(">I", miscounted, 17, wire.crc32c(bytes(miscounted[21:])))
    old_magic = bytearray(good)
    old_magic[16] = 1
    overlong = bytearray(good)
    struct.pack_into(">i", overlong, 8, len(good))  # length past the end
    return {
        "trailing-bytes": (good + b"\x00\x01\x02", CORRUPT_MESSAGE),
        "truncated": (good[:-3], CORRUPT_MESSAGE),
        # Kafka's LogValidator: "Inconsistent batch offset range and count of
        # records" (InvalidRecordException).
        "record-count-mismatch": (bytes(miscounted), INVALID_RECORD),
        "length-past-the-end": (bytes(overlong), CORRUPT_MESSAGE),
        "magic-1": (bytes(old_magic), UNSUPPORTED_FOR_MESSAGE_FORMAT),
        "two-batches": (good + good, INVALID_RECORD),
        "empty": (b"", INVALID_RECORD),
    }


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", list(malformed_batches()))
def test_malformed_batches_get_kafkas_code_and_are_not_stored(guarded, case):
    batch, expected = malformed_batches()[case]
    with wire.Connection(guarded.port) as connection:
        (result,) = wire.decode_produce_v3(
            connection.call(wire.API_PRODUCE, 3, wire.produce_v3_body(TOPIC, 0, batch))
        )
        assert result[2:4] == (expected, -1)
        assert list_offset(connection, LATEST) == 5
    assert_still_serving_and_unchanged(guarded)


NOT_ENOUGH_REPLICAS = 19


@pytest.mark.timeout(30)
def test_acks_all_below_min_insync_replicas_is_refused_and_not_stored(guarded):
    create_topic(guarded.bootstrap, "strict", config={"min.insync.replicas": "2"})
    batch = wire.record_batch([(b"k", b"v")])
    with wire.Connection(guarded.port) as connection:
        (result,) = wire.decode_produce_v3(
            connection.call(wire.API_PRODUCE, 3, wire.produce_v3_body("strict", 0, batch, acks=-1))
        )
        assert result[2:4] == (NOT_ENOUGH_REPLICAS, -1)
        # acks=1 does not wait for the ISR, so it is accepted.
        (result,) = wire.decode_produce_v3(
            connection.call(wire.API_PRODUCE, 3, wire.produce_v3_body("strict", 0, batch, acks=1))
        )
        assert result[2:4] == (NONE, 0)
        (latest,) = wire.decode_list_offsets_v1(
            connection.call(wire.API_LIST_OFFSETS, 1, wire.list_offsets_v1_body("strict", 0, LATEST))
        )
        assert latest[2:] == (NONE, -1, 1)
    assert_still_serving_and_unchanged(guarded)
