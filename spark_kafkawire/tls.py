"""TLS as the decoder sees it: recognising a connection that carries TLS records.

A TLS record starts with a content type (20-23), a protocol version 3.x and a length no larger
than a record may be. A connection whose first bytes in either direction are such a header is
encrypted: its frames are not Kafka's.
"""

from __future__ import annotations

from struct import Struct
from typing import Callable, Iterator, Union

CONTENT_TYPES = {0x14: "TLS change_cipher_spec", 0x15: "TLS alert", 0x16: "TLS handshake",
                 0x17: "TLS application data"}
MAX_RECORD = 18432  # 2^14 plus the expansion TLS allows
RECORD_VERSIONS = {0: "SSL 3.0", 1: "TLS 1.0", 2: "TLS 1.1", 3: "TLS 1.2 or 1.3", 4: "TLS 1.3"}

_U16 = Struct("!H")


def record_header(chunk: bytes) -> str | None:
    """What a TLS record header at the start of ``chunk`` says (for a row's detail), or None when
    the bytes are not one."""
    if len(chunk) >= 5 and chunk[0] in CONTENT_TYPES and chunk[1] == 3 and chunk[2] in RECORD_VERSIONS and \
            _U16.unpack_from(chunk, 3)[0] <= MAX_RECORD:
        return f"{CONTENT_TYPES[chunk[0]]} record, {RECORD_VERSIONS[chunk[2]]}: the connection is encrypted"
    return None


# -- decryption ------------------------------------------------------------------------------------

VERSIONS = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2", 0x0304: "TLS 1.3"}
TLS13 = 0x0304

#: cipher suites: id -> (IANA name, protection ("gcm", "chacha", "cbc-<MAC hash>"; None: not decrypted
#: here), key length, hash of the PRF/HKDF)
SUITES: dict[int, tuple[str, str | None, int, str]] = {
    0x1301: ("TLS_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0x1302: ("TLS_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    0x1303: ("TLS_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
    0xC02B: ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0xC02C: ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    0xC02F: ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0xC030: ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    0xCCA8: ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
    0xCCA9: ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
    0xCCAA: ("TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, "sha256"),
    0x009C: ("TLS_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0x009D: ("TLS_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    0x009E: ("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, "sha256"),
    0x009F: ("TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, "sha384"),
    # AES-CBC with HMAC (TLS 1.1 and 1.2; encrypt-then-MAC where negotiated)
    0x002F: ("TLS_RSA_WITH_AES_128_CBC_SHA", "cbc-sha1", 16, "sha256"),
    0x0035: ("TLS_RSA_WITH_AES_256_CBC_SHA", "cbc-sha1", 32, "sha256"),
    0x003C: ("TLS_RSA_WITH_AES_128_CBC_SHA256", "cbc-sha256", 16, "sha256"),
    0x003D: ("TLS_RSA_WITH_AES_256_CBC_SHA256", "cbc-sha256", 32, "sha256"),
    0xC009: ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "cbc-sha1", 16, "sha256"),
    0xC00A: ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "cbc-sha1", 32, "sha256"),
    0xC013: ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "cbc-sha1", 16, "sha256"),
    0xC014: ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "cbc-sha1", 32, "sha256"),
    0xC023: ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "cbc-sha256", 16, "sha256"),
    0xC024: ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", "cbc-sha384", 32, "sha384"),
    0xC027: ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "cbc-sha256", 16, "sha256"),
    0xC028: ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", "cbc-sha384", 32, "sha384"),
    # named, not decrypted
    0x000A: ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", None, 24, "sha256"),
    0x0005: ("TLS_RSA_WITH_RC4_128_SHA", None, 16, "sha256"),
}
HANDSHAKE, CHANGE_CIPHER_SPEC, ALERT, APPLICATION_DATA = 22, 20, 21, 23
CLIENT_HELLO, SERVER_HELLO, CERTIFICATE, FINISHED, KEY_UPDATE = 1, 2, 11, 20, 24
#: the random of a HelloRetryRequest (RFC 8446 4.1.3): not a ServerHello that settles the session
HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
MAX_HANDSHAKE_BUFFER = 1 << 18  # a certificate chain larger than this is not read
RESYNC_RECORDS = 4096  # after a gap: record sequence numbers tried per candidate record
RESYNC_CANDIDATES = 8  # after a gap: record headers tried before giving the direction up
RESYNC_BUDGET = 1 << 16  # trial decryptions per connection, all gaps together
MIN_PROTECTED = 22  # the smallest protected record: header, tag and (TLS 1.3) the inner content type
TRIAL_RECORDS = 2048  # without the handshake: record sequence numbers tried (TLS 1.3), from 0
TRIAL_BUDGET = 200_000  # without the handshake: trial decryptions per connection

