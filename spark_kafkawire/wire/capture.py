"""Capture files -> packets.

Reads classic pcap (microsecond and nanosecond magic, either byte order) and pcapng (every section
and interface, each interface with its own link type, timestamp resolution and offset), plain or
gzip-compressed. Reading streams: one packet record is in memory at a time, and no record may be
larger than ``MAX_RECORD`` bytes.

A file that is not a capture raises :class:`CaptureError` naming the file. A capture that is
damaged part way (cut while being written, a corrupt record header) yields every packet before the
damage and then sets :attr:`CaptureReader.damage` to a :class:`Damage` saying where it starts.
"""

from __future__ import annotations

import io
import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator, NamedTuple

from .fs import open_binary
from .inflate import COMPRESSIONS as _COMPRESSIONS
from .inflate import DEFAULT_MAX_RATIO

READ_CHUNK = 1 << 20  # bytes read at a time
MAX_RECORD = 1 << 26  # 64 MiB: far above any real snaplen; bounds what one bad length can allocate

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1_000),  # microsecond, little endian
    b"\xa1\xb2\xc3\xd4": (">", 1_000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),  # nanosecond
    b"\xa1\xb2\x3c\x4d": (">", 1),
}
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
GZIP_MAGIC = b"\x1f\x8b"
#: compressed capture files, known by their first bytes (not their names), as tshark reads them
COMPRESSIONS = _COMPRESSIONS


class CaptureError(Exception):
    """The file is not a capture this reader understands."""


class MalformedCaptureError(CaptureError):
    """Damage met with option mode=FAILFAST: names the file, packet number and byte offset."""


@dataclass(frozen=True, slots=True)
class Damage:
    """Where a capture stops being readable."""

    packet_number: int  # 1-based number of the first packet that could not be read
    byte_offset: int  # offset of its record in the (decompressed) file
    reason: str

    def __str__(self) -> str:
        return f"packet {self.packet_number} at byte {self.byte_offset}: {self.reason}"


class Packet(NamedTuple):
    number: int  # 1-based, as Wireshark counts
    ts_ns: int  # nanoseconds since the Unix epoch, UTC
    linktype: int
    data: bytes  # captured bytes (may be shorter than the packet on the wire)
    wire_len: int  # original length on the wire


class RowsDue:
    """What the reader yields, in place of a packet, where the fast lane (see lane.py) read packets
    and the stages made rows of them that must be handed on before the next packet: the single
    value ROWS_DUE."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ROWS_DUE"


ROWS_DUE = RowsDue()


def compression(head: bytes) -> str | None:
    """The compression a file's first bytes say (COMPRESSIONS), or None."""
    for name, magic in COMPRESSIONS.items():
        if head.startswith(magic):
            return name
    return None


def open_capture(path: str, endpoint: str | None = None, max_ratio: int = DEFAULT_MAX_RATIO) -> BinaryIO:
    """The file's bytes, decompressed as its first bytes say (gzip, xz, zstd, bzip2), streamed
    (inflate.py: kept up to a cut, bounded by ``max_ratio``)."""
    f = open_binary(path, endpoint)
    kind = compression(f.peek(6)[:6])  # type: ignore[attr-defined]
    if kind is not None:
        from .inflate import Inflating

        return io.BufferedReader(Inflating(f, kind, max_ratio), 1 << 20)
    return f


def _stream_errors() -> tuple[type[BaseException], ...]:
    """What a compressed stream that is cut short or corrupt raises, for each compression."""
    import lzma

    errors: list[type[BaseException]] = [OSError, EOFError, zlib.error, lzma.LZMAError]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:  # pragma: no cover - a dependency
        pass
    return tuple(errors)


_STREAM_ERRORS = _stream_errors()
DSB = 0x0000000A  # pcapng Decryption Secrets Block
DSB_TLS_KEY_LOG = 0x544C534B  # its secrets type "TLSK": an NSS key log


