"""What a record carries besides its payload: trace context in its headers, and the wire format
(schema-registry framing, JSON, text) of its key and value.

``trace_context(headers)`` reads the first trace header kind present, in this order: W3C
``traceparent`` (``w3c``), B3 single ``b3`` (``b3``), B3 multi ``X-B3-TraceId``/``X-B3-SpanId``
(``b3multi``), Jaeger ``uber-trace-id`` (``jaeger``), SkyWalking ``sw8`` (``sw8``); header names
are matched without regard to case. It returns ``(trace_id, span_id, trace_format, problem)``:
ids as lowercase hex (SkyWalking's as the decoded ids, letters, digits and ``._-`` only; its span
id is the segment id, a dot and the span number), or all None and ``problem`` saying
which header is malformed and how; never a guess.

``wire_format(data)`` returns ``(format, schema_id, problem)`` for a key or a value:
``confluent-json`` / ``confluent-protobuf`` / ``confluent`` (Confluent framing: magic 0 and a
4-byte schema id; ``-json`` where the rest is JSON, ``-protobuf`` where it is a list of message
indexes and a whole Protocol Buffers message; Avro has no marker of its own, so an Avro value is
``confluent``), ``apicurio`` (magic 0 and an 8-byte global id: its first four bytes are zero,
which no Confluent id is), ``json``, ``utf8``, ``binary``; None for a null key or value. A magic
byte too short for an id is ``binary`` with a problem. Every check is one pass over the bytes, and
a bounded one: a key or value is parsed as JSON only up to MAX_JSON_LOOK bytes (64 KiB); a longer
one is ``json`` where its first 64 KiB are JSON tokens and it ends with the bracket that closes its
first, so a record that inflates to megabytes of ``[{},{},...]`` costs its bytes, not millions of
objects.

Pure functions of bytes; the row builder calls them on every record, payload or not: they are
metadata, not payload.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import re
from typing import Final

from ..compiled import require
from .wiretypes import uvarint

_orjson = require("orjson", "orjson")
_loads: Final = _orjson.loads  # (a name of its own: compiled, looked up once, not at each value)

#: trace header kinds, in the order a record's headers are read for one
TRACE_FORMATS: Final = ("w3c", "b3", "b3multi", "jaeger", "sw8")
#: wire formats of keys and values
WIRE_FORMATS: Final = ("confluent-avro", "confluent-protobuf", "confluent-json", "confluent", "apicurio",
                       "json", "utf8", "binary")
#: a key or value parsed whole to tell JSON is at most this long (its objects take up to ~40 times its
#: bytes in memory); a longer one is looked at in this many bytes (see _json)
MAX_JSON_LOOK: Final = 64 << 10
MAX_TRACE_HEADER: Final = 512  # a longer trace header is malformed (W3C's is 55 characters)
_HEX: Final = "0123456789abcdef"
_JSON_SPACE: Final = frozenset(b" \t\r\n")  # white space JSON allows before a value

Trace = tuple[str | None, str | None, str | None, str | None]
_NONE: Final[Trace] = (None, None, None, None)


def _hex(s: str, sizes: tuple[int, ...]) -> bool:
    return len(s) in sizes and not s.strip(_HEX)  # (nothing left: every character is one of them)


def _zero(s: str) -> bool:
    return s.strip("0") == ""


def _text(name: str, value: bytes | None) -> tuple[str | None, str | None]:
    """A header's value as ASCII text, or a problem."""
    if value is None:
        return None, f"{name}: null value"
    if len(value) > MAX_TRACE_HEADER:
        return None, f"{name}: {len(value)} bytes (at most {MAX_TRACE_HEADER})"
    try:
        return value.decode("ascii"), None
    except UnicodeDecodeError:
        return None, f"{name}: not ASCII text"


def _bad(name: str, why: str) -> Trace:
    return None, None, None, f"{name}: {why}"


def _w3c(v: str) -> Trace:
    parts = v.split("-")
    if len(parts) < 4 or not _hex(parts[0], (2,)):
        return _bad("traceparent", "not version-traceid-parentid-flags")
    if parts[0] == "ff":
        return _bad("traceparent", "version ff is invalid")
    if parts[0] == "00" and len(parts) != 4:
        return _bad("traceparent", "version 00 has four fields")
    trace, span, flags = parts[1], parts[2], parts[3]
    if not _hex(trace, (32,)) or not _hex(span, (16,)) or not _hex(flags, (2,)):
        return _bad("traceparent", "trace id, parent id or flags of the wrong length or not lowercase hex")
    if _zero(trace) or _zero(span):
        return _bad("traceparent", "all-zero trace id or parent id")
    return trace, span, "w3c", None


