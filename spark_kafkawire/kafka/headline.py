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

from typing import TYPE_CHECKING, Final

from .. import protocol
from .layouts import schemas

#: the headline values headline_from_facts gives, in this order (a tuple: no dict per exchange), and
#: the session's the decoder adds after them from the connection; the rows' columns follow this order
HEADLINE_FIELDS: Final = ("error_code", "error_name", "throttle_time_ms", "topics", "partition_count", "record_count",
                          "record_bytes", "acks", "transactional_id", "group_id", "member_id")
SESSION_FIELDS: Final = ("client_software_name", "client_software_version", "sasl_mechanism", "sasl_user",
                          "client_library")
TRANSACTIONAL_ID: Final = HEADLINE_FIELDS.index("transactional_id")
GROUP_ID: Final = HEADLINE_FIELDS.index("group_id")

RECORDS_IN_REQUEST: Final = protocol.RECORDS_IN_REQUEST
RECORDS_IN_RESPONSE: Final = protocol.RECORDS_IN_RESPONSE

if TYPE_CHECKING:
    from .body import Facts


def _load_errors() -> dict[int, str]:
    text = protocol.data_text("errors.tsv")
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


def headline_from_facts(api_key: int | None, req_body: dict | None, rq: Facts | None, resp_body: dict | None,
                        rs: Facts | None, topic_ids: dict[str, str]) -> tuple:
    """The headline values of an exchange, in HEADLINE_FIELDS's order, from the Facts its bodies'
    decoding gathered (one pass): the request's and the response's body and Facts (each None when
    there is none; Facts count only with their body). tests/tools/headline_reference.py walks the
    decoded values by the same rules, the reference the tests compare with. (Typed, not the
    connection stage's Request and Response: compiled, every field is read without a lookup.)"""
    if req_body is None:
        rq = None
    if resp_body is None:
        rs = None
    topics: dict[str, None] = {}
    if rq is not None:
        _topics_into(topics, rq.topics, topic_ids)
    if rs is not None:
        _topics_into(topics, rs.topics, topic_ids)
    count = size = None
    if api_key in RECORDS_IN_REQUEST and rq is not None:
        count, size = rq.records, rq.record_bytes
    elif api_key in RECORDS_IN_RESPONSE and rs is not None:
        count, size = rs.records, rs.record_bytes
    pc = rq.partitions if rq is not None else None
    if pc is None and rs is not None:
        pc = rs.partitions
    code = rs.error if rs is not None else None
    r = req_body if req_body is not None else {}
    throttle = resp_body.get("ThrottleTimeMs") if rs is not None and resp_body is not None else None
    return (code, error_name(code), throttle, list(topics) if (rq is not None or rs is not None) else None, pc, count,
            size) + _request_fields(api_key, r)


def _topics_into(topics: dict[str, None], noted: list, topic_ids: dict[str, str]) -> None:
    """The topics a body's Facts noted (names, and ("id", topic id) where only an id was there)
    into ``topics``, in order, each once."""
    for t in noted:
        if t is None:
            continue
        if type(t) is tuple:
            t = topic_ids.get(t[1], t[1])
        topics[t] = None


def transactional_names() -> list[str]:
    """The top-level request fields whose name ends with TransactionalId, in the layouts
    (AddPartitionsToTxn v0-3 names it V3AndBelowTransactionalId), found once."""
    if not _TRANSACTIONAL:
        s = schemas()
        _TRANSACTIONAL.extend(sorted({f.name for (_k, _v, request), (sid, _f) in s.messages.items() if request
                                      for f in s.structs[sid][0] if f.name.endswith("TransactionalId")}))
    return _TRANSACTIONAL


_TRANSACTIONAL: Final[list[str]] = []


def _request_fields(api_key: int | None, r: dict) -> tuple:
    """acks, transactional_id, group_id, member_id (HEADLINE_FIELDS's last four)."""
    txn = None
    for name in transactional_names():
        v = r.get(name)
        if isinstance(v, str):
            txn = v
            break
    group, member = r.get("GroupId"), r.get("MemberId")
    return (r.get("Acks") if api_key == 0 else None, txn, group if isinstance(group, str) else None,
            member if isinstance(member, str) else None)
