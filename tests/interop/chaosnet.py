"""Fault injection for real Strom processes: network partitions between
nodes, pauses, crashes, torn writes and a full disk.

Each node of a `NetCluster` runs in its own network namespace that the
harness creates, with its own address (10.213.X.N) on a bridge that lives
in one more namespace (the hub); the test process reaches every node
through a veth into the hub, so clients keep reaching a node that is cut
off from its peers (the isolated-leader case). A directed link i -> j is
cut by pointing node i's neighbour entry for j at a MAC address nobody
has: i's packets to j are dropped silently on the bridge, as a real
partition drops them (TCP retransmits, then times out), while j's packets
still reach i. Cutting both directions partitions the pair. This needs
root, `ip netns` and the veth and bridge drivers; when any of them is
missing `NetLab` raises `NetLabUnavailable`, which fails the test (it
never turns into a skip). `tc netem` is not available on the test
machines, so links are cut and healed, not delayed.

A full disk is a size-limited tmpfs mounted on a node's data directory
(`DiskLimit`), filled with a ballast file; a torn write is the tail of a
killed node's active segments cut by a few bytes (`tear_active_segments`).

Nothing outlives the test: namespaces and mounts are removed by `close`
(called by fixtures and at interpreter exit), and namespaces left behind
by a process that was killed are removed by the next `NetLab` (their
names carry the creating process id).
"""
import atexit
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import cluster as cl
import clusterwire as cw

PREFIX = "strom-chaos-"
BROKER_PORT = 9092
CONTROLLER_PORT = 9093
# A MAC address no interface has: frames sent to it are flooded by the
# bridge and dropped by every receiver.
NOWHERE_MAC = "02:00:5e:ff:ff:fe"


class NetLabUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, no `ip`, no veth
    or bridge driver). Tests that need them fail with this."""


def _ip(*arguments, check=True):
    result = subprocess.run(["ip", *arguments], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise NetLabUnavailable(f"ip {' '.join(arguments)}: {result.stderr.strip()}")
    return result


def _remove_stale_namespaces() -> None:
    """Deletes namespaces of earlier runs whose process is gone."""
    listing = _ip("netns", "list").stdout
    for line in listing.splitlines():
        name = line.split()[0] if line.split() else ""
        match = re.fullmatch(PREFIX + r"(\d+)-\w+", name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            _ip("netns", "del", name, check=False)


class NetLab:
    """A hub namespace with a bridge, one namespace per node on it, and a
    veth from the test's namespace into the hub."""

    def __init__(self, node_ids):
        if os.geteuid() != 0:
            raise NetLabUnavailable("network namespaces need root")
        _remove_stale_namespaces()
        self.pid = os.getpid()
        self.tag = f"{self.pid % 100000}"
        # A /24 per process, so concurrent runs do not share addresses.
        self.subnet = f"10.213.{self.pid % 250}"
        self.node_ids = list(node_ids)
        self.hub = f"{PREFIX}{self.pid}-hub"
        self.namespaces = {}
        self.cuts = set()
        self.closed = False
        atexit.register(self.close)
        try:
            self._build()
        except NetLabUnavailable:
            self.close()
            raise

    def address(self, node_id: int) -> str:
        return f"{self.subnet}.{node_id}"

    @property
    def client_address(self) -> str:
        return f"{self.subnet}.254"

    def _build(self) -> None:
        _ip("netns", "add", self.hub)
        _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.hub, "link", "set", "br0", "up")
        for node_id in self.node_ids:
            namespace = f"{PREFIX}{self.pid}-n{node_id}"
            _ip("netns", "add", namespace)
            self.namespaces[node_id] = namespace
            self._plug(f"sc{self.tag}n{node_id}", namespace, f"{self.address(node_id)}/24")
            _ip("-n", namespace, "link", "set", "lo", "up")
        self._plug(f"sc{self.tag}c", None, f"{self.client_address}/24")

    def _plug(self, name: str, namespace, address: str) -> None:
        """A veth from `namespace` (None: the test's own) into the bridge."""
        hub_side = f"{name}h"
        _ip("link", "add", name, "type", "veth", "peer", "name", hub_side)
        _ip("link", "set", hub_side, "netns", self.hub)
        _ip("-n", self.hub, "link", "set", hub_side, "master", "br0")
        _ip("-n", self.hub, "link", "set", hub_side, "up")
        if namespace is not None:
            _ip("link", "set", name, "netns", namespace)
            _ip("-n", namespace, "link", "set", name, "name", "eth0")
            _ip("-n", namespace, "addr", "add", address, "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")
        else:
            _ip("addr", "add", address, "dev", name)
            _ip("link", "set", name, "up")

    def command(self, node_id: int, argv) -> list:
        """`argv` run inside the node's namespace."""
        return ["ip", "netns", "exec", self.namespaces[node_id], *argv]

    # --- links ---------------------------------------------------------------

    def cut(self, source: int, target: int) -> None:
        """Drops every packet `source` sends to `target` (silently)."""
        _ip("-n", self.namespaces[source], "neigh", "replace", self.address(target),
            "lladdr", NOWHERE_MAC, "nud", "permanent", "dev", "eth0")
        self.cuts.add((source, target))

    def heal(self, source: int, target: int) -> None:
        _ip("-n", self.namespaces[source], "neigh", "del", self.address(target), "dev", "eth0",
            check=False)
        self.cuts.discard((source, target))

    def partition(self, side, other_side) -> None:
        """Cuts every link between the two groups, both ways."""
        for source in side:
            for target in other_side:
                self.cut(source, target)
                self.cut(target, source)

    def isolate(self, node_id: int) -> None:
        """Cuts the node from every other node (clients still reach it)."""
        self.partition([node_id], [other for other in self.node_ids if other != node_id])

    def heal_all(self) -> None:
        for source, target in list(self.cuts):
            self.heal(source, target)

    def reachable(self, source: int, target: int, port: int, timeout_s: float = 1.0) -> bool:
        """Whether a TCP connection from `source`'s namespace to `target`
        opens (the check that a cut holds and a heal heals)."""
        probe = (
            "import socket,sys\n"
            "try:\n"
            f"  socket.create_connection(('{self.address(target)}',{port}),timeout={timeout_s})\n"
            "except OSError: sys.exit(1)\n"
        )
        result = subprocess.run(self.command(source, ["python3", "-c", probe]),
                                capture_output=True, timeout=timeout_s + 10)
        return result.returncode == 0

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for namespace in list(self.namespaces.values()) + [self.hub]:
            _ip("netns", "del", namespace, check=False)


