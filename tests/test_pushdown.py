"""Filters applied while decoding give exactly the rows of the same filter applied after an
unfiltered read, and skip the bodies of the frames they rule out."""

import datetime as dt
import re

import pytest

from conftest import PUBLIC, SAMPLES
from spark_kafkawire.kafka import clients, message
from spark_kafkawire import read_capture
from spark_kafkawire.decode.predicate import Predicate

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
FILTERS = [
    [("api_key", "=", 3)],
    [("api_name", "in", ["Fetch", "Produce", "OffsetCommit"])],
    [("api_version", ">=", 9), ("api_key", "!=", 18)],
    [("client_id", "=", "rdkafka")],
    [("client_id", "not null")],
    [("broker_port", "<", 10000), ("client_port", ">", 40000)],
    [("client_ip", "=", "172.16.17.101")],
    [("status", "in", ["no_response", "request_missing"])],
    [("request_time", ">", T0)],
    [("request_time", "<=", T0)],
    [("api_key", "in", [0, 1]), ("status", "=", "complete")],
]


def python_filter(rows, conditions):
    """The reference: each condition evaluated on the row dicts, null matching nothing."""
    def ok(r, col, op, val=None):
        v = r[col]
        if v is None:
            return False
        return {"=": lambda: v == val, "!=": lambda: v != val, "<": lambda: v < val, "<=": lambda: v <= val,
                ">": lambda: v > val, ">=": lambda: v >= val, "in": lambda: v in val,
                "not null": lambda: True}[op]()
    return [r for r in rows if all(ok(r, *c) for c in conditions)]


@pytest.mark.parametrize("shape", ["exchanges", "messages", "partitions"])
@pytest.mark.parametrize("filters", FILTERS, ids=repr)
def test_filtered_read_equals_filter_after_read(shape, filters):
    if shape == "messages" and any(c[0] == "request_time" for c in filters):
        pytest.skip("messages rows have no request_time")
    paths = [SAMPLES, PUBLIC]
    whole = read_capture(paths, rows=shape).to_pylist()
    expected = python_filter(whole, filters)
    got = read_capture(paths, rows=shape, filters=filters).to_pylist()
    assert got == expected
    # every filter above keeps something and drops something somewhere, or the test proves little
    if shape == "exchanges":
        assert 0 < len(expected) < len(whole), filters


def test_capture_file_filter_skips_files():
    name = str((SAMPLES / "mock-kcat.pcap").resolve())
    got = read_capture(SAMPLES, filters=[("capture_file", "=", name)])
    assert set(got.column("capture_file").to_pylist()) == {name}
    assert got.num_rows == read_capture(SAMPLES / "mock-kcat.pcap").num_rows


@pytest.mark.spies
def test_excluded_frames_are_not_body_decoded(monkeypatch):
    calls = []
    real = message.decode_with_facts

    def counting(api_key, version, request, *a, **k):
        calls.append((api_key, request))
        return real(api_key, version, request, *a, **k)

    monkeypatch.setattr("spark_kafkawire.decode.pairing.decode_with_facts", counting)
    path = SAMPLES / "tansu-confluent-codecs.pcap"
    read_capture(path)
    everything = len(calls)
    calls.clear()
    got = read_capture(path, filters=[("api_key", "=", 0)])
    assert got.num_rows and set(got.column("api_key").to_pylist()) == {0}
    # Produce bodies, plus what other rows depend on: ApiVersions requests (client software),
    # Metadata responses (topic ids) and the first requests of each kind with traits (client_library)
    traits = {(k, True) for k in clients.TRAIT_KEYS}
    assert {k for k in calls} <= {(0, True), (0, False), (18, True), (3, False)} | traits
    assert len(calls) < everything


