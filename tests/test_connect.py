"""A Spark Connect session (pip pyspark's own sbin/start-connect-server.sh on localhost): register(),
reads and an audit work over it as over a classic session, and give read_capture's rows."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SAMPLES, free_port
from spark_kafkawire import read_capture

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    import pyspark

    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("connect")
    port = free_port()
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOG_DIR=str(work), SPARK_PID_DIR=str(work),
               PYSPARK_PYTHON=sys.executable)
    start = subprocess.run([str(home / "sbin" / "start-connect-server.sh"), "--master", "local[2]",
                            "--conf", f"spark.connect.grpc.binding.port={port}",
                            "--conf", f"spark.pyspark.python={sys.executable}"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert start.returncode == 0, start.stderr
    deadline = time.time() + 180
    while True:
        try:
            socket.create_connection(("localhost", port), timeout=1).close()
            break
        except OSError:
            if time.time() > deadline:
                logs = "".join(p.read_text()[-3000:] for p in work.glob("*.out"))
                pytest.fail(f"the Connect server did not listen on {port}: {logs}")
            time.sleep(1)
    yield f"sc://localhost:{port}"
    subprocess.run([str(home / "sbin" / "stop-connect-server.sh")], env=env, capture_output=True, timeout=120)


CLIENT = r"""
import json, sys
from pyspark.sql import SparkSession
import spark_kafkawire
from spark_kafkawire.audits import AUDITS, Policy, Rows

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
assert "connect" in type(spark).__module__, type(spark)
spark_kafkawire.register(spark)
df = spark.read.format("kafkawire").load(sys.argv[2])
rows = Rows.load(spark, [sys.argv[2]])
summary = AUDITS["exchange_summary"](rows, Policy())["exchange_summary"].collect()
print(json.dumps({"count": df.count(),
                  "apis": sorted({r["api_name"] for r in df.select("api_name").collect() if r["api_name"]}),
                  "summary_exchanges": sum(r["exchanges"] for r in summary)}))
"""


def test_register_read_and_audit_over_spark_connect(connect_url):
    path = SAMPLES / "tansu-confluent-codecs.pcap"
    r = subprocess.run([sys.executable, "-c", CLIENT, connect_url, str(path)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    want = read_capture(path).to_pylist()
    assert got["count"] == len(want)
    assert got["apis"] == sorted({w["api_name"] for w in want if w["api_name"]})
    assert got["summary_exchanges"] == sum(1 for w in want if w["api_name"] or w["status"] == "request_missing")
