"""What shows a segment was lost before the capture point, per direction (wire/health.py reads
them; its module says the rules): byte ranges a later segment skipped (``Holes``), and skips in the
sender's IPv4 numbering (``Numbering``)."""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

MAX_HOLES: Final = 256
#: segments remembered that may be copies sent again (as health.MAX_RESENT)
MAX_SUSPECTS: Final = 256
#: IPv4 identification: the largest skip read as packets lost, the steps and share of steps by one
#: after which a direction's numbers are trusted, and the largest payload of one Ethernet frame (a
#: larger packet was cut by segmentation offload, which numbers each piece)
MAX_ID_GAP: Final[i64] = 8
MIN_ID_STEPS: Final[i64] = 8
FRAME_PAYLOAD: Final[i64] = 1460
_MASK: Final[i64] = 0xFFFFFFFF
_HALF: Final[i64] = 0x80000000


def _before(a: i64, b: i64) -> bool:
    """Sequence number a before b (32-bit wraparound)."""
    return ((a - b) & _MASK) >= _HALF


class Numbering:
    """One direction's IPv4 identification numbers (see the module: lost on the path)."""

    __slots__ = ("last", "free", "steps", "ones", "far", "gaps", "suspects", "at")

    def __init__(self) -> None:
        # IPv4 identification: the last number (-1: none yet), whether the next step is not counted,
        # steps counted, steps by exactly one, numbers skipped; packets lost that no hole explains yet,
        # and the (sequence number, length) of the last segments of new data that may be their copies
        # sent again (a skip where no hole opens: a tail lost, or a packet of new data the sender sent
        # again before anything after it reached the capture point)
        self.last: i64 = -1
        self.free = False
        self.steps: i64 = 0
        self.ones: i64 = 0
        self.far: i64 = 0  # steps past MAX_ID_GAP, either way
        self.gaps: i64 = 0
        self.suspects: i64 = 0
        self.at: list[tuple[int, int]] | None = None

    def numbered(self, ip_id: i64, length: i64) -> i64:
        """A packet's IPv4 identification (see the module): how many numbers it skipped (packets
        that never reached the capture point), counted."""
        last = self.last
        free = self.free
        if last < 0 or free:
            self.last = ip_id
            self.free = length > FRAME_PAYLOAD
            return 0
        step = (ip_id - last) & 0xFFFF
        if step == 0:  # the same packet captured twice
            return 0
        if step > 0x10000 - MAX_ID_GAP:  # a little lower than the last: it came late, and fills the skip it opened
            if self.gaps > 0:
                self.gaps -= 1
            return 0
        self.steps += 1
        skipped: i64 = 0
        if step == 1:
            self.ones += 1
        elif step > MAX_ID_GAP:
            self.far += 1
        else:
            skipped = step - 1
            self.gaps += skipped
        self.last = ip_id
        self.free = length > FRAME_PAYLOAD
        return skipped

    def suspect(self, seq: i64, length: i64) -> None:
        """New data that may be a copy sent again of a packet lost before the capture point."""
        self.suspects -= 1
        at = self.at
        if at is None:
            self.at = [(seq, length)]
            return
        at.append((seq, length))
        if len(at) > MAX_SUSPECTS:
            del at[0]

    def trusted(self) -> bool:
        """Whether this direction's IPv4 identification numbers its packets one by one (see the module)."""
        return self.steps >= MIN_ID_STEPS and 10 * self.ones >= 8 * self.steps

    def plausible(self) -> bool:
        """Trusted, or too few steps yet to tell and none past MAX_ID_GAP but one (a SYN-ACK's number
        is often 0, the connection's own count starting after it): a skip then is read as a loss for
        the exchange it comes before (its broker_ms left untimed), not yet counted."""
        return self.trusted() or (self.steps < MIN_ID_STEPS and self.far <= 1)


class Holes:
    """Byte ranges of one direction skipped by a segment that came ahead of them, not filled yet."""

    __slots__ = ("ranges",)

    def __init__(self) -> None:
        self.ranges: list[int] | None = None  # start, end, start, end, ...

    def hole(self, start: i64, end: i64) -> None:
        """Bytes [start, end) skipped: a later segment came first (the oldest holes dropped past MAX_HOLES)."""
        holes = self.ranges
        if holes is None:
            self.ranges = [start, end]
            return
        holes.append(start)
        holes.append(end)
        if len(holes) > 2 * MAX_HOLES:
            del holes[0:2]

    def fill(self, start: i64, end: i64) -> bool:
        """Bytes [start, end) came below the highest sequence number: whether any of them was in a
        hole (those bytes are no longer one); none: the segment is a whole copy of bytes seen."""
        holes = self.ranges
        if not holes:
            return False
        kept: list[int] = []
        hit = False
        i = 0
        while i < len(holes):
            a: i64 = holes[i]
            b: i64 = holes[i + 1]
            if _before(start, b) and _before(a, end):
                hit = True
                if _before(a, start):
                    kept.append(a)
                    kept.append(start)
                if _before(end, b):
                    kept.append(end)
                    kept.append(b)
            else:
                kept.append(a)
                kept.append(b)
            i += 2
        if hit:
            self.ranges = kept
        return hit
