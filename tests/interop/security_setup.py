"""Certificates and secured brokers for the security interop tests.

Certificates are made by `openssl` in the test's temporary directory: a
test CA, a server certificate for 127.0.0.1/localhost, client certificates
(CN=admin and CN=client-1), a node certificate for brokers that connect
to each other (server and client usage, with `node-keystore.pem`) and a
second, untrusted CA with a client of its own. Nothing with a private key
is checked in.
"""
import subprocess
import tempfile
from pathlib import Path

from conftest import Broker, free_port


def _openssl(*args, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


class Certificates:
    def __init__(self, directory: Path):
        self.dir = directory
        self._ca("ca", "/CN=Strom Test CA")
        self._ca("rogue-ca", "/CN=Rogue CA")
        self._leaf("server", "/CN=localhost", "ca",
                   "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        for name, subject in [("admin", "/O=Strom/CN=admin"), ("client", "/O=Strom/CN=client-1")]:
            self._leaf(name, subject, "ca", "extendedKeyUsage=clientAuth\n")
        self._leaf("rogue", "/CN=admin", "rogue-ca", "extendedKeyUsage=clientAuth\n")
        self._leaf("node", "/CN=localhost", "ca",
                   "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                   "extendedKeyUsage=serverAuth,clientAuth\n")
        for name in ("server", "node"):
            keystore = (self.dir / f"{name}.pem").read_text() + (self.dir / f"{name}.key").read_text()
            (self.dir / f"{name}-keystore.pem").write_text(keystore)

    def _ca(self, name: str, subject: str) -> None:
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                 "-out", f"{name}.pem", "-days", "2", "-subj", subject, cwd=self.dir)

    def _leaf(self, name: str, subject: str, ca: str, extensions: str) -> None:
        (self.dir / f"{name}.ext").write_text("basicConstraints=CA:FALSE\n" + extensions)
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", "-subj", subject, cwd=self.dir)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", "2",
                 "-extfile", f"{name}.ext", cwd=self.dir)

    def path(self, name: str) -> str:
        return str(self.dir / name)

    @property
    def ca(self) -> str:
        return self.path("ca.pem")


def start_broker(binary: Path, tmp_path: Path, certs: Certificates, first: str, others: dict,
                 extra: dict) -> tuple:
    """A broker whose first listener (name `first`) is on `broker.port` and
    with one more listener per entry of `others` (name -> protocol);
    returns (broker, {listener name: port})."""
    base = Path(tempfile.mkdtemp(dir=tmp_path))
    data_dir = base / "data"
    data_dir.mkdir()
    broker = Broker(binary, data_dir, {})
    ports = {first: broker.port, **{name: free_port() for name in others}}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    broker.extra = {
        "listeners": listeners,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certs.path("server-keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certs.ca,
        **extra,
    }
    broker.start()
    return broker, ports


def sasl_ssl(port: int, certs: Certificates, user: str, password: str,
             mechanism: str = "SCRAM-SHA-512") -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": certs.ca,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def mtls(port: int, certs: Certificates, name: str) -> dict:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SSL",
        "ssl.ca.location": certs.ca,
        "ssl.certificate.location": certs.path(f"{name}.pem"),
        "ssl.key.location": certs.path(f"{name}.key"),
    }
