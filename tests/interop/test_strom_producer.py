"""strom-producer (through the strom-interop-producer program) writes to a
Strom broker; confluent-kafka and kafka-python read it back record by record,
and keyed records land where librdkafka's murmur2 partitioner puts them."""
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from datapath import (
    CREATE_TIME,
    confluent_producer,
    consume_confluent,
    consume_kafka_python,
    create_topic,
)

ROOT = Path(__file__).resolve().parents[2]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def producer_binary() -> Path:
    explicit = os.environ.get("STROM_BIN_DIR")
    if explicit:
        return Path(explicit) / "strom-interop-producer"
    subprocess.run(
        ["cargo", "build", "--quiet", "-p", "strom-integration", "--bin", "strom-interop-producer"],
        cwd=ROOT,
        check=True,
    )
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "strom-interop-producer"


def strom_produce(bootstrap: str, records: list, **properties) -> list:
    """Sends records (dicts with bytes keys/values) with strom-producer and
    returns one outcome dict per record, in order."""
    arguments = [str(producer_binary()), "--bootstrap-servers", bootstrap]
    for key, value in properties.items():
        arguments += ["-X", f"{key.replace('_', '.')}={value}"]
    lines = []
    for record in records:
        line = {
            "topic": record["topic"],
            "partition": record.get("partition"),
            "key": record.get("key").hex() if record.get("key") is not None else None,
            "value": record.get("value").hex() if record.get("value") is not None else None,
            "headers": [[k, v.hex() if v is not None else None] for k, v in record.get("headers", [])],
            "timestamp": record.get("timestamp"),
        }
        lines.append(json.dumps(line))
    result = subprocess.run(
        arguments,
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    outcomes = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert len(outcomes) == len(records), result.stderr
    return outcomes


def sample_records(topic: str, count: int, base_timestamp_ms: int) -> list:
    """Keys (some null), values (some null, some empty, some binary),
    headers (repeated keys, empty and null values), explicit timestamps."""
    records = []
    for index in range(count):
        key = None if index % 5 == 0 else f"key-{index}".encode()
        if index % 7 == 3:
            value = None
        elif index % 7 == 5:
            value = b""
        elif index % 11 == 0:
            value = bytes(range(256)) * (1 + index % 3)
        else:
            value = (f"value-{index}-" * (1 + index % 13)).encode()
        headers = []
        if index % 3 == 0:
            headers = [("trace", f"t{index}".encode()), ("empty", b""), ("trace", b"dup")]
        if index % 4 == 1:
            headers.append(("null", None))
        records.append(
            {
                "topic": topic,
                "partition": 0,
                "key": key,
                "value": value,
                "headers": headers,
                "timestamp": base_timestamp_ms + index * 1000,
            }
        )
    return records


def assert_read_back(records: list, reads: list) -> None:
    assert len(reads) == len(records), f"read {len(reads)} of {len(records)}"
    for offset, (record, read) in enumerate(zip(records, reads)):
        assert read.offset == offset
        assert read.key == record["key"], f"offset {offset}"
        assert read.value == record["value"], f"offset {offset}"
        assert read.headers == list(record["headers"]), f"offset {offset}"
        assert read.timestamp_type == CREATE_TIME, f"offset {offset}"
        assert read.timestamp_ms == record["timestamp"], f"offset {offset}"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("codec", CODECS)
def test_both_clients_read_what_strom_producer_wrote(broker, codec):
    topic = f"strom-producer-{codec}"
    create_topic(broker.bootstrap, topic)
    base_timestamp_ms = int(time.time() * 1000) - 3_600_000
    records = sample_records(topic, 400, base_timestamp_ms)
    outcomes = strom_produce(
        broker.bootstrap, records, **{"compression.type": codec, "linger.ms": 20, "acks": "all"}
    )
    assert [outcome.get("error") for outcome in outcomes] == [None] * len(records)
    assert [outcome["offset"] for outcome in outcomes] == list(range(len(records)))
    assert [outcome["partition"] for outcome in outcomes] == [0] * len(records)
    assert [outcome["timestamp"] for outcome in outcomes] == [r["timestamp"] for r in records]

    assert_read_back(records, consume_confluent(broker.bootstrap, topic, len(records)))
    assert_read_back(records, consume_kafka_python(broker.bootstrap, topic, len(records)))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acks_setting_writes_every_record(broker, acks):
    topic = f"strom-producer-acks-{acks}"
    create_topic(broker.bootstrap, topic)
    records = sample_records(topic, 200, int(time.time() * 1000))
    idempotence = "true" if acks == "all" else "false"
    outcomes = strom_produce(
        broker.bootstrap, records, acks=acks, **{"enable.idempotence": idempotence}
    )
    assert [outcome.get("error") for outcome in outcomes] == [None] * len(records)
    expected_offsets = [-1] * len(records) if acks == "0" else list(range(len(records)))
    assert [outcome["offset"] for outcome in outcomes] == expected_offsets
    assert_read_back(records, consume_confluent(broker.bootstrap, topic, len(records)))


@pytest.mark.timeout(120)
def test_keyed_records_land_where_librdkafka_murmur2_puts_them(broker):
    topic = "strom-producer-keys"
    partitions = 7
    create_topic(broker.bootstrap, topic, partitions=partitions)
    keys = [f"user-{index}".encode() for index in range(200)] + [b"", bytes(range(40))]
    records = [{"topic": topic, "key": key, "value": b"v"} for key in keys]
    strom_partitions = [outcome["partition"] for outcome in strom_produce(broker.bootstrap, records)]

    producer = confluent_producer(broker.bootstrap, partitioner="murmur2_random")
    librdkafka_partitions = [None] * len(keys)

    def on_delivery(index):
        def callback(error, message):
            assert error is None, error
            librdkafka_partitions[index] = message.partition()

        return callback

    for index, key in enumerate(keys):
        producer.produce(topic, b"v", key=key, on_delivery=on_delivery(index))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert strom_partitions == librdkafka_partitions
    assert len(set(strom_partitions)) == partitions, "200 keys reach every partition"


@pytest.mark.timeout(120)
def test_a_record_too_large_for_the_topic_fails_alone(broker):
    topic = "strom-producer-small"
    create_topic(broker.bootstrap, topic, config={"max.message.bytes": "2048"})
    records = [{"topic": topic, "partition": 0, "value": bytes([index % 256]) * 150} for index in range(60)]
    records.insert(30, {"topic": topic, "partition": 0, "value": b"L" * 5000})
    outcomes = strom_produce(broker.bootstrap, records, **{"linger.ms": 50, "batch.size": 65536})
    assert outcomes[30].get("kind") == "RecordTooLarge", outcomes[30]
    written = [outcome for index, outcome in enumerate(outcomes) if index != 30]
    assert [outcome.get("error") for outcome in written] == [None] * 60
    assert [outcome["offset"] for outcome in written] == list(range(60))
    reads = consume_kafka_python(broker.bootstrap, topic, 60)
    assert [read.value for read in reads] == [r["value"] for i, r in enumerate(records) if i != 30]
