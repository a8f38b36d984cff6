"""Frame bodies -> Python values, by interpreting the message schemas in protocol/messages.json.

One small interpreter serves every api key, version and direction: the schemas say which fields
come in which order with which types, and whether the version is flexible (compact lengths,
tagged fields). No version is special-cased here, except the one quirk Kafka itself has: a broker
answers an ApiVersions request it cannot serve with a v0-shaped body (error 35).

Output: dicts with Kafka's field names; bytes as base64 strings; ``records`` fields as the list of
their batches' metadata (see :mod:`spark_kafkawire.kafka.records`), never payload bytes; unknown tagged
fields under ``"_unknown_tagged_fields"`` as ``{"tag": n, "data": base64}``.

Every length and count is checked against the bytes that remain before anything is allocated.

Text mode (``RecordOptions.text``, the rows that show bodies): the same walk writes the body's JSON
text straight from the wire bytes, byte for byte what ``orjson.dumps`` makes of the value the dict
mode builds, and keeps as Python values only what the rows need besides (the top-level fields, a
TopicId's sibling names, the headline facts). What it does not write itself (an unknown or
repeated tag, a body that needs a second reading) it leaves to the dict mode, from scratch.
"""

from __future__ import annotations

from binascii import b2a_base64
from typing import Final, NamedTuple

from librt.strings import BytesWriter, read_f64_be, read_i16_be, read_i32_be, read_i64_be

from .. import protocol
from ..compiled import require
from .jsontext import int_text
from .wiretypes import VARINT_CUT, Bytes, uvarint
from . import codecs
from . import batchsummary as summaries
from .sasl import suspect, token_shaped
from .values import RawRecords
from .layouts import F_BOOL, F_INT8, F_INT16, F_INT32, F_INT64, F_UINT16, HL_ERROR, HL_NAME, HL_PARTITIONS, \
    HL_RECORDS, HL_TOPIC, HL_TOPIC_ID, HL_TOPIC_NAMES, J_BOOL, J_INT, K_BYTES, K_FIXED, K_RECORDS, K_STRING, K_STRUCT, \
    K_UUID, ZERO_UUID, Field, Schemas, uuid_text
from .secrets import SECRET_FIELDS, b64, redact

API_VERSIONS: Final = protocol.API_VERSIONS_KEY
SASL_HANDSHAKE: Final = protocol.SASL_HANDSHAKE_KEY
UNSUPPORTED_VERSION: Final = protocol.UNSUPPORTED_VERSION

JSON_BYTES: Final = require("orjson", "orjson").dumps
_NULL: Final = b"null"
_LBRACE: Final = 0x7B  # {
_RBRACE: Final = 0x7D  # }
_LBRACKET: Final = 0x5B  # [
_RBRACKET: Final = 0x5D  # ]
_COMMA: Final = 0x2C
_QUOTE: Final = 0x22
_UNUSED: Final = BytesWriter()  # a dict-mode reader's (never written)


class RecordOptions(NamedTuple):
    """How records fields are read: the decompression cap, and whether to keep their raw bytes."""

    max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED
    keep_raw: bool = False
    text: bool = False  # write each body's JSON text as it is read (Facts.text); the value keeps the top level


DEFAULT_RECORD_OPTIONS = RecordOptions()


class Redo(Exception):
    """Text mode meets what it leaves to the dict mode."""


class BodyError(ValueError):
    def __init__(self, message: str, offset: int):
        super().__init__(f"{message} at body byte {offset}")
        self.offset = offset


class Facts:
    """What the headline columns need from a body, gathered while it is decoded, so that the
    decoded value is never walked again. The rules are headline.py's (walkers over decoded values by
    the same rules, tests/tools/headline_reference.py, are the reference the tests compare with):

    error          the top-level ErrorCode if non-zero, else the first non-zero ``*ErrorCode`` in
                   breadth-first order (the shallowest, and the first at that depth), else 0
    topics         topic names in order, and ("id", uuid) for a TopicId without a name beside it
    partitions     entries of the outermost Partition* arrays (None: there are none)
    records, record_bytes   totals of the complete batches of ``Records`` fields
    topic_ids      (TopicId, name) pairs the body states
    text           the body as JSON (text mode), else None
    """

    __slots__ = ("error", "error_level", "topics", "partitions", "records", "record_bytes", "topic_ids",
                 "in_partitions", "text")

    def __init__(self, error: int = 0):
        self.error = error
        self.error_level = 1 << 30
        self.topics: list = []
        self.partitions: int | None = None
        self.records = self.record_bytes = 0
        self.topic_ids: list[tuple[str, str]] = []
        self.in_partitions = 0
        self.text: bytes | None = None


