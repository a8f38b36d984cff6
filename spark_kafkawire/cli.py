"""The command line: a first look at captures without Spark.

    kafkawire summary CAPTURE...                  exchanges per api, client and broker; errors,
                                                  latency, unanswered requests; capture health
    kafkawire show CAPTURE... [--rows SHAPE] [--where SQL] [--columns A,B] [--limit N]
                              [--format table|csv|json]
    kafkawire convert CAPTURE... --to OUT.parquet|OUT.csv [--rows SHAPE]

A thin layer over :func:`spark_kafkawire.read_capture`: every reader option is
``--option name=value`` (the row shape too: ``--rows SHAPE`` or ``-o rows=SHAPE``, one of them);
``--tls-keylog FILE`` decrypts TLS. ``--where`` is a SQL condition on any column, run by DuckDB
over the Arrow rows (``pip install duckdb``). Errors are one line naming the file or option; the
exit status is 1. Output cut short by its reader (``| head``) ends the command quietly, as Unix
tools do.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Sequence

import pyarrow as pa

from .wire.capture import CaptureError
from .escape import printable
from .texttable import flat, print_table
from . import figures
from .firstlook import SUMMARY_ROWS, summary
from .wire.fs import STDIN, StorageError
from .reader import Options, iter_batches, list_files
from .rows.table import COLUMNS, arrow_schema


#: what ``show`` prints as a table when no --columns are given (every column with --columns all,
#: and always in the csv and json formats)
DEFAULT_COLUMNS = {
    "exchanges": ["request_time", "client_ip", "client_port", "broker_ip", "broker_port", "api_name", "api_version",
                  "correlation_id", "client_id", "latency_ms", "network_ms", "broker_ms", "status", "error_name",
                  "topics"],
    "messages": ["time", "client_port", "direction", "api_name", "api_version", "correlation_id", "client_id",
                 "size", "status", "error_name", "topics"],
    "partitions": ["request_time", "client_port", "api_name", "api_version", "client_id", "topic", "partition",
                   "status", "error_name", "offset", "high_watermark", "record_count"],
    "records": ["time", "client_port", "direction", "api_name", "topic", "partition", "offset", "timestamp",
                "codec", "status"],
    "connections": ["first_time", "client_ip", "client_port", "broker_ip", "broker_port", "protocol", "end_captured",
                    "client_bytes", "broker_bytes", "client_gap_bytes", "broker_gap_bytes", "status"],
}


class TerminalCounter:
    """Files, megabytes and rows on stderr, when it is a terminal and the work takes a while."""

    def __init__(self, files: list[str]):
        self.on = sys.stderr.isatty()
        self.files, self.start, self.rows, self.done, self.shown = files, time.monotonic(), 0, 0, False
        self.total = sum(os.path.getsize(f) for f in files if os.path.exists(f))

    def update(self, rows: int, file_done: bool = False) -> None:
        self.rows += rows
        self.done += file_done
        if self.on and time.monotonic() - self.start > 1.0:
            self.shown = True
            print(f"\r{self.done}/{len(self.files)} files of {self.total / 1e6:.0f} MB, {self.rows:,} rows",
                  end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.shown:
            print(file=sys.stderr)


#: the rotation series the last read() joined, each a list of its files in time order
JOINED: list[list[str]] = []


def joined_note(health: pa.Table | None = None) -> str | None:
    """How the last read joined its files (the rotation series read as one capture each), and,
    from its connection rows (``health``), how many connections began before the capture: one line
    for stderr, or None where there is nothing to say."""
    parts = []
    for run in JOINED:
        names = [os.path.basename(f) for f in run]
        parts.append(f"{len(run)} files read as one capture, a rotation series ({names[0]} to {names[-1]}: "
                     "its connections go on from file to file; -o stitch=false reads them apart)")
    if health is not None and health.num_rows:
        is_conn = figures.mask(figures.CONNECTION, health).to_pylist()
        began = sum(1 for i, s in enumerate(health.column("start_captured").to_pylist()) if is_conn[i] and s is False)
        if began:
            parts.append(f"{began:,} connection{'s' if began != 1 else ''} began before the capture (their first "
                         "requests and the facts they carried are not in it)")
    return printable("; ".join(parts)) if parts else None


def read(captures: Sequence[str], options: dict) -> pa.Table:
    if list(captures) == [STDIN]:  # (convert -: to its end or Ctrl-C)
        from .stdin import whole

        return whole(options)
    opts = Options.parse(options)
    files = list_files(list(captures), opts.path_glob_filter, opts.endpoint_url)
    if not files:
        raise CaptureError(f"no capture file in {', '.join(captures)} (pathGlobFilter {opts.path_glob_filter})")
    from .wire.series import find_series

    progress = TerminalCounter(files)
    batches = []
    # a rotation series read as the one capture it was cut from (option stitch, as read_capture does)
    runs = find_series(files, opts.endpoint_url) if opts.stitch else [[f] for f in files]
    JOINED[:] = [run for run in runs if len(run) > 1]
    for run in runs:
        for b in iter_batches(run if len(run) > 1 else run[0], opts):
            batches.append(b)
            progress.update(b.num_rows)
        for _ in run:
            progress.update(0, file_done=True)
    progress.close()
    return pa.Table.from_batches(batches, schema=arrow_schema(opts.rows))


def where(table: pa.Table, condition: str | None, columns: list[str] | None, limit: int | None) -> pa.Table:
    if columns:
        unknown = [c for c in columns if c not in table.column_names]
        if unknown:
            raise ValueError(f"--columns: no column {', '.join(unknown)} (columns: {', '.join(table.column_names)})")
    if condition:
        try:
            import duckdb
        except ImportError:
            raise ValueError("--where needs DuckDB: pip install duckdb") from None
        rows = table  # noqa: F841 - DuckDB reads the Arrow table by its Python name
        select = ", ".join(f'"{c}"' for c in columns) if columns else "*"
        sql = f"SELECT {select} FROM rows WHERE {condition}" + (f" LIMIT {int(limit)}" if limit is not None else "")
        try:
            rel = duckdb.sql(sql)
            assert rel is not None  # a SELECT always gives a relation
            return rel.to_arrow_table()
        except duckdb.Error as e:
            raise ValueError(f"--where {condition!r}: {str(e).splitlines()[0]}") from None
    if columns:
        table = table.select(columns)
    return table.slice(0, limit) if limit is not None else table




def write(table: pa.Table, fmt: str, out, raw_csv: bool = False) -> None:
    if fmt == "json":
        for r in table.to_pylist():
            out.write(json.dumps(r, default=lambda v: v.hex() if isinstance(v, bytes) else str(v)) + "\n")
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        buf = pa.BufferOutputStream()
        # on a terminal, escaped as the table is; into a file or a pipe, as decoded
        terminal = bool(getattr(out, "isatty", None) and out.isatty())
        pacsv.write_csv(flat(table, raw_csv, terminal), buf)
        out.write(buf.getvalue().to_pybytes().decode())
    else:
        print_table(table, out)


# -- main --------------------------------------------------------------------------------------------
def _options(pairs: list[str] | None) -> dict:
    out = {}
    for p in pairs or ():
        if "=" not in p:
            raise ValueError(f"--option {p!r}: give name=value")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _parser() -> argparse.ArgumentParser:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("spark-kafkawire")
    except PackageNotFoundError:
        ours = "(not installed)"
    from .arguments import OneLineParser

    ap = OneLineParser(prog="kafkawire", description="Kafka traffic in pcap/pcapng captures, decoded.")
    ap.add_argument("--version", action="version", version=f"kafkawire {ours}")
    sub = ap.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("captures", nargs="+", help="capture files, directories, globs or URIs (s3://...)")
        p.add_argument("-o", "--option", action="append", metavar="NAME=VALUE",
                       help="a reader option, repeatable: any of the README's Options table (rows, ports, "
                            "maxFrameBytes, mode, tlsKeyLog, ...)")
        p.add_argument("--tls-keylog", metavar="FILE",
                       help="TLS key log(s), comma-separated: TLS connections are decrypted (option tlsKeyLog)")
        return p

    summ = common(sub.add_parser("summary", help="exchanges per api, client and broker; errors; capture health"))
    summ.add_argument("--min-latency-n", type=int, default=figures.MIN_LATENCY_N,
                      help=f"timed exchanges a group needs for p50/p99 (default {figures.MIN_LATENCY_N})")
    summ.add_argument("--max-rows", type=int, default=SUMMARY_ROWS,
                      help=f"rows of each table shown, the rest counted (default {SUMMARY_ROWS})")
    show = common(sub.add_parser("show", help="rows on the terminal"))
    show.add_argument("--rows", choices=list(COLUMNS), help="row shape (default exchanges)")
    show.add_argument("--where", help="SQL condition on any column, e.g. \"api_name = 'Fetch' and latency_ms > 100\"")
    show.add_argument("--columns", help="comma-separated columns to show, or 'all' (a table shows a few by default)")
    show.add_argument("--limit", type=int, help="at most this many rows")
    show.add_argument("--format", default="table", choices=["table", "csv", "json"])
    show.add_argument("--raw-csv", action="store_true",
                      help="CSV cells exactly as decoded (by default a cell starting with = + - @ gets a leading ')")
    conv = common(sub.add_parser("convert", help="rows to a Parquet or CSV file"))
    conv.add_argument("--to", required=True, help="output file: .parquet or .csv")
    conv.add_argument("--rows", choices=list(COLUMNS), help="row shape (default exchanges)")
    conv.add_argument("--raw-csv", action="store_true",
                      help="CSV cells exactly as decoded (by default a cell starting with = + - @ gets a leading ')")
    state = sub.add_parser("state", help="what a state directory (option stateLocation; the audit job's "
                                         "CHECKPOINT/series/<shape>/) holds: series, last file, connections carried")
    state.add_argument("directory", help="a state directory, local or a URI (s3://...)")
    state.add_argument("--endpoint-url", help="an S3-compatible server's URL (option endpointUrl)")
    return ap


def _state(args, _options: dict[str, str]) -> None:
    """``kafkawire state DIR``: what a series' carried state holds, in words (carry.describe)."""
    from .carry import describe

    for line in describe(args.directory, args.endpoint_url):
        print(line)
    return None


