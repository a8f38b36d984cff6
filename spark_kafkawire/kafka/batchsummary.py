"""Record data (the ``records`` fields of Produce and Fetch) -> batch metadata, as exchange rows show
it (no payload).

``summarize(data)`` walks magic 2 record batches and magic 0/1 message sets by their headers:
offsets, record counts, timestamps, codec, producer id/epoch, transactional and control flags,
the type of a control batch's marker (COMMIT/ABORT, ...), and a CRC check (CRC-32C over bytes
21.. for magic 2, CRC-32 over the message for magic 0/1). A mismatch is reported in the batch,
never fatal. Payload bytes never leave this module; only a magic 0/1 wrapper message whose
CRC holds is decompressed, to count the messages inside it. The records themselves are read by
records.py.

A Fetch response may end with a partial batch (the broker cuts at the fetch size): it is reported
with ``"Truncated": true``.
"""

from __future__ import annotations

import zlib
from struct import Struct
from typing import Final

from librt.strings import BytesWriter, read_i16_be, read_i32_be, read_i64_be

from ..compiled import native, require, require_extension
from .jsontext import int_text
from .wiretypes import View
from .batchheader import (AT_LENGTH, AT_MAGIC, LOG_OVERHEAD, V01_TIMESTAMP, V2_ATTRIBUTES, V2_BASE_SEQUENCE,
                          V2_BASE_TIMESTAMP, V2_CRC, V2_EPOCH, V2_LAST_OFFSET_DELTA, V2_MAX_TIMESTAMP,
                          V2_PRODUCER_EPOCH, V2_PRODUCER_ID, V2_RECORD_COUNT, V2_SIZE, _V01, _V2)
from .records import CONTROL_TYPES, DEFAULT_MAX_RECORDS, count_messages, v01_key_value, zigzag_varint
from .codecs import CODECS, DEFAULT_MAX_DECOMPRESSED, Budget, RecordError, budget_of, codec_name

_I64: Final = Struct("!q")
_H2: Final = Struct("!hh")
_crc32c: Final = require_extension("crc32c", "_crc32c").crc32c
_COMPILED: Final[bool] = native  # (a name of its own: compiled, an imported one is looked up at each use)
#: a range CRC'd at most this long is copied out (a bytes slice costs less than a view's making and slicing)
SMALL_COPY: Final = 2048
_orjson = require("orjson", "orjson")
_dumps: Final = _orjson.dumps
_loads: Final = _orjson.loads

# -- summaries (exchange rows: no payload) -------------------------------------------------------
#: a complete or cut magic 2 batch's JSON text between its values (the order of summarize's keys)
_V2_KEYS: Final = (b'{"BaseOffset":', b',"Length":', b',"Magic":2,"PartitionLeaderEpoch":', b',"Crc":',
                   b',"LastOffsetDelta":', b',"BaseTimestamp":', b',"MaxTimestamp":', b',"ProducerId":',
                   b',"ProducerEpoch":', b',"BaseSequence":', b',"RecordCount":')
#: its codec, timestamp type and flags (attributes & 0x3F: codec 0-7, bits 8, 16, 32), as that text
_V2_ATTRS: Final = tuple(b',"Codec":"%s","TimestampType":"%s","Transactional":%s,"Control":%s' % (
    CODECS[a & 7].encode() if a & 7 < len(CODECS) else b"codec%d" % (a & 7),
    b"LogAppendTime" if a & 8 else b"CreateTime", b"true" if a & 16 else b"false", b"true" if a & 32 else b"false")
    for a in range(64))
#: the same pieces as one bytes format, for interpreted code (summary_into)
_V2_FORMAT: Final = b"".join(k + b"%d" + (b"%s" if i == 3 else b"") for i, k in enumerate(_V2_KEYS))


