"""A rotation series that grows between reads is stitched across them (carry.py): the stream with
option stateLocation, one file per trigger, gives the rows of the whole capture.

Every sample, public and TLS test capture is cut by ``editcap -c 7`` and ``-i`` (a quarter of its
span), and its files are handed to the streaming source one per trigger, as tcpdump completes them. The exchange rows equal the whole
capture's (statuses, pairs, times, facts; packet numbers made the whole's by the packets of the files
before, counted by dpkt); a connection open at a cut gives a row per trigger, and its rows' counts add
up to the whole capture's row. The only connections that are not carried are those whose bytes in
flight at a cut may hold a secret: a SASL exchange cut by the rotation (found from the whole's rows,
not from the reader's account).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from spark_kafkawire import carry, statefile
from spark_kafkawire.reader import iter_batches
from spark_kafkawire.rows.table import arrow_schema
from spark_kafkawire.spark.stream import KafkaWireStreamReader
from test_series import CAPTURES, SAMPLES, _by_time, _cut, _exchanges, _norm, _offsets, _options, read_capture

pytestmark = pytest.mark.skipif(shutil.which("editcap") is None, reason="editcap (Wireshark) not installed")

#: the counts of a connection row: where a connection's rows are parts of it, they add up
PART_COUNTS = tuple(f"{side}_{what}" for side in ("client", "broker") for what in (
    "bytes", "frames", "frame_bytes", "partial_frames", "partial_bytes", "skipped_bytes", "gap_bytes", "gaps",
    "resyncs", "retransmitted_segments", "retransmitted_bytes", "data_segments", "out_of_order", "lost_segments",
    "lost_bytes", "zero_windows", "zero_window_ms", "tls_read_bytes", "tls_undecrypted_bytes", "tls_other_bytes",
    "tls_gap_bytes")) + ("tls_decrypted_bytes", "tls_undecrypted_bytes")
#: what names a connection in all its rows
CONNECTION = ("client_ip", "client_port", "broker_ip", "broker_port", "community_id", "first_time")
SASL = (17, 36)  # SaslHandshake, SaslAuthenticate
ROUND6 = Path(__file__).resolve().parents[2] / "shared" / "fuzz-findings" / "round6"


def _whole_connections(table, offsets: dict[str, int] | None, skip: set) -> collections.Counter:
    """Connection rows as comparable values: a connection's rows summed (its counts) and its last row
    (the rest); ``skip``: connections (client port, broker port) left out."""
    rows: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in table.to_pylist():
        if (r["client_port"], r["broker_port"]) in skip:
            continue
        rows[tuple(_norm(r[k]) for k in CONNECTION)].append(r)
    out = collections.Counter()
    for parts in rows.values():
        parts.sort(key=lambda r: (r["last_time"], r["end_captured"]))
        last = dict(parts[-1])
        for name in PART_COUNTS:
            values = [r[name] for r in parts if r[name] is not None]
            last[name] = round(sum(values), 6) if values else None
        first = parts[0]["first_packet"] + (offsets[parts[0]["capture_file"]] if offsets is not None else 0)
        out[tuple(_norm(v) for k, v in last.items() if k not in ("capture_file", "first_packet")) + (first,)] += 1
    return out


def _cut_sasl(whole, offsets: dict[str, int]) -> set:
    """Connections whose SASL exchange the rotation cut (request and response in different files),
    from the whole capture's rows: their bytes in flight at the cut may hold a secret."""
    starts = sorted(offsets.values())

    def part(number: int) -> int:
        return sum(1 for s in starts if s < number)

    return {(r["client_port"], r["broker_port"]) for r in whole.to_pylist()
            if r["api_key"] in SASL and r["request_packet"] is not None and r["response_packet"] is not None
            and part(r["request_packet"]) != part(r["response_packet"])}


def _trigger(reader: KafkaWireStreamReader, start: dict) -> tuple[dict, list[pa.RecordBatch]]:
    """One micro-batch as Spark runs it: its end offset, its partitions read, then its commit."""
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    batches = [b for p in reader.partitions(start, end) for b in reader.read(p)]
    reader.commit(end)
    return end, batches