_U24 = Struct("!I")


def _hash(name: str):
    from cryptography.hazmat.primitives import hashes

    return hashes.SHA384() if name == "sha384" else hashes.SHA256()


def hkdf_expand_label(secret: bytes, label: bytes, length: int, hash_name: str) -> bytes:
    """TLS 1.3's HKDF-Expand-Label with an empty context (RFC 8446 7.1)."""
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + b"\x00"
    return HKDFExpand(_hash(hash_name), length, info).derive(secret)


def prf12(secret: bytes, label: bytes, seed: bytes, length: int, hash_name: str) -> bytes:
    """TLS 1.2's PRF, P_<hash>(secret, label + seed) (RFC 5246 5)."""
    import hashlib
    import hmac

    digest = hashlib.sha384 if hash_name == "sha384" else hashlib.sha256
    seed = label + seed
    out, a = b"", seed
    while len(out) < length:
        a = hmac.new(secret, a, digest).digest()
        out += hmac.new(secret, a + seed, digest).digest()
    return out[:length]


class RecordKeys:
    """One direction's record protection: an AEAD, its IV and the record sequence number."""

    __slots__ = ("aead", "iv", "seq", "tls13", "explicit", "overhead")

    def __init__(self, kind: str, key: bytes, iv: bytes, tls13: bool):
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

        self.aead = AESGCM(key) if kind == "gcm" else ChaCha20Poly1305(key)
        self.iv = iv
        self.seq = 0
        self.tls13 = tls13
        self.explicit = kind == "gcm" and not tls13  # TLS 1.2 GCM: 8 explicit nonce bytes per record
        #: bytes of a record that are not plaintext: header, tag, explicit nonce or inner content type
        self.overhead = 5 + 16 + (8 if self.explicit else 1 if tls13 else 0)

    def open(self, header: bytes, payload: bytes, seq: int) -> bytes | None:
        """The record's plaintext (TLS 1.3: its inner plaintext), or None where its tag does not
        verify with this sequence number."""
        from cryptography.exceptions import InvalidTag

        try:
            if self.explicit:
                if len(payload) < 24:
                    return None
                nonce, ct = self.iv + payload[:8], payload[8:]
                aad = seq.to_bytes(8, "big") + header[:3] + (len(ct) - 16).to_bytes(2, "big")
                return self.aead.decrypt(nonce, ct, aad)
            if len(payload) < 16:
                return None
            nonce = (int.from_bytes(self.iv, "big") ^ seq).to_bytes(12, "big")
            aad = header if self.tls13 else seq.to_bytes(8, "big") + header[:3] + (len(payload) - 16).to_bytes(2, "big")
            return self.aead.decrypt(nonce, payload, aad)
        except InvalidTag:
            return None


