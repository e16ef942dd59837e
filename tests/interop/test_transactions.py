"""Transactions and exactly-once with clients written by others.

confluent-kafka (librdkafka) runs a consume-transform-produce pipeline with
commits and aborts and checks that its output holds every input record
exactly once and that the group's offsets moved with the commits; readers
at both isolation levels see what they must (read_committed no aborted or
open record, read_uncommitted everything); a second producer with the same
transactional id fences the first; and a transaction left open by a
producer that died is aborted by the coordinator after its timeout, which
unblocks read_committed readers. kafka-python's transactional producer and
KafkaJS's transactions with sendOffsets run against the same broker. The
last test runs the pipeline on a 3-node cluster.
"""
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import clusterwire as cw
from cluster import OFFSETS_PARTITIONS, Cluster
from datapath import create_topic, wait_for_leader
from test_kafkajs import kafkajs
from txn_pipeline import (
    ResilientPipeline,
    caught_up,
    check_exactly_once,
    fill_source,
    read_all,
    transaction_partition,
    transactional_producer,
)

# A short cleanup interval so that a timed-out transaction is aborted soon.
BROKER_SETTINGS = {
    "transaction_abort_timed_out_transaction_cleanup_interval_ms": "500",
    "transaction_state_log_num_partitions": "4",
}


def test_readers_see_committed_records_only_when_read_committed(broker_factory):
    broker = broker_factory(**BROKER_SETTINGS)
    create_topic(broker.bootstrap, "visibility", 1)
    producer = transactional_producer(broker.bootstrap, "visibility-app")
    for prefix, count, commit in [("c1", 10, True), ("a1", 7, False), ("c2", 5, True)]:
        producer.begin_transaction()
        for index in range(count):
            producer.produce("visibility", value=f"{prefix}-{index}")
        producer.flush()
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    committed = read_all(broker.bootstrap, "visibility", "read_committed", 15)
    assert committed == [f"c1-{i}" for i in range(10)] + [f"c2-{i}" for i in range(5)]
    everything = read_all(broker.bootstrap, "visibility", "read_uncommitted", 22)
    assert sorted(everything) == sorted(committed + [f"a1-{i}" for i in range(7)])


def run_pipeline(bootstrap: str, source: str, sink: str, group: str, total: int, partitions: int,
                 abort_every: int, deadline_s: float = 90.0) -> dict:
    """Consume-transform-produce in transactions of up to 25 records, each
    carrying its input offsets; every `abort_every`-th transaction is
    aborted and its input read again. Returns counts."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
    })
    consumer.subscribe([source])
    producer = transactional_producer(bootstrap, f"{group}-pipeline")
    transactions = {"committed": 0, "aborted": 0}
    done = 0
    deadline = time.monotonic() + deadline_s
    while done < total and time.monotonic() < deadline:
        messages = [m for m in consumer.consume(25, 1.0) if not m.error()]
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            producer.produce(sink, key=message.key(), value=b"out-" + message.value(),
                             partition=message.partition())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        if (transactions["committed"] + transactions["aborted"] + 1) % abort_every == 0:
            # Sent first, so that the aborted records are in the log (an
            # abort drops records still queued in the client).
            producer.flush(30)
            producer.abort_transaction(30)
            transactions["aborted"] += 1
            # Read the aborted input again from the last committed offsets.
            for committed in consumer.committed(consumer.assignment(), 10):
                consumer.seek(TopicPartition(committed.topic, committed.partition,
                                             max(committed.offset, 0)))
        else:
            producer.commit_transaction(30)
            transactions["committed"] += 1
            done += len(messages)
    consumer.close()
    return {"done": done, **transactions}


def test_consume_transform_produce_is_exactly_once(broker_factory):
    broker = broker_factory(**BROKER_SETTINGS)
    total, partitions = 600, 3
    create_topic(broker.bootstrap, "eos-in", partitions)
    create_topic(broker.bootstrap, "eos-out", partitions)
    fill_source(broker.bootstrap, "eos-in", total, partitions)
    counts = run_pipeline(broker.bootstrap, "eos-in", "eos-out", "eos-group", total, partitions,
                          abort_every=4)
    assert counts["done"] == total, counts
    assert counts["aborted"] > 0, counts
    check_exactly_once(broker.bootstrap, "eos-in", "eos-out", "eos-group", total, partitions)
    # The aborted transactions' records are in the log, marked aborted.
    everything = read_all(broker.bootstrap, "eos-out", "read_uncommitted", total, partitions,
                          settle_s=2.0)
    assert len(everything) > total


def test_a_second_producer_fences_the_first(broker_factory):
    broker = broker_factory(**BROKER_SETTINGS)
    create_topic(broker.bootstrap, "fenced", 1)
    zombie = transactional_producer(broker.bootstrap, "fence-app")
    zombie.begin_transaction()
    zombie.produce("fenced", value="zombie")
    zombie.flush()
    successor = transactional_producer(broker.bootstrap, "fence-app")
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                              KafkaError.INVALID_PRODUCER_EPOCH), error
    successor.begin_transaction()
    successor.produce("fenced", value="successor")
    successor.commit_transaction(30)
    assert read_all(broker.bootstrap, "fenced", "read_committed", 1) == ["successor"]


DEAD_PRODUCER = """
import os, sys
from confluent_kafka import Producer
producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "dead-app",
                     "transaction.timeout.ms": 3000})