def _stream(parts: list[Path], folder: Path, state: Path, shape: str, opts: dict) -> list[pa.RecordBatch]:
    """The files handed to the stream one per trigger (copied in, as they complete), then the states
    left at the end taken as the stream takes a series no longer remembered (their connections end)."""
    folder.mkdir()
    reader = KafkaWireStreamReader({"path": str(folder), "completeAfterSeconds": "0", "rows": shape,
                                    "stateLocation": str(state), **opts})
    offset, got = reader.initialOffset(), []
    for i, p in enumerate(parts):
        shutil.copy(p, folder / p.name)
        os.utime(folder / p.name, (1_000_000 + i, 1_000_000 + i))
        offset, batches = _trigger(reader, offset)
        got += batches
    for key in sorted(carry.entries(str(state))):  # (the end of the capture: see test_forgotten_series_end)
        held = carry.Carry(carry.state_path(str(state), key), None)
        got += list(iter_batches([], opts | {"rows": shape}, carry=held))
    return got


# (the project's samples in the edit-run loop; the public and TLS captures too in the full suite)
@pytest.mark.parametrize("capture", [pytest.param(c, marks=() if c in SAMPLES else pytest.mark.slow) for c in CAPTURES],
                         ids=lambda p: p.name)
@pytest.mark.parametrize("how", ["-c 7", "time"])
def test_a_series_growing_trigger_by_trigger_reads_as_the_whole(capture: Path, how: str, tmp_path: Path) -> None:
    opts = _options(capture)
    parts = _cut(capture, tmp_path / "parts", how.split() if how != "time" else _by_time(capture))
    if len(parts) < 2:
        pytest.skip("one file")
    offsets = {str(tmp_path / "in-exchanges" / p.name): n for p, n in zip(parts, _offsets(parts).values())}
    whole = read_capture(str(capture), **opts)
    skip = _cut_sasl(whole, {str(p): n for p, n in zip(parts, _offsets(parts).values())})
    got = pa.Table.from_batches(_stream(parts, tmp_path / "in-exchanges", tmp_path / "state-x", "exchanges", opts),
                                schema=arrow_schema("exchanges"))
    keep = lambda t: t.filter(pc.invert(pc.is_in(  # noqa: E731
        t.column("client_port"), pa.array(sorted({c for c, _b in skip}), pa.int32()))))
    assert _exchanges(keep(got), offsets) == _exchanges(keep(whole)), f"{capture.name}: exchange rows"
    offsets = {str(tmp_path / "in-connections" / p.name): n for p, n in zip(parts, _offsets(parts).values())}
    got = pa.Table.from_batches(_stream(parts, tmp_path / "in-connections", tmp_path / "state-c", "connections",
                                        opts), schema=arrow_schema("connections"))
    assert _whole_connections(got, offsets, skip) == \
        _whole_connections(read_capture(str(capture), rows="connections", **opts), None, skip), \
        f"{capture.name}: connection rows"
    if capture.name == "stub-sasl.pcap" and how == "-c 7":
        assert skip, "the cut by 7 packets cuts a SASL exchange"


