"""A real Spark standalone cluster: a master and two workers started from pip pyspark's own
scripts on localhost, the exchange job submitted with spark-submit, tasks on both executors, and
rows equal to read_capture's."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import ROOT, SAMPLES, free_port
from spark_kafkawire import read_capture


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    import pyspark

    home = Path(pyspark.__file__).parent
    tmp = tmp_path_factory.mktemp("cluster")
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOG_DIR=str(tmp / "logs"), SPARK_PID_DIR=str(tmp / "pids"),
               SPARK_WORKER_DIR=str(tmp / "work"), PYSPARK_PYTHON=sys.executable, SPARK_IDENT_STRING="kafkawire-test")
    port, ui = free_port(), free_port()
    daemon = str(home / "sbin" / "spark-daemon.sh")
    master = f"spark://127.0.0.1:{port}"
    subprocess.run([daemon, "start", "org.apache.spark.deploy.master.Master", "1", "--host", "127.0.0.1",
                    "--port", str(port), "--webui-port", str(ui)], env=env, check=True, capture_output=True)
    for n in (1, 2):
        subprocess.run([daemon, "start", "org.apache.spark.deploy.worker.Worker", str(n), "--cores", "1",
                        "--memory", "1g", "--webui-port", str(free_port()), master],
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


def events_of(directory: Path, kind: str) -> list[dict]:
    """Spark's event log (spark.eventLog.dir) entries of one kind."""
    out = []
    for log in (p for p in directory.rglob("*") if p.is_file()):
        out += [e for e in map(json.loads, log.read_text().splitlines()) if e.get("Event") == kind]
    return out


EVENT_LOG = ["--conf", "spark.eventLog.enabled=true", "--conf", "spark.eventLog.compress=false",
             "--conf", "spark.eventLog.rolling.enabled=false"]


def _submit_job(cluster, events: Path, *job_args: str,
                script: str = "exchange_summary.py") -> subprocess.CompletedProcess:
    """A job of jobs/ (the exchange job) on the cluster, started once both executors are there, with an
    event log."""
    master, env, _tmp = cluster
    events.mkdir()
    submit = Path(sys.executable).parent / "spark-submit"
    return subprocess.run([str(submit), "--master", master,
                           "--conf", f"spark.pyspark.python={sys.executable}",
                           *EVENT_LOG, "--conf", f"spark.eventLog.dir={events}",
                           "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
                           "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=120s",
                           "--executor-memory", "1g", str(ROOT / "jobs" / script), *job_args],
                          env=env, capture_output=True, text=True, timeout=600)


def _both_executors(events: Path) -> None:
    """Tasks ran on both executors (the event log records each task's executor)."""
    executors = {e["Task Info"]["Executor ID"] for e in events_of(events, "SparkListenerTaskEnd")}
    assert len(executors - {"driver"}) == 2, executors


def test_job_on_a_standalone_cluster(cluster):
    tmp = cluster[2]
    out, events = tmp / "exchanges", tmp / "events"
    r = _submit_job(cluster, events, str(SAMPLES), "--out", str(out))
    assert r.returncode == 0, r.stderr[-4000:]
    # rows equal read_capture's
    got = pq.read_table(out).to_pylist()
    want = read_capture(SAMPLES).to_pylist()
    key = lambda x: (x["capture_file"], x["client_port"], x["correlation_id"], x["status"], x["request"])  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want))
    _both_executors(events)


def test_one_file_read_in_shares_on_both_executors(cluster, tmp_path):
    """One capture file, four partitions (--option): the shares run on both executors and their
    rows together are read_capture's of the file."""
    path, out, events = SAMPLES / "stub-sasl.pcap", tmp_path / "rows", tmp_path / "events"
    r = _submit_job(cluster, events, str(path), "--out", str(out),
                    "--option", "maxPartitionBytes=20000", "--option", "minPartitions=4")
    assert r.returncode == 0, r.stderr[-4000:]
    stages = [e["Stage Info"]["Number of Tasks"] for e in events_of(events, "SparkListenerStageCompleted")]
    assert 4 in stages, stages  # the decoding stage: one task per share (the others: checks, summary)
    got = pq.read_table(out).to_pylist()
    want = read_capture(path).to_pylist()
    key = lambda x: (x["client_port"], x["correlation_id"], x["status"], x["request"], x["response"])  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want))
    _both_executors(events)


