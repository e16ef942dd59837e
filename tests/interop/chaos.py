"""A Jepsen-style workload and checker for Strom clusters under faults.

Producers (confluent-kafka / librdkafka, and strom-producer through
`strom-interop-producer --stream`) write unique values `NAME-SEQ` to the
partitions of one topic (`SEQ % partitions`) and record every attempt and
every acknowledgement (partition, offset, value, time). After the faults,
everything is read back twice, by confluent-kafka and by strom-consumer
(`strom-interop-consumer --assign`), and `check` reports:

- acknowledged: values a producer was told are stored;
- lost: acknowledged values that no read found;
- duplicated: extra copies of a value in a partition's log;
- reordered: a producer's values out of their send order within a
  partition (a later value at a smaller offset);
- moved: acknowledged values read at another offset or partition than
  the acknowledgement said;
- unacknowledged_present: values that failed or never completed and are
  stored anyway (allowed: a timed-out write may have landed);
- readers_disagree: the two readers did not read the same log;
- failover times: for each fault, the gap between the last acknowledgement
  before it and the first after it, and for a killed leader, the time from
  the kill to the first acknowledgement of each partition it led.

`run_schedule` drives faults (kill -9 and restart, SIGSTOP/SIGCONT, a
node cut off from its peers, a torn write at a crash, a full disk) one
at a time, each healed and followed by a wait for a full ISR, so that
under `acks=all` and `min.insync.replicas=2` no acknowledged record may be
lost. The `scripts/chaos` command runs it for many cycles.
"""
import collections
import faulthandler
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

import chaosnet as cn
import cluster as cl

ROOT = Path(__file__).resolve().parents[2]


def now_ms() -> int:
    return int(time.time() * 1000)


def tool_binary(name: str) -> Path:
    """A binary of strom-integration (STROM_BIN_DIR, or built on demand)."""
    explicit = os.environ.get("STROM_BIN_DIR")
    if explicit:
        return Path(explicit) / name
    subprocess.run(["cargo", "build", "--quiet", "-p", "strom-integration", "--bin", name], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "debug" / name


def value_of(producer: str, sequence: int) -> str:
    return f"{producer}-{sequence:08d}"


def split_value(value: str):
    name, _, sequence = value.rpartition("-")
    return name, int(sequence)


@dataclass
class Fault:
    """One injected fault: when it started and ended (ms), what it was,
    and the partitions whose leader it hit (for failover times)."""

    kind: str
    node: int
    start_ms: int
    end_ms: int = 0
    led: list = field(default_factory=list)
    detail: str = ""
    # Filled by the checker: partition -> ms from the fault to its next ack.
    failover_ms: dict = field(default_factory=dict)
    # For a killed leader: ms from the kill until a broker's Metadata named
    # new leaders for every partition it led (polled every 100 ms).
    elected_ms: int = None
    # Whether the node was the active controller when it was killed.
    controller: bool = False


def describe_raised() -> str:
    """The exception being handled and where it was raised, for a report
    (also when it is not an exception class, which traceback cannot
    format)."""
    kind, value, trace = sys.exc_info()
    where = " <- ".join(f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} {frame.name}"
                        for frame in reversed(traceback.extract_tb(trace)))
    return f"{getattr(kind, '__name__', kind)}: {value!r} at {where}"


class WatchedLock:
    """A lock that says who holds it when a thread waits for it longer
    than `patience_s` (every thread's stack goes to stderr), then goes on
    waiting: a harness that hangs names its culprit."""

    def __init__(self, patience_s: float = 10.0):
        self._lock = threading.Lock()
        self._patience_s = patience_s
        self.holder = None

    def __enter__(self):
        if not self._lock.acquire(timeout=self._patience_s):
            print(f"history lock wanted by {threading.current_thread().name} for {self._patience_s} s, "
                  f"held by {self.holder}; threads:", file=sys.stderr, flush=True)
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            self._lock.acquire()
        self.holder = threading.current_thread().name
        return self

    def __exit__(self, *exc):
        self.holder = None
        self._lock.release()
        return False


