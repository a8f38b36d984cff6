"""What only the wire knows: who writes to and reads from each topic (:func:`lineage`), how far
behind each consumer is (:func:`consumer_lag`, :func:`lag_samples`), and which clients use Kafka in
ways that cost them or the cluster (:func:`client_hygiene`).

Consumers are tied to their groups through the client: a Fetch request names no group, so a
consumer's (client id, address) is matched with the groups that client joined, heartbeated or
committed offsets for (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
TxnOffsetCommit, ConsumerGroupHeartbeat, ShareGroupHeartbeat); where it committed offsets of the
topic it fetched, that group is the one (``group_basis`` says which evidence was used).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ..protocol import API_VERSIONS_KEY, GROUP_ID_APIS, KEY, PRODUCE_KEY, RECORDS_IN_RESPONSE
from .base import Policy, Rows, Verdict, ex_time, refused

CONN = ["capture_file", "client_ip", "client_port", "broker_ip", "broker_port"]
CLIENT = ["client_id", "client_ip"]
#: the findings of client_hygiene, in report order, with what to change
FINDINGS = {
    "small_batches": "linger.ms of 5-100 (and batch.size) so that requests carry batches, not single records",
    "uncompressed": "compression.type=lz4 or zstd",
    "acks0": "acks=all with enable.idempotence=true: with acks=0 a lost write is never known",
    "no_idempotence": "enable.idempotence=true (the broker offers InitProducerId): no duplicates on retry",
    "metadata_storm": "leave metadata.max.age.ms / topic.metadata.refresh.interval.ms at 300000; "
                      "look for a client made anew per request",
    "connection_churn": "keep one long-lived producer or consumer per process instead of one per task",
    "empty_fetches": "fetch.max.wait.ms (librdkafka: fetch.wait.max.ms) of 500 and a fetch.min.bytes: let the "
                     "broker hold the request until there is data",
    "commit_storm": "commit every few seconds (auto.commit.interval.ms) or asynchronously, not per record",
    "large_requests": "requests near max.request.size fail as soon as one grows: split or compress large values, "
                      "or raise max.request.size with the broker's message.max.bytes",
    "removed_versions": "upgrade the client library: the target release rejects these versions",
}


def _software(ex: DataFrame) -> DataFrame:
    """Per connection: the client software its ApiVersions request named."""
    return (ex.where(F.col("client_software_name").isNotNull()).groupBy(*CONN)
            .agg(F.first(F.concat_ws(" ", "client_software_name", "client_software_version")).alias("software")))


def _client_software(ex: DataFrame) -> DataFrame:
    """Per (client id, address): every client software seen, joined."""
    sw = F.concat_ws(" ", "client_software_name", "client_software_version")
    return (ex.where(F.col("client_software_name").isNotNull()).groupBy(*CLIENT)
            .agg(F.array_join(F.array_sort(F.collect_set(sw)), ", ").alias("client_software")))


def _records(parts: DataFrame, keys: tuple[int, ...]) -> DataFrame:
    t = F.coalesce("request_time", "response_time")
    return (parts.where(F.col("api_key").isin(*keys) & F.col("record_count").isNotNull())
            .withColumn("time", t).withColumn("capture_date", F.to_date(t)))


def _with_groups(df: DataFrame, rows: Rows) -> DataFrame:
    """``df`` (with client_id, client_ip, topic) with ``group_id`` and ``group_basis``: the groups
    whose offsets of that topic the client committed, else the groups the client is a member of
    (one row per group), else null."""
    ex = rows.exchanges.where(F.col("api_key").isin(*GROUP_ID_APIS) & F.col("group_id").isNotNull())
    members = ex.select(*CLIENT, "group_id").distinct()
    committed = (rows.partitions.where(F.col("api_key").isin(KEY["OffsetCommit"], KEY["TxnOffsetCommit"])
                                         & F.col("group_id").isNotNull())
                 .select(*CLIENT, "topic", "group_id").distinct())
    by_topic = df.join(committed, [*CLIENT, "topic"], "left")
    known = by_topic.where(F.col("group_id").isNotNull()).withColumn("group_basis", F.lit("offsets committed"))
    rest = (by_topic.where(F.col("group_id").isNull()).drop("group_id").join(members, CLIENT, "left")
            .withColumn("group_basis", F.when(F.col("group_id").isNotNull(), F.lit("membership"))))
    return known.unionByName(rest)


# -- lineage -------------------------------------------------------------------------------------
def lineage(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Per topic, its producers (client id, address, software, records, bytes, first/last seen) and
    its consumers (group where known, client id, address, records fetched); a summary per topic."""
    sw = _software(rows.exchanges)

    def side(keys: tuple[int, ...]) -> DataFrame:
        return (_records(rows.partitions, keys).join(sw, CONN, "left")
                .groupBy("capture_date", "topic", *CLIENT)
                .agg(F.array_join(F.array_sort(F.collect_set("software")), ", ").alias("client_software"),
                     F.sum("record_count").alias("records"), F.sum("record_bytes").alias("bytes"),
                     F.countDistinct(*CONN, "correlation_id").alias("requests"),
                     F.min("time").alias("first_seen"), F.max("time").alias("last_seen")))

    # (cached: the topics table is made from both, and each is a table of its own too)
    producers = side((PRODUCE_KEY,)).orderBy("topic", F.desc("bytes"), *CLIENT).cache()
    consumers = (_with_groups(side(tuple(RECORDS_IN_RESPONSE)), rows)
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


# -- consumer lag --------------------------------------------------------------------------------
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
                     t.alias("time"), *CONN, "client_id", "correlation_id"))
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
    out = _with_groups(out, rows)
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


