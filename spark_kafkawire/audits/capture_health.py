"""Capture health: how far the other audits can be trusted (the coverage the verdicts rest on)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import figures
from ..decode.status import CAPTURE_DAMAGED
from .base import (CONN, SKIPPED_FILES, Audit, Policy, Results, Rows, Verdict, condition, connections, count_of,
                   ex_time, listener)


def _directions(what: str) -> F.Column:
    """A per-direction count of the connection rows, client's and broker's added (nulls as 0)."""
    return F.expr(f"coalesce(client_{what}, 0) + coalesce(broker_{what}, 0)")  # one call to Spark, not eight


def capture_health(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Per file and connection: bytes lost, resyncs, skipped bytes, damage, unanswered requests:
    how far each other audit can be trusted; and the files of the captures' folders that were not
    read (``skipped_files``: each with why), so that none is passed over silently."""
    c = rows.connections.withColumn("capture_date", F.to_date(F.coalesce("first_time", "last_time")))
    conn = c.select("capture_date", "capture_file", "client_ip", "client_port", "broker_ip", "broker_port",
                    "connection_time", "protocol", "start_captured", "end_captured", "status",
                    _directions("bytes").alias("bytes"), _directions("gap_bytes").alias("gap_bytes"),
                    _directions("gaps").alias("gaps"), _directions("resyncs").alias("resyncs"),
                    _directions("skipped_bytes").alias("skipped_bytes"),
                    _directions("partial_frames").alias("partial_frames"))
    ex = ex_time(rows.exchanges)
    per_file_ex = (ex.groupBy("capture_file")
                   .agg(count_of(figures.UNANSWERED).alias("unanswered"),
                        count_of(figures.REQUEST_MISSING).alias("request_missing"),
                        count_of(figures.DAMAGED).alias("damaged_exchanges"),
                        F.max(F.when(F.col("status") == CAPTURE_DAMAGED, F.col("detail"))).alias("file_damage"),
                        F.count("*").alias("exchanges"),
                        F.sum(F.coalesce("request_size", F.lit(0)) + F.coalesce("response_size", F.lit(0)))
                        .alias("frame_bytes"),
                        F.min(F.to_date("time")).alias("exchange_date")))
    # every connection with a row in the file (a connection row, or an exchange whose request is in
    # it), each once: a connection of a rotation series is in each file it sent in
    connected = condition(figures.CONNECTION)
    present = (conn.where(connected).select("capture_file", *CONN)
               .unionByName(ex.where(F.col("client_ip").isNotNull()).select("capture_file", *CONN))
               .groupBy("capture_file").agg(connections().alias("connections")))
    files = (conn.where(connected).groupBy("capture_file")
             .agg(F.min("capture_date").alias("connection_date"),
                  F.sum("bytes").alias("bytes"), F.sum("gap_bytes").alias("gap_bytes"), F.sum("gaps").alias("gaps"),
                  F.sum("resyncs").alias("resyncs"), F.sum("skipped_bytes").alias("skipped_bytes"),
                  connections(~F.col("start_captured")).alias("started_before_capture"))
             .join(per_file_ex, "capture_file", "full").join(present, "capture_file", "left")
             .withColumn("capture_date", F.coalesce(F.least("connection_date", "exchange_date"), "connection_date",
                                                    "exchange_date"))
             .na.fill(0, ["connections", "bytes", "gap_bytes", "gaps", "resyncs", "skipped_bytes",
                          "started_before_capture", "exchanges", "frame_bytes"])
             .withColumn("gap_fraction", F.when(F.col("bytes") + F.col("gap_bytes") > 0,
                                                F.col("gap_bytes") / (F.col("bytes") + F.col("gap_bytes"))))
             .select("capture_date", "capture_file", "connections", "exchanges", "frame_bytes", "bytes", "gap_bytes",
                     "gaps", "resyncs", "skipped_bytes", "started_before_capture", "unanswered", "request_missing",
                     "damaged_exchanges", "file_damage", "gap_fraction")
             .orderBy("capture_file"))
    damaged_conns = (conn.where((F.col("gaps") > 0) | (F.col("resyncs") > 0) | (F.col("skipped_bytes") > 0))
                     .orderBy(F.desc("gap_bytes")))
    skipped = rows.skipped if rows.skipped is not None else rows.exchanges.sparkSession.createDataFrame(
        [], SKIPPED_FILES)
    return {"coverage": coverage(rows), "capture_files": files, "damaged_connections": damaged_conns,
            "skipped_files": skipped.orderBy("capture_file")}


