"""TCP segments -> in-order byte streams, one per direction of each connection.

Each direction is reassembled by sequence number into a stream offset space (64-bit, so sequence
numbers may wrap any number of times). Rules:

* In-order bytes are handed to the direction's sink at once, with the timestamp and packet
  number of the segment that carried them; nothing is kept once delivered.
* Out-of-order segments wait in a small per-direction queue until the hole before them fills.
* Retransmissions and overlaps: **the first copy of a byte to arrive wins**; later copies of
  bytes already delivered or already queued are dropped (this is also what Wireshark's
  reassembly and most receivers do).
* A hole that never fills becomes a gap reported to the sink, at the latest when the connection
  closes or the capture ends, and earlier when the queue holds more than ``max_pending`` bytes.
  Bytes a snaplen cut from a packet are a gap at once.
* SYN starts a connection (and tells which side is the client); FIN from both sides or RST ends
  it. A SYN with a new initial sequence number on a 4-tuple in use ends the old connection and
  starts a new one.
* Between the files of a rotation series (see series.py) every open connection is held aside
  (``Held``); its next segment either continues it (its sequence or acknowledgment number
  within CONTINUITY of what comes next) or, where it does not, ends it and begins another: files
  that only share addresses and ports are never joined.

Memory is bounded by the data in flight: the out-of-order queues (``max_pending`` each) plus
whatever the sinks keep, never by the size of the file or of a connection.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Final, Iterator, Protocol


from .halfstream import MASK32, HalfStream, Sink
from .health import Health
from .packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, Segment

DEFAULT_MAX_PENDING: Final = 16 << 20

DEFAULT_MAX_CONNECTIONS: Final = 100_000  # open connections tracked at once; the longest idle is retired past it
LINGER_NS: Final = 120 * 10**9  # how long an ended connection is remembered, for its late packets
NEVER: Final = (1 << 63) - 1  # a time no packet has
_BEFORE_ALL: Final = -(1 << 64)  # a time before every packet's
#: where the capture point sits, from the handshake: a share of the round trip on one side of it
#: below this puts the capture near that end, else in the middle; under MIN_SIDE_RTT_NS no side is told
SIDE_SHARE: Final = 0.2
MIN_SIDE_RTT_NS: Final = 50_000
#: a segment after a file boundary continues a connection when its sequence number (or, where its
#: direction has sent no byte yet, its acknowledgment number) is this near to what comes next: more
#: than a window in flight either way, a 1 in 128 chance for an unrelated connection's random ISN
CONTINUITY: Final = 1 << 24


class Listener(Protocol):
    def opened(self, conn: "Connection") -> tuple[Sink, Sink]: ...
    def closed(self, conn: "Connection") -> None: ...


class Connection:
    """A TCP connection: endpoint a is the source of the first packet seen, b the other."""

    __slots__ = ("done", "self_connected", "opened", "last_ts", "halves", "health", "a", "b", "client", "first_ts",
                 "first_number", "isn", "rst", "state", "evicted", "keys", "reset_by", "syn_ts", "synack_ts", "ack_ts",
                 "shake_unclear")

    def __init__(self, a: tuple[bytes, int], b: tuple[bytes, int], ts: int, number: int):
        self.a = a
        self.b = b
        self.client: int | None = None  # 0: a sent the SYN, 1: b did, None: no SYN seen
        self.first_ts = ts
        self.last_ts = ts  # time of its last packet
        self.first_number = number
        self.halves: list[HalfStream] = []
        self.isn: list[int | None] = [None, None]
        self.rst = False
        self.reset_by: int | None = None  # the direction whose RST ended it
        self.done = False
        self.state: object = None  # the listener's own state for this connection
        self.self_connected = False  # a == b: directions told apart by sequence numbers
        self.opened = False  # the listener has been told (at the first payload: most scans carry none)
        self.evicted = False  # retired to keep the table within maxConnections
        self.keys: tuple[tuple, ...] = ()  # its keys in the reassembler's table
        # the three-way handshake as captured: the SYN, the SYN-ACK, and the SYN's sender's first ACK
        # after it; shake_unclear says why their times tell no round trip (a SYN or SYN-ACK sent again,
        # a simultaneous open), else None
        self.syn_ts: int | None = None
        self.synack_ts: int | None = None
        self.ack_ts: int | None = None
        self.shake_unclear: str | None = None
        self.health = Health()  # its TCP health (health.py)

    def round_trip(self) -> tuple[int | None, str | None]:
        """The handshake's round trip (ns, SYN to the ACK of the SYN-ACK: tshark's initial RTT) and
        where the capture point sits: ``near_syn_sender`` (the SYN-ACK came a round trip after the
        SYN, the ACK at once), ``near_syn_receiver`` (the other way round) or ``middle``; None where
        the handshake's times tell neither (part of it not captured, a SYN or SYN-ACK sent again, a
        simultaneous open, times out of order), and no side under MIN_SIDE_RTT_NS (both ends seen
        from one host, as on loopback)."""
        syn, synack, ack = self.syn_ts, self.synack_ts, self.ack_ts
        if syn is None or synack is None or ack is None or self.shake_unclear or not syn <= synack <= ack:
            return None, None
        rtt = ack - syn
        if rtt < MIN_SIDE_RTT_NS:
            return rtt, None
        share = (ack - synack) / rtt  # of the round trip, the part between the SYN-ACK and the ACK
        return rtt, ("near_syn_sender" if share < SIDE_SHARE else "near_syn_receiver" if share > 1 - SIDE_SHARE
                     else "middle")

    def round_trips(self) -> tuple[int | None, int | None]:
        """The handshake's round trip (ns) and its part on the SYN receiver's side of the capture
        point (SYN to SYN-ACK); (None, None) where round_trip tells none."""
        rtt, _ = self.round_trip()
        if rtt is None or self.syn_ts is None or self.synack_ts is None:
            return None, None
        return rtt, self.synack_ts - self.syn_ts

    def handshake(self, d: int, flags: int, ts: int) -> None:
        """A segment of direction ``d`` before the connection carried payload: notes the
        handshake's times (see syn_ts)."""
        if flags & TCP_SYN:
            if flags & TCP_ACK:
                if self.synack_ts is None:
                    self.synack_ts = ts
                else:
                    self.shake_unclear = "SYN-ACK sent again"
            elif self.syn_ts is None:
                self.syn_ts = ts
            else:
                self.shake_unclear = "SYN sent again" if d == self.client else "simultaneous open"
        elif flags & TCP_ACK and d == self.client and self.synack_ts is not None and self.ack_ts is None:
            self.ack_ts = ts

    def self_direction(self, flags: int, seq: int) -> int:
        """Direction of a segment of a self-connection, whose two directions share one 4-tuple:
        the SYN opens direction 0 and the SYN-ACK direction 1; otherwise the direction whose
        stream the sequence number lies closer to."""
        if flags & TCP_SYN:
            return 1 if flags & TCP_ACK else 0
        best, best_d = None, 0
        for d, h in enumerate(self.halves):
            if h.base is None:
                if best is None:
                    best_d = d
                continue
            dist = abs(h.offset(seq) - h.nxt)
            if best is None or dist < best:
                best, best_d = dist, d
        return best_d

    def finished(self) -> bool:
        return self.rst or (self.halves[0].fin and self.halves[1].fin)


