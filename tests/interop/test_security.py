"""Security against real clients: TLS, mTLS, SASL SCRAM over TLS, ACLs.

confluent-kafka (librdkafka), kafka-python and KafkaJS connect with the
properties they use against Kafka (SASL_SSL with SCRAM-SHA-512, and SSL
with a client certificate), produce, and consume in a group. Refusals
(wrong password, unknown user, untrusted certificate, plaintext on a TLS
port, TLS on a plaintext port, a garbage or huge SASL frame) close the
connection cleanly, the broker stays up, and a good client still works.
"""
import shutil
import socket
import ssl
import struct
import subprocess
import json
import re
import time
import base64
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

import rawwire
from conftest import free_port
from security_setup import Certificates, mtls, sasl_ssl, start_broker

pytestmark = pytest.mark.timeout(300)

JS_CLIENT = Path(__file__).resolve().parent / "js" / "kafkajs_sasl.js"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certificates(tmp_path_factory.mktemp("certs"))


def add_user(config: dict, user: str, password: str, mechanism=ScramMechanism.SCRAM_SHA_512):
    admin = AdminClient(config)
    upsertion = UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096),
                                             password.encode())
    for future in admin.alter_user_scram_credentials([upsertion]).values():
        future.result(timeout=30)


def create_topics(config: dict, *names, partitions: int = 1):
    admin = AdminClient(config)
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    for future in futures.values():
        future.result(timeout=30)


def produce(config: dict, topic: str, values) -> list:
    errors = []
    producer = Producer({**config, "message.timeout.ms": 15000})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0
    return errors


