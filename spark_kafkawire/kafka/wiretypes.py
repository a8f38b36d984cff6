"""Types shared by the stages."""

from __future__ import annotations

from typing import Union

#: a frame's bytes: the framer hands every frame out as bytes (the readers index them and read
#: their integers in place, natively where compiled)
Bytes = bytes
#: bytes read in place: a record batch is read through a view of its frame
View = Union[bytes, bytearray, memoryview]
