"""Admin APIs against a real Strom broker, with confluent-kafka's AdminClient
and kafka-python's KafkaAdminClient: topics, partitions, configs (and their
effect on the data path), DeleteRecords and DescribeCluster."""
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka import KafkaProducer
from kafka import TopicPartition as PythonPartition
from kafka.admin import KafkaAdminClient
from kafka.admin import ConfigResource as PythonConfigResource
from kafka.admin import ConfigResourceType, NewPartitions as PythonNewPartitions
from kafka.admin import NewTopic as PythonNewTopic
from kafka.admin import AlterConfigOp
import kafka.errors as python_errors

TIMEOUT_S = 15


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def confluent_admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def python_admin(broker) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)


def wait_all(futures: dict) -> dict:
    return {key: future.result(timeout=TIMEOUT_S) for key, future in futures.items()}


def produce(
    broker, topic: str, count: int, size: int = 10, partition: int = 0, one_per_batch: bool = False
) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    errors = []
    for index in range(count):
        producer.produce(
            topic,
            value=(b"%08d" % index).ljust(size, b"x"),
            partition=partition,
            on_delivery=lambda error, _message: error and errors.append(error),
        )
        producer.poll(0)
        if one_per_batch:
            assert producer.flush(TIMEOUT_S) == 0
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []


def watermarks(broker, topic: str, partition: int = 0) -> tuple:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("wm")})
    try:
        return consumer.get_watermark_offsets(
            ConfluentPartition(topic, partition), timeout=TIMEOUT_S, cached=False
        )
    finally:
        consumer.close()


def wait_until(predicate, timeout_s: float = TIMEOUT_S, interval_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(interval_s)


def confluent_topic_configs(admin: AdminClient, topic: str) -> dict:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)


# ---------------------------------------------------------------- topics


@pytest.mark.timeout(90)
def test_confluent_topic_lifecycle(broker):
    admin = confluent_admin(broker)
    topic = unique("lifecycle")

    checked = admin.create_topics(
        [NewTopic(topic, num_partitions=3, replication_factor=1)], validate_only=True
    )
    wait_all(checked)
    assert topic not in admin.list_topics(timeout=TIMEOUT_S).topics

    created = admin.create_topics(
        [NewTopic(topic, num_partitions=3, replication_factor=1, config={"retention.ms": "3600000"})]
    )
    wait_all(created)
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    assert len(metadata.topics[topic].partitions) == 3

    described = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=TIMEOUT_S)
    assert described.name == topic
    assert len(described.partitions) == 3
    assert all(partition.leader.id == 1 for partition in described.partitions)

    again = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    with pytest.raises(KafkaException) as error:
        again[topic].result(timeout=TIMEOUT_S)
    assert error.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    # Adding partitions: validate-only changes nothing, then a real increase.
    wait_all(admin.create_partitions([NewPartitions(topic, 5)], validate_only=True))
    assert len(admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions) == 3
    wait_all(admin.create_partitions([NewPartitions(topic, 5)]))
    assert len(admin.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions) == 5
    shrink = admin.create_partitions([NewPartitions(topic, 2)])
    with pytest.raises(KafkaException) as error:
        shrink[topic].result(timeout=TIMEOUT_S)
    assert error.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    produce(broker, topic, 5, partition=4)
    assert watermarks(broker, topic, 4) == (0, 5)

    wait_all(admin.delete_topics([topic], operation_timeout=TIMEOUT_S))
    wait_until(lambda: topic not in admin.list_topics(timeout=TIMEOUT_S).topics)
    missing = admin.delete_topics([topic], operation_timeout=TIMEOUT_S)
    with pytest.raises(KafkaException) as error:
        missing[topic].result(timeout=TIMEOUT_S)
    assert error.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # Recreated under the same name, the topic starts empty.
    wait_all(admin.create_topics([NewTopic(topic, num_partitions=5, replication_factor=1)]))
    assert watermarks(broker, topic, 4) == (0, 0)


