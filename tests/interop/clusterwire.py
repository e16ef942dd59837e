"""Hand-encoded Kafka requests of the cluster tests, on top of rawwire.py.

Written from Kafka's protocol guide and message schemas: Metadata v7,
CreateTopics v4, AlterConfigs v0, DescribeConfigs v1, FindCoordinator v1
(non-flexible versions, request header v1, response header v0), and
DescribeQuorum v0-v2, which is flexible from its first version (request
header v2, response header v1, compact strings and arrays, tagged fields).
Each decoder reads exactly the fields of its version and checks that
nothing is left over. Every call opens its own connection unless it is
given one, so that a test talks to exactly the node it names.
"""
import struct
from dataclasses import dataclass, field

import rawwire as wire
from rawwire import Reader, array, string

API_METADATA = 3
API_CREATE_TOPICS = 19
API_DESCRIBE_CONFIGS = 32
API_ALTER_CONFIGS = 33
API_FIND_COORDINATOR = 10
API_DESCRIBE_QUORUM = 55

# Kafka's error codes used by the cluster tests.
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
REQUEST_TIMED_OUT = 7
COORDINATOR_NOT_AVAILABLE = 15
NOT_CONTROLLER = 41
TOPIC_ALREADY_EXISTS = 36

RESOURCE_TOPIC = 2

# The metadata log as KRaft names it in DescribeQuorum.
METADATA_TOPIC = "__cluster_metadata"


# --- flexible encoding (KIP-482) -------------------------------------------


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def compact_string(value) -> bytes:
    if value is None:
        return uvarint(0)
    data = value.encode()
    return uvarint(len(data) + 1) + data


def compact_array(items) -> bytes:
    items = list(items)
    return uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = uvarint(0)


class FlexibleReader(Reader):
    """rawwire's Reader with the compact types of flexible versions."""

    def uvarint(self) -> int:
        value, shift = 0, 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint longer than 5 bytes")

    def compact_string(self):
        length = self.uvarint()
        return None if length == 0 else self.take(length - 1).decode()

    def compact_array(self, item):
        count = self.uvarint()
        return None if count == 0 else [item(self) for _ in range(count - 1)]

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())


def flexible_request_frame(api_key: int, api_version: int, correlation_id: int, body: bytes,
                           client_id: str = "strom-clusterwire") -> bytes:
    """A request with header v2: header v1 followed by (empty) tagged fields."""
    header = struct.pack(">hhi", api_key, api_version, correlation_id) + string(client_id) + NO_TAGS
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def call_flexible(connection: wire.Connection, api_key: int, api_version: int, body: bytes,
                  correlation_id: int = 11) -> FlexibleReader:
    """Sends a flexible request; returns a reader positioned after the
    response header v1 (correlation id and tagged fields)."""
    connection.send_raw(flexible_request_frame(api_key, api_version, correlation_id, body))
    received_id, payload = connection.receive()
    assert received_id == correlation_id, (received_id, correlation_id)
    reader = FlexibleReader(payload)
    reader.tagged_fields()
    return reader


def _call(port: int, api_key: int, api_version: int, body: bytes, timeout_s: float,
          host: str = "127.0.0.1") -> bytes:
    with wire.Connection(port, timeout_s=timeout_s, host=host) as connection:
        return connection.call(api_key, api_version, body)


# --- Metadata v7 -------------------------------------------------------------


@dataclass
class PartitionState:
    """One partition as a broker's Metadata describes it."""

    error_code: int
    index: int
    leader: int
    leader_epoch: int
    replicas: list
    isr: list
    offline: list


@dataclass
class TopicState:
    error_code: int
    name: str
    internal: bool
    partitions: dict = field(default_factory=dict)  # index -> PartitionState


@dataclass
class ClusterView:
    """A broker's Metadata answer: brokers {id: (host, port, rack)}, the
    cluster id, the controller id, and topics by name."""

    brokers: dict
    cluster_id: str
    controller_id: int
    topics: dict


def metadata_v7_body(topics=None) -> bytes:
    """All topics when `topics` is None; never creates topics."""
    if topics is None:
        names = struct.pack(">i", -1)
    else:
        names = array(string(name) for name in topics)
    return names + struct.pack(">?", False)


def decode_metadata_v7(body: bytes) -> ClusterView:
    reader = Reader(body)
    reader.int32()  # throttle time
    brokers = {}
    for node_id, host, port, rack in reader.array(
        lambda r: (r.int32(), r.string(), r.int32(), r.string())
    ):
        brokers[node_id] = (host, port, rack)
    cluster_id = reader.string()
    controller_id = reader.int32()

    def partition(r):
        error_code, index, leader, leader_epoch = r.unpack(">hiii")
        replicas = r.array(lambda a: a.int32())
        isr = r.array(lambda a: a.int32())
        offline = r.array(lambda a: a.int32())
        return PartitionState(error_code, index, leader, leader_epoch, replicas, isr, offline)

    topics = {}
    for _ in range(reader.int32()):
        error_code = reader.int16()
        name = reader.string()
        internal = reader.unpack(">?")[0]
        partitions = {p.index: p for p in (reader.array(partition) or [])}
        topics[name] = TopicState(error_code, name, internal, partitions)
    reader.done()
    return ClusterView(brokers, cluster_id, controller_id, topics)


