"""Three Strom broker processes that replicate over SASL_SSL
(SCRAM-SHA-512, `ssl.client.auth=required`) and run their quorum over an
SSL controller listener, or a SASL_SSL one with PLAIN and the users of its
JAAS entry, configured as docs/security.md shows, with
confluent-kafka (librdkafka) as the client: the brokers' SCRAM user is
created after start-up through an operator listener, then an acks=all
producer writes over the SASL_SSL listener with a client certificate and
every replica's log gets the records with the ISR at three. The controller
listener answers a TLS handshake only with a client certificate."""
import socket
import ssl
import time

import pytest

from confluent_kafka import Producer
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

import clusterwire as cw
from cluster import Cluster, free_ports
from security_setup import Certificates

TOPIC = "secured-replication"
BROKER_PASSWORD = "broker-secret"
RECORDS = 200


def controller_sasl() -> dict:
    """SASL PLAIN on the controller listener: each node logs in as
    `controller` and accepts the users of the same JAAS entry."""
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="controller" password="controller-secret" '
            'user_controller="controller-secret";')
    return {
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": jaas,
    }


def secured_cluster(strom_binary, tmp_path, certs: Certificates, controller_protocol: str) -> tuple:
    """The cluster (not started) and each node's INTERNAL port."""
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="broker" password="{BROKER_PASSWORD}";')
    extra = controller_sasl() if controller_protocol == "SASL_SSL" else {}
    cluster = Cluster(strom_binary, tmp_path / "cluster", nodes=3, extra={
        **extra,
        "listener.security.protocol.map":
            f"PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:{controller_protocol}",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certs.path("node-keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certs.ca,
        "listener.name.internal.ssl.client.auth": "required",
        "listener.name.controller.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": jaas,
        "strom.authorizer.enable": "true",
        # The PLAINTEXT listener is the operator's, on loopback.
        "super.users": "User:ANONYMOUS;User:broker",
        "replica.lag.time.max.ms": "3000",
    })
    internal = dict(zip((node.node_id for node in cluster.nodes), free_ports(3)))
    for node in cluster.nodes:
        node.extra = {
            "listeners": (f"PLAINTEXT://127.0.0.1:{node.port},"
                          f"INTERNAL://127.0.0.1:{internal[node.node_id]},"
                          f"CONTROLLER://127.0.0.1:{node.controller_port}"),
            "advertised.listeners": (f"PLAINTEXT://127.0.0.1:{node.port},"
                                     f"INTERNAL://127.0.0.1:{internal[node.node_id]}"),
        }
    return cluster, internal


def log_sizes(cluster: Cluster) -> list:
    sizes = []
    for node in cluster.nodes:
        segment = node.data_dir / f"{TOPIC}-0" / "00000000000000000000.log"
        sizes.append(segment.stat().st_size if segment.exists() else 0)
    return sizes


def isrs(cluster: Cluster) -> list:
    views = [cw.metadata(node.port, [TOPIC]).topics.get(TOPIC) for node in cluster.nodes]
    return [sorted(view.partitions[0].isr) if view and 0 in view.partitions else None
            for view in views]


@pytest.mark.parametrize("controller_protocol", ["SSL", "SASL_SSL"])
def test_brokers_replicate_over_sasl_ssl_with_a_secured_controller_listener(
        strom_binary, tmp_path, controller_protocol):
    certs_dir = tmp_path / "certs"
    certs_dir.mkdir()
    certs = Certificates(certs_dir)
    cluster, internal = secured_cluster(strom_binary, tmp_path, certs, controller_protocol)
    try:
        # Registration and the quorum run over the secured controller listener.
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.nodes[0].bootstrap})
        upsertion = UserScramCredentialUpsertion(
            "broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
            BROKER_PASSWORD.encode())
        for future in admin.alter_user_scram_credentials([upsertion]).values():
            future.result(timeout=30)
        topic = NewTopic(TOPIC, num_partitions=1, replication_factor=3,
                         config={"min.insync.replicas": "2"})
        admin.create_topics([topic])[TOPIC].result(timeout=30)

        producer = Producer({
            "bootstrap.servers": f"127.0.0.1:{internal[1]}",
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": certs.ca,
            "ssl.certificate.location": certs.path("node.pem"),
            "ssl.key.location": certs.path("node.key"),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "broker",
            "sasl.password": BROKER_PASSWORD,
            "acks": "all",
        })
        failures = []
        for index in range(RECORDS):
            producer.produce(TOPIC, f"record-{index}".encode(), partition=0,
                             on_delivery=lambda error, _: error and failures.append(error))
        assert producer.flush(30) == 0
        assert failures == []

        cluster.wait_until(lambda: len(set(log_sizes(cluster))) == 1 and log_sizes(cluster)[0] > 0,
                           30, "every replica's log holds the same records")
        cluster.wait_until(lambda: isrs(cluster) == [[1, 2, 3]] * 3, 30, "the ISR is all three")
        time.sleep(1)
        assert isrs(cluster) == [[1, 2, 3]] * 3, "the ISR stays at three"

        # The controller listener speaks TLS and wants a client certificate.
        context = ssl.create_default_context(cafile=certs.ca)
        context.load_cert_chain(certs.path("node.pem"), certs.path("node.key"))
        port = cluster.nodes[0].controller_port
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as secured:
                assert secured.version() in ("TLSv1.2", "TLSv1.3")
                assert dict(x[0] for x in secured.getpeercert()["subject"])["commonName"] == "localhost"
    finally:
        cluster.kill_all()
