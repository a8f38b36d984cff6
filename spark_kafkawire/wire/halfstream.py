"""One direction of a TCP connection: its bytes reassembled by sequence number into a stream
offset space and handed to its sink in order (the rules are tcp.py's; this is the per-direction
part of them, and the sink interface the framer and the TLS stages implement)."""

from __future__ import annotations

from bisect import bisect_left, insort
from operator import itemgetter
from typing import Final, NamedTuple

from mypy_extensions import mypyc_attr

MASK32: Final = 0xFFFFFFFF
MAX_HOLES: Final = 1024  # holes remembered per direction, for late copies of lost bytes
#: the holes of a direction before its first gap: everything before its first byte (one list shared
#: by every direction until then, never changed: a direction's first gap makes it a list of its own)
BEFORE_START: Final[list[list]] = [[-(1 << 62), 0, False]]
_offset_of = itemgetter(0)  # a queued segment's stream offset


class Queued(NamedTuple):
    """An out-of-order piece of a segment, waiting for the bytes before it."""

    off: int  # stream offset
    data: bytes  # the captured bytes (fewer than ``wire`` where a snaplen cut the packet)
    wire: int  # bytes the piece spans in the stream
    ts: int
    number: int


@mypyc_attr(allow_interpreted_subclasses=True)
class Sink:
    """Where one direction's bytes go (a Framer, a TLS direction, the TLS guess). A base class
    rather than a protocol: where the stages are compiled, HalfStream calls a compiled sink's
    methods directly, with its numbers unboxed, instead of looking each one up by name and boxing
    its arguments (about a tenth of a packet's cost). A sink written in Python subclasses it too."""

    __slots__ = ()

    def start(self) -> None:  # the next byte is the first of the stream (SYN seen)
        pass

    def data(self, chunk: bytes, ts_ns: int, number: int) -> None:
        raise NotImplementedError

    def gap(self, nbytes: int, ts_ns: int, number: int) -> None:
        raise NotImplementedError

    # a late copy of bytes earlier reported as lost (or before the stream's first byte): captured,
    # but too late for the stream; ``reported`` of them had been counted as a gap
    def late(self, nbytes: int, reported: int, ts_ns: int, number: int) -> None:
        pass

    def end(self) -> None:
        pass


def fill_holes(holes: list[list], start: int, end: int) -> tuple[list[list], int, int] | None:
    """Holes ([start, end, reported] stream ranges never captured) less [start, end): the holes
    left, the bytes that were in holes and how many of those were in reported gaps; None when
    [start, end) meets no hole."""
    if end <= start:
        return None
    got = reported = 0
    kept: list[list] = []
    for a, b, rep in holes:
        lo, hi = max(a, start), min(b, end)
        if lo >= hi:
            kept.append([a, b, rep])
            continue
        got += hi - lo
        if rep:
            reported += hi - lo
        if a < lo:
            kept.append([a, lo, rep])
        if hi < b:
            kept.append([hi, b, rep])
    return (kept, got, reported) if got else None