class History:
    """Every attempt, acknowledgement and failure, thread-safe."""

    def __init__(self):
        self.lock = WatchedLock()
        self.attempted = {}
        self.acked = {}
        self.failed = {}
        self.faults = []
        # Errors that stopped a producer for good.
        self.fatal = []
        # Producer epoch bumps and their reasons, from librdkafka's log.
        self.client_events = []

    def attempt(self, value: str, partition: int) -> None:
        with self.lock:
            self.attempted[value] = (partition, now_ms())

    def ack(self, value: str, partition: int, offset: int, time_ms: int = None) -> None:
        with self.lock:
            self.acked[value] = (partition, offset, time_ms or now_ms())

    def fail(self, value: str, error: str) -> None:
        with self.lock:
            self.failed[value] = error

    def fault(self, fault: Fault) -> Fault:
        with self.lock:
            self.faults.append(fault)
        return fault

    def ack_times(self) -> list:
        with self.lock:
            return sorted((time_ms, partition) for partition, _, time_ms in self.acked.values())


# --- producers -------------------------------------------------------------------


class ClientLog(logging.Handler):
    """The last lines of librdkafka's `eos` debug log (producer id and
    epoch changes, drains and epoch bumps, sequence errors), with the time
    each was logged: what a failure report shows of the client's side."""

    def __init__(self, name: str, history=None, keep: int = 2000):
        super().__init__(level=logging.DEBUG)
        self.name_ = name
        self.history = history
        self.lines = collections.deque(maxlen=keep)
        self.logger = logging.getLogger(f"strom.chaos.{name}.{id(self)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        self.logger.addHandler(self)

    def emit(self, record) -> None:
        line = record.getMessage()
        self.lines.append(f"{now_ms()} {line}")
        # librdkafka bumps its producer epoch (KIP-360) after a sequence
        # error or a timed-out message and then sends again, under the new
        # epoch from sequence 0, every message it holds unacknowledged: a
        # message that was stored but whose answer was lost is stored
        # twice. The report lists the bumps with librdkafka's reason.
        if "bumped epoch" in line or "epoch bump" in line.lower():
            if self.history is not None:
                with self.history.lock:
                    self.history.client_events.append((now_ms(), self.name_, line))

    def tail(self, count: int = 60) -> str:
        return "\n".join(list(self.lines)[-count:])


class ConfluentWorkload(threading.Thread):
    """An idempotent acks=all librdkafka producer writing `rate` values a
    second until stopped."""

    def __init__(self, name, bootstrap, topic, partitions, history, rate=100, extra=None):
        super().__init__(daemon=True, name=name)
        self.producer_name = name
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rate = rate
        self.stopping = threading.Event()
        self.unflushed = 0
        self.local_refusals = []
        self.flush_timeout_s = 150.0
        config = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 120000,
            "linger.ms": 5,
            "retry.backoff.ms": 100,
            "error_cb": self._error,
            "debug": "eos",
        }
        config.update(extra or {})
        self.client_log = ClientLog(name, history)
        config["logger"] = self.client_log.logger
        self.fatal_error = None
        self.producer = Producer(config)

    def _error(self, error):
        # A fatal error (the idempotent producer's sequence lost on an
        # unclean leader) is reported here, not raised by poll(): the
        # producer is unusable, and what it still queues would only fail
        # at message.timeout.ms.
        if error.fatal() and self.fatal_error is None:
            self.fatal_error = str(error)

    def _delivered(self, error, message):
        value = message.value().decode()
        if error is None:
            # When librdkafka had the answer (the callback runs at the next
            # poll): the send time plus the latency it measured.
            sent_ms = self.history.attempted.get(value, (0, now_ms()))[1]
            acked_ms = sent_ms + int((message.latency() or 0) * 1000)
            self.history.ack(value, message.partition(), message.offset(), acked_ms)
        else:
            self.history.fail(value, str(error))

    def run(self) -> None:
        try:
            self._produce_until_stopped()
        except:  # noqa: E722 -- confluent-kafka can raise a KafkaError, which no except clause names
            self.fatal_error = self.fatal_error or f"produce loop raised {describe_raised()}"
            self.history.fatal.append(f"{self.producer_name}: {self.fatal_error}")
        try:
            self._finish()
        except:  # noqa: E722 -- as above
            self.history.fatal.append(f"{self.producer_name} flush raised {describe_raised()}")
        if self.unflushed:
            print(f"{self.producer_name}: {self.unflushed} messages never completed "
                  f"(fatal error: {self.fatal_error}); librdkafka's last eos log lines:\n"
                  f"{self.client_log.tail()}", flush=True)
        self.producer = None

    def _produce_until_stopped(self) -> None:
        sequence = 0
        started = time.monotonic()
        while not self.stopping.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while sequence < due and not self.stopping.is_set() and self.fatal_error is None:
                value = value_of(self.producer_name, sequence)
                partition = sequence % self.partitions
                self.history.attempt(value, partition)
                try:
                    self.producer.produce(self.topic, value=value.encode(), partition=partition,
                                          on_delivery=self._delivered)
                except BufferError:
                    self.producer.poll(0.1)
                    continue
                except KafkaException as error:
                    # Refused locally (librdkafka's metadata does not have
                    # the topic for a moment, or the producer has just
                    # failed fatally): nothing was sent; retried.
                    self.local_refusals.append(str(error))
                    self.producer.poll(0.1)
                    continue
                sequence += 1
            try:
                self.producer.poll(0.02)
            except KafkaException as error:
                self.fatal_error = self.fatal_error or str(error)
            if self.fatal_error is not None:
                self.history.fatal.append(f"{self.producer_name}: {self.fatal_error}")
                return

    def _finish(self) -> None:
        # After a fatal error librdkafka may still hold messages it would
        # complete only at message.timeout.ms: they count as never
        # completed (present or not, both allowed).
        deadline = time.monotonic() + self.flush_timeout_s
        try:
            if self.fatal_error is None:
                self.unflushed = self.producer.flush(1.0)
                while self.unflushed and self.fatal_error is None and time.monotonic() < deadline:
                    self.unflushed = self.producer.flush(1.0)
            else:
                self.unflushed = len(self.producer)
            if self.unflushed and self.fatal_error is not None:
                # Everything still queued or in flight fails now (counted
                # as failed, so it may or may not be in the log).
                self.producer.purge(in_queue=True, in_flight=True)
                self.unflushed = self.producer.flush(5.0)
        except KafkaException as error:
            self.history.fatal.append(f"{self.producer_name} flush: {error}")

    def stop(self) -> None:
        self.stopping.set()


