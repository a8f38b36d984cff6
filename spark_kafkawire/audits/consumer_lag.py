"""Consumer lag: how far behind each consumer is, from its own Fetch requests."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ..protocol import KEY, PRODUCE_KEY
from .base import CLIENT, CONN, Audit, Policy, Results, Rows, Verdict, found, with_groups
from .plots import lines


def _ms(later: str, earlier: str) -> Column:
    """Milliseconds from timestamp column ``earlier`` to ``later``."""
    return F.round((F.col(later).cast("double") - F.col(earlier).cast("double")) * 1000.0, 3)


def lag_samples(rows: Rows) -> DataFrame:
    """One row per partition of every answered Fetch: the offset the consumer asked for, the high
    watermark and last stable offset in the answer, the records it got, ``lag`` (high watermark
    minus fetch offset, in records) and ``time_lag_ms``: how long ago the record at the consumer's
    position was appended, where a Produce request of this capture shows it (0 when caught up)."""
    t = F.coalesce("response_time", "request_time")
    fetch = (rows.partitions.where((F.col("api_key") == KEY["Fetch"]) & (F.col("offset") >= 0)
                                   & (F.col("high_watermark") >= 0)
                                   & (F.coalesce(F.col("error_code"), F.lit(0)) == 0))
             .select(F.col("topic"), F.col("partition"), F.col("offset").alias("fetch_offset"),
                     "high_watermark", "last_stable_offset", F.col("record_count").alias("records_returned"),
                     t.alias("time"), *CONN, "capture_file", "client_id", "correlation_id"))
    appended = (rows.partitions.where((F.col("api_key") == PRODUCE_KEY) & (F.col("offset") >= 0)
                                      & (F.col("record_count") > 0)
                                      & (F.coalesce(F.col("error_code"), F.lit(0)) == 0))
                .select("topic", "partition", F.col("offset").alias("at"),
                        F.struct((F.col("offset") + F.col("record_count")).alias("end"),
                                 F.coalesce("request_time", "response_time").alias("time")).alias("append")))
    # as-of join: each fetch offset takes the last append at or below it (appends first at equal offsets)
    both = (fetch.withColumn("at", F.col("fetch_offset")).withColumn("kind", F.lit(1))
            .withColumn("append", F.lit(None).cast(appended.schema["append"].dataType))
            .unionByName(appended.withColumn("kind", F.lit(0)), allowMissingColumns=True))
    w = (Window.partitionBy("topic", "partition").orderBy("at", "kind")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    lag = F.greatest(F.col("high_watermark") - F.col("fetch_offset"), F.lit(0))
    found = F.col("prev.end") > F.col("fetch_offset")
    out = (both.withColumn("prev", F.last("append", ignorenulls=True).over(w)).where(F.col("kind") == 1)
           .withColumn("lag", lag)
           .withColumn("time_lag_ms", F.when(F.col("lag") == 0, F.lit(0.0))
                       .when(found, F.greatest(_ms("time", "prev.time"), F.lit(0.0))))
           .withColumn("appended_at", F.when(found & (F.col("lag") > 0), F.col("prev.time")))
           .withColumn("capture_date", F.to_date("time")))
    out = with_groups(out, rows)
    return out.select("capture_date", "time", "group_id", "group_basis", *CLIENT, "client_port", "broker_ip",
                      "broker_port", "topic", "partition", "fetch_offset", "high_watermark", "last_stable_offset",
                      "records_returned", "lag", "time_lag_ms", "appended_at", "capture_file")


def _group_name() -> Column:
    return F.coalesce(F.col("group_id"), F.concat(F.col("client_id"), F.lit(" (no group)")))


def consumer_lag(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Per consumer, topic, partition and minute: fetches, the largest and the latest lag (records
    behind the high watermark) and time lag; per group and minute: the largest and p95 lag over
    its partitions' fetches. ``lag_samples`` has every fetch."""
    s = lag_samples(rows).withColumn("minute", F.date_trunc("minute", "time"))
    latest = F.struct("time", "lag", "fetch_offset", "high_watermark")
    per = (s.groupBy("capture_date", "minute", "group_id", *CLIENT, "topic", "partition")
           .agg(F.count("*").alias("fetches"), F.max("lag").alias("max_lag"),
                F.max(latest).alias("last"), F.max("time_lag_ms").alias("max_time_lag_ms"))
           .select("capture_date", "minute", "group_id", *CLIENT, "topic", "partition", "fetches", "max_lag",
                   F.col("last.lag").alias("last_lag"), F.col("last.fetch_offset").alias("last_fetch_offset"),
                   F.col("last.high_watermark").alias("last_high_watermark"), "max_time_lag_ms")
           .orderBy("minute", "group_id", "client_id", "topic", "partition"))
    by_group = (s.withColumn("group", _group_name())
                .groupBy("capture_date", "minute", "group")
                .agg(F.count("*").alias("fetches"), F.countDistinct("topic", "partition").alias("partitions"),
                     F.max("lag").alias("max_lag"),
                     F.percentile(F.col("lag").cast("double"), 0.95).alias("p95_lag"),
                     F.round(F.max("time_lag_ms") / 1000.0, 3).alias("max_time_lag_s"))
                .orderBy("group", "minute"))
    return {"lag_by_group": by_group, "consumer_lag": per}


def plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    out = []
    rows = tables.get("lag_by_group", [])
    most: dict[str, float] = {}
    for r in rows:
        most[r["group"]] = max(most.get(r["group"], 0), r["max_lag"] or 0)
    worst = sorted(most, key=lambda g: (-most[g], g))[:8]
    for col, what in (("max_lag", "largest"), ("p95_lag", "95th percentile")):
        series = {g: {r["minute"]: r[col] for r in rows if r["group"] == g and r[col] is not None} for g in worst}
        if any(series.values()):
            out.append(lines(f"lag per minute, {what} over the group's fetches", series, "records behind"))
    return out


def verdicts(results: Results, policy: Policy) -> list[Verdict]:
    out = []
    groups = results["consumer_lag"]["lag_by_group"]
    for bound, col, unit in ((policy.max_lag_records, "max_lag", "records"),
                             (policy.max_lag_seconds, "max_time_lag_s", "s")):
        if bound is None:
            continue
        worst: dict[str, float] = {}
        for r in groups:
            if r[col] is not None and r[col] > bound:
                worst[r["group"]] = max(worst.get(r["group"], 0), r[col])
        who = [f"{g}: {v:g} {unit}" for g, v in sorted(worst.items(), key=lambda kv: -kv[1])]
        out.append(Verdict(f"no consumer more than {bound:g} {unit} behind", not worst, found(who)))
    return out


AUDIT = Audit(
    name="consumer_lag", order=110, run=consumer_lag,
    intro=('How far behind each consumer is, from its own Fetch requests: the high watermark in the '
           'answer minus the offset it asked for (records), and how long ago the record at its '
           'position was appended where the capture holds that Produce request. Per group and minute '
           "the largest and the 95th percentile over its partitions' fetches."),
    verdicts=verdicts,
    plots=plots)
