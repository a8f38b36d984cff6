"""Byte streams -> Kafka frames.

A Kafka frame is an int32 big-endian size N followed by N bytes of header and body. The
:class:`Framer` is the sink of one TCP direction: it cuts the stream into frames, stamping each
with the time and packet number of the packet that carried its first byte. It keeps only the
frame in progress, never more than ``max_frame`` bytes.

Every byte the framer receives is accounted for (:class:`Accounting`): it ends up in a complete
frame, in a frame cut short by a gap or the end of the capture (``partial``), or among bytes that
could not be framed (``skipped``: the start of a stream whose beginning was not captured, data
after a gap until the next plausible frame start, or late copies of bytes the stream had already
passed). Bytes the capture lost are ``gap``. The reassembler counts the captured bytes on its own
(:attr:`spark_kafkawire.wire.halfstream.HalfStream.captured`), and the two must agree.

Frame headers are read by :mod:`spark_kafkawire.kafka.headers`.
"""

from __future__ import annotations

from struct import Struct
from typing import Callable, Final

from librt.strings import read_i32_be

from ..compiled import lane_module
from .boundary import HEADER_PEEK, MIN_FRAME, SCAN_WINDOW, find_boundary
from .halfstream import Sink


def _keep_heap_top() -> None:
    """Ask glibc's allocator to serve blocks of up to 4 MiB from the heap (M_MMAP_THRESHOLD) and to
    keep 4 MiB free at its top (M_TOP_PAD) instead of handing them back to the kernel at every free.
    A read allocates and frees frames of up to megabytes at a high rate (each whole frame is copied
    out of its buffer into bytes); left to itself, glibc maps such a block or trims the heap under
    it when it is freed, and the frame pays its page faults again. On the benchmark capture: 5,600
    page faults and a read of 0.086 s without these settings, 4,200 and 0.083 s with them (best of
    4); one build measured 35,000 without them. Larger blocks are still mapped (and grown by
    remapping). Elsewhere than glibc nothing is changed."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        if hasattr(libc, "gnu_get_libc_version"):
            libc.mallopt(-3, 4 << 20)  # M_MMAP_THRESHOLD (malloc.h)
            libc.mallopt(-2, 4 << 20)  # M_TOP_PAD
    except (OSError, AttributeError):
        pass


_keep_heap_top()
DEFAULT_MAX_FRAME: Final = 100 << 20  # Kafka's socket.request.max.bytes default
_I32 = Struct("!i")


def _append_py(buf: bytearray, chunk: bytes, pos: int, n: int, target: int) -> None:
    """chunk[pos:pos + n] joins the frame in progress ``buf`` (``target`` bytes in all)."""
    buf += chunk if pos == 0 and n == len(chunk) else chunk[pos : pos + n]


#: where the fast lane is built, its append: the frame's buffer sized for the whole frame (no copy
#: as a large frame grows, which Python's bytearray cannot promise)
_append: Final[Callable[[bytearray, bytes, int, int, int], None]] = \
    lane_module.append if lane_module is not None else _append_py


class Frame:
    """One frame of a stream, as the Framer hands it on. (A plain class, not a named tuple:
    compiled, it is made and read as a struct, where a named tuple is made through Python calls.)"""

    __slots__ = ("ts_ns", "number", "offset", "size", "data", "complete", "last_ts")

    def __init__(self, ts_ns: int, number: int, offset: int, size: int, data: bytes, complete: bool,
                 last_ts: int | None = None):
        self.ts_ns = ts_ns  # time of the packet that carried the frame's first byte
        self.number = number  # that packet's number in the capture file
        self.offset = offset  # stream offset of the size field
        self.size = size  # the int32 size field
        self.data = data  # header + body (shorter than size when incomplete)
        self.complete = complete
        # a whole frame's: when the last of its bytes arrived (the frame was whole from then: a hole
        # filled late makes it the filler's time, not that of the packet that carried the last byte)
        self.last_ts = last_ts

    def fields(self) -> tuple[int, int, int, int, bytes, bool, int | None]:
        """Every field, in the order above."""
        return self.ts_ns, self.number, self.offset, self.size, self.data, self.complete, self.last_ts

    def __repr__(self) -> str:
        return "Frame(ts_ns=%d, number=%d, offset=%d, size=%d, %d bytes, complete=%s, last_ts=%s)" % (
            self.ts_ns, self.number, self.offset, self.size, len(self.data), self.complete, self.last_ts)


class Accounting:
    """What became of a direction's bytes."""

    __slots__ = ("frames", "frame_bytes", "partial_frames", "partial_bytes", "skipped_bytes", "gap_bytes", "gaps")

    def __init__(self) -> None:
        self.frames = 0  # complete frames
        self.frame_bytes = 0  # bytes of complete frames, size fields included
        self.partial_frames = 0
        self.partial_bytes = 0  # captured bytes of frames cut short
        self.skipped_bytes = 0  # captured bytes that could not be framed
        self.gap_bytes = 0  # bytes the capture lost (holes, snaplen cuts)
        self.gaps = 0




