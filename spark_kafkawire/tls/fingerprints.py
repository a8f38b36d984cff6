"""TLS fingerprints: what a ClientHello says of the client's TLS stack."""

from __future__ import annotations

import hashlib


def _grease(v: int) -> bool:
    """RFC 8701's GREASE values (0x0a0a, 0x1a1a, ... 0xfafa): left out of fingerprints."""
    return v & 0x0F0F == 0x0A0A and v >> 8 == v & 0xFF


def ja3(version: int, ciphers: list[int], extensions: list[int], groups: list[int], formats: list[int]) -> str:
    """The JA3 fingerprint of a ClientHello: MD5 of its version, cipher suites, extension types,
    supported groups and point formats in the order sent, GREASE values left out. It names a
    client's TLS stack (a JVM's, librdkafka's OpenSSL, Python's), not the client."""
    def join(values: list[int]) -> str:
        return "-".join(str(v) for v in values if not _grease(v))

    text = ",".join([str(version), join(ciphers), join(extensions), join(groups), join(formats)])
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()



#: JA4's two characters for a TLS version ("00": any other)
_JA4_VERSIONS = {0x0304: "13", 0x0303: "12", 0x0302: "11", 0x0301: "10", 0x0300: "s3", 0x0002: "s2",
                 0xFEFF: "d1", 0xFEFD: "d2", 0xFEFC: "d3"}
SERVER_NAME, ALPN = 0x0000, 0x0010


def ja4(version: int, ciphers: list[int], extensions: list[int], supported_versions: list[int],
        alpn: bytes | None, signature_algorithms: list[int]) -> str:
    """The JA4 fingerprint of a ClientHello over TCP (FoxIO's JA4, BSD-licensed spec): ``t``, the
    highest version offered (supported_versions, else the hello's own), ``d``/``i`` for a server
    name or none, the counts of cipher suites and extensions, the first and last characters of the
    first ALPN value; then the first 12 hex digits of SHA-256 over the cipher suites sorted, and
    over the extensions sorted (server name and ALPN left out) followed by the signature
    algorithms in the order sent. GREASE values are left out everywhere. Like JA3 it names a TLS
    stack; unlike JA3 it does not change when a client shuffles its extensions."""
    ciphers = [c for c in ciphers if not _grease(c)]
    extensions = [e for e in extensions if not _grease(e)]
    offered = [v for v in supported_versions if not _grease(v)]
    tls = _JA4_VERSIONS.get(max(offered) if offered else version, "00")
    a = (f"t{tls}{'d' if SERVER_NAME in extensions else 'i'}{min(len(ciphers), 99):02d}"
         f"{min(len(extensions), 99):02d}{_alpn_chars(alpn)}")
    b = _hash12(",".join(f"{c:04x}" for c in sorted(ciphers))) if ciphers else "000000000000"
    kept = ",".join(f"{e:04x}" for e in sorted(extensions) if e not in (SERVER_NAME, ALPN))
    sigs = ",".join(f"{s:04x}" for s in signature_algorithms if not _grease(s))
    c = _hash12(f"{kept}_{sigs}" if sigs else kept) if kept else "000000000000"
    return f"{a}_{b}_{c}"


def _alpn_chars(value: bytes | None) -> str:
    """The first and last characters of the first ALPN value, or of its hex where either is not an
    ASCII letter or digit; ``00`` for none."""
    if not value:
        return "00"
    first, last = value[0], value[-1]
    if chr(first).isascii() and chr(first).isalnum() and chr(last).isascii() and chr(last).isalnum():
        return chr(first) + chr(last)
    text = value.hex()
    return text[0] + text[-1]


def _hash12(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]
