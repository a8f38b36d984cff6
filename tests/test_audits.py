"""The audits (spark_kafkawire.audits, jobs/audit.py) against truth known independently: the
clients' own manifests of the sample captures, tshark's decoding of the same files, the version
table in protocol-facts.md, and the payload bytes a damaged copy lost."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
import shutil
import stat
import subprocess
import sys
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from pathlib import Path

import pytest

import damage
import tlsmutate
from conftest import ROOT, SAMPLES
from pcapgen import Conversation, produce_request, request, response, write_pcap
from test_tshark import tshark_fields

from spark_kafkawire import protocol
from spark_kafkawire.audits import AUDITS, Policy, Rows

MANIFEST = json.loads((SAMPLES / "manifest.json").read_text())
FACTS = ROOT.parent / "shared" / "protocol-facts.md"


def rows_of(spark, tmp: Path, paths) -> Rows:
    """The rows of the captures, decoded once into Parquet (as the job does)."""
    shapes = ("exchanges", "connections", "partitions", "records")
    for shape in shapes:
        spark.read.format("kafkawire").option("rows", shape).load([str(p) for p in paths]) \
            .write.mode("overwrite").parquet(str(tmp / shape))
    return Rows(*(spark.read.parquet(str(tmp / s)) for s in shapes))


def run(audit: str, rows: Rows, **policy) -> dict[str, list[dict]]:
    return {k: [r.asDict(recursive=True) for r in df.collect()] for k, df in AUDITS[audit](rows, Policy(**policy)).items()}


@pytest.fixture(scope="module")
def samples(spark, tmp_path_factory):
    return rows_of(spark, tmp_path_factory.mktemp("samples"), [SAMPLES])


def _refused(release: str) -> set[tuple[int, int]]:
    """(api_key, version) a 3.9.0 broker accepts and the release refuses, read from
    protocol-facts.md's version table (columns 3.9.0 / 4.0.0 / 4.3.x)."""
    column = {"4.0": 3, "4.3": 4}[release]
    out = set()
    for line in FACTS.read_text().splitlines():
        m = re.match(r"\|(\d+)\|[^|]+\|([^|]+)\|([^|]+)\|([^|]+)\|", line)
        if not m or m[2].strip() == "-":  # not a table row, or a key 3.9.0 did not have
            continue

        def versions(text):
            a, _, b = text.split(" ")[0].partition("-")
            return set(range(int(a), int(b or a) + 1))

        new = m[column].strip()
        keep = set() if new.startswith("removed") else versions(new)
        out |= {(int(m[1]), v) for v in versions(m[2].strip()) if v not in keep}
    assert (0, 2) in out and (4, 0) in out and (3, 0) not in out  # Produce v2 gone, LeaderAndIsr gone
    return out


def test_upgrade_readiness_lists_exactly_what_tshark_saw_clients_send_that_40_refuses(spark, tmp_path):
    name = "mock-kafka-python-nsec.pcap"
    ports = MANIFEST[name]["broker_ports"]
    sent = set()
    for cid, keys, vers in tshark_fields(SAMPLES / name, ports, ("kafka.client_id", "kafka.api_key",
                                                                   "kafka.api_version")):
        if cid:  # requests (responses carry no client id)
            for c, k, v in zip(cid.split(";"), keys.split(";"), vers.split(";")):
                sent.add((c, int(k), int(v)))
    rows = rows_of(spark, tmp_path, [SAMPLES / name])
    by_release = {}
    for release in ("4.0", "4.3"):  # only the release asked for is listed
        got = by_release[release] = run("upgrade_readiness", rows, target_release=release)["upgrade_readiness"]
        assert {r["release"] for r in got} == {release}
        expected = {s for s in sent if (s[1], s[2]) in _refused(release)}
        assert any(c == "kp-0.10.1" and k == 0 and v == 2 for c, k, v in expected)  # Produce v2, as the manifest says
        assert {(r["client_id"], r["api_key"], r["api_version"]) for r in got} == expected
        assert {r["refusal"] for r in got} == {"removed"}  # no client there is newer than 4.0
        assert all(r["exchanges"] >= 1 and r["first_seen"] <= r["last_seen"] for r in got)
    # the clients that sent only current versions are not there
    assert {r["client_id"] for r in by_release["4.0"]} == {c for c, k, v in sent if (k, v) in _refused("4.0")}
    # JoinGroup v0-1 are refused by 4.0.0 only; later releases accept them again
    assert not any(r["api_key"] == 11 for r in by_release["4.3"])
    # an older target: what tshark saw sent above 3.0's newest version (ApiVersions itself is
    # negotiation), on connections that sent no ApiVersions request (one that did adapts to an
    # older broker: not a finding); apis 3.0 lacks are refused whatever was negotiated
    table = protocol.releases()["3.0"]
    got = run("upgrade_readiness", rows, target_release="3.0")["upgrade_readiness"]
    per_conn = defaultdict(set)
    for sport, dport, keys, vers, cids in tshark_fields(SAMPLES / name, ports, ("tcp.srcport", "tcp.dstport",
                                                        "kafka.api_key", "kafka.api_version", "kafka.client_id")):
        if cids and int(dport) in ports:
            for c, k, v in zip(cids.split(";"), keys.split(";"), vers.split(";")):
                per_conn[int(sport)].add((c, int(k), int(v)))
    expected = set()
    for conn in per_conn.values():
        negotiated = any(k == 18 for _c, k, _v in conn)
        expected |= {s for s in conn if s[1] != 18 and (s[1] not in table or
                                                        (s[2] > table[s[1]][1] and not negotiated))}
    assert {(r["client_id"], r["api_key"], r["api_version"]) for r in got} == expected
    assert {r["refusal"] for r in got} <= {"newer", "absent"}


def test_clients_inventory_and_sasl_users_match_the_manifests(samples):
    got = run("clients", samples)["clients"]
    by_id = defaultdict(list)
    for r in got:
        by_id[r["client_id"]].append(r)
    for name, info in MANIFEST.items():
        for c in info["clients"]:
            mine = by_id.get(c["client_id"])
            assert mine, (name, c["client_id"])
            if c.get("mechanism"):
                assert {r["sasl_mechanism"] for r in mine} == {c["mechanism"]}
                assert {r["sasl_user"] for r in mine} == {c["user"]}
            if c.get("software") == "confluent-kafka":  # librdkafka names itself in ApiVersions v3+
                assert any("confluent-kafka" in (r["software_name"] or "") or "librdkafka" in (r["software_name"] or "")
                           for r in mine), mine
    for r in got:
        assert r["exchanges"] >= 1 and r["apis"] and r["first_seen"] <= r["last_seen"]


def test_errors_name_the_failed_login_and_no_successful_one(samples):
    res = run("errors", samples)
    sasl = MANIFEST["stub-sasl.pcap"]["clients"]
    failed = {c["client_id"] for c in sasl if not c["logged_in"]}
    ok = {c["client_id"] for c in sasl if c["logged_in"]}
    top = [(r["client_id"], r["api_name"], r["error_name"]) for r in res["top_offenders"]]
    for cid in failed:
        assert (cid, "SaslAuthenticate", "SASL_AUTHENTICATION_FAILED") in top
    assert not [t for t in top if t[0] in ok and t[1] == "SaslAuthenticate"]
    rate = res["error_rate"]
    assert sum(r["errored"] for r in rate) == sum(r["exchanges"] for r in res["top_offenders"])
    # ApiVersions answered UNSUPPORTED_VERSION is negotiation, as tshark counts it: never an error
    from test_cli import _tshark_apiversions_answers

    negotiated, _other = _tshark_apiversions_answers()
    assert negotiated and sum(r["negotiated"] for r in rate) == negotiated
    assert not [t for t in top if t[1] == "ApiVersions" and t[2] == "UNSUPPORTED_VERSION"]
    summary = run("exchange_summary", samples)["exchange_summary"]
    assert sum(r["negotiated"] for r in summary) == negotiated
    assert sum(r["errors"] for r in summary if r["api_name"] == "ApiVersions") == _other


def test_latency_counts_and_maxima_match_tshark(spark, tmp_path):
    """n and the largest response time per api, from tshark's own request/response matching."""
    name = "tansu-confluent-codecs.pcap"
    ports = MANIFEST[name]["broker_ports"]
    rows = tshark_fields(SAMPLES / name, ports, ("frame.number", "frame.time_epoch", "kafka.api_key",
                                                  "kafka.request_frame", "kafka.correlation_id"))
    when = {int(r[0]): float(r[1]) for r in rows}
    lat = defaultdict(list)
    for num, t, keys, req, _corr in rows:
        if req and ";" not in req and ";" not in keys and keys and int(req) in when:
            lat[int(keys)].append((float(t) - when[int(req)]) * 1000)
    got = run("latency", rows_of(spark, tmp_path, [SAMPLES / name]), min_latency_n=1)["latency_by_api"]
    from spark_kafkawire import protocol

    mine = {r["api_name"]: r for r in got}
    compared = 0
    for key, values in lat.items():
        r = mine[protocol.API_NAMES[key]]
        assert r["n"] >= len(values)  # tshark leaves PDUs that share a packet unmatched
        if r["n"] == len(values):
            assert r["max_ms"] == pytest.approx(max(values), abs=0.002)
            compared += 1
    assert compared >= 3
    for r in got:
        assert r["p50_ms"] <= r["p95_ms"] <= r["p99_ms"] <= r["max_ms"]


