"""Dynamic broker configs (KIP-226) and connection limits with real
clients: confluent-kafka's AdminClient alters and describes broker
resources and gets Kafka's sources and synonyms (the cluster default, an
empty broker name that confluent-kafka will not send, is altered and
described with requests encoded by hand); a cluster-default
log.retention.ms set through one node of a 3-node cluster applies to
topics without an override on every node (described as
DYNAMIC_DEFAULT_BROKER_CONFIG, old records deleted) and survives a restart
of the whole cluster; max.connections.per.ip refuses a client opening
connections in a loop while a client from another address still connects;
a listener keystore set per broker is served to new TLS connections; only a
principal with ALTER_CONFIGS on the cluster may alter broker configs.
"""
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, ConfigSource, NewTopic,
                                   ResourceType)

import clusterwire as cw
from cluster import Cluster

DYNAMIC_BROKER = ConfigSource.DYNAMIC_BROKER_CONFIG.value
DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
DEFAULT = ConfigSource.DEFAULT_CONFIG.value
TOPIC, BROKER = 2, 4
INCREMENTAL_ALTER_CONFIGS = 44


def incremental(admin: AdminClient, name: str, key: str, value=None):
    """One SET (or DELETE when `value` is None) on broker `name` with
    confluent-kafka."""
    operation = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=operation)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=20)


def alter_default(port: int, key: str, value=None):
    """One SET (or DELETE) on the cluster default broker resource (an empty
    name, which confluent-kafka refuses to send; kafka-configs.sh's
    --entity-default), IncrementalAlterConfigs v0 encoded by hand.
    Returns (error_code, error_message)."""
    operation = 0 if value is not None else 1
    config = cw.string(key) + struct.pack(">b", operation) + cw.string(value)
    resource = struct.pack(">b", BROKER) + cw.string("") + cw.array([config])
    body = cw.array([resource]) + struct.pack(">?", False)
    reader = cw.Reader(cw._call(port, INCREMENTAL_ALTER_CONFIGS, 0, body, 20.0))
    reader.int32()
    results = reader.array(lambda r: (r.int16(), r.string(), r.int8(), r.string()))
    return results[0][0], results[0][1]


def config_sources(port: int, resource_type: int, name: str) -> dict:
    """{key: (value, source)} of a resource as this node answers
    (DescribeConfigs v1, encoded by hand so that it reaches this node)."""
    resource = struct.pack(">b", resource_type) + cw.string(name) + struct.pack(">i", -1)
    body = cw.array([resource]) + struct.pack(">?", False)
    reader = cw.Reader(cw._call(port, cw.API_DESCRIBE_CONFIGS, 1, body, 10.0))
    reader.int32()

    def entry(r):
        key, value = r.string(), r.string()
        _read_only, source, _sensitive = r.unpack(">?b?")
        r.array(lambda s: (s.string(), s.string(), s.int8()))
        return key, (value, source)

    results = reader.array(lambda r: (r.int16(), r.string(), r.int8(), r.string(), r.array(entry)))
    assert results[0][0] == 0, results
    return dict(results[0][4])


def described(admin: AdminClient, resource_type, name: str) -> dict:
    resource = ConfigResource(resource_type, name)
    # librdkafka always asks for synonyms.
    future = admin.describe_configs([resource])[resource]
    return future.result(timeout=20)


def test_broker_resources_report_kafkas_sources_and_synonyms(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    incremental(admin, "1", "log.cleaner.threads", "2")
    assert alter_default(broker.port, "log.cleaner.threads", "3")[0] == 0
    assert alter_default(broker.port, "num.replica.fetchers", "2")[0] == 0

    configs = described(admin, ResourceType.BROKER, "1")
    threads = configs["log.cleaner.threads"]
    assert (threads.value, threads.source) == ("2", DYNAMIC_BROKER)
    assert not threads.is_read_only
    # confluent-kafka keys synonyms by name: the broker's three values of
    # this one name (broker, cluster default, built-in default) collapse.
    assert list(threads.synonyms) == ["log.cleaner.threads"]
    fetchers = configs["num.replica.fetchers"]
    assert (fetchers.value, fetchers.source) == ("2", DYNAMIC_DEFAULT)
    assert configs["log.dirs"].is_read_only

    assert config_sources(broker.port, BROKER, "") == {
        "log.cleaner.threads": ("3", DYNAMIC_DEFAULT),
        "num.replica.fetchers": ("2", DYNAMIC_DEFAULT)}

    with pytest.raises(KafkaException) as refused:
        incremental(admin, "1", "log.dirs", "/elsewhere")
    assert refused.value.args[0].name() == "INVALID_REQUEST"
    assert "log.dirs" in refused.value.args[0].str()
    with pytest.raises(KafkaException) as refused:
        incremental(admin, "1", "num.replica.fetchers", "none")
    assert refused.value.args[0].name() == "INVALID_CONFIG"

    incremental(admin, "1", "log.cleaner.threads")
    configs = described(admin, ResourceType.BROKER, "1")
    assert configs["log.cleaner.threads"].source == DYNAMIC_DEFAULT


# -------------------------------------------------------- a 3-node cluster


def low_watermarks(bootstrap: str, topic: str, partitions: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0]
                for p in range(partitions)]
    finally:
        consumer.close()