def _b3_ids(trace: str, span: str, name: str, fmt: str) -> Trace:
    trace, span = trace.lower(), span.lower()
    if not _hex(trace, (16, 32)) or not _hex(span, (16,)):
        return _bad(name, "trace id (16 or 32 hex digits) or span id (16) malformed")
    if _zero(trace) or _zero(span):
        return _bad(name, "all-zero trace id or span id")
    return trace, span, fmt, None


def _b3(v: str) -> Trace:
    if v in ("0", "1", "d"):  # a sampling decision only: no trace to name
        return _NONE
    parts = v.split("-")
    if len(parts) < 2 or len(parts) > 4:
        return _bad("b3", "not traceid-spanid[-sampled[-parentspanid]]")
    return _b3_ids(parts[0], parts[1], "b3", "b3")


def _jaeger(v: str) -> Trace:
    parts = v.replace("%3A", ":").replace("%3a", ":").split(":")
    if len(parts) != 4:
        return _bad("uber-trace-id", "not traceid:spanid:parentid:flags")
    trace, span = parts[0].lower(), parts[1].lower()
    if not 1 <= len(trace) <= 32 or not 1 <= len(span) <= 16 or not _hex(trace, (len(trace),)) or \
            not _hex(span, (len(span),)):
        return _bad("uber-trace-id", "trace id (up to 32 hex digits) or span id (up to 16) malformed")
    if _zero(trace) or _zero(span):
        return _bad("uber-trace-id", "zero trace id or span id")
    # Jaeger drops leading zeros: ids are 64 or 128 bits
    return trace.rjust(16 if len(trace) <= 16 else 32, "0"), span.rjust(16, "0"), "jaeger", None


#: the characters of a SkyWalking id (``<uuid>.<thread>.<time>``); another is a malformed id
_SW8_ID: Final = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._-")


def _b64(s: str) -> str | None:
    try:
        out = base64.b64decode(s, validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return None
    return out if 0 < len(out) <= 128 and all(c in _SW8_ID for c in out) else None


def _sw8(v: str) -> Trace:
    parts = v.split("-")
    if len(parts) != 8 or parts[0] not in ("0", "1"):
        return _bad("sw8", "not the eight fields sample-trace-segment-span-service-instance-endpoint-target")
    trace, segment = _b64(parts[1]), _b64(parts[2])
    if trace is None or segment is None or not parts[3].isdigit() or len(parts[3]) > 10:
        return _bad("sw8", "trace id or segment id not a base64 id (letters, digits, . _ -), or span id not a number")
    return trace, f"{segment}.{int(parts[3])}", "sw8", None


def _b3multi(found: dict[str, bytes | None]) -> Trace:
    trace, problem = _text("X-B3-TraceId", found["x-b3-traceid"])
    if trace is None:
        return None, None, None, problem
    if "x-b3-spanid" not in found:
        return _bad("X-B3-SpanId", "missing beside X-B3-TraceId")
    span, problem = _text("X-B3-SpanId", found["x-b3-spanid"])
    if span is None:
        return None, None, None, problem
    return _b3_ids(trace, span, "X-B3-TraceId/X-B3-SpanId", "b3multi")


#: each trace format's header (B3 multi: its trace id's) and reader, in the order they are tried
_READERS: Final = (("traceparent", _w3c), ("b3", _b3), ("x-b3-traceid", None), ("uber-trace-id", _jaeger),
                   ("sw8", _sw8))
_NAMES: Final = frozenset(n for n, _ in _READERS) | {"x-b3-spanid"}


def trace_context(headers: list[tuple[str, bytes | None]] | None) -> Trace:
    """``(trace_id, span_id, trace_format, problem)`` of a record's headers (see the module)."""
    if not headers:
        return _NONE
    found: dict[str, bytes | None] = {}
    for key, value in headers:
        name = key.lower()
        if name in _NAMES:  # the last of repeated headers, as Kafka's Headers.lastHeader (and tracers) read
            found[name] = value
    for name, read in _READERS:
        if name in found:
            if read is None:
                return _b3multi(found)
            text, problem = _text(name, found[name])
            return read(text) if text is not None else (None, None, None, problem)
    return _NONE  # no trace header, or X-B3-SpanId alone: no trace to name


# -- wire formats -------------------------------------------------------------------------------------
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos`` -> (value, next position); (-1, pos) if cut or over 10 bytes."""
    value, after = uvarint(data, pos, len(data), 10)
    return (value, after) if after >= 0 else (-1, pos)


def _protobuf(data: bytes, pos: int) -> bool:
    """Confluent's Protocol Buffers framing from ``pos``: a zigzag count of message indexes (0 alone:
    the first message) and the indexes, then a whole message: fields 1.. of wire types 0, 1, 2, 5,
    each in bounds, ending exactly at the end, at least one."""
    count, pos = _varint(data, pos)
    if count < 0:
        return False
    count = (count >> 1) ^ -(count & 1)
    if count < 0 or count > 100:
        return False
    for _ in range(count):
        index, pos = _varint(data, pos)
        if index < 0:
            return False
    n, end = 0, len(data)
    while pos < end:
        tag, pos = _varint(data, pos)
        if tag < 8:  # field 0 or cut
            return False
        kind = tag & 7
        if kind == 0:
            value, pos = _varint(data, pos)
            if value < 0:
                return False
        elif kind == 1:
            pos += 8
        elif kind == 5:
            pos += 4
        elif kind == 2:
            size, pos = _varint(data, pos)
            if size < 0:
                return False
            pos += size
        else:
            return False
        if pos > end:
            return False
        n += 1
    return n > 0


#: JSON tokens and white space, one after another (RFC 8259's lexical grammar; a string's bytes are
#: checked as UTF-8 apart)
_TOKENS: Final = re.compile(rb'(?:[ \t\r\n]+|[{}\[\]:,]|"(?:[^"\\\x00-\x1f]|\\["\\/bfnrtu])*"'
                            rb'|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)*')
#: the start of a token that the end of a look cut
_CUT_TOKEN: Final = re.compile(rb'(?:"(?:[^"\\\x00-\x1f]|\\["\\/bfnrtu])*\\?|-?[0-9.eE+-]*'
                               rb'|t(?:r(?:u)?)?|f(?:a(?:l(?:s)?)?)?|n(?:u(?:l)?)?)\Z')


def _utf8_prefix(data: bytes) -> bool:
    """The bytes are UTF-8, a last character cut by the end of the look allowed."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return False
    return True


