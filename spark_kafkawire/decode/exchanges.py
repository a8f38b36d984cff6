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

Statuses (column ``status``; ``detail`` says more):

=================  ===============================================================================
complete           request and response both decoded
no_response        a request with no response in the capture (detail: acks=0, connection closed,
                   capture ended, correlation id reused)
request_missing    a response whose request is not in the capture: without the request's api key
                   and version nothing past the correlation id can be decoded
undecoded          headers decoded, but a body does not fit its schema (detail: field and offset)
truncated          a frame of the exchange was cut short by a gap in the capture or its end
malformed          a frame whose header does not parse (detail says why)
unknown_api        a request for an api key or version no Kafka release defines
capture_damaged    the capture file is damaged from here on (detail: packet number, byte offset)
capture_changed    streaming source only: a file already read changed or vanished (detail says how);
                   it is not read again
tls                the connection carries TLS records: encrypted, nothing to decode (one row)
sasl_token         a raw SASL token: after a SaslHandshake v0 the client and broker exchange tokens
                   without Kafka headers; nothing of their bytes is shown (only the frame size)
=================  ===============================================================================
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Callable, Final, Iterable, Protocol

from librt.strings import read_i32_be

from .. import protocol
from ..kafka.body import DEFAULT_RECORD_OPTIONS, BodyError, Facts, RecordOptions, decode_with_facts, leading_field
from ..kafka.layouts import schemas
from ..kafka.secrets import seal
from .connstate import ConnState, Endpoints, Request, Response
from ..wire.frames import DEFAULT_MAX_FRAME, Frame, Framer
from ..kafka.headers import HeaderError, RequestHeader, message_code, parse_response_header
from ..kafka.headline import headline_from_facts
from .predicate import Predicate, always_decode
from .roles import Roles
from ..wire.tcp import Connection
from ..tls.guess import TlsGuess, record_header
from ..tls.budget import TrialBudget
from ..kafka.topicids import LEARNED_BYTES, TopicIds

if TYPE_CHECKING:  # (the key log and the TLS session are imported when a read needs them)
    from ..tls.keylog import KeyLog

__all__ = ["Decoder", "Endpoints", "Request", "Response", "RowSink", "STATUSES", "DAMAGE"]

COMPLETE: Final = "complete"
NO_RESPONSE: Final = "no_response"
REQUEST_MISSING: Final = "request_missing"
TRUNCATED: Final = "truncated"
MALFORMED: Final = "malformed"
UNKNOWN_API: Final = "unknown_api"
CAPTURE_DAMAGED: Final = "capture_damaged"
CAPTURE_CHANGED: Final = "capture_changed"
UNDECODED: Final = "undecoded"
TLS: Final = "tls"
SASL_TOKEN: Final = "sasl_token"
STATUSES: Final = (COMPLETE, NO_RESPONSE, REQUEST_MISSING, TRUNCATED, MALFORMED, UNKNOWN_API, UNDECODED,
                   CAPTURE_DAMAGED, TLS, SASL_TOKEN, CAPTURE_CHANGED)
SASL_TOKEN_DETAIL: Final = "raw SASL token after SaslHandshake v0: contents withheld"
#: statuses that mean damage (option mode: DROPMALFORMED drops them, FAILFAST raises)
DAMAGE: Final = frozenset({TRUNCATED, MALFORMED, UNDECODED, CAPTURE_DAMAGED})

MAX_PENDING_REQUESTS: Final = 4096  # per connection; older unanswered requests are reported, not kept


class RowSink(Protocol):
    """Receives decoded exchanges; builds the rows of the requested shape."""

    def exchange(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None, extra: tuple | None) -> None: ...

    #: optional: called with each TCP connection's row, (conn, endpoints, client direction, protocol,
    #: framers, TLS session or None); None or absent where the rows have none (the decoder then spares working it out)
    connection: Callable[..., None] | None


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


