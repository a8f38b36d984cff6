"""Losses one capture point can see (wire/health.py, "lost on the path"): skips in the sender's IPv4
numbering, D-SACK blocks that take back a copy counted lost, and a pure ACK past the bytes seen.
Hand-built segments for the rules (one stage: wire/health.py) and hand-built packets whose options
tshark parses too (packets.dissect and the fast lane against tshark's D-SACK edges and IP IDs). The
whole, against a forwarder's drop log at both ends of a real client and broker, is in
tests/test_network_split.py."""

from __future__ import annotations

import random
import subprocess

import dpkt
import pytest

from pcapgen import write_pcap

from spark_kafkawire.wire.capture import CaptureReader
from spark_kafkawire.wire.health import Health
from spark_kafkawire.wire.loss import FRAME_PAYLOAD, MAX_ID_GAP, MIN_ID_STEPS
from spark_kafkawire.wire.packets import dissect

ACK = 0x10
MSS = 1448


def _send(h: Health, d: int, ids: list[int], seq0: int = 1000, size: int = MSS, t0: int = 0, ack: int = 1) -> int:
    """Segments of new data from direction d, one per IP ID, in order: the next sequence number."""
    seq = seq0
    for i, ip_id in enumerate(ids):
        h.segment(d, t0 + i * 1000, seq, ack, ACK, 1000, size, ip_id)
        seq += size
    return seq


def test_skips_in_a_one_by_one_numbering_are_packets_lost_before_the_capture_point():
    h = Health()
    ids = [n for n in range(100, 140) if n not in (110, 111, 125)]  # three packets never arrived
    _send(h, 1, ids)
    side = h.side(1)
    assert side.ids.trusted() and side.ids.gaps == 3
    assert side.lost == 3 and side.lost_before == 0  # (no hole: the data was numbered past them)
    assert side.data_segments == len(ids)


def test_a_random_or_host_wide_numbering_is_not_read_as_loss():
    rng = random.Random(3)
    for ids in ([rng.randrange(65536) for _ in range(60)],  # random per packet
                [100 + sum(rng.randrange(1, 6) for _ in range(i)) for i in range(60)]):  # shared with other flows
        h = Health()
        _send(h, 1, ids)
        assert not h.side(1).ids.trusted() and h.side(1).lost == 0


def test_a_step_after_a_packet_cut_by_segmentation_offload_is_not_counted():
    """A packet larger than one frame's payload became several on the wire, each numbered."""
    h = Health()
    seq = _send(h, 1, list(range(1, 12)))
    h.segment(1, 20_000, seq, 1, ACK, 1000, 4 * MSS, 12)  # four frames on the wire: 12..15
    h.segment(1, 21_000, seq + 4 * MSS, 1, ACK, 1000, MSS, 16)
    assert 4 * MSS > FRAME_PAYLOAD and h.side(1).ids.gaps == 0 and h.side(1).lost == 0


def test_a_packet_late_with_a_lower_number_fills_the_skip_it_opened():
    h = Health()
    seq = _send(h, 1, list(range(1, 12)))
    h.segment(1, 20_000, seq + MSS, 1, ACK, 1000, MSS, 13)  # 12 overtaken ...
    h.segment(1, 21_000, seq, 1, ACK, 1000, MSS, 12)  # ... and here it is
    assert h.side(1).ids.gaps == 0 and h.side(1).lost == 0 and h.side(1).out_of_order == 1


def test_without_numbers_a_hole_filled_late_is_the_loss():
    """IPv6 (no identification): a segment lost before the capture point shows as a hole filled
    more than a round trip later."""
    h = Health()
    seq = _send(h, 1, [-1] * 10)
    h.segment(1, 20_000_000, seq + MSS, 1, ACK, 1000, MSS)  # seq .. seq + MSS skipped
    h.segment(1, 60_000_000, seq, 1, ACK, 1000, MSS)  # filled 40 ms later
    assert h.side(1).lost == 1 and h.side(1).lost_before == 1


def test_a_response_lost_whole_marks_its_copy_and_only_it():
    """The broker's one-segment response lost before the capture point: its copy comes with the next
    number but one and opens no hole; the segment that carried the byte is suspect (broker_ms is
    not timed from it), the next response is not."""
    h = Health()
    _send(h, 0, list(range(500, 520)), seq0=1, size=100)  # the client's requests (numbered apart)
    seq = _send(h, 1, list(range(1, 12)), seq0=5000, size=60)
    h.segment(1, 500_000, seq, 1, ACK, 1000, 60, 13)  # 12 (the response's first copy) lost
    h.segment(1, 600_000, seq + 60, 1, ACK, 1000, 60, 14)
    base = 5000
    assert h.skipped_before(1, base, seq - base) and h.skipped_before(1, base, seq - base + 59)
    assert not h.skipped_before(1, base, seq - base + 60) and not h.skipped_before(1, base, seq - base - 60)
    assert h.side(1).lost == 1