@pytest.mark.timeout(90)
def test_kafka_python_topic_lifecycle(broker):
    admin = python_admin(broker)
    topic = unique("kp-lifecycle")
    try:
        admin.create_topics(
            [PythonNewTopic(topic, num_partitions=2, replication_factor=1)], validate_only=True
        )
        assert topic not in admin.list_topics()

        admin.create_topics(
            [
                PythonNewTopic(
                    topic,
                    num_partitions=2,
                    replication_factor=1,
                    topic_configs={"cleanup.policy": "delete", "segment.bytes": "1048576"},
                )
            ]
        )
        assert topic in admin.list_topics()
        (described,) = admin.describe_topics([topic])
        assert described["error_code"] == 0
        assert len(described["partitions"]) == 2

        admin.create_partitions({topic: PythonNewPartitions(total_count=4)}, validate_only=True)
        assert len(admin.describe_topics([topic])[0]["partitions"]) == 2
        admin.create_partitions({topic: PythonNewPartitions(total_count=4)})
        assert len(admin.describe_topics([topic])[0]["partitions"]) == 4

        produce(broker, topic, 3, partition=3)
        admin.delete_topics([topic])
        wait_until(lambda: topic not in admin.list_topics())
        with pytest.raises(python_errors.UnknownTopicOrPartitionError):
            admin.delete_topics([topic])

        admin.create_topics([PythonNewTopic(topic, num_partitions=4, replication_factor=1)])
        assert watermarks(broker, topic, 3) == (0, 0)
    finally:
        admin.close()


@pytest.mark.timeout(60)
def test_delete_topic_disabled(broker_factory):
    broker = broker_factory(delete_topic_enable="false")
    admin = confluent_admin(broker)
    topic = unique("kept")
    wait_all(admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]))
    futures = admin.delete_topics([topic], operation_timeout=TIMEOUT_S)
    with pytest.raises(KafkaException) as error:
        futures[topic].result(timeout=TIMEOUT_S)
    assert error.value.args[0].code() == KafkaError.TOPIC_DELETION_DISABLED
    assert topic in admin.list_topics(timeout=TIMEOUT_S).topics


# ---------------------------------------------------------------- configs


@pytest.mark.timeout(90)
def test_confluent_describe_and_alter_configs(broker_factory):
    broker = broker_factory(log_segment_bytes="2097152")
    admin = confluent_admin(broker)
    topic = unique("configs")
    wait_all(
        admin.create_topics(
            [NewTopic(topic, num_partitions=1, replication_factor=1, config={"retention.ms": "7200000"})]
        )
    )

    configs = confluent_topic_configs(admin, topic)
    retention = configs["retention.ms"]
    assert retention.value == "7200000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_default and not retention.is_read_only
    segment = configs["segment.bytes"]
    assert segment.value == "2097152"
    assert segment.source == ConfigSource.STATIC_BROKER_CONFIG.value
    cleanup = configs["cleanup.policy"]
    assert cleanup.value == "delete"
    assert cleanup.source == ConfigSource.DEFAULT_CONFIG.value
    assert cleanup.is_default

    # Legacy AlterConfigs replaces the whole set: retention.ms goes back
    # to its default, max.message.bytes becomes small.
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={"max.message.bytes": "1000"})
    wait_all(admin.alter_configs([resource], validate_only=True))
    assert confluent_topic_configs(admin, topic)["max.message.bytes"].is_default
    wait_all(admin.alter_configs([ConfigResource(ResourceType.TOPIC, topic, set_config={"max.message.bytes": "1000"})]))
    configs = confluent_topic_configs(admin, topic)
    assert configs["max.message.bytes"].value == "1000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # The new limit applies to the very next produce.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "message.timeout.ms": 5000})
    errors = []
    producer.produce(topic, value=b"x" * 3000, on_delivery=lambda error, _m: errors.append(error))
    producer.flush(TIMEOUT_S)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE

    # Incremental: APPEND and SUBTRACT on a list, DELETE back to default.
    def incremental(*entries):
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=list(entries))
        wait_all(admin.incremental_alter_configs([resource]))

    incremental(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND))
    assert confluent_topic_configs(admin, topic)["cleanup.policy"].value == "delete,compact"
    incremental(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
    assert confluent_topic_configs(admin, topic)["cleanup.policy"].value == "compact"
    incremental(
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET),
    )
    configs = confluent_topic_configs(admin, topic)
    assert configs["max.message.bytes"].is_default
    assert configs["cleanup.policy"].value == "delete"
    produce(broker, topic, 1, size=3000)

    bad = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)],
    )
    with pytest.raises(KafkaException) as error:
        admin.incremental_alter_configs([bad])[bad].result(timeout=TIMEOUT_S)
    assert error.value.args[0].code() == KafkaError.INVALID_CONFIG

    missing = ConfigResource(ResourceType.TOPIC, unique("missing"))
    with pytest.raises(KafkaException) as error:
        admin.describe_configs([missing])[missing].result(timeout=TIMEOUT_S)
    assert error.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


