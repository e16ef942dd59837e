"""strom-consumer against Strom's broker, in groups shared with confluent-kafka
(librdkafka) consumers: exactly-once coverage while members leave and join,
cooperative-sticky rebalancing that leaves unaffected partitions in place,
and resuming from committed offsets after a consumer or a broker restart.

The Strom members are `strom-interop-consumer` processes (tests/src/bin),
which print every record and rebalance callback as a JSON line and commit
what they printed after each poll. The binary comes from STROM_BIN_DIR (set by
scripts/test) or is built with cargo on first use."""
import json
import os
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import rawwire

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 6
WAIT_S = 60.0


@pytest.fixture(scope="module")
def consumer_binary() -> Path:
    explicit = os.environ.get("STROM_BIN_DIR")
    if explicit:
        return Path(explicit) / "strom-interop-consumer"
    subprocess.run(
        ["cargo", "build", "--quiet", "-p", "strom-integration", "--bin", "strom-interop-consumer"],
        cwd=ROOT,
        check=True,
    )
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "strom-interop-consumer"


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(timeout=20)


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    """Values `start..start+count` (as text), spread round-robin."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for number in range(start, start + count):
        producer.produce(topic, str(number).encode(), key=str(number).encode(),
                         partition=number % PARTITIONS)
        if number % 1000 == 0:
            producer.poll(0)
    assert producer.flush(20) == 0


def wait_until(condition, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


class StromMember:
    """A strom-interop-consumer process and what it printed."""

    def __init__(self, binary: Path, bootstrap: str, topic: str, group: str,
                 strategy: str = "range", max_records: int = None, log_dir: Path = None):
        args = [str(binary), "--bootstrap", bootstrap, "--topic", topic, "--group", group,
                "--property", f"partition.assignment.strategy={strategy}",
                "--property", "session.timeout.ms=6000",
                "--property", "heartbeat.interval.ms=300",
                "--property", "fetch.max.wait.ms=100",
                "--property", "metadata.max.age.ms=1000"]
        if max_records is not None:
            args += ["--max-records", str(max_records)]
        self.stderr = open(log_dir / f"strom-consumer-{id(self)}.log", "wb") if log_dir else subprocess.DEVNULL
        self.process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr)
        self.lock = threading.Lock()
        self.events = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            event = json.loads(line)
            with self.lock:
                self.events.append(event)

    def of_kind(self, kind: str) -> list:
        with self.lock:
            return [event for event in self.events if event["event"] == kind]

    @property
    def seen(self) -> list:
        return [(r["partition"], r["offset"], int(r["value"])) for r in self.of_kind("record")]

    def partitions(self, kind: str) -> list:
        return [sorted(p["partition"] for p in e["partitions"]) for e in self.of_kind(kind)]

    def stop(self) -> None:
        """Closes stdin: the member commits, leaves the group and exits."""
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()
        self.wait()

    def wait(self) -> None:
        code = self.process.wait(timeout=WAIT_S)
        self.reader.join(timeout=10)
        assert code == 0, f"strom-interop-consumer exited with {code}"
        assert self.of_kind("closed"), "the member did not close cleanly"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class ConfluentMember:
    """A confluent-kafka member polled on its own thread; commits what it
    consumed before giving partitions up and on close."""

    def __init__(self, bootstrap: str, topic: str, group: str, strategy: str = "range"):
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "topic.metadata.refresh.interval.ms": 1000,
            "partition.assignment.strategy": strategy,
        })
        self.lock = threading.Lock()
        self.records = []
        self.assigned = []
        self.revoked = []
        self.errors = []
        self.running = True
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_assign(self, _consumer, partitions):
        with self.lock:
            self.assigned.append(sorted(p.partition for p in partitions))

    def _on_revoke(self, _consumer, partitions):
        with self.lock:
            self.revoked.append(sorted(p.partition for p in partitions))
        self._commit()

    def _commit(self):
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException:
            pass  # nothing consumed since the last commit

    def _run(self):
        while self.running:
            message = self.consumer.poll(0.1)
            if message is None:
                continue
            if message.error():
                self.errors.append(str(message.error()))
                continue
            with self.lock:
                self.records.append((message.partition(), message.offset(),
                                     int(message.value()), time.time()))

    @property
    def seen(self) -> list:
        with self.lock:
            return [record[:3] for record in self.records]

    def stop(self):
        self.running = False
        self.thread.join(timeout=WAIT_S)
        self._commit()
        self.consumer.close()
        assert not self.errors, self.errors


def check_exactly_once(members, total: int) -> None:
    seen = [record for member in members for record in member.seen]
    keys = [(partition, offset) for partition, offset, _ in seen]
    duplicates = len(keys) - len(set(keys))
    assert duplicates == 0, f"{duplicates} records were delivered twice"
    assert sorted(value for _, _, value in seen) == list(range(total))


def count_seen(members) -> int:
    return sum(len(member.seen) for member in members)


def test_mixed_group_sees_every_record_once_while_members_leave_and_join(
        broker, consumer_binary, tmp_path):
    topic, group = "mixed-group", "mixed"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 3000)
    first = StromMember(consumer_binary, broker.bootstrap, topic, group, log_dir=tmp_path)
    second = StromMember(consumer_binary, broker.bootstrap, topic, group, log_dir=tmp_path)
    confluent = ConfluentMember(broker.bootstrap, topic, group)
    members = [first, second, confluent]
    try:
        wait_until(lambda: count_seen(members) >= 3000, "the first 3000 records")
        # The three members share the six partitions, two each.
        wait_until(lambda: [len(a[-1]) if a else 0 for a in
                            (first.partitions("assigned"), second.partitions("assigned"),
                             confluent.assigned)] == [2, 2, 2],
                   "two partitions on every member")
        before = [len(member.seen) for member in members]
        produce(broker.bootstrap, topic, 3000, 2000)
        wait_until(lambda: count_seen(members) >= 5000, "5000 records")
        assert all(len(member.seen) > count for member, count in zip(members, before)), \
            "every member of the group read records"
        second.stop()  # a Strom member leaves
        produce(broker.bootstrap, topic, 5000, 2000)
        wait_until(lambda: count_seen(members) >= 7000, "7000 records after a leave")
        third = StromMember(consumer_binary, broker.bootstrap, topic, group, log_dir=tmp_path)
        members.append(third)
        wait_until(lambda: third.partitions("assigned"), "the new Strom member's assignment")
        produce(broker.bootstrap, topic, 7000, 2000)
        wait_until(lambda: count_seen(members) >= 9000, "9000 records after a join")
        confluent.stop()  # the confluent-kafka member leaves
        produce(broker.bootstrap, topic, 9000, 1000)
        wait_until(lambda: count_seen(members) >= 10000, "all 10000 records")
        first.stop()
        third.stop()
    finally:
        for member in members:
            if isinstance(member, StromMember):
                member.kill()
    check_exactly_once(members, 10000)
    assert third.seen, "the member that joined late got partitions and records"


def test_cooperative_sticky_keeps_unaffected_partitions_flowing(
        broker, consumer_binary, tmp_path):
    topic, group = "cooperative", "cooperative"
    create_topic(broker.bootstrap, topic)
    produced = [0]
    stop_producing = threading.Event()

    def keep_producing():
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2})
        while not stop_producing.is_set():
            number = produced[0]
            producer.produce(topic, str(number).encode(), partition=number % PARTITIONS)
            produced[0] += 1
            if number % 12 == 11:
                producer.poll(0)
                time.sleep(0.01)
        assert producer.flush(20) == 0

    producer_thread = threading.Thread(target=keep_producing, daemon=True)
    producer_thread.start()
    first = StromMember(consumer_binary, broker.bootstrap, topic, group,
                        strategy="cooperative-sticky", log_dir=tmp_path)
    members = [first]
    try:
        wait_until(lambda: {p for p, _, _ in first.seen} == set(range(PARTITIONS)),
                   "the first member reading all partitions")
        second = StromMember(consumer_binary, broker.bootstrap, topic, group,
                             strategy="cooperative-sticky", log_dir=tmp_path)
        members.append(second)
        wait_until(lambda: second.seen, "records on the second Strom member")
        confluent = ConfluentMember(broker.bootstrap, topic, group, strategy="cooperative-sticky")
        members.append(confluent)
        wait_until(lambda: confluent.seen, "records on the confluent-kafka member")
        time.sleep(1.0)  # let every member read past the rebalances
        stop_producing.set()
        producer_thread.join(timeout=WAIT_S)
        wait_until(lambda: count_seen(members) >= produced[0], "every produced record")
        closing_ms = time.time() * 1000
        confluent.stop()
        second.stop()
        first.stop()
    finally:
        stop_producing.set()
        for member in members:
            if isinstance(member, StromMember):
                member.kill()
    check_exactly_once(members, produced[0])
    check_incremental(first, second, confluent, closing_ms)


def check_incremental(first, second, confluent, closing_ms: float) -> None:
    """Cooperative rebalancing: a member gives up only partitions that move
    and keeps reading the partitions it retains through the rebalances."""
    assert first.partitions("assigned")[0] == list(range(PARTITIONS))
    revoked = [sorted(p["partition"] for p in event["partitions"])
               for event in first.of_kind("revoked") if event["time_ms"] < closing_ms]
    moved = {p for event in revoked for p in event}
    assert revoked and all(len(event) < PARTITIONS for event in revoked), \
        f"the first member revoked {revoked}: cooperative rebalancing revokes a subset"
    joined = {p for event in second.partitions("assigned") for p in event}
    joined |= {p for event in confluent.assigned for p in event}
    assert moved <= joined, "only partitions that moved to another member were revoked"
    retained = set(range(PARTITIONS)) - moved
    assert retained, "the first member kept some partitions"
    window_start = min(e["time_ms"] for e in second.of_kind("started"))
    window_end = max(e["time_ms"] for member in (first, second)
                     for e in member.of_kind("assigned")) + 1000
    for partition in retained:
        records = [r for r in first.of_kind("record") if r["partition"] == partition]
        offsets = [r["offset"] for r in records]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), \
            f"partition {partition} was read without a gap or a repeat"
        # Records kept arriving while the group rebalanced twice.
        times = [window_start] + [r["time_ms"] for r in records
                                  if window_start <= r["time_ms"] <= window_end] + [window_end]
        gap_ms = max(b - a for a, b in zip(times, times[1:]))
        print(f"partition {partition}: kept by the first member, longest gap between records "
              f"while the group rebalanced {gap_ms} ms; revocations {revoked}")
        assert len(times) > 2 and gap_ms < 3000, \
            f"partition {partition} stalled for {gap_ms} ms during the rebalance"


def test_strom_consumer_resumes_from_committed_offsets_after_restarts(
        broker, consumer_binary, tmp_path):
    topic, group = "resume", "resume"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 3000)
    runs = []

    def run(max_records=None):
        member = StromMember(consumer_binary, broker.bootstrap, topic, group,
                             max_records=max_records, log_dir=tmp_path)
        runs.append(member)
        return member

    # Consumer restart: stop after 700 records, a new process resumes.
    run(max_records=700).wait()
    assert len(runs[0].seen) == 700
    run(max_records=800).wait()
    # Broker restart (graceful, then hard): committed offsets survive it.
    broker.restart()
    run(max_records=500).wait()
    broker.restart(hard=True)
    produce(broker.bootstrap, topic, 3000, 1000)
    last = run()
    try:
        wait_until(lambda: count_seen(runs) >= 4000, "the remaining records")
        last.stop()
    finally:
        last.kill()
    assert [len(member.seen) for member in runs[:3]] == [700, 800, 500]
    # No record twice and none missing: every run started at the offsets the
    # previous one committed, across both broker restarts.
    check_exactly_once(runs, 4000)


def broker_keeps_fetch_sessions(port: int, topic: str) -> bool:
    """Whether the broker answers a full Fetch v7 asking for a new session
    (session id 0, epoch 0) with a session id."""
    partitions = rawwire.array([struct.pack(">iqqi", 0, 0, -1, 1 << 20)])
    body = struct.pack(">iiiibii", -1, 0, 1, 1 << 20, 0, 0, 0)
    body += rawwire.array([rawwire.string(topic) + partitions]) + rawwire.array([])
    with rawwire.Connection(port) as connection:
        response = connection.call(1, 7, body)
    _throttle_ms, error_code, session_id = struct.unpack(">ihi", response[:10])
    assert error_code == 0
    return session_id != 0


def test_strom_consumer_uses_fetch_sessions_where_the_broker_keeps_them(
        broker, consumer_binary, tmp_path):
    topic = "sessions"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 3000)
    member = StromMember(consumer_binary, broker.bootstrap, topic, "sessions", log_dir=tmp_path)
    try:
        wait_until(lambda: len(member.seen) >= 3000, "every record")
        time.sleep(0.5)  # a few more (empty, incremental) fetches
        member.stop()
    finally:
        member.kill()
    check_exactly_once([member], 3000)
    (sessions,) = [event["sessions"] for event in member.of_kind("fetch_sessions")]
    print(f"fetch sessions held at the end: {sessions}")
    assert list(sessions) == ["1"]
    if broker_keeps_fetch_sessions(broker.port, topic):
        assert sessions["1"] != 0, "the consumer fetched without the session the broker offered"
    else:
        assert sessions["1"] == 0
