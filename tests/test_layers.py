"""The stages' import order: a module imports only modules of its own stage or earlier ones, so
that each stage can be read, tested and replaced without the stages after it (the pipeline of
docs/architecture.md). A new module must be given its stage here."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "spark_kafkawire"

#: the pipeline's stages, earliest first; a module may import from its own stage and earlier ones
STAGES = [
    # shared ground: file systems, types, column building, escaping, the protocol's data
    {"fs", "wiretypes", "columns", "escape", "protocol", "protocol.generate", "sasl", "_lane", "keylog", "compiled",
     "cores"},
    {"capture"},  # capture files -> packets
    {"packets"},  # packets -> TCP segments
    {"tcp"},  # segments -> byte streams
    {"tlscrypto", "tls", "frames", "headers"},  # byte streams -> frames
    {"codegen", "body", "values", "records", "partitions", "headline", "predicate"},  # frames -> messages
    {"connstate", "roles", "topicids", "exchanges"},  # messages -> exchanges
    {"modes", "table", "rowshapes"},  # exchanges -> rows (Arrow)
    {"options", "listing", "lane", "reader"},  # the read loop over all of the above: its options, the
    # files it reads and their shares, the stages wired in order, and its compiled fast lane
    # the thin layers: Spark, streaming, the command line, the audits
    {"datasource", "stream", "session", "cli", "__init__", "__main__", "_autoload", "audits", "audits.base",
     "audits.wire", "audits.output", "audits.report"},
]
STAGE = {m: i for i, stage in enumerate(STAGES) for m in stage}


def _module(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> set[str]:
    """The package modules a module imports (relative or absolute), as stage names."""
    package = module.split(".")[:-1] if not path.name == "__init__.py" else module.split(".")
    if module == "__init__":
        package = []
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("spark_kafkawire"):
                target = node.module.split(".")[1:]
            else:
                continue
            names = [".".join(target + [a.name]) for a in node.names]
            for name in names + [".".join(target)]:
                if name in STAGE:
                    out.add(name)
                    break
                head = name.split(".")[0] if name else ""
                if head in STAGE and name == ".".join(target):
                    out.add(head)
    return out


def test_every_module_has_a_stage():
    modules = {_module(p) for p in PACKAGE.rglob("*.py")}
    assert modules - set(STAGE) == set(), "give each new module its stage in tests/test_layers.py"


def test_no_stage_imports_a_later_one():
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        module = _module(path)
        for imported in _imports(path, module):
            if STAGE[imported] > STAGE[module]:
                wrong.append(f"{module} (stage {STAGE[module]}) imports {imported} (stage {STAGE[imported]})")
    assert wrong == []


def test_the_check_sees_imports():
    """The check itself: it finds a relative import of an earlier and of a later stage."""
    assert "frames" in _imports(PACKAGE / "exchanges.py", "exchanges")
    assert "capture" in _imports(PACKAGE / "reader.py", "reader")
    assert "reader" in _imports(PACKAGE / "datasource.py", "datasource")


def test_no_class_is_over_200_lines():
    """A class does one job: one that grows past 200 lines is split (as Framer/Resync,
    TlsSession/Handshake, TlsDirection/RecordStream, Decoder/Pairing were)."""
    big = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 200:
                big.append(f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not big, big
