"""Compressed capture files -> their bytes: streamed, bounded, and kept up to a cut.

A capture compressed with gzip, xz, bzip2 or zstd (``tcpdump -z``, a rotation's post-rotate
command) is read through one of these raw streams instead of the standard library's file objects,
for two reasons:

* A file cut short (the rotation's compressor still writing, a copy interrupted) gives every byte
  its decompressor could make before the cut, then ends, its ``error`` saying why, as ``xz -dc`` and
  ``gzip -dc`` do. The standard file objects raise from the read that meets the cut and lose what
  that read had decompressed (up to the 2 MiB the capture reader asks for at once).
* A file that inflates beyond ``max_ratio`` times the compressed bytes read so far, once past
  ``floor`` bytes (no capture compresses 1000 to 1; a compression bomb does), ends with
  :class:`InflateError` as its ``error`` within the bound, instead of inflating for minutes to gigabytes.

Each call makes at most the bytes asked for (gzip, xz, bzip2: the decompressor's ``max_length``;
zstd: its input fed 1 KiB at a time, which a zstd block turns into at most 128 KiB each).
"""

from __future__ import annotations

import bz2
import io
import lzma
import zlib
from typing import BinaryIO, Final

#: the default bound: a file may inflate to this many times its compressed bytes (option maxInflateRatio)
DEFAULT_MAX_RATIO: Final = 1000
#: ... once past this many bytes (a small file's headers compress better than its packets)
FLOOR: Final = 64 << 20
_IN: Final = 64 << 10  # compressed bytes read at a time
_ZSTD_IN: Final = 1 << 10


#: each compression's magic bytes, at the start of a file and of each stream concatenated to it
COMPRESSIONS: Final = {"gzip": b"\x1f\x8b", "xz": b"\xfd7zXZ\x00", "zstd": b"\x28\xb5\x2f\xfd", "bzip2": b"BZh"}


class InflateError(OSError):
    """A compressed file inflates beyond the bound (the message says how far it got)."""


def _said(e: BaseException) -> str:
    return str(e) or type(e).__name__


class Inflating(io.RawIOBase):
    """The decompressed bytes of ``raw`` (compressed as ``kind``: gzip, xz, bzip2 or zstd)."""

    def __init__(self, raw: BinaryIO, kind: str, max_ratio: int = DEFAULT_MAX_RATIO, floor: int = FLOOR):
        self.raw = raw
        self.kind = kind
        self.max_ratio = max_ratio
        self.floor = floor
        self.d = self._new()
        self.tail = b""  # compressed bytes read and not yet given to the decompressor
        self.out = 0  # bytes made so far
        self.read_in = 0  # compressed bytes read so far
        self.raw_done = False
        self.spill = b""  # bytes made and not yet handed out (zstd)
        self.error: str | None = None  # why the stream stopped before its end (text: no traceback kept)

    def _new(self):
        if self.kind == "gzip":
            return zlib.decompressobj(wbits=31)
        if self.kind == "xz":
            return lzma.LZMADecompressor()
        if self.kind == "bzip2":
            return bz2.BZ2Decompressor()
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj()

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        try:
            self.raw.close()
        finally:
            super().close()

    def readinto(self, b) -> int:
        """Bytes made into ``b``; 0 at the end, and at a cut or past the bound, which ``error``
        then says (a raise would lose the bytes a buffered reader holds from before it)."""
        if self.error is not None:
            return 0
        try:
            return self._readinto(b)
        except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as e:
            self.error = _said(e)
            return 0
        except Exception as e:  # (zstandard.ZstdError)
            if type(e).__module__.startswith("zstandard"):
                self.error = _said(e)
                return 0
            raise

    def _readinto(self, b) -> int:
        want = len(b)
        idle = 0
        while True:
            before = self.read_in
            if self.spill:
                made, self.spill = self.spill, b""
            else:
                made = self._step(want)
            if len(made) > want:  # (zstd makes a block at once: the rest is handed out next)
                made, self.spill = made[:want], made[want:]
            if made:
                n = len(made)
                b[:n] = made
                self.out += n
                if self.out > self.floor and self.out > self.max_ratio * max(self.read_in, 1):
                    raise InflateError(f"inflates beyond {self.max_ratio}x its compressed size ({self.out} bytes "
                                       f"from {self.read_in}; option maxInflateRatio): the rest not read")
                return n
            if self._ended():
                return 0
            idle = 0 if self.read_in != before else idle + 1
            if idle > 1000:  # (a decompressor that neither makes bytes nor takes input)
                raise EOFError("compressed stream makes no progress")

    def _ended(self) -> bool:
        """At the end of the input: a whole stream ended (0 bytes), or a cut one (EOFError)."""
        if not self.raw_done or self.tail or self.spill or self._has_more():
            return False
        if self._stream_done() or self.read_in == 0:
            return True
        raise EOFError("compressed file ended before the end of its stream (cut short)")

    def _has_more(self) -> bool:
        d = self.d
        if self.kind == "gzip":
            return bool(d.unconsumed_tail)
        if self.kind in ("xz", "bzip2"):
            return not d.needs_input and not d.eof
        return False

    def _stream_done(self) -> bool:
        return bool(self.d.eof)

    def _feed(self, size: int) -> None:
        if not self.tail and not self.raw_done:
            chunk = self.raw.read(size)
            if not chunk:
                self.raw_done = True
            else:
                self.read_in += len(chunk)
                self.tail = chunk

    def _step(self, want: int) -> bytes:
        """Up to ``want`` decompressed bytes (b"": more input needed, or the end)."""
        d = self.d
        if self.kind == "gzip":
            if d.unconsumed_tail:
                return d.decompress(d.unconsumed_tail, want)
            if d.eof:
                return self._next_member(d.unused_data)
            self._feed(_IN)
            data, self.tail = self.tail, b""
            return d.decompress(data, want) if data else b""
        if self.kind in ("xz", "bzip2"):
            if d.eof:
                return self._next_member(d.unused_data)
            if d.needs_input:
                self._feed(_IN)
                data, self.tail = self.tail, b""
                if not data:
                    return b""
            else:
                data = b""
            return d.decompress(data, want)
        # zstd: small inputs bound what one call makes
        if d.eof:
            return self._next_member(d.unused_data)
        self._feed(_IN)
        data, self.tail = self.tail[:_ZSTD_IN], self.tail[_ZSTD_IN:]
        return d.decompress(data) if data else b""

    def _next_member(self, rest: bytes) -> bytes:
        """After a stream's end: the next concatenated stream (gzip members, xz/zstd frames), if
        the bytes after it begin one; else the end (trailing zeros or junk are not read)."""
        self.tail = rest + self.tail
        if not self.tail:
            self._feed(_IN)
        if self.tail and self.tail.startswith(COMPRESSIONS[self.kind]):
            self.d = self._new()
            return b""
        self.tail = b""
        self.raw_done = True
        return b""
