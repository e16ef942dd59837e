"""Dynamic broker configs (KIP-226) and connection limits with real
clients: confluent-kafka's AdminClient alters and describes broker
resources and gets Kafka's sources and synonyms; a cluster-default
log.retention.ms set through one node of a 3-node cluster applies to
topics without an override on every node (described as
DYNAMIC_DEFAULT_BROKER_CONFIG, old records deleted) and survives a restart
of the whole cluster; max.connections.per.ip refuses a client opening
connections in a loop while a client from another address still connects.
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


def incremental(admin: AdminClient, name: str, key: str, value=None):
    """One SET (or DELETE when `value` is None) on broker resource `name`."""
    operation = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=operation)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=20)


def described(admin: AdminClient, resource_type, name: str) -> dict:
    resource = ConfigResource(resource_type, name)
    future = admin.describe_configs([resource], include_synonyms=True)[resource]
    return future.result(timeout=20)


def test_broker_resources_report_kafkas_sources_and_synonyms(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    incremental(admin, "1", "log.cleaner.threads", "2")
    incremental(admin, "", "log.cleaner.threads", "3")
    incremental(admin, "", "num.replica.fetchers", "2")

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

    defaults = described(admin, ResourceType.BROKER, "")
    assert {name: entry.source for name, entry in defaults.items()} == {
        "log.cleaner.threads": DYNAMIC_DEFAULT, "num.replica.fetchers": DYNAMIC_DEFAULT}

    with pytest.raises(KafkaException) as refused:
        incremental(admin, "", "log.dirs", "/elsewhere")
    assert refused.value.args[0].name() == "INVALID_REQUEST"
    assert "log.dirs" in refused.value.args[0].str()
    with pytest.raises(KafkaException) as refused:
        incremental(admin, "", "num.replica.fetchers", "none")
    assert refused.value.args[0].name() == "INVALID_CONFIG"

    incremental(admin, "1", "log.cleaner.threads")
    configs = described(admin, ResourceType.BROKER, "1")
    assert configs["log.cleaner.threads"].source == DYNAMIC_DEFAULT


# -------------------------------------------------------- a 3-node cluster


def topic_config_sources(port: int, topic: str) -> dict:
    """{name: (value, source)} of a topic as this node answers
    (DescribeConfigs v1, encoded by hand so that it reaches this node)."""
    resource = struct.pack(">b", cw.RESOURCE_TOPIC) + cw.string(topic) + struct.pack(">i", -1)
    body = cw.array([resource]) + struct.pack(">?", False)
    reader = cw.Reader(cw._call(port, cw.API_DESCRIBE_CONFIGS, 1, body, 10.0))
    reader.int32()

    def entry(r):
        name, value = r.string(), r.string()
        _read_only, source, _sensitive = r.unpack(">?b?")
        r.array(lambda s: (s.string(), s.string(), s.int8()))
        return name, (value, source)

    results = reader.array(lambda r: (r.int16(), r.string(), r.int8(), r.string(), r.array(entry)))
    assert results[0][0] == 0, results
    return dict(results[0][4])


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
        producer = Producer({"bootstrap.servers": first.bootstrap, "acks": "all"})
        old = int(time.time() * 1000) - 3_600_000
        for index in range(300):
            producer.produce(topic, value=b"x" * 100, partition=index % partitions, timestamp=old)
        assert producer.flush(30) == 0
        assert low_watermarks(first.bootstrap, topic, partitions) == [0] * partitions

        incremental(admin, "", "log.retention.ms", "60000")
        for node in cluster.nodes:
            cluster.wait_until(
                lambda: topic_config_sources(node.port, topic)["retention.ms"] == ("60000", DYNAMIC_DEFAULT),
                20, f"the new default on node {node.node_id}")
        cluster.wait_until(
            lambda: all(low > 0 for low in low_watermarks(first.bootstrap, topic, partitions)),
            60, "old segments deleted on every partition's leader")

        for node in cluster.nodes:
            node.terminate()
        cluster.start()
        cluster.wait_ready()
        for node in cluster.nodes:
            assert topic_config_sources(node.port, topic)["retention.ms"] == ("60000", DYNAMIC_DEFAULT)
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
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    incremental(admin, "", "max.connections.per.ip", "5")
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