def test_no_secret_is_written(tmp_path: Path) -> None:
    """The states left at every cut of the SASL and TLS captures hold none of the capture's secrets:
    no SASL password or token, no key log secret, no key made from one (the key log's secrets and
    the record keys made from them are looked for in every state, in raw bytes and in hex)."""
    from spark_kafkawire.tls import keys as tls_keys

    manifest = json.loads((Path(__file__).resolve().parents[1] / "sample_pcaps" / "manifest.json").read_text())
    told = {name: v["secrets"] for name, v in manifest.items() if isinstance(v, dict) and v.get("secrets")}
    caps = [p for p in CAPTURES if p.name in told or p.suffix == ".pcap" and p.parent.name == "tls"]
    assert len(caps) >= 5
    for capture in caps:
        opts = _options(capture)
        secrets: set[bytes] = {s.encode() for s in told.get(capture.name, ())}
        keylog = capture.with_suffix(".keylog")
        if keylog.exists():
            for line in keylog.read_text().splitlines():
                fields = line.split()
                if len(fields) == 3:
                    secret = bytes.fromhex(fields[2])
                    secrets.add(secret)
                    for suite in (0x1301, 0x1302, 0x1303):
                        keys = tls_keys.tls13_keys(secret, suite)
                        if keys is not None:
                            secrets.update({keys.key, keys.iv})
        parts = _cut(capture, tmp_path / capture.name, ["-c", "7"])
        state = tmp_path / f"state-{capture.name}"
        leave, took, written = None, None, 0
        for p in parts:
            leave = carry.state_path(str(state), carry.key_of(str(p)))
            for _ in iter_batches([str(p)], opts, carry=carry.Carry(took, leave)):
                pass
            data = Path(leave).read_bytes()
            written += 1
            for s in secrets:
                assert s not in data and s.hex().encode() not in data, f"{capture.name}: a secret in the state of {p}"
            took = leave
        assert written == len(parts)


def test_forgotten_series_end(tmp_path: Path) -> None:
    """A series whose files are no longer remembered (maxFileAge) has its connections ended in the
    next trigger: their rows come then, once, and the state is let go at its commit."""
    capture = Path(__file__).resolve().parents[1] / "sample_pcaps" / "mock-confluent-group.pcapng"
    parts = _cut(capture, tmp_path / "parts", ["-c", "40"])
    folder, state = tmp_path / "in", tmp_path / "state"
    folder.mkdir()
    reader = KafkaWireStreamReader({"path": str(folder), "completeAfterSeconds": "0", "stateLocation": str(state),
                                    "maxFileAge": "1d"})
    offset, got = reader.initialOffset(), []
    for i, p in enumerate(parts[:2]):
        shutil.copy(p, folder / p.name)
        os.utime(folder / p.name, (1_000_000 + i, 1_000_000 + i))
        offset, batches = _trigger(reader, offset)
        got += batches
    assert len(carry.entries(str(state))) == 1
    # other captures, a week later: once one is read, the series' files are forgotten (in the trigger
    # after it, as every file older than maxFileAge before the newest read), its open connections end
    other = Path(__file__).resolve().parents[1] / "sample_pcaps" / "mock-kcat.pcap"
    for n, name in enumerate(("other.pcap", "another.pcap")):
        shutil.copy(other, folder / name)
        os.utime(folder / name, (1_000_000 + 8 * 86400 + n,) * 2)
        offset, batches = _trigger(reader, offset)
        got += batches
        if not n:
            assert len(carry.entries(str(state))) == 2  # (the series' still waits)
    mine = pa.Table.from_batches(got, schema=arrow_schema("exchanges"))
    mine = mine.filter(pc.invert(pc.is_in(mine.column("capture_file"),
                                          pa.array([str(folder / "other.pcap"), str(folder / "another.pcap")]))))
    whole = read_capture([str(p) for p in parts[:2]])
    assert _exchanges(mine, {str(folder / p.name): n for p, n in zip(parts, _offsets(parts).values())}) == \
        _exchanges(whole, {str(p): n for p, n in zip(parts, _offsets(parts).values())})
    reader.commit(offset)
    assert sorted(Path(e["last_file"]).name for e in carry.entries(str(state)).values()) == \
        ["another.pcap", "other.pcap"]  # (the series' state let go; each other capture's own waits)


