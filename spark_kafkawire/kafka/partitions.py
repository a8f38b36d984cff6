"""Decoded bodies -> the (topic, partition) entries an exchange touches (``rows`` = partitions, records).

Like the headline columns, this goes by Kafka's field names, never by version: a topic entry is a
struct with a topic name (Name, Topic, TopicName) or TopicId, and an array whose name starts with
"Partition" (Partitions, PartitionData, PartitionResponses, PartitionIndexes); a partition is
identified by PartitionIndex, Index or Partition. Request and response entries of the same
(topic, partition) are joined.

``offset`` means, by the first field present:
  BaseOffset (Produce response: where the broker appended), FetchOffset (Fetch request),
  CommittedOffset (OffsetCommit/TxnOffsetCommit request, OffsetFetch response), Offset
  (ListOffsets response, DeleteRecords request), EndOffset (OffsetForLeaderEpoch response),
  OldStyleOffsets[0] (ListOffsets v0 response).
"""

from __future__ import annotations

from typing import Final

from .. import protocol
from . import batchsummary as summaries

#: api keys whose exchanges give rows=partitions rows
PARTITION_APIS: Final = protocol.PARTITION_APIS
RECORDS_IN_REQUEST: Final = protocol.RECORDS_IN_REQUEST
RECORDS_IN_RESPONSE: Final = protocol.RECORDS_IN_RESPONSE
_SKIP: Final = frozenset({"ForgottenTopicsData"})  # Fetch sessions: partitions the client stops fetching
_NAMES: Final = ("Name", "Topic", "TopicName")
_INDEXES: Final = ("PartitionIndex", "Index", "Partition")
_OFFSETS: Final = (("response", "BaseOffset"), ("request", "FetchOffset"), ("request", "CommittedOffset"),
                   ("response", "CommittedOffset"), ("response", "Offset"), ("request", "Offset"),
                   ("response", "EndOffset"))


def topic_partitions(body: dict | None, topic_ids: dict[str, str]) -> list[tuple[str | None, int | None, dict]]:
    """(topic, partition, the partition's fields) for every partition entry of a body, in order."""
    out: list[tuple[str | None, int | None, dict]] = []
    if body is None:
        return out
    stack: list = [body]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed([x for x in v if isinstance(x, (dict, list))]))
            continue
        if not isinstance(v, dict):
            continue
        parts = next((x for k, x in v.items() if k.startswith("Partition") and isinstance(x, list)), None)
        if parts is not None and (any(k in v for k in _NAMES) or "TopicId" in v):
            name = next((v[k] for k in _NAMES if isinstance(v.get(k), str) and v[k]), None)
            if name is None and isinstance(v.get("TopicId"), str):
                name = topic_ids.get(v["TopicId"], v["TopicId"])
            for p in parts:
                if isinstance(p, dict):
                    out.append((name, next((p[k] for k in _INDEXES if isinstance(p.get(k), int)), None), p))
                elif isinstance(p, int):
                    out.append((name, p, {}))
            continue
        stack.extend(reversed([x for k, x in v.items() if k not in _SKIP and isinstance(x, (dict, list))]))
    return out


def partition_rows(api_key: int | None, req: dict | None, resp: dict | None,
                   topic_ids: dict[str, str]) -> list[dict]:
    """One dict per (topic, partition) with the rows=partitions columns."""
    if api_key not in PARTITION_APIS:
        return []
    joined: dict[tuple, dict] = {}
    for side, body in (("request", req), ("response", resp)):
        for topic, index, fields in topic_partitions(body, topic_ids):
            entry = joined.setdefault((topic, index),
                                      {"request": {}, "response": {}, "topic": topic, "partition": index})
            if not entry[side]:
                entry[side] = fields
    return [_columns(api_key, e) for e in joined.values()]


def _columns(api_key: int, e: dict) -> dict:
    r, s = e["request"], e["response"]
    offset = None
    for side, name in _OFFSETS:
        x = (r if side == "request" else s).get(name)
        if isinstance(x, int):
            offset = x
            break
    if offset is None and isinstance(s.get("OldStyleOffsets"), list) and s["OldStyleOffsets"]:
        offset = s["OldStyleOffsets"][0]
    log_start = s.get("LogStartOffset", r.get("LogStartOffset"))
    ts = s.get("Timestamp", s.get("LogAppendTimeMs"))
    count = size = None
    records = r.get("Records") if api_key in RECORDS_IN_REQUEST else \
        s.get("Records") if api_key in RECORDS_IN_RESPONSE else None
    if api_key in RECORDS_IN_REQUEST | RECORDS_IN_RESPONSE and (r if api_key in RECORDS_IN_REQUEST else s):
        count, size = summaries.totals(records)
    return {
        "topic": e["topic"], "partition": e["partition"],
        "error_code": s.get("ErrorCode") if isinstance(s.get("ErrorCode"), int) else None,
        "offset": offset,
        "high_watermark": s.get("HighWatermark"),
        "last_stable_offset": s.get("LastStableOffset"),
        "log_start_offset": log_start if isinstance(log_start, int) else None,
        "timestamp_ms": ts if isinstance(ts, int) else None,
        "record_count": count, "record_bytes": size,
    }
