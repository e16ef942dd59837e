"""Idempotent producers: retries after lost responses add no duplicates and
keep the order.

The broker advertises a loopback proxy as its listener, so every client
connection goes through it. The proxy forwards requests, but every few
Produce requests it drops the connection after the broker has received the
request and before its response reaches the client: the classic lost-ack
that makes a producer send the same batch again.
"""
import socket
import struct
import threading
import time

import pytest

from conftest import free_port
from datapath import consume_confluent, create_topic, plain_consumer_config

PRODUCE = 0
COUNT = 3000


class DroppingProxy:
    """Forwards 127.0.0.1:port to the broker; drops every `every`-th Produce."""

    def __init__(self, port: int, every: int):
        self.port = port
        self.every = every
        self.target_port = None
        self.produce_requests = 0
        self.dropped = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self.accept_loop, daemon=True)
        self.thread.start()

    def close(self):
        self.running = False
        self.thread.join(timeout=5)
        self.listener.close()

    def accept_loop(self):
        while self.running:
            try:
                client, _ = self.listener.accept()
            except socket.timeout:
                continue
            if self.target_port is None:
                client.close()
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            state = {"drop": False}
            threading.Thread(target=self.upstream, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self.downstream, args=(server, client, state), daemon=True).start()

    def upstream(self, client, server, state):
        """Client to broker, frame by frame, deciding when to cut."""
        try:
            while True:
                header = recv_exact(client, 4)
                (length,) = struct.unpack(">i", header)
                payload = recv_exact(client, length)
                cut = False
                if struct.unpack(">h", payload[:2])[0] == PRODUCE:
                    with self.lock:
                        self.produce_requests += 1
                        cut = self.produce_requests % self.every == 0
                if cut:
                    state["drop"] = True  # swallow this response and later ones
                server.sendall(header + payload)
                if cut:
                    time.sleep(0.3)  # let the broker append it
                    with self.lock:
                        self.dropped += 1
                    break
        except (OSError, ConnectionError):
            pass
        for sock in (client, server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def downstream(self, server, client, state):
        try:
            while True:
                data = server.recv(65536)
                if not data:
                    break
                if not state["drop"]:
                    client.sendall(data)
        except OSError:
            pass


def recv_exact(sock, count):
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


@pytest.fixture
def proxied_broker(broker_factory):
    proxy = DroppingProxy(free_port(), every=7)
    broker = broker_factory(**{"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    proxy.target_port = broker.port
    yield broker, proxy
    proxy.close()


def produce_through(proxy_port: int, producer_config: dict) -> list:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": f"127.0.0.1:{proxy_port}",
        "acks": "all",
        "linger.ms": 2,
        "batch.num.messages": 50,
        "retries": 1000,
        "retry.backoff.ms": 50,
        "message.timeout.ms": 60000,
        **producer_config,
    })
    errors = []
    for index in range(COUNT):
        while True:
            try:
                producer.produce(
                    "exactly-once-ish",
                    f"{index:05d}".encode(),
                    partition=0,
                    on_delivery=lambda error, _message: error and errors.append(error),
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(90) == 0
    assert not errors, errors[:3]
    return errors


def stored_values(bootstrap: str, topic: str = "exactly-once-ish") -> list:
    """Every stored value, up to the high watermark, in offset order."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(plain_consumer_config(bootstrap))
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, 0), timeout=10, cached=False
        )
    finally:
        consumer.close()
    assert low == 0
    reads = consume_confluent(bootstrap, topic, high, timeout_s=30)
    assert [read.offset for read in reads] == list(range(high))
    return [read.value for read in reads]


@pytest.mark.timeout(150)
def test_the_proxy_makes_a_plain_producer_write_duplicates(proxied_broker):
    """The harness works: without idempotence, lost acks do duplicate."""
    broker, proxy = proxied_broker
    create_topic(f"127.0.0.1:{proxy.port}", "exactly-once-ish")
    produce_through(proxy.port, {"enable.idempotence": False, "max.in.flight": 1})
    assert proxy.dropped > 0
    values = stored_values(broker.bootstrap)
    assert len(values) > COUNT, "lost acknowledgements caused no duplicate"
    assert set(values) == {f"{index:05d}".encode() for index in range(COUNT)}


@pytest.mark.timeout(150)
def test_an_idempotent_producer_writes_each_record_once_in_order(proxied_broker):
    broker, proxy = proxied_broker
    create_topic(f"127.0.0.1:{proxy.port}", "exactly-once-ish")
    produce_through(proxy.port, {"enable.idempotence": True, "max.in.flight": 5})
    assert proxy.dropped > 0
    values = stored_values(broker.bootstrap)
    assert values == [f"{index:05d}".encode() for index in range(COUNT)]


@pytest.mark.timeout(150)
def test_an_idempotent_kafka_python_producer_writes_each_record_once_in_order(proxied_broker):
    from kafka import KafkaProducer

    broker, proxy = proxied_broker
    create_topic(f"127.0.0.1:{proxy.port}", "exactly-once-ish")
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{proxy.port}",
        enable_idempotence=True,
        acks="all",
        linger_ms=2,
        batch_size=1024,  # many small requests, so the proxy cuts several
        retries=1000,
        retry_backoff_ms=50,
        max_in_flight_requests_per_connection=5,
    )
    try:
        futures = [
            producer.send("exactly-once-ish", f"{index:05d}".encode(), partition=0)
            for index in range(COUNT)
        ]
        producer.flush(timeout=90)
        for future in futures:
            future.get(timeout=30)
    finally:
        producer.close(timeout=10)
    assert proxy.dropped > 0
    values = stored_values(broker.bootstrap)
    assert values == [f"{index:05d}".encode() for index in range(COUNT)]


OUT_OF_ORDER_SEQUENCE_NUMBER = 45


@pytest.mark.timeout(60)
def test_the_broker_drops_a_resent_idempotent_batch_even_after_kill_9(broker_factory):
    """The broker side of idempotence, without InitProducerId: batches carry
    a producer id, epoch and sequence by hand; a resent batch is answered
    with its first offsets and stored once, across an unclean restart too."""
    import rawwire as wire

    broker = broker_factory(**{"log.flush.interval.messages": 1})
    create_topic(broker.bootstrap, "sequenced")

    def send(connection, base_sequence, count, tag):
        batch = wire.record_batch(
            [(None, f"{tag}-{base_sequence + i}".encode()) for i in range(count)],
            producer_id=4242, producer_epoch=0, base_sequence=base_sequence,
        )
        (result,) = wire.decode_produce_v3(
            connection.call(wire.API_PRODUCE, 3, wire.produce_v3_body("sequenced", 0, batch))
        )
        return result[2:4]

    with wire.Connection(broker.port) as connection:
        assert send(connection, 0, 3, "a") == (0, 0)
        assert send(connection, 3, 2, "a") == (0, 3)
        assert send(connection, 3, 2, "a") == (0, 3)  # a retry: same answer
        assert send(connection, 0, 3, "a") == (0, 0)  # an older retry too
        assert send(connection, 9, 1, "a")[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    broker.restart(hard=True)
    with wire.Connection(broker.port) as connection:
        assert send(connection, 3, 2, "a") == (0, 3)  # remembered after the crash
        assert send(connection, 5, 1, "a") == (0, 5)
    values = stored_values(broker.bootstrap, "sequenced")
    assert values == [f"a-{i}".encode() for i in range(6)]
