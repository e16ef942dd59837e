#!/usr/bin/env python3
"""Produce latency while a consumer reads a topic that is not in the page cache.

    .venv/bin/python scripts/cold-fetch-probe.py BROKER_BIN LOAD_BIN [RECORDS]

Starts BROKER_BIN with one async worker (TOKIO_WORKER_THREADS=1) and a fresh
data directory on 127.0.0.1:19095, fills topic `cold` with RECORDS 100-byte
records (default 5,000,000) with LOAD_BIN (`strom-load`), writes out and drops
that topic's segments from the page cache (fsync, posix_fadvise DONTNEED),
and then reads the whole topic with `strom-load fetch` while a confluent-kafka
producer (acks=1, linger.ms=0) keeps sending one record at a time to another
topic. Prints the fetch's time and rate and the producer's send-to-ack
latencies (p50, p99, max) taken while the fetch ran: a broker whose worker
waits for the disk shows it in those latencies. Needs the interop suite's
virtual environment (scripts/python-env). Stops the broker at the end.
"""
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Producer

PORT = 19095


def main() -> None:
    broker_bin, load_bin = sys.argv[1], sys.argv[2]
    records = int(sys.argv[3]) if len(sys.argv) > 3 else 5_000_000
    data = tempfile.mkdtemp()
    bootstrap = f"127.0.0.1:{PORT}"
    broker = subprocess.Popen(
        [broker_bin, "--set", f"listeners=PLAINTEXT://{bootstrap}", "--set", f"log.dirs={data}/data"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, TOKIO_WORKER_THREADS="1"),
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", PORT), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        subprocess.run(
            [load_bin, "--bootstrap", bootstrap, "--topic", "cold", "produce",
             "--records", str(records), "--acks", "1"],
            check=True, stdout=subprocess.DEVNULL,
        )
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "1"})
        for _ in range(50):
            producer.produce("probe", b"warm-up")
        producer.flush(10)
        for path in glob.glob(f"{data}/data/cold-*/*.log"):
            fd = os.open(path, os.O_RDONLY)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        latencies = []

        def acknowledged(sent_at):
            def callback(error, _message):
                if error is None:
                    latencies.append(time.monotonic() - sent_at)
            return callback

        fetch = subprocess.Popen(
            [load_bin, "--bootstrap", bootstrap, "--topic", "cold", "--json", "fetch"],
            stdout=subprocess.PIPE, text=True,
        )
        started = time.monotonic()
        while fetch.poll() is None:
            producer.produce("probe", b"x", on_delivery=acknowledged(time.monotonic()))
            producer.poll(0.002)
        elapsed = time.monotonic() - started
        producer.flush(10)
        report = json.loads(fetch.stdout.read().strip().splitlines()[-1])
        latencies.sort()

        def quantile(q):
            return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e3

        print(
            f"{broker_bin}: fetch {elapsed:.2f} s ({report['records_per_s'] / 1e6:.1f} M records/s); "
            f"produce probe n={len(latencies)} p50={quantile(0.5):.2f} ms "
            f"p99={quantile(0.99):.2f} ms max={latencies[-1] * 1e3:.2f} ms"
        )
    finally:
        broker.terminate()
        broker.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
