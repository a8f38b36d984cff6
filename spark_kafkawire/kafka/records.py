"""Record data (the ``records`` fields of Produce and Fetch) -> batch metadata, and records.

``summarize(data)`` walks magic 2 record batches and magic 0/1 message sets by their headers:
offsets, record counts, timestamps, codec, producer id/epoch, transactional and control flags,
the type of a control batch's marker (COMMIT/ABORT, ...), and a CRC check (CRC-32C over bytes
21.. for magic 2, CRC-32 over the message for magic 0/1). A mismatch is reported in the batch,
never fatal. Payload bytes never leave this function; only a magic 0/1 wrapper message whose
CRC holds is decompressed, to count the messages inside it.

``iter_records(data)`` yields every record with its key, value and headers, decompressing
batches (gzip, snappy raw or xerial-framed, lz4 frames, zstd). Decompressed bytes are capped
(``max_decompressed``, default 64 MiB) by a :class:`Budget` that every batch of one request or
response draws on, so many batches under the cap cannot add up past it; records read from one
batch are capped too (``max_records``). A batch past a cap, or one that does not decompress or
parse, yields one :class:`Record` whose ``status`` says so, never an exception.

A Fetch response may end with a partial batch (the broker cuts at the fetch size): it is reported
with ``"Truncated": true`` (``status`` 'truncated' from ``iter_records``).
"""

from __future__ import annotations

import zlib
from struct import Struct, calcsize
from typing import Final, Iterator, NamedTuple

from librt.strings import BytesWriter, read_i16_be, read_i32_be, read_i64_be

from ..compiled import native, require, require_extension
from .jsontext import int_text
from .wiretypes import View

_crc32c: Final = require_extension("crc32c", "_crc32c").crc32c
_COMPILED: Final[bool] = native  # (a name of its own: compiled, an imported one is looked up at each use)
#: a range CRC'd at most this long is copied out (a bytes slice costs less than a view's making and slicing)
SMALL_COPY: Final = 2048
_orjson = require("orjson", "orjson")
_dumps: Final = _orjson.dumps
_loads: Final = _orjson.loads
cramjam: Final = require("cramjam", "cramjam")
zstandard: Final = require("zstandard", "zstandard")
lz4_frame: Final = require("lz4.frame", "lz4")

CODECS: Final = ("none", "gzip", "snappy", "lz4", "zstd")
#: control record types (key: version int16, type int16), as Kafka's ControlRecordType names them
CONTROL_TYPES: Final = ("ABORT", "COMMIT", "LEADER_CHANGE", "SNAPSHOT_HEADER", "SNAPSHOT_FOOTER",
                        "KRAFT_VERSION", "KRAFT_VOTERS")
DEFAULT_MAX_DECOMPRESSED: Final = 64 << 20
DEFAULT_MAX_RECORDS: Final = 1_000_000  # records read from one batch; the rest become one status row
MAX_NESTING: Final = 2  # a magic 0/1 wrapper holds plain messages; deeper nesting is not Kafka

#: the magic 2 batch header (Kafka's DefaultRecordBatch), field by field: the one statement of its
#: layout; its Struct and the offsets read in place below are made from it
_V2_HEADER: Final = (("BaseOffset", "q"), ("Length", "i"), ("PartitionLeaderEpoch", "i"), ("Magic", "b"),
                     ("Crc", "I"), ("Attributes", "h"), ("LastOffsetDelta", "i"), ("BaseTimestamp", "q"),
                     ("MaxTimestamp", "q"), ("ProducerId", "q"), ("ProducerEpoch", "h"), ("BaseSequence", "i"),
                     ("RecordCount", "i"))
#: a magic 0/1 message's header (LegacyRecord), the same way (its timestamp is there in magic 1 only)
_V01_HEADER: Final = (("Offset", "q"), ("Length", "i"), ("Crc", "I"), ("Magic", "b"), ("Attributes", "b"),
                      ("Timestamp", "q"))


def _at(header: tuple[tuple[str, str], ...], name: str) -> int:
    """Where a header's field starts."""
    names = [n for n, _ in header]
    return calcsize("!" + "".join(t for _, t in header[: names.index(name)]))


