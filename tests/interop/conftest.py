"""Shared fixtures of the interop suite: a real Strom broker per test module.

The suite starts the broker binary itself, on a free loopback port with a
fresh data directory, and talks to it only with clients written by others
(confluent-kafka / librdkafka, kafka-python, and KafkaJS under Node.js). The binary comes from
STROM_BROKER_BIN, or is built with cargo (debug profile) on first use.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def broker_binary() -> Path:
    explicit = os.environ.get("STROM_BROKER_BIN")
    if explicit:
        return Path(explicit)
    subprocess.run(
        ["cargo", "build", "--quiet", "-p", "strom-broker", "--bin", "strom-broker"],
        cwd=ROOT,
        check=True,
    )
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / "strom-broker"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout_s: float, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode} during start-up")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"broker did not listen on {port} within {timeout_s}s")


class Broker:
    """A Strom broker process under test."""

    def __init__(self, binary: Path, data_dir: Path, extra: dict):
        self.binary = binary
        self.data_dir = data_dir
        self.port = free_port()
        self.extra = dict(extra)
        self.process = None
        self.log_path = data_dir.parent / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self) -> dict:
        props = {
            "node.id": "1",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.extra)
        return props

    def start(self) -> None:
        self.launch()
        self.wait_listening(30.0)

    def launch(self) -> None:
        """Starts the process; returns at once (the client port listens
        only once the broker can answer: in a cluster, after a quorum)."""
        config = self.data_dir.parent / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [str(self.binary), "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")},
        )

    def wait_listening(self, timeout_s: float) -> None:
        wait_for_port(self.port, timeout_s, self.process)

    def stop(self, timeout_s: float = 30.0) -> int:
        """Graceful stop with SIGTERM; returns the exit code."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise

    def kill(self) -> None:
        """kill -9: no chance to flush or to write the clean-shutdown marker."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self, hard: bool = False) -> None:
        if hard:
            self.kill()
        else:
            self.stop()
        self.start()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


@pytest.fixture(scope="session")
def strom_binary() -> Path:
    return broker_binary()


@pytest.fixture
def broker_factory(strom_binary, tmp_path):
    """Makes brokers with extra properties; stops them all at teardown."""
    brokers = []

    def make(**extra) -> Broker:
        base = Path(tempfile.mkdtemp(dir=tmp_path))
        data_dir = base / "data"
        data_dir.mkdir()
        broker = Broker(strom_binary, data_dir, {k.replace("_", "."): str(v) for k, v in extra.items()})
        broker.start()
        brokers.append(broker)
        return broker

    yield make
    for broker in brokers:
        broker.kill()


@pytest.fixture
def broker(broker_factory) -> Broker:
    return broker_factory()
