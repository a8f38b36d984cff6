"""The audit job's history: what each run found, kept across runs so that later runs (and anyone
with Spark or pyarrow) can read trends.

Three tables, each a Hive-partitioned Parquet dataset (``run_date=YYYY-MM-DD``) under the history
directory (``OUT/history`` by default, ``--history PATH`` elsewhere, ``--history none`` off):

* ``run_summary``: one row per run, API and broker: exchanges, errors and the error names seen,
  latency and its network and broker parts at p50/p95/p99, bytes, segments sent again (errors as
  the audits count them: version negotiation is none);
* ``findings``: one row per run and policy verdict or client finding, with its status and evidence;
* ``clients``: one row per run and client (id and address): library, software, API versions sent.

Every row names its run: ``run_id`` (the output directory's run), ``run_time`` (when it ran),
``window_start``/``window_end`` (the captures' time window) and ``inputs_digest`` (a digest of the
capture files it read and how many exchanges they held). A run's rows are one file per table,
``run-<inputs_digest>.parquet``, written under a temporary name and renamed into place after the
report: a run again over the same captures replaces its own rows (in whichever date's partition
they were), a failed run adds nothing, and no other run's rows are touched.

Each file carries its format in its Parquet metadata (``kafkawire.history_format``: FORMAT; a Delta
table in its description, DELTA_FORMAT); a history holding a file of another format, or one that
is not Parquet, is said on stderr naming it and read as none (the run adds its own rows beside it).

``--history-format delta`` keeps the same tables as Delta Lake tables (``TABLE/``, partitioned by
``run_date``) through the ``deltalake`` package (no JVM): a run's rows go in with one MERGE per table
on the run's inputs digest (the rows of a run over the same inputs deleted, this run's inserted, in
one commit), so every earlier state stays readable by version (time travel).
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any, Iterable

import pyarrow as pa

from ..wire.fs import local_path, resolve

TABLES = ("run_summary", "findings", "clients")

#: the history's format: a file of another is refused by name (see _read)
FORMAT = "1"
FORMAT_KEY = b"kafkawire.history_format"
FORMATS = ("parquet", "delta")
#: a Delta table's description says its format (Delta's own table properties take no key of ours)
DELTA_FORMAT = f"spark_kafkawire audit history, format {FORMAT}"

#: the columns every history row starts with: the run it belongs to
RUN_FIELDS = [("run_id", pa.string()), ("run_time", pa.timestamp("us", tz="UTC")),
              ("window_start", pa.timestamp("us", tz="UTC")), ("window_end", pa.timestamp("us", tz="UTC")),
              ("inputs_digest", pa.string())]

SCHEMAS: dict[str, pa.Schema] = {
    "run_summary": pa.schema(RUN_FIELDS + [
        ("api_name", pa.string()), ("broker", pa.string()), ("exchanges", pa.int64()), ("errors", pa.int64()),
        *[(f"{what}_p{q}_ms", pa.float64()) for what in ("latency", "network", "broker") for q in (50, 95, 99)],
        ("bytes", pa.int64()), ("retransmissions", pa.int64()), ("error_names", pa.list_(pa.string()))]),
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
    from .metrics import MAX_CLIENT_SERIES, client_labels

    ap.add_argument("--metrics-file", metavar="PATH",
                    help="the run's metrics in Prometheus' text format (for the node exporter's textfile collector)")
    ap.add_argument("--pushgateway", metavar="URL", help="push the run's metrics to this Prometheus Pushgateway")
    ap.add_argument("--history", metavar="PATH",
                    help="where each run's summary, findings and clients are added (local or URI; default "
                         "OUT/history; 'none': no history); a run over the same captures replaces its own rows")
    ap.add_argument("--history-format", type=_history_format, default="parquet",
                    help="the history's tables as Parquet datasets (default) or Delta Lake tables (needs the "
                         "'delta' extra: pip install 'spark-kafkawire[delta]')")
    ap.add_argument("--metrics-labels", metavar="LABELS", default=(), type=client_labels,
                    help="client_id and/or client_address (comma-separated): add these labels to the exchange "
                         "metrics (unbounded in number and chosen by whoever connects: off by default; at most "
                         f"{MAX_CLIENT_SERIES} clients, the rest counted as client_id=\"other\")")


def _history_format(value: str) -> str:
    import argparse

    if value not in FORMATS:
        raise argparse.ArgumentTypeError(f"{value!r}: choose from {', '.join(FORMATS)}")
    if value == "delta":
        try:
            import deltalake  # noqa: F401
        except ImportError:
            raise argparse.ArgumentTypeError("'delta' needs the deltalake package: pip install "
                                             "'spark-kafkawire[delta]'") from None
    return value


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
           F.count(F.when(failed(), 1)).alias("errors"),  # (the audits' rule: version negotiation is none)
           F.array_sort(F.collect_set(F.when(failed(), F.coalesce("error_name", F.col("error_code").cast("string")))))
           .alias("error_names")]
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


def summary_rows(run: dict, summary: list[dict]) -> list[dict]:
    """run_summary's rows of a run (``run``: RUN_FIELDS' values; ``summary``: summary_frame's rows)."""
    out = []
    for s in summary:
        r = {**run, "api_name": s["api_name"], "broker": s["broker"], "exchanges": s["exchanges"],
             "errors": s["errors"], "bytes": s["bytes"], "retransmissions": s["retransmissions"],
             "error_names": list(s.get("error_names") or [])}
        for what in ("latency", "network", "broker"):
            qs = s[f"{what}_q"] or [None, None, None]
            for q, v in zip((50, 95, 99), qs):
                r[f"{what}_p{q}_ms"] = _num(v)
        out.append(r)
    return out