#: how a response to (api key, version) is read: its header version, and whether its body is
#: decoded whatever the filter (always_decode); facts of the protocol, found once for each, by
#: headers.message_code (bounded: the numbers come from the capture)
_RESPONSE_READS: Final[dict[int, tuple[int | None, bool]]] = {}
RESPONSE_READS_KEPT: Final = 4096


def response_read(api_key: int, version: int) -> tuple[int | None, bool]:
    """(header version or None when the request is not a known one, always decoded)."""
    k = message_code(api_key, version, False)
    known = _RESPONSE_READS.get(k)
    if known is not None:
        return known
    hv = protocol.response_header_version(api_key, version)
    found = (hv, hv is not None and always_decode(api_key, version, False))
    if len(_RESPONSE_READS) >= RESPONSE_READS_KEPT:
        _RESPONSE_READS.clear()
    _RESPONSE_READS[k] = found
    return found


def _decode(api_key: int, version: int, request: bool, frame: Frame, pos: int,
            opts: RecordOptions, st: ConnState) -> tuple[dict | None, str | None, Facts | None]:
    """Decode a body; returns (value, None, facts) or (None, why not, None)."""
    if not frame.complete:
        return None, None, None
    try:
        value, _v, facts = decode_with_facts(api_key, version, request, frame.data, pos, opts)
        if api_key in schemas().secret_apis:
            if st.secrets is None:
                st.secrets = []
            value = seal(value, st.secrets)
        return value, None, facts
    except KeyError:
        kind = "request" if request else "response"
        return None, f"no schema for api key {api_key} version {version} {kind}", None
    except BodyError as e:
        return None, f"{'request' if request else 'response'} body: {e}", None


def request_columns(h: RequestHeader, ep: Endpoints | None, ts_ns: int) -> dict:
    """The columns a filter may test of a request, known from its header alone."""
    return {
        "api_key": h.api_key, "api_name": protocol.API_NAMES.get(h.api_key), "api_version": h.api_version,
        "client_id": h.client_id, "client_ip": ep.client_ip if ep else None,
        "client_port": ep.client_port if ep else None, "broker_ip": ep.broker_ip if ep else None,
        "broker_port": ep.broker_port if ep else None,
        "request_time": ts_ns // 1000 * 1000,  # the column holds microseconds
    }


