"""TLS record protection: key derivation (TLS 1.3's HKDF-Expand-Label, TLS 1.2's
PRF) and the record ciphers (AES-GCM, ChaCha20-Poly1305, AES-CBC with HMAC), from ``cryptography``;
the suites themselves are suites.py's.

Nothing here keeps or shows a secret beyond the key objects it makes: the record layer (direction.py) asks
for keys and opens records with them.
"""

from __future__ import annotations

from struct import Struct
from typing import Union, Final

from .suites import SUITES, TLS13_SUITES

TLS13: Final = 0x0304
#: a record's payload: bytes, or a view of the bytes it was read from (not copied to be opened)
Payload = Union[bytes, memoryview]
#: the last byte of a TLS 1.3 record's inner plaintext: its content type, or zero padding
_INNER_LAST = frozenset({0, 21, 22, 23})
_SEQ = Struct("!Q")
#: _inner_marks's tables, per last byte of a record
_MARKS: dict[int, bytes] = {}


def _inner_marks(byte: int) -> bytes:
    """A translation table: key stream byte k -> 1 where byte ^ k is in _INNER_LAST, else 0."""
    table = _MARKS.get(byte)
    if table is None:
        table = _MARKS[byte] = bytes(1 if byte ^ k in _INNER_LAST else 0 for k in range(256))
    return table


def _hash(name: str):
    from cryptography.hazmat.primitives import hashes

    return hashes.SHA384() if name == "sha384" else hashes.SHA256()


def suite_fits(suite: int, version: int | None) -> bool:
    """Can a session of this version use this suite? (TLS 1.3 only its own, TLS13_SUITES; earlier
    versions none of them.)"""
    return (suite in TLS13_SUITES) == (version == TLS13)


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


def tls13_keys(secret: bytes, suite: int) -> "RecordKeys | None":
    """A TLS 1.3 traffic secret's record keys under one of TLS 1.3's suites, or None where the
    secret's length is not that suite's hash's."""
    s = SUITES[suite]
    if not s.tls13 or s.protection is None or len(secret) != (48 if s.hash == "sha384" else 32):
        return None
    return RecordKeys(s.protection, hkdf_expand_label(secret, b"key", s.key_len, s.hash),
                      hkdf_expand_label(secret, b"iv", 12, s.hash), True)


def next_secret(secret: bytes, suite: int) -> bytes:
    """TLS 1.3 KeyUpdate: the next traffic secret (RFC 8446 7.2)."""
    return hkdf_expand_label(secret, b"traffic upd", len(secret), SUITES[suite].hash)


