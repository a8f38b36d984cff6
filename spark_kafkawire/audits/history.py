"""The audit job's history: what each run found, kept across runs so that later runs (and anyone
with Spark or pyarrow) can read trends.

Three tables, each a Hive-partitioned Parquet dataset (``run_date=YYYY-MM-DD``) under the history
directory (``OUT/history`` by default, ``--history PATH`` elsewhere, ``--history none`` off):

* ``run_summary``: one row per run, API and broker: exchanges, errors, latency and its network and
  broker parts at p50/p95/p99, bytes, segments sent again (errors as the audits count them: version
  negotiation is none);
* ``findings``: one row per run and policy verdict or client finding, with its status and evidence;
* ``clients``: one row per run and client (id and address): library, software, API versions sent.

Every row names its run: ``run_id`` (the output directory's run), ``run_time`` (when it ran),
``window_start``/``window_end`` (the captures' time window) and ``inputs_digest`` (a digest of the
capture files it read and how many exchanges they held). A run's rows are one file per table,
``run-<inputs_digest>.parquet``, written under a temporary name and renamed into place after the
report: a run again over the same captures replaces its own rows (in whichever date's partition
they were), a failed run adds nothing, and no other run's rows are touched.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any, Iterable

import pyarrow as pa

from ..wire.fs import local_path, resolve

TABLES = ("run_summary", "findings", "clients")

#: the columns every history row starts with: the run it belongs to
RUN_FIELDS = [("run_id", pa.string()), ("run_time", pa.timestamp("us", tz="UTC")),
              ("window_start", pa.timestamp("us", tz="UTC")), ("window_end", pa.timestamp("us", tz="UTC")),
              ("inputs_digest", pa.string())]

SCHEMAS: dict[str, pa.Schema] = {
    "run_summary": pa.schema(RUN_FIELDS + [
        ("api_name", pa.string()), ("broker", pa.string()), ("exchanges", pa.int64()), ("errors", pa.int64()),
        *[(f"{what}_p{q}_ms", pa.float64()) for what in ("latency", "network", "broker") for q in (50, 95, 99)],
        ("bytes", pa.int64()), ("retransmissions", pa.int64())]),
    "findings": pa.schema(RUN_FIELDS + [
        ("kind", pa.string()), ("name", pa.string()), ("status", pa.string()), ("client_id", pa.string()),
        ("client_ip", pa.string()), ("value", pa.float64()), ("threshold", pa.float64()), ("evidence", pa.string())]),
    "clients": pa.schema(RUN_FIELDS + [
        ("client_id", pa.string()), ("client_ip", pa.string()), ("client_library", pa.string()),
        ("software_name", pa.string()), ("software_version", pa.string()), ("apis", pa.list_(pa.string())),
        ("exchanges", pa.int64())]),
}


def flags(ap: Any) -> None:
    """The job's flags for what outlives a run: its history and its metrics (metrics.py)."""
    ap.add_argument("--metrics-file", metavar="PATH",
                    help="the run's metrics in Prometheus' text format (for the node exporter's textfile collector)")
    ap.add_argument("--pushgateway", metavar="URL", help="push the run's metrics to this Prometheus Pushgateway")
    ap.add_argument("--history", metavar="PATH",
                    help="where each run's summary, findings and clients are added (local or URI; default "
                         "OUT/history; 'none': no history); a run over the same captures replaces its own rows")


def inputs_digest(files: Iterable[str], exchanges: int) -> str:
    """A digest of what a run read: its capture files (sorted) and the exchanges they held."""
    h = hashlib.sha256()
    for f in sorted(set(files)):
        h.update(f.encode("utf-8", "surrogateescape") + b"\0")
    h.update(str(exchanges).encode())
    return h.hexdigest()[:16]


