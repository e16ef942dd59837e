"""KafkaJS, a third client written by others (pure JavaScript, with its own
implementation of the protocol), against Strom: it reads what librdkafka
wrote, librdkafka and kafka-python read what it wrote (record by record),
its admin client manages topics, configs, groups and their offsets, its
consumer groups hand partitions over without gaps or duplicates, and it
finds offsets by time.

KafkaJS runs as `node tests/interop/js/kafkajs_client.js` (pinned in
tests/interop/js/package-lock.json with its snappy plugin, installed by
scripts/node-env). Its LZ4 and zstd plugins need native builds and are not
used.
"""
import base64
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from datapath import (
    CREATE_TIME,
    Read,
    assert_same,
    confluent_producer,
    consume_confluent,
    consume_kafka_python,
    create_topic,
    produce_confluent,
    sample_messages,
)

CLIENT = Path(__file__).resolve().parent / "js" / "kafkajs_client.js"


def kafkajs(*args, timeout_s: float = 120) -> list:
    """Runs one KafkaJS command; returns the JSON documents it printed."""
    node = shutil.which("node")
    assert node is not None, "node is not installed (scripts/node-env installs it)"
    assert (CLIENT.parent / "node_modules" / "kafkajs").is_dir(), "run scripts/node-env first"
    result = subprocess.run(
        [node, str(CLIENT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert result.returncode == 0, f"kafkajs {args[0]} failed:\n{result.stderr[-4000:]}"
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def b64(data):
    return None if data is None else base64.b64encode(data).decode()


def unb64(text):
    return None if text is None else base64.b64decode(text)


def produce_to_each_partition(bootstrap: str, topic: str, partitions: int, messages_of,
                              **config) -> None:
    """Produces `messages_of(partition)` to each partition with librdkafka
    (a producer with `config` on top of the suite's)."""
    producer = confluent_producer(bootstrap, **config)
    for partition in range(partitions):
        sent = messages_of(partition)
        assert produce_confluent(producer, topic, sent, partition=partition) == list(range(len(sent)))


def reads_of(documents) -> list:
    """KafkaJS's printed records as `Read`s, in its order."""
    return [
        Read(
            offset=document["offset"],
            key=unb64(document["key"]),
            value=unb64(document["value"]),
            headers=[(name, unb64(value)) for name, value in document["headers"]],
            timestamp_type=CREATE_TIME,
            timestamp_ms=document["timestamp"],
        )
        for document in documents
    ]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_librdkafka_and_kafka_python_read_what_kafkajs_wrote(broker, codec, tmp_path):
    topic = f"from-kafkajs-{codec}"
    create_topic(broker.bootstrap, topic)
    # KafkaJS takes headers as an object: no repeated names.
    messages = sample_messages(
        2000, int(time.time() * 1000) - 3_600_000, longest_repeat=150, repeated_header=False
    )
    batch = tmp_path / "messages.json"
    batch.write_text(
        json.dumps(
            [
                {
                    "key": b64(key),
                    "value": b64(value),
                    "headers": [[name, b64(data)] for name, data in headers],
                    "timestamp": timestamp_ms,
                }
                for key, value, headers, timestamp_ms in messages
            ]
        )
    )
    [produced] = kafkajs("produce", broker.bootstrap, topic, 0, codec, batch)
    assert produced["baseOffsets"] == list(range(0, len(messages), 250))
    offsets = list(range(len(messages)))
    assert_same(messages, consume_confluent(broker.bootstrap, topic, len(messages)), offsets)
    assert_same(messages, consume_kafka_python(broker.bootstrap, topic, len(messages)), offsets)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("codec", ["gzip", "snappy"])
def test_kafkajs_reads_what_librdkafka_wrote(broker, codec):
    topic = f"from-librdkafka-{codec}"
    partitions = 3
    create_topic(broker.bootstrap, topic, partitions)
    # Repeated header names too: KafkaJS must keep both values.
    messages = sample_messages(3000, int(time.time() * 1000) - 3_600_000, longest_repeat=150)
    per_partition = {partition: messages[partition::partitions] for partition in range(partitions)}
    produce_to_each_partition(
        broker.bootstrap, topic, partitions, per_partition.get, **{"compression.type": codec}
    )
    documents = kafkajs("consume", broker.bootstrap, topic, len(messages), "kafkajs-readers")
    counts = {p: sum(1 for d in documents if d["partition"] == p) for p in range(partitions)}
    assert counts == {p: len(sent) for p, sent in per_partition.items()}, counts
    for partition, sent in per_partition.items():
        # KafkaJS gathers repeated names into one entry: compare by name.
        reads = reads_of([document for document in documents if document["partition"] == partition])
        expected = [
            (key, value, sorted(headers, key=lambda header: header[0]), timestamp_ms)
            for key, value, headers, timestamp_ms in sent
        ]
        for read in reads:
            read.headers = sorted(read.headers, key=lambda header: header[0])
        assert_same(expected, reads, list(range(len(sent))))


@pytest.mark.timeout(120)
def test_kafkajs_admin_manages_topics_and_configs(broker):
    [result] = kafkajs("admin", broker.bootstrap)
    assert result == {"admin": "ok", "partitions": 5}


@pytest.mark.timeout(180)
def test_kafkajs_group_members_hand_over_and_admin_sees_the_group(broker):
    topic = "handover"
    partitions = 4
    create_topic(broker.bootstrap, topic, partitions)
    produce_to_each_partition(
        broker.bootstrap,
        topic,
        partitions,
        lambda partition: [(None, f"{partition}-{i}".encode(), [], None) for i in range(1000)],
    )
    taken = kafkajs("handover", broker.bootstrap, topic, partitions, 4000, "kafkajs-handover")
    pairs = [(record["partition"], record["offset"]) for record in taken]
    assert len(pairs) == len(set(pairs)), "a record was taken twice"
    assert set(pairs) == {(p, o) for p in range(partitions) for o in range(1000)}
    members = {record["member"] for record in taken}
    assert members == {"first", "second"}, "both members took records"
    # The group's offsets and records through KafkaJS's admin client.
    [result] = kafkajs("group-admin", broker.bootstrap, topic, partitions, 1000, "kafkajs-handover")
    assert result == {"groupAdmin": "ok"}
    # Reset to the earliest: a member of the group reads again from the log
    # start, which is 500 in partition 1 now.
    again = kafkajs("consume", broker.bootstrap, topic, 3500, "kafkajs-handover")
    pairs = {(record["partition"], record["offset"]) for record in again}
    assert pairs == {
        (p, o) for p in range(partitions) for o in range(500 if p == 1 else 0, 1000)
    }
    [deleted] = kafkajs("delete-group", broker.bootstrap, "kafkajs-handover")
    assert deleted == {"deleted": "kafkajs-handover", "offsetsLeft": 0}


@pytest.mark.timeout(180)
def test_a_kafkajs_group_rebalances_while_records_arrive_and_loses_none(broker):
    topic = "live"
    partitions = 6
    create_topic(broker.bootstrap, topic, partitions)
    count = 3000
    documents = kafkajs("live-group", broker.bootstrap, topic, count, "kafkajs-live")
    summary = documents[-1]
    records = documents[:-1]
    pairs = {(record["partition"], record["offset"]) for record in records}
    assert len(pairs) == count, "every record was read"
    # Offsets are dense from 0 in every partition: nothing was skipped.
    for partition in range(partitions):
        offsets = sorted(o for p, o in pairs if p == partition)
        assert offsets == list(range(len(offsets))), f"partition {partition}"
    # The second member joined while the first was reading: the first was
    # assigned partitions again in the rebalance, and both read records.
    assert summary["assignments"]["a"] >= 2, summary
    assert summary["assignments"]["b"] >= 1, summary
    assert {record["member"] for record in records} == {"a", "b"}


@pytest.mark.timeout(120)
def test_kafkajs_finds_offsets_by_timestamp(broker):
    topic = "by-time"
    create_topic(broker.bootstrap, topic, 2)
    base_timestamp_ms = int(time.time() * 1000) - 3_600_000
    produce_to_each_partition(
        broker.bootstrap,
        topic,
        2,
        lambda _: [(None, b"x", [], base_timestamp_ms + i * 1000) for i in range(100)],
    )
    [answer] = kafkajs("offsets-by-time", broker.bootstrap, topic, base_timestamp_ms + 40_500)
    # The first record at or after the time: offset 41 in both partitions.
    assert sorted(answer["byTime"]) == [[0, 41], [1, 41]]
    assert sorted(answer["latest"]) == [[0, 0, 100], [1, 0, 100]]
