"""The measurement behind scripts/cluster-bench (see there). Not a test.

A 3-node cluster of `strom-broker` processes (every node a controller voter
and a broker, cluster.py) with Kafka's default liveness settings, measured
from outside with hand-encoded requests (clusterwire.py), each sent to the
node it names:

- controller failover: kill -9 of the active controller until the next
  CreateTopics through a surviving broker succeeds (retried at once after
  each error), and until a survivor's DescribeQuorum names the new active
  controller; the killed node is restarted and caught up between trials;
- metadata propagation: from sending CreateTopics (through the brokers in
  turn) until every broker's Metadata shows the topic with a leader;
- controller throughput: single-partition topics created one request after
  another through a broker that is not the active controller, and the
  time to create 100-partition topics up to the partition count asked
  (replication factor 3 by default), until the last response and until
  every broker's Metadata shows every partition led.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import clusterwire as cw  # noqa: E402
import rawwire as wire  # noqa: E402
from cluster import DESCRIBE_QUORUM_VERSION, Cluster, WaitTimeout, wait_until  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FAILURE_NAMES = {cw.REQUEST_TIMED_OUT: "REQUEST_TIMED_OUT", cw.NOT_CONTROLLER: "NOT_CONTROLLER",
                 "io": "connection error"}
# Kafka's defaults for broker liveness (the cluster tests use shorter ones).
KAFKA_LIVENESS = {"broker.session.timeout.ms": "9000", "broker.heartbeat.interval.ms": "2000"}


class Deadline:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def check(self, step: str) -> None:
        if self.left() <= 0:
            raise WaitTimeout(f"the benchmark's time ran out during {step}")


def percentile(values, fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def create(port: int, name: str, partitions: int = 1, replicas: int = 1) -> int:
    return cw.create_topics(port, [(name, partitions, replicas, None)], timeout_ms=10000)[name][0]


def create_until_ok(port: int, name: str, deadline: Deadline, partitions: int = 1, replicas: int = 1) -> list:
    """Retries at once after REQUEST_TIMED_OUT, NOT_CONTROLLER or a
    connection error; returns what each failed attempt met (error codes,
    or "io" for a connection error)."""
    failures = []
    while True:
        deadline.check(f"CreateTopics {name}")
        try:
            code = create(port, name, partitions, replicas)
        except OSError:
            failures.append("io")
            time.sleep(0.01)
            continue
        if code == cw.NONE:
            return failures
        if code not in (cw.REQUEST_TIMED_OUT, cw.NOT_CONTROLLER):
            raise RuntimeError(f"CreateTopics {name}: error {code}")
        failures.append(code)


def watch_new_leader(port: int, old_leader: int, found: dict, stop: threading.Event) -> None:
    """Polls DescribeQuorum on one node until it names another leader."""
    while not stop.is_set():
        try:
            state = cw.describe_quorum(port, timeout_s=2, version=DESCRIBE_QUORUM_VERSION)
            if state.error_code == cw.NONE and state.leader_id not in (-1, old_leader):
                found["at"] = time.perf_counter()
                found["leader"] = state.leader_id
                return
        except (OSError, ValueError, AssertionError):
            pass
        time.sleep(0.01)


def caught_up(cluster: Cluster, node, topic: str) -> bool:
    if topic not in node.metadata([topic]).topics or node.metadata([topic]).topics[topic].error_code:
        return False
    state = node.quorum()
    return state.error_code == cw.NONE and all(
        offset >= state.high_watermark for offset in state.voters.values()
    )


def failover(cluster: Cluster, trials: int, deadline: Deadline) -> dict:
    write_ms, elect_ms, failures = [], [], []
    for trial in range(trials):
        deadline.check("failover")
        old = cluster.active_controller(timeout_s=min(60, deadline.left()))
        victim = cluster.node(old.leader_id)
        survivors = cluster.others(victim)
        via, watched = survivors[trial % 2], survivors[(trial + 1) % 2]
        found, stop = {}, threading.Event()
        watcher = threading.Thread(target=watch_new_leader, args=(watched.port, victim.node_id, found, stop))
        watcher.start()
        victim.kill()
        killed = time.perf_counter()
        topic = f"failover-{trial}"
        try:
            failures.append(create_until_ok(via.port, topic, deadline))
            write_ms.append((time.perf_counter() - killed) * 1000)
        finally:
            watcher.join(timeout=max(0.1, min(30, deadline.left())))
            stop.set()
            watcher.join()
        if "at" in found:
            elect_ms.append((found["at"] - killed) * 1000)
        victim.start()
        cluster.wait_ready(min(120, max(1, deadline.left())))
        wait_until(lambda: caught_up(cluster, victim, topic), min(60, max(1, deadline.left())),
                   f"node {victim.node_id} caught up", interval_s=0.1)
        print(f"  trial {trial + 1}/{trials}: node {victim.node_id} killed, write after "
              f"{write_ms[-1]:.0f} ms (failed attempts before: {failures[-1]})", flush=True)
    return {"write_ms": write_ms, "elect_ms": elect_ms, "failures": failures}


def shows(connection: wire.Connection, topic: str, partitions: int) -> bool:
    view = cw.decode_metadata_v7(connection.call(cw.API_METADATA, 7, cw.metadata_v7_body([topic])))
    state = view.topics.get(topic)
    return (
        state is not None
        and state.error_code == cw.NONE
        and len(state.partitions) == partitions
        and all(p.leader >= 0 for p in state.partitions.values())
    )


def propagation(cluster: Cluster, topics: int, deadline: Deadline) -> dict:
    brokers = cluster.running_brokers()
    connections = [wire.Connection(node.port) for node in brokers]
    all_ms, response_ms = [], []
    try:
        for index in range(topics):
            deadline.check("propagation")
            topic = f"propagation-{index}"
            via = brokers[index % len(brokers)]
            started = time.perf_counter()
            code = create(via.port, topic)
            responded = time.perf_counter()
            if code != cw.NONE:
                raise RuntimeError(f"CreateTopics {topic}: error {code}")
            pending = list(connections)
            while pending:
                deadline.check("propagation")
                pending = [c for c in pending if not shows(c, topic, 1)]
            all_ms.append((time.perf_counter() - started) * 1000)
            response_ms.append((responded - started) * 1000)
    finally:
        for connection in connections:
            connection.close()
    return {"all_ms": all_ms, "response_ms": response_ms}


def throughput(cluster: Cluster, topics: int, partitions: int, per_topic: int, replicas: int,
               deadline: Deadline) -> dict:
    active = cluster.active_controller().leader_id
    via = cluster.others(active)[0]
    started = time.perf_counter()
    for index in range(topics):
        deadline.check("topic throughput")
        code = create(via.port, f"throughput-{index}")
        if code != cw.NONE:
            raise RuntimeError(f"CreateTopics throughput-{index}: error {code}")
    topic_s = time.perf_counter() - started

    count = partitions // per_topic
    names = [f"partitions-{index}" for index in range(count)]
    started = time.perf_counter()
    for name in names:
        deadline.check("partition throughput")
        code = create(via.port, name, per_topic, replicas)
        if code != cw.NONE:
            raise RuntimeError(f"CreateTopics {name}: error {code}")
    created_s = time.perf_counter() - started

    def everywhere():
        for node in cluster.running_brokers():
            view = node.metadata(names, timeout_s=30)
            for name in names:
                state = view.topics.get(name)
                if state is None or state.error_code != cw.NONE or len(state.partitions) != per_topic:
                    return False
                if any(p.leader < 0 for p in state.partitions.values()):
                    return False
        return True

    wait_until(everywhere, max(1, deadline.left()), "every partition on every broker", interval_s=0.05)
    shown_s = time.perf_counter() - started
    return {
        "topics": topics,
        "topic_s": topic_s,
        "via": via.node_id,
        "partitions": count * per_topic,
        "replicas": replicas,
        "created_s": created_s,
        "shown_s": shown_s,
    }


def binary_description(binary: Path) -> str:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return f"{binary} (worktree at {commit}{', modified' if dirty else ''})"


def report(results: dict) -> None:
    rows = []
    if "failover" in results:
        f = results["failover"]
        rows.append((f"failover: kill -9 to next CreateTopics via a survivor (n={len(f['write_ms'])})",
                     f"p50 {statistics.median(f['write_ms']):,.0f} ms, max {max(f['write_ms']):,.0f} ms"))
        if f["elect_ms"]:
            rows.append((f"failover: kill -9 to a survivor naming the new leader (n={len(f['elect_ms'])})",
                         f"p50 {statistics.median(f['elect_ms']):,.0f} ms, max {max(f['elect_ms']):,.0f} ms"))
        met = {}
        for trial in f["failures"]:
            for failure in trial:
                met[failure] = met.get(failure, 0) + 1
        rows.append(("failover: failed CreateTopics attempts before the success, all trials",
                     ", ".join(f"{met[k]} x {FAILURE_NAMES.get(k, k)}" for k in sorted(met, key=str)) or "none"))
    if "propagation" in results:
        p = results["propagation"]
        n = len(p["all_ms"])
        rows.append((f"propagation: CreateTopics sent to every broker's Metadata showing it (n={n})",
                     f"p50 {statistics.median(p['all_ms']):,.1f} ms, p99 {percentile(p['all_ms'], 0.99):,.1f} ms, "
                     f"max {max(p['all_ms']):,.1f} ms"))
        rows.append((f"propagation: CreateTopics response (n={n})",
                     f"p50 {statistics.median(p['response_ms']):,.1f} ms, "
                     f"p99 {percentile(p['response_ms'], 0.99):,.1f} ms"))
    if "throughput" in results:
        t = results["throughput"]
        rows.append((f"{t['topics']} single-partition topics, one request after another via node {t['via']}",
                     f"{t['topic_s']:.2f} s: {t['topics'] / t['topic_s']:,.0f} topics/s"))
        rows.append((f"{t['partitions']:,} partitions (topics of 100, replication factor {t['replicas']}): "
                     "last response",
                     f"{t['created_s']:.2f} s: {t['partitions'] / t['created_s']:,.0f} partitions/s"))
        rows.append((f"{t['partitions']:,} partitions: until every broker's Metadata shows all led",
                     f"{t['shown_s']:.2f} s"))
    width = max(len(name) for name, _ in rows)
    print()
    print(f"| {'figure'.ljust(width)} | result |")
    print(f"|{'-' * (width + 2)}|--------|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="failover trials (0 skips)")
    parser.add_argument("--topics", type=int, default=100, help="propagation topics (0 skips)")
    parser.add_argument("--throughput-topics", type=int, default=500, help="0 skips the throughput step")
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=1800, help="seconds for the whole run")
    args = parser.parse_args()
    binary = Path(os.environ.get("STROM_BROKER_BIN", ROOT / "target" / "release" / "strom-broker"))
    deadline = Deadline(args.time_limit)
    print(f"binary: {binary_description(binary)}")
    print(f"cpus: {os.cpu_count()}, load average at start: {os.getloadavg()}")
    results = {}
    with tempfile.TemporaryDirectory(prefix="strom-cluster-bench-") as base:
        cluster = Cluster(binary, Path(base), nodes=3, extra=KAFKA_LIVENESS)
        try:
            cluster.start()
            if args.trials:
                print(f"failover, {args.trials} trials", flush=True)
                results["failover"] = failover(cluster, args.trials, deadline)
            if args.topics:
                print(f"propagation, {args.topics} topics", flush=True)
                results["propagation"] = propagation(cluster, args.topics, deadline)
            if args.throughput_topics:
                print(f"throughput, {args.throughput_topics} topics and {args.partitions} partitions", flush=True)
                results["throughput"] = throughput(
                    cluster, args.throughput_topics, args.partitions, 100, args.replicas, deadline)
        except BaseException:
            print(cluster.details(), file=sys.stderr)
            raise
        finally:
            cluster.kill_all()
    print(f"load average at end: {os.getloadavg()}")
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