class CbcKeys:
    """One direction's record protection with AES-CBC and HMAC (TLS 1.1 and 1.2: an explicit IV
    per record; MAC-then-encrypt, or encrypt-then-MAC where RFC 7366's extension was agreed)."""

    __slots__ = ("key", "mac_key", "digest", "mac_len", "etm", "seq", "tls13", "overhead")

    def __init__(self, key: bytes, mac_key: bytes, digest: str, etm: bool):
        import hashlib

        self.key = key
        self.mac_key = mac_key
        self.digest = getattr(hashlib, digest)
        self.mac_len = self.digest().digest_size
        self.etm = etm
        self.seq = 0
        self.tls13 = False
        self.overhead = 5 + 16 + self.mac_len + 1  # header, IV, MAC, the least padding

    def _mac(self, seq: int, header: bytes, data: bytes) -> bytes:
        import hmac

        return hmac.new(self.mac_key, seq.to_bytes(8, "big") + header[:3] + len(data).to_bytes(2, "big") + data,
                        self.digest).digest()

    def open(self, header: bytes, payload: bytes, seq: int) -> bytes | None:
        import hmac

        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        if self.etm:
            body, tag = payload[:-self.mac_len], payload[-self.mac_len:]
            if len(body) < 32 or len(body) % 16 or not hmac.compare_digest(self._mac(seq, header, body), tag):
                return None
            payload = body
        elif len(payload) < 32 or len(payload) % 16:
            return None
        dec = Cipher(algorithms.AES(self.key), modes.CBC(payload[:16])).decryptor()
        plain = dec.update(payload[16:]) + dec.finalize()
        pad = plain[-1]
        if pad + 1 > len(plain) or plain[-pad - 1:] != bytes([pad]) * (pad + 1):
            return None
        plain = plain[:-pad - 1]
        if self.etm:
            return plain
        if len(plain) < self.mac_len:
            return None
        data, tag = plain[:-self.mac_len], plain[-self.mac_len:]
        return data if hmac.compare_digest(self._mac(seq, header, data), tag) else None


Keys = Union[RecordKeys, CbcKeys]


