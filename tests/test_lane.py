"""The fast lane (spark_kafkawire/wire/lane.py, _lane.c) changes the time a read takes, never its rows.

The reference is the same read with the lane turned off (KAFKAWIRE_PURE_PYTHON=1): the Python
stages, whose own rows the other tests check against tshark, kio and the clients. Every capture is
read both ways and must give the same batches, row for row and in the same order, in every row
shape, with the options and filters that change what the stages do (ports, batch size, a
connection cap that evicts, shares, time and api filters). Each case also checks that the lane took
packets (most of them, where the capture is clean), so that no comparison holds only because the
lane stood aside.
"""

import os
import gzip
import struct
from pathlib import Path

import dpkt
import pytest

import damage
import pcapgen
from conftest import FINDINGS, PUBLIC, SAMPLES, shared_files
from spark_kafkawire.wire import lane as lane_module
from spark_kafkawire.wire.capture import CaptureReader
from spark_kafkawire.decode.predicate import Predicate
from spark_kafkawire.reader import iter_batches
from spark_kafkawire.rows.table import COLUMNS, ROW_SHAPES

SAMPLE_FILES = sorted(p for p in SAMPLES.iterdir() if p.suffix in (".pcap", ".pcapng"))
PUBLIC_FILES = shared_files(PUBLIC, (".pcap", ".pcapng", ".gz"))


def _opts(shape: str, **more) -> dict:
    return {"rows": shape, **({"includeRecords": "true"} if shape == "records" else {}), **more}


def lanes_made(monkeypatch) -> list:
    """The lanes the reads that follow make (FastLane: the packets each read)."""
    made = []
    real_make = lane_module.make

    def recording(*a, **k):
        fast = real_make(*a, **k)
        if fast is not None:
            made.append(fast)
        return fast

    monkeypatch.setattr(lane_module, "make", recording)
    return made


def both_ways(monkeypatch, path: Path, shape: str = "exchanges", predicate=None, share=None, **more) -> int:
    """Read ``path`` with the lane and without it; assert the same batches; return the packets the
    lane took."""
    made = lanes_made(monkeypatch)
    monkeypatch.delenv("KAFKAWIRE_PURE_PYTHON", raising=False)
    fast = list(iter_batches(str(path), _opts(shape, **more), predicate, share))
    monkeypatch.setenv("KAFKAWIRE_PURE_PYTHON", "1")
    pure = list(iter_batches(str(path), _opts(shape, **more), predicate, share))
    monkeypatch.delenv("KAFKAWIRE_PURE_PYTHON")
    assert [b.num_rows for b in fast] == [b.num_rows for b in pure], f"{path.name} rows={shape}: batches differ"
    for f, p in zip(fast, pure):
        if not f.equals(p):
            fr, pr = f.to_pylist(), p.to_pylist()
            diff = next(i for i, (a, b) in enumerate(zip(fr, pr)) if a != b)
            raise AssertionError(f"{path.name} rows={shape} row {diff}:\nlane {fr[diff]}\npure {pr[diff]}")
    return sum(m.taken for m in made)


def packets(path: Path) -> int:
    return sum(1 for _ in CaptureReader(str(path)))


def test_the_lane_is_built():
    """make setup compiles it (a C compiler is on every machine the project installs on): a broken
    build would otherwise only make everything slower."""
    assert lane_module.available()


@pytest.mark.parametrize("shape", ROW_SHAPES)
@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_captures_read_the_same(monkeypatch, path, shape):
    taken = both_ways(monkeypatch, path, shape)
    if "sasl" not in path.name:  # (the SASL sample is a few small packets, most with a flag)
        assert taken > packets(path) * 0.3, f"{path.name}: the lane took {taken} packets"


@pytest.mark.parametrize("path", PUBLIC_FILES, ids=lambda p: p.name)
def test_public_captures_read_the_same(monkeypatch, path):
    for shape in ("exchanges", "messages", "connections"):
        both_ways(monkeypatch, path, shape)


@pytest.mark.parametrize("path", sorted(FINDINGS.glob("*.pcap*")), ids=lambda p: p.name)
def test_hostile_captures_read_the_same(monkeypatch, path):
    for shape in ("exchanges", "messages", "connections"):
        both_ways(monkeypatch, path, shape)


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> Path:
    return damage.interleaved(SAMPLES, tmp_path_factory.mktemp("lane") / "large.pcap")


