"""Record data (the ``records`` fields of Produce and Fetch) -> records.

``iter_records(data)`` yields every record with its key, value and headers, batches decompressed
within a budget (codecs.py); records read from one batch are capped (``max_records``). A batch
past a cap, or one that does not decompress or parse, yields one :class:`Record` whose ``status``
says so, never an exception. ``batches(data)`` gives the same batch by batch: a magic 2 batch as a
:class:`V2Batch` read one record at a time in place (the records row shape's way). A Fetch
response may end with a partial batch (the broker cuts at the fetch size): status 'truncated'.
Batch metadata without the records (exchange rows): batchsummary.py.
"""

from __future__ import annotations

import zlib
from struct import Struct
from typing import Final, Iterator, NamedTuple


from ..compiled import native, require, require_extension
from .wiretypes import VARINT_CUT, View, uvarint
from .batchheader import (AT_LENGTH, AT_MAGIC, LOG_OVERHEAD, V01_TIMESTAMP, V2_ATTRIBUTES, V2_SIZE, _V01, _V2)
from .codecs import DEFAULT_MAX_DECOMPRESSED, Budget, RecordError, budget_of, codec_name

_crc32c: Final = require_extension("crc32c", "_crc32c").crc32c
_COMPILED: Final[bool] = native  # (a name of its own: compiled, an imported one is looked up at each use)
#: a range CRC'd at most this long is copied out (a bytes slice costs less than a view's making and slicing)
SMALL_COPY: Final = 2048
_orjson = require("orjson", "orjson")
_dumps: Final = _orjson.dumps
_loads: Final = _orjson.loads

#: control record types (key: version int16, type int16), as Kafka's ControlRecordType names them
CONTROL_TYPES: Final = ("ABORT", "COMMIT", "LEADER_CHANGE", "SNAPSHOT_HEADER", "SNAPSHOT_FOOTER",
                        "KRAFT_VERSION", "KRAFT_VOTERS")
DEFAULT_MAX_RECORDS: Final = 1_000_000  # records read from one batch; the rest become one status row
MAX_NESTING: Final = 2  # a magic 0/1 wrapper holds plain messages; deeper nesting is not Kafka

_I64: Final = Struct("!q")
_I32: Final = Struct("!i")
_H2: Final = Struct("!hh")


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
    for item in batches(data, budget, max_records):
        if isinstance(item, Record):
            yield item
            continue
        while item.next():
            yield item.record()
        if item.problem is not None:
            yield item.problem


def batches(data: View, budget: Budget | int = DEFAULT_MAX_DECOMPRESSED,
            max_records: int = DEFAULT_MAX_RECORDS) -> Iterator[Record | V2Batch]:
    """What ``data`` holds, batch by batch: a :class:`V2Batch` for each magic 2 batch whose CRC
    holds and whose records can be read (read them with its ``next``), a :class:`Record` for each
    magic 0/1 record and for each batch that cannot be read (its status says why)."""
    budget = budget_of(budget)
    pos, n = 0, len(data)
    while pos < n:
        magic = data[pos + AT_MAGIC] if n - pos > AT_MAGIC else None
        if magic == 2 and n - pos >= V2_SIZE:
            size = LOG_OVERHEAD + _I32.unpack_from(data, pos + AT_LENGTH)[0]
            if size < V2_SIZE or size > n - pos:
                yield _problem(data, pos, 2, "truncated", "record batch cut short (end of fetch or capture)")
                return
            yield _v2_batch(data, pos, size, budget, max_records)
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


def _v2_batch(data: View, pos: int, size: int, budget: Budget, max_records: int) -> Record | V2Batch:
    """The magic 2 batch at data[pos:pos+size], ready to be read; or the Record saying why not."""
    (base, _blen, _epoch, _m, crc, attrs, _ld, first_ts, max_ts, pid, pepoch, bseq,
     count) = _V2.unpack_from(data, pos)
    codec = codec_name(attrs)
    end = pos + size
    if _crc32c(data[pos + V2_ATTRIBUTES : end]) != crc:
        return _problem(data, pos, 2, "crc_mismatch", "CRC-32C of the batch does not match; records not read", codec)
    # the records are read by offsets into bytes (indexed natively where compiled): the batch's own
    # bytes in place, or the decompressed ones
    payload: bytes
    if attrs & 7:
        try:
            payload = budget.decompress(attrs & 7, memoryview(data)[pos + V2_SIZE : end])
        except RecordError as e:
            return _problem(data, pos, 2, e.status, str(e), codec)
        p, stop = 0, len(payload)
    elif isinstance(data, bytes):
        payload, p, stop = data, pos + V2_SIZE, end
    else:
        payload = bytes(data[pos + V2_SIZE : end])
        p, stop = 0, len(payload)
    if count < 0 or count > stop - p:  # each record takes at least 7 bytes
        return _problem(data, pos, 2, "corrupt", f"record count {count} cannot fit in the batch", codec)
    return V2Batch(data, pos, payload, p, stop, count, max_records, codec, attrs, base, first_ts, max_ts, pid,
                   pepoch, bseq)


