"""DescribeQuorum with kafka-python's KafkaAdminClient.describe_metadata_quorum,
a client written by others, against a real Strom broker: a single node (a
quorum of one voter, itself, at epoch 0) and a one-voter cluster (cluster
mode in one process: the quorum's own leader, epoch and controller listener)."""
import tempfile
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from conftest import Broker, free_port

TIMEOUT_MS = 15000


def describe_quorum(bootstrap: str) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        return admin.describe_metadata_quorum()
    finally:
        admin.close()


def metadata_partition(quorum: dict) -> dict:
    [topic] = quorum["topics"]
    assert topic["topic_name"] == "__cluster_metadata"
    [partition] = topic["partitions"]
    assert partition["partition_index"] == 0
    assert partition["error"] is None, partition
    return partition


def test_a_single_node_is_a_quorum_of_one(broker):
    before = metadata_partition(describe_quorum(broker.bootstrap))
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_MS)
    try:
        admin.create_topics([NewTopic("quorum-events", 1, 1)])
    finally:
        admin.close()
    quorum = describe_quorum(broker.bootstrap)
    partition = metadata_partition(quorum)
    assert partition["leader_id"] == 1
    assert partition["leader_epoch"] == 0
    assert partition["high_watermark"] > before["high_watermark"]
    [voter] = partition["current_voters"]
    assert voter["replica_id"] == 1
    assert voter["log_end_offset"] == partition["high_watermark"]
    assert voter["last_caught_up_timestamp"] > 0
    assert partition["observers"] == []
    assert quorum.get("nodes", []) == []


def test_a_one_voter_cluster_reports_its_quorum(strom_binary, tmp_path):
    base = Path(tempfile.mkdtemp(dir=tmp_path))
    data_dir = base / "data"
    data_dir.mkdir()
    controller_port = free_port()
    broker = Broker(
        strom_binary,
        data_dir,
        {
            "process.roles": "broker,controller",
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "strom.cluster.id": "MkU3OEVBNTcwNTJENDM2Qg",
        },
    )
    broker.extra["listeners"] = (
        f"PLAINTEXT://127.0.0.1:{broker.port},CONTROLLER://127.0.0.1:{controller_port}"
    )
    try:
        broker.start()
        quorum = describe_quorum(broker.bootstrap)
        partition = metadata_partition(quorum)
        assert partition["leader_id"] == 1
        assert partition["leader_epoch"] >= 1, "the voter elected itself"
        assert partition["high_watermark"] > 0
        [voter] = partition["current_voters"]
        assert voter["replica_id"] == 1
        assert voter["log_end_offset"] >= partition["high_watermark"]
        [node] = quorum["nodes"]
        assert node["node_id"] == 1
        [listener] = node["listeners"]
        assert (listener["name"], listener["host"], listener["port"]) == (
            "CONTROLLER",
            "127.0.0.1",
            controller_port,
        )
    finally:
        broker.kill()
