"""The TLS record layer of one direction, framing: bytes cut into whole records, their boundaries
found again after a gap (by their headers, and by a record that verifies under the direction's
keys), bytes in no record counted. Decryption is direction.py's (the Records built on this)."""

from __future__ import annotations

from typing import Any, Protocol, Final

from ..wire.halfstream import Sink
from .guess import MAX_RECORD, header_prefix, next_header, record_length
from .keys import Keys, Payload

RESYNC_RECORDS: Final = 4096  # after a gap: record sequence numbers tried per candidate record
RESYNC_CANDIDATES: Final = 8  # after a gap: record headers tried before giving the direction up
RESYNC_BUDGET: Final = 1 << 16  # trial decryptions per connection, all gaps together
MIN_PROTECTED: Final = 22  # the smallest protected record: header, tag and (TLS 1.3) the inner content type
SUSPECT_WINDOW: Final = 4  # after records that did not verify: later sequence numbers tried for the next one
TRIAL_RECORDS: Final = 2048  # without the handshake: record sequence numbers tried (TLS 1.3), from 0


def _record_at(buf: bytes | bytearray, pos: int, n: int) -> tuple[bytes, bytes]:
    """The header and payload of the record at buf[pos] (its payload n bytes), each copied once
    (a bytearray's slice would be a copy, and bytes() of it another)."""
    with memoryview(buf) as view:
        return bytes(view[pos:pos + 5]), bytes(view[pos + 5:pos + 5 + n])


def _record_in_place(buf: bytes | bytearray, pos: int, n: int) -> tuple[bytes, memoryview]:
    """The header (copied) and a view of the payload of the record at buf[pos]: a record is opened
    where it lies. The view keeps a bytearray from being resized while it lives: only for a record
    handled whole before the buffer changes (_whole_records: its caller trims the buffer after it
    returns, when the last view has gone with its frame)."""
    return bytes(buf[pos:pos + 5]), memoryview(buf)[pos + 5:pos + 5 + n]


class Session(Protocol):
    """What the record layer asks of its connection (session.py's TlsSession, which hands each of
    its two directions itself): where plaintext goes, what the handshake settled, the keys, and the
    budgets of trial decryptions."""

    outputs: list  # the two directions' Kafka framers (Framer.data takes a size: the first bytes of a chunk)
    client_dir: int | None
    start_captured: bool
    version: int | None
    suite: int | None
    handshake_seen: bool
    decrypted: int
    trials: int
    trialled: bool
    choice: int

    def other_secrets(self, used: int) -> bool: ...

    unconfirmed: bool
    dirs: list
    keylog: Any
    client_random: bytes | None

    def confirm(self) -> None: ...

    def refute(self) -> None: ...

    def fail(self, why: str) -> None: ...

    def spend(self, count: int) -> int: ...

    def tls13(self, label: str) -> tuple[Keys, bytes] | None: ...

    def tls12(self, d: int) -> Keys | None: ...

    def trial(self, d: int, header: bytes, payload: Payload) -> tuple[Keys, bytes] | None: ...

    def hello(self, d: int, msg_type: int, body: bytes) -> None: ...


