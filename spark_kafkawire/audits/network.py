"""Network: the network or the broker? Round trips and resets per listener and client, and each
API's latency split into the network's round trip and the broker's hold."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..protocol import KEY
from .base import CLIENT, CONN, Audit, Policy, Results, Rows, Verdict, ex_time, found, listener
from .plots import lines, stacked

_Q = [0.5, 0.99]


def _links(conns: DataFrame, *keys: str) -> DataFrame:
    """Connections and their handshake round trips, capture sides and resets, per keys. A connection
    read in parts (across the nights of --incremental runs: a row per part) counts once; its parts'
    counts add up."""
    return (conns.groupBy("capture_date", *keys)
            .agg(F.count_distinct(*CONN).alias("connections"),
                 F.count_distinct(F.when(F.col("handshake_rtt_ms").isNotNull(), F.struct(*CONN))).alias("round_trips"),
                 F.round(F.min("handshake_rtt_ms"), 3).alias("rtt_min_ms"),
                 F.round(F.percentile("handshake_rtt_ms", 0.5), 3).alias("rtt_p50_ms"),
                 F.round(F.max("handshake_rtt_ms"), 3).alias("rtt_max_ms"),
                 F.array_join(F.array_sort(F.collect_set("capture_side")), ", ").alias("capture_sides"),
                 F.sum("client_resets").alias("client_resets"), F.sum("broker_resets").alias("broker_resets"),
                 F.sum("client_retransmitted_segments").alias("client_retransmitted"),
                 F.sum("broker_retransmitted_segments").alias("broker_retransmitted"),
                 F.sum("client_out_of_order").alias("client_out_of_order"),
                 F.sum("broker_out_of_order").alias("broker_out_of_order"),
                 F.sum("client_lost_segments").alias("client_lost"), F.sum("broker_lost_segments").alias("broker_lost"),
                 F.sum(F.col("client_data_segments") + F.col("broker_data_segments")).alias("segments"),
                 *[agg for side in ("client", "broker") for agg in _health(side)],
                 F.sum(F.col("client_retransmitted_bytes") + F.col("broker_retransmitted_bytes")).alias("resent"),
                 F.sum(F.col("client_bytes") + F.col("broker_bytes")).alias("bytes"))
            .withColumn("retransmission_rate", F.when(F.col("bytes") > 0, F.round(F.col("resent") / F.col("bytes"), 6)))
            .withColumn("loss_rate", F.when(F.col("segments") > 0, F.round(
                (F.col("client_lost") + F.col("broker_lost")) / F.col("segments"), 6)))
            .drop("resent", "segments")
            .orderBy(*keys))


def _health(side: str) -> list:
    """A side's zero windows (segments and time) and its data-to-ACK round trips (the least, and the
    median of the connections' medians)."""
    return [F.sum(f"{side}_zero_windows").alias(f"{side}_zero_windows"),
            F.round(F.sum(f"{side}_zero_window_ms"), 3).alias(f"{side}_zero_window_ms"),
            F.round(F.min(f"{side}_rtt_min_ms"), 3).alias(f"{side}_data_rtt_min_ms"),
            F.round(F.percentile(f"{side}_rtt_p50_ms", 0.5), 3).alias(f"{side}_data_rtt_p50_ms")]


def _resent_by_minute(exchanges: DataFrame) -> DataFrame:
    """Per listener and minute: exchanges, and the segments of their requests and responses sent
    again (TLS connections' exchanges, whose retransmissions are null, left out)."""
    return (ex_time(exchanges).where(F.col("retransmissions").isNotNull())
            .withColumn("listener", listener())
            .groupBy("capture_date", "listener", F.date_trunc("minute", "time").alias("minute"))
            .agg(F.count("*").alias("exchanges"), F.sum("retransmissions").alias("retransmissions"),
                 F.sum(F.when(F.col("retransmissions") > 0, 1).otherwise(0)).alias("exchanges_with_retransmissions"))
            .orderBy("listener", "minute"))


def _split(ex: DataFrame, min_n: int, *keys: str) -> DataFrame:
    """p50/p99 of latency, network and broker time per keys over the exchanges whose broker time
    was timed (``n``, where n >= min_n); ``broker_untimed``: those left out, where the capture shows
    a loss delayed the response's first arrival (a loss's recovery is not the broker's time)."""
    parts = (("lat", "latency"), ("net", "network"), ("brk", "broker"))
    timed = F.col("broker_ms").isNotNull()
    return (ex.groupBy("capture_date", *keys)
            .agg(F.count(F.when(timed, 1)).alias("n"), F.count(F.when(~timed, 1)).alias("broker_untimed"),
                 F.percentile(F.when(timed, F.col("latency_ms")), _Q).alias("lat"),
                 F.percentile(F.when(timed, F.col("network_ms")), _Q).alias("net"),
                 F.percentile("broker_ms", _Q).alias("brk"),
                 F.percentile("beyond_wait_ms", 0.99).alias("judged"),
                 F.count(F.when(timed & F.col("long_poll"), 1)).alias("long_polls"))
            .where(F.col("n") >= min_n)
            .select("capture_date", *keys, "n", "broker_untimed",
                    *[F.round(F.col(c)[i], 3).alias(f"{name}_{p}_ms") for c, name in parts
                      for i, p in enumerate(("p50", "p99"))],
                    F.round("judged", 3).alias("broker_judged_p99_ms"), "long_polls")
            .orderBy(*keys))


