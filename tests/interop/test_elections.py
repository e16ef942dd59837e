"""Preferred leader election and partition reassignment on a 4-broker
Strom cluster of real processes (cluster.py: nodes 1-3 are controller
voters and brokers, node 4 a broker only), while an idempotent acks=all
confluent-kafka producer writes continuously:

(a) the leader of a partition with replicas {1,2,3} is restarted, so
    leadership moves away; once it is back in the ISR,
    `strom leader-election --election-type preferred` moves leadership back
    to it (and confluent-kafka's AdminClient.elect_leaders then finds
    nothing to do: ELECTION_NOT_NEEDED);
(b) `strom reassign-partitions --execute` moves the partition from
    {1,2,3} to {2,3,4} and `--verify` reports it completed; broker 1 then
    no longer has the partition's log directory.

Every acknowledged record is then read back exactly once, in order.

A second test checks the answers of ElectLeaders through confluent-kafka
(PREFERRED_LEADER_NOT_AVAILABLE while the preferred replica is down,
UNKNOWN_TOPIC_OR_PARTITION, ELECTION_NOT_NEEDED for an unclean election of
a led partition; `strom leader-election --all-topic-partitions` exiting 1
on the failure), `strom reassign-partitions --generate`, the controller's
automatic rebalancing
(`leader.imbalance.check.interval.seconds=1`) moving leadership back to a
restarted preferred replica, `--verify`/`--cancel` of a reassignment
to a broker that is down, and the same reassignment completed once the
broker is back, removing a follower (which deletes its log).

ListPartitionReassignments is checked with hand-encoded frames
(clusterwire.py); the `strom` command speaks the other two APIs.
"""
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import clusterwire as cw
from cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "moving-events"
ELECTION_NOT_NEEDED = 84
PREFERRED_LEADER_NOT_AVAILABLE = 80
UNKNOWN_TOPIC_OR_PARTITION = 3


def strom_cli() -> Path:
    explicit = os.environ.get("STROM_BIN_DIR")
    if explicit:
        return Path(explicit) / "strom"
    subprocess.run(["cargo", "build", "--quiet", "-p", "strom-tools", "--bin", "strom"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "strom"


def strom(bootstrap: str, *arguments, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(strom_cli()), "--bootstrap-server", bootstrap, *arguments],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check:
        assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result


class ContinuousProducer:
    """An idempotent acks=all producer writing numbered values to partition
    0 from a thread until stopped; keeps the acknowledged values in order."""

    def __init__(self, bootstrap: str):
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "message.timeout.ms": 120000,
                "linger.ms": 5,
            }
        )
        self.acknowledged = []
        self.failed = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def delivered(self, error, message):
        if error is None:
            self.acknowledged.append(message.value().decode())
        else:
            self.failed.append((message.value().decode(), str(error)))

    def run(self):
        index = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(TOPIC, value=f"v-{index}".encode(), partition=0, on_delivery=self.delivered)
                index += 1
            except BufferError:
                pass
            self.producer.poll(0.005)

    def start(self):
        self.thread.start()

    def finish(self):
        self.stop.set()
        self.thread.join(30)
        remaining = self.producer.flush(150)
        assert remaining == 0, f"{remaining} records neither delivered nor failed"

    def wait_for_more(self, count: int, timeout_s: float = 60.0):
        target = len(self.acknowledged) + count
        deadline = time.monotonic() + timeout_s
        while len(self.acknowledged) < target:
            assert time.monotonic() < deadline, f"only {len(self.acknowledged)} of {target} acknowledged"
            time.sleep(0.05)


def partition_state(node):
    topic = node.metadata([TOPIC]).topics.get(TOPIC)
    if topic is None or topic.error_code != cw.NONE or 0 not in topic.partitions:
        return None
    return topic.partitions[0]


def leader_of(node) -> int:
    state = partition_state(node)
    return -1 if state is None else state.leader