def metadata(port: int, topics=None, timeout_s: float = 5.0, host: str = "127.0.0.1") -> ClusterView:
    return decode_metadata_v7(_call(port, API_METADATA, 7, metadata_v7_body(topics), timeout_s, host))


# --- CreateTopics v4 ---------------------------------------------------------


def create_topics_v4_body(topics, timeout_ms: int = 10000, validate_only: bool = False) -> bytes:
    """`topics`: (name, partitions, replication factor, {config: value})."""
    encoded = []
    for name, partitions, replication_factor, configs in topics:
        encoded.append(
            string(name)
            + struct.pack(">ih", partitions, replication_factor)
            + array([])  # no manual assignment
            + array(string(key) + string(value) for key, value in (configs or {}).items())
        )
    return array(encoded) + struct.pack(">i?", timeout_ms, validate_only)


def decode_create_topics_v4(body: bytes) -> dict:
    """{name: (error_code, error_message)}"""
    reader = Reader(body)
    reader.int32()  # throttle time
    results = reader.array(lambda r: (r.string(), r.int16(), r.string()))
    reader.done()
    return {name: (error_code, message) for name, error_code, message in results}


def create_topics(port: int, topics, timeout_ms: int = 10000, socket_timeout_s: float = 30.0) -> dict:
    body = create_topics_v4_body(topics, timeout_ms)
    return decode_create_topics_v4(_call(port, API_CREATE_TOPICS, 4, body, socket_timeout_s))


# --- AlterConfigs v0 and DescribeConfigs v1 ---------------------------------


def alter_topic_configs(port: int, topic: str, configs: dict, timeout_s: float = 30.0):
    """Sets the topic's configs (AlterConfigs replaces the whole set);
    returns (error_code, error_message)."""
    resource = (
        struct.pack(">b", RESOURCE_TOPIC)
        + string(topic)
        + array(string(key) + string(value) for key, value in configs.items())
    )
    body = array([resource]) + struct.pack(">?", False)
    reader = Reader(_call(port, API_ALTER_CONFIGS, 0, body, timeout_s))
    reader.int32()  # throttle time
    results = reader.array(lambda r: (r.int16(), r.string(), r.int8(), r.string()))
    reader.done()
    assert len(results) == 1, results
    error_code, message, _type, name = results[0]
    assert name == topic, results
    return error_code, message


def describe_topic_configs(port: int, topic: str, timeout_s: float = 10.0):
    """(error_code, {name: value}) of one topic, as this broker answers."""
    resource = struct.pack(">b", RESOURCE_TOPIC) + string(topic) + struct.pack(">i", -1)
    body = array([resource]) + struct.pack(">?", False)
    reader = Reader(_call(port, API_DESCRIBE_CONFIGS, 1, body, timeout_s))
    reader.int32()  # throttle time

    def entry(r):
        name, value = r.string(), r.string()
        r.unpack(">?b?")  # read only, source, sensitive
        r.array(lambda s: (s.string(), s.string(), s.int8()))  # synonyms
        return name, value

    results = reader.array(
        lambda r: (r.int16(), r.string(), r.int8(), r.string(), r.array(entry))
    )
    reader.done()
    assert len(results) == 1, results
    error_code, _message, _type, _name, entries = results[0]
    return error_code, dict(entries or [])


# --- FindCoordinator v1 ------------------------------------------------------


def find_coordinator(port: int, group: str, timeout_s: float = 10.0):
    """(error_code, node_id, host, port) for a group, as this broker answers."""
    body = string(group) + struct.pack(">b", 0)
    reader = Reader(_call(port, API_FIND_COORDINATOR, 1, body, timeout_s))
    reader.int32()  # throttle time
    error_code = reader.int16()
    reader.string()  # error message
    node_id = reader.int32()
    host = reader.string()
    coordinator_port = reader.int32()
    reader.done()
    return error_code, node_id, host, coordinator_port


def java_string_hash(text: str) -> int:
    """Java's String.hashCode() as a signed 32-bit integer (over UTF-16
    code units)."""
    value = 0
    encoded = text.encode("utf-16-be")
    for index in range(0, len(encoded), 2):
        unit = (encoded[index] << 8) | encoded[index + 1]
        value = (31 * value + unit) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def offsets_partition(group: str, partitions: int) -> int:
    """Strom's partition of `__consumer_offsets` for a group:
    (hashCode & 0x7fffffff) % partitions. Kafka's is
    Utils.abs(hashCode) % partitions, which differs for negative hashes;
    Strom keeps its own so that existing groups' offsets stay where they
    are stored (docs/operations.md, "Consumer groups")."""
    return (java_string_hash(group) & 0x7FFFFFFF) % partitions


def kafka_offsets_partition(group: str, partitions: int) -> int:
    """Kafka's placement, for the tests that show where the two differ."""
    hashed = java_string_hash(group)
    return (0 if hashed == -(1 << 31) else abs(hashed)) % partitions