producer.init_transactions(30)
producer.begin_transaction()
for index in range(5):
    producer.produce("hanging", value=f"dead-{index}")
assert producer.flush(30) == 0
os._exit(0)
"""


def test_a_transaction_left_open_by_a_dead_producer_is_aborted(broker_factory):
    broker = broker_factory(**BROKER_SETTINGS)
    create_topic(broker.bootstrap, "hanging", 1)
    subprocess.run([sys.executable, "-c", DEAD_PRODUCER, broker.bootstrap], check=True,
                   timeout=60)
    writer = Producer({"bootstrap.servers": broker.bootstrap})
    writer.produce("hanging", value="after")
    assert writer.flush(30) == 0
    # The open transaction holds the last stable offset back: a
    # read_committed reader sees nothing yet.
    assert read_all(broker.bootstrap, "hanging", "read_committed", 1, timeout_s=1.0) == []
    # After transaction.timeout.ms the coordinator aborts it.
    values = read_all(broker.bootstrap, "hanging", "read_committed", 1, timeout_s=20.0)
    assert values == ["after"]
    # The producer can start again, at a bumped epoch.
    again = transactional_producer(broker.bootstrap, "dead-app")
    again.begin_transaction()
    again.produce("hanging", value="restarted")
    again.commit_transaction(30)
    assert read_all(broker.bootstrap, "hanging", "read_committed", 2) == ["after", "restarted"]


def test_kafka_python_transactional_producer(broker_factory):
    from kafka import KafkaProducer
    broker = broker_factory(**BROKER_SETTINGS)
    create_topic(broker.bootstrap, "kp-txn", 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-app")
    producer.init_transactions()
    producer.begin_transaction()
    for index in range(4):
        producer.send("kp-txn", value=f"kp-committed-{index}".encode())
    producer.commit_transaction()
    producer.begin_transaction()
    for index in range(3):
        producer.send("kp-txn", value=f"kp-aborted-{index}".encode())
    producer.flush()
    producer.abort_transaction()
    producer.close()
    assert read_all(broker.bootstrap, "kp-txn", "read_committed", 4) == [
        f"kp-committed-{i}" for i in range(4)
    ]
    assert len(read_all(broker.bootstrap, "kp-txn", "read_uncommitted", 7)) == 7


def test_kafkajs_transactions_with_send_offsets(broker_factory):
    broker = broker_factory(**BROKER_SETTINGS)
    create_topic(broker.bootstrap, "js-txn", 1)
    (result,) = kafkajs("transactions", broker.bootstrap, "js-txn", "js-app", 6, "js-group", 4)
    assert result == {"committed": 6, "aborted": 6}
    assert read_all(broker.bootstrap, "js-txn", "read_committed", 6) == [
        f"js-committed-{i}" for i in range(6)
    ]
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "js-group"})
    (committed,) = reader.committed([TopicPartition("js-txn", 0)], 10)
    reader.close()
    assert committed.offset == 4


def test_exactly_once_on_a_three_node_cluster(strom_binary, tmp_path):
    cluster = Cluster(strom_binary, tmp_path / "cluster", nodes=3, extra={
        "offsets.topic.replication.factor": "3",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.num.partitions": "4",
        "min.insync.replicas": "2",
    })
    try:
        cluster.start()
        bootstrap = ",".join(node.bootstrap for node in cluster.nodes)
        total, partitions = 300, 3
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                                replication_factor=3) for topic in ("c-in", "c-out")])
        for topic, future in futures.items():
            future.result(timeout=30)
            wait_for_leader(bootstrap, topic, partitions, timeout_s=30)
        fill_source(bootstrap, "c-in", total, partitions)
        counts = run_pipeline(bootstrap, "c-in", "c-out", "c-group", total, partitions,
                              abort_every=5)
        assert counts["done"] == total, counts
        check_exactly_once(bootstrap, "c-in", "c-out", "c-group", total, partitions)
    finally:
        cluster.kill_all()


def test_exactly_once_when_the_coordinator_and_a_leader_are_killed(strom_binary, tmp_path):
    """kill -9 of the transaction coordinator's broker, then of a leader
    of the output topic, while the pipeline commits. The victims are
    never the group's coordinator: librdkafka 2.16's
    send_offsets_to_transaction waits forever once its cached group
    coordinator leaves the metadata (confluentinc/librdkafka#5511, open),
    which Kafka's metadata triggers the same way."""
    cluster = Cluster(strom_binary, tmp_path / "cluster", nodes=3, extra={
        "offsets.topic.replication.factor": "3",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.num.partitions": "4",
        "min.insync.replicas": "2",
        "replica.lag.time.max.ms": "3000",
    })
    try:
        cluster.start()
        run_failover_pipeline(cluster)
    finally:
        cluster.kill_all()


def run_failover_pipeline(cluster) -> None:
    bootstrap = ",".join(node.bootstrap for node in cluster.nodes)
    total, partitions = 3000, 3
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                            replication_factor=3) for topic in ("f-in", "f-out")])
    for topic, future in futures.items():
        future.result(timeout=30)
        wait_for_leader(bootstrap, topic, partitions, timeout_s=30)
    fill_source(bootstrap, "f-in", total, partitions)

    def leader_of(topic: str, partition: int) -> int:
        view = cluster.running_brokers()[0].metadata([topic])
        return view.topics[topic].partitions[partition].leader

    # Both internal topics exist before the victims are chosen.
    transactional_producer(bootstrap, "f-app").flush()
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "f-probe"})
    for _ in range(60):
        try:
            probe.committed([TopicPartition("f-in", 0)], 10)
            break
        except KafkaException:
            # __consumer_offsets was just created: its partitions load.
            time.sleep(0.5)
    probe.close()
    wait_for_leader(bootstrap, "__consumer_offsets", OFFSETS_PARTITIONS, timeout_s=30)
    coordinator = leader_of("__transaction_state", transaction_partition("f-app", 4))
    group = next(name for name in (f"f-group-{i}" for i in range(100))
                 if leader_of("__consumer_offsets",
                              cw.offsets_partition(name, OFFSETS_PARTITIONS)) != coordinator)
    pipeline = ResilientPipeline(bootstrap, "f-in", "f-out", group, "f-app")
    deadline = time.monotonic() + 150
    kills = []

    def run_until(progress: int):
        while pipeline.counts["committed"] < progress and time.monotonic() < deadline:
            pipeline.step()

    run_until(5)
    cluster.node(coordinator).kill()
    kills.append(("transaction coordinator", coordinator))
    run_until(pipeline.counts["committed"] + 10)
    cluster.restore()
    group_coordinator = leader_of("__consumer_offsets",
                                  cw.offsets_partition(group, OFFSETS_PARTITIONS))
    data_leader = next(leader for leader in (leader_of("f-out", p) for p in range(partitions))
                       if leader != group_coordinator)
    cluster.node(data_leader).kill()
    kills.append(("f-out leader", data_leader))
    run_until(pipeline.counts["committed"] + 10)
    cluster.restore()
    while time.monotonic() < deadline:
        pipeline.step()
        if pipeline.counts["committed"] > 0 and caught_up(bootstrap, "f-in", group, partitions):
            break
    pipeline.close()
    print("failover pipeline:", kills, pipeline.counts, pipeline.errors[-5:])
    check_exactly_once(bootstrap, "f-in", "f-out", group, total, partitions)


