"""TLS as the decoder sees it: recognising a connection that carries TLS records.

A TLS record starts with a content type (20-23), a protocol version 3.x and a length no larger
than a record may be. A connection whose first bytes in either direction are such a header is
encrypted: its frames are not Kafka's.
"""

from __future__ import annotations

from struct import Struct

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