class Resync(Sink):
    """The part of a Framer that finds frame starts: the bytes held while out of sync (at most
    SCAN_WINDOW), the search over them (find_boundary) and the bookkeeping of what it passes over
    (counted as skipped). A Framer is a Resync with the frame cutting and the sink interface."""

    __slots__ = ("pos", "target", "rest_to", "max_frame", "on_frame", "acct", "buf", "synced", "first", "disabled",
                 "f_ts", "f_num", "f_off", "f_last", "plausible", "at_start", "resyncs", "scan", "scan_base",
                 "scan_marks", "scan_from")
    # the framing state (set by the Framer; the scan reads and moves max_frame, synced, disabled,
    # target and acct)
    pos: int  # stream offset of the next byte to arrive
    target: int  # bytes the frame in progress needs in all
    rest_to: int  # end of a frame cut by a gap
    max_frame: int  # largest frame accepted
    on_frame: Callable[[Frame], None]  # called with each Frame
    acct: Accounting  # the direction's Accounting
    buf: bytearray  # the frame in progress, size field included
    synced: bool  # frame starts are known
    first: bool  # no byte seen yet
    disabled: bool  # not Kafka: every byte is skipped
    f_ts: int  # time of the frame in progress
    f_last: int  # the latest arrival among its bytes so far
    f_num: int  # packet number of the frame in progress
    f_off: int  # stream offset of the frame in progress
    # the scan's own
    plausible: Callable[[bytes, bool], int]
    at_start: bool  # the next byte is the stream's first (SYN seen)
    resyncs: int  # frame boundaries found by scanning
    scan: bytearray  # bytes held while looking for a frame boundary
    scan_base: int  # stream offset of scan[0]
    scan_marks: list[tuple[int, int, int]]  # (index in scan, ts, packet number) per chunk
    scan_from: int  # first index of scan not yet ruled out

    def cut(self, chunk: bytes, ts: int, number: int, base: int) -> None:  # the Framer's
        raise NotImplementedError

    def _lose_sync(self, pieces: list[tuple[bytes, int, int, int]]) -> None:
        """A frame start holds no valid size: look for the next boundary after it."""
        self.synced = False
        self.target = 4
        self._drop_scan()
        for data, ts, number, off in pieces:
            self._hold(data, ts, number, off)
        self.scan_from = 1  # the offset that failed
        self._find_boundary()

    # -- finding a frame boundary --------------------------------------------------------------
    def _scan(self, chunk: bytes, ts: int, number: int, base: int) -> None:
        if not self.scan and not self.scan_from and len(chunk) >= 8:
            # nothing held and the chunk is one whole frame with a plausible header (a connection
            # seen from its middle, a request per packet): what _find_boundary concludes at once
            size: int = read_i32_be(chunk, 0)
            if len(chunk) == 4 + size and MIN_FRAME <= size <= self.max_frame:
                at_start = self.at_start
                if self.plausible(chunk[4 : 4 + min(size, HEADER_PEEK)], not at_start):
                    self.at_start = False
                    if not at_start:
                        self.resyncs += 1
                    self.synced = True
                    self.cut(chunk, ts, number, base)
                    return
        self._hold(chunk, ts, number, base)
        self._find_boundary()

    def _hold(self, data: bytes, ts: int, number: int, off: int) -> None:
        if not data:
            return
        if not self.scan:
            self.scan_base = off
            self.scan_marks.clear()
        self.scan_marks.append((len(self.scan), ts, number))
        self.scan += data

    def _find_boundary(self, final: bool = False) -> None:
        """Look for a frame start in the held bytes (find_boundary), then frame from it. ``final``:
        no more bytes will follow (a gap or the end): a candidate with a plausible header is taken
        without the chaining check."""
        scan = self.scan
        n = len(scan)
        found, i, self.at_start = find_boundary(scan, self.scan_from, self.at_start, self.scan_marks,
                                                self.max_frame, self.plausible, final)
        synced_at_start = self.at_start and found == 0
        if found is not None or i > 0:
            self.at_start = False
        if found is None:
            skip = i  # offsets before i are ruled out; from i on, more bytes are needed
            if n - skip > SCAN_WINDOW:  # waiting on a candidate too long: give it up
                skip = n - SCAN_WINDOW
            self._skip_scan(skip)
            self.scan_from = max(0, i - skip)
            return
        self._skip_scan(found)
        if not synced_at_start:
            self.resyncs += 1
        pieces = self._scan_pieces()
        self._drop_scan(count=False)
        self.synced = True
        for data, ts, number, off in pieces:
            if self.disabled:
                self.acct.skipped_bytes += len(data)
            elif self.synced:
                self.cut(data, ts, number, off)
            else:
                self._hold(data, ts, number, off)
        if not self.synced and self.scan:
            self._find_boundary()

    def _scan_pieces(self) -> list[tuple[bytes, int, int, int]]:
        scan, marks = self.scan, self.scan_marks
        out = []
        for k, (start, ts, number) in enumerate(marks):
            stop = marks[k + 1][0] if k + 1 < len(marks) else len(scan)
            if stop > start:
                out.append((bytes(scan[start:stop]), ts, number, self.scan_base + start))
        return out

    def _skip_scan(self, count: int) -> None:
        """Pass over the first ``count`` held bytes: they are not in any frame."""
        if count <= 0:
            return
        self.acct.skipped_bytes += count
        del self.scan[:count]
        self.scan_base += count
        marks = []
        for start, ts, number in self.scan_marks:
            start -= count
            if start <= 0:
                marks = [(0, ts, number)]
            else:
                marks.append((start, ts, number))
        self.scan_marks = marks if self.scan else []

    def _drop_scan(self, count: bool = True) -> None:
        if count:
            self.acct.skipped_bytes += len(self.scan)
        self.scan = bytearray()
        self.scan_marks = []
        self.scan_from = 0


