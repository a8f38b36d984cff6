"""The audits only the wire can answer (lineage, consumer_lag, client_hygiene), against the clients' own
account of what they did: tests/insights/ holds captures of real clients against a real broker,
made by tests/insights/make_insight_captures.py, and manifest.json what the clients reported
(deliveries, records consumed, their position and the broker's watermarks, their configuration)."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from conftest import ROOT
from test_audits import rows_of, run

from spark_kafkawire.audits import AUDITS, Policy, policies

INSIGHTS = Path(__file__).parent / "insights"
MANIFEST = json.loads((INSIGHTS / "manifest.json").read_text())


@pytest.fixture(scope="module")
def rows(spark, tmp_path_factory):
    return {name: rows_of(spark, tmp_path_factory.mktemp(name), [INSIGHTS / f"{name}.pcap"])
            for name in ("lineage", "lag", "hygiene", "carried")}


def test_lineage_edges_are_what_the_clients_were_configured_to_do(rows):
    want = MANIFEST["lineage.pcap"]
    got = run("lineage", rows["lineage"])
    # producers: exactly the configured (client, topic) pairs, with the records their delivery reports count
    produced = {(r["client_id"], r["topic"]): r["records"] for r in got["lineage_producers"]}
    assert produced == {(cid, p["topic"]): p["delivered"] for cid, p in want["producers"].items()}
    # consumers: exactly the configured (client, group, topic), group null for the group-less reader
    consumed = {(r["client_id"], r["group_id"], r["topic"]): r["records"] for r in got["lineage_consumers"]}
    assert set(consumed) == {(cid, c["group"], t) for cid, c in want["consumers"].items() for t in c["topics"]}
    for cid, c in want["consumers"].items():  # the records each consumer's own poll() loop counted
        assert sum(n for (who, _g, _t), n in consumed.items() if who == cid) == c["consumed"], cid
    assert {r["group_basis"] for r in got["lineage_consumers"] if r["group_id"]} == {"offsets committed"}
    software = {r["client_id"]: r["client_software"] for r in got["lineage_producers"]}
    assert software["orders-mobile"].startswith("kafka-python") and software["orders-web"].startswith("confluent")
    # the topic nobody reads, and the policy that asks for readers
    assert {r["topic"] for r in got["lineage_topics"] if r["unread"]} == {"metrics"}
    verdicts = policies({"lineage": got}, Policy(require_readers=True))
    assert [(v.ok, v.detail) for v in verdicts if "read by a consumer" in v.name] == [(False, "unread: metrics")]


def test_consumer_lag_rises_to_what_was_appended_while_paused_and_returns_to_zero(rows):
    from spark_kafkawire.audits.consumer_lag import lag_samples

    want = MANIFEST["lag.pcap"]
    moments = {m["moment"]: m for m in want["moments"]}
    samples = sorted((r.asDict() for r in lag_samples(rows["lag"]).collect()
                      if r.topic == want["topic"] and r.partition == want["partition"]), key=lambda r: r["time"])
    assert {(r["group_id"], r["client_id"]) for r in samples} == {(want["group"], want["client_id"])}

    def at(moment):  # the last fetch answered before the client's own reading
        t = dt.datetime.fromtimestamp(moments[moment]["time"], dt.timezone.utc)
        return [r for r in samples if r["time"].replace(tzinfo=dt.timezone.utc) <= t][-1]

    caught_up = at("caught up")
    assert (caught_up["fetch_offset"], caught_up["lag"]) == (moments["caught up"]["position"],
                                                             moments["caught up"]["lag"]) == (want["before"], 0)
    # while paused the consumer fetches nothing; its first fetch after resuming is as far behind as
    # the client and the broker said it was (position() and get_watermark_offsets())
    paused = moments["paused, the producer done"]
    worst = max(samples, key=lambda r: r["lag"])
    assert worst["lag"] == paused["lag"] == want["produced_while_paused"]
    assert (worst["fetch_offset"], worst["high_watermark"]) == (paused["position"], paused["high_watermark"])
    assert worst["time"].replace(tzinfo=dt.timezone.utc).timestamp() > paused["time"]
    # time lag: since the record at the consumer's position was made (its CreateTime, as the client read it)
    first = want["first_record_after_pause"]
    assert first["offset"] == worst["fetch_offset"]
    since_created = worst["time"].replace(tzinfo=dt.timezone.utc).timestamp() * 1000 - first["timestamp_ms"]
    assert abs(worst["time_lag_ms"] - since_created) < 100
    end = samples[-1]
    assert (end["fetch_offset"], end["lag"]) == (moments["resumed and caught up"]["position"],
                                                 moments["resumed and caught up"]["lag"])
    assert all(r["lag"] == 0 for r in samples if r["time"] > worst["time"])
    # the tables and the policies
    got = run("consumer_lag", rows["lag"])
    assert max(r["max_lag"] for r in got["lag_by_group"] if r["group"] == want["group"]) == paused["lag"]
    part = [r for r in got["consumer_lag"] if r["partition"] == want["partition"]]
    assert max(r["max_lag"] for r in part) == paused["lag"] and part[-1]["last_lag"] == 0
    for bound, ok in ((paused["lag"] - 1, False), (paused["lag"], True)):
        v = [v for v in policies({"consumer_lag": got}, Policy(max_lag_records=bound)) if "behind" in v.name]
        assert [x.ok for x in v] == [ok] and (ok or want["group"] in v[0].detail)


def _findings(got) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for r in got["client_hygiene"]:
        out[r["client_id"]].add(r["finding"])
    return out


def test_client_hygiene_flags_every_bad_client_with_its_finding_and_no_good_one(rows):
    want = MANIFEST["hygiene.pcap"]
    got = run("client_hygiene", rows["hygiene"])
    found = _findings(got)
    for cid, expected in want["bad"].items():
        assert found.get(cid, set()) == set(expected.split(",")), cid
    assert not {cid: f for cid, f in found.items() if cid in want["good"]}
    assert set(found) == set(want["bad"])  # nobody else (the set-up admin client included)
    for r in got["client_hygiene"]:
        assert r["evidence"] and r["suggestion"] and r["threshold"] is not None
    # thresholds are policy keys: raised past what the storm did, the finding goes
    relaxed = _findings(run("client_hygiene", rows["hygiene"], max_metadata_per_minute=100_000))
    assert "metadata_storm" not in relaxed["meta-storm"]
    # findings named in hygiene_fail_on fail the run, naming the client
    v = [v for v in policies({"client_hygiene": got}, Policy(hygiene_fail_on=["acks0"])) if "acks0" in v.name]
    assert len(v) == 1 and not v[0].ok and v[0].detail == "fire-and-forget@127.0.0.1: acks0"


def test_audit_job_runs_the_three_audits_and_draws_them(tmp_path):
    """jobs/audit.py --audits lineage,consumer_lag,client_hygiene: Parquet tables, a report with the
    lineage graph, the lag lines and the findings chart, and exit 2 where a finding is made to fail."""
    import pyarrow.parquet as pq

    config = tmp_path / "audit.toml"
    config.write_text('hygiene_fail_on = ["acks0"]\nrequire_readers = true\nrequire_consistent_schemas = true\n'
                      'max_delivery_p99_ms = 1\nmin_latency_n = 10\n')
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(ROOT / "jobs" / "audit.py"), str(INSIGHTS), "--out", str(out),
                        "--audits", "lineage,consumer_lag,client_hygiene,schemas,delivery", "--config", str(config)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2, r.stderr
    assert "[FAIL] no client shows acks0: fire-and-forget@127.0.0.1: acks0" in r.stdout
    # nobody read the registry's own topic either, nor the lossy run's (split-window-update.pcap: a
    # producer alone), nor lib-c-topic (clients.pcap: its kafka-python consumer fetched no record)
    assert json.loads((INSIGHTS / "manifest.json").read_text())["clients.pcap"]["consumed"]["lib-c"] == 0
    assert "[FAIL] every topic produced to is read by a consumer: unread: _schemas, blobs, legacy, lib-c-topic, " \
           "metrics, split" in r.stdout
    assert re.search(r"\[FAIL\] every topic's records in one wire format.*misc: mixed_formats.*orders: mixed_formats",
                     r.stdout)
    assert re.search(r"\[FAIL\] every topic's delivery p99 at most 1 ms: (\w+: p99 [\d.]+ ms over \d+ deliveries; )",
                     r.stdout)
    for table in ("lineage/lineage_producers", "consumer_lag/lag_by_group", "client_hygiene/client_hygiene",
                  "schemas/schema_producers", "delivery/delivery_by_group"):
        assert pq.read_table(out / table).num_rows > 0, table
    assert pq.read_table(out / "rows" / "records").column("value").null_count == \
        pq.read_table(out / "rows" / "records").num_rows  # the job never keeps payload
    page = (out / "report.html").read_text()
    for title in ("producers -&gt; topics -&gt; consumers", "lag per minute, largest", "clients per finding",
                  "records produced by value format", "delivery p99 per topic and consumer group"):
        assert f'aria-label="{title}' in page, title
    assert page.count("<svg") >= 6 and not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched


def test_a_bad_hygiene_finding_name_is_one_line(tmp_path):
    config = tmp_path / "audit.toml"
    config.write_text('hygiene_fail_on = ["ack0"]\n')
    r = subprocess.run([sys.executable, str(ROOT / "jobs" / "audit.py"), str(INSIGHTS), "--out", str(tmp_path / "o"),
                        "--config", str(config)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "hygiene_fail_on" in r.stderr and "'ack0'" in r.stderr and "acks0" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_every_audit_is_one_module_with_one_description():
    """An audit is its module: audits/<name>.py holds AUDIT (name, function, introduction, verdicts,
    plots), the package finds it, and docs/audits.md has its row."""
    import pkgutil

    import spark_kafkawire.audits as pkg

    modules = {m.name for m in pkgutil.iter_modules(pkg.__path__)} - {"base", "plots", "report", "output", "job", "loading",
                                                                     "history", "compare", "metrics"}
    assert set(AUDITS) == modules and len(modules) >= 13
    assert list(AUDITS) == sorted(AUDITS, key=lambda n: AUDITS[n].order)
    docs = (ROOT / "docs" / "audits.md").read_text()
    for name, audit in AUDITS.items():
        assert audit.name == name and len(audit.intro) > 40 and audit.intro.endswith(".")
        assert f"| `{name}`" in docs, f"docs/audits.md: no row for the {name} audit"
    # every policy a verdict judges is some audit's: the default policy with every bound set is judged
    # by exactly the audits that define verdicts
    assert {n for n, a in AUDITS.items() if a.verdicts} >= {"upgrade_readiness", "errors", "latency", "security",
                                                            "capture_health", "lineage", "consumer_lag",
                                                            "client_hygiene"}


def test_the_schemas_verdict_claims_nothing_without_produced_records():
    """No produced record decoded (a capture of consumers only, or none): the policy is
    inconclusive, never ok; with records in one format and no finding, ok; with a mixed topic, FAIL
    naming it."""
    from spark_kafkawire.audits import schemas
    from spark_kafkawire.audits.base import Policy

    policy = Policy(require_consistent_schemas=True)
    empty = schemas.verdicts({"schemas": {"schema_formats": [], "schema_findings": []}}, policy)
    assert [v.status for v in empty] == ["inconclusive"] and "no produced record" in empty[0].detail
    one = {"topic": "t", "value_format": "json", "value_schema_id": None, "records": 3}
    clean = schemas.verdicts({"schemas": {"schema_formats": [one], "schema_findings": []}}, policy)
    assert [v.status for v in clean] == ["ok"]
    mixed = {"topic": "t", "finding": "mixed_formats", "seen": "json, utf8"}
    bad = schemas.verdicts({"schemas": {"schema_formats": [one], "schema_findings": [mixed]}}, policy)
    assert [v.status for v in bad] == ["FAIL"] and "t: mixed_formats" in bad[0].detail
    assert schemas.verdicts({"schemas": {"schema_formats": [], "schema_findings": []}}, Policy()) == []


# -- what the records carry: schemas and delivery ---------------------------------------------------------
def test_schemas_are_what_each_producer_said_it_wrote(rows):
    """Per producer and topic: the value formats and schema ids in its own log; the findings derived
    from that log (a topic with several formats, records without an id beside records with one, an
    id only one of a topic's id-writing producers uses)."""
    sent = MANIFEST["carried.pcap"]["sent"]
    got = run("schemas", rows["carried"])
    want: dict = defaultdict(lambda: [set(), set(), 0])
    for s in sent:
        w = want[(s["client_id"], s["topic"])]
        w[0].add(s["value_format"])
        if s["value_schema_id"] is not None:
            w[1].add(s["value_schema_id"])
        w[2] += 1
    seen = {(r["client_id"], r["topic"]): [set(r["value_formats"].split(", ")), set(r["value_schema_ids"]), r["records"]]
            for r in got["schema_producers"]}
    assert seen == dict(want)
    library = {s["client_id"]: s["software"] for s in sent}  # (kafkajs and kafka-python name no software)
    assert all(r["client_software"].startswith("confluent-kafka-python ") for r in got["schema_producers"]
               if library[r["client_id"]] == "confluent-kafka")
    # the findings, from the producers' log
    topics: dict = defaultdict(list)
    for s in sent:
        topics[s["topic"]].append(s)
    expected = set()
    for t, recs in topics.items():
        if len({s["value_format"] for s in recs}) > 1:
            expected.add(("mixed_formats", t, None))
        ids = [s["value_schema_id"] for s in recs]
        if any(i is None for i in ids) and any(i is not None for i in ids):
            expected.add(("unregistered_records", t, None))
        writers = {s["client_id"] for s in recs if s["value_schema_id"] is not None}
        for i in {i for i in ids if i is not None}:
            users = {s["client_id"] for s in recs if s["value_schema_id"] == i}
            if len(users) == 1 and len(writers) > 1:
                expected.add(("lone_schema_id", t, users.pop()))
    assert {(r["finding"], r["topic"], r["client_id"]) for r in got["schema_findings"]} == expected
    assert ("lone_schema_id", "payments", "payments-ck") in expected and ("mixed_formats", "orders", None) in expected
    # the counts, from the same log: records per topic, format and id; records without an id
    per_format = Counter((s["topic"], s["value_format"], s["value_schema_id"]) for s in sent)
    assert {(r["topic"], r["value_format"], r["value_schema_id"]): r["records"]
            for r in got["schema_formats"]} == dict(per_format)
    unregistered = [r for r in got["schema_findings"] if r["finding"] == "unregistered_records"]
    assert unregistered
    for r in unregistered:
        recs = topics[r["topic"]]
        assert r["seen"] == f"{sum(s['value_schema_id'] is None for s in recs)} of {len(recs)} records without a " \
                            "registry id"


def test_delivery_is_within_what_the_clients_timed(rows):
    """Every record each group's consumer said it received is a delivery of that group, no sooner
    than the producer sent it and no later than the consumer had it: each delivery time lies between
    0 and (the consumer's receive time - the producer's send time), the same clock."""
    m = MANIFEST["carried.pcap"]
    sent = {(s["topic"], s["partition"], s["offset"]): s for s in m["sent"]}
    got = run("delivery", rows["carried"], min_latency_n=1)
    for group, consumed in m["consumed"].items():
        per_topic: dict = defaultdict(list)
        for t, p, o, received in consumed:
            per_topic[t].append((received - sent[(t, p, o)]["sent"]) * 1000)
        mine = {r["topic"]: r for r in got["delivery_by_group"] if r["group_id"] == group}
        assert set(mine) == set(per_topic), group
        for t, bounds in per_topic.items():
            r = mine[t]
            assert r["n"] == r["records"] == len(bounds), (group, t)
            assert 0 <= r["min_ms"] <= r["max_ms"] <= max(bounds) + 1, (group, t, r, max(bounds))
    # by trace id: each traced record once, fetched by the groups whose consumer received it
    groups_of: dict = defaultdict(set)
    for group, consumed in m["consumed"].items():
        for t, p, o, _ in consumed:
            groups_of[(t, p, o)].add(group)
    want = {s["trace_id"]: len(groups_of[k]) for k, s in sent.items() if s["trace_id"]}
    assert {r["trace_id"]: r["consumers"] for r in got["delivery_by_trace"]} == want
