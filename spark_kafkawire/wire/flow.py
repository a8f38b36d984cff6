"""A connection's identity as other tools write it: the Community ID flow hash (version 1), which
Zeek, Suricata and Arkime put in their logs, so that kafkawire's rows join theirs.

The hash is SHA-1 over the seed (2 bytes), the two addresses and ports ordered so that the
smaller (address, port) comes first (both directions of a flow give the same id), the IP protocol
number and a zero byte, base64-encoded after ``1:``
(https://github.com/corelight/community-id-spec).
"""

from __future__ import annotations

from struct import Struct
from typing import Final

from librt.base64 import b64encode

from ..compiled import plain_hash

TCP = 6
#: the seed, and the protocol, a zero byte and the two ports, as the hash reads them (big-endian)
_SEED: Final = Struct("!H")
_TAIL: Final = Struct("!BBHH")
_SHA1: Final = plain_hash("sha1")(usedforsecurity=False)  # copied for each flow (no keywords to parse a call)


def community_id(a_ip: bytes, a_port: int, b_ip: bytes, b_port: int, proto: int = TCP, seed: int = 0) -> str:
    """The Community ID (v1) of a flow between two endpoints (addresses as their 4 or 16 bytes)."""
    if b_ip < a_ip or b_ip == a_ip and b_port < a_port:
        a_ip, a_port, b_ip, b_port = b_ip, b_port, a_ip, a_port
    h = _SHA1.copy()
    h.update(b"".join((_SEED.pack(seed), a_ip, b_ip, _TAIL.pack(proto, 0, a_port, b_port))))
    return "1:" + b64encode(h.digest()).decode()