def _two_nights(tmp_path: Path, between=None, second_args=(), audits: str = "exchange_summary"):
    """mock-confluent-group.pcapng cut in files of 20 packets and rotated into a directory that two
    --incremental runs of the audit job read: the first before half its files arrived, the second
    after the rest (``between(ck)`` runs between them). Returns the parts, the folder, --out,
    --checkpoint and both runs."""
    from test_audits import _job

    capture = Path(__file__).resolve().parents[1] / "sample_pcaps" / "mock-confluent-group.pcapng"
    parts = _cut(capture, tmp_path / "parts", ["-c", "20"])
    folder, out, ck = tmp_path / "rotating", tmp_path / "out", tmp_path / "ck"
    folder.mkdir()
    args = [folder, "--out", out, "--incremental", "--checkpoint", ck, "--audits", audits,
            "--complete-after-seconds", "0"]
    half, first = len(parts) // 2, None
    for i, p in enumerate(parts):
        if i == half:
            first = _job(*args)
            assert first.returncode in (0, 2), first.stderr[-3000:]
            first.report = (out / "report.html").read_text()
            if between is not None:
                between(ck)
        shutil.copy(p, folder / p.name)
        os.utime(folder / p.name, (1_000_000 + i, 1_000_000 + i))
    second = _job(*args, *second_args)
    assert second.returncode in (0, 2), second.stderr[-3000:]
    return capture, parts, folder, out, ck, first, second


def test_incremental_job_runs_stitch_a_series_across_runs(spark, tmp_path: Path) -> None:
    """The audit job's --incremental runs over a directory a capture is rotated into (through Spark's
    stream, Trigger.AvailableNow): the first run reads the first files, the second the rest. The rows
    written equal the whole capture's: the exchanges cut between the runs are paired once, with the
    facts of the connection's first file; each connection's rows add up to its row in the whole.
    Only the requests still waiting for a response at the end of the last file are not rows yet
    (the whole capture ends them: "capture ended before a response"). The first run says, in its
    output and its report, how many requests wait in the state for the next file: as many as the
    whole capture has requests in the first run's files answered (or never) in later ones."""
    capture, parts, folder, out, ck, first, second = _two_nights(tmp_path)
    assert list((ck / "series").iterdir()), "the runs kept their series' state beside the checkpoint"
    half = len(parts) // 2
    offsets = {str(folder / p.name): n for p, n in zip(parts, _offsets(parts).values())}
    import pyarrow.parquet as pq

    got = pq.read_table(out / "rows" / "exchanges")
    whole = read_capture(str(capture))
    waiting = pc.fill_null(pc.equal(whole.column("detail"), "capture ended before a response"), False)
    firsts = sorted(offsets.values())
    in_file = lambda packet: sum(1 for n in firsts if n < packet)  # noqa: E731 - (1-based file of a packet)
    held = [r for r in whole.to_pylist() if r["request_packet"] is not None and in_file(r["request_packet"]) <= half
            and (r["response_packet"] is None and r["detail"] == "capture ended before a response"
                 or r["response_packet"] is not None and in_file(r["response_packet"]) > half)]
    assert held, "a request waits across the cut"
    said = f"with {len(held):,} request{'s' if len(held) != 1 else ''} waiting for a response there"
    assert said in first.stdout, first.stdout[-2000:]
    assert "left for the next run" in first.report and said in first.report
    whole = whole.filter(pc.invert(waiting))
    assert _exchanges(got, offsets) == _exchanges(whole)
    cut = [r for r in whole.to_pylist() if r["request_packet"] is not None and r["response_packet"] is not None
           and in_file(r["request_packet"]) <= half < in_file(r["response_packet"])]
    assert cut, "an exchange is cut between the runs"
    assert _whole_connections(pq.read_table(out / "rows" / "connections"), offsets, set()) == \
        _whole_connections(read_capture(str(capture), rows="connections"), None, set())