def summary_frame(exchanges: Any) -> Any:
    """run_summary's figures per API and broker, as a Spark DataFrame of the exchange rows."""
    from pyspark.sql import functions as F

    from ..decode.status import CAPTURE_CHANGED, CAPTURE_DAMAGED, TLS
    from .base import failed

    ex = exchanges.where(F.col("api_name").isNotNull() & ~F.col("status").isin(CAPTURE_DAMAGED, CAPTURE_CHANGED, TLS))
    broker = F.concat_ws(":", "broker_ip", F.col("broker_port").cast("string"))
    quantiles = [0.5, 0.95, 0.99]
    agg = [F.count("*").alias("exchanges"),
           F.count(F.when(failed(), 1)).alias("errors")]  # (the audits' rule: version negotiation is none)
    for what, col in (("latency", "latency_ms"), ("network", "network_ms"), ("broker", "broker_ms")):
        agg.append(F.percentile_approx(col, quantiles, 10000).alias(f"{what}_q"))
    agg += [F.sum(F.coalesce("request_size", F.lit(0)) + F.coalesce("response_size", F.lit(0))).alias("bytes"),
            F.sum(F.coalesce("retransmissions", F.lit(0))).alias("retransmissions")]
    return ex.groupBy("api_name", broker.alias("broker")).agg(*agg)


def _num(v: Any) -> float | None:
    try:
        return None if v is None or isinstance(v, bool) else float(v)
    except (TypeError, ValueError):
        return None


def tables(run: dict, summary: list[dict], verdicts: list, results: dict) -> dict[str, pa.Table]:
    """The run's rows of each history table. ``run``: RUN_FIELDS' values; ``summary``: summary_frame's
    rows; ``verdicts``: the policies' verdicts; ``results``: the audit tables as the job keeps them."""
    rows: dict[str, list[dict]] = {t: [] for t in TABLES}
    for s in summary:
        r = {**run, "api_name": s["api_name"], "broker": s["broker"], "exchanges": s["exchanges"],
             "errors": s["errors"], "bytes": s["bytes"], "retransmissions": s["retransmissions"]}
        for what in ("latency", "network", "broker"):
            qs = s[f"{what}_q"] or [None, None, None]
            for q, v in zip((50, 95, 99), qs):
                r[f"{what}_p{q}_ms"] = _num(v)
        rows["run_summary"].append(r)
    for v in verdicts:
        rows["findings"].append({**run, "kind": "policy", "name": v.name, "status": v.status, "evidence": v.detail})
    for f in results.get("client_hygiene", {}).get("client_hygiene", []):
        rows["findings"].append({**run, "kind": "client_hygiene", "name": f.get("finding"), "status": "finding",
                                 "client_id": f.get("client_id"), "client_ip": f.get("client_ip"),
                                 "value": _num(f.get("value")), "threshold": _num(f.get("threshold")),
                                 "evidence": f.get("evidence")})
    for c in results.get("clients", {}).get("clients", []):
        rows["clients"].append({**run, "client_id": c.get("client_id"), "client_ip": c.get("client_ip"),
                                "client_library": c.get("client_library") or None,
                                "software_name": c.get("software_name") or None,
                                "software_version": c.get("software_version") or None,
                                "apis": list(c.get("apis") or []), "exchanges": c.get("exchanges")})
    return {t: pa.Table.from_pylist(rows[t], schema=SCHEMAS[t]) for t in TABLES}


