"""The calls README and docs/ show, checked against the code they name, so that a documented call
cannot break unseen: every ``spark_kafkawire`` function a snippet calls binds to that function's
signature, and every reader option a snippet gives (keyword arguments of ``read_capture``,
``.option(...)`` on a ``kafkawire`` reader) is one the reader takes, with a value it accepts."""

from __future__ import annotations

import ast
import inspect
import re

import pytest

import spark_kafkawire
from conftest import ROOT
from spark_kafkawire.options import BATCH, OPTIONS, Options

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
READERS = {"read_capture", "read_pandas", "iter_batches"}


def _snippets(text: str):
    for m in re.finditer(r"```python\n(.*?)```", text, re.S):
        yield m.group(1)
    for m in re.finditer(r"`((?:spark_kafkawire\.(?:register|spark_session)|spark_session|read_capture|read_pandas)"
                         r"\([^`]*\))`", text):
        yield m.group(1)


def _literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _called(func) -> str | None:
    """The spark_kafkawire function a call names (spark_kafkawire.X or a bare X it exports)."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "spark_kafkawire":
        return func.attr
    if isinstance(func, ast.Name) and func.id in spark_kafkawire.__all__:
        return func.id
    return None


def _kafkawire_chain(node) -> str | None:
    """'read' or 'stream' when an .option(...) call sits on a spark.read(Stream).format("kafkawire") chain."""
    text = ast.unparse(node)
    if '.format("kafkawire")' not in text and ".format('kafkawire')" not in text:
        return None
    if ".load(" in text or ".writeStream" in text or ".write." in text:
        return None  # an option of what the rows are written with
    head = text.split(".option(")[0]
    return "stream" if "readStream" in head else "read" if ".read." in head or ".read\n" in head else None


def _checks():
    out = []
    for doc in DOCS:
        for code in _snippets(doc.read_text()):
            try:
                tree = ast.parse(code)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    out.append((doc.name, node))
    return out


CHECKS = _checks()


def test_the_docs_show_calls_that_are_checked():
    named = [n for _d, n in CHECKS if _called(n.func)]
    assert len(named) >= 5 and any(_called(n.func) == "spark_session" and n.keywords for n in named)


@pytest.mark.parametrize("doc,node", CHECKS, ids=[f"{d}:{ast.unparse(n)[:60]}" for d, n in CHECKS])
def test_a_documented_call_binds_to_the_code(doc, node):
    name = _called(node.func)
    if name is not None:
        func = getattr(spark_kafkawire, name)
        args = [None] * len([a for a in node.args if not isinstance(a, ast.Starred)])
        kwargs = {k.arg: _literal(k.value) for k in node.keywords if k.arg}
        inspect.signature(func).bind(*args, **kwargs)  # a TypeError names what does not fit
        if name in READERS:
            options = {k: v for k, v in kwargs.items() if k not in ("filters", "options") and v is not None}
            Options.parse(options)
    if isinstance(node.func, ast.Attribute) and node.func.attr == "option" and node.args:
        chain = _kafkawire_chain(node.func.value)
        key = _literal(node.args[0])
        if chain is None or not isinstance(key, str):
            return
        known = {o.name.lower() for o in OPTIONS if o.scope == BATCH or chain == "stream"} | {"path", "paths"}
        assert key.lower() in known, f"{doc}: option {key!r} is not one the kafkawire reader takes"
        value = _literal(node.args[1]) if len(node.args) > 1 else None
        if key.lower() in {o.name.lower() for o in OPTIONS if o.scope == BATCH} and value is not None:
            Options.parse({key: value})


@pytest.mark.parametrize("shape", ["exchanges", "messages", "partitions", "records", "connections"])
def test_the_column_tables_in_rows_md_are_made_from_the_declarations(shape):
    """docs/rows.md's table of a shape is what rows/columns.py makes of the shape's declared columns
    (``python -m spark_kafkawire.rows.columns`` writes it), and it names every column of the Spark
    schema once, with its type where the line has one type per column or one for all."""
    from spark_kafkawire.rows.columns import columns_table
    from spark_kafkawire.rows.table import ddl

    text = (ROOT / "docs" / "rows.md").read_text()
    table = columns_table(shape)
    assert f"<!-- columns of rows={shape} -->\n{table}\n<!-- end -->" in text
    actual = {}
    for part in re.split(r",(?![^<]*>)", ddl(shape)):
        name, typ = part.strip().split(" ", 1)
        actual[name] = typ
    documented = []
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.split(" | ")]
        names = [n.strip() for n in cells[0].lstrip("| ").split(",")]
        types = [t.strip() for t in re.split(r",(?![^<]*>)", cells[1])] if cells[1] else []
        assert types == [] or len(types) in (1, len(names)), line
        for i, name in enumerate(names):
            documented.append(name)
            if types:
                assert (types[i] if len(types) > 1 else types[0]) == actual[name], (name, types)
    assert sorted(documented) == sorted(actual)


def test_the_held_columns_are_generated_from_the_declarations():
    """rows/held.py is what rows/columns.py generates, and each shape's class holds exactly its
    columns, each by its own name."""
    from spark_kafkawire.rows import columns, held
    from spark_kafkawire.rows.shapes import row_builder
    from spark_kafkawire.rows.table import COLUMNS

    assert (ROOT / "spark_kafkawire" / "rows" / "held.py").read_text() == columns.held_source()
    for shape, cols in COLUMNS.items():
        made = row_builder(shape, "x.pcap").cols  # each column its own object
        got = getattr(held, f"{shape.capitalize()}Columns")(made)
        assert all(getattr(got, n) is made[n] for n, _t in cols)
        assert not set(getattr(got, "__dict__", {})) - set(made)