"""An exchange's network time never exceeds its latency where the capture point is at the client's
end: on one host (loopback, the same address) the capture point is at both ends, and the
handshake's halves are the host's scheduling (tens of microseconds), often more than the quickest
exchange's whole latency."""

from __future__ import annotations

import glob

import dpkt

from conftest import ROOT
from spark_kafkawire import read_capture
from spark_kafkawire.decode.connstate import one_host
from spark_kafkawire.rows.timing import bounded

SAMPLES = sorted(glob.glob(str(ROOT / "sample_pcaps" / "*.pcap*")))


def _handshakes(path: str) -> dict[int, float]:
    """client port -> SYN to the ACK of the SYN-ACK (ms), read with dpkt on its own"""
    syn: dict[int, float] = {}
    out: dict[int, float] = {}
    with open(path, "rb") as f:
        reader = dpkt.pcapng.Reader(f) if path.endswith(".pcapng") else dpkt.pcap.UniversalReader(f)
        for ts, buf in reader:
            ip = dpkt.ethernet.Ethernet(buf).data
            if not isinstance(getattr(ip, "data", None), dpkt.tcp.TCP):
                continue
            tcp = ip.data
            flags = tcp.flags & (dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK)
            if flags == dpkt.tcp.TH_SYN:
                syn[tcp.sport] = float(ts)
            elif flags == dpkt.tcp.TH_ACK and tcp.sport in syn and tcp.sport not in out and not tcp.data:
                out[tcp.sport] = (float(ts) - syn[tcp.sport]) * 1e3
    return out


def test_network_time_never_exceeds_latency_on_one_host():
    """Every sample (real clients and brokers on loopback): no exchange's network_ms above its
    latency_ms, though on some the handshake's round trip (dpkt's own reading) is above the
    latency of an exchange on its connection, so the bound is what holds it."""
    beaten = 0
    for path in SAMPLES:
        shakes = _handshakes(path)
        for r in read_capture(path).to_pylist():
            if r["network_ms"] is None or r["latency_ms"] is None:
                continue
            assert r["network_ms"] <= r["latency_ms"], (path, r["correlation_id"], r["network_ms"], r["latency_ms"])
            beaten += shakes.get(r["client_port"], 0) > r["latency_ms"]
    assert beaten >= 5, beaten


def test_the_bound_at_each_capture_point():
    """bounded(round trip, part beyond the capture point, the exchange's request-to-response gap)"""
    ms = 1_000_000
    # at the client's end: the whole round trip at most the gap
    assert bounded(20 * ms, 19 * ms, 15 * ms) == (15 * ms, 15 * ms)
    # in the middle: the part beyond at most the gap, the part before kept
    assert bounded(20 * ms, 10 * ms, 8 * ms) == (18 * ms, 8 * ms)
    # loopback's scheduling halves (30 and 40 µs): as at the client's end, by address or by size
    assert bounded(70_000, 30_000, 20_000, local=True) == (20_000, 20_000)
    assert bounded(45_000, 20_000, 10_000) == (10_000, 10_000)
    assert bounded(70_000, 30_000, 20_000) == (60_000, 20_000)  # (two hosts 70 µs apart: a side is told)
    assert bounded(20 * ms, 10 * ms, -1) == (20 * ms, 10 * ms)


def test_one_host_is_told_by_addresses():
    assert one_host("127.0.0.1", "127.0.0.1") and one_host("127.0.0.2", "127.0.0.1")
    assert one_host("10.0.0.5", "10.0.0.5") and one_host("::1", "::1")
    assert not one_host("10.0.0.5", "10.0.0.6") and not one_host("127.0.0.1", "10.0.0.6")
    assert not one_host("::1", "127.0.0.1")