class CaptureReader:
    """Iterate over the packets of one capture file: ``for pkt in CaptureReader(path)``."""

    def __init__(self, path: str, endpoint: str | None = None, lane=None,
                 on_secrets: Callable[[bytes], None] | None = None, first_number: int = 0,
                 max_inflate_ratio: int = DEFAULT_MAX_RATIO):
        self.path = path  # a local path or a URI (see fs.py)
        self.max_inflate_ratio = max_inflate_ratio  # (a compressed file: inflate.py's bound)
        #: packets are numbered from first_number + 1 (a file of a rotation series read after others:
        #: its numbers are file_number(i, n), see series.py); Damage says the file's own number
        self.first_number = first_number
        self.endpoint = endpoint
        self.stream_error = ""  # why a compressed file stopped being readable
        self.damage: Damage | None = None
        self.format = ""
        # the fast lane (lane.FastLane), or None: reads the packets it can from pcap records and
        # pcapng packet blocks itself and feeds their segments to the reassembler; the reader then
        # yields ROWS_DUE where rows made of them must be handed on before the next packet
        self.lane = lane
        #: given the TLS key log of each pcapng Decryption Secrets Block (editcap --inject-secrets)
        self.on_secrets = on_secrets

    def __iter__(self) -> Iterator[Packet | RowsDue]:
        with open_capture(self.path, self.endpoint, self.max_inflate_ratio) as f:
            head = self._read(f, 4)
            if self.stream_error:  # a gzip file whose stream breaks before the first record
                self._damaged(self.first_number + 1, 0, "file header unreadable")
                return
            if head in PCAP_MAGICS:
                self.format = "pcap"
                yield from self._pcap(f, head)
            elif head == PCAPNG_SHB:
                self.format = "pcapng"
                yield from PcapngBlocks(self).packets(f, head)
            elif len(head) < 4 and any(m.startswith(head) for m in (*PCAP_MAGICS, PCAPNG_SHB)):
                # empty, or cut inside the magic: a file still being written (tcpdump -C/-G rotation)
                self._damaged(self.first_number + 1, 0, "file ends inside the capture file header")
            else:
                raise CaptureError(
                    f"{self.path}: not a pcap or pcapng capture (starts with {head.hex() or 'nothing'})"
                )

    # -- helpers -----------------------------------------------------------------------------
    def _damaged(self, number: int, offset: int, reason: str) -> None:
        if self.stream_error:
            reason = f"{reason} ({self.stream_error})"
        self.damage = Damage(number - self.first_number, offset, reason)

    def _readinto(self, f: BinaryIO, into: memoryview) -> int:
        """Bytes read into ``into``: 0 at the file's end, or where its stream breaks."""
        try:
            got = f.readinto(into) or 0  # type: ignore[attr-defined]  # a BufferedReader
        except _STREAM_ERRORS as e:  # a compressed stream cut short or corrupt: damage here
            self.stream_error = f"compressed stream unreadable: {e}"
            return 0
        if not got:  # (a compressed file's stream, inflate.py: ended, or stopped, and why)
            error = getattr(getattr(f, "raw", None), "error", None)
            if error is not None:
                self.stream_error = f"compressed stream unreadable: {error}"
        return got

    def _read(self, f: BinaryIO, n: int) -> bytes:
        """n bytes, fewer only where the file or its stream ends."""
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._readinto(f, view[got:])
            if not k:
                break
            got += k
        return bytes(view[:got])

    def _refill(self, f: BinaryIO, buf: bytearray, view: memoryview, pos: int, end: int,
                need: int) -> tuple[bytearray, memoryview, int]:
        """The read-ahead buffer: moves its unread bytes buf[pos:end] to the front and reads after
        them into it (as much as fits, at least ``need`` bytes in all unless the file ends first).
        One buffer refilled in place: a chunk costs the read's own copy and no new allocation.
        Returns (buffer, its view, end of the bytes in it); they now start at 0."""
        keep = end - pos
        if need > len(buf):  # a record larger than the buffer: a larger one
            grown = bytearray(max(need, 2 * len(buf)))
            grown[:keep] = view[pos:end]
            buf, view = grown, memoryview(grown)
        elif keep and pos:
            view[:keep] = bytes(view[pos:end])
        end = keep
        while end < need:
            got = self._readinto(f, view[end:])
            if not got:
                break
            end += got
        return buf, view, end

    # -- classic pcap ------------------------------------------------------------------------
    def _pcap(self, f: BinaryIO, magic: bytes) -> Iterator[Packet | RowsDue]:
        endian, ns_per_tick = PCAP_MAGICS[magic]
        rest = self._read(f, 20)
        if len(rest) < 20:  # a file still being written: damage, not a different format
            self._damaged(self.first_number + 1, 0, "file ends inside the pcap file header")
            return
        _vmaj, _vmin, _zone, _sigfigs, snaplen, network = struct.unpack(endian + "HHiIII", rest)
        linktype = network & 0x0FFFFFFF
        rec = struct.Struct(endian + "IIII")
        offset = 24
        number = self.first_number
        limit = max(snaplen, 262144) if snaplen else MAX_RECORD
        limit = min(limit, MAX_RECORD)
        refill = self._refill
        unpack = rec.unpack_from
        # bytes read ahead: records are cut from buf[pos:end] (one read per chunk, not two per record)
        buf = bytearray(2 * READ_CHUNK)
        view = memoryview(buf)
        pos = end = 0
        lane = self.lane
        big = endian == ">"
        while True:
            if lane is not None:
                pos, number, offset, flush = lane.pcap(view[:end], pos, number, offset, linktype, ns_per_tick, big,
                                                       limit)
                if flush:
                    yield ROWS_DUE
                    continue
            if end - pos < 16:
                buf, view, end = refill(f, buf, view, pos, end, 16)
                pos = 0
            number += 1
            n = end - pos
            if not n:
                if self.stream_error:
                    self._damaged(number, offset, "file ends")
                return
            if n < 16:
                self._damaged(number, offset, "file ends inside a record header")
                return
            sec, frac, incl, orig = unpack(buf, pos)
            if incl > limit:
                self._damaged(number, offset, f"corrupt record header (captured length {incl})")
                return
            stop = pos + 16 + incl
            if stop > end:
                buf, view, end = refill(f, buf, view, pos, end, 16 + incl)
                stop -= pos
                pos = 0
                if stop > end:
                    self._damaged(number, offset, "file ends inside a packet")
                    return
            yield Packet(number, sec * 1_000_000_000 + frac * ns_per_tick, linktype, view[pos + 16 : stop].tobytes(),
                         orig)
            offset += 16 + incl
            pos = stop

    # -- pcapng ------------------------------------------------------------------------------