# -- client hygiene ------------------------------------------------------------------------------
def _finding(df: DataFrame, name: str, value: Column, threshold: float, evidence: Column) -> DataFrame:
    return df.select("capture_date", *CLIENT, F.lit(name).alias("finding"), value.cast("double").alias("value"),
                     F.lit(float(threshold)).alias("threshold"), evidence.alias("evidence"),
                     F.lit(FINDINGS[name]).alias("suggestion"))


def _per_minute_max(ex: DataFrame, keys: tuple[int, ...], what: str) -> DataFrame:
    """Per client and day: the most ``keys`` requests it sent in one minute."""
    return (ex.where(F.col("api_key").isin(*keys)).groupBy("capture_date", *CLIENT, "minute")
            .agg(F.count("*").alias("n")).groupBy("capture_date", *CLIENT)
            .agg(F.max("n").alias(what), F.sum("n").alias("total")))


def client_hygiene(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """One row per (client, finding) for patterns visible on the wire, with the evidence, the
    threshold (a policy key) and the setting to change; a count of clients per finding."""
    ex = (ex_time(rows.exchanges).where(F.col("api_key").isNotNull() & F.col("client_id").isNotNull())
          .withColumn("minute", F.date_trunc("minute", "time")))
    produce = ex.where(F.col("api_key") == PRODUCE_KEY)
    found = []

    # small batches: many Produce requests of a record or two
    p = (produce.groupBy("capture_date", *CLIENT)
         .agg(F.count("*").alias("requests"), F.sum(F.coalesce("record_count", F.lit(0))).alias("records"),
              F.sum(F.coalesce("record_bytes", F.lit(0))).alias("bytes"), F.max("request_size").alias("max_size"),
              F.sum(F.when(F.col("acks") == 0, 1).otherwise(0)).alias("acks0")))
    per_request = F.col("records") / F.col("requests")
    found.append(_finding(
        p.where((F.col("requests") >= policy.hygiene_min_requests) & (per_request < policy.min_records_per_request)),
        "small_batches", per_request, policy.min_records_per_request,
        F.format_string("%d Produce requests: %.2f records and %.0f record bytes per request", "requests",
                        per_request, F.col("bytes") / F.col("requests"))))
    # uncompressed: record bytes in batches without a codec, per minute
    none_only = (F.col("request").contains('"Codec":"none"')
                 & ~F.col("request").rlike('"Codec":"(gzip|snappy|lz4|zstd)"'))
    u = (produce.where(none_only).groupBy("capture_date", *CLIENT, "minute")
         .agg(F.sum(F.coalesce("record_bytes", F.lit(0))).alias("b")).groupBy("capture_date", *CLIENT)
         .agg(F.max("b").alias("per_minute"), F.sum("b").alias("total")))
    found.append(_finding(
        u.where(F.col("per_minute") > policy.max_uncompressed_bytes_per_minute), "uncompressed", F.col("per_minute"),
        policy.max_uncompressed_bytes_per_minute,
        F.format_string("%d uncompressed record bytes in its busiest minute (%d in all)", "per_minute", "total")))
    # acks=0: writes nobody confirms
    found.append(_finding(
        p.where(F.col("acks0") > 0), "acks0", F.col("acks0"), 0,
        F.format_string("%d of %d Produce requests with acks=0", "acks0", "requests")))
    # no idempotence: producer id -1 in every batch to a broker that offers InitProducerId
    init_pid = f'"ApiKey":{KEY["InitProducerId"]},'
    offers = (ex.where((F.col("api_key") == API_VERSIONS_KEY) & F.col("response").contains(init_pid))
              .select("broker_ip", "broker_port").distinct())
    pids = F.regexp_extract_all(F.col("request"), F.lit('"ProducerId":(-?[0-9]+)'), F.lit(1))
    idem = (produce.where(F.coalesce(F.col("acks"), F.lit(-1)) != 0).join(offers, ["broker_ip", "broker_port"])
            .withColumn("pid", F.explode(pids)).groupBy("capture_date", *CLIENT)
            .agg(F.count("*").alias("batches"), F.sum(F.when(F.col("pid") == "-1", 1).otherwise(0)).alias("none")))
    found.append(_finding(
        idem.where(F.col("batches") == F.col("none")), "no_idempotence", F.col("batches"), 0,
        F.format_string("all %d record batches without a producer id (the broker offers InitProducerId)",
                        "batches")))
    # metadata storm, commit storm: requests per minute
    md = _per_minute_max(ex, (KEY["Metadata"],), "per_minute")
    found.append(_finding(
        md.where(F.col("per_minute") > policy.max_metadata_per_minute), "metadata_storm", F.col("per_minute"),
        policy.max_metadata_per_minute,
        F.format_string("%d Metadata requests in its busiest minute (%d in all)", "per_minute", "total")))
    oc = _per_minute_max(ex, (KEY["OffsetCommit"],), "per_minute")
    found.append(_finding(
        oc.where(F.col("per_minute") > policy.max_commits_per_minute), "commit_storm", F.col("per_minute"),
        policy.max_commits_per_minute,
        F.format_string("%d OffsetCommit requests in its busiest minute (%d in all)", "per_minute", "total")))
    # connection churn: connections opened per minute, and ApiVersions per connection
    conns = (ex.groupBy(*CONN).agg(F.min("time").alias("opened"), F.first("client_id").alias("client_id"),
                                   F.sum(F.when(F.col("api_key") == API_VERSIONS_KEY, 1).otherwise(0))
                                   .alias("api_versions"))
             .withColumn("capture_date", F.to_date("opened")).withColumn("minute", F.date_trunc("minute", "opened")))
    ch = (conns.groupBy("capture_date", *CLIENT, "minute")
          .agg(F.count("*").alias("n"), F.sum("api_versions").alias("av")).groupBy("capture_date", *CLIENT)
          .agg(F.max("n").alias("per_minute"), F.sum("n").alias("total"), F.sum("av").alias("av")))
    found.append(_finding(
        ch.where(F.col("per_minute") > policy.max_connections_per_minute), "connection_churn", F.col("per_minute"),
        policy.max_connections_per_minute,
        F.format_string("%d connections opened in its busiest minute (%d in all), %.1f ApiVersions per connection",
                        "per_minute", "total", F.col("av") / F.col("total"))))
    # empty fetches with a short wait
    wait = F.get_json_object("request", "$.MaxWaitMs").cast("double")
    f = (ex.where((F.col("api_key") == KEY["Fetch"]) & (F.col("status") == "complete")).groupBy("capture_date", *CLIENT)
         .agg(F.count("*").alias("fetches"),
              F.sum(F.when(F.coalesce("record_count", F.lit(0)) == 0, 1).otherwise(0)).alias("empty"),
              F.percentile(wait, 0.5).alias("wait")))
    empty = F.col("empty") / F.col("fetches")
    found.append(_finding(
        f.where((F.col("fetches") >= policy.hygiene_min_requests) & (empty > policy.max_empty_fetch_fraction)
                & (F.col("wait") < policy.min_fetch_wait_ms)),
        "empty_fetches", empty, policy.max_empty_fetch_fraction,
        F.format_string("%d of %d Fetch responses empty, the consumer waiting %.0f ms (median MaxWaitMs)",
                        "empty", "fetches", "wait")))
    # requests near max.request.size
    bound = policy.request_size_fraction * policy.max_request_size
    found.append(_finding(
        p.where(F.col("max_size") >= bound), "large_requests", F.col("max_size"), bound,
        F.format_string(f"largest Produce request %d bytes: %.1f%% of max.request.size {policy.max_request_size}",
                        "max_size", F.col("max_size") * 100.0 / policy.max_request_size)))
    # versions the target release removed
    old = (refused(ex, policy.target_release).groupBy("capture_date", *CLIENT)
           .agg(F.count("*").alias("n"),
                F.array_join(F.array_sort(F.collect_set(F.concat("api_name", F.lit(" v"), F.col("api_version")
                                                                   .cast("string")))), ", ").alias("what")))
    found.append(_finding(
        old, "removed_versions", F.col("n"), 0,
        F.concat(F.col("n").cast("string"), F.lit(f" requests at versions Kafka {policy.target_release} rejects: "),
                 F.col("what"))))

    out = found[0]
    for df in found[1:]:
        out = out.unionByName(df)
    order = F.array_position(F.array(*[F.lit(k) for k in FINDINGS]), F.col("finding"))  # report order
    out = (out.join(_client_software(ex), CLIENT, "left")
           .select("capture_date", *CLIENT, "client_software", "finding", "value", "threshold", "evidence",
                   "suggestion")
           .orderBy(order, "client_id", "client_ip")).cache()  # (the summary counts it: computed once)
    summary = (out.groupBy("capture_date", "finding").agg(F.countDistinct(*CLIENT).alias("clients"))
               .orderBy(order))
    return {"hygiene_summary": summary, "client_hygiene": out}


# -- policies ------------------------------------------------------------------------------------
def wire_verdicts(results: dict[str, dict[str, list[dict]]], policy: Policy) -> list[Verdict]:
    """The verdicts of the policies these audits are judged by (only those set)."""
    out = []
    if policy.require_readers and "lineage" in results:
        unread = sorted({r["topic"] for r in results["lineage"]["lineage_topics"] if r["unread"]})
        out.append(Verdict("every topic produced to is read by a consumer", not unread,
                           "unread: " + ", ".join(unread) if unread else "none unread"))
    if "consumer_lag" in results:
        groups = results["consumer_lag"]["lag_by_group"]
        for bound, col, unit in ((policy.max_lag_records, "max_lag", "records"),
                                 (policy.max_lag_seconds, "max_time_lag_s", "s")):
            if bound is None:
                continue
            worst: dict[str, float] = {}
            for r in groups:
                if r[col] is not None and r[col] > bound:
                    worst[r["group"]] = max(worst.get(r["group"], 0), r[col])
            who = "; ".join(f"{g}: {v:g} {unit}" for g, v in sorted(worst.items(), key=lambda kv: -kv[1])[:20])
            out.append(Verdict(f"no consumer more than {bound:g} {unit} behind", not worst, who or "none seen"))
    if policy.hygiene_fail_on and "client_hygiene" in results:
        bad = sorted({f"{r['client_id']}@{r['client_ip']}: {r['finding']}"
                      for r in results["client_hygiene"]["client_hygiene"] if r["finding"] in policy.hygiene_fail_on})
        out.append(Verdict(f"no client shows {', '.join(policy.hygiene_fail_on)}", not bad,
                           "; ".join(bad[:20]) + (f" and {len(bad) - 20} more" if len(bad) > 20 else "") if bad
                           else "none seen"))
    return out
