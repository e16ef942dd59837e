"""Consumer groups against Strom's group coordinator, with confluent-kafka
(librdkafka) and kafka-python: membership changes, committed offsets across
restarts, static membership, cooperative rebalancing, and the admin views."""
import collections
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer

PARTITIONS = 6


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=20)


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    """Records `start..start+count`, value = the number, spread round-robin."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for number in range(start, start + count):
        producer.produce(topic, str(number).encode(), partition=number % PARTITIONS)
        if number % 1000 == 0:
            producer.poll(0)
    assert producer.flush(20) == 0


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    config.update(extra)
    return Consumer(config)


class Member:
    """A confluent-kafka group member that commits what it processed before
    giving partitions up, and records what it saw and what it was told."""

    def __init__(self, bootstrap: str, group: str, topic: str, **extra):
        self.consumer = consumer(bootstrap, group, **extra)
        self.seen = []
        self.assigned = []
        self.revoked = []
        self.consumer.subscribe([topic], on_assign=self.on_assign, on_revoke=self.on_revoke)

    def on_assign(self, _consumer, partitions):
        self.assigned.append(sorted(p.partition for p in partitions))

    def on_revoke(self, _consumer, partitions):
        self.revoked.append(sorted(p.partition for p in partitions))
        self.commit()

    def commit(self):
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException:
            pass  # nothing stored yet

    def poll(self, timeout_s: float = 0.1) -> None:
        message = self.consumer.poll(timeout_s)
        if message is None:
            return
        assert message.error() is None, message.error()
        self.seen.append((message.partition(), message.offset(), int(message.value())))

    def close(self) -> None:
        self.commit()
        self.consumer.close()


def poll_until(members, condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        for member in members:
            member.poll(0.05)


def seen_values(members):
    return collections.Counter(value for member in members for (_, _, value) in member.seen)


@pytest.mark.timeout(120)
def test_three_confluent_consumers_see_every_record_once_across_membership_changes(broker):
    topic, group = "orders", "three-members"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 3000)
    a = Member(broker.bootstrap, group, topic)
    b = Member(broker.bootstrap, group, topic)
    poll_until([a, b], lambda: a.consumer.assignment() and b.consumer.assignment(), 30)
    poll_until([a, b], lambda: len(seen_values([a, b])) >= 1500, 30)
    a.close()  # leaves midway
    c = Member(broker.bootstrap, group, topic)
    poll_until([b, c], lambda: c.consumer.assignment() and len(b.consumer.assignment()) < PARTITIONS, 30)
    produce(broker.bootstrap, topic, 3000, 3000)
    poll_until([b, c], lambda: len(seen_values([a, b, c])) >= 6000, 60)
    # A little longer: a duplicate would show up now.
    end = time.monotonic() + 2
    while time.monotonic() < end:
        b.poll(0.05)
        c.poll(0.05)
    counts = seen_values([a, b, c])
    assert set(counts) == set(range(6000))
    assert [value for value, count in counts.items() if count != 1] == []
    assert a.seen and b.seen and c.seen, "every member consumed"
    assert len(b.consumer.assignment()) + len(c.consumer.assignment()) == PARTITIONS
    b.close()
    c.close()


def committed(bootstrap: str, group: str, topic: str):
    probe = consumer(bootstrap, group)
    try:
        offsets = probe.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        return {tp.partition: tp.offset for tp in offsets}
    finally:
        probe.close()


@pytest.mark.timeout(120)
def test_committed_offsets_resume_after_close_and_restarts(broker):
    topic, group = "resume", "resume-group"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 1200)
    first = Member(broker.bootstrap, group, topic)
    poll_until([first], lambda: len(first.seen) >= 1200, 30)
    first.close()
    expected = {p: 200 for p in range(PARTITIONS)}
    assert committed(broker.bootstrap, group, topic) == expected

    produce(broker.bootstrap, topic, 1200, 60)
    second = Member(broker.bootstrap, group, topic)
    poll_until([second], lambda: len(second.seen) >= 60, 30)
    assert sorted(value for (_, _, value) in second.seen) == list(range(1200, 1260))
    second.close()
    expected = {p: 210 for p in range(PARTITIONS)}

    broker.restart(hard=False)
    assert committed(broker.bootstrap, group, topic) == expected
    broker.restart(hard=True)
    assert committed(broker.bootstrap, group, topic) == expected

    produce(broker.bootstrap, topic, 1260, 60)
    third = Member(broker.bootstrap, group, topic)
    poll_until([third], lambda: len(third.seen) >= 60, 30)
    time.sleep(0.5)
    third.poll(0.2)
    assert sorted(value for (_, _, value) in third.seen) == list(range(1260, 1320))
    third.close()


def kafka_python_member(bootstrap: str, group: str, topic: str, seen: list, stop: threading.Event):
    """A kafka-python member that commits what it consumed after every poll
    and, through auto-commit, before giving partitions up in a rebalance and
    on close, then leaves on `stop`.

    kafka-python 3 runs rebalance listeners on its IO thread, where a
    blocking `commit()` raises ("Cannot block on net.run() from the IO
    thread itself"), so the commit before a rebalance is the client's own
    auto-commit rather than a listener's."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        metadata_max_age_ms=1000,
    )
    # Load the topic's metadata before joining. Otherwise a member that
    # leads the group can assign before its metadata has arrived, assign
    # nothing, and rejoin a moment later; after such a double rebalance
    # kafka-python 3.0.12 was seen to stop talking to the coordinator
    # altogether (no OffsetFetch, no heartbeat) although Strom had answered
    # the second SyncGroup with every partition.
    assert consumer.partitions_for_topic(topic)
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            batches = consumer.poll(timeout_ms=100)
            for records in batches.values():
                for record in records:
                    seen.append((record.partition, record.offset, int(record.value)))
            if batches:
                consumer.commit()
    finally:
        consumer.close()