@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_damaged_interleaved_capture_reads_the_same(monkeypatch, large, shape):
    taken = both_ways(monkeypatch, large, shape)
    assert taken > packets(large) * 0.5


def frames_both_ways(monkeypatch, path: Path, **more) -> tuple[list, int]:
    """Every frame handed to the decoder (with its connection and direction, every field) and each
    framer's accounting at its connection's end, read with the lane and without; the same both
    ways. Returns them and the packets the lane read."""
    from spark_kafkawire.decode import exchanges

    seen: list = []
    made = lanes_made(monkeypatch)
    counts = declared_slots("frames")["Accounting"]  # every count of a framer's accounting
    real_opened, real_closed = exchanges.Decoder.opened, exchanges.Decoder.closed

    def opened(self, conn):
        framers = real_opened(self, conn)
        for d, fr in enumerate(framers):  # every frame as the decoder gets it, whoever takes it there
            def on_frame(f, d=d, inner=fr.on_frame):
                seen.append((conn.a, conn.b, d, f.fields()))
                return inner(f)
            fr.on_frame = on_frame
        return framers

    def closed(self, conn):
        if conn.state is not None:
            seen.append((conn.a, conn.b, [tuple(getattr(f.acct, n) for n in counts) for f in conn.state.framers]))
        return real_closed(self, conn)

    monkeypatch.setattr(exchanges.Decoder, "opened", opened)
    monkeypatch.setattr(exchanges.Decoder, "closed", closed)
    runs = []
    for pure in (False, True):
        if pure:
            monkeypatch.setenv("KAFKAWIRE_PURE_PYTHON", "1")
        else:
            monkeypatch.delenv("KAFKAWIRE_PURE_PYTHON", raising=False)
        seen.clear()
        for _ in iter_batches(str(path), _opts("exchanges", **more)):
            pass
        runs.append(list(seen))
    monkeypatch.delenv("KAFKAWIRE_PURE_PYTHON")
    fast, pure = runs
    assert len(fast) == len(pure), f"{path.name}: {len(fast)} frames and ends with the lane, {len(pure)} without"
    for i, (a, b) in enumerate(zip(fast, pure)):
        assert a == b, f"{path.name}: item {i} differs:\nlane {a}\npure {b}"
    return fast, sum(m.taken for m in made)


@pytest.mark.parametrize("path", SAMPLE_FILES + PUBLIC_FILES, ids=lambda p: p.name)
def test_the_lane_gives_the_same_frames(monkeypatch, path):
    """Each frame has the time, packet number, stream offset, size and bytes it has without the
    lane, and the framers' accounting ends the same."""
    seen, _ = frames_both_ways(monkeypatch, path)
    assert any(len(x) == 4 for x in seen) or "sasl" in path.name or "tls" in path.name


def test_the_lane_gives_the_same_frames_of_a_damaged_capture(monkeypatch, large):
    """Holes, reordering and duplicates in between, and the frames are still the same; the lane
    read most packets."""
    seen, taken = frames_both_ways(monkeypatch, large)
    frames = sum(len(x) == 4 for x in seen)
    assert frames > 1000
    assert taken > packets(large) * 0.5, taken


@pytest.mark.parametrize("more", [
    {"batchSize": "7"},  # batches due in the middle of the lane's run
    {"ports": "9092"},  # the other brokers' packets passed over
    {"ports": "1"},  # every packet passed over
    {"maxFrameBytes": "65536"},  # the largest frames lose their framing
], ids=lambda m: ",".join(f"{k}={v}" for k, v in m.items()))
def test_options_that_change_the_stages_read_the_same(monkeypatch, large, more):
    for shape in ("exchanges", "connections"):
        both_ways(monkeypatch, large, shape, **more)