@pytest.mark.timeout(60)
def test_confluent_broker_configs(broker):
    admin = confluent_admin(broker)
    resource = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert configs["log.dirs"].value == str(broker.data_dir)
    assert configs["log.dirs"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["num.partitions"].value == "1"
    assert configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    # Static keys are read-only; the dynamic ones (KIP-226) are not.
    assert configs["log.dirs"].is_read_only
    assert not configs["log.retention.ms"].is_read_only

    change = ConfigResource(ResourceType.BROKER, "1", set_config={"log.dirs": "/elsewhere"})
    with pytest.raises(KafkaException) as error:
        admin.alter_configs([change])[change].result(timeout=TIMEOUT_S)
    assert error.value.args[0].code() == KafkaError.INVALID_REQUEST
    change = ConfigResource(ResourceType.BROKER, "1", set_config={"log.retention.ms": "86400000"})
    admin.alter_configs([change])[change].result(timeout=TIMEOUT_S)
    configs = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert configs["log.retention.ms"].value == "86400000"
    assert configs["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value


@pytest.mark.timeout(90)
def test_kafka_python_configs_and_min_insync(broker):
    admin = python_admin(broker)
    topic = unique("kp-configs")
    try:
        admin.create_topics([PythonNewTopic(topic, num_partitions=1, replication_factor=1)])
        resource = lambda configs=None: PythonConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)

        described = admin.describe_configs([resource()], config_filter="all")
        entries = described["topic"][topic]
        assert entries["min.insync.replicas"]["value"] == "1"
        assert entries["min.insync.replicas"]["config_source"] == "DEFAULT_CONFIG"
        assert admin.describe_configs([resource()])["topic"][topic] == {}

        # Incremental (the client's default on a broker that offers it).
        result = admin.alter_configs([resource({"min.insync.replicas": "2"})], incremental=True)
        assert result["topic"][topic] == "OK"
        modified = admin.describe_configs([resource()], include_synonyms=True)["topic"][topic]
        assert modified["min.insync.replicas"]["value"] == "2"
        assert modified["min.insync.replicas"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        sources = [synonym["source"] for synonym in modified["min.insync.replicas"]["synonyms"]]
        assert sources == ["DYNAMIC_TOPIC_CONFIG", "DEFAULT_CONFIG"]

        # With one replica, acks=all now fails: the setting took effect.
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=0)
        try:
            with pytest.raises(python_errors.NotEnoughReplicasError):
                producer.send(topic, b"refused").get(timeout=TIMEOUT_S)
            # Legacy AlterConfigs without the key resets it to the default.
            result = admin.alter_configs(
                [resource({"retention.ms": "86400000"})], incremental=False, raise_on_unknown=True
            )
            assert result["topic"][topic] == "OK"
            entries = admin.describe_configs([resource()])["topic"][topic]
            # The client re-sends modified keys with legacy AlterConfigs.
            assert entries["retention.ms"]["value"] == "86400000"
            admin.reset_configs([resource(["min.insync.replicas"])])
            assert "min.insync.replicas" not in admin.describe_configs([resource()])["topic"][topic]
            metadata = producer.send(topic, b"accepted").get(timeout=TIMEOUT_S)
            assert metadata.offset == 0
        finally:
            producer.close(timeout=5)

        result = admin.alter_configs(
            [resource({"retention.ms": "-5"})], raise_on_unknown=False, incremental=True
        )
        assert "InvalidConfig" in result["topic"][topic] or "INVALID_CONFIG" in result["topic"][topic].upper()
    finally:
        admin.close()


@pytest.mark.timeout(90)
def test_timestamp_type_takes_effect(broker):
    admin = confluent_admin(broker)
    topic = unique("timestamps")
    wait_all(admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]))
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    wait_all(admin.incremental_alter_configs([resource]))
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(topic, value=b"stamped", timestamp=1_000)
    assert producer.flush(TIMEOUT_S) == 0
    before_ms = int(time.time() * 1000) - 60_000
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("ts"),
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([ConfluentPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        message = None
        while message is None and time.monotonic() < deadline:
            candidate = consumer.poll(0.5)
            if candidate is not None and candidate.error() is None:
                message = candidate
        assert message is not None
        kind, timestamp = message.timestamp()
        assert kind == 2  # TIMESTAMP_LOG_APPEND_TIME
        assert timestamp > before_ms
    finally:
        consumer.close()


@pytest.mark.timeout(90)
def test_retention_change_deletes_old_segments(broker_factory):
    broker = broker_factory(log_retention_check_interval_ms="200")
    admin = confluent_admin(broker)
    topic = unique("retention")
    wait_all(
        admin.create_topics(
            [NewTopic(topic, num_partitions=1, replication_factor=1, config={"segment.bytes": "1024"})]
        )
    )
    produce(broker, topic, 40, size=200, one_per_batch=True)
    assert watermarks(broker, topic) == (0, 40)
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    wait_all(admin.incremental_alter_configs([resource]))
    low, high = wait_until(lambda: (lambda marks: marks if marks[0] > 0 else None)(watermarks(broker, topic)))
    assert 0 < low <= high == 40


# ---------------------------------------------------------------- records


@pytest.mark.timeout(60)
def test_confluent_delete_records(broker):
    admin = confluent_admin(broker)
    topic = unique("delete-records")
    wait_all(admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]))
    produce(broker, topic, 10)

    deleted = wait_all(admin.delete_records([ConfluentPartition(topic, 0, 4)]))
    (result,) = deleted.values()
    assert result.low_watermark == 4
    assert watermarks(broker, topic) == (4, 10)

    beyond = admin.delete_records([ConfluentPartition(topic, 0, 11)])
    with pytest.raises(KafkaException) as error:
        next(iter(beyond.values())).result(timeout=TIMEOUT_S)
    assert error.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE

    # -1 (OFFSET_END) means the high watermark.
    (result,) = wait_all(admin.delete_records([ConfluentPartition(topic, 0, -1)])).values()
    assert result.low_watermark == 10
    assert watermarks(broker, topic) == (10, 10)
    produce(broker, topic, 2)
    assert watermarks(broker, topic) == (10, 12)


