"""The reference for the headline columns: walkers over decoded bodies (dicts and lists), by the
rules spark_kafkawire/kafka/headline.py's docstring states. The package takes the same columns from the
facts noted while each body is decoded (body.Facts, headline.headline_from_facts); the tests
compare the two on every capture at hand."""

from __future__ import annotations

from spark_kafkawire.kafka import batchsummary as summaries
from spark_kafkawire.kafka.headline import _request_fields, error_name
from spark_kafkawire.protocol import RECORDS_IN_REQUEST, RECORDS_IN_RESPONSE, ZERO_UUID


def first_error(body: dict | None) -> int | None:
    if body is None:
        return None
    top = body.get("ErrorCode")
    if isinstance(top, int) and top:
        return top
    stack: list = [body]
    while stack:
        v = stack.pop(0)
        if isinstance(v, dict):
            for k, x in v.items():
                if k.endswith("ErrorCode") and isinstance(x, int) and x:
                    return x
                if isinstance(x, (dict, list)):
                    stack.append(x)
        elif isinstance(v, list):
            stack.extend(x for x in v if isinstance(x, (dict, list)))
    return 0


def topic_names(body: dict | None, topic_ids: dict[str, str], out: dict[str, None]) -> None:
    """Add the topics a body names to ``out`` (an ordered set)."""
    if body is None:
        return

    def visit(v, in_topic_array: bool) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("Topic", "TopicName") and isinstance(x, str):
                    out[x] = None
                elif k == "Name" and in_topic_array and isinstance(x, str):
                    out[x] = None
                elif k == "TopicId" and isinstance(x, str) and x != ZERO_UUID:
                    if not any(n in v for n in ("Name", "Topic", "TopicName")) or not (
                            v.get("Name") or v.get("Topic") or v.get("TopicName")):
                        out[topic_ids.get(x, x)] = None
                elif k == "TopicNames" and isinstance(x, list):
                    out.update((t, None) for t in x if isinstance(t, str))
                elif isinstance(x, list):
                    for e in x:
                        visit(e, "Topic" in k)
                elif isinstance(x, dict):
                    visit(x, False)
        elif isinstance(v, list):
            for e in v:
                visit(e, in_topic_array)

    visit(body, False)


def learn_topic_ids(body: dict | None, topic_ids: dict[str, str]) -> None:
    """Remember TopicId -> name pairs that a response states (Metadata, CreateTopics, ...)."""
    if body is None:
        return
    stack: list = [body]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            tid = v.get("TopicId")
            name = v.get("Name") or v.get("TopicName") or v.get("Topic")
            if isinstance(tid, str) and tid != ZERO_UUID and isinstance(name, str) and name:
                topic_ids[tid] = name
            stack.extend(x for x in v.values() if isinstance(x, (dict, list)))
        elif isinstance(v, list):
            stack.extend(x for x in v if isinstance(x, (dict, list)))


def partition_count(body: dict | None) -> int | None:
    if body is None:
        return None
    total = 0
    found = False
    stack: list = [body]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if k.startswith("Partition") and isinstance(x, list):
                    total += len(x)
                    found = True
                elif isinstance(x, (dict, list)):
                    stack.append(x)
        elif isinstance(v, list):
            stack.extend(x for x in v if isinstance(x, (dict, list)))
    return total if found else None


def record_totals(body: dict | None) -> tuple[int, int]:
    count = size = 0
    stack: list = [body] if body is not None else []
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "Records" and isinstance(x, list):
                    c, s = summaries.totals(x)
                    count += c
                    size += s
                elif isinstance(x, (dict, list)):
                    stack.append(x)
        elif isinstance(v, list):
            stack.extend(x for x in v if isinstance(x, (dict, list)))
    return count, size


def headline(api_key: int | None, req: dict | None, resp: dict | None, topic_ids: dict[str, str]) -> dict:
    topics: dict[str, None] = {}
    topic_names(req, topic_ids, topics)
    topic_names(resp, topic_ids, topics)
    code = first_error(resp)
    count = size = None
    if api_key in RECORDS_IN_REQUEST and req is not None:
        count, size = record_totals(req)
    elif api_key in RECORDS_IN_RESPONSE and resp is not None:
        count, size = record_totals(resp)
    pc = partition_count(req)
    if pc is None:
        pc = partition_count(resp)
    r = req or {}
    return {
        "error_code": code,
        "error_name": error_name(code),
        "throttle_time_ms": (resp or {}).get("ThrottleTimeMs"),
        "topics": list(topics) if (req is not None or resp is not None) else None,
        "partition_count": pc,
        "record_count": count,
        "record_bytes": size,
        **dict(zip(("acks", "transactional_id", "group_id", "member_id"), _request_fields(api_key, r), strict=True)),
    }
