"""Message layouts -> specialised Python readers, generated from protocol/messages.json.

:mod:`spark_kafkawire.kafka.body` interprets the layouts field by field; this module turns each
(struct, flexible) layout into the source of one Python function that reads it with no per-field
dispatch, compiles it once per process (on first use) and caches it. The schemas stay data and
``body.py`` stays the reference: the generated reader covers the common path of well-formed
bodies, and on anything unusual (a length past the end, a tagged field, a count that cannot fit)
raises :class:`Slow`, upon which the interpreter decodes the body from scratch, so values, facts
and errors are the interpreter's in every case. Tests compare the two on every layout.
"""

from __future__ import annotations

import base64
import struct
from typing import Callable

from . import batchsummary as summaries
from .sasl import suspect, token_shaped
from .layouts import FIXED, FIXED_TYPES, HL_PARTITIONS, ZERO_UUID, Schemas, uuid_text
from .secrets import SECRET_FIELDS, redact
from .values import RawRecords

_SIZES = {name: s.size for name, s in FIXED.items()}
_CODES = {name: letter for name, (_code, letter) in FIXED_TYPES.items()}


class Slow(Exception):
    """The generated reader met something it leaves to the interpreter."""


class Compiler:
    """Generates, compiles and caches one reader per (struct id, flexible)."""

    def __init__(self, s: Schemas):
        self.s = s
        self.cache: dict[tuple[int, bool], Callable] = {}
        self.env: dict = {
            "Slow": Slow, "unpack_from": struct.unpack_from, "b64": base64.b64encode, "uuid_text": uuid_text,
            "summarize": summaries.summarize, "RawRecords": RawRecords, "redact": redact, "ZERO_UUID": ZERO_UUID,
            "suspect": suspect, "token_shaped": token_shaped,
        }
        for name, reader in FIXED.items():
            self.env[f"U_{name}"] = reader.unpack_from

    def reader(self, sid: int, flex: bool) -> Callable:
        fn = self.cache.get((sid, flex))
        if fn is None:
            src = self.source(sid, flex)
            ns: dict = {}
            exec(compile(src, f"<kafkawire struct {sid}{' flexible' if flex else ''}>", "exec"), self.env, ns)
            fn = ns["read"]
            self.cache[(sid, flex)] = fn
        return fn

    # -- source ----------------------------------------------------------------------------------
    def source(self, sid: int, flex: bool) -> str:
        regular, tagged = self.s.structs[sid]
        lines = [
            "def read(buf, pos, r, in_topic):",
            "    r.depth += 1",
            "    out = {}",
            "    tid_at = -1",
        ]
        for i, f in enumerate(regular):
            key = f"F_{sid}_{i}"
            self.env[key] = f
            lines += ["    " + x for x in self._field(f, flex, key)]
            lines.append(f"    out[{f.name!r}] = v")
            if f.hl:
                lines.append(f"    tid_at = r._fact({key}, v, in_topic, tid_at)")
        if flex:
            self.env[f"T_{sid}"] = tagged
            lines += [
                "    if buf[pos]:",
                f"        pos, tid_at = r.tagged_fields(T_{sid}, out, pos, in_topic, tid_at)",
                "    else:",
                "        pos += 1",
            ]
        lines += [
            "    if tid_at >= 0:",
            "        r._topic_id(out, tid_at)",
            "    r.depth -= 1",
            "    return out, pos",
        ]
        return "\n".join(lines) + "\n"

    def _length(self, flex: bool, wide: bool) -> list[str]:
        """Code that sets n to a length or count (-1: null)."""
        if flex:
            return ["b = buf[pos]",
                    "if b < 0x80:",
                    "    n = b - 1",
                    "    pos += 1",
                    "else:",
                    "    n, pos = r.uvarint(pos)",
                    "    n -= 1"]
        return [f"n = U_int{32 if wide else 16}(buf, pos)[0]", f"pos += {4 if wide else 2}"]

    def _sized(self, flex: bool, wide: bool, take: list[str]) -> list[str]:
        """Code for a length-prefixed value (null when the length is -1): ``take`` reads
        buf[pos:e] into v."""
        return self._length(flex, wide) + [
            "if n < 0:",
            "    v = None",
            "else:",
            "    e = pos + n",
            "    if e > len(buf):",
            "        raise Slow",
        ] + ["    " + x for x in take] + ["    pos = e"]

    def _value(self, f, flex: bool, key: str) -> list[str]:
        """Code that reads one value of the field's type into v."""
        t = f.type
        if t in _SIZES:
            return [f"v = U_{t}(buf, pos)[0]", f"pos += {_SIZES[t]}"]
        if t == "string":
            # a value with a SASL token's shape is no Kafka string (see sasl.py): left to the
            # interpreter, which refuses it
            return self._sized(flex, False, ["v = buf[pos:e].decode('utf-8', 'replace')",
                                             "if r.guard and suspect(v) and token_shaped(v):",
                                             "    raise Slow"])
        if t == "records":
            # the records are summarised where they lie in the frame's bytes: no copy of them
            return self._sized(flex, True, ["v = summarize(buf, r.budget, pos, e)",
                                            "if r.opts.keep_raw:",
                                            "    v = RawRecords(v, buf[pos:e])"])
        if t == "bytes":
            take = f"v = redact({f.name!r}, buf[pos:e])" if f.name in SECRET_FIELDS else "v = b64(buf[pos:e]).decode()"
            return self._sized(flex, True, [take])
        if t == "uuid":
            return ["e = pos + 16", "if e > len(buf):", "    raise Slow", "v = uuid_text(bytes(buf[pos:e]))",
                    "pos = e"]
        if t == "struct":
            sub = f"R_{f.sub}_{int(flex)}"
            self.env[sub] = self.reader(f.sub, flex)  # layouts do not nest themselves
            call = f"v, pos = {sub}(buf, pos, r, {bool(f.topic_array)!r})"
            if f.nullable and not f.array:
                return ["if buf[pos] == 0xFF:", "    v = None", "    pos += 1", "else:", "    pos += 1",
                        "    " + call]
            return [call]
        raise Slow  # an unknown type: never generated, the interpreter says what it is

    def _field(self, f, flex: bool, key: str) -> list[str]:
        if not f.array:
            return self._value(f, flex, key)
        lines = self._length(flex, True) + [
            "if n < 0:",
            "    v = None",
            "else:",
            "    if n > len(buf) - pos:",
            "        raise Slow",
        ]
        body = []
        if f.hl == HL_PARTITIONS:
            body += ["facts = r.facts",
                     "if not facts.in_partitions:",
                     "    facts.partitions = (facts.partitions or 0) + n",
                     "facts.in_partitions += 1"]
        body.append("r.depth += 1")
        if f.type in _SIZES and f.type != "bool":
            size = _SIZES[f.type]
            body += [f"e = pos + n * {size}",
                     "if e > len(buf):",
                     "    raise Slow",
                     f"v = list(unpack_from('!%d{_CODES[f.type]}' % n, buf, pos))",
                     "pos = e"]
        else:
            body += ["items = []", "append = items.append", "for _ in range(n):"]
            body += ["    " + x for x in self._value(f, flex, key)]
            body += ["    append(v)", "v = items"]
        body.append("r.depth -= 1")
        if f.hl == HL_PARTITIONS:
            body.append("facts.in_partitions -= 1")
        return lines + ["    " + x for x in body]


_compiler: Compiler | None = None


def reader(s: Schemas, sid: int, flex: bool) -> Callable:
    """The generated reader of a struct: ``read(buf, pos, reader, in_topic) -> (value, pos)``."""
    global _compiler
    if _compiler is None or _compiler.s is not s:
        _compiler = Compiler(s)
    return _compiler.reader(sid, flex)
