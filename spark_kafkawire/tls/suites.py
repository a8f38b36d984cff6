"""The TLS cipher suites the decoder names and decrypts, as data: one typed record per suite (IANA
id -> name, record protection, cipher, key length, hash of the key schedule, AEAD or not, TLS 1.3
or not), the one source the record layer, the session and the security audit read."""

from __future__ import annotations

from typing import NamedTuple


class Suite(NamedTuple):
    """One cipher suite."""

    name: str  #: its IANA name
    protection: str | None  #: how its records are opened here: "gcm", "chacha", "cbc-<MAC hash>"; None: not decrypted
    cipher: str  #: the record cipher: "AES-128-GCM", "CHACHA20-POLY1305", "AES-256-CBC", ...
    key_len: int  #: the cipher key's length in bytes
    hash: str  #: the hash of the PRF (TLS 1.2) or HKDF (TLS 1.3)
    aead: bool  #: an AEAD cipher (GCM, ChaCha20-Poly1305, CCM): the records carry no separate MAC
    tls13: bool  #: one of TLS 1.3's suites (RFC 8446 B.4); every other is TLS 1.2's or older


def _S(name: str, protection: str | None, cipher: str, key_len: int, hash_name: str) -> Suite:
    return Suite(name, protection, cipher, key_len, hash_name, cipher.endswith(("-GCM", "-POLY1305", "-CCM", "-CCM8")),
                 False)


#: the suites TLS 1.3 defines (RFC 8446 B.4); every other suite is TLS 1.2's or older
TLS13_SUITES = frozenset({0x1301, 0x1302, 0x1303, 0x1304, 0x1305})
#: cipher suites by IANA id
SUITES: dict[int, Suite] = {k: v._replace(tls13=k in TLS13_SUITES) for k, v in {
    0x1301: _S("TLS_AES_128_GCM_SHA256", "gcm", "AES-128-GCM", 16, "sha256"),
    0x1302: _S("TLS_AES_256_GCM_SHA384", "gcm", "AES-256-GCM", 32, "sha384"),
    0x1303: _S("TLS_CHACHA20_POLY1305_SHA256", "chacha", "CHACHA20-POLY1305", 32, "sha256"),
    0xC02B: _S("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "gcm", "AES-128-GCM", 16, "sha256"),
    0xC02C: _S("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "gcm", "AES-256-GCM", 32, "sha384"),
    0xC02F: _S("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", "AES-128-GCM", 16, "sha256"),
    0xC030: _S("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", "AES-256-GCM", 32, "sha384"),
    0xCCA8: _S("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", "CHACHA20-POLY1305", 32, "sha256"),
    0xCCA9: _S("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", "CHACHA20-POLY1305", 32, "sha256"),
    0xCCAA: _S("TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", "CHACHA20-POLY1305", 32, "sha256"),
    0x009C: _S("TLS_RSA_WITH_AES_128_GCM_SHA256", "gcm", "AES-128-GCM", 16, "sha256"),
    0x009D: _S("TLS_RSA_WITH_AES_256_GCM_SHA384", "gcm", "AES-256-GCM", 32, "sha384"),
    0x009E: _S("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", "AES-128-GCM", 16, "sha256"),
    0x009F: _S("TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", "AES-256-GCM", 32, "sha384"),
    # AES-CBC with HMAC (TLS 1.1 and 1.2; encrypt-then-MAC where negotiated)
    0x002F: _S("TLS_RSA_WITH_AES_128_CBC_SHA", "cbc-sha1", "AES-128-CBC", 16, "sha256"),
    0x0035: _S("TLS_RSA_WITH_AES_256_CBC_SHA", "cbc-sha1", "AES-256-CBC", 32, "sha256"),
    0x003C: _S("TLS_RSA_WITH_AES_128_CBC_SHA256", "cbc-sha256", "AES-128-CBC", 16, "sha256"),
    0x003D: _S("TLS_RSA_WITH_AES_256_CBC_SHA256", "cbc-sha256", "AES-256-CBC", 32, "sha256"),
    0xC009: _S("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "cbc-sha1", "AES-128-CBC", 16, "sha256"),
    0xC00A: _S("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "cbc-sha1", "AES-256-CBC", 32, "sha256"),
    0xC013: _S("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "cbc-sha1", "AES-128-CBC", 16, "sha256"),
    0xC014: _S("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "cbc-sha1", "AES-256-CBC", 32, "sha256"),
    0xC023: _S("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "cbc-sha256", "AES-128-CBC", 16, "sha256"),
    0xC024: _S("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", "cbc-sha384", "AES-256-CBC", 32, "sha384"),
    0xC027: _S("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "cbc-sha256", "AES-128-CBC", 16, "sha256"),
    0xC028: _S("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", "cbc-sha384", "AES-256-CBC", 32, "sha384"),
    # named, not decrypted
    0x000A: _S("TLS_RSA_WITH_3DES_EDE_CBC_SHA", None, "3DES-EDE-CBC", 24, "sha256"),
    0x0005: _S("TLS_RSA_WITH_RC4_128_SHA", None, "RC4-128", 16, "sha256"),
    0x1304: _S("TLS_AES_128_CCM_SHA256", None, "AES-128-CCM", 16, "sha256"),
    0x1305: _S("TLS_AES_128_CCM_8_SHA256", None, "AES-128-CCM8", 16, "sha256"),
}.items()}