def test_shares_and_filters_read_the_same(monkeypatch, large):
    shape_cols = [n for n, _ in COLUMNS["exchanges"]]
    times = [r["request_time"] for b in iter_batches(str(large), {"rows": "exchanges"}) for r in b.to_pylist()
             if r["request_time"] is not None]
    middle = sorted(times)[len(times) // 2]
    whole = both_ways(monkeypatch, large, "exchanges")
    for filters in ([("api_key", "in", [0, 1])], [("request_time", "<", middle)]):
        pred = Predicate.parse(filters).for_shape(shape_cols)
        # past a time bound the lane goes on, leaving the reader every 512th packet to check on
        assert both_ways(monkeypatch, large, "exchanges", pred) > whole * 0.9
    for k in range(3):
        both_ways(monkeypatch, large, "exchanges", share=(k, 3))
        both_ways(monkeypatch, large, "messages", share=(k, 3))


# -- link and network layers the lane reads itself -------------------------------------------------

def _rewrite(tmp_path: Path, name: str, change, linktype: int) -> Path:
    pkts, _lt = damage.read(SAMPLES / "veth-confluent-mtu.pcap")
    return damage.write(tmp_path / name, [(ts, change(buf)) for ts, buf in pkts], linktype)


def _vlan(buf: bytes) -> bytes:
    return buf[:12] + b"\x88\xa8\x00\x0a" + b"\x81\x00\x00\x64" + buf[12:]  # QinQ: two tags


def _sll(buf: bytes) -> bytes:
    return struct.pack("!HHH8sH", 0, 1, 6, buf[6:12] + b"\x00\x00", struct.unpack_from("!H", buf, 12)[0]) + buf[14:]


def _ipv6(buf: bytes) -> bytes:
    eth = dpkt.ethernet.Ethernet(buf)
    ip = eth.data
    if not isinstance(ip, dpkt.ip.IP):
        return buf
    six = dpkt.ip6.IP6(src=b"\xfd" + b"\x00" * 11 + ip.src, dst=b"\xfd" + b"\x00" * 11 + ip.dst, nxt=ip.p, hlim=64,
                       data=ip.data, plen=len(bytes(ip.data)))
    six.extension_hdrs = {}
    return bytes(dpkt.ethernet.Ethernet(src=eth.src, dst=eth.dst, type=dpkt.ethernet.ETH_TYPE_IP6, data=six))


@pytest.mark.parametrize("name,change,linktype", [
    ("vlan.pcap", _vlan, dpkt.pcap.DLT_EN10MB),
    ("sll.pcap", _sll, 113),
    ("ipv6.pcap", _ipv6, dpkt.pcap.DLT_EN10MB),
])
def test_other_layers_read_the_same(monkeypatch, tmp_path, name, change, linktype):
    path = _rewrite(tmp_path, name, change, linktype)
    for shape in ("exchanges", "connections"):
        taken = both_ways(monkeypatch, path, shape)
        assert taken > packets(path) * 0.5


def test_big_endian_nanosecond_and_gzip_files_read_the_same(monkeypatch, tmp_path):
    pkts, _lt = damage.read(SAMPLES / "veth-confluent-mtu.pcap")
    be = tmp_path / "be.pcap"
    pcapgen.write_pcap_be(be, [buf for _ts, buf in pkts], nano=True)
    gz = tmp_path / "mtu.pcap.gz"
    gz.write_bytes(gzip.compress((SAMPLES / "veth-confluent-mtu.pcap").read_bytes()))
    for path in (be, gz):
        assert both_ways(monkeypatch, path, "exchanges") > len(pkts) * 0.5


def test_packets_the_python_stages_must_read(monkeypatch, tmp_path):
    """IPv4 options with IP length 0 (as with segmentation offload) and IPv6 extension headers are
    read by the Python stages, packets cut by the snaplen reach the reassembler from the lane; the
    packets around them are still the lane's."""
    conv = pcapgen.Conversation().handshake()
    for i in range(30):
        conv.send("c", pcapgen.request(3, 12, i + 1), mss=40)
        conv.send("b", pcapgen.response(i + 1, 3, 12), mss=40)
    raw = conv.fin().packets
    odd = []
    for i, p in enumerate(raw):
        eth = dpkt.ethernet.Ethernet(p)
        if i % 7 == 3 and isinstance(eth.data, dpkt.ip.IP):
            eth.data.opts = b"\x01\x01\x01\x00"  # IPv4 options: a 24-byte header
            eth.data.hl = 6
            eth.data.len = 0
            p = bytes(eth)
        elif i % 7 == 5:
            p = bytearray(p)
            struct.pack_into("!H", p, 16, 0)  # IP total length 0, as with segmentation offload
            p = bytes(p)
        odd.append(p)
    path = tmp_path / "odd.pcap"
    pcapgen.write_pcap(path, odd)
    cut = damage.snaplen(path, tmp_path / "cut.pcap", 80)
    for p in (path, cut):
        for shape in ("exchanges", "messages", "connections"):
            both_ways(monkeypatch, p, shape)
    assert both_ways(monkeypatch, path, "exchanges") > len(odd) * 0.3


def test_packets_without_a_segment_are_passed_over_in_the_lane(monkeypatch, tmp_path):
    """Packets packets.dissect makes no segment of whatever they hold (empty, shorter than the
    Ethernet header, ARP, an unknown ethertype) are counted and passed over by the lane, not handed
    to the Python stages one by one: the rows (packet numbers included) are those of the Python
    stages, with a time filter too, and the lane reads the whole file in one pass."""
    conv = pcapgen.Conversation().handshake()
    for i in range(40):
        conv.send("c", pcapgen.request(3, 12, i + 1))
        conv.send("b", pcapgen.response(i + 1, 3, 12))
    raw = conv.fin().packets
    arp = b"\xff" * 6 + b"\x02" * 6 + b"\x08\x06" + bytes(28)
    other = b"\x01" * 12 + b"\x88\xcc" + bytes(40)  # LLDP
    mixed = []
    for i, p in enumerate(raw):
        mixed += [b"", b"\x00" * 13, arp, other][: i % 5] + [p]
    path = tmp_path / "mixed.pcap"
    pcapgen.write_pcap(path, mixed)
    shape_cols = [n for n, _ in COLUMNS["exchanges"]]
    times = sorted(r["request_time"] for b in iter_batches(str(path), {"rows": "exchanges"}) for r in b.to_pylist())
    for shape in ("exchanges", "messages", "connections"):
        both_ways(monkeypatch, path, shape)
    both_ways(monkeypatch, path, "exchanges", Predicate.parse([("request_time", "<", times[5])]).for_shape(shape_cols))
    plain = tmp_path / "plain.pcap"
    pcapgen.write_pcap(plain, raw)
    import spark_kafkawire.reader as reader_module

    dissected = []
    real_dissect = reader_module.dissect
    monkeypatch.setattr(reader_module, "dissect", lambda pkt: dissected.append(pkt.number) or real_dissect(pkt))
    made = lanes_made(monkeypatch)
    list(iter_batches(str(plain), {"rows": "messages"}))
    alone = len(dissected)
    rows = [r for b in iter_batches(str(path), {"rows": "messages"}) for r in b.to_pylist()]
    # the lane takes as many packets as without the others among them, and the Python stages read
    # as many: none of the others reached them
    assert len(made) == 2 and made[1].taken == made[0].taken >= len(raw) - 1
    assert len(dissected) - alone == alone <= 1
    numbers = sorted(r["packet"] for r in rows)
    assert numbers[-1] <= len(mixed) and numbers[-1] > len(raw)  # the passed-over packets are counted


def test_many_short_connections_read_the_same(monkeypatch, tmp_path):
    """A scan, and short connections: most packets open a connection the lane has never seen; with
    the smallest cap, connections are evicted and ended ones forgotten between the lane's packets."""
    out = []
    for i in range(2500):
        client = (f"10.1.{i // 200}.{i % 200 + 1}", 40000 + i % 20000)
        conv = pcapgen.Conversation(client=client, isn_c=1000 + i)
        if i % 2:
            conv.handshake()
        conv.send("c", pcapgen.request(18, 3, i))
        if i % 3 == 0:
            conv.send("b", pcapgen.response(i, 18, 3))
            conv.send("c", pcapgen.request(3, 12, i + 1000), mss=30)
        if i % 4 == 1:
            conv.fin()
        out.extend(conv.packets)
    path = tmp_path / "scan.pcap"
    pcapgen.write_pcap(path, out)
    for more in ({}, {"maxConnections": "1000"}):
        for shape in ("exchanges", "connections"):
            assert both_ways(monkeypatch, path, shape, **more) > 1000


@pytest.mark.parametrize("claimed,sent", [(50 << 20, 40_000), (2 << 20, 300_000)])
def test_a_frame_in_progress_reserves_in_proportion_to_its_bytes(monkeypatch, tmp_path, claimed, sent):
    """A frame that spans segments is assembled in one buffer that becomes its data. The buffer
    is sized for the whole frame once a sixteenth of it has arrived; before that, a size field
    (up to maxFrameBytes, 100 MiB) must not reserve memory that no captured byte backs: at most
    16 times the bytes held. Seen at the connection's end, with the lane reading the packets."""
    import sys

    head = pcapgen.request(0, 9, 7)[4:30]  # a Produce request header, then the start of its body
    frame = struct.pack("!i", claimed) + head + bytes(sent - 4 - len(head))
    conv = pcapgen.Conversation().handshake()
    conv.send("c", frame, mss=1448)
    path = tmp_path / "claimed.pcap"
    pcapgen.write_pcap(path, conv.packets)
    from spark_kafkawire.decode import exchanges

    held = []
    real_opened = exchanges.Decoder.opened

    def opened(self, conn):  # the frame in progress as the framer hands it on, cut short
        framers = real_opened(self, conn)
        for fr in framers:
            def on_frame(f, fr=fr, inner=fr.on_frame):
                if not f.complete and fr.buf:
                    held.append((len(fr.buf), sys.getsizeof(fr.buf) - sys.getsizeof(bytearray())))
                return inner(f)
            fr.on_frame = on_frame
        return framers

    monkeypatch.setattr(exchanges.Decoder, "opened", opened)
    assert both_ways(monkeypatch, path) > len(conv.packets) // 2  # the lane took the segments
    held.clear()
    rows = [r for b in iter_batches(str(path), {}) for r in b.to_pylist()]
    assert [r["status"] for r in rows] == ["truncated"]  # the frame, cut by the capture's end
    ((n, room),) = held
    assert n == sent
    if sent * 16 < claimed:
        assert room <= 16 * n, (n, room)
    else:
        assert room >= claimed  # one buffer for the whole frame


def declared_slots(module: str) -> dict[str, tuple[str, ...]]:
    """Each class's ``__slots__`` as its source declares them (a compiled class keeps none)."""
    import ast

    tree = ast.parse((Path(__file__).parent.parent / "spark_kafkawire" / "wire" / f"{module}.py").read_text())
    return {node.name: ast.literal_eval(stmt.value) for node in tree.body if isinstance(node, ast.ClassDef)
            for stmt in node.body if isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in stmt.targets)}