class StromWorkload(threading.Thread):
    """strom-producer (idempotent, acks=all) fed by a pipe: `rate` values
    a second until stopped; outcomes come back as JSON lines."""

    def __init__(self, name, bootstrap, topic, partitions, history, rate=100, extra=None):
        super().__init__(daemon=True, name=name)
        self.producer_name = name
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rate = rate
        self.stopping = threading.Event()
        properties = {
            "acks": "all",
            "enable.idempotence": "true",
            "delivery.timeout.ms": "120000",
            "linger.ms": "5",
        }
        properties.update(extra or {})
        argv = [str(tool_binary("strom-interop-producer")), "--stream", "--bootstrap-servers", bootstrap]
        for key, setting in properties.items():
            argv += ["-X", f"{key}={setting}"]
        self.stderr_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"{name}-{os.getpid()}.stderr"
        self.stderr = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr, text=True, bufsize=1,
                                        preexec_fn=cl._die_with_parent)
        with cl._children_lock:
            cl._children.add(self.process)
        self.reader = threading.Thread(target=self._read_outcomes, daemon=True)
        self.reader.start()

    def _read_outcomes(self) -> None:
        for line in self.process.stdout:
            if not line.strip():
                continue
            outcome = json.loads(line)
            value = outcome["id"]
            if "error" in outcome:
                self.history.fail(value, f"{outcome.get('kind')}: {outcome['error']}")
            else:
                self.history.ack(value, outcome["partition"], outcome["offset"], outcome.get("time_ms"))

    def run(self) -> None:
        sequence = 0
        started = time.monotonic()
        try:
            while not self.stopping.is_set():
                due = int((time.monotonic() - started) * self.rate)
                lines = []
                while sequence < due:
                    value = value_of(self.producer_name, sequence)
                    partition = sequence % self.partitions
                    self.history.attempt(value, partition)
                    lines.append(json.dumps({"topic": self.topic, "partition": partition,
                                             "value": value.encode().hex(), "id": value}))
                    sequence += 1
                if lines:
                    self.process.stdin.write("\n".join(lines) + "\n")
                    self.process.stdin.flush()
                time.sleep(0.02)
        finally:
            self.process.stdin.close()

    def stop(self) -> None:
        self.stopping.set()

    def finish(self, timeout_s: float = 150.0) -> None:
        """Waits for every outcome (the program exits once stdin is closed
        and every record has an outcome)."""
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(10)
        self.stderr.close()


