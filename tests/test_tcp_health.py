"""Where the time goes on the wire, against tshark's own reading of the same captures: exchange
rows' transfer times (the packets tshark reassembles each PDU from), connection rows'
handshake_rtt_ms (tcp.analysis.initial_rtt), capture_side, and who reset the connection (the first
packet with the RST flag); and hand-built connections for the cases the capture leaves unclear
(null, never a wrong figure)."""

from __future__ import annotations

import dpkt
import pytest

from conftest import ROOT, SAMPLES
from pcapgen import tcp_packet
from spark_kafkawire import read_capture
from test_tshark import tshark_fields

PUBLIC = ROOT.parent / "shared" / "public-captures"
JA4 = ROOT / "tests" / "ja4"


def _captures():
    return [p for p in sorted(SAMPLES.glob("*.pcap*")) + sorted(PUBLIC.glob("*.pcap*")) + sorted(JA4.glob("*.pcap*"))
            if not p.name.endswith(".json")]


def _tshark_initial_rtt(path) -> dict[frozenset, float]:
    """{the connection's two endpoints: tshark's initial RTT (ms)}, for connections it gives one."""
    out: dict[frozenset, float] = {}
    rows = tshark_fields(path, (), ("ip.src", "ipv6.src", "tcp.srcport", "ip.dst", "ipv6.dst", "tcp.dstport",
                                    "tcp.analysis.initial_rtt"), display="tcp.analysis.initial_rtt")
    for src4, src6, sport, dst4, dst6, dport, irtt in rows:
        key = frozenset({(src4 or src6, int(sport)), (dst4 or dst6, int(dport))})
        out.setdefault(key, float(irtt) * 1000)
    return out


@pytest.mark.parametrize("path", _captures(), ids=lambda p: p.name)
def test_handshake_rtt_equals_tsharks_initial_rtt(path):
    theirs = _tshark_initial_rtt(path)
    ours = {}
    for r in read_capture(path, rows="connections").to_pylist():
        if r["status"] == "connection" and r["handshake_rtt_ms"] is not None:
            ours[frozenset({(r["client_ip"], r["client_port"]), (r["broker_ip"], r["broker_port"])})] = \
                r["handshake_rtt_ms"]
    # every round trip we give is tshark's, to the microsecond; we give one wherever tshark does,
    # except where the handshake was unclear (then tshark still measures from the last SYN)
    for key, rtt in ours.items():
        assert key in theirs and abs(rtt - theirs[key]) < 0.001, (key, rtt, theirs.get(key))
    assert len(ours) >= len(theirs) * 0.9


CLIENT, BROKER = ("10.0.0.1", 40000), ("10.0.0.2", 9092)


def _handshake(path, times_us, syn_again=False):
    """A pcap of one handshake, SYN, SYN-ACK and ACK at the given microseconds (the SYN sent twice
    where asked), written by dpkt with those times."""
    syn, synack, ack = dpkt.tcp.TH_SYN, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK, dpkt.tcp.TH_ACK
    pkts = [(times_us[0], tcp_packet(CLIENT, BROKER, 1000, flags=syn))]
    if syn_again:
        pkts.append((times_us[0] + 1, tcp_packet(CLIENT, BROKER, 1000, flags=syn)))
    pkts += [(times_us[1], tcp_packet(BROKER, CLIENT, 5000, flags=synack, ack=1001)),
             (times_us[2], tcp_packet(CLIENT, BROKER, 1001, flags=ack, ack=5001))]
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=dpkt.pcap.DLT_EN10MB, nano=True)
        for us, pkt in pkts:
            w.writepkt(pkt, ts=1_700_000_000 + us / 1e6)


@pytest.mark.parametrize("times, syn_again, rtt, side", [
    ((0, 10_000, 10_050), False, 10.05, "client"),  # the SYN-ACK a round trip after the SYN: at the client
    ((0, 40, 10_040), False, 10.04, "broker"),  # the ACK a round trip after the SYN-ACK: at the broker
    ((0, 5_000, 10_000), False, 10.0, "middle"),
    ((0, 10, 20), False, 0.02, None),  # one host sees both ends: no side
    ((0, 10_000, 10_050), True, None, None),  # the SYN sent again: which one was answered is unclear
])
def test_unclear_handshakes_give_null_never_a_wrong_figure(tmp_path, times, syn_again, rtt, side):
    path = tmp_path / "h.pcap"
    _handshake(path, times, syn_again)
    (row,) = [r for r in read_capture(path, rows="connections").to_pylist() if r["status"] == "connection"]
    assert (row["handshake_rtt_ms"] is None) == (rtt is None)
    if rtt is not None:
        assert abs(row["handshake_rtt_ms"] - rtt) < 0.001  # a microsecond
    assert row["capture_side"] == side


