"""Rotation series: capture files that are one capture cut in time (tcpdump -C/-G/-W, editcap -c/-i,
dumpcap's ring buffer), found so that they can be read as one.

A series is found from names and times (:func:`find_series`): files of one directory whose names
differ only in their digits (``cap.pcap``, ``cap.pcap1``, ``cap.pcap2``; ``day_00001_20261127120000.pcap``,
``day_00002_20261127130000.pcap``), ordered by their first packet's time, each beginning no earlier
than the one before it ends (copies of the same traffic taken at several capture points overlap in
time: they are never a series). The reader (reader.py) feeds a series' files through one pipeline,
one after the other, checking the times again as it goes; whether a connection goes on from one file
into the next is decided by its sequence numbers (tcp.Reassembler.boundary), never by its addresses
and ports alone.

Packet numbers: the i-th file of a series numbers its packets from ``i << FILE_SHIFT``, so a
number read anywhere in the pipeline says its file (:func:`file_index`) and its number in that file
(:func:`local_number`), as Wireshark numbers it there.
"""

from __future__ import annotations

import os
import re
import struct
from functools import partial
from typing import Callable, Final

from .capture import (PCAP_MAGICS, PCAPNG_SHB, CaptureError, CaptureReader, Interface, interface_block, open_capture,
                      ts_ns_of, compression)
from .fs import file_size, local_path, open_binary, resolve

FILE_SHIFT: Final = 40  # a file of a series holds fewer than 2**40 packets
LOCAL_MASK: Final = (1 << FILE_SHIFT) - 1
#: a file may begin this much before the file before it ends and still continue it (records a
#: little out of time order across the cut, a clock step), and at most half the span of that file
#: (see overlaps); more is an overlap: not one series
OVERLAP_NS: Final = 1_000_000_000
TAIL_BYTES: Final = 1 << 20  # how much of a file's end is read to find its last packet's time
_DIGITS: Final = re.compile(r"[0-9]+")


def file_number(index: int, number: int) -> int:
    """The series-wide number of packet ``number`` of the series' ``index``-th file."""
    return (index << FILE_SHIFT) | number


def file_index(number: int) -> int:
    return number >> FILE_SHIFT


def local_number(number: int) -> int:
    return number & LOCAL_MASK


def template(path: str) -> tuple[str, str]:
    """(directory, name with its digits taken out): the files of a series share it. Trailing
    digits (tcpdump -C's ``cap.pcap1``) are dropped, other runs of digits stand as ``#``."""
    folder, _, name = path.rpartition("/")
    return folder, _DIGITS.sub("#", name.rstrip("0123456789"))


HEAD_BYTES: Final = 1 << 16  # how much of a file's start is read to find its first packet's time


def read_range(path: str, endpoint: str | None, offset: int, n: int) -> bytes:
    """Up to n bytes of a file from ``offset`` (negative: from its end): one ranged read, on local
    files and object storage alike (a read of a series' files asks this of each, on the driver)."""
    local = local_path(path)
    if local is not None:
        with open_binary(local) as f:
            if offset < 0:
                f.seek(max(0, os.fstat(f.fileno()).st_size + offset))
            else:
                f.seek(offset)
            return f.read(n)
    fs, p = resolve(path, endpoint)
    with fs.open_input_file(p) as f:
        size = f.size()
        start = max(0, size + offset) if offset < 0 else offset
        return f.read_at(min(n, max(0, size - start)), start)


def first_time(path: str, endpoint: str | None = None) -> int | None:
    """The first packet's time (ns), or None for a file without packets or not readable. Read from
    the file's first HEAD_BYTES where they hold it (a compressed file: through its decompression)."""
    try:
        head = read_range(path, endpoint, 0, HEAD_BYTES)
        if compression(head[:6]) is not None:
            with open_capture(path, endpoint) as f:
                head = f.read(HEAD_BYTES)
        found = _first_in(head)
        if found is not None:
            return found
        for pkt in CaptureReader(path, endpoint):  # (a first packet further in: read as a capture)
            return pkt.ts_ns  # type: ignore[union-attr]  # (no lane: only packets)
    except (CaptureError, OSError, ValueError):
        return None
    return None


