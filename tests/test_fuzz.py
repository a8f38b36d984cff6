"""Fuzzing, bounded in time: the body decoder, the framer and decoder on arbitrary streams, and the
capture reader on mutated real captures. Whatever the input: no exception but the documented ones,
no hang, no unbounded allocation.

Every input that ever failed is kept in tests/fuzz_corpus/<kind>/ (written there by the failing
test) and replayed by test_regression_corpus; the corpus is seeded with hostile inputs made by hand
(a 0x7fffffff size field, arrays claiming a billion elements, endless varints, a gzip bomb).
"""

import hashlib
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FINDINGS, SAMPLES
from pcapgen import Conversation, request, write_pcap
from spark_kafkawire import protocol, read_capture
from spark_kafkawire.kafka.body import BodyError
from spark_kafkawire.kafka.layouts import schemas
from stages import decode_body
from spark_kafkawire.wire.capture import CaptureError

CORPUS = Path(__file__).parent / "fuzz_corpus"
FUZZ = settings(max_examples=300, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TRIPLES = sorted(schemas().messages)
SAMPLE = (SAMPLES / "mock-kcat.pcap").read_bytes()
SAMPLE_NG = (SAMPLES / "mock-confluent-group.pcapng").read_bytes()


def _keep(kind: str, data: bytes) -> None:
    folder = CORPUS / kind
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{hashlib.sha1(data).hexdigest()[:16]}.bin").write_bytes(data)


# ---- the three targets ---------------------------------------------------------------------------
def check_body(data: bytes) -> None:
    """First 5 bytes choose (api key, version, direction); the rest is the body."""
    if len(data) < 5:
        return
    key, ver, req = struct.unpack_from("!hhb", data)
    triple = TRIPLES[(key * 131 + ver * 7 + req) % len(TRIPLES)]
    try:
        decode_body(triple[0], triple[1], triple[2], data[5:], 0)
    except (BodyError, KeyError):
        pass


def check_stream(data: bytes, tmp: Path) -> None:
    """Arbitrary bytes as a Kafka connection's two directions (split by the first byte), after a real
    request so that roles are known; then every row shape decodes without an exception."""
    cut = data[0] * len(data) // 256 if data else 0
    conv = Conversation().handshake()
    conv.send("c", request(3, 1, 1, body=b"\x00\x00\x00\x00"))
    conv.send("c", data[:cut], mss=700)
    conv.send("b", data[cut:], mss=700)
    conv.fin()
    path = tmp / "fuzz.pcap"
    write_pcap(path, conv.packets)
    for shape in ("exchanges", "messages", "partitions", "connections"):
        t = read_capture(path, rows=shape)
        assert t.num_rows < 10_000


def check_capture(data: bytes, tmp: Path) -> None:
    """A mutated capture (pcap, pcapng or gzip): rows in every shape, or a clear CaptureError."""
    path = tmp / ("fuzz.pcap.gz" if data[:2] == b"\x1f\x8b" else "fuzz.pcap")
    path.write_bytes(data)
    for opts in ({"rows": "exchanges"}, {"rows": "connections"}, {"rows": "records", "includeRecords": "true"}):
        try:
            t = read_capture(path, **opts)
        except CaptureError:  # a clear error about the file (bad magic, unknown link type, ...)
            return
        assert t.num_rows < 10_000


def _guard(kind, fn, data, *args):
    try:
        fn(data, *args)
    except Exception:
        _keep(kind, data)
        raise


# ---- fuzzing ---------------------------------------------------------------------------------------
@FUZZ
@given(st.binary(min_size=5, max_size=600))
def test_fuzz_body_decoder(data):
    _guard("body", check_body, data)


@FUZZ
@given(st.binary(max_size=3000))
def test_fuzz_framer_and_decoder(tmp_path_factory, data):
    _guard("stream", check_stream, data, tmp_path_factory.mktemp("s"))


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, len(SAMPLE) - 1), st.integers(0, 255)), max_size=12),
       st.integers(24, len(SAMPLE)))
def test_fuzz_capture_reader(tmp_path_factory, flips, length):
    _guard("capture", check_capture, _flipped(SAMPLE[:length], flips), tmp_path_factory.mktemp("c"))


def _flipped(data: bytes, flips) -> bytes:
    out = bytearray(data)
    for at, value in flips:
        if at < len(out):
            out[at] = value
    return bytes(out)


