"""Delivery: how long a record takes from the Produce request that appended it to each consumer
that fetched it."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..protocol import PRODUCE_KEY, RECORDS_IN_RESPONSE
from .base import CLIENT, Audit, Policy, Results, Rows, Verdict, found, with_groups
from .plots import bars

_Q = (0.5, 0.99)
_RECORD = ["topic", "partition", "log_offset"]


def deliveries(rows: Rows) -> DataFrame:
    """One row per record and consumer (client id, address) that fetched it: the record's topic,
    partition and log offset, its producer, trace id, ``produced`` (time of the Produce request that
    appended it), ``fetched`` (the first Fetch response that returned it to that consumer) and
    ``delivery_ms``. Records are matched by (topic, partition, log offset): the produced record's
    offset is the one its Produce response assigned; a record seen more than once (at several
    capture points) is produced at its first sight, and fetched by each consumer at its first. A
    fetch before the produce is a different record at the same offset (another cluster, a topic
    deleted and made again): no match."""
    r = rows.record_rows().where((F.col("status") == "ok") & F.col("log_offset").isNotNull()
                           & F.col("control_type").isNull())
    # a record seen at several capture points (a client's end and its broker's, two brokers) is one
    # record: its first sight, so that the join below meets each record once, not once per copy
    prod = (r.where(F.col("api_key") == PRODUCE_KEY)
            .groupBy(*_RECORD)
            .agg(F.min("time").alias("produced"), F.min_by("client_id", "time").alias("producer_id"),
                 F.min_by("client_ip", "time").alias("producer_ip"), F.min_by("trace_id", "time").alias("trace_id")))
    fetch = (r.where(F.col("api_key").isin(*RECORDS_IN_RESPONSE))
             .groupBy(*_RECORD, *CLIENT).agg(F.min("time").alias("fetched")))
    return (prod.join(fetch, _RECORD).where(F.col("fetched") >= F.col("produced"))
            .withColumn("delivery_ms", (F.col("fetched").cast("double") - F.col("produced").cast("double")) * 1000)
            .withColumn("capture_date", F.to_date("produced")))


def delivery(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """p50/p99/max delivery per topic, per topic and consumer group (or group-less consumer) where n
    >= min_latency_n (n shown); per trace id (slowest first), its slowest delivery, topic, the
    producer's client id, records and consumers."""
    d = with_groups(deliveries(rows), rows).cache()
    q = F.percentile("delivery_ms", list(_Q))

    def per(*keys: str) -> DataFrame:
        group = ["capture_date", *keys]
        # the distinct records counted apart: in one aggregation with the percentiles, Spark would
        # keep a percentile's buffer for every record of every group
        records = d.select(*group, *_RECORD).distinct().groupBy(*group).agg(F.count("*").alias("records"))
        stats = (d.groupBy(*group)
                 .agg(F.count("*").alias("n"), q.alias("q"), F.max("delivery_ms").alias("max_ms"),
                      F.min("delivery_ms").alias("min_ms"))
                 .where(F.col("n") >= policy.min_latency_n))
        s, r = stats.alias("s"), records.alias("r")  # (keys may be null: a consumer without a group)
        return (s.join(r, [F.col(f"s.{k}").eqNullSafe(F.col(f"r.{k}")) for k in group])
                .select(*(F.col(f"s.{k}").alias(k) for k in group), "n", "records",
                        F.round(F.col("q")[0], 3).alias("p50_ms"), F.round(F.col("q")[1], 3).alias("p99_ms"),
                        F.round("max_ms", 3).alias("max_ms"), F.round("min_ms", 3).alias("min_ms"))
                .orderBy(*keys))

    traces = (d.where(F.col("trace_id").isNotNull())
              .groupBy("capture_date", "trace_id")
              .agg(F.first("topic").alias("topic"), F.first("producer_id").alias("producer_client_id"),
                   F.countDistinct(*_RECORD).alias("records"), F.countDistinct(*CLIENT).alias("consumers"),
                   F.min("produced").alias("produced"), F.max("fetched").alias("last_fetched"),
                   F.round(F.max("delivery_ms"), 3).alias("max_ms"))
              .select("capture_date", "trace_id", "max_ms", "topic", "producer_client_id", "records", "consumers",
                      "produced", "last_fetched")
              .orderBy(F.desc("max_ms"), "trace_id"))  # slowest first
    return {"delivery_by_topic": per("topic"), "delivery_by_group": per("topic", "group_id", *CLIENT),
            "delivery_by_trace": traces}


def verdicts(results: Results, policy: Policy) -> list[Verdict]:
    if policy.max_delivery_p99_ms is None:
        return []
    bound = policy.max_delivery_p99_ms
    seen = results["delivery"]["delivery_by_topic"]
    over = [f"{r['topic']}: p99 {r['p99_ms']} ms over {r['n']} deliveries" for r in seen if r["p99_ms"] > bound]
    if not seen:
        return [Verdict(f"every topic's delivery p99 at most {bound:g} ms", None,
                        f"no topic with {policy.min_latency_n} deliveries seen (min_latency_n)")]
    return [Verdict(f"every topic's delivery p99 at most {bound:g} ms", not over, found(over))]


def plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    rows = tables.get("delivery_by_group", [])
    if not rows:
        return []
    labels = [f"{r['topic']} -> {r['group_id'] or r['client_id']}" for r in rows]
    return [bars("delivery p99 per topic and consumer group (ms)", labels, [r["p99_ms"] for r in rows],
                 "topic -> group (or client)", "p99 (ms)")]


AUDIT = Audit(
    name="delivery", order=108, run=delivery,
    intro=("How long records take end to end: from the Produce request that appended a record (its offset "
           "from the Produce response) to the first Fetch response that returned it to each consumer, "
           "matched by topic, partition and offset; p50/p99 per topic and per topic and consumer group "
           "where enough deliveries were seen; per trace id where records carry one. Both ends must be in "
           "the captures, and a consumer that reads long after the producer wrote shows that wait."),
    verdicts=verdicts,
    plots=plots)