@pytest.mark.timeout(240)
def test_a_cluster_default_retention_applies_on_every_node_and_survives_restart(
        strom_binary, tmp_path):
    cluster = Cluster(strom_binary, tmp_path / "cluster", nodes=3,
                      extra={"log.retention.check.interval.ms": "300"})
    try:
        cluster.start()
        cluster.wait_ready()
        first = cluster.node(1)
        admin = AdminClient({"bootstrap.servers": first.bootstrap})
        topic, partitions = "aged", 3
        admin.create_topics([NewTopic(topic, partitions, 3, config={"segment.bytes": "1024"})])[
            topic].result(timeout=30)
        cluster.wait_until(lambda: cluster.topic_everywhere(topic, partitions), 30,
                           "the topic on every node")
        # Small batches, so that each partition rolls several segments
        # (only closed segments are deleted by retention).
        producer = Producer({"bootstrap.servers": first.bootstrap, "acks": "all",
                             "batch.num.messages": 4, "linger.ms": 0})
        old = int(time.time() * 1000) - 3_600_000
        for index in range(240):
            producer.produce(topic, value=b"x" * 100, partition=index % partitions, timestamp=old)
            if index % 12 == 11:
                assert producer.flush(30) == 0
        assert low_watermarks(first.bootstrap, topic, partitions) == [0] * partitions

        assert alter_default(first.port, "log.retention.ms", "60000")[0] == 0
        for node in cluster.nodes:
            cluster.wait_until(
                lambda: config_sources(node.port, TOPIC, topic)["retention.ms"] == ("60000", DYNAMIC_DEFAULT),
                20, f"the new default on node {node.node_id}")
        cluster.wait_until(
            lambda: all(low > 0 for low in low_watermarks(first.bootstrap, topic, partitions)),
            60, "old segments deleted on every partition's leader")

        for node in cluster.nodes:
            node.terminate()
        cluster.start()
        cluster.wait_ready()
        for node in cluster.nodes:
            assert config_sources(node.port, TOPIC, topic)["retention.ms"] == ("60000", DYNAMIC_DEFAULT)
    finally:
        cluster.kill_all()


# -------------------------------------------------------- connection limits


