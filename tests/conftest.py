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
