"""Produce rate to three local Strom broker processes: replication factor 3
with acks=all against replication factor 1 with acks=1, same load
generator (confluent-kafka), rounds alternating in one run. Not a test.

Run after `cargo build -p strom-broker` (or --release, then point
STROM_BROKER_BIN at target/release/strom-broker):

    STROM_BIN_DIR=$PWD/target/debug STROM_BROKER_BIN=$PWD/target/debug/strom-broker \\
        .venv/bin/python tests/interop/bench_replication.py

RECORDS (default 200000) records of 1 KiB per round, ROUNDS (default 3)
rounds of each kind. Each round's producer first has one record
acknowledged, untimed: an idempotent librdkafka producer waits about half a
second for its producer id, a start-up cost that would otherwise dominate
the idempotent rounds."""
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from conftest import broker_binary  # noqa: E402
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


def main():
    with tempfile.TemporaryDirectory() as tmp:
        brokers = start_cluster(broker_binary(), Path(tmp))
        try:
            bootstrap = ",".join(broker.bootstrap for broker in brokers.values())
            admin = AdminClient({"bootstrap.servers": bootstrap})
            wait_until("three brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3)
            futures = admin.create_topics([NewTopic("rf1", 1, 1), NewTopic("rf3", 1, 3)])
            for future in futures.values():
                future.result(30)
            wait_until("a full ISR", lambda: len(
                admin.list_topics("rf3", timeout=10).topics["rf3"].partitions[0].isrs) == 3)
            rates = {"rf1 acks=1": [], "rf3 acks=all": []}
            for _ in range(ROUNDS):
                rates["rf1 acks=1"].append(produce(bootstrap, "rf1", "1"))
                rates["rf3 acks=all"].append(produce(bootstrap, "rf3", "all"))
            for name, values in rates.items():
                print(f"{name}: median {statistics.median(values):,.0f} records/s "
                      f"({', '.join(f'{v:,.0f}' for v in values)})")
            ratio = statistics.median(rates["rf3 acks=all"]) / statistics.median(rates["rf1 acks=1"])
            print(f"ratio rf3 acks=all / rf1 acks=1: {ratio:.2f}")
        finally:
            for broker in brokers.values():
                broker.kill()


if __name__ == "__main__":
    main()
