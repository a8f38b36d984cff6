"""The house's rules, read from the source: each subpackage is one stage of the pipeline and
imports only the stages before it (docs/architecture.md); within a subpackage, modules import only
modules of their own step or earlier ones; no class grows past 200 lines. A new module must be given
its place here."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "spark_kafkawire"

#: the layers, earliest first: a module may import from its own layer and earlier ones. A layer is
#: a subpackage (one stage of the pipeline) or, for the package's own top-level modules, a list
LAYERS = [
    # shared ground: which code is compiled, escaping, Arrow arrays from buffers, the protocol's data
    ("ground", {"compiled", "escape", "arrays", "protocol", "protocol.generate"}),
    ("wire", "wire"),  # capture files -> packets -> TCP byte streams -> frames (and the fast lane)
    ("tls", "tls"),  # byte streams -> TLS plaintext (fed to the same framers)
    ("kafka", "kafka"),  # frames -> headers, bodies, records, facts
    ("decode", "decode"),  # connections: roles, state, pairing into exchanges, damage modes
    ("rows", "rows"),  # exchanges -> rows, Arrow tables
    # the read over all of the above: options, files, wiring, a series carried from one read to the next
    ("read", {"options", "listing", "reader", "carry", "statefile", "statedecl"}),
    # the thin layers over read_capture: Spark, the command line, the audits
    ("thin", {"spark", "arguments", "firstlook", "cli", "stdin", "texttable", "figures", "audits", "__init__", "__main__", "_autoload"}),
]

#: within a layer, the order of its modules' steps (a module may import its own step and earlier
#: ones); a layer not listed here has no order within it
STEPS = {
    "wire": [{"fs", "flow", "loss", "halfstream", "boundary", "inflate"}, {"health"}, {"capture"}, {"series"}, {"packets"}, {"tcp"}, {"frames"}, {"lane"}],
    "tls": [{"suites", "fingerprints", "keylog", "budget"}, {"keys"}, {"guess", "handshake"}, {"recordstream"}, {"direction"}, {"trial"}, {"session"}],
    "kafka": [{"wiretypes", "values", "sasl", "carried", "jsontext", "clients"}, {"batchheader", "codecs"}, {"records", "headers", "secrets"}, {"layouts", "batchsummary"}, {"codegen"}, {"body"}, {"message"},
              {"headline", "partitions", "topicids"}],
    "decode": [{"status", "predicate", "roles", "connstate", "modes", "summary"}, {"pairing"}, {"exchanges"}],
    "rows": [{"columns", "held"}, {"table", "timing"}, {"recordrows"}, {"shapes", "tee"}],
}


def _layer(module: str) -> int:
    """The layer of a module (dotted, relative to the package)."""
    for i, (_, members) in enumerate(LAYERS):
        if isinstance(members, str):
            if module == members or module.startswith(members + "."):
                return i
        elif module in members or module.split(".")[0] in members:
            return i
    raise KeyError(module)


def _step(module: str) -> tuple[str, int] | None:
    head, _, leaf = module.partition(".")
    for i, step in enumerate(STEPS.get(head, [])):
        if leaf.split(".")[0] in step:
            return head, i
    return None


def _module(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _modules() -> set[str]:
    return {_module(p) for p in PACKAGE.rglob("*.py")}


def _imports(path: Path, module: str) -> set[str]:
    """The package modules a module imports (relative or absolute), dotted; not those imported for
    annotations only."""
    package = module.split(".")[:-1] if not path.name == "__init__.py" else module.split(".")
    if module == "__init__":
        package = []
    known = _modules()
    out = set()
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and ast.unparse(node.test) ==
                   "TYPE_CHECKING" for child in node.body for n in ast.walk(child)}
    for node in ast.walk(tree):
        if id(node) in typing_only:  # an annotation's import (if TYPE_CHECKING:) is no dependency at run time
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("spark_kafkawire"):
                target = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:
                name = ".".join(target + [alias.name])
                out.add(name if name in known else ".".join(target) or "__init__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("spark_kafkawire."):
                    out.add(alias.name.split(".", 1)[1])
    return out


def test_every_module_has_a_place():
    unplaced = []
    for module in _modules():
        try:
            _layer(module)
        except KeyError:
            unplaced.append(module)
        head = module.split(".")[0]
        if head in STEPS and module != head and _step(module) is None:
            unplaced.append(module)
    assert unplaced == [], "give each new module its layer (and step) in tests/test_layers.py"


def test_no_layer_imports_a_later_one():
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        module = _module(path)
        for imported in _imports(path, module):
            if _layer(imported) > _layer(module):
                wrong.append(f"{module} ({LAYERS[_layer(module)][0]}) imports {imported} "
                             f"({LAYERS[_layer(imported)][0]})")
            mine, theirs = _step(module), _step(imported)
            if mine and theirs and mine[0] == theirs[0] and theirs[1] > mine[1]:
                wrong.append(f"{module} imports {imported}, a later step of {mine[0]}/")
    assert wrong == []


def test_each_subpackage_says_its_stage_and_what_it_imports():
    """A subpackage's docstring is where a newcomer reads what it does: it names the stage and what
    the subpackage may import."""
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        if init.parent.name.startswith("_"):
            continue
        assert len(doc) > 200 and "Imports:" in doc, f"{init.parent.name}/__init__.py: say the stage and 'Imports: ...'"


def test_the_check_sees_imports():
    """The check itself: it finds relative imports across subpackages and within one."""
    assert "wire.frames" in _imports(PACKAGE / "decode" / "exchanges.py", "decode.exchanges")
    assert "decode.pairing" in _imports(PACKAGE / "decode" / "exchanges.py", "decode.exchanges")
    assert "wire.capture" in _imports(PACKAGE / "reader.py", "reader")
    assert "reader" in _imports(PACKAGE / "spark" / "datasource.py", "spark.datasource")
    assert "tls.keys" in _imports(PACKAGE / "tls" / "session.py", "tls.session")
    assert _layer("kafka.body") > _layer("wire.tcp") and _step("wire.lane") > _step("wire.tcp")


def test_no_class_is_over_200_lines():
    """A class does one job: one that grows past 200 lines is split (as Framer/Resync,
    TlsSession/Handshake, TlsDirection/RecordStream, Decoder/Pairing were)."""
    big = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 200:
                big.append(f"{path.relative_to(PACKAGE)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not big, big


def test_no_module_is_over_500_lines():
    """A module holds one stage's one job: one that grows past 500 lines is split along its seam (as
    decode/pairing.py from exchanges.py, kafka/codecs.py and batchheader.py from records.py,
    kafka/message.py from body.py, tls/recordstream.py from direction.py were), and the audit job's
    entry point stays thin."""
    big = [f"{p.relative_to(ROOT)} ({n} lines)" for p in sorted(PACKAGE.rglob("*.py")) + [ROOT / "jobs" / "audit.py"]
           if (n := len(p.read_text().splitlines())) > 500]
    assert not big, big