def _interface_fields(data: bytes) -> list[int]:
    """Offsets of the pcapng timestamp fields and interface-description options (if_tsresol,
    if_tsoffset): what decides every packet's time."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        btype, blen = struct.unpack_from("<II", data, pos)
        if blen < 12 or pos + blen > len(data):
            break
        if btype == 1:  # interface description: link type, snaplen, options
            out += range(pos + 8, pos + blen - 4)
        elif btype == 6:  # enhanced packet: interface id, timestamp high and low
            out += range(pos + 8, pos + 20)
        pos += blen
    return out


NG_FIELDS = _interface_fields(SAMPLE_NG)


SHORT = settings(max_examples=60, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@SHORT
@given(st.lists(st.tuples(st.sampled_from(NG_FIELDS), st.integers(0, 255)), min_size=1, max_size=8))
def test_fuzz_pcapng_times_and_interface_options(tmp_path_factory, flips):
    _guard("capture", check_capture, _flipped(SAMPLE_NG, flips), tmp_path_factory.mktemp("n"))


GZ = __import__("gzip").compress(SAMPLE, mtime=0)


@SHORT
@given(st.lists(st.tuples(st.integers(10, len(GZ) - 1), st.integers(0, 255)), min_size=1, max_size=4),
       st.integers(10, len(GZ)))
def test_fuzz_gzip_streams(tmp_path_factory, flips, length):
    _guard("capture", check_capture, _flipped(GZ[:length], flips), tmp_path_factory.mktemp("g"))


FOUND = [("pcapng-timestamp-out-of-range.pcapng", {}), ("corrupt-gzip-stream.pcap.gz", {}),
         ("records-int32-overflow.pcap", {"rows": "records", "includeRecords": "true"}),
         ("records-magic-int8-overflow.pcap", {"rows": "records", "includeRecords": "true"}),
         ("records-offset-int64-overflow.pcap", {"rows": "records", "includeRecords": "true"})]


@pytest.mark.parametrize("name,opts", FOUND, ids=[n for n, _ in FOUND])
def test_findings_give_rows_not_exceptions(name, opts):
    """The inputs an attack found escaping PERMISSIVE mode (../shared/fuzz-findings): rows, with
    what could not be represented left null and named in the row's detail."""
    shapes = [opts] if opts else [{"rows": r} for r in ("exchanges", "messages", "partitions", "connections")]
    for shape in shapes:
        rows = read_capture(FINDINGS / name, **shape).to_pylist()
        assert rows
        if name.startswith("pcapng"):
            times = [k for k in ("request_time", "time", "first_time") if k in rows[0]]
            assert any(r[times[0]] is None and "out of range" in (r["detail"] or "") for r in rows)
        elif name.startswith("corrupt-gzip"):
            assert [r["status"] for r in rows] == ["capture_damaged"] and "compressed stream" in rows[0]["detail"]
        elif "magic" in name or "offset" in name:
            column = "magic" if "magic" in name else "offset"
            assert any(r[column] is None and column in (r["detail"] or "") for r in rows)


# ---- hand-made hostile seeds and the regression corpus -------------------------------------------
def _seeds() -> dict[str, list[bytes]]:
    import gzip

    endless = b"\xff" * 64
    meta_v12 = struct.pack("!hhb", 3, 12, 1)
    huge_array = struct.pack("!hhb", 3, 0, 1) + struct.pack("!i", 1_000_000_000)
    frame_max = struct.pack("!i", 0x7FFFFFFF) + request(3, 1, 2)
    bomb_batch = struct.pack("!i", 0) + b"\x1f\x8b" + gzip.compress(b"\x00" * (1 << 20), mtime=0)[2:]
    return {"body": [meta_v12 + endless, huge_array, struct.pack("!hhb", 1, 4, 0) + endless],
            "stream": [b"\x10" + frame_max, b"\x80" + bomb_batch, b"\x00" + endless]}


def _corpus():
    out = [(kind, data) for kind, items in _seeds().items() for data in items]
    for kind in ("body", "stream", "capture"):
        for f in sorted((CORPUS / kind).glob("*.bin")):
            out.append((kind, f.read_bytes()))
    return out


@pytest.mark.parametrize("kind,data", _corpus(), ids=lambda x: x if isinstance(x, str) else hashlib.sha1(x).hexdigest()[:8])
def test_regression_corpus(kind, data, tmp_path):
    {"body": lambda: check_body(data), "stream": lambda: check_stream(data, tmp_path),
     "capture": lambda: check_capture(data, tmp_path)}[kind]()


def test_body_triples_cover_every_api():
    assert {k for k, _v, _r in TRIPLES} >= {a.key for a in protocol.APIS}
