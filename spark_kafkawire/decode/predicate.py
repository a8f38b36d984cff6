"""Row filters -> a predicate the pipeline consults early.

A :class:`Predicate` is a conjunction of simple conditions ``(column, op, value)`` on the columns
that are known before a body is decoded: capture_file, the endpoints, api_key, api_name,
api_version, client_id, request_time, and status. It is used in three places:

* listing: files whose path a ``capture_file`` condition rules out are not read;
* decoding: a request whose header (api, client, endpoints, time) a condition rules out is
  neither body-decoded nor turned into rows, and neither is its response. Bodies that other rows
  depend on are still decoded: ApiVersions requests (the connection's client software) and
  responses that name topic ids (how later exchanges' topic ids are resolved);
* rows: every batch is filtered by all the conditions, with SQL semantics (a null never matches),
  so that the result is exactly that of the same filter applied after an unfiltered read.

``from_spark`` translates Spark's pushed filters (pyspark.sql.datasource.Filter) and says which
it could not take; ``parse`` takes ``[(column, op, value), ...]`` as ``read_capture(filters=...)``.
"""

from __future__ import annotations

import datetime as dt
import operator
from functools import lru_cache
from typing import Any, Iterable

import pyarrow as pa

from .. import arrays, protocol


OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "not null")
#: columns known from frame headers and endpoints, before any body is decoded
EARLY = ("api_key", "api_name", "api_version", "client_id", "client_ip", "client_port", "broker_ip", "broker_port",
         "request_time")
PUSHABLE = EARLY + ("capture_file", "status")
API_VERSIONS = protocol.API_VERSIONS_KEY


class Condition:
    __slots__ = ("column", "op", "value")

    def __init__(self, column: str, op: str, value: Any):
        if op not in OPS:
            raise ValueError(f"filter on {column}: operator {op!r} is not one of {', '.join(OPS)}")
        if column not in PUSHABLE:
            raise ValueError(f"filter on {column!r}: only {', '.join(PUSHABLE)} can be filtered while reading")
        if op == "in":
            if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                raise ValueError(f"filter on {column}: 'in' takes a list of values, not {value!r}")
            # a null in the list matches nothing (SQL: x IN (.., NULL) is never true for it)
            value = [_checked(column, v) for v in value if v is not None]
        elif op != "not null":
            value = None if value is None else _checked(column, value)
        self.column, self.op, self.value = column, op, value

    def __repr__(self) -> str:
        return f"({self.column} {self.op} {self.value!r})"

    def test(self, v: object) -> bool:
        """SQL semantics: a null matches nothing."""
        if v is None:
            return False
        op, x = self.op, self.value
        if op == "in":
            return v in x
        if op == "not null":
            return True
        try:
            return _PY[op](v, x)
        except TypeError:
            return False

    def mask(self, arr: pa.Array) -> pa.Array:
        """The condition on a column, as a boolean array (null where the value is null).

        Bounds and value sets are built as Arrow values by ``arrays.array``: ``pyarrow.scalar`` and
        ``pyarrow.array`` on Python values import pandas (a quarter of a second of a fresh process)."""
        import pyarrow.compute as pc  # here: importing it costs a fresh process 35 ms

        op, x = self.op, self.value
        if op == "not null":
            return _every(arr, True)
        if x is None:  # compared with null: true for no row
            return _every(arr, False)
        if self.column == "request_time":  # the column holds microseconds, the bound nanoseconds
            arr = pc.cast(arr, pa.int64())
            if op == "in":
                x = [v // 1000 for v in x if v % 1000 == 0]
            elif op in ("=", "!=") and x % 1000:
                return _every(arr, op == "!=")
            else:  # t_us * 1000 < x  <=>  t_us < ceil(x / 1000), and so on
                x = -(-x // 1000) if op in ("<", ">=") else x // 1000
        typ = arr.type
        span = _INT_SPAN.get(typ)
        if op == "in":
            if span is not None:  # a value the column's type cannot hold is in no row
                x = [v for v in x if span[0] <= v <= span[1]]
            return pc.is_in(arr, value_set=arrays.array(list(x), typ))
        if span is not None and not span[0] <= x <= span[1]:
            # beyond every value the column can hold: the same answer for each of them
            return _every(arr, _PY[op](span[0], x))
        bound = arrays.array([x], typ)[0]
        return {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
                ">=": pc.greater_equal}[op](arr, bound)


#: filter columns holding whole numbers, and the rest holding text (request_time: a time)
INT_COLUMNS = ("api_key", "api_version", "client_port", "broker_port")
_INT_SPAN = {t: (-(1 << (b - 1)), (1 << (b - 1)) - 1)
             for t, b in ((pa.int8(), 8), (pa.int16(), 16), (pa.int32(), 32), (pa.int64(), 64))}
_PY: dict[str, Any] = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
       ">=": operator.ge}


def _every(arr: pa.Array, truth: bool) -> pa.Array:
    """The same answer for every row: ``truth`` where the column has a value, null where not."""
    import pyarrow.compute as pc

    valid = pc.is_valid(arr)
    return valid if truth else pc.and_(valid, arrays.array([False], pa.bool_())[0])


def _checked(column: str, v: object) -> object:
    """A filter's value, of the type its column holds (else a ValueError naming both)."""
    if column == "request_time":
        return _ns(v)
    if column in INT_COLUMNS:
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"filter on {column}: {v!r} is not a whole number")
    elif not isinstance(v, str):
        raise ValueError(f"filter on {column}: {v!r} is not a string")
    return v


