"""Multi-process Strom clusters for the interop suite and scripts/cluster-bench.

A `Cluster` is N `strom-broker` processes on 127.0.0.1, each with its own
ports and data directory, configured with Kafka's KRaft settings
(`process.roles`, `node.id`, `controller.quorum.voters`, a CONTROLLER
listener). Nodes can be killed with SIGKILL, stopped with SIGTERM (waiting
for the exit) and restarted on the same files and ports. The active
controller is found with DescribeQuorum, cluster membership with each
broker's own Metadata (clusterwire.py encodes both by hand, so every
question goes to exactly the node it names).

No process outlives its starter: every child gets PR_SET_PDEATHSIG
(SIGKILL when the starting thread ends, so start nodes only from the main
thread), is killed at interpreter exit (atexit), and `Cluster.kill_all` is
meant for fixture finalizers.
"""
import atexit
import base64
import ctypes
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import clusterwire as cw

# Short liveness settings, so that fencing is quick enough for tests.
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 500
# controller.quorum.request.timeout.ms: how long a metadata write may wait.
QUORUM_REQUEST_TIMEOUT_MS = 2000
# Few partitions of __consumer_offsets keep start-up cheap; tests compute
# the coordinator partition from this.
OFFSETS_PARTITIONS = 6

START_TIMEOUT_S = 60.0
# The DescribeQuorum version the harness asks with to find the active
# controller: the first, which every tool may send. The later versions
# (v1, v2) are checked by test_cluster's election test.
DESCRIBE_QUORUM_VERSION = 0

_children = set()
_children_lock = threading.Lock()


def _kill_children() -> None:
    with _children_lock:
        processes = list(_children)
    for process in processes:
        if process.poll() is None:
            process.kill()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


atexit.register(_kill_children)


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGKILL when the parent thread dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def free_ports(count: int) -> list:
    """`count` distinct free loopback ports (all held open while choosing,
    so that no two are the same)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def new_cluster_id() -> str:
    """A Kafka cluster id: a UUID in URL-safe base64, 22 characters."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class WaitTimeout(AssertionError):
    """A condition that did not hold before its deadline."""