class _Cursor:
    """Where a body is read and what it has told so far: its bytes, the reads of lengths and
    varints, and the facts noted for the headline columns (the walk itself is BodyReader's)."""

    __slots__ = ("buf", "end", "flex", "facts", "depth")

    def __init__(self, buf: Bytes, end: int, flexible: bool, facts: Facts | None, depth: int):
        self.buf = buf
        self.end = end
        self.flex = flexible
        self.facts = facts if facts is not None else Facts()
        self.depth = depth  # nesting as a breadth-first walk counts it: a struct 1, an array 1

    def uvarint(self, pos: int) -> tuple[int, int]:
        """An unsigned varint of at most 5 bytes (a length, count or tag)."""
        if pos < self.end:  # (one byte: nearly every length, count and tag; the rest as uvarint reads them)
            first = self.buf[pos]
            if first < 0x80:
                return first, pos + 1
        value, after = uvarint(self.buf, pos, self.end, 5)
        if after < 0:
            raise BodyError("varint runs past the end" if after == VARINT_CUT else "varint longer than 5 bytes",
                            self.end if after == VARINT_CUT else pos + 5)
        return value, after

    def length(self, pos: int, wide: bool) -> tuple[int, int]:
        """A length or count: -1 for null."""
        if self.flex:
            n, pos = self.uvarint(pos)
            return n - 1, pos
        if wide:
            if pos + 4 > self.end:
                raise BodyError("length runs past the end", pos)
            return read_i32_be(self.buf, pos), pos + 4
        if pos + 2 > self.end:
            raise BodyError("length runs past the end", pos)
        return read_i16_be(self.buf, pos), pos + 2

    def _fact(self, f: Field, v, in_topic: bool, tid_at: int) -> int:
        """Note what a decoded field tells the headline columns; returns where a TopicId waits."""
        facts = self.facts
        hl = f.hl
        if hl == HL_ERROR:
            if v:
                level = 0 if self.depth == 1 and f.name == "ErrorCode" else self.depth
                if level < facts.error_level:
                    facts.error, facts.error_level = v, level
        elif hl == HL_TOPIC or (hl == HL_NAME and in_topic):
            if v is not None:
                facts.topics.append(v)
        elif hl == HL_TOPIC_ID:
            if v is not None and v != ZERO_UUID:
                facts.topics.append(("id", v))
                return len(facts.topics) - 1
        elif hl == HL_TOPIC_NAMES:
            if v:
                facts.topics.extend(t for t in v if t is not None)
        elif hl == HL_RECORDS:
            if v:
                c, b = summaries.totals(v)
                facts.records += c
                facts.record_bytes += b
        return tid_at

    def _topic_id(self, out: dict, at: int) -> None:
        """A struct with a TopicId: a name beside it makes it a (TopicId, name) pair, and the id
        is not a topic of its own; without one the id stands for the topic."""
        name = out.get("Name") or out.get("TopicName") or out.get("Topic")
        if name:
            self.facts.topics[at] = None
            if isinstance(name, str):
                self.facts.topic_ids.append((out["TopicId"], name))


