"""Capture files -> packets: formats, byte orders, resolutions, interfaces, gzip, damage."""

import gzip
import struct

import dpkt
import pytest

from conftest import SAMPLES
from pcapgen import Conversation, pcapng_bytes, request, response, write_pcap, write_pcap_be
from spark_kafkawire import CaptureError, read_capture
from spark_kafkawire.wire.capture import CaptureReader


def _conversation():
    c = Conversation().handshake()
    c.send("c", request(3, 1, 7, "meta-client"))
    c.send("b", response(7, 3, 1))
    return c.fin().packets


@pytest.mark.parametrize("nano", [False, True])
def test_pcap_little_endian_written_by_dpkt(tmp_path, nano):
    path = tmp_path / "a.pcap"
    write_pcap(path, _conversation(), nano=nano, start=1_700_000_000.25, step=0.5)
    pkts = list(CaptureReader(str(path)))
    assert [p.number for p in pkts] == list(range(1, 7))
    assert pkts[0].ts_ns == 1_700_000_000_250_000_000
    assert pkts[1].ts_ns == 1_700_000_000_750_000_000
    assert pkts[0].linktype == 1


@pytest.mark.parametrize("nano", [False, True])
def test_pcap_big_endian(tmp_path, nano):
    path = tmp_path / "be.pcap"
    write_pcap_be(path, _conversation(), nano=nano)
    pkts = list(CaptureReader(str(path)))
    assert len(pkts) == 6
    assert pkts[0].ts_ns == 1_700_000_000 * 10**9 + (7 if nano else 7_000)
    t = read_capture(path)
    assert t.column("status").to_pylist() == ["complete"]
    assert t.column("client_id").to_pylist() == ["meta-client"]


def test_gzip_compressed(tmp_path):
    raw = tmp_path / "a.pcap"
    write_pcap(raw, _conversation())
    gz = tmp_path / "a.pcap.gz"
    gz.write_bytes(gzip.compress(raw.read_bytes()))
    assert read_capture(gz).to_pylist() == [
        dict(r, capture_file=str(gz)) for r in read_capture(raw).to_pylist()
    ]


def test_pcapng_interfaces_keep_their_own_link_type_and_resolution(tmp_path):
    """Interface 0: Ethernet in microseconds; interface 1: raw IP in nanoseconds."""
    c = Conversation().handshake()
    c.send("c", request(18, 3, 1, "ng", flexible=True))
    c.send("b", response(1, 18, 3))
    eth = c.packets
    raw_ip = [bytes(dpkt.ethernet.Ethernet(p).data) for p in eth]
    pkts = [(0, 1_700_000_000_000_000 + i, eth[i]) for i in range(2)]  # SYN, SYN-ACK on iface 0 (us)
    pkts += [(1, 1_700_000_000_000_000_000 + 10**6 * i, raw_ip[i]) for i in range(2, 4)]  # data on iface 1 (ns)
    path = tmp_path / "multi.pcapng"
    path.write_bytes(pcapng_bytes([(1, None), (101, 9)], pkts))
    got = list(CaptureReader(str(path)))
    assert [p.linktype for p in got] == [1, 1, 101, 101]
    assert got[0].ts_ns == 1_700_000_000_000_000_000
    assert got[2].ts_ns == 1_700_000_000_002_000_000
    t = read_capture(path).to_pylist()
    assert len(t) == 1 and t[0]["status"] == "complete" and t[0]["api_name"] == "ApiVersions"
    assert t[0]["latency_ms"] == pytest.approx(1.0)


def test_pcapng_written_by_dpkt(tmp_path):
    path = tmp_path / "d.pcapng"
    with open(path, "wb") as f:
        w = dpkt.pcapng.Writer(f)
        for i, p in enumerate(_conversation()):
            w.writepkt(p, ts=1_700_000_000 + i)
    assert read_capture(path).column("api_name").to_pylist() == ["Metadata"]


def test_not_a_capture_names_the_file(tmp_path):
    bad = tmp_path / "notes.pcap"
    bad.write_text("hello, this is not a capture\n")
    with pytest.raises(CaptureError, match="notes.pcap"):
        read_capture(bad)
    with pytest.raises(CaptureError, match="notes.pcap"):
        list(CaptureReader(str(bad)))


def test_file_cut_inside_a_packet_keeps_what_came_before(tmp_path):
    path = tmp_path / "cut.pcap"
    write_pcap(path, _conversation())
    data = path.read_bytes()
    path.write_bytes(data[:-30])  # the last packet (FIN from the broker) is cut
    r = CaptureReader(str(path))
    pkts = list(r)
    assert len(pkts) == 5
    assert r.damage.packet_number == 6
    assert "ends inside a packet" in r.damage.reason
    t = read_capture(path).to_pylist()
    assert [x["status"] for x in t] == ["complete", "capture_damaged"]
    assert "packet 6" in t[1]["detail"]


def test_corrupt_record_header_stops_with_position(tmp_path):
    path = tmp_path / "corrupt.pcap"
    write_pcap(path, _conversation())
    data = bytearray(path.read_bytes())
    first_len = struct.unpack_from("<I", data, 24 + 8)[0]
    second = 24 + 16 + first_len
    struct.pack_into("<I", data, second + 8, 0x7FFFFFF0)  # absurd captured length
    path.write_bytes(bytes(data))
    r = CaptureReader(str(path))
    assert len(list(r)) == 1
    assert (r.damage.packet_number, r.damage.byte_offset) == (2, second)


@pytest.mark.parametrize("tool,suffix", [("gzip", ".gz"), ("xz", ".xz"), ("zstd", ".zst"), ("bzip2", ".bz2")])
def test_captures_compressed_as_people_compress_them_read_as_the_plain_file(tmp_path, tool, suffix):
    """gzip, xz, zstd and bzip2 (compressed by the tools themselves, as a user does), known by their
    bytes, not their names: the same rows as the plain file; found in a directory by the default
    pathGlobFilter; a stream cut short is damage at that point, not an exception."""
    import shutil
    import subprocess

    from spark_kafkawire import read_capture

    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    src = SAMPLES / "tansu-confluent-codecs.pcap"
    plain = tmp_path / "plain" / src.name
    plain.parent.mkdir()
    shutil.copy(src, plain)
    folder = tmp_path / "packed"
    folder.mkdir()
    packed = folder / (src.name + suffix)
    packed.write_bytes(subprocess.run([tool, "-c", str(plain)], check=True, capture_output=True).stdout)
    want = read_capture(plain).drop(["capture_file"])
    assert read_capture(folder).drop(["capture_file"]).equals(want)  # found by the directory listing
    renamed = tmp_path / "named-anything.pcap"
    shutil.copy(packed, renamed)
    assert read_capture(renamed).drop(["capture_file"]).equals(want)  # known by its bytes
    cut = tmp_path / ("cut.pcap" + suffix)
    cut.write_bytes(packed.read_bytes()[: packed.stat().st_size // 2])
    rows = read_capture(cut).to_pylist()
    assert rows and rows[-1]["status"] == "capture_damaged"
