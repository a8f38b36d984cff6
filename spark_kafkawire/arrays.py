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
from librt.strings import BytesWriter, write_f64_le, write_i16_le, write_i32_le, write_i64_le

_FIXED: Final = {pa.int8(): "b", pa.int16(): "h", pa.int32(): "i", pa.int64(): "q", pa.float64(): "d",
                 pa.timestamp("us", tz="UTC"): "q"}
_OFFSET_MAX: Final = 2**31 - 1
_STRING_LIST: Final = pa.list_(pa.string())
_DIGITS: Final = bytes.maketrans(b"\x00\x01", b"01")


_ONE: Final = b"\x01"
_ZERO: Final = b"\x00"


def _tail(w: BytesWriter, size: int) -> bytes:
    """The last ``size`` bytes written to ``w``."""
    n = len(w)
    out = BytesWriter()
    for i in range(n - size, n):
        out.append(w[i])
    return out.getvalue()


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


def _as_bytes(v: object, text: bool) -> bytes | None:
    """A string column's value (``text``: str, or UTF-8 bytes such as JSON bodies) or a binary
    column's (bytes-like, or str as UTF-8, as pyarrow takes it) as its bytes; None when the type
    cannot hold it (a str with a lone surrogate, another kind)."""
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        try:
            return v.encode()
        except UnicodeEncodeError:
            return None
    if not text and isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return None


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
        b = _as_bytes(v, text)
        if b is None:  # (the caller takes the values one by one: checked())
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
    if values.count(None) == len(values):  # all null (record headers where payload is not shown): nothing to look at
        return pa.nulls(len(values), typ)
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


# -- typed columns: filled row by row straight into Arrow's buffers ------------------------------

#: a timestamp column's range, microseconds: years 1 to 9999, as Spark takes them
MIN_TIME_US: Final = -62135596800 * 10**6
MAX_TIME_US: Final = 253402300799 * 10**6 + 999999
_INT_RANGES: Final = {1: (-(2**7), 2**7 - 1), 2: (-(2**15), 2**15 - 1), 4: (-(2**31), 2**31 - 1),
                      8: (-(2**63), 2**63 - 1)}
_WIDTHS: Final = {pa.int8(): 1, pa.int16(): 2, pa.int32(): 4, pa.int64(): 8}


class ColumnBuffer:
    """A column filled row by row into the buffers of its Arrow array: where this module runs
    compiled, each value is written where Arrow reads it (no Python list, no per-value work when
    the batch is made). ``append`` takes what ``array`` of a list takes; a value the type cannot
    hold (out of range, of another kind) is null, and its row is in ``bad`` (the caller names the
    column in that row's detail). ``array()`` equals ``array(values, typ)`` of the values appended,
    the bad ones null (tests/test_arrays.py)."""

    def __init__(self, typ: pa.DataType) -> None:
        self.typ = typ
        self.n = 0
        self.nulls = 0
        self.valid = BytesWriter()  # a byte per value: 1 valid, 0 null (packed to bits at the end)
        self.bad: list[int] = []

    def append(self, v: object) -> None:
        raise NotImplementedError

    def append_int(self, x: int) -> None:
        """``append`` of an int: where compiled, the value is passed unboxed to an int column (which
        overrides this), with no Python object made for it."""
        self.append(x)

    def _valid(self) -> None:
        self.valid.append(1)
        self.n += 1

    def _null(self, bad: bool) -> None:
        if bad:
            self.bad.append(self.n)
        self.valid.append(0)
        self.nulls += 1
        self.n += 1

    def _validity(self) -> pa.Buffer | None:
        return _pack(self.valid.getvalue()) if self.nulls else None

    def repeat_last(self, n: int) -> None:
        """Append the last value appended ``n`` more times (a value alike on many rows, such as a
        record batch's fields on each of its records, written once): as ``n`` more ``append``s
        of it. Needs a value appended before."""
        raise NotImplementedError(f"repeat_last of a {type(self).__name__}")

    def _repeat_valid(self, n: int) -> None:
        """The validity (and a value the type could not hold) of the last value, ``n`` more times."""
        valid = self.valid
        last = valid[len(valid) - 1]
        valid.write(_ONE * n if last else _ZERO * n)
        if not last:
            self.nulls += n
            if self.bad and self.bad[-1] == self.n - 1:
                self.bad.extend(range(self.n, self.n + n))
        self.n += n

    def array(self) -> pa.Array:
        raise NotImplementedError


