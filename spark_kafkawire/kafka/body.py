"""Frame bodies -> Python values, by interpreting the message schemas in protocol/messages.json.

One small interpreter serves every api key, version and direction: the schemas say which fields
come in which order with which types, and whether the version is flexible (compact lengths,
tagged fields). No version is special-cased here, except the one quirk Kafka itself has: a broker
answers an ApiVersions request it cannot serve with a v0-shaped body (error 35).

Output: dicts with Kafka's field names; bytes as base64 strings; ``records`` fields as the list of
their batches' metadata (see :mod:`spark_kafkawire.kafka.records`), never payload bytes; unknown tagged
fields under ``"_unknown_tagged_fields"`` as ``{"tag": n, "data": base64}``.

Every length and count is checked against the bytes that remain before anything is allocated.
"""

from __future__ import annotations

import base64
import json
from importlib import resources
from struct import Struct
from struct import error as struct_error
from typing import Final, NamedTuple

from .. import protocol
from ..compiled import native
from .wiretypes import Bytes
from . import records as rec
from .sasl import suspect, token_shaped
from .values import RawRecords, Redacted

NULLABLE: Final = 1
ARRAY: Final = 2
ERROR_CODE: Final = 4
#: bytes fields that carry credentials: SASL tokens (PLAIN passwords, SCRAM proofs and server
#: signatures), delegation-token HMACs, SCRAM salts and salted passwords, and Envelope's wrapped
#: request. Their values never leave the decoder; only a length (and a SASL user name) remain.
SECRET_FIELDS: Final = frozenset({"AuthBytes", "Hmac", "Salt", "SaltedPassword", "RequestData"})
API_VERSIONS: Final = protocol.API_VERSIONS_KEY
SASL_HANDSHAKE: Final = protocol.SASL_HANDSHAKE_KEY
UNSUPPORTED_VERSION: Final = protocol.UNSUPPORTED_VERSION
#: decode with the readers codegen.py generates from the same layouts (False: interpret only). Where
#: this module runs compiled (compiled.py), its interpreter is faster than the generated readers,
#: which are interpreted Python: it reads every body itself.
GENERATED = not native

_FIXED: Final = {
    "int8": Struct("!b"), "int16": Struct("!h"), "int32": Struct("!i"), "int64": Struct("!q"),
    "uint16": Struct("!H"), "float64": Struct("!d"), "bool": Struct("!?"),
}
_I16: Final = _FIXED["int16"]
_I32: Final = _FIXED["int32"]


class RecordOptions(NamedTuple):
    """How records fields are read: the decompression cap, and whether to keep their raw bytes."""

    max_decompressed: int = rec.DEFAULT_MAX_DECOMPRESSED
    keep_raw: bool = False


DEFAULT_RECORD_OPTIONS = RecordOptions()


class BodyError(ValueError):
    def __init__(self, message: str, offset: int):
        super().__init__(f"{message} at body byte {offset}")
        self.offset = offset


#: what a field tells the headline columns (see Facts), decided once per field from its name and type
HL_ERROR: Final = 1
HL_TOPIC: Final = 2
HL_NAME: Final = 3
HL_TOPIC_ID: Final = 4
HL_TOPIC_NAMES: Final = 5
HL_PARTITIONS: Final = 6
HL_RECORDS: Final = 7
ZERO_UUID: Final = protocol.ZERO_UUID


def _headline_kind(name: str, typ: str, array: bool) -> int:
    if array:
        if name == "TopicNames" and typ == "string":
            return HL_TOPIC_NAMES
        return HL_PARTITIONS if name.startswith("Partition") else 0
    if name.endswith("ErrorCode") and typ in ("int8", "int16", "int32"):
        return HL_ERROR
    if typ == "string":
        return HL_TOPIC if name in ("Topic", "TopicName") else HL_NAME if name == "Name" else 0
    if name == "TopicId" and typ == "uuid":
        return HL_TOPIC_ID
    return HL_RECORDS if name == "Records" and typ == "records" else 0


#: a field's type as the interpreter tests it (one integer comparison, not a string's)
K_FIXED: Final = 0
K_STRING: Final = 1
K_BYTES: Final = 2
K_RECORDS: Final = 3
K_UUID: Final = 4
K_STRUCT: Final = 5
K_OTHER: Final = 6
_KINDS: Final = {"string": K_STRING, "bytes": K_BYTES, "records": K_RECORDS, "uuid": K_UUID, "struct": K_STRUCT}