def stays_open(port: int, source: str = "127.0.0.1"):
    """A connection from `source` that the broker keeps open, or None when
    the broker closes it at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    sock.settimeout(0.3)
    try:
        if sock.recv(1) == b"":
            sock.close()
            return None
    except socket.timeout:
        return sock
    except ConnectionResetError:
        sock.close()
        return None
    return sock


def test_max_connections_per_ip_refuses_a_connection_loop_but_not_others(broker):
    assert alter_default(broker.port, "max.connections.per.ip", "5")[0] == 0
    time.sleep(0.5)
    held, refused = [], 0
    for _ in range(12):
        sock = stays_open(broker.port)
        if sock is None:
            refused += 1
        else:
            held.append(sock)
    assert refused > 0 and len(held) <= 5, (len(held), refused)
    other = stays_open(broker.port, source="127.0.0.2")
    assert other is not None, "another address still connects"
    other.close()
    for sock in held:
        sock.close()


# -------------------------------------------------------- keystore rotation


def test_a_dynamic_listener_keystore_is_served_to_new_connections(strom_binary, tmp_path):
    import shutil

    from security_setup import Certificates, start_broker
    from test_security_reload import der, served_certificate

    (tmp_path / "certs").mkdir()
    certs = Certificates(tmp_path / "certs")
    certs._leaf("server2", "/CN=localhost", "ca",
                "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    keystore = tmp_path / "keystore.pem"
    shutil.copy(certs.path("server-keystore.pem"), keystore)
    rotated = tmp_path / "rotated.pem"
    rotated.write_text(open(certs.path("server2.pem")).read() + open(certs.path("server2.key")).read())
    broker, ports = start_broker(strom_binary, tmp_path, certs, "SSL", {},
                                 {"ssl.keystore.location": str(keystore)})
    try:
        port = ports["SSL"]
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                             "ssl.ca.location": certs.ca})
        held = socket.create_connection(("127.0.0.1", port), timeout=10)
        assert served_certificate(port) == der(certs.path("server.pem"))
        with pytest.raises(KafkaException) as refused:
            incremental(admin, "1", "ssl.keystore.location", str(rotated))
        assert refused.value.args[0].name() == "INVALID_REQUEST"
        incremental(admin, "1", "listener.name.ssl.ssl.keystore.location", str(rotated))
        deadline = time.monotonic() + 15
        while served_certificate(port) != der(certs.path("server2.pem")):
            assert time.monotonic() < deadline, "the new certificate is never served"
            time.sleep(0.2)
        configs = described(admin, ResourceType.BROKER, "1")
        entry = configs["listener.name.ssl.ssl.keystore.location"]
        assert (entry.value, entry.source) == (str(rotated), DYNAMIC_BROKER)
        # The connection opened before is still served.
        held.settimeout(0.3)
        with pytest.raises(socket.timeout):
            held.recv(1)
        held.close()
        # Deleting the dynamic keystore goes back to the static one.
        incremental(admin, "1", "listener.name.ssl.ssl.keystore.location")
        deadline = time.monotonic() + 15
        while served_certificate(port) != der(certs.path("server.pem")):
            assert time.monotonic() < deadline, "the static certificate is never served again"
            time.sleep(0.2)
    finally:
        broker.kill()


# -------------------------------------------------------- authorization


def test_altering_broker_configs_needs_alter_configs_on_the_cluster(strom_binary, tmp_path):
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       ResourcePatternType)

    from security_setup import Certificates, mtls, start_broker

    (tmp_path / "certs").mkdir()
    certs = Certificates(tmp_path / "certs")
    broker, ports = start_broker(strom_binary, tmp_path, certs, "SSL", {}, {
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    })
    try:
        admin = AdminClient(mtls(ports["SSL"], certs, "admin"))
        client = AdminClient(mtls(ports["SSL"], certs, "client"))
        with pytest.raises(KafkaException) as refused:
            incremental(client, "1", "log.cleaner.threads", "2")
        assert refused.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
        binding = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                             "User:client-1", "*", AclOperation.ALTER_CONFIGS,
                             AclPermissionType.ALLOW)
        for future in admin.create_acls([binding]).values():
            future.result(timeout=30)
        incremental(client, "1", "log.cleaner.threads", "2")
        configs = described(admin, ResourceType.BROKER, "1")
        assert configs["log.cleaner.threads"].source == DYNAMIC_BROKER
    finally:
        broker.kill()


def client_accepted(port: int, certs, name: str) -> bool:
    """Whether a TLS connection with the client certificate `name` is kept
    (a refused certificate ends it with an alert or at once)."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(certs.path(f"{name}.pem"), certs.path(f"{name}.key"))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw) as tls:
                tls.settimeout(0.5)
                return tls.recv(1) != b""
        except socket.timeout:
            return True
        except (ssl.SSLError, ConnectionResetError):
            return False


def test_a_dynamic_listener_truststore_verifies_new_connections(strom_binary, tmp_path):
    from security_setup import Certificates, mtls, start_broker

    (tmp_path / "certs").mkdir()
    certs = Certificates(tmp_path / "certs")
    both = tmp_path / "both-cas.pem"
    both.write_text(open(certs.ca).read() + open(certs.path("rogue-ca.pem")).read())
    broker, ports = start_broker(strom_binary, tmp_path, certs, "SSL", {},
                                 {"ssl.client.auth": "required"})
    try:
        port = ports["SSL"]
        admin = AdminClient(mtls(port, certs, "admin"))
        assert client_accepted(port, certs, "client")
        assert not client_accepted(port, certs, "rogue")
        incremental(admin, "1", "listener.name.ssl.ssl.truststore.location", str(both))
        deadline = time.monotonic() + 15
        while not client_accepted(port, certs, "rogue"):
            assert time.monotonic() < deadline, "the new truststore is never used"
            time.sleep(0.2)
        assert client_accepted(port, certs, "client")
        incremental(admin, "1", "listener.name.ssl.ssl.truststore.location")
        deadline = time.monotonic() + 15
        while client_accepted(port, certs, "rogue"):
            assert time.monotonic() < deadline, "the static truststore is never used again"
            time.sleep(0.2)
    finally:
        broker.kill()