class Pairing:
    """Frames -> exchanges: a connection's frames, once its roles are decided, paired by
    correlation id into exchanges for the row sink, each request's body decoded (or not: another
    share's, filtered out). The Decoder is a Pairing with the reassembler's interface (connections
    opened and closed, their framers, TLS detection)."""

    def __init__(self, sink: RowSink, record_options: RecordOptions, predicate: Predicate | None,
                 decode_bodies: bool, share: tuple[int, int] | None, topic_ids: TopicIds | None):
        self.sink = sink
        self.share = share
        self.seq = 0  # rows begun so far (see _mine)
        self.predicate = predicate if predicate is not None and predicate.early else None
        self.decode_bodies = decode_bodies  # False when no row shows a body (rows=connections)
        self.record_options = record_options
        self.roles = Roles()
        self.topics = topic_ids if topic_ids is not None else TopicIds()

    @property
    def topic_ids(self) -> dict[str, str]:
        """Topic id -> name, from the responses seen so far."""
        return self.topics.names

    def _mine(self) -> bool:
        """Are the rows beginning here this decoder's share? (Asked once for each, in every share.)"""
        if self.share is None:
            return True
        n = self.seq
        self.seq = n + 1
        return n % self.share[1] == self.share[0]

    def _decide(self, st: ConnState, force: bool = False) -> bool:
        """Decide the roles if the queued frames allow, then hand those frames on."""
        if not self.roles.decide(st, force):
            return False
        queue, st.queue = st.queue, []
        for d, f in queue:
            self._dispatch(st, d, f)
        return True

    # -- frames ----------------------------------------------------------------------------------
    def _frame(self, st: ConnState, d: int, frame: Frame) -> None:
        st.framed = True
        if st.client_dir is None:
            st.queue.append((d, frame))
            st.queued_counts[d] += 1
            self._decide(st)
            return
        self._dispatch(st, d, frame)

    def _dispatch(self, st: ConnState, d: int, frame: Frame) -> None:
        if d == st.client_dir:
            self._request(st, frame)
        else:
            self._response(st, frame)

    def _request(self, st: ConnState, frame: Frame, mine: bool | None = None) -> None:
        """``mine``: whether the row is this share's, when it was already counted (see _mine)."""
        if mine is None:
            mine = self._mine()
        if st.raw_token(frame):  # its bytes may be a password: none of them is shown
            if mine:
                self.sink.exchange(st.endpoints, Request(frame, None, None), None, SASL_TOKEN, SASL_TOKEN_DETAIL,
                                   None)
            return
        try:
            h = st.header(frame.data)
        except HeaderError as e:
            status = TRUNCATED if not frame.complete else MALFORMED
            self._emit(st, Request(frame, None, None, skip=not mine), None, status, f"request header: {e}")
            return
        skip = not mine or self.predicate is not None and \
            not self.predicate.request_ok(request_columns(h, st.endpoints, frame.ts_ns))
        if h.header_version is None or (skip or not self.decode_bodies) and \
                not always_decode(h.api_key, h.api_version, True):
            body, err, facts = None, None, None
        else:
            body, err, facts = _decode(h.api_key, h.api_version, True, frame, h.body_offset, self.record_options, st)
        # from the body, or where it was not decoded (filtered out, another share's, not fitting its
        # layout) read by itself: every request waits for its answer as in the whole read
        acks = None
        if h.api_key == 0 and h.header_version is not None:
            acks = body.get("Acks") if body is not None else \
                leading_field(0, h.api_version, True, frame.data, h.body_offset, "Acks")
        st.observe(h, body)
        self._wait(st, Request(frame, h, acks, body, err, skip, facts))

    def _wait(self, st: ConnState, req: Request) -> None:
        """A request waits for its response (at most MAX_PENDING_REQUESTS per connection)."""
        pending = st.pending
        corr = req.header.correlation_id  # type: ignore[union-attr]
        old = pending.pop(corr, None)
        if old is not None:
            self._emit(st, old, None, NO_RESPONSE, "correlation id reused before a response")
        pending[corr] = req
        if len(pending) > MAX_PENDING_REQUESTS:
            oldest = next(iter(pending))
            self._emit(st, pending.pop(oldest), None, NO_RESPONSE,
                       f"no response among the next {MAX_PENDING_REQUESTS} requests")

    def _response(self, st: ConnState, frame: Frame) -> None:
        paired = self._pair(st, frame)
        if paired is None:
            return
        corr, req = paired
        h = req.header
        assert h is not None  # only requests whose header parsed wait for a response
        hv, always = response_read(h.api_key, h.api_version)
        learn = always and self.decode_bodies
        if req.skip and not learn:  # another share's or filtered out, and teaching nothing: nothing to read
            return
        status, detail = COMPLETE, None
        body = err = facts = None
        try:
            _corr, pos = parse_response_header(frame.data, hv)
            if hv is not None and self.decode_bodies and not req.skip:
                body, err, facts = _decode(h.api_key, h.api_version, False, frame, pos, self.record_options, st)
                self.topics.taught(facts)
            elif learn:
                self._learn(st, h, frame, pos)
        except HeaderError as e:
            status, detail = MALFORMED, f"response header: {e}"
        if req.skip:
            return
        resp = Response(frame, corr, hv, body, err, facts)
        if req.error or err:
            status, detail = UNDECODED, "; ".join(x for x in (req.error, err) if x)
        if h.header_version is None:
            status, detail = UNKNOWN_API, f"api key {h.api_key} version {h.api_version} is not defined"
        elif not (req.frame.complete and frame.complete):
            status, detail = TRUNCATED, "cut short by a gap in the capture or its end"
        self._emit(st, req, resp, status, detail)

    def _pair(self, st: ConnState, frame: Frame) -> tuple[int, Request] | None:
        """The correlation id of a response and the request it answers, the acks=0 Produce
        requests sent before that one settled (Kafka answers in order: they got no response); None
        when it answers none in the capture (too short for a header, or its request missing: such a
        response has its row already)."""
        if len(frame.data) < 4:
            if self._mine():
                status = TRUNCATED if not frame.complete else MALFORMED
                self._emit(st, None, Response(frame, None, None), status, "response shorter than its header")
            return None
        corr: int = read_i32_be(frame.data, 0)
        req = st.pending.pop(corr, None)
        if req is None:
            if not self._mine():
                return None
            if st.sasl_raw:  # the broker's token (a SCRAM challenge, say): nothing of it is shown
                self.sink.exchange(st.endpoints, None, Response(frame, None, None), SASL_TOKEN, SASL_TOKEN_DETAIL, None)
                return None
            self._emit(st, None, Response(frame, corr, None), REQUEST_MISSING,
                       "request not in the capture: api key and version unknown")
            return None
        if st.pending:
            for c in [c for c, r in st.pending.items() if r.acks == 0 and r.frame.offset < req.frame.offset]:
                self._emit(st, st.pending.pop(c), None, NO_RESPONSE, "acks=0: no response expected")
        return corr, req

    def _learn(self, st: ConnState, h: RequestHeader, frame: Frame, pos: int) -> None:
        """A response no row of this decoder shows, decoded for the topic ids it teaches. Bodies
        with secrets are decoded every time (the connection's secrets are collected there)."""
        remembered = frame.complete and h.api_key not in schemas().secret_apis and \
            len(frame.data) - pos <= LEARNED_BYTES
        key = frame.data[pos:] if remembered else None  # (frames are bytes: a slice is its own copy)
        self.topics.learn(h.api_key, h.api_version, key,
                          lambda: _decode(h.api_key, h.api_version, False, frame, pos, self.record_options, st)[2])

    def _emit(self, st: ConnState, req: Request | None, resp: Response | None, status: str,
              detail: str | None) -> None:
        if req is not None and req.skip:
            return
        if not self.decode_bodies and status not in DAMAGE:  # rows=connections: only damage (FAILFAST) matters
            return
        if req is not None and resp is None and status == NO_RESPONSE:
            status, detail = _unanswered(req, detail)
        h = req.header if req is not None else None
        extra = headline_from_facts(h.api_key if h else None, req.body if req is not None else None,
                                    req.facts if req is not None else None, resp.body if resp is not None else None,
                                    resp.facts if resp is not None else None,
                                    self.topics.names) + st.software + st.sasl + st.library()
        self.sink.exchange(st.endpoints, req, resp, status, detail, extra)

    def damaged(self, detail: str) -> None:
        if self._mine():
            self.sink.exchange(None, None, None, CAPTURE_DAMAGED, detail, None)


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
                connection(conn, st.endpoints, role, "unknown", None, None)
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
            connection(conn, st.endpoints, client_dir,
                       "tls" if st.tls else "kafka" if st.framed else "unknown", st.framers, st.tls_session)

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


def _unanswered(req: Request, detail: str | None) -> tuple[str, str | None]:
    """The status of a request that got no response: why, where the request itself says."""
    h = req.header
    if h is not None and h.header_version is None:
        return UNKNOWN_API, f"api key {h.api_key} version {h.api_version} is not defined"
    if not req.frame.complete:
        return TRUNCATED, "request cut short by a gap in the capture or its end"
    if req.acks == 0:
        return NO_RESPONSE, "acks=0: no response expected"
    if req.error:
        return UNDECODED, req.error
    return NO_RESPONSE, detail
