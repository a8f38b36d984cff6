"""notebooks/explore.ipynb runs from top to bottom on the sample captures (so it never rots)."""

import datetime
import re
from pathlib import Path

import dpkt


NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "explore.ipynb"


def test_notebook_runs():
    import glob
    import tempfile

    logs = set(glob.glob(f"{tempfile.gettempdir()}/kafkawire-spark-*.log"))
    import nbformat  # (here: nbclient's imports take seconds, and every run of the suite collects this file)
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()  # raises on a failing cell
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 4  # the plots were drawn
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "exchanges in 9 captures" in text and "Produce" in text and "Int16" in text
    assert "metrics" in text and "billing, shipping" in text  # lineage: the unread topic, a topic's groups
    assert "analytics" in text and " 50 " in text  # consumer lag: the paused consumer 50 records behind
    # the bytes-per-second plots: each capture over its own span (seconds to minutes), not the
    # samples' days; the spans the cell drew, checked against the capture's own packet times (dpkt)
    (volume,) = [c for c in nb.cells if c.cell_type == "code" and "drawn from" in c.source]
    said = "".join(o.get("text", "") for o in volume.outputs)
    spans = re.findall(r"^(\S+): drawn from (\S+ \S+) to (\S+ \S+)$", said, re.M)
    assert len(spans) >= 2, text[-3000:]
    for cap, first, last in spans:
        a, b = (datetime.datetime.fromisoformat(t).replace(tzinfo=datetime.timezone.utc) for t in (first, last))
        with open(NOTEBOOK.parents[1] / "sample_pcaps" / cap, "rb") as f:
            times = [ts for ts, _ in (dpkt.pcapng.Reader(f) if cap.endswith("pcapng") else dpkt.pcap.Reader(f))]
        start = datetime.datetime.fromtimestamp(min(times), datetime.timezone.utc)
        end = datetime.datetime.fromtimestamp(max(times), datetime.timezone.utc)
        assert start - datetime.timedelta(seconds=1) <= a <= b <= end, (cap, a, b, start, end)
    # no Java or log4j lines in the first cell (the session's start): a kernel shows what the JVM
    # writes to stderr, so the JVM the notebook starts writes it to a log file of its own
    first = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert "WARN" not in first and "log4j" not in first.lower() and "Setting default log level" not in first, first
    (log,) = set(glob.glob(f"{tempfile.gettempdir()}/kafkawire-spark-*.log")) - logs
    assert "log4j" in Path(log).read_text(), Path(log).read_text()[:2000]
    # errors by the one rule: the failed logins are there; ApiVersions' version negotiation is not
    (errors,) = [c for c in nb.cells if c.cell_type == "code" and "failed()" in c.source]
    shown = "".join(str(o.get("data", {}).get("text/plain", "")) for o in errors.outputs)
    # (every ApiVersions error of the samples is that negotiation: tests/test_cli.py counts them with tshark)
    assert "SASL_AUTHENTICATION_FAILED" in shown and "ApiVersions" not in shown


def test_make_notebook_serves_the_notebook():
    """README's one command: `make notebook` starts Jupyter (installed into .venv by the tests' own
    dependencies here) on notebooks/explore.ipynb; asked over its own API, it serves that notebook."""
    import json
    import os
    import signal
    import socket
    import subprocess
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = NOTEBOOK.parents[1]
    args = f"--no-browser --ip 127.0.0.1 --port {port} --IdentityProvider.token= --ServerApp.disable_check_xsrf=True"
    p = subprocess.Popen(["make", "-s", "notebook", f"JUPYTER_ARGS={args}"], cwd=root, start_new_session=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline, got = time.monotonic() + 180, None
        while time.monotonic() < deadline and p.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/explore.ipynb", timeout=5) as r:
                    got = json.load(r)
                    break
            except OSError:
                time.sleep(1)
        assert got, (p.poll(), p.stdout.read().decode(errors="replace")[-2000:] if p.poll() is not None else "")
        assert got["type"] == "notebook" and got["name"] == "explore.ipynb"
        assert got["content"]["cells"][0]["source"].startswith("# Exploring Kafka captures")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)