def coverage(rows: Rows) -> DataFrame:
    """Per Kafka listener (a broker address and port with Kafka or TLS connections): how much of
    its traffic was decoded, the evidence every verdict rests on (see judge). ``bytes`` captured;
    ``lost_bytes`` by the capture (gaps); ``skipped_bytes`` captured but in no Kafka frame (plaintext
    connections, and connections of no protocol recognised); ``tls_undecrypted_bytes``: every byte
    of the TLS connections not decrypted (``tls_not_decrypted`` of them; their handshakes decode no
    Kafka), and the records a decrypted one could not decrypt; ``started_before_capture``
    connections; ``undecoded_fraction`` = (lost + skipped + undecrypted) / (bytes + lost), and
    ``plaintext_undecoded_fraction`` the same over the connections that are not TLS."""
    c = rows.connections.where(condition(figures.CONNECTION)).withColumn("listener", listener())
    tls = F.col("protocol") == "tls"
    lost = F.when(tls, _directions("tls_gap_bytes")).otherwise(_directions("gap_bytes"))
    skipped = F.when(tls, F.lit(0)).otherwise(_directions("skipped_bytes"))
    # a TLS connection not decrypted decoded no Kafka byte, its handshake included: all its bytes
    # count, so that the decoded share and the exchanges agree (no exchange, nothing decoded)
    undecrypted = (F.when(tls & condition(figures.TLS_NOT_DECRYPTED), _directions("bytes"))
                   .when(tls, F.coalesce("tls_undecrypted_bytes", F.lit(0))).otherwise(0))
    per = (c.groupBy("listener")
           .agg(F.min(F.to_date(F.coalesce("first_time", "last_time"))).alias("capture_date"),
                connections().alias("connections"),
                connections(F.col("protocol") == "kafka").alias("kafka_connections"),
                connections(tls).alias("tls_connections"),
                connections(condition(figures.TLS_NOT_DECRYPTED)).alias("tls_not_decrypted"),
                connections(tls & F.col("tls_version").isNull()).alias("tls_version_unknown"),
                connections(tls & F.col("tls_cert_subject").isNull() & (F.col("tls_version") != "TLS 1.2"))
                .alias("certificates_hidden"),
                connections(~F.col("start_captured")).alias("started_before_capture"),
                F.sum(_directions("bytes")).alias("bytes"), F.sum(lost).alias("lost_bytes"),
                F.sum(skipped).alias("skipped_bytes"), F.sum(undecrypted).alias("tls_undecrypted_bytes"),
                F.sum(F.when(~tls, _directions("bytes")).otherwise(0)).alias("plaintext_bytes"),
                F.sum(F.when(~tls, lost + skipped).otherwise(0)).alias("plaintext_undecoded_bytes"))
           .where((F.col("kafka_connections") > 0) | (F.col("tls_connections") > 0)))
    ex = (ex_time(rows.exchanges).where(F.col("api_key").isNotNull()).withColumn("listener", listener())
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


def verdicts(results: Results, policy: Policy) -> list[Verdict]:
    if policy.max_gap_fraction is None:
        return []
    files = results["capture_health"]["capture_files"]
    got = sum(r["bytes"] or 0 for r in files)
    lost = sum(r["gap_bytes"] or 0 for r in files)
    frac = lost / (got + lost) if got + lost else 0.0
    return [Verdict(f"capture lost at most {policy.max_gap_fraction:.2%} of the bytes",
                    frac <= policy.max_gap_fraction, f"{lost} of {got + lost} bytes ({frac:.2%})", "capture")]


AUDIT = Audit(
    name="capture_health", order=90, run=capture_health,
    intro=('How far the other audits can be trusted: the coverage per Kafka listener the verdicts '
           'rest on (bytes decoded, TLS not decrypted, bytes lost, connections without their start); '
           'per capture file, bytes the capture lost (gaps), resyncs, bytes that could not be '
           'framed, damage, unanswered requests; then the connections with damage; then the files of the '
           'captures\' folders not read, with why (not a regular file, or a name no pathGlobFilter '
           'pattern matches).'),
    verdicts=verdicts)