_V2: Final = Struct("!" + "".join(t for _, t in _V2_HEADER))  # 61 bytes
_V01: Final = Struct("!" + "".join(t for _, t in _V01_HEADER[:5]))  # offset .. attributes
#: where fields lie (both magics: the length at 8, the magic at 16; the size counts from 12)
AT_LENGTH: Final = _at(_V2_HEADER, "Length")
AT_MAGIC: Final = _at(_V2_HEADER, "Magic")
LOG_OVERHEAD: Final = _at(_V2_HEADER, "PartitionLeaderEpoch")
V2_EPOCH: Final = LOG_OVERHEAD
V2_CRC: Final = _at(_V2_HEADER, "Crc")
V2_ATTRIBUTES: Final = _at(_V2_HEADER, "Attributes")  # the CRC-32C covers the batch from here
V2_LAST_OFFSET_DELTA: Final = _at(_V2_HEADER, "LastOffsetDelta")
V2_BASE_TIMESTAMP: Final = _at(_V2_HEADER, "BaseTimestamp")
V2_MAX_TIMESTAMP: Final = _at(_V2_HEADER, "MaxTimestamp")
V2_PRODUCER_ID: Final = _at(_V2_HEADER, "ProducerId")
V2_PRODUCER_EPOCH: Final = _at(_V2_HEADER, "ProducerEpoch")
V2_BASE_SEQUENCE: Final = _at(_V2_HEADER, "BaseSequence")
V2_RECORD_COUNT: Final = _at(_V2_HEADER, "RecordCount")
V2_SIZE: Final = _V2.size
V01_TIMESTAMP: Final = _at(_V01_HEADER, "Timestamp")
_I64: Final = Struct("!q")
_I32: Final = Struct("!i")
_U32LE: Final = Struct("<I")
_H2: Final = Struct("!hh")
XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
LZ4_BLOCK_SIZES: Final = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


class RecordError(ValueError):
    """Record data that cannot be decompressed or parsed (or would exceed the size cap)."""

    def __init__(self, message: str, status: str = "corrupt"):
        super().__init__(message)
        self.status = status


