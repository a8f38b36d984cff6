"""Through Spark: spark.read.format("kafkawire"), one local SparkSession for the run."""

import os
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from conftest import PUBLIC, ROOT, SAMPLES, text_table
from spark_kafkawire import read_capture
from spark_kafkawire.rows.table import COLUMNS, arrow_schema, ddl

REQUIRED = """capture_file string, client_ip string, client_port int, broker_ip string, broker_port int,
    request_time timestamp, response_time timestamp, latency_ms double,
    api_key smallint, api_name string, api_version smallint,
    request_header_version tinyint, response_header_version tinyint,
    correlation_id int, client_id string, request_size int, response_size int, status string"""


@pytest.mark.parametrize("rows", sorted(COLUMNS))
def test_arrow_schema_is_what_spark_expects(spark, rows):
    assert arrow_schema(rows) == to_arrow_schema(StructType.fromDDL(ddl(rows)), timezone="UTC")


def test_exchange_columns_named_and_typed_as_specified(spark):
    df = spark.read.format("kafkawire").load(str(PUBLIC / "gosniffer-kafka.pcap"))
    required = StructType.fromDDL(REQUIRED)
    have = {f.name: f.dataType for f in df.schema.fields}
    for f in required.fields:
        assert have.get(f.name) == f.dataType, f.name


def test_spark_rows_equal_read_capture(spark):
    df = spark.read.format("kafkawire").load(str(SAMPLES))
    got = sorted((tuple(r) for r in df.drop("request_time", "response_time", "connection_time").collect()), key=repr)
    t = read_capture(SAMPLES).drop(["request_time", "response_time", "connection_time"])
    want = sorted((tuple(r.values()) for r in t.to_pylist()), key=repr)
    assert len(got) == len(want) > 200
    assert got == want


def test_times_are_utc_instants(spark):
    df = spark.read.format("kafkawire").load(str(PUBLIC / "deepflow-00-produce-v2.pcap"))
    (r,) = df.selectExpr("cast(request_time as string) t", "latency_ms").collect()
    # tshark -t ud shows the request packet at 2016-11-17 21:06:37.793608 UTC
    assert r.t == "2016-11-17 21:06:37.793608"
    assert r.latency_ms == pytest.approx(16.107)


def test_lists_of_paths_and_small_files_in_one_task(spark):
    files = [str(PUBLIC / "ndpi-kafka.pcap"), str(PUBLIC / "gosniffer-kafka.pcap"), str(SAMPLES / "mock-kcat.pcap")]
    df = spark.read.format("kafkawire").option("minPartitions", "1").load(files)
    assert df.rdd.getNumPartitions() == 1  # three small files: one task reads them (listing.plan)
    assert {r.capture_file.split("/")[-1] for r in df.select("capture_file").distinct().collect()} == {
        "ndpi-kafka.pcap", "gosniffer-kafka.pcap", "mock-kcat.pcap"}


def test_glob_and_case_insensitive_options(spark):
    df = (spark.read.format("kafkawire").option("ROWS", "Messages").option("Ports", "36333")
          .load(str(PUBLIC / "deepflow-1*.pcap")))
    got = sorted((r.direction, r.api_name) for r in df.collect())
    # deepflow-11/13/14 are on port 36333; deepflow-18 (ApiVersions) is on 9092 and left out
    assert got == sorted([("request", "JoinGroup"), ("response", "JoinGroup"), ("request", "LeaveGroup"),
                          ("response", "LeaveGroup"), ("request", "SyncGroup"), ("response", "SyncGroup")])


def test_records_and_partitions_rows_through_spark(spark):
    path = str(SAMPLES / "tansu-admin-txn.pcap")
    df = spark.read.format("kafkawire").option("rows", "records").option("includeRecords", "true").load(path)
    got = sorted((r.topic, r.offset, bytes(r.key) if r.key is not None else None, r.control_type)
                 for r in df.where("direction = 'response'").collect())
    t = read_capture(path, rows="records", includeRecords=True).to_pylist()
    want = sorted((r["topic"], r["offset"], r["key"], r["control_type"]) for r in t if r["direction"] == "response")
    assert got == want and len(got) > 5
    headers = df.select("headers").first().headers
    assert headers == [] or isinstance(headers, list)
    parts = spark.read.format("kafkawire").option("rows", "partitions").load(path)
    assert parts.where("api_name = 'TxnOffsetCommit'").selectExpr("sum(offset)").first()[0] == 7
    bare = spark.read.format("kafkawire").option("rows", "records").load(path)  # no payload without the option
    assert bare.count() == df.count() and bare.where("key is not null or value is not null").count() == 0


