import os
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_pcaps"
PUBLIC = ROOT.parent / "shared" / "public-captures"
FINDINGS = ROOT.parent / "shared" / "fuzz-findings"  # hostile inputs found by attacks on the decoder

sys.path.insert(0, str(Path(__file__).resolve().parent))


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