def start_kafka_python_member(bootstrap: str, group: str, topic: str):
    seen, stop = [], threading.Event()
    # A daemon thread: a client stuck in close() must not keep the test
    # process alive after the suite has finished.
    thread = threading.Thread(
        target=kafka_python_member, args=(bootstrap, group, topic, seen, stop), daemon=True
    )
    thread.start()
    return seen, stop, thread


def wait_for(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


@pytest.mark.timeout(120)
def test_kafka_python_group_sees_every_record_once_and_resumes(broker):
    topic, group = "kp-orders", "kp-group"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 3000)
    seen_a, stop_a, thread_a = start_kafka_python_member(broker.bootstrap, group, topic)
    seen_b, stop_b, thread_b = start_kafka_python_member(broker.bootstrap, group, topic)
    wait_for(lambda: len(seen_a) + len(seen_b) >= 1500, 60)
    stop_a.set()  # leaves midway
    thread_a.join(30)
    seen_c, stop_c, thread_c = start_kafka_python_member(broker.bootstrap, group, topic)
    wait_for(lambda: len(seen_a) + len(seen_b) + len(seen_c) >= 3000, 60)
    produce(broker.bootstrap, topic, 3000, 3000)
    wait_for(lambda: len(seen_a) + len(seen_b) + len(seen_c) >= 6000, 60)
    time.sleep(2)  # a duplicate would show up now
    stop_b.set()
    stop_c.set()
    thread_b.join(30)
    thread_c.join(30)
    values = collections.Counter(v for (_, _, v) in seen_a + seen_b + seen_c)
    assert set(values) == set(range(6000))
    assert [value for value, count in values.items() if count != 1] == []
    assert committed(broker.bootstrap, group, topic) == {p: 1000 for p in range(PARTITIONS)}

    produce(broker.bootstrap, topic, 6000, 60)
    seen_d, stop_d, thread_d = start_kafka_python_member(broker.bootstrap, group, topic)
    wait_for(lambda: len(seen_d) >= 60, 30)
    time.sleep(0.5)
    stop_d.set()
    thread_d.join(30)
    assert sorted(v for (_, _, v) in seen_d) == list(range(6000, 6060))


@pytest.mark.timeout(90)
def test_static_member_restarts_without_rebalance(broker):
    topic, group = "static", "static-group"
    create_topic(broker.bootstrap, topic)
    dynamic = Member(broker.bootstrap, group, topic, **{"session.timeout.ms": 10000})
    poll_until([dynamic], lambda: len(dynamic.consumer.assignment()) == PARTITIONS, 30)
    static = Member(broker.bootstrap, group, topic, **{"group.instance.id": "static-1", "session.timeout.ms": 10000})
    poll_until([dynamic, static], lambda: static.consumer.assignment() and len(dynamic.consumer.assignment()) == 3, 30)
    kept = sorted(p.partition for p in dynamic.consumer.assignment())
    static_partitions = sorted(p.partition for p in static.consumer.assignment())
    revokes_before = len(dynamic.revoked)
    static.consumer.close()  # a static member does not leave the group

    restarted = Member(broker.bootstrap, group, topic, **{"group.instance.id": "static-1", "session.timeout.ms": 10000})
    poll_until([dynamic, restarted], lambda: restarted.consumer.assignment(), 30)
    end = time.monotonic() + 3
    while time.monotonic() < end:
        dynamic.poll(0.05)
        restarted.poll(0.05)
    assert len(dynamic.revoked) == revokes_before, "the other member saw a rebalance"
    assert sorted(p.partition for p in dynamic.consumer.assignment()) == kept
    assert sorted(p.partition for p in restarted.consumer.assignment()) == static_partitions
    restarted.close()
    dynamic.close()