def uuid_text(b: bytes) -> str:
    """16 bytes as a UUID's text (``str(uuid.UUID(bytes=b))``, without making the object)."""
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class Field:
    __slots__ = ("name", "type", "kind", "fixed", "size", "nullable", "array", "tag", "sub", "hl", "topic_array")

    def __init__(self, name: str, typ: str, flags: int, tag: int, sub: int):
        self.name = name
        self.type = typ
        self.fixed = _FIXED.get(typ)
        self.size = self.fixed.size if self.fixed is not None else 0
        self.kind = K_FIXED if self.fixed is not None else _KINDS.get(typ, K_OTHER)
        self.nullable = bool(flags & NULLABLE)
        self.array = bool(flags & ARRAY)
        self.tag = tag
        self.sub = sub
        self.hl = _headline_kind(name, typ, self.array)
        self.topic_array = self.array and "Topic" in name  # its elements' Name is a topic name


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
    """

    __slots__ = ("error", "error_level", "topics", "partitions", "records", "record_bytes", "topic_ids",
                 "in_partitions")

    def __init__(self, error: int = 0):
        self.error = error
        self.error_level = 1 << 30
        self.topics: list = []
        self.partitions: int | None = None
        self.records = self.record_bytes = 0
        self.topic_ids: list[tuple[str, str]] = []
        self.in_partitions = 0


class Schemas:
    """messages.json, compiled once per process."""

    def __init__(self, data: dict):
        self.structs: list[tuple[list[Field], dict[int, Field]]] = []
        self.has_topic_id: list[bool] = []
        for fields in data["structs"]:
            fl = [Field(*f) for f in fields]
            self.structs.append(([f for f in fl if f.tag < 0], {f.tag: f for f in fl if f.tag >= 0}))
            self.has_topic_id.append(any(f.hl == HL_TOPIC_ID for f in fl))
        self.messages: dict[tuple[int, int, bool], tuple[int, bool]] = {}
        for key, kinds in data["messages"].items():
            for kind, versions in kinds.items():
                for ver, (sid, flex) in versions.items():
                    self.messages[(int(key), int(ver), kind == "request")] = (sid, bool(flex))
        self.newest: dict[tuple[int, bool], int] = {}
        for key, ver, req in self.messages:
            self.newest[(key, req)] = max(ver, self.newest.get((key, req), -1))
        #: api keys with a secret field in some version and direction, and SaslHandshake: their
        #: bodies are sealed (see seal())
        self.secret_apis = {SASL_HANDSHAKE} | {key for (key, _v, _r), (sid, _f) in self.messages.items()
                                               if self._holds_secret(sid, set())}

    def _holds_secret(self, sid: int, seen: set[int]) -> bool:
        seen.add(sid)
        plain, tagged = self.structs[sid]
        for f in plain + list(tagged.values()):
            if f.name in SECRET_FIELDS or \
                    (f.type == "struct" and f.sub not in seen and self._holds_secret(f.sub, seen)):
                return True
        return False


_schemas: list[Schemas] = []


def schemas() -> Schemas:
    """messages.json's layouts, read once per process."""
    if not _schemas:
        pkg = resources.files("spark_kafkawire.protocol")
        _schemas.append(Schemas(json.loads(pkg.joinpath("messages.json").read_text())))
    return _schemas[0]


