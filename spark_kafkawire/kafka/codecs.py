"""Record batch compression: a batch's payload decompressed (gzip, snappy raw or xerial-framed, lz4
frames, zstd), never past a cap: a :class:`Budget` that every batch of one request or response
draws on (option maxDecompressedBytes), so many batches under the cap cannot add up past it. A
payload that does not decompress, or would pass the cap, is a :class:`RecordError` whose status says
which (records.py turns it into a status row)."""

from __future__ import annotations

import zlib
from struct import Struct
from typing import Final

from ..compiled import require
from .wiretypes import View

cramjam: Final = require("cramjam", "cramjam")
zstandard: Final = require("zstandard", "zstandard")
lz4_frame: Final = require("lz4.frame", "lz4")

CODECS: Final = ("none", "gzip", "snappy", "lz4", "zstd")
DEFAULT_MAX_DECOMPRESSED: Final = 64 << 20
XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
LZ4_BLOCK_SIZES: Final = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_U32LE: Final = Struct("<I")
_I32: Final = Struct("!i")


class RecordError(ValueError):
    """Record data that cannot be decompressed or parsed (or would exceed the size cap)."""

    def __init__(self, message: str, status: str = "corrupt"):
        super().__init__(message)
        self.status = status


def codec_name(attrs: int) -> str:
    c = attrs & 7
    return CODECS[c] if c < len(CODECS) else f"codec{c}"


def decompress(codec: int, data: View, cap: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress one batch's payload, never producing more than ``cap`` bytes."""
    try:
        if codec == 1:
            return _gzip(data, cap)
        if codec == 2:
            return _snappy(data, cap)
        if codec == 3:
            return _lz4(data, cap)
        if codec == 4:
            return _zstd(data, cap)
    except RecordError:
        raise
    except Exception as e:  # the libraries' own errors: corrupt input
        raise RecordError(f"{CODECS[codec]}: {e}") from None
    raise RecordError(f"unknown codec {codec}")


class Budget:
    """What decompression may still produce for one request or response: every batch in it draws
    on the same ``cap`` bytes (option maxDecompressedBytes)."""

    __slots__ = ("cap", "left")

    def __init__(self, cap: int = DEFAULT_MAX_DECOMPRESSED):
        self.cap = self.left = cap

    def decompress(self, codec: int, data: View) -> bytes:
        if not self.left:
            raise RecordError(f"{codec_name(codec)}: not decompressed, the message's batches already took "
                              f"maxDecompressedBytes ({self.cap})", "over_cap")
        try:
            out = decompress(codec, data, self.left)
        except RecordError as e:
            if e.status == "over_cap":
                whole = self.left == self.cap
                self.left = 0
                if not whole:
                    raise RecordError(f"{codec_name(codec)}: the message's batches decompress to more than "
                                      f"maxDecompressedBytes ({self.cap})", "over_cap") from None
            raise
        self.left -= len(out)
        return out


def budget_of(b: Budget | int) -> Budget:
    return b if isinstance(b, Budget) else Budget(b)


def _over(cap: int, codec: str) -> RecordError:
    return RecordError(f"{codec}: decompressed size exceeds maxDecompressedBytes ({cap})", "over_cap")


def _bounded(d, data: View, cap: int, codec: str) -> bytes:
    """Run a decompressor object that takes a maximum output length (zlib's, lz4.frame's)."""
    out = d.decompress(bytes(data), cap + 1)
    if len(out) > cap:
        raise _over(cap, codec)
    if not d.eof:
        raise RecordError(f"{codec}: stream ends early")
    return out


def _gzip(data: View, cap: int) -> bytes:
    return _bounded(zlib.decompressobj(wbits=47), data, cap, "gzip")  # gzip or zlib header


def _snappy(data: View, cap: int) -> bytes:
    raw = cramjam.snappy
    if bytes(data[:8]) != XERIAL_MAGIC:
        if raw.decompress_raw_len(bytes(data)) > cap:
            raise _over(cap, "snappy")
        return bytes(raw.decompress_raw(bytes(data)))
    # xerial framing (Java clients): 16-byte header, then [int32 length][raw snappy block]...
    parts: list[bytes] = []
    total, pos, n = 0, 16, len(data)
    while pos < n:
        if pos + 4 > n:
            raise RecordError("snappy: xerial block length cut short")
        size = _I32.unpack_from(data, pos)[0]
        pos += 4
        if size < 0 or pos + size > n:
            raise RecordError("snappy: xerial block runs past the end")
        block = bytes(data[pos : pos + size])
        total += raw.decompress_raw_len(block)
        if total > cap:
            raise _over(cap, "snappy")
        parts.append(bytes(raw.decompress_raw(block)))
        pos += size
    return b"".join(parts)


def _lz4(data: View, cap: int) -> bytes:
    """An LZ4 frame, read block by block. The header checksum is not checked: Kafka clients before
    0.10 (magic 0) computed it over the wrong bytes (KAFKA-3160)."""
    n = len(data)
    if n < 7 or bytes(data[:4]) != LZ4_MAGIC:
        raise RecordError("lz4: not an LZ4 frame")
    flg, bd = data[4], data[5]
    block_max = LZ4_BLOCK_SIZES.get((bd >> 4) & 7)
    if block_max is None:
        raise RecordError("lz4: bad block size in the frame descriptor")
    if not flg & 0x20:  # linked blocks: the lz4 library's frame decoder, in bounded steps
        return _lz4_linked(data, cap)
    pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1  # + header checksum
    checksummed = bool(flg & 0x10)
    parts: list[bytes] = []
    total = 0
    while True:
        if pos + 4 > n:
            raise RecordError("lz4: frame cut short")
        word = _U32LE.unpack_from(data, pos)[0]
        pos += 4
        if word == 0:
            break
        size = word & 0x7FFFFFFF
        if pos + size > n:
            raise RecordError("lz4: block runs past the end")
        block = bytes(data[pos : pos + size])
        if word & 0x80000000:
            out = block
        else:
            out = bytes(cramjam.lz4.decompress_block(block, output_len=block_max))
        total += len(out)
        if total > cap:
            raise _over(cap, "lz4")
        parts.append(out)
        pos += size + (4 if checksummed else 0)
    return b"".join(parts)


def _lz4_linked(data: View, cap: int) -> bytes:
    return _bounded(lz4_frame.LZ4FrameDecompressor(), data, cap, "lz4")


def _zstd(data: View, cap: int) -> bytes:
    import io

    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(bytes(data)), read_across_frames=True)
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = reader.read(min(1 << 20, cap + 1 - total))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
        if total > cap:
            raise _over(cap, "zstd")
    return b"".join(parts)