class NetNode(cl.Node):
    """A cluster node inside its own network namespace."""

    def __init__(self, cluster: "NetCluster", node_id: int, roles: str):
        self.host = cluster.lab.address(node_id)
        super().__init__(cluster, node_id, roles, ports=(BROKER_PORT, CONTROLLER_PORT))

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def properties(self) -> dict:
        props = super().properties()
        for key in ("listeners", "advertised.listeners"):
            if key in props:
                props[key] = props[key].replace("127.0.0.1", self.host)
        return props

    def spawn(self) -> None:
        """Starts the process in the node's namespace; returns at once."""
        assert not self.running, f"node {self.node_id} is already running"
        config = self.base / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        self.starts += 1
        argv = self.cluster.lab.command(self.node_id, [str(self.cluster.binary), "--config", str(config)])
        with open(self.log_path, "wb") as log, open(self.log_path.with_suffix(".out"), "wb") as out:
            self.process = subprocess.Popen(
                argv,
                stdout=out,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")},
                preexec_fn=cl._die_with_parent,
            )
        with cl._children_lock:
            cl._children.add(self.process)

    def wait_listening(self, timeout_s: float = cl.START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise cl.WaitTimeout(
                    f"node {self.node_id} exited with {self.process.returncode} during start-up:\n"
                    f"{self.log_tail()}"
                )
            if all(_port_open(self.host, port) for port in (self.port, self.controller_port) if port):
                return
            if time.monotonic() >= deadline:
                raise cl.WaitTimeout(f"node {self.node_id} not listening within {timeout_s}s:\n{self.log_tail()}")
            time.sleep(0.05)

    def metadata(self, topics=None, timeout_s: float = 5.0) -> cw.ClusterView:
        return cw.metadata(self.port, topics, timeout_s, host=self.host)

    def quorum(self, timeout_s: float = 5.0, version: int = None) -> cw.QuorumState:
        chosen = cl.DESCRIBE_QUORUM_VERSION if version is None else version
        return cw.describe_quorum(self.port, timeout_s, chosen, host=self.host)

    # --- faults on the process ------------------------------------------------

    def pause(self) -> None:
        """SIGSTOP: the process stops, its sockets stay open (a long GC
        stall or a VM pause)."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)


def _port_open(host: str, port: int) -> bool:
    import socket

    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


class NetCluster(cl.Cluster):
    """`Cluster` with every node in its own namespace (see the module doc)."""

    def __init__(self, binary, base_dir, nodes: int = 3, extra: dict = None, controllers: int = 0):
        """`nodes` brokers; each is a controller voter too unless
        `controllers` is given, which adds that many controller-only nodes
        (ids 1..controllers, the brokers after them)."""
        self.binary = Path(binary)
        self.base_dir = Path(base_dir)
        self.cluster_id = cl.new_cluster_id()
        self.extra = dict(extra or {})
        self.lab = NetLab(range(1, controllers + nodes + 1))
        if controllers:
            self.nodes = [NetNode(self, node_id, "controller") for node_id in range(1, controllers + 1)]
            self.nodes += [NetNode(self, node_id, "broker")
                           for node_id in range(controllers + 1, controllers + nodes + 1)]
        else:
            self.nodes = [NetNode(self, node_id, "broker,controller") for node_id in range(1, nodes + 1)]
        self.voters = ",".join(f"{node.node_id}@{node.host}:{node.controller_port}"
                               for node in self.nodes if node.is_controller)
        self.disks = []
        # Client threads and processes to stop before the network goes
        # (see `close`).
        self.workloads = []

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes if node.is_broker)

    @property
    def brokers(self) -> list:
        return [node for node in self.nodes if node.is_broker]

    def close(self) -> None:
        """Stops the workloads still running (their clients must not
        outlive the namespaces: the addresses would then be routed out of
        the machine), the nodes, the mounts and the namespaces."""
        import chaos

        chaos.stop_workloads([w for w in self.workloads if w.is_alive()], timeout_s=20.0)
        for node in self.nodes:
            if node.process is not None and node.running:
                node.resume()
        self.kill_all()
        for disk in self.disks:
            disk.close()
        self.lab.close()


# --- disk faults ---------------------------------------------------------------


def tear_active_segments(data_dir: Path, topic: str, rng: random.Random, most_bytes: int = 7) -> list:
    """Cuts 1..`most_bytes` bytes off the active (last) segment of each of
    the topic's partitions under a stopped node's `data_dir`, as a crash in
    the middle of a write leaves it. Returns (file, old size, new size)."""
    torn = []
    for directory in sorted(data_dir.glob(f"{topic}-*")):
        segments = sorted(directory.glob("*.log"))
        if not segments:
            continue
        active = segments[-1]
        size = active.stat().st_size
        if size == 0:
            continue
        cut = min(size, rng.randint(1, most_bytes))
        with open(active, "r+b") as segment:
            segment.truncate(size - cut)
        torn.append((str(active), size, size - cut))
    return torn


class DiskLimit:
    """A size-limited tmpfs mounted on a node's data directory (before
    the node starts); `fill` leaves only a few KiB free, `drain` frees it."""

    def __init__(self, directory: Path, size_mib: int = 64):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(self.directory)],
            capture_output=True, text=True, timeout=30,
        )
        if result.returncode != 0:
            raise NetLabUnavailable(f"mount tmpfs on {self.directory}: {result.stderr.strip()}")
        self.mounted = True
        self.ballast = self.directory / "chaos-ballast"
        atexit.register(self.close)

    def fill(self, leave_bytes: int = 4096) -> int:
        """Writes a ballast file until fewer than `leave_bytes` are free;
        returns the bytes free after."""
        stats = os.statvfs(self.directory)
        free = stats.f_bavail * stats.f_frsize
        with open(self.ballast, "ab") as ballast:
            chunk = b"\0" * (1 << 20)
            remaining = max(0, free - leave_bytes)
            try:
                while remaining > 0:
                    remaining -= ballast.write(chunk[: min(len(chunk), remaining)])
            except OSError:
                pass
        stats = os.statvfs(self.directory)
        return stats.f_bavail * stats.f_frsize

    def drain(self) -> None:
        try:
            self.ballast.unlink()
        except FileNotFoundError:
            pass

    def close(self) -> None:
        if self.mounted:
            self.mounted = False
            subprocess.run(["umount", "-l", str(self.directory)], capture_output=True, timeout=30)