class _Reader:
    __slots__ = ("buf", "end", "flex", "s", "opts", "facts", "depth", "budget", "guard")

    def __init__(self, buf: Bytes, end: int, flexible: bool, s: Schemas, opts: "RecordOptions",
                 facts: Facts | None = None, depth: int = 0, budget: rec.Budget | None = None, guard: bool = True):
        self.budget = budget if budget is not None else rec.Budget(opts.max_decompressed)  # one per message
        # refuse strings with a SASL token's shape (sasl.py); not in the bodies of messages that
        # carry secrets, which are sealed instead (seal(): a known secret in a string is redacted)
        self.guard = guard
        self.buf = buf
        self.end = end
        self.flex = flexible
        self.s = s
        self.opts = opts
        self.facts = facts if facts is not None else Facts()
        self.depth = depth  # nesting as a breadth-first walk counts it: a struct 1, an array 1

    def uvarint(self, pos: int) -> tuple[int, int]:
        buf, end = self.buf, self.end
        value = shift = 0
        while True:
            if pos >= end:
                raise BodyError("varint runs past the end", pos)
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value, pos
            shift += 7
            if shift > 28:
                raise BodyError("varint longer than 5 bytes", pos)

    def length(self, pos: int, wide: bool) -> tuple[int, int]:
        """A length or count: -1 for null."""
        if self.flex:
            n, pos = self.uvarint(pos)
            return n - 1, pos
        st = _I32 if wide else _I16
        if pos + st.size > self.end:
            raise BodyError("length runs past the end", pos)
        return st.unpack_from(self.buf, pos)[0], pos + st.size

    def value(self, f: Field, pos: int) -> tuple[object, int]:
        buf, end = self.buf, self.end
        kind = f.kind
        if kind == K_FIXED:
            if pos + f.size > end:
                raise BodyError(f"{f.name} runs past the end", pos)
            return f.fixed.unpack_from(buf, pos)[0], pos + f.size  # type: ignore[union-attr]
        if kind == K_STRING:
            return self.string(f, pos)
        if kind == K_BYTES or kind == K_RECORDS:
            return self.bytes_value(f, pos, kind == K_RECORDS)
        if kind == K_UUID:
            if pos + 16 > end:
                raise BodyError(f"{f.name} runs past the end", pos)
            return uuid_text(bytes(buf[pos : pos + 16])), pos + 16
        if kind == K_STRUCT:
            if f.nullable and not f.array:
                if pos + 1 > end:
                    raise BodyError(f"{f.name} runs past the end", pos)
                if buf[pos] == 0xFF:
                    return None, pos + 1
                pos += 1
            return self.struct(f.sub, pos, True, f.topic_array)
        raise BodyError(f"unknown type {f.type}", pos)

    def string(self, f: Field, pos: int) -> tuple[object, int]:
        n, pos = self.length(pos, False)
        if n < 0:
            return None, pos
        if pos + n > self.end:
            raise BodyError(f"{f.name}: string of {n} bytes runs past the end", pos)
        text = self.buf[pos : pos + n].decode("utf-8", "replace")
        if self.guard and suspect(text) and token_shaped(text):  # a secret's bytes, not a Kafka string
            raise BodyError(f"{f.name}: {n} bytes with the shape of a SASL token (withheld)", pos)
        return text, pos + n

    def bytes_value(self, f: Field, pos: int, records: bool) -> tuple[object, int]:
        """A bytes field: a record batch's summary (``records``), a secret's length, else base64."""
        buf = self.buf
        n, pos = self.length(pos, True)
        if n < 0:
            return None, pos
        if pos + n > self.end:
            raise BodyError(f"{f.name}: {n} bytes run past the end", pos)
        if records:
            summary = rec.summarize(memoryview(buf)[pos : pos + n], self.budget)  # a view, not a copy
            if self.opts.keep_raw:  # rows=records: the bytes ride along, never into JSON
                return RawRecords(summary, bytes(memoryview(buf)[pos : pos + n])), pos + n
            return summary, pos + n
        if f.name in SECRET_FIELDS:
            return redact(f.name, buf[pos : pos + n]), pos + n
        return base64.b64encode(buf[pos : pos + n]).decode(), pos + n

    def field(self, f: Field, pos: int) -> tuple[object, int]:
        if not f.array:
            return self.value(f, pos)
        n, pos = self.length(pos, True)
        if n < 0:
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
        for f in regular:
            v, pos = self.field(f, pos)
            out[f.name] = v
            if f.hl:
                tid_at = self._fact(f, v, in_topic, tid_at)
        if self.flex and tags:
            pos, tid_at = self.tagged_fields(tagged, out, pos, in_topic, tid_at)
        if tid_at >= 0:
            self._topic_id(out, tid_at)
        self.depth -= 1
        return out, pos

    def tagged_fields(self, tagged: dict[int, Field], out: dict, pos: int, in_topic: bool,
                      tid_at: int) -> tuple[int, int]:
        """A flexible struct's tagged fields, into ``out``; returns (position after, TopicId index)."""
        count, pos = self.uvarint(pos)
        for _ in range(count):
            tag, pos = self.uvarint(pos)
            size, pos = self.uvarint(pos)
            if pos + size > self.end:
                raise BodyError(f"tagged field {tag} runs past the end", pos)
            f = tagged.get(tag)
            if f is None:
                out.setdefault("_unknown_tagged_fields", []).append(
                    {"tag": tag, "data": base64.b64encode(self.buf[pos : pos + size]).decode()})
            else:
                sub = _Reader(self.buf, pos + size, True, self.s, self.opts, self.facts, self.depth, self.budget,
                              self.guard)
                out[f.name], _ = sub.field(f, pos)
                if f.hl:
                    tid_at = self._fact(f, out[f.name], in_topic, tid_at)
            pos += size
        return pos, tid_at

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
                c, b = rec.totals(v)
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


