"""Types shared by the stages."""

from __future__ import annotations

from typing import Union

#: a frame's bytes: bytes, or a bytearray where the frame was assembled from segments
Bytes = Union[bytes, bytearray]
#: bytes read in place: a record batch is read through a view of its frame
View = Union[bytes, bytearray, memoryview]
