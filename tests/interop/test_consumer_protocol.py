"""The consumer group protocol of KIP-848 (`group.protocol=consumer`) with
confluent-kafka (librdkafka) against Strom's coordinator: one member reading
and committing everything, scaling 1 -> 3 -> 1 without a partition owned
twice, a killed member's partitions moving on after the session timeout, the
server-side range assignor, a regular-expression subscription, and
`strom groups describe` on a consumer group."""
import json
import os
from pathlib import Path
import signal
import subprocess
import sys
import textwrap
import time

from confluent_kafka import Consumer, ConsumerGroupType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 6
ROOT = Path(__file__).resolve().parents[2]


def strom(bootstrap: str, *arguments) -> str:
    """Runs the strom CLI (from STROM_BIN_DIR, or built) and returns its output."""
    explicit = os.environ.get("STROM_BIN_DIR")
    if explicit:
        binary = Path(explicit) / "strom"
    else:
        subprocess.run(["cargo", "build", "--quiet", "-p", "strom-tools", "--bin", "strom"],
                       cwd=ROOT, check=True)
        binary = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "strom"
    result = subprocess.run([str(binary), "--bootstrap-server", bootstrap, *arguments],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result.stdout

# Short broker-side timeouts so that a killed member is fenced within seconds.
FAST_SESSIONS = {
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
}


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(timeout=20)


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for number in range(start, start + count):
        producer.produce(topic, str(number).encode(), partition=number % PARTITIONS)
    assert producer.flush(20) == 0


class Member:
    """A consumer-protocol member that tracks the partitions it owns through
    its (incremental) assign and revoke callbacks."""

    def __init__(self, bootstrap, group, topic, owners, name, **extra):
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        config.update(extra)
        self.name = name
        self.owners = owners
        self.owned = set()
        self.seen = []
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic], on_assign=self.on_assign, on_revoke=self.on_revoke)

    def on_assign(self, _consumer, partitions):
        for partition in partitions:
            key = (partition.topic, partition.partition)
            holder = self.owners.get(key)
            assert holder in (None, self.name), (
                f"partition {key} given to {self.name} while {holder} owns it"
            )
            self.owners[key] = self.name
            self.owned.add(key)

    def on_revoke(self, _consumer, partitions):
        self.commit()
        for partition in partitions:
            key = (partition.topic, partition.partition)
            self.owned.discard(key)
            if self.owners.get(key) == self.name:
                del self.owners[key]

    def commit(self):
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException:
            pass  # nothing consumed yet

    def poll(self, timeout_s=0.05):
        message = self.consumer.poll(timeout_s)
        if message is None or message.error() is not None:
            return
        self.seen.append(int(message.value()))

    def close(self):
        self.commit()
        self.consumer.close()
        for partition in list(self.owned):
            if self.owners.get(partition) == self.name:
                del self.owners[partition]
        self.owned.clear()


def poll_until(members, condition, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for member in members:
            member.poll()
        if condition():
            return
    raise AssertionError(f"timed out waiting for {what}: " + ", ".join(
        f"{m.name}={sorted(m.owned)} seen={len(m.seen)}" for m in members))


def test_one_member_consumes_every_record_and_commits(broker):
    create_topic(broker.bootstrap, "kip848-one")
    produce(broker.bootstrap, "kip848-one", 0, 600)
    member = Member(broker.bootstrap, "kip848-one-group", "kip848-one", {}, "a")
    poll_until([member], lambda: len(set(member.seen)) == 600, 40, "all records")
    member.consumer.commit(asynchronous=False)
    committed = member.consumer.committed(
        [TopicPartition("kip848-one", p) for p in range(PARTITIONS)], timeout=10)
    assert sum(tp.offset for tp in committed) == 600
    assert member.owned == {("kip848-one", p) for p in range(PARTITIONS)}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups(request_timeout=20).result()
    types = {group.group_id: group.type for group in listed.valid}
    assert types.get("kip848-one-group") == ConsumerGroupType.CONSUMER
    member.close()


def test_scaling_up_and_down_never_owns_a_partition_twice(broker):
    topic = "kip848-scale"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 300)
    owners = {}
    first = Member(broker.bootstrap, "kip848-scale-group", topic, owners, "a")
    poll_until([first], lambda: len(first.owned) == PARTITIONS, 30, "a owns everything")
    second = Member(broker.bootstrap, "kip848-scale-group", topic, owners, "b")
    third = Member(broker.bootstrap, "kip848-scale-group", topic, owners, "c")
    members = [first, second, third]
    poll_until(members, lambda: all(len(m.owned) == 2 for m in members), 40,
               "two partitions each")
    produce(broker.bootstrap, topic, 300, 300)
    third.close()
    second.close()
    members = [first]
    poll_until(members, lambda: len(first.owned) == PARTITIONS, 40, "a owns everything again")
    produce(broker.bootstrap, topic, 600, 300)
    everyone = [first, second, third]
    poll_until(members, lambda: set().union(*(set(m.seen) for m in everyone)) >= set(range(900)),
               40, "every record")
    first.close()


