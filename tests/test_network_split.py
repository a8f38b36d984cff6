"""Where an exchange's time goes, against a network whose delay is known: a real client
(confluent-kafka) and a real broker (Tansu) in two network namespaces, every frame between them
delayed by a forwarder of the tests' own (tests/tools/impair.py: this kernel has no netem), the
capture taken at the client's end. The injected delay is the truth: the round trip is twice it,
and the broker's time must not move when only the delay does."""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from conftest import ROOT
from spark_kafkawire import read_capture

sys.path.insert(0, str(ROOT / "sample_pcaps"))

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("tcpdump"),
                                reason="needs root (network namespaces) and tcpdump")

PRODUCER = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "client.id": "split-producer", "acks": "all", "linger.ms": 0})
for i in range(int(sys.argv[2])):
    p.produce("split", value=b"%d" % i * int(sys.argv[3]))
    assert p.flush(30) == 0   # one Produce request at a time: each waits for its answer
"""


def _run(tmp_path, delay_ms: float, n: int = 25, loss: float = 0.0, size: int = 200) -> tuple:
    """(exchange rows, connection rows, the capture, the frames the forwarder dropped each way)"""
    from impair import Impaired
    from make_samples import free_port, tansu_binary

    out = tmp_path / f"split-{delay_ms:g}-{loss:g}.pcap"
    with Impaired(delay_ms, loss, seed=5) as net:
        port = free_port()
        url = f"tcp://{net.broker_ip}:{port}"
        broker = subprocess.Popen(net.command("b", [tansu_binary(), "broker", "--listener-url", url,
                                                    "--advertised-listener-url", url, "--silent"]),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dump = subprocess.Popen(net.command("c", ["tcpdump", "-q", "-U", "-s", "0", "-i", net.dev["c"], "-w", str(out),
                                                  f"tcp port {port}"]),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(2)
            r = subprocess.run(net.command("c", [sys.executable, "-c", PRODUCER, f"{net.broker_ip}:{port}", str(n),
                                                 str(size)]),
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr[-2000:]
            time.sleep(1)
        finally:
            dump.send_signal(signal.SIGINT)
            dump.wait(20)
            broker.terminate()
            broker.wait(10)
    return (read_capture(out).to_pylist(), read_capture(out, rows="connections").to_pylist(), out, net.dropped)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("split")
    return {d: _run(tmp, d) for d in (10, 40)}


@pytest.mark.parametrize("delay", [10, 40])
def test_the_round_trip_is_twice_the_injected_delay(runs, delay):
    ex, conns, _, _ = runs[delay]
    produce = [r for r in ex if r["api_name"] == "Produce" and r["status"] == "complete"]
    assert len(produce) >= 20
    for r in ex:
        if r["network_ms"] is not None:
            assert abs(r["network_ms"] - 2 * delay) < 2, r
    assert all(r["network_ms"] is not None for r in produce)
    kafka = [c for c in conns if c["protocol"] == "kafka"]
    assert kafka and all(c["capture_side"] == "client" and abs(c["handshake_rtt_ms"] - 2 * delay) < 2 for c in kafka)
    # at the client's end, latency (first byte to first byte) = the request's crossing + the round
    # trip + the broker's hold
    for r in produce:
        assert r["broker_ms"] >= 0
        parts = r["request_transfer_ms"] + r["network_ms"] + r["broker_ms"]
        assert abs(r["latency_ms"] - parts) < 2 or r["broker_ms"] == 0, r


@pytest.mark.parametrize("delay", [10, 40])
def test_connections_older_than_the_capture_keep_their_network_time(runs, delay, tmp_path):
    """The same run cut after its fifth Produce (every connection opened before the capture): the
    round trip comes from the connection's own data-to-ACK round trips (network_basis 'ack'), within
    3 ms of the handshake's figure of the whole capture and of twice the injected delay; the capture
    point is still told to be at the client's end; and broker_ms still adds up."""
    import damage

    ex, conns, path, _ = runs[delay]
    shake = {c["client_port"]: c["handshake_rtt_ms"] for c in conns if c["protocol"] == "kafka"}
    packets, linktype = damage.read(path)
    # cut just before the sixth Produce request (packet numbers count from 1): a third of the packets
    # would not do, where a busy machine's client tried several times to connect first
    sent = sorted(r["request_packet"] for r in ex if r["api_name"] == "Produce" and r["request_packet"])
    assert len(sent) >= 20, (len(packets), sent)
    cut = damage.write(tmp_path / "cut.pcap", packets[sent[5] - 1:], linktype)
    late = read_capture(cut).to_pylist()
    produce = [r for r in late if r["api_name"] == "Produce" and r["status"] == "complete"]
    assert len(produce) >= len(sent) - 6, (len(packets), sent, [(r["api_name"], r["status"]) for r in late])
    timed = [r for r in produce if r["network_ms"] is not None]
    assert len(timed) >= 0.75 * len(produce), (len(timed), len(produce))  # (3 round trips each way first)
    for r in timed:
        assert r["network_basis"] == "ack", r
        assert abs(r["network_ms"] - shake[r["client_port"]]) < 3 and abs(r["network_ms"] - 2 * delay) < 3, r
        if not r["retransmissions"]:
            parts = r["request_transfer_ms"] + r["network_ms"] + r["broker_ms"]
            assert abs(r["latency_ms"] - parts) < 3 or r["broker_ms"] == 0, r
    assert all(r["network_basis"] == "handshake" for r in ex if r["network_ms"] is not None)
    old = [c for c in read_capture(cut, rows="connections").to_pylist() if c["protocol"] == "kafka"]
    assert old and all(c["handshake_rtt_ms"] is None and c["capture_side"] == "client" for c in old), old


