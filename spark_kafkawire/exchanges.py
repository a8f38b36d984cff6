"""Frames -> messages -> exchanges.

The :class:`Decoder` is the reassembler's listener. For each connection it

1. decides which side is the client: the side that sent the SYN; without a SYN, a side already
   known as a broker in this capture, else the side whose frames parse as requests (and whose
   correlation ids the other side echoes); as a last resort the higher port is the client;
2. parses request headers (header version from api key and version) and response headers (header
   version from the request they answer);
3. pairs each response with its request by correlation id (pipelining is normal; Kafka answers
   in order, so an acks=0 Produce request still pending when a later request is answered was
   never going to be answered);
4. hands each exchange, or each message, to a row sink.

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

from struct import Struct
from typing import Callable, NamedTuple, Protocol

from . import protocol
from .body import (
    DEFAULT_RECORD_OPTIONS,
    BodyError,
    Facts,
    RecordOptions,
    decode_with_facts,
    leading_field,
    redact,
    schemas,
    seal,
)
from .headline import headline_from_facts
from .frames import (
    ALIGNED_ONLY,
    DEFAULT_MAX_FRAME,
    Frame,
    Framer,
    HeaderError,
    RequestHeader,
    looks_like_request,
    looks_like_request_loosely,
    parse_request_header,
    parse_response_header,
)
from .packets import ip_text
from .predicate import Predicate, always_decode
from .tcp import Connection

COMPLETE = "complete"
NO_RESPONSE = "no_response"
REQUEST_MISSING = "request_missing"
TRUNCATED = "truncated"
MALFORMED = "malformed"
UNKNOWN_API = "unknown_api"
CAPTURE_DAMAGED = "capture_damaged"
CAPTURE_CHANGED = "capture_changed"
UNDECODED = "undecoded"
TLS = "tls"
SASL_TOKEN = "sasl_token"
STATUSES = (COMPLETE, NO_RESPONSE, REQUEST_MISSING, TRUNCATED, MALFORMED, UNKNOWN_API, UNDECODED, CAPTURE_DAMAGED, TLS,
            SASL_TOKEN, CAPTURE_CHANGED)
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SASL_TOKEN_DETAIL = "raw SASL token after SaslHandshake v0: contents withheld"
#: statuses that mean damage (option mode: DROPMALFORMED drops them, FAILFAST raises)
DAMAGE = frozenset({TRUNCATED, MALFORMED, UNDECODED, CAPTURE_DAMAGED})
TLS_CONTENT_TYPES = {0x14: "TLS change_cipher_spec", 0x15: "TLS alert", 0x16: "TLS handshake",
                     0x17: "TLS application data"}
TLS_MAX_RECORD = 18432  # 2^14 plus the expansion TLS allows

MAX_PENDING_REQUESTS = 4096  # per connection; older unanswered requests are reported, not kept
LEARNED = 256  # bodies remembered for the topic ids they teach (see Decoder._learn)
LEARNED_BYTES = 64 << 10  # the largest such body remembered (at most 16 MiB in all)
ROLE_DECISION_FRAMES = 4  # frames queued in one direction before deciding roles without the other

_I32 = Struct("!i")
_U16 = Struct("!H")


class Request(NamedTuple):
    frame: Frame
    header: RequestHeader | None
    acks: int | None  # Produce only
    body: dict | None = None
    error: str | None = None  # why the body could not be decoded
    skip: bool = False  # a filter rules out its rows: neither it nor its response is decoded or shown
    facts: Facts | None = None  # what the headline columns take from the body


class Response(NamedTuple):
    frame: Frame
    correlation_id: int | None
    header_version: int | None
    body: dict | None = None
    error: str | None = None
    facts: Facts | None = None


class Endpoints(NamedTuple):
    client_ip: str
    client_port: int
    broker_ip: str
    broker_port: int


class RowSink(Protocol):
    """Receives decoded exchanges; builds the rows of the requested shape."""

    def exchange(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None, extra: dict | None) -> None: ...

    #: optional: called with each TCP connection's row, (conn, endpoints, client direction, protocol,
    #: framers); None or absent where the rows have none (the decoder then spares working it out)
    connection: Callable[..., None] | None


class _ConnState:
    __slots__ = ("conn", "framers", "client_dir", "queue", "queued_counts", "pending", "endpoints", "software",
                 "tls", "framed", "sasl_raw", "secrets", "sasl")

    def __init__(self, conn: Connection):
        self.conn = conn
        self.framers: list[Framer] = []
        self.client_dir: int | None = None  # index of the direction carrying requests
        self.queue: list[tuple[int, Frame]] = []  # frames waiting for the role decision
        self.queued_counts = [0, 0]
        self.pending: dict[int, Request] = {}
        self.endpoints: Endpoints | None = None
        self.software: tuple[str | None, str | None] = (None, None)  # from ApiVersions v3+
        self.tls: str | None = None  # what the TLS record header said, when the connection is TLS
        self.framed = False  # any Kafka frame seen
        self.sasl_raw = False  # after a SaslHandshake v0: raw SASL tokens until the next Kafka request
        self.secrets: list[str] | None = None  # texts of the connection's secret fields so far (see seal)
        self.sasl: tuple[str | None, str | None] = (None, None)  # mechanism and user, once a login shows them


class _Side:
    """One direction of a connection as its framer's listener (one small object for its three
    callbacks: a hundred thousand connections may be open at once). With the compiled lane the
    framer's on_frame is the lane's own Side instead (see lane.pairing), which hands frames on to
    the same Decoder methods."""

    __slots__ = ("decoder", "st", "d")

    def __init__(self, decoder: "Decoder", st: _ConnState, d: int):
        self.decoder = decoder
        self.st = st
        self.d = d

    def frame(self, f: Frame) -> None:
        self.decoder._frame(self.st, self.d, f)

    def plausible(self, data: bytes, strict: bool) -> int:
        return self.decoder._plausible(self.st, self.d, data, strict)

    def first_bytes(self, chunk: bytes) -> None:
        self.decoder._first_bytes(self.st, chunk)


def _decode(api_key: int, version: int, request: bool, frame: Frame, pos: int,
            opts: RecordOptions, st: _ConnState) -> tuple[dict | None, str | None, Facts | None]:
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


class Decoder:
    """Listener of the reassembler: turns each connection's frames into exchanges."""

    def __init__(self, rows: RowSink, max_frame: int = DEFAULT_MAX_FRAME,
                 record_options: RecordOptions = DEFAULT_RECORD_OPTIONS, predicate: Predicate | None = None,
                 decode_bodies: bool = True, share: tuple[int, int] | None = None):
        self.rows = rows
        self.connection_row = getattr(rows, "connection", None)
        #: (k, n): this decoder makes the rows of one n-th of the file, those whose number (in the
        #: order rows begin: requests, answers without a request, connections) is k modulo n. It
        #: does every other step for every connection, so all shares see the same state.
        self.share = share
        self.seq = 0
        self.predicate = predicate if predicate is not None and predicate.early else None
        self.decode_bodies = decode_bodies  # False when no row shows a body (rows=connections)
        self.max_frame = max_frame
        self.record_options = record_options
        self.brokers: set[tuple[bytes, int]] = set()  # endpoints known to be brokers
        self.ending = False  # set while the capture's end flushes open connections
        self.topic_ids: dict[str, str] = {}  # topic id -> name, from responses seen so far
        # what bodies decoded only for their topic ids taught, by their bytes: a client asks for
        # the same metadata again and again, and a share need not decode each answer anew
        self.learned: dict[tuple[int, int, bytes], dict[str, str]] = {}
        #: sides(st, d) -> on_frame of a connection's direction d: the compiled lane's pairing (see
        #: lane.pairing), which takes the common frame of another share's row itself; None: _Side.frame
        self.sides: Callable[[_ConnState, int], Callable[[Frame], None]] | None = None

    def _mine(self) -> bool:
        """Are the rows beginning here this decoder's share? (Asked once for each, in every share.)"""
        if self.share is None:
            return True
        n = self.seq
        self.seq = n + 1
        return n % self.share[1] == self.share[0]

    # -- reassembler interface -----------------------------------------------------------------
    def opened(self, conn: Connection) -> tuple[Framer, Framer]:
        st = _ConnState(conn)
        conn.state = st
        st.framers = []
        sides = self.sides
        for d in (0, 1):
            side = _Side(self, st, d)
            st.framers.append(Framer(side.frame if sides is None else sides(st, d), self.max_frame, synced=False,
                                     plausible=side.plausible, on_first=side.first_bytes))
        return st.framers[0], st.framers[1]

    def _first_bytes(self, st: _ConnState, chunk: bytes) -> None:
        """TLS is recognised by its record header: content type, version 3.x, a bounded length."""
        if st.tls is None and len(chunk) >= 5 and chunk[0] in TLS_CONTENT_TYPES and chunk[1] == 3 and \
                chunk[2] <= 4 and _U16.unpack_from(chunk, 3)[0] <= TLS_MAX_RECORD:
            version = {0: "SSL 3.0", 1: "TLS 1.0", 2: "TLS 1.1", 3: "TLS 1.2 or 1.3", 4: "TLS 1.3"}[chunk[2]]
            st.tls = f"{TLS_CONTENT_TYPES[chunk[0]]} record, {version}: the connection is encrypted"
            for f in st.framers:
                f.disable()

    def closed(self, conn: Connection) -> None:
        st: _ConnState = conn.state  # type: ignore[assignment]
        mine = self._mine()
        if st is None:  # no payload ever: only a connection row
            connection = self.connection_row
            if connection is not None and mine:
                st = _ConnState(conn)
                role = self._endpoints_guess(st)
                connection(conn, st.endpoints, role, "unknown", None)
            return
        if st.client_dir is None and st.queue:
            self._decide(st, force=True)
        if st.tls is not None:
            self._endpoints_guess(st)
            if mine:
                self.rows.exchange(st.endpoints, None, None, TLS, st.tls, None)
        connection = self.connection_row
        if connection is not None and mine:
            client_dir = st.client_dir if st.client_dir is not None else self._endpoints_guess(st)
            connection(conn, st.endpoints, client_dir,
                       "tls" if st.tls else "kafka" if st.framed else "unknown", st.framers)
        why = "capture ended before a response" if self.ending else "connection closed without a response"
        for req in st.pending.values():
            self._emit(st, req, None, NO_RESPONSE, why)
        st.pending.clear()
        st.framers = []  # the framers' callbacks hold st: no cycle left for the garbage collector

    # -- roles ---------------------------------------------------------------------------------
    def _plausible(self, st: _ConnState, d: int, data: bytes, strict: bool) -> int:
        """Could a frame with this header start here? 0 (False): no; 1 (True): yes; ALIGNED_ONLY:
        only where a captured segment starts (see frames.ALIGNED_ONLY).

        A request: a header of a known api key and version (``strict``), or at a stream's start any
        well-formed request header. A response: its correlation id matches a request waiting on
        the connection; at a stream's start, anything (its request may be outside the capture).
        While the roles are unknown, either.
        """
        role = self._role_of(st)
        if role is None or d == role:
            if looks_like_request(data) if strict else looks_like_request_loosely(data):
                return True
            if role is not None:
                return False
        if not strict:
            return len(data) >= 4
        if len(data) < 4:
            return False
        corr = _I32.unpack_from(data)[0]
        # a response to a request waiting for it, or to one still queued for the role decision
        if corr in st.pending or any(
                dd != d and len(f.data) >= 8 and _I32.unpack_from(f.data, 4)[0] == corr for dd, f in st.queue):
            return True
        # the other direction is not in the capture at all: no request to match, structure only
        if corr >= 0 and st.framers[1 - d].pos == 0 and (role is not None or not looks_like_request(data)):
            return ALIGNED_ONLY
        return False

    def _endpoints_guess(self, st: _ConnState) -> int:
        """Endpoints of a connection whose roles no frame decided: SYN, known brokers, lower port.
        Returns the client's direction."""
        conn = st.conn
        role = self._role_of(st)
        if role is None:
            role = 0 if conn.a[1] > conn.b[1] else 1
        if st.endpoints is None:
            client, broker = (conn.a, conn.b) if role == 0 else (conn.b, conn.a)
            st.endpoints = Endpoints(ip_text(client[0]), client[1], ip_text(broker[0]), broker[1])
        return role

    def _role_of(self, st: _ConnState) -> int | None:
        if st.client_dir is not None:
            return st.client_dir
        conn = st.conn
        if conn.client is not None:
            return conn.client
        if conn.b in self.brokers:
            return 0
        if conn.a in self.brokers:
            return 1
        return None

    def _decide(self, st: _ConnState, force: bool = False) -> bool:
        role = self._role_of(st)
        if role is None:
            firsts: list[Frame | None] = [None, None]
            for d, f in st.queue:
                if firsts[d] is None:
                    firsts[d] = f
            if (firsts[0] is None or firsts[1] is None) and not force and \
                    st.queued_counts[0 if firsts[0] is not None else 1] < ROLE_DECISION_FRAMES:
                return False  # one direction so far, and too few frames to decide on it alone
            req = [f is not None and looks_like_request(f.data) for f in firsts]
            if firsts[0] is not None and firsts[1] is not None:
                echo = [False, False]
                for d in (0, 1):
                    if req[d]:
                        corrs = {_I32.unpack_from(f.data, 4)[0] for dd, f in st.queue if dd == d and len(f.data) >= 8}
                        other = firsts[1 - d]
                        echo[d] = len(other.data) >= 4 and _I32.unpack_from(other.data)[0] in corrs
                if echo[0] != echo[1]:
                    role = 0 if echo[0] else 1
                elif req[0] != req[1]:
                    role = 0 if req[0] else 1
                else:  # last resort: the broker has the lower port
                    role = 0 if st.conn.a[1] > st.conn.b[1] else 1
            else:
                d = 0 if firsts[0] is not None else 1
                role = d if req[d] else 1 - d
        st.client_dir = role
        conn = st.conn
        client, broker = (conn.a, conn.b) if role == 0 else (conn.b, conn.a)
        self.brokers.add(broker)
        st.endpoints = Endpoints(ip_text(client[0]), client[1], ip_text(broker[0]), broker[1])
        queue, st.queue = st.queue, []
        for d, f in queue:
            self._dispatch(st, d, f)
        return True

    # -- frames ----------------------------------------------------------------------------------
    def _frame(self, st: _ConnState, d: int, frame: Frame) -> None:
        st.framed = True
        if st.client_dir is None:
            st.queue.append((d, frame))
            st.queued_counts[d] += 1
            self._decide(st)
            return
        self._dispatch(st, d, frame)

    def _dispatch(self, st: _ConnState, d: int, frame: Frame) -> None:
        if d == st.client_dir:
            self._request(st, frame)
        else:
            self._response(st, frame)

    def _request(self, st: _ConnState, frame: Frame, mine: bool | None = None) -> None:
        """``mine``: whether the row is this share's, when it was already counted (see _mine)."""
        if mine is None:
            mine = self._mine()
        if st.sasl_raw:
            if not looks_like_request(frame.data):  # a token: its bytes may be a password
                if frame.complete and st.sasl[1] is None:
                    st.sasl = (st.sasl[0], redact("AuthBytes", frame.data).get("user"))
                if mine:
                    self.rows.exchange(st.endpoints, Request(frame, None, None), None, SASL_TOKEN, SASL_TOKEN_DETAIL,
                                       None)
                return
            st.sasl_raw = False  # authenticated: Kafka requests again
        try:
            h = parse_request_header(frame.data)
        except HeaderError as e:
            status = TRUNCATED if not frame.complete else MALFORMED
            self._emit(st, Request(frame, None, None, skip=not mine), None, status, f"request header: {e}")
            return
        skip = not mine or self.predicate is not None and not self._wanted(st, h, frame)
        if h.header_version is None or not self.decode_bodies or \
                (skip and not always_decode(h.api_key, h.api_version, True)):
            body, err, facts = None, None, None
        else:
            body, err, facts = _decode(h.api_key, h.api_version, True, frame, h.body_offset, self.record_options, st)
        # from the body, or where it was not decoded (filtered out, another share's, not fitting its
        # layout) read by itself: every request waits for its answer as in the whole read
        acks = None
        if h.api_key == 0 and h.header_version is not None:
            acks = body.get("Acks") if body is not None else \
                leading_field(0, h.api_version, True, frame.data, h.body_offset, "Acks")
        if body is not None and body.get("ClientSoftwareName"):
            st.software = (body.get("ClientSoftwareName"), body.get("ClientSoftwareVersion"))
        if h.api_key == SASL_HANDSHAKE and body is not None:
            st.sasl = (body.get("Mechanism"), None)
        elif h.api_key == SASL_AUTHENTICATE and body is not None and isinstance(body.get("AuthBytes"), dict) and \
                body["AuthBytes"].get("user"):
            st.sasl = (st.sasl[0], body["AuthBytes"]["user"])
        if h.api_key == SASL_HANDSHAKE and h.api_version == 0:
            st.sasl_raw = True
        req = Request(frame, h, acks, body, err, skip, facts)
        pending = st.pending
        old = pending.pop(h.correlation_id, None)
        if old is not None:
            self._emit(st, old, None, NO_RESPONSE, "correlation id reused before a response")
        pending[h.correlation_id] = req
        if len(pending) > MAX_PENDING_REQUESTS:
            oldest = next(iter(pending))
            self._emit(st, pending.pop(oldest), None, NO_RESPONSE,
                       f"no response among the next {MAX_PENDING_REQUESTS} requests")

    def _response(self, st: _ConnState, frame: Frame) -> None:
        if len(frame.data) < 4:
            if not self._mine():
                return
            status = TRUNCATED if not frame.complete else MALFORMED
            self._emit(st, None, Response(frame, None, None), status, "response shorter than its header")
            return
        corr = _I32.unpack_from(frame.data)[0]
        req = st.pending.pop(corr, None)
        if req is None:
            if not self._mine():
                return
            if st.sasl_raw:  # the broker's token (a SCRAM challenge, say): nothing of it is shown
                self.rows.exchange(st.endpoints, None, Response(frame, None, None), SASL_TOKEN, SASL_TOKEN_DETAIL, None)
                return
            self._emit(st, None, Response(frame, corr, None), REQUEST_MISSING,
                       "request not in the capture: api key and version unknown")
            return
        # Kafka answers in order: acks=0 Produce requests sent before this one got no response
        if st.pending:
            for c in [c for c, r in st.pending.items() if r.acks == 0 and r.frame.offset < req.frame.offset]:
                self._emit(st, st.pending.pop(c), None, NO_RESPONSE, "acks=0: no response expected")
        h = req.header
        hv = protocol.response_header_version(h.api_key, h.api_version)
        learn = hv is not None and self.decode_bodies and always_decode(h.api_key, h.api_version, False)
        if req.skip and not learn:  # another share's or filtered out, and teaching nothing: nothing to read
            return
        status, detail = COMPLETE, None
        body = err = facts = None
        try:
            _corr, pos = parse_response_header(frame.data, hv)
            if hv is not None and self.decode_bodies and not req.skip:
                body, err, facts = _decode(h.api_key, h.api_version, False, frame, pos, self.record_options, st)
                if facts is not None:
                    self.topic_ids.update(facts.topic_ids)
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

    def _learn(self, st: _ConnState, h: RequestHeader, frame: Frame, pos: int) -> None:
        """A response no row of this decoder shows, decoded for the state it teaches. Its topic ids
        are remembered by the body's bytes (at most LEARNED bodies of up to LEARNED_BYTES each);
        bodies with secrets are decoded every time (the connection's secrets are collected there)."""
        key = None
        if frame.complete and h.api_key not in schemas().secret_apis and len(frame.data) - pos <= LEARNED_BYTES:
            key = (h.api_key, h.api_version, bytes(memoryview(frame.data)[pos:]))  # data may be a bytearray
            ids = self.learned.get(key)
            if ids is not None:
                self.topic_ids.update(ids)
                return
        _body, _err, facts = _decode(h.api_key, h.api_version, False, frame, pos, self.record_options, st)
        ids = facts.topic_ids if facts is not None else {}
        if key is not None:
            if len(self.learned) >= LEARNED:
                self.learned.clear()
            self.learned[key] = ids
        self.topic_ids.update(ids)

    def _emit(self, st: _ConnState, req: Request | None, resp: Response | None, status: str,
              detail: str | None) -> None:
        if req is not None and req.skip:
            return
        if not self.decode_bodies and status not in DAMAGE:  # rows=connections: only damage (FAILFAST) matters
            return
        if req is not None and resp is None and status == NO_RESPONSE:
            h = req.header
            if h is not None and h.header_version is None:
                status, detail = UNKNOWN_API, f"api key {h.api_key} version {h.api_version} is not defined"
            elif not req.frame.complete:
                status, detail = TRUNCATED, "request cut short by a gap in the capture or its end"
            elif req.acks == 0:
                detail = "acks=0: no response expected"
            elif req.error:
                status, detail = UNDECODED, req.error
        h = req.header if req is not None else None
        extra = headline_from_facts(h.api_key if h else None, req, resp, self.topic_ids)
        extra["client_software_name"], extra["client_software_version"] = st.software
        extra["sasl_mechanism"], extra["sasl_user"] = st.sasl
        self.rows.exchange(st.endpoints, req, resp, status, detail, extra)

    def settled(self, conns, t_ns: int) -> bool:
        """Is everything that started at or before ``t_ns`` decided? No request of that time waits
        for its response or its role decision, and no frame, scan or out-of-order segment of that
        time is still being put together, on any open connection."""
        t_ns += 999 - t_ns % 1000  # request_time holds microseconds: all of t's microsecond counts
        for conn in conns:
            st: _ConnState = conn.state  # type: ignore[assignment]
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

    def _wanted(self, st: _ConnState, h: RequestHeader, frame: Frame) -> bool:
        """Could the rows of this request pass the filter? Asked before its body is decoded."""
        ep = st.endpoints
        return self.predicate.request_ok({  # type: ignore[union-attr]
            "api_key": h.api_key, "api_name": protocol.API_NAMES.get(h.api_key), "api_version": h.api_version,
            "client_id": h.client_id, "client_ip": ep.client_ip if ep else None,
            "client_port": ep.client_port if ep else None, "broker_ip": ep.broker_ip if ep else None,
            "broker_port": ep.broker_port if ep else None,
            "request_time": frame.ts_ns // 1000 * 1000,  # the column holds microseconds
        })

    def damaged(self, detail: str) -> None:
        if self._mine():
            self.rows.exchange(None, None, None, "capture_damaged", detail, None)