class TlsSession:
    """One TLS connection: what its handshake says in clear, and, with its secrets from a key log,
    its two byte streams decrypted into the Kafka framers (``outputs``, by direction).

    Counts: ``decrypted`` (bytes of application data handed on), ``undecrypted`` (record bytes
    that could not be, with ``problem`` saying why)."""

    def __init__(self, keylog, outputs: list, client_dir: int | None, on_client: Callable[[int], None] | None = None):
        self.keylog = keylog
        self.outputs = outputs
        self.client_dir = client_dir
        self.on_client = on_client
        self.dirs = [TlsDirection(self, 0), TlsDirection(self, 1)]
        self.client_random: bytes | None = None
        self.server_random: bytes | None = None
        self.version: int | None = None  # negotiated
        self.suite: int | None = None
        self.server_name: str | None = None
        self.alpn: list[str] | None = None
        self.offered_versions: list[int] = []
        self.cert: tuple[str, str, str] | None = None  # subject, issuer, not after (ISO date)
        self.ja3: str | None = None  # the client's fingerprint (see ja3)
        self.handshake_seen = False  # the ClientHello is in the capture
        self.decrypted = 0
        self.undecrypted = 0
        self.problem: str | None = None
        self._secrets: dict[str, bytes] | None = None
        self._key_block: bytes | None = None
        self.trials = 0  # trial decryptions after gaps so far (at most RESYNC_BUDGET)
        self.trialled = False  # decrypted without its handshake (see trial)
        self.etm = False  # encrypt-then-MAC agreed (CBC suites)

    def release(self) -> None:
        """The connection has ended: drop the links to the directions, the framers and the
        listener (the directions link back here), so that no reference cycle is left."""
        self.dirs = []
        self.outputs = []
        self.on_client = None

    # -- what the handshake says ---------------------------------------------------------------
    @property
    def version_name(self) -> str | None:
        return VERSIONS.get(self.version) if self.version is not None else None

    @property
    def suite_name(self) -> str | None:
        if self.suite is None:
            return None
        return SUITES.get(self.suite, (f"0x{self.suite:04X}",))[0]

    def describe(self) -> str:
        """A row's detail: the negotiated version and suite, server name, ALPN, and what became of
        the encrypted bytes."""
        from .escape import printable

        parts = [self.version_name or "TLS (version not captured)"]
        if self.suite is not None:
            parts.append(str(self.suite_name))
        if self.server_name:
            parts.append(f"server name {printable(self.server_name)}")
        if self.alpn:
            parts.append("ALPN " + ",".join(printable(a) for a in self.alpn))
        if self.decrypted and not self.undecrypted:
            state = f"decrypted ({self.decrypted} bytes)"
        elif self.decrypted:
            state = f"{self.decrypted} bytes decrypted, {self.undecrypted} not: {self.problem}"
        else:
            state = f"encrypted, not decrypted: {self.problem or 'no key log given (option tlsKeyLog)'}"
        return ", ".join(parts) + ": " + state

    def fail(self, nbytes: int, why: str) -> None:
        self.undecrypted += nbytes
        if self.problem is None:
            self.problem = why

    def _hello(self, d: int, msg_type: int, body: bytes) -> None:
        try:
            if msg_type == CLIENT_HELLO:
                self._client_hello(d, body)
            elif msg_type == SERVER_HELLO:
                self._server_hello(body)
            elif msg_type == CERTIFICATE and self.cert is None:
                # TLS 1.3 (decrypted): a request context first; TLS 1.2: in clear
                self._certificate(body[1 + body[0]:] if self.version == TLS13 else body)
        except (IndexError, ValueError, UnicodeDecodeError):
            pass  # a handshake message that does not parse: its facts stay unknown

    def _client_hello(self, d: int, b: bytes) -> None:
        self.handshake_seen = True
        if self.client_dir is None:
            self.client_dir = d
            if self.on_client is not None:
                self.on_client(d)
        self.client_random = b[2:34]
        if self.keylog is not None:
            self.keylog.claimed.add(self.client_random)
        pos = 34
        pos += 1 + b[pos]  # session id
        n = int.from_bytes(b[pos:pos + 2], "big")
        ciphers = [int.from_bytes(b[i:i + 2], "big") for i in range(pos + 2, pos + 2 + n - 1, 2)]
        pos += 2 + n
        pos += 1 + b[pos]  # compression methods
        types, groups, formats = [], [], []
        for ext, data in _extensions(b, pos):
            types.append(ext)
            if ext == 0 and len(data) > 5 and data[2] == 0:  # server_name: host_name
                n = int.from_bytes(data[3:5], "big")
                self.server_name = data[5:5 + n].decode("ascii", "replace")
            elif ext == 16 and len(data) > 2:  # application_layer_protocol_negotiation
                names, i = [], 2
                while i < len(data):
                    n = data[i]
                    names.append(data[i + 1:i + 1 + n].decode("ascii", "replace"))
                    i += 1 + n
                self.alpn = names
            elif ext == 43 and data:  # supported_versions
                self.offered_versions = [int.from_bytes(data[i:i + 2], "big") for i in range(1, 1 + data[0], 2)]
            elif ext == 10 and len(data) >= 2:  # supported_groups
                end = 2 + int.from_bytes(data[:2], "big")
                groups = [int.from_bytes(data[i:i + 2], "big") for i in range(2, end, 2)]
            elif ext == 11 and data:  # ec_point_formats
                formats = list(data[1:1 + data[0]])
        self.ja3 = ja3(int.from_bytes(b[0:2], "big"), ciphers, types, groups, formats)

    def _server_hello(self, b: bytes) -> None:
        random = b[2:34]
        if random == HRR_RANDOM:
            return
        self.server_random = random
        self.version = int.from_bytes(b[0:2], "big")
        pos = 34
        pos += 1 + b[pos]
        self.suite = int.from_bytes(b[pos:pos + 2], "big")
        pos += 3
        for ext, data in _extensions(b, pos):
            if ext == 43 and len(data) == 2:  # supported_versions: the version chosen
                self.version = int.from_bytes(data, "big")
            elif ext == 16 and len(data) > 3:  # ALPN chosen
                self.alpn = [data[3:3 + data[2]].decode("ascii", "replace")]
            elif ext == 22:  # encrypt_then_mac (RFC 7366): agreed for CBC suites
                self.etm = True

    def _certificate(self, b: bytes) -> None:
        from cryptography import x509

        if len(b) < 6:
            return
        n = _U24.unpack(b"\x00" + b[3:6])[0]
        der = b[6:6 + n]
        cert = x509.load_der_x509_certificate(der)
        self.cert = (cert.subject.rfc4514_string(), cert.issuer.rfc4514_string(),
                     cert.not_valid_after_utc.date().isoformat())

    # -- keys ----------------------------------------------------------------------------------
    def trial(self, d: int, header: bytes, payload: bytes) -> RecordKeys | None:
        """A connection whose handshake is not in the capture (a rotated file, a capture started
        late): its first complete protected record is tried with the TLS 1.3 application secrets
        of the key log's sessions that no handshake in this file claimed, every suite, both sides,
        record sequence numbers 0 to TRIAL_RECORDS (at most TRIAL_BUDGET decryptions). Keys that
        verify it are this direction's; the session's version and suite become known."""
        if self.keylog is None:
            self.problem = self.problem or "no key log given (option tlsKeyLog)"
            return None
        work = 0
        for random, secrets in reversed(self.keylog.unclaimed()):
            for label in ("CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"):
                secret = secrets.get(label)
                if secret is None:
                    continue
                for suite in (0x1301, 0x1302, 0x1303):
                    _name, kind, key_len, hash_name = SUITES[suite]
                    if len(secret) != (48 if hash_name == "sha384" else 32):
                        continue
                    keys = RecordKeys(kind, hkdf_expand_label(secret, b"key", key_len, hash_name),  # type: ignore[arg-type]
                                      hkdf_expand_label(secret, b"iv", 12, hash_name), True)
                    for seq in range(min(TRIAL_RECORDS, TRIAL_BUDGET - work)):
                        if keys.open(header, payload, seq) is not None:
                            keys.seq = seq
                            self.version, self.suite, self.client_random = TLS13, suite, random
                            self.keylog.claimed.add(random)
                            if self.client_dir is None:
                                self.client_dir = d if label.startswith("CLIENT") else 1 - d
                                if self.on_client is not None:
                                    self.on_client(self.client_dir)
                            self.trialled = True
                            return keys
                    work += TRIAL_RECORDS
                    if work >= TRIAL_BUDGET:
                        self.problem = self.problem or "the handshake is not in the capture, and no secret of the " \
                            "key log verified its records within the trial budget"
                        return None
        self.problem = self.problem or "the handshake is not in the capture, and no unclaimed secret of the key " \
            "log verified its records"
        return None


    def secrets(self) -> dict[str, bytes] | None:
        if self._secrets is None and self.keylog is not None and self.client_random is not None:
            self._secrets = self.keylog.secrets(self.client_random)
        return self._secrets

    def keys(self, d: int, label: str | None) -> Keys | None:
        """The record keys of direction d: TLS 1.3 from the key log's traffic secret ``label``, TLS
        1.2 from the master secret. None where they are not known (the problem says why)."""
        if self.suite is None or self.version is None:
            self.problem = self.problem or "the handshake is not in the capture"
            return None
        name, kind, key_len, hash_name = SUITES.get(self.suite, (f"0x{self.suite:04X}", None, 0, "sha256"))
        if kind is None:
            self.problem = self.problem or f"cipher suite {name} is not decrypted"
            return None
        if self.keylog is None:
            self.problem = self.problem or "no key log given (option tlsKeyLog)"
            return None
        secrets = self.secrets()
        if self.version == TLS13:
            secret = secrets.get(label) if secrets and label else None
            if secret is None:
                self.problem = self.problem or "the key log has no secret for this session"
                return None
            return RecordKeys(kind, hkdf_expand_label(secret, b"key", key_len, hash_name),
                              hkdf_expand_label(secret, b"iv", 12, hash_name), True)
        master = secrets.get("CLIENT_RANDOM") if secrets else None
        if master is None or self.server_random is None or self.client_random is None:
            self.problem = self.problem or "the key log has no secret for this session"
            return None
        cbc = kind.startswith("cbc")
        if cbc and self.version not in (0x0302, 0x0303):
            self.problem = self.problem or f"{name} under {self.version_name} is not decrypted (under TLS 1.1 and " \
                "1.2 it is)"
            return None
        # the key block: client and server MAC keys (CBC) or keys, then client and server keys (CBC)
        # or IVs (RFC 5246 6.3)
        first, second = ({"sha1": 20, "sha256": 32, "sha384": 48}[kind[4:]], key_len) if cbc else \
            (key_len, 4 if kind == "gcm" else 12)
        if self._key_block is None:
            self._key_block = prf12(master, b"key expansion", self.server_random + self.client_random,
                                    2 * (first + second), hash_name)
        kb = self._key_block
        at = 0 if d == self.client_dir else 1
        one = kb[at * first:(at + 1) * first]
        two = kb[2 * first + at * second:2 * first + (at + 1) * second]
        return CbcKeys(two, one, kind[4:], self.etm) if cbc else RecordKeys(kind, one, two, False)


