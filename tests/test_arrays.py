"""Columns built from buffers (spark_kafkawire/arrays.py) equal pyarrow.array's, value for value.

pyarrow.array is the reference: every column of every row shape of the sample captures, and edge
cases (nulls, empty and null lists, non-ASCII text, empty columns), must come out equal, with
values a type cannot hold refused as pyarrow refuses them. And a read no longer imports pandas.
"""

import json
import subprocess
import sys

import pyarrow as pa
import pytest

from conftest import ROOT, SAMPLES
from spark_kafkawire import arrays, read_capture
from spark_kafkawire.rows.table import ROW_SHAPES

TS = pa.timestamp("us", tz="UTC")


@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_every_column_of_the_samples_equals_pyarrows(shape):
    opts = {"includeRecords": "true"} if shape == "records" else {}
    table = read_capture(SAMPLES, rows=shape, **opts)
    assert table.num_rows
    for field in table.schema:
        column = table.column(field.name)
        # the builder is given microseconds for a time
        values = (column.cast(pa.int64()) if field.type == TS else column).to_pylist()
        ours = arrays._build(values, field.type)
        assert ours.equals(pa.array(values, type=field.type)), f"rows={shape} column {field.name}"
        ours.validate(full=True)


@pytest.mark.parametrize("typ,values", [
    (pa.int8(), [1, None, -128, 127]),
    (pa.int16(), [None, None]),
    (pa.int32(), [2**31 - 1, -(2**31)]),
    (pa.int64(), [2**63 - 1, None, -(2**63)]),
    (pa.float64(), [1.5, None, 0.0, -2.0]),
    (TS, [1_700_000_000_000_000, None]),
    (pa.bool_(), [True, None, False, True, False, False, True, None, True]),
    (pa.string(), ["a", None, "", "żółw ✓ 𝄞", "x" * 1000]),
    (pa.binary(), [b"\x00\xff", None, b""]),
    (pa.list_(pa.string()), [["a", "b"], None, [], ["ü"], [None, "c"]]),
    (pa.int32(), [i if i % 3 else None for i in range(1001)]),  # bitmaps over many bytes
    (pa.bool_(), [None if i % 7 == 0 else i % 5 == 0 for i in range(1003)]),
    (pa.string(), []),
    (pa.list_(pa.string()), []),
])
def test_edge_values_equal_pyarrows(typ, values):
    ours = arrays._build(values, typ)
    ours.validate(full=True)
    assert ours.equals(pa.array(values, type=typ))
    assert ours.null_count == pa.array(values, type=typ).null_count


@pytest.mark.parametrize("typ,values", [
    (pa.int8(), [128]),
    (pa.int16(), [-(2**15) - 1]),
    (pa.int32(), [2**31]),
    (pa.int64(), [2**63]),
    (pa.int32(), ["1"]),
    (pa.string(), [5]),
])
def test_values_a_type_cannot_hold_are_refused(typ, values):
    with pytest.raises((OverflowError, TypeError, pa.ArrowInvalid)):
        pa.array(values, type=typ)
    with pytest.raises((OverflowError, TypeError)):
        arrays._build(values, typ)


@pytest.mark.spies
def test_a_large_read_leaves_the_rest_to_pyarrow(monkeypatch):
    calls = []
    monkeypatch.setattr(arrays, "_pandas_loaded", lambda: False)
    monkeypatch.setattr(arrays, "_built", [arrays.BUDGET - 10])
    monkeypatch.setattr(arrays, "_build", lambda v, t: calls.append(len(v)) or pa.array(v, type=t))
    arrays.array(list(range(5)), pa.int64())
    arrays.array(list(range(20)), pa.int64())  # the budget is spent: pyarrow's own
    arrays.array(list(range(20)), pa.int64())
    assert calls == [5, 20]


