"""TLS with a certificate made here: curl, Python's InfluxDB client and
grpcio, each verifying it, write and read through a server started with
`--tls-cert`/`--tls-key` (the `[tls]` file keys are the Rust test's); a client that does not trust the certificate is refused by its own
TLS.
"""

import datetime
import ipaddress
import pathlib
import subprocess
import tempfile

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS

from conftest import start_server, stop_server
from test_grpc import pb  # noqa: F401  (the generated modules, a fixture)

TOKEN = "tls-secret"


def make_certificate(directory):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture(scope="module")
def tls_server():
    directory = pathlib.Path(tempfile.mkdtemp(prefix="chingest-tls-"))
    cert, key = make_certificate(directory)
    # Ready when curl, which trusts the certificate it is given, gets /ready.
    proc, where = start_server(
        directory / "data", "--tls-cert", str(cert), "--tls-key", str(key), "--auth-token", TOKEN,
        base="https://localhost",
        ready=lambda url: subprocess.run(["curl", "-sf", "--cacert", str(cert), f"{url}/ready"],
                                         capture_output=True).returncode == 0)
    yield {**where, "cert": cert}
    stop_server(proc)


def curl(*args):
    return subprocess.run(["curl", "-s", *args], capture_output=True, text=True)


def test_curl_verifies_the_certificate(tls_server):
    url, cert = tls_server["url"], str(tls_server["cert"])
    auth = ["-H", f"Authorization: Token {TOKEN}"]
    written = curl("--cacert", cert, *auth, "-o", "/dev/null", "-w", "%{http_code}",
                   "--data-binary", "m,via=curl v=1i 1", f"{url}/write?db=py_tls")
    assert written.stdout == "204", written
    read = curl("--cacert", cert, *auth, "--data-binary",
                "SELECT count() FROM py_tls.m WHERE via = 'curl'", f"{url}/sql?format=TSV")
    assert read.stdout == "1\n", read
    untrusted = curl(f"{url}/ping")
    assert untrusted.returncode == 60, untrusted  # curl: peer certificate cannot be verified


def test_influxdb_client_verifies_the_certificate(tls_server):
    with InfluxDBClient(url=tls_server["url"], token=TOKEN, org="-",
                        ssl_ca_cert=str(tls_server["cert"])) as client:
        client.write_api(write_options=SYNCHRONOUS).write(
            bucket="py_tls", record="m,via=influxdb v=2i 2")
    read = curl("--cacert", str(tls_server["cert"]), "-H", f"Authorization: Token {TOKEN}",
                "--data-binary", "SELECT v FROM py_tls.m WHERE via = 'influxdb'",
                f"{tls_server['url']}/sql?format=TSV")
    assert read.stdout == "2\n", read


def test_grpcio_verifies_the_certificate(tls_server, pb):  # noqa: F811
    messages, stubs = pb
    credentials = grpc.ssl_channel_credentials(tls_server["cert"].read_bytes())
    with grpc.secure_channel(tls_server["grpc"], credentials) as channel:
        reply = stubs.IngestStub(channel).Write(
            messages.WriteRequest(database="py_tls", line_protocol=b"m,via=grpc v=3i 3\n"),
            metadata=(("authorization", f"Token {TOKEN}"),))
        assert reply.accepted == 1
    untrusting = grpc.ssl_channel_credentials()
    with grpc.secure_channel(tls_server["grpc"], untrusting) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            stubs.IngestStub(channel).Write(messages.WriteRequest(database="py_tls"),
                                            timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_clickhouse_connect_verifies_the_certificate(tls_server):
    import clickhouse_connect
    from clickhouse_connect.driver.exceptions import OperationalError
    client = clickhouse_connect.get_client(
        host="localhost", port=tls_server["clickhouse_port"], interface="https",
        username="default", password=TOKEN, ca_cert=str(tls_server["cert"]))
    assert client.command("SELECT 1") == 1
    with pytest.raises(OperationalError):
        clickhouse_connect.get_client(
            host="localhost", port=tls_server["clickhouse_port"], interface="https",
            username="default", password=TOKEN, query_retries=0)
