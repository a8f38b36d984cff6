"""A connection's identity as other tools write it: the Community ID flow hash (version 1), which
Zeek, Suricata and Arkime put in their logs, so that kafkawire's rows join theirs.

The hash is SHA-1 over the seed (2 bytes), the two addresses and ports ordered so that the
smaller (address, port) comes first (both directions of a flow give the same id), the IP protocol
number and a zero byte, base64-encoded after ``1:``
(https://github.com/corelight/community-id-spec).
"""

from __future__ import annotations

from typing import Final

from librt.base64 import b64encode
from librt.strings import BytesWriter

from ..compiled import plain_hash

TCP: Final = 6
_SHA1: Final = plain_hash("sha1")(usedforsecurity=False)  # copied for each flow (no keywords to parse a call)


def community_id(a_ip: bytes, a_port: int, b_ip: bytes, b_port: int, proto: int = TCP, seed: int = 0) -> str:
    """The Community ID (v1) of a flow between two endpoints (addresses as their 4 or 16 bytes)."""
    if b_ip < a_ip or b_ip == a_ip and b_port < a_port:
        a_ip, a_port, b_ip, b_port = b_ip, b_port, a_ip, a_port
    # what the hash reads, big-endian: the seed, the addresses, the protocol, a zero byte, the ports
    m = BytesWriter()
    m.append(seed >> 8 & 0xFF)
    m.append(seed & 0xFF)
    m.write(a_ip)
    m.write(b_ip)
    m.append(proto)
    m.append(0)
    m.append(a_port >> 8 & 0xFF)
    m.append(a_port & 0xFF)
    m.append(b_port >> 8 & 0xFF)
    m.append(b_port & 0xFF)
    h = _SHA1.copy()
    h.update(m.getvalue())
    return "1:" + b64encode(h.digest()).decode()
