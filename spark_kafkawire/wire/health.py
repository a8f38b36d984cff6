"""TCP health of one connection, as tshark's TCP analysis reads it: segments sent again (and those
only out of order), zero windows and the time spent at them, and round trips from a data segment
to the acknowledgement of it.

Every segment of a connection is an event here, in capture order, each direction's state read and
moved as Wireshark's analysis does (tcp.analysis.*): the segments the Python stages read come
through ``Health.segment``; the ones the fast lane takes in C (the next in-order bytes, pure ACKs)
are appended to the connection's event log (``EVENT``, 24 bytes each: the lane only records), which
``segment`` and ``settle`` read first, so the one set of rules below sees every segment in order.
The lane hands a packet to the Python stages instead when the log holds LOG_LIMIT bytes, so the log
stays small.

Rules, per segment of direction d (the other direction is r):

* **sent again**: a segment with payload starting below the highest sequence number d sent before
  (a keep-alive, one byte or none just below it, excepted). It is a *fast retransmission* where r
  sent two or more duplicate ACKs for exactly its sequence number, the last less than 20 ms before;
  *spurious* where r had already acknowledged all its bytes; else *out of order* where it came
  within the connection's first round trip (3 ms if the handshake is not captured) of the segment
  that reached the highest sequence number and does not end there; else a retransmission. Out of
  order is counted apart (``out_of_order``); the others are ``resent`` (segments and bytes).
* **zero window**: a segment advertising a window of 0, none of SYN, FIN and RST set; the time at
  zero window runs from the first such segment of d to d's next segment advertising a window
  again (or the connection's last packet).
* **round trip**: an ACK of r's that acknowledges exactly the end of a data segment of d (the first
  copy of it not yet acknowledged: a segment sent again after its bytes were acknowledged is timed
  anew, as tshark does) is a sample of d's round trip, from that segment to the ACK, as the capture
  point sees it (tshark's tcp.analysis.ack_rtt). A keep-alive's byte is not data here. Up to
  MAX_SAMPLES are kept per direction; past that every other one, so the median is over samples
  spread evenly through the connection.
* a **duplicate ACK** (for fast retransmissions): no payload, the same window (not 0), sequence and
  acknowledgement numbers as d's last, none of SYN, FIN, RST.

Memory is bounded per connection: MAX_UNACKED data segments waiting for their ACK, MAX_SAMPLES round
trips and MAX_RESENT segments sent again (for the exchange rows) per direction.
"""

from __future__ import annotations

from collections import deque
from struct import Struct
from typing import Final

#: one event of the lane's log: time (ns), sequence number, acknowledgement number, payload length on
#: the wire, window field, TCP flags, direction (0: the connection's endpoint a sent it)
EVENT: Final = Struct("<qIIIHBB")
EVENT_SIZE: Final = 24
LOG_LIMIT: Final = EVENT_SIZE * 4096
MAX_UNACKED: Final = 4096
MAX_SAMPLES: Final = 1 << 16
MAX_RESENT: Final = 256
FAST_WINDOW_NS: Final = 20_000_000
DEFAULT_OOO_NS: Final = 3_000_000
_FIN: Final = 0x01
_SYN: Final = 0x02
_RST: Final = 0x04
_ACK: Final = 0x10
_MASK: Final = 0xFFFFFFFF
_HALF: Final = 0x80000000
#: what ``segment`` found a segment to be
NEW: Final = 0
SENT_AGAIN: Final = 1
OUT_OF_ORDER: Final = 2


def _before(a: int, b: int) -> bool:
    """Sequence number a before b (32-bit wraparound)."""
    return ((a - b) & _MASK) >= _HALF


