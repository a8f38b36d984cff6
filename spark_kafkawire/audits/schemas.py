"""Schemas: which producers write which wire formats and schema ids to which topics."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..protocol import PRODUCE_KEY
from .base import CLIENT, CONN, Audit, Policy, Results, Rows, Verdict, found, software
from .plots import bars

#: the findings, in report order, and what each means
FINDINGS = {
    "mixed_formats": "the topic's records are in more than one wire format",
    "unregistered_records": "records without a registry id on a topic whose other records have one",
    "lone_schema_id": "a producer writes a schema id no other producer of the topic uses",
}


#: what a producer's records are told apart by in this audit
_WROTE = ["value_format", "value_schema_id", "key_format", "key_schema_id"]


def produced(rows: Rows) -> DataFrame:
    """The records of Produce requests read whole (status ok, no control records; a schema
    registry's own topic ``_schemas`` left out), counted: one row per ``capture_date``, topic,
    producer connection and client id, and key and value format and schema id, with ``records``,
    ``first_seen`` and ``last_seen``, and the connection's client ``software``. The records are read
    once, into rows as few as a day's producers and formats, which every table is made from."""
    r = rows.record_rows()
    counted = (r.where((F.col("api_key") == PRODUCE_KEY) & (F.col("status") == "ok") & F.col("control_type").isNull()
                       & F.col("topic").isNotNull() & (F.col("topic") != "_schemas"))
               .groupBy(F.to_date("time").alias("capture_date"), "topic", *CONN, "client_id", *_WROTE)
               .agg(F.count("*").alias("records"), F.min("time").alias("first_seen"), F.max("time").alias("last_seen")))
    return counted.join(software(rows.exchanges), CONN, "left")


def schemas(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Per producer (client id, address, software) and topic: the key and value formats and schema
    ids it wrote, its records, first and last seen; per topic and value format (and id): records
    and producers; the findings of FINDINGS, one row each with what was seen."""
    rec = produced(rows).cache()
    ids = F.array_sort(F.collect_set("value_schema_id"))
    producers = (rec.groupBy("capture_date", "topic", *CLIENT)
                 .agg(F.array_join(F.array_sort(F.collect_set("software")), ", ").alias("client_software"),
                      F.array_join(F.array_sort(F.collect_set("value_format")), ", ").alias("value_formats"),
                      ids.alias("value_schema_ids"),
                      F.array_join(F.array_sort(F.collect_set("key_format")), ", ").alias("key_formats"),
                      F.array_sort(F.collect_set("key_schema_id")).alias("key_schema_ids"),
                      F.sum("records").alias("records"), F.min("first_seen").alias("first_seen"),
                      F.max("last_seen").alias("last_seen"))
                 .orderBy("topic", *CLIENT))
    formats = (rec.groupBy("capture_date", "topic", "value_format", "value_schema_id")
               .agg(F.sum("records").alias("records"), F.countDistinct(*CLIENT).alias("producers"),
                    F.array_sort(F.collect_set("client_id")).alias("client_ids"))
               .orderBy("topic", "value_format", "value_schema_id"))
    return {"schema_producers": producers, "schema_formats": formats, "schema_findings": _findings(rec)}


def _findings(rec: DataFrame) -> DataFrame:
    """One row per finding: capture date, finding, topic, client (where one is named), what was seen."""
    n, registered = F.col("records"), F.col("value_schema_id").isNotNull()
    per_topic = (rec.where(F.col("value_format").isNotNull()).groupBy("capture_date", "topic")
                 .agg(F.countDistinct("value_format").alias("formats"),
                      F.sum(F.when(~registered, n).otherwise(0)).alias("without_id"),
                      F.sum(F.when(registered, n).otherwise(0)).alias("with_id"),
                      F.sum("records").alias("records")))
    counts = (rec.where(F.col("value_format").isNotNull()).groupBy("capture_date", "topic", "value_format")
              .agg(F.sum("records").alias("n"))
              .groupBy("capture_date", "topic")
              .agg(F.array_join(F.array_sort(F.collect_list(F.concat_ws(" ", "value_format",
                                                                       F.concat(F.lit("("), "n", F.lit(")"))))),
                                ", ").alias("seen")))
    mixed = (per_topic.where(F.col("formats") > 1).join(counts, ["capture_date", "topic"])
             .select("capture_date", F.lit("mixed_formats").alias("finding"), "topic",
                     F.lit(None).cast("string").alias("client_id"), F.lit(None).cast("string").alias("client_ip"),
                     "seen"))
    unregistered = (per_topic.where((F.col("with_id") > 0) & (F.col("without_id") > 0))
                    .select("capture_date", F.lit("unregistered_records").alias("finding"), "topic",
                            F.lit(None).cast("string").alias("client_id"),
                            F.lit(None).cast("string").alias("client_ip"),
                            F.format_string("%d of %d records without a registry id", "without_id",
                                            "records").alias("seen")))
    by_id = (rec.where(F.col("value_schema_id").isNotNull())
             .groupBy("capture_date", "topic", "value_schema_id")
             .agg(F.countDistinct(*CLIENT).alias("writers"), F.min_by("client_id", "first_seen").alias("client_id"),
                  F.min_by("client_ip", "first_seen").alias("client_ip"), F.sum("records").alias("n")))
    writers = (rec.where(F.col("value_schema_id").isNotNull()).groupBy("capture_date", "topic")
               .agg(F.countDistinct(*CLIENT).alias("topic_writers")))
    lone = (by_id.join(writers, ["capture_date", "topic"]).where((F.col("writers") == 1) & (F.col("topic_writers") > 1))
            .select("capture_date", F.lit("lone_schema_id").alias("finding"), "topic", "client_id", "client_ip",
                    F.format_string("schema id %d: %d records, no other of the topic's %d producers writes it",
                                    "value_schema_id", "n", "topic_writers").alias("seen")))
    order = F.array_position(F.array(*[F.lit(k) for k in FINDINGS]), F.col("finding"))
    return (mixed.unionByName(unregistered).unionByName(lone)
            .withColumn("meaning", F.element_at(F.create_map(*[F.lit(x) for kv in FINDINGS.items() for x in kv]),
                                                F.col("finding")))
            .orderBy(order, "topic", "client_id"))


def verdicts(results: Results, policy: Policy) -> list[Verdict]:
    if not policy.require_consistent_schemas:
        return []
    name = "every topic's records in one wire format, each with a registry id where any has one"
    if not results["schemas"]["schema_formats"]:  # nothing produced was decoded: nothing to hold
        return [Verdict(name, None, "no produced record seen (rows=records: no Produce request with records)")]
    seen = [f"{r['topic']}: {r['finding']} ({r['seen']})" for r in results["schemas"]["schema_findings"]
            if r["finding"] in ("mixed_formats", "unregistered_records")]
    return [Verdict(name, not seen, found(sorted(set(seen))))]


def plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    per: dict[str, float] = {}
    for r in tables.get("schema_formats", []):
        per[r["value_format"] or "(null value)"] = per.get(r["value_format"] or "(null value)", 0) + r["records"]
    labels = sorted(per)
    return [bars("records produced by value format", labels, [per[k] for k in labels], "value format",
                 "records")] if per else []


AUDIT = Audit(
    name="schemas", order=105, run=schemas,
    intro=("Which producers write which schemas to which topics, from each record's key and value wire format "
           "(schema-registry framing with its schema id, JSON, text, binary), read without the payload: per "
           "producer and topic the formats and ids with first and last seen; per topic and format the records "
           "and producers; findings: a topic with mixed formats, records without a registry id beside records "
           "with one, a schema id only one of a topic's producers writes."),
    verdicts=verdicts,
    plots=plots)
