"""Lineage: who writes to and reads from each topic."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..protocol import PRODUCE_KEY, RECORDS_IN_RESPONSE
from .base import CLIENT, CONN, Audit, Policy, Results, Rows, Verdict, records_by, software, with_groups
from .plots import flow


def lineage(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Per topic, its producers (client id, address, software, records, bytes, first/last seen) and
    its consumers (group where known, client id, address, records fetched); a summary per topic."""
    sw = software(rows.exchanges)

    def side(keys: tuple[int, ...]) -> DataFrame:
        return (records_by(rows.partitions, keys).join(sw, CONN, "left")
                .groupBy("capture_date", "topic", *CLIENT)
                .agg(F.array_join(F.array_sort(F.collect_set("software")), ", ").alias("client_software"),
                     F.sum("record_count").alias("records"), F.sum("record_bytes").alias("bytes"),
                     F.countDistinct(*CONN, "correlation_id").alias("requests"),
                     F.min("time").alias("first_seen"), F.max("time").alias("last_seen")))

    # (cached: the topics table is made from both, and each is a table of its own too)
    producers = side((PRODUCE_KEY,)).orderBy("topic", F.desc("bytes"), *CLIENT).cache()
    consumers = (with_groups(side(tuple(RECORDS_IN_RESPONSE)), rows)
                 .select("capture_date", "topic", "group_id", "group_basis", *CLIENT, "client_software", "records",
                         "bytes", "requests", "first_seen", "last_seen")
                 .orderBy("topic", "group_id", F.desc("bytes"), *CLIENT)).cache()
    p = producers.groupBy("capture_date", "topic").agg(
        F.count("*").alias("producers"), F.sum("records").alias("records_produced"),
        F.sum("bytes").alias("bytes_produced"))
    c = consumers.groupBy("capture_date", "topic").agg(
        F.countDistinct(*CLIENT).alias("consumers"),
        F.array_sort(F.collect_set("group_id")).alias("groups"), F.sum("records").alias("records_fetched"))
    topics = (p.join(c, ["capture_date", "topic"], "full")
              .na.fill(0, ["producers", "consumers", "records_produced", "bytes_produced", "records_fetched"])
              .withColumn("unread", (F.col("producers") > 0) & (F.col("consumers") == 0))
              .orderBy(F.desc("bytes_produced"), "topic"))
    return {"lineage_topics": topics, "lineage_producers": producers, "lineage_consumers": consumers}


def plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    def who(r: dict) -> str:
        return f"{r['client_id']}@{r['client_ip']}"

    left: dict[tuple[str, str], float] = {}
    for r in tables.get("lineage_producers", []):
        left[(who(r), r["topic"])] = left.get((who(r), r["topic"]), 0) + (r["bytes"] or 0)
    right: dict[tuple[str, str], float] = {}
    for r in tables.get("lineage_consumers", []):
        node = f"group {r['group_id']}" if r["group_id"] is not None else f"{who(r)} (no group)"
        right[(r["topic"], node)] = right.get((r["topic"], node), 0) + (r["bytes"] or 0)
    return [flow("producers -> topics -> consumers (edge width: bytes)", left, right)] if left or right else []


def verdicts(results: Results, policy: Policy) -> list[Verdict]:
    if not policy.require_readers:
        return []
    unread = sorted({r["topic"] for r in results["lineage"]["lineage_topics"] if r["unread"]})
    return [Verdict("every topic produced to is read by a consumer", not unread,
                    "unread: " + ", ".join(unread) if unread else "none unread")]


AUDIT = Audit(
    name="lineage", order=100, run=lineage,
    intro=('Who writes to and reads from each topic: producers (client id, address, software) and '
           'consumers (their group where the group protocol shows it) with records and bytes; topics '
           'nobody read. The graph draws producers, topics and consumers, edge width by bytes, the '
           'largest first.'),
    verdicts=verdicts,
    plots=plots)
