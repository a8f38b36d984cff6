"""A real Spark standalone cluster: a master and two workers started from pip pyspark's own
scripts on localhost, the exchange job submitted with spark-submit, tasks on both executors, and
rows equal to read_capture's."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import ROOT, SAMPLES
from spark_kafkawire import read_capture


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    import pyspark

    home = Path(pyspark.__file__).parent
    tmp = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOG_DIR=str(tmp / "logs"), SPARK_PID_DIR=str(tmp / "pids"),
               SPARK_WORKER_DIR=str(tmp / "work"), PYSPARK_PYTHON=sys.executable, SPARK_IDENT_STRING="kafkawire-test")
    port, ui = _free_port(), _free_port()
    daemon = str(home / "sbin" / "spark-daemon.sh")
    master = f"spark://127.0.0.1:{port}"
    subprocess.run([daemon, "start", "org.apache.spark.deploy.master.Master", "1", "--host", "127.0.0.1",
                    "--port", str(port), "--webui-port", str(ui)], env=env, check=True, capture_output=True)
    for n in (1, 2):
        subprocess.run([daemon, "start", "org.apache.spark.deploy.worker.Worker", str(n), "--cores", "1",
                        "--memory", "1g", "--webui-port", str(_free_port()), master],
                       env=env, check=True, capture_output=True)
    # the master's JSON page lists the workers once they have registered
    deadline = time.time() + 120
    import urllib.request

    while time.time() < deadline:
        try:
            state = json.load(urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2))
            if sum(w["state"] == "ALIVE" for w in state.get("workers", [])) == 2:
                break
        except OSError:
            pass
        time.sleep(1)
    else:
        pytest.fail("the standalone cluster did not come up: " + " ".join(
            p.read_text()[-2000:] for p in (tmp / "logs").glob("*.out")))
    yield master, env, tmp
    for n in (1, 2):
        subprocess.run([daemon, "stop", "org.apache.spark.deploy.worker.Worker", str(n)], env=env, capture_output=True)
    subprocess.run([daemon, "stop", "org.apache.spark.deploy.master.Master", "1"], env=env, capture_output=True)


def test_job_on_a_standalone_cluster(cluster):
    master, env, tmp = cluster
    out, events = tmp / "exchanges", tmp / "events"
    events.mkdir()
    submit = Path(sys.executable).parent / "spark-submit"
    r = subprocess.run([str(submit), "--master", master,
                        "--conf", f"spark.pyspark.python={sys.executable}",
                        "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events}",
                        "--conf", "spark.eventLog.compress=false", "--conf", "spark.eventLog.rolling.enabled=false",
                        # start the job only when both executors are there
                        "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
                        "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=120s",
                        "--executor-memory", "1g",
                        str(ROOT / "jobs" / "exchange_summary.py"), str(SAMPLES), "--out", str(out)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    # rows equal read_capture's
    got = pq.read_table(out).to_pylist()
    want = read_capture(SAMPLES).to_pylist()
    key = lambda x: (x["capture_file"], x["client_port"], x["correlation_id"], x["status"], x["request"])  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want))
    # tasks ran on both executors (the event log records each task's executor)
    executors = set()
    for log in (p for p in events.rglob("*") if p.is_file()):
        for line in log.read_text().splitlines():
            e = json.loads(line)
            if e.get("Event") == "SparkListenerTaskEnd":
                executors.add(e["Task Info"]["Executor ID"])
    assert len(executors - {"driver"}) == 2, executors
