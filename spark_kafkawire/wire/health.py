"""TCP health of one connection, as tshark's TCP analysis reads it: segments sent again (and those
only out of order), zero windows and the time spent at them, and round trips from a data segment
to the acknowledgement of it.

Every segment of a connection is an event here (``Health.segment``), in capture order, each
direction's state read and moved as Wireshark's analysis does (tcp.analysis.*).

Rules, per segment of direction d (the other direction is r):

* **sent again**: a segment with payload starting below the highest sequence number d sent before
  (a keep-alive, one byte or none just below it, excepted). A whole copy of bytes already seen (none
  of them in a hole the capture saw open: bytes skipped when a later segment came first) is sent
  again, whenever it comes. One that fills a hole is a *fast retransmission* where r
  sent two or more duplicate ACKs for exactly its sequence number, the last less than 20 ms before;
  else *out of order* where r had already acknowledged all its bytes (the capture point saw it
  after the receiver had it) or it came within the connection's first round trip (3 ms if the
  handshake is not captured) of the segment that reached the highest sequence number; else a
  retransmission (its first copy was lost before the capture point). tshark calls a copy that
  comes after later data out of order, and a late hole filler already acknowledged spurious: here
  a segment sent again is one the capture shows twice, or one whose bytes it shows were lost. Out of
  order is counted apart (``out_of_order``); the others are ``resent`` (segments and bytes).
* **zero window**: a segment advertising a window of 0, none of SYN, FIN and RST set; the time at
  zero window runs from the first such segment of d to d's next segment advertising a window
  again (or the connection's last packet).
* **round trip**: an ACK of r's that acknowledges exactly the end of a data segment of d (the first
  copy of it not yet acknowledged: a segment sent again after its bytes were acknowledged is timed
  anew, as tshark does) is a sample of d's round trip, from that segment to the ACK, as the capture
  point sees it (tshark's tcp.analysis.ack_rtt). The least round trip (least_rtt) leaves out, by
  Karn's rule, the ACKs of bytes in flight when a copy was sent (see Side.wait). A keep-alive's byte
  is not data here. Up to
  MAX_SAMPLES are kept per direction; past that every other one, so the median is over samples
  spread evenly through the connection.
* a **duplicate ACK** (for fast retransmissions): no payload, the same window (not 0), sequence and
  acknowledgement numbers as d's last, none of SYN, FIN, RST.
* **lost on the path**: a segment of d's is known lost *beyond* the capture point when the capture
  shows its bytes twice and the receiver had not acknowledged them (the first copy never arrived),
  and lost *before* it when a segment fills a hole after later data (as above), or from the IPv4
  identification field: most stacks (Linux, the BSDs) number each connection's packets one by one,
  so a number skipped (by at most MAX_ID_GAP) is a packet that never reached the capture point.
  Those numbers are trusted once d's packets have stepped by exactly one at least 80% of the time
  over MIN_ID_STEPS steps (a host-wide or random numbering never does); a step after a packet
  larger than an Ethernet frame's payload (segmentation offload) is not counted, and a packet that
  comes late with a lower number fills a gap it opened. Where trusted, the numbers count the losses
  before the capture point (hole fillers among them; a response lost whole, which shows no hole, too);
  else the hole fillers do. A packet the capture itself dropped is a skipped number too: what the
  capture lost is told apart by its bytes (``gap_bytes``), not here. A copy counted lost is taken
  back when the receiver reports its bytes received twice (a D-SACK block, RFC 2883): the ACK was
  lost, not the data.

Memory is bounded per connection: MAX_UNACKED data segments waiting for their ACK, MAX_SAMPLES round
trips, MAX_RESENT segments sent again (for the exchange rows) and MAX_HOLES holes per direction. (Each direction's
state is a plain class of integers, with its IPv4 numbering in one more and its holes in another
made at the first hole, their lists made at first use: compiled by mypyc, an event reads and moves
native integers, and a connection of one segment costs five small objects.)
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

from .loss import MAX_ID_GAP, Holes, Numbering

MAX_UNACKED: Final = 4096
MAX_SAMPLES: Final = 1 << 16
MAX_RESENT: Final = 256
#: the window of the least round trip from data to ACK: the least of the current window and the one
#: before. TCP's own min-RTT filter keeps 10 s; a request-response connection's ACKs mostly wait for
#: the receiver's next data or its delayed-ACK timer, and a prompt one may come only every few seconds
RTT_WINDOW_NS: Final[i64] = 120_000_000_000
#: samples the windows must hold before their least is taken (one ACK may have waited for an answer)
MIN_RTT_SAMPLES: Final[i64] = 3
FAST_WINDOW_NS: Final[i64] = 20_000_000
_TIME_BOUND: Final = 1 << 61
DEFAULT_OOO_NS: Final[i64] = 3_000_000
_FIN: Final[i64] = 0x01
_SYN: Final[i64] = 0x02
_RST: Final[i64] = 0x04
_ACK: Final[i64] = 0x10
_MASK: Final[i64] = 0xFFFFFFFF
#: marks a segment's end (Side.ends) whose ACK is no sample of the path: Karn's rule (Side.wait)
_AMBIGUOUS: Final[i64] = 1 << 40
_HALF: Final[i64] = 0x80000000
#: what a segment with payload is (for the exchange rows, only segments sent again are kept)
NEW: Final = 0
SENT_AGAIN: Final = 1
OUT_OF_ORDER: Final = 2
FILLED: Final = 3  # (a late fill of a hole: lost before the capture point, which saw it once)


def _bounded(ts: int) -> i64:
    """A time (ns) within +-2**61 (73 years from 1970): a damaged file's time beyond is taken as the
    bound, so that differences of times stay within 64 bits."""
    return max(-_TIME_BOUND, min(_TIME_BOUND, ts))


def _before(a: i64, b: i64) -> bool:
    """Sequence number a before b (32-bit wraparound)."""
    return ((a - b) & _MASK) >= _HALF


class Side:
    """What one direction sent and acknowledged so far."""

    __slots__ = ("nextseq", "nextseq_ts", "seen", "lastack", "lastack_ts", "acked", "window", "dupacks",
                 "zero_since", "zero_ns", "zero_windows", "ends", "sent", "samples", "stride", "skip",
                 "resent", "resent_bytes", "out_of_order", "resent_at", "holes", "win_min", "win_start",
                 "prev_min", "win_n", "prev_n", "lost_after", "lost_before", "lost_bytes", "ids", "data_segments")

    def __init__(self) -> None:
        self.nextseq: i64 = 0  # the highest sequence number sent, plus one (seq + length)
        self.nextseq_ts: i64 = 0  # when it was reached
        self.seen = False
        self.lastack: i64 = 0
        self.lastack_ts: i64 = 0
        self.acked = False  # an ACK was seen
        self.window: i64 = -1
        self.dupacks: i64 = 0
        self.zero_since: i64 = -1  # at zero window since (ns), or -1
        self.zero_ns: i64 = 0
        self.zero_windows: i64 = 0
        # data not acknowledged yet: end sequence numbers (in sequence order) and the times they were sent
        self.ends: list[int] | None = None
        self.sent: list[int] | None = None
        self.samples: list[int] | None = None
        self.stride: i64 = 1  # keep every stride-th sample (doubled as MAX_SAMPLES is reached)
        self.skip: i64 = 0
        self.resent: i64 = 0
        self.resent_bytes: i64 = 0
        self.out_of_order: i64 = 0
        # segments the capture shows were lost on the path: beyond the capture point (seen twice), before
        # it (filling a hole after later data), and the bytes of both
        self.lost_after: i64 = 0
        self.lost_before: i64 = 0
        self.lost_bytes: i64 = 0
        self.data_segments: i64 = 0  # segments with payload (keep-alives aside), copies included
        self.ids = Numbering()  # its IPv4 identification
        # (sequence number, length, when sent if its first copy was lost else -1, 0 / 1 / 2: not lost,
        # lost beyond the capture point, before it), the last ones
        self.resent_at: list[tuple[int, int, int, int]] | None = None
        self.holes: Holes | None = None  # made at the first hole: most connections never have one
        # the least round trip in the current window (from win_start) and in the window before; -1: none
        self.win_min: i64 = -1
        self.win_start: i64 = 0
        self.prev_min: i64 = -1
        self.win_n: i64 = 0  # samples in the current window and in the one before
        self.prev_n: i64 = 0

    def least_rtt(self) -> i64:
        """The least round trip from this direction's data to the other's ACK over the last one to
        two RTT_WINDOW_NS of samples (ns), as TCP's windowed min-RTT filter keeps it (Karn's rule:
        see wait); -1 with fewer than MIN_RTT_SAMPLES samples there."""
        if self.win_n + self.prev_n < MIN_RTT_SAMPLES:
            return -1
        a = self.win_min
        b = self.prev_min
        if a < 0:
            return b
        if b < 0:
            return a
        return a if a < b else b

    def ahead(self, seq: i64, length: i64) -> int:
        """A segment that does not start below the highest sequence number: new data, and the bytes
        it skipped (starting past that number) a hole until they come. (A pure ACK past it, too:
        the sender sent bytes the capture has not seen.)"""
        if self.seen and _before(self.nextseq, seq):
            holes = self.holes
            if holes is None:
                holes = self.holes = Holes()
            holes.hole(self.nextseq, seq)
        return NEW

    def wait(self, end: i64, ts: i64, new: bool, once: bool = True) -> None:
        """A data segment waits for its ACK, unless a copy of it already does (the first copy is
        timed). New data ends past everything before it; a copy is put in its place. Karn's rule for
        the least round trip: what is in flight when a copy or a late fill is sent is acknowledged
        once the receiver has the bytes before it too, not when it got its own, and a copy's ACK may
        answer either copy: their ACKs are still samples (tshark's ack_rtt), not of the path. A fill
        the capture saw ``once`` (its first copy lost before the capture point) is timed as new data."""
        ends = self.ends
        sent = self.sent
        if ends is None or sent is None:
            self.ends = [end if new or once else end | _AMBIGUOUS]
            self.sent = [ts]
            return
        if new:
            ends.append(end)
            sent.append(ts)
        else:
            for k in range(len(ends)):
                ends[k] |= _AMBIGUOUS
            i = len(ends)
            while i > 0 and _before(end, ends[i - 1]):
                i -= 1
            if i > 0 and ends[i - 1] & _MASK == end:
                return
            ends.insert(i, end if once else end | _AMBIGUOUS)
            sent.insert(i, ts)
        if len(ends) > MAX_UNACKED:
            del ends[0]
            del sent[0]

    def acknowledged(self, ack: i64, ts: i64) -> None:
        """The other side acknowledged up to ``ack``: the data it covers stops waiting, and the one
        ending exactly there is a round trip sample."""
        ends = self.ends
        sent = self.sent
        if not ends or sent is None:
            return
        n = 0
        for end in ends:
            if _before(ack, end):
                break
            if end & _MASK == ack:
                self.sample(ts - sent[n], ts, end == ack)
            n += 1
        if n == len(ends):
            ends.clear()
            sent.clear()
        elif n:
            del ends[:n]
            del sent[:n]

    def sample(self, ns: i64, ts: i64 = 0, path: bool = True) -> None:
        """A round trip from data to its ACK (``path``: one the least round trip may take; not one
        of Karn's ambiguous ones, see wait)."""
        if ns < 0:  # an ACK timed before its data (times running backwards): no round trip
            return
        if path:
            _least(self, ns, ts)
        self.skip += 1
        if self.skip < self.stride:
            return
        self.skip = 0
        samples = self.samples
        if samples is None:
            self.samples = [ns]
            return
        samples.append(ns)
        if len(samples) >= MAX_SAMPLES:
            self.samples = samples[::2]
            self.stride *= 2

    def again(self, seq: i64, length: i64, ts: i64, lost: bool, before: bool) -> None:
        """A segment sent again; ``lost``: its first copy was lost on the path (``before`` the capture
        point, or beyond it), not a spurious copy of bytes the receiver had."""
        self.resent += 1
        self.resent_bytes += length
        if lost:
            if before:
                self.lost_before += 1
            else:
                self.lost_after += 1
            self.lost_bytes += length
        at = self.resent_at
        entry = (seq, length, ts if lost else -1, (2 if before else 1) if lost else 0)
        if at is None:
            self.resent_at = [entry]
            return
        at.append(entry)
        if len(at) > MAX_RESENT:
            del at[0]

    def advertise(self, win: i64, ts: i64) -> None:
        """The window field of a segment of this direction (none of SYN, FIN, RST): zero windows."""
        since = self.zero_since
        if win == 0:
            self.zero_windows += 1
            if since < 0:
                self.zero_since = ts
        elif since >= 0:
            if ts > since:  # (times that run backwards add nothing: no duration is negative)
                self.zero_ns += ts - since
            self.zero_since = -1

    def spurious(self, left: i64, right: i64) -> None:
        """The receiver reported bytes [left, right) received twice (a D-SACK block): the last copy
        sent again over them whose first copy was counted lost was not lost after all (its ACK was)."""
        at = self.resent_at
        if at is None:
            return
        i = len(at) - 1
        while i >= 0:
            seq, length, ts, kind = at[i]
            if kind and _before(seq, right) and _before(left, (seq + length) & _MASK):
                if kind == 2:
                    self.lost_before -= 1
                else:
                    self.lost_after -= 1
                self.lost_bytes -= length
                at[i] = (seq, length, -1, 0)
                return
            i -= 1

    @property
    def lost(self) -> i64:
        """Segments the capture shows were lost on the path, on either side of the capture point."""
        before = self.ids.gaps if self.ids.trusted() else self.lost_before
        return self.lost_after + before


def _least(side: Side, ns: i64, ts: i64) -> None:
    """A sample into a direction's windowed least round trip (Side.least_rtt)."""
    if side.win_min < 0 or ts - side.win_start > RTT_WINDOW_NS or ts < side.win_start:
        side.prev_min = side.win_min
        side.prev_n = side.win_n
        side.win_min = ns
        side.win_n = 1
        side.win_start = ts
    else:
        side.win_n += 1
        if ns < side.win_min:
            side.win_min = ns


class Health:
    """One connection's TCP health. Directions are the connection's (0: endpoint a sent it)."""

    __slots__ = ("a", "b", "syn_ts", "first_rtt", "last_ts")

    def __init__(self) -> None:
        # the two directions (not a tuple: compiled, a tuple attribute is made anew at each read)
        self.a = Side()
        self.b = Side()
        self.syn_ts: i64 = -1  # the last SYN (not SYN-ACK)
        self.first_rtt: i64 = -1  # its first ACK after it (ns): the out-of-order threshold
        self.last_ts: i64 = 0

    def segment(self, d: int, ts: int, seq: int, ack: int, flags: int, win: int, length: int, ip_id: int = -1,
                dsack: int = -1) -> None:
        """One segment, in capture order (``ip_id``: IPv4's identification, -1 where there is none;
        ``dsack``: a D-SACK block it carries, packets.Segment's, or -1)."""
        self.event(d, _bounded(ts), seq, ack, flags, win, length, ip_id, dsack)

    def event(self, d: i64, ts: i64, seq: i64, ack: i64, flags: i64, win: i64, length: i64, ip_id: i64,
              dsack: i64) -> None:
        me = self.a if d == 0 else self.b
        other = self.b if d == 0 else self.a
        self.last_ts = ts
        was: i64 = me.ids.last
        skipped: i64 = me.ids.numbered(ip_id, length) if ip_id >= 0 else 0
        # (numbered after the last packet of d's: sent after it, where d numbers its packets one by one)
        later = ip_id >= 0 and was >= 0 and 0 < ((ip_id - was) & 0xFFFF) <= MAX_ID_GAP and me.ids.plausible()
        special = flags & (_SYN | _FIN | _RST)
        if flags & _SYN:
            if not flags & _ACK:
                self.syn_ts = ts
        elif flags & _ACK and self.first_rtt < 0 and self.syn_ts >= 0:
            self.first_rtt = ts - self.syn_ts
        nextseq = me.nextseq
        end = (seq + length + (1 if flags & _SYN else 0) + (1 if flags & _FIN else 0)) & _MASK
        below = length > 0 and me.seen and _before(seq, nextseq)
        alive = below and length <= 1 and not special and seq == (nextseq - 1) & _MASK  # a keep-alive
        kind = self._again(me, other, ts, seq, length, nextseq, later) if below and not alive else \
            me.ahead(seq, length)
        advanced = not me.seen or _before(nextseq, end)
        if skipped and not (length and me.seen and _before(nextseq, seq)):  # (a hole opened explains them)
            me.ids.suspects = min(MAX_ID_GAP, me.ids.suspects + skipped)
        if length and not alive:
            me.data_segments += 1
            me.wait(end, ts, advanced and kind == NEW, kind != SENT_AGAIN)
            if me.ids.suspects > 0 and kind == NEW:
                me.ids.suspect(seq, length)
        if advanced:
            me.nextseq = end
            if length or special or not me.seen:  # (a pure ACK past what was seen times no data)
                me.nextseq_ts = ts
            me.seen = True
        if not special:
            me.advertise(win, ts)
        if flags & _ACK:
            if length == 0 and win and win == me.window and seq == me.nextseq and not special and me.acked and \
                    ack == me.lastack:
                me.dupacks += 1
            elif ack != me.lastack:  # (as tshark 4: a window update with the same ack keeps the count)
                me.dupacks = 0
            other.acknowledged(ack, ts)
            if dsack >= 0:  # ((length << 32) | left edge)
                other.spurious(dsack & _MASK, (dsack + (dsack >> 32)) & _MASK)
            me.lastack = ack
            me.lastack_ts = ts
            me.acked = True
            me.window = win

    def _again(self, me: Side, other: Side, ts: i64, seq: i64, length: i64, nextseq: i64, later: bool) -> int:
        """A segment with payload starting below the highest sequence number: which kind. A whole
        copy of bytes already seen is sent again, whenever it comes; its first copy was lost beyond
        the capture point unless the receiver had acknowledged its bytes (a spurious copy). One that
        fills a hole is sent again where it is a fast retransmission, or came later than the
        connection's first round trip after the top segment (its first copy was lost before the
        capture point: both count as lost), or its IPv4 number comes after the top segment's where
        the sender numbers its packets one by one (``later``: it was sent after it, so it is a copy,
        however soon it came: a copy sent on the first duplicate ACK comes about one round trip
        after); else (within that round trip, or already acknowledged: the capture saw it after the
        receiver had it) it is only out of order."""
        end: i64 = (seq + length) & _MASK
        acked = other.acked and not _before(other.lastack, end)
        holes = me.holes
        if holes is None or not holes.fill(seq, end if _before(end, nextseq) else nextseq):
            me.again(seq, length, ts, not acked, False)
            return SENT_AGAIN
        threshold = self.first_rtt if self.first_rtt > 0 else DEFAULT_OOO_NS
        fast = other.dupacks >= 2 and other.lastack == seq and ts - other.lastack_ts < FAST_WINDOW_NS
        if not fast and not (later and not acked) and (acked or ts - me.nextseq_ts < threshold):
            me.out_of_order += 1
            return OUT_OF_ORDER
        me.again(seq, length, ts, True, True)
        return FILLED

    # -- what the rows read ---------------------------------------------------------------------------
    def side(self, d: int) -> Side:
        """What direction d sent."""
        return self.a if d == 0 else self.b

    def zero_window_ms(self, d: int) -> float:
        """Time direction d advertised a zero window, to its next window or the last packet (ms)."""
        side = self.side(d)
        since = side.zero_since
        return float(side.zero_ns + (self.last_ts - since if 0 <= since < self.last_ts else 0)) / 1e6

    def round_trip_ms(self, d: int) -> tuple[float | None, float | None]:
        """(min, median) of direction d's round trips from data to ACK (ms); None without a sample.
        The median of an even count is the lower of the middle two."""
        samples = self.side(d).samples
        if not samples:
            return None, None
        ordered = sorted(samples)
        return ordered[0] / 1e6, ordered[(len(ordered) - 1) // 2] / 1e6

    def resent_between(self, d: int, base: int | None, start: int, end: int) -> tuple[int, int]:
        """(segments of direction d sent again that carried any of its stream bytes [start, end)
        (stream offsets from sequence number ``base``), among the last MAX_RESENT; the time the last
        of those whose first copy was lost was sent, or -1)."""
        at = self.side(d).resent_at
        if base is None or end <= start or at is None:
            return 0, -1
        n = 0
        last = -1
        span = end - start
        first = (base + start) & _MASK
        for seq, length, ts, _kind in at:
            rel = (seq - first) & _MASK
            if rel >= _HALF:
                rel -= 1 << 32
            if rel < span and rel + length > 0:
                n += 1
                if ts > last:
                    last = ts
        return n, last

    def skipped_before(self, d: int, base: int | None, start: int) -> bool:
        """Whether the segment that carried direction d's byte at stream offset ``start`` may be a
        copy sent again of a packet lost before the capture point (a skip of its IPv4 numbers that
        no hole explains came before it: see ``Side.suspect``)."""
        ids = self.side(d).ids
        at = ids.at
        if base is None or at is None or not ids.plausible():
            return False
        first = (base + start) & _MASK
        for seq, length in at:
            if ((first - seq) & _MASK) < length:
                return True
        return False
