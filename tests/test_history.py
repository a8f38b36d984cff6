"""The audit history's rules without Spark: one file per run and table, a run over the same inputs
replacing its own, what changed since the last run, the max_broker_p99_growth policy, a history
that is not this version's (a planted file, another format) read as none and said on stderr by
name, and the same rules for the Delta Lake tables (read back with deltalake itself, by version)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spark_kafkawire.audits import compare, history
from spark_kafkawire.audits.base import Policy


def _run(where: Path, run_id: str, digest: str, when: dt.datetime, clients: dict[str, list[str]],
         broker_p99: float | None = None, fmt: str = "parquet") -> dict:
    fields = {"run_id": run_id, "run_time": when, "window_start": None, "window_end": None, "inputs_digest": digest}
    results = {"clients": {"clients": [{"client_id": c, "client_ip": "10.0.0.1", "apis": apis, "exchanges": 1}
                                       for c, apis in clients.items()]}}
    summary = [{"api_name": "Fetch", "broker": "10.0.0.9:9092", "exchanges": 50, "errors": 0, "bytes": 1,
                "retransmissions": 0, "latency_q": None, "network_q": None,
                "broker_q": None if broker_p99 is None else [1.0, 2.0, broker_p99]}]
    now = history.tables(fields, summary, [], results)
    if fmt == "delta":
        history.DeltaStaged(str(where), now, digest, when.strftime("%Y-%m-%d")).commit()
    else:
        history.History(str(where)).write(now, digest, when.strftime("%Y-%m-%d"))
    return now


def _earlier(where: Path, digest: str, fmt: str = "parquet") -> tuple[list[dict], list[dict]]:
    return history.Past(str(where), fmt, digest, {}).earlier


def test_the_same_inputs_replace_their_own_rows_and_others_are_kept(tmp_path):
    day = dt.datetime(2026, 11, 20, 2, 15, tzinfo=dt.timezone.utc)
    _run(tmp_path, "a", "d1", day, {"c1": ["Fetch v12"]})
    _run(tmp_path, "b", "d2", day + dt.timedelta(days=1), {"c2": ["Fetch v12"]})
    _run(tmp_path, "a2", "d1", day + dt.timedelta(days=2), {"c1": ["Fetch v13"]})  # d1's captures again
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.parquet"))
    assert files == sorted(f"{t}/run_date={d}/run-{k}.parquet" for t in history.TABLES
                           for d, k in (("2026-11-21", "d2"), ("2026-11-22", "d1")))
    assert {(r["run_id"], r["client_id"]) for r in history._read(str(tmp_path), "clients")} == {("a2", "c1"),
                                                                                               ("b", "c2")}
    assert history.inputs_digest(["b", "a"], 3) == history.inputs_digest(["a", "b", "a"], 3) != \
        history.inputs_digest(["a", "b"], 4)


def test_what_changed_since_the_last_run(tmp_path):
    day = dt.datetime(2026, 11, 20, 2, 15, tzinfo=dt.timezone.utc)
    for i in range(5):  # five nights of one client, broker p99 10 ms
        _run(tmp_path, f"r{i}", f"d{i}", day + dt.timedelta(days=i), {"old": ["Produce v3"], "c": ["Fetch v12"]}, 10.0)
    fields = {"run_id": "now", "run_time": day + dt.timedelta(days=6), "window_start": None, "window_end": None,
              "inputs_digest": "dn"}
    results = {"clients": {"clients": [{"client_id": "c", "client_ip": "10.0.0.1", "apis": ["Fetch v13"],
                                        "exchanges": 1},
                                       {"client_id": "new", "client_ip": "10.0.0.2", "apis": ["Fetch v13"],
                                        "exchanges": 1}]}}
    summary = [{"api_name": "Fetch", "broker": "10.0.0.9:9092", "exchanges": 10, "errors": 2, "bytes": 1,
                "retransmissions": 0, "latency_q": None, "network_q": None, "broker_q": [1.0, 2.0, 25.0],
                "error_names": ["NOT_LEADER_OR_FOLLOWER"]}]
    lines = dict(compare.since_last(history.tables(fields, summary, [], results), _earlier(tmp_path, "dn")))
    assert lines["1 new client(s)"] == "new@10.0.0.2" and lines["1 client(s) gone"] == "old@10.0.0.1"
    assert lines["Fetch v13 newly sent"].startswith("by 2 client(s)")
    assert "Produce v3 no longer sent" in lines and "Fetch v12 no longer sent" in lines
    assert lines["Fetch broker p99 at 10.0.0.9:9092"].startswith("25.0 ms, 2.5x its median 10.0 ms over the last 5")
    # the policy's factor, where it is set, is the regressions' bound
    assert "Fetch broker p99 at 10.0.0.9:9092" not in dict(compare.since_last(
        history.tables(fields, summary, [], results), _earlier(tmp_path, "dn"), 3.0))
    assert lines["Fetch errors"] == "2 at 10.0.0.9:9092; none in the last run"
    assert lines["NOT_LEADER_OR_FOLLOWER newly seen"] == "in Fetch responses at 10.0.0.9:9092; not in the last run"
    # the same inputs as the last run: compared with the run before it, never with itself
    assert compare.since_last(history.tables(fields, summary, [], results), _earlier(tmp_path, "d4"))[0][0] == \
        f"since the run of {day + dt.timedelta(days=3):%Y-%m-%d %H:%M:%S} UTC"


def test_a_history_that_is_not_this_versions_is_none_and_said(tmp_path, capsys):
    folder = tmp_path / "clients" / "run_date=2026-11-20"
    folder.mkdir(parents=True)
    (folder / "run-planted.parquet").write_bytes(b"PAR1 not parquet at all")
    assert history._read(str(tmp_path), "clients") == []
    err = capsys.readouterr().err
    assert "history" in err and "clients" in err and "cannot be read" in err
    assert compare.since_last(history.tables(
        {"run_id": "x", "run_time": None, "window_start": None, "window_end": None, "inputs_digest": "x"}, [], [], {}),
        _earlier(tmp_path, "x")) is None


def test_a_history_without_files_yet_is_none_and_says_nothing(tmp_path, capsys):
    (tmp_path / "run_summary" / "run_date=2026-11-20").mkdir(parents=True)
    assert history._read(str(tmp_path), "run_summary") == [] and capsys.readouterr().err == ""


def test_a_file_of_another_history_format_is_refused_by_name(tmp_path, capsys):
    """Every file says its format in its Parquet metadata; one that says another (a later version's
    history, or a file without it) is named on stderr and the history read as none."""
    day = dt.datetime(2026, 11, 20, 2, 15, tzinfo=dt.timezone.utc)
    _run(tmp_path, "a", "d1", day, {"c1": ["Fetch v12"]})
    written = next((tmp_path / "clients").rglob("*.parquet"))
    assert pq.read_schema(written).metadata[b"kafkawire.history_format"] == history.FORMAT.encode()
    assert len(history._read(str(tmp_path), "clients")) == 1 and capsys.readouterr().err == ""
    later = written.parent / "run-later.parquet"
    pq.write_table(pq.read_table(written).replace_schema_metadata({b"kafkawire.history_format": b"2"}), later)
    assert history._read(str(tmp_path), "clients") == []
    err = capsys.readouterr().err
    assert str(later) in err and "history format '2'" in err and "reads format '1'" in err
    later.unlink()
    pq.write_table(pq.read_table(written).replace_schema_metadata(None), later)
    assert history._read(str(tmp_path), "clients") == []
    assert "no history format" in capsys.readouterr().err


def _summary(p99: float, n: int = 50) -> list[dict]:
    return [{"api_name": "Fetch", "broker": "10.0.0.9:9092", "exchanges": n, "errors": 0, "bytes": 1,
             "retransmissions": 0, "latency_q": None, "network_q": None, "broker_q": [1.0, 2.0, p99]}]


def _judge(tmp_path: Path, p99: float, policy: Policy, n: int = 50):
    before = history.Past(str(tmp_path), "parquet", "now", history.run_fields("now", (None, None), "now"))
    return history.judged_on_history(before, policy, _summary(p99, n))


def test_broker_p99_growth_is_judged_only_on_enough_runs(tmp_path):
    """max_broker_p99_growth: FAIL where this run's broker p99 is beyond the factor times its median
    over the last runs (at most compare.RECENT), ok within it, inconclusive with fewer earlier runs
    than min_history_runs or fewer exchanges than min_latency_n; not judged where not set."""
    policy = Policy(max_broker_p99_growth=2.0, min_history_runs=3, min_latency_n=20)
    assert history.judged_on_history(None, Policy(), []) == []
    assert history.judged_on_history(None, policy, [])[0].ok is None  # (--history none)
    day = dt.datetime(2026, 11, 20, 2, 15, tzinfo=dt.timezone.utc)
    for i, p99 in enumerate([10.0, 12.0]):
        _run(tmp_path, f"r{i}", f"d{i}", day + dt.timedelta(days=i), {"c": ["Fetch v12"]}, p99)
    (v,) = _judge(tmp_path, 100.0, policy)
    assert v.ok is None and "2 earlier run(s)" in v.detail  # two runs: not judged yet
    for i, p99 in enumerate([8.0, 30.0, 9.0, 11.0], start=2):  # six runs: the last five are 12, 8, 30, 9, 11
        _run(tmp_path, f"r{i}", f"d{i}", day + dt.timedelta(days=i), {"c": ["Fetch v12"]}, p99)
    (v,) = _judge(tmp_path, 22.0, policy)  # median 11: 22 is 2.0x, not beyond
    assert v.ok is True, v
    (v,) = _judge(tmp_path, 22.5, policy)
    assert v.ok is False and "Fetch on 10.0.0.9:9092: broker p99 22.5 ms, 2.0x its median 11.0 ms over 5" in v.detail
    (v,) = _judge(tmp_path, 500.0, policy, n=5)  # too few exchanges in this run for a p99
    assert v.ok is None


def test_the_history_as_delta_lake_tables(tmp_path):
    """--history-format delta: the same rows as Delta Lake tables, read back with deltalake itself; a
    run over the same inputs replaces its rows in one commit, every earlier state readable by
    version; a commit that fails on one table leaves every table's rows as they were."""
    import deltalake
    day = dt.datetime(2026, 11, 20, 2, 15, tzinfo=dt.timezone.utc)
    _run(tmp_path, "a", "d1", day, {"c1": ["Fetch v12"]}, 10.0, fmt="delta")
    _run(tmp_path, "b", "d2", day + dt.timedelta(days=1), {"c2": ["Fetch v12"], "c3": ["Fetch v12"]}, 11.0, fmt="delta")
    _run(tmp_path, "a2", "d1", day + dt.timedelta(days=2), {"c1": ["Fetch v13"]}, 12.0, fmt="delta")
    clients = deltalake.DeltaTable(str(tmp_path / "clients"))
    assert sorted((r["run_id"], r["client_id"]) for r in clients.to_pyarrow_table().to_pylist()) == \
        [("a2", "c1"), ("b", "c2"), ("b", "c3")]
    assert clients.metadata().partition_columns == ["run_date"] and clients.version() == 2
    assert clients.metadata().description == "spark_kafkawire audit history, format 1"
    old = deltalake.DeltaTable(str(tmp_path / "clients"), version=1).to_pyarrow_table().to_pylist()
    assert sorted((r["run_id"], r["client_id"]) for r in old) == [("a", "c1"), ("b", "c2"), ("b", "c3")]
    summary, seen = _earlier(tmp_path, "d3", "delta")
    assert sorted(r["run_id"] for r in summary) == ["a2", "b"] and len(seen) == 3
    # a run whose third table cannot be written: the first two are restored, no row of it stays
    now = history.tables(history.run_fields("c", (None, None), "d3"), _summary(40.0), [], {"clients": {"clients": [
        {"client_id": "c9", "client_ip": "10.0.0.1", "apis": [], "exchanges": 1}]}})
    # (a damaged commit in the clients table's log: the table cannot be read, nor written)
    log = tmp_path / "clients" / "_delta_log"
    (log / f"{clients.version() + 1:020d}.json").write_text("not a commit\n")
    with pytest.raises(OSError, match="clients: Kernel error: Json error"):
        history.DeltaStaged(str(tmp_path), now, "d3", "2026-11-23").commit()
    assert sorted(r["run_id"] for r in _earlier(tmp_path, "none", "delta")[0]) == ["a2", "b"]
    findings = deltalake.DeltaTable(str(tmp_path / "findings")).to_pyarrow_table()
    assert "c" not in findings.column("run_id").to_pylist()