def test_latency_claims_no_percentile_below_min_n(samples):
    got = run("latency", samples, min_latency_n=1000)
    assert got["latency_by_api"] == [] and got["slowest"]


def test_throughput_records_equal_the_producers_delivery_reports(samples):
    res = run("throughput", samples)
    produced = Counter()
    for r in res["throughput"]:
        if r["direction"] == "produce":
            produced[(r["client_id"], r["topic"])] += r["records"]
    for info in MANIFEST.values():
        for c in info["clients"]:
            for topic, n in c.get("delivered", {}).items():
                if n:
                    assert produced[(c["client_id"], topic)] == n, (c["client_id"], topic)
    codecs = {(r["client_id"], r["codec"]) for r in res["codecs"] if r["direction"] == "produce"}
    with_codec = [c for c in MANIFEST["tansu-confluent-codecs.pcap"]["clients"] if "compression" in c]
    assert len(with_codec) == 5
    for c in with_codec:
        assert (c["client_id"], c["compression"]) in codecs


def test_throughput_counts_share_fetch_records_as_fetched(spark, tmp_path):
    """Records a ShareFetch response (KIP-932, api key 78) hands to a share consumer are fetched
    records, as Fetch's are: the batch built here holds 3 records, the Produce request's 2."""
    import uuid

    from kio.schema.errors import ErrorCode
    from kio.schema.share_fetch.v1 import response as sf
    from kiogen import write
    from test_records import _record, batch

    tid = uuid.UUID(int=7)
    three = batch([_record(i, b"k", b"v") for i in range(3)], base=40)
    body = write(sf.ShareFetchResponse(
        throttle_time=dt.timedelta(0), error_code=ErrorCode.none, acquisition_lock_timeout=dt.timedelta(seconds=30),
        responses=(sf.ShareFetchableTopicResponse(topic_id=tid, partitions=(sf.PartitionData(
            partition_index=0, error_code=ErrorCode.none, acknowledge_error_code=0,
            current_leader=sf.LeaderIdAndEpoch(leader_id=1, leader_epoch=0), records=three,
            acquired_records=(sf.AcquiredRecords(first_offset=40, last_offset=42, delivery_count=1),)),)),),
        node_endpoints=()))
    conv = Conversation().handshake()
    conv.send("c", produce_request(9, 1, "producer", batch([_record(i, b"k", b"v") for i in range(2)])))
    conv.send("b", response(1, 0, 9))
    conv.send("c", request(78, 1, 2, client_id="share-consumer"))
    conv.send("b", response(2, 78, 1, body))
    write_pcap(tmp_path / "share.pcap", conv.fin().packets)
    got = run("throughput", rows_of(spark, tmp_path, [tmp_path / "share.pcap"]))["throughput"]
    by = Counter()
    for r in got:
        by[(r["direction"], r["client_id"])] += r["records"]
    assert by == {("produce", "producer"): 2, ("fetch", "share-consumer"): 3}


def test_groups_show_each_manifest_group_joining(samples):
    """Every group a consumer joined: JoinGroup; the ones whose consumer got records (it was
    assigned partitions) also SyncGroup and a generation (a rebalance)."""
    res = run("groups", samples)
    members = [c for info in MANIFEST.values() for c in info["clients"] if c.get("group")]
    assert len(members) == 3
    churn = defaultdict(Counter)
    for r in res["group_churn"]:
        for api in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"):
            churn[r["group_id"]][api] += r[api]
    rebalanced = {r["group_id"] for r in res["rebalances"]}
    for c in members:
        g = c["group"]
        assert churn[g]["JoinGroup"] >= 1, (g, churn[g])
        if c["consumed"]:
            assert churn[g]["SyncGroup"] >= 1 and g in rebalanced, (g, churn[g])
        else:  # tansu-admin-txn's reader never completed a join (MEMBER_ID_REQUIRED, then closed)
            assert churn[g]["SyncGroup"] == 0 and g not in rebalanced
    errs = {(r["group_id"], r["error_name"]) for r in res["group_errors"]}
    assert ("auditors", "MEMBER_ID_REQUIRED") in errs


def test_security_flags_plain_logins_and_unauthenticated_clients(spark, tmp_path, samples):
    res = run("security", samples)
    sasl = MANIFEST["stub-sasl.pcap"]["clients"]
    plain = {(r["client_id"], r["sasl_user"]) for r in res["plain_without_tls"]}
    assert plain == {(c["client_id"], c["user"]) for c in sasl if c["mechanism"] == "PLAIN"}
    port = MANIFEST["stub-sasl.pcap"]["broker_ports"][0]
    (listener,) = [r for r in res["sasl_mechanisms"] if r["listener"].endswith(f":{port}")]
    assert set(listener["sasl_mechanisms"]) == {c["mechanism"] for c in sasl}
    # logins counted apart: tshark's SaslAuthenticate answers per TCP stream, failed where any has an error
    answers = defaultdict(set)
    for stream, error in tshark_fields(SAMPLES / "stub-sasl.pcap", [port], ["tcp.stream", "kafka.error"],
                                       "kafka.api_key == 36 && tcp.srcport == %d" % port):
        answers[stream].add(error)
    failed = sum(1 for errs in answers.values() if errs - {"0"})
    assert (listener["authenticated"], listener["failed_logins"]) == (len(answers) - failed, failed)
    assert failed == 59 and listener["login_attempts"] >= len(answers)
    assert {c["client_id"] for c in sasl if not c["logged_in"]} == {"ck-plain-mallory"}
    # hand-made: on one listener a client logs in and another never does
    struct = __import__("struct")
    login = Conversation(client=("10.7.0.1", 40001), broker=("10.7.0.9", 9092)).handshake()
    login.send("c", request(17, 1, 1, "good", body=struct.pack("!h", 5) + b"PLAIN"))
    login.send("b", response(1, 17, 1, body=struct.pack("!hi", 0, 1) + struct.pack("!h", 5) + b"PLAIN"))
    anon = Conversation(client=("10.7.0.2", 40002), broker=("10.7.0.9", 9092)).handshake()
    anon.send("c", request(3, 1, 1, "anon", body=struct.pack("!i", -1)))
    # a PLAIN handshake the broker never answers, no credentials after it: nothing readable was sent
    mute = Conversation(client=("10.7.0.3", 40003), broker=("10.7.0.9", 9092)).handshake()
    mute.send("c", request(17, 1, 1, "mute", body=struct.pack("!h", 5) + b"PLAIN"))
    # a PLAIN login with its credentials (SaslAuthenticate v0: authzid NUL user NUL password)
    sent = Conversation(client=("10.7.0.4", 40004), broker=("10.7.0.9", 9092)).handshake()
    sent.send("c", request(17, 1, 1, "sent", body=struct.pack("!h", 5) + b"PLAIN"))
    sent.send("b", response(1, 17, 1, body=struct.pack("!hi", 0, 1) + struct.pack("!h", 5) + b"PLAIN"))
    token = b"\x00carol\x00pw-of-carol"
    sent.send("c", request(36, 0, 2, "sent", body=struct.pack("!i", len(token)) + token))
    sent.send("b", response(2, 36, 0, body=struct.pack("!hhi", 0, -1, 0)))
    write_pcap(tmp_path / "mixed.pcap", login.fin().packets + anon.fin().packets + mute.fin().packets +
               sent.fin().packets)
    res = run("security", rows_of(spark, tmp_path / "rows", [tmp_path / "mixed.pcap"]))
    assert [(r["client_ip"], r["client_id"], r["apis"]) for r in res["unauthenticated"]] == \
        [("10.7.0.2", "anon", ["Metadata"])]
    # only the login that sent credentials is flagged, with its user; no "(user None)"
    assert [(r["client_id"], r["sasl_user"]) for r in res["plain_without_tls"]] == [("sent", "carol")]


def test_capture_health_reports_the_bytes_a_damaged_copy_lost(spark, tmp_path):
    src = SAMPLES / "veth-confluent-mtu.pcap"
    packets, link = damage.read(src)
    kept, lost = damage.dropped(packets, link, random.Random(7), share=0.05)
    lost_bytes = sum(damage.tcp_payload_len(packets[i][1], link) for i in lost)
    damage.write(tmp_path / "lossy.pcap", kept, link)
    res = run("capture_health", rows_of(spark, tmp_path / "rows", [src, tmp_path / "lossy.pcap"]))
    files = {Path(r["capture_file"]).name: r for r in res["capture_files"]}
    assert files["veth-confluent-mtu.pcap"]["gap_bytes"] == 0 and files["veth-confluent-mtu.pcap"]["gaps"] == 0
    # a lost segment at a connection's very end cannot be told from no segment: at most that much less
    assert 0 < files["lossy.pcap"]["gap_bytes"] <= lost_bytes
    assert files["lossy.pcap"]["gaps"] >= 1
    assert {Path(r["capture_file"]).name for r in res["damaged_connections"]} == {"lossy.pcap"}