def _shape(args, options: dict) -> str:
    """The row shape: --rows or -o rows=, given once (a bad value fails in Options)."""
    given = options.pop("rows", None)
    if given is not None and args.rows is not None and given.lower() != args.rows:
        raise ValueError(f"the row shape is given twice (--rows {args.rows}, -o rows={given}): give it once")
    shape = args.rows or given or "exchanges"
    Options.parse({"rows": shape})
    return shape.lower()


def _undecrypted(options: dict, table: pa.Table, shape: str) -> str | None:
    """One line when TLS connections were not (wholly) decrypted: how many, and how to decrypt them."""
    if shape == "connections":  # (figures.TLS_NOT_DECRYPTED: as the audits' coverage counts them)
        rows = table.filter(figures.mask(figures.TLS_NOT_DECRYPTED, table)).column("tls_undecrypted_bytes").to_pylist()
        n, nbytes = len(rows), sum(b or 0 for b in rows)
    else:
        n, nbytes = sum(1 for s in table.column("status").to_pylist() if s == "tls"), None
    if not n:
        return None
    what = f"{n} TLS connections" + (f" ({nbytes} bytes)" if nbytes is not None else "") + " were not decrypted"
    if options.get("tlsKeyLog"):
        return f"{what}: their detail says why"
    return f"{what}: --tls-keylog FILE decrypts them"


