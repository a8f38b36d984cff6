"""A connection's identity as other tools write it: the Community ID flow hash (version 1), which
Zeek, Suricata and Arkime put in their logs, so that kafkawire's rows join theirs.

The hash is SHA-1 over the seed (2 bytes), the two addresses and ports ordered so that the
smaller (address, port) comes first (both directions of a flow give the same id), the IP protocol
number and a zero byte, base64-encoded after ``1:``
(https://github.com/corelight/community-id-spec).
"""

from __future__ import annotations

from binascii import b2a_base64
from hashlib import sha1

TCP = 6


def community_id(a_ip: bytes, a_port: int, b_ip: bytes, b_port: int, proto: int = TCP, seed: int = 0) -> str:
    """The Community ID (v1) of a flow between two endpoints (addresses as their 4 or 16 bytes)."""
    if b_ip < a_ip or b_ip == a_ip and b_port < a_port:
        a_ip, a_port, b_ip, b_port = b_ip, b_port, a_ip, a_port
    data = b"".join((seed.to_bytes(2, "big"), a_ip, b_ip, bytes((proto, 0, a_port >> 8, a_port & 0xFF, b_port >> 8,
                                                                   b_port & 0xFF))))
    return "1:" + b2a_base64(sha1(data, usedforsecurity=False).digest(), newline=False).decode()
