"""Consumer groups: membership churn and rebalances."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import protocol
from ..protocol import GROUP_MEMBERSHIP_APIS, KEY
from .base import Audit, Policy, Rows, ex_time

#: the group_churn columns, in order
MEMBERSHIP: list[str] = [protocol.API_NAMES[k] for k in GROUP_MEMBERSHIP_APIS]


def groups(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """Consumer-group churn: Join/Sync/Leave/Heartbeat per group and member, rebalances (new
    generations) per hour, heartbeat errors."""
    ex = ex_time(rows.exchanges).where(F.col("api_key").isin(*GROUP_MEMBERSHIP_APIS) & F.col("group_id").isNotNull())
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


AUDIT = Audit(
    name="groups", order=70, run=groups,
    intro=('Consumer-group churn: JoinGroup/SyncGroup/LeaveGroup/Heartbeat per group and member, '
           'rebalances (new generations) per hour, group errors such as REBALANCE_IN_PROGRESS.'))