def _late(flags: int, seq: int, payload: bytes, conn: Connection, d: int) -> bool:
    """Is a segment of a connection that has ended only a late packet of it (dropped)? Not
    where it starts a new one (a SYN with a new sequence number) or carries bytes the ended one
    never had (data after an RST or after both FINs, a late copy of a lost tail): those open a
    connection of their own, so that every captured byte is counted once."""
    if flags & TCP_SYN:
        return conn.isn[d] == seq
    return not (payload and conn.halves[d].novel(seq, len(payload)))


class Recent:
    """A table entry found lately, and its key."""

    __slots__ = ("src", "sport", "dst", "dport", "hit")

    def __init__(self) -> None:
        self.src = b""  # (no address is empty: found with none)
        self.sport = 0
        self.dst = b""
        self.dport = 0
        self.hit: tuple[Connection, int] | None = None


class Found:
    """A reassembler's table, read through the last two entries found: an entry whose key equals
    one of theirs is found again with four comparisons (consecutive packets are mostly of one
    connection, or its two directions), no tuple, hash or lookup. ``forget`` at every change to
    the table."""

    __slots__ = ("table", "a", "b")

    def __init__(self, table: dict[tuple, tuple[Connection, int]]):
        self.table = table
        self.a = Recent()  # the last found
        self.b = Recent()

    def get(self, src: bytes, sport: int, dst: bytes, dport: int) -> tuple[Connection, int] | None:
        r = self.a
        if sport == r.sport and dport == r.dport and src == r.src and dst == r.dst:
            return r.hit
        r = self.b
        if sport == r.sport and dport == r.dport and src == r.src and dst == r.dst:
            return r.hit
        self.b = self.a
        self.a = r
        r.src, r.sport, r.dst, r.dport = src, sport, dst, dport
        r.hit = self.table.get((src, sport, dst, dport))
        return r.hit

    def forget(self) -> None:
        for r in (self.a, self.b):
            r.src = r.dst = b""
            r.hit = None


