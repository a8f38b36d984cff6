"""Frame bodies -> Python values, by interpreting the message schemas in protocol/messages.json.

One small interpreter serves every api key, version and direction: the schemas say which fields
come in which order with which types, and whether the version is flexible (compact lengths,
tagged fields). No version is special-cased here, except the one quirk Kafka itself has: a broker
answers an ApiVersions request it cannot serve with a v0-shaped body (error 35).

Output: dicts with Kafka's field names; bytes as base64 strings; ``records`` fields as the list of
their batches' metadata (see :mod:`spark_kafkawire.records`), never payload bytes; unknown tagged
fields under ``"_unknown_tagged_fields"`` as ``{"tag": n, "data": base64}``.

Every length and count is checked against the bytes that remain before anything is allocated.
"""

from __future__ import annotations

import base64
import json
import uuid
from functools import lru_cache
from importlib import resources
from struct import Struct
from typing import NamedTuple

from . import records as rec

NULLABLE, ARRAY, ERROR_CODE = 1, 2, 4
#: bytes fields that carry credentials: SASL tokens (PLAIN passwords, SCRAM proofs and server
#: signatures), delegation-token HMACs, SCRAM salts and salted passwords, and Envelope's wrapped
#: request. Their values never leave the decoder; only a length (and a SASL user name) remain.
SECRET_FIELDS = frozenset({"AuthBytes", "Hmac", "Salt", "SaltedPassword", "RequestData"})
API_VERSIONS = 18
UNSUPPORTED_VERSION = 35

_FIXED = {
    "int8": Struct("!b"), "int16": Struct("!h"), "int32": Struct("!i"), "int64": Struct("!q"),
    "uint16": Struct("!H"), "float64": Struct("!d"), "bool": Struct("!?"),
}
_I16 = _FIXED["int16"]
_I32 = _FIXED["int32"]


class RecordOptions(NamedTuple):
    """How records fields are read: the decompression cap, and whether to keep their raw bytes."""

    max_decompressed: int = rec.DEFAULT_MAX_DECOMPRESSED
    keep_raw: bool = False


DEFAULT_RECORD_OPTIONS = RecordOptions()


class RawRecords(list):
    """A records field's batch summaries (the list) with the field's bytes in ``.data``."""

    def __init__(self, summary: list, data: bytes):
        super().__init__(summary)
        self.data = data


class BodyError(ValueError):
    def __init__(self, message: str, offset: int):
        super().__init__(f"{message} at body byte {offset}")
        self.offset = offset


class Field:
    __slots__ = ("name", "type", "fixed", "nullable", "array", "error", "tag", "sub")

    def __init__(self, name: str, typ: str, flags: int, tag: int, sub: int):
        self.name = name
        self.type = typ
        self.fixed = _FIXED.get(typ)
        self.nullable = bool(flags & NULLABLE)
        self.array = bool(flags & ARRAY)
        self.error = bool(flags & ERROR_CODE)
        self.tag = tag
        self.sub = sub


class Schemas:
    """messages.json, compiled once per process."""

    def __init__(self, data: dict):
        self.structs: list[tuple[list[Field], dict[int, Field]]] = []
        for fields in data["structs"]:
            fl = [Field(*f) for f in fields]
            self.structs.append(([f for f in fl if f.tag < 0], {f.tag: f for f in fl if f.tag >= 0}))
        self.messages: dict[tuple[int, int, bool], tuple[int, bool]] = {}
        for key, kinds in data["messages"].items():
            for kind, versions in kinds.items():
                for ver, (sid, flex) in versions.items():
                    self.messages[(int(key), int(ver), kind == "request")] = (sid, bool(flex))
        self.newest: dict[tuple[int, bool], int] = {}
        for key, ver, req in self.messages:
            self.newest[(key, req)] = max(ver, self.newest.get((key, req), -1))

    def has(self, api_key: int, version: int, request: bool) -> bool:
        return (api_key, version, request) in self.messages


@lru_cache(maxsize=1)
def schemas() -> Schemas:
    pkg = resources.files("spark_kafkawire.protocol")
    data = json.loads(pkg.joinpath("messages.json").read_text())
    return Schemas(data)


