"""Message layouts: protocol/messages.json read once per process into the fields the body
interpreter (body.py) and the generated readers (codegen.py) walk: each field's name, type, kind
(one integer the interpreter tests), flags, and what it tells the headline columns."""

from __future__ import annotations

from struct import Struct
from typing import Final

from .. import protocol
from ..compiled import require
from .headers import message_code
from .secrets import SECRET_FIELDS

_orjson = require("orjson", "orjson")  # (json's dumps and loads took 15 M of the layouts' 44 M instructions)
SASL_HANDSHAKE: Final = protocol.SASL_HANDSHAKE_KEY
NULLABLE: Final = 1
ARRAY: Final = 2
ERROR_CODE: Final = 4
#: the fixed-width types as the interpreter reads them (Field.code: one integer comparison)
F_INT8: Final = 0
F_INT16: Final = 1
F_INT32: Final = 2
F_INT64: Final = 3
F_UINT16: Final = 4
F_FLOAT64: Final = 5
F_BOOL: Final = 6
#: the fixed-width types: each one's code and struct letter, the one table of them (the interpreter
#: reads by the code, the generated readers by the letter; a size is its Struct's)
FIXED_TYPES: Final = {"int8": (F_INT8, "b"), "int16": (F_INT16, "h"), "int32": (F_INT32, "i"),
                      "int64": (F_INT64, "q"), "uint16": (F_UINT16, "H"), "float64": (F_FLOAT64, "d"),
                      "bool": (F_BOOL, "?")}
#: ... as the Structs that read them
FIXED: Final = {name: Struct("!" + letter) for name, (_code, letter) in FIXED_TYPES.items()}
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


#: how a fixed-width value is written as JSON text (body.py's text mode)
J_INT: Final = 0
J_BOOL: Final = 1
J_FLOAT: Final = 2


class Field:
    __slots__ = ("name", "type", "kind", "fixed", "code", "size", "nullable", "array", "tag", "sub", "hl",
                 "topic_array", "key", "next_key", "json", "scalar")

    def __init__(self, name: str, typ: str, flags: int, tag: int, sub: int):
        self.name = name
        self.type = typ
        self.fixed = FIXED.get(typ)
        self.size = self.fixed.size if self.fixed is not None else 0
        self.code = FIXED_TYPES[typ][0] if typ in FIXED_TYPES else -1
        self.kind = K_FIXED if self.fixed is not None else _KINDS.get(typ, K_OTHER)
        self.nullable = bool(flags & NULLABLE)
        self.array = bool(flags & ARRAY)
        self.tag = tag
        self.sub = sub
        self.hl = _headline_kind(name, typ, self.array)
        self.topic_array = self.array and "Topic" in name  # its elements' Name is a topic name
        self.key: bytes = _orjson.dumps(name) + b":"  # the JSON text before its value: "Name":
        self.next_key: bytes = b"," + self.key  # ... after another field's
        self.json = J_BOOL if typ == "bool" else J_FLOAT if typ == "float64" else J_INT
        self.scalar = not self.array and self.kind != K_STRUCT  # (text mode keeps only scalars' values)


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
        #: the same, by message_code (the decoder's lookup: an integer key hashes at no cost)
        self.layouts: dict[int, tuple[int, bool]] = {message_code(k, v, r): layout
                                                     for (k, v, r), layout in self.messages.items()}
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

_schemas: Final[list[Schemas]] = []  # (Final: compiled, read without a lookup by name)


def schemas() -> Schemas:
    """messages.json's layouts, read once per process."""
    if not _schemas:
        _schemas.append(Schemas(_orjson.loads(protocol.data_text("messages.json"))))
    return _schemas[0]