#: a connection and the direction of a segment on it (0: endpoint a sent it), where one was found
Hit = tuple[Connection, int] | None


class Reassembler:
    """Feed segments in capture order; the listener gets each connection's two byte streams."""

    def __init__(self, listener: Listener, max_pending: int = DEFAULT_MAX_PENDING, ports: frozenset[int] | None = None,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS):
        self.listener = listener
        self.max_pending = max_pending
        self.ports = ports
        self.max_connections = max_connections
        self.table: dict[tuple, tuple[Connection, int]] = {}
        self.live: OrderedDict[Connection, None] = OrderedDict()  # open connections, least recently used first
        self.ended: deque[Connection] = deque()  # ended connections still in the table, oldest first
        self.forget_at = NEVER  # when the oldest ended one is forgotten (see _ended_changed)
        self.newest: Connection | None = None  # the last of the live order where known (no move needed)
        self.found = Found(self.table)
        self.held = Held()  # open connections held aside at a file boundary of a rotation series

    def feed(self, seg: Segment) -> None:
        self.segment(*seg)

    def segment(self, number: int, ts: int, src: bytes, sport: int, dst: bytes, dport: int, seq: int, ack: int,
                flags: int, payload: bytes, wire_len: int, win: int, ip_id: int = -1, dsack: int = -1) -> None:
        """``feed`` of a segment given by its fields, in a Segment's order (the fast lane's batches)."""
        if ts > self.forget_at and self.ended:
            self._forget(self.ended.popleft())
            self._ended_changed()
        if self.ports is not None and sport not in self.ports and dport not in self.ports:
            return
        hit = self.found.get(src, sport, dst, dport)
        if hit is not None and not flags & (TCP_SYN | TCP_FIN | TCP_RST):  # the common case, in short
            conn, d = hit
            if not conn.done and not conn.self_connected:
                conn.last_ts = ts
                if self.newest is not conn:
                    self.live.move_to_end(conn)
                    self.newest = conn
                conn.health.segment(d, ts, seq, ack, flags, win, wire_len, ip_id, dsack)
                if not conn.opened:
                    conn.handshake(d, flags, ts)
                if wire_len:
                    self._data(conn, d, seq, ack, flags, payload, wire_len, ts, number)
                return
        self._segment(number, ts, src, sport, dst, dport, seq, ack, flags, payload, wire_len, win, hit, ip_id, dsack)

    def _ended_changed(self) -> None:
        """forget_at, the linger rule: when (ns) the oldest ended connection is forgotten: LINGER_NS
        after its last packet (kept for its late copies; an ended connection's time never changes),
        at once while more than ``max_connections`` ended ones are remembered."""
        ended = self.ended
        self.forget_at = NEVER if not ended else _BEFORE_ALL if len(ended) > self.max_connections else \
            ended[0].last_ts + LINGER_NS

    def _data(self, conn: Connection, d: int, seq: int, ack: int, flags: int, payload: bytes, wire_len: int, ts: int,
              number: int) -> None:
        """A segment's payload (its first byte at ``seq``) into its direction, after the other
        direction's bytes it acknowledges that the capture lacks are settled as lost (a response
        follows its request). Only data segments settle this: captures reorder pure ACKs."""
        if not conn.opened:
            self._open(conn)
        halves = conn.halves
        if flags & TCP_ACK:
            other = halves[1 - d]
            if other.pending:
                other.acked(ack)
        halves[d].feed(seq, payload, wire_len, ts, number)

    def _segment(self, number: int, ts: int, src: bytes, sport: int, dst: bytes, dport: int, seq: int, ack: int,
                 flags: int, payload: bytes, wire_len: int, win: int, hit: Hit, ip_id: int, dsack: int) -> None:
        """Any segment but the common one: a SYN, FIN or RST, a new or ended connection, a self-connection."""
        found = self._connection(number, ts, (src, sport, dst, dport), flags, seq, payload, hit, ack)
        if found is None:
            return
        conn, d = found
        conn.last_ts = ts
        conn.health.segment(d, ts, seq, ack, flags, win, wire_len, ip_id, dsack)
        half = conn.halves[d]
        if not conn.opened:
            conn.handshake(d, flags, ts)
        if flags & TCP_SYN:
            if conn.isn[d] is None:
                conn.isn[d] = seq
                half.start(seq + 1)
                if conn.client is None:
                    conn.client = 1 - d if flags & TCP_ACK else d
            seq += 1
        if wire_len:
            self._data(conn, d, seq, ack, flags, payload, wire_len, ts, number)
        if flags & TCP_FIN and half.base is not None:
            fin_off = half.offset(seq) + wire_len
            if half.fin_off is None or fin_off > half.fin_off:
                half.fin_off = fin_off
        if flags & TCP_RST:
            conn.rst = True
            conn.reset_by = d
            self._finish(conn)
        elif flags & TCP_FIN:
            half.fin = True
            if conn.finished():
                self._finish(conn)

    def _connection(self, number: int, ts: int, key: tuple, flags: int, seq: int, payload: bytes,
                    hit: tuple[Connection, int] | None, ack: int = 0) -> tuple[Connection, int] | None:
        """The connection and direction a segment belongs to: the one in the table, or a new one
        where the table's has ended or its 4-tuple is reused by a new SYN; None for a late packet of
        an ended connection (dropped)."""
        if hit is None and self.held.entries:
            hit = self.held.take(self, key, flags, seq, ack)
        if hit is not None:
            conn, d = hit
            if conn.self_connected:
                d = conn.self_direction(flags, seq)
            if conn.done:
                if _late(flags, seq, payload, conn, d):
                    return None
            elif flags & TCP_SYN and conn.isn[d] != seq and \
                    (conn.isn[d] is not None or conn.halves[d].base is not None):
                self._finish(conn)  # the 4-tuple is reused by a new connection
            else:
                self.live.move_to_end(conn)
                self.newest = conn
                return conn, d
        return self._new_connection(number, ts, key, flags, seq)

    def _new_connection(self, number: int, ts: int, key: tuple, flags: int, seq: int) -> tuple[Connection, int]:
        """A connection begun by this segment: in the table under both directions' keys, and the
        newest of the live ones (the longest idle retired if there are too many)."""
        src, sport, dst, dport = key
        conn = Connection((src, sport), (dst, dport), ts, number)
        d = 0
        table = self.table
        self.found.forget()
        table[key] = (conn, 0)
        rkey = (dst, dport, src, sport)
        mp = self.max_pending
        conn.halves = [HalfStream(None, mp), HalfStream(None, mp)]
        if rkey == key:  # both ends share address and port (a TCP self-connection)
            conn.self_connected = True
            conn.keys = (key,)
            d = conn.self_direction(flags, seq)
        else:
            table[rkey] = (conn, 1)
            conn.keys = (key, rkey)
        live = self.live
        live[conn] = None
        self.newest = conn
        if len(live) > self.max_connections:  # retire the longest idle, as if it had closed
            oldest = next(iter(live))
            oldest.evicted = True
            self._finish(oldest)
            self._forget(oldest)
        return conn, d

    def _open(self, conn: Connection) -> None:
        """The connection carries payload: now the listener makes its sinks."""
        conn.opened = True
        sinks = self.listener.opened(conn)
        for h, sink in zip(conn.halves, sinks):
            h.sink = sink
            if h.started:
                sink.start()

    def _forget(self, conn: Connection) -> None:
        """Drop a connection's table entries (an ended one past its linger, or one evicted)."""
        table = self.table
        self.found.forget()
        for key in conn.keys:
            hit = table.get(key)
            if hit is not None and hit[0] is conn:
                del table[key]

    def _finish(self, conn: Connection) -> None:
        if conn.done:
            return
        conn.done = True
        self.live.pop(conn, None)
        if self.newest is conn:
            self.newest = None
        for h in conn.halves:
            h.close()
        self.listener.closed(conn)
        if not conn.evicted:
            self.ended.append(conn)
            self._ended_changed()
        # the table keeps the (now light) entry so that late retransmissions and ACKs are
        # recognised as belonging to a connection that has ended
        for h in conn.halves:
            h.sink = None
            if h.pending:
                h.pending = []
        conn.state = None

    def closing(self) -> Iterator[None]:
        """End of capture: flush the open connections one at a time, pausing after each (its rows can be handed on)."""
        for conn, d in list(self.table.values()) + list(self.held.entries.values()):
            if d == 0 and not conn.done:
                self._finish(conn)
                yield
        self.table.clear()
        self.held.entries.clear()
        self.found.forget()