def summarize(data: bytes, budget: Budget | int = DEFAULT_MAX_DECOMPRESSED, pos: int = 0, end: int = -1) -> list[dict]:
    """The metadata of the batches in data[pos:end] as values: the JSON text of
    :func:`summary_into`, read back."""
    out = BytesWriter()
    summary_into(data, pos, len(data) if end < 0 else end, budget_of(budget), out)
    return _loads(out.getvalue())


def summary_into(data: bytes, pos: int, n: int, budget: Budget, out: BytesWriter) -> tuple[int, int]:
    """Write the JSON array of the metadata of the batches in data[pos:n] to ``out`` (the one
    place it is made: the values of :func:`summarize` are this text read back); returns the record
    count and bytes of the complete batches (what :func:`totals` gives of the values). The
    integers are read where they lie (natively where compiled)."""
    count = size = 0
    start = pos
    out.write(b"[")
    while pos < n:
        if pos > start:
            out.write(b",")
        left = n - pos
        if left <= AT_MAGIC:
            out.write(b'{"Truncated":true,"Length":' + int_text(left) + b"}")
            break
        magic = data[pos + AT_MAGIC]
        if magic == 2:
            if left < V2_SIZE:
                out.write(b'{"Truncated":true,"Length":' + int_text(left) + b',"Magic":2}')
                break
            if _COMPILED:  # compiled: each field read where it lies and written (a tuple of them, boxed, costs more)
                blen: int = read_i32_be(data, pos + AT_LENGTH)
                crc: int = read_i32_be(data, pos + V2_CRC)
                crc &= 0xFFFFFFFF
                attrs: int = read_i16_be(data, pos + V2_ATTRIBUTES)
                records: int = read_i32_be(data, pos + V2_RECORD_COUNT)
                whole = LOG_OVERHEAD + blen
                cut = whole < V2_SIZE or whole > left
                keys = _V2_KEYS
                out.write(keys[0])
                out.write(int_text(read_i64_be(data, pos)))
                out.write(keys[1])
                out.write(int_text(left if cut else whole))
                out.write(keys[2])
                out.write(int_text(read_i32_be(data, pos + V2_EPOCH)))
                out.write(keys[3])
                out.write(int_text(crc))
                out.write(_V2_ATTRS[attrs & 0x3F])
                out.write(keys[4])
                out.write(int_text(read_i32_be(data, pos + V2_LAST_OFFSET_DELTA)))
                out.write(keys[5])
                first_ts: int = read_i64_be(data, pos + V2_BASE_TIMESTAMP)
                ts_text = int_text(first_ts)
                out.write(ts_text)
                out.write(keys[6])
                max_ts: int = read_i64_be(data, pos + V2_MAX_TIMESTAMP)
                out.write(ts_text if max_ts == first_ts else int_text(max_ts))  # (one record: the same)
                out.write(keys[7])
                out.write(int_text(read_i64_be(data, pos + V2_PRODUCER_ID)))
                out.write(keys[8])
                out.write(int_text(read_i16_be(data, pos + V2_PRODUCER_EPOCH)))
                out.write(keys[9])
                out.write(int_text(read_i32_be(data, pos + V2_BASE_SEQUENCE)))
                out.write(keys[10])
                out.write(int_text(records))
            else:  # interpreted: the header in one unpacking, the same pieces in one formatting (five times faster)
                (base, blen, epoch, _m, crc, attrs, last, first_ts, max_ts, pid, pepoch, seq,
                 records) = _V2.unpack_from(data, pos)
                whole = LOG_OVERHEAD + blen
                cut = whole < V2_SIZE or whole > left
                out.write(_V2_FORMAT % (base, left if cut else whole, epoch, crc, _V2_ATTRS[attrs & 0x3F], last,
                                        first_ts, max_ts, pid, pepoch, seq, records))
            if cut:
                out.write(b',"Truncated":true}')
                break
            valid = _crc32c_of(data, pos + V2_ATTRIBUTES, pos + whole) == crc
            out.write(b',"CrcValid":true' if valid else b',"CrcValid":false')
            if attrs & 32 and not attrs & 7:
                control = _control_type(data, pos + V2_SIZE, pos + whole)
                out.write(b',"ControlType":null}' if control is None else
                          b',"ControlType":"' + control.encode() + b'"}')
            else:
                out.write(b"}")
            count += records
            size += whole
            pos += whole
        elif magic == 0 or magic == 1:
            batch = _v01_summary(memoryview(data)[:n], pos, n, magic, budget)
            out.write(_dumps(batch))
            if batch.get("Truncated"):
                break
            count += batch["RecordCount"] or 0
            size += batch["Length"]
            pos += batch["Length"]
        else:
            out.write(b'{"Unknown":true,"Magic":' + int_text(magic) + b',"Length":' + int_text(left) + b"}")
            break
    out.write(b"]")
    return count, size