def tables(run: dict, summary: list[dict], verdicts: list, results: dict) -> dict[str, pa.Table]:
    """The run's rows of each history table. ``run``: RUN_FIELDS' values; ``summary``: summary_frame's
    rows; ``verdicts``: the policies' verdicts; ``results``: the audit tables as the job keeps them."""
    rows: dict[str, list[dict]] = {t: [] for t in TABLES}
    rows["run_summary"] = summary_rows(run, summary)
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
    return {t: pa.Table.from_pylist(rows[t], schema=SCHEMAS[t]).replace_schema_metadata({FORMAT_KEY: FORMAT})
            for t in TABLES}


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


class DeltaStaged:
    """A run's rows for Delta Lake tables, written at commit(): one MERGE per table on the run's
    inputs digest (the rows of a run over the same inputs deleted, this run's inserted, one commit
    each); where a table's commit fails, the tables already committed are restored to the version
    before this run, so that a failed run adds nothing."""

    def __init__(self, uri: str, run_tables: dict[str, pa.Table], digest: str, run_date: str):
        self.uri = uri.rstrip("/")
        self.digest = digest
        self.tables = {t: data.append_column("run_date", pa.array([run_date] * data.num_rows, pa.string()))
                       for t, data in run_tables.items()}

    def commit(self) -> None:
        from deltalake import DeltaTable, write_deltalake
        from deltalake.exceptions import DeltaError, TableNotFoundError

        done: list[tuple[Any, int | None]] = []
        try:
            for table, data in self.tables.items():
                path, opts = f"{self.uri}/{table}", delta_storage(self.uri)
                try:
                    dt = DeltaTable(path, storage_options=opts)
                except TableNotFoundError:
                    write_deltalake(path, data, partition_by=["run_date"], storage_options=opts,
                                    name=f"kafkawire_history_{table}", description=DELTA_FORMAT)
                    done.append((DeltaTable(path, storage_options=opts), None))
                    continue
                version = dt.version()
                # (no row matches: all of this run's are inserted; the target's rows no source row
                # matched that are of this run's inputs are deleted; one commit)
                (dt.merge(data, predicate="false", source_alias="s", target_alias="t")
                 .when_not_matched_insert_all()
                 .when_not_matched_by_source_delete(predicate=f"t.inputs_digest = '{self.digest}'")
                 .execute())
                done.append((dt, version))
        except BaseException as e:
            for dt, was in done:
                dt.update_incremental()
                if was is None:  # (a table this run created: none of its rows stay)
                    dt.delete()
                elif dt.version() > was:  # (a merge of no rows commits nothing)
                    dt.restore(was)
            if isinstance(e, DeltaError):  # (its first line says what; the rest is the writer's backtrace)
                raise OSError(f"{path}: {(str(e).strip().splitlines() or [type(e).__name__])[0]}") from None
            raise

    def discard(self) -> None:
        """(nothing of the run is written before commit)"""


def run_fields(run_id: str, window: tuple[Any, Any], digest: str, now: float | None = None) -> dict:
    """RUN_FIELDS' values for a run (``window``: the captures' first and last exchange times)."""
    import datetime as dt

    when = dt.datetime.fromtimestamp(time.time() if now is None else now, dt.timezone.utc)
    return {"run_id": run_id, "run_time": when, "window_start": window[0], "window_end": window[1],
            "inputs_digest": digest}


class Past:
    """Where a run's history is and what it holds of other runs: ``where`` (its URI), ``fmt``
    (FORMATS), ``digest`` (this run's inputs_digest), ``run`` (this run's RUN_FIELDS values), and
    the history's run_summary and clients rows of other runs than this one's inputs (read once)."""

    def __init__(self, where: str, fmt: str, digest: str, run: dict):
        self.where, self.fmt, self.digest, self.run = where, fmt, digest, run
        self.summary = [r for r in _read(where, "run_summary", fmt) if r["inputs_digest"] != digest]
        self.clients = [r for r in _read(where, "clients", fmt) if r["inputs_digest"] != digest]

    @property
    def earlier(self) -> tuple[list[dict], list[dict]]:
        return self.summary, self.clients