def test_two_nights_count_each_connection_once(spark, tmp_path: Path) -> None:
    """After two --incremental nights over a rotated capture (connections carried from the first
    night's last file into the second night's first, each a row per night): every table that counts
    connections counts each once, as many as dpkt finds in the whole capture (its TCP connections,
    all to the brokers of a mock cluster); and capture_files gives each file its capture date, its exchanges and the
    connections with a row in it."""
    import dpkt
    import pyarrow.parquet as pq

    capture, parts, folder, out, _ck, _first, _second = _two_nights(tmp_path, audits="network,security,clients")
    seen = set()  # (every TCP connection of the capture is to a broker of the mock cluster)
    with open(capture, "rb") as f:
        for _ts, buf in dpkt.pcapng.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            tcp = getattr(ip, "data", None)
            if isinstance(tcp, dpkt.tcp.TCP):
                seen.add(frozenset({(ip.src, tcp.sport), (ip.dst, tcp.dport)}))
    parted = pq.read_table(out / "rows" / "connections").to_pylist()
    assert len(parted) > len(seen), "connections carried across the nights have a row per night"

    def table(audit: str, name: str) -> list[dict]:
        return pq.read_table(out / audit / name).to_pylist()

    assert sum(r["connections"] for r in table("network", "network_by_listener")) == len(seen)
    assert sum(r["connections"] for r in table("capture_health", "coverage")) == len(seen)
    kafka = {c["client_port"] for c in read_capture(str(capture)).to_pylist() if c["api_key"] is not None}
    assert sum(r["kafka_connections"] for r in table("security", "sasl_mechanisms")) == len(kafka)
    files = {Path(r["capture_file"]).name: r for r in table("capture_health", "capture_files")}
    assert set(files) == {p.name for p in parts}
    per_file = collections.Counter(Path(r["capture_file"]).name
                                   for r in pq.read_table(out / "rows" / "exchanges").to_pylist())
    for name, r in files.items():
        assert r["capture_date"] is not None and "DEFAULT" not in str(r["capture_date"]), r
        assert r["exchanges"] == per_file[name], r
        assert r["connections"] >= (1 if per_file[name] else 0), r


def test_a_planted_state_between_nights_runs_nothing(spark, tmp_path: Path, monkeypatch) -> None:
    """Round 6 through the nightly job: state-rce.carry planted in the place of the series' state
    between two --incremental runs (CKPT/series/exchanges/): the second run writes no marker file
    (the pickle's command), ends with a report, and says on stderr that the state is not read."""
    planted = ROUND6 / "state-rce.carry"
    if not planted.exists():
        pytest.skip("fuzz findings not beside the checkout")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)

    def plant(ck: Path) -> None:
        states = list((ck / "series").rglob("*.carry"))
        assert states, "the first night left its series' state"
        for s in states:
            shutil.copy(planted, s)

    *_, out, _ck, _first, second = _two_nights(tmp_path, plant, ["--verbose"])  # (workers' stderr on the job's)
    assert not list(cwd.glob("kw-rce-marker*")) and not list(tmp_path.rglob("kw-rce-marker*"))
    assert (out / "report.html").is_file()
    assert "format 1 (a pickle" in second.stderr, second.stderr[-3000:]


def test_key_material_is_never_written(tmp_path: Path):
    """The guard behind the stash: a state whose TLS session still holds a key log, or a direction
    record keys or a traffic secret, is refused whole (their fields are declared as nothing)."""
    capture = next(p for p in CAPTURES if p.parent.name == "tls" and p.with_suffix(".keylog").exists()
                   and "tls13" in p.name)
    parts = _cut(capture, tmp_path / "parts", ["-c", "7"])
    state = tmp_path / "x.carry"
    list(iter_batches([str(parts[0]), str(parts[1])], _options(capture), carry=carry.Carry(None, str(state))))
    sessions = [c.state.tls_session for c in carry.loads(state.read_bytes()).reasm.live
                if c.state is not None and c.state.tls_session is not None]
    assert sessions, "a TLS connection is carried"
    for field, value in (("keylog", object()), ("secret", b"s" * 32)):
        carried = carry.loads(state.read_bytes())
        session = next(c.state.tls_session for c in carried.reasm.live
                       if c.state is not None and c.state.tls_session is not None)
        target = session if field == "keylog" else session.dirs[0]
        setattr(target, field, value)
        # (written without the stash, which would let it go: the guard behind it is tested)
        with pytest.raises(statefile.StateError, match=f"{field}: a value where none is declared"):
            statefile.dump({}, {"decoder": carried.decoder, "reasm": carried.reasm})
