"""Throughput: records and bytes produced and fetched."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..protocol import RECORDS_IN_REQUEST, RECORDS_IN_RESPONSE
from .base import Audit, Policy, Rows, ex_time
from .plots import timeline


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
    ex = ex_time(rows.exchanges).where(F.col("api_key").isin(*carrying))
    body = F.when(produced, F.col("request")).otherwise(F.col("response"))
    codecs = (ex.withColumn("codec", F.explode(F.regexp_extract_all(body, F.lit('"Codec":"([a-z0-9]+)"'), F.lit(1))))
              .withColumn("direction", F.when(produced, "produce").otherwise("fetch"))
              .groupBy("capture_date", "direction", "client_id", "codec").agg(F.count("*").alias("batches"))
              .orderBy("direction", "client_id", "codec"))
    return {"throughput": out, "codecs": codecs}


def plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    out = []
    for direction, verb in (("produce", "produced"), ("fetch", "fetched")):
        per: dict = {}
        for r in tables.get("throughput", []):
            if r["direction"] == direction:
                per[r["minute"]] = per.get(r["minute"], 0) + (r["records"] or 0)
        if per:
            out.append(timeline(f"records {verb} per minute", per, dt.timedelta(minutes=1), "records"))
    return out


AUDIT = Audit(
    name="throughput", order=60, run=throughput,
    intro=('Records and bytes produced and fetched per topic, client and minute; compression codecs '
           'seen per client (record batches).'),
    plots=plots)