@pytest.mark.spies
def test_connections_rows_decode_no_body_but_the_connections_own_facts(monkeypatch):
    """rows=connections decodes only the requests a connection's facts come from (ApiVersions: its
    client software; SASL: its login; the first TRAIT_REQUESTS of each kind with traits: its
    client_fingerprint and client_library), never a response."""
    calls = []

    def decode(api_key, version, request, *rest):
        calls.append((api_key, request))
        return {}, 0, None

    monkeypatch.setattr("spark_kafkawire.decode.pairing.decode_with_facts", decode)
    connections = read_capture(SAMPLES / "mock-kcat.pcap", rows="connections").num_rows
    assert connections
    assert calls and set(calls) <= {(18, True), (17, True), (36, True)} | {(k, True) for k in clients.TRAIT_KEYS}
    traits = [c for c in calls if c[0] in clients.TRAIT_KEYS]
    assert len(traits) <= clients.TRAIT_REQUESTS * connections * len(clients.TRAIT_KEYS)


def test_bad_filters_name_the_problem():
    with pytest.raises(ValueError, match="latency_ms"):
        read_capture(SAMPLES / "mock-kcat.pcap", filters=[("latency_ms", ">", 1)])
    with pytest.raises(ValueError, match="operator"):
        Predicate.parse([("api_key", "~", 1)])
    with pytest.raises(ValueError, match="request_time"):
        read_capture(SAMPLES / "mock-kcat.pcap", rows="messages", filters=[("request_time", ">", T0)])


@pytest.mark.parametrize("filters", [
    [("api_key", "in", [3, 70000, None])],  # 70000: beyond the column's int16; null: matches nothing
    [("api_key", "<", 70000)],
    [("api_key", ">", -70000), ("api_key", "<=", 3)],
    [("api_key", ">=", 70000)],
    [("client_port", "!=", 1 << 70)],
    [("client_port", "<", -(1 << 70))],
], ids=repr)
def test_values_beyond_a_column_type(filters):
    """A value no row's column can hold compares as SQL says, as the comparison on each row would."""
    whole = read_capture(SAMPLES).to_pylist()
    assert read_capture(SAMPLES, filters=filters).to_pylist() == python_filter(whole, filters)


def test_time_bound_beyond_any_timestamp():
    whole = read_capture(SAMPLES / "mock-kcat.pcap").to_pylist()
    timed = [r for r in whole if r["request_time"] is not None]
    assert timed
    for op, bound, rows in (("<", 10**30, timed), (">", -10**30, timed), (">", 10**30, []), ("<=", -10**30, [])):
        got = read_capture(SAMPLES / "mock-kcat.pcap", filters=[("request_time", op, bound)]).to_pylist()
        assert got == rows, (op, bound)


def test_filter_values_of_the_wrong_type_name_column_and_value():
    for f, match in ((("api_key", "=", "3"), "api_key: '3' is not a whole number"),
                     (("client_port", "<", 1.5), "client_port: 1.5 is not a whole number"),
                     (("api_version", "in", [1, True]), "api_version: True is not a whole number"),
                     (("client_id", "=", 5), "client_id: 5 is not a string"),
                     (("status", "in", "complete"), "status: 'in' takes a list")):
        with pytest.raises(ValueError, match=re.escape(match)):
            read_capture(SAMPLES / "mock-kcat.pcap", filters=[f])


def test_a_filtered_read_does_not_import_pandas():
    """pyarrow.scalar and pyarrow.array on Python values import pandas (a quarter of a second of a
    fresh process, and of the bench's filtered reads): a filtered read builds its bounds without."""
    import subprocess
    import sys

    code = ("import sys; import spark_kafkawire as k\n"
            f"t = k.read_capture({str(SAMPLES)!r}, filters=[('api_key', 'in', [0, 3]), ('client_id', '!=', 'x'),"
            " ('request_time', '>', 0), ('broker_port', '<', 70000), ('status', '=', 'complete')])\n"
            "assert t.num_rows, t\n"
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=SAMPLES.parent).stdout
    assert out.split() == ["False"]


SPARK_FILTERS = [
    "api_key = 3",
    "api_name in ('Fetch', 'Produce') and status = 'complete'",
    "api_version >= 9 and api_key <> 18",
    "client_id is not null and broker_port > 1024 and client_port <> 1",
    "request_time > timestamp'2026-01-01 00:00:00'",
    "capture_file like '%kcat%' and api_key = 18",  # like: left to Spark, api_key pushed
]