def test_a_read_does_not_import_pandas(tmp_path):
    code = ("import sys, spark_kafkawire as k; t = k.read_capture(sys.argv[1]); "
            "assert t.num_rows; print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(SAMPLES / "tansu-admin-txn.pcap")], capture_output=True,
                         text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "False"


def test_a_read_loads_crc32c_without_its_package_init(tmp_path):
    """crc32c's package __init__ reads its version from the installed metadata (importlib.metadata,
    argparse for its command line, a scan of site-packages): a read loads its compiled module alone,
    and that module computes CRC-32C (the check value of "123456789", RFC 3720 B.4: 0xE3069283)."""
    code = ("import sys, spark_kafkawire as k; t = k.read_capture(sys.argv[1]); assert t.num_rows; "
            "from spark_kafkawire.kafka import records; "
            "print(hex(records._crc32c(b'123456789')), [m for m in ('importlib.metadata', 'argparse', 'crc32c') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code, str(SAMPLES / "tansu-admin-txn.pcap")], capture_output=True,
                         text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "0xe3069283 []"


def test_a_read_of_plaintext_starts_without_what_it_does_not_use(tmp_path):
    """A read's start loads only what it uses: not importlib.resources (the protocol's data files
    are read from the package's folder), pathlib, hashlib's OpenSSL (the Community ID uses CPython's
    own SHA-1; the compiled-sources check is zlib's CRC-32) or gzip (for a compressed capture only);
    and the rows still carry the api names, error names and Community IDs those give."""
    avoided = ["importlib.resources", "pathlib", "hashlib", "_hashlib", "gzip"]
    code = ("import sys, spark_kafkawire as k; t = k.read_capture(sys.argv[1]); "
            f"loaded = [m for m in {avoided!r} if m in sys.modules]; "  # (before pyarrow's to_pylist)
            "print(sorted({a for a in t.column('api_name').to_pylist() if a})[:2], "
            "all(c.startswith('1:') for c in t.column('community_id').to_pylist()), loaded)")
    out = subprocess.run([sys.executable, "-c", code, str(SAMPLES / "tansu-admin-txn.pcap")], capture_output=True,
                         text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "['AddOffsetsToTxn', 'AddPartitionsToTxn'] True []"


def test_a_read_imports_the_tls_stage_only_when_it_meets_tls(tmp_path):
    """Nothing is imported until needed: a read of plaintext Kafka loads none of the TLS session,
    record layer, key schedule or key log (nor cryptography); a read of a TLS capture with its key
    log loads them all."""
    tls_stage = ["spark_kafkawire.tls.session", "spark_kafkawire.tls.direction", "spark_kafkawire.tls.keys",
                 "spark_kafkawire.tls.keylog", "cryptography"]
    code = ("import sys, json, spark_kafkawire as k; opts = json.loads(sys.argv[2]); "
            "t = k.read_capture(sys.argv[1], **opts); assert t.num_rows; "
            f"print([m for m in {tls_stage!r} if m in sys.modules])")
    tls = ROOT / "tests" / "tls"
    runs = {"plain": (SAMPLES / "veth-confluent-mtu.pcap", {}),
            "tls": (tls / "tls13-aes128gcm.pcap", {"tlsKeyLog": str(tls / "tls13-aes128gcm.keylog")})}
    seen = {}
    for kind, (path, opts) in runs.items():
        out = subprocess.run([sys.executable, "-c", code, str(path), json.dumps(opts)], capture_output=True,
                             text=True, check=True, cwd=tmp_path)
        seen[kind] = out.stdout.strip()
    assert seen["plain"] == "[]"
    assert seen["tls"] == repr(tls_stage)


def test_a_read_of_exchanges_leaves_the_certificate_unparsed(tmp_path):
    """Nothing is imported until needed: the server certificate's names are columns of connection
    rows only, so an exchanges read of a TLS capture does not import cryptography's x509 parser (30
    ms); a connections read does, and names the certificate the capture's broker was given
    (tests/tls/make_tls_captures.py makes it with this subject)."""
    tls = ROOT / "tests" / "tls"
    code = ("import sys, spark_kafkawire as k; "
            "t = k.read_capture(sys.argv[1], tlsKeyLog=sys.argv[2], rows=sys.argv[3]); "
            "subjects = {r.get('tls_cert_subject') for r in t.to_pylist()} - {None}; "
            "print('cryptography.x509' in sys.modules, sorted(subjects))")
    seen = {}
    for rows in ("exchanges", "connections"):
        out = subprocess.run([sys.executable, "-c", code, str(tls / "tls13-aes128gcm.pcap"),
                              str(tls / "tls13-aes128gcm.keylog"), rows], capture_output=True, text=True, check=True,
                             cwd=tmp_path)
        seen[rows] = out.stdout.strip()
    assert seen == {"exchanges": "False []", "connections": "True ['O=kafkawire tests,CN=broker.test']"}


_COLUMN_CASES = [
    (pa.int8(), [0, 1, -128, 127, 128, -129, None, "x", 5]),
    (pa.int16(), [0, -1, 32767, -32768, 32768, None, 7]),
    (pa.int32(), [0, 2**31 - 1, -(2**31), 2**31, None, b"1", -5]),
    (pa.int64(), [0, 2**63 - 1, -(2**63), 2**63, None, 12345678901234]),
    (pa.timestamp("us", tz="UTC"), [1_700_000_000_123_456_789, None, 0, -5_000, 10**40, -(10**40)]),
    (pa.float64(), [0.5, None, 3, float("nan"), float("inf"), -2.25, "x", 2**60]),
    (pa.bool_(), [True, False, None, True, 0, 1]),
    (pa.string(), ["a", None, b'{"x":1}', "\u00e9\u4e2d", "", "\ud800", 5, bytearray(b"z")]),
    # the same objects row after row (a column encodes a repeated str once): the same array
    (pa.string(), ["broker-1", "broker-1", "\ud800", "\ud800", None, None, "broker-1", b"x", b"x", "\u00e9", "\u00e9"]),
    (pa.binary(), [b"a", None, bytearray(b"\x00\xff"), memoryview(b"mv"), b"", "str", 7]),
    (pa.list_(pa.string()), [["a", "b"], None, [], ("c",), [1], ["d"], ["\ud800"]]),
    (pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
     [[{"key": "k", "value": b"v"}], None, [], "bad"]),
]


def _expected(typ, values):
    """The values a list would give, each alone through pyarrow: one that Arrow refuses is null and
    its row bad (timestamps in ns, kept in us within years 1-9999; floats from ints only where exact)."""
    kept, bad = [], []
    for row, v in enumerate(values):
        if pa.types.is_timestamp(typ) and isinstance(v, int):
            v = v // 1000
            if not arrays.MIN_TIME_US <= v <= arrays.MAX_TIME_US:
                kept.append(None)
                bad.append(row)
                continue
        if typ == pa.float64() and isinstance(v, int) and abs(v) > 2**53:
            kept.append(None)
            bad.append(row)
            continue
        if typ == pa.bool_() and isinstance(v, int) and v is not None:
            v = bool(v)
        if typ in (pa.string(), pa.binary()) and isinstance(v, (bytearray, memoryview)):
            if typ == pa.string():
                kept.append(None)
                bad.append(row)
                continue
            v = bytes(v)
        try:
            pa.array([v], type=typ)
            kept.append(v)
        except (pa.ArrowInvalid, OverflowError, TypeError, UnicodeEncodeError):
            kept.append(None)
            bad.append(row)
    return pa.array(kept, type=typ), bad


@pytest.mark.parametrize("typ,values", _COLUMN_CASES, ids=[str(t) for t, _ in _COLUMN_CASES])
def test_a_typed_column_is_the_array_of_its_values(typ, values):
    """A typed column (filled row by row into Arrow's buffers) equals pyarrow's array of the same
    values taken one by one, a value its type cannot hold null and its row named, also in
    batches bigger than a byte of the validity bitmap. An int given by ``append_int`` (unboxed
    where compiled: the rows' way for values known to be ints) comes out the same, in any column."""
    for times, by_int in ((1, False), (9, False), (1, True), (9, True)):
        vals = values * times
        col = arrays.column(typ)
        for v in vals:
            if by_int and type(v) is int:
                col.append_int(v)
            else:
                col.append(v)
        got = col.array()
        got.validate(full=True)
        want, bad = _expected(typ, vals)
        def norm(a):  # NaN equal to NaN
            return [("NaN",) if isinstance(x, float) and x != x else x for x in a.to_pylist()]

        assert got.type == want.type and got.null_count == want.null_count and norm(got) == norm(want), \
            (typ, got.to_pylist(), want.to_pylist())
        assert col.bad == bad


@pytest.mark.parametrize("typ,values", _COLUMN_CASES, ids=[str(t) for t, _ in _COLUMN_CASES])
def test_repeat_last_is_that_many_appends_of_the_last_value(typ, values):
    """``repeat_last(n)`` (a record batch's fields written once for its records) equals ``n`` more
    appends of the last value, whatever it was: a value, a null, one the type cannot hold."""
    if typ == pa.list_(pa.string()):
        pytest.skip("no list column is repeated")
    for upto in range(1, len(values) + 1):
        for n in (1, 2, 9):
            vals = values[:upto]
            col = arrays.column(typ)
            for v in vals:
                col.append(v)
            col.repeat_last(n)
            want = arrays.column(typ)
            for v in vals + [vals[-1]] * n:
                want.append(v)
            a, b = col.array(), want.array()
            a.validate(full=True)
            same = [("NaN",) if isinstance(x, float) and x != x else x for x in a.to_pylist()] == \
                [("NaN",) if isinstance(x, float) and x != x else x for x in b.to_pylist()]
            assert same and a.null_count == b.null_count and col.bad == want.bad and col.n == want.n, (typ, vals, n)


def test_an_interpreted_column_takes_append_int_as_append():
    """Where the rows run as Python their columns are lists: append_int is the list's append."""
    from spark_kafkawire.rows.table import Values

    col = Values()
    col.append_int(2**40)
    col.append(None)
    assert col == [2**40, None] and isinstance(col, list)