def redact(name: str, data: Bytes) -> dict:
    """What may be said of a secret: its length, and the user name of a SASL PLAIN/SCRAM token."""
    data = bytes(data)
    out = Redacted(redacted=True, length=len(data))
    secrets = [data.decode("utf-8", "replace"), _b64(data)]
    if name == "AuthBytes":
        parts = data.split(b"\x00")
        if len(parts) == 3:  # PLAIN: authzid NUL user NUL password
            out["mechanism_hint"] = "PLAIN"
            out["user"] = parts[1].decode("utf-8", "replace")
            secrets.append(parts[2].decode("utf-8", "replace"))
        elif data[:3] in (b"n,,", b"y,,", b"p=t") or data[:2] in (b"n,", b"y,"):  # SCRAM client-first
            for attr in data.split(b","):
                if attr.startswith(b"n=") and len(attr) > 2:
                    out["mechanism_hint"] = "SCRAM"
                    out["user"] = attr[2:].decode("utf-8", "replace")
        # SCRAM proofs and signatures, OAUTHBEARER tokens
        for attr in data.replace(b"\x01", b",").split(b","):
            for prefix in (b"p=", b"v=", b"auth=Bearer ", b"auth="):
                if attr.startswith(prefix) and len(attr) > len(prefix):
                    secrets.append(attr[len(prefix):].decode("utf-8", "replace"))
                    break
    out.secrets = [x for x in secrets if x]
    return out


def seal(value: dict, secrets: list[str]) -> dict:
    """A body of a message with secret fields (SASL, delegation tokens, SCRAM credentials), made
    safe to show: unknown tagged fields and trailing bytes (which could hold a token a length got
    wrong) become their lengths, and any string that contains a secret of this body or of the
    connection's earlier ones (``secrets``, added to) has it replaced by ``[redacted]``."""
    _collect(value, secrets)
    return _sealed(value, sorted(set(secrets), key=len, reverse=True))


def _collect(value, secrets: list[str]) -> None:
    if isinstance(value, Redacted):
        secrets.extend(getattr(value, "secrets", ()))
    elif isinstance(value, dict):
        for v in value.values():
            _collect(v, secrets)
    elif isinstance(value, list):
        for v in value:
            _collect(v, secrets)


def _sealed(value, secrets: list[str]):
    if isinstance(value, Redacted):
        return value
    if isinstance(value, dict):
        out: dict = {}
        for k, v in value.items():
            if k == "_unknown_tagged_fields":
                out[k] = [{"tag": t["tag"], "length": len(base64.b64decode(t["data"]))} for t in v]
            elif k == "_trailing_bytes":
                out[k] = {"redacted": True, "length": len(base64.b64decode(v))}
            else:
                out[k] = _sealed(v, secrets)
        return out
    if isinstance(value, list):
        return [_sealed(v, secrets) for v in value]
    if isinstance(value, str):
        for x in secrets:
            if x in value:
                value = value.replace(x, "[redacted]")
    return value


def decode_with_facts(api_key: int, version: int, request: bool, data: Bytes, pos: int,
                      opts: RecordOptions = DEFAULT_RECORD_OPTIONS) -> tuple[dict, int, Facts]:
    """Decode the body that starts at data[pos]; returns (value, version used for it, the
    :class:`Facts` the headline columns take from it).

    Bytes left over after a complete body are kept as ``"_trailing_bytes"`` (base64), as Kafka's
    and kio's readers ignore them; some clients send them (librdkafka's Metadata v12 requests,
    old librdkafka's ApiVersions v0 requests).

    A version newer than every schema known for its api key (a client ahead of this release) is
    read with the newest known layout if that consumes the body exactly; the value then says
    ``"_decoded_as_version": n``.

    Raises KeyError when no schema is known, BodyError when the bytes do not fit the schema.
    """
    s = schemas()
    if not request and api_key == API_VERSIONS and len(data) >= pos + 2 and \
            _I16.unpack_from(data, pos)[0] == UNSUPPORTED_VERSION:
        # the broker does not support the requested version and answers with a v0-shaped body;
        # if even that does not fit (librdkafka's mock cluster), the error code is all there is
        try:
            return _with_version(_decode(s, API_VERSIONS, 0, False, data, pos, opts), 0)
        except BodyError:
            return ({"ErrorCode": UNSUPPORTED_VERSION, "_trailing_bytes": _b64(data[pos + 2 :])}, 0,
                    Facts(UNSUPPORTED_VERSION))
    used = _layout_version(s, api_key, version, request)
    if used is None:
        raise KeyError((api_key, version, request))
    if used != version:
        value, facts = _decode(s, api_key, used, request, data, pos, opts)
        if "_trailing_bytes" in value:
            raise BodyError(f"no schema for version {version}, and version {used}'s does not fit", pos)
        value["_decoded_as_version"] = used
        return value, used, facts
    return _with_version(_decode(s, api_key, version, request, data, pos, opts), version)