def stop_workloads(workloads, timeout_s: float = 180.0) -> None:
    for workload in workloads:
        if isinstance(workload, ConfluentWorkload):
            workload.flush_timeout_s = min(workload.flush_timeout_s, timeout_s)
        workload.stop()
    for workload in workloads:
        workload.join(timeout_s)
        if workload.is_alive() and isinstance(workload, ConfluentWorkload):
            print(f"{workload.producer_name} still flushing after {timeout_s} s; librdkafka's last eos "
                  f"log lines:\n{workload.client_log.tail()}", flush=True)
            faulthandler.dump_traceback(file=sys.stdout, all_threads=True)
            raise AssertionError(f"{workload.producer_name} did not finish within {timeout_s} s")
        if isinstance(workload, StromWorkload):
            workload.finish(timeout_s)


# --- reading back ---------------------------------------------------------------


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-watermarks"})
    try:
        return {
            partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            for partition in range(partitions)
        }
    finally:
        consumer.close()


def read_confluent(bootstrap: str, topic: str, partitions: int, timeout_s: float = 90.0) -> dict:
    """Every record of every partition up to its end offset, by assignment
    (no group: the group coordinator's failover is not under test here)."""
    ends = end_offsets(bootstrap, topic, partitions)
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"chaos-read-{time.monotonic_ns()}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    reads = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if all((reads[p][-1][0] + 1 if reads[p] else ends[p][0]) >= ends[p][1] for p in reads):
                break
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            value = message.value()
            reads[message.partition()].append(
                (message.offset(), value.decode(errors="replace") if value is not None else ""))
    finally:
        consumer.close()
    return reads


def read_strom(bootstrap: str, topic: str, partitions: int, timeout_s: float = 90.0) -> dict:
    """The same with strom-consumer, stopping after as many records as the
    end offsets say the partitions hold."""
    ends = end_offsets(bootstrap, topic, partitions)
    total = sum(high - low for low, high in ends.values())
    reads = {p: [] for p in range(partitions)}
    if total == 0:
        return reads
    argv = [str(tool_binary("strom-interop-consumer")), "--bootstrap", bootstrap, "--topic", topic,
            "--assign", "--max-records", str(total)]
    # stdin stays open while it reads: the program stops when it closes.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=err, text=True,
                                   preexec_fn=cl._die_with_parent)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.stdin.close()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        finally:
            if not process.stdin.closed:
                process.stdin.close()
        out.seek(0)
        err.seek(0)
        out, err = out.read(), err.read()
    if process.returncode != 0:
        raise AssertionError(f"strom-interop-consumer exited with {process.returncode}: {err[-2000:]}")
    for line in out.splitlines():
        event = json.loads(line)
        if event.get("event") == "record":
            reads[event["partition"]].append((event["offset"], event["value"] or ""))
    return reads


# --- the checker ---------------------------------------------------------------------


