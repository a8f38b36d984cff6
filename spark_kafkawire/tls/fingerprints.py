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

