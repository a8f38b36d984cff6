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


def stage_run(where: str, run_id: str, window: tuple[Any, Any], files: list[str], exchanges: int,
              summary: list[dict], verdicts: list, results: dict) -> Staged:
    """A run's history rows written beside their place in ``where`` (see History.stage)."""
    digest = inputs_digest(files, exchanges)
    run = run_fields(run_id, window, digest)
    return History(where).stage(tables(run, summary, verdicts, results), digest, run["run_time"].strftime("%Y-%m-%d"))


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
