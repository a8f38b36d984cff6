import os
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_pcaps"
PUBLIC = ROOT.parent / "shared" / "public-captures"
FINDINGS = ROOT.parent / "shared" / "fuzz-findings"  # hostile inputs found by attacks on the decoder

# the tests, and beside them the tools they and the make targets use (capture builders, damage,
# the benchmark, the fuzz campaign, the headline reference)
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent / "tools")]

SHARED = ROOT.parent / "shared"
#: test modules by tier (see docs/testing.md); tests using the ``spark`` fixture are marked spark too
MODULE_MARKS = {
    "test_cluster": ("cluster", "spark", "slow"),
    "test_storage": ("storage", "slow"),
    "test_connect": ("spark", "slow"),
    "test_notebook": ("spark", "slow"),
    "test_audits": ("spark",),
    "test_metrics": ("spark", "slow"),
    "test_wire_audits": ("spark",),
    "test_spark": ("spark",),
    "test_tshark": ("external",),
    "test_cli": ("external",),
    "test_captures": ("external",),
    "test_lane": ("compiled",),
    # live traffic through the delay forwarder, its times held to 2 ms: run alone (a busy machine's
    # scheduling of the forwarder can exceed that), with the server tests
    "test_network_split": ("timing", "external", "slow"),
    "test_production_time": ("timing", "external", "slow"),
}


def shared_files(folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """Files of a folder of ../shared, or none where ../shared is not beside the checkout (the tests
    that take them are then skipped, not failing collection)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.endswith(suffixes))


def _native() -> bool:
    """Are the stage modules mypyc compiled in use (spark_kafkawire/compiled.py)?"""
    from spark_kafkawire import compiled

    return compiled.native


def pytest_report_header(config):
    """Whether the compiled stages are in use, said first: where they should be and are not (an
    edited checkout, a build that failed), loudly."""
    import os

    from spark_kafkawire import compiled

    if compiled.native:
        return "kafkawire: compiled stages in use"
    if os.environ.get("KAFKAWIRE_PURE_PYTHON"):
        return "kafkawire: pure Python (KAFKAWIRE_PURE_PYTHON is set)"
    return ["!" * 78, f"!! kafkawire: THE COMPILED STAGES ARE NOT IN USE: {compiled.native_reason}",
            "!! the tests run the Python sources (make setup builds them)", "!" * 78]


def pytest_collection_modifyitems(config, items):
    import inspect

    for item in items:
        module = item.module.__name__ if item.module else ""
        for mark in MODULE_MARKS.get(module, ()):
            item.add_marker(mark)
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker("spark")
        if os.environ.get("KAFKAWIRE_PURE_PYTHON") and item.get_closest_marker("compiled"):
            item.add_marker(pytest.mark.skip(reason="KAFKAWIRE_PURE_PYTHON=1: no compiled code to compare with"))
        if item.get_closest_marker("spies") and _native():
            item.add_marker(pytest.mark.skip(reason="spies on a call between compiled stage modules (they call each "
                                                    "other directly): run by the pure-Python tier"))
        if not SHARED.is_dir():
            try:
                source = inspect.getsource(item.function)
            except (OSError, TypeError):
                source = ""
            params = getattr(getattr(item, "callspec", None), "params", {})
            if "PUBLIC" in source or "FINDINGS" in source or "FACTS" in source or \
                    any(str(SHARED) in str(v) for v in params.values()):
                item.add_marker(pytest.mark.skip(reason=f"needs {SHARED} (public captures and fuzz findings) "
                                                        f"beside the checkout"))


def text_table(text: str, title: str | None = None) -> list[list[str]]:
    """The header and rows of a table the command line printed (columns found by its dashed rule),
    the first one, or the one under the line ``title``."""
    import re

    lines = text.splitlines()
    if title is not None:
        lines = lines[lines.index(title) + 1:]
    i = next(k for k, ln in enumerate(lines) if ln.strip() and set(ln.strip()) <= {"-", " "} and k > 0)
    spans = [m.span() for m in re.finditer(r"-+", lines[i])]
    out = []
    for ln in [lines[i - 1]] + lines[i + 1:]:
        if not ln.strip():
            break
        out.append([ln[a:b if k + 1 < len(spans) else None].strip() for k, (a, b) in enumerate(spans)])
    return out


def free_port() -> int:
    """A TCP port free on localhost, for a server a test starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole run; its Python workers use this interpreter."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import spark_kafkawire

    s = spark_kafkawire.spark_session("kafkawire-tests", master="local[2]")
    yield s
    s.stop()
