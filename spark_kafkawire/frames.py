"""Byte streams -> Kafka frames, and frame headers.

A Kafka frame is an int32 big-endian size N followed by N bytes of header and body. The
:class:`Framer` is the sink of one TCP direction: it cuts the stream into frames, stamping each
with the time and packet number of the packet that carried its first byte. It keeps only the
frame in progress, never more than ``max_frame`` bytes.

Every byte the framer receives is accounted for (:class:`Accounting`): it ends up in a complete
frame, in a frame cut short by a gap or the end of the capture (``partial``), or among bytes that
could not be framed (``skipped``: the start of a stream whose beginning was not captured, or data
after a gap until the next plausible frame start). Bytes the capture lost are ``gap``.

Header parsing (:func:`parse_request_header`, :func:`parse_response_header`) follows the header
rules in :mod:`spark_kafkawire.protocol`.
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct
from typing import Callable, NamedTuple

from . import protocol

DEFAULT_MAX_FRAME = 100 << 20  # Kafka's socket.request.max.bytes default
_REQ = Struct("!hhi")
_I32 = Struct("!i")
_I16 = Struct("!h")


class Frame(NamedTuple):
    ts_ns: int  # time of the packet that carried the frame's first byte
    number: int  # that packet's number in the capture file
    offset: int  # stream offset of the size field
    size: int  # the int32 size field
    data: bytes  # header + body (shorter than size when incomplete)
    complete: bool


class HeaderError(ValueError):
    pass


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int | None  # None when (api_key, api_version) is not a known one
    body_offset: int


@dataclass(slots=True)
class Accounting:
    frames: int = 0
    frame_bytes: int = 0  # bytes of complete frames, size fields included
    partial_frames: int = 0
    partial_bytes: int = 0  # captured bytes of frames cut short
    skipped_bytes: int = 0  # captured bytes that could not be framed
    gap_bytes: int = 0  # bytes the capture lost (holes, snaplen cuts)
    gaps: int = 0

    @property
    def captured_bytes(self) -> int:
        return self.frame_bytes + self.partial_bytes + self.skipped_bytes


def read_uvarint(buf: bytes, pos: int, limit: int) -> tuple[int, int]:
    """Unsigned varint at pos (at most 5 bytes); returns (value, next position)."""
    value = shift = 0
    for i in range(pos, min(pos + 5, limit)):
        b = buf[i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i + 1
        shift += 7
    raise HeaderError("bad unsigned varint")


def skip_tagged_fields(buf: bytes, pos: int, limit: int) -> int:
    count, pos = read_uvarint(buf, pos, limit)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, limit)
        size, pos = read_uvarint(buf, pos, limit)
        pos += size
        if pos > limit:
            raise HeaderError("tagged field overruns the frame")
    return pos


def parse_request_header(data: bytes) -> RequestHeader:
    """Parse a request header (data starts after the size field)."""
    n = len(data)
    if n < 8:
        raise HeaderError(f"request header needs 8 bytes, frame has {n}")
    key, version, corr = _REQ.unpack_from(data)
    hv = protocol.request_header_version(key, version)
    if hv == 0:
        return RequestHeader(key, version, corr, None, 0, 8)
    # v1 and v2 (and unknown versions, read as v1): client_id with an int16 length
    if n < 10:
        raise HeaderError("request header ends before client_id")
    (ln,) = _I16.unpack_from(data, 8)
    pos = 10
    client_id = None
    if ln >= 0:
        if pos + ln > n:
            raise HeaderError(f"client_id length {ln} overruns the frame")
        try:
            client_id = data[pos : pos + ln].decode("utf-8")
        except UnicodeDecodeError:
            raise HeaderError("client_id is not UTF-8") from None
        pos += ln
    elif ln != -1:
        raise HeaderError(f"bad client_id length {ln}")
    if hv == 2:
        pos = skip_tagged_fields(data, pos, n)
    return RequestHeader(key, version, corr, client_id, hv, pos)


def parse_response_header(data: bytes, header_version: int | None) -> tuple[int, int]:
    """Return (correlation_id, body offset) of a response header."""
    if len(data) < 4:
        raise HeaderError(f"response header needs 4 bytes, frame has {len(data)}")
    (corr,) = _I32.unpack_from(data)
    pos = 4
    if header_version == 1:
        pos = skip_tagged_fields(data, pos, len(data))
    return corr, pos


def looks_like_request(data: bytes) -> bool:
    """A strict test that a frame body starts with a request header of a known API."""
    try:
        h = parse_request_header(data)
    except HeaderError:
        return False
    return h.header_version is not None and h.correlation_id >= 0


class Framer:
    """Sink of one TCP direction: cuts it into frames and hands them to ``on_frame``."""

    __slots__ = (
        "on_frame", "max_frame", "synced", "plausible", "acct",
        "pos", "buf", "target", "f_ts", "f_num", "f_off",
    )

    def __init__(self, on_frame: Callable[[Frame], None], max_frame: int = DEFAULT_MAX_FRAME,
                 synced: bool = True, plausible: Callable[[bytes], bool] | None = None):
        self.on_frame = on_frame
        self.max_frame = max_frame
        self.synced = synced  # False until a frame start is known (stream start not captured)
        self.plausible = plausible or (lambda b: True)
        self.acct = Accounting()
        self.pos = 0  # stream offset of the next byte to arrive
        self.buf = bytearray()  # the frame in progress, size field included
        self.target = 4  # bytes the frame in progress needs in all (4 until its size is known)
        self.f_ts = self.f_num = self.f_off = 0

    # -- Sink interface ------------------------------------------------------------------------
    def start(self) -> None:
        if self.pos == 0:
            self.synced = True

    def data(self, chunk: bytes, ts: int, number: int) -> None:
        n = len(chunk)
        base = self.pos
        self.pos += n
        acct = self.acct
        if not self.synced:
            # a frame may start here if the bytes look like one (nothing else tells)
            if not self._plausible_start(chunk):
                acct.skipped_bytes += n
                return
            self.synced = True
        buf = self.buf
        pos = 0
        while pos < n:
            if not buf:  # a frame starts at pos
                if n - pos >= 4:
                    size = _I32.unpack_from(chunk, pos)[0]
                    if not 0 <= size <= self.max_frame:
                        self._lose_sync(n - pos)
                        return
                    end = pos + 4 + size
                    if end <= n:  # the common case: the whole frame is in this chunk
                        acct.frames += 1
                        acct.frame_bytes += 4 + size
                        self.on_frame(Frame(ts, number, base + pos, size, chunk[pos + 4 : end], True))
                        pos = end
                        continue
                    self.target = 4 + size
                else:
                    self.target = 4
                self.f_ts, self.f_num, self.f_off = ts, number, base + pos
                buf += chunk[pos:]
                return
            # continue the frame in progress
            take = min(self.target - len(buf), n - pos)
            buf += chunk[pos : pos + take]
            pos += take
            if len(buf) < self.target:
                return
            if self.target == 4:  # its size field is now complete
                size = _I32.unpack_from(buf)[0]
                if not 0 <= size <= self.max_frame:
                    buf.clear()
                    self._lose_sync(4 + n - pos)
                    return
                self.target = 4 + size
                if size:
                    continue
            acct.frames += 1
            acct.frame_bytes += self.target
            self.on_frame(Frame(self.f_ts, self.f_num, self.f_off, self.target - 4, bytes(buf[4:]), True))
            buf.clear()
            self.target = 4

    def gap(self, nbytes: int, ts: int, number: int) -> None:
        self.acct.gap_bytes += nbytes
        self.acct.gaps += 1
        self._flush_partial()
        self.pos += nbytes
        self.synced = False  # where the next frame starts is no longer known

    def end(self) -> None:
        self._flush_partial()

    # -- internals -----------------------------------------------------------------------------
    def _plausible_start(self, chunk: bytes) -> bool:
        if len(chunk) < 8:
            return False
        size = _I32.unpack_from(chunk)[0]
        return 4 <= size <= self.max_frame and self.plausible(chunk[4 : 4 + min(size, 512)])

    def _flush_partial(self) -> None:
        if self.buf:
            b = bytes(self.buf)
            size = _I32.unpack_from(b)[0] if len(b) >= 4 else -1
            self.acct.partial_frames += 1
            self.acct.partial_bytes += len(b)
            self.on_frame(Frame(self.f_ts, self.f_num, self.f_off, size, b[4:], False))
            self.buf.clear()
            self.target = 4

    def _lose_sync(self, nbytes: int) -> None:
        """A frame start holds no valid size: skip what is left of the chunk and resync."""
        self.acct.skipped_bytes += nbytes
        self.synced = False
        self.target = 4