class RecordStream(Sink):
    """The record layer of one direction of a TLS connection: the bytes cut into records, and where
    their boundaries are lost, found again. A TlsDirection is a RecordStream with the sink
    interface and what the records hold (decryption, handshake messages, key updates).

    Where record boundaries are not known (after a gap, after bytes that are not a record header,
    a stream caught mid-record) the direction is ``lost``: it scans for a record header and takes it
    as a boundary once the record verifies under the direction's keys (sequence numbers bounded by
    the bytes lost), or, without keys, once the record is followed by another header. Every step
    consumes bytes or waits for at most one record and a header; after RESYNC_CANDIDATES failed
    candidates (or RESYNC_BUDGET trial decryptions) the direction is given up and its bytes only
    counted."""

    __slots__ = ("session", "d", "buf", "rec_ts", "rec_num", "keys", "secret", "encrypted", "hs", "phase", "lost",
                 "scan_from", "missing", "tried", "suspect", "dead", "after_gap", "read", "undecrypted", "other",
                 "gap_bytes", "choice", "verified", "held", "key_updates", "carried_seq")

    def __init__(self, session: Session, d: int):
        self.session = session
        self.d = d
        self.buf = bytearray()
        self.rec_ts = 0
        self.rec_num = 0
        self.keys: Keys | None = None
        self.secret: bytes | None = None  # TLS 1.3: the traffic secret of the keys (KeyUpdate derives the next)
        self.encrypted = False  # records from here on are protected
        self.hs = bytearray()  # handshake messages being put together
        self.phase = "handshake"  # TLS 1.3: which traffic secret protects this direction's records
        self.lost = False  # record boundaries unknown: scanning (see _resync)
        self.scan_from = 0  # where in buf the scan goes on
        self.missing = 0  # bytes lost or passed over since the last record read (they bound the records lost)
        self.tried = 0  # candidate records tried since boundaries were lost
        self.suspect = 0  # records in a row that did not verify: the next is tried with later sequence numbers too
        self.dead = False  # given up: bytes are counted, not read
        self.after_gap = False  # bytes of the stream were lost or not read as TLS before the records now read
        self.read = 0  # bytes of records read (in clear, or decrypted)
        self.undecrypted = 0  # bytes of protected records not decrypted
        self.other = 0  # captured bytes in no record read
        self.gap_bytes = 0  # bytes the capture lost
        self.choice = 0  # the session's choice of secrets the keys were made from (TlsSession.other_secrets)
        self.verified = False  # a record verified under the keys since they were made from the secrets
        self.key_updates = 0  # TLS 1.3 KeyUpdates since the traffic secret (see rekey)
        self.carried_seq = -1  # the record sequence number its keys were at when stashed (-1: none)
        #: the plaintext of the record a trial verified, until a second record confirms the session:
        #: (content type, plaintext, time, packet number, record size)
        self.held: tuple[int, bytes, int, int, int] | None = None

    def counts(self) -> tuple[int, int, int, int]:
        return self.read, self.undecrypted, self.other, self.gap_bytes

    @property
    def out(self) -> Any:  # the direction's Kafka framer
        return self.session.outputs[self.d]

    def begin_after(self, captured: int, lost: int) -> None:
        """This direction's first ``captured`` bytes (and ``lost`` lost ones) were read as something
        else before the connection was known to be TLS: counted as other (and gap), and records are
        found by scanning."""
        self.other += captured
        self.gap_bytes += lost
        if captured or lost:
            self.lost = True
            self.after_gap = True

    def _pass_over(self, n: int) -> None:
        """``n`` captured bytes not read as records: protected ones are undecrypted, others other."""
        if self.encrypted:
            self.undecrypted += n
        else:
            self.other += n

    # -- records -------------------------------------------------------------------------------
    def _run(self, ts: int, number: int) -> None:
        buf = self.buf
        pos = 0
        while not self.dead:
            if self.lost:
                if pos:
                    del buf[:pos]
                    pos = 0
                if not self._resync(ts, number):
                    return
                continue
            pos = self._whole_records(buf, pos, ts, number)
            if self.dead or self.lost:
                continue
            if record_length(buf, pos) >= 0 or len(buf) - pos < 5 and header_prefix(buf, pos):
                break  # a record cut at the end, or its header: the rest is not here yet
            del buf[:pos]  # not a record header where one starts: damage, or not TLS
            pos = 0
            self.session.fail("bytes that are not TLS records")
            self.lost = True
            self.scan_from = 1
        if self.dead:
            self._pass_over(len(buf) - pos)
            buf.clear()
        elif pos:
            del buf[:pos]

    def _whole_records(self, b: bytes | bytearray, pos: int, ts: int, number: int) -> int:
        """Read the records lying whole in b from pos on, while the direction is neither lost nor
        dead; returns the offset after the last (a record cut at the end, or bytes that are not a
        record header, stop it). Reads the buffer for _run, and a chunk arriving on an empty buffer
        in place (data: not copied into the buffer first)."""
        end = len(b)
        while not self.dead and not self.lost:
            n = record_length(b, pos)
            if n < 0 or end - pos < 5 + n:
                break
            header, payload = _record_in_place(b, pos, n)
            pos += 5 + n
            self._record(header, payload, self.rec_ts, self.rec_num)
            self.rec_ts, self.rec_num = ts, number
        return pos

    def _drop(self, n: int) -> None:
        """Pass over the first n bytes of buf while scanning."""
        if n > 0:
            self._pass_over(n)
            self.missing += n
            del self.buf[:n]

    def _resync(self, ts: int, number: int) -> bool:
        """Find where records start again. True: buf starts at a record now; False: more bytes are
        needed (those ruled out are counted and dropped) or the direction was given up.

        With the keys, a candidate verifies: the bytes lost bound the records lost (at least one
        per MAX_RECORD bytes, at most one per MIN_PROTECTED), and those sequence numbers are tried,
        fewest lost records first (at most RESYNC_RECORDS per candidate). Without them, a candidate
        whose record is followed by another header is taken."""
        buf = self.buf
        s = self.session
        keys = self.keys if self.encrypted else None
        i = self.scan_from
        while True:
            i = next_header(buf, i)
            if i + 5 > len(buf):  # no header here: keep only what may begin one
                while i < len(buf) and not header_prefix(buf, i):
                    i += 1
                self._drop(i)
                self.scan_from = 0
                return False
            self._drop(i)
            i = 0
            self.scan_from = 0
            n = record_length(buf, 0)
            if keys is None:
                if len(buf) < 5 + n + 5:
                    if len(buf) < 5 + n or header_prefix(buf, 5 + n):
                        return False  # wait for the record and the next header
                elif record_length(buf, 5 + n) >= 0:
                    self.lost = False
                    self.missing = 0
                    return True
                i = 1
                continue
            if len(buf) < 5 + n:
                return False  # wait for the whole candidate record
            self.tried += 1
            header, payload = _record_at(buf, 0, n)
            lost = self.missing
            first = keys.seq + lost // (MAX_RECORD + 5)
            last = keys.seq + lost // MIN_PROTECTED + 1
            tries = max(0, min(RESYNC_RECORDS, RESYNC_BUDGET - s.trials, last - first + 1))
            s.trials += tries
            seq = keys.find(header, payload, first, tries)
            if seq is not None:
                # the plaintext lost: every byte lost, less each lost record's overhead
                self.out.gap(max(0, lost - (seq - keys.seq) * keys.overhead), ts, number)
                keys.seq = seq
                self.lost = False
                self.tried = 0
                self.missing = 0
                self.suspect = 0
                return True
            if self.tried >= RESYNC_CANDIDATES or s.trials >= RESYNC_BUDGET:
                s.fail("no record verified after a gap" if self.after_gap else "no record verified after bytes that "
                       "are not TLS records")
                self.out.gap(self.missing, ts, number)
                self.dead = True
                self._pass_over(len(buf))
                buf.clear()
                return False
            i = 1

    def _record(self, header: bytes, payload: Payload, ts: int, number: int) -> None:  # TlsDirection's
        raise NotImplementedError