#: leading fields read so far: (api_key, version, request, name) -> {length of the bytes read:
#: {those bytes: the value}}; the same bytes from the body's start give the same value
_LEADING: dict[tuple, dict[int, dict[bytes, object]]] = {}
_MISSING = object()
LEADING_KEPT: Final = 1024  # values remembered in all (the bytes come from the capture: bounded)
_leading_count = 0


def leading_field(api_key: int, version: int, request: bool, data: Bytes, pos: int, name: str):
    """The value of top-level field ``name`` read by itself: the fields before it are read, nothing
    after (a Produce request's Acks without its records). None when the layout has no such field
    or the bytes do not hold it. A client sends the same leading bytes again and again (its
    transactional id, its acks): a value is remembered by the bytes it was read from (through the
    field itself)."""
    global _leading_count
    key = (api_key, version, request, name)
    seen = _LEADING.get(key)
    if seen:
        for n, values in seen.items():
            value = values.get(bytes(data[pos : pos + n]), _MISSING)  # data may be a bytearray
            if value is not _MISSING:
                return value
    s = schemas()
    used = _layout_version(s, api_key, version, request)
    if used is None:
        return None
    sid, flex = s.messages[(api_key, used, request)]
    reader = _Reader(data, len(data), flex, s, DEFAULT_RECORD_OPTIONS)
    start = pos
    try:
        for f in s.structs[sid][0]:
            value, pos = reader.field(f, pos)
            if f.name == name:
                if _leading_count >= LEADING_KEPT:
                    _LEADING.clear()
                    _leading_count = 0
                _LEADING.setdefault(key, {}).setdefault(pos - start, {})[bytes(data[start:pos])] = value
                _leading_count += 1
                return value
    except (BodyError, struct_error, IndexError, ValueError):
        pass
    return None


def _layout_version(s: Schemas, api_key: int, version: int, request: bool) -> int | None:
    """The version whose layout a body is read with: its own, or for a version newer than every
    known one (a client ahead of this release) the newest known; None when there is none."""
    if (api_key, version, request) in s.messages:
        return version
    older = s.newest.get((api_key, request))
    return older if older is not None and older < version else None


def _with_version(decoded: tuple[dict, Facts], version: int) -> tuple[dict, int, Facts]:
    return decoded[0], version, decoded[1]


def _decode(s: Schemas, api_key: int, version: int, request: bool, data: Bytes, pos: int,
            opts: RecordOptions = DEFAULT_RECORD_OPTIONS) -> tuple[dict, Facts]:
    sid, flex = s.messages[(api_key, version, request)]
    guard = api_key not in s.secret_apis
    if GENERATED:
        from . import codegen

        reader = _Reader(data, len(data), flex, s, opts, guard=guard)
        try:
            value, end = codegen.reader(s, sid, flex)(data, pos, reader, False)
        except (codegen.Slow, BodyError, struct_error, IndexError, ValueError):
            pass  # left to the interpreter, from scratch
        else:
            if end != len(data):
                value["_trailing_bytes"] = _b64(data[end:])
            return value, reader.facts
    reader = _Reader(data, len(data), flex, s, opts, guard=guard)
    try:
        value, end = reader.struct(sid, pos)
    except BodyError:
        # a body that ends exactly before its top-level tagged-field count: some brokers (Tansu
        # 0.5) leave it out after an empty array. Kept, and said so; anything else stays an error.
        if not flex:
            raise
        reader = _Reader(data, len(data), flex, s, opts, guard=guard)
        try:
            value, end = reader.struct(sid, pos, tags=False)
        except BodyError:
            end = -1
        if end != len(data):
            raise
        value["_missing_tagged_fields"] = True
    if end != len(data):
        value["_trailing_bytes"] = _b64(data[end:])
    return value, reader.facts


def _b64(data: Bytes) -> str:
    return base64.b64encode(data).decode()