def test_coverage_of_tls_without_its_key_log_decodes_nothing_and_says_so(spark, tmp_path):
    """A TLS listener read without its key log: no exchange, and so no decoded byte (its handshakes
    decode no Kafka): the decoded share and the exchanges agree. With the key log, the same listener's
    bytes are decoded and its exchanges are the plaintext hop's (the same run through a proxy)."""
    cap = ROOT / "tests" / "tls" / "tls13-aes128gcm.pcap"
    meta = json.loads((ROOT / "tests" / "tls" / "manifest.json").read_text())["tls13-aes128gcm"]
    bare = {r["listener"]: r for r in run("capture_health", rows_of(spark, tmp_path / "bare", [cap]))["coverage"]}
    tls = [r for r in bare.values() if r["tls_connections"]]
    assert [r["listener"].rsplit(":", 1)[1] for r in tls] == [str(meta["tls_port"])]
    assert all(r["exchanges"] == 0 and r["undecoded_fraction"] == 1.0 and
                       r["tls_undecrypted_bytes"] == r["bytes"] for r in tls), bare
    for shape in ("exchanges", "connections", "partitions", "records"):
        spark.read.format("kafkawire").option("rows", shape).option("tlsKeyLog", str(cap.with_suffix(".keylog"))) \
            .load(str(cap)).write.mode("overwrite").parquet(str(tmp_path / "keyed" / shape))
    keyed = {r["listener"]: r for r in run("capture_health", Rows(*(spark.read.parquet(str(tmp_path / "keyed" / s))
                                                                     for s in ("exchanges", "connections", "partitions",
                                                                               "records"))))["coverage"]}
    plain = [r for r in keyed.values() if not r["tls_connections"]]
    assert [r["listener"].rsplit(":", 1)[1] for r in plain] == [str(meta["broker_port"])]
    for r in (r for r in keyed.values() if r["tls_connections"]):
        assert r["tls_not_decrypted"] == 0 and r["undecoded_fraction"] < 0.05, r
        assert r["exchanges"] == plain[0]["exchanges"] > 0, (r, plain)


# -- the job ----------------------------------------------------------------------------------------
def _job(*args, env=None) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYSPARK_PYTHON=sys.executable, **(env or {}))
    return subprocess.run([sys.executable, str(ROOT / "jobs" / "audit.py"), *map(str, args)], capture_output=True,
                          text=True, env=e, timeout=900)


def test_job_writes_parquet_and_a_self_contained_report_and_exits_by_policy(spark, tmp_path):
    out = tmp_path / "audit"
    r = _job(SAMPLES, "--out", out)
    # sample_pcaps hold a client pinned to Kafka 0.10.1 and SASL PLAIN without TLS: two policies fail
    assert r.returncode == 2, r.stderr[-3000:]
    assert "[FAIL] no client sends a version Kafka 4.0 rejects" in r.stdout and "kp-0.10.1" in r.stdout
    assert "[FAIL] no SASL PLAIN login outside TLS" in r.stdout
    assert f"report: {out}/report.html" in r.stdout
    # no start-up chatter from Spark: only the JVM's own note on the module Spark 4 adds, if any
    chatter = [ln for ln in r.stderr.splitlines() if ln.strip() and "Using incubator modules" not in ln and
               not ln.startswith("audit: ")]  # (the job's own progress lines)
    assert not chatter, chatter[:5]
    page = (out / "report.html").read_text()
    assert "<svg" in page and not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched
    for audit in AUDITS:
        assert f"id='{audit}'" in page
        assert (out / audit).is_dir()
    assert list((out / "upgrade_readiness" / "upgrade_readiness").glob("capture_date=*/*.parquet"))
    # a capture of current clients only, with PLAIN allowed: every policy holds
    config = tmp_path / "policy.json"
    config.write_text(json.dumps({"allow_plain_without_tls": True, "max_p99_ms": {"Produce": 60000},
                                  "min_latency_n": 1}))
    ok = _job(SAMPLES / "tansu-confluent-codecs.pcap", "--out", tmp_path / "ok", "--config", config,
              "--audits", "upgrade_readiness,errors,latency,security,capture_health")
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    assert "[ok] Produce p99 at most 60000 ms" in ok.stdout
    (tmp_path / "bad.json").write_text(json.dumps({"max_p99": 1}))
    bad = _job(SAMPLES, "--config", tmp_path / "bad.json", "--out", tmp_path / "bad")
    assert bad.returncode == 1 and "unknown key(s) max_p99" in bad.stderr
    # errors before Spark starts: exit 1, one line naming what is wrong
    for bad in ([tmp_path / "nothing-here"], [SAMPLES, "--target-release", "4.4"], [SAMPLES, "--target-release", "3.10"], [SAMPLES, "--max-p99", "Produce"]):
        e = _job(*bad, "--out", tmp_path / "bad")
        assert e.returncode == 1 and len(e.stderr.strip().splitlines()) == 1, e.stderr


def _history(path: Path, table: str) -> list[dict]:
    import pyarrow.dataset as ds

    folder = path / table
    return ds.dataset(str(folder), partitioning="hive").to_table().to_pylist() if folder.exists() else []


