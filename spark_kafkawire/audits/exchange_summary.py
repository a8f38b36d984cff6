"""The summary the first job printed: per API and client, exchanges, errors, latency and requests left
unanswered."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import figures
from .base import Audit, Policy, Rows, condition, count_of, ex_time


def exchange_summary(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Per api and client: exchanges, errors, p50/p99 latency (where n >= min_latency_n),
    unanswered requests; the busiest first. request_missing rows (a response whose request was
    not captured) count under their api when the response shows it."""
    ex = ex_time(rows.exchanges).where(condition(figures.SUMMARISED))
    timed = count_of(figures.TIMED)
    measures = []
    for name, what in figures.SUMMARY:
        if isinstance(what, float):  # a latency percentile, where enough exchanges were timed
            measures.append(F.when(timed >= policy.min_latency_n, F.round(F.percentile("latency_ms", what), 3))
                            .alias(name))
        else:
            measures.append((F.count("*") if what is None else count_of(what)).alias(name))
    out = (ex.groupBy("capture_date", F.coalesce("api_name", F.lit(figures.NOT_CAPTURED)).alias("api_name"),
                      "client_id")
           .agg(*measures)
           .orderBy(F.desc("exchanges"), "api_name", "client_id"))
    return {"exchange_summary": out}


AUDIT = Audit(
    name="exchange_summary", order=10, run=exchange_summary,
    intro=('Per API and client: exchanges, errors, latency percentiles (only where at least the '
           'minimum number of exchanges were timed) and requests left unanswered.'))