def test_the_broker_time_does_not_move_with_the_delay(runs):
    """Four times the delay: the round trip grows by 60 ms, the broker's time stays where it was."""
    med = {}
    for delay, (ex, _, _, _) in runs.items():
        produce = [r for r in ex if r["api_name"] == "Produce" and r["status"] == "complete"]
        med[delay] = (statistics.median(r["network_ms"] for r in produce),
                      statistics.median(r["broker_ms"] for r in produce),
                      statistics.median(r["latency_ms"] for r in produce))
    assert abs((med[40][0] - med[10][0]) - 60) < 2, med
    assert abs(med[40][2] - med[10][2] - 60) < 5, med  # latency grew by the round trip ...
    assert abs(med[40][1] - med[10][1]) < 3, med  # ... and not the broker's time


@pytest.mark.spark
def test_the_network_audit_splits_each_apis_latency(spark, runs, tmp_path):
    """The network audit over both captures: each listener's round trip is twice its delay, Produce's
    network p50 too, its broker p50 the same at both delays; a broker bound judges it."""
    from test_audits import rows_of

    from spark_kafkawire.audits import AUDITS, Policy, policies

    rows = rows_of(spark, tmp_path, [runs[d][2] for d in runs])
    got = {k: [r.asDict() for r in df.collect()] for k, df in AUDITS["network"](rows, Policy(min_latency_n=10)).items()}
    listeners = {}
    for delay, (ex, _, _, _) in runs.items():
        produce = next(r for r in ex if r["api_name"] == "Produce")
        listeners[delay] = f"{produce['broker_ip']}:{produce['broker_port']}"
    by_listener = {r["listener"]: r for r in got["network_by_listener"]}
    split = {r["listener"]: r for r in got["latency_split"] if r["api_name"] == "Produce"}
    for delay, where in listeners.items():
        assert abs(by_listener[where]["rtt_p50_ms"] - 2 * delay) < 2 and by_listener[where]["capture_sides"] == "client"
        assert abs(split[where]["network_p50_ms"] - 2 * delay) < 2 and split[where]["n"] >= 20
    assert abs(split[listeners[40]]["broker_p50_ms"] - split[listeners[10]]["broker_p50_ms"]) < 3
    results = {"network": got}
    assert [v.ok for v in policies(results, Policy(max_broker_p99_ms=0.001))] == [False]
    assert [v.ok for v in policies(results, Policy(max_broker_p99_ms=10_000))] == [True]
    assert all(r["retransmission_rate"] == 0 for r in got["network_by_listener"])  # nothing dropped here
    assert [v.ok for v in policies(results, Policy(max_retransmission_rate=0.0))] == [True]