@dataclass
class Report:
    acknowledged: int = 0
    attempted: int = 0
    failed: int = 0
    read: int = 0
    lost: list = field(default_factory=list)
    duplicated: list = field(default_factory=list)
    reordered: list = field(default_factory=list)
    moved: list = field(default_factory=list)
    unacknowledged_present: int = 0
    readers_disagree: list = field(default_factory=list)
    foreign: list = field(default_factory=list)
    fatal: list = field(default_factory=list)
    failovers_ms: list = field(default_factory=list)
    elections_ms: list = field(default_factory=list)
    gaps_ms: list = field(default_factory=list)
    faults: dict = field(default_factory=dict)
    client_events: list = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.moved or self.readers_disagree
                    or self.foreign or self.fatal)

    def summary(self) -> dict:
        return {
            "attempted": self.attempted,
            "acknowledged": self.acknowledged,
            "failed": self.failed,
            "read": self.read,
            "lost": len(self.lost),
            "duplicated": len(self.duplicated),
            "reordered": len(self.reordered),
            "moved": len(self.moved),
            "unacknowledged_present": self.unacknowledged_present,
            "readers_disagree": len(self.readers_disagree),
            "foreign": len(self.foreign),
            "producers_stopped_by_fatal_errors": len(self.fatal),
            "client_epoch_bump_log_lines": len(self.client_events),
            "faults": self.faults,
            "failover_ms": percentiles(self.failovers_ms),
            "election_ms": percentiles(self.elections_ms),
            "gap_ms": percentiles(self.gaps_ms),
        }

    def format(self) -> str:
        lines = [json.dumps(self.summary(), indent=1)]
        for name in ("lost", "duplicated", "reordered", "moved", "readers_disagree", "foreign", "fatal",
                     "client_events"):
            items = getattr(self, name)
            if items:
                lines.append(f"{name} (first 10): {items[:10]}")
        return "\n".join(lines)


def percentiles(values) -> dict:
    if not values:
        return {"count": 0}
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "p50": ordered[(len(ordered) - 1) // 2],
        "max": ordered[-1],
        "min": ordered[0],
    }


def check(history: History, reads: dict, other_reads: dict = None) -> Report:
    """Compares what was acknowledged with what was read (see the module doc)."""
    report = Report()
    with history.lock:
        acked = dict(history.acked)
        attempted = dict(history.attempted)
        failed = dict(history.failed)
        faults = list(history.faults)
        report.client_events = list(history.client_events)
    report.fatal = list(history.fatal)
    report.acknowledged = len(acked)
    report.attempted = len(attempted)
    report.failed = len(failed)
    found = {}
    for partition, records in reads.items():
        last_sequence = {}
        for offset, value in records:
            report.read += 1
            if value in found:
                report.duplicated.append((value, found[value], (partition, offset)))
                continue
            found[value] = (partition, offset)
            if value not in attempted:
                # Stored but never sent by the workload (bad input that
                # was kept, or corruption).
                report.foreign.append((partition, offset, value[:64]))
                continue
            name, sequence = split_value(value)
            if sequence <= last_sequence.get(name, -1):
                report.reordered.append((partition, offset, value, last_sequence[name]))
            last_sequence[name] = max(sequence, last_sequence.get(name, -1))
    for value, (partition, offset, _) in acked.items():
        where = found.get(value)
        if where is None:
            report.lost.append((value, partition, offset))
        elif where != (partition, offset):
            report.moved.append((value, (partition, offset), where))
    report.unacknowledged_present = sum(1 for value in found if value in attempted and value not in acked)
    if other_reads is not None:
        for partition in sorted(set(reads) | set(other_reads)):
            first, second = reads.get(partition, []), other_reads.get(partition, [])
            if first != second:
                report.readers_disagree.append((partition, len(first), len(second)))
    report.failovers_ms, report.gaps_ms = failover_times(history.ack_times(), faults)
    report.elections_ms = [fault.elected_ms for fault in faults if fault.elected_ms is not None]
    for fault in faults:
        report.faults[fault.kind] = report.faults.get(fault.kind, 0) + 1
    return report