class _FixedColumn(ColumnBuffer):
    """A column of fixed-width values, little-endian in ``data``."""

    def __init__(self, typ: pa.DataType) -> None:
        ColumnBuffer.__init__(self, typ)
        self.data = BytesWriter()

    def array(self) -> pa.Array:
        return pa.Array.from_buffers(self.typ, self.n, [self._validity(), pa.py_buffer(self.data.getvalue())],
                                     null_count=self.nulls)

    def repeat_last(self, n: int) -> None:
        self.data.write(_tail(self.data, self.value_width()) * n)
        self._repeat_valid(n)

    def value_width(self) -> int:
        """Bytes a value takes in ``data``."""
        return 8


_UNBOXED: Final = (1 << 62) - 1  # the largest int compiled code holds unboxed


class IntColumn(_FixedColumn):
    """int8 ... int64 and timestamps (given in nanoseconds, kept in microseconds)."""

    def __init__(self, typ: pa.DataType) -> None:
        _FixedColumn.__init__(self, typ)
        self.timestamp: bool = bool(pa.types.is_timestamp(typ))
        self.width = 8 if self.timestamp else _WIDTHS[typ]
        self.lo, self.hi = (MIN_TIME_US, MAX_TIME_US) if self.timestamp else _INT_RANGES[self.width]
        self.int64 = self.width == 8 and not self.timestamp  # (its bounds are no small ints, see append)

    def append(self, v: object) -> None:
        if not isinstance(v, int):  # (None too)
            self._write(0)
            self._null(v is not None)
            return
        self.append_int(v)

    def append_int(self, x: int) -> None:
        if self.timestamp:
            x = x // 1000
        # an int64 column's bounds lie beyond the small ints a compiled int holds unboxed: a value
        # within those is compared with them only (a comparison with a boxed bound costs 200 steps)
        if not (self.int64 and -_UNBOXED <= x <= _UNBOXED) and not self.lo <= x <= self.hi:
            self._write(0)
            self._null(True)
            return
        self._write(x)
        self._valid()

    def value_width(self) -> int:
        return self.width

    def _write(self, x: int) -> None:
        w = self.width
        if w == 8:
            write_i64_le(self.data, x)
        elif w == 4:
            write_i32_le(self.data, x)
        elif w == 2:
            write_i16_le(self.data, x)
        else:
            self.data.append(x & 0xFF)  # two's complement


class FloatColumn(_FixedColumn):
    def append(self, v: object) -> None:
        if isinstance(v, float):
            write_f64_le(self.data, v)
            self._valid()
            return
        if isinstance(v, int) and not isinstance(v, bool) and -(2**53) <= v <= 2**53:
            write_f64_le(self.data, float(v))
            self._valid()
            return
        write_f64_le(self.data, 0.0)
        self._null(v is not None)


class BoolColumn(ColumnBuffer):
    def __init__(self, typ: pa.DataType) -> None:
        ColumnBuffer.__init__(self, typ)
        self.data = BytesWriter()  # a byte per value, packed to bits at the end

    def append(self, v: object) -> None:
        if v is None:
            self.data.append(0)
            self._null(False)
            return
        self.data.append(1 if v else 0)
        self._valid()

    def repeat_last(self, n: int) -> None:
        self.data.write(_tail(self.data, 1) * n)
        self._repeat_valid(n)

    def array(self) -> pa.Array:
        return pa.Array.from_buffers(self.typ, self.n, [self._validity(), _pack(self.data.getvalue())],
                                     null_count=self.nulls)