def _tshark_first_reset(path) -> dict[frozenset, tuple]:
    """{the connection's two endpoints: the (address, port) that sent its first RST}, as tshark reads it."""
    out: dict[frozenset, tuple] = {}
    rows = tshark_fields(path, (), ("ip.src", "ipv6.src", "tcp.srcport", "ip.dst", "ipv6.dst", "tcp.dstport"),
                         display="tcp.flags.reset == 1")
    for src4, src6, sport, dst4, dst6, dport in rows:
        src, dst = (src4 or src6, int(sport)), (dst4 or dst6, int(dport))
        out.setdefault(frozenset({src, dst}), src)
    return out


@pytest.mark.parametrize("path", _captures(), ids=lambda p: p.name)
def test_who_reset_a_connection_is_whom_tshark_sees_reset_it(path):
    theirs = _tshark_first_reset(path)
    for r in read_capture(path, rows="connections").to_pylist():
        if r["status"] != "connection":
            continue
        key = frozenset({(r["client_ip"], r["client_port"]), (r["broker_ip"], r["broker_port"])})
        if r["end_captured"] == "rst":
            sender = (r["client_ip"], r["client_port"]) if r["client_resets"] else (r["broker_ip"], r["broker_port"])
            assert r["client_resets"] + r["broker_resets"] == 1 and theirs.get(key) == sender, (r, theirs.get(key))
        else:
            assert r["client_resets"] == r["broker_resets"] == 0


@pytest.mark.parametrize("who", ["client", "broker"])
def test_a_reset_names_its_sender(tmp_path, who):
    """A connection with one request each way, then an RST from one side (and a late RST copy from
    it after the end, which counts no second time)."""
    from pcapgen import Conversation, request, response, write_pcap

    conv = Conversation().handshake()
    conv.send("c", request(18, 3, 1))
    conv.send("b", response(1, 18, 3))
    src, dst, side = (conv.client, conv.broker, "c") if who == "client" else (conv.broker, conv.client, "b")
    rst = tcp_packet(src, dst, conv.seq[side], flags=dpkt.tcp.TH_RST | dpkt.tcp.TH_ACK)
    write_pcap(tmp_path / "r.pcap", conv.packets + [rst, rst])
    (row,) = [r for r in read_capture(tmp_path / "r.pcap", rows="connections").to_pylist()
              if r["status"] == "connection"]
    assert row["end_captured"] == "rst"
    assert (row["client_resets"], row["broker_resets"]) == ((1, 0) if who == "client" else (0, 1))


def _tshark_pdu_spans(path, ports) -> dict[tuple, tuple[int, int]]:
    """{(client port, broker port, request?, correlation id): (first packet, last packet)} of every
    Kafka PDU tshark shows alone in its packet (a PDU shown where its reassembly completes; its
    first packet: the lowest of its segments)."""
    out = {}
    for num, sport, dport, corrs, segments in tshark_fields(
            path, ports, ("frame.number", "tcp.srcport", "tcp.dstport", "kafka.correlation_id", "tcp.segment")):
        if not corrs or ";" in corrs:
            continue
        sport, dport = int(sport), int(dport)
        request = dport in ports
        first = min(int(s) for s in segments.split(";")) if segments else int(num)
        key = (sport, dport, True, int(corrs)) if request else (dport, sport, False, int(corrs))
        out[key] = (first, int(num))
    return out


@pytest.mark.parametrize("path", [p for p in _captures() if "ja4" not in str(p)], ids=lambda p: p.name)
def test_transfer_times_span_the_packets_tshark_reassembles(path):
    """request_transfer_ms and response_transfer_ms: from the packet of a frame's first byte to the
    packet of its last, the packets tshark reassembles the PDU from (its segments), timed by
    tshark's own frame.time_epoch."""
    rows = [r for r in read_capture(path).to_pylist() if r["status"] == "complete"]
    ports = sorted({r["broker_port"] for r in rows})
    if not rows:
        pytest.skip("no complete exchange")
    times = {int(n): float(t) for n, t in tshark_fields(path, (), ("frame.number", "frame.time_epoch"),
                                                           display="frame")}
    spans = _tshark_pdu_spans(path, ports)
    checked = spanning = 0
    for r in rows:
        for request, first_col, ms_col in ((True, "request_packet", "request_transfer_ms"),
                                           (False, "response_packet", "response_transfer_ms")):
            span = spans.get((r["client_port"], r["broker_port"], request, r["correlation_id"]))
            if span is None:
                continue
            first, last = span
            assert r[first_col] == first, (r, span)
            assert abs(r[ms_col] - (times[last] - times[first]) * 1000) < 0.001, (r, span)
            checked += 1
            spanning += last != first
    assert checked >= len(rows) // 2
    if path.name == "veth-confluent-mtu.pcap":
        assert spanning > 0  # MTU-sized segments: some frames cross several packets