def test_a_skip_where_a_hole_opens_is_the_holes_not_the_next_data():
    h = Health()
    seq = _send(h, 1, list(range(1, 12)))
    h.segment(1, 20_000, seq + MSS, 1, ACK, 1000, MSS, 13)  # 12 lost: a hole opens
    h.segment(1, 21_000, seq + 2 * MSS, 1, ACK, 1000, MSS, 14)
    assert not h.skipped_before(1, 1000, seq + 2 * MSS - 1000)


def test_a_skip_past_the_largest_gap_is_not_a_loss():
    h = Health()
    seq = _send(h, 1, list(range(1, 20)))
    _send(h, 1, list(range(20 + MAX_ID_GAP, 40 + MAX_ID_GAP)), seq0=seq, t0=100_000)
    assert h.side(1).ids.gaps == 0 and h.side(1).ids.trusted()


def test_a_d_sack_takes_back_the_copy_counted_lost():
    """The broker sent again a response the client had (the client's ACK was lost): counted lost
    when seen twice, taken back when the client reports the bytes received twice."""
    h = Health()
    seq = _send(h, 1, list(range(1, 12)), seq0=5000, size=79)
    h.segment(1, 300_000_000, seq - 79, 1, ACK, 1000, 79, 12)  # the copy (a retransmission timer)
    assert h.side(1).lost == 1 and h.side(1).lost_after == 1
    dsack = (79 << 32) | (seq - 79)
    h.segment(0, 310_000_000, 1, seq, ACK, 1000, 0, 900, dsack)
    assert h.side(1).lost == 0 and h.side(1).lost_bytes == 0 and h.side(1).resent == 1  # (still sent again)
    assert h.resent_between(1, 5000, seq - 79 - 5000, seq - 5000) == (1, -1)  # no longer a loss's copy


def test_a_pure_ack_past_the_bytes_seen_opens_a_hole():
    """The client's request lost before the capture point, then its pure ACK (numbered past the
    request) seen: the request's copy fills that hole (lost before), never a copy of bytes seen."""
    h = Health()
    seq = _send(h, 0, [-1] * 5, seq0=1, size=105)
    h.segment(0, 50_000_000, seq + 105, 1, ACK, 1000, 0)
    h.segment(0, 60_000_000, seq, 1, ACK, 1000, 105)
    assert h.side(0).lost_before == 1 and h.side(0).lost_after == 0


def _options_packet(seq: int, ack: int, opts: bytes, ip_id: int) -> bytes:
    tcp = dpkt.tcp.TCP(sport=40000, dport=9092, seq=seq, ack=ack, flags=ACK, opts=opts)
    tcp.off = (20 + len(opts)) // 4
    ip = dpkt.ip.IP(src=b"\x0a\0\0\x01", dst=b"\x0a\0\0\x02", p=dpkt.ip.IP_PROTO_TCP, id=ip_id, data=tcp)
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def _sack(*blocks: tuple[int, int], ts: bool = True) -> bytes:
    body = b"".join(a.to_bytes(4, "big") + b.to_bytes(4, "big") for a, b in blocks)
    head = b"\x01\x01\x08\x0a" + bytes(8) if ts else b""
    return head + b"\x01\x01\x05" + bytes([2 + len(body)]) + body


#: (options, ACK): a first block below the ACK (D-SACK), one inside the second block (D-SACK), a
#: plain SACK block past the ACK, timestamps alone, a block at the top of sequence space
CASES = [(_sack((9000, 9079)), 10_000), (_sack((12_000, 12_100), (11_000, 13_000), ts=False), 10_000),
         (_sack((12_000, 13_448)), 10_000), (b"\x01\x01\x08\x0a" + bytes(8), 10_000),
         (_sack((0xFFFFFF00, 0xFFFFFF50)), 0xFFFFFFF0), (_sack((0xFFFFFFF0, 0x10)), 0x20)]


@pytest.fixture
def options_capture(tmp_path):
    path = tmp_path / "options.pcap"
    write_pcap(path, [_options_packet(1, ack, opts, 7 + i) for i, (opts, ack) in enumerate(CASES)])
    return path


@pytest.mark.parametrize("lane", [False, True])
def test_d_sack_edges_and_ip_ids_are_what_tshark_reads(options_capture, lane):
    from spark_kafkawire.wire import lane as lane_mod

    out = subprocess.run(["tshark", "-r", str(options_capture), "-o", "tcp.relative_sequence_numbers:FALSE", "-T",
                          "fields", "-e", "tcp.options.sack.dsack_le", "-e", "tcp.options.sack.dsack_re", "-e", "ip.id"],
                         capture_output=True, text=True, check=True).stdout
    theirs = []
    for line in out.splitlines():
        le, re_, ip_id = line.split("\t")
        theirs.append((int(le) if le else None, int(re_) if re_ else None, int(ip_id, 0)))
    if lane:
        if not lane_mod.available():
            pytest.skip("the fast lane is not built (or KAFKAWIRE_PURE_PYTHON=1)")
        segments = _lane_segments(options_capture)
    else:
        segments = [dissect(p) for p in CaptureReader(str(options_capture))]
    ours = []
    for s in segments:
        if s.dsack < 0:
            ours.append((None, None, s.ip_id))
        else:
            left = s.dsack & 0xFFFFFFFF
            ours.append((left, (left + (s.dsack >> 32)) & 0xFFFFFFFF, s.ip_id))
    assert ours == theirs and [o[0] is not None for o in ours] == [True, True, False, False, True, True]


