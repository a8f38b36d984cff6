"""TCP reassembly: order, retransmissions, overlaps, wraparound, gaps, connection lifecycle."""

import random
from collections import Counter

import dpkt

from pcapgen import BROKER, CLIENT, Conversation, decoded_rows, produce_request, request, response, tcp_packet
from spark_kafkawire.wire.halfstream import HalfStream, Sink
from stages import flush, stages


class Rec(Sink):
    def __init__(self):
        self.out = bytearray()
        self.gaps = []
        self.ended = False
        self.started = False

    def start(self):
        self.started = True

    def data(self, chunk, ts, number):
        self.out += chunk

    def gap(self, n, ts, number):
        self.gaps.append(n)
        self.out += b"?" * n

    def end(self):
        self.ended = True


def _feed(segs, base=1000, max_pending=1 << 20):
    r = Rec()
    h = HalfStream(r, max_pending)
    h.start(base)
    for seq, data in segs:
        h.feed(seq, data, len(data), 0, 0)
    h.close()
    return r


def test_in_order_and_reordered_give_the_same_stream():
    data = bytes(range(256)) * 40
    segs = [(1000 + i, data[i : i + 100]) for i in range(0, len(data), 100)]
    assert bytes(_feed(segs).out) == data
    rnd = random.Random(7)
    shuffled = segs[:]
    rnd.shuffle(shuffled)
    r = _feed(shuffled)
    assert bytes(r.out) == data and r.gaps == []


def test_duplicates_are_dropped():
    segs = [(1000, b"abcd"), (1000, b"abcd"), (1004, b"efgh"), (1000, b"abcd"), (1004, b"efgh")]
    assert bytes(_feed(segs).out) == b"abcdefgh"


def test_overlap_first_copy_wins():
    # the retransmission carries different bytes for 1002..1005: the first copy is kept
    segs = [(1000, b"abcd"), (1002, b"XXYYZZ")]
    assert bytes(_feed(segs).out) == b"abcdYYZZ"
    # same, with the overlapping copy arriving before the hole before it is filled
    segs = [(1004, b"efgh"), (1002, b"XXYYZZ"), (1000, b"ab")]
    assert bytes(_feed(segs).out) == b"abXXefgh"


def test_sequence_wraparound():
    base = 0xFFFFFFF0
    data = b"0123456789abcdefghijklmnopqrstuvwxyz"
    segs = [((base + i) & 0xFFFFFFFF, data[i : i + 5]) for i in range(0, len(data), 5)]
    segs[1], segs[4] = segs[4], segs[1]
    assert bytes(_feed(segs, base=base).out) == data


def test_hole_becomes_a_gap_at_close():
    r = _feed([(1000, b"aaaa"), (1008, b"cccc")])
    assert r.gaps == [4] and bytes(r.out) == b"aaaa????cccc" and r.ended


def test_pending_queue_is_bounded():
    segs = [(1000 + 100 + i * 10, b"x" * 10) for i in range(20)]
    r = Rec()
    h = HalfStream(r, 50)
    h.start(1000)
    for seq, d in segs:
        h.feed(seq, d, len(d), 0, 0)
    assert r.gaps == [100]  # declared as soon as more than 50 bytes waited
    assert h.pending_bytes <= 50


def test_reordered_and_duplicated_packets_decode_like_the_clean_stream(tmp_path):
    # shuffled across directions, a response's acknowledgement could overtake the request it
    # acknowledges, which a capture never shows: no acknowledgement numbers here
    c = Conversation(acks=False).handshake()
    for corr in range(1, 6):
        c.send("c", produce_request(7, corr, "consumer", b"F" * 3000), mss=500)
        c.send("b", response(corr, 0, 7), mss=7)
    c.fin()
    clean = decoded_rows(tmp_path, c.packets)
    assert [r["status"] for r in clean] == ["complete"] * 5
    rnd = random.Random(3)
    messy = c.packets[:2] + sorted(c.packets[2:-2], key=lambda p: rnd.random()) + c.packets[-2:]
    messy = messy[:10] + messy[4:8] + messy[10:]  # retransmissions
    got = decoded_rows(tmp_path, messy)
    key = lambda r: (r["correlation_id"], r["api_key"], r["request_size"], r["response_size"], r["status"])  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, clean))


def test_new_connection_reusing_the_four_tuple(tmp_path):
    first = Conversation(isn_c=100, isn_b=900).handshake()
    first.send("c", request(18, 3, 1, "first", flexible=True))
    first.send("b", response(1, 18, 3))
    second = Conversation(isn_c=70000, isn_b=80000).handshake()
    second.send("c", request(18, 3, 1, "second", flexible=True))  # same correlation id again
    second.send("b", response(1, 18, 3))
    rows = decoded_rows(tmp_path, first.packets + second.packets + second.fin().packets[-2:])
    assert [(r["client_id"], r["status"]) for r in rows] == [("first", "complete"), ("second", "complete")]


