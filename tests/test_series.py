"""Rotation series read as one capture (wire/series.py, option stitch).

Every sample, public and TLS test capture is cut as tcpdump and editcap rotate captures (``editcap
-c`` at several sizes, ``-i`` by time) and read as a directory: the rows equal the whole capture's
(statuses, pairs and their times, connection facts and counts), each row names its own file, and
its packet numbers, added to the packets of the files before it (counted by dpkt), are the whole
capture's. Files that only share addresses and ports (the same traffic again, later) are never
joined; copies of one capture taken at the same time are never a series.
"""

from __future__ import annotations

import collections
import datetime
import shutil
import subprocess
from pathlib import Path

import dpkt
import pytest

from spark_kafkawire import read_capture
from spark_kafkawire.wire import series

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted(p for p in (ROOT / "sample_pcaps").iterdir() if p.suffix in (".pcap", ".pcapng"))
PUBLIC = sorted(p for p in (ROOT.parent / "shared" / "public-captures").glob("*.pcap*"))
TLS = sorted((ROOT / "tests" / "tls").glob("*.pcap"))
CAPTURES = SAMPLES + PUBLIC + TLS
#: the columns of an exchange row that must not change when its capture is cut (all but the file's own)
EXCHANGE_KEEP = ("client_ip", "client_port", "broker_ip", "broker_port", "community_id", "request_time",
                 "response_time", "latency_ms", "network_ms", "broker_ms", "network_basis", "retransmissions",
                 "api_key", "api_version", "correlation_id", "client_id", "request_size", "response_size", "status",
                 "detail", "request", "response", "client_software_name", "client_software_version", "sasl_mechanism",
                 "sasl_user", "topics", "record_count", "error_code")
CONNECTION_SKIP = ("capture_file", "first_packet")

pytestmark = pytest.mark.skipif(shutil.which("editcap") is None, reason="editcap (Wireshark) not installed")


def _options(capture: Path) -> dict:
    keylog = capture.with_suffix(".keylog")
    return {"tlsKeyLog": str(keylog)} if keylog.exists() else {}


def _cut(capture: Path, folder: Path, how: list[str]) -> list[Path]:
    """The capture cut by editcap into ``folder`` (names as editcap gives them), in order."""
    folder.mkdir(parents=True)
    subprocess.run(["editcap", *how, str(capture), str(folder / f"part{capture.suffix}")], check=True,
                   capture_output=True)
    return sorted(folder.iterdir())


def _packets(path: Path) -> int:
    """Packets in a capture, counted by dpkt."""
    with open(path, "rb") as f:
        head = f.read(4)
        f.seek(0)
        reader = dpkt.pcapng.Reader(f) if head == b"\x0a\x0d\x0d\x0a" else dpkt.pcap.Reader(f)
        return sum(1 for _ in reader)


def _offsets(parts: list[Path]) -> dict[str, int]:
    """Each part's first packet's number in the whole capture, less one."""
    out, n = {}, 0
    for p in parts:
        out[str(p)] = n
        n += _packets(p)
    return out


def _norm(v):
    """A value as both Arrow's and Spark's rows give it: times as microseconds since the epoch."""
    if isinstance(v, datetime.datetime):
        return round((v if v.tzinfo else v.replace(tzinfo=datetime.timezone.utc)).timestamp() * 1e6)
    return repr(v)


def _exchanges(table, offsets: dict[str, int] | None = None) -> collections.Counter:
    """Exchange rows as comparable values; with ``offsets``, packet numbers made the whole capture's
    from each row's file(s)."""
    out = collections.Counter()
    for r in table.to_pylist():
        values = [_norm(r[k]) for k in EXCHANGE_KEEP]
        req, resp = r["request_packet"], r["response_packet"]
        if offsets is not None:
            req = None if req is None else req + offsets[r["capture_file"]]
            resp = None if resp is None else resp + offsets[r["response_file"] or r["capture_file"]]
        else:
            assert r["response_file"] is None
        out[tuple(values) + (req, resp)] += 1
    return out


def _connections(table, offsets: dict[str, int] | None = None) -> collections.Counter:
    out = collections.Counter()
    for r in table.to_pylist():
        first = r["first_packet"] + (offsets[r["capture_file"]] if offsets is not None else 0)
        out[tuple(_norm(v) for k, v in r.items() if k not in CONNECTION_SKIP) + (first,)] += 1
    return out


