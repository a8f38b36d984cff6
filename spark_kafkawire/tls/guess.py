"""Recognising TLS: record headers, and the guess that a connection carries TLS.

A TLS record starts with a content type (20-23), a protocol version 3.x and a length no larger than
a record may be. A connection whose first bytes in a direction are such a header is *guessed* to be
TLS, and its bytes are held (:class:`TlsGuess`) until the guess is confirmed (two records chained,
both directions starting with a whole record, or a whole record holding a ClientHello: a connection
that opened with one is TLS whatever the other direction sends) or refuted (what follows the first
record is not a record header): a plaintext Kafka stream that merely starts like a record header
stays Kafka.
"""

from __future__ import annotations

import re
from struct import Struct
from typing import Callable, Final

from ..wire.halfstream import Sink

CONTENT_TYPES = {0x14: "TLS change_cipher_spec", 0x15: "TLS alert", 0x16: "TLS handshake",
                 0x17: "TLS application data"}
MAX_RECORD: Final = 18432  # 2^14 plus the expansion TLS allows
RECORD_VERSIONS = {0: "SSL 3.0", 1: "TLS 1.0", 2: "TLS 1.1", 3: "TLS 1.2 or 1.3", 4: "TLS 1.3"}
HANDSHAKE, CHANGE_CIPHER_SPEC, ALERT, APPLICATION_DATA = 22, 20, 21, 23
CLIENT_HELLO: Final = 1

_U16 = Struct("!H")
#: where a record header may start: a content type, then a version 3.x (CONTENT_TYPES, RECORD_VERSIONS)
_HEADER_START = re.compile(rb"[\x14-\x17]\x03[\x00-\x04]")


def record_header(chunk: bytes | bytearray, pos: int = 0) -> str | None:
    """What a TLS record header at ``pos`` of ``chunk`` says (for a row's detail), or None when
    the bytes are not one."""
    if record_length(chunk, pos) < 0:
        return None
    return f"{CONTENT_TYPES[chunk[pos]]} record, {RECORD_VERSIONS[chunk[pos + 2]]}: the connection is encrypted"


def record_length(b: bytes | bytearray, pos: int) -> int:
    """The length of the record whose header is at ``pos``, or -1 where there is none (or fewer
    than five bytes)."""
    if len(b) - pos < 5 or b[pos] not in CONTENT_TYPES or b[pos + 1] != 3 or b[pos + 2] not in RECORD_VERSIONS:
        return -1
    n = _U16.unpack_from(b, pos + 3)[0]
    return n if n <= MAX_RECORD else -1


def next_header(b: bytes | bytearray, pos: int) -> int:
    """The first offset from ``pos`` on where a record header lies whole (record_length >= 0), or,
    where none does, the first from which fewer than five bytes are left."""
    stop = max(pos, len(b) - 4)
    while True:
        m = _HEADER_START.search(b, pos, len(b) - 2)
        if m is None or m.start() >= stop:
            return stop
        pos = m.start()
        if record_length(b, pos) >= 0:
            return pos
        pos += 1


def header_prefix(b: bytes | bytearray, pos: int) -> bool:
    """Could the (fewer than five) bytes from ``pos`` begin a record header?"""
    rest = b[pos:pos + 3]
    return (len(rest) < 1 or rest[0] in CONTENT_TYPES) and (len(rest) < 2 or rest[1] == 3) and \
        (len(rest) < 3 or rest[2] in RECORD_VERSIONS)


# -- the guess -------------------------------------------------------------------------------------