def _grease(v: int) -> bool:
    """RFC 8701's GREASE values (0x0a0a, 0x1a1a, ... 0xfafa): left out of fingerprints."""
    return v & 0x0F0F == 0x0A0A and v >> 8 == v & 0xFF


def ja3(version: int, ciphers: list[int], extensions: list[int], groups: list[int], formats: list[int]) -> str:
    """The JA3 fingerprint of a ClientHello: MD5 of its version, cipher suites, extension types,
    supported groups and point formats in the order sent, GREASE values left out. It names a
    client's TLS stack (a JVM's, librdkafka's OpenSSL, Python's), not the client."""
    import hashlib

    def join(values: list[int]) -> str:
        return "-".join(str(v) for v in values if not _grease(v))

    text = ",".join([str(version), join(ciphers), join(extensions), join(groups), join(formats)])
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def _extensions(b: bytes, pos: int) -> Iterator[tuple[int, bytes]]:
    if pos + 2 > len(b):
        return
    end = min(len(b), pos + 2 + int.from_bytes(b[pos:pos + 2], "big"))
    pos += 2
    while pos + 4 <= end:
        ext, n = int.from_bytes(b[pos:pos + 2], "big"), int.from_bytes(b[pos + 2:pos + 4], "big")
        yield ext, b[pos + 4:pos + 4 + n]
        pos += 4 + n