def test_not_a_capture_is_a_clear_error(spark, tmp_path):
    bad = tmp_path / "broken.pcap"
    bad.write_text("not a capture")
    with pytest.raises(Exception, match="broken.pcap: not a pcap or pcapng capture"):
        spark.read.format("kafkawire").load(str(bad)).collect()


def _run(code_or_args, **kw):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    return subprocess.run(code_or_args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, **kw)


def test_format_found_without_register_call():
    """A plain SparkSession, nothing imported: Spark finds the installed 'kafkawire' source."""
    code = textwrap.dedent(f"""
        from pyspark.sql import SparkSession
        s = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
        print("ROWS", s.read.format("kafkawire").load({str(PUBLIC / 'gosniffer-kafka.pcap')!r}).count())
    """)
    r = _run([sys.executable, "-c", code])
    assert "ROWS 2" in r.stdout, r.stderr[-3000:]


def test_job_with_spark_submit(tmp_path):
    submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    out = tmp_path / "parquet"
    r = _run([submit, "--master", "local[2]", "jobs/exchange_summary.py", str(PUBLIC), "--out", str(out)])
    assert r.returncode == 0, r.stderr[-3000:]
    t = pq.read_table(out)
    assert t.num_rows == read_capture(PUBLIC).num_rows
    # summary lines: capture_date, api_name, client_id, exchanges, errors, timed, p50, p99, unanswered
    table = text_table(r.stdout)
    assert table[0][:3] == ["capture_date", "api_name", "client_id"]
    assert any(c[1] == "Produce" and c[2] == "console-producer" for c in table)
    lines = [c for c in table if c[1] == "Metadata" and c[2] == "rdkafka"]  # one per capture date
    rows = read_capture(PUBLIC).to_pylist()
    mine = [x for x in rows if x["api_name"] == "Metadata" and x["client_id"] == "rdkafka"]
    assert sum(int(c[3]) for c in lines) == len(mine)
    assert sum(int(c[8]) for c in lines) == sum(1 for x in mine if x["status"] == "no_response")


def test_job_takes_reader_options(tmp_path):
    """--option KEY=VALUE reaches the reader (a capture read in 3 shares gives the same rows); a bad
    option or one the job decides itself fails before Spark starts, in one line."""
    path = SAMPLES / "stub-sasl.pcap"
    out = tmp_path / "parquet"
    r = _run([sys.executable, "jobs/exchange_summary.py", str(path), "--out", str(out),
              "--option", "maxPartitionBytes=20000", "--option", "minPartitions=3"])
    assert r.returncode == 0, r.stderr[-3000:]
    key = lambda x: (x["client_port"], x["correlation_id"], x["status"], x["request"], x["response"])  # noqa: E731
    assert sorted(map(key, pq.read_table(out).to_pylist())) == sorted(map(key, read_capture(path).to_pylist()))
    for bad, says in ((["--option", "minPartitions=0"], "option minPartitions: '0' is not allowed"),
                      (["--option", "rows=messages"], "the job chooses rows itself"),
                      (["--option", "nonsense"], "want KEY=VALUE")):
        e = _run([sys.executable, "jobs/exchange_summary.py", str(path), "--out", str(out), *bad])
        assert e.returncode == 1 and says in e.stderr and len(e.stderr.strip().splitlines()) == 1, e.stderr


def test_workers_without_the_package_fail_in_one_line(tmp_path):
    """A session whose Python workers run an interpreter without pyarrow and this package fails at
    once, in one line naming that interpreter, instead of [DATA_SOURCE_NOT_FOUND] under a page of
    Java at the first query."""
    import subprocess
    import sys

    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    code = "import spark_kafkawire; spark_kafkawire.spark_session('bare', master='local[1]')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**__import__("os").environ, "PYSPARK_PYTHON": str(bare / "bin" / "python")})
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert f"workers run {bare / 'bin' / 'python'}, which cannot import pyarrow and spark_kafkawire" in last
    assert sys.executable in last