class RecordKeys:
    """One direction's record protection: an AEAD, its IV and the record sequence number."""

    __slots__ = ("aead", "kind", "key", "iv", "iv_int", "seq", "tls13", "explicit", "overhead", "invalid")

    def __init__(self, kind: str, key: bytes, iv: bytes, tls13: bool):
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

        self.aead = AESGCM(key) if kind == "gcm" else ChaCha20Poly1305(key)
        self.invalid = InvalidTag  # (imported here once, not at every record)
        self.kind = kind
        self.key = key
        self.iv = iv
        self.iv_int = int.from_bytes(iv, "big")  # the TLS 1.3 and ChaCha nonce: the IV xor the sequence number
        self.seq = 0
        self.tls13 = tls13
        self.explicit = kind == "gcm" and not tls13  # TLS 1.2 GCM: 8 explicit nonce bytes per record
        #: bytes of a record that are not plaintext: header, tag, explicit nonce or inner content type
        self.overhead = 5 + 16 + (8 if self.explicit else 1 if tls13 else 0)

    def open(self, header: bytes, payload: Payload, seq: int) -> bytes | None:
        """The record's plaintext (TLS 1.3: its inner plaintext), or None where its tag does not
        verify with this sequence number."""
        try:
            if self.explicit:
                if len(payload) < 24:
                    return None
                nonce, ct = self.iv + payload[:8], payload[8:]
                aad = _SEQ.pack(seq) + header[:3] + (len(ct) - 16).to_bytes(2, "big")
                return self.aead.decrypt(nonce, ct, aad)
            if len(payload) < 16:
                return None
            nonce = (self.iv_int ^ seq).to_bytes(12, "big")
            aad = header if self.tls13 else _SEQ.pack(seq) + header[:3] + (len(payload) - 16).to_bytes(2, "big")
            return self.aead.decrypt(nonce, payload, aad)
        except (self.invalid, ValueError, OverflowError):
            return None

    def find(self, header: bytes, payload: Payload, first: int, count: int) -> int | None:
        """The sequence number in [first, first + count) under which a TLS 1.3 record verifies, or
        None. With AES-GCM the candidates are narrowed first by the record's last plaintext byte
        (its inner content type, or zero padding), which one AES block per candidate gives
        (counter mode): about 1 in 64 candidates is then opened in full."""
        if count <= 0:
            return None
        if self.kind != "gcm" or not self.tls13 or count < 8 or len(payload) <= 16:
            for seq in range(first, first + count):
                if self.open(header, payload, seq) is not None:
                    return seq
            return None
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        last = len(payload) - 17  # the last plaintext byte
        counter = (last // 16 + 2).to_bytes(4, "big")
        iv = self.iv_int
        blocks = b"".join([(iv ^ seq).to_bytes(12, "big") + counter for seq in range(first, first + count)])
        stream = Cipher(algorithms.AES(self.key), modes.ECB()).encryptor().update(blocks)
        # each candidate's key stream byte for the last plaintext byte, marked where it decrypts that
        # byte to an inner content type or padding
        marks = stream[last % 16::16].translate(_inner_marks(payload[last]))
        i = marks.find(1)
        while i >= 0:
            if self.open(header, payload, first + i) is not None:
                return first + i
            i = marks.find(1, i + 1)
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

    def _mac(self, seq: int, header: bytes, data: Payload) -> bytes:
        import hmac

        return hmac.new(self.mac_key, _SEQ.pack(seq) + header[:3] + len(data).to_bytes(2, "big") + data,
                        self.digest).digest()

    def open(self, header: bytes, payload: Payload, seq: int) -> bytes | None:
        import hmac

        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        if not 0 <= seq < 1 << 64:
            return None
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

    def find(self, header: bytes, payload: Payload, first: int, count: int) -> int | None:
        for seq in range(first, first + max(0, count)):
            if self.open(header, payload, seq) is not None:
                return seq
        return None


Keys = Union[RecordKeys, CbcKeys]


def tls12_keys(suite: int, version: int, master: bytes, server_random: bytes, client_random: bytes,
               client: bool, etm: bool) -> Keys:
    """A TLS 1.1/1.2 direction's record keys from the master secret (RFC 5246 6.3: the key block
    holds client and server MAC keys (CBC) or keys, then client and server keys (CBC) or IVs).
    Raises ValueError where the suite is not decrypted here or does not fit the version."""
    s = SUITES[suite]
    name, kind, key_len, hash_name = s.name, s.protection, s.key_len, s.hash
    if kind is None:
        raise ValueError(f"cipher suite {name} is not decrypted")
    cbc = kind.startswith("cbc")
    if cbc and version not in (0x0302, 0x0303):
        raise ValueError(f"{name} is decrypted under TLS 1.1 and 1.2 only")
    first, second = ({"sha1": 20, "sha256": 32, "sha384": 48}[kind[4:]], key_len) if cbc else \
        (key_len, 4 if kind == "gcm" else 12)
    kb = prf12(master, b"key expansion", server_random + client_random, 2 * (first + second), hash_name)
    at = 0 if client else 1
    one = kb[at * first:(at + 1) * first]
    two = kb[2 * first + at * second:2 * first + (at + 1) * second]
    return CbcKeys(two, one, kind[4:], etm) if cbc else RecordKeys(kind, one, two, False)