@pytest.fixture(scope="module")
def lossy(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("lossy"), 5, n=40, loss=0.05, size=20_000)


def test_frames_the_network_dropped_are_segments_sent_again(lossy):
    """5% of the frames with payload dropped each way, behind the capture point for what the client
    sends, before it for what the broker sends: every frame the client lost it sent again (so at
    least as many segments sent again or out of order), each as tshark's analysis marks it; the
    broker's losses are holes the capture saw filled later, marked likewise; and each exchange row
    counts the segments of its own request and response sent again."""
    from test_tcp_health import _copies_and_fillers, _ours_resent, _tshark_resent

    ex, conns, path, dropped = lossy
    assert dropped is not None and dropped[0] >= 5, dropped
    kafka = [c for c in conns if c["protocol"] == "kafka"]
    # (a copy sent within a round trip of the newest segment, as fast recovery does, is out of order
    # to tshark's analysis: the two kinds together hold every frame dropped)
    assert sum(c["client_retransmitted_segments"] + c["client_out_of_order"] for c in kafka) >= dropped[0]
    # tshark marks the same segments; it calls a copy that came after later data out of order, where
    # every copy the capture shows twice is sent again here (dpkt's count of the copies)
    ours, theirs_by, truth = _ours_resent(path), _tshark_resent(path), _copies_and_fillers(path)
    assert {k: v[0] + v[2] for k, v in ours.items()} == {k: v[0] + v[2] for k, v in theirs_by.items()}
    assert all(ours[k][0] >= truth[k][0] for k in truth)
    assert all(r["status"] == "complete" for r in ex if r["api_name"] == "Produce")
    # one request in flight at a time, captured at the client: each segment sent again carried one
    # exchange's bytes and came before that exchange's answer was whole, so the exchange rows hold
    # every one the connection rows count
    theirs = sum(n for n, _b, _o in ours.values())
    assert theirs >= 5 and sum(r["retransmissions"] or 0 for r in ex) == theirs
    # segments lost on the path against the forwarder's own drop log: the client's drops (beyond
    # the capture point, at the client's end) are copies sent again, each counted; the broker's
    # (before it) skips in the broker's IPv4 numbering (a one-segment response lost shows no hole)
    lost = [sum(c[f"{side}_lost_segments"] for c in kafka) for side in ("client", "broker")]
    assert 0.8 * dropped[0] <= lost[0] <= 1.1 * dropped[0], (lost, dropped)
    assert 0.8 * dropped[1] <= lost[1] <= 1.1 * dropped[1], (lost, dropped)
    # an exchange whose request was sent again is timed from the last copy (test_the_broker_time_
    # holds_no_loss_at_either_end checks it against the broker's own time); one left untimed says why
    for r in ex:
        if r["status"] == "complete" and r["network_ms"] is not None and r["broker_ms"] is None:
            assert "broker_ms not timed" in r["detail"], r
    assert sum(1 for r in ex if r["api_name"] == "Produce" and r["retransmissions"]) >= 3
    assert sum(1 for r in ex if r["retransmissions"] and r["broker_ms"] is not None) >= 3
    assert all(r["retransmissions"] is not None for r in ex if r["status"] == "complete")  # plaintext: known


CONSUMER = """
import sys, time
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "split-reader", "client.id": "split-consumer",
              "enable.auto.commit": False, "fetch.max.bytes": 60000, "message.max.bytes": 60000,
              "max.partition.fetch.bytes": 60000})
c.assign([TopicPartition("split", 0, 0)])
got, quiet = 0, time.monotonic() + 8
while got < int(sys.argv[2]) and time.monotonic() < quiet:
    m = c.poll(1)
    if m is not None and not m.error():
        got, quiet = got + 1, time.monotonic() + 8
c.close()
print(got)
"""


