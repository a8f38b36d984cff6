"""The audits people schedule, as functions from kafkawire's rows (Spark DataFrames) to result
DataFrames. ``jobs/audit.py`` runs them, writes the results as Parquet and a report.

Each audit takes :class:`Rows` (the exchanges, connections and partitions rows of the same
captures) and returns ``{table name: DataFrame}``; every table has a ``capture_date`` column
(UTC date of the traffic), by which the job partitions what it writes. :data:`AUDITS` lists them
in report order; :func:`policies` checks the results against :class:`Policy`.
"""

from __future__ import annotations

from typing import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import protocol
from ..protocol import GROUP_MEMBERSHIP_APIS, KEY, RECORDS_IN_REQUEST, RECORDS_IN_RESPONSE
from ..protocol import SASL_APIS as SASL
from .base import Policy, Rows, Verdict, exit_status, refused
from .base import ex_time as _ex_time
from .base import listener as _listener
from .wire import client_hygiene, consumer_lag, lineage, wire_verdicts

__all__ = ["AUDITS", "Policy", "Rows", "Verdict", "exit_status", "failed", "negotiated", "policies"]


# -- upgrade readiness ---------------------------------------------------------------------------
def upgrade_readiness(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """For the target release (policy ``target_release``), every client (id, address, software) and
    (api, version) it sent that the release does not accept, why (``refusal``: removed, newer,
    absent), with exchange counts and first/last seen."""
    hit = refused(_ex_time(rows.exchanges), policy.target_release)
    keys = ["release", "capture_date", "client_id", "client_ip", "client_software_name", "client_software_version",
            "api_key", "api_name", "api_version", "refusal"]
    out = (hit.groupBy(*keys)
           .agg(F.count("*").alias("exchanges"), F.min("time").alias("first_seen"), F.max("time").alias("last_seen"))
           .orderBy("release", "client_id", "client_ip", "api_key", "api_version"))
    return {"upgrade_readiness": out}


# -- clients -------------------------------------------------------------------------------------
def clients(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Inventory per client id and address: software, APIs and versions, SASL logins, traffic."""
    ex = _ex_time(rows.exchanges).where(F.col("api_key").isNotNull())
    api_v = F.concat(F.col("api_name"), F.lit(" v"), F.col("api_version").cast("string"))
    out = (ex.groupBy("capture_date", "client_id", "client_ip")
           .agg(F.array_join(F.array_sort(F.collect_set("client_software_name")), ", ").alias("software_name"),
                F.array_join(F.array_sort(F.collect_set("client_software_version")), ", ").alias("software_version"),
                F.array_sort(F.collect_set(api_v)).alias("apis"),
                F.array_join(F.array_sort(F.collect_set("sasl_mechanism")), ", ").alias("sasl_mechanism"),
                F.array_join(F.array_sort(F.collect_set("sasl_user")), ", ").alias("sasl_user"),
                F.countDistinct("client_port", "broker_ip", "broker_port").alias("connections"),
                F.count("*").alias("exchanges"),
                F.sum(F.coalesce("request_size", F.lit(0))).alias("request_bytes"),
                F.sum(F.coalesce("response_size", F.lit(0))).alias("response_bytes"),
                F.min("time").alias("first_seen"), F.max("time").alias("last_seen"))
           .orderBy(F.desc("exchanges")))
    return {"clients": out}


# -- errors --------------------------------------------------------------------------------------
def negotiated() -> F.Column:
    """An answer that is version negotiation (protocol.NEGOTIATION), not a failure."""
    cond = F.lit(False)
    for key, code in sorted(protocol.NEGOTIATION):
        cond = cond | ((F.col("api_key") == key) & (F.col("error_code") == code))
    return F.coalesce(cond, F.lit(False))


def failed() -> F.Column:
    """An errored exchange: an error code other than 0, and not version negotiation (the one rule
    the audits, the notebook and ``kafkawire summary`` count errors by)."""
    return F.col("error_code").isNotNull() & (F.col("error_code") != 0) & ~negotiated()


def errors(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Errored exchanges by hour, api, error, topic, client and broker; the top offenders; the
    overall rate. ApiVersions answered UNSUPPORTED_VERSION is version negotiation (the client asks
    again at a version the broker has): counted apart (``negotiated``), never as an error."""
    ex = _ex_time(rows.exchanges).where(F.col("api_key").isNotNull())
    bad = ex.where(failed())
    by = (bad.withColumn("hour", F.date_trunc("hour", "time"))
          .withColumn("topic", F.explode_outer("topics"))
          .groupBy("capture_date", "hour", "api_name", "error_name", "topic", "client_id", "client_ip",
                   _listener().alias("broker"))
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


# -- latency -------------------------------------------------------------------------------------
HIST_EDGES_MS = [0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000, 3000, 10000]  # histogram bucket upper bounds


def latency(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """p50/p95/p99/max per api, per api and broker, per api and client, where n >= min_latency_n
    (n shown); a histogram per api; the slowest exchanges."""
    ex = _ex_time(rows.exchanges).where((F.col("status") == "complete") & F.col("latency_ms").isNotNull())
    ex = ex.withColumn("broker", _listener())
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


# -- throughput ----------------------------------------------------------------------------------
def throughput(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Produce and Fetch (and ShareFetch) records and bytes per topic, client and minute; codecs per
    client. Direction ``produce`` is records in requests, ``fetch`` records in responses."""
    carrying = sorted(RECORDS_IN_REQUEST | RECORDS_IN_RESPONSE)
    produced = F.col("api_key").isin(*RECORDS_IN_REQUEST)
    p = rows.partitions.where(F.col("api_key").isin(*carrying) & F.col("record_count").isNotNull())
    t = F.coalesce("request_time", "response_time")
    out = (p.withColumn("minute", F.date_trunc("minute", t)).withColumn("capture_date", F.to_date(t))
           .withColumn("direction", F.when(produced, "produce").otherwise("fetch"))
           .groupBy("capture_date", "minute", "direction", "topic", "client_id")
           .agg(F.sum("record_count").alias("records"), F.sum("record_bytes").alias("bytes"))
           .orderBy("minute", "direction", "topic", "client_id"))
    ex = _ex_time(rows.exchanges).where(F.col("api_key").isin(*carrying))
    body = F.when(produced, F.col("request")).otherwise(F.col("response"))
    codecs = (ex.withColumn("codec", F.explode(F.regexp_extract_all(body, F.lit('"Codec":"([a-z0-9]+)"'), F.lit(1))))
              .withColumn("direction", F.when(produced, "produce").otherwise("fetch"))
              .groupBy("capture_date", "direction", "client_id", "codec").agg(F.count("*").alias("batches"))
              .orderBy("direction", "client_id", "codec"))
    return {"throughput": out, "codecs": codecs}


# -- consumer groups -----------------------------------------------------------------------------
#: the group_churn columns, in order
MEMBERSHIP: list[str] = [protocol.API_NAMES[k] for k in GROUP_MEMBERSHIP_APIS]


def groups(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Consumer-group churn: Join/Sync/Leave/Heartbeat per group and member, rebalances (new
    generations) per hour, heartbeat errors."""
    ex = _ex_time(rows.exchanges).where(F.col("api_key").isin(*GROUP_MEMBERSHIP_APIS) & F.col("group_id").isNotNull())
    churn = (ex.groupBy("capture_date", "group_id", "member_id")
             .pivot("api_name", list[bool | float | int | str](MEMBERSHIP)).agg(F.count(F.lit(1)))
             .na.fill(0, MEMBERSHIP)
             .orderBy("group_id", "member_id"))
    gen = F.get_json_object("response", "$.GenerationId").cast("int")
    rebal = (ex.where((F.col("api_key") == KEY["JoinGroup"]) & gen.isNotNull() & (gen >= 0))
             .withColumn("hour", F.date_trunc("hour", "time"))
             .groupBy("capture_date", "group_id", "hour")
             .agg(F.countDistinct(gen).alias("rebalances"), F.count("*").alias("join_groups"))
             .orderBy("group_id", "hour"))
    hb = (ex.where(F.col("api_key").isin(KEY["JoinGroup"], KEY["Heartbeat"], KEY["SyncGroup"])
                 & F.col("error_code").isNotNull() & (F.col("error_code") != 0))
          .groupBy("capture_date", "group_id", "api_name", "error_name").agg(F.count("*").alias("exchanges"))
          .orderBy("group_id", F.desc("exchanges")))
    return {"group_churn": churn, "rebalances": rebal, "group_errors": hb}


# -- security ------------------------------------------------------------------------------------
def security(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """SASL mechanisms per listener; SASL PLAIN on connections that are not TLS (credentials
    readable on the wire: flagged, never stored); clients that never authenticate on a listener
    where others do."""
    ex = (_ex_time(rows.exchanges).where(F.col("api_key").isNotNull() | (F.col("status") == "sasl_token"))
          .withColumn("listener", _listener()))
    conn_keys = ["capture_file", "client_ip", "client_port", "listener"]
    # credentials on the wire: a SaslAuthenticate request, or a raw token after SaslHandshake v0
    sent = (F.col("api_key") == protocol.SASL_AUTHENTICATE_KEY) | (F.col("status") == "sasl_token")
    per_conn = (ex.groupBy("capture_date", *conn_keys)
                .agg(F.max("sasl_mechanism").alias("sasl_mechanism"), F.max("sasl_user").alias("sasl_user"),
                     F.max("client_id").alias("client_id"),
                     F.max(F.coalesce(sent, F.lit(False))).alias("credentials_sent"),
                     F.array_sort(F.collect_set("api_name")).alias("apis"),
                     # a login's outcome: SaslHandshake or SaslAuthenticate answered with an error
                     # failed; SaslAuthenticate answered without one, or raw tokens (SaslHandshake v0)
                     # followed by other Kafka requests, succeeded
                     F.max(F.coalesce(F.col("api_key").isin(*SASL) & (F.col("error_code") != 0), F.lit(False)))
                     .alias("login_failed"),
                     F.max(F.coalesce((F.col("api_key") == protocol.SASL_AUTHENTICATE_KEY) & (F.col("error_code") == 0),
                                      F.lit(False)))
                     .alias("login_answered"),
                     F.max(F.col("status") == "sasl_token").alias("raw_tokens"),
                     F.max(F.coalesce(~F.col("api_key").isin(*SASL, protocol.API_VERSIONS_KEY), F.lit(False)))
                     .alias("other_requests")))
    succeeded = ~F.col("login_failed") & (F.col("login_answered") | (F.col("raw_tokens") & F.col("other_requests")))
    mech = (per_conn.groupBy("capture_date", "listener")
            .agg(F.array_sort(F.collect_set("sasl_mechanism")).alias("sasl_mechanisms"),
                 F.count("*").alias("kafka_connections"),
                 F.sum(F.when(F.col("sasl_mechanism").isNotNull(), 1).otherwise(0)).alias("login_attempts"),
                 F.sum(F.when(F.col("sasl_mechanism").isNotNull() & succeeded, 1).otherwise(0)).alias("authenticated"),
                 F.sum(F.when(F.col("login_failed"), 1).otherwise(0)).alias("failed_logins"))
            .orderBy("listener"))
    conns = rows.connections.withColumn("listener", _listener()).withColumn("capture_date", F.to_date("first_time"))
    tls_conns = conns.where(F.col("protocol") == "tls")
    tls = tls_conns.groupBy("capture_date", "listener").agg(F.count("*").alias("tls_connections"))
    mech = mech.join(tls, ["capture_date", "listener"], "full").na.fill(
        0, ["tls_connections", "kafka_connections", "login_attempts", "authenticated", "failed_logins"])
    # a PLAIN login is readable on the wire where the connection is not TLS (a TLS connection is
    # decoded as Kafka too where its key log was given), once credentials were sent (a handshake the
    # broker never answered, with no token after it, is not)
    encrypted = tls_conns.select("capture_file", "client_ip", "client_port", "listener").distinct()
    plain = (per_conn.where((F.col("sasl_mechanism") == "PLAIN") & F.col("credentials_sent"))
             .join(encrypted, ["capture_file", "client_ip", "client_port", "listener"], "left_anti")
             .groupBy("capture_date", "listener", "client_ip", "client_id", "sasl_user")
             .agg(F.count("*").alias("connections"))
             .orderBy("listener", "client_ip"))
    with_auth = per_conn.where(F.col("sasl_mechanism").isNotNull()).select("capture_date", "listener").distinct()
    unauth = (per_conn.where(F.col("sasl_mechanism").isNull())
              .join(with_auth, ["capture_date", "listener"])
              .groupBy("capture_date", "listener", "client_ip", "client_id")
              .agg(F.count("*").alias("connections"), F.array_sort(F.array_distinct(F.flatten(F.collect_list("apis"))))
                   .alias("apis"))
              .orderBy("listener", "client_ip"))
    # TLS: versions and suites per client and listener, weak ones flagged
    weak = F.col("tls_version").isin("SSL 3.0", "TLS 1.0", "TLS 1.1") | \
        ~(F.col("tls_cipher").contains("GCM") | F.col("tls_cipher").contains("CHACHA20") |
          F.col("tls_cipher").contains("CCM"))
    tls_versions = (tls_conns.groupBy("capture_date", "listener", "client_ip", "tls_version", "tls_cipher", "tls_ja3")
                    .agg(F.count("*").alias("connections"))
                    .withColumn("weak", F.coalesce(weak, F.lit(False)))
                    .orderBy("listener", "client_ip", "tls_version"))
    certs = (tls_conns.where(F.col("tls_cert_not_after").isNotNull())
             .groupBy("capture_date", "listener", "tls_cert_subject", "tls_cert_issuer", "tls_cert_not_after")
             .agg(F.count("*").alias("connections"))
             .withColumn("days_left", F.datediff(F.to_date("tls_cert_not_after"), F.current_date()))
             .withColumn("expiring", F.col("days_left") < F.lit(policy.min_certificate_days))
             .orderBy("days_left"))
    # clients that use TLS somewhere and also talk plaintext Kafka to a listener
    by_client = conns.where(F.col("protocol").isin("tls", "kafka")).groupBy("capture_date", "client_ip") \
        .agg(F.collect_set("protocol").alias("protocols"))
    both = by_client.where(F.array_contains("protocols", "tls") & F.array_contains("protocols", "kafka"))
    mixed = (conns.where(F.col("protocol") == "kafka").join(both.select("capture_date", "client_ip"),
                                                            ["capture_date", "client_ip"])
             .groupBy("capture_date", "client_ip", "listener").agg(F.count("*").alias("plaintext_connections"))
             .orderBy("client_ip", "listener"))
    return {"sasl_mechanisms": mech, "plain_without_tls": plain, "unauthenticated": unauth,
            "tls_versions": tls_versions, "certificates": certs, "plaintext_beside_tls": mixed}



def _directions(what: str) -> F.Column:
    """A per-direction count of the connection rows, client's and broker's added (nulls as 0)."""
    return F.expr(f"coalesce(client_{what}, 0) + coalesce(broker_{what}, 0)")  # one call to Spark, not eight


# -- capture health ------------------------------------------------------------------------------
def capture_health(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Per file and connection: bytes lost, resyncs, skipped bytes, damage, unanswered requests:
    how far each other audit can be trusted."""
    c = rows.connections.withColumn("capture_date", F.to_date(F.coalesce("first_time", "last_time")))
    conn = c.select("capture_date", "capture_file", "client_ip", "client_port", "broker_ip", "broker_port",
                    "protocol", "start_captured", "end_captured", "status",
                    _directions("bytes").alias("bytes"), _directions("gap_bytes").alias("gap_bytes"),
                    _directions("gaps").alias("gaps"), _directions("resyncs").alias("resyncs"),
                    _directions("skipped_bytes").alias("skipped_bytes"),
                    _directions("partial_frames").alias("partial_frames"))
    ex = _ex_time(rows.exchanges)
    per_file_ex = (ex.groupBy("capture_file")
                   .agg(F.sum(F.when(F.col("status") == "no_response", 1).otherwise(0)).alias("unanswered"),
                        F.sum(F.when(F.col("status") == "request_missing", 1).otherwise(0)).alias("request_missing"),
                        F.sum(F.when(F.col("status").isin("truncated", "malformed", "undecoded"), 1).otherwise(0))
                        .alias("damaged_exchanges"),
                        F.max(F.when(F.col("status") == "capture_damaged", F.col("detail"))).alias("file_damage"),
                        F.count("*").alias("exchanges")))
    files = (conn.where(F.col("status") == "connection").groupBy("capture_file")
             .agg(F.min("capture_date").alias("capture_date"), F.count("*").alias("connections"),
                  F.sum("bytes").alias("bytes"), F.sum("gap_bytes").alias("gap_bytes"), F.sum("gaps").alias("gaps"),
                  F.sum("resyncs").alias("resyncs"), F.sum("skipped_bytes").alias("skipped_bytes"),
                  F.sum(F.when(~F.col("start_captured"), 1).otherwise(0)).alias("started_before_capture"))
             .join(per_file_ex, "capture_file", "full")
             .withColumn("gap_fraction", F.col("gap_bytes") / (F.col("bytes") + F.col("gap_bytes")))
             .orderBy("capture_file"))
    damaged_conns = (conn.where((F.col("gaps") > 0) | (F.col("resyncs") > 0) | (F.col("skipped_bytes") > 0))
                     .orderBy(F.desc("gap_bytes")))
    return {"coverage": coverage(rows), "capture_files": files, "damaged_connections": damaged_conns}


def coverage(rows: Rows) -> DataFrame:
    """Per Kafka listener (a broker address and port with Kafka or TLS connections): how much of
    its traffic was decoded, the evidence every verdict rests on (see judge). ``bytes`` captured;
    ``lost_bytes`` by the capture (gaps); ``skipped_bytes`` captured but in no Kafka frame (plaintext
    connections, and connections of no protocol recognised); ``tls_undecrypted_bytes`` of TLS
    connections not decrypted (``tls_not_decrypted`` of them); ``started_before_capture``
    connections; ``undecoded_fraction`` = (lost + skipped + undecrypted) / (bytes + lost), and
    ``plaintext_undecoded_fraction`` the same over the connections that are not TLS."""
    c = rows.connections.where(F.col("status") == "connection").withColumn("listener", _listener())
    tls = F.col("protocol") == "tls"
    lost = F.when(tls, _directions("tls_gap_bytes")).otherwise(_directions("gap_bytes"))
    skipped = F.when(tls, F.lit(0)).otherwise(_directions("skipped_bytes"))
    undecrypted = F.when(tls, F.coalesce("tls_undecrypted_bytes", F.lit(0))).otherwise(0)
    not_decrypted = tls & ((F.col("tls_undecrypted_bytes") > 0) | (F.coalesce("tls_decrypted_bytes", F.lit(0)) == 0))
    per = (c.groupBy("listener")
           .agg(F.min(F.to_date(F.coalesce("first_time", "last_time"))).alias("capture_date"),
                F.count("*").alias("connections"),
                F.sum(F.when(F.col("protocol") == "kafka", 1).otherwise(0)).alias("kafka_connections"),
                F.sum(F.when(tls, 1).otherwise(0)).alias("tls_connections"),
                F.sum(F.when(not_decrypted, 1).otherwise(0)).alias("tls_not_decrypted"),
                F.sum(F.when(tls & F.col("tls_version").isNull(), 1).otherwise(0)).alias("tls_version_unknown"),
                F.sum(F.when(tls & F.col("tls_cert_subject").isNull() & (F.col("tls_version") != "TLS 1.2"), 1)
                      .otherwise(0)).alias("certificates_hidden"),
                F.sum(F.when(~F.col("start_captured"), 1).otherwise(0)).alias("started_before_capture"),
                F.sum(_directions("bytes")).alias("bytes"), F.sum(lost).alias("lost_bytes"),
                F.sum(skipped).alias("skipped_bytes"), F.sum(undecrypted).alias("tls_undecrypted_bytes"),
                F.sum(F.when(~tls, _directions("bytes")).otherwise(0)).alias("plaintext_bytes"),
                F.sum(F.when(~tls, lost + skipped).otherwise(0)).alias("plaintext_undecoded_bytes"))
           .where((F.col("kafka_connections") > 0) | (F.col("tls_connections") > 0)))
    ex = (_ex_time(rows.exchanges).where(F.col("api_key").isNotNull()).withColumn("listener", _listener())
          .groupBy("listener").agg(F.count("*").alias("exchanges")))
    total = F.col("bytes") + F.col("lost_bytes")
    return (per.join(ex, "listener", "left").na.fill(0, ["exchanges"])
            .withColumn("undecoded_fraction",
                        F.when(total > 0, (F.col("lost_bytes") + F.col("skipped_bytes") +
                                           F.col("tls_undecrypted_bytes")) / total).otherwise(0.0))
            .withColumn("plaintext_undecoded_fraction",
                        F.when(F.col("plaintext_bytes") > 0, F.col("plaintext_undecoded_bytes") /
                               (F.col("plaintext_bytes") + F.col("plaintext_undecoded_bytes"))).otherwise(0.0))
            .select("capture_date", "listener", "exchanges", "connections", "kafka_connections", "tls_connections",
                    "tls_not_decrypted", "tls_version_unknown", "certificates_hidden", "started_before_capture",
                    "bytes", "lost_bytes", "skipped_bytes", "tls_undecrypted_bytes", "undecoded_fraction",
                    "plaintext_undecoded_fraction")
            .orderBy("listener"))


# -- the summary the first job printed -----------------------------------------------------------
def exchange_summary(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Per api and client: exchanges, errors, p50/p99 latency (where n >= min_latency_n),
    unanswered requests; the busiest first. request_missing rows (a response whose request was
    not captured) count under their api when the response shows it."""
    ex = _ex_time(rows.exchanges).where(F.col("api_name").isNotNull() | (F.col("status") == "request_missing"))
    n = F.count("latency_ms")
    out = (ex.groupBy("capture_date", F.coalesce("api_name", F.lit("(request not captured)")).alias("api_name"),
                      "client_id")
           .agg(F.count("*").alias("exchanges"),
                F.sum(F.when(failed(), 1).otherwise(0)).alias("errors"),
                n.alias("timed"),
                F.when(n >= policy.min_latency_n, F.round(F.percentile("latency_ms", 0.5), 3)).alias("p50_ms"),
                F.when(n >= policy.min_latency_n, F.round(F.percentile("latency_ms", 0.99), 3)).alias("p99_ms"),
                F.sum(F.when(F.col("status") == "no_response", 1).otherwise(0)).alias("unanswered"),
                F.sum(F.when(negotiated(), 1).otherwise(0)).alias("negotiated"))
           .orderBy(F.desc("exchanges"), "api_name", "client_id"))
    return {"exchange_summary": out}


AUDITS: dict[str, Callable[[Rows, Policy], dict[str, DataFrame]]] = {
    "exchange_summary": exchange_summary,
    "upgrade_readiness": upgrade_readiness,
    "clients": clients,
    "errors": errors,
    "latency": latency,
    "throughput": throughput,
    "groups": groups,
    "security": security,
    "capture_health": capture_health,
    "lineage": lineage,
    "consumer_lag": consumer_lag,
    "client_hygiene": client_hygiene,
}


def policies(results: dict[str, dict[str, list[dict]]], policy: Policy) -> list[Verdict]:
    """Check collected results (audit -> table -> rows as dicts) against the policy; a policy
    whose audit did not run is not judged."""
    out = []
    if "upgrade_readiness" in results:
        up = results["upgrade_readiness"]["upgrade_readiness"]  # the target release's only
        who = sorted({f"{r['client_id']}@{r['client_ip']}: {r['api_name']} v{r['api_version']} ({r['refusal']})"
                      for r in up})
        out.append(Verdict(f"no client sends a version Kafka {policy.target_release} rejects", not up,
                           "; ".join(who[:20]) + (f" and {len(who) - 20} more" if len(who) > 20 else "") if up
                           else "none seen"))
    if policy.max_error_rate is not None and "errors" in results:
        rates = results["errors"]["error_rate"]
        total = sum(r["exchanges"] for r in rates)
        errored = sum(r["errored"] for r in rates)
        rate = errored / total if total else 0.0
        out.append(Verdict(f"error rate at most {policy.max_error_rate:.2%}", rate <= policy.max_error_rate,
                           f"{errored} of {total} exchanges ({rate:.2%})"))
    for api, bound in sorted(policy.max_p99_ms.items()) if "latency" in results else ():
        seen = [r for r in results["latency"]["latency_by_api"] if r["api_name"] == api]
        worst = max((r["p99_ms"] for r in seen), default=None)
        out.append(Verdict(f"{api} p99 at most {bound:g} ms", None if worst is None else worst <= bound,
                           f"p99 {worst} ms" if worst is not None else
                           f"fewer than {policy.min_latency_n} timed {api} exchanges (min_latency_n)"))
    if not policy.allow_plain_without_tls and "security" in results:
        plain = results["security"]["plain_without_tls"]
        who = sorted({f"{r['client_id']}@{r['client_ip']} -> {r['listener']} "
                      f"(user {r['sasl_user'] if r['sasl_user'] is not None else 'not captured'})" for r in plain})
        out.append(Verdict("no SASL PLAIN login outside TLS", not plain, "; ".join(who) if who else "none seen",
                           "plaintext"))
    if "security" in results and not policy.allow_weak_tls:
        weak = sorted({f"{r['client_ip']} -> {r['listener']}: {r['tls_version']} {r['tls_cipher']}"
                       for r in results["security"]["tls_versions"] if r["weak"]})
        out.append(Verdict("no TLS 1.0/1.1 or suite without AEAD", not weak, "; ".join(weak) if weak else "none seen",
                           "handshakes"))
    if "security" in results:
        soon = sorted({f"{r['listener']}: {r['tls_cert_subject']} until {r['tls_cert_not_after']}"
                       for r in results["security"]["certificates"]
                       if r["days_left"] is not None and r["days_left"] < policy.min_certificate_days})
        out.append(Verdict(f"no server certificate expires within {policy.min_certificate_days} days", not soon,
                           "; ".join(soon) if soon else "none seen", "certificates"))
    if policy.max_gap_fraction is not None and "capture_health" in results:
        files = results["capture_health"]["capture_files"]
        got = sum(r["bytes"] or 0 for r in files)
        lost = sum(r["gap_bytes"] or 0 for r in files)
        frac = lost / (got + lost) if got + lost else 0.0
        out.append(Verdict(f"capture lost at most {policy.max_gap_fraction:.2%} of the bytes",
                           frac <= policy.max_gap_fraction, f"{lost} of {got + lost} bytes ({frac:.2%})", "capture"))
    return judge(out + wire_verdicts(results, policy), results, policy)


def judge(verdicts: list[Verdict], results: dict[str, dict[str, list[dict]]], policy: Policy) -> list[Verdict]:
    """A verdict that holds on the tables is ok only where capture_health's coverage shows it saw
    enough of what it checks (what its ``needs`` names): at least ``min_exchanges`` decoded Kafka
    exchanges, and no Kafka listener with more than ``max_undecoded_fraction`` of its bytes not
    decoded where those bytes could hide a failure. Otherwise it is inconclusive, and its detail
    says why in one line. A failure stands: what was seen fails. (Without the coverage table, the
    tables alone are judged.)"""
    cov = results.get("capture_health", {}).get("coverage")
    if cov is None:
        return verdicts
    return [v if v.ok is not True else _evidence(v, cov, policy) for v in verdicts]


def _evidence(v: Verdict, cov: list[dict], policy: Policy) -> Verdict:
    exchanges = sum(r["exchanges"] or 0 for r in cov)
    why = []
    if v.needs == "capture":
        if not sum(r["bytes"] or 0 for r in cov):
            why.append("no Kafka traffic was captured")
    elif exchanges < policy.min_exchanges:
        why.append(f"{exchanges} Kafka exchanges decoded (min_exchanges {policy.min_exchanges})")
    if v.needs == "decoded":
        why += [_hidden(r) for r in cov if r["undecoded_fraction"] > policy.max_undecoded_fraction]
    elif v.needs == "plaintext":
        why += [_hidden(r, plaintext=True) for r in cov if r["plaintext_undecoded_fraction"] >
                policy.max_undecoded_fraction]
    elif v.needs == "handshakes":
        why += [f"{r['tls_version_unknown']} TLS connections on {r['listener']} without their handshake"
                for r in cov if r["tls_version_unknown"]]
    elif v.needs == "certificates":
        why += [f"{r['certificates_hidden']} TLS connections on {r['listener']} show their certificate only "
                "decrypted: --tls-keylog FILE decrypts them" for r in cov if r["certificates_hidden"]]
    if not why:
        return v
    more = f"; and {len(why) - 3} more" if len(why) > 3 else ""
    return Verdict(v.name, None, "; ".join(why[:3]) + more, v.needs)


def _hidden(r: dict, plaintext: bool = False) -> str:
    """Why a listener's traffic could hide what a verdict checks, in one clause."""
    if r["tls_not_decrypted"] and not plaintext:
        return (f"{r['tls_not_decrypted']} TLS connections ({r['tls_undecrypted_bytes']} bytes) on {r['listener']} "
                "were not decrypted: --tls-keylog FILE decrypts them")
    frac = r["plaintext_undecoded_fraction"] if plaintext else r["undecoded_fraction"]
    return (f"{frac:.1%} of the bytes on {r['listener']} were not decoded ({r['lost_bytes']} lost by the capture, "
            f"{r['skipped_bytes']} in no frame)")
