"""Hostile captures, round 6 (../shared/fuzz-findings/round6/): compressed captures cut short, a
compression bomb, a rotation series whose files begin in the same microsecond. (The round's state
files: test_state.py.)

The truths: tshark's packet count on the same cut gzip file; what ``gzip -dc``/``xz -dc`` recover
from a cut file, read as an uncompressed capture; the whole capture the series was cut from.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

from spark_kafkawire import read_capture
from spark_kafkawire.wire.capture import CaptureReader

ROOT = Path(__file__).resolve().parents[1]
ROUND6 = ROOT.parent / "shared" / "fuzz-findings" / "round6"
pytestmark = pytest.mark.skipif(not ROUND6.is_dir(), reason="../shared/fuzz-findings/round6 is not beside the checkout")
TOOLS = {"gz": ["gzip", "-dc"], "xz": ["xz", "-dc"], "bz2": ["bzip2", "-dc"], "zst": ["zstd", "-dcq"]}


def _recovered(tool: list[str], path: Path, out: Path) -> Path:
    """What the compressor's own command gives of a cut file before its error."""
    with open(out, "wb") as f:
        subprocess.run([*tool, str(path)], stdout=f, stderr=subprocess.DEVNULL)
    return out


def _packets(path: Path) -> int:
    return sum(1 for p in CaptureReader(str(path)) if hasattr(p, "ts_ns"))


@pytest.mark.parametrize("ext", ["gz", "xz", "bz2", "zst"])
def test_a_cut_compressed_capture_gives_what_precedes_the_cut(ext: str, tmp_path: Path) -> None:
    """The packets are those in the bytes the compressor's own command recovers (gzip: 74, as tshark
    reads the same file; bzip2 and zstd recover nothing of a block cut short), then one
    capture_damaged row at the cut."""
    cut = ROUND6 / f"trunc-kcat.pcap.{ext}"
    if shutil.which(TOOLS[ext][0]) is None:
        pytest.skip(f"{TOOLS[ext][0]} not installed")
    plain = _recovered(TOOLS[ext], cut, tmp_path / "recovered.pcap")
    reader = CaptureReader(str(cut))
    n = sum(1 for p in reader if hasattr(p, "ts_ns"))
    expect = _packets(plain) if plain.stat().st_size >= 24 else 0
    assert n == expect
    assert reader.damage is not None and "cut short" in reader.damage.reason
    if ext == "gz":
        assert n == 74
        if shutil.which("tshark"):
            told = subprocess.run(["tshark", "-r", str(cut)], capture_output=True, text=True).stdout
            assert len(told.splitlines()) == n
    rows = read_capture(str(cut))
    assert rows.column("status").to_pylist()[-1] == "capture_damaged"
    if expect:
        whole = read_capture(str(plain))
        assert pc.sum(pc.equal(rows.column("status"), "complete")).as_py() == \
            pc.sum(pc.equal(whole.column("status"), "complete")).as_py() > 0


@pytest.mark.parametrize("compress", [["gzip", "-c"], ["xz", "-c"], ["zstd", "-c", "-q"], ["bzip2", "-c"]])
def test_a_larger_capture_cut_at_two_thirds(compress: list[str], tmp_path: Path) -> None:
    """A sample compressed by its own command and cut at two thirds: the complete exchanges are
    those of the bytes the command's -dc recovers, read uncompressed."""
    if shutil.which(compress[0]) is None:
        pytest.skip(f"{compress[0]} not installed")
    sample = ROOT / "sample_pcaps" / "mock-confluent-group.pcapng"
    packed = subprocess.run([*compress, str(sample)], capture_output=True, check=True).stdout
    cut = tmp_path / "cut.pcapng.x"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    tool = {"gzip": TOOLS["gz"], "xz": TOOLS["xz"], "zstd": TOOLS["zst"], "bzip2": TOOLS["bz2"]}[compress[0]]
    plain = _recovered(tool, cut, tmp_path / "recovered.pcapng")
    rows = read_capture(str(cut))
    complete = pc.sum(pc.equal(rows.column("status"), "complete")).as_py() or 0
    if plain.stat().st_size > 28:
        whole = read_capture(str(plain))
        assert complete == (pc.sum(pc.equal(whole.column("status"), "complete")).as_py() or 0)
    assert rows.column("status").to_pylist()[-1] == "capture_damaged"


def test_a_compression_bomb_stops_at_the_bound_in_seconds() -> None:
    """36 KB of zstd inflating to 1 GiB: one capture_damaged row names the bound (the 1000x default,
    past 64 MiB) well before the file's end; a lower maxInflateRatio stops it sooner."""
    bomb = ROUND6 / "zeros-1g.pcap.zst"
    began = time.process_time()
    rows = read_capture(str(bomb), maxInflateRatio="100")
    assert time.process_time() - began < 60
    detail = rows.column("detail").to_pylist()[-1]
    assert rows.column("status").to_pylist()[-1] == "capture_damaged"
    assert "inflates beyond 100x" in detail and "maxInflateRatio" in detail, detail


def test_an_ordinary_compressed_capture_reads_as_its_plain_self(tmp_path: Path) -> None:
    """Concatenated gzip members and xz streams (a rotation's appended files) read whole."""
    sample = ROOT / "sample_pcaps" / "mock-kcat.pcap"
    data = sample.read_bytes()
    for tool in (["gzip", "-c"], ["xz", "-c"], ["zstd", "-c", "-q"]):
        if shutil.which(tool[0]) is None:
            continue
        path = tmp_path / f"x.{tool[0]}"
        half = len(data) // 2
        # (the second member holds the rest of the same capture: the bytes join as one file)
        first = subprocess.run(tool, input=data[:half], capture_output=True, check=True).stdout
        second = subprocess.run(tool, input=data[half:], capture_output=True, check=True).stdout
        path.write_bytes(first + second)
        got, want = read_capture(str(path)), read_capture(str(sample))
        assert got.num_rows == want.num_rows and got.column("status").to_pylist() == want.column("status").to_pylist()


def test_files_beginning_in_the_same_microsecond_are_one_series() -> None:
    """One-packet files (editcap -c 1) where two begin in the same microsecond: the directory reads
    as the whole capture does (every exchange complete where the whole's is)."""
    from test_series import _exchanges, _offsets

    folder = ROUND6 / "series-equal-first-time"
    parts = sorted(folder.iterdir())
    got = read_capture(str(folder))
    whole = read_capture(str(ROUND6 / "series-equal-first-time-whole.pcap"))
    offsets = {str(p): n for p, n in zip(parts, _offsets(parts).values())}
    assert _exchanges(got, offsets) == _exchanges(whole)
    assert got.column("status").to_pylist().count("complete") == whole.column("status").to_pylist().count("complete")
