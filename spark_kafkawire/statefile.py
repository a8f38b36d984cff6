"""The state file: a read's carried stages as declared records (msgpack), and back.

A rotation series' open connections are carried from one read to the next (carry.py). What is
written is not the stages' objects but their declared fields (``RECORDS``): each carried stage has a
record type, a fixed list of fields, and for each field a type (the small language below). Writing
walks the stages by those declarations; reading builds nothing but those records, each from its
own blank constructor, checks every value against its field's type, and links the references.
Nothing in a file names a class, a module or a callable: a field's type says which record it
refers to; the callbacks the stages hold (a framer's ``on_frame``) are written as a record and one
of the few method names declared for it (``METHODS``).

The file, readable by any msgpack tool (docs/state.md has every field)::

    b"kafkawire state\\n"  then one msgpack map:
      format     int        FORMAT (a file of another format is refused by name)
      package    str        the version of spark-kafkawire that wrote it
      digest     str        sha256 of the declarations (RECORDS, METHODS): another is refused
      files      [str]      the series' files read so far
      began      int|nil    first packet time (ns) of the last file
      shapes     [str]      the row shapes the state was left for
      decoder    int        record number of the decoder, ``reasm`` of the reassembler
      records    [[type, [field values in declared order]], ...]

A field's value: nil, bool, int, float, str, bin as msgpack has them; a list, set, deque or tuple
as an array; a dict as an array of [key, value] pairs (order kept); a reference to a record as its
number in ``records``.
"""

from __future__ import annotations

import collections
import functools
from typing import Any, Callable, Final

from .statedecl import (FORMAT, METHODS, StateError, blank_makers, check_links, declared_classes, linked, declarations,
                        digest)

MAGIC: Final = b"kafkawire state\n"
#: a value of a field typed ``plain`` (decoded bodies, a reported dict) nests at most this deep
MAX_DEPTH: Final = 64
#: a state file larger than this is refused before it is read (a real one holds the bytes in flight
#: of open connections, each direction bounded by option maxPendingBytes)
MAX_STATE_BYTES: Final = 1 << 31


# -- the type language ------------------------------------------------------------------------------
class _T:
    """A parsed field type: ``kind`` and its parts."""

    __slots__ = ("kind", "parts", "optional", "names", "size")

    def __init__(self, kind: str, parts: tuple = (), optional: bool = False, names: tuple[str, ...] = (),
                 size: int | None = None):
        self.kind, self.parts, self.optional, self.names, self.size = kind, parts, optional, names, size


_CONTAINERS: Final = frozenset({"list", "set", "frozenset", "deque", "tuple*", "tuple", "dict", "odict"})
_SCALARS: Final = {"int": int, "bool": bool, "str": str, "bytes": bytes, "float": float}