class BodyReader(_Cursor):
    """The walk of a body's layout: values (dict mode) or their JSON text (text mode)."""

    __slots__ = ("s", "opts", "budget", "guard", "text", "out")

    def __init__(self, buf: Bytes, end: int, flexible: bool, s: Schemas, opts: "RecordOptions",
                 facts: Facts | None = None, depth: int = 0, budget: codecs.Budget | None = None, guard: bool = True,
                 out: BytesWriter | None = None):
        _Cursor.__init__(self, buf, end, flexible, facts, depth)
        # text mode: the JSON text's pieces go to ``out``, and values are kept only where needed
        self.text = out is not None
        self.out: BytesWriter = out if out is not None else _UNUSED
        self.budget = budget if budget is not None else codecs.Budget(opts.max_decompressed)  # one per message
        # refuse strings with a SASL token's shape (sasl.py); not in the bodies of messages that
        # carry secrets, which are sealed instead (seal(): a known secret in a string is redacted)
        self.guard = guard
        self.s = s
        self.opts = opts

    def value(self, f: Field, pos: int) -> tuple[object, int]:
        buf, end = self.buf, self.end
        kind = f.kind
        if kind == K_FIXED:
            if pos + f.size > end:
                raise BodyError(f"{f.name} runs past the end", pos)
            v = _read_fixed(buf, pos, f.code)
            if self.text:
                self.out.write(_fixed_text(f, v))
            return v, pos + f.size
        if kind == K_STRING:
            return self.string(f, pos)
        if kind == K_BYTES or kind == K_RECORDS:
            return self.bytes_value(f, pos, kind == K_RECORDS)
        if kind == K_UUID:
            if pos + 16 > end:
                raise BodyError(f"{f.name} runs past the end", pos)
            u = uuid_text(bytes(buf[pos : pos + 16]))
            if self.text:
                _quoted(self.out, u.encode())  # hex digits and dashes
            return u, pos + 16
        if kind == K_STRUCT:
            if f.nullable and not f.array:
                if pos + 1 > end:
                    raise BodyError(f"{f.name} runs past the end", pos)
                if buf[pos] == 0xFF:
                    if self.text:
                        self.out.write(_NULL)
                    return None, pos + 1
                pos += 1
            return self.struct(f.sub, pos, True, f.topic_array)
        raise BodyError(f"unknown type {f.type}", pos)

    def string(self, f: Field, pos: int) -> tuple[object, int]:
        n, pos = self.length(pos, False)
        if n < 0:
            if self.text:
                self.out.write(_NULL)
            return None, pos
        if pos + n > self.end:
            raise BodyError(f"{f.name}: string of {n} bytes runs past the end", pos)
        raw = self.buf[pos : pos + n]
        text = raw.decode("utf-8", "replace")
        if self.guard and suspect(text) and token_shaped(text):  # a secret's bytes, not a Kafka string
            raise BodyError(f"{f.name}: {n} bytes with the shape of a SASL token (withheld)", pos)
        if self.text:
            _string_text(self.out, raw, text)
        return text, pos + n

    def bytes_value(self, f: Field, pos: int, records: bool) -> tuple[object, int]:
        """A bytes field: a record batch's summary (``records``), a secret's length, else base64."""
        buf = self.buf
        n, pos = self.length(pos, True)
        if n < 0:
            if self.text:
                self.out.write(_NULL)
            return None, pos
        if pos + n > self.end:
            raise BodyError(f"{f.name}: {n} bytes run past the end", pos)
        if records:
            return _records(self, pos, pos + n), pos + n
        if f.name in SECRET_FIELDS:
            secret = redact(f.name, buf[pos : pos + n])
            if self.text:
                self.out.write(JSON_BYTES(secret))
            return secret, pos + n
        b64 = b2a_base64(buf[pos : pos + n], newline=False)  # (base64.b64encode's own call, without its frame)
        if self.text:
            _quoted(self.out, b64)
            if self.depth != 1:  # only the top level's values are kept
                return None, pos + n
        return b64.decode(), pos + n

    def field(self, f: Field, pos: int) -> tuple[object, int]:
        if not f.array:
            return self.value(f, pos)
        n, pos = self.length(pos, True)
        if n < 0:
            if self.text:
                self.out.write(_NULL)
            return None, pos
        if n > self.end - pos:  # every element takes at least one byte
            raise BodyError(f"{f.name}: {n} elements cannot fit in {self.end - pos} bytes", pos)
        facts = self.facts
        partitions = f.hl == HL_PARTITIONS
        if partitions:
            if not facts.in_partitions:
                facts.partitions = (facts.partitions or 0) + n
            facts.in_partitions += 1
        self.depth += 1
        out: list | None = None
        if self.text:  # the elements' text; their values only where a fact needs them (TopicNames)
            text = self.out
            if f.hl == HL_TOPIC_NAMES:
                out = []
            text.append(_LBRACKET)
            for i in range(n):
                if i:
                    text.append(_COMMA)
                v, pos = self.value(f, pos)
                if out is not None:
                    out.append(v)
            text.append(_RBRACKET)
        else:
            out = []
            for _ in range(n):
                v, pos = self.value(f, pos)
                out.append(v)
        self.depth -= 1
        if partitions:
            facts.in_partitions -= 1
        return out, pos

    def struct(self, sid: int, pos: int, tags: bool = True, in_topic: bool = False) -> tuple[dict, int]:
        regular, tagged = self.s.structs[sid]
        self.depth += 1
        out: dict = {}
        tid_at = -1
        text = self.text
        # text mode keeps the values of the top level's fields and of a struct with a TopicId
        # (its sibling name) only, and those of scalars only
        keep = not text or self.depth == 1 or self.s.has_topic_id[sid]
        if text:
            self.out.append(_LBRACE)
        first = True
        for f in regular:
            if text:
                self.out.write(f.key if first else f.next_key)
                first = False
            v, pos = self.field(f, pos)
            if keep and (f.scalar or not text):
                out[f.name] = v
            if f.hl:
                tid_at = self._fact(f, v, in_topic, tid_at)
        if self.flex and tags:
            pos, tid_at = self.tagged_fields(tagged, out, pos, in_topic, tid_at, first, keep)
        if tid_at >= 0:
            self._topic_id(out, tid_at)
        if text:
            self.out.append(_RBRACE)
        self.depth -= 1
        return out, pos

    def tagged_fields(self, tagged: dict[int, Field], out: dict, pos: int, in_topic: bool,
                      tid_at: int, first: bool = True, keep: bool = True) -> tuple[int, int]:
        """A flexible struct's tagged fields, into ``out`` (text mode: their text after the
        regular fields', ``first`` when there were none); returns (position after, TopicId index)."""
        count, pos = self.uvarint(pos)
        if not count:  # (nearly every struct)
            return pos, tid_at
        text = self.text
        seen: list[int] = []
        for _ in range(count):
            tag, pos = self.uvarint(pos)
            size, pos = self.uvarint(pos)
            if pos + size > self.end:
                raise BodyError(f"tagged field {tag} runs past the end", pos)
            f = tagged.get(tag)
            if text and (f is None or tag in seen):
                raise Redo()  # unknown or repeated: the dict mode's order of keys, not the wire's
            if f is None:
                out.setdefault("_unknown_tagged_fields", []).append(
                    {"tag": tag, "data": b64(self.buf[pos : pos + size])})
            else:
                if text:
                    seen.append(tag)
                    self.out.write(f.key if first else f.next_key)
                    first = False
                sub = BodyReader(self.buf, pos + size, True, self.s, self.opts, self.facts, self.depth, self.budget,
                              self.guard, self.out if text else None)
                v, _ = sub.field(f, pos)
                if keep and (f.scalar or not text):
                    out[f.name] = v
                if f.hl:
                    tid_at = self._fact(f, v, in_topic, tid_at)
            pos += size
        return pos, tid_at