@pytest.mark.timeout(60)
def test_kafka_python_delete_records(broker):
    admin = python_admin(broker)
    topic = unique("kp-delete-records")
    try:
        admin.create_topics([PythonNewTopic(topic, num_partitions=2, replication_factor=1)])
        produce(broker, topic, 6, partition=1)
        result = admin.delete_records({PythonPartition(topic, 1): 3})
        (entry,) = result.values()
        assert entry["low_watermark"] == 3
        assert watermarks(broker, topic, 1) == (3, 6)
        assert watermarks(broker, topic, 0) == (0, 0)
    finally:
        admin.close()


# ---------------------------------------------------------------- cluster


@pytest.mark.timeout(60)
def test_describe_cluster_both_clients(broker):
    admin = confluent_admin(broker)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=TIMEOUT_S)
    assert cluster.cluster_id
    assert cluster.controller.id == 1
    assert [(node.id, node.host, node.port) for node in cluster.nodes] == [(1, "127.0.0.1", broker.port)]
    assert cluster.authorized_operations  # no authorizer: everything allowed

    python = python_admin(broker)
    try:
        described = python.describe_cluster()
        assert described["cluster_id"] == cluster.cluster_id
        assert described["controller_id"] == 1
        assert [(b["broker_id"], b["port"]) for b in described["brokers"]] == [(1, broker.port)]
    finally:
        python.close()