def _crc32c_of(data: bytes, start: int, end: int) -> int:
    """The CRC-32C of data[start:end], without a copy of a large range."""
    got: int = _crc32c(data[start:end] if end - start <= SMALL_COPY else memoryview(data)[start:end])
    return got


def _v01_summary(data: View, pos: int, n: int, magic: int, budget: Budget) -> dict:
    """A magic 0/1 message's metadata (a wrapper's inner messages counted where its CRC holds)."""
    if n - pos < _V01.size:  # the header itself is cut (its magic byte was the last there)
        return {"Truncated": True, "Length": n - pos, "Magic": magic}
    off, msize, crc, _m, attrs = _V01.unpack_from(data, pos)
    size = LOG_OVERHEAD + msize
    batch = {"BaseOffset": off, "Length": size, "Magic": magic, "Crc": crc, "Codec": codec_name(attrs),
             "RecordCount": 1}
    if magic == 1 and n - pos >= V01_TIMESTAMP + 8:
        batch["BaseTimestamp"] = _I64.unpack_from(data, pos + V01_TIMESTAMP)[0]
        batch["TimestampType"] = "LogAppendTime" if attrs & 8 else "CreateTime"
    if msize < 14 or size > n - pos:
        batch["Truncated"] = True
        batch["Length"] = n - pos
        return batch
    batch["CrcValid"] = crc_ok = zlib.crc32(data[pos + AT_MAGIC : pos + size]) == crc
    if attrs & 7 and not crc_ok:
        batch["RecordCount"] = None
        batch["DecompressError"] = "not decompressed: the wrapper's CRC does not match"
    elif attrs & 7:  # a wrapper: count the messages inside
        try:
            inner = budget.decompress(attrs & 7, v01_key_value(data, pos, size, magic)[1] or b"")
            batch["RecordCount"] = count_messages(inner, DEFAULT_MAX_RECORDS)
        except RecordError as e:
            batch["RecordCount"] = None
            batch["DecompressError"] = str(e)
    return batch


def _control_type(data: bytes, pos: int, end: int) -> str | None:
    """The type of a control batch's first record (its key: version int16, type int16)."""
    try:
        _len, p = zigzag_varint(data, pos, end)
        p += 1  # attributes
        _ts, p = zigzag_varint(data, p, end)
        _od, p = zigzag_varint(data, p, end)
        klen, p = zigzag_varint(data, p, end)
        if klen < 4 or p + 4 > end:
            return None
        t = _H2.unpack_from(data, p)[1]
        return CONTROL_TYPES[t] if 0 <= t < len(CONTROL_TYPES) else f"type{t}"
    except RecordError:
        return None


def totals(batches: list[dict] | None) -> tuple[int, int]:
    """(record count, bytes) of the complete batches in a records field."""
    if not batches:
        return 0, 0
    count = size = 0
    for b in batches:
        if b.get("Truncated") or b.get("Unknown"):
            continue
        count += b.get("RecordCount") or 0
        size += b["Length"]
    return count, size