class Held:
    """The open connections of a reassembler held aside at a file boundary of a rotation series
    (series.py), until a segment of each shows whether it goes on (_continues)."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[tuple, tuple[Connection, int]] = {}  # their table entries

    def hold(self, reasm: "Reassembler") -> None:
        """A file ended and the next begins: every open connection's entries leave the table."""
        table = reasm.table
        for conn in reasm.live:
            for key in conn.keys:
                hit = table.pop(key, None)
                if hit is not None:
                    self.entries[key] = hit
        reasm.found.forget()

    def end(self, reasm: "Reassembler", conn: Connection) -> None:
        """A connection ends here, as at a capture's end, held or not (carry.py: one not carried)."""
        for key in conn.keys:
            self.entries.pop(key, None)
        reasm._finish(conn)

    def take(self, reasm: "Reassembler", key: tuple, flags: int, seq: int, ack: int) -> tuple[Connection, int] | None:
        """The first segment after the boundary of a held connection: its entries back in the
        table (and its connection and direction) where the segment continues it; where it does not,
        the connection ends (its end was not captured) and None (a new one begins)."""
        held = self.entries.get(key)
        if held is None:
            return None
        conn, d = held
        entries = [(k, self.entries.pop(k)) for k in conn.keys if k in self.entries]
        if conn.self_connected:
            d = conn.self_direction(flags, seq)
        if not _continues(conn, d, flags, seq, ack):
            reasm._finish(conn)  # (its entries are gone from the table)
            return None
        for k, entry in entries:
            reasm.table[k] = entry
        reasm.found.forget()
        return conn, d