class Framer(Resync):
    """Sink of one TCP direction: cuts it into frames and hands them to ``on_frame``.

    Where a frame starts is known at the start of a stream (SYN captured). Elsewhere - a stream
    whose start is not in the capture, bytes after a gap, a size field out of bounds - the framer
    scans candidate offsets: a size within bounds, a header the ``plausible`` test accepts
    (``plausible(header_bytes, strict)``), confirmed by chaining: the candidate frame ends exactly
    where the captured bytes end, or the next frame's size and header are plausible too. A frame
    too large to wait for (over SCAN_WINDOW) is accepted on its header alone. Until then at most
    SCAN_WINDOW bytes are held; what is passed over counts as skipped.
    """

    # (the framing state and the scan's fields are Resync's)
    __slots__ = ("on_first",)

    def __init__(self, on_frame: Callable[[Frame], None], max_frame: int = DEFAULT_MAX_FRAME,
                 synced: bool = True, plausible: Callable[[bytes, bool], int] | None = None,
                 on_first: Callable[[bytes, int, int], bool] | None = None):
        self.on_frame = on_frame
        self.max_frame = max_frame
        self.synced = synced  # False until a frame start is known (stream start not captured)
        self.plausible = plausible or (lambda b, strict: True)
        #: shown the first chunk of the stream (protocol detection); True: it took the chunk and the
        #: stream (the framer is no longer the direction's sink)
        self.on_first = on_first
        self.first = True
        self.disabled = False  # not Kafka (e.g. TLS): every byte is skipped
        self.at_start = False  # the next byte is the stream's first (SYN seen)
        self.resyncs = 0  # frame boundaries found by scanning
        self.acct = Accounting()
        self.pos = 0  # stream offset of the next byte to arrive
        self.buf = bytearray()  # the frame in progress, size field included
        self.target = 4  # bytes the frame in progress needs in all (4 until its size is known)
        self.f_ts = self.f_num = self.f_off = self.f_last = 0
        self.scan = bytearray()  # bytes held while looking for a frame boundary
        self.scan_base = 0  # stream offset of scan[0]
        self.scan_marks = []  # (index in scan, ts, packet number) per chunk
        self.scan_from = 0  # first index of scan not yet ruled out
        self.rest_to = 0  # bytes before this stream offset belong to a frame cut by a gap (reported)

    # -- Sink interface ------------------------------------------------------------------------
    def start(self) -> None:
        if self.pos == 0:
            self.synced = False
            self.at_start = True

    def data(self, chunk: bytes, ts: int, number: int, size: int = -1) -> None:
        """The next bytes: ``chunk``, or its first ``size`` only (a TLS 1.3 record's plaintext, uncopied)."""
        n = size if 0 <= size < len(chunk) else len(chunk)
        if self.first:
            self.first = False
            if n < len(chunk):
                chunk = chunk[:n]
            if self.on_first is not None and self.on_first(chunk, ts, number):
                return  # another sink took the chunk, and the stream from here on
        if self.rest_to:  # the rest of a frame a gap cut: its bytes go to that partial frame
            take = min(n, self.rest_to - self.pos)
            self.acct.partial_bytes += take
            self.pos += take
            if take == n:
                if self.pos == self.rest_to:
                    self.rest_to = 0
                return
            self.rest_to = 0
            chunk = chunk[take:n]
            n -= take
        buf = self.buf
        if buf and n < self.target - len(buf) and self.target > 4:  # inside a large frame: keep it
            if ts > self.f_last:
                self.f_last = ts
            _append(buf, chunk, 0, n, self.target)
            self.pos += n
            return
        if n < len(chunk):
            chunk = chunk[:n]
        base = self.pos
        self.pos += n
        if self.disabled:
            self.acct.skipped_bytes += n
        elif self.synced:
            self.cut(chunk, ts, number, base)
        else:
            self._scan(chunk, ts, number, base)

    def gap(self, nbytes: int, ts: int, number: int) -> None:
        self.acct.gap_bytes += nbytes
        self.acct.gaps += 1
        # inside a frame whose size field was captured, the next frame's start is known exactly:
        # the rest of this frame is passed over and framing resumes at its end, with no scan
        end = self.rest_to or (self.f_off + self.target if self.synced and self.buf and self.target > 4 else 0)
        if end and self.pos + nbytes <= end and not self.disabled:
            self._flush_partial()
            self.pos += nbytes
            self.rest_to = end if self.pos < end else 0
            self.at_start = False
            return
        self.rest_to = 0
        if not self.synced and self.scan and not self.disabled:
            self._find_boundary(final=True)  # a frame the gap cuts short still shows its header
        self._flush_partial()
        self._drop_scan()
        self.pos += nbytes
        self.synced = False  # where the next frame starts is no longer known
        self.at_start = False

    def late(self, nbytes: int, reported: int, ts: int, number: int) -> None:
        """Captured bytes that arrived after the stream went past them: in no frame."""
        self.acct.skipped_bytes += nbytes
        self.acct.gap_bytes -= reported

    def end(self) -> None:
        if not self.synced and self.scan and not self.disabled:
            self._find_boundary(final=True)
        self._flush_partial()
        self._drop_scan()

    def holds_bytes_from(self, t_ns: int) -> bool:
        """Is a frame, or a stretch being scanned for a boundary, of a packet at or before ``t_ns``
        still being put together?"""
        return bool(self.buf) and self.f_ts <= t_ns or any(ts <= t_ns for _i, ts, _n in self.scan_marks)

    def disable(self) -> None:
        """Stop framing: this stream is not Kafka. A frame in progress is no frame: its bytes are
        skipped, and it is not handed on."""
        self.disabled = True
        self.acct.skipped_bytes += len(self.buf)
        self.buf.clear()
        self.target = 4
        self._drop_scan()

    def received(self) -> tuple[int, int]:
        """(captured, lost) bytes so far: what a disabled framer was given before another sink took
        its stream."""
        a = self.acct
        return a.frame_bytes + a.partial_bytes + a.skipped_bytes + len(self.buf) + len(self.scan), a.gap_bytes

    # -- framing -------------------------------------------------------------------------------
    def cut(self, chunk: bytes, ts: int, number: int, base: int) -> None:
        """Cut frames from a chunk at stream offset ``base``, where frame starts are known."""
        n = len(chunk)
        acct = self.acct
        buf = self.buf
        pos = 0
        while pos < n:
            if not buf:  # a frame starts at pos
                if n - pos >= 4:
                    size: int = read_i32_be(chunk, pos)
                    if not MIN_FRAME <= size <= self.max_frame:
                        self._lose_sync([(chunk[pos:], ts, number, base + pos)])
                        return
                    end = pos + 4 + size
                    if end <= n:  # the common case: the whole frame is in this chunk
                        acct.frames += 1
                        acct.frame_bytes += 4 + size
                        self.on_frame(Frame(ts, number, base + pos, size, chunk[pos + 4 : end], True, ts))
                        pos = end
                        continue
                    self.target = 4 + size
                else:
                    self.target = 4
                self.f_ts, self.f_num, self.f_off = ts, number, base + pos
                self.f_last = ts
                _append(buf, chunk, pos, n - pos, self.target)
                return
            # continue the frame in progress
            if ts > self.f_last:
                self.f_last = ts
            take = min(self.target - len(buf), n - pos)
            _append(buf, chunk, pos, take, self.target)
            pos += take
            if len(buf) < self.target:
                return
            if self.target == 4:  # its size field is now complete
                size = _I32.unpack_from(buf)[0]
                if not MIN_FRAME <= size <= self.max_frame:
                    held = bytes(buf)
                    buf.clear()
                    self._lose_sync([(held, self.f_ts, self.f_num, self.f_off), (chunk[pos:], ts, number, base + pos)])
                    return
                self.target = 4 + size
                continue
            acct.frames += 1
            acct.frame_bytes += self.target
            # the frame's data is bytes, as every frame's is (the body reader reads bytes in place,
            # compiled: one copy of the frame), and the framer takes a new buffer
            data = bytes(memoryview(buf)[4:])
            self.buf = buf = bytearray()
            self.target = 4
            self.on_frame(Frame(self.f_ts, self.f_num, self.f_off, len(data), data, True, self.f_last))

    def _flush_partial(self) -> None:
        if self.buf:
            b = bytes(self.buf)
            size = _I32.unpack_from(b)[0] if len(b) >= 4 else -1
            self.acct.partial_frames += 1
            self.acct.partial_bytes += len(b)
            self.on_frame(Frame(self.f_ts, self.f_num, self.f_off, size, b[4:], False, None))
            self.buf.clear()
            self.target = 4
