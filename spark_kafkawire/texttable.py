"""Rows as text for a person or a spreadsheet: a cell's text, cut to a width (a reason never, a file
name never), aligned tables for a terminal, and tables flattened to what CSV holds. Capture contents
are attacker-chosen: every cell is escaped (escape.py). Used by the command line, its standard-input
reader and the audit job's console summary."""

from __future__ import annotations

import json
import sys

import pyarrow as pa

from .escape import csv_cell, printable


def cell_text(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, (list, dict)):
        return json.dumps(v, default=str)
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


#: cells never cut: a reason is read whole
WHOLE = {"detail", "file_damage", "why"}
#: cells cut from the left, the file's own name kept whole (a rotated file's name holds its time)
PATHS = {"capture_file", "response_file"}


def cut(text: str, width: int, column: str = "") -> str:
    """A cell of at most ``width`` characters; one cut short ends with an ellipsis. A reason
    (WHOLE) is never cut; a path (PATHS) loses its directories first, from the left, and never its
    file's own name."""
    if len(text) <= width or column in WHOLE:
        return text
    if column in PATHS:
        name = text.rsplit("/", 1)[-1]
        keep = max(width - 1, len(name))
        return "\u2026" + text[-keep:]
    return text[:width - 1] + "\u2026"


def print_table(table: pa.Table, out=None, width: int = 60, indent: str = "", limit: int | None = None) -> None:
    """Rows as aligned text for a terminal: capture contents escaped (see escape.py), a cell cut
    to ``width`` characters (ending with an ellipsis); past ``limit`` rows, a line says how many
    more there are."""
    out = out or sys.stdout
    more = table.num_rows - limit if limit is not None and table.num_rows > limit else 0
    if more:
        table = table.slice(0, limit)
    names = [printable(n) for n in table.column_names]
    rows = [[cut(printable(cell_text(v)), width, k) for k, v in r.items()] for r in table.to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    print(indent + "  ".join(n.ljust(w) for n, w in zip(names, widths)).rstrip(), file=out)
    print(indent + "  ".join("-" * w for w in widths), file=out)
    for r in rows:
        print(indent + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip(), file=out)
    if more:
        print(f"{indent}... {more} more rows", file=out)


def flat(table: pa.Table, raw: bool = False, terminal: bool = False) -> pa.Table:
    """Lists and structs as JSON text, binary as hex: what CSV can hold. Unless ``raw``, a text
    cell a spreadsheet would take as a formula is neutralised (escape.csv_cell). For a
    ``terminal``, every text cell is escaped as the table's are (escape.printable)."""
    cols = []
    for col in table.columns:
        t = col.type
        if pa.types.is_list(t) or pa.types.is_struct(t):
            col = pa.array([None if v is None else json.dumps(v, default=lambda b: b.hex()) for v in col.to_pylist()],
                           pa.string())
        elif pa.types.is_binary(t):
            col = pa.array([None if v is None else v.hex() for v in col.to_pylist()], pa.string())
        if not raw and (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            col = pa.array([None if v is None else csv_cell(v) for v in col.to_pylist()], pa.string())
        if terminal and (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            col = pa.array([None if v is None else printable(v) for v in col.to_pylist()], pa.string())
        cols.append(col)
    return pa.table(cols, names=table.column_names)
