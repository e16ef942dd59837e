"""Faults on three real Strom processes, each in its own network namespace
(chaosnet.py), with idempotent acks=all producers (confluent-kafka and
strom-producer) and the Jepsen-style checker of chaos.py: every
acknowledged record is read back exactly once and in order per partition,
by confluent-kafka and by strom-consumer.

The topic has replication factor 3 and min.insync.replicas=2. The faults:
the leader of each partition killed with kill -9 again and again; a
follower paused with SIGSTOP; a node cut off from its peers; a torn write
at a crash; a full disk; bad input on other connections while the
producers run."""
import random
import struct
import threading
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import chaos as ch
import cluster as cl
import clusterwire as wire_cw
import rawwire as wire
import txn_pipeline as txp

TOPIC = "chaos"
PARTITIONS = 3
RATE = 80


@pytest.fixture
def chaos_cluster(strom_binary, tmp_path):
    cluster, _ = ch.start_cluster(strom_binary, tmp_path)
    yield cluster
    cluster.close()


def start_workloads(cluster, history, topic=TOPIC, partitions=PARTITIONS):
    workloads = [
        ch.ConfluentWorkload("librdkafka", cluster.bootstrap, topic, partitions, history, rate=RATE),
        ch.StromWorkload("strom", cluster.bootstrap, topic, partitions, history, rate=RATE),
    ]
    for workload in workloads:
        workload.start()
    cluster.workloads.extend(workloads)
    return workloads


def read_and_check(cluster, history, topic=TOPIC, partitions=PARTITIONS) -> ch.Report:
    by_confluent = ch.read_confluent(cluster.bootstrap, topic, partitions)
    by_strom = ch.read_strom(cluster.bootstrap, topic, partitions)
    report = ch.check(history, by_confluent, by_strom)
    print(report.format())
    return report


def assert_clean(report: ch.Report, history: ch.History) -> None:
    assert report.clean, report.format()
    assert report.lost == [] and report.duplicated == [] and report.reordered == []
    # Both producers had records acknowledged after every fault.
    for name in ("librdkafka", "strom"):
        last_ack = max((t for v, (_, _, t) in history.acked.items() if v.startswith(name + "-")), default=0)
        assert last_ack > history.faults[-1].start_ms, f"{name} acknowledged nothing after the last fault"


@pytest.mark.timeout(150)
def test_every_acknowledged_record_survives_leaders_killed_again_and_again(chaos_cluster):
    ch.create_topic(chaos_cluster, TOPIC, PARTITIONS)
    history = ch.History()
    workloads = start_workloads(chaos_cluster, history)
    chaos = ch.Chaos(chaos_cluster, TOPIC, PARTITIONS, history, random.Random(17))
    try:
        time.sleep(2)
        for cycle in range(PARTITIONS + 1):
            leader = chaos._leader_of(cycle % PARTITIONS)
            fault = chaos.kill(leader)
            print(f"kill -9 of node {leader} (led {fault.led})")
            ch.wait_healthy(chaos_cluster, TOPIC, PARTITIONS)
        time.sleep(2)
    finally:
        ch.stop_workloads(workloads)
    report = read_and_check(chaos_cluster, history)
    assert_clean(report, history)
    assert report.acknowledged > 1000
    assert report.failed == 0, "records failed although every fault was healed"
    # Every killed leader's partitions were acknowledged again.
    assert len(report.failovers_ms) >= PARTITIONS + 1, report.failovers_ms


def isr_of(cluster, topic, leader_node) -> list:
    state = leader_node.metadata([topic]).topics[topic]
    return sorted(state.partitions[0].isr)


def wait_isr(cluster, topic, leader_node, expected, timeout_s):
    return cluster.wait_until(lambda: isr_of(cluster, topic, leader_node) == expected, timeout_s,
                              f"the ISR of {topic}-0 is {expected}", interval_s=0.1)


def high_watermark(bootstrap, topic) -> int:
    return ch.end_offsets(bootstrap, topic, 1)[0][1]