def failover_times(ack_times: list, faults: list):
    """(kill-to-ack times of killed leaders' partitions, ack gaps around
    every fault), in milliseconds."""
    failovers, gaps = [], []
    by_partition = {}
    for time_ms, partition in ack_times:
        by_partition.setdefault(partition, []).append(time_ms)
    for fault in faults:
        # The longest any partition went without an acknowledgement
        # around the fault.
        widest = None
        for times in by_partition.values():
            before = [t for t in times if t <= fault.start_ms]
            after = [t for t in times if t > fault.start_ms]
            if before and after:
                widest = max(widest or 0, after[0] - before[-1])
        if widest is not None:
            gaps.append(widest)
        for partition in fault.led if fault.kind in ("kill", "torn") else []:
            first = next((t for t, p in ack_times if p == partition and t > fault.start_ms), None)
            if first is not None:
                failovers.append(first - fault.start_ms)
                fault.failover_ms[partition] = first - fault.start_ms
    return failovers, gaps


# --- the fault schedule --------------------------------------------------------------


def leaders(cluster, topic: str, partitions: int) -> dict:
    """partition -> (leader, isr) as a running broker's Metadata says."""
    for node in cluster.running_brokers():
        try:
            state = node.metadata([topic], timeout_s=3).topics.get(topic)
        except (OSError, ValueError, AssertionError):
            continue
        if state is not None and len(state.partitions) == partitions:
            return {p: (s.leader, sorted(s.isr)) for p, s in state.partitions.items()}
    return {}


def wait_healthy(cluster, topic: str, partitions: int, timeout_s: float = 90.0) -> None:
    """Until every node runs and every partition has a leader and all
    replicas in its ISR, as every broker sees it."""
    everyone = sorted(node.node_id for node in cluster.brokers)

    def healthy():
        if not all(node.running for node in cluster.nodes):
            return False
        for node in cluster.brokers:
            state = node.metadata([topic], timeout_s=3).topics.get(topic)
            if state is None or len(state.partitions) != partitions:
                return False
            for partition in state.partitions.values():
                if partition.leader < 0 or sorted(partition.isr) != everyone:
                    return False
        return True

    cluster.wait_until(healthy, timeout_s, f"every partition of {topic} led with a full ISR", interval_s=0.2)


