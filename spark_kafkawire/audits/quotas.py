"""Quotas: which clients the brokers throttle, and how much (the ThrottleTimeMs of their answers)."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .base import CLIENT, Audit, Policy, Results, Rows, Verdict, ex_time, found, listener
from .plots import timeline

#: Kafka's error for a request refused by a controller mutation quota (KIP-599)
QUOTA_EXCEEDED = "THROTTLING_QUOTA_EXCEEDED"


def quotas(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """The clients the brokers throttled or refused: per client, over all its answers that say how
    long the broker throttles it (those whose version has ThrottleTimeMs), how many throttle it
    (more than 0 ms), their share and time, and its requests refused with
    THROTTLING_QUOTA_EXCEEDED; the same per listener and API; per client and minute, the throttled
    answers and their time. Clients never throttled nor refused have no row."""
    ex = (ex_time(rows.exchanges).where(F.col("api_key").isNotNull())
          .withColumn("listener", listener())
          .withColumn("throttled", F.coalesce(F.col("throttle_time_ms") > 0, F.lit(False))))
    said = F.col("throttle_time_ms").isNotNull()
    measures = [F.sum(F.when(said, 1).otherwise(0)).alias("answers"),
                F.sum(F.when(F.col("throttled"), 1).otherwise(0)).alias("throttled"),
                F.sum(F.when(F.col("throttled"), F.col("throttle_time_ms")).otherwise(0)).alias("throttle_ms"),
                F.max("throttle_time_ms").alias("max_throttle_ms"),
                F.sum(F.when(F.col("error_name") == QUOTA_EXCEEDED, 1).otherwise(0)).alias("quota_exceeded")]

    def per(*keys: str) -> DataFrame:
        return (ex.groupBy(*keys).agg(*measures)
                .where((F.col("throttled") > 0) | (F.col("quota_exceeded") > 0))
                .withColumn("throttled_share", F.when(F.col("answers") > 0, F.col("throttled") / F.col("answers")))
                .orderBy(F.desc("throttle_ms"), *keys[1:]))

    minutes = (ex.where(F.col("throttled"))
               .groupBy("capture_date", F.date_trunc("minute", "time").alias("minute"), *CLIENT, "listener")
               .agg(F.count("*").alias("throttled"), F.sum("throttle_time_ms").alias("throttle_ms"))
               .orderBy("minute", *CLIENT))
    return {"throttled_clients": per("capture_date", *CLIENT),
            "throttling": per("capture_date", *CLIENT, "listener", "api_name"), "throttling_by_minute": minutes}


def verdicts(results: Results, policy: Policy) -> list[Verdict]:
    if policy.max_throttled_share is None:
        return []
    bound = policy.max_throttled_share
    per: dict[tuple, list[int]] = {}
    for r in results["quotas"]["throttled_clients"]:  # (over capture dates)
        n = per.setdefault((r["client_id"], r["client_ip"]), [0, 0])
        n[0] += r["answers"]
        n[1] += r["throttled"]
    over = sorted(((t / a, f"{c}@{ip}: {t} of {a} answers throttled ({t / a:.1%})")
                   for (c, ip), (a, t) in per.items() if a and t / a > bound), reverse=True)
    return [Verdict(f"no client throttled on more than {bound:.0%} of its requests", not over,
                    found([text for _, text in over]))]


def plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    per: dict = {}
    for r in tables.get("throttling_by_minute", []):
        per[r["minute"]] = per.get(r["minute"], 0) + (r["throttle_ms"] or 0) / 1000
    return [timeline("time clients were throttled, per minute", per, dt.timedelta(minutes=1),
                     "throttled (s, all clients)")] if per else []


AUDIT = Audit(
    name="quotas", order=65, run=quotas,
    intro=("Which clients the brokers throttle: per client (and per listener and API), the answers that carry "
           "a throttle time, how many throttle (more than 0 ms), their share, the time in all and at most, and "
           "requests refused with THROTTLING_QUOTA_EXCEEDED; per minute, the time clients were throttled. "
           "Clients never throttled have no row."),
    verdicts=verdicts,
    plots=plots)
