"""Messages generated from kio's classes (Kafka's schemas) and written by kio's own writer.

``build(cls, rnd)`` fills every field of a kio message class with random values of its Kafka
type; ``expected(value)`` is what our decoder must return for it: Kafka's field names, ints for
millisecond durations and times, UUIDs as strings, bytes as base64.
"""

from __future__ import annotations

import base64
import datetime
import io
import random
import uuid
from dataclasses import fields, is_dataclass

from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import classify_field, get_field_tag, is_optional

MS_TYPES = ("datetime_i64", "timedelta_i32", "timedelta_i64")
SECRETS = {"AuthBytes", "Hmac", "Salt", "SaltedPassword", "RequestData"}
RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def pascal(snake: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))


def _primitive(kt: str, rnd: random.Random):
    if kt in RANGES:
        b = RANGES[kt]
        return rnd.randint(-(1 << b), (1 << b) - 1)
    if kt == "uint16":
        return rnd.randint(0, 65535)
    if kt == "float64":
        return rnd.uniform(-1e6, 1e6)
    if kt == "bool":
        return rnd.random() < 0.5
    if kt == "string":
        return rnd.choice(["", "orders", "consumer-1", "ünï", "x" * 40])
    if kt == "bytes":
        return bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 20)))
    if kt == "records":
        return None
    if kt == "uuid":
        return uuid.UUID(int=rnd.getrandbits(128))
    if kt == "error_code":
        from kio.schema.errors import ErrorCode

        return rnd.choice(list(ErrorCode))
    if kt in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=rnd.randint(0, 10**6))
    if kt == "datetime_i64":
        return datetime.datetime.fromtimestamp(rnd.randint(0, 2 * 10**9), tz=datetime.timezone.utc)
    raise AssertionError(kt)


def build(cls, rnd: random.Random, depth: int = 0):
    kw = {}
    for f in fields(cls):
        c = classify_field(f)
        if is_optional(f) and rnd.random() < 0.2:
            kw[f.name] = None
            continue
        if is_dataclass(c.type_):
            make = lambda: build(c.type_, rnd, depth + 1)  # noqa: E731
        else:
            kt = f.metadata["kafka_type"]
            make = lambda kt=kt: _primitive(kt, rnd)  # noqa: E731
        if c.is_array:
            kw[f.name] = tuple(make() for _ in range(rnd.randint(0, 2 if depth < 3 else 1)))
        else:
            kw[f.name] = make()
    return cls(**kw)


def write(obj) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


def expected(obj):
    """The decoded form of a kio value, as our decoder must produce it."""
    out = {}
    for f in fields(obj):
        v = getattr(obj, f.name)
        c = classify_field(f)
        kt = None if is_dataclass(c.type_) else f.metadata["kafka_type"]
        name = pascal(f.name) + ("Ms" if kt in MS_TYPES else "")
        if get_field_tag(f) is not None and v == get_tagged_field_default(f):
            continue  # a tagged field at its default is not on the wire
        conv = lambda x, kt=kt: _value(x, kt, name)  # noqa: E731
        if v is None and kt == "datetime_i64":
            out[name] = -1  # a null time is written as -1
            continue
        if v is None and kt == "uuid" and not c.is_array:
            out[name] = str(uuid.UUID(int=0))  # a null UUID is written as zeros
            continue
        out[name] = None if v is None else [conv(x) for x in v] if c.is_array else conv(v)
    return out


def _value(x, kt, name):
    if is_dataclass(x):
        return expected(x)
    if kt in ("timedelta_i32", "timedelta_i64"):
        return round(x.total_seconds() * 1000)
    if kt == "datetime_i64":
        return round(x.timestamp() * 1000)
    if kt == "uuid":
        return str(x)
    if kt == "bytes":
        if name in SECRETS:
            return ("secret", len(x))
        return base64.b64encode(x).decode()
    if kt == "records":
        return ("records", len(x))
    if kt == "error_code":
        return int(x)
    return x
