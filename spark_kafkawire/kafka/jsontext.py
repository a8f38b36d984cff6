"""JSON text as orjson writes it, for the pieces the decoder writes itself (body.py's text mode,
records.py's batch summaries): integers, and small integers made once."""

from __future__ import annotations

from typing import Final

#: the text of -1 .. 1023 (error codes, partition indexes, counts, a null producer's -1), made once
_SMALL: Final = [str(i).encode() for i in range(-1, 1024)]


def int_text(v: int) -> bytes:
    """An integer's JSON text (its decimal digits, as orjson and str write them)."""
    return _SMALL[v + 1] if -1 <= v < 1024 else str(v).encode()