# -- segments sent again ---------------------------------------------------------------------------------
_RESENT = ("tcp.analysis.retransmission or tcp.analysis.fast_retransmission or tcp.analysis.spurious_retransmission "
           "or tcp.analysis.out_of_order")


def _tshark_resent(path) -> dict[tuple, list[int]]:
    """{(sender address, port, receiver address, port): [segments, payload bytes]} of the segments with
    payload that tshark's TCP analysis marks as sent again or out of order (keep-alives are its own
    kind) and that start below the highest sequence number tshark saw in that direction before them.
    (tshark also marks a segment that does reach past it when the receiver had acknowledged its
    bytes before the capture saw them: the original lost before the capture point; a capture that
    never saw the first copy has no copy to count.)"""
    out: dict[tuple, list[int]] = {}
    rows = tshark_fields(path, (), ("tcp.stream", "ip.src", "ipv6.src", "tcp.srcport", "ip.dst", "ipv6.dst",
                                    "tcp.dstport", "tcp.seq", "tcp.len", "tcp.nxtseq", "tcp.analysis.flags"),
                         display="tcp.len > 0")
    marked = {int(f) for (f,) in tshark_fields(path, (), ("frame.number",),
                                               display=f"tcp.len > 0 and ({_RESENT}) and not tcp.analysis.keep_alive")}
    frames = [int(f) for (f,) in tshark_fields(path, (), ("frame.number",), display="tcp.len > 0")]
    top: dict[tuple, int] = {}
    for number, (stream, src4, src6, sport, dst4, dst6, dport, seq, length, nxt, _f) in zip(frames, rows):
        key = (stream, src4 or src6, int(sport))
        below = key in top and int(seq) < top[key]
        top[key] = max(top.get(key, 0), int(nxt))
        if number in marked and below:
            n = out.setdefault((src4 or src6, int(sport), dst4 or dst6, int(dport)), [0, 0])
            n[0] += 1
            n[1] += int(length)
    return out


def _ours_resent(path) -> dict[tuple, list[int]]:
    out: dict[tuple, list[int]] = {}
    for r in read_capture(path, rows="connections").to_pylist():
        if r["status"] != "connection":
            continue
        c, b = (r["client_ip"], r["client_port"]), (r["broker_ip"], r["broker_port"])
        for side, (src, dst) in (("client", (c, b)), ("broker", (b, c))):
            if r[f"{side}_retransmitted_segments"]:
                n = out.setdefault((*src, *dst), [0, 0])
                n[0] += r[f"{side}_retransmitted_segments"]
                n[1] += r[f"{side}_retransmitted_bytes"]
    return out


def _damaged_copies(tmp_path):
    import random

    import damage

    out = []
    for name in ("tansu-confluent-codecs.pcap", "veth-confluent-mtu.pcap", "mock-kcat.pcap"):
        packets, linktype = damage.read(SAMPLES / name)
        for kind in ("reordered", "duplicated"):
            rng = random.Random(7)
            out.append(damage.write(tmp_path / f"{kind}-{name}", getattr(damage, kind)(packets, linktype, rng), linktype))
    return out


@pytest.mark.parametrize("path", _captures(), ids=lambda p: p.name)
def test_segments_sent_again_are_those_tsharks_analysis_marks(path):
    """Per connection and direction, the segments with payload that did not reach past the highest
    byte seen: tshark's retransmissions, fast and spurious retransmissions and out-of-order segments
    together, counted and summed in bytes, on every sample, public and JA4 capture."""
    assert _ours_resent(path) == _tshark_resent(path)


def test_segments_sent_again_in_reordered_and_duplicated_copies(tmp_path):
    """The samples with segments swapped and every fifth captured twice (tests/tools/damage.py):
    tshark's marks, connection by connection."""
    seen = 0
    for path in _damaged_copies(tmp_path):
        theirs = _tshark_resent(path)
        assert _ours_resent(path) == theirs, path.name
        seen += sum(n for n, _ in theirs.values())
    assert seen > 100
