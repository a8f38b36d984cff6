"""Which side of a connection is the client.

The side that sent the SYN; without a SYN, a side already known as a broker in this capture, else
the side whose frames parse as requests (and whose correlation ids the other side echoes); as a
last resort the higher port is the client. Until the roles are decided, a connection's frames
wait in its queue (see ConnState.queue); the decoder hands them on once :meth:`Roles.decide` has
decided.
"""

from __future__ import annotations

from typing import Final

from librt.strings import read_i32_be

from .connstate import ConnState, Endpoints
from ..wire.boundary import ALIGNED_ONLY
from ..wire.frames import Frame
from ..kafka.headers import looks_like_request, plausible_request
from ..wire.flow import community_id
from ..wire.packets import ip_text

ROLE_DECISION_FRAMES: Final = 4  # frames queued in one direction before deciding roles without the other
#: how far below the first request waiting a mid-stream response's correlation id may be (it answers
#: a request sent before the capture began: one of those the client kept in flight, Kafka's own
#: clients at most 5 per connection)
EARLIER_REQUESTS: Final = 1024
#: addresses' text by their bytes (a capture's connections share a few addresses); bounded
_ADDRESS_TEXT: Final[dict[bytes, str]] = {}
ADDRESSES_KEPT: Final = 4096


def address_text(addr: bytes) -> str:
    """packets.ip_text of an address, remembered (the one place it is: compiled, a lookup here costs
    a fifth of a call into packets.py)."""
    text = _ADDRESS_TEXT.get(addr)
    if text is None:
        text = ip_text(addr)
        if len(_ADDRESS_TEXT) >= ADDRESSES_KEPT:
            _ADDRESS_TEXT.clear()
        _ADDRESS_TEXT[addr] = text
    return text



class Roles:
    """Role decisions for the connections of one capture; brokers learnt on one connection help
    decide the others."""

    def __init__(self) -> None:
        self.brokers: set[tuple[bytes, int]] = set()  # endpoints known to be brokers

    def known(self, st: ConnState) -> int | None:
        """The client's direction where it is known without looking at frames, else None."""
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

    def guess(self, st: ConnState) -> int:
        """The client's direction of a connection no frame decided (SYN, known brokers, else the
        higher port); sets its endpoints if they are not set yet."""
        conn = st.conn
        role = self.known(st)
        if role is None:
            role = 0 if conn.a[1] > conn.b[1] else 1
        if st.endpoints is None:
            st.endpoints = _endpoints(st, role)
        return role

    def decide(self, st: ConnState, force: bool = False) -> bool:
        """Decide the roles from the queued frames, if they are enough (or ``force``): sets the
        connection's client_dir and endpoints. Returns whether it decided."""
        role = self.known(st)
        if role is None:
            role = self._from_frames(st, force)
            if role is None:
                return False
        self.assign(st, role)
        return True

    def assign(self, st: ConnState, role: int) -> None:
        """The client's direction is ``role`` (frames showed it, or a TLS ClientHello or trial did)."""
        st.client_dir = role
        st.endpoints = _endpoints(st, role)
        conn = st.conn
        self.brokers.add(conn.b if role == 0 else conn.a)

    @staticmethod
    def _from_frames(st: ConnState, force: bool) -> int | None:
        firsts: list[Frame | None] = [None, None]
        for d, f in st.queue:
            if firsts[d] is None:
                firsts[d] = f
        if (firsts[0] is None or firsts[1] is None) and not force and \
                st.queued_counts[0 if firsts[0] is not None else 1] < ROLE_DECISION_FRAMES:
            return None  # one direction so far, and too few frames to decide on it alone
        req = [f is not None and looks_like_request(f.data) for f in firsts]
        if firsts[0] is None or firsts[1] is None:
            d = 0 if firsts[0] is not None else 1
            return d if req[d] else 1 - d
        echo = [False, False]
        for d in (0, 1):
            if req[d]:
                corrs = {read_i32_be(f.data, 4) for dd, f in st.queue if dd == d and len(f.data) >= 8}
                other = firsts[1 - d]
                echo[d] = other is not None and len(other.data) >= 4 and read_i32_be(other.data, 0) in corrs
        if echo[0] != echo[1]:
            return 0 if echo[0] else 1
        if req[0] != req[1]:
            return 0 if req[0] else 1
        return 0 if st.conn.a[1] > st.conn.b[1] else 1  # last resort: the broker has the lower port

    def plausible(self, st: ConnState, d: int, data: bytes, strict: bool) -> int:
        """Could a frame with this header start here? 0 (False): no; 1 (True): yes; ALIGNED_ONLY:
        only where a captured segment starts (see boundary.ALIGNED_ONLY).

        A request: a header of a known api key and version (``strict``), or at a stream's start any
        well-formed request header. A response: its correlation id matches a request waiting on
        the connection; at a stream's start, anything (its request may be outside the capture).
        While the roles are unknown, either.
        """
        role = self.known(st)
        if role is None or d == role:
            h = plausible_request(data, strict)
            if h is not None:
                st.tested = (data[: h.body_offset], h)  # the frame's header, read once (ConnState.header)
                return True
            if role is not None:
                return False
        if not strict:
            return len(data) >= 4
        if len(data) < 4:
            return False
        corr: int = read_i32_be(data, 0)
        # a response to a request waiting for it, or to one still queued for the role decision
        if corr in st.pending or any(
                dd != d and len(f.data) >= 8 and read_i32_be(f.data, 4) == corr for dd, f in st.queue):
            return True
        # the other direction is not in the capture at all: no request to match, structure only
        if corr >= 0 and st.framers[1 - d].pos == 0 and (role is not None or not looks_like_request(data)):
            return ALIGNED_ONLY
        # a connection seen from its middle: the responses of this direction's first bytes answer
        # requests sent before the capture, numbered just below the first ones waiting (structure only)
        if st.framers[d].acct.frames == 0:
            waiting = [c for c in st.pending] + [read_i32_be(f.data, 4) for dd, f in st.queue
                                                 if dd != d and len(f.data) >= 8 and looks_like_request(f.data)]
            if waiting and min(waiting) - EARLIER_REQUESTS <= corr < min(waiting):
                return ALIGNED_ONLY
        return False


def _endpoints(st: ConnState, role: int) -> Endpoints:
    conn = st.conn
    client, broker = (conn.a, conn.b) if role == 0 else (conn.b, conn.a)
    rtt, broker_rtt = conn.round_trips() if conn.client == role else (None, None)  # the client opened it
    plain = st.tls_session is None and st.tls is None and st.tls_guess is None
    return Endpoints(address_text(client[0]), client[1], address_text(broker[0]), broker[1],
                     community_id(client[0], client[1], broker[0], broker[1]), rtt, broker_rtt,
                     conn if plain else None, role, conn.first_ts)