class StringColumn(ColumnBuffer):
    """string (str, or UTF-8 bytes: JSON bodies) and binary (bytes-like)."""

    def __init__(self, typ: pa.DataType) -> None:
        ColumnBuffer.__init__(self, typ)
        self.text = typ == pa.string()
        self.data = BytesWriter()
        self.offsets = BytesWriter()
        write_i32_le(self.offsets, 0)
        self.end = 0
        # the last str appended and its bytes: a value that comes again (the file's name, an
        # endpoint's address and flow id, a status, an api's name) is mostly the same object row
        # after row, and is encoded once
        self.last: object = None
        self.last_bytes: bytes | None = None

    def append(self, v: object) -> None:
        if v is None:  # (most of a row's optional columns)
            write_i32_le(self.offsets, self.end)
            self._null(False)
            return
        if v is self.last:
            b = self.last_bytes
        else:
            b = _as_bytes(v, self.text)
            if isinstance(v, str):
                self.last = v
                self.last_bytes = b
        if b is None or self.end + len(b) > _OFFSET_MAX:  # (a value, None is taken above)
            write_i32_le(self.offsets, self.end)
            self._null(True)
            return
        self.data.write(b)
        self.end += len(b)
        write_i32_le(self.offsets, self.end)
        self._valid()

    def repeat_last(self, n: int) -> None:
        offsets = self.offsets
        at = len(offsets) - 8
        size = self.end - (int(offsets[at]) | int(offsets[at + 1]) << 8 | int(offsets[at + 2]) << 16 |
                           int(offsets[at + 3]) << 24)
        fit = n if not size else min(n, (_OFFSET_MAX - self.end) // size)
        if fit > 0:
            if size:
                self.data.write(_tail(self.data, size) * fit)
            end = self.end
            for _ in range(fit):  # (compiled, a few steps each)
                end += size
                write_i32_le(offsets, end)
            self.end = end
            self._repeat_valid(fit)
        for _ in range(n - max(fit, 0)):  # past 2 GiB in the column: null, and said (as append does)
            write_i32_le(offsets, self.end)
            self._null(True)

    def array(self) -> pa.Array:
        return pa.Array.from_buffers(self.typ, self.n, [self._validity(), pa.py_buffer(self.offsets.getvalue()),
                                                        pa.py_buffer(self.data.getvalue())], null_count=self.nulls)


class StringListColumn(ColumnBuffer):
    """list<string>: a list or tuple of str per value."""

    def __init__(self, typ: pa.DataType) -> None:
        ColumnBuffer.__init__(self, typ)
        self.items = StringColumn(pa.string())
        self.offsets = BytesWriter()
        write_i32_le(self.offsets, 0)

    def append(self, v: object) -> None:
        items: list[bytes] = []
        if isinstance(v, (list, tuple)):
            for s in v:
                b = _as_bytes(s, True) if isinstance(s, str) else None
                if b is None:
                    break
                items.append(b)
            else:
                for b in items:
                    self.items.append(b)
                write_i32_le(self.offsets, self.items.n)
                self._valid()
                return
        # not a list of strings the type can hold: null, and said
        write_i32_le(self.offsets, self.items.n)
        self._null(v is not None)

    def array(self) -> pa.Array:
        return pa.Array.from_buffers(self.typ, self.n, [self._validity(), pa.py_buffer(self.offsets.getvalue())],
                                     null_count=self.nulls, children=[self.items.array()])


class ValuesColumn(ColumnBuffer):
    """Any other type (record headers): the values kept, made an array at the end by ``array``."""

    def __init__(self, typ: pa.DataType) -> None:
        ColumnBuffer.__init__(self, typ)
        self.values: list = []

    def append(self, v: object) -> None:
        self.values.append(v)
        self.n += 1

    def repeat_last(self, n: int) -> None:
        self.values.extend([self.values[-1]] * n)
        self.n += n

    def array(self) -> pa.Array:
        arr, self.bad = checked(self.values, self.typ)
        return arr


def checked(values: list, typ: pa.DataType) -> tuple[pa.Array, list[int]]:
    """``values`` as an Arrow array of ``typ`` and the rows whose value it cannot hold (beyond its
    range, another kind, a timestamp in microseconds outside years 1-9999), those null."""
    timestamp = pa.types.is_timestamp(typ)
    try:
        arr = array(values, typ)
        if not timestamp or not len(arr) or arr.null_count == len(arr):
            return arr, []
        times = [v for v in values if v is not None]
        if MIN_TIME_US <= min(times) and max(times) <= MAX_TIME_US:
            return arr, []
    except (pa.ArrowInvalid, OverflowError, TypeError):
        pass
    kept: list = []
    bad: list[int] = []
    for row, v in enumerate(values):
        try:
            if v is not None and timestamp and not MIN_TIME_US <= v <= MAX_TIME_US:
                raise OverflowError
            pa.array([v], type=typ)
            kept.append(v)
        except (pa.ArrowInvalid, OverflowError, TypeError):
            kept.append(None)
            bad.append(row)
    return pa.array(kept, type=typ), bad


def column(typ: pa.DataType) -> ColumnBuffer:
    """An empty typed column for Arrow type ``typ``."""
    if typ in _WIDTHS or pa.types.is_timestamp(typ):
        return IntColumn(typ)
    if typ == pa.float64():
        return FloatColumn(typ)
    if typ == pa.bool_():
        return BoolColumn(typ)
    if typ == pa.string() or typ == pa.binary():
        return StringColumn(typ)
    if typ == _STRING_LIST:
        return StringListColumn(typ)
    return ValuesColumn(typ)