def test_spark_pushdown_equals_filter_after_read(spark):
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        _pushdown_equals_filter_after_read(spark)
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def _pushdown_equals_filter_after_read(spark):
    from pyspark.sql import functions as F

    df = spark.read.format("kafkawire").load(str(SAMPLES))
    cols = ["capture_file", "client_port", "correlation_id", "api_key", "status", "request", "response", "topics"]
    for cond in SPARK_FILTERS:
        plan = df.filter(cond)._jdf.queryExecution().executedPlan().toString()
        if " like " not in cond:  # every condition taken by the source: no Filter left above the scan
            assert not re.search(r"(^|[ (*)])Filter ", plan, re.M), (cond, plan)
        got = sorted(tuple(map(str, r)) for r in df.filter(cond).select(*cols).collect())
        # the reference: Spark filtering rows after a read with pushdown turned off
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
        try:
            ref_df = spark.read.format("kafkawire").load(str(SAMPLES))
            expected = sorted(tuple(map(str, r)) for r in ref_df.filter(cond).select(*cols).collect())
        finally:
            spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        assert got == expected and expected, cond
    assert df.filter(F.col("api_key") == 3).count() == read_capture(SAMPLES, filters=[("api_key", "=", 3)]).num_rows


def test_default_session_reads_one_dataframe_used_twice_as_two_reads(spark, tmp_path):
    """spark_session() leaves Spark's filter pushdown off: Spark keeps one pushed filter set per
    loaded DataFrame, so with it on, a join of one DataFrame filtered two ways read both sides with
    one side's filters (here: 3 rows instead of the Fetch rows). Off, the join equals the join of
    two separate reads, and Python's own count of the rows."""
    from pyspark.sql import functions as F

    assert spark.conf.get("spark.sql.python.filterPushdown.enabled", "false") == "false"
    path = str(SAMPLES / "mock-confluent-group.pcapng")

    def load():
        return spark.read.format("kafkawire").option("rows", "partitions").load(path)

    def joined(a, b):
        fetch = a.where(F.col("api_key") == 1).select("client_id", "topic", "record_count")
        commits = (b.where((F.col("api_key") == 8) & F.col("group_id").isNotNull())
                   .select("client_id", "topic", "group_id").distinct())
        return sorted(map(tuple, fetch.join(commits, ["client_id", "topic"], "left").collect()), key=repr)

    once = load()
    got = joined(once, once)
    assert got == joined(load(), load())
    assert len(got) == sum(r["api_key"] == 1 for r in read_capture(path, rows="partitions").to_pylist()) > 0


def test_time_bound_stops_reading_once_settled(monkeypatch):
    """With an upper bound on request_time, reading stops past it once every exchange that began in
    time is settled (here with no margin for out-of-order packets, so that the small samples stop
    early); the rows are still exactly those of the filter applied after a full read."""
    from spark_kafkawire import reader
    from spark_kafkawire.decode.exchanges import Decoder

    monkeypatch.setattr(reader, "TIME_ORDER_MARGIN_NS", 0)
    stops = []
    real = Decoder.settled

    def settled(self, conns, t):
        ok = real(self, conns, t)
        stops.append(ok)
        return ok

    monkeypatch.setattr(Decoder, "settled", settled)
    for name in ("tansu-admin-txn.pcap", "veth-confluent-mtu.pcap", "mock-confluent-group.pcapng"):
        whole = read_capture(SAMPLES / name).to_pylist()
        times = sorted(r["request_time"] for r in whole if r["request_time"] is not None)
        for q in (0.2, 0.5, 0.8):
            t = times[int(len(times) * q)]
            for op in ("<", "<="):
                got = read_capture(SAMPLES / name, filters=[("request_time", op, t)]).to_pylist()
                assert got == python_filter(whole, [("request_time", op, t)]), (name, q, op)
    assert True in stops  # reading did stop early
