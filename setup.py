"""The compiled parts of the package; everything else about the build is in pyproject.toml.

Two optional parts, each skipped (the package then runs them as Python) when it cannot be built:

- ``spark_kafkawire.wire._lane``: the fast lane, hand-written C (spark_kafkawire/wire/_lane.c, see
  lane.py): capture records to the TCP segments the reassembler is fed, nothing after;
- the per-exchange stages (NATIVE below), compiled by mypyc from their own Python sources: the
  ``.py`` files stay the one source and the reference, the compiled modules are built from them.
  The build also writes ``spark_kafkawire/_native.json``: which modules were compiled, from
  sources with which CRC-32. At import, spark_kafkawire/compiled.py runs the compiled modules only
  when every one of those sources is unchanged and KAFKAWIRE_PURE_PYTHON is not set; otherwise the
  ``.py`` sources, all of them (compiled modules call each other directly, so they are used all
  together or not at all).
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
#: the modules compiled by mypyc: the per-connection and per-exchange work (reassembly, framing,
#: roles, body decoding, facts, pairing, rows). Not predicate.py: its filters are pickled to Spark's
#: workers, which a compiled class is not
NATIVE = ["wire.loss", "wire.health", "wire.flow", "wire.halfstream", "wire.tcp", "wire.boundary", "wire.frames",
          "wire.lane", "decode.roles", "kafka.wiretypes", "kafka.headers", "kafka.secrets", "kafka.jsontext", "kafka.layouts", "kafka.body", "kafka.message",
          "kafka.sasl", "kafka.carried", "kafka.batchheader", "kafka.codecs", "kafka.records", "kafka.batchsummary", "kafka.headline", "kafka.partitions", "kafka.topicids", "kafka.clients", "decode.connstate",
          "decode.status", "decode.pairing", "decode.exchanges", "decode.modes", "arrays", "rows.held", "rows.table", "rows.timing", "rows.recordrows", "rows.shapes", "rows.tee",
          "tls.guess", "tls.keys", "tls.recordstream", "tls.direction"]
GROUP = "spark_kafkawire._native"
#: why the compiled stages did not build, where they did not: written into _native.json, which make
#: setup (and every start, see compiled.py) reads and says loudly
FAILED: list[str] = []


def sources_digest() -> dict:
    """Each compiled module's source's CRC-32 (zlib's, as compiled.py checks it at every start: it
    tells an edited checkout from its build, and costs 0.1 ms where SHA-256 cost 3)."""
    digests = {}
    for m in NATIVE:
        source = HERE / "spark_kafkawire" / (m.replace(".", "/") + ".py")
        digests[m] = f"{zlib.crc32(source.read_bytes()):08x}"
    return digests


def native_extensions() -> list[Extension]:
    try:
        from mypyc.build import mypycify
    except ImportError:  # no mypyc: the stages run as Python
        return []
    try:
        # (the build runs without the package's dependencies, which mypy then takes as untyped: an
        # ignore that `make lint` needs, where pyspark is installed, is unused here and no error)
        exts = mypycify(["--no-warn-unused-ignores"] + [f"spark_kafkawire/{m.replace('.', '/')}.py" for m in NATIVE], opt_level="3",
                        group_name=GROUP)
    except (Exception, SystemExit) as e:  # a type error mypyc refuses, say: run them as Python
        print(f"spark_kafkawire: the stages are not compiled ({e}); they run as Python", file=sys.stderr)
        FAILED.append(f"mypyc refused the stages' sources ({e}): a type error? `make lint` (mypy) names it")
        return []
    for ext in exts:
        ext.optional = True
        if ext.name == f"{GROUP}__mypyc" and sys.platform.startswith("linux"):
            # the compiled functions call each other directly: hidden, a call between them is not
            # made through the symbol table (PLT) and small ones can be inlined, as in one C file
            # (the module's PyInit stays visible: CPython's PyMODINIT_FUNC exports it); without the
            # PLT, a call into Python's own library jumps once, not twice (-2.6% instructions
            # frame-dense, docs/benchmarks.md)
            ext.extra_compile_args = [*ext.extra_compile_args, "-fvisibility=hidden", "-fno-plt"]
    return exts


class BuildPy(build_py):
    """Writes _native.json beside the modules: the sources the compiled modules are built from."""

    def run(self) -> None:
        super().run()
        # compiled modules copied from the source tree (a checkout after make setup) are not this
        # build's: build_ext puts in those it makes
        for old in (Path(self.build_lib) / "spark_kafkawire").rglob("*.so"):
            old.unlink()
        out = Path(self.build_lib) / "spark_kafkawire" / "_native.json"
        out.write_text(json.dumps({"group": GROUP, "modules": sources_digest(), "failed": FAILED}, indent=1) + "\n")


class BuildExt(build_ext):
    """An optional extension that fails to build (no compiler) is left out, with one line saying so."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 (the whole build step, as setuptools' optional does per module)
            print(f"spark_kafkawire: no compiled parts ({e}); everything runs as Python", file=sys.stderr)
            FAILED.append(f"the C compiler failed ({e})")
            out = Path(self.build_lib) / "spark_kafkawire" / "_native.json"
            if out.exists():
                built = json.loads(out.read_text())
                out.write_text(json.dumps({**built, "failed": FAILED}, indent=1) + "\n")


def lane_extension() -> list[Extension]:
    """The fast lane: capture records to TCP segments (wire/_lane.c, plain C on Python's API)."""
    return [Extension("spark_kafkawire.wire._lane", ["spark_kafkawire/wire/_lane.c"], optional=True)]


native = native_extensions()
setup(ext_modules=lane_extension() + native, cmdclass={"build_py": BuildPy, "build_ext": BuildExt})