class History:
    """The history directory (local or a URI): each run's rows added, a run over the same inputs
    replacing its own."""

    def __init__(self, uri: str):
        self.uri = uri.rstrip("/")
        self.local = local_path(self.uri)

    def write(self, run_tables: dict[str, pa.Table], digest: str, run_date: str) -> None:
        """stage() then commit()."""
        self.stage(run_tables, digest, run_date).commit()

    def stage(self, run_tables: dict[str, pa.Table], digest: str, run_date: str) -> "Staged":
        """Each table's rows of one run written under a temporary name beside its place,
        ``TABLE/run_date=D/run-<digest>.parquet`` (a write that fails leaves nothing)."""
        import pyarrow.parquet as pq

        name = f"run-{digest}.parquet"
        staged = Staged(self, name)
        fs, base = staged.fs, staged.base
        try:
            for table, data in run_tables.items():
                folder = f"{base}/{table}/run_date={run_date}"
                tmp = f"{folder}/.{name}.{os.getpid()}.tmp"
                if fs is None:
                    os.makedirs(folder, exist_ok=True)
                    pq.write_table(data, tmp)
                else:
                    fs.create_dir(folder)
                    with fs.open_output_stream(tmp) as f:
                        pq.write_table(data, f)
                staged.files.append((table, folder, tmp))
        except BaseException:
            staged.discard()
            raise
        return staged

    @staticmethod
    def _remove(fs: Any, path: str) -> None:
        try:
            if fs is None:
                os.unlink(path)
            else:
                fs.delete_file(path)
        except (OSError, FileNotFoundError):
            pass

    def _drop_local(self, table: str, name: str, keep: str) -> None:
        root = f"{self.local}/{table}"
        for d in os.listdir(root):
            path = f"{root}/{d}"
            if d.startswith("run_date=") and path != keep and os.path.exists(f"{path}/{name}"):
                os.unlink(f"{path}/{name}")

    def _drop_remote(self, fs: Any, root: str, name: str, keep: str) -> None:
        import pyarrow.fs as pafs

        for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
            if info.type == pafs.FileType.File and info.base_name == name and not info.path.startswith(keep + "/"):
                fs.delete_file(info.path)


class Staged:
    """A run's history files written under temporary names: commit() puts them in place (that run's
    file of any other date removed), discard() removes them."""

    def __init__(self, history: History, name: str):
        self.history = history
        self.name = name
        self.fs: Any = None
        self.base: str = history.local or ""
        if history.local is None:
            self.fs, self.base = resolve(history.uri)
        self.files: list[tuple[str, str, str]] = []  # (table, folder, temporary file)

    def commit(self) -> None:
        h, name, fs = self.history, self.name, self.fs
        for table, folder, tmp in self.files:
            if fs is None:
                h._drop_local(table, name, keep=folder)
                os.replace(tmp, f"{folder}/{name}")
            else:
                h._drop_remote(fs, f"{self.base}/{table}", name, keep=folder)
                fs.move(tmp, f"{folder}/{name}")
        self.files = []

    def discard(self) -> None:
        for _t, _f, tmp in self.files:
            History._remove(self.fs, tmp)
        self.files = []


def run_fields(run_id: str, window: tuple[Any, Any], digest: str, now: float | None = None) -> dict:
    """RUN_FIELDS' values for a run (``window``: the captures' first and last exchange times)."""
    import datetime as dt

    when = dt.datetime.fromtimestamp(time.time() if now is None else now, dt.timezone.utc)
    return {"run_id": run_id, "run_time": when, "window_start": window[0], "window_end": window[1],
            "inputs_digest": digest}


def stage_run(history: str | None, out: Any, span: Any, files: list[str], summary: list[dict], verdicts: list,
              results: dict) -> tuple[Staged | None, list[tuple[str, str]] | None, list[str]]:
    """A run's history rows written beside their place (see History.stage) in ``history`` (the
    job's --history: None for OUT/history, "none" for no history), what changed since the last run
    the history holds (since_last), and the Trends plots (trends). ``span``: the run's first and
    last exchange times (a, b) and its exchange count (n)."""
    if history == "none":
        return None, None, []
    where = history or f"{out.uri}/history"
    digest = inputs_digest(files, span["n"])
    run = run_fields(out.run_id, (span["a"], span["b"]), digest)
    now = tables(run, summary, verdicts, results)
    earlier = _earlier(where, digest)  # (read once, before this run's files are staged)
    since, plots = since_last(where, now, digest, earlier), trends(where, now, digest, earlier)
    return History(where).stage(now, digest, run["run_time"].strftime("%Y-%m-%d")), since, plots


def write_with(write: Any, staged: Staged | None) -> Any:
    """``write()`` (the run's report), then the staged history put in place; where the write fails,
    the history is left as it was."""
    try:
        done = write()
    except BaseException:
        if staged is not None:
            staged.discard()
        raise
    if staged is not None:
        staged.commit()
    return done


#: a figure beyond this many times its own median over the last RECENT runs is a regression
GROWTH = 2.0
RECENT = 5