class PcapngBlocks:
    """The blocks of a pcapng file (sections, interfaces, packets, decryption secrets) read for a
    CaptureReader, which keeps the read-ahead buffer's refill and the damage report."""

    def __init__(self, reader: "CaptureReader"):
        self.reader = reader

    def packets(self, f: BinaryIO, first: bytes) -> Iterator[Packet | RowsDue]:
        """The packets of a pcapng file whose first block type (``first``) was read."""
        r = self.reader
        endian = "<"
        ifaces: list[Interface] = []  # interfaces of the current section
        offset = 0
        number = r.first_number
        pending_type: bytes | None = first
        lane = r.lane
        # bytes read ahead: one read per chunk, blocks are cut from buf[pos:end]
        buf = bytearray(2 * READ_CHUNK)
        view = memoryview(buf)
        pos = end = 0

        def read(f: BinaryIO, n: int) -> bytes:  # n bytes, fewer only where the file or stream ends
            nonlocal buf, view, pos, end
            if end - pos < n:
                buf, view, end = self.reader._refill(f, buf, view, pos, end, n)
                pos = 0
            out = view[pos : min(end, pos + n)].tobytes()
            pos += len(out)
            return out

        while True:
            if lane is not None and pending_type is None and ifaces:
                buf, view, pos, end = self._ahead(f, buf, view, pos, end)
                pos, number, offset, flush = lane.pcapng(view[:end], pos, number, offset, endian == ">", ifaces,
                                                         MAX_RECORD)
                if flush:
                    yield ROWS_DUE
                    continue
            btype_raw = pending_type if pending_type is not None else read(f, 4)
            pending_type = None
            if not self._whole_type(btype_raw, number, offset):
                return
            if btype_raw == PCAPNG_SHB:
                section = self._section(read, f, number, offset)
                if section is None:
                    return
                endian, blen = section
                ifaces = []
                offset += blen
                continue
            block = self._block(read, f, btype_raw, endian, number, offset)
            if block is None:
                return
            btype, blen, body = block
            if btype == 1:  # Interface Description Block
                if not self._interface(body, endian, ifaces, number, offset):
                    return
            elif btype in (6, 2, 3):  # Enhanced, Simple and the obsolete Packet Block
                number += 1
                pkt = _packet(number, btype, body, endian, ifaces)
                if isinstance(pkt, str):
                    self.reader._damaged(number, offset, pkt)
                    return
                yield pkt
            elif btype == DSB:
                self._secrets(body, endian)
            # other blocks (name resolution, statistics, custom, ...) carry no packets
            offset += blen

    def _ahead(self, f: BinaryIO, buf: bytearray, view: memoryview, pos: int,
               end: int) -> tuple[bytearray, memoryview, int, int]:
        """At least 64 KiB read ahead for the fast lane (less only where the file ends)."""
        if end - pos < 1 << 16:
            buf, view, end = self.reader._refill(f, buf, view, pos, end, READ_CHUNK)
            pos = 0
        return buf, view, pos, end

    def _interface(self, body: bytes, endian: str, ifaces: list[Interface], number: int, offset: int) -> bool:
        """An Interface Description Block's interface appended to ``ifaces``; False where it is too
        short (reported as damage)."""
        iface = interface_block(body, endian)
        if iface is None:
            self.reader._damaged(number + 1, offset, "interface description block too short")
            return False
        ifaces.append(iface)
        return True

    def _whole_type(self, btype_raw: bytes, number: int, offset: int) -> bool:
        """Are there a block type's 4 bytes? Where the file ends before it: no (reported as damage
        where the stream ended in error, or inside the 4 bytes)."""
        if len(btype_raw) == 4:
            return True
        if btype_raw or self.reader.stream_error:
            self.reader._damaged(number + 1, offset, "file ends inside a block header" if btype_raw else "file ends")
        return False

    def _block(self, read: Callable[[BinaryIO, int], bytes], f: BinaryIO, btype_raw: bytes, endian: str,
               number: int, offset: int) -> tuple[int, int, bytes] | None:
        """The rest of a block after its type: (type, length, body without the trailing copy of the
        length), or None where the file ends inside it or its length is corrupt (reported)."""
        lenraw = read(f, 4)
        if len(lenraw) < 4:
            self.reader._damaged(number + 1, offset, "file ends inside a block header")
            return None
        (btype,) = struct.unpack(endian + "I", btype_raw)
        (blen,) = struct.unpack(endian + "I", lenraw)
        body = self._rest(read, f, blen, 8, 12, number, offset, f"corrupt block header (length {blen})",
                          "file ends inside a block")
        return None if body is None else (btype, blen, body[:-4])

    def _rest(self, read: Callable[[BinaryIO, int], bytes], f: BinaryIO, blen: int, head: int, least: int,
              number: int, offset: int, bad: str, short: str) -> bytes | None:
        """The rest of a block of ``blen`` bytes whose first ``head`` were read; None where its
        length is out of bounds (at least ``least``, a multiple of 4, at most MAX_RECORD: ``bad``)
        or the file ends first (``short``), reported as damage."""
        if blen < least or blen % 4 or blen > MAX_RECORD:
            self.reader._damaged(number + 1, offset, bad)
            return None
        body = read(f, blen - head)
        if len(body) < blen - head:
            self.reader._damaged(number + 1, offset, short)
            return None
        return body

    def _secrets(self, body: bytes, endian: str) -> None:
        """A Decryption Secrets Block: a TLS key log's lines to ``on_secrets`` (other kinds ignored)."""
        if self.reader.on_secrets is not None and len(body) >= 8:
            stype, slen = struct.unpack(endian + "II", body[:8])
            if stype == DSB_TLS_KEY_LOG:
                self.reader.on_secrets(bytes(body[8:8 + slen]))

    def _section(self, read: Callable[[BinaryIO, int], bytes], f: BinaryIO, number: int,
                 offset: int) -> tuple[str, int] | None:
        """A Section Header Block after its type: (byte order, block length), or None where it is
        damaged (reported)."""
        lenraw = read(f, 4)
        bom = read(f, 4)
        if len(bom) < 4:
            self.reader._damaged(number + 1, offset, "file ends inside a section header")
            return None
        if bom == b"\x4d\x3c\x2b\x1a":
            endian = "<"
        elif bom == b"\x1a\x2b\x3c\x4d":
            endian = ">"
        else:
            if offset == 0:
                raise CaptureError(f"{self.reader.path}: pcapng byte-order magic is wrong")
            self.reader._damaged(number + 1, offset, "bad pcapng byte-order magic")
            return None
        (blen,) = struct.unpack(endian + "I", lenraw)
        if self._rest(read, f, blen, 12, 28, number, offset, f"bad section header length {blen}",
                      "file ends inside a section header") is None:
            return None
        return endian, blen