@pytest.mark.timeout(150)
def test_a_paused_follower_leaves_the_isr_and_rejoins_and_min_insync_replicas_holds(strom_binary, tmp_path):
    # The session outlives the pause, so the follower leaves the ISR by
    # lag (replica.lag.time.max.ms), not by being fenced.
    cluster, _ = ch.start_cluster(strom_binary, tmp_path, extra={
        "broker.session.timeout.ms": "20000", "replica.lag.time.max.ms": "2000"})
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        futures = admin.create_topics([
            NewTopic("steady", 1, 3, config={"min.insync.replicas": "2"}),
            NewTopic("strict", 1, 3, config={"min.insync.replicas": "3"}),
        ])
        for future in futures.values():
            future.result(30)
        for topic in ("steady", "strict"):
            ch.wait_healthy(cluster, topic, 1)
        # Pause a node that leads neither topic, preferably not the active
        # controller either.
        controller = cluster.active_controller().leader_id
        leader_id, isr = ch.leaders(cluster, "steady", 1)[0]
        strict_leader_id = ch.leaders(cluster, "strict", 1)[0][0]
        followers = [n for n in isr if n not in (leader_id, strict_leader_id)]
        follower_id = sorted(followers, key=lambda n: n == controller)[0]
        leader, follower = cluster.node(leader_id), cluster.node(follower_id)
        strict_leader = cluster.node(strict_leader_id)
        history = ch.History()
        workload = ch.ConfluentWorkload("librdkafka", cluster.bootstrap, "steady", 1, history, rate=RATE)
        workload.start()
        cluster.workloads.append(workload)
        time.sleep(1)

        follower.pause()
        paused_at = time.monotonic()
        try:
            wait_isr(cluster, "steady", leader, sorted(set(isr) - {follower_id}), 15)
            left_after_s = time.monotonic() - paused_at
            # Not before the lag time; still registered (not fenced).
            assert left_after_s >= 2.0, left_after_s
            assert follower_id in cluster.brokers_seen_by(leader)
            acked_before = len(history.acked)
            time.sleep(2)
            assert len(history.acked) > acked_before + RATE, "writes continue with 2 of 3 in the ISR"

            # "strict" needs 3 in sync: its leader refuses, nothing stored.
            wait_isr(cluster, "strict", strict_leader, sorted(set(isr) - {follower_id}), 15)
            before = high_watermark(cluster.bootstrap, "strict")
            errors = refused_writes(cluster.bootstrap, "strict", 5)
            assert errors and all(e == KafkaError.NOT_ENOUGH_REPLICAS for e in errors), errors
            assert high_watermark(cluster.bootstrap, "strict") == before, "a refused write was stored"
        finally:
            follower.resume()
        wait_isr(cluster, "steady", leader, sorted(isr), 30)
        # With every replica back in sync, the refused writes are nowhere.
        wait_isr(cluster, "strict", strict_leader, sorted(isr), 30)
        assert high_watermark(cluster.bootstrap, "strict") == before, "a refused write was stored"
        time.sleep(1)
        workload.stop()
        workload.join(180)
        report = ch.check(history, ch.read_confluent(cluster.bootstrap, "steady", 1),
                          ch.read_strom(cluster.bootstrap, "steady", 1))
        print(report.format())
        assert report.clean, report.format()
        assert report.failed == 0
    finally:
        cluster.close()


