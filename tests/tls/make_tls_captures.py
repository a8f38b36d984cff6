"""Make the TLS test captures: kafka-python producing and consuming through a TLS-terminating proxy
in front of a real broker (Tansu), both hops captured by tcpdump in one file, and the key log the
client's own ssl.SSLContext wrote (keylog_filename).

    python tests/tls/make_tls_captures.py        (root: packet capture; tcpdump)

One capture per TLS setting: TLS 1.3 (OpenSSL chooses TLS_AES_256_GCM_SHA384), TLS 1.2 with
AES-256-GCM, TLS 1.2 with ChaCha20-Poly1305 and TLS 1.2 with AES-128-CBC and HMAC-SHA256 (OpenSSL
agrees encrypt-then-MAC). The plaintext hop (proxy -> broker) carries the same Kafka frames as the
TLS hop (client -> proxy): the independent reference the tests compare the decrypted rows with.
The certificate is made here, self-signed, for "broker.test"; make one setting again with its name
as the argument.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "sample_pcaps"))

from make_samples import capture, free_port, tansu_binary  # noqa: E402

SETTINGS = {
    "tls13-aes256gcm": (ssl.TLSVersion.TLSv1_3, None),
    "tls12-aes256gcm": (ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-AES256-GCM-SHA384"),
    "tls12-chacha20": (ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-CHACHA20-POLY1305"),
    "tls12-aes128cbc-sha256": (ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-AES128-SHA256"),
}
TOPIC = "secure-orders"
RECORDS = 7


def certificate(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "broker.test"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkawire tests")])
    now = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(20261124).not_valid_before(now).not_valid_after(now + dt.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("broker.test")]), critical=False)
            .sign(key, hashes.SHA256()))
    crt, pem = folder / "proxy.crt", folder / "proxy.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                      serialization.NoEncryption()))
    return crt, pem


def tls_proxy(listen_port: int, broker_port: int, ctx: ssl.SSLContext) -> threading.Thread:
    """Accept TLS on listen_port, forward the plaintext to the broker, both ways."""
    srv = socket.create_server(("127.0.0.1", listen_port))

    def pump(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve():
        while True:
            try:
                raw, _ = srv.accept()
            except OSError:
                return
            try:
                client = ctx.wrap_socket(raw, server_side=True)
            except (OSError, ssl.SSLError):
                raw.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", broker_port))
            threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pump, args=(upstream, client), daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.srv = srv  # type: ignore[attr-defined]
    t.start()
    return t


def run(name: str, version: ssl.TLSVersion, ciphers: str | None, crt: Path, pem: Path, folder: Path = HERE,
        records: int = RECORDS, value_size: int = 0) -> dict:
    from kafka import KafkaConsumer, KafkaProducer

    out = folder / f"{name}.pcap"
    keylog = folder / f"{name}.keylog"
    keylog.unlink(missing_ok=True)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(crt, pem)
    server.minimum_version = server.maximum_version = version
    if ciphers:
        server.set_ciphers(ciphers)
    client = ssl.create_default_context(cafile=str(crt))
    client.check_hostname = False  # the proxy listens on 127.0.0.1; the name is broker.test
    client.keylog_filename = str(keylog)
    broker_port, tls_port = free_port(), free_port()
    # the broker advertises the proxy's address: every connection the clients open goes through it
    broker = subprocess.Popen([tansu_binary(), "broker", "--listener-url", f"tcp://127.0.0.1:{broker_port}",
                               "--advertised-listener-url", f"tcp://127.0.0.1:{tls_port}", "--silent"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", broker_port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        proxy = tls_proxy(tls_port, broker_port, server)
        with capture(out, [tls_port, broker_port]):
            common = dict(bootstrap_servers=f"127.0.0.1:{tls_port}", security_protocol="SSL", ssl_context=client,
                          api_version=(2, 5))
            p = KafkaProducer(client_id=f"tls-producer-{name}", **common)
            pad = b"x" * value_size
            futs = [p.send(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode() + pad) for i in range(records)]
            p.flush(120)
            delivered = sum(1 for f in futs if f.succeeded())
            p.close(5)
            c = KafkaConsumer(TOPIC, client_id=f"tls-consumer-{name}", auto_offset_reset="earliest",
                              consumer_timeout_ms=4000, **common)
            consumed = 0
            for _ in c:
                consumed += 1
                if consumed >= records:
                    break
            c.close()
        proxy.srv.close()  # type: ignore[attr-defined]
    finally:
        broker.terminate()
        broker.wait(10)
    return {"tls_port": tls_port, "broker_port": broker_port, "version": version.name, "ciphers": ciphers,
            "delivered": delivered, "consumed": consumed, "keylog": keylog.name}


def bench_capture(folder: Path) -> dict:
    """The benchmark's TLS workload (make bench): 40,000 records of 1 KB produced and consumed over
    TLS 1.3, both hops captured: the TLS hop and its plaintext hop carry the same Kafka frames."""
    import tempfile

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        crt, pem = certificate(Path(tmp))
        info = run("tls-bench", ssl.TLSVersion.TLSv1_3, None, crt, pem, folder, records=40_000, value_size=1000)
    (folder / "tls-bench.json").write_text(json.dumps(info) + "\n")
    return info


def main() -> None:
    import tempfile

    names = sys.argv[1:] or list(SETTINGS)
    manifest = json.loads((HERE / "manifest.json").read_text()) if (HERE / "manifest.json").exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        crt, pem = certificate(Path(tmp))
        manifest.update({name: run(name, *SETTINGS[name], crt, pem) for name in names})
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    print(json.dumps(manifest, indent=2))


if __name__ == "__main__":
    main()
