"""The damage policy (option ``mode``): what becomes of a row that reports damage.

PERMISSIVE keeps it, DROPMALFORMED drops it, FAILFAST fails the read with an error naming the file,
the packet, the stream byte and the connection. Which rows of each shape report damage is the
shape's own business (see rows/shapes.py); this only acts on them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..wire.capture import MalformedCaptureError
from ..wire.series import file_index, local_number

if TYPE_CHECKING:
    from .connstate import Endpoints
    from ..wire.frames import Frame

MODES: Final = ("PERMISSIVE", "DROPMALFORMED", "FAILFAST")


class DamagePolicy:
    def __init__(self, mode: str, capture_file: str):
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: want one of {', '.join(MODES)}")
        self.mode = mode
        self.files = [capture_file]  # the files of the series read (see series.py), in order

    def keep(self, ep: Endpoints | None, frame: Frame | None, status: str, detail: str | None) -> bool:
        """A damaged row: True to keep it (PERMISSIVE), False to drop it (DROPMALFORMED); FAILFAST
        raises MalformedCaptureError."""
        if self.mode == "PERMISSIVE":
            return True
        if self.mode == "DROPMALFORMED":
            return False
        where = f"packet {local_number(frame.number)}, stream byte {frame.offset}" if frame is not None else ""
        conn = f" ({ep.client_ip}:{ep.client_port} -> {ep.broker_ip}:{ep.broker_port})" if ep else ""
        path = self.files[file_index(frame.number)] if frame is not None else self.files[-1]
        raise MalformedCaptureError(f"{path}: {where}{conn}: {status}: {detail} (mode FAILFAST)"
                                    if where else f"{path}: {status}: {detail} (mode FAILFAST)")