class TlsGuess:
    """A connection one of whose directions began with a TLS record header: that direction's
    bytes (and the other's, if it begins with one too) are held until the guess is settled, then
    handed, in order, to ``on_decide(tls)``'s choice of sinks (see :meth:`replay`).

    Confirmed: a whole record followed by another record's header in one direction, or a whole
    record at the start of each direction. Refuted: a whole record followed by bytes that are not a
    record header. When a direction has a gap or ends first, what it holds decides: a whole first
    record, followed by nothing or the start of a header, confirms. At most a record and a header
    (18,442 bytes) are held per direction before the guess is settled."""

    __slots__ = ("on_decide", "sides", "decided")

    def __init__(self, on_decide: Callable[[bool], None]):
        self.on_decide: Callable[[bool], None] | None = on_decide
        self.sides: list[_GuessDirection | None] = [None, None]
        self.decided: bool | None = None

    def side(self, d: int) -> "_GuessDirection":
        s = self.sides[d]
        if s is None:
            s = self.sides[d] = _GuessDirection(self, d)
        return s

    def check(self) -> None:
        if self.decided is not None:
            return
        if any(s is not None and s.client_hello() for s in self.sides):
            self._decide(True)  # a connection that opened with a ClientHello is TLS, whatever follows
            return
        verdicts = [s.verdict() for s in self.sides if s is not None]
        if False in verdicts:
            self._decide(False)
        elif True in verdicts:
            self._decide(True)
        elif all(s is not None and s.whole_records() for s in self.sides):
            self._decide(True)

    def _decide(self, tls: bool) -> None:
        self.decided = tls
        on_decide = self.on_decide
        if on_decide is not None:
            on_decide(tls)  # (it replays what the sides hold)
        # no reference cycle is left (sides and guess link each other, on_decide the connection)
        self.on_decide = None
        self.sides = [None, None]

    def replay(self, d: int, sink) -> None:
        """Hand direction d's held events to ``sink`` (the TLS direction or the Kafka framer)."""
        s = self.sides[d]
        if s is None:
            return
        events, s.events = s.events, []
        for ev in events:
            if ev[0] == 0:
                sink.data(ev[1], ev[2], ev[3])
            elif ev[0] == 1:
                sink.gap(ev[1], ev[2], ev[3])
            elif ev[0] == 2:
                sink.late(ev[1], ev[4], ev[2], ev[3])
        if s.ended:
            sink.end()


class _GuessDirection(Sink):
    """The sink of one direction while the guess is open: its events, held in order."""

    __slots__ = ("guess", "d", "events", "head", "ended", "stopped")

    def __init__(self, guess: TlsGuess, d: int):
        self.guess = guess
        self.d = d
        self.events: list[tuple] = []
        self.head = bytearray()  # the direction's bytes before its first gap, late copy or end
        self.ended = False
        self.stopped = False  # a gap, a late copy or the end came after head

    def verdict(self) -> bool | None:
        """True: this direction is TLS; False: it is not; None: not known yet."""
        b = self.head
        n = record_length(b, 0)
        if n < 0:
            return False if len(b) >= 5 or not header_prefix(b, 0) else (None if not self.stopped else False)
        end = 5 + n
        if len(b) < end:
            return False if self.stopped else None
        if len(b) >= end + 5:
            return record_length(b, end) >= 0
        if not header_prefix(b, end):
            return False
        return True if self.stopped else None

    def client_hello(self) -> bool:
        """Does the direction open with a whole handshake record holding the start of a ClientHello:
        message type 1, a length that fits the protocol's bounds and legacy version 3.x? (A Kafka
        frame would need a size field over 369 MB to begin so.)"""
        b = self.head
        n = record_length(b, 0)
        if n < 38 or b[0] != HANDSHAKE or len(b) < 5 + n or b[5] != CLIENT_HELLO:
            return False
        size = int.from_bytes(b[6:9], "big")
        return 34 <= size <= (1 << 16) and b[9] == 3 and b[10] <= 4

    def whole_records(self) -> bool:
        n = record_length(self.head, 0)
        return n >= 0 and len(self.head) >= 5 + n

    # -- sink interface ------------------------------------------------------------------------
    def start(self) -> None:
        pass

    def data(self, chunk: bytes, ts: int, number: int) -> None:
        self.events.append((0, bytes(chunk), ts, number))
        if not self.stopped:
            self.head += chunk
        self.guess.check()

    def gap(self, nbytes: int, ts: int, number: int) -> None:
        self.events.append((1, nbytes, ts, number))
        self.stopped = True
        self.guess.check()

    def late(self, nbytes: int, reported: int, ts: int, number: int) -> None:
        self.events.append((2, nbytes, ts, number, reported))
        self.stopped = True
        self.guess.check()

    def end(self) -> None:
        self.ended = True
        self.stopped = True
        self.guess.check()
        if self.guess.decided is None:  # the other direction has not settled it: this one does
            self.guess._decide(self.verdict() is True)