def isr_of(node) -> list:
    state = partition_state(node)
    return [] if state is None else sorted(state.isr)


def read_back(bootstrap: str, expected_count: int):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"elections-check-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    values = []
    deadline = time.monotonic() + 120
    idle_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                if len(values) >= expected_count and time.monotonic() - idle_since > 3:
                    break
                continue
            idle_since = time.monotonic()
            values.append(message.value().decode())
    finally:
        consumer.close()
    return values


@pytest.fixture
def cluster(strom_binary, tmp_path):
    cluster = Cluster(
        strom_binary,
        tmp_path,
        nodes=3,
        extra={
            # The preferred election must come from the command, not from
            # the controller's own rebalancing.
            "auto.leader.rebalance.enable": "false",
            "replica.lag.time.max.ms": "5000",
        },
    )
    cluster.add_broker(4)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.kill_all()


def test_preferred_election_and_reassignment_while_producing(cluster):
    node = {n.node_id: n for n in cluster.nodes}
    bootstrap = ",".join(n.bootstrap for n in cluster.nodes)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"})]
    )
    futures[TOPIC].result(30)
    cluster.wait_until(lambda: isr_of(node[2]) == [1, 2, 3], 60, "a full ISR on {1,2,3}")
    producer = ContinuousProducer(bootstrap)
    producer.start()
    try:
        producer.wait_for_more(200)

        # (a) Restart the preferred leader: leadership moves away, then
        # comes back with a preferred election once it is in sync again.
        assert leader_of(node[2]) == 1
        node[1].terminate()
        cluster.wait_until(lambda: leader_of(node[2]) in (2, 3), 60, "leadership moved off broker 1")
        producer.wait_for_more(200)
        node[1].start()
        cluster.wait_until(lambda: 1 in isr_of(node[2]), 90, "broker 1 back in the ISR")
        assert leader_of(node[2]) != 1
        result = strom(
            node[2].bootstrap, "leader-election", "--election-type", "preferred",
            "--topic", TOPIC, "--partition", "0",
        )
        assert f"Successfully completed leader election (PREFERRED) for partitions {TOPIC}-0" in result.stdout
        cluster.wait_until(lambda: leader_of(node[3]) == 1, 30, "broker 1 leads again")
        outcome = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)]).result(30)
        error = outcome[TopicPartition(TOPIC, 0)]
        assert error is not None and error.code() == ELECTION_NOT_NEEDED, error
        producer.wait_for_more(200)

        # (b) Reassign {1,2,3} -> {2,3,4} while producing.
        plan = cluster.base_dir / "plan.json"
        plan.write_text(json.dumps(
            {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [2, 3, 4]}]}
        ))
        result = strom(node[3].bootstrap, "reassign-partitions", "--execute", "--reassignment-json-file", str(plan))
        assert f"Successfully started partition reassignments for {TOPIC}-0" in result.stdout
        assert '"replicas":[1,2,3]' in result.stdout, result.stdout
        error_code, ongoing = cw.list_partition_reassignments(node[3].port, {TOPIC: [0]})
        assert error_code == cw.NONE
        if (TOPIC, 0) in ongoing:
            replicas, adding, removing = ongoing[(TOPIC, 0)]
            assert (replicas, adding, removing) == ([2, 3, 4, 1], [4], [1]), ongoing

        def completed():
            # (node 2 may not have applied the start yet: --verify then
            # reports the replicas differing from the plan and exits 1.)
            verify = strom(
                node[2].bootstrap, "reassign-partitions", "--verify", "--reassignment-json-file", str(plan),
                check=False,
            )
            return f"Reassignment of partition {TOPIC}-0 is completed." in verify.stdout

        cluster.wait_until(completed, 90, "the reassignment completed", interval_s=0.5)
        producer.wait_for_more(200)
    finally:
        producer.finish()

    for broker in (2, 3, 4):
        # Each broker's image may be a moment behind the controller's.
        cluster.wait_until(
            lambda: (partition_state(node[broker]) or cw.PartitionState(0, 0, -1, 0, [], [], [])).replicas
            == [2, 3, 4],
            30,
            f"broker {broker} sees replicas [2, 3, 4]",
        )
        assert leader_of(node[broker]) in (2, 3, 4), broker
        cluster.wait_until(
            lambda: cw.list_partition_reassignments(node[broker].port) == (cw.NONE, {}),
            30,
            f"broker {broker} lists no reassignment",
        )
    cluster.wait_until(
        lambda: not (node[1].data_dir / f"{TOPIC}-0").exists(),
        30,
        "broker 1 deleted its log of the partition",
    )
    assert (node[4].data_dir / f"{TOPIC}-0").is_dir()

    acknowledged = producer.acknowledged
    assert len(acknowledged) >= 800
    survivors = ",".join(node[n].bootstrap for n in (2, 3, 4))
    read = read_back(survivors, len(acknowledged))
    assert len(read) == len(set(read)), "no record twice"
    acknowledged_set = set(acknowledged)
    assert [value for value in read if value in acknowledged_set] == acknowledged, (
        "every acknowledged record once, in order"
    )



