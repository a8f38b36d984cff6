"""Record data (the ``records`` fields of Produce and Fetch) -> batch metadata.

Magic 2 record batches and magic 0/1 message sets are walked by their headers: offsets, record
counts, timestamps, codec, producer id/epoch, transactional and control flags, and a CRC check
(CRC-32C over bytes 21.. for magic 2, CRC-32 over the message for magic 0/1). A mismatch is
reported in the batch, never fatal. Payload bytes never leave this module.

A Fetch response may end with a partial batch (the broker cuts at the fetch size): it is reported
with ``"Truncated": true``.
"""

from __future__ import annotations

import zlib
from struct import Struct

try:
    from crc32c import crc32c as _crc32c
except ImportError:  # pragma: no cover - crc32c is a dependency
    _crc32c = None

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_V2 = Struct("!qiibIhiqqqhii")  # baseOffset .. recordsCount (61 bytes)
_V01 = Struct("!qiIbb")  # offset, size, crc, magic, attributes
_I64 = Struct("!q")
_I32 = Struct("!i")


def summarize(data: bytes) -> list[dict]:
    out: list[dict] = []
    pos, n = 0, len(data)
    while pos < n:
        if n - pos < 17:
            out.append({"Truncated": True, "Length": n - pos})
            break
        magic = data[pos + 16]
        if magic == 2:
            if n - pos < 61:
                out.append({"Truncated": True, "Length": n - pos, "Magic": 2})
                break
            (base, blen, epoch, _m, crc, attrs, last_delta, first_ts, max_ts, pid, pepoch, bseq,
             count) = _V2.unpack_from(data, pos)
            size = 12 + blen
            batch = {
                "BaseOffset": base, "Length": size, "Magic": 2, "PartitionLeaderEpoch": epoch,
                "Crc": crc, "Codec": _codec(attrs), "TimestampType": "LogAppendTime" if attrs & 8 else "CreateTime",
                "Transactional": bool(attrs & 16), "Control": bool(attrs & 32),
                "LastOffsetDelta": last_delta, "BaseTimestamp": first_ts, "MaxTimestamp": max_ts,
                "ProducerId": pid, "ProducerEpoch": pepoch, "BaseSequence": bseq, "RecordCount": count,
            }
            if blen < 49 or size > n - pos:
                batch["Truncated"] = True
                batch["Length"] = n - pos
                out.append(batch)
                break
            if _crc32c is not None:
                batch["CrcValid"] = _crc32c(data[pos + 21 : pos + size]) == crc
            out.append(batch)
            pos += size
        elif magic in (0, 1):
            off, msize, crc, _m, attrs = _V01.unpack_from(data, pos)
            size = 12 + msize
            batch = {"BaseOffset": off, "Length": size, "Magic": magic, "Crc": crc, "Codec": _codec(attrs),
                     "RecordCount": 1}
            if magic == 1 and n - pos >= 30:
                batch["BaseTimestamp"] = _I64.unpack_from(data, pos + 18)[0]
                batch["TimestampType"] = "LogAppendTime" if attrs & 8 else "CreateTime"
            if msize < 14 or size > n - pos:
                batch["Truncated"] = True
                batch["Length"] = n - pos
                out.append(batch)
                break
            batch["CrcValid"] = zlib.crc32(data[pos + 16 : pos + size]) == crc
            out.append(batch)
            pos += size
        else:
            out.append({"Unknown": True, "Magic": magic, "Length": n - pos})
            break
    return out


def _codec(attrs: int) -> str:
    c = attrs & 7
    return CODECS[c] if c < len(CODECS) else f"codec{c}"


def totals(batches: list[dict] | None) -> tuple[int, int]:
    """(record count, bytes) of the complete batches in a records field."""
    if not batches:
        return 0, 0
    count = size = 0
    for b in batches:
        if b.get("Truncated") or b.get("Unknown"):
            continue
        count += b.get("RecordCount", 0)
        size += b["Length"]
    return count, size