class Record(NamedTuple):
    offset: int | None
    timestamp_ms: int | None
    timestamp_type: str | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None
    producer_id: int | None
    producer_epoch: int | None
    sequence: int | None
    transactional: bool | None
    control_type: str | None
    codec: str
    magic: int
    batch_offset: int | None
    status: str = "ok"  # ok, truncated, over_cap, corrupt, crc_mismatch
    detail: str | None = None


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
    summary_into(data, pos, len(data) if end < 0 else end, _budget(budget), out)
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
    batch = {"BaseOffset": off, "Length": size, "Magic": magic, "Crc": crc, "Codec": _codec(attrs),
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
            inner = budget.decompress(attrs & 7, _v01_key_value(data, pos, size, magic)[1] or b"")
            batch["RecordCount"] = _count_messages(inner, DEFAULT_MAX_RECORDS)
        except RecordError as e:
            batch["RecordCount"] = None
            batch["DecompressError"] = str(e)
    return batch


def _codec(attrs: int) -> str:
    c = attrs & 7
    return CODECS[c] if c < len(CODECS) else f"codec{c}"


def _control_type(data: View, pos: int, end: int) -> str | None:
    """The type of a control batch's first record (its key: version int16, type int16)."""
    try:
        _len, p = _varint(data, pos, end)
        p += 1  # attributes
        _ts, p = _varint(data, p, end)
        _od, p = _varint(data, p, end)
        klen, p = _varint(data, p, end)
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


# -- decompression -------------------------------------------------------------------------------
def decompress(codec: int, data: View, cap: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress one batch's payload, never producing more than ``cap`` bytes."""
    try:
        if codec == 1:
            return _gzip(data, cap)
        if codec == 2:
            return _snappy(data, cap)
        if codec == 3:
            return _lz4(data, cap)
        if codec == 4:
            return _zstd(data, cap)
    except RecordError:
        raise
    except Exception as e:  # the libraries' own errors: corrupt input
        raise RecordError(f"{CODECS[codec]}: {e}") from None
    raise RecordError(f"unknown codec {codec}")


class Budget:
    """What decompression may still produce for one request or response: every batch in it draws
    on the same ``cap`` bytes (option maxDecompressedBytes)."""

    __slots__ = ("cap", "left")

    def __init__(self, cap: int = DEFAULT_MAX_DECOMPRESSED):
        self.cap = self.left = cap

    def decompress(self, codec: int, data: View) -> bytes:
        if not self.left:
            raise RecordError(f"{_codec(codec)}: not decompressed, the message's batches already took "
                              f"maxDecompressedBytes ({self.cap})", "over_cap")
        try:
            out = decompress(codec, data, self.left)
        except RecordError as e:
            if e.status == "over_cap":
                whole = self.left == self.cap
                self.left = 0
                if not whole:
                    raise RecordError(f"{_codec(codec)}: the message's batches decompress to more than "
                                      f"maxDecompressedBytes ({self.cap})", "over_cap") from None
            raise
        self.left -= len(out)
        return out


def _budget(b: Budget | int) -> Budget:
    return b if isinstance(b, Budget) else Budget(b)


def _over(cap: int, codec: str) -> RecordError:
    return RecordError(f"{codec}: decompressed size exceeds maxDecompressedBytes ({cap})", "over_cap")


def _bounded(d, data: View, cap: int, codec: str) -> bytes:
    """Run a decompressor object that takes a maximum output length (zlib's, lz4.frame's)."""
    out = d.decompress(bytes(data), cap + 1)
    if len(out) > cap:
        raise _over(cap, codec)
    if not d.eof:
        raise RecordError(f"{codec}: stream ends early")
    return out


def _gzip(data: View, cap: int) -> bytes:
    return _bounded(zlib.decompressobj(wbits=47), data, cap, "gzip")  # gzip or zlib header


def _snappy(data: View, cap: int) -> bytes:
    raw = cramjam.snappy
    if bytes(data[:8]) != XERIAL_MAGIC:
        if raw.decompress_raw_len(bytes(data)) > cap:
            raise _over(cap, "snappy")
        return bytes(raw.decompress_raw(bytes(data)))
    # xerial framing (Java clients): 16-byte header, then [int32 length][raw snappy block]...
    parts: list[bytes] = []
    total, pos, n = 0, 16, len(data)
    while pos < n:
        if pos + 4 > n:
            raise RecordError("snappy: xerial block length cut short")
        size = _I32.unpack_from(data, pos)[0]
        pos += 4
        if size < 0 or pos + size > n:
            raise RecordError("snappy: xerial block runs past the end")
        block = bytes(data[pos : pos + size])
        total += raw.decompress_raw_len(block)
        if total > cap:
            raise _over(cap, "snappy")
        parts.append(bytes(raw.decompress_raw(block)))
        pos += size
    return b"".join(parts)


def _lz4(data: View, cap: int) -> bytes:
    """An LZ4 frame, read block by block. The header checksum is not checked: Kafka clients before
    0.10 (magic 0) computed it over the wrong bytes (KAFKA-3160)."""
    n = len(data)
    if n < 7 or bytes(data[:4]) != LZ4_MAGIC:
        raise RecordError("lz4: not an LZ4 frame")
    flg, bd = data[4], data[5]
    block_max = LZ4_BLOCK_SIZES.get((bd >> 4) & 7)
    if block_max is None:
        raise RecordError("lz4: bad block size in the frame descriptor")
    if not flg & 0x20:  # linked blocks: the lz4 library's frame decoder, in bounded steps
        return _lz4_linked(data, cap)
    pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1  # + header checksum
    checksummed = bool(flg & 0x10)
    parts: list[bytes] = []
    total = 0
    while True:
        if pos + 4 > n:
            raise RecordError("lz4: frame cut short")
        word = _U32LE.unpack_from(data, pos)[0]
        pos += 4
        if word == 0:
            break
        size = word & 0x7FFFFFFF
        if pos + size > n:
            raise RecordError("lz4: block runs past the end")
        block = bytes(data[pos : pos + size])
        if word & 0x80000000:
            out = block
        else:
            out = bytes(cramjam.lz4.decompress_block(block, output_len=block_max))
        total += len(out)
        if total > cap:
            raise _over(cap, "lz4")
        parts.append(out)
        pos += size + (4 if checksummed else 0)
    return b"".join(parts)


def _lz4_linked(data: View, cap: int) -> bytes:
    return _bounded(lz4_frame.LZ4FrameDecompressor(), data, cap, "lz4")


def _zstd(data: View, cap: int) -> bytes:
    import io

    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(bytes(data)), read_across_frames=True)
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = reader.read(min(1 << 20, cap + 1 - total))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
        if total > cap:
            raise _over(cap, "zstd")
    return b"".join(parts)


# -- records (rows=records) ----------------------------------------------------------------------
INT32_MAX: Final = 0x7FFFFFFF


def next_sequence(base: int, increment: int) -> int:
    """A record's producer sequence: the batch's base sequence plus its offset delta, wrapping to 0
    after Int.MAX as Kafka does (DefaultRecordBatch.incrementSequence)."""
    if base > INT32_MAX - increment:
        return increment - (INT32_MAX - base) - 1
    return base + increment


def iter_records(data: View, budget: Budget | int = DEFAULT_MAX_DECOMPRESSED,
                 max_records: int = DEFAULT_MAX_RECORDS) -> Iterator[Record]:
    budget = _budget(budget)
    pos, n = 0, len(data)
    while pos < n:
        magic = data[pos + AT_MAGIC] if n - pos > AT_MAGIC else None
        if magic == 2 and n - pos >= V2_SIZE:
            size = LOG_OVERHEAD + _I32.unpack_from(data, pos + AT_LENGTH)[0]
            if size < V2_SIZE or size > n - pos:
                yield _problem(data, pos, 2, "truncated", "record batch cut short (end of fetch or capture)")
                return
            yield from _v2_records(data, pos, size, budget, max_records)
            pos += size
        elif magic in (0, 1) and n - pos >= 26:
            size = LOG_OVERHEAD + _I32.unpack_from(data, pos + AT_LENGTH)[0]
            if size < 26 or size > n - pos:
                yield _problem(data, pos, magic, "truncated", "message cut short (end of fetch or capture)")
                return
            yield from _v01_records(data, pos, size, magic, budget, max_records, 0, None)
            pos += size
        elif magic in (0, 1, 2):
            yield _problem(data, pos, magic, "truncated", "record batch header cut short")
            return
        else:
            yield _problem(data, pos, -1, "corrupt", f"unknown magic byte {magic}")
            return


def _problem(data: View, pos: int, magic: int, status: str, detail: str, codec: str = "none") -> Record:
    base = _I64.unpack_from(data, pos)[0] if len(data) - pos >= 8 else None
    return Record(None, None, None, None, None, None, None, None, None, None, None, codec, magic, base,
                  status, detail)


def _too_many(data: View, pos: int, magic: int, codec: str, count: int, cap: int) -> Record:
    return _problem(data, pos, magic, "over_cap", f"the batch holds {count} records; the first {cap} were read "
                    "(option maxRecordsPerBatch)", codec)


def _v2_records(data: View, pos: int, size: int, budget: Budget, max_records: int) -> Iterator[Record]:
    (base, _blen, _epoch, _m, crc, attrs, _ld, first_ts, max_ts, pid, pepoch, bseq,
     count) = _V2.unpack_from(data, pos)
    codec = _codec(attrs)
    end = pos + size
    if _crc32c(data[pos + V2_ATTRIBUTES : end]) != crc:
        yield _problem(data, pos, 2, "crc_mismatch", "CRC-32C of the batch does not match; records not read", codec)
        return
    payload: bytes | memoryview = memoryview(data)[pos + V2_SIZE : end]
    if attrs & 7:
        try:
            payload = budget.decompress(attrs & 7, payload)
        except RecordError as e:
            yield _problem(data, pos, 2, e.status, str(e), codec)
            return
    log_append = bool(attrs & 8)
    control = bool(attrs & 32)
    txn = bool(attrs & 16)
    p, stop = 0, len(payload)
    if count < 0 or count > stop:  # each record takes at least 7 bytes
        yield _problem(data, pos, 2, "corrupt", f"record count {count} cannot fit in the batch", codec)
        return
    for i in range(count):
        if i == max_records:
            yield _too_many(data, pos, 2, codec, count, max_records)
            return
        try:
            length, p = _varint(payload, p, stop)
            rec_end = p + length
            if length < 6 or rec_end > stop:
                raise RecordError("record length runs past the batch")
            p += 1  # attributes
            ts_delta, p = _varint(payload, p, rec_end)
            off_delta, p = _varint(payload, p, rec_end)
            key, p = _vbytes(payload, p, rec_end)
            value, p = _vbytes(payload, p, rec_end)
            nh, p = _varint(payload, p, rec_end)
            if nh < 0 or nh > rec_end - p:
                raise RecordError("header count runs past the record")
            headers = []
            for _h in range(nh):
                hk, p = _vbytes(payload, p, rec_end)
                hv, p = _vbytes(payload, p, rec_end)
                headers.append(((hk or b"").decode("utf-8", "replace"), hv))
        except RecordError as e:
            yield _problem(data, pos, 2, "corrupt", str(e), codec)
            return
        p = rec_end
        ctype = None
        if control and key is not None and len(key) >= 4:
            t = _H2.unpack_from(key)[1]
            ctype = CONTROL_TYPES[t] if 0 <= t < len(CONTROL_TYPES) else f"type{t}"
        ts = max_ts if log_append else first_ts + ts_delta
        seq = next_sequence(bseq, off_delta) if bseq >= 0 else None
        yield Record(base + off_delta, ts if ts >= 0 else None, "LogAppendTime" if log_append else "CreateTime",
                     key, value, headers, pid, pepoch, seq, txn, ctype, codec, 2, base)


def _v01_key_value(data: View, pos: int, size: int, magic: int) -> tuple[bytes | None, bytes | None]:
    """Key and value of the magic 0/1 message at data[pos:pos+size] (None when null)."""
    p = pos + V01_TIMESTAMP + (8 if magic == 1 else 0)  # offset, size, crc, magic, attrs, [timestamp]
    end = pos + size
    out: list[bytes | None] = []
    for what in ("key", "value"):
        if p + 4 > end:
            raise RecordError(f"message {what} length runs past the message")
        n = _I32.unpack_from(data, p)[0]
        p += 4
        if n < 0:
            out.append(None)
            continue
        if p + n > end:
            raise RecordError(f"message {what} runs past the message")
        out.append(bytes(data[p : p + n]))
        p += n
    return out[0], out[1]


def _count_messages(data: View, limit: int) -> int:
    """How many complete messages a magic 0/1 message set holds (what _v01_messages walks)."""
    pos, n, count, size_at = 0, len(data), 0, _I32.unpack_from
    while n - pos >= 26:
        size = LOG_OVERHEAD + size_at(data, pos + AT_LENGTH)[0]
        if size < 26 or size > n - pos:
            break
        count += 1
        if count > limit:
            raise RecordError(f"more than {limit} messages in one wrapper; not counted further", "over_cap")
        pos += size
    return count


def _v01_messages(data: View) -> Iterator[tuple[int, int, int]]:
    """(position, size, magic) of each complete message in a magic 0/1 message set."""
    pos, n = 0, len(data)
    while n - pos >= 26:
        size = LOG_OVERHEAD + _I32.unpack_from(data, pos + AT_LENGTH)[0]
        if size < 26 or size > n - pos:
            return
        yield pos, size, data[pos + AT_MAGIC]
        pos += size


def _v01_records(data: View, pos: int, size: int, magic: int, budget: Budget, max_records: int, depth: int,
                 wrapper: tuple[int, int | None] | None) -> Iterator[Record]:
    off, _msize, crc, _m, attrs = _V01.unpack_from(data, pos)
    codec = _codec(attrs)
    if zlib.crc32(data[pos + AT_MAGIC : pos + size]) != crc:
        yield _problem(data, pos, magic, "crc_mismatch", "CRC-32 of the message does not match", codec)
        return
    ts = _I64.unpack_from(data, pos + V01_TIMESTAMP)[0] if magic == 1 else None
    log_append = bool(attrs & 8) if magic == 1 else None
    try:
        key, value = _v01_key_value(data, pos, size, magic)
    except RecordError as e:
        yield _problem(data, pos, magic, "corrupt", str(e), codec)
        return
    if attrs & 7:
        if depth >= MAX_NESTING - 1:
            yield _problem(data, pos, magic, "corrupt", "compressed message inside a compressed message", codec)
            return
        try:
            inner = budget.decompress(attrs & 7, value or b"")
        except RecordError as e:
            yield _problem(data, pos, magic, e.status, str(e), codec)
            return
        msgs = list(_v01_messages(inner))
        if len(msgs) > max_records:
            yield _too_many(data, pos, magic, codec, len(msgs), max_records)
            msgs = msgs[:max_records]
        last_rel = _I64.unpack_from(inner, msgs[-1][0])[0] if msgs else 0
        for ipos, isize, imagic in msgs:
            # magic 1: inner offsets are relative, the wrapper carries the last one's absolute offset
            # (a producer may leave the wrapper at 0: then the relative offsets are all there is)
            shift = off - last_rel if magic == 1 and off >= last_rel else 0
            inner_recs = _v01_records(inner, ipos, isize, imagic, budget, max_records, depth + 1,
                                      (shift, ts if log_append else None))
            for r in inner_recs:
                yield r._replace(codec=codec)
        return
    if wrapper is not None:
        shift, wrapper_ts = wrapper
        off = off + shift
        if wrapper_ts is not None:
            ts, log_append = wrapper_ts, True
    yield Record(off, ts if ts is not None and ts >= 0 else None,
                 None if log_append is None else ("LogAppendTime" if log_append else "CreateTime"),
                 key, value, None, None, None, None, None, None, codec, magic, off)


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    """A zigzag varint (records use signed varints), at most 10 bytes."""
    value = shift = 0
    while True:
        if pos >= end:
            raise RecordError("varint runs past the end")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise RecordError("varint longer than 10 bytes")


def _vbytes(buf, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = _varint(buf, pos, end)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise RecordError("key, value or header runs past the record")
    return bytes(buf[pos : pos + n]), pos + n