class Chaos:
    """Injects faults one at a time into a `NetCluster` (see the module doc)."""

    # The faults of a run by default: one at a time, healed before the next.
    KINDS = ("kill", "pause", "partition", "torn", "disk")
    # Overlapping faults that take a partition's whole ISR away, so that an
    # unclean leader election can happen (needs controller-only nodes: with
    # three combined nodes, two brokers down are two voters down).
    OVERLAPPING = ("cascade",)

    def __init__(self, cluster, topic, partitions, history, rng, disk=None, log=print):
        self.cluster = cluster
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rng = rng
        self.disk = disk
        self.log = log

    def _led_by(self, node_id: int) -> list:
        return [p for p, (leader, _) in leaders(self.cluster, self.topic, self.partitions).items()
                if leader == node_id]

    def _leader_of(self, partition: int) -> int:
        found = leaders(self.cluster, self.topic, self.partitions).get(partition)
        if found is None or found[0] < 0:
            return self.rng.choice(self.cluster.brokers).node_id
        return found[0]

    def kill(self, node_id: int, tear: bool = False) -> Fault:
        """kill -9 of a node (after noting what it leads); with `tear`,
        the active segments lose a few bytes before the restart."""
        led = self._led_by(node_id)
        try:
            controller = self.cluster.active_controller(timeout_s=5).leader_id
        except cl.WaitTimeout:
            controller = None
        node = self.cluster.node(node_id)
        node.kill()
        fault = self.history.fault(Fault("torn" if tear else "kill", node_id, now_ms(), led=led,
                                         controller=controller == node_id))
        if tear:
            torn = cn.tear_active_segments(node.data_dir, self.topic, self.rng)
            fault.detail = f"torn {[(Path(f).parent.name, old - new) for f, old, new in torn]}"
        # Down past the session timeout, so the controller fences it and
        # elects new leaders while it is away.
        offline = wait_until_led_elsewhere(self.cluster, self.topic, self.partitions, node_id, led)
        if offline:
            # Its ISR was the killed node alone: no failover to measure.
            fault.detail += f" offline {offline} until it returned (its ISR was the killed node alone)"
            fault.led = [p for p in led if p not in offline]
        elif led:
            fault.elected_ms = now_ms() - fault.start_ms
        node.spawn()
        node.wait_listening()
        fault.end_ms = now_ms()
        return fault

    def pause(self, node_id: int, seconds: float) -> Fault:
        node = self.cluster.node(node_id)
        fault = self.history.fault(Fault("pause", node_id, now_ms(), led=self._led_by(node_id),
                                         detail=f"{seconds:.1f}s"))
        node.pause()
        try:
            time.sleep(seconds)
        finally:
            node.resume()
        fault.end_ms = now_ms()
        return fault

    def partition(self, node_id: int, seconds: float) -> Fault:
        fault = self.history.fault(Fault("partition", node_id, now_ms(), led=self._led_by(node_id),
                                         detail=f"isolated {seconds:.1f}s"))
        self.cluster.lab.isolate(node_id)
        try:
            time.sleep(seconds)
        finally:
            self.cluster.lab.heal_all()
        fault.end_ms = now_ms()
        return fault

    def fill_disk(self, seconds: float) -> Fault:
        fault = self.history.fault(Fault("disk", self.disk_node, now_ms(), led=self._led_by(self.disk_node)))
        free = self.disk.fill()
        fault.detail = f"{free} bytes free for {seconds:.1f}s"
        try:
            time.sleep(seconds)
        finally:
            self.disk.drain()
        node = self.cluster.node(self.disk_node)
        if not node.running:
            # A broker may stop on a storage error; it is started again.
            fault.detail += f"; exited with {node.process.returncode}"
            node.spawn()
            node.wait_listening()
        fault.end_ms = now_ms()
        return fault

    def _isr(self, partition: int):
        return leaders(self.cluster, self.topic, self.partitions).get(partition, (-1, []))

    def cascade(self, partition: int) -> Fault:
        """The ISR of `partition` taken away one replica at a time: a
        follower killed (the others go on acknowledging), the second
        follower killed (the ISR is the leader alone; acks=all writes are
        refused), the leader killed; then the first follower, which missed
        acknowledged records, is started alone for 10 s before the other
        two. Only an unclean election lets it lead, and then it loses what
        the others had acknowledged without it."""
        leader, isr = self._isr(partition)
        first, second = [node for node in isr if node != leader][:2]
        fault = self.history.fault(Fault("cascade", leader, now_ms(), led=self._led_by(leader)))
        wait = self.cluster.wait_until
        self.cluster.node(first).kill()
        wait(lambda: first not in self._isr(partition)[1], 30, f"node {first} out of the ISR", interval_s=0.1)
        time.sleep(2)
        self.cluster.node(second).kill()
        wait(lambda: self._isr(partition)[1] == [leader], 30, f"an ISR of {leader} alone", interval_s=0.1)
        time.sleep(1)
        self.cluster.node(leader).kill()
        stale = self.cluster.node(first)
        stale.spawn()
        stale.wait_listening()
        deadline = time.monotonic() + 10
        elected = -1
        while time.monotonic() < deadline and elected != first:
            elected = self._isr(partition)[0]
            time.sleep(0.2)
        fault.detail = (f"killed {first}, {second}, {leader}; {first} started alone: "
                        + ("led (unclean)" if elected == first else "did not lead"))
        for node_id in (second, leader):
            self.cluster.node(node_id).spawn()
        for node_id in (second, leader):
            self.cluster.node(node_id).wait_listening()
        fault.end_ms = now_ms()
        return fault

    @property
    def disk_node(self) -> int:
        return self.cluster.nodes[-1].node_id

    def one(self, kind: str) -> Fault:
        """One fault of `kind`, healed, then a wait for a full ISR."""
        victim = self._leader_of(self.rng.randrange(self.partitions))
        if kind == "kill":
            fault = self.kill(victim)
        elif kind == "torn":
            fault = self.kill(victim, tear=True)
        elif kind == "pause":
            fault = self.pause(victim, self.rng.uniform(1.0, 6.0))
        elif kind == "partition":
            fault = self.partition(victim, self.rng.uniform(2.0, 8.0))
        elif kind == "disk":
            fault = self.fill_disk(self.rng.uniform(1.0, 4.0))
        elif kind == "cascade":
            fault = self.cascade(self.rng.randrange(self.partitions))
        else:
            raise ValueError(f"unknown fault {kind}")
        self.log(f"fault {len(self.history.faults)} at {fault.start_ms}: {fault.kind} node {fault.node} led {fault.led} "
                 f"{fault.detail} ({(fault.end_ms - fault.start_ms) / 1000:.1f}s)")
        wait_healthy(self.cluster, self.topic, self.partitions)
        self.wait_acknowledged_since(fault.end_ms)
        return fault

    def wait_acknowledged_since(self, since_ms: int, timeout_s: float = 90.0) -> None:
        """Until every partition has an acknowledgement after `since_ms`:
        the producers have recovered, so the next fault's failover time
        is its own."""

        def recovered():
            with self.history.lock:
                fresh = {partition for partition, _, time_ms in self.history.acked.values() if time_ms > since_ms}
            return fresh >= set(range(self.partitions))

        self.cluster.wait_until(recovered, timeout_s, "an acknowledgement on every partition after the fault",
                                interval_s=0.1)