def _say_joined(health: pa.Table | None) -> None:
    """The note on how files were joined (joined_note), once, on stderr before the output."""
    note = joined_note(health)
    if note:
        print(f"kafkawire: {note}", file=sys.stderr, flush=True)


def _summary(args, options: dict[str, str]) -> str | None:
    """``kafkawire summary``: the tables, then the note on connections not decrypted, if any."""
    if "rows" in options:
        raise ValueError("summary reads exchanges and connections rows: -o rows is not taken")
    if args.max_rows < 1:
        raise ValueError(f"--max-rows {args.max_rows}: give 1 or more")
    if list(args.captures) == [STDIN]:  # (read once, into both shapes, until its end or Ctrl-C)
        from .stdin import both_shapes

        table, health = both_shapes(options)
    else:
        table = read(args.captures, {**options, "rows": "exchanges"})
        health = read(args.captures, {**options, "rows": "connections"})
    _say_joined(health)
    for title, t in summary(table, health, args.min_latency_n).items():
        print(f"\n{title}")
        print_table(t, limit=args.max_rows)
    return _undecrypted(options, health, "connections")


def _show(args, options: dict[str, str]) -> str | None:
    """``kafkawire show``: the rows asked for, then the note on connections not decrypted."""
    if args.limit is not None and args.limit < 0:
        raise ValueError(f"--limit {args.limit}: give 0 or more")
    shape = _shape(args, options)
    if list(args.captures) == [STDIN]:  # rows as they complete, none held (see stdin.py)
        from .stdin import follow

        return follow({**options, "rows": shape}, args, DEFAULT_COLUMNS[shape], sys.stdout)
    table = read(args.captures, {**options, "rows": shape})
    _say_joined(table if shape == "connections" else None)
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    if columns == ["all"]:
        columns = None
    elif columns is None and args.format == "table":
        columns = DEFAULT_COLUMNS[shape]
    write(where(table, args.where, columns, args.limit), args.format, sys.stdout, args.raw_csv)
    return _undecrypted(options, table, shape)