@pytest.fixture
def rebalancing_cluster(strom_binary, tmp_path):
    cluster = Cluster(
        strom_binary,
        tmp_path,
        nodes=3,
        extra={"leader.imbalance.check.interval.seconds": "1"},
    )
    cluster.add_broker(4)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.kill_all()


def test_automatic_rebalance_election_errors_and_cancellation(rebalancing_cluster):
    cluster = rebalancing_cluster
    node = {n.node_id: n for n in cluster.nodes}
    bootstrap = ",".join(n.bootstrap for n in cluster.nodes)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2, 3]])])
    futures[TOPIC].result(30)
    cluster.wait_until(lambda: isr_of(node[2]) == [1, 2, 3], 60, "a full ISR on {1,2,3}")
    partition = TopicPartition(TOPIC, 0)

    # While the preferred replica is down, a preferred election cannot run.
    node[1].terminate()
    cluster.wait_until(lambda: leader_of(node[2]) in (2, 3), 60, "leadership moved off broker 1")
    outcome = admin.elect_leaders(ElectionType.PREFERRED, [partition]).result(30)
    assert outcome[partition].code() == PREFERRED_LEADER_NOT_AVAILABLE, outcome
    unknown = TopicPartition("no-such-topic", 0)
    outcome = admin.elect_leaders(ElectionType.PREFERRED, [unknown]).result(30)
    assert outcome[unknown].code() == UNKNOWN_TOPIC_OR_PARTITION, outcome
    # An unclean election is not needed: the partition has a live leader.
    outcome = admin.elect_leaders(ElectionType.UNCLEAN, [partition]).result(30)
    assert outcome[partition].code() == ELECTION_NOT_NEEDED, outcome
    # The command over every partition reports the failure and exits 1.
    result = strom(
        node[2].bootstrap, "leader-election", "--election-type", "preferred", "--all-topic-partitions",
        check=False,
    )
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert (
        f"Error completing leader election (PREFERRED) for partition: {TOPIC}-0: PREFERRED_LEADER_NOT_AVAILABLE"
        in result.stdout
    ), result.stdout

    # Back and in sync, broker 1 leads again without being asked: broker
    # 1's imbalance (its one preferred partition led elsewhere) is above 10 %.
    node[1].start()
    cluster.wait_until(lambda: leader_of(node[3]) == 1, 90, "the rebalance moved leadership back to 1")

    # --generate proposes Kafka's placement over the given brokers.
    topics = cluster.base_dir / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    result = strom(
        node[2].bootstrap, "reassign-partitions", "--generate",
        "--topics-to-move-json-file", str(topics), "--broker-list", "4,3,2",
    )
    current, proposed = result.stdout.split("Proposed partition reassignment configuration\n")
    assert json.loads(current.split("Current partition replica assignment\n")[1]) == {
        "version": 1,
        "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["any"] * 3}],
    }
    assert json.loads(proposed) == {
        "version": 1,
        "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [2, 3, 4], "log_dirs": ["any"] * 3}],
    }

    # A reassignment to a broker that is down stays in progress until it
    # is cancelled; cancelling restores the replicas.
    node[4].terminate()
    plan = cluster.base_dir / "plan.json"
    plan.write_text(json.dumps(
        {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1, 2, 4]}]}
    ))
    strom(node[2].bootstrap, "reassign-partitions", "--execute", "--reassignment-json-file", str(plan))
    # ListPartitionReassignments is answered by the active controller;
    # Metadata (which --verify also reads) by each broker's own image, a
    # moment behind: the checks wait for both.
    ongoing = {(TOPIC, 0): ([1, 2, 4, 3], [4], [3])}
    for each in (node[1], node[2], node[3]):
        cluster.wait_until(
            lambda: cw.list_partition_reassignments(each.port) == (cw.NONE, ongoing),
            30,
            f"node {each.node_id} lists the reassignment",
        )
    verify = strom(node[3].bootstrap, "reassign-partitions", "--verify", "--reassignment-json-file", str(plan))
    assert f"Reassignment of partition {TOPIC}-0 is still in progress." in verify.stdout, verify.stdout
    result = strom(node[3].bootstrap, "reassign-partitions", "--cancel", "--reassignment-json-file", str(plan))
    assert f"Successfully cancelled partition reassignments for: {TOPIC}-0" in result.stdout, result.stdout
    for each in (node[1], node[2], node[3]):
        cluster.wait_until(
            lambda: cw.list_partition_reassignments(each.port) == (cw.NONE, {}),
            30,
            f"node {each.node_id} lists no reassignment",
        )
    cluster.wait_until(
        lambda: (partition_state(node[2]) or cw.PartitionState(0, 0, -1, 0, [], [], [])).replicas == [1, 2, 3],
        30,
        "the replicas restored",
    )
    assert leader_of(node[2]) == 1
    # Cancelling again: nothing is in progress.
    again = strom(node[3].bootstrap, "reassign-partitions", "--cancel", "--reassignment-json-file", str(plan), check=False)
    assert again.returncode == 1, (again.stdout, again.stderr)
    assert "NO_REASSIGNMENT_IN_PROGRESS" in again.stdout, again.stdout
    # And the replica set now differs from the plan: --verify fails.
    verify = strom(node[3].bootstrap, "reassign-partitions", "--verify", "--reassignment-json-file", str(plan), check=False)
    assert verify.returncode == 1
    assert "but replica set is 1,2,3 rather than 1,2,4." in verify.stdout, verify.stdout

    # With broker 4 back, the same plan runs to completion: it removes a
    # follower (3), which stops fetching and deletes its log.
    node[4].start()
    cluster.wait_ready()
    strom(node[2].bootstrap, "reassign-partitions", "--execute", "--reassignment-json-file", str(plan))

    def completed():
        verify = strom(node[2].bootstrap, "reassign-partitions", "--verify", "--reassignment-json-file", str(plan), check=False)
        return f"Reassignment of partition {TOPIC}-0 is completed." in verify.stdout

    cluster.wait_until(completed, 90, "the reassignment completed", interval_s=0.5)
    cluster.wait_until(
        lambda: (partition_state(node[4]) or cw.PartitionState(0, 0, -1, 0, [], [], [])).replicas == [1, 2, 4],
        30,
        "broker 4 sees replicas [1, 2, 4]",
    )
    assert leader_of(node[4]) == 1
    cluster.wait_until(
        lambda: not (node[3].data_dir / f"{TOPIC}-0").exists(),
        30,
        "broker 3 deleted its log of the partition",
    )
    assert (node[4].data_dir / f"{TOPIC}-0").is_dir()