def _ns(v: object) -> int:
    """A time bound as nanoseconds since the epoch: datetime (naive means UTC), or a number of ns."""
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        delta = v - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise ValueError(f"filter on request_time: {v!r} is not a datetime")


class Predicate:
    """A conjunction of conditions; empty means everything."""

    def __init__(self, conditions: Iterable[Condition] = ()):
        self.conditions = list(conditions)
        self.by_column: dict[str, list[Condition]] = {}
        for c in self.conditions:
            self.by_column.setdefault(c.column, []).append(c)
        self.early = [c for c in self.conditions if c.column in EARLY]

    def __bool__(self) -> bool:
        return bool(self.conditions)

    def __repr__(self) -> str:
        return " and ".join(map(repr, self.conditions)) or "true"

    @classmethod
    def parse(cls, filters: Iterable[tuple] | None) -> "Predicate":
        """``[(column, op, value), ...]`` (op one of OPS; 'not null' takes no value)."""
        out = []
        for f in filters or ():
            if not isinstance(f, (tuple, list)) or len(f) not in (2, 3):
                raise ValueError(f"filter {f!r}: give (column, op, value)")
            out.append(Condition(f[0], f[1], f[2] if len(f) == 3 else None))
        return cls(out)

    def for_shape(self, columns: Iterable[str]) -> "Predicate":
        names = set(columns)
        missing = sorted({c.column for c in self.conditions} - names)
        if missing:
            raise ValueError(f"filter on {', '.join(missing)}: not a column of these rows")
        return self

    # -- early checks ----------------------------------------------------------------------------
    def file_ok(self, path: str) -> bool:
        return all(c.test(path) for c in self.by_column.get("capture_file", ()))

    def request_ok(self, values: dict) -> bool:
        """Could a row with these header values pass? (values: column -> value, for EARLY columns)"""
        for c in self.early:
            if c.column in values and not c.test(values[c.column]):
                return False
        return True

    def time_upper(self) -> int | None:
        """The latest request_time (ns) a row may have, if the conditions bound it."""
        bounds = []
        for c in self.by_column.get("request_time", ()):
            if c.op in ("<", "<=", "="):
                bounds.append(c.value)
            elif c.op == "in" and c.value:
                bounds.append(max(c.value))
        return min(bounds) if bounds else None

    # -- rows --------------------------------------------------------------------------------------
    def filter(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if not self.conditions or not batch.num_rows:
            return batch
        import pyarrow.compute as pc

        mask = None
        for c in self.conditions:
            m = c.mask(batch.column(c.column))
            mask = m if mask is None else pc.and_kleene(mask, m)
        return batch.filter(mask, null_selection_behavior="drop")


def from_spark(filters: list, columns: Iterable[str]) -> tuple[Predicate, list]:
    """Spark's pushed filters -> (the predicate of those taken, those left for Spark)."""
    from pyspark.sql import datasource as ds

    names = set(columns)
    taken, left = [], []
    for f in filters:
        cond = None
        op: str | None
        value: Any
        col = getattr(f, "attribute", None)
        name = col[0] if isinstance(col, tuple) and len(col) == 1 else None
        if isinstance(f, ds.Not) and isinstance(f.child, ds.EqualTo):
            col = f.child.attribute
            name = col[0] if isinstance(col, tuple) and len(col) == 1 else None
            op, value = "!=", f.child.value
        else:
            v = getattr(f, "value", None)
            ops: dict[type, tuple[str | None, Any]] = {
                ds.EqualTo: ("=", v), ds.LessThan: ("<", v), ds.LessThanOrEqual: ("<=", v), ds.GreaterThan: (">", v),
                ds.GreaterThanOrEqual: (">=", v), ds.In: ("in", v), ds.IsNotNull: ("not null", None)}
            op, value = ops.get(type(f), (None, None))
        if name in PUSHABLE and name in names and op is not None and _literal_ok(name, op, value):
            try:
                cond = Condition(name, op, value)
            except ValueError:
                cond = None
        if cond is None:
            left.append(f)
        else:
            taken.append(cond)
    return Predicate(taken), left


def _literal_ok(name: str, op: str, value: Any) -> bool:
    """Literal types the row filter compares exactly as Spark would."""
    vals = list(value) if op == "in" else [value] if op != "not null" else []
    if any(v is None for v in vals):
        return False
    if name == "request_time":
        return all(isinstance(v, dt.datetime) for v in vals)
    if name in ("api_key", "api_version", "client_port", "broker_port"):
        return all(isinstance(v, int) and not isinstance(v, bool) for v in vals)
    return all(isinstance(v, str) for v in vals)


@lru_cache(maxsize=4096)  # (keys and versions come from the capture's bytes: bounded)
def names_topic_ids(api_key: int, version: int) -> bool:
    """Does this response's layout hold a struct with a TopicId beside a topic name? Such bodies
    teach the decoder topic id -> name, which other exchanges' ``topics`` depend on."""
    from ..kafka.layouts import schemas

    s = schemas()
    entry = s.messages.get((api_key, version, False))
    if entry is None:
        return api_key in (3, 19, 20, 75)  # read with a newer layout: be safe
    seen: set[int] = set()

    def visit(sid: int) -> bool:
        if sid in seen:
            return False
        seen.add(sid)
        regular, tagged = s.structs[sid]
        fields = regular + list(tagged.values())
        names = {f.name for f in fields}
        if "TopicId" in names and names & {"Name", "TopicName", "Topic"}:
            return True
        return any(f.type == "struct" and visit(f.sub) for f in fields)

    return visit(entry[0])


@lru_cache(maxsize=4096)
def always_decode(api_key: int, version: int, request: bool) -> bool:
    """Bodies decoded whatever the filter, and by every task reading a share of a file: state that
    other rows depend on (client software, SASL mechanism and user, topic ids, and the secrets a
    connection has shown, which are redacted wherever they reappear)."""
    if request and api_key == API_VERSIONS or _secret_api(api_key):
        return True
    return not request and names_topic_ids(api_key, version)


@lru_cache(maxsize=None)
def _secret_api(api_key: int) -> bool:
    from ..kafka.layouts import schemas

    return api_key in schemas().secret_apis