class TlsDirection:
    """The sink of one TCP direction of a TLS connection (in place of its framer): TLS records in,
    the decrypted application data out to the direction's Kafka framer."""

    __slots__ = ("session", "d", "buf", "rec_ts", "rec_num", "keys", "encrypted", "hs", "lost", "tried", "phase",
                 "missing")

    def __init__(self, session: TlsSession, d: int):
        self.session = session
        self.d = d
        self.buf = bytearray()
        self.rec_ts = 0
        self.rec_num = 0
        self.keys: Keys | None = None
        self.encrypted = False  # records from here on are protected
        self.hs = bytearray()  # handshake messages being put together
        self.lost = False  # a gap: record boundaries unknown until a record verifies again
        self.tried = 0  # record headers tried since the gap
        self.phase = "handshake"  # TLS 1.3: which traffic secret protects this direction's records
        self.missing = 0  # bytes lost since the last record that verified (they bound the records lost)

    @property
    def out(self):
        return self.session.outputs[self.d]

    # -- sink interface ------------------------------------------------------------------------
    def start(self) -> None:
        pass

    def data(self, chunk: bytes, ts: int, number: int) -> None:
        if not self.buf:
            self.rec_ts, self.rec_num = ts, number
        self.buf += chunk
        if self.lost:
            self._resync(ts, number)
        buf = self.buf
        pos = 0
        while len(buf) - pos >= 5:
            ctype, n = buf[pos], _U16.unpack_from(buf, pos + 3)[0]
            if ctype not in CONTENT_TYPES or buf[pos + 1] != 3 or n > MAX_RECORD:
                self.session.fail(len(buf) - pos, "bytes that are not TLS records")
                self.lost = True
                del buf[:pos]
                self._resync(ts, number)
                buf = self.buf
                pos = 0
                continue
            if len(buf) - pos < 5 + n:
                break
            header = bytes(buf[pos:pos + 5])
            payload = bytes(buf[pos + 5:pos + 5 + n])
            pos += 5 + n
            self._record(header, payload, self.rec_ts, self.rec_num)
            self.rec_ts, self.rec_num = ts, number
        if pos:
            del buf[:pos]

    def gap(self, nbytes: int, ts: int, number: int) -> None:
        """Bytes the capture lost. The Kafka framer is told how many plaintext bytes they held once
        decryption resumes (the records lost are known then: see _resync), so that a frame they
        cut is passed over exactly rather than scanned for."""
        self.session.fail(nbytes + len(self.buf), "a gap in the capture")
        self.missing += nbytes + len(self.buf)
        self.buf.clear()
        if not self.lost and (self.keys is None or not self.encrypted):
            self.out.gap(nbytes, ts, number)  # nothing to resume: the framer hears of it now
        self.lost = True
        self.tried = 0

    def late(self, nbytes: int, reported: int, ts: int, number: int) -> None:
        pass  # copies of bytes a gap already reported

    def end(self) -> None:
        if self.lost and self.keys is not None and self.encrypted:  # a gap decryption never resumed after
            self.out.gap(self.missing, self.rec_ts, self.rec_num)
        if self.buf:
            self.session.fail(len(self.buf), "the capture ends inside a record")
            self.buf.clear()
        self.out.end()

    # -- records -------------------------------------------------------------------------------
    def _record(self, header: bytes, payload: bytes, ts: int, number: int) -> None:
        s = self.session
        ctype = header[0]
        if not self.encrypted:
            if ctype == HANDSHAKE:
                self._handshake(payload, ts, number)
                return
            if ctype == CHANGE_CIPHER_SPEC:
                if s.version != TLS13:  # TLS 1.2: protected from the next record on
                    self.encrypted = True
                    self.keys = s.keys(self.d, None)
                return
            if ctype == ALERT:
                return
            self.encrypted = True
            if s.handshake_seen:  # TLS 1.3: the handshake traffic secret
                self.keys = s.keys(self.d, self._label())
            else:  # no handshake in the capture: the other direction may have found the session
                self.phase = "application"
                self.keys = self._sequenced(header, payload) if s.trialled else s.trial(self.d, header, payload)
        if self.keys is None:
            s.fail(len(payload), s.problem or "no keys")
            return
        plain = self.keys.open(header, payload, self.keys.seq)
        if plain is None:
            s.fail(len(payload), "a record's tag does not verify")
            return
        self.keys.seq += 1
        self._plaintext(ctype, plain, ts, number)

    def _plaintext(self, ctype: int, plain: bytes, ts: int, number: int) -> None:
        if self.keys is not None and self.keys.tls13:  # the inner content type ends the zero padding
            end = len(plain.rstrip(b"\x00"))
            if not end:
                return
            ctype, plain = plain[end - 1], plain[:end - 1]
        if ctype == APPLICATION_DATA:
            self.session.decrypted += len(plain)
            if plain:
                self.out.data(plain, ts, number)
        elif ctype == HANDSHAKE:
            self._handshake(plain, ts, number)

    def _sequenced(self, header: bytes, payload: bytes) -> Keys | None:
        """This direction's keys, once the other direction's trial found the session (see
        TlsSession.trial), with the sequence number that verifies this record."""
        keys = self.session.keys(self.d, self._label())
        if keys is not None:
            for seq in range(TRIAL_RECORDS):
                if keys.open(header, payload, seq) is not None:
                    keys.seq = seq
                    return keys
            self.session.problem = self.session.problem or "no record sequence number verified (trial)"
        return None

    def _label(self) -> str:
        side = "CLIENT" if self.d == self.session.client_dir else "SERVER"
        return f"{side}_HANDSHAKE_TRAFFIC_SECRET" if self.phase == "handshake" else f"{side}_TRAFFIC_SECRET_0"

    def _handshake(self, data: bytes, ts: int, number: int) -> None:
        hs = self.hs
        hs += data
        pos = 0
        while len(hs) - pos >= 4:
            n = _U24.unpack(b"\x00" + hs[pos + 1:pos + 4])[0]
            if len(hs) - pos < 4 + n:
                break
            msg_type, body = hs[pos], bytes(hs[pos + 4:pos + 4 + n])
            pos += 4 + n
            self._message(msg_type, body)
        del hs[:pos]
        if len(hs) > MAX_HANDSHAKE_BUFFER:
            hs.clear()

    def _message(self, msg_type: int, body: bytes) -> None:
        s = self.session
        if msg_type in (CLIENT_HELLO, SERVER_HELLO, CERTIFICATE):
            s._hello(self.d, msg_type, body)
            if msg_type == CLIENT_HELLO and s.handshake_seen:
                self.out.start()  # the application data starts with a Kafka frame
                s.outputs[1 - self.d].start()
            return
        if self.keys is None or not self.keys.tls13:
            return
        if msg_type == FINISHED and self.phase == "handshake":
            self.phase = "application"
            self.keys = s.keys(self.d, self._label())
        elif msg_type == KEY_UPDATE:
            self._key_update()

    def _key_update(self) -> None:
        """TLS 1.3 KeyUpdate: the next traffic secret, derived from the current one (RFC 8446 7.2)."""
        s = self.session
        secrets = s.secrets()
        label = self._label()
        if not secrets or label not in secrets or s.suite not in SUITES:
            self.keys = None
            return
        _name, kind, key_len, hash_name = SUITES[s.suite]
        nxt = hkdf_expand_label(secrets[label], b"traffic upd", len(secrets[label]), hash_name)
        secrets[label] = nxt
        self.keys = RecordKeys(kind, hkdf_expand_label(nxt, b"key", key_len, hash_name),  # type: ignore[arg-type]
                               hkdf_expand_label(nxt, b"iv", 12, hash_name), True)

    def _align(self) -> None:
        """A stream that starts inside a record (a rotated capture): records start at the first
        header whose record is followed by another header (or ends where the bytes end)."""
        buf = self.buf
        pos = 0
        while True:
            pos = buf.find(b"\x17\x03\x03", pos)
            if pos < 0 or len(buf) - pos < 5:
                keep = max(0, len(buf) - 4) if pos < 0 else pos
                self.session.fail(keep, "bytes before the first whole record")
                del buf[:keep]
                return
            end = pos + 5 + _U16.unpack_from(buf, pos + 3)[0]
            if end - pos - 5 <= MAX_RECORD and (end == len(buf) or (
                    end + 5 <= len(buf) and buf[end] in CONTENT_TYPES and buf[end + 1] == 3)):
                self.session.fail(pos, "bytes before the first whole record")
                del buf[:pos]
                self.lost = False
                return
            if end > len(buf) and end - pos - 5 <= MAX_RECORD:
                del buf[:pos]  # wait for the rest of the candidate record
                return
            pos += 1

    def _resync(self, ts: int, number: int) -> None:
        """After a gap: find the next record whose tag verifies, and go on from there. The bytes
        lost bound the records lost (at least one per MAX_RECORD bytes, at most one per
        MIN_PROTECTED): those sequence numbers are tried, fewest lost records first (at most
        RESYNC_RECORDS per candidate header, RESYNC_CANDIDATES headers per gap, RESYNC_BUDGET per
        connection). Bytes passed over are counted as not decrypted."""
        keys = self.keys
        buf = self.buf
        s = self.session
        if keys is None and not self.encrypted and not s.handshake_seen and s.keylog is not None:
            self._align()
            return
        if keys is None or not self.encrypted:
            self.session.fail(len(buf), self.session.problem or "a gap in the capture before the keys were known")
            buf.clear()
            return
        pos = 0
        while self.tried < RESYNC_CANDIDATES:
            pos = buf.find(b"\x17\x03\x03", pos)
            if pos < 0 or len(buf) - pos < 5:
                break
            n = _U16.unpack_from(buf, pos + 3)[0]
            if n > MAX_RECORD:
                pos += 1
                continue
            if len(buf) - pos < 5 + n:
                return  # wait for the whole candidate record
            self.tried += 1
            header, payload = bytes(buf[pos:pos + 5]), bytes(buf[pos + 5:pos + 5 + n])
            lost = self.missing + pos
            first = keys.seq + lost // (MAX_RECORD + 5)
            last = keys.seq + lost // MIN_PROTECTED + 1
            tries = max(0, min(RESYNC_RECORDS, RESYNC_BUDGET - self.session.trials, last - first + 1))
            self.session.trials += tries
            for seq in range(first, first + tries):
                if keys.open(header, payload, seq) is not None:
                    self.session.fail(pos, "a gap in the capture")
                    del buf[:pos]
                    # the plaintext lost: every byte lost, less each lost record's overhead
                    self.out.gap(max(0, lost - (seq - keys.seq) * keys.overhead), ts, number)
                    keys.seq = seq
                    self.lost = False
                    self.tried = 0
                    self.missing = 0
                    return
            pos += 1
        if self.tried >= RESYNC_CANDIDATES or self.session.trials >= RESYNC_BUDGET:
            # give up on this direction: its bytes are counted, not read
            self.keys = None
            self.session.problem = self.session.problem or "no record verified after a gap"
            self.out.gap(self.missing, ts, number)
        keep = max(0, len(buf) - 4)
        self.session.fail(keep, "a gap in the capture")
        self.missing += keep
        del buf[:keep]