def test_the_history_keeps_each_run_once_and_a_failed_run_adds_nothing(spark, tmp_path):
    """Every run adds its rows to OUT/history (run_summary, findings, clients), each naming its run;
    a run again over the same captures replaces its own rows, a run over other captures adds its
    own; a run that fails adds nothing; --history none keeps none. The figures are checked against
    read_capture of the same files (pyarrow, no Spark) and the run's own run.json."""
    from spark_kafkawire import read_capture

    night1, night2 = tmp_path / "night1", tmp_path / "night2"
    for d, names in ((night1, ["mock-kcat.pcap", "stub-sasl.pcap"]), (night2, ["tansu-confluent-codecs.pcap"])):
        d.mkdir()
        for n in names:
            shutil.copy(SAMPLES / n, d / n)
    out, hist = tmp_path / "out", tmp_path / "out" / "history"
    first = _job(night1, "--out", out, "--quiet")
    assert first.returncode in (0, 2, 3), first.stderr[-3000:]
    assert "cannot be read" not in first.stderr, first.stderr[-3000:]  # (no history yet is nothing to say)
    runs = {r["run_id"] for r in _history(hist, "run_summary")}
    assert len(runs) == 1
    run = json.loads((out / "run.json").read_text())
    assert runs == {run["run"]}
    # the run's exchanges per API, as read_capture counts them
    rows = read_capture(str(night1)).to_pylist()
    want = Counter(r["api_name"] for r in rows if r["api_name"] is not None and r["status"] not in
                   ("capture_damaged", "capture_changed", "tls"))
    got = Counter()
    for r in _history(hist, "run_summary"):
        got[r["api_name"]] += r["exchanges"]
        assert r["window_start"] <= r["window_end"] and r["latency_p50_ms"] <= r["latency_p99_ms"], r
    assert got == want
    assert {(r["name"], r["status"]) for r in _history(hist, "findings") if r["kind"] == "policy"} == \
        {(v["policy"], v["status"]) for v in run["verdicts"]}
    assert {r["client_id"] for r in _history(hist, "clients")} == \
        {r["client_id"] for r in rows if r["api_name"] is not None and r["client_id"] is not None}
    # the same captures again: the run's rows replaced, not doubled
    before = {t: len(_history(hist, t)) for t in ("run_summary", "findings", "clients")}
    again = _job(night1, "--out", out, "--quiet")
    assert again.returncode == first.returncode
    assert {t: len(_history(hist, t)) for t in before} == before
    assert {r["run_id"] for r in _history(hist, "run_summary")} == {json.loads((out / "run.json").read_text())["run"]}
    assert "Since the last run" not in (out / "report.html").read_text()  # (no other run to compare with)
    # another night: its rows beside the first's, and the report opens with what changed since
    second = _job(night2, "--out", out, "--quiet")
    assert second.returncode in (0, 2, 3), second.stderr[-3000:]
    summary = _history(hist, "run_summary")
    assert len({r["run_id"] for r in summary}) == len({r["inputs_digest"] for r in summary}) == 2
    page = (out / "report.html").read_text()
    assert page.index("Since the last run") < page.index("<th>policy</th>")
    assert page.index("<th>policy</th>") < page.index("<h2 id='trends'>Trends</h2>")  # (two runs: a line each)
    assert 'aria-label="Exchanges per run"' in page and 'aria-label="Clients per library"' in page

    def seen(night: Path) -> set:
        return {(r["client_id"], r["client_ip"]) for r in read_capture(str(night)).to_pylist()
                if r["api_key"] is not None}

    new, gone = seen(night2) - seen(night1), seen(night1) - seen(night2)
    assert new and gone
    assert f"{len(new)} new client(s)" in page and f"{len(gone)} client(s) gone" in page
    for c in list(new)[:3]:
        assert f"{c[0]}@{c[1]}" in page
    # a third night (the first night's traffic again, in files of other names): three runs; judged by
    # max_broker_p99_growth against the first night's figures, the same, on each API and listener
    # with min_latency_n exchanges whose broker time was timed, as read_capture counts them
    night3 = tmp_path / "night3"
    night3.mkdir()
    for n in ("mock-kcat.pcap", "stub-sasl.pcap"):
        shutil.copy(SAMPLES / n, night3 / f"again-{n}")
    growth = ("--max-broker-p99-growth", "1.5", "--min-history-runs", "1", "--min-latency-n", "5")
    third = _job(night3, "--out", out, "--quiet", *growth)
    assert third.returncode in (0, 2, 3), third.stderr[-3000:]
    timed = Counter((r["api_name"], f"{r['broker_ip']}:{r['broker_port']}") for r in rows
                    if r["api_name"] is not None and r["status"] not in ("capture_damaged", "capture_changed", "tls"))
    with_broker = {k for k in timed if any(r["broker_ms"] is not None and (r["api_name"], f"{r['broker_ip']}:"
                                                                          f"{r['broker_port']}") == k for r in rows)}
    judged = len({k for k in with_broker if timed[k] >= 5})
    assert judged
    (v,) = [v for v in json.loads((out / "run.json").read_text())["verdicts"] if "median over the last runs" in
            v["policy"]]
    assert v["status"] == "ok" and v["detail"] == f"{judged} API(s) and listener(s) judged", v
    assert len({r["run_id"] for r in _history(hist, "run_summary")}) == 3
    again3 = _job(night3, "--out", out, "--quiet", *growth)  # the third night again: still three runs
    assert again3.returncode == third.returncode
    assert len({r["run_id"] for r in _history(hist, "run_summary")}) == 3
    # a run that cannot write its history fails and adds nothing to any table
    clients = next(hist.joinpath("clients").glob("run_date=*"))
    kept = {t: len(_history(hist, t)) for t in before}
    shutil.rmtree(hist / "clients")
    (hist / "clients").write_text("not a directory")
    night4 = tmp_path / "night4"
    night4.mkdir()
    shutil.copy(SAMPLES / "tansu-admin-txn.pcap", night4)
    failed = _job(night4, "--out", out, "--quiet")
    assert failed.returncode == 1 and "history" in failed.stderr, failed.stderr[-2000:]
    assert {t: len(_history(hist, t)) for t in ("run_summary", "findings")} == \
        {t: kept[t] for t in ("run_summary", "findings")}
    assert not [p for p in hist.rglob("*") if p.name.startswith(".")]  # no temporary file left
    assert clients.name.startswith("run_date=")
    # --history none: no history
    none = _job(night2, "--out", tmp_path / "plain", "--quiet", "--history", "none")
    assert none.returncode == second.returncode and not (tmp_path / "plain" / "history").exists()
    # --history-format delta: the same rows as Delta Lake tables, read back with deltalake itself
    import deltalake

    lake = tmp_path / "lake"
    for night in (night1, night2, night2):
        d = _job(night, "--out", tmp_path / "delta-out", "--quiet", "--history", lake, "--history-format", "delta")
        assert d.returncode in (0, 2, 3), d.stderr[-3000:]
    got = deltalake.DeltaTable(str(lake / "run_summary")).to_pyarrow_table().to_pylist()
    assert len({r["run_id"] for r in got}) == 2
    first_night = Counter()  # (version 0: the first run's commit; time travel)
    for r in deltalake.DeltaTable(str(lake / "run_summary"), version=0).to_pyarrow_table().to_pylist():
        first_night[r["api_name"]] += r["exchanges"]
    assert first_night == want
    assert "Since the last run" in (tmp_path / "delta-out" / "report.html").read_text()


def test_incremental_runs_read_only_new_files(spark, tmp_path):
    """Two files, then a third: the second run adds only the third file's rows, and the total equals
    a batch read of all three. The newest file of a rotation series waits until it is complete. The
    requests still waiting for a response at the end of the files read so far are not rows yet: they
    wait for the series' next file (the stream's stateLocation), where a batch read ends them ("capture
    ended before a response")."""
    d = tmp_path / "rotating"
    d.mkdir()
    names = ["mock-kcat.pcap", "tansu-confluent-codecs.pcap", "veth-confluent-mtu.pcap"]
    t0 = int(time.time()) - 3600  # an hour ago: within maxFileAge (7 days) of a file written now
    for i, n in enumerate(names[:2]):
        shutil.copy(SAMPLES / n, d / f"cap.pcap{i}")
        os.utime(d / f"cap.pcap{i}", (t0 + i, t0 + i))
    out, ck = tmp_path / "out", tmp_path / "ck"
    args = [d, "--out", out, "--incremental", "--checkpoint", ck, "--audits", "exchange_summary,upgrade_readiness",
            "--max-files-per-trigger", "1"]
    first = _job(*args)
    assert first.returncode in (0, 2), first.stderr[-3000:]
    count = lambda: spark.read.parquet(str(out / "rows" / "exchanges")).count()  # noqa: E731

    def settled(*paths) -> int:  # a batch read's rows less the requests it ends at the capture's end
        rows = spark.read.format("kafkawire").load([str(p) for p in paths])
        return rows.where("detail is null or detail != 'capture ended before a response'").count()

    n_first = count()
    assert n_first == settled(d / "cap.pcap0", d / "cap.pcap1")
    # a third file arrives; the newest (cap.pcap2, just written) counts as complete only with a 0 s wait
    shutil.copy(SAMPLES / names[2], d / "cap.pcap2")
    waiting = _job(*args[:-2], "--complete-after-seconds", "3600")
    # still being written, as far as we know: nothing new, said in one line, no verdicts (exit 3)
    assert waiting.returncode == 3 and count() == n_first and "nothing new in" in waiting.stdout
    assert "[ok]" not in waiting.stdout and "[FAIL]" not in waiting.stdout
    second = _job(*args, "--complete-after-seconds", "0")
    assert second.returncode in (0, 2), second.stderr[-3000:]
    third = settled(d / "cap.pcap2")
    assert count() == n_first + third == settled(d)
    again = _job(*args, "--complete-after-seconds", "0")
    assert again.returncode == 3 and count() == n_first + third  # nothing new: nothing added, no verdicts
    # a file from another capture host arrives late, with an older modification time (cp -p): read
    late = d / "hostB.pcap"
    shutil.copy(SAMPLES / "tansu-aiokafka-any.pcap", late)
    os.utime(late, (t0 - 100, t0 - 100))
    fourth = _job(*args, "--complete-after-seconds", "0")
    assert fourth.returncode in (0, 2), fourth.stderr[-3000:]
    assert count() == n_first + third + settled(late)
    # a file already read grows: one capture_changed row names it, its rows are not read twice
    with open(d / "cap.pcap0", "ab") as f:
        f.write((SAMPLES / "mock-kcat.pcap").read_bytes()[24:])
    before = count()
    fifth = _job(*args, "--complete-after-seconds", "0")
    assert fifth.returncode in (0, 2), fifth.stderr[-3000:]
    changed = spark.read.parquet(str(out / "rows" / "exchanges")).where("status = 'capture_changed'").collect()
    assert count() == before + 1 and [r.capture_file for r in changed] == [str(d / "cap.pcap0")]


# -- the job's output: one run at a time, nothing that looks complete unless it is ----------------
@contextmanager
def _tmpfs(d: Path, options: str):
    """A tmpfs mounted on d (mount options such as size=3m or ro): needs root, as the CI machine
    runs the tests; skipped where it cannot be mounted."""
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(d)], capture_output=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)])


@pytest.fixture
def small_fs(tmp_path):
    """A file system of 3 MiB, to fill."""
    with _tmpfs(tmp_path / "small", "size=3m") as d:
        yield d