def test_job_with_a_packed_environment(cluster, tmp_path):
    """The package shipped to executors as a packed virtual environment (venv-pack) with
    --archives: a fresh venv holding only this package and its dependencies (pyspark comes from
    Spark's own pyspark.zip on the executors). The driver's planning workers run the same
    interpreter, unpacked beside the job."""
    master, env, _tmp = cluster
    slim = tmp_path / "slim"
    subprocess.run([sys.executable, "-m", "venv", str(slim)], check=True)
    subprocess.run([str(slim / "bin" / "pip"), "install", "-q", str(ROOT)], check=True, capture_output=True)
    packed = tmp_path / "env.tar.gz"
    subprocess.run([str(Path(sys.executable).parent / "venv-pack"), "-p", str(slim), "-o", str(packed), "-q"],
                   check=True)
    work = tmp_path / "driver"
    (work / "environment").mkdir(parents=True)
    subprocess.run(["tar", "-xzf", str(packed), "-C", str(work / "environment")], check=True)
    out = tmp_path / "exchanges"
    submit = Path(sys.executable).parent / "spark-submit"
    job_env = {k: v for k, v in env.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    job_env["PYSPARK_DRIVER_PYTHON"] = sys.executable  # runs the job script; pyspark is there
    events = tmp_path / "events"
    events.mkdir()
    r = subprocess.run([str(submit), "--master", master, "--archives", f"{packed}#environment",
                        "--conf", "spark.pyspark.python=./environment/bin/python",
                        *EVENT_LOG, "--conf", f"spark.eventLog.dir={events}",
                        "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
                        "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=120s",
                        "--executor-memory", "1g",
                        str(ROOT / "jobs" / "exchange_summary.py"), str(SAMPLES), "--out", str(out)],
                       env=job_env, cwd=work, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert pq.read_table(out).num_rows == read_capture(SAMPLES).num_rows
    # the executors ran the packed interpreter: the setting reached the application unchanged
    settings = {}
    for e in events_of(events, "SparkListenerEnvironmentUpdate"):
        settings.update(e["Spark Properties"])
    assert settings.get("spark.pyspark.python") == "./environment/bin/python"


def test_the_audit_job_on_the_cluster_gives_the_local_run_s_results(cluster, tmp_path):
    """The audit job submitted to the cluster reads several capture files in tasks on both executors
    (each task decodes its files once into every row shape: spark/scan.py) and gives the verdicts and
    audit tables of the same job run locally, where the driver decodes the small sample alone."""
    out, local, events = tmp_path / "cluster", tmp_path / "local", tmp_path / "events"
    r = _submit_job(cluster, events, str(SAMPLES), "--out", str(out), "--option", "maxPartitionBytes=400000",
                    script="audit.py")
    assert r.returncode == 2, r.stderr[-4000:]  # (the samples fail two policies on purpose: README)
    _both_executors(events)
    mine = subprocess.run([sys.executable, str(ROOT / "jobs" / "audit.py"), str(SAMPLES), "--out", str(local)],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    assert mine.returncode == 2, mine.stderr[-4000:]
    verdicts = lambda text: sorted(ln for ln in text.splitlines() if ln.startswith("  ["))  # noqa: E731
    assert verdicts(r.stdout) == verdicts(mine.stdout) and verdicts(r.stdout)
    for table in ("exchange_summary/exchange_summary", "clients/clients", "lineage/lineage_topics",
                  "delivery/delivery_by_topic", "capture_health/capture_files"):
        a, b = pq.read_table(out / table).to_pylist(), pq.read_table(local / table).to_pylist()
        assert sorted(map(str, a)) == sorted(map(str, b)), table
    for shape in ("exchanges", "connections", "partitions", "records"):
        assert pq.read_table(out / "rows" / shape).num_rows == read_capture(SAMPLES, rows=shape).num_rows, shape
