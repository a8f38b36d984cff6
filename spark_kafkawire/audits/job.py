"""The audit job (jobs/audit.py): decode captures, run every audit, write Parquet and report.html, check policies.

    python jobs/audit.py CAPTURES... [--out DIR] [--config audit.toml] [--target-release 4.0]
    spark-submit jobs/audit.py CAPTURES... --out s3://bucket/audits
    python jobs/audit.py DIR --incremental --checkpoint CKPT --out DIR   (only files not seen before)

Writes under --out: rows/<shape>/ (the exchanges, connections and partitions rows), one directory
per audit with one Parquet table per result (replaced whole: it describes rows/), partitioned by
capture_date, report.html (one self-contained page) and run.json (running, complete or failed).
One run at a time per --out, and nothing half-written looks complete (see audits/output.py).
Prints the verdicts, the exchange summary and where the report is.

Reader options (README, Options) with --option KEY=VALUE, repeated: e.g. --option minPartitions=8
to read a few large captures in shares on a cluster's cores.

Every verdict rests on the evidence it names: capture_health's coverage table (always computed)
says per Kafka listener how much was decoded. A verdict is [ok] only when it saw enough of what it
checks; with nothing relevant decoded, or where undecoded traffic on a Kafka listener (TLS without
its key log, bytes the capture lost) could hide what it checks, it is [inconclusive] and says why
in one line. --tls-keylog FILE decrypts TLS.

Exit status: 0 every verdict holds; 2 a policy fails; 3 none fails but one is inconclusive (or an
--incremental run found nothing new); 1 an error (bad path or option, an --out in use, read-only or
full: one line).

While it runs it says on stderr what it is doing (--quiet: nothing).

Policies: each has a flag (--max-error-rate 0.01) and is a key of a TOML/JSON --config file (the flag's
name with underscores); --help lists them all, made from their declaration (audits/base.py's Policy),
and every value is checked for its type and range before Spark starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .loading import QUICK_JIT_INPUT, SMALL_INPUT, input_bytes, load_rows, local_scan, local_within, no_rows

AUDIT_THREADS = 3  # audits collected at once (each a few small Spark jobs: mostly planning and scheduling)



def _config(path: str | None) -> dict:
    if not path:
        return {}
    text = Path(path).read_text()
    if path.endswith(".json"):
        return json.loads(text)
    import tomllib

    return tomllib.loads(text)


def _policy_flags(ap) -> None:
    """A flag for every policy, made from its declaration (audits.base.Policy: type, default and the
    comment beside it): --max-error-rate 0.01, --allow-weak-tls, --hygiene-fail-on acks0,metadata_storm."""
    from . import Policy
    from .base import policy_help

    group = ap.add_argument_group("policies (also keys of a --config file, with underscores)")
    defaults = Policy()
    for name, (kind, meaning) in policy_help().items():
        flag, default = "--" + name.replace("_", "-"), getattr(defaults, name)
        said = "not judged" if default is None else ("off" if default is False else "none" if default in ([], {})
                                                     else default)
        text = f"{meaning} (default: {said})" if meaning else f"(default: {said})"
        if name == "target_release":  # the releases the release table holds, from the table itself
            from .. import protocol
            text += ": " + ", ".join(protocol.releases())
        if name == "max_p99_ms":
            group.add_argument("--max-p99", action="append", default=[], metavar="API=MS",
                               help="p99 bound for an api, repeat: " + text)
        elif kind == "bool":
            group.add_argument(flag, dest=name, action="store_true", default=None, help=text)
        elif kind.startswith(("int", "float")):
            group.add_argument(flag, dest=name, type=float if kind.startswith("float") else int, metavar="N", help=text)
        elif kind.startswith("list"):
            group.add_argument(flag, dest=name, metavar="A,B", type=lambda v: [x for x in v.split(",") if x], help=text)
        else:
            group.add_argument(flag, dest=name, metavar="VALUE", help=text)


def parse(argv: list[str]):
    from ..arguments import OneLineParser
    from .history import flags

    ap = OneLineParser(prog="audit.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="+", help="capture files, directories, globs or URIs (s3://...)")
    ap.add_argument("--out", default="out/audit", help="output directory (local or URI; default out/audit)")
    ap.add_argument("--config", help="policies and thresholds (.toml or .json)")
    flags(ap)  # --history, --metrics-file, --pushgateway (history.py)
    _policy_flags(ap)
    ap.add_argument("--tls-keylog", metavar="FILE",
                    help="TLS key log(s), comma-separated: TLS connections are decrypted (reader option tlsKeyLog)")
    ap.add_argument("--quiet", action="store_true", help="nothing on stderr while it runs")
    ap.add_argument("--driver-decode-max", type=int, default=SMALL_INPUT, metavar="BYTES",
                    help="local captures of at most this many bytes in all are decoded by the driver (default "
                         f"{SMALL_INPUT >> 20} MiB; 0: never); larger ones by processes of this machine while Spark "
                         "starts; under spark-submit or from object storage, by Spark tasks")
    ap.add_argument("--ports", help="only connections on these TCP ports (comma-separated)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a reader option (repeat), e.g. minPartitions=8 (see README, Options)")
    from . import AUDITS

    ap.add_argument("--audits", metavar="NAME,...",
                    help=f"comma-separated audits to run (default: all): {', '.join(AUDITS)}")
    ap.add_argument("--incremental", action="store_true",
                    help="read only capture files not read before (a streaming read with --checkpoint)")
    ap.add_argument("--checkpoint", help="checkpoint directory of --incremental runs")
    ap.add_argument("--max-files-per-trigger", type=int, default=None, help="with --incremental: files per batch")
    ap.add_argument("--verbose", action="store_true",
                    help="Spark's own log (errors) on stderr (by default in a file named if the run fails)")
    from ..options import StreamOptions

    settle = StreamOptions().complete_after_seconds
    ap.add_argument("--complete-after-seconds", type=float, default=settle,
                    help="with --incremental: a rotation series' newest file counts as complete after this "
                         "long unchanged (default %(default)g, the stream's completeAfterSeconds)")
    return ap.parse_args(argv)


def policy_from(args):
    from . import Policy
    from .base import check_policy

    cfg = _config(args.config)
    known = set(Policy.__dataclass_fields__)
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise ValueError(f"{args.config}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    p = Policy(**cfg)
    check_policy(p, args.config or "the defaults")  # the file's values, before the flags change them
    for name in Policy.__dataclass_fields__:
        v = getattr(args, name, None)
        if v is not None:
            setattr(p, name, v)
    p.max_p99_ms = dict(p.max_p99_ms)
    for item in args.max_p99:
        api, _, ms = item.partition("=")
        try:
            p.max_p99_ms[api] = float(ms)
        except ValueError:
            raise ValueError(f"--max-p99 {item!r}: give API=MILLISECONDS, e.g. Produce=500") from None
    check_policy(p)  # (the file's were checked: what is wrong now came with a flag)
    from .. import protocol

    releases = list(protocol.releases())
    if p.target_release not in releases:
        raise ValueError(f"target release {p.target_release!r} is not one of {', '.join(releases)} (the releases "
                         "whose version tables spark_kafkawire/protocol/releases.tsv holds)")
    from .client_hygiene import FINDINGS

    if isinstance(p.hygiene_fail_on, str) or not all(isinstance(f, str) for f in p.hygiene_fail_on):
        raise ValueError(f"{args.config}: hygiene_fail_on {p.hygiene_fail_on!r}: give a list of findings, "
                         f"e.g. [\"acks0\"]")
    bad = [f for f in p.hygiene_fail_on if f not in FINDINGS]
    if bad:
        raise ValueError(f"{args.config}: hygiene_fail_on {bad[0]!r} is not a finding (known: {', '.join(FINDINGS)})")
    return p


_T0 = time.monotonic()
#: the files the listing passed over, (path, why): named on stderr and in capture_health.skipped_files
SKIPPED: list[tuple[str, str]] = []


def _skipped(spark):
    """The skipped files as rows (capture_date: the file's modification date, where it can be looked at)."""
    import datetime

    from .base import SKIPPED_FILES

    rows = []
    for path, why in SKIPPED:
        try:
            day = datetime.datetime.fromtimestamp(os.lstat(path).st_mtime, datetime.timezone.utc).date()
        except (OSError, ValueError):
            day = datetime.datetime.now(datetime.timezone.utc).date()
        rows.append((day, path, why))
    if not rows:
        return no_rows(spark, SKIPPED_FILES)
    import pyarrow as pa

    # (as Arrow, not a Python list: Spark would make the list's rows in a Python worker)
    day, path, why = zip(*rows)
    return spark.createDataFrame(pa.table({"capture_date": pa.array(day, pa.date32()),
                                           "capture_file": pa.array(path, pa.string()),
                                           "why": pa.array(why, pa.string())}))


def _say(args, what: str) -> None:
    """Progress on stderr (not with --quiet), with the seconds since the job started."""
    if not args.quiet:
        print(f"audit: [{time.monotonic() - _T0:5.1f} s] {what}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    args = parse(argv)
    import spark_kafkawire
    from ..cli import plain_warnings
    from ..escape import printable
    from ..reader import job_options

    plain_warnings("audit", SKIPPED)  # a file of the captures skipped (a FIFO...): one line naming it

    # paths, options and policies are checked before Spark starts: one line, not a Java stack trace
    try:
        policy = policy_from(args)
        if args.incremental and (len(args.captures) != 1 or not args.checkpoint):
            raise ValueError("--incremental reads one capture directory and needs --checkpoint DIR")
        options = job_options(args.option + ([f"tlsKeyLog={args.tls_keylog}"] if args.tls_keylog else []),
                              ports=args.ports)
        from . import AUDITS

        chosen = [a.strip() for a in (args.audits or ",".join(AUDITS)).split(",") if a.strip()]
        unknown = [a for a in chosen if a not in AUDITS]
        if unknown or not chosen:
            raise ValueError(f"--audits {args.audits!r}: choose from {', '.join(AUDITS)}")
        if "capture_health" not in chosen:
            chosen.append("capture_health")  # its coverage is the evidence every verdict rests on
        if not args.incremental:
            spark_kafkawire.list_files(args.captures, spark_kafkawire.Options.parse(options).path_glob_filter)
        elif not os.path.isdir(args.captures[0]) and "://" not in args.captures[0]:
            raise ValueError(f"{args.captures[0]}: not a directory")
    except (ValueError, OSError, spark_kafkawire.CaptureError) as e:
        print(f"audit: {printable(str(e).removeprefix('kafkawire: '))}", file=sys.stderr)
        return 1

    from .output import OutputDir, OutputError, root_cause

    out = OutputDir(args.out)
    try:  # one run at a time; a directory that cannot be written is one line, before Spark starts
        out.lock()
    except OutputError as e:
        print(f"audit: {printable(str(e))}", file=sys.stderr)
        return 1
    try:
        return run(args, out, policy, options, chosen)
    except KeyboardInterrupt:
        out.failed("interrupted")
        return 130
    except Exception as e:  # a write that failed (disk full...), under however much Java
        cause = root_cause(e)
        out.failed(cause)
        spark_log = getattr(out, "spark_log", None)
        log = f"; Spark's log: {spark_log}" if spark_log else ""
        # (a failed task's message may name a capture file or quote its bytes: escaped)
        print(f"audit: writing {printable(out.uri)} failed: {printable(cause)} (no report was written{log})",
              file=sys.stderr)
        return 1
    finally:
        out.release()


def _waiting(args, options: dict) -> str:
    """The files of an --incremental directory that wait to be complete, and when each will count
    (empty where none waits)."""
    import spark_kafkawire
    from ..spark.stream import waiting_files

    try:
        files = waiting_files([args.captures[0]], spark_kafkawire.Options.parse(options),
                              args.complete_after_seconds)
    except (OSError, ValueError, spark_kafkawire.CaptureError):
        return ""
    if not files:
        return ""
    named = ", ".join(f"{os.path.basename(p)} (counts from "
                      f"{time.strftime('%H:%M:%S UTC', time.gmtime(m / 1e9 + args.complete_after_seconds))})"
                      for m, p, _n in files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    verb = "waits" if len(files) == 1 else "wait"
    return (f"{_count(len(files), 'file')} {verb} to be complete (unchanged for --complete-after-seconds "
            f"{args.complete_after_seconds:g}, or followed by a newer file of the series): {named}; files copied "
            "in whole count at once with --complete-after-seconds 0")


def _left_for_later(args, options: dict) -> list[str]:
    """What an --incremental run leaves for the next: the files that wait to be complete (and when
    each counts), and what the series' states carry (requests waiting for their response in the
    next file). Empty where nothing waits."""
    from ..carry import waiting

    lines = [w] if (w := _waiting(args, options)) else []
    try:
        held = waiting(f"{args.checkpoint}/series/exchanges", options.get("endpointUrl"))
    except OSError:
        return lines
    if held["connections"]:
        lines.append(f"{_count(held['connections'], 'open connection')} carried to the next file of "
                     f"{held['states']:,} series in the checkpoint, with "
                     f"{_count(held['requests'], 'request')} waiting for a response there "
                     f"({held['frame_bytes']:,} bytes of frames in progress)")
    return lines


def _count(n: int, what: str) -> str:  # ``1 capture file``, ``2 capture files``
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def _session(args, out, small: bool = False, quick: bool = False, here=None):
    """The job's SparkSession (``quick``: the quick JIT tier alone). Where the captures are decoded
    here (``small``, or ``here``), no Python runs on Spark's workers: their interpreter is not asked
    for this package. Unless --verbose, Spark's JVM and its Python workers write their stderr
    (start-up notes, a failed task's stack traces) to a log file of their own, named in the one line
    a failure prints, and removed after a run that succeeds.
    ``here``: the local scan begun before (stopped where Spark does not start)."""
    import tempfile

    from ..spark.session import spark_session

    tasks = args.incremental or (not small and here is None)  # (a stream, or Spark tasks decode)
    try:
        if args.verbose:
            return spark_session("kafkawire-audit", small_job=small, quick_jit=quick, python_tasks=tasks)
        with tempfile.NamedTemporaryFile(prefix="kafkawire-audit-", suffix=".log", delete=False) as log:
            out.spark_log = log.name
        return spark_session("kafkawire-audit", small_job=small, jvm_log=out.spark_log, quick_jit=quick,
                             python_tasks=tasks)
    except BaseException:
        if here is not None:
            here.close()
        raise


def run(args, out, policy, options: dict, chosen: list[str]) -> int:
    from pyspark.sql import functions as F

    from . import AUDITS, Rows, exit_status, policies
    from . import metrics
    from .history import judged_on_history, past, stage_run, summary_frame, write_with
    from .report import render
    from ..decode.status import CAPTURE_CHANGED, CAPTURE_DAMAGED, TLS
    from ..escape import printable
    from ..spark.scan import time_left

    out.begin({"captures": args.captures, "incremental": args.incremental, "audits": chosen})
    _say(args, "starting Spark")
    size = input_bytes(args, options)
    small = local_within(args.captures, size, args.driver_decode_max)
    here = local_scan(args, out.uri, options, size, small, lambda text: _say(args, text))
    spark = _session(args, out, small, local_within(args.captures, size, QUICK_JIT_INPUT), here)
    conf = spark.sparkContext.getConf()
    if not conf.contains("spark.sql.shuffle.partitions"):
        # audit results are small: Spark's 200 shuffle partitions per aggregation cost more than the
        # work; at scale, one per 128 MB of captures (adaptive execution coalesces what is less)
        spark.conf.set("spark.sql.shuffle.partitions", "1" if small else
                       str(max(4, 2 * spark.sparkContext.defaultParallelism, (size or 0) >> 27)))
    if not small and not conf.contains("spark.sql.autoBroadcastJoinThreshold"):
        # no side of a join is broadcast on an estimate (the rows of several capture points are far
        # larger than Parquet's statistics suggest): only where adaptive execution measured it small
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
        spark.conf.set("spark.sql.adaptive.autoBroadcastJoinThreshold", "10MB")
    if small:  # a few thousand rows: compiling each query's code and re-planning its stages cost more than they win
        spark.conf.set("spark.sql.codegen.wholeStage", "false")
        spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        spark.conf.set("spark.sql.adaptive.enabled", "false")
    rows, new = load_rows(spark, args, out, options, lambda text: _say(args, text), small, here)
    if args.incremental and not new:  # nothing new: no new verdict on zero evidence; the last ones stay
        spark.stop()
        waiting = _waiting(args, options)
        why = f"Nothing new arrived in {args.captures[0]} since the last run." + (f" {waiting}" if waiting else "")
        report = out.keep_previous({"captures": args.captures}, why)
        kept = f"the last run's report and verdicts are kept ({report})" if report else "no verdicts"
        print(f"audit: nothing new in {printable(args.captures[0])} since the checkpoint "
              f"{printable(args.checkpoint)}: {kept}")
        if waiting:
            print(f"audit: {printable(waiting)}")
        if getattr(out, "spark_log", None):
            os.unlink(out.spark_log)
        return 3
    # most audits read the exchange, connection and partition rows (far fewer than the records): read
    # from Parquet once and kept in memory (spilled to disk where they do not fit), not once per audit
    frames = [rows.exchanges, rows.connections, rows.partitions] + ([rows.records] if small else [])
    with ThreadPoolExecutor(len(frames) + 1) as pool:  # (each a few planning calls: at once, on every core)
        skipped = pool.submit(_skipped, spark)
        cached = list(pool.map(lambda frame: frame.cache(), frames))
    rows = Rows(cached[0], cached[1], cached[2], cached[3] if small else rows.records, skipped.result())
    results: dict[str, dict[str, list[dict]]] = {}
    _say(args, f"running {len(chosen)} audits")
    started, done = time.monotonic(), []

    def collect(name: str) -> list:
        got = []
        for table, df in AUDITS[name](rows, policy).items():
            got.append((table, df.toArrow()))  # audit results are aggregates: small enough for the driver
        done.append(name)
        _say(args, f"audit {name} ({len(done)} of {len(chosen)}{time_left(started, len(done), len(chosen))}): "
                   f"{', '.join(f'{t} ({a.num_rows} rows)' for t, a in got)}")
        return got

    # each table is a small Spark job whose time is mostly planning and scheduling: several at once
    with ThreadPoolExecutor(AUDIT_THREADS) as pool:
        tables = list(pool.map(collect, chosen))
    for name, got in zip(chosen, tables):
        results[name] = {}
        for table, arrow in got:
            out.write_table(arrow, f"{name}/{table}")  # the whole table replaced: it describes rows/
            results[name][table] = arrow.slice(0, 10_000).to_pylist()
    ex = rows.exchanges
    t = F.coalesce("request_time", "response_time")
    # one query: the span, the listeners and the dates (sets as small as the brokers and days)
    listener = F.when(F.col("broker_ip").isNotNull(),
                      F.concat_ws(":", "broker_ip", F.col("broker_port").cast("string")))
    # exchanges: rows of a request or a response (a damaged file's or an encrypted connection's status
    # row is none); files: every capture file read, with exchanges or not (HTTP only, empty files)
    exchange = ~F.col("status").isin(CAPTURE_DAMAGED, CAPTURE_CHANGED, TLS)
    span = ex.agg(F.min(t).alias("a"), F.max(t).alias("b"), F.count(F.when(exchange, 1)).alias("n"),
                  F.collect_set(listener).alias("listeners"),
                  F.collect_set(F.to_date(t).cast("string")).alias("dates")).first()
    assert span is not None  # (an aggregate without grouping has its one row)
    names = [r[0] for r in ex.select("capture_file").union(rows.connections.select("capture_file")).distinct()
             .collect()]
    files = len(names)
    summary = [r.asDict() for r in summary_frame(ex).collect()] if args.history != "none" else []
    figures = metrics.frames(ex, rows.connections, args) if args.metrics_file or args.pushgateway else None
    before = past(args, out, span, names)  # (the history of other runs, read before this one writes)
    _say(args, "judging the policies")
    verdicts = policies(results, policy, judged_on_history(before, policy, summary))
    listeners = sorted(span["listeners"] or [])
    dates = sorted(span["dates"] or [])
    window = f"{span['a']} to {span['b']}" if span["a"] is not None else "no exchange times"
    meta = {"captures": " ".join(args.captures), "capture files": files, "exchanges": span["n"],
            "time window (UTC)": window,
            "capture dates in the tables": _dates(dates),
            "brokers": ", ".join(listeners), "target release": policy.target_release, "output": out.uri,
            "run": out.run_id}
    later = _left_for_later(args, options) if args.incremental else []
    if later:
        meta["left for the next run"] = " ".join(later)
    _say(args, "writing the report")
    stopping = threading.Thread(target=spark.stop)  # (a second of the JVM's shutdown, while the plots are drawn)
    stopping.start()
    try:
        staged, since, trends = stage_run(before, summary, verdicts, results, policy.max_broker_p99_growth)
        html = render(verdicts, meta, results, policy.min_latency_n, since, trends)
    finally:  # (a failed write too: Spark is stopped before the one line is said)
        stopping.join()
    report = write_with(lambda: out.write_text("report.html", html), staged)
    if figures is not None:
        metrics.write(metrics.registry(figures, verdicts, span["b"], args), args.metrics_file, args.pushgateway)
    out.finish({"captures": args.captures, "capture_dates": dates, "exchanges": span["n"], "files": files,
                "verdicts": [{"policy": v.name, "ok": v.ok, "status": v.status, "detail": v.detail} for v in verdicts]})

    _print_run(span, files, verdicts, results, later, report, out.uri)
    if getattr(out, "spark_log", None):
        os.unlink(out.spark_log)
    return exit_status(verdicts)


def _print_run(span, files: int, verdicts, results: dict, later: list[str], report: str, uri: str) -> None:
    """The run on stdout: what it read, the verdicts, the exchange summary, what waits for the next
    run, where the report and tables are."""
    from ..escape import printable

    window = f"{span['a']} to {span['b']} (UTC)" if span["a"] is not None else "no exchange times"
    try:
        print(f"\naudit of {_count(files, 'capture file')}, {_count(span['n'], 'exchange')}, {window}")
        for v in verdicts:  # a verdict's detail may quote a client id: escaped for the terminal
            print(f"  [{v.status}] {printable(v.name)}: {printable(v.detail)}")
        if "exchange_summary" in results:
            print("\nexchange summary (busiest first):")
            _print_table(results["exchange_summary"]["exchange_summary"][:25])
        for line in later:
            print(f"audit: {printable(line)}")
        print(f"\nreport: {report}\nParquet: {uri}/<audit>/<table>/capture_date=...")
        sys.stdout.flush()
    except BrokenPipeError:  # its reader stopped (| head): the run is complete all the same
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _dates(dates: list[str]) -> str:
    if not dates:
        return "none"
    if len(dates) <= 6:
        return ", ".join(dates)
    return f"{len(dates)} days, {dates[0]} to {dates[-1]}"


def _print_table(rows: list[dict]) -> None:
    import pyarrow as pa

    from ..texttable import print_table

    if not rows:
        print("  (no exchanges)")
        return
    one_day = len({r.get("capture_date") for r in rows}) == 1
    cols = [c for c in rows[0] if c != "capture_date" or not one_day]
    print_table(pa.Table.from_pylist([{c: r[c] for c in cols} for r in rows]), indent="  ")