@contextmanager
def tansu_at_both_ends(net, out: dict):
    """Tansu in the broker's namespace of ``net`` (impair.Impaired), its traffic captured at the
    client's end and at the broker's into ``out['c']`` and ``out['b']``: yields its address; on the
    way out (a second for the last frames first) the captures end and the broker stops."""
    from make_samples import free_port, tansu_binary

    port = free_port()
    url = f"tcp://{net.broker_ip}:{port}"
    broker = subprocess.Popen(net.command("b", [tansu_binary(), "broker", "--listener-url", url,
                                                "--advertised-listener-url", url, "--silent"]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dumps = [subprocess.Popen(net.command(side, ["tcpdump", "-q", "-U", "-s", "0", "-i", net.dev[side], "-w",
                                                 str(out[side]), f"tcp port {port}"]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for side in "cb"]
    try:
        time.sleep(2)
        yield f"{net.broker_ip}:{port}"
        time.sleep(1)
    finally:
        for dump in dumps:
            dump.send_signal(signal.SIGINT)
            dump.wait(20)
        broker.terminate()
        broker.wait(10)


def _both_ends(tmp_path, loss: float, n: int, seed: int) -> tuple:
    """A producer's n Produce requests of 20 kB and a consumer reading them back, over the forwarder
    dropping ``loss`` of the frames with payload each way, captured at the client's end and at the
    broker's: (client end's capture, broker end's, frames dropped (client's, broker's), consumed)."""
    from impair import Impaired

    out = {side: tmp_path / f"{side}-{loss:g}.pcap" for side in "cb"}
    with Impaired(5, loss, seed=seed) as net:
        with tansu_at_both_ends(net, out) as where:
            r = subprocess.run(net.command("c", [sys.executable, "-c", PRODUCER, where, str(n), "20000"]),
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr[-2000:]
            r = subprocess.run(net.command("c", [sys.executable, "-c", CONSUMER, where, str(n)]),
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr[-2000:]
    return out["c"], out["b"], net.dropped, int(r.stdout.split()[-1])


@pytest.fixture(scope="module", params=[0.01, 0.05], ids=["1%", "5%"])
def both_ends(request, tmp_path_factory):
    return _both_ends(tmp_path_factory.mktemp("ends"), request.param, 150 if request.param < 0.05 else 50, seed=7)


def test_the_broker_time_holds_no_loss_at_either_end(both_ends):
    """1% and 5% of the frames with payload dropped each way, the same traffic captured at the
    client's end and at the broker's. The broker end's own time is the truth (its ``broker_ms``: the
    request whole to the response's first byte, both at the broker): the client end's ``broker_ms``
    is within 5 ms of it on every exchange where it is set, and at least 85% keep one (a loss it
    cannot time leaves it null, and detail says why). Lost segments at each end, per direction, are
    80% to 110% of the forwarder's drop log: beyond a capture point they are copies seen twice,
    before it skips in the sender's IPv4 numbering (a response lost whole shows no other sign)."""
    client_end, broker_end, dropped, consumed = both_ends
    assert dropped is not None and min(dropped) >= 1 and consumed >= 1, (dropped, consumed)
    rows = {end: {(r["client_port"], r["correlation_id"]): r for r in read_capture(path).to_pylist()}
            for end, path in (("client", client_end), ("broker", broker_end))}
    for path, side in ((client_end, "client"), (broker_end, "broker")):  # (where the handshake tells it)
        assert {r["capture_side"] for r in read_capture(path, rows="connections").to_pylist()
                if r["handshake_rtt_ms"] is not None} == {side}
    pairs = [(c, rows["broker"][k]) for k, c in rows["client"].items()
             if c["status"] == "complete" and k in rows["broker"] and rows["broker"][k]["status"] == "complete"]
    assert len(pairs) >= 40 and {c["api_name"] for c, _b in pairs} >= {"Produce", "Fetch"}
    timed = [(c, b) for c, b in pairs if c["broker_ms"] is not None]
    assert len(timed) >= 0.85 * len(pairs), (len(timed), len(pairs))
    for c, b in timed:
        assert b["broker_ms"] is not None and abs(c["broker_ms"] - b["broker_ms"]) < 5, (c, b)
    for c, _b in pairs:
        if c["broker_ms"] is None:
            assert c["network_ms"] is None or "broker_ms not timed" in c["detail"], c
    # (every exchange's bytes sent again, somewhere: a loss the client end timed around)
    assert sum(1 for c, _b in timed if c["retransmissions"]) >= 1
    for path in (client_end, broker_end):
        kafka = [c for c in read_capture(path, rows="connections").to_pylist() if c["protocol"] == "kafka"]
        for i, side in enumerate(("client", "broker")):
            lost = sum(c[f"{side}_lost_segments"] for c in kafka)
            assert 0.8 * dropped[i] <= lost <= 1.1 * dropped[i], (path.name, side, lost, dropped)
        for r in rows["client" if path == client_end else "broker"].values():
            for col in ("latency_ms", "request_transfer_ms", "response_transfer_ms", "network_ms", "broker_ms"):
                assert r[col] is None or r[col] >= 0, r


@pytest.mark.spark
def test_the_network_audit_counts_what_tshark_marks(spark, lossy, tmp_path):
    """The network audit over the lossy run and a consumer's real zero windows (tests/insights/
    slow.pcap): per client, segments sent again, out of order and zero windows equal tshark's
    marks; per minute, the exchanges' segments sent again add up to tshark's retransmissions; both
    plots drawn."""
    from test_audits import rows_of
    from test_tcp_health import SLOW, _ours_resent, _tshark_resent, _tshark_zero_windows

    from spark_kafkawire.audits import AUDITS, Policy
    from spark_kafkawire.audits.network import plots

    path = lossy[2]
    rows = rows_of(spark, tmp_path, [path, SLOW])
    # (min_latency_n 5: exchanges whose bytes were sent again have no broker time, a third of these)
    got = {k: [r.asDict() for r in df.collect()] for k, df in AUDITS["network"](rows, Policy(min_latency_n=5)).items()}
    resent, theirs = _ours_resent(path), _tshark_resent(path)
    assert {k: v[0] + v[2] for k, v in resent.items()} == {k: v[0] + v[2] for k, v in theirs.items()}
    zeros = _tshark_zero_windows(SLOW)
    clients = got["network_by_client"]
    lossy_client = next(r for r in clients if r["client_id"] == "split-producer")
    port = lossy_client["listener"].rsplit(":", 1)[1]
    sent = [v for k, v in resent.items() if str(k[3]) == port]  # the client's segments
    assert lossy_client["client_retransmitted"] == sum(v[0] for v in sent) > 0
    assert lossy_client["client_out_of_order"] == sum(v[2] for v in sent)
    slow = next(r for r in clients if r["client_id"] == "slow-consumer")
    assert slow["client_zero_windows"] == sum(n for n, _ms in zeros.values()) >= 2
    assert abs(slow["client_zero_window_ms"] - sum(ms for _n, ms in zeros.values())) < 0.01
    assert slow["broker_zero_windows"] == 0 and slow["client_data_rtt_p50_ms"] is not None
    # the loss rate: the forwarder's own count of frames dropped, as a share of the segments with payload
    by_listener = {r["listener"]: r for r in got["network_by_listener"]}
    conns = [c for c in read_capture(path, rows="connections").to_pylist() if c["protocol"] == "kafka"]
    segments = sum(c["client_data_segments"] + c["broker_data_segments"] for c in conns)
    rate = by_listener[lossy_client["listener"]]["loss_rate"]
    assert 0.8 * sum(lossy[3]) / segments <= rate <= 1.1 * sum(lossy[3]) / segments, (rate, lossy[3], segments)
    minutes = [r for r in got["retransmissions_by_minute"] if r["listener"].endswith(":" + port)]
    assert sum(r["retransmissions"] for r in minutes) == sum(v[0] for v in resent.values())
    drawn = plots(got, 10)
    assert len(drawn) == 2 and "sent again, per minute" in drawn[1]
