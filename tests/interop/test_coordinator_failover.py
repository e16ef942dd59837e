"""The group coordinator fails over with its `__consumer_offsets`
partition, with clients written by others: three Strom broker processes
(cluster.py), `__consumer_offsets` with three replicas and
min.insync.replicas=2, and consumer groups of confluent-kafka (librdkafka),
kafka-python and KafkaJS reading and committing (manual commits, a few a
second) while an idempotent acks=all confluent-kafka producer writes. The
broker hosting the groups' coordinator is killed with kill -9 while they
run, and started again.

Each client is the one member of its own group, and the three group ids
are chosen to live on the same `__consumer_offsets` partition, so one kill
takes all three coordinators; with one member per group, "the last commit
a client saw acknowledged" is exact for every partition. Checked:

- right after the failover, the new coordinator answers OffsetFetch with
  at least every offset whose commit was acknowledged before the kill (no
  acknowledged commit is lost; later commits may have landed already);
- each client commits again through the new coordinator, reads every
  record, and at the end OffsetFetch equals the last commit it saw
  acknowledged, partition by partition;
- every record the producer saw acknowledged is in the topic exactly once
  (no duplicate from the producer's retries across the change of leader of
  the partition the killed broker led).
"""
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as PythonPartition
from kafka.structs import OffsetAndMetadata

import clusterwire as cw
from cluster import OFFSETS_PARTITIONS, Cluster, wait_until

KAFKAJS = Path(__file__).resolve().parent / "js" / "kafkajs_client.js"
TOPIC = "failover-events"
PARTITIONS = 3
RECORDS = 3000
# A member keeps its session across the failover (fencing the dead broker
# takes cluster.SESSION_TIMEOUT_MS, then the new leader loads).
MEMBER_SESSION_MS = 10000
COMMIT_EVERY = 25


def groups_on_one_partition() -> dict:
    """A group id per client, all on the same `__consumer_offsets` partition."""
    target = cw.offsets_partition("failover-librdkafka", OFFSETS_PARTITIONS)
    chosen = {"librdkafka": "failover-librdkafka"}
    for client in ("kafka-python", "kafkajs"):
        suffix = 0
        while cw.offsets_partition(f"failover-{client}-{suffix}", OFFSETS_PARTITIONS) != target:
            suffix += 1
        chosen[client] = f"failover-{client}-{suffix}"
    return chosen