def _json(data: bytes, pos: int = 0) -> bool:
    """JSON text: an object or array (after white space). A text of at most MAX_JSON_LOOK bytes
    parses whole; a longer one is looked at, never parsed: its first MAX_JSON_LOOK bytes are JSON
    tokens in UTF-8 and it ends (before white space) with the bracket that closes its first."""
    if pos >= len(data):
        return False
    c = data[pos]
    if c == 0x7B:  # (most JSON starts at once: no white space to strip)
        first = b"{"
    elif c == 0x5B:
        first = b"["
    elif c in _JSON_SPACE:
        first = data[pos:pos + 64].lstrip(b" \t\r\n")[:1]
    else:
        return False
    if first not in (b"{", b"["):  # parsed only where it looks like JSON
        return False
    if len(data) - pos <= MAX_JSON_LOOK:
        return _whole_json(data[pos:])
    last = bytes(data[-64:]).rstrip(b" \t\r\n")[-1:]
    if last != (b"}" if first == b"{" else b"]"):
        return False
    head = bytes(data[pos:pos + MAX_JSON_LOOK])
    m = _TOKENS.match(head)
    return m is not None and _CUT_TOKEN.match(head, m.end()) is not None and _utf8_prefix(head)


def json_bounded(data: bytes | None, limit: int = MAX_JSON_LOOK) -> object:
    """The JSON value of ``data`` where it is at most ``limit`` bytes of UTF-8 JSON text; else None
    (a longer text is never parsed: its objects would take many times its size in memory)."""
    if data is None or not data or len(data) > limit:
        return None
    try:
        return json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def _whole_json(data: bytes) -> bool:
    """Is ``data`` (at most MAX_JSON_LOOK bytes) one JSON text, as the json module reads it? orjson
    answers first: it reads the bytes as they are, in a third of the json module's time (every record
    value is asked). What it refuses, the json module decides: it takes a few texts orjson does not
    (NaN, a number out of a double's range, an escaped lone surrogate), and the answer is its own.
    (A grammar check in compiled Python that makes no value was tried: 340 ns a 52-byte value
    against orjson's 370 ns, not worth a second reading of JSON.)"""
    try:
        _loads(data)
    except ValueError:  # (orjson.JSONDecodeError is one)
        return json_bounded(data) is not None
    return True


def wire_format(data: bytes | None) -> tuple[str | None, int | None, str | None]:
    """``(format, schema_id, problem)`` of a record key or value (see the module)."""
    if data is None:
        return None, None, None
    if data[:1] == b"\x00":
        if len(data) < 5:
            return "binary", None, f"magic byte 0 but {len(data)} bytes: no room for a schema id"
        sid = int.from_bytes(data[1:5], "big")
        if sid == 0:
            if len(data) >= 9 and int.from_bytes(data[1:9], "big") > 0:
                return "apicurio", int.from_bytes(data[1:9], "big"), None
            return "binary", None, "magic byte 0 but schema id 0 (registries number from 1)"
        if _json(data, 5):
            return "confluent-json", sid, None
        if _protobuf(data, 5):
            return "confluent-protobuf", sid, None
        return "confluent", sid, None
    if _json(data):
        return "json", None, None
    if isinstance(data, bytes) and data.isascii():  # (ASCII is UTF-8: no text made to tell)
        return "utf8", None, None
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return "binary", None, None
    return "utf8", None, None
