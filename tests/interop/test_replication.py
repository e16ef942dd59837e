"""Replication between three Strom broker processes with confluent-kafka
(librdkafka), a client written by others: a topic with replication factor
3 and min.insync.replicas=2, an idempotent acks=all producer, and the
leader's process killed with kill -9; every acknowledged record is read
back exactly once and in order from the new leader."""
import tempfile
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import Broker, free_port

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
TOPIC = "replicated-events"


def start_cluster(strom_binary, tmp_path, extra_for=None):
    """Three broker+controller processes; `extra_for(node)` may add settings."""
    controller_ports = {node: free_port() for node in (1, 2, 3)}
    voters = ",".join(f"{node}@127.0.0.1:{port}" for node, port in controller_ports.items())
    brokers = {}
    for node, controller_port in controller_ports.items():
        base = Path(tempfile.mkdtemp(dir=tmp_path))
        data_dir = base / "data"
        data_dir.mkdir()
        broker = Broker(
            strom_binary,
            data_dir,
            {
                "node.id": str(node),
                "process.roles": "broker,controller",
                "controller.quorum.voters": voters,
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "strom.cluster.id": CLUSTER_ID,
                "broker.heartbeat.interval.ms": "500",
                "broker.session.timeout.ms": "4000",
                "replica.lag.time.max.ms": "3000",
                "offsets.topic.num.partitions": "1",
            },
        )
        if extra_for is not None:
            broker.extra.update(extra_for(node))
        broker.extra["listeners"] = (
            f"PLAINTEXT://127.0.0.1:{broker.port},CONTROLLER://127.0.0.1:{controller_port}"
        )
        brokers[node] = broker
    # Every process first: a node's client port listens only once a quorum
    # of voters has formed and its logs are open.
    for broker in brokers.values():
        broker.launch()
    for broker in brokers.values():
        broker.wait_listening(60.0)
    return brokers


def leader_and_isr(bootstrap: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(TOPIC, timeout=10)
    topic = metadata.topics.get(TOPIC)
    if topic is None or topic.error is not None or 0 not in topic.partitions:
        return None, []
    partition = topic.partitions[0]
    return partition.leader, sorted(partition.isrs)


def wait_until(what, check, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.2)


def produce(bootstrap: str, values):
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 60000,
        }
    )
    acknowledged = []

    def delivered(error, message):
        if error is None:
            acknowledged.append(message.value().decode())

    for value in values:
        producer.produce(TOPIC, value=value.encode(), partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(90) == 0, "every record delivered or failed"
    return acknowledged


def consume_all(bootstrap: str, expected_count: int):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"replication-check-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    # Assigned, not subscribed: the group coordinator's partition has one
    # replica and may have been on the killed broker.
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    values = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < expected_count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error() is not None:
                continue
            values.append(message.value().decode())
    finally:
        consumer.close()
    return values


def test_acks_all_survives_the_leader_being_killed(strom_binary, tmp_path):
    brokers = start_cluster(strom_binary, tmp_path)
    try:
        bootstrap = ",".join(broker.bootstrap for broker in brokers.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait_until(
            "three unfenced brokers",
            lambda: len(admin.list_topics(timeout=10).brokers) == 3,
        )
        futures = admin.create_topics(
            [NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})]
        )
        futures[TOPIC].result(30)
        wait_until("a full ISR", lambda: len(leader_and_isr(bootstrap)[1]) == 3)
        leader, _ = leader_and_isr(bootstrap)
        first = produce(bootstrap, [f"before-{index}" for index in range(200)])
        assert len(first) == 200
        _, isr = leader_and_isr(bootstrap)
        assert isr == [1, 2, 3], "acknowledged with every replica in sync"

        brokers[leader].kill()
        survivors = ",".join(broker.bootstrap for node, broker in brokers.items() if node != leader)
        wait_until(
            "a new leader",
            lambda: leader_and_isr(survivors)[0] not in (None, -1, leader),
        )
        second = produce(survivors, [f"after-{index}" for index in range(100)])
        assert len(second) == 100
        acknowledged = first + second
        read = consume_all(survivors, len(acknowledged))
        assert read == acknowledged, "every acknowledged record once, in order"
    finally:
        for broker in brokers.values():
            broker.kill()
