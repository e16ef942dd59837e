"""Authorization of the group offset APIs and of DescribeGroups' authorized
operations, as Kafka answers them, against confluent-kafka and raw wire.

- OffsetCommit: READ on the group is needed for the whole request; a topic
  the principal may not READ is answered TOPIC_AUTHORIZATION_FAILED and the
  other topics are committed.
- OffsetFetch: DESCRIBE on each group (v8+: only the refused group is
  answered GROUP_AUTHORIZATION_FAILED) and on each topic (a named refused
  topic: TOPIC_AUTHORIZATION_FAILED per partition; all topics asked for:
  refused topics left out).
- OffsetDelete: DELETE on the group, READ on each topic (refused topics
  answered per partition, the others deleted).
- DescribeGroups: authorized_operations is the principal's real set.
"""
import socket
import ssl
import struct

import pytest
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka import ConsumerGroupTopicPartitions

import rawwire
from security_setup import Certificates, mtls, sasl_ssl, start_broker
from test_security import add_user, create_topics

pytestmark = pytest.mark.timeout(300)

TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def acl_broker(strom_binary, tmp_path, certs):
    """SSL with client certificates (admin is a super user, client-1 an
    application) and SASL_SSL with SCRAM-SHA-512, with the authorizer."""
    broker, ports = start_broker(
        strom_binary, tmp_path, certs, "SSL", {"SASL_SSL": "SASL_SSL"},
        {
            "ssl.client.auth": "required",
            "listener.name.sasl_ssl.ssl.client.auth": "none",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        },
    )
    yield broker, ports
    broker.kill()


def allow(resource_type, name, principal, operation):
    return AclBinding(resource_type, name, ResourcePatternType.LITERAL, principal, "*",
                      operation, AclPermissionType.ALLOW)


def commit(admin: AdminClient, group: str, offsets: dict) -> dict:
    """Commits {(topic, partition): offset}; returns {(topic, partition): error code}."""
    partitions = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
    request = ConsumerGroupTopicPartitions(group, partitions)
    result = admin.alter_consumer_group_offsets([request])[group].result(timeout=30)
    return {(tp.topic, tp.partition): tp.error.code() if tp.error else 0
            for tp in result.topic_partitions}


def committed(admin: AdminClient, group: str, partitions=None) -> dict:
    """{(topic, partition): offset or error code name} as OffsetFetch answers."""
    request = ConsumerGroupTopicPartitions(
        group, None if partitions is None else [TopicPartition(t, p) for t, p in partitions])
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=30)
    return {(tp.topic, tp.partition): (tp.error.code() if tp.error else tp.offset)
            for tp in result.topic_partitions}


class client_connection(rawwire.Connection):
    """A raw-wire connection over TLS with a client certificate."""

    def __init__(self, port: int, certs: Certificates, name: str):
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        context = ssl.create_default_context(cafile=certs.ca)
        context.load_cert_chain(certs.path(f"{name}.pem"), certs.path(f"{name}.key"))
        self.sock = context.wrap_socket(raw, server_hostname="localhost")


# --- flexible (compact) encoding, for OffsetFetch v8 ---------------------------


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def compact_string(value: str) -> bytes:
    data = value.encode()
    return uvarint(len(data) + 1) + data


def compact_array(items, null: bool = False) -> bytes:
    if null:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = uvarint(0)


def offset_fetch_v8(connection, groups: dict, correlation_id: int) -> dict:
    """OffsetFetch v8 for {group: {topic: [partitions]} or None}; returns
    {group: error code or {(topic, partition): (offset, error code)}}."""
    body = compact_array([
        compact_string(group)
        + compact_array([
            compact_string(topic)
            + compact_array([struct.pack(">i", p) for p in partitions]) + NO_TAGS
            for topic, partitions in (topics or {}).items()
        ], null=topics is None)
        + NO_TAGS
        for group, topics in groups.items()
    ]) + b"\x00" + NO_TAGS
    header = struct.pack(">hhi", 9, 8, correlation_id) + rawwire.string("rawwire") + NO_TAGS
    connection.send_raw(struct.pack(">i", len(header) + len(body)) + header + body)
    received_id, payload = connection.receive()
    assert received_id == correlation_id
    return decode_offset_fetch_v8(payload)


def read_uvarint(reader) -> int:
    value, shift = 0, 0
    while True:
        (byte,) = reader.take(1)
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7


def read_compact_string(reader):
    length = read_uvarint(reader) - 1
    return None if length < 0 else reader.take(length).decode()


def read_compact_array(reader, item) -> list:
    return [item(reader) for _ in range(read_uvarint(reader) - 1)]


def skip_tags(reader):
    assert read_uvarint(reader) == 0


def decode_offset_fetch_v8(payload: bytes) -> dict:
    reader = rawwire.Reader(payload)
    skip_tags(reader)  # response header v1
    reader.int32()  # throttle time

    def partition(r):
        index, offset, _epoch = r.int32(), r.int64(), r.int32()
        read_compact_string(r)
        error = r.int16()
        skip_tags(r)
        return index, (offset, error)

    def topic(r):
        name = read_compact_string(r)
        partitions = read_compact_array(r, partition)
        skip_tags(r)
        return [((name, index), answer) for index, answer in partitions]

    def group(r):
        group_id = read_compact_string(r)
        topics = read_compact_array(r, topic)
        error = r.int16()
        skip_tags(r)
        answer = error if error else dict(pair for pairs in topics for pair in pairs)
        return group_id, answer

    groups = dict(read_compact_array(reader, group))
    skip_tags(reader)  # v8+ has no top-level error code
    reader.done()
    return groups