def test_rst_ends_the_connection(tmp_path):
    c = Conversation().handshake()
    c.send("c", request(3, 12, 9, "x", flexible=True))
    c.packets.append(tcp_packet(BROKER, CLIENT, c.seq["b"], flags=dpkt.tcp.TH_RST))
    rows = decoded_rows(tmp_path, c.packets)
    assert [(r["status"], r["detail"]) for r in rows] == [("no_response", "connection closed without a response")]


def test_gap_in_the_middle_of_a_frame(tmp_path):
    c = Conversation().handshake()
    c.send("c", request(3, 1, 1, "a"))
    c.send("b", response(1, 3, 1))
    lost = c.send("c", produce_request(7, 2, "a", b"P" * 2000), mss=600)
    c.send("c", request(3, 1, 3, "a"))
    c.send("b", response(2, 0, 7))
    c.send("b", response(3, 3, 1))
    pkts = [p for p in c.fin().packets if p is not lost[1]]
    rows = decoded_rows(tmp_path, pkts)
    status = {r["correlation_id"]: r["status"] for r in rows}
    assert status[1] == "complete"
    assert status[2] == "truncated"


def test_ended_connections_are_forgotten(tmp_path):
    """The connection table does not grow with the number of connections in a capture."""
    from spark_kafkawire.wire.capture import Packet
    from spark_kafkawire.wire.packets import dissect
    from spark_kafkawire.rows.shapes import row_builder

    rows = row_builder("exchanges", "x")
    _decoder, r = stages(rows)
    t = 0
    for i in range(3000):
        c = Conversation(client=("10.0.0.1", 10000 + i)).handshake()
        c.send("c", request(12, 4, 1, "hb", flexible=True))
        c.send("b", response(1, 12, 4))
        for p in c.fin().packets:
            t += 100_000_000  # 0.1 s apart
            r.feed(dissect(Packet(1, t, 1, p, len(p))))
    assert rows.count == 3000
    assert len(r.table) < 2 * 2 * 2100  # only connections of the last few minutes remain


def test_self_connection_keeps_its_two_directions_apart(tmp_path):
    """Client and broker on one address and port (a TCP self-connection, or a generated capture
    whose client port landed on the broker's): one 4-tuple for both directions, told apart by the
    SYN and by sequence numbers, so requests and responses pair as usual."""
    ep = ("127.0.0.1", 9092)
    c = Conversation(client=ep, broker=ep, isn_c=1000, isn_b=900_000).handshake()
    for corr in (1, 2):
        c.send("c", request(3, 1, corr, "self", body=b"\x00\x00\x00\x00"))
        c.send("b", response(corr, 3, 1))
    rows = decoded_rows(tmp_path, c.fin().packets)
    assert [(r["correlation_id"], r["api_name"], r["status"]) for r in rows] == [
        (1, "Metadata", "complete"), (2, "Metadata", "complete")]


def test_connections_beyond_the_cap_are_retired_not_kept(tmp_path):
    """A port scan (SYN-only connections) and one-segment connections whose ends were not captured:
    at most maxConnections are tracked at once, the longest idle retired as if closed, its row
    saying end_captured=evicted; every connection still has exactly one row."""
    from spark_kafkawire.wire.packets import dissect
    from spark_kafkawire.wire.capture import CaptureReader
    from spark_kafkawire.rows.shapes import row_builder
    from pcapgen import write_pcap

    packets = []
    for i in range(3000):  # a scan: one SYN per port
        packets.append(tcp_packet(("10.9.0.1", 50000), ("10.9.0.2", 1 + i), 1000, flags=dpkt.tcp.TH_SYN))
    for i in range(2000):  # one data segment each, no SYN or FIN captured
        packets.append(tcp_packet(("10.9.0.3", 20000 + i), BROKER, 5000, request(3, 1, 1, "one", body=b"\0\0\0\0")))
    path = tmp_path / "many.pcap"
    write_pcap(path, packets)
    rows = row_builder("connections", str(path))
    _decoder, reasm = stages(rows, maxConnections=1000)
    most_live = most_table = 0
    for pkt in CaptureReader(str(path)):
        reasm.feed(dissect(pkt))
        most_live = max(most_live, len(reasm.live))
        most_table = max(most_table, len(reasm.table))
    flush(reasm)
    got = rows.flush().to_pylist()
    assert most_live == 1000 and most_table <= 2 * 1000
    assert len(got) == 5000
    ends = Counter(r["end_captured"] for r in got)
    assert ends == {"evicted": 4000, "open": 1000}
    assert sum(r["client_frames"] for r in got) == 2000  # every one-segment request framed
    # below the cap nothing changes
    small = decoded_rows(tmp_path, packets[:600], rows="connections", maxConnections=1000)
    assert len(small) == 600 and {r["end_captured"] for r in small} == {"open"}


