"""TLS certificate reload without restart: when the keystore file changes,
new connections get the new certificate, and Kafka clients keep working.
"""
import shutil
import socket
import ssl
import time

import pytest

from security_setup import Certificates, start_broker
from test_security import create_topics, produce

pytestmark = pytest.mark.timeout(120)


def served_certificate(port: int) -> bytes:
    """The DER certificate a new TLS connection gets."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw) as tls:
            return tls.getpeercert(binary_form=True)


def der(pem_path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(open(pem_path).read())


def test_a_changed_keystore_is_served_to_new_connections(strom_binary, tmp_path):
    (tmp_path / "certs").mkdir()
    certs = Certificates(tmp_path / "certs")
    certs._leaf("server2", "/CN=localhost", "ca",
                "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    keystore = tmp_path / "keystore.pem"
    shutil.copy(certs.path("server-keystore.pem"), keystore)
    broker, ports = start_broker(strom_binary, tmp_path, certs, "SSL", {},
                                 {"ssl.keystore.location": str(keystore)})
    try:
        port = ports["SSL"]
        config = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                  "ssl.ca.location": certs.ca}
        assert served_certificate(port) == der(certs.path("server.pem"))
        create_topics(config, "reloaded")
        assert produce(config, "reloaded", [b"before"]) == [None]

        # Replace the keystore (written aside, then renamed, as tools do).
        staged = tmp_path / "keystore.new"
        staged.write_text(open(certs.path("server2.pem")).read()
                          + open(certs.path("server2.key")).read())
        staged.replace(keystore)
        new = der(certs.path("server2.pem"))
        deadline = time.monotonic() + 15
        while served_certificate(port) != new:
            assert time.monotonic() < deadline, "the new certificate is never served"
            time.sleep(0.3)
        assert produce(config, "reloaded", [b"after"]) == [None]

        # A broken keystore leaves the last good certificate in use.
        keystore.write_text("not a PEM file\n")
        time.sleep(2.5)
        assert served_certificate(port) == new
        assert broker.process.poll() is None
        assert "TLS certificate reloaded" in broker.log_text()
    finally:
        broker.kill()