def wait_until_led_elsewhere(cluster, topic, partitions, node_id, led, timeout_s: float = 60.0) -> list:
    """Until the partitions `node_id` led have another leader (the
    controller fenced the killed node), or are offline because the killed
    node was their whole ISR (a clean election then waits for it, as
    Kafka's does). Returns the offline partitions."""
    if not led:
        time.sleep(cl.SESSION_TIMEOUT_MS / 1000)
        return []

    def settled():
        now = leaders(cluster, topic, partitions)
        states = [now.get(p, (-1, [])) for p in led]
        if not all(leader != node_id for leader, _ in states):
            return None
        offline = [p for p, (leader, isr) in zip(led, states) if leader == -1 and isr == [node_id]]
        if all(leader != -1 for leader, _ in states) or offline:
            return {"offline": offline}
        return None

    found = cluster.wait_until(settled, timeout_s, f"a new leader for {led} after node {node_id} was killed",
                               interval_s=0.1)
    return found["offline"]


# --- set-up ---------------------------------------------------------------------


CHAOS_SETTINGS = {
    "replica.lag.time.max.ms": "3000",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "auto.create.topics.enable": "false",
}


def start_cluster(binary, base_dir, disk_node: bool = False, unclean: bool = False, extra: dict = None,
                  controllers: int = 0):
    """Three brokers in namespaces (controller voters too, unless
    `controllers` adds controller-only nodes); with `disk_node` the last
    broker's data directory is a 64 MiB tmpfs. Returns (cluster, disk or
    None)."""
    settings = dict(CHAOS_SETTINGS)
    if unclean:
        settings["unclean.leader.election.enable"] = "true"
    settings.update(extra or {})
    cluster = cn.NetCluster(binary, base_dir, nodes=3, extra=settings, controllers=controllers)
    disk = None
    try:
        if disk_node:
            disk = cn.DiskLimit(cluster.nodes[-1].data_dir)
            cluster.disks.append(disk)
        cluster.start()
    except BaseException:
        cluster.close()
        raise
    return cluster, disk


def create_topic(cluster, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})])
    futures[topic].result(30)
    wait_healthy(cluster, topic, partitions, timeout_s=60)