def wait_until(condition, timeout_s: float, what: str, interval_s: float = 0.05, details=None):
    """Calls `condition` until it returns something truthy (returned) or
    the deadline passes (WaitTimeout naming `what`, the last value or
    error, and `details()` if given). Errors from `condition` (a node
    down, a refused connection) count as not yet."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        try:
            value = condition()
            if value:
                return value
            last = value
        except (OSError, ValueError, AssertionError) as error:
            last = error
        if time.monotonic() >= deadline:
            extra = f"\n{details()}" if details is not None else ""
            raise WaitTimeout(f"{what}: not within {timeout_s:.1f}s (last: {last!r}){extra}")
        time.sleep(interval_s)


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Node:
    """One `strom-broker` process of a cluster: a voter and broker by
    default (`process.roles=broker,controller`)."""

    def __init__(self, cluster: "Cluster", node_id: int, roles: str, name: str = None, ports=None):
        self.cluster = cluster
        self.node_id = node_id
        self.roles = roles
        broker_port, controller_port = ports if ports is not None else free_ports(2)
        self.port = broker_port if self.is_broker else None
        self.controller_port = controller_port if self.is_controller else None
        self.base = cluster.base_dir / (name or f"node-{node_id}")
        self.data_dir = self.base / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.process = None
        self.starts = 0
        self.extra = {}

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles.split(",")

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles.split(",")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """The standard error (where the broker logs) of the current or
        last start; standard output goes beside it (`.out`)."""
        return self.base / f"broker.{self.starts}.log"

    def properties(self) -> dict:
        listeners = []
        if self.is_broker:
            listeners.append(f"PLAINTEXT://127.0.0.1:{self.port}")
        if self.is_controller:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_port}")
        props = {
            "process.roles": self.roles,
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.cluster.voters,
            "listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "strom.cluster.id": self.cluster.cluster_id,
            "log.dirs": str(self.data_dir),
            "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "broker.heartbeat.interval.ms": str(HEARTBEAT_INTERVAL_MS),
            "controller.quorum.request.timeout.ms": str(QUORUM_REQUEST_TIMEOUT_MS),
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
            "group.initial.rebalance.delay.ms": "0",
        }
        if self.is_broker:
            props["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        props.update(self.cluster.extra)
        props.update(self.extra)
        return props

    def spawn(self) -> None:
        """Starts the process and returns at once (see `wait_listening`)."""
        assert not self.running, f"node {self.node_id} is already running"
        config = self.base / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        self.starts += 1
        with open(self.log_path, "wb") as log, open(self.log_path.with_suffix(".out"), "wb") as out:
            self.process = subprocess.Popen(
                [str(self.cluster.binary), "--config", str(config)],
                stdout=out,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")},
                preexec_fn=_die_with_parent,
            )
        with _children_lock:
            _children.add(self.process)

    def wait_listening(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until every listener of the node accepts connections; fails at
        once if the process exits."""
        ports = [port for port in (self.port, self.controller_port) if port is not None]

        def listening():
            if self.process.poll() is not None:
                raise WaitTimeout(
                    f"node {self.node_id} exited with {self.process.returncode} during start-up:\n"
                    f"{self.log_tail()}"
                )
            return all(port_open(port) for port in ports)

        deadline = time.monotonic() + timeout_s
        while not listening():
            if time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"node {self.node_id} not listening on {ports} within {timeout_s}s:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        self.spawn()
        self.wait_listening(timeout_s)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """kill -9, and reap the process."""
        if self.running:
            self.process.kill()
        if self.process is not None:
            self.process.wait(timeout=30)

    def terminate(self, timeout_s: float = 60.0) -> int:
        """SIGTERM and wait for the exit; returns the exit code. A process
        that does not exit in time is killed and the wait fails."""
        if not self.running:
            return self.process.returncode if self.process is not None else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise WaitTimeout(f"node {self.node_id} did not exit within {timeout_s}s of SIGTERM")

    def wait_exit(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise WaitTimeout(f"node {self.node_id} still running after {timeout_s}s") from None

    def stderr_text(self, start: int = None) -> str:
        """The standard error of one start (the current or last by default)."""
        path = self.base / f"broker.{self.starts if start is None else start}.log"
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""

    def log_text(self, start: int = None) -> str:
        """Standard error, then standard output, of one start."""
        path = self.base / f"broker.{self.starts if start is None else start}.out"
        try:
            out = path.read_text(errors="replace")
        except OSError:
            out = ""
        return self.stderr_text(start) + out

    def log_tail(self, lines: int = 25) -> str:
        text = self.log_text().splitlines()[-lines:]
        return "\n".join(f"  [node {self.node_id}] {line}" for line in text)

    # --- questions to this node ------------------------------------------

    def metadata(self, topics=None, timeout_s: float = 5.0) -> cw.ClusterView:
        return cw.metadata(self.port, topics, timeout_s)

    def quorum(self, timeout_s: float = 5.0, version: int = None) -> cw.QuorumState:
        """DescribeQuorum answered by this node (at DESCRIBE_QUORUM_VERSION
        unless another version is asked)."""
        chosen = DESCRIBE_QUORUM_VERSION if version is None else version
        return cw.describe_quorum(self.port, timeout_s, chosen)


class Cluster:
    """N nodes sharing a cluster id and a voter set. By default all are
    voters and brokers (combined mode, node ids 1..N)."""

    def __init__(self, binary: Path, base_dir: Path, nodes: int = 3, roles: str = "broker,controller",
                 extra: dict = None):
        self.binary = Path(binary)
        self.base_dir = Path(base_dir)
        self.cluster_id = new_cluster_id()
        self.extra = dict(extra or {})
        self.nodes = []
        self.voters = ""
        ports = free_ports(2 * nodes)
        for node_id in range(1, nodes + 1):
            self.nodes.append(Node(self, node_id, roles, ports=ports[2 * node_id - 2:2 * node_id]))
        self.voters = ",".join(
            f"{node.node_id}@127.0.0.1:{node.controller_port}" for node in self.nodes if node.is_controller
        )

    def add_broker(self, node_id: int) -> Node:
        """Adds a broker-only node (`process.roles=broker`, not a voter)
        with its own ports; start it with `start_nodes` (or `start`)."""
        node = Node(self, node_id, "broker")
        self.nodes.append(node)
        return node

    def node(self, node_id: int) -> Node:
        (found,) = [node for node in self.nodes if node.node_id == node_id]
        return found

    @property
    def voter_ids(self) -> set:
        return {node.node_id for node in self.nodes if node.is_controller}

    def running(self) -> list:
        return [node for node in self.nodes if node.running]

    def running_brokers(self) -> list:
        return [node for node in self.running() if node.is_broker]

    def others(self, *excluded) -> list:
        """Running brokers other than the given nodes or node ids."""
        ids = {getattr(node, "node_id", node) for node in excluded}
        return [node for node in self.running_brokers() if node.node_id not in ids]

    # --- life cycle --------------------------------------------------------

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Starts every node (all processes first: a voter cannot finish
        starting without a majority), then waits until the cluster is ready."""
        self.start_nodes(self.nodes, timeout_s)

    def start_nodes(self, nodes, timeout_s: float = START_TIMEOUT_S) -> None:
        for node in nodes:
            node.spawn()
        deadline = time.monotonic() + timeout_s
        for node in nodes:
            node.wait_listening(max(0.1, deadline - time.monotonic()))
        self.wait_ready(max(0.1, deadline - time.monotonic()))

    def restore(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Starts every node that is down, then waits until ready."""
        self.start_nodes([node for node in self.nodes if not node.running], timeout_s)

    def kill_all(self) -> None:
        for node in self.nodes:
            node.kill()

    # --- what the cluster says ----------------------------------------------

    def details(self) -> str:
        """Every node's state and the tail of its log, for failure messages."""
        parts = []
        for node in self.nodes:
            state = "running" if node.running else f"down ({node.process and node.process.returncode})"
            parts.append(f"node {node.node_id}: {state}, start #{node.starts}\n{node.log_tail()}")
        return "\n".join(parts)

    def wait_until(self, condition, timeout_s: float, what: str, interval_s: float = 0.05):
        return wait_until(condition, timeout_s, what, interval_s, details=self.details)

    def active_controller(self, via=None, timeout_s: float = 30.0) -> cw.QuorumState:
        """Waits until a running broker (`via`, or each in turn) names an
        active controller that is a running voter; returns its answer."""
        running_voters = {node.node_id for node in self.running() if node.is_controller}
        candidates = [via] if via is not None else self.running_brokers()
        turn = [0]

        def known():
            node = candidates[turn[0] % len(candidates)]
            turn[0] += 1
            state = node.quorum()
            ok = state.error_code == cw.NONE and state.partition_error_code == cw.NONE
            return state if ok and state.leader_id in running_voters else None

        return self.wait_until(known, timeout_s, "an active controller among the running voters")

    def brokers_seen_by(self, node: Node) -> set:
        return set(node.metadata([]).brokers)

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until a running voter is the active controller and every running
        broker's Metadata lists exactly the running brokers."""
        self.active_controller(timeout_s=timeout_s)
        expected = {node.node_id for node in self.running_brokers()}

        def all_agree():
            return all(self.brokers_seen_by(node) == expected for node in self.running_brokers())

        self.wait_until(all_agree, timeout_s, f"every running broker's Metadata lists exactly {sorted(expected)}")

    def topic_everywhere(self, topic: str, partitions: int, nodes=None) -> bool:
        """True when every given (default: running) broker's Metadata has
        the topic with all its partitions led."""
        for node in nodes if nodes is not None else self.running_brokers():
            state = node.metadata([topic]).topics.get(topic)
            if state is None or state.error_code != cw.NONE or len(state.partitions) != partitions:
                return False
            if any(p.leader < 0 for p in state.partitions.values()):
                return False
        return True
