"""The command line on a live capture: ``tcpdump -U -w - | kafkawire show -`` (and ``summary -``).

Standard input is read as its bytes come (wire/fs.py's Stdin), its rows printed as they complete
(``show -``: one Arrow batch per row, printed and let go, so memory stays that of the decoding
stages whatever the capture's length), and Ctrl-C ends the capture as a file's end does: the
connections still open end there, their rows are given, and ``summary -`` prints its tables of
what was read (it holds the exchange and connection rows until then, as ``summary`` of a file
does)."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from typing import Iterator

import pyarrow as pa

from .escape import printable
from .reader import iter_batches, iter_shapes
from .rows.table import arrow_schema
from .wire.fs import STDIN, STDIN_STREAM

#: columns of a live table: as wide as their header or this, by type (a cell past it is cut)
_WIDTH = {"timestamp": 32, "string": 16}
_NUMBER = 10


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """While reading standard input: Ctrl-C ends the capture (Stdin.stop), not the command."""
    was = signal.signal(signal.SIGINT, lambda *_: STDIN_STREAM.stop())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, was)


def whole(options: dict) -> pa.Table:
    """Standard input read to its end or Ctrl-C: its rows of option rows' shape."""
    with interruptible():
        batches = list(iter_batches(STDIN, options))
    return pa.Table.from_batches(batches, schema=arrow_schema(str(options.get("rows", "exchanges")).lower()))


def both_shapes(options: dict) -> tuple[pa.Table, pa.Table]:
    """Standard input read once, to its end or Ctrl-C: its exchange and connection rows."""
    got: dict[str, list[pa.RecordBatch]] = {"exchanges": [], "connections": []}
    with interruptible():
        for shape, batch in iter_shapes(STDIN, {k: v for k, v in options.items() if k != "rows"},
                                        ("exchanges", "connections")):
            got[shape].append(batch)
    return tuple(pa.Table.from_batches(got[s], schema=arrow_schema(s)) for s in ("exchanges", "connections"))


def follow(options: dict, args, default_columns: list[str], out) -> str | None:
    """``show -``: each row printed as it completes (a table's header once, its columns of fixed
    width), filtered by --where and cut to --columns and --limit; on stderr at the end, how many
    rows of each status. Returns the note on TLS connections not decrypted, or None."""
    from .cli import where
    from .texttable import cell_text, cut, flat

    shape = options["rows"]
    schema = arrow_schema(shape)
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    if columns == ["all"] or (columns is None and args.format != "table"):
        columns = None
    elif columns is None:
        columns = default_columns
    names = columns or schema.names
    unknown = [c for c in names if c not in schema.names]
    if unknown:
        raise ValueError(f"--columns: no column {', '.join(unknown)} (columns: {', '.join(schema.names)})")
    widths = [max(len(n), _WIDTH.get(str(schema.field(n).type).split("[")[0], _NUMBER)) for n in names]
    shown, tls = 0, 0
    statuses: dict[str, int] = {}
    if args.format == "table":
        print("  ".join(n.ljust(w) for n, w in zip(names, widths)).rstrip(), file=out)
        print("  ".join("-" * w for w in widths), file=out, flush=True)
    with interruptible():
        for batch in iter_batches(STDIN, {**options, "batchSize": 1}):
            table = pa.Table.from_batches([batch])
            if "status" in table.column_names:
                for s in table.column("status").to_pylist():
                    statuses[s] = statuses.get(s, 0) + 1
                    tls += s == "tls"
            picked = where(table, args.where, columns, None)
            for row in picked.to_pylist():
                if args.limit is not None and shown >= args.limit:
                    STDIN_STREAM.stop()  # (enough: the capture ends here)
                    break
                shown += 1
                if args.format == "json":
                    print(json.dumps(row, default=lambda v: v.hex() if isinstance(v, bytes) else str(v)), file=out)
                elif args.format == "csv":
                    import pyarrow.csv as pacsv

                    buf = pa.BufferOutputStream()
                    pacsv.write_csv(flat(pa.Table.from_pylist([row], schema=picked.schema), args.raw_csv,
                                          bool(getattr(out, "isatty", None) and out.isatty())), buf,
                                    pacsv.WriteOptions(include_header=shown == 1))
                    out.write(buf.getvalue().to_pybytes().decode())
                else:
                    print("  ".join(cut(printable(cell_text(row[n])), w, n).ljust(w) for n, w in zip(names, widths))
                          .rstrip(), file=out)
                out.flush()
    said = ", ".join(f"{n:,} {s}" for s, n in sorted(statuses.items(), key=lambda kv: -kv[1]))
    print(f"kafkawire: standard input ended: {shown:,} rows shown" + (f" of {said}" if said else ""),
          file=sys.stderr, flush=True)
    return f"{tls} TLS connections were not decrypted: --tls-keylog FILE decrypts them" if tls and \
        not options.get("tlsKeyLog") else None