def _split(text: str, sep: str) -> list[str]:
    """``text`` split at each ``sep`` not inside brackets."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == sep and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return out


@functools.lru_cache(maxsize=None)
def parse(text: str) -> _T:
    text = text.strip()
    optional = text.endswith("?")
    if optional:
        text = text[:-1]
    size = None
    if "#" in text and not text.endswith("]"):
        text, n = text.rsplit("#", 1)
        size = int(n)
    alts = _split(text, "|")
    if len(alts) > 1:
        return _T("union", tuple(parse(a) for a in alts), optional)
    if text.startswith("@"):
        return _T("ref", (), optional, tuple(text[1:].split("/")))
    if "[" in text:
        head, inner = text[: text.index("[")], text[text.index("[") + 1: -1]
        items = _split(inner, ",")
        if head == "tuple" and items[-1] == "...":
            return _T("tuple*", (parse(items[0]),), optional)
        return _T(head, tuple(parse(i) for i in items), optional, (), size)
    return _T(text, (), optional)


# -- writing -----------------------------------------------------------------------------------------
class _Writer:
    def __init__(self) -> None:
        self.types = declared_classes()
        self.by_class = {cls: name for name, cls in self.types.items()}
        self.decl = declarations()
        self.ids: dict[int, int] = {}
        self.records: list[list] = []
        self.keep: list[object] = []  # (objects numbered: alive while their ids are)

    def ref(self, obj: object, names: tuple[str, ...]) -> int:
        n = self.ids.get(id(obj))
        if n is not None:
            if self.records[n][0] not in names:
                raise StateError(f"a {self.records[n][0]} where a {'/'.join(names)} is declared")
            return n
        name = self.by_class.get(type(obj))
        if name is None or name not in names:
            raise StateError(f"{type(obj).__qualname__} is not carried where a {'/'.join(names)} is declared")
        n = self.ids[id(obj)] = len(self.records)
        self.keep.append(obj)
        entry: list = [name, None]
        self.records.append(entry)
        fields = self.decl[name]
        try:
            check_links(name, obj)
            entry[1] = [self.value(getattr(obj, f), parse(t), f"{name}.{f}") for f, t in fields]
        except AttributeError as e:
            raise StateError(f"{name}: {e}") from e
        return n

    def value(self, v: Any, t: _T, where: str) -> Any:
        if v is None:
            if t.optional or t.kind in ("none", "plain"):
                return None
            raise StateError(f"{where}: nil where {t.kind} is declared")
        k = t.kind
        if k in _SCALARS or k == "dir":
            if type(v) is not _SCALARS.get(k, int) or k == "dir" and v not in (0, 1):
                raise StateError(f"{where}: {v!r} where {k} is declared")
            return v
        if k == "bytearray":
            if type(v) is not bytearray:
                raise StateError(f"{where}: {type(v).__name__} where bytearray is declared")
            return bytes(v)
        if k == "none":
            raise StateError(f"{where}: a value where none is declared")
        if k == "linked":
            return None
        if k == "union":
            return self.union(v, t, where)
        if k == "ref":
            return self.ref(v, t.names)
        if k in _CONTAINERS:
            return self.container(v, t, where)
        if k == "plain":
            return _plain_out(v, where, 0)
        if k == "call":
            return self.call(v, where)
        if k == "options":  # (kafka.body.RecordOptions: a named tuple of an int and two bools)
            return _options_out(v, where)
        raise StateError(f"{where}: type {k} unknown")

    def union(self, v: Any, t: _T, where: str) -> Any:
        for alt in t.parts:
            try:
                return self.value(v, alt, where)
            except StateError:
                continue
        raise StateError(f"{where}: {type(v).__name__} is none of the declared")

    def container(self, v: Any, t: _T, where: str) -> Any:
        k = t.kind
        if k in ("list", "set", "frozenset", "deque"):
            if type(v) is not {"list": list, "set": set, "frozenset": frozenset, "deque": collections.deque}[k]:
                raise StateError(f"{where}: {type(v).__name__} where {k} is declared")
            items = sorted(v, key=repr) if k in ("set", "frozenset") else v
            if t.size is not None and len(items) != t.size:
                raise StateError(f"{where}: {len(items)} items where {t.size} are declared")
            return [self.value(x, t.parts[0], where) for x in items]
        if k == "tuple*":
            if type(v) is not tuple:
                raise StateError(f"{where}: {type(v).__name__} where tuple is declared")
            return [self.value(x, t.parts[0], where) for x in v]
        if k == "tuple":
            if not isinstance(v, tuple) or len(v) != len(t.parts):
                raise StateError(f"{where}: {type(v).__name__} where tuple of {len(t.parts)} is declared")
            return [self.value(x, p, where) for x, p in zip(v, t.parts)]
        if k in ("dict", "odict"):
            if not isinstance(v, dict):
                raise StateError(f"{where}: {type(v).__name__} where dict is declared")
            return [[self.value(a, t.parts[0], where), self.value(b, t.parts[1], where)] for a, b in v.items()]
        raise StateError(f"{where}: type {k} unknown")

    def call(self, v: Any, where: str) -> list:
        args: tuple = ()
        if isinstance(v, functools.partial):
            if v.keywords:
                raise StateError(f"{where}: a callback with keywords")
            args, v = v.args, v.func
        owner, name = getattr(v, "__self__", None), getattr(v, "__name__", None)
        kind = self.by_class.get(type(owner))
        declared = METHODS.get((kind or "", name or ""))
        if owner is None or kind is None or declared is None or len(declared) != len(args):
            raise StateError(f"{where}: a callback not declared ({type(owner).__qualname__}.{name})")
        return [self.ref(owner, (kind,)), name, *[self.ref(a, (t,)) for a, t in zip(args, declared)]]


def _options_out(v: Any, where: str) -> list:
    if type(v).__name__ != "RecordOptions" or [type(x) for x in v] != [int, bool, bool]:
        raise StateError(f"{where}: {type(v).__name__} where record options are declared")
    return list(v)


def _plain_out(v: Any, where: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise StateError(f"{where}: nested deeper than {MAX_DEPTH}")
    if v is None or type(v) in (bool, int, float, str, bytes):
        return v
    if type(v) in (list, tuple):
        return [_plain_out(x, where, depth + 1) for x in v]
    if type(v) is dict:
        out = {}
        for a, b in v.items():
            if type(a) is not str:
                raise StateError(f"{where}: a key of type {type(a).__name__}")
            out[a] = _plain_out(b, where, depth + 1)
        return out
    raise StateError(f"{where}: {type(v).__name__} in a plain value")


def dump(header: dict[str, Any], roots: dict[str, object]) -> bytes:
    """``roots`` (name -> stage) and everything they refer to, as a state file's bytes."""
    import msgpack

    from .statedecl import package_version

    w = _Writer()
    refs = {name: w.ref(obj, (_kind_of(obj, w),)) for name, obj in roots.items()}
    body = {"format": FORMAT, "package": package_version(), "digest": digest(), **header, **refs, "records": w.records}
    try:
        return MAGIC + msgpack.packb(body, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as e:
        raise StateError(f"the state could not be written ({e})") from e


def _kind_of(obj: object, w: _Writer) -> str:
    name = w.by_class.get(type(obj))
    if name is None:
        raise StateError(f"{type(obj).__qualname__} is not carried")
    return name


# -- reading -----------------------------------------------------------------------------------------
def header_of(data: bytes, name: str) -> dict[str, Any]:
    """The state file's map, checked for its magic, format, declarations' digest and shape (its
    records not built yet)."""
    import msgpack

    if data.startswith(b"kafkawire carried state 1\n"):
        raise StateError(f"state {name} is of format 1 (a pickle, written before spark-kafkawire read states as "
                         "declared records): never read")
    if not data.startswith(MAGIC):
        raise StateError(f"state {name}: not a kafkawire state (no '{MAGIC.decode().strip()}' at its start)")
    try:
        body = msgpack.unpackb(data[len(MAGIC):], raw=False, strict_map_key=True, use_list=True)
    except Exception as e:  # (msgpack's errors on damaged bytes: ValueError, ExtraData, FormatError, ...)
        raise StateError(f"state {name} could not be read ({type(e).__name__}: {e})") from e
    if not isinstance(body, dict):
        raise StateError(f"state {name}: not a kafkawire state (no map)")
    if body.get("format") != FORMAT:
        raise StateError(f"state {name} is of format {body.get('format')!r}, written by spark-kafkawire "
                         f"{_said(body.get('package'))}; this version reads format {FORMAT}")
    if body.get("digest") != digest():
        raise StateError(f"state {name} was written by spark-kafkawire {_said(body.get('package'))} with other "
                         "carried fields than this version's")
    return body


def _said(v: object) -> str:
    from .escape import printable

    return printable(str(v))[:40] if isinstance(v, str) else "(unknown)"


_UNSET: Final = object()  # (a linked field: set by linked, not from the file)


class _Reader:
    def __init__(self, records: Any, name: str):
        if not isinstance(records, list):
            raise StateError(f"state {name}: no records")
        self.name = name
        self.decl = declarations()
        makers = blank_makers()
        self.kinds: list[str] = []
        self.objs: list[object] = []
        for r in records:
            if not (isinstance(r, list) and len(r) == 2 and isinstance(r[0], str) and r[0] in self.decl
                    and isinstance(r[1], list) and len(r[1]) == len(self.decl[r[0]])):
                raise StateError(f"state {name}: record {len(self.kinds)} is not a declared record")
            self.kinds.append(r[0])
            self.objs.append(makers[r[0]]())
        self.records = records

    def fill(self) -> None:
        for n, (kind, values) in enumerate(self.records):
            obj = self.objs[n]
            for (field, t), v in zip(self.decl[kind], values):
                where = f"{kind}.{field}"
                value = self.value(v, parse(t), where, 0)
                if value is _UNSET:
                    continue
                try:
                    setattr(obj, field, value)
                except (TypeError, AttributeError, ValueError, OverflowError) as e:
                    raise StateError(f"state {self.name}: {where}: {e}") from e

        for kind, obj in zip(self.kinds, self.objs):
            linked(kind, obj)

    def bad(self, where: str, what: str) -> StateError:
        return StateError(f"state {self.name}: {where}: {what}")

    def value(self, v: Any, t: _T, where: str, depth: int) -> Any:
        if v is None:
            if t.optional or t.kind in ("none", "plain"):
                return None
            if t.kind == "linked":
                return _UNSET
            raise self.bad(where, f"nil where {t.kind} is declared")
        k = t.kind
        if k in _SCALARS or k == "dir":
            if type(v) is not _SCALARS.get(k, int) or k == "dir" and v not in (0, 1):
                raise self.bad(where, f"{type(v).__name__} {v!r} where {k} is declared"[:200])
            return v
        if k == "bytearray":
            if type(v) is not bytes:
                raise self.bad(where, f"{type(v).__name__} where bytes are declared")
            return bytearray(v)
        if k == "none":
            raise self.bad(where, "a value where none is declared")
        if k == "union":
            return self.union(v, t, where, depth)
        if k == "ref":
            return self.ref(v, t.names, where)
        if k in _CONTAINERS:
            return self.container(v, t, where, depth)
        if k == "plain":
            return self.plain(v, where, depth)
        if k == "call":
            return self.call(v, where)
        if k == "options":
            return self.options(v, where)
        raise self.bad(where, f"type {k} unknown")

    def union(self, v: Any, t: _T, where: str, depth: int) -> Any:
        for alt in t.parts:
            try:
                return self.value(v, alt, where, depth)
            except StateError:
                continue
        raise self.bad(where, f"{type(v).__name__} is none of the declared types")

    def options(self, v: Any, where: str) -> Any:
        if type(v) is not list or [type(x) for x in v] != [int, bool, bool]:
            raise self.bad(where, "not record options (an int and two bools)")
        from .kafka.body import RecordOptions

        return RecordOptions(*v)

    def container(self, v: Any, t: _T, where: str, depth: int) -> Any:
        k = t.kind
        if k in ("list", "set", "frozenset", "deque", "tuple*"):
            if type(v) is not list or t.size is not None and len(v) != t.size:
                raise self.bad(where, f"{type(v).__name__} where {k} is declared")
            items = [self.value(x, t.parts[0], where, depth + 1) for x in v]
            try:
                return {"list": list, "set": set, "frozenset": frozenset, "deque": collections.deque,
                        "tuple*": tuple}[k](items)
            except TypeError as e:  # (an unhashable member)
                raise self.bad(where, str(e)) from e
        if k == "tuple":
            if type(v) is not list or len(v) != len(t.parts):
                raise self.bad(where, f"not a tuple of {len(t.parts)}")
            return tuple(self.value(x, p, where, depth + 1) for x, p in zip(v, t.parts))
        if k in ("dict", "odict"):
            if type(v) is not list:
                raise self.bad(where, f"{type(v).__name__} where dict is declared")
            out: dict = {} if k == "dict" else collections.OrderedDict()
            for pair in v:
                if type(pair) is not list or len(pair) != 2:
                    raise self.bad(where, "a dict entry that is not a pair")
                out[self.value(pair[0], t.parts[0], where, depth + 1)] = self.value(pair[1], t.parts[1], where,
                                                                                     depth + 1)
            return out
        raise self.bad(where, f"type {k} unknown")

    def ref(self, v: Any, names: tuple[str, ...], where: str) -> object:
        if type(v) is not int or not 0 <= v < len(self.objs):
            raise self.bad(where, f"{v!r} is not a record's number")
        if self.kinds[v] not in names:
            raise self.bad(where, f"a {self.kinds[v]} where a {'/'.join(names)} is declared")
        return self.objs[v]

    def plain(self, v: Any, where: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.bad(where, f"nested deeper than {MAX_DEPTH}")
        if v is None or type(v) in (bool, int, float, str, bytes):
            return v
        if type(v) is list:
            return [self.plain(x, where, depth + 1) for x in v]
        if type(v) is dict:
            return {a: self.plain(b, where, depth + 1) for a, b in v.items()}
        raise self.bad(where, f"{type(v).__name__} in a plain value")

    def call(self, v: Any, where: str) -> Callable:
        if type(v) is not list or len(v) < 2 or type(v[1]) is not str or type(v[0]) is not int \
                or not 0 <= v[0] < len(self.objs):
            raise self.bad(where, "not a declared callback")
        kind = self.kinds[v[0]]
        declared = METHODS.get((kind, v[1]))
        if declared is None or len(v) != 2 + len(declared):
            raise self.bad(where, f"{kind}.{v[1]} is not a declared callback")
        method = getattr(self.objs[v[0]], v[1])
        if not declared:
            return method
        return functools.partial(method, *[self.ref(a, (t,), where) for a, t in zip(v[2:], declared)])


def load(data: bytes, name: str, roots: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, object]]:
    """A state file's header and its root records (``roots``: their names and types), built."""
    body = header_of(data, name)
    reader = _Reader(body.get("records"), name)
    out: dict[str, object] = {}
    for root in roots:
        kind = {"decoder": "Decoder", "reasm": "Reassembler"}[root]
        out[root] = reader.ref(body.get(root), (kind,), root)
    reader.fill()
    return body, out

