"""Captures on object storage: a real S3-compatible server (moto's server mode) on localhost,
reached through pyarrow.fs with AWS_ENDPOINT_URL, as a user's S3, MinIO or Ceph would be."""

import os
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT, SAMPLES, free_port
from spark_kafkawire import read_capture
from spark_kafkawire.wire.fs import StorageError

NAMES = ["mock-kcat.pcap", "tansu-aiokafka-any.pcap", "mock-confluent-group.pcapng"]


def _moto_server(env: dict) -> tuple[subprocess.Popen, str]:
    """A moto S3 server on a free localhost port, once it accepts connections: (process, URL)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server with bucket 'caps' holding three sample captures (one gzip-compressed)."""
    proc, url = _moto_server(dict(os.environ))
    saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                             "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED")}
    os.environ.update(AWS_ENDPOINT_URL=url, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                      AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    import gzip

    import boto3

    client = boto3.client("s3", endpoint_url=url)
    client.create_bucket(Bucket="caps")
    for n in NAMES:
        client.put_object(Bucket="caps", Key=f"run1/{n}", Body=(SAMPLES / n).read_bytes())
    client.put_object(Bucket="caps", Key="run2/kcat.pcap.gz", Body=gzip.compress((SAMPLES / NAMES[0]).read_bytes()))
    client.put_object(Bucket="caps", Key="run1/notes.txt", Body=b"not a capture")
    client.put_object(Bucket="caps", Key="run1/_tmp/skip.pcap", Body=b"hidden")
    yield url
    proc.terminate()
    proc.wait(10)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _local(names):
    return read_capture([SAMPLES / n for n in names])


def _same(a, b):
    drop = ["capture_file"]
    return a.drop_columns(drop).to_pylist() == b.drop_columns(drop).to_pylist()


def test_list_and_read_a_prefix(s3):
    got = read_capture("s3://caps/run1/")
    assert sorted(set(got.column("capture_file").to_pylist())) == sorted(f"s3://caps/run1/{n}" for n in NAMES)
    assert _same(got, _local(sorted(NAMES)))


def test_glob_and_gzip_and_endpoint_option(s3):
    got = read_capture("s3://caps/run*/*kcat*")
    assert got.column("capture_file").unique().to_pylist() == ["s3://caps/run1/mock-kcat.pcap",
                                                               "s3://caps/run2/kcat.pcap.gz"]
    # the endpoint as an option instead of the environment
    url = os.environ.pop("AWS_ENDPOINT_URL")
    try:
        from spark_kafkawire.wire import fs
        fs._filesystem.cache_clear()
        one = read_capture("s3://caps/run2/kcat.pcap.gz", endpointUrl=url)
    finally:
        os.environ["AWS_ENDPOINT_URL"] = url
        fs._filesystem.cache_clear()
    assert _same(one, _local(NAMES[:1]))


def test_missing_bucket_key_and_non_capture_are_named(s3):
    with pytest.raises(StorageError, match="s3://nobucket/x.pcap.*bucket does not exist|s3://nobucket"):
        read_capture("s3://nobucket/x.pcap")
    with pytest.raises((StorageError, FileNotFoundError), match="s3://caps/run1/missing.pcap"):
        read_capture("s3://caps/run1/missing.pcap")
    with pytest.raises(Exception, match="s3://caps/run1/notes.txt"):
        read_capture("s3://caps/run1/notes.txt")


def test_file_uris(tmp_path):
    p = SAMPLES / NAMES[0]
    for uri in (f"file://{p}", f"file://localhost{p}", f"file:{p}"):
        assert _same(read_capture(uri), _local(NAMES[:1]))


def test_an_object_read_in_shares(s3):
    """An object larger than maxPartitionBytes: sized on the store, read in shares whose rows
    together are the object's; a gzip-compressed object is not shared out."""
    from collections import Counter

    from spark_kafkawire.reader import Options, iter_batches, plan

    uri = f"s3://caps/run1/{NAMES[-1]}"
    opts = Options.parse({"maxPartitionBytes": 4096, "minPartitions": 3})
    got = plan([uri, "s3://caps/run2/kcat.pcap.gz"], opts)
    assert got == [[(uri, (0, 2))], [(uri, (1, 2))], [("s3://caps/run2/kcat.pcap.gz", None)]]

    def rows(share):
        return Counter(repr(r) for b in iter_batches(uri, opts, None, share) for r in b.to_pylist())

    assert rows((0, 2)) + rows((1, 2)) == rows(None) and rows((0, 2))


SPARK_S3 = """
import sys, spark_kafkawire
spark = spark_kafkawire.spark_session("s3", master="local[2]")
df = spark.read.format("kafkawire").load("s3://caps/run1/")
print(df.count(), df.select("capture_file").distinct().count())
one = spark.read.format("kafkawire").options(maxPartitionBytes=4096, minPartitions=3).load("s3://caps/run1/" + sys.argv[1])
print(one.rdd.getNumPartitions(), one.count())
"""


def test_spark_reads_s3(s3):
    """A user's Spark session: credentials and endpoint in the environment Spark starts with."""
    out = subprocess.run([sys.executable, "-c", SPARK_S3, NAMES[-1]], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-4:] == [str(_local(NAMES).num_rows), "3", "3", str(_local(NAMES[-1:]).num_rows)]


def test_audit_job_and_stream_read_s3(s3, tmp_path):
    """The audit job on captures in a bucket (rows equal the local files'), and the streaming
    source listing a bucket prefix's completed files by their modification times."""
    from spark_kafkawire.reader import Options
    from spark_kafkawire.spark.stream import completed_files

    got = completed_files(["s3://caps/run1/"], Options(), settle_s=0)
    assert sorted(p.rsplit("/", 1)[1] for _m, p, _n in got) == sorted(NAMES) and all(m > 0 for m, _p, _n in got)
    # sizes from the same listing (no request per file): those of the local files uploaded
    assert all(n > 0 for _m, _p, n in got)
    out = tmp_path / "audit"
    r = subprocess.run([sys.executable, str(ROOT / "jobs" / "audit.py"), "s3://caps/run1/", "--out", str(out),
                        "--audits", "exchange_summary,clients", "--allow-plain-without-tls"],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    assert r.returncode == 0, r.stderr[-3000:]
    import pyarrow.parquet as pq

    assert pq.read_table(out / "rows" / "exchanges").num_rows == _local(NAMES).num_rows
    assert (out / "report.html").exists() and "s3://caps/run1/" in (out / "report.html").read_text()


def test_wrong_credentials_are_named(tmp_path):
    """A server that checks signatures (moto enforcing IAM after the set-up calls): keys it does
    not know are refused, and the error names the URI and says to check the credentials."""
    # the first two calls (the bucket and one object) pass unchecked, every later one is checked
    proc, url = _moto_server(dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="2"))
    try:
        import boto3

        client = boto3.client("s3", endpoint_url=url, aws_access_key_id="unknown", aws_secret_access_key="wrong",
                              region_name="us-east-1")
        client.create_bucket(Bucket="locked")
        client.put_object(Bucket="locked", Key="a.pcap", Body=(SAMPLES / NAMES[0]).read_bytes())
        saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        os.environ.update(AWS_ACCESS_KEY_ID="unknown", AWS_SECRET_ACCESS_KEY="wrong")
        try:
            for uri in ("s3://locked/a.pcap", "s3://locked/"):
                with pytest.raises(OSError, match=rf"{uri}: access denied: check the credentials"):
                    read_capture(uri, endpointUrl=url)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_rotation_series_on_object_storage_reads_as_the_whole(s3, tmp_path):
    """A capture cut by editcap into a series of objects: found as a series from a ranged read of
    each object's start and end (no whole object fetched on the driver), and read as the whole
    capture, in read_capture and in Spark's plan."""
    import subprocess

    import boto3

    from spark_kafkawire.listing import plan
    from spark_kafkawire.options import Options
    from spark_kafkawire.wire import series

    whole = SAMPLES / "mock-confluent-group.pcapng"
    parts = tmp_path / "parts"
    parts.mkdir()
    subprocess.run(["editcap", "-c", "40", str(whole), str(parts / "rot.pcapng")], check=True)
    client = boto3.client("s3", endpoint_url=s3)
    names = sorted(p.name for p in parts.iterdir())
    for n in names:
        client.put_object(Bucket="caps", Key=f"rotated/{n}", Body=(parts / n).read_bytes())
    uris = [f"s3://caps/rotated/{n}" for n in names]
    assert series.find_series(uris) == [uris]
    assert [series.first_time(u) for u in uris] == [series.first_time(str(parts / n)) for n in names]
    assert [series.last_time(u) for u in uris] == [series.last_time(str(parts / n)) for n in names]
    assert plan(uris, Options()) == [[(tuple(uris), None)]]
    keep = ("client_port", "correlation_id", "api_key", "status", "request_time", "response_time")
    got = sorted(tuple(r[k] for k in keep) for r in read_capture("s3://caps/rotated/").to_pylist())
    assert got == sorted(tuple(r[k] for k in keep) for r in read_capture(str(whole)).to_pylist())


def test_a_stream_carries_a_series_across_triggers_on_object_storage(s3, tmp_path):
    """The stream over a bucket prefix that a rotated capture is uploaded to one object per trigger,
    with its state on the bucket too (stateLocation s3://...): the rows are the whole capture's, the
    states are objects, and each is let go once a later batch went on from it."""
    import subprocess

    import boto3
    import pyarrow as pa

    from spark_kafkawire import carry
    from spark_kafkawire.spark.stream import KafkaWireStreamReader

    whole = SAMPLES / "mock-confluent-group.pcapng"
    parts = tmp_path / "parts"
    parts.mkdir()
    subprocess.run(["editcap", "-c", "30", str(whole), str(parts / "rot.pcapng")], check=True)
    client = boto3.client("s3", endpoint_url=s3)
    reader = KafkaWireStreamReader({"path": "s3://caps/growing/", "completeAfterSeconds": "0",
                                    "stateLocation": "s3://caps/state/exchanges"})
    offset, batches = reader.initialOffset(), []
    names = sorted(p.name for p in parts.iterdir())
    for n in names:
        client.put_object(Bucket="caps", Key=f"growing/{n}", Body=(parts / n).read_bytes())
        end = reader.latestOffset(offset, reader.getDefaultReadLimit())
        batches += [b for p in reader.partitions(offset, end) for b in reader.read(p)]
        reader.commit(end)
        offset = end
        kept = [o["Key"] for o in client.list_objects_v2(Bucket="caps", Prefix="state/exchanges/").get("Contents", [])
                if not o["Key"].endswith("/")]  # (a folder's marker)
        assert len(kept) == 2, kept  # one state and its index entry: the one before let go
    (key, entry), = carry.entries("s3://caps/state/exchanges").items()
    assert entry["last_file"] == f"s3://caps/growing/{names[-1]}"
    batches += list(carry_end(f"s3://caps/state/exchanges/{key}.carry"))
    keep = ("client_port", "correlation_id", "api_key", "status", "request_time", "response_time", "client_software_name")
    got = sorted(tuple(r[k] for k in keep) for r in pa.Table.from_batches(batches).to_pylist())
    assert got == sorted(tuple(r[k] for k in keep) for r in read_capture(str(whole)).to_pylist())


def carry_end(state: str):
    """The rows of a state's connections ended (as the stream ends a forgotten series')."""
    from spark_kafkawire import carry
    from spark_kafkawire.reader import iter_batches

    return iter_batches([], {}, carry=carry.Carry(state, None))


def test_the_audit_history_on_object_storage(s3):
    """The audit job's history written to a bucket: a run's rows added, the same run again (other
    rows, a later date) replacing its own, another run beside them; what pyarrow.dataset reads back
    from the bucket is what was written. The same as Delta Lake tables in the bucket, read back with
    deltalake."""
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    from spark_kafkawire.audits import history

    def run(run_id: str, digest: str, clients: list[str], date: str) -> None:
        fields = history.run_fields(run_id, (None, None), digest)
        results = {"clients": {"clients": [{"client_id": c, "client_ip": "10.0.0.1", "apis": ["Fetch v12"],
                                            "exchanges": 3} for c in clients]}}
        history.History("s3://caps/history/").write(history.tables(fields, [], [], results), digest, date)

    run("r1", "aaaa", ["a", "b"], "2026-11-28")
    run("r2", "bbbb", ["c"], "2026-11-28")
    run("r1-again", "aaaa", ["a"], "2026-11-29")  # the first run's captures again, a day later
    fs = pafs.S3FileSystem(endpoint_override=s3, access_key="testing", secret_key="testing", region="us-east-1")
    got = ds.dataset("caps/history/clients", filesystem=fs, partitioning="hive").to_table().to_pylist()
    assert sorted((r["run_id"], r["client_id"], str(r["run_date"])) for r in got) == \
        [("r1-again", "a", "2026-11-29"), ("r2", "c", "2026-11-28")]
    names = [i.base_name for i in fs.get_file_info(pafs.FileSelector("caps/history", recursive=True))
             if i.type == pafs.FileType.File]
    assert sorted(names) == sorted(["run-aaaa.parquet", "run-bbbb.parquet"] * len(history.TABLES)), names
    # the same runs as Delta Lake tables in the bucket (deltalake reaches it through AWS_ENDPOINT_URL)
    import deltalake

    def lake(run_id: str, digest: str, clients: list[str], date: str) -> None:
        fields = history.run_fields(run_id, (None, None), digest)
        results = {"clients": {"clients": [{"client_id": c, "client_ip": "10.0.0.1", "apis": ["Fetch v12"],
                                            "exchanges": 3} for c in clients]}}
        history.DeltaStaged("s3://caps/lake/", history.tables(fields, [], [], results), digest, date).commit()

    lake("r1", "aaaa", ["a", "b"], "2026-11-28")
    lake("r2", "bbbb", ["c"], "2026-11-28")
    lake("r1-again", "aaaa", ["a"], "2026-11-29")
    table = deltalake.DeltaTable("s3://caps/lake/clients", storage_options=history.delta_storage("s3://caps/lake"))
    assert sorted((r["run_id"], r["client_id"], r["run_date"]) for r in table.to_pyarrow_table().to_pylist()) == \
        [("r1-again", "a", "2026-11-29"), ("r2", "c", "2026-11-28")]
    assert sorted(r["client_id"] for r in history._read("s3://caps/lake", "clients", "delta")) == ["a", "c"]