def test_the_trends_are_the_history_tables_per_run(tmp_path, monkeypatch):
    """The Trends plots draw, per run, the history tables' own figures (read here with
    pyarrow.dataset) and this run's: exchanges, broker p99 per API, clients per library."""
    import pyarrow.dataset as ds

    from spark_kafkawire.audits import plots

    drawn: dict[str, dict] = {}
    monkeypatch.setattr(plots, "lines", lambda title, series, ylabel: drawn.setdefault(title, series) and title)
    day = dt.datetime(2026, 11, 20, 2, 15, tzinfo=dt.timezone.utc)
    for i, p99 in enumerate([10.0, 14.0, 9.0]):
        _run(tmp_path, f"r{i}", f"d{i}", day + dt.timedelta(days=i), {f"c{j}": ["Fetch v12"] for j in range(i + 1)}, p99)
    fields = history.run_fields("now", (None, None), "dn", now=(day + dt.timedelta(days=4)).timestamp())
    now = history.tables(fields, _summary(30.0, 70), [], {"clients": {"clients": [
        {"client_id": "x", "client_ip": "10.0.0.1", "apis": [], "exchanges": 1}]}})
    assert compare.trends(now, _earlier(tmp_path, "dn"))
    table = ds.dataset(str(tmp_path / "run_summary"), partitioning="hive").to_table().to_pylist()
    clients = ds.dataset(str(tmp_path / "clients"), partitioning="hive").to_table().to_pylist()
    want_exchanges = {r["run_time"]: r["exchanges"] for r in table} | {fields["run_time"]: 70}
    assert drawn["Exchanges per run"] == {"exchanges": want_exchanges}
    assert drawn["Broker p99 per API (ms)"] == {"Fetch": {r["run_time"]: r["broker_p99_ms"] for r in table}
                                                | {fields["run_time"]: 30.0}}
    per_run = {t: sum(1 for c in clients if c["run_time"] == t) for t in {c["run_time"] for c in clients}}
    assert drawn["Clients per library"] == {"unnamed": per_run | {fields["run_time"]: 1}}
    assert sorted(per_run.values()) == [1, 2, 3]
