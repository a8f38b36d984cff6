"""notebooks/explore.ipynb runs from top to bottom on the sample captures (so it never rots)."""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "explore.ipynb"


def test_notebook_runs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()  # raises on a failing cell
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 4  # the plots were drawn
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "exchanges in 9 captures" in text and "Produce" in text and "Int16" in text
    assert "metrics" in text and "billing, shipping" in text  # lineage: the unread topic, a topic's groups
    assert "analytics" in text and " 50 " in text  # consumer lag: the paused consumer 50 records behind
    # errors by the one rule: the failed logins are there; ApiVersions' version negotiation is not
    (errors,) = [c for c in nb.cells if c.cell_type == "code" and "failed()" in c.source]
    shown = "".join(str(o.get("data", {}).get("text/plain", "")) for o in errors.outputs)
    # (every ApiVersions error of the samples is that negotiation: tests/test_cli.py counts them with tshark)
    assert "SASL_AUTHENTICATION_FAILED" in shown and "ApiVersions" not in shown
