"""Where an exchange's time went: the network's round trip and the broker's hold, from one capture
point (the exchange rows' ``latency_ms``, ``request_transfer_ms``, ``response_transfer_ms``,
``network_ms``, ``broker_ms``, ``network_basis`` and ``retransmissions``).

``broker_ms`` is timed from the last transmission of the request's bytes to the first arrival of the
response's, less the part of the round trip between the capture point and the broker. Loss it cannot
time leaves it null, with the reason in ``detail``: a segment of the response sent again (its first
copy lost, so its first arrival is late), or a skip in the broker's IPv4 numbering just before the
response (a packet of the broker's lost before the capture point: the response seen may be a copy
sent again, wire/health.py). A request segment sent again because its first copy was lost moves the
start to that copy. Each exchange bounds the round trip it is given (``bounded``): the part beyond
the capture point is at most the exchange's own time from request to response.

And where the capture point sits (column ``capture_side`` of connection rows): from the handshake's
round trip, or where it was not captured from the connection's own data-to-ACK round trips.
"""

from __future__ import annotations

from typing import Final

from ..decode.connstate import Endpoints, one_host
from ..wire.frames import Frame
from ..wire.tcp import MIN_SIDE_RTT_NS, SIDE_SHARE


class LatencySplit:
    """An exchange's network_ms, broker_ms, network_basis, retransmissions, and why broker_ms is not
    timed (or None)."""

    __slots__ = ("network_ms", "broker_ms", "basis", "resent", "why")

    def __init__(self, ep: Endpoints | None, rq: Frame | None, rs: Frame | None) -> None:
        self.network_ms: float | None = None
        self.broker_ms: float | None = None
        self.basis: str | None = None
        self.why: str | None = None
        tcp = ep.tcp if ep is not None else None
        health = tcp.health if tcp is not None else None
        request_last, response_resent = self._resent(ep, rq, rs)
        # the connection's round trip and its part between the capture point and the broker (ns):
        # from the TCP handshake where the capture shows it ("handshake"), else from its own
        # data-to-ACK round trips ("ack": the least of each direction's over the last 10 to 20 s, as
        # TCP's min-RTT filter keeps it; the client's data to the broker's ACK is the part beyond
        # the capture point, the broker's data to the client's ACK the part before); neither: a TLS
        # connection without its handshake, no ACK of data yet. (Read here, not returned as a
        # tuple: compiled, an optional tuple is made as an object for each exchange.)
        if ep is None:
            return
        rtt_ns, beyond_ns = ep.rtt_ns, ep.broker_rtt_ns
        if rtt_ns is not None and beyond_ns is not None:
            rtt, broker_rtt, self.basis = rtt_ns, beyond_ns, "handshake"
        else:
            if health is None:
                return
            near: int = health.side(ep.client_dir).least_rtt()
            far: int = health.side(1 - ep.client_dir).least_rtt()
            if near < 0 or far < 0:
                return
            rtt, broker_rtt, self.basis = near + far, near, "ack"
        self.network_ms = rtt / 1e6
        if rq is None or rs is None or rq.last_ts is None:
            return
        rtt, broker_rtt = bounded(rtt, broker_rtt, rs.ts_ns - rq.last_ts, one_host(ep.client_ip, ep.broker_ip))
        self.network_ms = rtt / 1e6
        if response_resent:
            self.why = "broker_ms not timed: the response's first segment was sent again (loss)"
            return
        if ep is not None and tcp is not None and health is not None:
            d = 1 - ep.client_dir
            if health.skipped_before(d, tcp.halves[d].base, rs.offset):
                self.why = ("broker_ms not timed: a packet the broker sent just before the response never reached "
                            "the capture point (a skip in its IPv4 numbering): the response seen may be a copy sent "
                            "again after a loss")
                return
        start = rq.last_ts
        if request_last > start:
            if request_last > rs.ts_ns:
                self.why = "broker_ms not timed: the request's bytes were sent again after the response began"
                return
            start = request_last
        # (at least 0: a round trip near the request shorter than the one measured)
        self.broker_ms = max(0, rs.ts_ns - start - broker_rtt) / 1e6

    def _resent(self, ep: Endpoints | None, rq: Frame | None, rs: Frame | None) -> tuple[int, int]:
        """Sets ``resent`` (segments of the exchange's frames sent again; None for TLS plaintext, whose
        frames are not the TCP stream's bytes); returns when the last copy of the request's bytes whose
        first copy was lost was sent (-1: none), and whether the response's first byte was sent again."""
        resent = 0
        request_last = -1
        response_resent = 0
        tcp = ep.tcp if ep is not None else None
        health = tcp.health if tcp is not None else None
        if ep is None or tcp is None or health is None:
            self.resent: int | None = None
        elif health.a.resent or health.b.resent:  # (the common case: nothing sent again on the connection)
            halves = tcp.halves
            if rq is not None:
                d = ep.client_dir
                n, request_last = health.resent_between(d, halves[d].base, rq.offset, rq.offset + 4 + len(rq.data))
                resent += n
            if rs is not None:
                d = 1 - ep.client_dir
                n, _ = health.resent_between(d, halves[d].base, rs.offset, rs.offset + 4 + len(rs.data))
                resent += n
                if n:  # (only a copy of its first byte makes its first arrival late)
                    response_resent, _ = health.resent_between(d, halves[d].base, rs.offset, rs.offset + 1)
            self.resent = resent
        else:
            self.resent = 0
        return request_last, response_resent