def _read(where: str, table: str) -> list[dict]:
    """A history table's rows (none where there is no history yet). A table that cannot be read, or
    whose files are not this version's (another schema, a file that is not Parquet), is said on
    stderr, naming it, and taken as no history: the run goes on and adds its own rows."""
    import pyarrow.dataset as ds

    local = local_path(where.rstrip("/"))
    try:
        if local is not None:
            path = f"{local}/{table}"
            if not os.path.isdir(path):
                return []
            data = ds.dataset(path, format="parquet", partitioning="hive").to_table()
        else:
            fs, base = resolve(where.rstrip("/"))
            path = f"{where.rstrip('/')}/{table}"
            data = ds.dataset(f"{base}/{table}", filesystem=fs, format="parquet", partitioning="hive").to_table()
    except FileNotFoundError:
        return []
    except (OSError, pa.ArrowException) as e:
        _unreadable(path, str(e))
        return []
    missing = [f.name for f in SCHEMAS[table] if f.name not in data.column_names]
    if missing and data.num_rows == 0:  # (folders without a file yet: no history)
        return []
    if missing:
        _unreadable(path, f"no column {', '.join(missing)}")
        return []
    return data.to_pylist()


def _unreadable(path: str, why: str) -> None:
    from ..carry import warn_user

    warn_user(f"history {path} cannot be read ({why[:300]}): this run is compared with no earlier run")


def _median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def _names(items: Iterable[str], most: int = 12) -> str:
    got = sorted(items)
    return ", ".join(got[:most]) + (f" and {len(got) - most} more" if len(got) > most else "")


def _earlier(where: str, digest: str) -> tuple[list[dict], list[dict]]:
    """The history's run_summary and clients rows of other runs than ``digest``'s (read once a run)."""
    return ([r for r in _read(where, "run_summary") if r["inputs_digest"] != digest],
            [r for r in _read(where, "clients") if r["inputs_digest"] != digest])


def since_last(where: str, now: dict[str, pa.Table], digest: str,
               earlier: tuple[list[dict], list[dict]] | None = None) -> list[tuple[str, str]] | None:
    """What changed since the last run in the history (another run's inputs than ``digest``), as
    (what, evidence) lines for the report's top; None where the history holds no other run."""
    summary, clients = earlier if earlier is not None else _earlier(where, digest)
    runs = sorted({(r["run_time"], r["run_id"]) for r in summary + clients})
    if not runs:
        return None
    last = runs[-1][1]
    when = str(runs[-1][0])[:19]
    out: list[tuple[str, str]] = []
    cur_clients = now["clients"].to_pylist()
    was = {(r["client_id"], r["client_ip"]) for r in clients if r["run_id"] == last}
    is_ = {(r["client_id"], r["client_ip"]) for r in cur_clients}
    label = lambda c: f"{c[0]}@{c[1]}"  # noqa: E731
    if is_ - was:
        out.append((f"{len(is_ - was)} new client(s)", _names(label(c) for c in is_ - was)))
    if was - is_:
        out.append((f"{len(was - is_)} client(s) gone", _names(label(c) for c in was - is_)))
    sent_was: dict[str, set] = {}
    sent_now: dict[str, set] = {}
    for rows, into in (([r for r in clients if r["run_id"] == last], sent_was), (cur_clients, sent_now)):
        for r in rows:
            for api in r["apis"] or []:
                into.setdefault(api, set()).add((r["client_id"], r["client_ip"]))
    for api in sorted(set(sent_now) - set(sent_was)):
        out.append((f"{api} newly sent",
                    f"by {len(sent_now[api])} client(s): {_names(label(c) for c in sent_now[api])}"))
    for api in sorted(set(sent_was) - set(sent_now)):
        out.append((f"{api} no longer sent", f"{len(sent_was[api])} client(s) sent it in the last run"))
    for api in sorted(set(sent_was) & set(sent_now)):
        if len(sent_now[api]) != len(sent_was[api]):
            out.append((f"{api}", f"{len(sent_now[api])} client(s) send it; {len(sent_was[api])} in the last run"))
    out += _regressions(summary, now["run_summary"].to_pylist(), runs)
    errors_was = {r["api_name"] for r in summary if r["run_id"] == last and r["errors"]}
    for r in now["run_summary"].to_pylist():
        if r["errors"] and r["api_name"] not in errors_was:
            out.append((f"{r['api_name']} errors", f"{r['errors']} at {r['broker']}; none in the last run"))
    head = f"since the run of {when} UTC"
    return [(head, "")] + out if out else [(head, "nothing changed")]