@pytest.mark.timeout(90)
def test_cooperative_sticky_join_keeps_unaffected_partitions(broker):
    topic, group = "coop", "coop-group"
    create_topic(broker.bootstrap, topic)
    strategy = {"partition.assignment.strategy": "cooperative-sticky"}
    first = Member(broker.bootstrap, group, topic, **strategy)
    poll_until([first], lambda: len(first.consumer.assignment()) == PARTITIONS, 30)
    second = Member(broker.bootstrap, group, topic, **strategy)
    poll_until(
        [first, second],
        lambda: len(first.consumer.assignment()) == 3 and len(second.consumer.assignment()) == 3,
        40,
    )
    kept = {p.partition for p in first.consumer.assignment()}
    revoked = {p for batch in first.revoked for p in batch}
    moved = {p.partition for p in second.consumer.assignment()}
    assert revoked == moved, "only the partitions that moved were revoked"
    assert not revoked & kept
    assert first.assigned[0] == list(range(PARTITIONS))
    second.close()
    first.close()


@pytest.mark.timeout(90)
def test_initial_rebalance_delay_gathers_members_into_one_generation(broker_factory):
    delayed = broker_factory(group_initial_rebalance_delay_ms=2000)
    topic, group = "delayed", "delayed-group"
    create_topic(delayed.bootstrap, topic)
    started = time.monotonic()
    first = Member(delayed.bootstrap, group, topic)
    first.poll(0.2)
    second = Member(delayed.bootstrap, group, topic)
    poll_until([first, second], lambda: first.consumer.assignment() and second.consumer.assignment(), 30)
    assert time.monotonic() - started >= 1.9, "the first rebalance waited for the delay"
    assert first.revoked == [] and second.revoked == [], "one generation, no revocation"
    assert len(first.assigned) == 1 and len(second.assigned) == 1
    second.close()
    first.close()


@pytest.mark.timeout(90)
def test_admin_clients_list_describe_fetch_offsets_and_delete_groups(broker):
    topic, group = "admin-view", "admin-group"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, 60)
    members = [Member(broker.bootstrap, group, topic, **{"client.id": f"viewer-{i}"}) for i in range(2)]
    poll_until(members, lambda: all(len(m.consumer.assignment()) == 3 for m in members), 30)
    poll_until(members, lambda: len(seen_values(members)) >= 60, 30)
    for member in members:
        member.commit()

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups(request_timeout=20).result()
    assert group in [g.group_id for g in listed.valid]
    listing = next(g for g in listed.valid if g.group_id == group)
    assert str(listing.state).endswith("STABLE")
    assert not listing.is_simple_consumer_group

    description = admin.describe_consumer_groups([group], request_timeout=20)[group].result()
    assert str(description.state).endswith("STABLE")
    assert description.partition_assignor == "range"
    assert sorted(m.client_id for m in description.members) == ["viewer-0", "viewer-1"]
    assigned = sorted(
        tp.partition for m in description.members for tp in m.assignment.topic_partitions
    )
    assert assigned == list(range(PARTITIONS))
    assert all(m.host.lstrip("/") == "127.0.0.1" for m in description.members)

    from confluent_kafka import ConsumerGroupTopicPartitions

    fetched = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    assert {tp.partition: tp.offset for tp in fetched.topic_partitions if tp.topic == topic} == {
        p: 10 for p in range(PARTITIONS)
    }

    kp_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        listed_kp = kp_admin.list_groups(states_filter=["Stable"])
        assert {"group_id": group, "protocol_type": "consumer", "group_state": "Stable", "group_type": "classic"} in listed_kp
        assert all(g["group_id"] != group for g in kp_admin.list_groups(states_filter=["Empty"]))
        kp_description = kp_admin.describe_groups([group])[group]
        assert kp_description["error"] is None
        assert kp_description["group_state"] == "Stable"
        assert kp_description["protocol_data"] == "range"
        assert sorted(m["client_id"] for m in kp_description["members"]) == ["viewer-0", "viewer-1"]
        kp_assigned = sorted(
            partition
            for member in kp_description["members"]
            for assigned in member["member_assignment"]["assigned_partitions"]
            for partition in assigned["partitions"]
        )
        assert kp_assigned == list(range(PARTITIONS))
        assert all(m["member_metadata"]["topics"] == [topic] for m in kp_description["members"])
        kp_offsets = kp_admin.list_group_offsets(group)[group]
        assert {tp.partition: meta.offset for tp, meta in kp_offsets.items()} == {
            p: 10 for p in range(PARTITIONS)
        }

        # Deleting a group with members is refused; once empty it goes.
        (result,) = admin.delete_consumer_groups([group], request_timeout=20).values()
        with pytest.raises(KafkaException):
            result.result()
        for member in members:
            member.close()
        (result,) = admin.delete_consumer_groups([group], request_timeout=20).values()
        result.result()
        listed = admin.list_consumer_groups(request_timeout=20).result()
        assert group not in [g.group_id for g in listed.valid]
        assert committed(broker.bootstrap, group, topic) == {p: -1001 for p in range(PARTITIONS)}
    finally:
        kp_admin.close()
