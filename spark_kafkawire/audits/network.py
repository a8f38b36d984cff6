"""Network: the network or the broker? Round trips and resets per listener and client, and each
API's latency split into the network's round trip and the broker's hold."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .base import CLIENT, CONN, Audit, Policy, Results, Rows, Verdict, ex_time, found, listener
from .plots import stacked

_Q = [0.5, 0.99]


def _links(conns: DataFrame, *keys: str) -> DataFrame:
    """Connections and their handshake round trips, capture sides and resets, per keys."""
    return (conns.groupBy("capture_date", *keys)
            .agg(F.count("*").alias("connections"), F.count("handshake_rtt_ms").alias("round_trips"),
                 F.round(F.min("handshake_rtt_ms"), 3).alias("rtt_min_ms"),
                 F.round(F.percentile("handshake_rtt_ms", 0.5), 3).alias("rtt_p50_ms"),
                 F.round(F.max("handshake_rtt_ms"), 3).alias("rtt_max_ms"),
                 F.array_join(F.array_sort(F.collect_set("capture_side")), ", ").alias("capture_sides"),
                 F.sum("client_resets").alias("client_resets"), F.sum("broker_resets").alias("broker_resets"),
                 F.sum("client_retransmitted_segments").alias("client_retransmitted"),
                 F.sum("broker_retransmitted_segments").alias("broker_retransmitted"),
                 F.sum(F.col("client_retransmitted_bytes") + F.col("broker_retransmitted_bytes")).alias("resent"),
                 F.sum(F.col("client_bytes") + F.col("broker_bytes")).alias("bytes"))
            .withColumn("retransmission_rate", F.when(F.col("bytes") > 0, F.round(F.col("resent") / F.col("bytes"), 6)))
            .drop("resent")
            .orderBy(*keys))


def _split(ex: DataFrame, min_n: int, *keys: str) -> DataFrame:
    """p50/p99 of latency, network and broker time per keys, where n >= min_n."""
    parts = (("lat", "latency"), ("net", "network"), ("brk", "broker"))
    return (ex.groupBy("capture_date", *keys)
            .agg(F.count("*").alias("n"), F.percentile("latency_ms", _Q).alias("lat"),
                 F.percentile("network_ms", _Q).alias("net"), F.percentile("broker_ms", _Q).alias("brk"))
            .where(F.col("n") >= min_n)
            .select("capture_date", *keys, "n",
                    *[F.round(F.col(c)[i], 3).alias(f"{name}_{p}_ms") for c, name in parts
                      for i, p in enumerate(("p50", "p99"))])
            .orderBy(*keys))


def network(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Per listener and per client: connections, their handshake round trips (min, p50, max),
    where the capture point sat, resets by each side, segments each side sent again and the share
    of the bytes they carried (``retransmission_rate``); per API and listener and per API and client:
    p50/p99 of latency, ``network_ms`` and ``broker_ms`` over the exchanges that have both, where
    n >= min_latency_n."""
    conns = (rows.connections.where(F.col("status") == "connection")
             .withColumn("listener", listener()).withColumn("capture_date", F.to_date("first_time")))
    ids = (rows.exchanges.where(F.col("client_id").isNotNull()).groupBy(*CONN)
           .agg(F.first("client_id").alias("client_id")))
    ex = (ex_time(rows.exchanges).where(F.col("broker_ms").isNotNull() & F.col("network_ms").isNotNull())
          .withColumn("listener", listener()))
    return {"network_by_listener": _links(conns, "listener"),
            "network_by_client": _links(conns.join(ids, CONN, "left"), *CLIENT, "listener"),
            "latency_split": _split(ex, policy.min_latency_n, "api_name", "listener"),
            "latency_split_by_client": _split(ex, policy.min_latency_n, "api_name", *CLIENT)}


def verdicts(results: Results, policy: Policy) -> list[Verdict]:
    out = []
    if policy.max_retransmission_rate is not None:
        rate = policy.max_retransmission_rate
        over = [f"{r['listener']}: {r['retransmission_rate']:.2%} of {r['bytes']} bytes sent again"
                for r in results["network"]["network_by_listener"] if (r["retransmission_rate"] or 0) > rate]
        out.append(Verdict(f"no listener's traffic more than {rate:.2%} sent again", not over, found(over)))
    if policy.max_broker_p99_ms is None:
        return out
    return out + _broker_bound(results, policy)


def _broker_bound(results: Results, policy: Policy) -> list[Verdict]:
    bound = policy.max_broker_p99_ms
    assert bound is not None
    seen = results["network"]["latency_split"]
    name = f"every API's broker time p99 at most {bound:g} ms on every listener"
    if not seen:
        return [Verdict(name, None, f"no API with {policy.min_latency_n} exchanges whose round trip the capture "
                                    "shows (min_latency_n; network_ms needs each connection's handshake)")]
    over = [f"{r['api_name']} on {r['listener']}: broker p99 {r['broker_p99_ms']} ms (network p99 "
            f"{r['network_p99_ms']} ms, n {r['n']})" for r in seen if r["broker_p99_ms"] > bound]
    return [Verdict(name, not over, found(over))]


def plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    rows = tables.get("latency_split", [])
    if not rows:
        return []
    labels = [f"{r['api_name']} {r['listener']}" for r in rows]
    return [stacked("median latency split: network and broker (ms)", labels,
                    {"network p50": [r["network_p50_ms"] for r in rows],
                     "broker p50": [r["broker_p50_ms"] for r in rows]}, "API and listener", "ms")]


AUDIT = Audit(
    name="network", order=55, run=network,
    intro=("The network or the broker? Per listener and client: connections, the round trip of their TCP "
           "handshakes (min, median, max), where the capture point sat, resets by each side, and the segments "
           "each side sent again (retransmission_rate: their bytes' share of all); per API and "
           "listener (and client): latency, the network's round trip (network_ms) and the broker's hold "
           "(broker_ms) at p50 and p99, over the exchanges whose connection's handshake the capture shows."),
    verdicts=verdicts,
    plots=plots)
