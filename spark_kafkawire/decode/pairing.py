"""Frames -> exchanges: the requests of a connection paired with their responses.

:class:`Pairing` parses request headers (header version from api key and version) and response
headers (header version from the request they answer), decodes their bodies where a row shows them,
and pairs each response with its request by correlation id (pipelining is normal; Kafka answers in
order, so an acks=0 Produce request still pending when a later request is answered was never going
to be answered), handing each exchange, or each message, to a row sink with its status (status.py).
The :class:`~exchanges.Decoder` is the Pairing that listens to the reassembler.
"""

from __future__ import annotations

from typing import Callable, Final, Protocol

from librt.strings import read_i32_be

from .. import protocol
from ..kafka.clients import traits, traits_of_text
from ..kafka.body import DEFAULT_RECORD_OPTIONS, BodyError, Facts, RecordOptions
from ..kafka.message import decode_with_facts, leading_field
from ..kafka.layouts import schemas
from ..kafka.secrets import seal
from .connstate import ConnState, Endpoints, Request, Response
from ..wire.frames import Frame
from ..kafka.headers import HeaderError, RequestHeader, message_code, parse_response_header
from ..kafka.headline import headline_from_facts
from .predicate import Predicate, always_decode
from .roles import Roles
from ..kafka.topicids import LEARNED_BYTES, TopicIds
from .status import (CAPTURE_DAMAGED, COMPLETE, DAMAGE, MALFORMED, NO_RESPONSE, REQUEST_MISSING,
                     SASL_TOKEN, SASL_TOKEN_DETAIL, TRUNCATED, UNDECODED, UNKNOWN_API)

MAX_PENDING_REQUESTS: Final = 4096  # per connection; older unanswered requests are reported, not kept
TRAIT_OPTIONS: Final = DEFAULT_RECORD_OPTIONS  # a trait body's records: batch headers only, as values


class RowSink(Protocol):
    """Receives decoded exchanges; builds the rows of the requested shape."""

    def exchange(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None, extra: tuple | None) -> None: ...

    #: optional: called with each TCP connection's row, (conn, endpoints, client direction, protocol,
    #: its two directions' summary.DirectionSummary (the client's, the broker's), TLS session or None);
    #: None or absent where the rows have none (the decoder then spares working it out)
    connection: Callable[..., None] | None


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


def _body_of(api_key: int, version: int, request: bool, frame: Frame, pos: int,
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


def _request_traits(h: RequestHeader, frame: Frame, body: dict | None, facts: Facts | None,
                    text: bool) -> tuple[tuple[str, bool], ...] | None:
    """What a request shows of its client (kafka/clients.traits), None where its body cannot be
    read: from the body itself where it was read as values; in text mode from its JSON text (byte for
    byte orjson's text of the values: kafka/body.py; kept by clients.traits_of_text, as one client's
    requests repeat); else (not read here: another share's, filtered out) read here."""
    if body is not None:
        if not text:
            return traits(h.api_key, body)
        if facts is not None and facts.text is not None:
            return traits_of_text(h.api_key, facts.text)
    again = _trait_body(h, frame)
    return traits(h.api_key, again) if again is not None else None


def _trait_body(h: RequestHeader, frame: Frame) -> dict | None:
    """A request's body as values, read for what it shows of its client (kafka/clients.traits): read
    alike whatever the rows asked for (a body written as JSON text keeps only its top level as values)
    and in every share, its own request or not, so a connection is named alike in every read. No
    api key with traits has a secret field."""
    try:
        return decode_with_facts(h.api_key, h.api_version, True, frame.data, h.body_offset, TRAIT_OPTIONS)[0]
    except (KeyError, BodyError):
        return None


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
            body, err, facts = _body_of(h.api_key, h.api_version, True, frame, h.body_offset, self.record_options, st)
        # from the body, or where it was not decoded (filtered out, another share's, not fitting its
        # layout) read by itself: every request waits for its answer as in the whole read
        acks = None
        if h.api_key == 0 and h.header_version is not None:
            acks = body.get("Acks") if body is not None else \
                leading_field(0, h.api_version, True, frame.data, h.body_offset, "Acks")
        st.observe(h, body)
        if h.header_version is not None and frame.complete and st.wants_traits(h.api_key):
            st.show(h.api_key, _request_traits(h, frame, body, facts, self.record_options.text))
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
                body, err, facts = _body_of(h.api_key, h.api_version, False, frame, pos, self.record_options, st)
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
                          lambda: _body_of(h.api_key, h.api_version, False, frame, pos, self.record_options, st)[2])

    def _emit(self, st: ConnState, req: Request | None, resp: Response | None, status: str,
              detail: str | None) -> None:
        if req is not None and req.skip:
            return
        if not self.decode_bodies and status not in DAMAGE:  # rows=connections: only damage (FAILFAST) matters
            return
        if req is not None and resp is None and status == NO_RESPONSE:
            status, detail = _unanswered(req, detail)
        h = req.header if req is not None else None
        # (the connection's facts read item by item into one tuple: compiled, each fixed-size tuple
        # attribute would be made again as an object, and each + makes one more)
        software, sasl = st.software, st.sasl
        extra = headline_from_facts(h.api_key if h else None, req.body if req is not None else None,
                                    req.facts if req is not None else None, resp.body if resp is not None else None,
                                    resp.facts if resp is not None else None,
                                    self.topics.names) + (software[0], software[1], sasl[0], sasl[1],
                                                          st.library()[0])
        self.sink.exchange(st.endpoints, req, resp, status, detail, extra)

    def damaged(self, detail: str) -> None:
        if self._mine():
            self.sink.exchange(None, None, None, CAPTURE_DAMAGED, detail, None)


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
