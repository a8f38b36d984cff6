"""A connection's identity as other tools write it: the Community ID flow hash (version 1), which
Zeek, Suricata and Arkime put in their logs, so that kafkawire's rows join theirs.

The hash is SHA-1 over the seed (2 bytes), the two addresses and ports ordered so that the
smaller (address, port) comes first (both directions of a flow give the same id), the IP protocol
number and a zero byte, base64-encoded after ``1:``
(https://github.com/corelight/community-id-spec).
"""

from __future__ import annotations

import base64
import hashlib
import struct

TCP = 6
_PORTS = struct.Struct("!HH")


def community_id(a_ip: bytes, a_port: int, b_ip: bytes, b_port: int, proto: int = TCP, seed: int = 0) -> str:
    """The Community ID (v1) of a flow between two endpoints (addresses as their 4 or 16 bytes)."""
    if (b_ip, b_port) < (a_ip, a_port):
        a_ip, a_port, b_ip, b_port = b_ip, b_port, a_ip, a_port
    data = seed.to_bytes(2, "big") + a_ip + b_ip + bytes((proto, 0)) + _PORTS.pack(a_port, b_port)
    return "1:" + base64.b64encode(hashlib.sha1(data, usedforsecurity=False).digest()).decode()