#: a pcapng interface: (linktype, snaplen, ticks_per_second, offset_s)
Interface = tuple[int, int, int, int]


def interface_block(body: bytes, endian: str) -> Interface | None:
    """An Interface Description Block's body (None: too short)."""
    if len(body) < 8:
        return None
    linktype, _res, snaplen = struct.unpack(endian + "HHI", body[:8])
    tps, tsoff = 1_000_000, 0
    for code, val in _options(body[8:], endian):
        if code == 9 and len(val) >= 1:  # if_tsresol
            r = val[0]
            tps = 2 ** (r & 0x7F) if r & 0x80 else 10 ** r
        elif code == 14 and len(val) >= 8:  # if_tsoffset, seconds
            (tsoff,) = struct.unpack(endian + "q", val[:8])
    return linktype, snaplen, tps, tsoff


def _packet(number: int, btype: int, body: bytes, endian: str, ifaces: list[Interface]) -> Packet | str:
    """The packet of an Enhanced (6), obsolete (2) or Simple (3) Packet Block's body, or why the
    block is damaged."""
    if btype == 3:  # Simple Packet Block: interface 0, no timestamp
        if not ifaces or len(body) < 4:
            return "simple packet block without an interface"
        (orig,) = struct.unpack(endian + "I", body[:4])
        linktype, snap, _tps, _off = ifaces[0]
        caplen = min(orig, len(body) - 4, snap or orig)
        return Packet(number, 0, linktype, body[4 : 4 + caplen], orig)
    if len(body) < 20:
        return "packet block too short"
    if btype == 6:
        iface, hi, lo, caplen, orig = struct.unpack(endian + "IIIII", body[:20])
    else:
        iface, _drops, hi, lo, caplen, orig = struct.unpack(endian + "HHIIII", body[:20])
    if iface >= len(ifaces) or 20 + caplen > len(body):
        return "packet block names an unknown interface or overruns"
    linktype, _snap, tps, tsoff = ifaces[iface]
    return Packet(number, ts_ns_of((hi << 32) | lo, tps, tsoff), linktype, body[20 : 20 + caplen], orig)


def ts_ns_of(ticks: int, ticks_per_second: int, offset_s: int) -> int:
    if ticks_per_second == 1_000_000_000:
        ns = ticks
    elif 1_000_000_000 % ticks_per_second == 0:
        ns = ticks * (1_000_000_000 // ticks_per_second)
    else:
        ns = ticks * 1_000_000_000 // ticks_per_second
    return ns + offset_s * 1_000_000_000


def _options(buf: bytes, endian: str) -> Iterator[tuple[int, bytes]]:
    pos, n = 0, len(buf)
    fmt = endian + "HH"
    while pos + 4 <= n:
        code, length = struct.unpack_from(fmt, buf, pos)
        if code == 0:
            return
        yield code, buf[pos + 4 : pos + 4 + length]
        pos += 4 + ((length + 3) & ~3)
