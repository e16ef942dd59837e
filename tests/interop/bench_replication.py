"""Produce rate to three local Strom broker processes: replication factor 3
with acks=all against replication factor 1 with acks=1, same load
generator (confluent-kafka), rounds alternating in one run. Not a test.

Run after `cargo build -p strom-broker` (or --release, then point
STROM_BROKER_BIN at target/release/strom-broker):

    STROM_BIN_DIR=$PWD/target/debug STROM_BROKER_BIN=$PWD/target/debug/strom-broker \\
        .venv/bin/python tests/interop/bench_replication.py

While the replication factor 3 rounds run, the leader's
`strom_replica_follower_lag` (its log end offset minus each follower's, as
of that follower's last fetch) is sampled from its metrics endpoint every
20 ms; p50 and p99 over all samples of both followers are printed. Then
consumers read each topic from the start, alternating, ROUNDS times: the
replicated topic's read rate against the unreplicated one's.

RECORDS (default 200000) records of 1 KiB per round, ROUNDS (default 3)
rounds of each kind. Each round's producer first has one record
acknowledged, untimed: an idempotent librdkafka producer waits about half a
second for its producer id, a start-up cost that would otherwise dominate
the idempotent rounds."""
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conftest import broker_binary  # noqa: E402
from conftest import free_port  # noqa: E402
from test_replication import start_cluster, wait_until  # noqa: E402

RECORDS = int(os.environ.get("RECORDS", "200000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
RECORD = b"r" * 1024


def produce(bootstrap, topic, acks):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "enable.idempotence": acks == "all",
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})
    producer.produce(topic, b"warm-up", partition=0)
    assert producer.flush(60) == 0
    start = time.perf_counter()
    for _ in range(RECORDS):
        while True:
            try:
                producer.produce(topic, RECORD, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(300) == 0
    return RECORDS / (time.perf_counter() - start)


def consume(bootstrap, topic, expected):
    """Records/s reading `expected` records of `topic` from the start."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time()}",
                         "enable.auto.commit": False, "fetch.max.bytes": 52_428_800})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    start = None
    deadline = time.monotonic() + 300
    while seen < expected and time.monotonic() < deadline:
        batch = consumer.consume(num_messages=10_000, timeout=1.0)
        if batch and start is None:
            start = time.perf_counter()
        seen += sum(1 for message in batch if message.error() is None)
    elapsed = time.perf_counter() - (start or time.perf_counter())
    consumer.close()
    assert seen >= expected, f"read {seen} of {expected} records of {topic}"
    return seen / elapsed


LAG = re.compile(r'^strom_replica_follower_lag\{[^}]*topic="rf3"[^}]*\} (\d+)', re.M)


class LagSampler:
    """Samples the leader's follower lags until stopped."""

    def __init__(self, metrics_port):
        self.url = f"http://127.0.0.1:{metrics_port}/metrics"
        self.samples = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stopping.wait(0.02):
            try:
                text = urllib.request.urlopen(self.url, timeout=2).read().decode()
            except OSError:
                continue
            self.samples.extend(int(value) for value in LAG.findall(text))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join(5)


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        metrics_ports = {node: free_port() for node in (1, 2, 3)}
        brokers = start_cluster(broker_binary(), Path(tmp), lambda node: {
            "strom.metrics.listener": f"http://127.0.0.1:{metrics_ports[node]}"})
        try:
            bootstrap = ",".join(broker.bootstrap for broker in brokers.values())
            admin = AdminClient({"bootstrap.servers": bootstrap})
            wait_until("three brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3)
            futures = admin.create_topics([NewTopic("rf1", 1, 1), NewTopic("rf3", 1, 3)])
            for future in futures.values():
                future.result(30)
            wait_until("a full ISR", lambda: len(
                admin.list_topics("rf3", timeout=10).topics["rf3"].partitions[0].isrs) == 3)
            leader = admin.list_topics("rf3", timeout=10).topics["rf3"].partitions[0].leader
            rates = {"rf1 acks=1": [], "rf3 acks=all": []}
            lags = []
            for _ in range(ROUNDS):
                rates["rf1 acks=1"].append(produce(bootstrap, "rf1", "1"))
                with LagSampler(metrics_ports[leader]) as sampler:
                    rates["rf3 acks=all"].append(produce(bootstrap, "rf3", "all"))
                lags.extend(sampler.samples)
            for name, values in rates.items():
                print(f"{name}: median {statistics.median(values):,.0f} records/s "
                      f"({', '.join(f'{v:,.0f}' for v in values)})")
            ratio = statistics.median(rates["rf3 acks=all"]) / statistics.median(rates["rf1 acks=1"])
            print(f"ratio rf3 acks=all / rf1 acks=1: {ratio:.2f}")
            if lags:
                print(f"follower lag (records): p50 {percentile(lags, 0.5)}, "
                      f"p99 {percentile(lags, 0.99)}, max {max(lags)} over {len(lags)} samples")
            # Consumers read each topic from the start (from its leader, as
            # Kafka's consumers do): the replicated topic against the other.
            stored = ROUNDS * (RECORDS + 1)
            reads = {"rf1": [], "rf3": []}
            for _ in range(ROUNDS):
                for topic in ("rf1", "rf3"):
                    reads[topic].append(consume(bootstrap, topic, stored))
            for topic, values in reads.items():
                print(f"consume {topic}: median {statistics.median(values):,.0f} records/s "
                      f"({', '.join(f'{v:,.0f}' for v in values)})")
            print(f"consume ratio rf3 / rf1: "
                  f"{statistics.median(reads['rf3']) / statistics.median(reads['rf1']):.2f}")
        finally:
            for broker in brokers.values():
                broker.kill()


if __name__ == "__main__":
    main()