def _convert(args, options: dict[str, str]) -> None:
    """``kafkawire convert``: the rows as one Parquet or CSV file."""
    if not args.to.endswith((".parquet", ".csv")):
        raise ValueError(f"--to {args.to}: give a .parquet or .csv file")
    shape = _shape(args, options)
    table = read(args.captures, {**options, "rows": shape})
    _say_joined(table if shape == "connections" else None)
    if args.to.endswith(".parquet"):
        import pyarrow.parquet as pq

        pq.write_table(table, args.to)
    else:
        import pyarrow.csv as pacsv

        pacsv.write_csv(flat(table, args.raw_csv), args.to)
    print(f"{table.num_rows} {shape} rows written to {args.to}", file=sys.stderr)
    return None


def plain_warnings(prefix: str = "kafkawire", skipped: list[tuple[str, str]] | None = None) -> None:
    """The package's warnings (a file of a directory skipped: listing.SkippedFileWarning) as one line
    each on stderr, ``<prefix>: ...``, escaped for the terminal; other warnings as Python shows them.
    ``skipped``: each skipped file's (path, why) is added to it (the audit job's table of them)."""
    import warnings

    from .listing import SkippedFileWarning

    shown, said = warnings.showwarning, set()

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, SkippedFileWarning):
            if skipped is not None:
                skipped.extend(x for x in getattr(message, "skipped", []) if x not in skipped)
            if str(message) in said:  # the same files listed again (the job lists its captures twice)
                return
            said.add(str(message))
            # (its names are escaped where it is made, listing.py: escaped once, not twice)
            print(f"{prefix}: {str(message).removeprefix('kafkawire: ')}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def main(argv: Sequence[str] | None = None) -> int:
    import signal

    if hasattr(signal, "SIGPIPE"):  # output cut short (| head): end quietly, as Unix tools do
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = _parser().parse_args(argv)
    plain_warnings()
    try:
        options = _options(getattr(args, "option", None))
        if getattr(args, "tls_keylog", None):
            options["tlsKeyLog"] = args.tls_keylog
        note = {"summary": _summary, "show": _show, "convert": _convert, "state": _state}[args.command](args, options)
        if note:
            sys.stdout.flush()
            print(f"kafkawire: {note}", file=sys.stderr)
    except (ValueError, CaptureError, StorageError, FileNotFoundError, OSError) as e:
        print(f"kafkawire: {printable(str(e).removeprefix('kafkawire: '))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
