"""What the decoder knows of one TCP connection: its roles and endpoints once decided, the frames
waiting for that decision, the requests waiting for their responses, and the session facts its
requests state (client software, SASL mechanism and user, whether it carries TLS)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from .. import protocol
from ..kafka.clients import MAX_TRAITS, TRAIT_KEYS, TRAIT_REQUESTS
from ..kafka.clients import library as client_library
from ..kafka.secrets import redact
from ..wire.frames import Frame, Framer
from ..kafka.headers import RequestHeader, looks_like_request, parse_request_header
from ..wire.tcp import Connection

if TYPE_CHECKING:  # (the TLS stage is imported when a capture first shows TLS)
    from ..kafka.body import Facts
    from ..tls.guess import TlsGuess
    from ..tls.session import TlsSession

API_VERSIONS: Final = protocol.API_VERSIONS_KEY
MAX_SPOKEN: Final = 512  # (api key, version) pairs remembered per connection (Kafka has fewer than 100 keys)
SASL_HANDSHAKE: Final = protocol.SASL_HANDSHAKE_KEY
SASL_AUTHENTICATE: Final = protocol.SASL_AUTHENTICATE_KEY


class Request:
    """A request frame and what was read of it. (Plain classes, not named tuples: compiled, they are
    native classes whose fields are read without a lookup.)"""

    __slots__ = ("frame", "header", "acks", "body", "error", "skip", "facts")

    def __init__(self, frame: Frame, header: RequestHeader | None, acks: int | None, body: dict | None = None,
                 error: str | None = None, skip: bool = False, facts: Facts | None = None):
        self.frame = frame
        self.header = header
        self.acks = acks  # Produce only
        self.body = body
        self.error = error  # why the body could not be decoded
        self.skip = skip  # a filter rules out its rows: neither it nor its response is decoded or shown
        self.facts = facts  # what the headline columns take from the body


class Response:
    """A response frame and what was read of it."""

    __slots__ = ("frame", "correlation_id", "header_version", "body", "error", "facts")

    def __init__(self, frame: Frame, correlation_id: int | None, header_version: int | None,
                 body: dict | None = None, error: str | None = None, facts: Facts | None = None):
        self.frame = frame
        self.correlation_id = correlation_id
        self.header_version = header_version
        self.body = body
        self.error = error
        self.facts = facts


def one_host(client_ip: str, broker_ip: str) -> bool:
    """Whether client and broker are one host as their addresses say (the same address, or both
    loopback): a capture there is at both ends at once."""
    c, b = client_ip, broker_ip
    return c == b or (c.startswith("127.") and b.startswith("127.")) or (c == "::1" and b == "::1")


class Endpoints:
    """Who talks to whom on a connection. (A plain slotted class, not a named tuple: compiled, its
    fields are read without a lookup, and every row reads them.)"""

    __slots__ = ("client_ip", "client_port", "broker_ip", "broker_port", "community_id", "rtt_ns", "broker_rtt_ns",
                 "tcp", "client_dir", "first_ns")

    def __init__(self, client_ip: str, client_port: int, broker_ip: str, broker_port: int, community_id: str,
                 rtt_ns: int | None = None, broker_rtt_ns: int | None = None, tcp: Connection | None = None,
                 client_dir: int = 0, first_ns: int | None = None):
        self.client_ip = client_ip
        self.client_port = client_port
        self.broker_ip = broker_ip
        self.broker_port = broker_port
        self.community_id = community_id  # the flow's Community ID (wire/flow.py), as Zeek and Suricata write it
        #: the round trip between client and broker (ns), from the handshake the client opened (its
        #: SYN to the ACK of the SYN-ACK); None where the capture does not show it clearly
        self.rtt_ns = rtt_ns
        #: of it, the part between the capture point and the broker (the SYN to the SYN-ACK)
        self.broker_rtt_ns = broker_rtt_ns
        #: the TCP connection whose stream offsets the frames' offsets are (None for TLS plaintext), and
        #: which of its directions carries the requests: the exchange rows' segments sent again
        self.tcp = tcp
        self.client_dir = client_dir
        self.first_ns = first_ns  # the connection's first packet's time (rows' connection_time)

    def __repr__(self) -> str:
        return (f"Endpoints({self.client_ip}:{self.client_port} -> {self.broker_ip}:{self.broker_port}, "
                f"rtt_ns={self.rtt_ns}, broker_rtt_ns={self.broker_rtt_ns})")


class ConnState:
    """One connection's state."""

    __slots__ = ("conn", "framers", "client_dir", "queue", "queued_counts", "pending", "endpoints", "software",
                 "tls", "framed", "sasl_raw", "secrets", "sasl", "tls_session",
                 "tls_guess", "tested", "spoken", "first_client_id", "api_versions", "named", "reported", "shown",
                 "trait_requests")

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
        self.secrets: list[str] | None = None  # texts of the connection's secret fields so far (see kafka/secrets.seal)
        self.sasl: tuple[str | None, str | None] = (None, None)  # mechanism and user, once a login shows them
        self.tls_session: TlsSession | None = None  # the connection's TLS, once its first bytes show it
        self.tls_guess: TlsGuess | None = None  # a direction began like a TLS record: held until that is settled
        #: the request header a plausibility test (roles.py) read last, with its bytes (see header)
        self.tested: tuple[bytes, RequestHeader] | None = None
        #: how the client speaks (kafka/clients.py): the (api key, version) pairs its requests used,
        #: its first client id, the version of its first ApiVersions request
        self.spoken: set[tuple[int, int]] = set()
        self.first_client_id: str | None = None
        self.api_versions: int | None = None
        #: what its requests showed of the client (kafka/clients.traits), from the first TRAIT_REQUESTS
        #: requests of each api key with traits: (trait, intrinsic); and how many were read, by api key
        self.shown: set[tuple[str, bool]] = set()
        self.trait_requests: dict[int, int] = {}
        self.named: tuple[str | None] | None = None  # the client library, while spoken says nothing new
        #: carried across reads (carry.py): the counts the connection's rows of earlier reads gave (its
        #: next row gives what came after); None: no row given yet
        self.reported: dict[str, Any] | None = None

    def library(self) -> tuple[str | None]:
        """The connection's client library as far as it has shown (kafka/clients.py), as a 1-tuple."""
        named = self.named
        if named is None:
            named = self.named = (client_library(self.software[0], self.first_client_id, self.spoken, self.shown),)
        return named

    def wants_traits(self, api_key: int) -> bool:
        """Are this api key's requests still read for what they show of the client (traits)?"""
        return api_key in TRAIT_KEYS and self.trait_requests.get(api_key, 0) < TRAIT_REQUESTS

    def show(self, api_key: int, found: tuple[tuple[str, bool], ...] | None) -> None:
        """Keep what a request shows of its client (``found``: kafka/clients.traits of its body, None
        where it was not read), where wants_traits said its api key's requests are still read."""
        if found is None:
            return
        self.trait_requests[api_key] = self.trait_requests.get(api_key, 0) + 1
        shown = self.shown
        items: tuple[Any, ...] = found  # (each trait as the object it is: compiled, no tuple made again)
        for t in items:
            if t not in shown and len(shown) < MAX_TRAITS:
                shown.add(t)
                self.named = None

    def uncarried(self) -> str | None:
        """Why the connection's state may not be written for a later read of its rotation series
        (carry.py), or None: it may. Secrets never leave the decoder, so no bytes in flight that may
        belong to a message with a secret field (SASL tokens, delegation-token HMACs, SCRAM
        credentials: see kafka/secrets) are written: a connection mid-authentication, with such a
        request unanswered or part-read, with bytes not yet framed (out of order, searched for a frame
        boundary, a TLS guess or trial not settled) ends at the cut instead."""
        from ..kafka.layouts import schemas

        secret = schemas().secret_apis
        if self.sasl_raw:
            return "raw SASL tokens expected"
        if self.tls_guess is not None and self.tls_guess.decided is None:
            return "the TLS guess is not settled"
        if any(int.from_bytes(f.data[:2], "big") in secret for _d, f in self.queue):
            return "a frame that waits for the roles may hold a secret"
        if any(r.header is not None and r.header.api_key in secret and r.header.api_key != protocol.SASL_HANDSHAKE_KEY
               for r in self.pending.values()):  # (a SaslHandshake holds a mechanism's name; raw tokens follow it)
            return "a request with a secret field is unanswered"
        for d, f in enumerate(self.framers):
            if f.scan or (d == self.client_dir or self.client_dir is None) and len(f.buf) >= 6 and \
                    int.from_bytes(f.buf[4:6], "big") in secret:
                return "a frame in progress may hold a secret"
        if any(h.pending_bytes for h in self.conn.halves):
            return "bytes out of order wait for a hole"
        tls = self.tls_session
        if tls is not None and tls.unconfirmed:
            return "a TLS trial is not confirmed"
        return None

    def header(self, data: bytes) -> RequestHeader:
        """The request header a frame's data starts with: the one its plausibility test read where
        these are its bytes (a header reads nothing past its end), else parsed (HeaderError)."""
        tested = self.tested
        if tested is not None:
            self.tested = None
            if data.startswith(tested[0]):
                return tested[1]
        return parse_request_header(data)

    def raw_token(self, frame: Frame) -> bool:
        """Is this request frame a raw SASL token (after a SaslHandshake v0, not a Kafka request)?
        The user name a token states is kept; nothing else of it. A Kafka request ends the tokens."""
        if not self.sasl_raw:
            return False
        if looks_like_request(frame.data):
            self.sasl_raw = False  # authenticated: Kafka requests again
            return False
        if frame.complete and self.sasl[1] is None:
            self.sasl = (self.sasl[0], redact("AuthBytes", frame.data).get("user"))
        return True

    def observe(self, h: RequestHeader, body: dict | None) -> None:
        """The session facts a decoded request states: client software (ApiVersions v3+), SASL
        mechanism (SaslHandshake) and user (SaslAuthenticate); how the client speaks (spoken)."""
        pair: Any = (h.api_key, h.api_version)  # (one tuple, tested and kept)
        if pair not in self.spoken and len(self.spoken) < MAX_SPOKEN:
            self.spoken.add(pair)
            self.named = None
            if h.api_key == API_VERSIONS and self.api_versions is None:
                self.api_versions = h.api_version
        if self.first_client_id is None and h.client_id is not None:
            self.first_client_id = h.client_id
            self.named = None
        if h.api_key == API_VERSIONS and body is not None and body.get("ClientSoftwareName"):
            self.software = (body.get("ClientSoftwareName"), body.get("ClientSoftwareVersion"))
            self.named = None
        if h.api_key == SASL_HANDSHAKE:
            if body is not None:
                self.sasl = (body.get("Mechanism"), None)
            if h.api_version == 0:
                self.sasl_raw = True
        elif h.api_key == SASL_AUTHENTICATE and body is not None and isinstance(body.get("AuthBytes"), dict) and \
                body["AuthBytes"].get("user"):
            self.sasl = (self.sasl[0], body["AuthBytes"]["user"])