def bounded(rtt: int, beyond: int, gap: int, local: bool = False) -> tuple[int, int]:
    """(round trip, its part beyond the capture point) as one exchange bounds them (ns): its own time
    from the request's last byte to the response's first (``gap``) is a sample of the part beyond the
    capture point (data answered by data: the response cannot come back sooner), and at the client's
    end (the part before under SIDE_SHARE of the whole) of the whole round trip: there network_ms
    never exceeds latency_ms. So too where client and broker are one host (``local``: connstate.one_host) or
    the round trip is under MIN_SIDE_RTT_NS, where no side is told (containers on one host): the
    capture point is at both ends, and the handshake's halves are the host's scheduling, not a
    path. A gap below 0 (times running backwards) bounds nothing."""
    if gap < 0:
        return rtt, beyond
    before = rtt - beyond
    if local or before < SIDE_SHARE * rtt or rtt < MIN_SIDE_RTT_NS:
        rtt = min(rtt, gap)
    elif beyond > gap:
        rtt = gap + before
    return rtt, min(beyond, gap)


def transfer_ms(frame: Frame | None) -> float | None:
    """How long a whole frame took to cross the capture point: its first byte's packet to its last's."""
    if frame is None or frame.last_ts is None:
        return None
    return elapsed_ms(frame.ts_ns, frame.last_ts)


def elapsed_ms(start: int, end: int) -> float | None:
    """Milliseconds from ``start`` to ``end`` (ns); None where the capture's times run backwards
    between them (no duration is negative, and the true one is not known)."""
    return (end - start) / 1e6 if end >= start else None


def backwards(rq: Frame | None, rs: Frame | None) -> str | None:
    """Why an exchange's durations are null where the capture's packet times run backwards between
    its packets (elapsed_ms gives no negative duration), or None."""
    if rq is not None and rs is not None and rs.ts_ns < rq.ts_ns:
        return "latency_ms not known: the response's packet is timed before the request's (packet times run backwards)"
    if _reversed(rq):
        return _REVERSED.format(name="request")
    if _reversed(rs):
        return _REVERSED.format(name="response")
    return None


_REVERSED: Final = ("{name}_transfer_ms not known: the {name}'s last bytes are timed before its first "
                    "(packet times run backwards)")


def _reversed(f: Frame | None) -> bool:
    return f is not None and f.last_ts is not None and f.last_ts < f.ts_ns


def capture_side(conn, client_dir: int, rtt: int | None, near: str | None) -> str | None:
    """Where the capture point sits (column capture_side): from the handshake's round trip where it
    was captured (``rtt``, ``near``: tcp.Connection.round_trip), else from the connection's own
    round trips (_side_from_acks)."""
    if rtt is not None:
        return _side(near, conn.client == client_dir)
    return _side_from_acks(conn.health, client_dir)


def _side(near: str | None, syn_sender_is_client: bool) -> str | None:
    """Where the capture point sits, in the row's terms (client: the Kafka client's end)."""
    if near is None or near == "middle":
        return near
    return "client" if (near == "near_syn_sender") == syn_sender_is_client else "broker"


#: under this round trip (ns) the ACKs' round trips tell no side (20 times the handshake's MIN_SIDE_RTT_NS)
ACK_SIDE_RTT_NS: Final = 20 * MIN_SIDE_RTT_NS


def _side_from_acks(health, client_dir: int) -> str | None:
    """Where the capture point sits where the handshake was not captured, from the connection's own
    round trips: the client's data to the broker's ACK is the part beyond the capture point, the
    broker's data to the client's ACK the part before; the shorter under SIDE_SHARE of their sum
    is the near end (the handshake's rule). None without both, or under ACK_SIDE_RTT_NS together: an
    ACK may wait for its receiver some tens of microseconds, as much as a loopback round trip."""
    beyond = health.side(client_dir).least_rtt()
    before = health.side(1 - client_dir).least_rtt()
    if beyond < 0 or before < 0 or beyond + before < ACK_SIDE_RTT_NS:
        return None
    share = before / (beyond + before)
    return "client" if share < SIDE_SHARE else "broker" if share > 1 - SIDE_SHARE else "middle"
