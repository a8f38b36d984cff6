"""The TLS handshake in clear: hellos and certificate, read into what a connection row shows and
what the key log is looked up by."""

from __future__ import annotations

from struct import Struct
from typing import Any, Callable, Iterator

from .fingerprints import ja3, ja4
from .guess import CLIENT_HELLO
from .keys import TLS13
from .suites import SUITES

VERSIONS = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2", 0x0304: "TLS 1.3"}
SERVER_HELLO, CERTIFICATE, FINISHED, KEY_UPDATE = 2, 11, 20, 24  # (and CLIENT_HELLO, 1)
#: the random of a HelloRetryRequest (RFC 8446 4.1.3): not a ServerHello that settles the session
HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
MAX_HANDSHAKE_BUFFER = 1 << 18  # a certificate chain larger than this is not read
U24 = Struct("!I")


class Handshake:
    """What a TLS handshake says in clear (hellos, certificate): the negotiated version and suite,
    the randoms the key log is looked up by, server name, ALPN, the client's JA3 fingerprint, the
    certificate; ``notes`` for what could not be read. A TlsSession is a Handshake with the keys and
    the two directions' records."""

    keylog: Any  # the KeyLog (claimed by a ClientHello's random), or None
    client_dir: int | None
    on_client: Callable[[int], None] | None

    def __init__(self) -> None:
        self.client_random: bytes | None = None
        self.server_random: bytes | None = None
        self.version: int | None = None  # negotiated
        self.suite: int | None = None
        self.server_name: str | None = None
        self.alpn: list[str] | None = None
        self._cert: tuple[str, str, str] | None = None  # see cert
        self._cert_der: bytes | None = None  # the server certificate, until its names are asked for
        self.ja3: str | None = None  # the client's fingerprints (see fingerprints.py)
        self.ja4: str | None = None
        self.handshake_seen = False  # the ClientHello is in the capture
        self.notes: list[str] = []  # handshake facts that could not be read
        self.etm = False  # encrypt-then-MAC agreed (CBC suites)

    # -- what the handshake says ---------------------------------------------------------------
    @property
    def cert(self) -> tuple[str, str, str] | None:
        """The server certificate's subject, issuer and expiry (ISO date), read when first asked for
        (a connection's row, its detail): an exchanges read never needs them, and cryptography's x509
        parser takes 30 ms to import. A certificate that cannot be read is a note (see describe)."""
        der, self._cert_der = self._cert_der, None
        if der is not None:
            try:
                self._cert = _names(der)
            except Exception as e:  # noqa: BLE001 - capture bytes (and cryptography's parser) may raise anything
                self._note(f"certificate not read ({type(e).__name__})")
        return self._cert

    def _note(self, note: str) -> None:
        if note not in self.notes and len(self.notes) < 4:
            self.notes.append(note)

    @property
    def version_name(self) -> str | None:
        return VERSIONS.get(self.version) if self.version is not None else None

    @property
    def suite_name(self) -> str | None:
        if self.suite is None:
            return None
        return SUITES.get(self.suite, (f"0x{self.suite:04X}",))[0]

    def hello(self, d: int, msg_type: int, body: bytes) -> None:
        what = {CLIENT_HELLO: "ClientHello", SERVER_HELLO: "ServerHello", CERTIFICATE: "certificate"}[msg_type]
        try:
            if msg_type == CLIENT_HELLO:
                self._client_hello(d, body)
            elif msg_type == SERVER_HELLO:
                self._server_hello(body)
            elif msg_type == CERTIFICATE and self._cert is None and self._cert_der is None:
                # TLS 1.3 (decrypted): a request context first; TLS 1.2: in clear
                self._certificate(body[1 + body[0]:] if self.version == TLS13 else body)
        except Exception as e:  # noqa: BLE001 - capture bytes may raise anything
            self._note(f"{what} not read ({type(e).__name__})")

    def _client_hello(self, d: int, b: bytes) -> None:
        if self.client_dir is None:
            self.client_dir = d
            if self.on_client is not None:
                self.on_client(d)
        elif d != self.client_dir:  # a hello from the server's side describes no client (tshark: its port's)
            self._note("a ClientHello from the server's side, not read")
            return
        self.handshake_seen = True
        self.client_random = b[2:34]
        if self.keylog is not None:
            self.keylog.claim(self.client_random)
            self.keylog.shaken.add(self.client_random)
        pos = 34
        pos += 1 + b[pos]  # session id
        n = int.from_bytes(b[pos:pos + 2], "big")
        ciphers = [int.from_bytes(b[i:i + 2], "big") for i in range(pos + 2, pos + 2 + n - 1, 2)]
        pos += 2 + n
        pos += 1 + b[pos]  # compression methods
        types, groups, formats, sigalgs = [], [], [], []
        alpn: bytes | None = None
        offered: list[int] = []
        for ext, data in extensions(b, pos):
            types.append(ext)
            if ext == 0 and len(data) > 5 and data[2] == 0:  # server_name: host_name
                n = int.from_bytes(data[3:5], "big")
                self.server_name = data[5:5 + n].decode("ascii", "replace")
            elif ext == 16 and len(data) > 2:  # application_layer_protocol_negotiation
                names, i = [], 2
                while i < len(data):
                    n = data[i]
                    names.append(data[i + 1:i + 1 + n])
                    i += 1 + n
                self.alpn = [name.decode("ascii", "replace") for name in names]
                alpn = names[0] if names else None
            elif ext == 13 and len(data) >= 2:  # signature_algorithms
                end = 2 + int.from_bytes(data[:2], "big")
                sigalgs = [int.from_bytes(data[i:i + 2], "big") for i in range(2, min(end, len(data)) - 1, 2)]
            elif ext == 43 and data:  # supported_versions
                offered = [int.from_bytes(data[i:i + 2], "big") for i in range(1, 1 + data[0], 2)]
            elif ext == 10 and len(data) >= 2:  # supported_groups
                end = 2 + int.from_bytes(data[:2], "big")
                groups = [int.from_bytes(data[i:i + 2], "big") for i in range(2, end, 2)]
            elif ext == 11 and data:  # ec_point_formats
                formats = list(data[1:1 + data[0]])
        self.ja3 = ja3(int.from_bytes(b[0:2], "big"), ciphers, types, groups, formats)
        self.ja4 = ja4(int.from_bytes(b[0:2], "big"), ciphers, types, offered, alpn, sigalgs)

    def _server_hello(self, b: bytes) -> None:
        random = b[2:34]
        if random == HRR_RANDOM:
            return
        self.server_random = random
        self.version = int.from_bytes(b[0:2], "big")
        pos = 34
        pos += 1 + b[pos]
        suite = int.from_bytes(b[pos:pos + 2], "big")
        pos += 3
        for ext, data in extensions(b, pos):
            if ext == 43 and len(data) == 2:  # supported_versions: the version chosen
                self.version = int.from_bytes(data, "big")
            elif ext == 16 and len(data) > 3:  # ALPN chosen
                self.alpn = [data[3:3 + data[2]].decode("ascii", "replace")]
            elif ext == 22:  # encrypt_then_mac (RFC 7366): agreed for CBC suites
                self.etm = True
        self.suite = suite

    def _certificate(self, b: bytes) -> None:
        """The first certificate of the chain, kept to be read when asked for (cert)."""
        if len(b) < 6:
            return
        n = U24.unpack(b"\x00" + b[3:6])[0]
        self._cert_der = b[6:6 + n]


def _names(der: bytes) -> tuple[str, str, str]:
    """A DER certificate's subject, issuer (RFC 4514 strings) and expiry (ISO date)."""
    from cryptography import x509

    cert = x509.load_der_x509_certificate(der)
    return (cert.subject.rfc4514_string(), cert.issuer.rfc4514_string(), cert.not_valid_after_utc.date().isoformat())


def extensions(b: bytes, pos: int) -> Iterator[tuple[int, bytes]]:
    """The (type, data) of each extension of a hello whose extensions block starts at ``pos``."""
    if pos + 2 > len(b):
        return
    end = min(len(b), pos + 2 + int.from_bytes(b[pos:pos + 2], "big"))
    pos += 2
    while pos + 4 <= end:
        ext, n = int.from_bytes(b[pos:pos + 2], "big"), int.from_bytes(b[pos + 2:pos + 4], "big")
        yield ext, b[pos + 4:pos + 4 + n]
        pos += 4 + n
