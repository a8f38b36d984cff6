"""Latency: response time of complete exchanges."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..decode.status import COMPLETE
from .base import Audit, Policy, Results, Rows, Verdict, ex_time, listener
from .plots import bars

HIST_EDGES_MS = [0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000, 3000, 10000]  # histogram bucket upper bounds


def latency(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """p50/p95/p99/max per api, per api and broker, per api and client, where n >= min_latency_n
    (n shown); a histogram per api; the slowest exchanges."""
    ex = ex_time(rows.exchanges).where((F.col("status") == COMPLETE) & F.col("latency_ms").isNotNull())
    ex = ex.withColumn("broker", listener())
    q = F.percentile("latency_ms", [0.5, 0.95, 0.99])

    def per(*keys):
        return (ex.groupBy("capture_date", *keys)
                .agg(F.count("*").alias("n"), q.alias("q"), F.max("latency_ms").alias("max_ms"))
                .where(F.col("n") >= policy.min_latency_n)
                .select("capture_date", *keys, "n", *[F.round(F.col("q")[i], 3).alias(name) for i, name in
                                                      enumerate(("p50_ms", "p95_ms", "p99_ms"))],
                        F.round("max_ms", 3).alias("max_ms"))
                .orderBy(*keys))

    bucket = F.lit(len(HIST_EDGES_MS))
    for i, edge in reversed(list(enumerate(HIST_EDGES_MS))):
        bucket = F.when(F.col("latency_ms") <= edge, F.lit(i)).otherwise(bucket)
    hist = (ex.withColumn("bucket", bucket).groupBy("capture_date", "api_name", "bucket")
            .agg(F.count("*").alias("exchanges")).orderBy("api_name", "bucket"))
    slowest = (ex.orderBy(F.desc("latency_ms")).limit(20)
               .select("capture_date", "time", "api_name", "api_version", "client_id", "client_ip", "broker",
                       "latency_ms", "request_size", "response_size", "capture_file"))
    return {"latency_by_api": per("api_name"), "latency_by_broker": per("api_name", "broker"),
            "latency_by_client": per("api_name", "client_id"), "latency_histogram": hist,
            "slowest": slowest}


def plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    """A histogram per api that has enough exchanges to show a shape."""
    out = []
    hist = tables.get("latency_histogram", [])
    labels = [f"≤{e:g}" for e in HIST_EDGES_MS] + [f">{HIST_EDGES_MS[-1]:g}"]
    for api in sorted({r["api_name"] for r in hist if r["api_name"]}):
        counts = [0] * len(labels)
        for r in hist:
            if r["api_name"] == api:
                counts[r["bucket"]] += r["exchanges"]
        if sum(counts) >= min_n:
            out.append(bars(f"{api}: {sum(counts)} exchanges by latency", labels, counts,
                            "latency (ms, bucket's upper bound)", "exchanges"))
    return out


def verdicts(results: Results, policy: Policy) -> list[Verdict]:
    out = []
    for api, bound in sorted(policy.max_p99_ms.items()):
        seen = [r for r in results["latency"]["latency_by_api"] if r["api_name"] == api]
        worst = max((r["p99_ms"] for r in seen), default=None)
        out.append(Verdict(f"{api} p99 at most {bound:g} ms", None if worst is None else worst <= bound,
                           f"p99 {worst} ms" if worst is not None else
                           f"fewer than {policy.min_latency_n} timed {api} exchanges (min_latency_n)"))
    return out


AUDIT = Audit(
    name="latency", order=50, run=latency,
    intro=('Response time of complete exchanges: percentiles per API, broker and client where n is '
           'large enough to mean it, a histogram per API, and the slowest exchanges. Fetch waits up '
           "to the consumer's fetch.max.wait.ms by design."),
    verdicts=verdicts,
    plots=plots)
