"""A message body decoded, by its api key, version and direction: the entry points over body.py's
interpreter. :func:`decode_with_facts` reads a whole body (its own version's layout, or the newest
known one for a client ahead of this release; the ApiVersions quirk: a broker answers a request it
cannot serve with a v0-shaped body), in text mode where the rows show bodies, with the readers
codegen.py generates where the interpreter is not compiled; :func:`leading_field` reads one
top-level field by itself (a Produce request's Acks without its records)."""

from __future__ import annotations

from struct import error as struct_error
from typing import Final

from librt.strings import BytesWriter, read_i16_be

from .. import protocol
from ..compiled import native
from .wiretypes import Bytes
from .layouts import Schemas, schemas
from .headers import message_code
from .secrets import b64
from .body import DEFAULT_RECORD_OPTIONS, BodyError, Facts, RecordOptions, JSON_BYTES, BodyReader, Redo

API_VERSIONS: Final = protocol.API_VERSIONS_KEY
UNSUPPORTED_VERSION: Final = protocol.UNSUPPORTED_VERSION
#: decode with the readers codegen.py generates from the same layouts (False: interpret only). Where
#: the stages run compiled (compiled.py), body.py's interpreter is faster than the generated readers,
#: which are interpreted Python: it reads every body itself.
GENERATED = not native


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
            read_i16_be(data, pos) == UNSUPPORTED_VERSION:
        # the broker does not support the requested version and answers with a v0-shaped body;
        # if even that does not fit (librdkafka's mock cluster), the error code is all there is
        try:
            return _with_version(_read_layout(s, API_VERSIONS, 0, False, data, pos, opts), 0)
        except BodyError:
            return ({"ErrorCode": UNSUPPORTED_VERSION, "_trailing_bytes": b64(data[pos + 2 :])}, 0,
                    Facts(UNSUPPORTED_VERSION))
    layout = s.layouts.get(message_code(api_key, version, request))
    if layout is not None:  # its own version's layout (nearly every body)
        return _with_version(_read_layout(s, api_key, version, request, data, pos, opts, opts.text, layout), version)
    used = _layout_version(s, api_key, version, request)
    if used is None:
        raise KeyError((api_key, version, request))
    if used != version:
        value, facts = _read_layout(s, api_key, used, request, data, pos, opts)
        if "_trailing_bytes" in value:
            raise BodyError(f"no schema for version {version}, and version {used}'s does not fit", pos)
        value["_decoded_as_version"] = used
        return value, used, facts
    return _with_version(_read_layout(s, api_key, version, request, data, pos, opts, opts.text), version)


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
            value = values.get(data[pos : pos + n], _MISSING)
            if value is not _MISSING:
                return value
    s = schemas()
    used = _layout_version(s, api_key, version, request)
    if used is None:
        return None
    sid, flex = s.messages[(api_key, used, request)]
    reader = BodyReader(data, len(data), flex, s, DEFAULT_RECORD_OPTIONS)
    start = pos
    try:
        for f in s.structs[sid][0]:
            value, pos = reader.field(f, pos)
            if f.name == name:
                if _leading_count >= LEADING_KEPT:
                    _LEADING.clear()
                    _leading_count = 0
                _LEADING.setdefault(key, {}).setdefault(pos - start, {})[data[start:pos]] = value
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


def _read_layout(s: Schemas, api_key: int, version: int, request: bool, data: Bytes, pos: int,
                 opts: RecordOptions = DEFAULT_RECORD_OPTIONS, text: bool = False,
                 layout: tuple[int, bool] | None = None) -> tuple[dict, Facts]:
    sid, flex = layout if layout is not None else s.messages[(api_key, version, request)]
    guard = api_key not in s.secret_apis
    if text and guard and not GENERATED:  # (secret bodies are sealed as values: seal())
        decoded = _decode_text(s, sid, flex, data, pos, opts)
        if decoded is not None:
            return decoded
    if GENERATED:
        from . import codegen

        reader = BodyReader(data, len(data), flex, s, opts, guard=guard)
        try:
            value, end = codegen.reader(s, sid, flex)(data, pos, reader, False)
        except (codegen.Slow, BodyError, struct_error, IndexError, ValueError):
            pass  # left to the interpreter, from scratch
        else:
            if end != len(data):
                value["_trailing_bytes"] = b64(data[end:])
            return value, reader.facts
    reader = BodyReader(data, len(data), flex, s, opts, guard=guard)
    try:
        value, end = reader.struct(sid, pos)
    except BodyError:
        # a body that ends exactly before its top-level tagged-field count: some brokers (Tansu
        # 0.5) leave it out after an empty array. Kept, and said so; anything else stays an error.
        if not flex:
            raise
        reader = BodyReader(data, len(data), flex, s, opts, guard=guard)
        try:
            value, end = reader.struct(sid, pos, tags=False)
        except BodyError:
            end = -1
        if end != len(data):
            raise
        value["_missing_tagged_fields"] = True
    if end != len(data):
        value["_trailing_bytes"] = b64(data[end:])
    return value, reader.facts




def _decode_text(s: Schemas, sid: int, flex: bool, data: Bytes, pos: int,
                 opts: RecordOptions) -> tuple[dict, Facts] | None:
    """Text mode: (the top level's values, the facts with the body's JSON text), or None to read
    it again as values (what text mode leaves to the dict mode, a body that does not fit)."""
    out = BytesWriter()
    reader = BodyReader(data, len(data), flex, s, opts, out=out)
    try:
        top, end = reader.struct(sid, pos)
    except (Redo, BodyError):
        return None
    if end != len(data):
        sep = b"" if len(out) == 2 else b","  # after "{" of a body with no fields, or after a field
        top["_trailing_bytes"] = trailing = b64(data[end:])
        out.truncate(len(out) - 1)  # its closing brace
        out.write(sep + b'"_trailing_bytes":' + JSON_BYTES(trailing) + b"}")
    reader.facts.text = out.getvalue()
    return top, reader.facts
