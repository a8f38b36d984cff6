"""Clients: every client id and address, its software, APIs, SASL login and traffic."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .base import Audit, Policy, Rows, connections, ex_time


def clients(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Inventory per client id and address: software, APIs and versions, SASL logins, traffic."""
    ex = ex_time(rows.exchanges).where(F.col("api_key").isNotNull())
    api_v = F.concat(F.col("api_name"), F.lit(" v"), F.col("api_version").cast("string"))
    out = (ex.groupBy("capture_date", "client_id", "client_ip")
           .agg(F.array_join(F.array_sort(F.collect_set("client_software_name")), ", ").alias("software_name"),
                F.array_join(F.array_sort(F.collect_set("client_software_version")), ", ").alias("software_version"),
                F.array_join(F.array_sort(F.collect_set("client_library")), ", ").alias("client_library"),
                F.array_sort(F.collect_set(api_v)).alias("apis"),
                F.array_join(F.array_sort(F.collect_set("sasl_mechanism")), ", ").alias("sasl_mechanism"),
                F.array_join(F.array_sort(F.collect_set("sasl_user")), ", ").alias("sasl_user"),
                connections().alias("connections"),
                F.count("*").alias("exchanges"),
                F.sum(F.coalesce("request_size", F.lit(0))).alias("request_bytes"),
                F.sum(F.coalesce("response_size", F.lit(0))).alias("response_bytes"),
                F.min("time").alias("first_seen"), F.max("time").alias("last_seen"))
           .orderBy(F.desc("exchanges")))
    return {"clients": out}


AUDIT = Audit(
    name="clients", order=30, run=clients,
    intro=('Every client id and address: software (from ApiVersions v3+), client library (from the software, a '
           'default client id or the requests it sent: see docs/rows.md), APIs and versions used, '
           'SASL login (mechanism and user, never the secret), traffic, first and last seen.'))
