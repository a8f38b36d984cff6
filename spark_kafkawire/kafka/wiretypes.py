"""Types shared by the stages, and the one reader of Kafka's varints."""

from __future__ import annotations

from typing import Final, Union

#: a frame's bytes: the framer hands every frame out as bytes (the readers index them and read
#: their integers in place, natively where compiled)
Bytes = bytes
#: bytes read in place: a record batch is read through a view of its frame
View = Union[bytes, bytearray, memoryview]

#: where :func:`uvarint` could not read a varint (its next position): cut by the end of what it
#: may read, or longer than the most bytes it may take
VARINT_CUT: Final = -1
VARINT_LONG: Final = -2


def uvarint(buf: bytes, pos: int, end: int, most: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` (7 bits a byte, least significant first, as Kafka's flexible
    versions and record batches write it), read no further than ``end`` and in at most ``most``
    bytes: (value, next position); where it cannot be read, (0, VARINT_CUT or VARINT_LONG), and
    each caller raises its own error."""
    value = shift = 0
    stop = pos + most
    if stop > end:
        stop = end
    start = pos
    while pos < stop:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    return 0, VARINT_LONG if pos - start >= most else VARINT_CUT