def _one_line(r) -> str:
    """The one line a failed run says (besides its progress lines, "audit: [  1.2 s] ...", and the
    files of the captures' folders it did not read, "audit: skipped ...")."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith(("audit: [", "audit: skipped "))]
    assert len(lines) == 1, r.stderr[-3000:]
    return lines[0]


def test_a_full_disk_leaves_no_report_that_lies(spark, small_fs):
    """A successful run, then the disk fills and a run over more captures fails: it says so in one
    line naming the directory, and leaves no report.html (the old one named the old captures: it is
    kept as report.previous.html) and a run.json that does not say complete."""
    out = small_fs / "audit"
    first = _job(SAMPLES / "mock-kcat.pcap", "--out", out, "--audits", "exchange_summary,clients")
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads((out / "run.json").read_text())["state"] == "complete" and (out / "report.html").exists()
    free = shutil.disk_usage(small_fs).free
    (small_fs / "filler").write_bytes(b"\0" * (free - 40 * 1024))
    r = _job(SAMPLES, "--out", out, "--audits", "exchange_summary,clients")
    assert r.returncode == 1
    line = _one_line(r)
    assert str(out) in line and "No space left on device" in line
    assert not (out / "report.html").exists()
    assert "mock-kcat.pcap" in (out / "report.previous.html").read_text()  # what the run before found is kept
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]  # nothing half-written left behind
    assert json.loads((out / "run.json").read_text())["state"] in ("failed", "running")


def test_a_read_only_out_is_one_line_before_spark_starts(tmp_path):
    with _tmpfs(tmp_path / "ro", "ro,size=1m") as d:
        e = _job(SAMPLES / "mock-kcat.pcap", "--out", d / "audit")
    assert e.returncode == 1
    line = _one_line(e)
    assert str(d / "audit") in line and "Read-only file system" in line


def test_two_runs_into_one_out_the_second_fails_at_once(tmp_path):
    """A run holds OUT/.lock: a second one fails in one line naming the holder; a lock whose process
    is gone is stale and taken over."""
    from spark_kafkawire.audits.output import OutputDir

    out = tmp_path / "audit"
    holder = OutputDir(str(out))
    holder.lock()
    try:
        e = _job(SAMPLES / "mock-kcat.pcap", "--out", out)
    finally:
        holder.release()
    assert e.returncode == 1
    line = _one_line(e)
    assert "in use by another audit run" in line and f"pid {os.getpid()}" in line
    # a lock left by a process that is gone (killed -9): taken over
    dead = subprocess.Popen(["true"])
    dead.wait()
    (out / ".lock").write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename, "started": "then"}))
    again = OutputDir(str(out))
    again.lock()
    assert json.loads((out / ".lock").read_text())["pid"] == os.getpid()
    again.release()
    assert not (out / ".lock").exists()


def test_tables_describe_only_this_runs_rows_and_the_report_says_which_dates(spark, tmp_path):
    """A run on captures of one day, then one on another day's: the audit tables hold only the
    second run's dates, as rows/ and the report do; the report names the dates."""
    from conftest import PUBLIC

    out = tmp_path / "audit"
    old = PUBLIC / "ndpi-kafka.pcap"
    first = _job(old, "--out", out, "--audits", "exchange_summary")
    assert first.returncode in (0, 2), first.stderr[-3000:]
    old_dates = {p.name for p in (out / "exchange_summary" / "exchange_summary").iterdir()}
    second = _job(SAMPLES / "mock-kcat.pcap", "--out", out, "--audits", "exchange_summary")
    assert second.returncode in (0, 2), second.stderr[-3000:]
    new_dates = {p.name for p in (out / "exchange_summary" / "exchange_summary").iterdir()}
    want = {f"capture_date={d}" for d in {str(r.d) for r in spark.read.format("kafkawire")
                                          .load(str(SAMPLES / "mock-kcat.pcap"))
                                          .selectExpr("to_date(coalesce(request_time, response_time)) as d")
                                          .distinct().collect()}}
    assert old_dates and not old_dates & new_dates and new_dates == want
    page = (out / "report.html").read_text()
    assert "capture dates in the tables" in page
    assert all(d.split("=")[1] in page for d in want)


# -- the report in a real browser -------------------------------------------------------------------
METRICS = """<script>
addEventListener('load', () => {
  const svgs = [...document.querySelectorAll('figure svg')];
  // a figure in a box that scrolls sideways (the lineage graph) must fit as that box does
  const box = s => (s.closest('.scroll') || s).getBoundingClientRect();
  // drawn size against natural size (the SVG's points at 96 px per inch): how large its 7-point text is
  const scale = s => s.getBoundingClientRect().width / (s.viewBox.baseVal.width * 4 / 3);
  const figs = svgs.map(box);
  const m = {width: innerWidth, scroll: document.documentElement.scrollWidth, figures: figs.length,
             inside: figs.every(r => r.left >= 0 && r.right <= innerWidth + 1 && r.width > 50),
             lineage: svgs.filter(s => (s.getAttribute('aria-label') || '').startsWith('producers')).map(scale)};
  // a wide table scrolled sideways in its box keeps its first column in place (position: sticky)
  const wide = [...document.querySelectorAll('.scroll')].filter(d => d.querySelector('table') &&
                                                                 d.scrollWidth > d.clientWidth + 1);
  m.wide = wide.length;
  m.sticky = wide.every(d => { d.scrollLeft = 200; const c = d.querySelector('tr > *:first-child');
                               return Math.abs(c.getBoundingClientRect().left - d.getBoundingClientRect().left) < 2; });
  document.body.insertAdjacentHTML('beforeend', '<pre id="metrics">' + JSON.stringify(m) + '</pre>');
});
</script>"""


def screenshot(page: Path, width: int, png: Path, height: int = 2400) -> None:
    """A screenshot of the page in headless Chromium at a window width (docs/report-*.png)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is required (make system-deps installs it)"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                    f"--user-data-dir={png.parent / f'shot-{width}'}", f"--window-size={width},{height}",
                    f"--screenshot={png}", page.as_uri()], capture_output=True, timeout=120, check=True)


def _browser(page: Path, width: int) -> dict:
    """The page laid out by headless Chromium at a window width: what the script above measured."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is required (make system-deps installs it)"
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--no-first-run",
                        f"--user-data-dir={page.parent / f'profile-{width}'}", f"--window-size={width},2000",
                        "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="metrics">(\{.*?\})</pre>', r.stdout)
    assert m, r.stderr[-2000:]
    return json.loads(html_unescape(m.group(1)))


def html_unescape(s: str) -> str:
    import html

    return html.unescape(s)