def _beyond_wait(ex: DataFrame) -> DataFrame:
    """``beyond_wait_ms``: the broker time the broker-time policy judges. A Fetch that lets the
    broker wait (MaxWaitMs > 0 and MinBytes > 0: a consumer's long poll, fetch.max.wait.ms) may be
    held up to its MaxWaitMs until MinBytes of records have arrived, by the protocol's contract;
    the capture does not show when records reached the partition, so with records or without,
    only its time beyond MaxWaitMs counts. Every other exchange's is its broker_ms.
    ``long_poll``: such a Fetch, so judged."""
    fetch = F.col("api_key") == KEY["Fetch"]
    wait = F.get_json_object("request", "$.MaxWaitMs").cast("double")
    least = F.coalesce(F.get_json_object("request", "$.MinBytes").cast("double"), F.lit(1.0))
    return (ex.withColumn("long_poll", F.coalesce(fetch & (wait > 0) & (least > 0), F.lit(False)))
            .withColumn("beyond_wait_ms", F.when(F.col("long_poll"), F.greatest(F.col("broker_ms") - wait, F.lit(0.0)))
                        .otherwise(F.col("broker_ms"))))


def network(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Per listener and per client: connections, their handshake round trips (min, p50, max),
    where the capture point sat, resets by each side, segments each side sent again and the share
    of the bytes they carried (``retransmission_rate``), segments out of order, zero windows each
    side advertised and the time at them, each side's data-to-ACK round trips; per listener and
    minute, the segments of exchanges sent again; per API and listener and per API and client:
    p50/p99 of latency, ``network_ms`` and ``broker_ms`` over the exchanges that have both, where
    n >= min_latency_n."""
    conns = (rows.connections.where(F.col("status") == "connection")
             .withColumn("listener", listener()).withColumn("capture_date", F.to_date("first_time")))
    ids = (rows.exchanges.where(F.col("client_id").isNotNull()).groupBy(*CONN)
           .agg(F.first("client_id").alias("client_id")))
    ex = _beyond_wait(ex_time(rows.exchanges).where(F.col("network_ms").isNotNull() & F.col("latency_ms").isNotNull())
                      .withColumn("listener", listener()))
    return {"network_by_listener": _links(conns, "listener"),
            "network_by_client": _links(conns.join(ids, CONN, "left"), *CLIENT, "listener"),
            "latency_split": _split(ex, policy.min_latency_n, "api_name", "listener"),
            "retransmissions_by_minute": _resent_by_minute(rows.exchanges),
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
                                    "shows (min_latency_n; network_ms needs the connection's handshake or ACKs of "
                                    "its data)")]
    over = [f"{r['api_name']} on {r['listener']}: broker p99 {r['broker_judged_p99_ms']} ms"
            + (f" beyond the requests' MaxWaitMs ({r['long_polls']} long polls; "
               f"{r['broker_p99_ms']} ms with them)" if r["long_polls"] else "")
            + f" (network p99 {r['network_p99_ms']} ms, n {r['n']}"
            + (f", {r['broker_untimed']} left out: a loss delayed the response" if r["broker_untimed"] else "") + ")"
            for r in seen if r["broker_judged_p99_ms"] > bound]
    polls = sum(r["long_polls"] or 0 for r in seen if r["api_name"] == "Fetch")
    note = (f"; Fetch judged by its time beyond each request's MaxWaitMs ({polls} long polls: a broker may hold "
            "a Fetch for fetch.max.wait.ms until fetch.min.bytes arrive, by design)") if polls else ""
    detail = found(over)
    return [Verdict(name, not over, detail + note if not over else detail)]


def plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    out = []
    rows = tables.get("latency_split", [])
    if rows:
        labels = [f"{r['api_name']} {r['listener']}" for r in rows]
        out.append(stacked("median latency split: network and broker (ms)", labels,
                           {"network p50": [r["network_p50_ms"] for r in rows],
                            "broker p50": [r["broker_p50_ms"] for r in rows]}, "API and listener", "ms"))
    series: dict[str, dict[dt.datetime, float]] = {}
    for r in tables.get("retransmissions_by_minute", []):
        series.setdefault(r["listener"], {})[r["minute"]] = r["retransmissions"] or 0
    if any(v for points in series.values() for v in points.values()):
        out.append(lines("segments of exchanges sent again, per minute", series, "segments"))
    return out


AUDIT = Audit(
    name="network", order=55, run=network,
    intro=("The network or the broker? Per listener and client: connections, the round trip of their TCP "
           "handshakes (min, median, max), where the capture point sat, resets by each side, and the segments "
           "each side sent again (retransmission_rate: their bytes' share of all), lost on the path (loss_rate: "
           "their share of the segments with payload) or that came out of order, "
           "zero windows each side advertised (a consumer that cannot keep up, a broker overloaded) and the time "
           "at them, and each side's round trips from its data to the other's ACK; per listener and minute, the "
           "segments of exchanges sent again (plotted); per API and "
           "listener (and client): latency, the network's round trip (network_ms) and the broker's hold "
           "(broker_ms) at p50 and p99, over the exchanges whose connection's round trip the capture shows "
           "(its handshake, or the ACKs of its data) and whose response was not delayed by a loss the capture "
           "shows (those are counted apart: a loss's recovery is not the broker's time). broker_judged_p99_ms is "
           "what the broker-time policy judges: a Fetch that lets the broker wait counts only its time beyond "
           "its request's MaxWaitMs (long_polls of them: a broker may hold a Fetch for fetch.max.wait.ms until "
           "fetch.min.bytes of records arrive, by design, and the capture does not show when they arrived)."),
    verdicts=verdicts,
    plots=plots)