CUTS = [["-c", "7"], ["-c", "40"], ["-c", "113"]]


def _by_time(capture: Path) -> list[str]:
    """editcap -i with a quarter of the capture's span (tshark's account of its first and last
    packet): four or five files by time, however long the capture."""
    out = subprocess.run(["capinfos", "-a", "-e", "-S", "-M", str(capture)], check=True, capture_output=True,
                         text=True).stdout
    times = [float(line.split(":", 1)[1]) for line in out.splitlines() if "packet time" in line]
    return ["-i", f"{max((times[1] - times[0]) / 4, 1e-6):.6f}"]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_rotated_series_reads_as_the_whole(capture: Path, tmp_path: Path) -> None:
    opts = _options(capture)
    whole = _exchanges(read_capture(str(capture), **opts))
    whole_conns = _connections(read_capture(str(capture), rows="connections", **opts))
    cuts = 0
    for how in CUTS + [_by_time(capture)]:
        folder = tmp_path / "-".join(how)
        parts = _cut(capture, folder, how)
        if len(parts) < 2:
            continue
        cuts += 1
        offsets = _offsets(parts)
        found = series.find_series([str(p) for p in parts])
        timed = [str(p) for p in parts if _packets(p)]  # (an interval without packets is a file alone)
        assert timed in found and all(len(run) == 1 for run in found if run != timed)
        got = read_capture(str(folder), **opts)
        assert set(got.column("capture_file").to_pylist()) <= set(offsets)
        assert _exchanges(got, offsets) == whole, f"{capture.name} cut by editcap {' '.join(how)}"
        assert _connections(read_capture(str(folder), rows="connections", **opts), offsets) == whole_conns, \
            f"{capture.name} cut by editcap {' '.join(how)}"
    assert cuts, f"{capture.name}: no cut made two files"


