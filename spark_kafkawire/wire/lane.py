"""The fast lane: capture records to TCP segments, in C.

The reader's own loop (capture -> packets -> the reassembler) makes a ``Packet`` of each record and
a ``Segment`` of each packet, one Python object per field, in a loop run by the interpreter.
``_lane`` (a C extension built when the package is installed, see ``_lane.c``) does those two steps
for the records most captures are made of (classic pcap records and pcapng Enhanced Packet Blocks;
Ethernet, Linux cooked, IPv4 and IPv6 carrying TCP) and hands the reassembler the segments of up to
BATCH packets at a time as a table of their numbers (``Batch.feed`` below, compiled): no object per
field, only each segment's payload and addresses. ``Batch.feed`` gives each to
``Reassembler.segment``, which is what ``Reassembler.feed`` does with a Segment; after each, it asks
the row builder (``RowCounts``) whether batches are due, as the reader's loop does. Everything from TCP
reassembly on (tcp.py, frames.py and after) is the same Python code either way, compiled by mypyc
where it is built: the lane is only the two stages before it. A record it does not read (damaged,
cut by the buffer's end, another layer) is left to the Python stages. The results are the same
either way (tests/test_lane.py reads every capture both ways); only the time differs.

Without a C compiler at install time the extension is not built and everything runs in Python.
``KAFKAWIRE_PURE_PYTHON=1`` in the environment when the package is imported means no compiled code
at all (see compiled.py); set later, it turns the lane off for the reads that follow.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Final

from librt.strings import read_i64_le

from .tcp import NEVER, Reassembler

from ..compiled import lane_module as _lane

#: past a time filter's bound, the reader asks whether reading can stop at every CHECK_EVERY-th packet
CHECK_EVERY: Final = 512
#: a batch's table: a row of ROW_FIELDS little-endian int64 per packet (number, time in ns, source
#: port, destination port, sequence number, acknowledgment number, flags, TCP payload length on the
#: wire, window, IPv4 identification or -1, D-SACK block or -1: see packets.Segment), and beside it
#: a list of the payloads and one of the addresses (source, destination)
ROW_FIELDS: Final = 11
ROW: Final = 8 * ROW_FIELDS


class RowCounts:
    """What the row builder (rows/table.py's RowBuilder, a subclass) tells the reader between two
    packets: the rows made and not yet handed on, and the frames whose rows are still to make."""

    count: int
    backlog: deque


class Batch:
    """Hands the reassembler the packets the lane read, a batch at a time (see the module's
    comment), stopping after the first packet that leaves batches due: ``feed`` returns the packets
    it handed on, negated when it stopped so (the lane starts again after that packet)."""

    def __init__(self, reasm: Reassembler, rows: RowCounts, limit: int):
        self.reasm = reasm
        self.rows = rows
        self.limit = limit

    def feed(self, table: bytes, n: int, payloads: list[bytes], addrs: list[bytes]) -> int:
        reasm, rows, limit = self.reasm, self.rows, self.limit
        o = 0
        for i in range(n):
            reasm.segment(read_i64_le(table, o), read_i64_le(table, o + 8), addrs[2 * i], read_i64_le(table, o + 16),
                          addrs[2 * i + 1], read_i64_le(table, o + 24), read_i64_le(table, o + 32),
                          read_i64_le(table, o + 40), read_i64_le(table, o + 48), payloads[i],
                          read_i64_le(table, o + 56), read_i64_le(table, o + 64), read_i64_le(table, o + 72),
                          read_i64_le(table, o + 80))
            o += ROW
            if rows.count >= limit or rows.backlog:
                return -(i + 1)
        return n


class PastBound:
    """How many packets were timed past a time filter's bound so far (the lane's and the reader's
    together): the reader asks whether reading can stop at every CHECK_EVERY-th."""

    __slots__ = ("checks",)

    def __init__(self) -> None:
        self.checks = 0


def available() -> bool:
    """Is the compiled lane there (and not turned off)?"""
    return _lane is not None and not os.environ.get("KAFKAWIRE_PURE_PYTHON")


class FastLane:
    """The lane over one file's reassembler, for ``CaptureReader.lane``.

    ``stop_from``: a time filter's bound. Past it, the reader asks at every CHECK_EVERY-th packet
    whether reading can stop; ``past`` counts those packets, the lane's and the reader's, and the
    lane leaves each such packet to the reader."""

    def __init__(self, reasm: Reassembler, rows: RowCounts, batch_limit: int, stop_from: int | None,
                 past: PastBound):
        assert _lane is not None  # made only where available() (see make)
        self.lane = _lane.Lane(Batch(reasm, rows, batch_limit).feed)
        # (a bound beyond 64 bits, either way, is a bound beyond every packet's time)
        self.stop_from = NEVER if stop_from is None else max(-NEVER - 1, min(NEVER, stop_from))
        self.past = past

    @property
    def taken(self) -> int:
        """Packets read so far."""
        return self.lane.taken

    def pcap(self, buf: memoryview | bytes, pos: int, number: int, offset: int, linktype: int, ns_per_tick: int,
             big: bool, record_limit: int) -> tuple[int, int, int, bool]:
        """Read classic pcap records from buf at pos: (next pos, packets counted, its file offset,
        whether rows are due)."""
        pos, number, offset, flush, past = self.lane.run(buf, pos, number, offset, linktype, ns_per_tick, big,
                                                         record_limit, self.stop_from,
                                                         -self.past.checks % CHECK_EVERY)
        self.past.checks += past
        return pos, number, offset, flush

    def pcapng(self, buf: memoryview | bytes, pos: int, number: int, offset: int, big: bool, interfaces: list,
               record_limit: int) -> tuple[int, int, int, bool]:
        """The same over pcapng Enhanced Packet Blocks of a section with these interfaces."""
        pos, number, offset, flush, past = self.lane.run_ng(buf, pos, number, offset, big, interfaces, record_limit,
                                                            self.stop_from, -self.past.checks % CHECK_EVERY)
        self.past.checks += past
        return pos, number, offset, flush


def make(reasm: Reassembler, rows: RowCounts, batch_limit: int, stop_from: int | None,
         past: PastBound | None = None) -> FastLane | None:
    """The lane for one file, or None when it is not available."""
    return FastLane(reasm, rows, batch_limit, stop_from, past or PastBound()) if available() else None
