"""Python lists -> Arrow arrays, built from buffers.

``pyarrow.array(list)`` first asks whether the list is "array-like", which imports pandas when it
is installed: half a second of a fresh process's time (a script, the command line), before the
first batch. The column types rows use are simple enough to build from their buffers instead:
fixed-width values through the standard ``array`` module, strings and lists through offsets. Per
value pyarrow is faster, so a process that builds more than ``BUDGET`` values (a large read) hands
the rest to ``pyarrow.array``, as does one that has imported pandas already.

:func:`array` raises ``OverflowError`` / ``TypeError`` / ``ValueError`` for a value its type
cannot hold, as ``pyarrow.array`` does, so that the caller can find and null the value; types
not listed here go to ``pyarrow.array``.
"""

from __future__ import annotations

import sys
from array import array as _packed
from itertools import accumulate, repeat
from operator import is_not
from typing import Final

import pyarrow as pa

_FIXED: Final = {pa.int8(): "b", pa.int16(): "h", pa.int32(): "i", pa.int64(): "q", pa.float64(): "d",
                 pa.timestamp("us", tz="UTC"): "q"}
_OFFSET_MAX: Final = 2**31 - 1
_STRING_LIST: Final = pa.list_(pa.string())
_DIGITS: Final = bytes.maketrans(b"\x00\x01", b"01")


def _pack(flags: bytes) -> pa.Buffer:
    """One byte 0/1 per value -> an Arrow bitmap (bit i of byte i // 8, least significant first)."""
    if not flags:
        return pa.py_buffer(b"")
    bits = int(flags[::-1].translate(_DIGITS), 2)
    return pa.py_buffer(bits.to_bytes((len(flags) + 7) >> 3, "little"))


def _validity(values: list) -> tuple[pa.Buffer | None, int]:
    """The validity bitmap (None when no value is null) and the null count."""
    nulls = values.count(None)
    if not nulls:
        return None, 0
    return _pack(bytes(map(is_not, values, repeat(None)))), nulls


def _bits(values: list) -> pa.Buffer:
    return _pack(bytes(map(bool, values)))


def _offsets(lengths) -> pa.Buffer:
    offsets = _packed("I", [0])  # unsigned: its items are stored without argument parsing
    offsets.extend(accumulate(lengths))
    if offsets[-1] > _OFFSET_MAX:
        raise OverflowError("more than 2 GiB in one column")
    return pa.py_buffer(offsets)


def _strings(values: list, typ: pa.DataType) -> pa.Array:
    """Strings (str, or UTF-8 bytes: JSON bodies) or binary values: the data and their offsets
    in one pass (compiled, a loop; an iterator chain costs six times as much a value)."""
    validity, nulls = _validity(values)
    n = len(values)
    offsets = _packed("I", bytes(4 * (n + 1)))  # int32 offsets: the same bytes below 2**31
    data: list[bytes] = []
    text = typ == pa.string()
    end = 0
    i = 0
    for v in values:
        i += 1
        if v is None:
            offsets[i] = end
            continue
        if type(v) is bytes:
            b: bytes = v
        elif text and type(v) is str:
            s: str = v
            try:
                b = s.encode()
            except UnicodeEncodeError as e:
                raise TypeError(f"not a {typ} value: {e}") from None
        elif not text:
            b = bytes(v)
        else:
            raise TypeError(f"not a {typ} value: {type(v).__name__}")
        data.append(b)
        end += len(b)
        if end > _OFFSET_MAX:
            raise OverflowError("more than 2 GiB in one column")
        offsets[i] = end
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))],
                                 null_count=nulls)


#: values this module builds in a process before leaving the work to ``pyarrow.array``: per value
#: pyarrow is faster (measured compiled, 2026-11-25: ~145 ns a value here against ~35 ns, over an
#: exchange row's mix of columns), and the pandas import it brings costs ~0.45 s, about what
#: 4 million values built here cost more; so a process pays the import once it has built as many
#: (as renting skis until their price is spent), and at once if pandas is imported anyway (Spark's
#: workers)
BUDGET: Final = 4_000_000
_built = [0]


def _pandas_loaded() -> bool:
    return "pandas" in sys.modules


def array(values: list, typ: pa.DataType) -> pa.Array:
    """``values`` (None for null) as an Arrow array of type ``typ``."""
    if _built[0] >= BUDGET or _pandas_loaded():
        return pa.array(values, type=typ)
    _built[0] += len(values)
    return _build(values, typ)


def _build(values: list, typ: pa.DataType) -> pa.Array:
    code = _FIXED.get(typ)
    n = len(values)
    if code is not None:
        validity, nulls = _validity(values)
        data = _packed(code, [0 if v is None else v for v in values] if nulls else values)
        return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(data)], null_count=nulls)
    if typ == pa.bool_():
        validity, nulls = _validity(values)
        return pa.Array.from_buffers(typ, n, [validity, _bits(values)], null_count=nulls)
    if typ == pa.string() or typ == pa.binary():
        return _strings(values, typ)
    if typ == _STRING_LIST:
        validity, nulls = _validity(values)
        lists = [() if v is None else v for v in values]
        child = _strings([s for v in lists for s in v], pa.string())
        return pa.Array.from_buffers(typ, n, [validity, _offsets(map(len, lists))], null_count=nulls,
                                     children=[child])
    return pa.array(values, type=typ)