def last_seen(reasm: "Reassembler") -> int | None:
    """The time of the latest segment of any connection a reassembler still remembers (None: none)."""
    times = [c.last_ts for c in reasm.live] + [c.last_ts for c in reasm.ended]
    return max(times) if times else None


def _continues(conn: Connection, d: int, flags: int, seq: int, ack: int) -> bool:
    """Does a segment in direction d continue the connection (sequence continuity, see CONTINUITY)?
    Its sequence number where the direction has sent (a SYN again: the same ISN, no data yet; only
    pure ACKs: their sequence number, as TCP health kept it), else its acknowledgment of what the
    other direction sent (a SYN-ACK after a SYN in the file before)."""
    if conn.done:
        return False
    if flags & TCP_SYN and conn.isn[d] is not None:  # a SYN sent again: only before any data
        return conn.isn[d] == seq and not conn.halves[d].nxt
    half = conn.halves[d]
    if half.base is not None and not flags & TCP_SYN:
        return _near(seq, half.base + half.nxt)
    seen = conn.health.side(d)  # (a direction that sent only pure ACKs so far: their numbers)
    if seen.seen and not flags & TCP_SYN:
        return _near(seq, seen.nextseq)
    other = conn.halves[1 - d]
    if other.base is None:
        heard = conn.health.side(1 - d)
        return bool(flags & TCP_ACK) and heard.seen and _near(ack, heard.nextseq)
    return bool(flags & TCP_ACK) and _near(ack, other.base + other.nxt)


def _near(a: int, b: int) -> bool:
    delta = (a - b) & MASK32
    return delta < CONTINUITY or delta > MASK32 + 1 - CONTINUITY
