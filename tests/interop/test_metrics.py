"""The metrics endpoint under load, read by a real Prometheus.

A Strom broker with `strom.metrics.listener` serves /metrics; Prometheus
(Debian's package, started here on 127.0.0.1 with a 1 s scrape interval)
scrapes it while librdkafka produces at a known rate. The test asks
Prometheus' HTTP API what it saw and checks it against what the load did:
the message rate, request latency quantiles, and consumer lag per partition
(two consumers behind, then caught up). `promtool check metrics` checks the
exposition itself.
"""
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
from confluent_kafka import Consumer, TopicPartition

from conftest import free_port
from datapath import confluent_producer, create_topic

TOPIC = "metered"
GROUP = "laggards"
RATE_PER_S = 400
LOAD_S = 6.0


def http_get(url: str, accept: str = None) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


class Prometheus:
    """A Prometheus server scraping one target every second."""

    def __init__(self, workdir, target: str):
        binary = shutil.which("prometheus")
        assert binary, "prometheus is not installed (scripts/test installs Debian's package)"
        self.port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: strom\n    static_configs:\n"
            f"      - targets: ['{target}']\n"
        )
        self.log = open(workdir / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def query(self, expression: str) -> list:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
        answer = json.loads(http_get(url))
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def value(self, expression: str):
        """The single value of an instant query, or None."""
        try:
            result = self.query(expression)
        except OSError:
            return None
        if len(result) != 1:
            return None
        return float(result[0]["value"][1])

    def wait_for(self, expression: str, predicate, timeout_s: float = 20.0):
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            last = self.value(expression)
            if last is not None and predicate(last):
                return last
            time.sleep(0.25)
        raise AssertionError(f"{expression}: last value {last}")

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


@pytest.fixture
def metered(broker_factory, tmp_path):
    metrics_port = free_port()
    broker = broker_factory(**{"strom.metrics.listener": f"http://127.0.0.1:{metrics_port}"})
    prometheus = Prometheus(tmp_path, f"127.0.0.1:{metrics_port}")
    try:
        yield broker, metrics_port, prometheus
    finally:
        prometheus.stop()


def produce_steadily(bootstrap: str) -> list:
    """RATE_PER_S records a second for LOAD_S seconds over 2 partitions;
    returns each record's delivery latency in seconds."""
    producer = confluent_producer(bootstrap, **{"linger.ms": 5, "acks": "all"})
    latencies = []

    def delivered(sent_at):
        def callback(error, _message):
            assert error is None, error
            latencies.append(time.monotonic() - sent_at)
        return callback

    total = int(RATE_PER_S * LOAD_S)
    start = time.monotonic()
    for index in range(total):
        due = start + index / RATE_PER_S
        while time.monotonic() < due:
            producer.poll(max(0.0, due - time.monotonic()))
        producer.produce(TOPIC, value=b"x" * 200, partition=index % 2, on_delivery=delivered(time.monotonic()))
    assert producer.flush(30) == 0
    assert len(latencies) == total
    return latencies


@pytest.mark.timeout(120)
def test_prometheus_sees_the_load_the_latencies_and_the_lag(metered):
    broker, metrics_port, prometheus = metered
    create_topic(broker.bootstrap, TOPIC, partitions=2)
    prometheus.wait_for('up{job="strom"}', lambda up: up == 1.0)

    latencies = produce_steadily(broker.bootstrap)
    total = len(latencies)
    series = f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}}'
    prometheus.wait_for(series, lambda count: count == total)
    # The rate while the load ran matches the rate produced: the median of
    # the non-zero 3 s rates of the last minute (robust to the producer
    # catching up after a stall; Prometheus extrapolates to the windows'
    # edges, hence the tolerance).
    rate = prometheus.value(f"quantile_over_time(0.5, (rate({series}[3s]) > 0)[60s:1s])")
    assert rate is not None and 0.6 * RATE_PER_S <= rate <= 1.6 * RATE_PER_S, rate
    bytes_in = prometheus.value(f'kafka_server_brokertopicmetrics_bytesin_total{{topic="{TOPIC}"}}')
    assert bytes_in >= total * 200

    # The broker's produce latency: positive and no longer than what the
    # client waited for its slowest record.
    quantile = prometheus.value(
        "histogram_quantile(0.99, sum by (le) (increase("
        'kafka_network_requestmetrics_totaltime_seconds_bucket{request="Produce"}[1m])))'
    )
    assert quantile is not None and 0 < quantile, quantile
    latencies.sort()
    assert quantile <= max(latencies[-1], 0.01) * 2.5, (quantile, latencies[-1])
    requests = prometheus.value('kafka_network_requestmetrics_requests_total{request="Produce"}')
    assert 0 < requests <= total

    # Two consumers of one group, each behind on its partition.
    consumed = {0: 300, 1: 500}
    end = {}
    for partition, count in consumed.items():
        consumer = Consumer({
            "bootstrap.servers": broker.bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
        })
        consumer.assign([TopicPartition(TOPIC, partition, 0)])
        read = 0
        deadline = time.monotonic() + 20
        while read < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                read += 1
        assert read == count
        consumer.commit(offsets=[TopicPartition(TOPIC, partition, count)], asynchronous=False)
        end[partition] = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=10)[1]
        consumer.close()
    for partition, count in consumed.items():
        lag = f'kafka_consumergroup_lag{{group="{GROUP}",topic="{TOPIC}",partition="{partition}"}}'
        prometheus.wait_for(lag, lambda value, want=end[partition] - count: value == want)

    # They catch up: lag goes to 0 on both partitions.
    catch_up = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP})
    catch_up.commit(
        offsets=[TopicPartition(TOPIC, partition, end[partition]) for partition in consumed],
        asynchronous=False,
    )
    catch_up.close()
    for partition in consumed:
        lag = f'kafka_consumergroup_lag{{group="{GROUP}",topic="{TOPIC}",partition="{partition}"}}'
        prometheus.wait_for(lag, lambda value: value == 0)

    # promtool accepts the exposition as served to anyone not asking for
    # OpenMetrics; Prometheus itself negotiated OpenMetrics above.
    exposition = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
    check = subprocess.run(["promtool", "check", "metrics"], input=exposition, capture_output=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    assert http_get(
        f"http://127.0.0.1:{metrics_port}/metrics", accept="application/openmetrics-text"
    ).endswith(b"# EOF\n")


@pytest.mark.timeout(60)
def test_a_bad_connection_flood_is_counted_not_logged_line_by_line(metered):
    import socket

    broker, metrics_port, _ = metered
    floods = 300
    for _ in range(floods):
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as sock:
            # A frame of 12 bytes that is no request Kafka knows.
            sock.sendall(b"\x00\x00\x00\x0c" + b"\xff" * 12)
            try:
                sock.recv(16)
            except OSError:
                pass
    exposition = http_get(f"http://127.0.0.1:{metrics_port}/metrics").decode()
    counted = [line for line in exposition.splitlines() if line.startswith("strom_network_undecodable_requests_total ")]
    assert counted and float(counted[0].split()[1]) == floods, counted
    warnings = [line for line in broker.log_text().splitlines() if "undecodable request" in line]
    assert 1 <= len(warnings) <= 3, warnings