def test_a_connection_seen_only_as_a_pure_ack_goes_on_in_a_later_file(tmp_path: Path) -> None:
    """A capture begun mid-connection where a connection's one packet in the first file is a pure
    ACK, and its next, 28 s later, are in the fourth: the series reads it as the one connection the
    whole capture has (its pure ACK's sequence number continues it), not as two."""
    import damage

    packets, linktype = damage.read(ROOT / "sample_pcaps" / "tansu-admin-txn.pcap")
    late = damage.write(tmp_path / "late.pcap", packets[len(packets) // 3:], linktype)
    parts = _cut(late, tmp_path / "parts", ["-c", str(len(packets) // 5)])
    assert len(parts) >= 3
    whole = read_capture(str(late), rows="connections").to_pylist()
    got = read_capture(str(tmp_path / "parts"), rows="connections").to_pylist()
    key = [(r["client_port"], r["broker_port"], r["protocol"], r["start_captured"], r["end_captured"]) for r in whole]
    assert sorted(key) == sorted((r["client_port"], r["broker_port"], r["protocol"], r["start_captured"],
                                  r["end_captured"]) for r in got)


def test_read_apart_without_stitch(tmp_path: Path) -> None:
    """stitch=false reads each file by itself: exchanges cut by the rotation lose a half."""
    capture = ROOT / "sample_pcaps" / "tansu-confluent-codecs.pcap"
    _cut(capture, tmp_path / "parts", ["-c", "7"])
    stitched = collections.Counter(read_capture(str(tmp_path / "parts")).column("status").to_pylist())
    apart = collections.Counter(read_capture(str(tmp_path / "parts"), stitch=False).column("status").to_pylist())
    whole = collections.Counter(read_capture(str(capture)).column("status").to_pylist())
    assert stitched == whole
    assert apart["request_missing"] > 0 and apart["no_response"] > 0 and apart != whole


def test_same_addresses_later_are_not_joined(tmp_path: Path) -> None:
    """The same traffic again an hour later, named as the next file of a series: the same
    addresses, ports and sequence numbers, but its connections begin anew (their SYNs) and the
    connections still open at the first file's end do not continue: the rows are those of the two
    files read apart."""
    capture = ROOT / "sample_pcaps" / "tansu-confluent-codecs.pcap"
    folder = tmp_path / "series"
    folder.mkdir()
    shutil.copy(capture, folder / "cap.pcap0")
    subprocess.run(["editcap", "-t", "3600", str(capture), str(folder / "cap.pcap1")], check=True)
    parts = [str(folder / "cap.pcap0"), str(folder / "cap.pcap1")]
    assert series.find_series(parts) == [parts]  # a series by name and time...
    both = read_capture(str(folder))
    apart = read_capture(str(folder), stitch=False)
    keep = ("client_port", "correlation_id", "api_key", "status", "capture_file")
    assert collections.Counter(tuple(r[k] for k in keep) for r in both.to_pylist()) == \
        collections.Counter(tuple(r[k] for k in keep) for r in apart.to_pylist())  # ...whose connections do not go on
    conns = read_capture(str(folder), rows="connections")
    assert conns.num_rows == 2 * read_capture(str(capture), rows="connections").num_rows


def test_copies_at_the_same_time_are_no_series(tmp_path: Path) -> None:
    """Two capture points of the same traffic (the same times), named alike: two captures."""
    capture = ROOT / "sample_pcaps" / "tansu-confluent-codecs.pcap"
    for i in (1, 2):
        shutil.copy(capture, tmp_path / f"point{i}.pcap")
    files = [str(tmp_path / f"point{i}.pcap") for i in (1, 2)]
    assert series.find_series(files) == [[files[0]], [files[1]]]
    whole = collections.Counter(read_capture(str(capture)).column("status").to_pylist())
    got = collections.Counter(read_capture(str(tmp_path)).column("status").to_pylist())
    assert got == whole + whole
    # named as one series all the same (the reader checks the times again as it goes): the same
    assert collections.Counter(read_capture(files).column("status").to_pylist()) == whole + whole


def test_last_times_match_tshark(tmp_path: Path) -> None:
    """The last packet time read from a file's end (pcap and pcapng) is tshark's."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed")
    for capture in (ROOT / "sample_pcaps" / "tansu-confluent-codecs.pcap",
                    ROOT / "sample_pcaps" / "mock-confluent-group.pcapng",
                    ROOT / "sample_pcaps" / "mock-kafka-python-nsec.pcap"):
        out = subprocess.run(["tshark", "-r", str(capture), "-T", "fields", "-e", "frame.time_epoch"],
                             check=True, capture_output=True, text=True).stdout.split()
        first, last = out[0], out[-1]
        ns = lambda t: int(t.split(".")[0]) * 10**9 + int(t.split(".")[1].ljust(9, "0"))  # noqa: E731
        assert series.first_time(str(capture)) == ns(first)
        assert series.last_time(str(capture)) == ns(last)


def _cut_sample(tmp_path: Path, name: str = "mock-confluent-group.pcapng") -> tuple[Path, Path, dict[str, int]]:
    capture = ROOT / "sample_pcaps" / name
    parts = _cut(capture, tmp_path / "parts", ["-c", "20"])
    return capture, tmp_path / "parts", _offsets(parts)


def test_a_series_split_over_spark_tasks_reads_as_the_whole(spark, tmp_path: Path) -> None:
    """Spark with a small maxPartitionBytes: the series is planned as one unit in shares, read by
    several tasks (each follows every connection of every file and makes a share of the rows): the
    rows are the whole capture's, connections and facts included."""
    from spark_kafkawire.listing import plan
    from spark_kafkawire.options import Options

    capture, folder, offsets = _cut_sample(tmp_path)
    opts = {"maxPartitionBytes": "8192", "minPartitions": "3"}
    parts = plan(sorted(offsets), Options.parse(opts))
    assert len(parts) == 3 and all(isinstance(u[0], tuple) and len(u[0]) == len(offsets) for p in parts for u in p)

    def load(**extra):
        df = spark.read.format("kafkawire").options(**opts, **extra).load(str(folder))
        assert df.rdd.getNumPartitions() == 3
        return df.toArrow()

    assert _exchanges(load(), offsets) == _exchanges(read_capture(str(capture)))
    assert _connections(load(rows="connections"), offsets) == \
        _connections(read_capture(str(capture), rows="connections"))


def test_the_stream_reads_a_series_in_one_trigger_as_the_whole(tmp_path: Path) -> None:
    from spark_kafkawire.spark.stream import KafkaWireStreamReader

    capture, folder, offsets = _cut_sample(tmp_path)
    reader = KafkaWireStreamReader({"path": str(folder), "completeAfterSeconds": "0"})
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    import pyarrow as pa

    got = pa.Table.from_batches([b for p in reader.partitions(start, end) for b in reader.read(p)])
    assert _exchanges(got, offsets) == _exchanges(read_capture(str(capture)))
