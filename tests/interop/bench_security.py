"""The measurement behind scripts/bench-security (see there). Not a test."""
import base64
import hashlib
import hmac
import os
import socket
import ssl
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)

import rawwire  # noqa: E402
from security_setup import Certificates, sasl_ssl, start_broker  # noqa: E402

RECORDS = int(os.environ.get("RECORDS", "200000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
RECORD = b"r" * 1024
CONNECTIONS = 50


def produce(config, topic):
    producer = Producer({**config, "acks": "1", "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})
    start = time.perf_counter()
    for _ in range(RECORDS):
        while True:
            try:
                producer.produce(topic, RECORD)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return RECORDS / (time.perf_counter() - start)


def consume(config, topic):
    # fetch.queue.backoff.ms: librdkafka waits that long (1 s by default)
    # before fetching again once its local queue is over its thresholds,
    # which large fetches reach at once on a fast listener; that wait would
    # measure the client, not the listener.
    consumer = Consumer({**config, "group.id": "bench", "fetch.max.bytes": 52_428_800,
                         "max.partition.fetch.bytes": 8_388_608, "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 10})
    consumer.assign([TopicPartition(topic, 0, 0)])
    start = time.perf_counter()
    count = 0
    while count < RECORDS:
        for message in consumer.consume(10_000, 5.0):
            assert not message.error(), message.error()
            count += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return RECORDS / elapsed


def scram_connect(port, ca, user, password):
    """Seconds from connect() to an authenticated SCRAM-SHA-512 session."""
    start = time.perf_counter()
    raw = socket.create_connection(("127.0.0.1", port))
    sock = ssl.create_default_context(cafile=ca).wrap_socket(raw, server_hostname="localhost")
    connection = rawwire.Connection.__new__(rawwire.Connection)
    connection.sock = sock
    connection.call(18, 0, b"", correlation_id=1)
    body = connection.call(17, 1, rawwire.string("SCRAM-SHA-512"), correlation_id=2)
    assert struct.unpack(">h", body[:2])[0] == 0
    nonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={user},r={nonce}"
    server_first = authenticate(connection, f"n,,{bare}".encode(), 3).decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    signature = hmac.new(hashlib.sha512(client_key).digest(), auth, "sha512").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    authenticate(connection, f"{without_proof},p={base64.b64encode(proof).decode()}".encode(), 4)
    elapsed = time.perf_counter() - start
    sock.close()
    return elapsed


def authenticate(connection, token, correlation_id):
    body = connection.call(36, 0, rawwire.nullable_bytes(token), correlation_id=correlation_id)
    reader = rawwire.Reader(body)
    error_code = reader.int16()
    reader.string()
    auth_bytes = reader.nullable_bytes()
    assert error_code == 0, error_code
    return auth_bytes


def plain_connect(port):
    start = time.perf_counter()
    connection = rawwire.Connection(port)
    connection.call(18, 0, b"", correlation_id=1)
    elapsed = time.perf_counter() - start
    connection.close()
    return elapsed


def main():
    binary = Path(os.environ["STROM_BROKER_BIN"])
    with tempfile.TemporaryDirectory() as directory:
        directory = Path(directory)
        (directory / "certs").mkdir()
        certs = Certificates(directory / "certs")
        (directory / "run").mkdir()
        broker, ports = start_broker(binary, directory / "run", certs, "PLAINTEXT",
                                     {"SASL_SSL": "SASL_SSL"},
                                     {"sasl.enabled.mechanisms": "SCRAM-SHA-512"})
        try:
            plaintext = {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"}
            secure = sasl_ssl(ports["SASL_SSL"], certs, "bench", "bench-secret")
            admin = AdminClient(plaintext)
            upsertion = UserScramCredentialUpsertion(
                "bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bench-secret")
            for future in admin.alter_user_scram_credentials([upsertion]).values():
                future.result(30)
            results = {"PLAINTEXT": {"produce": [], "consume": []},
                       "SASL_SSL": {"produce": [], "consume": []}}
            for round_index in range(ROUNDS):
                for name, config in (("PLAINTEXT", plaintext), ("SASL_SSL", secure)):
                    topic = f"bench-{name.lower()}-{round_index}"
                    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
                        future.result(30)
                    results[name]["produce"].append(produce(config, topic))
                    results[name]["consume"].append(consume(config, topic))
                    print(f"round {round_index} {name}: produce "
                          f"{results[name]['produce'][-1]:,.0f} rec/s, consume "
                          f"{results[name]['consume'][-1]:,.0f} rec/s", flush=True)
            for kind in ("produce", "consume"):
                plain = statistics.median(results["PLAINTEXT"][kind])
                tls = statistics.median(results["SASL_SSL"][kind])
                print(f"{kind} 1 KiB records, median of {ROUNDS}: PLAINTEXT {plain:,.0f} rec/s "
                      f"({plain * 1024 / 1e6:,.1f} MB/s), SASL_SSL {tls:,.0f} rec/s "
                      f"({tls * 1024 / 1e6:,.1f} MB/s), ratio {tls / plain:.2f}")
            setups, plains = [], []
            for _ in range(CONNECTIONS):
                plains.append(plain_connect(ports["PLAINTEXT"]))
                setups.append(scram_connect(ports["SASL_SSL"], certs.ca, "bench", "bench-secret"))
            for name, values in (("PLAINTEXT connect+ApiVersions", plains),
                                 ("TLS+SCRAM-SHA-512 connect+ApiVersions+auth", setups)):
                values.sort()
                print(f"{name}: p50 {values[len(values) // 2] * 1000:.2f} ms, "
                      f"p90 {values[int(len(values) * 0.9)] * 1000:.2f} ms over {CONNECTIONS}")
        finally:
            broker.kill()


if __name__ == "__main__":
    main()
