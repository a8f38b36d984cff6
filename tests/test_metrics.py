"""The audit job's metrics read by a real Prometheus: the job writes its run's metrics for the node
exporter's textfile collector (--metrics-file), promtool accepts the file, Prometheus scrapes the
exporter, and the series read back through Prometheus' HTTP API are the exchange rows' figures
(read_capture of the same captures, no Spark)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from conftest import SAMPLES
from test_audits import _job

SKIP_STATUS = ("capture_damaged", "capture_changed", "tls")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _running(cmd: list[str], log: Path):
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _query(port: int, promql: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as r:
        got = json.load(r)
    assert got["status"] == "success", got
    return got["data"]["result"]


def _scraped(port: int, promql: str, log: Path, wait: float = 90) -> list[dict]:
    """The query's series once Prometheus has scraped them (within ``wait`` seconds), else the
    test fails with the end of Prometheus' log."""
    deadline, got = time.monotonic() + wait, []
    while time.monotonic() < deadline and not got:
        time.sleep(1)
        try:
            got = _query(port, promql)
        except OSError:
            got = []
    assert got, log.read_text()[-3000:]
    return got


def test_prometheus_scrapes_the_runs_metrics_through_the_textfile_collector(spark, tmp_path):
    prometheus, exporter = shutil.which("prometheus"), shutil.which("prometheus-node-exporter")
    assert prometheus and exporter and shutil.which("promtool"), "make system-deps installs Prometheus"
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    metrics = textfiles / "kafkawire.prom"
    r = _job(SAMPLES, "--out", tmp_path / "out", "--quiet", "--metrics-file", metrics, "--history", "none")
    assert r.returncode == 2, r.stderr[-3000:]  # (the samples fail two policies on purpose)
    check = subprocess.run(["promtool", "check", "metrics"], input=metrics.read_text(), capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert not [p for p in textfiles.iterdir() if p.name != metrics.name]  # (written whole, then renamed)
    text = metrics.read_text()
    assert "client_id" not in text and "client_ip" not in text  # (no unbounded label)

    exporter_port, prometheus_port = _port(), _port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: node\n    static_configs:\n"
                      f"      - targets: ['127.0.0.1:{exporter_port}']\n")
    with _running([exporter, "--collector.disable-defaults", "--collector.textfile",
                   f"--collector.textfile.directory={textfiles}", f"--web.listen-address=127.0.0.1:{exporter_port}"],
                  tmp_path / "exporter.log"), \
         _running([prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                   f"--web.listen-address=127.0.0.1:{prometheus_port}"], tmp_path / "prometheus.log"):
        count = "sum by (messaging_operation_name) (messaging_client_operation_duration_seconds_count)"
        got = _scraped(prometheus_port, count, tmp_path / "prometheus.log")
        by_api = {g["metric"]["messaging_operation_name"]: float(g["value"][1]) for g in got}
        statuses = {(g["metric"]["messaging_operation_name"], g["metric"]["status"]): float(g["value"][1])
                    for g in _query(prometheus_port, "kafkawire_exchanges")}
        failing = {g["metric"]["policy"] for g in _query(prometheus_port, 'kafkawire_policy_result{status="FAIL"}')}
        topics = {g["metric"].get("messaging_destination_name", ""): float(g["value"][1]) for g in _query(
            prometheus_port, 'sum by (messaging_destination_name) (messaging_client_operation_duration_seconds_count'
                             '{messaging_operation_name="Produce"})')}

    from spark_kafkawire import read_capture

    rows = [r for r in read_capture(str(SAMPLES)).to_pylist() if r["api_name"] is not None
            and r["status"] not in SKIP_STATUS]
    timed = Counter(r["api_name"] for r in rows if r["latency_ms"] is not None)
    assert by_api == {k: float(v) for k, v in timed.items()}
    assert statuses == {k: float(v) for k, v in Counter((r["api_name"], r["status"]) for r in rows).items()}
    assert len(failing) == 2 and "no SASL PLAIN login outside TLS" in failing
    # the samples name a few topics: each Produce naming one is counted under it
    produce = [r for r in rows if r["api_name"] == "Produce" and r["latency_ms"] is not None]
    assert topics == {k: float(v) for k, v in Counter(r["topics"][0] if len(r["topics"] or []) == 1 else ""
                                                      for r in produce).items()}


def test_the_pushgateway_holds_the_runs_metrics_with_client_labels_on_request(spark, tmp_path):
    """--pushgateway pushes the same metrics to a real Pushgateway, which Prometheus scrapes (honoring
    the pushed labels); --metrics-labels client_id adds each client's id as a label, counted as
    read_capture counts that client's exchanges. A Pushgateway that is not there is one line on
    stderr naming it, and the run's exit status stands."""
    prometheus, gateway = shutil.which("prometheus"), shutil.which("prometheus-pushgateway")
    assert prometheus and gateway, "make system-deps installs Prometheus and its Pushgateway"
    gateway_port, prometheus_port = _port(), _port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: pushgateway\n"
                      "    honor_labels: true\n    static_configs:\n"
                      f"      - targets: ['127.0.0.1:{gateway_port}']\n")
    with _running([gateway, f"--web.listen-address=127.0.0.1:{gateway_port}"], tmp_path / "gateway.log"), \
         _running([prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                   f"--web.listen-address=127.0.0.1:{prometheus_port}"], tmp_path / "prometheus.log"):
        time.sleep(1)
        r = _job(SAMPLES, "--out", tmp_path / "out", "--quiet", "--history", "none",
                 "--pushgateway", f"http://127.0.0.1:{gateway_port}", "--metrics-labels", "client_id")
        assert r.returncode == 2 and "not pushed" not in r.stderr, r.stderr[-3000:]
        query = 'sum by (client_id) (kafkawire_exchanges{job="kafkawire_audit"})'
        got = _scraped(prometheus_port, query, tmp_path / "prometheus.log")
        by_client = {g["metric"].get("client_id", ""): float(g["value"][1]) for g in got}

    from spark_kafkawire import read_capture

    rows = [r for r in read_capture(str(SAMPLES)).to_pylist() if r["api_name"] is not None
            and r["status"] not in SKIP_STATUS]
    assert by_client == {k or "": float(v) for k, v in Counter(r["client_id"] for r in rows).items()}
    # nothing listening: said in one line, the run's verdicts and exit status stand
    down = _job(SAMPLES / "mock-kcat.pcap", "--out", tmp_path / "out2", "--quiet", "--history", "none",
                "--pushgateway", f"http://127.0.0.1:{_port()}")
    said = [ln for ln in down.stderr.splitlines() if "--pushgateway" in ln]
    assert len(said) == 1 and "the metrics were not pushed" in said[0], down.stderr[-2000:]
    assert down.returncode in (0, 3) and json.loads((tmp_path / "out2" / "run.json").read_text())["state"] == "complete"
    bad = _job(SAMPLES / "mock-kcat.pcap", "--out", tmp_path / "out3", "--metrics-labels", "topic")
    assert bad.returncode != 0 and "--metrics-labels" in bad.stderr and "'topic'" in bad.stderr