def _first_in(head: bytes) -> int | None:
    """The first packet's time from a capture's first bytes, where they hold its record or block."""
    if head[:4] in PCAP_MAGICS:
        endian, ns_per_tick = PCAP_MAGICS[head[:4]]
        if len(head) < 40:
            return None
        sec, frac = struct.unpack_from(endian + "II", head, 24)
        return sec * 1_000_000_000 + frac * ns_per_tick
    if head[:4] != PCAPNG_SHB or len(head) < 12:
        return None
    endian = "<" if head[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
    ifaces, first = _interfaces(head, endian)
    return None if first is None else _packet_time(head, first, endian, ifaces)


def last_time(path: str, endpoint: str | None = None) -> int | None:
    """The last packet's time (ns) where it can be read from the file's end: an uncompressed
    pcapng (blocks carry their length at both ends) or pcap (records chained from the tail to the
    end of the file); None otherwise (a compressed file: its times are checked as it is read)."""
    try:
        head = read_range(path, endpoint, 0, 4096)
        if compression(head[:6]) is not None or len(head) < 24:
            return None
        tail = read_range(path, endpoint, -TAIL_BYTES, TAIL_BYTES)
        start = max(0, file_size(path, endpoint) - len(tail))
    except (OSError, ValueError):
        return None
    if head[:4] in PCAP_MAGICS:
        return _pcap_last(head, tail, start)
    if head[:4] == PCAPNG_SHB:
        return _pcapng_last(head, tail)
    return None


def _pcap_last(head: bytes, tail: bytes, start: int) -> int | None:
    """A pcap's last record time, from the first offset of the tail whose records chain to its end."""
    endian, ns_per_tick = PCAP_MAGICS[head[:4]]
    snaplen = struct.unpack(endian + "I", head[16:20])[0] or 262144
    limit = max(snaplen, 262144)
    rec = struct.Struct(endian + "IIII")
    n = len(tail)
    for p in range(max(0, 24 - start), min(n - 16, 1 << 16) + 1):
        q, last = p, None
        while q + 16 <= n:
            sec, frac, incl, orig = rec.unpack_from(tail, q)
            if incl > limit or orig > 1 << 18 or frac >= 1_000_000_000 // ns_per_tick:
                break
            last = sec * 1_000_000_000 + frac * ns_per_tick
            q += 16 + incl
        if q == n and last is not None:
            return last
    return None


def _pcapng_last(head: bytes, tail: bytes) -> int | None:
    """A pcapng's last Enhanced Packet Block's time, walking back over blocks by their trailing
    lengths, in its interface's time resolution (the first section's interfaces, read from the head);
    None where the walk does not hold."""
    endian = "<" if head[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
    ifaces, _first = _interfaces(head, endian)
    end = len(tail)
    while end >= 12:
        (blen,) = struct.unpack_from(endian + "I", tail, end - 4)
        start = end - blen
        if blen < 12 or blen % 4 or start < 0:
            return None
        if struct.unpack_from(endian + "I", tail, start)[0] == 6:
            return _packet_time(tail, start, endian, ifaces)
        end = start
    return None


def _interfaces(head: bytes, endian: str) -> tuple[list[Interface], int | None]:
    """The interfaces described in the blocks at the head of a pcapng, and where its first
    Enhanced Packet Block starts in ``head`` (None: not there, or another packet block first)."""
    out: list[Interface] = []
    pos = 0
    while pos + 12 <= len(head):
        btype, blen = struct.unpack_from(endian + "II", head, pos)
        if blen < 12 or pos + blen > len(head):
            break
        if btype == 1:
            iface = interface_block(head[pos + 8 : pos + blen - 4], endian)
            if iface is not None:
                out.append(iface)
        elif btype in (2, 3, 6):  # (obsolete and simple packet blocks: read as a capture)
            return out, pos if btype == 6 else None
        pos += blen
    return out, None


def _packet_time(buf: bytes, start: int, endian: str, ifaces: list[Interface]) -> int | None:
    """The time of the Enhanced Packet Block at ``start`` in its interface's resolution."""
    if start + 28 > len(buf):
        return None
    index, hi, lo = struct.unpack_from(endian + "III", buf, start + 8)
    if index >= len(ifaces):
        return None
    _link, _snap, tps, offset_s = ifaces[index]
    return ts_ns_of((hi << 32) | lo, tps, offset_s)


def overlaps(first: int, last: int, next_first: int, distinct: Callable[[], bool] | None = None) -> bool:
    """Does a file that begins at ``next_first`` overlap the file before it (its packets from
    ``first`` to ``last``), so that it cannot continue it? (OVERLAP_NS; a file that begins when the
    one before began is a copy of it, not its continuation; except after a file of one instant, as
    ``editcap -c 1`` or a busy rotation makes: a file that begins in that same microsecond follows it
    where ``distinct`` says their first packets differ, see :func:`different_starts`)"""
    if next_first == first == last and distinct is not None:
        return not distinct()
    return next_first <= first or next_first < last - min(OVERLAP_NS, (last - first) // 2)


def different_starts(path: str, other: str, endpoint: str | None = None) -> bool:
    """Do two files differ in their first HEAD_BYTES (decompressed)? Copies of one capture do not;
    two files of a rotation that begin in the same microsecond hold different packets there."""
    def head(p: str) -> bytes | None:
        try:
            with open_capture(p, endpoint) as f:
                return f.read(HEAD_BYTES)
        except (CaptureError, OSError, ValueError):
            return None

    a, b = head(path), head(other)
    return a is not None and b is not None and a != b


def find_series(files: list[str], endpoint: str | None = None) -> list[list[str]]:
    """The files as series, each a list in time order, in the order of their first files in
    ``files``: files share a series where their names share a template and their times follow
    one another. A file alone is a series of one."""
    groups: dict[tuple[str, str], list[str]] = {}
    for f in files:
        groups.setdefault(template(f), []).append(f)
    chains: dict[str, list[str]] = {}  # first file -> its series
    for members in groups.values():
        if len(members) == 1:
            chains[members[0]] = members
            continue
        for chain in _chains(members, endpoint):
            chains[chain[0]] = chain
    order = {f: i for i, f in enumerate(files)}
    return sorted(chains.values(), key=lambda c: min(order[f] for f in c))


def _chains(members: list[str], endpoint: str | None) -> list[list[str]]:
    """Files of one name template as series: in order of first packet time, each file after the
    series whose last file ended latest no later than it begins (OVERLAP_NS); files without a
    packet time alone."""
    timed = []
    alone = []
    for f in members:
        t = first_time(f, endpoint)
        (alone.append(f) if t is None else timed.append((t, f)))
    timed.sort()
    # (files, first and last packet time of the last file: None where not known)
    chains: list[tuple[list[str], int, int | None]] = []
    for t, f in timed:
        # (a file whose last time is not known, compressed: continued by a file that begins later)
        fits = [i for i, (c, begin, end) in enumerate(chains)
                if (t > begin if end is None else
                    not overlaps(begin, end, t, partial(different_starts, c[-1], f, endpoint)))]
        if fits:
            i = max(fits, key=lambda i: chains[i][2] or 0)
            chains[i][0].append(f)
            chains[i] = (chains[i][0], t, last_time(f, endpoint))
        else:
            chains.append(([f], t, last_time(f, endpoint)))
    return [c for c, _begin, _end in chains] + [[f] for f in alone]