class Health:
    """One connection's TCP health. Directions are the connection's (0: endpoint a sent it)."""

    __slots__ = ("nextseq", "nextseq_ts", "seen", "lastack", "lastack_ts", "acked", "window", "dupacks",
                 "zero_since", "zero_ns", "zero_windows", "unacked", "samples", "stride", "skip",
                 "resent", "resent_bytes", "out_of_order", "resent_at", "syn_ts", "first_rtt", "last_ts")

    def __init__(self) -> None:
        self.nextseq = [0, 0]  # the highest sequence number sent, plus one (seq + length)
        self.nextseq_ts = [0, 0]  # when it was reached
        self.seen = [False, False]
        self.lastack = [0, 0]
        self.lastack_ts = [0, 0]
        self.acked = [False, False]  # an ACK was seen
        self.window = [-1, -1]
        self.dupacks = [0, 0]
        self.zero_since = [-1, -1]  # at zero window since (ns), or -1
        self.zero_ns = [0, 0]
        self.zero_windows = [0, 0]
        self.unacked: list[list[tuple[int, int]]] = [[], []]  # (end sequence number, time) of data not acknowledged
        self.samples: list[list[int]] = [[], []]
        self.stride = [1, 1]  # keep every stride-th sample (doubled as MAX_SAMPLES is reached)
        self.skip = [0, 0]
        self.resent = [0, 0]
        self.resent_bytes = [0, 0]
        self.out_of_order = [0, 0]
        self.resent_at: list[deque[tuple[int, int]]] = [deque(), deque()]  # (sequence number, length), the last ones
        self.syn_ts = -1  # the last SYN (not SYN-ACK)
        self.first_rtt = -1  # its first ACK after it (ns): the out-of-order threshold
        self.last_ts = 0

    def segment(self, d: int, ts: int, seq: int, ack: int, flags: int, win: int, length: int, log: bytearray) -> int:
        """One segment the Python stages read (after the lane's events before it): NEW, SENT_AGAIN or
        OUT_OF_ORDER."""
        if log:
            self.settle(log)
        return self.event(d, ts, seq, ack, flags, win, length)

    def settle(self, log: bytearray) -> None:
        """Read the lane's events and empty its log."""
        for ts, seq, ack, length, win, flags, d in EVENT.iter_unpack(log):
            self.event(d, ts, seq, ack, flags, win, length)
        del log[:]

    def event(self, d: int, ts: int, seq: int, ack: int, flags: int, win: int, length: int) -> int:
        r = 1 - d
        self.last_ts = ts
        kind = NEW
        special = flags & (_SYN | _FIN | _RST)
        if flags & _SYN:
            if not flags & _ACK:
                self.syn_ts = ts
        elif flags & _ACK and self.first_rtt < 0 and self.syn_ts >= 0:
            self.first_rtt = ts - self.syn_ts
        nextseq = self.nextseq[d]
        end = (seq + length + (1 if flags & _SYN else 0) + (1 if flags & _FIN else 0)) & _MASK
        below = length > 0 and self.seen[d] and _before(seq, nextseq)
        alive = below and length <= 1 and not special and seq == (nextseq - 1) & _MASK  # a keep-alive
        if below and not alive:
            kind = self._again(d, r, ts, seq, length, nextseq)
        if length and not alive:
            self._unacked(d, end, ts)
        if not self.seen[d] or _before(nextseq, end):
            self.nextseq[d] = end
            self.nextseq_ts[d] = ts
            self.seen[d] = True
        if not special:
            since = self.zero_since[d]
            if win == 0:
                self.zero_windows[d] += 1
                if since < 0:
                    self.zero_since[d] = ts
            elif since >= 0:
                self.zero_ns[d] += ts - since
                self.zero_since[d] = -1
        if flags & _ACK:
            self._ack(d, r, ts, seq, ack, win, length, special)
        return kind

    def _again(self, d: int, r: int, ts: int, seq: int, length: int, nextseq: int) -> int:
        """A segment with payload starting below the highest sequence number: which kind."""
        threshold = self.first_rtt if self.first_rtt > 0 else DEFAULT_OOO_NS
        fast = self.dupacks[r] >= 2 and self.lastack[r] == seq and ts - self.lastack_ts[r] < FAST_WINDOW_NS
        spurious = self.acked[r] and not _before(self.lastack[r], (seq + length) & _MASK)
        if not fast and not spurious and ts - self.nextseq_ts[d] < threshold and nextseq != (seq + length) & _MASK:
            self.out_of_order[d] += 1
            return OUT_OF_ORDER
        self.resent[d] += 1
        self.resent_bytes[d] += length
        at = self.resent_at[d]
        at.append((seq, length))
        if len(at) > MAX_RESENT:
            at.popleft()
        return SENT_AGAIN

    def _ack(self, d: int, r: int, ts: int, seq: int, ack: int, win: int, length: int, special: int) -> None:
        if length == 0 and win and win == self.window[d] and seq == self.nextseq[d] and not special and \
                self.acked[d] and ack == self.lastack[d]:
            self.dupacks[d] += 1
        else:
            self.dupacks[d] = 0
        unacked = self.unacked[r]
        if unacked:
            kept = []
            for end, sent in unacked:
                if _before(ack, end):
                    kept.append((end, sent))
                elif end == ack:
                    self._sample(r, ts - sent)
            self.unacked[r] = kept
        self.lastack[d] = ack
        self.lastack_ts[d] = ts
        self.acked[d] = True
        self.window[d] = win

    def _unacked(self, d: int, end: int, ts: int) -> None:
        """A data segment waits for its ACK, unless a copy of it already does (the first copy is
        timed)."""
        unacked = self.unacked[d]
        for e, _t in unacked:
            if e == end:
                return
        unacked.append((end, ts))
        if len(unacked) > MAX_UNACKED:
            del unacked[0]

    def _sample(self, d: int, ns: int) -> None:
        self.skip[d] += 1
        if self.skip[d] < self.stride[d]:
            return
        self.skip[d] = 0
        samples = self.samples[d]
        samples.append(ns)
        if len(samples) >= MAX_SAMPLES:
            self.samples[d] = samples[::2]
            self.stride[d] *= 2

    # -- what the rows read ---------------------------------------------------------------------------
    def zero_window_ms(self, d: int) -> float:
        """Time direction d advertised a zero window, to its next window or the last packet (ms)."""
        since = self.zero_since[d]
        return (self.zero_ns[d] + (self.last_ts - since if since >= 0 else 0)) / 1e6

    def round_trip_ms(self, d: int) -> tuple[float | None, float | None]:
        """(min, median) of direction d's round trips from data to ACK (ms); None without a sample.
        The median of an even count is the lower of the middle two."""
        samples = self.samples[d]
        if not samples:
            return None, None
        ordered = sorted(samples)
        return ordered[0] / 1e6, ordered[(len(ordered) - 1) // 2] / 1e6

    def resent_between(self, d: int, base: int | None, start: int, end: int) -> int:
        """Segments of direction d sent again that carried any of its stream bytes [start, end)
        (stream offsets from sequence number ``base``), among the last MAX_RESENT."""
        if base is None or end <= start:
            return 0
        n = 0
        span = end - start
        first = (base + start) & _MASK
        for seq, length in self.resent_at[d]:
            rel = (seq - first) & _MASK
            if rel >= _HALF:
                rel -= 1 << 32
            if rel < span and rel + length > 0:
                n += 1
        return n