CHILD = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    def assigned(_consumer, partitions):
        print("assigned", len(partitions), flush=True)
    consumer.subscribe([sys.argv[3]], on_assign=assigned)
    while True:
        consumer.poll(0.1)
""")


def test_a_killed_member_is_fenced_and_its_partitions_reassigned(broker_factory):
    broker = broker_factory(**{key.replace(".", "_"): value for key, value in FAST_SESSIONS.items()})
    topic = "kip848-kill"
    create_topic(broker.bootstrap, topic)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, broker.bootstrap, "kip848-kill-group", topic],
        stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().startswith("assigned"), "the child got no assignment"
        survivor = Member(broker.bootstrap, "kip848-kill-group", topic, {}, "survivor")
        poll_until([survivor], lambda: len(survivor.owned) == PARTITIONS // 2, 30,
                   "the survivor's half")
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        started = time.monotonic()
        poll_until([survivor], lambda: len(survivor.owned) == PARTITIONS, 30,
                   "the killed member's partitions")
        # Fenced by the 6 s session timeout, not before.
        assert time.monotonic() - started >= 4.0
        survivor.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_the_range_assignor_gives_contiguous_ranges(broker):
    topic = "kip848-range"
    create_topic(broker.bootstrap, topic)
    owners = {}
    members = [
        Member(broker.bootstrap, "kip848-range-group", topic, owners, name,
               **{"group.remote.assignor": "range"})
        for name in ("a", "b")
    ]
    poll_until(members, lambda: all(len(m.owned) == 3 for m in members), 40,
               "three partitions each")
    ranges = sorted(sorted(partition for _, partition in m.owned) for m in members)
    assert ranges == [[0, 1, 2], [3, 4, 5]]
    for member in members:
        member.close()


def test_a_regex_subscription_gets_matching_topics_only(broker):
    for name in ("kip848-re-a", "kip848-re-b", "kip848-other"):
        create_topic(broker.bootstrap, name)
    member = Member(broker.bootstrap, "kip848-re-group", "^kip848-re-.*", {}, "a")
    poll_until([member], lambda: len(member.owned) == 2 * PARTITIONS, 40,
               "the matching topics' partitions")
    assignment = member.consumer.assignment()
    assert {tp.topic for tp in assignment} == {"kip848-re-a", "kip848-re-b"}
    member.close()


def test_strom_groups_describe_shows_the_consumer_protocol(broker):
    topic = "kip848-describe"
    create_topic(broker.bootstrap, topic)
    member = Member(broker.bootstrap, "kip848-describe-group", topic, {}, "a",
                    **{"group.remote.assignor": "range"})
    poll_until([member], lambda: len(member.owned) == PARTITIONS, 30, "the assignment")
    text = strom(broker.bootstrap, "groups", "describe", "kip848-describe-group")
    assert "consumer group" in text and "assignor range" in text, text
    assert "assignment epoch 1" in text, text
    described = json.loads(strom(broker.bootstrap, "groups", "describe",
                                 "kip848-describe-group", "--json"))
    assert described["type"] == "consumer"
    assert described["state"] == "Stable"
    assert described["members"][0]["member_epoch"] == described["assignment_epoch"]
    assert len(described["members"][0]["assignment"]) == PARTITIONS
    member.close()


def test_the_group_resumes_from_its_records_after_a_restart(broker):
    topic = "kip848-restart"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 60)
    member = Member(broker.bootstrap, "kip848-restart-group", topic, {}, "a")
    poll_until([member], lambda: len(set(member.seen)) == 60, 30, "the first records")
    before = json.loads(strom(broker.bootstrap, "groups", "describe", "kip848-restart-group", "--json"))
    broker.restart()
    produce(broker.bootstrap, topic, 60, 60)
    poll_until([member], lambda: set(member.seen) >= set(range(120)), 40,
               "the records produced after the restart")
    after = json.loads(strom(broker.bootstrap, "groups", "describe", "kip848-restart-group", "--json"))
    # The member kept its place: no new epoch, same member, same partitions.
    assert after["group_epoch"] == before["group_epoch"]
    assert [m["member_id"] for m in after["members"]] == [m["member_id"] for m in before["members"]]
    assert len(member.owned) == PARTITIONS
    member.close()
