"""The audit history's rules without Spark: one file per run and table, a run over the same inputs
replacing its own, what changed since the last run, and a history that is not this version's
(a planted file) read as none, said on stderr."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from spark_kafkawire.audits import history


def _run(where: Path, run_id: str, digest: str, when: dt.datetime, clients: dict[str, list[str]],
         broker_p99: float | None = None) -> dict:
    fields = {"run_id": run_id, "run_time": when, "window_start": None, "window_end": None, "inputs_digest": digest}
    results = {"clients": {"clients": [{"client_id": c, "client_ip": "10.0.0.1", "apis": apis, "exchanges": 1}
                                       for c, apis in clients.items()]}}
    summary = [{"api_name": "Fetch", "broker": "10.0.0.9:9092", "exchanges": 10, "errors": 0, "bytes": 1,
                "retransmissions": 0, "latency_q": None, "network_q": None,
                "broker_q": None if broker_p99 is None else [1.0, 2.0, broker_p99]}]
    now = history.tables(fields, summary, [], results)
    history.History(str(where)).write(now, digest, when.strftime("%Y-%m-%d"))
    return now


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
                "retransmissions": 0, "latency_q": None, "network_q": None, "broker_q": [1.0, 2.0, 25.0]}]
    lines = dict(history.since_last(str(tmp_path), history.tables(fields, summary, [], results), "dn"))
    assert lines["1 new client(s)"] == "new@10.0.0.2" and lines["1 client(s) gone"] == "old@10.0.0.1"
    assert lines["Fetch v13 newly sent"].startswith("by 2 client(s)")
    assert "Produce v3 no longer sent" in lines and "Fetch v12 no longer sent" in lines
    assert lines["Fetch broker p99 at 10.0.0.9:9092"].startswith("25.0 ms, 2.5x its median 10.0 ms over the last 5")
    assert lines["Fetch errors"] == "2 at 10.0.0.9:9092; none in the last run"
    # the same inputs as the last run: compared with the run before it, never with itself
    assert history.since_last(str(tmp_path), history.tables(fields, summary, [], results), "d4")[0][0] == \
        f"since the run of {day + dt.timedelta(days=3):%Y-%m-%d %H:%M:%S} UTC"


def test_a_history_that_is_not_this_versions_is_none_and_said(tmp_path, capsys):
    folder = tmp_path / "clients" / "run_date=2026-11-20"
    folder.mkdir(parents=True)
    (folder / "run-planted.parquet").write_bytes(b"PAR1 not parquet at all")
    assert history._read(str(tmp_path), "clients") == []
    err = capsys.readouterr().err
    assert "history" in err and "clients" in err and "cannot be read" in err
    assert history.since_last(str(tmp_path), history.tables(
        {"run_id": "x", "run_time": None, "window_start": None, "window_end": None, "inputs_digest": "x"}, [], [], {}),
        "x") is None


def test_a_history_without_files_yet_is_none_and_says_nothing(tmp_path, capsys):
    (tmp_path / "run_summary" / "run_date=2026-11-20").mkdir(parents=True)
    assert history._read(str(tmp_path), "run_summary") == [] and capsys.readouterr().err == ""