class _Reader:
    __slots__ = ("buf", "end", "flex", "s", "opts")

    def __init__(self, buf: bytes, end: int, flexible: bool, s: Schemas, opts: "RecordOptions"):
        self.buf = buf
        self.end = end
        self.flex = flexible
        self.s = s
        self.opts = opts

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

    def value(self, f: Field, pos: int):
        buf, end = self.buf, self.end
        st = f.fixed
        if st is not None:
            if pos + st.size > end:
                raise BodyError(f"{f.name} runs past the end", pos)
            return st.unpack_from(buf, pos)[0], pos + st.size
        t = f.type
        if t == "string":
            n, pos = self.length(pos, False)
            if n < 0:
                return None, pos
            if pos + n > end:
                raise BodyError(f"{f.name}: string of {n} bytes runs past the end", pos)
            return buf[pos : pos + n].decode("utf-8", "replace"), pos + n
        if t in ("bytes", "records"):
            n, pos = self.length(pos, True)
            if n < 0:
                return None, pos
            if pos + n > end:
                raise BodyError(f"{f.name}: {n} bytes run past the end", pos)
            if t == "records":
                summary = rec.summarize(buf[pos : pos + n], self.opts.max_decompressed)
                if self.opts.keep_raw:  # rows=records: the bytes ride along, never into JSON
                    summary = RawRecords(summary, bytes(buf[pos : pos + n]))
                return summary, pos + n
            if f.name in SECRET_FIELDS:
                return redact(f.name, buf[pos : pos + n]), pos + n
            return base64.b64encode(buf[pos : pos + n]).decode(), pos + n
        if t == "uuid":
            if pos + 16 > end:
                raise BodyError(f"{f.name} runs past the end", pos)
            return str(uuid.UUID(bytes=bytes(buf[pos : pos + 16]))), pos + 16
        if t == "struct":
            if f.nullable and not f.array:
                if pos + 1 > end:
                    raise BodyError(f"{f.name} runs past the end", pos)
                if buf[pos] == 0xFF:
                    return None, pos + 1
                pos += 1
            return self.struct(f.sub, pos)
        raise BodyError(f"unknown type {t}", pos)

    def field(self, f: Field, pos: int):
        if not f.array:
            return self.value(f, pos)
        n, pos = self.length(pos, True)
        if n < 0:
            return None, pos
        if n > self.end - pos:  # every element takes at least one byte
            raise BodyError(f"{f.name}: {n} elements cannot fit in {self.end - pos} bytes", pos)
        out = []
        for _ in range(n):
            v, pos = self.value(f, pos)
            out.append(v)
        return out, pos

    def struct(self, sid: int, pos: int, tags: bool = True) -> tuple[dict, int]:
        regular, tagged = self.s.structs[sid]
        out: dict = {}
        for f in regular:
            out[f.name], pos = self.field(f, pos)
        if self.flex and tags:
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
                    sub = _Reader(self.buf, pos + size, True, self.s, self.opts)
                    out[f.name], _ = sub.field(f, pos)
                pos += size
        return out, pos


def redact(name: str, data: bytes) -> dict:
    """What may be said of a secret: its length, and the user name of a SASL PLAIN/SCRAM token."""
    out: dict = {"redacted": True, "length": len(data)}
    if name == "AuthBytes":
        parts = bytes(data).split(b"\x00")
        if len(parts) == 3:  # PLAIN: authzid NUL user NUL password
            out["mechanism_hint"] = "PLAIN"
            out["user"] = parts[1].decode("utf-8", "replace")
        elif data[:3] in (b"n,,", b"y,,", b"p=t") or data[:2] in (b"n,", b"y,"):  # SCRAM client-first
            for attr in bytes(data).split(b","):
                if attr.startswith(b"n=") and len(attr) > 2:
                    out["mechanism_hint"] = "SCRAM"
                    out["user"] = attr[2:].decode("utf-8", "replace")
    return out


def decode_body(api_key: int, version: int, request: bool, data: bytes, pos: int,
                opts: RecordOptions = DEFAULT_RECORD_OPTIONS) -> tuple[dict, int]:
    """Decode the body that starts at data[pos]; returns (value, version used for it).

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
            return _decode(s, API_VERSIONS, 0, False, data, pos, opts), 0
        except BodyError:
            return {"ErrorCode": UNSUPPORTED_VERSION, "_trailing_bytes": _b64(data[pos + 2 :])}, 0
    if (api_key, version, request) not in s.messages:
        older = s.newest.get((api_key, request))
        if older is None or older >= version:
            raise KeyError((api_key, version, request))
        value = _decode(s, api_key, older, request, data, pos, opts)
        if "_trailing_bytes" in value:
            raise BodyError(f"no schema for version {version}, and version {older}'s does not fit", pos)
        value["_decoded_as_version"] = older
        return value, older
    return _decode(s, api_key, version, request, data, pos, opts), version


def _decode(s: Schemas, api_key: int, version: int, request: bool, data: bytes, pos: int,
            opts: RecordOptions = DEFAULT_RECORD_OPTIONS) -> dict:
    sid, flex = s.messages[(api_key, version, request)]
    reader = _Reader(data, len(data), flex, s, opts)
    try:
        value, end = reader.struct(sid, pos)
    except BodyError:
        # a body that ends exactly before its top-level tagged-field count: some brokers (Tansu
        # 0.5) leave it out after an empty array. Kept, and said so; anything else stays an error.
        if not flex:
            raise
        try:
            value, end = reader.struct(sid, pos, tags=False)
        except BodyError:
            end = -1
        if end != len(data):
            raise
        value["_missing_tagged_fields"] = True
    if end != len(data):
        value["_trailing_bytes"] = _b64(data[end:])
    return value


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def walk(value, visit, path=()):
    """Call visit(path, key, value) for every field of a decoded body."""
    if isinstance(value, dict):
        for k, v in value.items():
            visit(path, k, v)
            if isinstance(v, (dict, list)):
                walk(v, visit, path + (k,))
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, (dict, list)):
                walk(v, visit, path)