def consume_group(config: dict, topic: str, group: str, count: int, timeout_s: float = 60) -> list:
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            values.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def end_offset(config: dict, topic: str) -> int:
    consumer = Consumer({**config, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)[1]
    finally:
        consumer.close()


@pytest.fixture
def sasl_broker(strom_binary, tmp_path, certs):
    """PLAINTEXT (for setting users) and SASL_SSL with SCRAM; no authorizer."""
    broker, ports = start_broker(
        strom_binary, tmp_path, certs, "PLAINTEXT", {"SASL_SSL": "SASL_SSL"},
        {"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"},
    )
    plaintext = {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"}
    add_user(plaintext, "alice", "alice-secret")
    add_user(plaintext, "alice", "alice-secret-256", ScramMechanism.SCRAM_SHA_256)
    yield broker, ports, plaintext
    broker.kill()


def test_confluent_kafka_scram_sha_512_over_tls_produces_and_consumes_in_a_group(sasl_broker, certs):
    broker, ports, plaintext = sasl_broker
    config = sasl_ssl(ports["SASL_SSL"], certs, "alice", "alice-secret")
    create_topics(config, "secure-confluent")
    values = [f"value-{i}".encode() * 20 for i in range(200)]
    assert produce(config, "secure-confluent", values) == [None] * 200
    assert consume_group(config, "secure-confluent", "g-confluent", 200) == values
    # SCRAM-SHA-256 with its own password works too.
    config_256 = sasl_ssl(ports["SASL_SSL"], certs, "alice", "alice-secret-256", "SCRAM-SHA-256")
    assert produce(config_256, "secure-confluent", [b"x"]) == [None]


def test_kafka_python_scram_sha_512_over_tls_produces_and_consumes_in_a_group(sasl_broker, certs):
    from kafka import KafkaConsumer, KafkaProducer

    broker, ports, plaintext = sasl_broker
    create_topics(plaintext, "secure-kafka-python")
    common = dict(
        bootstrap_servers=f"127.0.0.1:{ports['SASL_SSL']}",
        security_protocol="SASL_SSL",
        ssl_cafile=certs.ca,
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
    )
    producer = KafkaProducer(**common)
    values = [f"kp-{i}".encode() for i in range(100)]
    for value in values:
        producer.send("secure-kafka-python", value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("secure-kafka-python", group_id="g-kafka-python",
                             auto_offset_reset="earliest", consumer_timeout_ms=20000, **common)
    received = []
    for message in consumer:
        received.append(message.value)
        if len(received) == len(values):
            break
    consumer.commit()
    consumer.close()
    assert received == values


def test_kafkajs_scram_sha_512_over_tls_produces_and_consumes_in_a_group(sasl_broker, certs):
    broker, ports, plaintext = sasl_broker
    node = shutil.which("node")
    assert node is not None, "node is not installed (scripts/node-env installs it)"
    create_topics(plaintext, "secure-kafkajs")
    result = subprocess.run(
        [node, str(JS_CLIENT), f"127.0.0.1:{ports['SASL_SSL']}", certs.ca, "alice",
         "alice-secret", "secure-kafkajs", "g-kafkajs", "50"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    document = json.loads(result.stdout.strip().splitlines()[-1])
    assert document == {"produced": 50, "consumed": [f"js-{i}" for i in range(50)]}


def assert_refused(config: dict):
    admin = AdminClient({**config, "socket.timeout.ms": 5000})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)


def test_refusals_close_cleanly_and_leave_other_clients_working(sasl_broker, certs):
    broker, ports, plaintext = sasl_broker
    port = ports["SASL_SSL"]
    good = sasl_ssl(port, certs, "alice", "alice-secret")
    create_topics(good, "after-refusals")
    assert_refused(sasl_ssl(port, certs, "alice", "wrong-password"))
    assert_refused(sasl_ssl(port, certs, "mallory", "whatever"))
    assert_refused({**good, "sasl.mechanism": "PLAIN", "sasl.password": "wrong-password"})
    # A plaintext Kafka client on the TLS port: the handshake fails, no answer.
    with rawwire.Connection(port) as connection:
        connection.send(18, 0, 1, b"")
        assert receive_until_closed(connection.sock) is not None
    # A TLS client on the plaintext port: the ClientHello is no frame.
    context = ssl.create_default_context(cafile=certs.ca)
    with socket.create_connection(("127.0.0.1", ports["PLAINTEXT"]), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            context.wrap_socket(raw, server_hostname="localhost")
    # Garbage and huge SASL frames after a valid handshake.
    for payload in (b"\x00garbage,,n=,r=", b"n,,n=alice,r=" + b"x" * 20000):
        with tls_connection(port, certs) as connection:
            assert handshake(connection, "SCRAM-SHA-512") == 0
            connection.send(36, 0, 2, rawwire.nullable_bytes(payload))
            _, body = connection.receive()
            (error_code,) = struct.unpack(">h", body[:2])
            assert error_code == 58  # SASL_AUTHENTICATION_FAILED
            assert receive_until_closed(connection.sock) == b""
    with tls_connection(port, certs) as connection:
        assert handshake(connection, "SCRAM-SHA-512") == 0
        connection.send_raw(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 1024)
        assert receive_until_closed(connection.sock) == b""
    # A request before authentication closes the connection unanswered.
    with tls_connection(port, certs) as connection:
        connection.send(3, 1, 3, rawwire.array([]))
        assert receive_until_closed(connection.sock) == b""
    assert broker.process.poll() is None
    assert produce(good, "after-refusals", [b"still-fine"]) == [None]
    assert "SASL authentication refused" in broker.log_text()


def receive_until_closed(sock, timeout_s: float = 10.0):
    """Everything received until the broker closes the connection (None if
    it stays open)."""
    sock.settimeout(timeout_s)
    received = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return received
    except socket.timeout:
        return None


class tls_connection(rawwire.Connection):
    def __init__(self, port: int, certs: Certificates):
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        context = ssl.create_default_context(cafile=certs.ca)
        self.sock = context.wrap_socket(raw, server_hostname="localhost")


def handshake(connection, mechanism: str) -> int:
    body = connection.call(17, 1, rawwire.string(mechanism), correlation_id=1)
    (error_code,) = struct.unpack(">h", body[:2])
    return error_code


@pytest.fixture
def mtls_broker(strom_binary, tmp_path, certs):
    broker, ports = start_broker(
        strom_binary, tmp_path, certs, "SSL", {},
        {"ssl.client.auth": "required",
         "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"},
    )
    yield broker, ports
    broker.kill()


def test_confluent_kafka_with_a_client_certificate(mtls_broker, certs):
    broker, ports = mtls_broker
    config = mtls(ports["SSL"], certs, "client")
    create_topics(config, "mtls")
    values = [f"m-{i}".encode() for i in range(100)]
    assert produce(config, "mtls", values) == [None] * 100
    assert consume_group(config, "mtls", "g-mtls", 100) == values
    # Fetches of large ranges go through the copying path over TLS.
    big = [bytes([i % 251]) * 100_000 for i in range(20)]
    assert produce(config, "mtls", big) == [None] * 20
    assert consume_group(config, "mtls", "g-mtls-big", 120)[100:] == big
    # No certificate, or one from an untrusted CA: refused.
    no_cert = {k: v for k, v in config.items() if not k.startswith("ssl.certificate")
               and not k.startswith("ssl.key")}
    assert_refused(no_cert)
    assert_refused(mtls(ports["SSL"], certs, "rogue") | {"ssl.ca.location": certs.ca})
    assert broker.process.poll() is None
    assert produce(config, "mtls", [b"after"]) == [None]


@pytest.fixture
def acl_broker(strom_binary, tmp_path, certs):
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


def acl(resource_type, name, principal, operation, permission=AclPermissionType.ALLOW,
        pattern=ResourcePatternType.LITERAL):
    return AclBinding(resource_type, name, pattern, principal, "*", operation, permission)


def test_acls_as_kafka_applies_them(acl_broker, certs):
    broker, ports = acl_broker
    admin_config = mtls(ports["SSL"], certs, "admin")
    admin = AdminClient(admin_config)
    add_user(admin_config, "alice", "alice-secret")
    create_topics(admin_config, "orders", "secret", "logs-app", "logsx", "pub-a", "pub-hidden")
    bindings = [
        acl(ResourceType.TOPIC, "orders", "User:alice", AclOperation.READ),
        acl(ResourceType.GROUP, "g-alice", "User:alice", AclOperation.READ,
            pattern=ResourcePatternType.PREFIXED),
        acl(ResourceType.TOPIC, "logs-", "User:alice", AclOperation.WRITE,
            pattern=ResourcePatternType.PREFIXED),
        acl(ResourceType.TOPIC, "pub-", "User:*", AclOperation.DESCRIBE,
            pattern=ResourcePatternType.PREFIXED),
        acl(ResourceType.TOPIC, "pub-hidden", "User:alice", AclOperation.DESCRIBE,
            AclPermissionType.DENY),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)
    listed = admin.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY)).result(timeout=30)
    assert sorted(map(str, listed)) == sorted(map(str, bindings))
    assert produce(admin_config, "orders", [b"o-1", b"o-2"]) == [None, None]

    def check_alice(attempt: int):
        alice = sasl_ssl(ports["SASL_SSL"], certs, "alice", "alice-secret")
        visible = set(AdminClient(alice).list_topics(timeout=15).topics)
        assert {"orders", "logs-app", "pub-a"} <= visible
        assert not visible & {"secret", "logsx", "pub-hidden"}
        # READ only on orders: it cannot write there, and nothing is stored.
        errors = produce(alice, "orders", [b"forbidden"])
        assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        assert end_offset(admin_config, "orders") == 2
        # The prefixed ACL covers logs-app only.
        assert produce(alice, "logs-app", [b"l"]) == [None]
        errors = produce(alice, "logsx", [b"l"])
        assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        # Reading in its own group works; another group is refused.
        assert consume_group(alice, "orders", f"g-alice-{attempt}", 2) == [b"o-1", b"o-2"]
        with pytest.raises(KafkaException) as refused:
            consume_group(alice, "orders", "g-other", 1, timeout_s=20)
        assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    check_alice(1)
    broker.restart()
    check_alice(2)
    # The super user sees everything.
    assert {"secret", "pub-hidden"} <= set(admin.list_topics(timeout=15).topics)
    deleted = admin.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, "pub-hidden", ResourcePatternType.LITERAL, None, None,
        AclOperation.ANY, AclPermissionType.ANY)])
    for future in deleted.values():
        assert len(future.result(timeout=30)) == 1


