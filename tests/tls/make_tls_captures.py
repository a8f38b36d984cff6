"""Make the TLS test captures: kafka-python or aiokafka producing and consuming through a
TLS-terminating proxy in front of a real broker (Tansu), both hops captured by tcpdump in one file,
and the key log the client's own ssl.SSLContext wrote (keylog_filename).

    python tests/tls/make_tls_captures.py        (root: packet capture; tcpdump)

One capture per TLS setting (SETTINGS): TLS 1.3 with each of its three suites, TLS 1.2 with
AES-256-GCM, ChaCha20-Poly1305 and AES-128-CBC with HMAC-SHA256 (OpenSSL agrees encrypt-then-MAC),
and TLS 1.3 where the proxy's OpenSSL updates the keys of both directions during the connections
(KeyUpdate).
The clients connect to "localhost" (their SNI). The plaintext hop (proxy -> broker) carries the same Kafka frames as the
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

#: name -> (TLS version, TLS 1.2 suites (OpenSSL names), TLS 1.3 suite (IANA; None: OpenSSL's choice,
#: TLS_AES_256_GCM_SHA384), client software)
SETTINGS = {
    "tls13-aes256gcm": (ssl.TLSVersion.TLSv1_3, None, None, "kafka-python"),
    "tls13-aes128gcm": (ssl.TLSVersion.TLSv1_3, None, "TLS_AES_128_GCM_SHA256", "kafka-python"),
    "tls13-chacha20": (ssl.TLSVersion.TLSv1_3, None, "TLS_CHACHA20_POLY1305_SHA256", "aiokafka"),
    "tls12-aes256gcm": (ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-AES256-GCM-SHA384", None, "kafka-python"),
    "tls12-chacha20": (ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-CHACHA20-POLY1305", None, "aiokafka"),
    "tls12-aes128cbc-sha256": (ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-AES128-SHA256", None, "kafka-python"),
}
#: settings whose proxy asks for new TLS 1.3 keys (KeyUpdate, update_requested) every few answers
KEY_UPDATES = {"tls13-keyupdate": 1}
SETTINGS["tls13-keyupdate"] = (ssl.TLSVersion.TLSv1_3, None, None, "kafka-python")
#: the name the clients connect to (and send as SNI); the broker advertises the proxy under it
HOST = "localhost"
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


def key_update(sock: ssl.SSLSocket) -> None:
    """Make OpenSSL send a TLS 1.3 KeyUpdate asking the peer for one too (SSL_key_update with
    SSL_KEY_UPDATE_REQUESTED) with the next write. Python's ssl module has no call for it: the
    SSL pointer is read from CPython's _ssl._SSLSocket (PyObject_HEAD, the socket weakref, then
    SSL *), and libssl is the one _ssl is linked with (libssl.so.3)."""
    import ctypes

    libssl = ctypes.CDLL("libssl.so.3")
    libssl.SSL_key_update.argtypes = [ctypes.c_void_p, ctypes.c_int]
    ptr = ctypes.c_void_p.from_address(id(sock._sslobj) + 3 * ctypes.sizeof(ctypes.c_void_p)).value  # type: ignore
    assert libssl.SSL_key_update(ptr, 1) == 1, "SSL_key_update failed"


def tls_proxy(listen_port: int, broker_port: int, ctx: ssl.SSLContext, key_updates: int = 0) -> threading.Thread:
    """Accept TLS on listen_port, forward the plaintext to the broker, both ways; with key_updates,
    ask the client for new keys before every key_updates-th answer."""
    srv = socket.create_server(("127.0.0.1", listen_port))

    def pump(a, b):
        sent = 0
        try:
            while data := a.recv(65536):
                sent += 1
                if key_updates and isinstance(b, ssl.SSLSocket) and sent % key_updates == 0:
                    key_update(b)
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


def _kafka_python(name: str, common: dict, records: int, pad: bytes) -> tuple[int, int]:
    from kafka import KafkaConsumer, KafkaProducer

    p = KafkaProducer(client_id=f"tls-producer-{name}", api_version=(2, 5), **common)
    futs = [p.send(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode() + pad) for i in range(records)]
    p.flush(120)
    delivered = sum(1 for f in futs if f.succeeded())
    p.close(5)
    c = KafkaConsumer(TOPIC, client_id=f"tls-consumer-{name}", auto_offset_reset="earliest", consumer_timeout_ms=4000,
                      api_version=(2, 5), **common)
    consumed = 0
    for _ in c:
        consumed += 1
        if consumed >= records:
            break
    c.close()
    return delivered, consumed


def _aiokafka(name: str, common: dict, records: int, pad: bytes) -> tuple[int, int]:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def go() -> tuple[int, int]:
        p = AIOKafkaProducer(client_id=f"tls-producer-{name}", **common)
        await p.start()
        delivered = 0
        try:
            for i in range(records):
                await p.send_and_wait(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode() + pad)
                delivered += 1
        finally:
            await p.stop()
        c = AIOKafkaConsumer(TOPIC, client_id=f"tls-consumer-{name}", auto_offset_reset="earliest", **common)
        await c.start()
        consumed = 0
        try:
            while consumed < records:
                got = await c.getmany(timeout_ms=4000)
                if not got:
                    break
                consumed += sum(len(v) for v in got.values())
        finally:
            await c.stop()
        return delivered, consumed

    return asyncio.run(go())


def run(name: str, crt: Path, pem: Path, folder: Path = HERE, records: int = RECORDS, value_size: int = 0,
        buffer_kib: int | None = None) -> dict:
    version, ciphers, suite, software = SETTINGS[name]
    out = folder / f"{name}.pcap"
    keylog = folder / f"{name}.keylog"
    keylog.unlink(missing_ok=True)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(crt, pem)
    server.minimum_version = server.maximum_version = version
    if ciphers:
        server.set_ciphers(ciphers)
    client = ssl.create_default_context(cafile=str(crt))
    client.check_hostname = False  # the certificate names broker.test; the clients connect to localhost
    client.keylog_filename = str(keylog)
    broker_port, tls_port = free_port(), free_port()
    # the broker advertises the proxy's address: every connection the clients open goes through it
    broker = subprocess.Popen([tansu_binary(), "broker", "--listener-url", f"tcp://127.0.0.1:{broker_port}",
                               "--advertised-listener-url", f"tcp://{HOST}:{tls_port}", "--silent"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", broker_port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        proxy = tls_proxy(tls_port, broker_port, server, KEY_UPDATES.get(name, 0))
        with capture(out, [tls_port, broker_port], buffer_kib=buffer_kib):
            common = dict(bootstrap_servers=f"{HOST}:{tls_port}", security_protocol="SSL", ssl_context=client)
            clients = {"kafka-python": _kafka_python, "aiokafka": _aiokafka}
            delivered, consumed = clients[software](name, common, records, b"x" * value_size)
        proxy.srv.close()  # type: ignore[attr-defined]
    finally:
        broker.terminate()
        broker.wait(10)
    return {"tls_port": tls_port, "broker_port": broker_port, "version": version.name, "ciphers": ciphers,
            "tls13_suite": suite, "client": software, "server_name": HOST, "delivered": delivered,
            "consumed": consumed, "keylog": keylog.name}


def _openssl_conf(folder: Path, suite: str) -> Path:
    """An OpenSSL configuration that allows only this TLS 1.3 suite (Python's ssl module cannot set
    TLS 1.3 suites itself; OpenSSL reads OPENSSL_CONF when the process starts)."""
    conf = folder / f"{suite}.cnf"
    conf.write_text("openssl_conf = default_conf\n[default_conf]\nssl_conf = ssl_sect\n[ssl_sect]\n"
                    "system_default = system_default_sect\n[system_default_sect]\n"
                    f"Ciphersuites = {suite}\n")
    return conf


def bench_capture(folder: Path) -> dict:
    """The benchmark's TLS workload (make bench): 40,000 records of 1 KB produced and consumed over
    TLS 1.3, both hops captured: the TLS hop and its plaintext hop carry the same Kafka frames."""
    import tempfile

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        crt, pem = certificate(Path(tmp))
        # (a buffer large enough for the loopback's bursts: with tcpdump's default the two hops lost
        # different bytes, and the TLS hop was timed on more Kafka traffic than its plaintext hop)
        info = run("tls13-aes256gcm", crt, pem, folder, records=40_000, value_size=1000, buffer_kib=256 << 10)
    for suffix in ("pcap", "keylog"):
        (folder / f"tls13-aes256gcm.{suffix}").replace(folder / f"tls-bench.{suffix}")
    info["keylog"] = "tls-bench.keylog"
    (folder / "tls-bench.json").write_text(json.dumps(info) + "\n")
    return info


def main() -> None:
    """Each setting in a process of its own (TLS 1.3 suites are chosen by OPENSSL_CONF at start)."""
    import os
    import tempfile

    if sys.argv[1:2] == ["--one"]:
        name, crt, pem = sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
        print(json.dumps(run(name, crt, pem)))
        return
    names = sys.argv[1:] or list(SETTINGS)
    manifest = json.loads((HERE / "manifest.json").read_text()) if (HERE / "manifest.json").exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        crt, pem = certificate(Path(tmp))
        for name in names:
            suite = SETTINGS[name][2]
            env = {**os.environ, "OPENSSL_CONF": str(_openssl_conf(Path(tmp), suite))} if suite else None
            out = subprocess.run([sys.executable, __file__, "--one", name, str(crt), str(pem)], env=env,
                                 capture_output=True, text=True, check=True).stdout
            manifest[name] = json.loads(out.strip().splitlines()[-1])
            print(name, manifest[name], flush=True)
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
