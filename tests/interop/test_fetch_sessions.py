"""Incremental fetch sessions (KIP-227) with kafka-python, which opens one
per broker: records that arrive on different partitions over time are all
read, in order, through incremental fetches of one session."""
import time

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from datapath import confluent_producer, create_topic, produce_confluent

PARTITIONS = 3


def session_metadata(consumer: KafkaConsumer):
    """kafka-python's view of its fetch sessions (pinned version 3.0.12)."""
    handlers = consumer._fetcher._session_handlers
    return [(handler.next_metadata.session_id, handler.next_metadata.epoch) for handler in handlers.values()]


@pytest.mark.timeout(120)
def test_kafka_python_reads_through_an_incremental_session(broker_factory):
    broker = broker_factory()
    create_topic(broker.bootstrap, "sessions", partitions=PARTITIONS)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        consumer_timeout_ms=100,
    )
    producer = confluent_producer(broker.bootstrap)
    expected = {partition: [] for partition in range(PARTITIONS)}
    received = {partition: [] for partition in range(PARTITIONS)}
    try:
        consumer.assign([KpTopicPartition("sessions", p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        for round_index in range(12):
            # One partition at a time gets records; the others stay quiet.
            partition = round_index % PARTITIONS
            values = [f"r{round_index}-{index}".encode() for index in range(5 + round_index)]
            produce_confluent(producer, "sessions", [(None, value, None, None) for value in values], partition)
            expected[partition].extend(values)
            deadline = time.monotonic() + 20
            while received[partition] != expected[partition] and time.monotonic() < deadline:
                for tp, messages in consumer.poll(timeout_ms=200).items():
                    received[tp.partition].extend(message.value for message in messages)
            assert received == expected, f"round {round_index}"
        sessions = session_metadata(consumer)
        assert sessions, "kafka-python fetched"
        session_id, epoch = sessions[0]
        assert session_id > 0, "the broker opened a session"
        assert epoch > 5, f"fetches were incremental (epoch {epoch})"
    finally:
        consumer.close()