def test_connections_open_at_the_capture_end_leave_in_batches(tmp_path, monkeypatch):
    """The capture's end closes every connection still open (up to maxConnections of them, each with
    a request waiting for its answer): their rows leave in batches as they are made, not all at
    once (10^6 one-segment connections held 1.2 GB at the end before)."""
    from pcapgen import write_pcap
    from spark_kafkawire.reader import iter_batches
    from spark_kafkawire.rows.shapes import ExchangeRows

    packets = [tcp_packet(("10.9.0.3", 20000 + i), BROKER, 5000, request(3, 1, 1, "one", body=b"\0\0\0\0"))
               for i in range(3000)]
    path = tmp_path / "open.pcap"
    write_pcap(path, packets)
    most = 0
    real = ExchangeRows.exchange

    def counting(self, *a, **k):
        nonlocal most
        real(self, *a, **k)
        most = max(most, self.count)

    monkeypatch.setattr(ExchangeRows, "exchange", counting)
    batches = list(iter_batches(str(path), {"batchSize": "100"}))
    assert sum(b.num_rows for b in batches) == 3000
    assert {r["status"] for b in batches for r in b.to_pylist()} == {"no_response"}
    assert most <= 100


def test_ended_connections_are_forgotten_by_the_linger_rule():
    """An ended connection stays in the table LINGER_NS after its last packet (for its late
    copies), then goes at the first packet after that; past max_connections ended ones, the oldest
    goes at the next packet."""
    from spark_kafkawire.wire.packets import TCP_ACK, TCP_RST, Segment
    from spark_kafkawire.wire.tcp import LINGER_NS, Reassembler

    class Listener:
        def opened(self, conn):
            return Rec(), Rec()

        def closed(self, conn):
            pass

    def seg(port, ts, flags, payload=b""):
        return Segment(1, ts, b"\x01" * 4, port, b"\x02" * 4, 9092, 1000, 1, flags, payload, len(payload), 100)

    def ports(r):
        return sorted({key[1] for key in r.table if key[3] == 9092})

    r = Reassembler(Listener(), max_connections=2)
    r.feed(seg(1, 0, TCP_ACK, b"abcd"))
    r.feed(seg(1, 5, TCP_RST))
    r.feed(seg(2, 5 + LINGER_NS, TCP_ACK))  # not after the linger: remembered
    assert ports(r) == [1, 2] and len(r.ended) == 1
    r.feed(seg(2, 6 + LINGER_NS, TCP_ACK))
    assert ports(r) == [2] and not r.ended
    for p, ts in ((3, 10), (4, 11), (5, 12)):
        r.feed(seg(p, ts, TCP_RST))  # three ended at once, more than max_connections
    assert ports(r) == [2, 3, 4, 5] and len(r.ended) == 3
    r.feed(seg(2, 13, TCP_ACK))
    assert ports(r) == [2, 4, 5] and len(r.ended) == 2
    r.feed(seg(2, 14, TCP_ACK))  # two: within max_connections, each kept for its linger
    assert ports(r) == [2, 4, 5]


def test_the_table_read_through_the_last_entries_found_is_the_table():
    """Found.get answers what the table holds: for a key of the same objects as one found before,
    of equal ones and of others, before and after the table changes and forget()."""
    from spark_kafkawire.wire.tcp import Connection, Found

    a, b, c = b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02", b"\x0a\x00\x00\x03"
    ab, ac = Connection((a, 1), (b, 2), 0, 1), Connection((a, 1), (c, 2), 0, 2)
    table = {(a, 1, b, 2): (ab, 0), (b, 2, a, 1): (ab, 1)}
    found = Found(table)
    keys = [(a, 1, b, 2), (b, 2, a, 1), (a, 1, c, 2), (bytes(a), 1, bytes(b), 2), (a, 1, b, 3)]
    for _ in range(2):
        for k in keys * 2:
            assert found.get(*k) == table.get(k), k
    table[(a, 1, c, 2)] = (ac, 0)
    del table[(b, 2, a, 1)]
    found.forget()
    for k in keys * 2:
        assert found.get(*k) == table.get(k), k


def test_a_response_the_capture_lost_is_not_said_to_be_missing(tmp_path):
    """The broker's answer is in bytes the capture lost (its segment dropped, the broker's FIN after
    it): the request has no response row, and its detail says the capture lost the broker's bytes,
    not that the connection closed without one."""
    c = Conversation().handshake()
    c.send("c", request(3, 12, 9, "x", flexible=True))
    (lost,) = c.send("b", response(9, 3, 12))
    c.packets.remove(lost)
    rows = decoded_rows(tmp_path, c.fin().packets)
    ((status, detail),) = [(r["status"], r["detail"]) for r in rows]
    assert status == "no_response" and detail.startswith("no response seen: the capture lost ")
    assert "bytes the broker sent" in detail