# --- DescribeQuorum v0-v2 ---------------------------------------------------


@dataclass
class QuorumState:
    """DescribeQuorum for `__cluster_metadata` partition 0. `nodes` (v2+):
    {node id: {listener name: (host, port)}} of the voters."""

    error_code: int
    partition_error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: dict  # replica id -> log end offset
    observers: dict
    nodes: dict = field(default_factory=dict)


def describe_quorum_body() -> bytes:
    """The request, the same at every version (v0-v2)."""
    partition = struct.pack(">i", 0) + NO_TAGS
    topic = compact_string(METADATA_TOPIC) + compact_array([partition]) + NO_TAGS
    return compact_array([topic]) + NO_TAGS


def decode_describe_quorum(reader: FlexibleReader, version: int) -> QuorumState:
    """Fields by version: v1 adds LastFetchTimestamp and
    LastCaughtUpTimestamp to each replica; v2 adds ErrorMessage (top level
    and per partition), ReplicaDirectoryId and the Nodes array."""
    error_code = reader.int16()
    if version >= 2:
        reader.compact_string()  # error message

    def replica(r):
        replica_id = r.int32()
        if version >= 2:
            r.take(16)  # replica directory id
        log_end_offset = r.int64()
        if version >= 1:
            r.int64()  # last fetch timestamp
            r.int64()  # last caught-up timestamp
        r.tagged_fields()
        return replica_id, log_end_offset

    def partition(r):
        index, partition_error = r.int32(), r.int16()
        if version >= 2:
            r.compact_string()  # error message
        leader_id, leader_epoch, high_watermark = r.unpack(">iiq")
        voters = r.compact_array(replica) or []
        observers = r.compact_array(replica) or []
        r.tagged_fields()
        return index, partition_error, leader_id, leader_epoch, high_watermark, voters, observers

    def topic(r):
        name = r.compact_string()
        partitions = r.compact_array(partition) or []
        r.tagged_fields()
        return name, partitions

    def listener(r):
        name, host, port = r.compact_string(), r.compact_string(), r.unpack(">H")[0]
        r.tagged_fields()
        return name, (host, port)

    def node(r):
        node_id = r.int32()
        listeners = dict(r.compact_array(listener) or [])
        r.tagged_fields()
        return node_id, listeners

    topics = reader.compact_array(topic) or []
    nodes = dict(reader.compact_array(node) or []) if version >= 2 else {}
    reader.tagged_fields()
    reader.done()
    if error_code != NONE and not topics:
        return QuorumState(error_code, error_code, -1, -1, -1, {}, {}, nodes)
    assert len(topics) == 1 and topics[0][0] == METADATA_TOPIC, topics
    assert len(topics[0][1]) == 1, topics
    index, partition_error, leader_id, leader_epoch, high_watermark, voters, observers = topics[0][1][0]
    assert index == 0, topics
    return QuorumState(
        error_code, partition_error, leader_id, leader_epoch, high_watermark,
        dict(voters), dict(observers), nodes,
    )


def describe_quorum(port: int, timeout_s: float = 10.0, version: int = 0,
                    host: str = "127.0.0.1") -> QuorumState:
    with wire.Connection(port, timeout_s=timeout_s, host=host) as connection:
        reader = call_flexible(connection, API_DESCRIBE_QUORUM, version, describe_quorum_body())
        return decode_describe_quorum(reader, version)


# --- ListPartitionReassignments v0 (flexible) ----------------------------------

API_LIST_PARTITION_REASSIGNMENTS = 46


def list_partition_reassignments_body(topics=None, timeout_ms: int = 10000) -> bytes:
    """`topics`: {name: [partition, ...]}, or None for every ongoing one."""
    if topics is None:
        encoded = uvarint(0)
    else:
        encoded = compact_array(
            compact_string(name)
            + compact_array(struct.pack(">i", index) for index in partitions)
            + NO_TAGS
            for name, partitions in topics.items()
        )
    return struct.pack(">i", timeout_ms) + encoded + NO_TAGS


def list_partition_reassignments(port: int, topics=None, timeout_s: float = 10.0):
    """Returns (error_code, {(topic, partition): (replicas, adding, removing)})."""
    with wire.Connection(port, timeout_s=timeout_s) as connection:
        reader = call_flexible(
            connection, API_LIST_PARTITION_REASSIGNMENTS, 0, list_partition_reassignments_body(topics)
        )
    reader.int32()  # throttle time
    error_code = reader.int16()
    reader.compact_string()  # error message

    def ids(r):
        return r.int32()

    def partition(r):
        index = r.int32()
        replicas = r.compact_array(ids) or []
        adding = r.compact_array(ids) or []
        removing = r.compact_array(ids) or []
        r.tagged_fields()
        return index, (replicas, adding, removing)

    def topic(r):
        name = r.compact_string()
        partitions = r.compact_array(partition) or []
        r.tagged_fields()
        return name, partitions

    ongoing = {}
    for name, partitions in reader.compact_array(topic) or []:
        for index, state in partitions:
            ongoing[(name, index)] = state
    reader.tagged_fields()
    reader.done()
    return error_code, ongoing
