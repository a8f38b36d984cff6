"""Frames -> messages -> exchanges.

The :class:`Decoder` is the reassembler's listener. For each connection it

1. has the roles decided (which side is the client: see :mod:`roles`);
2. parses request headers (header version from api key and version) and response headers (header
   version from the request they answer);
3. pairs each response with its request by correlation id (pipelining is normal; Kafka answers
   in order, so an acks=0 Produce request still pending when a later request is answered was
   never going to be answered);
4. hands each exchange, or each message, to a row sink.

What it knows of each connection is a :class:`~connstate.ConnState` (roles, waiting requests,
session facts: SASL, TLS, client software); topic ids are learnt by :class:`~topicids.TopicIds`.

The statuses it gives are :mod:`status`'s.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Iterable

from ..kafka.body import DEFAULT_RECORD_OPTIONS, RecordOptions
from .connstate import ConnState, Endpoints, Request, Response
from ..wire.frames import DEFAULT_MAX_FRAME, Frame, Framer
from .predicate import Predicate
from ..wire.tcp import Connection
from ..tls.guess import TlsGuess, record_header
from ..tls.budget import TrialBudget
from ..kafka.topicids import TopicIds
from .status import NO_RESPONSE, TLS
from .pairing import Pairing, RowSink
from .summary import DirectionSummary, summarize

if TYPE_CHECKING:  # (the key log and the TLS session are imported when a read needs them)
    from ..tls.keylog import KeyLog
    from ..tls.session import TlsSession

__all__ = ["Decoder", "Endpoints", "Request", "Response", "RowSink"]


class _Side:
    """One direction of a connection as its framer's listener (one small object for its three
    callbacks: a hundred thousand connections may be open at once)."""

    __slots__ = ("decoder", "st", "d")

    def __init__(self, decoder: "Decoder", st: ConnState, d: int):
        self.decoder = decoder
        self.st = st
        self.d = d

    def frame(self, f: Frame) -> None:
        self.decoder._frame(self.st, self.d, f)

    def plausible(self, data: bytes, strict: bool) -> int:
        return self.decoder.roles.plausible(self.st, self.d, data, strict)

    def first_bytes(self, chunk: bytes, ts: int, number: int) -> bool:
        return self.decoder._first_bytes(self.st, self.d, chunk, ts, number)


class Decoder(Pairing):
    """Listener of the reassembler: pairs each connection's frames into exchanges for a row sink.

    ``topic_ids``: the capture's topic id map, shared with the sink (a new one if not given).
    ``share`` = (k, n): this decoder makes the rows of one n-th of the file, those whose number (in
    the order rows begin: requests, answers without a request, connections) is k modulo n. It does
    every other step for every connection, so all shares see the same state."""

    def __init__(self, sink: RowSink, max_frame: int = DEFAULT_MAX_FRAME,
                 record_options: RecordOptions = DEFAULT_RECORD_OPTIONS, predicate: Predicate | None = None,
                 decode_bodies: bool = True, share: tuple[int, int] | None = None,
                 topic_ids: TopicIds | None = None, keylog: KeyLog | None = None,
                 trial_budget: TrialBudget | None = None):
        Pairing.__init__(self, sink, record_options, predicate, decode_bodies, share, topic_ids)
        self.connection_row = getattr(sink, "connection", None)
        self.max_frame = max_frame
        self.ending = False  # set while the capture's end flushes open connections
        self.keylog = keylog  # TLS secrets (option tlsKeyLog): TLS connections are decrypted with them
        self.trial_budget = trial_budget if trial_budget is not None else TrialBudget()  # (see TlsSession.trial)

    # -- reassembler interface -----------------------------------------------------------------
    def opened(self, conn: Connection) -> tuple[Framer, Framer]:
        st = ConnState(conn)
        conn.state = st
        st.framers = self._framers(st)
        return st.framers[0], st.framers[1]

    def _framers(self, st: ConnState) -> list[Framer]:
        out = []
        for d in (0, 1):
            side = _Side(self, st, d)
            out.append(Framer(side.frame, self.max_frame, synced=False,
                              plausible=side.plausible, on_first=side.first_bytes))
        return out

    def _first_bytes(self, st: ConnState, d: int, chunk: bytes, ts: int, number: int) -> bool:
        """A direction's first bytes. A TLS record header there makes the connection a TLS guess:
        this direction's bytes are held (its sink is the guess's) until the guess is settled (see
        tls.TlsGuess and _settle). True: the guess took the chunk."""
        if st.tls is not None or record_header(chunk) is None:
            return False
        guess = st.tls_guess
        if guess is None:
            guess = st.tls_guess = TlsGuess(partial(self._settle, st))  # (a partial: carried, see carry.py)
        elif guess.decided is not None:
            return False
        side = guess.side(d)
        st.conn.halves[d].sink = side
        side.data(chunk, ts, number)
        return True

    def _settle(self, st: ConnState, tls: bool) -> None:
        """The TLS guess settled. Not TLS: the held bytes go to the Kafka framers as they came. TLS:
        the connection's two TCP directions go to a TLS session from here on, which reads the
        handshake and, with the session's secrets in the key log, hands the decrypted bytes to two
        new framers; frames the old framers cut from what were TLS bytes make no rows, and their
        bytes are counted by the TLS session as bytes in no record."""
        guess = st.tls_guess
        assert guess is not None
        halves = st.conn.halves
        if not tls:
            for d in (0, 1):
                if guess.sides[d] is not None:
                    halves[d].sink = st.framers[d]
                    guess.replay(d, st.framers[d])
            return
        head = next(s.head for s in guess.sides if s is not None)
        st.tls = record_header(head) or "TLS records: the connection is encrypted"
        old = st.framers
        for f in old:
            f.disable()
        st.framers = self._framers(st)
        from ..tls.session import TlsSession  # (imported when a capture first shows TLS)

        session = TlsSession(self.keylog, st.framers, self.roles.known(st), partial(self._tls_client, st),
                             start_captured=st.conn.client is not None, budget=self.trial_budget)
        st.tls_session = session
        st.queue = []
        st.queued_counts = [0, 0]
        st.pending.clear()
        for d in (0, 1):
            sink = session.dirs[d]
            sink.begin_after(*old[d].received())  # (a guessed direction's framer saw at most a gap)
            halves[d].sink = sink
            guess.replay(d, sink)

    def _tls_client(self, st: ConnState, d: int) -> None:
        """The side that sent a ClientHello (or whose records a trial found to be the client's) is
        the client, where no SYN or frame said so already. (The connection's start_captured still
        says whether its SYN was seen.)"""
        if st.client_dir is None and st.conn.client is None:
            self.roles.assign(st, d)

    def closed(self, conn: Connection) -> None:
        st: ConnState | None = conn.state  # type: ignore[assignment]
        mine = self._mine()
        if st is None:  # no payload ever: only a connection row
            connection = self.connection_row
            if connection is not None and mine:
                st = ConnState(conn)
                role = self.roles.guess(st)
                connection(conn, st.endpoints, role, "unknown", _sides(conn, None, None, role), None)
            return
        if st.client_dir is None and st.queue:
            self._decide(st, force=True)
        tls = st.tls_session
        if tls is not None:
            self.roles.guess(st)
            # one row for a connection whose TLS was not (all) decrypted, saying what it shows
            if mine and (tls.undecrypted or not tls.decrypted):
                self.sink.exchange(st.endpoints, None, None, TLS, tls.describe(), None)
        if mine:
            self._connection_row(conn, st)
        why = "capture ended before a response" if self.ending else "connection closed without a response"
        if st.pending and st.framers and st.client_dir is not None:
            lost = st.framers[1 - st.client_dir].acct.gap_bytes
            if lost:  # the answer may be in what the capture lost: not said to be missing
                why = f"no response seen: the capture lost {lost} bytes the broker sent (the response may be among " \
                      "them)"
        for req in st.pending.values():
            self._emit(st, req, None, NO_RESPONSE, why)
        st.pending.clear()
        # the framers' callbacks hold st, and so does the TLS session's: no cycle left for the
        # garbage collector (a read makes none, see reader._no_collections)
        st.framers = []
        if tls is not None:
            tls.release()
            st.tls_session = None

    def _connection_row(self, conn: Connection, st: ConnState) -> None:
        connection = self.connection_row
        if connection is not None:
            client_dir = st.client_dir if st.client_dir is not None else self.roles.guess(st)
            tls = st.tls_session
            connection(conn, st.endpoints, client_dir, "tls" if st.tls else "kafka" if st.framed else "unknown",
                       _sides(conn, st.framers, tls, client_dir), tls)

    def part_row(self, conn: Connection) -> None:
        """The row of a connection carried into a later read (carry.py) for what this read saw of it:
        its counts so far less those of its rows before (ConnState.reported); it goes on. Not while
        its roles are undecided (a row would name a guessed client): its next row counts it all."""
        st: ConnState | None = conn.state  # type: ignore[assignment]
        if st is None or st.client_dir is None or not self._mine():
            return
        if st.reported is None:
            st.reported = {}
        self._connection_row(conn, st)

    def settled(self, conns: Iterable[Connection], t_ns: int) -> bool:
        """Is everything that started at or before ``t_ns`` decided? No request of that time waits
        for its response or its role decision, and no frame, scan or out-of-order segment of that
        time is still being put together, on any open connection."""
        t_ns += 999 - t_ns % 1000  # request_time holds microseconds: all of t's microsecond counts
        for conn in conns:
            st: ConnState | None = conn.state  # type: ignore[assignment]
            if st is None:
                continue
            if any(f.ts_ns <= t_ns for _d, f in st.queue):
                return False
            if any(not r.skip and r.frame.ts_ns <= t_ns for r in st.pending.values()):
                return False
            if any(fr.holds_bytes_from(t_ns) for fr in st.framers):
                return False
            if any(half.holds_bytes_from(t_ns) for half in conn.halves):
                return False
        return True


def _sides(conn: Connection, framers: list | None, tls: TlsSession | None,
           client_dir: int) -> tuple[DirectionSummary, DirectionSummary]:
    """The connection's two directions as its row counts them: the client's, then the broker's."""
    return summarize(conn, framers, tls, client_dir), summarize(conn, framers, tls, 1 - client_dir)
