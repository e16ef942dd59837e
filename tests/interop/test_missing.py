"""Kafka's answers for offsets of topics and partitions that do not exist,
as librdkafka sees them: committing an offset for a missing topic or for a
partition beyond a topic's count fails with UNKNOWN_TOPIC_OR_PART (what
librdkafka's own test suite checks against Kafka), and the existing
partitions of the same commit are stored (librdkafka reports the request's
error on every partition of a partly failed commit, so the stored offsets
are read back to see which were kept)."""
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from datapath import create_topic


def commit_errors(consumer: Consumer, results: list, offsets):
    """The per-partition error codes of one commit, in request order (None
    for success), as the on_commit callback reports them."""
    results.clear()
    consumer.commit(offsets=offsets, asynchronous=True)
    deadline = time.monotonic() + 20
    while not results and time.monotonic() < deadline:
        consumer.poll(0.1)
    assert results, "the commit is reported"
    _, committed = results[0]
    by_partition = {(tp.topic, tp.partition): tp.error for tp in committed}
    return [
        None if by_partition[(tp.topic, tp.partition)] is None
        else by_partition[(tp.topic, tp.partition)].code()
        for tp in offsets
    ]


@pytest.mark.timeout(60)
def test_librdkafka_commit_for_missing_topic_and_partition_fails(broker):
    create_topic(broker.bootstrap, "present", partitions=2)
    results = []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "missing-commits",
            "enable.auto.commit": False,
            "on_commit": lambda error, partitions: results.append((error, partitions)),
        }
    )
    try:
        unknown = KafkaError.UNKNOWN_TOPIC_OR_PART
        assert commit_errors(
            consumer, results, [TopicPartition("ghost", 0, 123), TopicPartition("ghost", 1, 456)]
        ) == [unknown, unknown]
        assert results[0][0] is not None and results[0][0].code() == unknown
        assert commit_errors(
            consumer, results, [TopicPartition("present", 1, 7), TopicPartition("present", 5, 8)]
        ) == [unknown, unknown]
        stored = consumer.committed([TopicPartition("present", 0), TopicPartition("present", 1)], timeout=20)
        assert [tp.offset for tp in stored] == [-1001, 7]
    finally:
        consumer.close()


@pytest.mark.timeout(60)
def test_admin_alter_group_offsets_for_missing_topic_fails(broker):
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # Wait until the group coordinator has loaded, so that the answer below
    # is about the topic and not about the coordinator.
    deadline = time.monotonic() + 20
    while True:
        (listed,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("missing-admin")]).values()
        try:
            listed.result(timeout=20)
            break
        except KafkaException:
            assert time.monotonic() < deadline, "the group coordinator loads"
            time.sleep(0.2)
    request = ConsumerGroupTopicPartitions("missing-admin", [TopicPartition("ghost", 0, 5)])
    (future,) = admin.alter_consumer_group_offsets([request], request_timeout=20).values()
    try:
        result = future.result()
    except KafkaException as error:
        assert error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    else:
        assert [tp.error.code() if tp.error else None for tp in result.topic_partitions] == [
            KafkaError.UNKNOWN_TOPIC_OR_PART
        ]
