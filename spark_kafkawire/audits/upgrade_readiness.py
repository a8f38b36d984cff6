"""Upgrade readiness: every client that sends a version the target release rejects."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .base import Audit, Policy, Results, Rows, Verdict, ex_time, found, refused


def upgrade_readiness(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """For the target release (policy ``target_release``), every client (id, address, software) and
    (api, version) it sent that the release does not accept, why (``refusal``: removed, newer,
    absent), with exchange counts and first/last seen."""
    hit = refused(ex_time(rows.exchanges), policy.target_release)
    keys = ["release", "capture_date", "client_id", "client_ip", "client_software_name", "client_software_version",
            "api_key", "api_name", "api_version", "refusal"]
    out = (hit.groupBy(*keys)
           .agg(F.count("*").alias("exchanges"), F.min("time").alias("first_seen"), F.max("time").alias("last_seen"))
           .orderBy("release", "client_id", "client_ip", "api_key", "api_version"))
    return {"upgrade_readiness": out}


def verdicts(results: Results, policy: Policy) -> list[Verdict]:
    up = results["upgrade_readiness"]["upgrade_readiness"]  # the target release's only
    who = sorted({f"{r['client_id']}@{r['client_ip']}: {r['api_name']} v{r['api_version']} ({r['refusal']})"
                  for r in up})
    return [Verdict(f"no client sends a version Kafka {policy.target_release} rejects", not up,
                    found(who))]


AUDIT = Audit(
    name="upgrade_readiness", order=20, run=upgrade_readiness,
    intro=('Every client that sent an (API, version) the target release does not accept: removed '
           '(below its lowest version; KIP-896 removed many in 4.0), newer (above its highest) or '
           'absent (an API it does not have). Brokers still advertise old minimums in ApiVersions, '
           'so this shows only in what clients actually send.'),
    verdicts=verdicts)