class _Feed:
    """A reassembler that only keeps the segments it is handed, a batch at a time as the lane hands
    them (lane.Batch.feed's side of the boundary, read here with struct by the layout lane.py
    states: a row of nine little-endian int64 per packet, its payload and its two addresses in the
    lists). Every fifth batch it stops part way, as when rows become due: the lane must start again
    after the last packet it took. It keeps every third table it is given: the lane must then write
    the next batch elsewhere (the kept one still holds what it held)."""

    def __init__(self):
        self.segments = []
        self.batches = 0
        self.kept = []

    def feed(self, table, n, payloads, addrs):
        from spark_kafkawire.wire.packets import Segment

        self.batches += 1
        take = max(1, n // 2) if self.batches % 5 == 0 else n
        for i in range(take):
            number, ts, sport, dport, seq, ack, flags, wire_len, win, ip_id, dsack = \
                struct.unpack_from("<11q", table, 88 * i)
            self.segments.append(Segment(number, ts, addrs[2 * i], sport, addrs[2 * i + 1], dport, seq, ack, flags,
                                         payloads[i], wire_len, win, ip_id, dsack))
        if self.batches % 3 == 0:
            self.kept.append((table, bytes(table)))
        return take if take == n else -take


def _fast_lane(path: Path, feed):
    """A read's lane (as reader.py makes it) whose batches go to ``feed`` instead of lane.Batch.feed."""
    from spark_kafkawire.compiled import lane_module as ext
    from spark_kafkawire.reader import build_stages
    from spark_kafkawire.rows.shapes import row_builder

    rows = row_builder("exchanges", str(path))
    _decoder, reasm = build_stages(rows)
    fast = lane_module.FastLane(reasm, rows, 1 << 16, None, lane_module.PastBound())
    fast.lane = ext.Lane(feed)
    return fast


def lane_segments(path: Path) -> tuple[list, int]:
    """The segments a read hands the reassembler with the lane (those it reads, and those
    packets.dissect makes of the packets it leaves to the reader, in capture order), and the packets
    the lane read."""
    from spark_kafkawire.wire.capture import ROWS_DUE
    from spark_kafkawire.wire.packets import dissect

    sink = _Feed()
    fast = _fast_lane(path, sink.feed)
    for pkt in CaptureReader(str(path), lane=fast):
        if pkt is not ROWS_DUE:
            seg = dissect(pkt)
            if seg is not None:
                sink.segments.append(seg)
    for table, was in sink.kept:
        assert table == was, "a table the feed kept was written again"
    return sink.segments, fast.taken


@pytest.mark.parametrize("path", SAMPLE_FILES + PUBLIC_FILES + sorted(FINDINGS.glob("*.pcap*")), ids=lambda p: p.name)
def test_the_lane_feeds_the_segments_packets_decode_makes(path):
    """The lane is capture.py's record walk and packets.dissect in C, nothing after them: every
    segment it feeds the reassembler is the one packets.dissect makes of the same record, field for
    field (number, time, endpoints, sequence numbers, flags, payload, length on the wire, window),
    in the same order."""
    from spark_kafkawire.wire.packets import dissect

    got, taken = lane_segments(path)
    try:
        want = [s for s in (dissect(p) for p in CaptureReader(str(path))) if s is not None]
    except Exception:  # noqa: BLE001 (a file the reader refuses is refused both ways: the read tests say how)
        return
    assert len(got) == len(want), path.name
    for i, (a, b) in enumerate(zip(got, want)):
        assert a == b, f"{path.name}: segment {i}:\nlane {a}\npure {b}"
    if path.parent == SAMPLES and "sasl" not in path.name:
        assert taken > len(want) * 0.5, taken


def test_the_lane_takes_a_feed():
    """The lane's boundary: a callable it hands each batch to, which says how many packets it took."""
    from spark_kafkawire.compiled import lane_module as ext

    assert ext is not None
    with pytest.raises(TypeError, match="feed"):
        ext.Lane(None)
    data = SAMPLES / "mock-kcat.pcap"
    fast = _fast_lane(data, lambda table, n, payloads, addrs: n + 1)  # more than it was given: refused
    with pytest.raises(ValueError, match="handed on"):
        list(CaptureReader(str(data), lane=fast))


def test_without_the_extension_the_python_stages_read_the_same(tmp_path):
    """Built without a C compiler, or with KAFKAWIRE_PURE_PYTHON=1 when the package is imported
    (then the extension is not even loaded), the Python stages read everything: compiled (here the
    lane is left out), or as Python. The rows are the lane's, in every row shape of every sample
    capture."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "if sys.argv[1] == 'without': sys.modules['spark_kafkawire.wire._lane'] = None\n"
        "import spark_kafkawire\n"
        "from spark_kafkawire.wire import frames, lane, tcp\n"
        "assert lane.available() == (sys.argv[1] == 'with')\n"
        "print(hasattr(tcp.HalfStream, '__mypyc_attrs__'), hasattr(frames.Framer, '__mypyc_attrs__'),\n"
        "      sys.modules.get('spark_kafkawire.wire._lane') is not None)\n"
        "for shape in ('exchanges', 'messages', 'connections'):\n"
        "    print(shape, spark_kafkawire.read_capture(sys.argv[2], rows=shape).to_pylist())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KAFKAWIRE_PURE_PYTHON"}
    out = {how: subprocess.run([sys.executable, "-c", script, how, str(SAMPLES)], capture_output=True, text=True,
                               check=True, env={**env, "KAFKAWIRE_PURE_PYTHON": "1"} if how == "pure" else env)
           .stdout.split("\n", 1) for how in ("with", "without", "pure")}
    assert out["with"][0] == "True True True" and out["without"][0] == "True True False"
    assert out["pure"][0] == "False False False"  # no compiled code loaded at all
    assert len(out["with"][1]) > 100_000
    assert out["with"][1] == out["without"][1] == out["pure"][1]