def _regressions(summary: list[dict], now: list[dict], runs: list) -> list[tuple[str, str]]:
    """Broker p99 per API and broker beyond GROWTH times its median over the last RECENT runs."""
    recent = {run_id for _t, run_id in runs[-RECENT:]}
    past: dict[tuple[str, str], list[float]] = {}
    for r in summary:
        if r["run_id"] in recent and r["broker_p99_ms"] is not None:
            past.setdefault((r["api_name"], r["broker"]), []).append(r["broker_p99_ms"])
    out = []
    for r in now:
        seen = past.get((r["api_name"], r["broker"]))
        v = r["broker_p99_ms"]
        if seen and v is not None:
            m = _median(seen)
            if m > 0 and v > GROWTH * m:
                out.append((f"{r['api_name']} broker p99 at {r['broker']}",
                            f"{v:.1f} ms, {v / m:.1f}x its median {m:.1f} ms over the last {len(seen)} run(s)"))
    return out


#: the most series a trend plot draws (the busiest), and the most runs (the latest)
TREND_SERIES = 12
TREND_RUNS = 60


def trends(where: str, now: dict[str, pa.Table], digest: str,
           earlier: tuple[list[dict], list[dict]] | None = None) -> list[str]:
    """The report's Trends plots (SVG), one point per run in the history and this run: exchanges and
    the error rate, network and broker p99 per API (the slowest broker's), segments sent again,
    clients per library. None with fewer than two runs."""
    from .plots import lines

    past_summary, past_clients = earlier if earlier is not None else _earlier(where, digest)
    summary = past_summary + now["run_summary"].to_pylist()
    clients = past_clients + now["clients"].to_pylist()
    times = sorted({r["run_time"] for r in summary + clients})[-TREND_RUNS:]
    if len(times) < 2:
        return []
    keep = set(times)
    per_run: dict[str, dict] = {"exchanges": {}, "errors": {}, "resent": {}}
    p99: dict[str, dict[str, dict]] = {"network": {}, "broker": {}}
    for r in summary:
        t = r["run_time"]
        if t not in keep:
            continue
        per_run["exchanges"][t] = per_run["exchanges"].get(t, 0) + (r["exchanges"] or 0)
        per_run["errors"][t] = per_run["errors"].get(t, 0) + (r["errors"] or 0)
        per_run["resent"][t] = per_run["resent"].get(t, 0) + (r["retransmissions"] or 0)
        for what in p99:
            v = r[f"{what}_p99_ms"]
            if v is not None:
                points = p99[what].setdefault(r["api_name"], {})
                points[t] = max(points.get(t, 0.0), v)
    libraries: dict[str, dict] = {}
    for r in clients:
        if r["run_time"] in keep:
            points = libraries.setdefault(r["client_library"] or "unnamed", {})
            points[r["run_time"]] = points.get(r["run_time"], 0) + 1
    rate = {t: per_run["errors"][t] / n for t, n in per_run["exchanges"].items() if n}

    def busiest(series: dict[str, dict]) -> dict[str, dict]:
        top = sorted(series, key=lambda k: -max(series[k].values()))[:TREND_SERIES]
        return {k: series[k] for k in sorted(top)}

    return [lines("Exchanges per run", {"exchanges": per_run["exchanges"]}, "exchanges"),
            lines("Error rate per run", {"errored share": rate}, "share of exchanges"),
            lines("Network p99 per API (ms)", busiest(p99["network"]), "ms"),
            lines("Broker p99 per API (ms)", busiest(p99["broker"]), "ms"),
            lines("Segments sent again per run", {"retransmissions": per_run["resent"]}, "segments"),
            lines("Clients per library", busiest(libraries), "clients")]