def refused_writes(bootstrap, topic, count) -> list:
    """Error codes of `count` acks=all writes sent once each (no retries,
    so the broker's own answer reaches the callback)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                         "retries": 0, "message.timeout.ms": 10000})
    errors = []
    for index in range(count):
        producer.produce(topic, value=f"refused-{index}".encode(), partition=0,
                         on_delivery=lambda error, _: errors.append(error))
    producer.flush(30)
    return [None if error is None else error.code() for error in errors]


@pytest.mark.timeout(240)
def test_mixed_faults_lose_duplicate_and_reorder_nothing(strom_binary, tmp_path):
    cluster, disk = ch.start_cluster(strom_binary, tmp_path, disk_node=True)
    try:
        ch.create_topic(cluster, TOPIC, PARTITIONS)
        history = ch.History()
        workloads = start_workloads(cluster, history)
        chaos = ch.Chaos(cluster, TOPIC, PARTITIONS, history, random.Random(1601), disk=disk)
        try:
            time.sleep(2)
            for kind in ("kill", "pause", "partition", "torn", "disk"):
                chaos.one(kind)
            time.sleep(2)
        finally:
            ch.stop_workloads(workloads)
        report = read_and_check(cluster, history)
        assert_clean(report, history)
        assert report.faults == {"kill": 1, "pause": 1, "partition": 1, "torn": 1, "disk": 1}
    finally:
        cluster.close()


def abuse(host: str, port: int, topic: str, led: list, stop: threading.Event, outcomes: list) -> None:
    """Bad input on fresh connections until stopped; each must be answered
    with an error or closed by the broker. Batches with a bad CRC go to
    the partitions this node leads (`led`)."""
    cases = [
        ("oversized-length", struct.pack(">i", 0x7FFFFFF0) + b"\x00" * 64),
        ("negative-length", struct.pack(">i", -5) + b"\x01\x02\x03"),
        ("short-frame", struct.pack(">i", 3) + b"\xff\xff\xff"),
        ("huge-array", struct.pack(">i", 22) + struct.pack(">hhih", 0, 3, 1, 0)
         + struct.pack(">hhii", -1, -1, 5000, 0x7FFFFFFF)),
        ("unknown-api", wire.request_frame(999, 0, 3, b"")),
        ("http", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    ]
    turn = 0
    while not stop.is_set():
        turn += 1
        try:
            with wire.Connection(port, timeout_s=5, host=host) as connection:
                if turn % 2 == 0 and led:
                    name = "bad-crc"
                    batch = wire.record_batch([(b"bad", f"bad-crc-{turn}".encode())], corrupt_crc=True)
                    (result,) = wire.decode_produce_v3(connection.call(
                        wire.API_PRODUCE, 3, wire.produce_v3_body(topic, led[turn % len(led)], batch)))
                    outcome = result[2]
                else:
                    name, data = cases[(turn // 2) % len(cases)]
                    connection.send_raw(data)
                    outcome = "closed" if connection.closed_by_peer(5) else "open"
        except OSError as error:
            outcome = f"error {error!r}"
        outcomes.append((name, outcome))
        time.sleep(0.01)


@pytest.mark.timeout(150)
def test_bad_input_under_load_leaves_the_workload_clean(chaos_cluster):
    ch.create_topic(chaos_cluster, TOPIC, PARTITIONS)
    history = ch.History()
    workloads = start_workloads(chaos_cluster, history)
    stop = threading.Event()
    outcomes = []
    led = ch.leaders(chaos_cluster, TOPIC, PARTITIONS)
    abusers = [
        threading.Thread(
            target=abuse,
            args=(node.host, node.port, TOPIC, [p for p, (leader, _) in led.items() if leader == node.node_id],
                  stop, outcomes),
            daemon=True)
        for node in chaos_cluster.nodes
    ]
    try:
        for abuser in abusers:
            abuser.start()
        time.sleep(12)
    finally:
        stop.set()
        for abuser in abusers:
            abuser.join(30)
        ch.stop_workloads(workloads)
    assert all(node.running for node in chaos_cluster.nodes)
    by_kind = {}
    for name, outcome in outcomes:
        by_kind.setdefault(name, set()).add(outcome)
    print(by_kind)
    assert by_kind.pop("bad-crc") == {2}, "CORRUPT_MESSAGE for every bad CRC"
    assert by_kind and all(seen == {"closed"} for seen in by_kind.values()), by_kind
    history.faults.append(ch.Fault("bad-input", 0, ch.now_ms() - 12_000))
    report = read_and_check(chaos_cluster, history)
    assert report.clean, report.format()
    assert report.failed == 0
    assert report.acknowledged > 1000


@pytest.mark.timeout(180)
@pytest.mark.parametrize("unclean", [False, True], ids=["clean", "unclean"])
def test_a_whole_isr_lost_waits_for_its_last_member_unless_unclean_election_is_enabled(
        strom_binary, tmp_path, unclean):
    # Three controller-only nodes beside the three brokers, so that losing
    # every replica of a partition does not lose the metadata quorum.
    cluster, _ = ch.start_cluster(strom_binary, tmp_path, unclean=unclean, controllers=3)
    try:
        ch.create_topic(cluster, TOPIC, 1)
        history = ch.History()
        workloads = start_workloads(cluster, history, partitions=1)
        chaos = ch.Chaos(cluster, TOPIC, 1, history, random.Random(16))
        try:
            time.sleep(2)
            fault = chaos.one("cascade")
            time.sleep(1)
        finally:
            ch.stop_workloads(workloads, timeout_s=60)
        report = read_and_check(cluster, history, partitions=1)
        stale = int(fault.detail.split("started alone")[0].split()[1].rstrip(","))
        logs = "".join(node.log_text(start) for node in cluster.nodes if node.is_controller
                       for start in range(1, node.starts + 1))
        if unclean:
            # The stale follower led, and what the others had acknowledged
            # without it is gone: counted, as Kafka's documentation warns.
            assert "led (unclean)" in fault.detail, fault.detail
            assert "unclean leader election" in logs
            assert report.lost, report.format()
            assert not (report.duplicated or report.reordered or report.moved or report.foreign)
        else:
            assert "did not lead" in fault.detail, fault.detail
            assert "unclean leader election" not in logs
            assert report.clean, report.format()
        print(f"stale follower {stale}: {fault.detail}")
    finally:
        cluster.close()


def run_pipeline_in_background(pipeline, stop: threading.Event, failures: list) -> threading.Thread:
    def run():
        try:
            while not stop.is_set():
                pipeline.step()
        except BaseException as error:  # reported by the test
            failures.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.timeout(280)
def test_a_transactional_pipeline_is_exactly_once_under_kills_pauses_and_partitions(strom_binary, tmp_path):
    """confluent-kafka's consume-transform-produce pipeline (transactions
    carrying their input offsets, recovering as librdkafka documents)
    while brokers are killed, paused and cut off: the output holds every
    input record exactly once and the group's offsets reach the input's
    end. Faults never hit the group coordinator's node: librdkafka 2.16's
    send_offsets_to_transaction waits forever once its cached group
    coordinator leaves the metadata (confluentinc/librdkafka#5511)."""
    cluster, _ = ch.start_cluster(strom_binary, tmp_path, extra={
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.num.partitions": "4",
        "offsets.topic.replication.factor": "3",
    })
    try:
        total = 2000
        for topic in ("tx-in", "tx-out"):
            ch.create_topic(cluster, topic, PARTITIONS)
        txp.fill_source(cluster.bootstrap, "tx-in", total, PARTITIONS)
        txp.transactional_producer(cluster.bootstrap, "tx-chaos").flush()
        group = "tx-chaos-group"
        pipeline = txp.ResilientPipeline(cluster.bootstrap, "tx-in", "tx-out", group, "tx-chaos")
        history = ch.History()
        chaos = ch.Chaos(cluster, "tx-out", PARTITIONS, history, random.Random(2718))
        stop, failures = threading.Event(), []
        thread = run_pipeline_in_background(pipeline, stop, failures)
        try:
            for kind in ("kill", "pause", "partition", "kill"):
                # Transactions commit between the faults.
                baseline = pipeline.counts["committed"]
                cluster.wait_until(lambda: pipeline.counts["committed"] >= baseline + 3 or failures,
                                   60, "transactions committed before the fault")
                coordinator = group_coordinator(cluster, group)
                victim = chaos.rng.choice([node.node_id for node in cluster.brokers
                                           if node.node_id != coordinator])
                if kind == "kill":
                    chaos.kill(victim)
                elif kind == "pause":
                    chaos.pause(victim, 4.0)
                else:
                    chaos.partition(victim, 5.0)
                ch.wait_healthy(cluster, "tx-out", PARTITIONS)
            cluster.wait_until(lambda: failures or txp.caught_up(cluster.bootstrap, "tx-in", group, PARTITIONS),
                               120, "the pipeline caught up with its input")
        finally:
            stop.set()
            thread.join(timeout=60)
        assert not failures, failures
        pipeline.close()
        txp.check_exactly_once(cluster.bootstrap, "tx-in", "tx-out", group, total, PARTITIONS)
        assert [fault.kind for fault in history.faults] == ["kill", "pause", "partition", "kill"]
    finally:
        cluster.close()


def group_coordinator(cluster, group: str) -> int:
    """The broker leading the group's `__consumer_offsets` partition."""
    partition = wire_cw.offsets_partition(group, cl.OFFSETS_PARTITIONS)
    found = ch.leaders(cluster, "__consumer_offsets", cl.OFFSETS_PARTITIONS).get(partition)
    return found[0] if found else -1