def offset_delete_v0(connection, group: str, topics: dict) -> tuple:
    """OffsetDelete v0; returns (top-level error, {(topic, partition): error})."""
    body = rawwire.string(group) + rawwire.array([
        rawwire.string(topic) + rawwire.array([struct.pack(">i", p) for p in partitions])
        for topic, partitions in topics.items()
    ])
    reader = rawwire.Reader(connection.call(47, 0, body, correlation_id=21))
    error, _throttle = reader.int16(), reader.int32()

    def topic(r):
        name = r.string()
        return [((name, index), code) for index, code in
                r.array(lambda r2: (r2.int32(), r2.int16()))]

    answers = dict(pair for pairs in reader.array(topic) for pair in pairs)
    reader.done()
    return error, answers


def test_offsets_are_authorized_per_group_and_per_topic(acl_broker, certs):
    broker, ports = acl_broker
    admin_config = mtls(ports["SSL"], certs, "admin")
    admin = AdminClient(admin_config)
    add_user(admin_config, "alice", "alice-secret")
    create_topics(admin_config, "mine", "theirs")
    bindings = [
        allow(ResourceType.TOPIC, "mine", "User:alice", AclOperation.READ),
        allow(ResourceType.GROUP, "g-shared", "User:alice", AclOperation.READ),
        allow(ResourceType.TOPIC, "mine", "User:client-1", AclOperation.READ),
        allow(ResourceType.GROUP, "g-shared", "User:client-1", AclOperation.DESCRIBE),
        allow(ResourceType.GROUP, "g-shared", "User:client-1", AclOperation.DELETE),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)
    both = {("mine", 0): 1, ("theirs", 0): 1}
    assert commit(admin, "g-shared", both) == {("mine", 0): 0, ("theirs", 0): 0}
    assert commit(admin, "g-hidden", both) == {("mine", 0): 0, ("theirs", 0): 0}

    # OffsetCommit: the allowed topic is committed, the other refused alone.
    alice = AdminClient(sasl_ssl(ports["SASL_SSL"], certs, "alice", "alice-secret"))
    answers = commit(alice, "g-shared", {("mine", 0): 5, ("theirs", 0): 6})
    assert answers == {("mine", 0): 0, ("theirs", 0): KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert committed(admin, "g-shared") == {("mine", 0): 5, ("theirs", 0): 1}
    # No READ on the group: the whole commit is refused.
    with pytest.raises(Exception) as refused:
        commit(alice, "g-hidden", {("mine", 0): 7})
    assert "GROUP_AUTHORIZATION_FAILED" in str(refused.value) or \
        refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert committed(admin, "g-hidden")[("mine", 0)] == 1

    # OffsetFetch through librdkafka: a named refused topic is answered with
    # TOPIC_AUTHORIZATION_FAILED; all topics: the refused one left out.
    assert committed(alice, "g-shared", [("mine", 0), ("theirs", 0)]) == {
        ("mine", 0): 5, ("theirs", 0): KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert committed(alice, "g-shared") == {("mine", 0): 5}

    # OffsetFetch v8, two groups in one request: only the refused group
    # fails, and topics are checked per group.
    with client_connection(ports["SSL"], certs, "client") as connection:
        answers = offset_fetch_v8(connection, {"g-shared": None, "g-hidden": None}, 11)
        assert answers == {"g-shared": {("mine", 0): (5, 0)},
                           "g-hidden": GROUP_AUTHORIZATION_FAILED}
        named = {"mine": [0], "theirs": [0]}
        answers = offset_fetch_v8(connection, {"g-shared": named, "g-hidden": named}, 12)
        assert answers == {
            "g-shared": {("mine", 0): (5, 0), ("theirs", 0): (-1, TOPIC_AUTHORIZATION_FAILED)},
            "g-hidden": GROUP_AUTHORIZATION_FAILED,
        }
        # OffsetDelete: the allowed topic's offset goes, the refused stays.
        assert offset_delete_v0(connection, "g-shared", named) == (
            0, {("mine", 0): 0, ("theirs", 0): TOPIC_AUTHORIZATION_FAILED})
        assert offset_delete_v0(connection, "g-hidden", named)[0] == GROUP_AUTHORIZATION_FAILED
    assert committed(admin, "g-shared") == {("theirs", 0): 1}
    assert committed(admin, "g-hidden") == both


def test_describe_groups_answers_the_real_authorized_operations(acl_broker, certs):
    broker, ports = acl_broker
    admin_config = mtls(ports["SSL"], certs, "admin")
    admin = AdminClient(admin_config)
    create_topics(admin_config, "t")
    bindings = [
        allow(ResourceType.GROUP, "g-read", "User:client-1", AclOperation.READ),
        allow(ResourceType.GROUP, "g-describe", "User:client-1", AclOperation.DESCRIBE),
        allow(ResourceType.GROUP, "g-describe", "User:client-1", AclOperation.DELETE),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)
    for group in ("g-read", "g-describe"):
        commit(admin, group, {("t", 0): 1})

    def operations(client: AdminClient, group: str) -> set:
        futures = client.describe_consumer_groups([group], include_authorized_operations=True)
        return set(futures[group].result(timeout=30).authorized_operations)

    client = AdminClient(mtls(ports["SSL"], certs, "client"))
    # READ implies DESCRIBE; DELETE and DESCRIBE given one by one.
    assert operations(client, "g-read") == {AclOperation.READ, AclOperation.DESCRIBE}
    assert operations(client, "g-describe") == {AclOperation.DESCRIBE, AclOperation.DELETE}
    # The super user has every group operation.
    assert operations(admin, "g-read") == {
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}