def past(args: Any, out: Any, span: Any, files: list[str]) -> Past | None:
    """The run's place in its history (the job's --history, --history-format; None with --history
    none), read before anything of this run is written. ``span``: the run's first and last exchange
    times (a, b) and its exchange count (n); ``files``: the capture files it read."""
    if args.history == "none":
        return None
    digest = inputs_digest(files, span["n"])
    return Past(args.history or f"{out.uri}/history", args.history_format, digest,
                run_fields(out.run_id, (span["a"], span["b"]), digest))


def judged_on_history(before: Past | None, policy: Any, summary: list[dict]) -> list:
    """The policies judged against the history (compare.growth_verdicts) for this run's ``summary``
    (summary_frame's rows); ``before``: None without a history (--history none)."""
    from .compare import growth_verdicts

    if before is None:
        return growth_verdicts(policy, [], None)
    return growth_verdicts(policy, summary_rows(before.run, summary), before.earlier)


def stage_run(before: Past | None, summary: list[dict], verdicts: list, results: dict,
              growth: float | None = None) -> tuple[Any, list[tuple[str, str]] | None, list[str]]:
    """A run's history rows made ready to go in (Parquet: written beside their place, see
    History.stage; Delta: kept until commit), what changed since the last run the history holds
    (compare.since_last; ``growth``: the policy's max_broker_p99_growth, the factor a regression is
    beyond), and the Trends plots (compare.trends)."""
    from .compare import since_last, trends

    if before is None:
        return None, None, []
    now = tables(before.run, summary, verdicts, results)
    since, plots = since_last(now, before.earlier, growth), trends(now, before.earlier)
    date = before.run["run_time"].strftime("%Y-%m-%d")
    if before.fmt == "delta":
        return DeltaStaged(before.where, now, before.digest, date), since, plots
    return History(before.where).stage(now, before.digest, date), since, plots


def write_with(write: Any, staged: Any) -> Any:
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


def _read(where: str, table: str, fmt: str = "parquet") -> list[dict]:
    """A history table's rows (none where there is no history yet). A table that cannot be read, or
    whose files are not this version's (another format or schema, a file that is not Parquet), is
    said on stderr, naming it, and taken as no history: the run goes on and adds its own rows."""
    path = f"{where.rstrip('/')}/{table}"
    try:
        data = _delta_table(path) if fmt == "delta" else _parquet_table(where, table)
    except FileNotFoundError:
        return []
    except _Refused as e:
        _unreadable(e.args[0], e.args[1])
        return []
    except (OSError, pa.ArrowException) as e:
        _unreadable(path, str(e))
        return []
    if data is None:
        return []
    missing = [f.name for f in SCHEMAS[table] if f.name not in data.column_names]
    if missing and data.num_rows == 0:  # (folders without a file yet: no history)
        return []
    if missing:
        _unreadable(path, f"no column {', '.join(missing)}")
        return []
    return data.to_pylist()


class _Refused(Exception):
    """(path, why): a history file of another format."""


def _parquet_table(where: str, table: str) -> pa.Table | None:
    import pyarrow.dataset as ds

    local = local_path(where.rstrip("/"))
    if local is not None:
        if not os.path.isdir(f"{local}/{table}"):
            return None
        data = ds.dataset(f"{local}/{table}", format="parquet", partitioning="hive")
    else:
        fs, base = resolve(where.rstrip("/"))
        data = ds.dataset(f"{base}/{table}", filesystem=fs, format="parquet", partitioning="hive")
    for fragment in data.get_fragments():
        said = (fragment.physical_schema.metadata or {}).get(FORMAT_KEY)
        if said != FORMAT.encode():
            what = f"history format {said.decode('utf-8', 'replace')!r}" if said else "no history format"
            raise _Refused(fragment.path, f"{what}; this version reads format {FORMAT!r}")
    return data.to_table()


def _delta_table(path: str) -> pa.Table | None:
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    try:
        dt = DeltaTable(path, storage_options=delta_storage(path))
    except TableNotFoundError:
        return None
    except DeltaError as e:  # (a damaged log: its first line says what; the rest is the writer's backtrace)
        raise OSError((str(e).strip().splitlines() or [type(e).__name__])[0]) from None
    said = dt.metadata().description
    if said != DELTA_FORMAT:
        raise _Refused(path, f"its description says {said!r}, not {DELTA_FORMAT!r}")
    return dt.to_pyarrow_table()


def delta_storage(uri: str) -> dict[str, str] | None:
    """deltalake's storage options for ``uri``: an s3:// URI's endpoint from AWS_ENDPOINT_URL (plain
    HTTP allowed where it says http://); credentials from the environment as for any AWS client."""
    if not uri.startswith("s3://"):
        return None
    opts = {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        opts["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            opts["AWS_ALLOW_HTTP"] = "true"
    opts.setdefault("AWS_REGION", os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    return opts


def _unreadable(path: str, why: str) -> None:
    from ..carry import warn_user

    warn_user(f"history {path} cannot be read ({why[:300]}): this run is compared with no earlier run")
