"""The carried state as declared records (statefile.py, carry.py): a planted file runs nothing,
writes nothing and stops nothing; a state this version cannot read is refused by name and its
connections end at the cut as uncarried ones do; the compiled and pure-Python builds read each
other's states; a state kept from this version reads or is refused by name; mutated states never
crash a read.

What a read without the state gives is the truth a refused state is checked against (the files after
the cut read on their own: their connections as begun before the capture); what the whole capture
gives is the truth a state read is checked against (test_carry's comparisons).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import msgpack
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_kafkawire import carry, statedecl, statefile
from spark_kafkawire.reader import iter_batches
from spark_kafkawire.rows.table import arrow_schema
from test_carry import _trigger
from test_series import _cut, _exchanges, _offsets, read_capture

pytestmark = pytest.mark.skipif(shutil.which("editcap") is None, reason="editcap (Wireshark) not installed")

ROOT = Path(__file__).resolve().parents[1]
ROUND6 = ROOT.parent / "shared" / "fuzz-findings" / "round6"
CAPTURE = ROOT / "sample_pcaps" / "mock-confluent-group.pcapng"
FIXTURE = ROOT / "tests" / "states"


def _parts(tmp_path: Path) -> list[Path]:
    return _cut(CAPTURE, tmp_path / "parts", ["-c", "20"])


def _first_half(parts: list[Path], folder: Path, state: Path):
    """The stream reads the first half of the files (one per trigger) and leaves its state."""
    from spark_kafkawire.spark.stream import KafkaWireStreamReader

    folder.mkdir()
    reader = KafkaWireStreamReader({"path": str(folder), "completeAfterSeconds": "0", "rows": "exchanges",
                                    "stateLocation": str(state)})
    offset, got = reader.initialOffset(), []
    for i, p in enumerate(parts[: len(parts) // 2]):
        shutil.copy(p, folder / p.name)
        os.utime(folder / p.name, (1_000_000 + i, 1_000_000 + i))
        offset, batches = _trigger(reader, offset)
        got += batches
    return reader, offset, got


def _rest(reader, offset, parts: list[Path], folder: Path) -> list[pa.RecordBatch]:
    got = []
    for i, p in enumerate(parts[len(parts) // 2:], start=len(parts) // 2):
        shutil.copy(p, folder / p.name)
        os.utime(folder / p.name, (1_000_000 + i, 1_000_000 + i))
        offset, batches = _trigger(reader, offset)
        got += batches
    return got


def _table(batches) -> pa.Table:
    return pa.Table.from_batches(batches, schema=arrow_schema("exchanges"))


def _the_state(state: Path) -> Path:
    keys = sorted(carry.entries(str(state)))
    assert len(keys) == 1, keys
    return Path(carry.state_path(str(state), keys[0]))


def _uncarried(parts: list[Path]) -> pa.Table:
    """The files after the cut read on their own (no state): what a refused state's read must give."""
    rest = [str(p) for p in parts[len(parts) // 2:]]
    return pa.Table.from_batches(list(iter_batches(rest, {})), schema=arrow_schema("exchanges"))


def _comparable(t: pa.Table) -> list:
    keep = ("client_port", "correlation_id", "api_key", "status", "detail", "request_time", "response_time")
    return sorted(tuple(str(r[k]) for k in keep) for r in t.to_pylist())


@pytest.mark.parametrize("name", ["state-rce.carry", "state-truncate.carry", "state-exit.carry"])
def test_a_planted_state_runs_nothing_writes_nothing_stops_nothing(name: str, tmp_path: Path, monkeypatch,
                                                                   capsys) -> None:
    """Each round-6 reproducer in the place of the series' state: the stream's next triggers end
    with rows (those of the files read without a state), no command ran (its marker file), no file
    was truncated, no SystemExit; one warning names the state file and why."""
    if not (ROUND6 / name).exists():
        pytest.skip("fuzz findings not beside the checkout")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    victim = cwd / "victim.txt"
    victim.write_text("kept")
    parts = _parts(tmp_path)
    reader, offset, _got = _first_half(parts, tmp_path / "rotating", tmp_path / "state")
    planted = _the_state(tmp_path / "state")
    shutil.copy(ROUND6 / name, planted)
    capsys.readouterr()
    got = _table(_rest(reader, offset, parts, tmp_path / "rotating"))
    assert not list(cwd.glob("kw-rce-marker*")) and not list(tmp_path.rglob("kw-rce-marker*"))
    assert victim.read_text() == "kept"
    assert got.num_rows > 0
    assert _comparable(got) == _comparable(_uncarried(parts))
    err = capsys.readouterr().err
    assert str(planted) in err and "format 1 (a pickle" in err, err


def _rewrite(path: Path, change) -> None:
    data = path.read_bytes()
    body = msgpack.unpackb(data[len(statefile.MAGIC):], raw=False)
    change(body)
    path.write_bytes(statefile.MAGIC + msgpack.packb(body, use_bin_type=True))


@pytest.mark.parametrize("how,why", [
    (lambda b: b.update(format=3), "is of format 3"),
    (lambda b: b.update(digest="0" * 64), "with other carried fields than this version's"),
    (lambda b: b.update(records=b["records"][:3]), "is not a record's number"),
])
def test_a_state_this_version_cannot_read_is_refused_by_name(how, why, tmp_path: Path, capsys) -> None:
    """Another format, other field declarations, records missing: one warning names the file and
    why; the connections end at the cut exactly as an uncarried connection does."""
    parts = _parts(tmp_path)
    reader, offset, _got = _first_half(parts, tmp_path / "rotating", tmp_path / "state")
    path = _the_state(tmp_path / "state")
    _rewrite(path, how)
    capsys.readouterr()
    got = _table(_rest(reader, offset, parts, tmp_path / "rotating"))
    assert _comparable(got) == _comparable(_uncarried(parts))
    err = capsys.readouterr().err
    assert err.count(str(path)) == 1 and why in err, err


@pytest.mark.parametrize("data", [
    b"junk", statefile.MAGIC + b"\x91" * 200_000,  # nested deeper than any reader's stack
    statefile.MAGIC + b"\xc6\x80\x00\x00\x00abc",  # bytes claiming 2 GiB
    statefile.MAGIC + msgpack.packb({"format": 2, "digest": statefile.digest(), "records": [["Connection", []]]}),
])
def test_hostile_state_bytes_are_refused(data: bytes, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "x.carry"
    bad.write_bytes(data)
    rows = pa.Table.from_batches(list(iter_batches([str(CAPTURE)], {}, carry=carry.Carry(str(bad), None))))
    assert rows.num_rows == read_capture(str(CAPTURE)).num_rows
    err = capsys.readouterr().err
    assert str(bad) in err, err


def _whole_rows(parts: list[Path], folder: Path, first: list, rest: list) -> None:
    """The rows of both halves are the whole capture's (packet numbers made the whole's)."""
    offsets = {str(folder / p.name): n for p, n in zip(parts, _offsets(parts).values())}
    assert _exchanges(_table(first + rest), offsets) == _exchanges(read_capture(str(CAPTURE)))


def test_the_other_build_reads_this_builds_state_and_back(tmp_path: Path) -> None:
    """A state written by the other build (compiled or pure Python, in a process of its own) is read
    by this one, and this one's by the other: the series' rows are the whole capture's both ways."""
    from spark_kafkawire import compiled

    other = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"}
    if compiled.native:
        other["KAFKAWIRE_PURE_PYTHON"] = "1"
    else:
        other.pop("KAFKAWIRE_PURE_PYTHON", None)
    parts = _parts(tmp_path)
    # the other build writes; this one goes on
    folder, state = tmp_path / "rotating", tmp_path / "state"
    script = (f"import sys, pickle; from pathlib import Path; from test_state import _first_half; "
              f"r, o, got = _first_half([Path(p) for p in {[str(p) for p in parts]!r}], Path({str(folder)!r}), "
              f"Path({str(state)!r})); import pyarrow as pa; "
              f"pa.ipc.new_file({str(tmp_path / 'first.arrow')!r}, got[0].schema).close() if not got else None; "
              f"w = pa.ipc.new_file({str(tmp_path / 'first.arrow')!r}, got[0].schema) if got else None; "
              f"[w.write_batch(b) for b in got]; w and w.close(); "
              f"from spark_kafkawire import compiled; print('native', compiled.native)")
    done = subprocess.run([sys.executable, "-c", script], env=other, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"native {not compiled.native}" in done.stdout
    first = pa.ipc.open_file(tmp_path / "first.arrow").read_all().to_batches()
    from spark_kafkawire.spark.stream import KafkaWireStreamReader

    reader = KafkaWireStreamReader({"path": str(folder), "completeAfterSeconds": "0", "rows": "exchanges",
                                    "stateLocation": str(state)})
    start = reader.initialOffset()
    # this process's reader begins where the other left off: its files so far are the first half
    start = reader.latestOffset(start, reader.getDefaultReadLimit())
    reader.commit(start)
    rest = _rest(reader, start, parts, folder)
    _whole_rows(parts, folder, first, rest)
    # this build writes; the other goes on
    folder2, state2 = tmp_path / "rotating2", tmp_path / "state2"
    r2, o2, first2 = _first_half(parts, folder2, state2)
    script = (f"from pathlib import Path; import pyarrow as pa; from test_state import _rest; "
              f"from spark_kafkawire.spark.stream import KafkaWireStreamReader; "
              f"r = KafkaWireStreamReader({{'path': {str(folder2)!r}, 'completeAfterSeconds': '0', "
              f"'rows': 'exchanges', 'stateLocation': {str(state2)!r}}}); s = r.initialOffset(); "
              f"s = r.latestOffset(s, r.getDefaultReadLimit()); r.commit(s); "
              f"got = _rest(r, s, [Path(p) for p in {[str(p) for p in parts]!r}], Path({str(folder2)!r})); "
              f"w = pa.ipc.new_file({str(tmp_path / 'rest.arrow')!r}, got[0].schema); "
              f"[w.write_batch(b) for b in got]; w.close()")
    done = subprocess.run([sys.executable, "-c", script], env=other, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "kafkawire:" not in done.stderr, done.stderr
    _whole_rows(parts, folder2, first2, pa.ipc.open_file(tmp_path / "rest.arrow").read_all().to_batches())


def test_a_state_kept_from_this_version_reads_or_is_refused_by_name(tmp_path: Path, capsys) -> None:
    """tests/states/ keeps a state written by spark-kafkawire 0.1.0 (state format 2) after the first
    half of the sample cut by 20 packets. Read by this version, the rest of the files give, with the
    first half's rows, the whole capture's rows; a later version that cannot read it refuses it by
    name, and its rows are those of the rest read without it."""
    parts = _parts(tmp_path)
    folder = tmp_path / "rotating"
    _reader, _offset, first = _first_half(parts, folder, tmp_path / "live-state")
    kept = FIXTURE / "format-2.carry"
    data = kept.read_bytes()
    rest = [str(folder / p.name) for p in parts[len(parts) // 2:]]
    for p in parts[len(parts) // 2:]:
        shutil.copy(p, folder / p.name)
    got = list(iter_batches(rest, {}, carry=carry.Carry(str(kept), None)))
    head = msgpack.unpackb(data[len(statefile.MAGIC):], raw=False)
    err = capsys.readouterr().err
    if head.get("format") == statefile.FORMAT and head.get("digest") == statefile.digest():
        assert "kafkawire:" not in err, err
        # (the kept state names the files as they were when it was written: its own first half)
        offsets = {p: n for p, n in zip(head["files"] + rest, _offsets(parts).values())}
        mine = {str(folder / p.name): n for p, n in zip(parts, _offsets(parts).values())}
        assert _exchanges(_table(first), mine) + _exchanges(_table(got), offsets) == \
            _exchanges(read_capture(str(CAPTURE)))
    else:
        assert str(kept) in err and ("format" in err or "other carried fields" in err), err
        assert _comparable(_table(got)) == _comparable(_uncarried(parts))


def test_the_kept_state_is_this_versions(tmp_path: Path) -> None:
    """The state kept in tests/states/ is the one this version writes for the same files (made
    again by ``make state-fixture`` when the declarations change; the older one then goes to the
    refusal branch of the test above)."""
    head = msgpack.unpackb((FIXTURE / "format-2.carry").read_bytes()[len(statefile.MAGIC):], raw=False)
    assert head["format"] == statefile.FORMAT and head["digest"] == statefile.digest(), \
        "the declarations changed: make state-fixture, and keep the old state as a refusal test"


def test_the_declarations_are_every_field_of_each_stage() -> None:
    """Each record type declares exactly the attributes its class has (in this build): a field added
    to a carried stage and not declared would be lost at a cut."""
    makers = statedecl.blank_makers()
    for name, fields in statedecl.RECORDS.items():
        obj = makers[name]()
        cls = type(obj)
        if hasattr(cls, "__mypyc_attrs__"):
            actual = {a for a in cls.__mypyc_attrs__ if a != "__dict__"}
        else:
            actual = set(getattr(obj, "__dict__", {}))
            for k in cls.__mro__:
                actual |= set(getattr(k, "__slots__", ()))
            actual -= {"__dict__", "__weakref__"}
        assert actual == {f for f, _t in fields}, name


def test_reading_imports_nothing_the_file_names(tmp_path: Path) -> None:
    """A state naming a module or a class (as a record type, or a callback's method) builds nothing
    of it: record types and methods are only those declared."""
    for records in ([["os.system", []]], [["Side_", [0, 0, 0]]]):
        body = {"format": statefile.FORMAT, "digest": statefile.digest(), "files": ["f"], "began": None,
                "shapes": ["exchanges"], "decoder": 0, "reasm": 0, "records": records}
        with pytest.raises(carry.CarryError, match="not a declared record|is not a|where a"):
            carry.loads(statefile.MAGIC + msgpack.packb(body, use_bin_type=True), "x.carry")
    before = set(sys.modules)
    with pytest.raises(carry.CarryError):
        carry.loads(statefile.MAGIC + msgpack.packb({"format": 2, "digest": statefile.digest(), "records": [
            ["Framer", [["spark_kafkawire.__main__", "main"]] + [0] * 21]]}), "y.carry")
    assert "spark_kafkawire.__main__" not in set(sys.modules) - before


# -- mutated states: refused or read, never a crash ----------------------------------------------------
_STATE: dict = {}


def _a_state(tmp_path_factory) -> tuple[dict, list[str], Path]:
    if not _STATE:
        tmp = tmp_path_factory.mktemp("mutated")
        parts = _parts(tmp)
        _first_half(parts, tmp / "rotating", tmp / "state")
        data = _the_state(tmp / "state").read_bytes()
        _STATE.update(body=msgpack.unpackb(data[len(statefile.MAGIC):], raw=False),
                      rest=[str(p) for p in parts[len(parts) // 2:]], dir=tmp)
    return _STATE["body"], _STATE["rest"], _STATE["dir"]


def _leaves(v, path=()):
    """Paths to every value of a record's fields."""
    if isinstance(v, list):
        for i, x in enumerate(v):
            yield from _leaves(x, path + (i,))
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _leaves(x, path + (k,))
    yield path


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.integers(-3, 40),
                    st.binary(max_size=40), st.text(max_size=10), st.lists(st.integers(0, 5), max_size=4),
                    st.floats(allow_nan=True))


_EXAMPLES = os.environ.get("KAFKAWIRE_STATE_EXAMPLES")  # (more, and random, where set; CI: 150 derandomized)


@settings(max_examples=int(_EXAMPLES or 150), deadline=None, derandomize=_EXAMPLES is None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_mutated_state_is_refused_or_read_never_a_crash(tmp_path_factory, data) -> None:
    """One to three values anywhere in a real state replaced (by values of any type: counts that
    contradict buffers, sequence numbers that do not follow the next file's, references to other
    records, huge ints): loading refuses it (CarryError) or the read of the files after it ends with
    rows, and never raises."""
    import copy

    body, rest, folder = _a_state(tmp_path_factory)
    body = copy.deepcopy(body)
    records = body["records"]
    paths = [p for p in _leaves(records) if p]
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        target = records
        for step in path[:-1]:  # (an earlier change may have put a value where this path went on)
            ok = isinstance(target, dict) and step in target or \
                isinstance(target, list) and isinstance(step, int) and step < len(target)
            target = target[step] if ok else None
        last = path[-1]
        if not (isinstance(target, dict) and last in target or
                isinstance(target, list) and isinstance(last, int) and last < len(target)):
            continue
        was = target[path[-1]]
        if type(was) is int and data.draw(st.booleans()):  # (a value of the declared type: read, not refused)
            target[path[-1]] = data.draw(st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 1 << 20))
        elif type(was) is bytes and data.draw(st.booleans()):
            target[path[-1]] = was[: data.draw(st.integers(0, len(was)))] + data.draw(st.binary(max_size=8))
        else:
            target[path[-1]] = data.draw(_VALUES)
    path = folder / "mutated.carry"
    path.write_bytes(statefile.MAGIC + msgpack.packb(body, use_bin_type=True))
    rows = sum(b.num_rows for b in iter_batches(rest, {}, carry=carry.Carry(str(path), None)))
    assert rows > 0


def test_docs_name_every_declared_field() -> None:
    assert statedecl.markdown() in (ROOT / "docs" / "state.md").read_text()


def test_the_state_command_says_what_a_directory_holds(tmp_path: Path) -> None:
    """``kafkawire state DIR``: the series, its last file, the connections carried (as many as the
    state's reassembler holds open, each with its ends); a refused state is said, not a crash."""
    parts = _parts(tmp_path)
    _first_half(parts, tmp_path / "rotating", tmp_path / "state")
    path = _the_state(tmp_path / "state")
    live = list(carry.loads(path.read_bytes()).reasm.live)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "spark_kafkawire.cli", "state", str(tmp_path / "state")],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "1 series state" in out.stdout and parts[len(parts) // 2 - 1].name in out.stdout
    assert f"{len(live)} open connection" in out.stdout and len(live) > 0
    assert out.stdout.count(" -> ") == len(live)
    shutil.copy(ROUND6 / "state-rce.carry" if (ROUND6 / "state-rce.carry").exists() else CAPTURE, path)
    out = subprocess.run([sys.executable, "-m", "spark_kafkawire.cli", "state", str(tmp_path / "state")],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0 and "not readable by this version" in out.stdout, out.stdout + out.stderr
    assert not list(tmp_path.glob("kw-rce-marker*"))
