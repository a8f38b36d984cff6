"""Errors: exchanges whose response carries an error code."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .base import Audit, Policy, Results, Rows, Verdict, ex_time, failed, listener, negotiated
from .plots import timeline


def errors(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Errored exchanges by hour, api, error, topic, client and broker; the top offenders; the
    overall rate. ApiVersions answered UNSUPPORTED_VERSION is version negotiation (the client asks
    again at a version the broker has): counted apart (``negotiated``), never as an error."""
    ex = ex_time(rows.exchanges).where(F.col("api_key").isNotNull())
    bad = ex.where(failed())
    by = (bad.withColumn("hour", F.date_trunc("hour", "time"))
          .withColumn("topic", F.explode_outer("topics"))
          .groupBy("capture_date", "hour", "api_name", "error_name", "topic", "client_id", "client_ip",
                   listener().alias("broker"))
          .agg(F.count("*").alias("exchanges"))
          .orderBy("hour", F.desc("exchanges")))
    top = (bad.groupBy("capture_date", "client_id", "client_ip", "api_name", "error_name")
           .agg(F.count("*").alias("exchanges"), F.min("time").alias("first_seen"), F.max("time").alias("last_seen"))
           .orderBy(F.desc("exchanges")))
    rate = (ex.groupBy("capture_date")
            .agg(F.count("*").alias("exchanges"),
                 F.sum(F.when(failed(), 1).otherwise(0)).alias("errored"),
                 F.sum(F.when(negotiated(), 1).otherwise(0)).alias("negotiated"))
            .withColumn("error_rate", F.col("errored") / F.col("exchanges")))
    return {"errors_by_hour": by, "top_offenders": top, "error_rate": rate}


def plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    per: dict = {}
    for r in tables.get("errors_by_hour", []):
        per[r["hour"]] = per.get(r["hour"], 0) + r["exchanges"]
    return [timeline("errored exchanges per hour", per, dt.timedelta(hours=1), "errored exchanges")] if per else []


def verdicts(results: Results, policy: Policy) -> list[Verdict]:
    if policy.max_error_rate is None:
        return []
    rates = results["errors"]["error_rate"]
    total = sum(r["exchanges"] for r in rates)
    errored = sum(r["errored"] for r in rates)
    rate = errored / total if total else 0.0
    return [Verdict(f"error rate at most {policy.max_error_rate:.2%}", rate <= policy.max_error_rate,
                    f"{errored} of {total} exchanges ({rate:.2%})")]


AUDIT = Audit(
    name="errors", order=40, run=errors,
    intro=('Exchanges whose response carries an error code, by hour, API, error, topic, client and '
           'broker; the top offenders; the error rate per day.'),
    verdicts=verdicts,
    plots=plots)
