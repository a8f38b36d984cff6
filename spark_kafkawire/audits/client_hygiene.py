"""Client hygiene: patterns on the wire that cost a client or the cluster."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..decode.status import COMPLETE
from ..protocol import API_VERSIONS_KEY, KEY, PRODUCE_KEY
from .base import CLIENT, CONN, Audit, Policy, Results, Rows, Verdict, client_software, ex_time, found, refused
from .plots import bars

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
    f = (ex.where((F.col("api_key") == KEY["Fetch"]) & (F.col("status") == COMPLETE)).groupBy("capture_date", *CLIENT)
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
    out = (out.join(client_software(ex), CLIENT, "left")
           .select("capture_date", *CLIENT, "client_software", "finding", "value", "threshold", "evidence",
                   "suggestion")
           .orderBy(order, "client_id", "client_ip")).cache()  # (the summary counts it: computed once)
    summary = (out.groupBy("capture_date", "finding").agg(F.countDistinct(*CLIENT).alias("clients"))
               .orderBy(order))
    return {"hygiene_summary": summary, "client_hygiene": out}


def plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    per: dict[str, int] = {}
    for r in tables.get("hygiene_summary", []):
        per[r["finding"]] = per.get(r["finding"], 0) + r["clients"]
    return [bars("clients per finding", list(per), list(per.values()), "finding", "clients")] if per else []


def verdicts(results: Results, policy: Policy) -> list[Verdict]:
    if not policy.hygiene_fail_on:
        return []
    bad = sorted({f"{r['client_id']}@{r['client_ip']}: {r['finding']}"
                  for r in results["client_hygiene"]["client_hygiene"] if r["finding"] in policy.hygiene_fail_on})
    return [Verdict(f"no client shows {', '.join(policy.hygiene_fail_on)}", not bad,
                    found(bad))]


AUDIT = Audit(
    name="client_hygiene", order=120, run=client_hygiene,
    intro=('Patterns on the wire that cost a client or the cluster: one row per client and finding '
           'with the evidence, the threshold (a policy key) and the setting to change.'),
    verdicts=verdicts,
    plots=plots)