class V2Batch:
    """The records of one magic 2 batch, read one at a time where they lie: ``next()`` reads the
    next record into ``off_delta``, ``ts_delta``, ``key``, ``value`` and ``headers``, and is False
    after the last, or where a record cannot be read or the cap is reached (``problem`` is then
    the Record saying so). The one reading of a record's fields: ``iter_records`` makes each a
    :class:`Record` (``record()``); the records row shape writes them into its columns, with no
    object per record. The batch's own fields are attributes (``base``, ``pid``, ...)."""

    def __init__(self, data: View, pos: int, payload: bytes, p: int, stop: int, count: int, max_records: int,
                 codec: str, attrs: int, base: int, first_ts: int, max_ts: int, pid: int, pepoch: int,
                 bseq: int) -> None:
        self.data = data
        self.pos = pos
        self.payload = payload
        self.p = p
        self.stop = stop
        self.count = count
        self.max_records = max_records
        self.codec = codec
        self.log_append = bool(attrs & 8)
        self.transactional = bool(attrs & 16)
        self.control = bool(attrs & 32)
        self.base = base
        self.first_ts = first_ts
        self.max_ts = max_ts
        self.pid = pid
        self.pepoch = pepoch
        self.bseq = bseq
        self.i = 0
        self.off_delta = 0
        self.ts_delta = 0
        self.key: bytes | None = None
        self.value: bytes | None = None
        self.headers: list[tuple[str, bytes | None]] = []
        self.problem: Record | None = None

    def next(self) -> bool:
        i = self.i
        if i >= self.count:
            return False
        if i == self.max_records:
            self.problem = _too_many(self.data, self.pos, 2, self.codec, self.count, self.max_records)
            self.i = self.count
            return False
        payload, p, stop = self.payload, self.p, self.stop
        try:
            length, p = zigzag_varint(payload, p, stop)
            rec_end = p + length
            if length < 6 or rec_end > stop:
                raise RecordError("record length runs past the batch")
            p += 1  # attributes
            ts_delta, p = zigzag_varint(payload, p, rec_end)
            off_delta, p = zigzag_varint(payload, p, rec_end)
            key, p = _vbytes(payload, p, rec_end)
            value, p = _vbytes(payload, p, rec_end)
            nh, p = zigzag_varint(payload, p, rec_end)
            if nh < 0 or nh > rec_end - p:
                raise RecordError("header count runs past the record")
            headers: list[tuple[str, bytes | None]] = []
            for _h in range(nh):
                hk, p = _vbytes(payload, p, rec_end)
                hv, p = _vbytes(payload, p, rec_end)
                headers.append(((hk or b"").decode("utf-8", "replace"), hv))
        except RecordError as e:
            self.problem = _problem(self.data, self.pos, 2, "corrupt", str(e), self.codec)
            self.i = self.count
            return False
        self.p = rec_end
        self.i = i + 1
        self.ts_delta = ts_delta
        self.off_delta = off_delta
        self.key = key
        self.value = value
        self.headers = headers
        return True

    def timestamp_ms(self) -> int | None:
        ts = self.max_ts if self.log_append else self.first_ts + self.ts_delta
        return ts if ts >= 0 else None

    def sequence(self) -> int | None:
        return next_sequence(self.bseq, self.off_delta) if self.bseq >= 0 else None

    def control_type(self) -> str | None:
        key = self.key
        if self.control and key is not None and len(key) >= 4:
            t = _H2.unpack_from(key)[1]
            return CONTROL_TYPES[t] if 0 <= t < len(CONTROL_TYPES) else f"type{t}"
        return None

    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.log_append else "CreateTime"

    def record(self) -> Record:
        """The record ``next`` read."""
        return Record(self.base + self.off_delta, self.timestamp_ms(), self.timestamp_type(), self.key, self.value,
                      self.headers, self.pid, self.pepoch, self.sequence(), self.transactional, self.control_type(),
                      self.codec, 2, self.base)


def v01_key_value(data: View, pos: int, size: int, magic: int) -> tuple[bytes | None, bytes | None]:
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


def count_messages(data: View, limit: int) -> int:
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
    codec = codec_name(attrs)
    if zlib.crc32(data[pos + AT_MAGIC : pos + size]) != crc:
        yield _problem(data, pos, magic, "crc_mismatch", "CRC-32 of the message does not match", codec)
        return
    ts = _I64.unpack_from(data, pos + V01_TIMESTAMP)[0] if magic == 1 else None
    log_append = bool(attrs & 8) if magic == 1 else None
    try:
        key, value = v01_key_value(data, pos, size, magic)
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


def zigzag_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """A zigzag varint (records use signed varints), at most 10 bytes."""
    if pos < end:
        b = buf[pos]
        if b < 0x80:  # one byte (most lengths and deltas of small records): read here
            return (b >> 1) ^ -(b & 1), pos + 1
    value, after = uvarint(buf, pos, end, 10)
    if after < 0:
        raise RecordError("varint runs past the end" if after == VARINT_CUT else "varint longer than 10 bytes")
    return (value >> 1) ^ -(value & 1), after


def _vbytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = zigzag_varint(buf, pos, end)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise RecordError("key, value or header runs past the record")
    return buf[pos : pos + n], pos + n
