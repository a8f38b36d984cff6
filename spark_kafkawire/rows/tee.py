"""Several row shapes from one decode: a :class:`Tee` is the decoder's row sink in place of one
shape's builder, and hands every exchange (and every connection) to each shape's builder, so one
pass over a capture makes the rows of all of them (``reader.iter_shapes``; the audit job writes its
four shapes so). The rows of each shape are exactly those a read of that shape alone makes."""

from __future__ import annotations

from collections import deque
from typing import Callable

from ..decode.connstate import Endpoints, Request, Response
from ..wire.lane import RowCounts
from .table import RowBuilder


class Tee(RowCounts):
    """The row sink of several shapes' builders. ``count`` is the most rows any of them holds, and
    ``backlog`` the records builder's (rows made as batches leave), so the reader and the fast lane
    hand batches on as they do for one shape."""

    def __init__(self, builders: list[RowBuilder]):
        self.builders = builders
        self.count = 0
        self.backlog = deque()
        for b in builders:
            if b.shape == "records":
                self.backlog = b.backlog  # (one deque, shared: the builder's own)
        self.with_connection = [b for b in builders if b.connection is not None]
        self.connection: Callable[..., None] | None = self._connection if self.with_connection else None

    def exchange(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None, extra: tuple | None = None) -> None:
        n = 0
        for b in self.builders:
            b.exchange(ep, req, resp, status, detail, extra)
            if b.count > n:
                n = b.count
        self.count = n

    def _connection(self, conn, ep: Endpoints, client_dir: int, protocol_name: str, framers, tls) -> None:
        for b in self.with_connection:
            call = b.connection
            if call is not None:
                call(conn, ep, client_dir, protocol_name, framers, tls)
        self.recount()

    def recount(self) -> None:
        """``count`` again, after rows left a builder (or were made from its backlog)."""
        n = 0
        for b in self.builders:
            if b.count > n:
                n = b.count
        self.count = n