class HalfStream:
    """One direction of one connection.

    ``captured`` counts the distinct TCP payload bytes the capture holds for this direction
    (sequence space seen, every byte once, whatever the order and copies), independently of what
    the sink makes of them: the sink's own accounting is checked against it. Everything below
    ``nxt`` was either delivered or is a hole (``holes``: lost by the capture, or before the first
    byte seen); a late copy of bytes in a hole is handed to the sink's ``late``.
    """

    __slots__ = ("nxt", "captured", "sink", "base", "pending", "last_ts", "pending_bytes", "max_pending", "fin",
                 "fin_off", "holes", "started")

    def __init__(self, sink: Sink | None, max_pending: int):
        # given when the connection first carries payload (see Reassembler._open): set before any
        # data, so the hot paths call it unchecked (and base likewise, set by the first segment)
        self.sink = sink  # where the direction's bytes go (a Framer, a TLS direction)
        self.started = False  # its SYN was seen
        self.base: int | None = None  # sequence number of stream offset 0
        self.nxt = 0  # stream offset of the next byte to deliver
        self.pending: list[Queued] = []  # sorted by offset, never overlapping
        self.pending_bytes = 0
        self.max_pending = max_pending
        self.fin = False
        self.fin_off: int | None = None  # stream offset of the FIN: the stream ends there
        self.captured = 0
        # stream offset ranges below nxt never captured: [start, end, reported as a gap]; the first
        # is everything before offset 0 (before the first byte seen)
        self.holes: list[list] = BEFORE_START
        self.last_ts = 0

    def start(self, isn_next: int) -> None:
        if self.base is None:
            self.base = isn_next & MASK32
            self.started = True
            if self.sink is not None:
                self.sink.start()

    def offset(self, seq: int) -> int:
        """Stream offset of a sequence number, taking the one nearest to what comes next."""
        delta = (seq - self.base - self.nxt) & MASK32  # type: ignore[operator]
        if delta >= 0x80000000:
            delta -= 0x100000000
        return self.nxt + delta

    def feed(self, seq: int, payload: bytes, wire_len: int, ts: int, number: int) -> None:
        if self.base is None:
            self.base = seq
        self.last_ts = ts
        if not self.pending and (seq - self.base - self.nxt) & MASK32 == 0 and wire_len == len(payload):
            self.captured += wire_len  # the common case: the next bytes, in order, all captured
            sink: Sink = self.sink  # type: ignore[assignment]  # (set by then; a Sink: called directly where compiled)
            sink.data(payload, ts, number)
            self.nxt += wire_len
            return
        off = self.offset(seq)
        end = off + wire_len
        if off < self.nxt:  # bytes already delivered, or late copies of bytes in a hole
            late = self._fill_holes(off, min(off + len(payload), self.nxt))
            if late:
                self.captured += late[0]
                self.sink.late(late[0], late[1], ts, number)  # type: ignore[union-attr]
            if end <= self.nxt:
                return
            cut = self.nxt - off  # keep only the new tail
            payload = payload[cut:]
            wire_len -= cut
            off = self.nxt
        if off == self.nxt and not (self.pending and self.pending[0].off < end):
            self.captured += len(payload)
            self._deliver(payload, wire_len, ts, number)
            if self.pending:
                self._drain()
        elif off == self.nxt:
            # the next bytes, but reaching into queued ones: those were here first and win, and a
            # snaplen cut over them is no gap (they were captured); only what they leave is new
            self._queue(off, payload, wire_len, ts, number)
            self._drain()
        else:
            self._queue(off, payload, wire_len, ts, number)
            if self.pending_bytes > self.max_pending:
                self._skip_hole()

    def holds_bytes_from(self, t_ns: int) -> bool:
        """Does a segment of a packet at or before ``t_ns`` wait out of order?"""
        return any(q.ts <= t_ns for q in self.pending)

    def novel(self, seq: int, caplen: int) -> bool:
        """Would captured bytes at seq be new (not delivered before)? For an ended connection."""
        if self.base is None or not caplen:
            return bool(caplen)
        off = self.offset(seq)
        end = off + caplen
        return end > self.nxt or any(a < end and off < b for a, b, _r in self.holes)

    def _fill_holes(self, start: int, end: int) -> tuple[int, int] | None:
        """Take [start, end) out of the holes: returns (bytes that were in holes, of which in
        reported gaps), or None."""
        filled = fill_holes(self.holes, start, end)
        if filled is None:
            return None
        self.holes, got, reported = filled
        return got, reported

    def _hole(self, start: int, end: int) -> None:
        if self.holes is BEFORE_START:
            self.holes = [list(h) for h in BEFORE_START]
        self.holes.append([start, end, True])
        if len(self.holes) > MAX_HOLES:  # forget the oldest gap: a late copy of it counts as a duplicate
            del self.holes[1]

    def _queue(self, off: int, payload: bytes, wire_len: int, ts: int, number: int) -> None:
        """Queue the parts of a segment that no queued segment covers yet (first copy wins).

        Queued pieces never overlap and stay sorted by offset, so only the pieces around the new
        one's place are looked at: logarithmic per segment, constant for segments in order."""
        pending = self.pending
        end = off + wire_len
        i = bisect_left(pending, off, key=_offset_of)
        if i and pending[i - 1].off + pending[i - 1].wire > off:
            i -= 1
        pieces = []
        a = off
        while i < len(pending) and pending[i].off < end:
            q_off, q_end = pending[i].off, pending[i].off + pending[i].wire
            if q_off > a:
                pieces.append((a, q_off))
            if q_end > a:
                a = q_end
            i += 1
        if a < end:
            pieces.append((a, end))
        for a, b in pieces:
            piece = payload[a - off : b - off]
            self.captured += len(piece)
            insort(pending, Queued(a, piece, b - a, ts, number), key=_offset_of)
            self.pending_bytes += b - a

    def _deliver(self, payload: bytes, wire_len: int, ts: int, number: int) -> None:
        if payload:
            self.sink.data(payload, ts, number)  # type: ignore[union-attr]
        if wire_len > len(payload):  # cut by the snaplen
            self._hole(self.nxt + len(payload), self.nxt + wire_len)
            self.sink.gap(wire_len - len(payload), ts, number)  # type: ignore[union-attr]
        self.nxt += wire_len

    def _drain(self) -> None:
        pending = self.pending
        i = 0
        while i < len(pending) and pending[i].off <= self.nxt:
            off, payload, wire_len, ts, number = pending[i]
            i += 1
            self.pending_bytes -= wire_len
            if off + wire_len <= self.nxt:
                continue
            if off < self.nxt:
                cut = self.nxt - off
                payload = payload[cut:]
                wire_len -= cut
            self._deliver(payload, wire_len, ts, number)
        del pending[:i]

    def acked(self, ack: int) -> None:
        """The receiver acknowledged bytes up to ``ack``: a hole it covers was lost by the capture,
        not by the network (no retransmission will fill it), so the bytes queued after it go on."""
        if self.base is None:
            return
        delta = (ack - self.base - self.nxt) & MASK32
        if delta >= 0x80000000:
            return  # an old acknowledgement
        ack_off = self.nxt + delta
        while self.pending and self.pending[0].off <= ack_off and self.nxt < ack_off:
            self._skip_hole()

    def _skip_hole(self) -> None:
        first = self.pending[0]
        self._gap_to(first.off, first.ts, first.number)
        self._drain()

    def _gap_to(self, off: int, ts: int, number: int) -> None:
        self._hole(self.nxt, off)
        self.sink.gap(off - self.nxt, ts, number)  # type: ignore[union-attr]
        self.nxt = off

    def close(self) -> None:
        while self.pending:
            self._skip_hole()
        if self.sink is None:
            return
        if self.fin_off is not None and self.fin_off > self.nxt:  # a tail lost before the FIN
            self._gap_to(self.fin_off, self.last_ts, 0)
        self.sink.end()