class Commits:
    """The commits one client saw acknowledged, in order, with when."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acknowledged = []  # (monotonic time, {partition: offset})
        self.refused = []
        self.seen = set()
        self.done = False
        self.error = None

    def ok(self, offsets: dict) -> None:
        with self.lock:
            self.acknowledged.append((time.monotonic(), dict(offsets)))

    def last(self, before: float = None) -> dict:
        """Per partition, the last offset acknowledged (before a time)."""
        result = {}
        with self.lock:
            for at, offsets in self.acknowledged:
                if before is None or at < before:
                    result.update(offsets)
        return result

    def count_after(self, moment: float) -> int:
        with self.lock:
            return sum(1 for at, _ in self.acknowledged if at > moment)


def produce(bootstrap: str, stop_after: int, acknowledged: list, errors: list) -> None:
    """RECORDS idempotent acks=all records, spread over about 20 s."""
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "message.timeout.ms": 120000,
        "linger.ms": 5,
    })

    def delivered(error, message):
        if error is None:
            acknowledged.append(message.value().decode())
        else:
            errors.append(str(error))

    for index in range(stop_after):
        producer.produce(TOPIC, key=str(index).encode(), value=f"v-{index}".encode(),
                         on_delivery=delivered)
        producer.poll(0)
        if index % 50 == 49:
            time.sleep(0.3)
    remaining = producer.flush(150)
    if remaining:
        errors.append(f"{remaining} records neither delivered nor failed")


def run_librdkafka(bootstrap: str, group: str, commits: Commits, deadline: float) -> None:
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": MEMBER_SESSION_MS,
        "heartbeat.interval.ms": 1000,
    })
    positions = {}
    since = 0

    def commit() -> bool:
        offsets = [ConfluentPartition(TOPIC, p, o) for p, o in positions.items()]
        try:
            answered = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            commits.refused.append(str(error))
            return False
        if any(tp.error is not None for tp in answered):
            commits.refused.append(str([tp.error for tp in answered]))
            return False
        commits.ok({tp.partition: tp.offset for tp in answered})
        return True

    try:
        consumer.subscribe([TOPIC])
        while len(commits.seen) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            commits.seen.add(message.value().decode())
            positions[message.partition()] = message.offset() + 1
            since += 1
            time.sleep(0.003)
            if since >= COMMIT_EVERY:
                since = 0
                commit()
        while positions and not commit() and time.monotonic() < deadline:
            time.sleep(0.5)
        commits.done = len(commits.seen) >= RECORDS
    except Exception as error:  # reported by the test, not lost in a thread
        commits.error = repr(error)
    finally:
        consumer.close()


def run_kafka_python(bootstrap: str, group: str, commits: Commits, deadline: float) -> None:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=MEMBER_SESSION_MS,
        heartbeat_interval_ms=1000,
        request_timeout_ms=30000,
    )
    positions = {}
    since = 0

    def commit() -> bool:
        offsets = {PythonPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in positions.items()}
        try:
            consumer.commit(offsets)
        except Exception as error:  # kafka-python raises several types here
            commits.refused.append(repr(error))
            return False
        commits.ok({tp.partition: meta.offset for tp, meta in offsets.items()})
        return True

    try:
        consumer.subscribe([TOPIC])
        while len(commits.seen) < RECORDS and time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=500, max_records=50)
            for partition, messages in batches.items():
                for message in messages:
                    commits.seen.add(message.value.decode())
                    positions[partition.partition] = message.offset + 1
                    since += 1
                    time.sleep(0.003)
                    if since >= COMMIT_EVERY:
                        since = 0
                        commit()
        while positions and not commit() and time.monotonic() < deadline:
            time.sleep(0.5)
        commits.done = len(commits.seen) >= RECORDS
    except Exception as error:
        commits.error = repr(error)
    finally:
        consumer.close(autocommit=False)


def start_kafkajs(bootstrap: str, group: str, commits: Commits, stderr_path: Path):
    """The KafkaJS member as a process (standard error to `stderr_path`); a
    thread turns its lines into commits."""
    nodejs = shutil.which("node")
    assert nodejs is not None, "node is not installed (scripts/node-env installs it)"
    assert (KAFKAJS.parent / "node_modules" / "kafkajs").is_dir(), "run scripts/node-env first"
    with open(stderr_path, "w") as stderr:
        process = subprocess.Popen(
            [nodejs, str(KAFKAJS), "commit-through", bootstrap, TOPIC, str(RECORDS), group],
            stdout=subprocess.PIPE, stderr=stderr, text=True)

    def read():
        for line in process.stdout:
            if not line.strip():
                continue
            document = json.loads(line)
            if "committed" in document:
                commits.ok({int(p): o for p, o in document["committed"].items()})
            elif "commitError" in document:
                commits.refused.append(document["commitError"])
            elif "seen" in document:
                commits.done = document["seen"] >= RECORDS

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return process, reader


def committed(bootstrap: str, group: str) -> dict:
    """OffsetFetch for the group (confluent-kafka, without joining it)."""
    checker = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        answer = checker.committed([ConfluentPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=20)
        return {tp.partition: tp.offset for tp in answer if tp.offset >= 0}
    finally:
        checker.close()


def committed_or_none(bootstrap: str, group: str):
    """`committed`, or None while the coordinator cannot answer yet."""
    try:
        return committed(bootstrap, group)
    except KafkaException:
        return None


def read_back(bootstrap: str, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-read-back",
                         "enable.auto.commit": False})
    consumer.assign([ConfluentPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
        # Anything more would be a duplicate.
        while time.monotonic() < deadline:
            message = consumer.poll(2.0)
            if message is None:
                break
            if message.error() is None:
                values.append(message.value().decode())
    finally:
        consumer.close()
    return values


@pytest.mark.timeout(420)
def test_groups_keep_consuming_and_committing_while_the_coordinator_is_killed(strom_binary, tmp_path):
    cluster = Cluster(strom_binary, tmp_path / "cluster", nodes=3, extra={
        "offsets.topic.replication.factor": "3",
        "min.insync.replicas": "2",
        "replica.lag.time.max.ms": "3000",
    })
    try:
        cluster.start()
        run_failover(cluster)
    finally:
        cluster.kill_all()


def run_failover(cluster: Cluster) -> None:
    nodes = cluster.nodes
    bootstrap = ",".join(node.bootstrap for node in nodes)
    result = cw.create_topics(nodes[0].port, [(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})])
    assert result[TOPIC][0] == cw.NONE, result
    cluster.wait_until(lambda: cluster.topic_everywhere(TOPIC, PARTITIONS), 30, f"{TOPIC} led everywhere")
    groups = groups_on_one_partition()

    def coordinator() -> int:
        code, node_id, _, _ = cw.find_coordinator(cluster.running_brokers()[0].port, groups["librdkafka"])
        return node_id if code == cw.NONE else None

    first = cluster.wait_until(coordinator, 30, "a coordinator for the groups")
    view = nodes[0].metadata(["__consumer_offsets"])
    replicas = {len(p.replicas) for p in view.topics["__consumer_offsets"].partitions.values()}
    assert replicas == {3}, "offsets.topic.replication.factor 3 on three brokers"

    acknowledged, producer_errors = [], []
    producer = threading.Thread(target=produce, args=(bootstrap, RECORDS, acknowledged, producer_errors))
    producer.start()
    deadline = time.monotonic() + 300
    commits = {name: Commits() for name in groups}
    threads = [
        threading.Thread(target=run_librdkafka, args=(bootstrap, groups["librdkafka"], commits["librdkafka"], deadline)),
        threading.Thread(target=run_kafka_python,
                         args=(bootstrap, groups["kafka-python"], commits["kafka-python"], deadline)),
    ]
    for thread in threads:
        thread.start()
    kafkajs_stderr = cluster.base_dir / "kafkajs.stderr"
    kafkajs, kafkajs_reader = start_kafkajs(bootstrap, groups["kafkajs"], commits["kafkajs"], kafkajs_stderr)
    try:
        # Every client has committed through the first coordinator.
        def progress() -> str:
            return "\n".join(
                f"{name}: seen {len(c.seen)}, acknowledged {len(c.acknowledged)}, "
                f"refused {c.refused[-3:]}, error {c.error}" for name, c in commits.items()
            ) + (f"\nproduced {len(acknowledged)}, producer errors {producer_errors[:3]}"
                 f"\nKafkaJS: {kafkajs_stderr.read_text()[-3000:]}")

        wait_until(lambda: all(len(c.acknowledged) >= 3 for c in commits.values()), 90,
                   "every client committed before the kill", details=progress)
        # Kill the coordinator's broker a moment after it acknowledged a
        # commit: the followers have that commit, but not yet a high
        # watermark that covers it.
        total = sum(len(c.acknowledged) for c in commits.values())
        wait_until(lambda: sum(len(c.acknowledged) for c in commits.values()) > total, 30,
                   "a fresh acknowledged commit", interval_s=0.001, details=progress)
        victim = cluster.node(first)
        leaders = {p.leader for p in nodes[0].metadata([TOPIC]).topics[TOPIC].partitions.values()}
        produced_at_kill = len(acknowledged)
        victim.kill()
        killed_at = time.monotonic()
        before = {name: c.last(before=killed_at) for name, c in commits.items()}

        # The new coordinator has every acknowledged commit.
        survivors = ",".join(node.bootstrap for node in cluster.others(victim))
        moved = cluster.wait_until(lambda: coordinator() not in (None, first) and coordinator(), 60,
                                   "a new coordinator")
        for name, group in groups.items():
            found = cluster.wait_until(lambda: committed_or_none(survivors, group), 60,
                                       f"OffsetFetch of {group}")
            for partition, offset in before[name].items():
                assert found.get(partition, -1) >= offset, \
                    f"{name}: acknowledged commit {partition}@{offset} lost (coordinator {first} -> {moved}): {found}"
        answered_after_s = time.monotonic() - killed_at

        victim.start()
        cluster.wait_ready()
        for thread in threads:
            thread.join(max(1.0, deadline - time.monotonic()))
        kafkajs.wait(max(1.0, deadline - time.monotonic()))
        kafkajs_reader.join(10)
        producer.join(max(1.0, deadline - time.monotonic()))
    finally:
        if kafkajs.poll() is None:
            kafkajs.kill()
            kafkajs.wait(10)

    stderr = kafkajs_stderr.read_text()
    print(f"coordinator {first} killed, then {moved}, answering OffsetFetch for the three groups "
          f"{answered_after_s:.1f} s after the kill; commits before the kill {before}")
    print(progress())
    for name, client in commits.items():
        print(f"{name}: {client.count_after(killed_at)} commits acknowledged after the kill, "
              f"{len(client.refused)} refused: {sorted(set(client.refused))[:6]}")
    assert kafkajs.returncode == 0, f"KafkaJS member failed:\n{stderr[-4000:]}"
    for name, client in commits.items():
        assert client.error is None, f"{name}: {client.error}"
        assert client.done, f"{name} did not read every record (refused commits: {client.refused[-5:]})"
        assert client.count_after(killed_at) > 0, f"{name} never committed after the kill"
        assert committed(bootstrap, groups[name]) == client.last(), \
            f"{name}: OffsetFetch is not the last commit it saw acknowledged"

    # The producer was writing when the broker died, to a partition it led.
    assert first in leaders, f"node {first} led no partition of {TOPIC}: {leaders}"
    assert produced_at_kill < RECORDS, "the producer had finished before the kill"
    assert not producer_errors, producer_errors[:5]
    assert len(acknowledged) == RECORDS
    values = read_back(bootstrap, RECORDS)
    assert len(values) == len(set(values)), "no record is stored twice"
    assert sorted(values) == sorted(acknowledged), "every acknowledged record once"