def https_get(port: int, path: str, certs, credentials: str = None):
    """GET over TLS trusting the test CA: (status, body)."""
    context = ssl.create_default_context(cafile=certs.ca)
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}")
    if credentials:
        request.add_header("Authorization", "Basic " + base64.b64encode(credentials.encode()).decode())
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.timeout(120)
def test_the_console_over_https_authenticates_and_filters_by_acls(strom_binary, tmp_path, certs):
    """strom.metrics.listener=https://... serves the console over TLS with the
    broker's keystore; HTTP Basic against the SCRAM users; a user sees the
    topics its ACLs let it describe, and records only with READ."""
    http_port = free_port()
    broker, ports = start_broker(
        strom_binary, tmp_path, certs, "PLAINTEXT", {},
        {"strom.metrics.listener": f"https://127.0.0.1:{http_port}",
         "strom.http.authentication": "basic",
         "strom.authorizer.enable": "true",
         # The PLAINTEXT client sets up users, topics and ACLs.
         "super.users": "User:ANONYMOUS"},
    )
    try:
        plaintext = {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"}
        add_user(plaintext, "alice", "alice-secret")
        create_topics(plaintext, "visible", "hidden")
        admin = AdminClient(plaintext)
        binding = AclBinding(ResourceType.TOPIC, "visible", ResourcePatternType.LITERAL,
                             "User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        for future in admin.create_acls([binding]).values():
            future.result(timeout=30)
        producer = Producer(plaintext)
        producer.produce("visible", value=b"secret-value")
        assert producer.flush(15) == 0

        status, _ = https_get(http_port, "/api/topics", certs)
        assert status == 401
        status, _ = https_get(http_port, "/api/topics", certs, "alice:wrong")
        assert status == 401
        deadline = time.monotonic() + 20
        while True:
            status, body = https_get(http_port, "/api/topics", certs, "alice:alice-secret")
            names = [topic["name"] for topic in json.loads(body)["topics"]] if status == 200 else []
            if names == ["visible"] or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert status == 200 and names == ["visible"], (status, body[:300])
        # DESCRIBE without READ: no records.
        status, _ = https_get(http_port, "/api/topics/visible/records", certs, "alice:alice-secret")
        assert status == 403
        status, _ = https_get(http_port, "/api/topics/hidden", certs, "alice:alice-secret")
        assert status == 403
        # The wrong password is counted (no credentials at all is not a
        # failed login).
        status, body = https_get(http_port, "/metrics", certs)
        assert status == 200
        failures = re.search(r"^strom_http_authentication_failures_total (\d+)", body.decode(), re.M)
        assert failures and int(failures.group(1)) >= 1, body.decode()[:300]
        # Plain HTTP to the TLS port gets no HTTP answer.
        with socket.create_connection(("127.0.0.1", http_port), timeout=5) as raw:
            raw.sendall(b"GET /api/topics HTTP/1.1\r\nHost: strom\r\n\r\n")
            raw.settimeout(5)
            try:
                answer = raw.recv(100)
            except (ConnectionResetError, socket.timeout):
                answer = b""
        assert not answer.startswith(b"HTTP/1.1"), answer
    finally:
        broker.kill()

def test_consumer_protocol_groups_need_read_on_the_group(acl_broker, certs):
    """KIP-848 members (group.protocol=consumer) are authorized as Kafka does:
    ConsumerGroupHeartbeat needs READ on the group."""
    broker, ports = acl_broker
    admin_config = mtls(ports["SSL"], certs, "admin")
    admin = AdminClient(admin_config)
    add_user(admin_config, "bob", "bob-secret")
    create_topics(admin_config, "cp-orders")
    bindings = [
        acl(ResourceType.TOPIC, "cp-orders", "User:bob", AclOperation.READ),
        acl(ResourceType.GROUP, "cp-bob", "User:bob", AclOperation.READ),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)
    assert produce(admin_config, "cp-orders", [b"c-1", b"c-2"]) == [None, None]
    bob = {**sasl_ssl(ports["SASL_SSL"], certs, "bob", "bob-secret"), "group.protocol": "consumer"}
    assert consume_group(bob, "cp-orders", "cp-bob", 2) == [b"c-1", b"c-2"]
    with pytest.raises(KafkaException) as refused:
        consume_group(bob, "cp-orders", "cp-other", 1, timeout_s=20)
    assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