def _records(r: BodyReader, pos: int, end: int) -> object:
    """A records field's batch summaries, read where they lie: in text mode their text, and their
    totals as facts (no value); else their values (with the bytes, for rows=records)."""
    if r.text and not r.opts.keep_raw:
        facts = r.facts
        count, size = summaries.summary_into(r.buf, pos, end, r.budget, r.out)
        facts.records += count
        facts.record_bytes += size
        return None
    summary = summaries.summarize(r.buf, r.budget, pos, end)
    if r.text:
        r.out.write(JSON_BYTES(summary))  # (its keys are text: no option needed)
    if r.opts.keep_raw:  # rows=records: the bytes ride along, never into JSON
        return RawRecords(summary, r.buf[pos:end])
    return summary


def _string_text(out: BytesWriter, raw: bytes, text: str) -> None:
    """A string's JSON text (``text``, decoded from ``raw``), as orjson writes it: bytes with
    nothing to escape (printable ASCII, no quote or backslash: topic names, ids) are written between
    quotes as they are, without a call out."""
    for i in range(len(raw)):
        c = raw[i]
        if c < 0x20 or c > 0x7E or c == 0x22 or c == 0x5C:
            out.write(JSON_BYTES(text))
            return
    _quoted(out, raw)


def _quoted(out: BytesWriter, text: bytes) -> None:
    """Text that needs no escaping (base64, a UUID), as a JSON string."""
    out.append(_QUOTE)
    out.write(text)
    out.append(_QUOTE)


def _read_fixed(buf: bytes, pos: int, code: int) -> object:
    """The fixed-width value at buf[pos] (the caller has checked that it is there), read in place."""
    if code == F_INT32:
        return read_i32_be(buf, pos)
    if code == F_INT16:
        return read_i16_be(buf, pos)
    if code == F_INT64:
        return read_i64_be(buf, pos)
    if code == F_INT8:
        b = buf[pos]
        return b - 256 if b > 127 else b
    if code == F_BOOL:
        return buf[pos] != 0
    if code == F_UINT16:
        u: int = read_i16_be(buf, pos)
        return u & 0xFFFF
    return read_f64_be(buf, pos)


def _fixed_text(f: Field, v) -> bytes:
    """A fixed-width value's JSON text, as orjson writes it."""
    if f.json == J_INT:
        return int_text(v)
    if f.json == J_BOOL:
        return b"true" if v else b"false"
    return JSON_BYTES(v)  # float64: shortest repr, NaN and infinities null