def test_report_reads_at_desktop_and_phone_widths(samples, tmp_path):
    """The report of the samples, in Chromium at 1400 and 390 pixels: the page never scrolls
    sideways (wide tables scroll in their own box), every plot fits the window, plots are drawn by
    matplotlib with axis titles and a real time axis, and the verdict counts the failing policies."""
    from spark_kafkawire.audits import policies
    from spark_kafkawire.audits.report import render

    results = {name: run(name, samples) for name in AUDITS}
    verdicts = policies(results, Policy())
    page = render(verdicts, {"captures": str(SAMPLES)}, results)
    failing = sum(v.ok is False for v in verdicts)
    assert failing == 2 and f"2 policies of {len(verdicts)} fail." in page
    for title in ("time (UTC), one bar per minute", "time (UTC), one bar per hour", "records", "exchanges",
                  "latency (ms, bucket's upper bound)", "records produced per minute", "records fetched per minute"):
        assert f"<!-- {title.replace(chr(39), '&#39;')} -->" in page or f"<!-- {title} -->" in page, title
    assert "fetchd" not in page
    # numbers as people write them: no 1.641e+05, thousands separated; no column empty in every row
    cells = re.findall(r'<td class="n">([^<]*)</td>', page)
    assert cells and not [c for c in cells if "e+" in c], [c for c in cells if "e+" in c][:5]
    assert not [c for c in cells if re.fullmatch(r"-?\d{4,}", c)], [c for c in cells if re.fullmatch(r"-?\d{4,}", c)]
    for tbl in re.findall(r"<table>(.*?)</table>", page, re.S):
        rows = [re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", tbl, re.S)]
        body = [r for r in rows[1:] if len(r) == len(rows[0])]
        if rows and rows[0] and body and "<th>" in tbl.split("</tr>")[0]:
            assert not [h for i, h in enumerate(rows[0]) if all(not r[i] for r in body)], rows[0]
    # words: a policy with nothing to judge is not applicable (no TLS in the samples), not a green ok
    assert "not applicable: no TLS seen" in page and "none seen" not in page.split("What was read")[0]
    path = tmp_path / "report.html"
    path.write_text(page.replace("</body>", METRICS + "</body>"))
    for width in (1400, 390):
        m = _browser(path, width)
        assert m["figures"] >= 8 and m["inside"], m
        assert m["scroll"] <= m["width"], m  # nothing wider than the window
        assert m["sticky"] and (m["wide"] >= 1 or width == 1400), m  # at 390 px some table scrolls: sticky
        screenshot(tmp_path / "report.html", width, tmp_path / f"report-{width}.png")
        assert (tmp_path / f"report-{width}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        # the lineage graph's labels (7 pt) stay at 7.5 px or more: it scrolls sideways in its box instead
        assert m["lineage"] and min(m["lineage"]) * 7 * 4 / 3 >= 7.5, m


# -- verdicts rest on their evidence ---------------------------------------------------------------
def _coverage_row(listener="10.0.0.2:9092", **kw):
    row = {"capture_date": None, "listener": listener, "exchanges": 10, "connections": 1, "kafka_connections": 1,
           "tls_connections": 0, "tls_not_decrypted": 0, "tls_version_unknown": 0, "certificates_hidden": 0,
           "started_before_capture": 0, "bytes": 1000, "lost_bytes": 0, "skipped_bytes": 0,
           "tls_undecrypted_bytes": 0, "undecoded_fraction": 0.0, "plaintext_undecoded_fraction": 0.0}
    row.update(kw)
    return row


def test_a_verdict_holds_only_on_what_it_saw():
    """judge() over hand-made coverage rows: a holding verdict becomes inconclusive (ok None) when too
    few exchanges were decoded, or where a listener's undecoded traffic could hide what it checks
    (for TLS, saying how many connections and bytes and that --tls-keylog decrypts them); a failure
    stands; what a verdict does not need (a TLS handshake for a plaintext login) does not count."""
    from spark_kafkawire.audits import Verdict, exit_status, judge

    def verdicts():
        return [Verdict("upgrade", True, "none seen"), Verdict("plain", True, "none seen", "plaintext"),
                Verdict("weak", True, "none seen", "handshakes"), Verdict("certs", True, "none seen", "certificates"),
                Verdict("gaps", True, "0 of 1000 bytes", "capture"), Verdict("errors", False, "3 of 10")]

    def run(*cov, **policy):
        got = judge(verdicts(), {"capture_health": {"coverage": list(cov)}}, Policy(**policy))
        return {v.name: (v.ok, v.detail) for v in got}, exit_status(got)

    clean, status = run(_coverage_row())
    assert status == 2 and clean["errors"] == (False, "3 of 10") and all(ok for n, (ok, _d) in clean.items()
                                                                          if n != "errors")
    tls = _coverage_row("10.0.0.2:9093", exchanges=0, kafka_connections=0, tls_connections=4, tls_not_decrypted=4,
                        certificates_hidden=4, bytes=94000, tls_undecrypted_bytes=94000, undecoded_fraction=1.0)
    got, _ = run(_coverage_row(), tls)
    assert got["upgrade"] == (None, "4 TLS connections (94000 bytes) on 10.0.0.2:9093 were not decrypted: "
                                    "--tls-keylog FILE decrypts them")
    assert got["plain"][0] and got["weak"][0] and got["gaps"][0]  # TLS hides no plaintext login, no handshake
    assert got["certs"] == (None, "4 TLS connections on 10.0.0.2:9093 show their certificate only decrypted: "
                                  "--tls-keylog FILE decrypts them")
    nothing, status = run(_coverage_row(exchanges=0))
    assert nothing["upgrade"] == (None, "0 Kafka exchanges decoded (min_exchanges 1)") and nothing["gaps"][0]
    assert run(_coverage_row(exchanges=0))[1] == 2  # (the failure still fails)
    few, _ = run(_coverage_row(exchanges=3), min_exchanges=5)
    assert few["upgrade"] == (None, "3 Kafka exchanges decoded (min_exchanges 5)")
    lossy = _coverage_row(lost_bytes=50, undecoded_fraction=50 / 1050, plaintext_undecoded_fraction=50 / 1050)
    got, _ = run(lossy)
    assert got["upgrade"] == (None, "4.8% of the bytes on 10.0.0.2:9092 were not decoded (50 lost by the capture, "
                                    "0 in no frame)") and got["plain"][0] is None
    assert run(lossy, max_undecoded_fraction=0.05)[0]["upgrade"][0] is True
    assert exit_status([Verdict("a", True, ""), Verdict("b", None, "")]) == 3
    assert exit_status([Verdict("a", True, "")]) == 0


def _one_produce(path: Path, produce: bool) -> Path:
    """A capture of one connection: ApiVersions, then (``produce``) one Produce v9 request and its
    answer; or no Kafka at all (TLS, HTTP and random bytes on Kafka's port)."""
    from pcapgen import kio_body

    if not produce:
        return damage.not_kafka(path)
    conv = Conversation().handshake()
    conv.send("c", request(18, 3, 1, body=kio_body(18, 3, True)))
    conv.send("b", response(1, 18, 3, kio_body(18, 3, False)))
    conv.send("c", request(0, 9, 2, body=kio_body(0, 9, True)))
    conv.send("b", response(2, 0, 9, kio_body(0, 9, False)))
    write_pcap(path, conv.fin().packets)
    return path


def test_the_job_gates_only_on_evidence(spark, tmp_path):
    """The audit job's verdicts and exit status: a TLS capture read without its key log (its Kafka
    bytes all encrypted) is inconclusive, exit 3, saying how many connections and bytes were not
    decrypted (dpkt's count of the TLS port's payload) and to give --tls-keylog; with the key log the
    same verdict holds, exit 0. A capture with one Produce request: ok, exit 0; with no Kafka at all:
    inconclusive, exit 3, and the summary line says so without 'None'. An incremental run with
    nothing new says so in one line naming the checkpoint, judges nothing and exits 3."""
    import json as _json

    tls = ROOT / "tests" / "tls"
    info = _json.loads((tls / "manifest.json").read_text())["tls13-aes256gcm"]
    pcap, keylog = tls / "tls13-aes256gcm.pcap", tls / "tls13-aes256gcm.keylog"
    # what cannot be read without the key log, counted from the packets: the protected records
    # (content type 23) of each TLS connection's two streams; the hellos and change_cipher_spec
    # records are in clear
    packets, _lt = damage.read(pcap)
    streams: dict = {}
    for _ts, buf in packets:
        seg = tlsmutate._segment(buf)
        if seg and info["tls_port"] in (seg[1], seg[3]):
            streams.setdefault((seg[1], seg[3]), bytearray()).extend(seg[6])
    tls_conns = {a if b == info["tls_port"] else b for a, b in streams}
    # every byte of a connection not decrypted is undecoded, its handshake too (whole TLS records:
    # dpkt's payloads parsed as records add up to the streams' length)
    tls_bytes = 0
    for data in streams.values():
        at = 0
        while at + 5 <= len(data):
            at += 5 + int.from_bytes(data[at + 3:at + 5], "big")
        assert at == len(data)
        tls_bytes += at
    r = _job(pcap, "--out", tmp_path / "a", "--audits", "upgrade_readiness")
    assert r.returncode == 3, r.stdout + r.stderr[-2000:]
    assert f"[inconclusive] no client sends a version Kafka 4.0 rejects: {len(tls_conns)} TLS connections " \
           f"({tls_bytes} bytes) on 127.0.0.1:{info['tls_port']} were not decrypted: --tls-keylog FILE decrypts " \
           "them" in r.stdout
    assert "[ok]" not in r.stdout.split("exchange summary")[0]
    r = _job(pcap, "--out", tmp_path / "b", "--audits", "upgrade_readiness", "--tls-keylog", keylog, "--quiet")
    assert r.returncode == 0 and "[ok] no client sends a version Kafka 4.0 rejects: none seen" in r.stdout, r.stdout
    assert not r.stderr.strip() or all("Using incubator modules" in ln for ln in r.stderr.strip().splitlines())
    one = _job(_one_produce(tmp_path / "one.pcap", True), "--out", tmp_path / "c", "--audits", "upgrade_readiness")
    assert one.returncode == 0 and "[ok] no client sends a version Kafka 4.0 rejects" in one.stdout, one.stdout
    assert re.search(r"^audit: \[ *[0-9.]+ s\] audit upgrade_readiness \([12] of 2\): upgrade_readiness \(0 rows\)$",
                     one.stderr, re.M), one.stderr  # progress on stderr
    none = _job(_one_produce(tmp_path / "none.pcap", False), "--out", tmp_path / "d", "--audits", "upgrade_readiness")
    assert none.returncode == 3, none.stdout + none.stderr[-2000:]
    assert "[inconclusive] no client sends a version Kafka 4.0 rejects: 0 Kafka exchanges decoded (min_exchanges 1)" \
        in none.stdout and "None" not in none.stdout.splitlines()[1]
    # incremental: a first run reads the file, a second finds nothing new
    d = tmp_path / "captures"
    d.mkdir()
    shutil.copy(tmp_path / "one.pcap", d / "one.pcap")
    an_hour_ago = time.time() - 3600
    os.utime(d / "one.pcap", (an_hour_ago, an_hour_ago))
    args = [d, "--incremental", "--checkpoint", tmp_path / "ckpt", "--out", tmp_path / "e", "--audits",
            "upgrade_readiness", "--complete-after-seconds", "0"]
    first = _job(*args)
    assert first.returncode == 0, first.stdout + first.stderr[-2000:]
    found = json.loads((tmp_path / "e" / "run.json").read_text())
    report = (tmp_path / "e" / "report.html").read_text()
    again = _job(*args)
    # a quiet night keeps what the last run found: its report (said so on top) and its verdicts
    assert again.returncode == 3 and again.stdout.strip() == \
        f"audit: nothing new in {d} since the checkpoint {tmp_path / 'ckpt'}: the last run's report and verdicts " \
        f"are kept ({tmp_path / 'e' / 'report.html'})", again.stdout
    kept = json.loads((tmp_path / "e" / "run.json").read_text())
    assert kept["nothing_new"] and kept["verdicts"] == found["verdicts"] != []
    assert kept["since"] == found["finished"] and kept["verdicts_from_run"] == found["run"]
    page = (tmp_path / "e" / "report.html").read_text()
    assert "Nothing new arrived in" in page and f"run {found['run']}, finished {found['finished']}" in page
    assert len(page) > len(report) > 1000 and not (tmp_path / "e" / "report.previous.html").exists()
    third = _job(*args)  # quiet again: one note, the same findings
    page = (tmp_path / "e" / "report.html").read_text()
    assert third.returncode == 3 and page.count("Nothing new arrived in") == 1 and found["run"] in page
    assert json.loads((tmp_path / "e" / "run.json").read_text())["verdicts"] == found["verdicts"]
    # files younger than --complete-after-seconds: named, with when they will count
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(tmp_path / "one.pcap", fresh / "new.pcap")
    waiting = _job(fresh, "--incremental", "--checkpoint", tmp_path / "ckpt2", "--out", tmp_path / "f", "--audits",
                   "upgrade_readiness")
    assert waiting.returncode == 3, waiting.stderr[-2000:]
    assert re.search(r"^audit: 1 file waits to be complete \(unchanged for --complete-after-seconds 60, or followed "
                     r"by a newer file of the series\): new\.pcap \(counts from \d\d:\d\d:\d\d UTC\)", waiting.stdout,
                     re.M), waiting.stdout
    # a night that reads new files names those still being written too, in its output and its report
    shutil.copy(tmp_path / "one.pcap", fresh / "old.pcap")
    os.utime(fresh / "old.pcap", (an_hour_ago, an_hour_ago))
    os.utime(fresh / "new.pcap", None)
    both = _job(fresh, "--incremental", "--checkpoint", tmp_path / "ckpt3", "--out", tmp_path / "g", "--audits",
                "upgrade_readiness")
    assert both.returncode == 0, both.stdout + both.stderr[-2000:]
    assert "audit of 1 capture file" in both.stdout
    assert re.search(r"^audit: 1 file waits to be complete .*: new\.pcap \(counts from", both.stdout, re.M), both.stdout
    page = (tmp_path / "g" / "report.html").read_text()
    assert "left for the next run" in page and "new.pcap (counts from" in page


def test_the_lag_legend_never_covers_the_lines():
    """The consumer-lag plot's legend sits beside the axes: its box and the axes' box do not meet,
    whatever the lines (it sat inside, over the data, where a group's line ran high at the start)."""
    import datetime as dt

    from spark_kafkawire.audits.plots import lines_figure

    t0 = dt.datetime(2026, 11, 21, 13, 52)
    series = {f"group-{i}": {t0 + dt.timedelta(minutes=m): (100 - 10 * m) * (i + 1) for m in range(8)}
              for i in range(4)}
    fig = lines_figure("lag per minute", series, "records behind")
    fig.canvas.draw()
    ax = fig.axes[0]
    legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= box.x1 and not legend.overlaps(box)


def test_plots_tell_every_series_apart_span_the_data_and_keep_small_bars_visible():
    """17 listeners are 17 lines no two of which look alike (tab10's colours repeated after ten); a
    line of one point (a 10-second capture's one minute) is drawn over minutes, not 2025-2029; bars
    whose values span more than 30x (a 500 ms Fetch long-poll beside 1 ms requests) are on a log
    scale, so that the smallest bar is still visible, and their axis says so."""
    import datetime as dt

    import matplotlib.dates as mdates

    from spark_kafkawire.audits import plots

    t0 = dt.datetime(2026, 11, 21, 13, 52)
    series = {f"10.0.0.{i}:9092": {t0: i, t0 + dt.timedelta(minutes=1): i + 1} for i in range(17)}
    ax = plots.lines_figure("retransmissions", series, "segments").axes[0]
    looks = {(str(line.get_color()), line.get_linestyle()) for line in ax.get_lines()}
    assert len(ax.get_lines()) == 17 and len(looks) == 17
    one = plots.lines_figure("one minute", {"a": {t0: 3.0}}, "segments").axes[0]
    low, high = (mdates.num2date(x).replace(tzinfo=None) for x in one.get_xlim())
    assert low <= t0 <= high and high - low < dt.timedelta(hours=1), (low, high)
    for draw in (lambda: plots.bars("p50", ["Fetch", "Metadata", "Produce"], [500.0, 1.2, 2.5], "api", "ms"),
                 lambda: plots.stacked("split", ["Fetch", "Produce"], {"network": [0.4, 0.3], "broker": [500.0, 1.0]},
                                       "api", "ms")):
        assert "(log scale)" in plots_title_text(draw())
    assert "(log scale)" not in plots_title_text(plots.bars("even", ["a", "b"], [3.0, 5.0], "x", "n"))


def plots_title_text(svg: str) -> str:
    """The labels of an SVG plot (text is drawn as paths; matplotlib keeps each text as a comment)."""
    return " ".join(re.findall(r"<!-- (.*?) -->", svg))


def test_the_command_line_summary_and_the_audits_count_alike(samples):
    """``kafkawire summary`` (Arrow, one machine) and the exchange_summary and capture_health audits
    (Spark) evaluate the same definitions (figures.py) in two engines: on the samples, per api and
    client and per capture file, every figure they share is equal."""
    from spark_kafkawire import read_capture
    from spark_kafkawire.cli import summary

    cli = summary(read_capture(SAMPLES, rows="exchanges"), read_capture(SAMPLES, rows="connections"))
    counts = ("exchanges", "errors", "timed", "unanswered", "negotiated")
    ours: dict = defaultdict(lambda: dict.fromkeys(counts, 0))
    for r in cli["exchanges by api, client and broker"].to_pylist():  # (over brokers)
        for c in counts:
            ours[(r["api_name"], r["client_id"])][c] += r[c]
    audit: dict = defaultdict(lambda: dict.fromkeys(counts, 0))
    for r in run("exchange_summary", samples)["exchange_summary"]:  # (over capture dates)
        for c in counts:
            audit[(r["api_name"], r["client_id"])][c] += r[c]
    assert ours == audit and sum(v["errors"] for v in ours.values()) > 0 and \
        sum(v["negotiated"] for v in ours.values()) > 0
    files = {r["capture_file"]: r for r in run("capture_health", samples)["capture_files"]}
    for r in cli["capture health"].to_pylist():
        theirs = files[r["capture_file"]]
        for c in ("connections", "bytes", "gap_bytes", "skipped_bytes", "resyncs", "damaged_exchanges"):
            assert r[c] == (theirs[c] or 0), (r["capture_file"], c)


def test_quotas_count_the_throttling_tshark_reads(spark, tmp_path):
    """Three clients against one broker, the answers built with kio: a producer the broker throttles
    on some answers, one it never throttles, and an admin client whose CreateTopics is refused
    with THROTTLING_QUOTA_EXCEEDED for one topic. The quotas audit's counts per client equal what
    tshark reads of the same capture (kafka.throttle_time, kafka.error), and the policy fails the
    throttled client only."""
    # (versions tshark 4.0 decodes: Produce v7, CreateTopics v4, the last before flexible ones)
    from kio.schema.create_topics.v4 import request as cq
    from kio.schema.create_topics.v4 import response as ct
    from kio.schema.errors import ErrorCode
    from kio.schema.produce.v7 import response as pr
    from kiogen import write
    from test_records import _record, batch

    throttles = {"slow-producer": [0, 250, 0, 1200, 40, 0, 0, 310], "free-producer": [0] * 5}
    packets = []
    for port, (client, ms) in enumerate(throttles.items(), start=41000):
        conv = Conversation(client=("10.0.0.1", port)).handshake()
        for corr, t in enumerate(ms, start=1):
            conv.send("c", produce_request(7, corr, client, batch([_record(0, b"k", b"v")])))
            conv.send("b", response(corr, 0, 7, write(pr.ProduceResponse(responses=(),
                                                                          throttle_time=dt.timedelta(milliseconds=t)))))
        packets += conv.fin().packets
    admin = Conversation(client=("10.0.0.3", 42000)).handshake()
    admin.send("c", request(19, 4, 1, client_id="admin", body=write(cq.CreateTopicsRequest(topics=(
        cq.CreatableTopic(name="t", num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=dt.timedelta(seconds=30), validate_only=False))))
    admin.send("b", response(1, 19, 4, write(ct.CreateTopicsResponse(throttle_time=dt.timedelta(0), topics=(
        ct.CreatableTopicResult(name="t", error_code=ErrorCode.throttling_quota_exceeded, error_message="quota"),)))))
    packets += admin.fin().packets
    write_pcap(tmp_path / "quotas.pcap", packets)

    theirs: dict = defaultdict(lambda: [0, 0, 0, 0])  # answers, throttled, throttle ms, quota exceeded
    for sport, throttle, errors in tshark_fields(tmp_path / "quotas.pcap", [9092],
                                                 ("tcp.dstport", "kafka.throttle_time", "kafka.error")):
        n = theirs[int(sport)]
        if throttle:
            n[0] += 1
            n[1] += int(throttle) > 0
            n[2] += int(throttle)
        n[3] += sum(int(e) == 89 for e in errors.split(";") if e)
    res = run("quotas", rows_of(spark, tmp_path, [tmp_path / "quotas.pcap"]), max_throttled_share=0.25)
    ours: dict = defaultdict(lambda: [0, 0, 0, 0])
    for r in res["throttled_clients"]:
        n = ours[r["client_id"]]
        for i, c in enumerate(("answers", "throttled", "throttle_ms", "quota_exceeded")):
            n[i] += r[c]
    ports = {41000: "slow-producer", 41001: "free-producer", 42000: "admin"}
    # every client tshark sees throttled or refused, with its answers; none other
    assert {ports[p]: n for p, n in theirs.items() if n[1] or n[3]} == dict(ours)
    assert ours["slow-producer"] == [8, 4, 1800, 0] and ours["admin"][3] == 1 and theirs[41001] == [5, 0, 0, 0]
    assert {r["api_name"] for r in res["throttling"]} == {"Produce", "CreateTopics"}
    minutes = sum(r["throttle_ms"] for r in res["throttling_by_minute"])
    assert minutes == 1800
    from spark_kafkawire.audits import policies

    (verdict,) = [v for v in policies({"quotas": res}, Policy(max_throttled_share=0.25)) if "throttled" in v.name]
    assert verdict.ok is False and "slow-producer" in verdict.detail and "free-producer" not in verdict.detail


# -- hostile captures (../shared/fuzz-findings/round5/): the nightly job ends with a report ------------
ROUND5 = ROOT.parent / "shared" / "fuzz-findings" / "round5"


@pytest.mark.skipif(not ROUND5.is_dir(), reason="../shared/fuzz-findings/round5 is not beside the checkout")
def test_the_job_counts_files_and_exchanges_it_read(spark, tmp_path):
    """An HTTP-only capture and 50 empty files (as tcpdump leaves just-opened rotated files): every
    file counted (51, dpkt's listing of the folder), no exchange (none is Kafka: tshark finds none
    either); it was 'audit of 0 capture files, 0 exchanges' (the empty files: 50 exchanges)."""
    d = tmp_path / "caps"
    d.mkdir()
    shutil.copy(ROUND5 / "audit-header-http-only.pcap", d)
    for i in range(50):
        (d / f"empty-{i:02d}.pcap").write_bytes(b"")
    r = _job(d, "--out", tmp_path / "out")
    assert r.returncode in (0, 2, 3), r.stderr[-3000:]
    assert "audit of 51 capture files, 0 exchanges" in r.stdout, r.stdout[:2000]
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["files"] == 51 and run["exchanges"] == 0
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(ROUND5 / "audit-header-http-only.pcap", one)
    r = _job(one, "--out", tmp_path / "out1")
    assert "audit of 1 capture file, 0 exchanges" in r.stdout, r.stdout[:2000]


@pytest.mark.skipif(not ROUND5.is_dir(), reason="../shared/fuzz-findings/round5 is not beside the checkout")
def test_one_hostile_record_or_a_fifo_does_not_stop_the_job(spark, tmp_path):
    """A _schemas record whose schemaType is a list, a value inflating to 64 MiB of JSON, client ids
    with bidirectional and tag characters, and a FIFO among the captures: the job ends with verdicts
    and a report (it exited 1 with none, or blocked forever), names the FIFO it skipped, and writes no
    character a terminal would act on (Unicode categories Cc, Cf, Zl, Zp, Cs, Cn)."""
    import unicodedata

    from spark_kafkawire.escape import UNSAFE_CATEGORIES

    d = tmp_path / "caps"
    d.mkdir()
    for name in ("schemas-type-list.pcap", "json-value-amplification.pcap", "terminal-alm-unescaped.pcap"):
        shutil.copy(ROUND5 / name, d)
    os.mkfifo(d / "pipe.pcap")
    (d / "notes.txt").write_text("not a capture")  # a name no pathGlobFilter pattern matches
    r = _job(d, "--out", tmp_path / "out")
    assert r.returncode in (0, 2, 3), r.stderr[-3000:]
    assert (tmp_path / "out" / "report.html").is_file()
    assert "audit of 3 capture files" in r.stdout
    assert f"audit: skipped {d / 'pipe.pcap'}: a FIFO, not a regular file" in r.stderr
    assert f"audit: skipped 1 file of {d} whose names match no pathGlobFilter pattern: notes.txt" in r.stderr
    # and named in capture_health, each with why (os.stat tells what each is)
    import pyarrow.parquet as pq

    skipped = {Path(x["capture_file"]).name: x["why"]
               for x in pq.read_table(tmp_path / "out" / "capture_health" / "skipped_files").to_pylist()}
    assert stat.S_ISFIFO(os.stat(d / "pipe.pcap").st_mode) and skipped == {
        "pipe.pcap": "a FIFO, not a regular file", "notes.txt": "its name matches no pathGlobFilter pattern"}
    assert "notes.txt" in (tmp_path / "out" / "report.html").read_text()
    unsafe = [c for c in r.stdout + r.stderr if c != "\n" and unicodedata.category(c) in UNSAFE_CATEGORIES]
    assert not unsafe, unsafe


def test_capture_file_names_are_escaped_in_the_report_and_the_error_line(spark, tmp_path):
    """Round 6: capture file names are attacker-chosen. A capture named with ESC and BEL, and a FIFO
    named with ESC: report.html (capture_files, slowest, skipped_files) holds neither character, only
    their escapes; the FIFO's name on stderr is escaped once; a file that is not a capture is named
    escaped in the job's one-line error."""
    d = tmp_path / "caps"
    d.mkdir()
    shutil.copy(SAMPLES / "mock-kcat.pcap", d / "cap\x1b[7m\x07.pcap")
    os.mkfifo(d / "pipe\x1b[31m.pcap")
    r = _job(d, "--out", tmp_path / "out")
    assert r.returncode in (0, 2, 3), r.stderr[-3000:]
    page = (tmp_path / "out" / "report.html").read_text()
    assert "\x1b" not in page and "\x07" not in page
    assert "cap\\x1b[7m\\x07.pcap" in page and "pipe\\x1b[31m.pcap" in page
    assert f"audit: skipped {d}/pipe\\x1b[31m.pcap: a FIFO, not a regular file" in r.stderr, r.stderr[-2000:]
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "junk\x1b[7m.pcap").write_bytes(bytes(range(256)) * 12)
    r = _job(junk, "--out", tmp_path / "out2")
    assert r.returncode == 1 and "\x1b" not in r.stderr and "junk\\x1b[7m.pcap" in r.stderr, r.stderr[-2000:]


def test_records_seen_at_several_capture_points_are_delivered_once(spark, tmp_path):
    """The same traffic captured at four points (four copies of one capture): each record is
    produced once and fetched once per consumer, so the deliveries are those of one copy (the join
    of produced and fetched records met each record four times before, and did not fit a broadcast
    at 364 MB)."""
    from spark_kafkawire.audits.delivery import deliveries

    src = SAMPLES / "mock-confluent-group.pcapng"  # 30 records produced and fetched back
    for i in range(4):
        shutil.copy(src, tmp_path / f"point{i}.pcapng")
    one = Rows.load(spark, [str(src)])
    four = Rows.load(spark, [str(tmp_path)])
    n_one = deliveries(one).count()
    assert n_one > 0 and deliveries(four).count() == n_one
    key = ["topic", "partition", "log_offset", "client_id", "delivery_ms"]
    assert sorted(map(tuple, deliveries(four).select(*key).collect())) == \
        sorted(map(tuple, deliveries(one).select(*key).collect()))


def test_tls_policies_are_judged_from_handshakes_without_the_key_log(spark, tmp_path):
    """TLS captures read without their key logs (no Kafka exchange decoded): the version and suite
    policy is judged from the handshakes all the same, as the test servers were configured
    (tests/tls/manifest.json: a CBC suite fails, an AEAD one holds), and the certificate policy
    from the TLS 1.2 certificates seen in clear; a TLS 1.3 server's certificate is encrypted: that
    part, and only that, stays inconclusive, saying so."""
    tls = ROOT / "tests" / "tls"
    manifest = json.loads((tls / "manifest.json").read_text())

    from spark_kafkawire.audits import policies

    def judged(name: str) -> dict:
        rows = rows_of(spark, tmp_path / name, [tls / f"{name}.pcap"])
        results = {a: run(a, rows) for a in ("security", "capture_health")}
        return {v.name.split(" ")[1]: v for v in policies(results, Policy())
                if "TLS" in v.name or "certificate" in v.name}

    cbc = judged("tls12-aes128cbc-sha256")
    assert manifest["tls12-aes128cbc-sha256"]["ciphers"] == "ECDHE-RSA-AES128-SHA256"
    assert cbc["TLS"].status == "FAIL" and "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256" in cbc["TLS"].detail, cbc["TLS"]
    assert cbc["server"].status in ("ok", "FAIL"), cbc["server"]  # (its certificate is in clear)
    gcm = judged("tls13-aes256gcm")
    assert manifest["tls13-aes256gcm"]["version"] == "TLSv1_3"
    assert gcm["TLS"].status == "ok", gcm["TLS"]
    assert gcm["server"].status == "inconclusive" and "only decrypted" in gcm["server"].detail, gcm["server"]
