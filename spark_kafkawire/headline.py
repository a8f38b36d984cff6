"""Decoded bodies -> the headline columns audits ask for.

Rules go by Kafka's field names, which are stable across versions and APIs, never by version:

error_code        the response's top-level ErrorCode if non-zero, else the first non-zero
                  ``*ErrorCode`` field in the response body, else 0
throttle_time_ms  the response's top-level ThrottleTimeMs
topics            every topic name the request and response carry (fields Topic, TopicName,
                  TopicNames, and Name inside an array whose name contains "Topic"); topic ids
                  (TopicId) are resolved to names seen earlier in the capture, else kept as the id
partition_count   entries of the outermost Partition* arrays (request, else response)
record_count/bytes  complete record batches of Produce requests and Fetch/ShareFetch responses
acks, transactional_id, group_id, member_id   top-level request fields of those names
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Final

from . import protocol
from . import records as rec
from .protocol import RECORDS_IN_REQUEST, RECORDS_IN_RESPONSE

if TYPE_CHECKING:
    from .body import Facts

ZERO_UUID: Final = protocol.ZERO_UUID


def _load_errors() -> dict[int, str]:
    text = resources.files("spark_kafkawire.protocol").joinpath("errors.tsv").read_text()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            code, name = line.split("\t")
            out[int(code)] = name
    return out


ERRORS: Final = _load_errors()


def error_name(code: int | None) -> str | None:
    if code is None:
        return None
    name = ERRORS.get(code)
    return name if name is not None else f"UNKNOWN_ERROR_{code}"


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
                    c, s = rec.totals(x)
                    count += c
                    size += s
                elif isinstance(x, (dict, list)):
                    stack.append(x)
        elif isinstance(v, list):
            stack.extend(x for x in v if isinstance(x, (dict, list)))
    return count, size


def headline_from_facts(api_key: int | None, req, resp, topic_ids: dict[str, str]) -> dict:
    """The headline columns of an exchange (a request and a response: ``body``, ``facts``) from the
    Facts its bodies' decoding gathered (the fast path; :func:`headline` is the same from the
    decoded values, the reference)."""
    rq: Facts | None = req.facts if req is not None and req.body is not None else None
    rs: Facts | None = resp.facts if resp is not None and resp.body is not None else None
    topics: dict[str, None] = {}
    for f in (rq, rs):
        if f is not None:
            for t in f.topics:
                if t is None:
                    continue
                if type(t) is tuple:
                    t = topic_ids.get(t[1], t[1])
                topics[t] = None
    count = size = None
    if api_key in RECORDS_IN_REQUEST and rq is not None:
        count, size = rq.records, rq.record_bytes
    elif api_key in RECORDS_IN_RESPONSE and rs is not None:
        count, size = rs.records, rs.record_bytes
    pc = rq.partitions if rq is not None else None
    if pc is None and rs is not None:
        pc = rs.partitions
    code = rs.error if rs is not None else None
    r = req.body if req is not None and req.body is not None else {}
    throttle = resp.body.get("ThrottleTimeMs") if rs is not None else None
    return {
        "error_code": code,
        "error_name": error_name(code),
        "throttle_time_ms": throttle,
        "topics": list(topics) if (rq is not None or rs is not None) else None,
        "partition_count": pc,
        "record_count": count,
        "record_bytes": size,
        **_request_fields(api_key, r),
    }


def _request_fields(api_key: int | None, r: dict) -> dict:
    return {
        "acks": r.get("Acks") if api_key == 0 else None,
        # AddPartitionsToTxn v0-3 names it V3AndBelowTransactionalId
        "transactional_id": next((v for k, v in r.items() if k.endswith("TransactionalId") and isinstance(v, str)),
                                 None),
        "group_id": r.get("GroupId") if isinstance(r.get("GroupId"), str) else None,
        "member_id": r.get("MemberId") if isinstance(r.get("MemberId"), str) else None,
    }


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
        **_request_fields(api_key, r),
    }
