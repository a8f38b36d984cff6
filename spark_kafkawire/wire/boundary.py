"""Where a Kafka frame starts in bytes held while out of sync (the start of a stream whose beginning
was not captured, the bytes after a gap): ``find_boundary``, a function of the held bytes alone,
which wire/frames.py's Resync calls."""

from __future__ import annotations

import re
from struct import Struct
from typing import Callable, Final

MIN_FRAME: Final = 4  # the smallest header (a response's correlation id): a smaller size is no frame
#: what a plausibility test returns for a header it accepts only at a segment start, with the
#: frame ending where the captured bytes end or chained to a next one (a response whose request
#: is not in the capture: nothing to match its correlation id against)
ALIGNED_ONLY: Final = 2
SCAN_WINDOW: Final = 256 << 10  # bytes kept while looking for a frame boundary
HEADER_PEEK: Final = 512  # bytes of a candidate frame shown to the plausibility test
_NONZERO = re.compile(rb"[^\x00]")
_I32 = Struct("!i")


def find_boundary(scan: bytearray, i: int, at_start: bool, marks: list, max_frame: int,
                  plausible: Callable[[bytes, bool], int], final: bool) -> tuple[int | None, int, bool]:
    """Where a frame starts in ``scan`` (bytes held while out of sync), searching from offset ``i``:
    a size field in bounds whose header is plausible (``plausible(head, mid_stream)``: 0 no, 1 yes,
    ALIGNED_ONLY only where a segment starts, ``marks`` giving the segments' offsets), confirmed by
    the frame after it (or taken as is at the stream's start, where it ends exactly at the held
    bytes' end, where it is larger than the scan window, or when ``final``: no more bytes come).
    ``at_start``: scan[0] is the stream's first byte. Returns (the frame's offset or None, the
    offset the search stopped at: before it every offset is ruled out, and whether scan[0] still
    counts as the stream's start). Stateless, as the frame-boundary search of other Kafka parsers."""
    n = len(scan)
    top = max_frame >> 24
    starts = None
    while i + 8 <= n:
        if scan[i] > top:
            i += 1
            continue
        if not scan[i]:  # a run of zeros holds no size field until its last three bytes
            m = _NONZERO.search(scan, i)
            j = m.start() if m else n
            if j - i > 3:
                i = j - 3
                at_start = False
                if i + 8 > n:
                    break
        size = _I32.unpack_from(scan, i)[0]
        first = at_start and i == 0
        head = bytes(scan[i + 4 : i + 4 + min(size, HEADER_PEEK)])
        ok = MIN_FRAME <= size <= max_frame and plausible(head, not first)
        if ok == ALIGNED_ONLY and not first:
            if starts is None:
                starts = {m[0] for m in marks}
            if i not in starts:
                ok = False
        if not ok:
            at_start = False
            i += 1
            continue
        end = i + 4 + size
        if first or end == n or (end > n and size > SCAN_WINDOW and ok == 1):
            return i, i, at_start
        if end > n or end + 8 > n:
            if final and ok == 1:
                return i, i, at_start
            if final:
                i += 1
                continue
            break  # wait for the bytes that confirm or refute it
        nsize = _I32.unpack_from(scan, end)[0]
        if MIN_FRAME <= nsize <= max_frame and \
                plausible(bytes(scan[end + 4 : end + 4 + min(nsize, HEADER_PEEK)]), True):
            return i, i, at_start
        i += 1
    return None, i, at_start
