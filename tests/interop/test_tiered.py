"""Tiered storage (KIP-405) with the local-directory remote backend: a topic
with remote.storage.enable, small segments and a local retention far below
its data. Once the copied segments are gone from the local log, both
clients read every record from offset 0 (keys, values, headers and
timestamps intact) and find offsets by time inside the remote range."""
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from datapath import (
    assert_same,
    confluent_producer,
    consume_confluent,
    consume_kafka_python,
    create_topic,
    plain_consumer_config,
    produce_confluent,
    sample_messages,
)

TOPIC = "tiered"
COUNT = 600

TIERED_BROKER = {
    "remote_log_storage_system_enable": "true",
    "remote_log_manager_task_interval_ms": "100",
    "log_retention_check_interval_ms": "100",
}


def local_segment_bases(data_dir: Path) -> list:
    return sorted(int(path.stem) for path in (data_dir / f"{TOPIC}-0").glob("*.log"))


def remote_segment_count(data_dir: Path) -> int:
    return len(list((data_dir / "remote-storage" / f"{TOPIC}-0").glob("*.log")))


@pytest.fixture
def tiered_topic(broker_factory):
    broker = broker_factory(**TIERED_BROKER)
    create_topic(
        broker.bootstrap,
        TOPIC,
        config={
            "remote.storage.enable": "true",
            "segment.bytes": "8192",
            "local.retention.bytes": "1",
            "file.delete.delay.ms": "0",
        },
    )
    base = int(time.time() * 1000) - 600_000
    messages = sample_messages(COUNT, base)
    producer = confluent_producer(broker.bootstrap, **{"linger.ms": 20, "batch.size": 2048})
    offsets = produce_confluent(producer, TOPIC, messages)
    assert offsets == list(range(COUNT))
    deadline = time.monotonic() + 30
    while local_segment_bases(broker.data_dir)[0] < COUNT // 2:
        assert time.monotonic() < deadline, "local segments were not deleted after their copies"
        time.sleep(0.1)
    assert remote_segment_count(broker.data_dir) > 3
    return broker, messages, offsets, base


@pytest.mark.timeout(90)
def test_both_clients_read_every_record_from_offset_zero(tiered_topic):
    broker, messages, offsets, _ = tiered_topic
    assert_same(messages, consume_confluent(broker.bootstrap, TOPIC, COUNT), offsets)
    assert_same(messages, consume_kafka_python(broker.bootstrap, TOPIC, COUNT), offsets)


@pytest.mark.timeout(90)
def test_offsets_for_times_and_earliest_reach_the_remote_range(tiered_topic):
    broker, messages, _, base = tiered_topic
    local_start = local_segment_bases(broker.data_dir)[0]
    target = 7  # well below the local log start
    assert target < local_start
    timestamp = messages[target][3]
    consumer = Consumer(plain_consumer_config(broker.bootstrap))
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10, cached=False)
        assert (low, high) == (0, COUNT)
        (found,) = consumer.offsets_for_times([TopicPartition(TOPIC, 0, timestamp)], timeout=10)
        assert found.error is None and found.offset == target
        (found,) = consumer.offsets_for_times([TopicPartition(TOPIC, 0, timestamp - 1)], timeout=10)
        assert found.offset == target
    finally:
        consumer.close()
    kafka_consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    try:
        partition = KpTopicPartition(TOPIC, 0)
        assert kafka_consumer.beginning_offsets([partition]) == {partition: 0}
        found = kafka_consumer.offsets_for_times({partition: timestamp})[partition]
        assert (found.offset, found.timestamp) == (target, timestamp)
        found = kafka_consumer.offsets_for_times({partition: base - 1})[partition]
        assert found.offset == 0
    finally:
        kafka_consumer.close()


def start_moto() -> tuple:
    """A moto S3 server on 127.0.0.1 (its own process); returns (process, endpoint)."""
    import os
    import socket
    import subprocess
    import sys
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
            return process, endpoint
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("moto server did not start")
            time.sleep(0.1)


@pytest.mark.timeout(120)
def test_s3_backend_on_moto(broker_factory):
    pytest.importorskip("moto")
    boto3 = pytest.importorskip("boto3")
    process, endpoint = start_moto()
    try:
        s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        s3.create_bucket(Bucket="strom-tiers")
        broker = broker_factory(
            **TIERED_BROKER,
            rsm_config_storage_backend="s3",
            rsm_config_s3_bucket_name="strom-tiers",
            rsm_config_s3_region="us-east-1",
            rsm_config_s3_endpoint_url=endpoint,
            rsm_config_aws_access_key_id="test",
            rsm_config_aws_secret_access_key="test",
            rsm_config_key_prefix="cluster-a",
        )
        create_topic(
            broker.bootstrap,
            TOPIC,
            config={
                "remote.storage.enable": "true",
                "segment.bytes": "8192",
                "local.retention.bytes": "1",
                "file.delete.delay.ms": "0",
            },
        )
        messages = sample_messages(COUNT, int(time.time() * 1000) - 600_000)
        producer = confluent_producer(broker.bootstrap, **{"linger.ms": 20, "batch.size": 2048})
        offsets = produce_confluent(producer, TOPIC, messages)
        deadline = time.monotonic() + 60
        while local_segment_bases(broker.data_dir)[0] < COUNT // 2:
            assert time.monotonic() < deadline, "local segments were not deleted after their copies"
            time.sleep(0.2)
        keys = [item["Key"] for item in s3.list_objects_v2(Bucket="strom-tiers").get("Contents", [])]
        assert any(key.startswith(f"cluster-a/{TOPIC}-0/") and key.endswith(".log") for key in keys)
        assert any(key.endswith(".metadata") for key in keys)
        assert_same(messages, consume_confluent(broker.bootstrap, TOPIC, COUNT), offsets)
    finally:
        process.kill()
        process.wait(10)