def _lane_segments(path):
    """The segments the fast lane hands on, all of these (tests/test_lane.py)."""
    from test_lane import lane_segments

    segments, taken = lane_segments(path)
    assert taken >= len(CASES) - 1  # (the reader may take the first record itself)
    return segments


def test_min_steps_constant_is_what_the_docs_say():
    assert MIN_ID_STEPS == 8 and MAX_ID_GAP == 8


def test_a_fill_numbered_after_the_top_segment_is_a_copy_however_soon_it_comes():
    """A pipelined broker's response lost before the capture point (the client's end): the next
    response opens a hole, and the copy, sent on the client's first duplicate ACK, fills it about
    one round trip later, within the handshake's round trip. Its IPv4 number comes after the top
    segment's: it was sent after it, so it is a copy of a lost segment (its first arrival was late:
    broker_ms is not timed from it), not a segment that came out of order."""
    h = Health()
    h.segment(0, 0, 0, 0, 0x02, 1000, 0, 900)  # SYN
    h.segment(1, 20_500_000, 5000 - 1, 1, 0x12, 1000, 0, 0)  # SYN-ACK: the round trip is 20.5 ms
    h.segment(0, 20_600_000, 1, 5000, ACK, 1000, 0, 901)
    _send(h, 0, list(range(902, 922)), seq0=1, size=210, t0=21_000_000)  # the client's requests
    seq = _send(h, 1, list(range(1, 12)), seq0=5000, size=52, t0=21_000_000)
    h.segment(1, 40_000_000, seq + 52, 1, ACK, 1000, 52, 13)  # 12 (a response) lost: a hole opens
    h.segment(1, 60_300_000, seq, 1, ACK, 1000, 52, 14)  # its copy, 20.3 ms later, numbered after 13
    assert h.side(1).out_of_order == 0 and h.side(1).lost == 1
    assert h.resent_between(1, 5000, seq - 5000, seq - 5000 + 1)[0] == 1  # (the response's first byte)
    # the same fill numbered below the top segment was sent before it: out of order, no loss
    g = Health()
    g.segment(0, 0, 0, 0, 0x02, 1000, 0, 900)
    g.segment(1, 20_500_000, 5000 - 1, 1, 0x12, 1000, 0, 0)
    g.segment(0, 20_600_000, 1, 5000, ACK, 1000, 0, 901)
    seq = _send(g, 1, list(range(1, 12)), seq0=5000, size=52, t0=21_000_000)
    g.segment(1, 40_000_000, seq + 52, 1, ACK, 1000, 52, 13)
    g.segment(1, 40_300_000, seq, 1, ACK, 1000, 52, 12)
    assert g.side(1).out_of_order == 1 and g.side(1).lost == 0


def test_karns_rule_keeps_ambiguous_acks_out_of_the_least_round_trip():
    """What is in flight when a copy is sent is acknowledged once the receiver has the bytes before
    it too: those ACKs are still samples (as tshark's ack_rtt times them) but the least round trip
    (network_ms of a connection seen from its middle) takes none of them; a fill seen once is timed."""
    h = Health()
    t = 0
    for k in range(5):  # five round trips of 20 ms: data, then its ACK
        h.segment(0, t, 1 + 100 * k, 1, ACK, 1000, 100, 10 + k)
        h.segment(1, t + 20_000_000, 1, 1 + 100 * (k + 1), ACK, 1000, 0, 50 + k)
        t += 30_000_000
    assert h.side(0).least_rtt() == 20_000_000
    # a segment, a later one, the first sent again 200 ms on: one cumulative ACK after the copy
    h.segment(0, t, 501, 1, ACK, 1000, 100, 20)
    h.segment(0, t + 1_000_000, 601, 1, ACK, 1000, 100, 21)
    h.segment(0, t + 200_000_000, 501, 1, ACK, 1000, 100, 22)  # a copy (seen twice)
    h.segment(1, t + 201_000_000, 1, 701, ACK, 1000, 0, 60)  # ACK of both: 200 ms after the second
    samples = h.side(0).samples
    assert samples is not None and max(samples) >= 200_000_000  # (a sample, as tshark's)
    assert h.side(0).least_rtt() == 20_000_000 and h.side(0).win_n == 5
