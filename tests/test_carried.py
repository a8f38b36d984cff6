"""What records carry besides their payload: trace context and the wire formats of keys and values.

Checked against the specifications' own examples (W3C Trace Context, openzipkin's B3 propagation,
Jaeger's and SkyWalking's header formats, Confluent's and Apicurio's wire formats) and against what
real producers (confluent-kafka, kafka-python, kafkajs on Node) said they sent and real consumers
said they received (tests/insights/carried.pcap and its manifest)."""

from __future__ import annotations

import base64
import json
import struct

import pytest

from conftest import ROOT
from spark_kafkawire import read_capture
from spark_kafkawire.kafka import records as rec
from spark_kafkawire.kafka.carried import trace_context, wire_format

INSIGHTS = ROOT / "tests" / "insights"
CARRIED = json.loads((INSIGHTS / "manifest.json").read_text())["carried.pcap"]

# -- trace context: the specifications' examples ------------------------------------------------------
W3C_EXAMPLE = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"  # W3C Trace Context, section 3.2


def test_w3c_traceparent_as_the_recommendation_reads_it():
    assert trace_context([("traceparent", W3C_EXAMPLE)]) == (
        "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "w3c", None)
    # a later version may add fields after the four; version 00 may not
    assert trace_context([("traceparent", b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra")])[2] == "w3c"


@pytest.mark.parametrize("value, why", [
    (b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "version ff"),
    (b"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", "wrong length"),
    (b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01", "wrong length"),
    (b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "lowercase hex"),
    (b"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "all-zero"),
    (b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "all-zero"),
    (b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", "four fields"),
    (b"garbage", "not version"),
    (b"\xff\xfe00-4bf92f3577b34da6a3ce929d0e0e4736", "not ASCII"),
    (None, "null value"),
    (b"00-" + b"a" * 5000, "bytes (at most"),
])
def test_malformed_traceparent_is_null_and_says_why(value, why):
    trace, span, fmt, problem = trace_context([("traceparent", value)])
    assert (trace, span, fmt) == (None, None, None)
    assert problem.startswith("traceparent: ") and why in problem


def test_b3_single_and_multi_as_openzipkin_writes_them():
    # openzipkin/b3-propagation README: single header, 128-bit trace id, and the 64-bit form
    assert trace_context([("b3", b"80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90")]) == (
        "80f198ee56343ba864fe8b2a57d3eff7", "e457b5a2e4d86bd1", "b3", None)
    assert trace_context([("b3", b"a3ce929d0e0e4736-00f067aa0ba902b7-d")])[:3] == (
        "a3ce929d0e0e4736", "00f067aa0ba902b7", "b3")
    assert trace_context([("b3", b"0")]) == (None, None, None, None)  # a sampling decision only: no trace
    assert trace_context([("X-B3-TraceId", b"80f198ee56343ba864fe8b2a57d3eff7"), ("X-B3-ParentSpanId", b"05e3ac9a4f6e3b90"),
                          ("X-B3-SpanId", b"e457b5a2e4d86bd1"), ("X-B3-Sampled", b"1")]) == (
        "80f198ee56343ba864fe8b2a57d3eff7", "e457b5a2e4d86bd1", "b3multi", None)
    assert trace_context([("x-b3-traceid", b"80f198ee56343ba8")])[3] == "X-B3-SpanId: missing beside X-B3-TraceId"
    assert trace_context([("b3", b"80f198ee56343ba8-zz57b5a2e4d86bd1-1")])[3].startswith("b3: ")


def test_jaeger_and_skywalking():
    # Jaeger: {trace-id}:{span-id}:{parent-span-id}:{flags}, leading zeros dropped, ':' maybe %3A
    assert trace_context([("uber-trace-id", b"abc:de:0:1")]) == ("0000000000000abc", "00000000000000de", "jaeger", None)
    assert trace_context([("uber-trace-id", b"4bf92f3577b34da6a3ce929d0e0e4736%3A00f067aa0ba902b7%3A0%3A1")])[:2] == (
        "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
    assert trace_context([("uber-trace-id", b"0:1:0:1")])[3] == "uber-trace-id: zero trace id or span id"
    # SkyWalking's cross-process header (sw8): sample-traceId-segmentId-spanId-service-instance-endpoint-target
    b = [base64.b64encode(x).decode() for x in (b"a.1.100", b"seg.2.200", b"svc", b"inst", b"/ep", b"host:9092")]
    assert trace_context([("sw8", f"1-{b[0]}-{b[1]}-3-{b[2]}-{b[3]}-{b[4]}-{b[5]}".encode())]) == (
        "a.1.100", "seg.2.200.3", "sw8", None)
    evil = base64.b64encode(b"<script>").decode()
    assert trace_context([("sw8", f"1-{evil}-{b[1]}-3-{b[2]}-{b[3]}-{b[4]}-{b[5]}".encode())])[0] is None


def test_order_of_formats_and_repeated_headers():
    w3c = ("traceparent", W3C_EXAMPLE)
    b3 = ("b3", b"80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1")
    assert trace_context([b3, w3c])[2] == "w3c"
    later = ("traceparent", b"00-11111111111111111111111111111111-2222222222222222-01")
    assert trace_context([w3c, later])[0] == "1" * 32  # the last, as Headers.lastHeader
    assert trace_context([("app", b"1")]) == trace_context(None) == trace_context([]) == (None, None, None, None)


# -- wire formats: the registries' framings --------------------------------------------------------------
def test_wire_formats_by_the_registries_framings():
    cid = struct.pack(">bI", 0, 42)  # Confluent: magic byte 0, schema id as a big-endian int32
    assert wire_format(cid + b'{"a": [1, 2]}') == ("confluent-json", 42, None)
    assert wire_format(cid + b"\x00\x08\x96\x01") == ("confluent-protobuf", 42, None)  # index [0]; field 1 = 150
    assert wire_format(cid + b"\x04\x02\x04\x08\x96\x01") == ("confluent-protobuf", 42, None)  # indexes [1, 2]
    assert wire_format(cid + b"\x02\x0aorder") == ("confluent", 42, None)  # Avro: no marker of its own
    assert wire_format(struct.pack(">bq", 0, 7) + b"avro") == ("apicurio", 7, None)  # Apicurio: 8-byte global id
    assert wire_format(b' {"plain": true}') == ("json", None, None)
    assert wire_format("héllo".encode()) == ("utf8", None, None)
    assert wire_format(b"") == ("utf8", None, None)
    assert wire_format(b"\xff\x00\x80") == ("binary", None, None)
    assert wire_format(None) == (None, None, None)
    assert wire_format(b"{not json") == ("utf8", None, None)


# texts at the edges of JSON: ones the json module takes that a strict parser may refuse (NaN, a
# number out of a double's range, an escaped lone surrogate), and ones no parser takes
_EDGES = [b'{"a": NaN}', b"[1e400]", b'["\\ud800"]', b"[123456789012345678901234567890]", b'{"a":1,"a":2}',
          b"[1.0e-400]", b'["\\u0000"]', b" [1] ", b"[0.1e]", b"[01]", b'["\xed\xa0\x80"]', b"[1]\x00",
          b'{"a" 1}', b"[1,]", b'["\t"]', b"[-]", b"[Infinity]", b"{}", b"[]", b'[1, "\xc3\xa9", {"b": null}]']


@pytest.mark.parametrize("text", _EDGES)
def test_json_is_told_as_the_json_module_reads_it(text):
    """A value is ``json`` exactly where Python's json module parses it (orjson answers first, and
    the json module where it refuses); a text that is not JSON is ``utf8`` or ``binary``."""
    try:
        json.loads(text.decode("utf-8"))
        expected = "json"
    except (UnicodeDecodeError, ValueError):
        try:
            text.decode("utf-8")
            expected = "utf8"
        except UnicodeDecodeError:
            expected = "binary"
    assert wire_format(text) == (expected, None, None)
    assert wire_format(struct.pack(">bI", 0, 9) + text)[0] == ("confluent-json" if expected == "json" else "confluent")


def _json_module_reads(text: bytes) -> bool:
    try:
        json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return True


def test_json_texts_and_near_misses_are_told_as_the_json_module_reads_them():
    """Thousands of JSON texts (every kind of value, escapes, white space, nesting) and the same
    with a byte put in, taken out, changed or the text cut: each is ``json`` exactly where the
    json module parses it."""
    import random

    rnd = random.Random(20261129)

    def value(depth: int = 0):
        kind = rnd.randrange(9 if depth < 4 else 6)
        if kind == 0:
            return rnd.choice([0, -1, 1.5, -0.0, 1e300, 12345678901234567890, 3e-7, 10**40])
        if kind == 1:
            return "".join(rnd.choice('ab"\\/\b\f\n\r\t\x01\x7f \u00e9\ud800\u20ac') for _ in range(rnd.randrange(6)))
        if kind == 2:
            return rnd.choice([True, False, None])
        if kind == 3:
            return float(rnd.choice(["nan", "inf", "-inf"]))
        if kind in (4, 5):
            return "x" * rnd.randrange(3)
        if kind in (6, 7):
            return [value(depth + 1) for _ in range(rnd.randrange(4))]
        return {f"k{i}": value(depth + 1) for i in range(rnd.randrange(4))}

    alphabet = b'{}[]:,"\\ \t\n\r0123456789-+.eEtrufalsnNIy\x00\x1f\x7fabu'
    told = {True: 0, False: 0}
    for _ in range(20000):
        text = json.dumps(value(), ensure_ascii=rnd.random() < 0.7,
                          indent=rnd.choice([None, 1])).encode("utf-8", "surrogatepass")
        for _ in range(rnd.randrange(4)):
            at = rnd.randrange(len(text) + 1)
            kind = rnd.randrange(4)
            put = bytes([rnd.choice(alphabet)])
            text = [text[:at] + put + text[at:], text[:at] + text[at + 1:], text[:at],
                    text[:at] + put + text[at + 1:]][kind]
        if text.lstrip(b" \t\r\n")[:1] not in (b"{", b"["):
            continue
        expected = _json_module_reads(text)
        assert (wire_format(text)[0] == "json") == expected, text
        told[expected] += 1
    assert min(told.values()) > 2000  # (both answers asked often)
    for depth in (63, 64, 65, 1100, 2000):  # deep nesting: orjson's limit (1024), the json module's
        text = b"[" * depth + b"]" * depth
        assert (wire_format(text)[0] == "json") == _json_module_reads(text)


@pytest.mark.parametrize("data", [b"\x00", b"\x00\x00\x00\x07", b"\x00\x00\x00\x00\x00"])
def test_magic_byte_without_room_for_an_id_is_binary_and_says_so(data):
    fmt, sid, problem = wire_format(data)
    assert (fmt, sid) == ("binary", None) and problem.startswith("magic byte 0 but")


def test_hostile_values_are_read_in_one_pass():
    """Deep nesting, a huge declared protobuf length, a varint that never ends: an answer, no exception."""
    cid = struct.pack(">bI", 0, 5)
    assert wire_format(b"[" * 200_000) == ("utf8", None, None)
    assert wire_format(cid + b"\x00\x0a\xff\xff\xff\xff\x0f") == ("confluent", 5, None)  # a 4 GB length-delimited field
    assert wire_format(cid + b"\x00" + b"\xff" * 100_000)[0] == "confluent"
    assert wire_format(b"\x00" + b"\x00" * 4 + b"\x80" * 1_000_000)[:2] == ("apicurio", 0x80808080)


def test_record_with_a_4gb_declared_value_length_is_one_corrupt_row():
    from test_records import _varint, batch

    body = b"\x00" + _varint(0) + _varint(0) + _varint(1) + b"k" + _varint(1 << 32) + b"v" + _varint(0)
    rows = list(rec.iter_records(batch([_varint(len(body)) + body])))
    assert [r.status for r in rows] == ["corrupt"] and rows[0].value is None


def test_record_rows_carry_trace_and_format_with_details(tmp_path):
    """Through the reader, without includeRecords: the columns, a detail for what is malformed."""
    from pcapgen import Conversation, decoded_rows, produce_request, response
    from test_records import _record, batch

    recs = [_record(0, b"k", struct.pack(">bI", 0, 9) + b'{"x":1}', [(b"traceparent", W3C_EXAMPLE)]),
            _record(1, b"\x00\x01", b"\xff", [(b"traceparent", b"ff-" + W3C_EXAMPLE[3:])]),
            _record(2, None, b"text", [(b"uber-trace-id", b"\xff\xfe:1:0:1")])]
    c = Conversation().handshake()
    c.send("c", produce_request(9, 1, "t", batch(recs)))
    c.send("b", response(1, 0, 9))
    rows = decoded_rows(tmp_path, c.fin().packets, rows="records")
    got = [(r["value_format"], r["value_schema_id"], r["key_format"], r["trace_id"], r["trace_format"], r["detail"])
           for r in rows]
    assert got == [
        ("confluent-json", 9, "utf8", "4bf92f3577b34da6a3ce929d0e0e4736", "w3c", None),
        ("binary", None, "binary", None, None,
         "traceparent: version ff is invalid; key: magic byte 0 but 2 bytes: no room for a schema id"),
        ("utf8", None, None, None, None, "uber-trace-id: not ASCII text")]
    assert all(r["key"] is None and r["value"] is None and r["headers"] is None for r in rows)


# -- real clients: their own account ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def carried_rows():
    return read_capture(INSIGHTS / "carried.pcap", rows="records").to_pylist()


def test_every_record_the_producers_sent_as_they_said(carried_rows):
    """confluent-kafka, kafka-python and kafkajs: each record's offset (from the delivery report),
    key and value format, schema id and trace ids, as the producer logged them."""
    produced = {(r["topic"], r["partition"], r["log_offset"]): r for r in carried_rows
                if r["direction"] == "request" and r["topic"] != "_schemas"}
    assert len(produced) == len(CARRIED["sent"]) == 240
    kinds = set()
    for s in CARRIED["sent"]:
        r = produced[(s["topic"], s["partition"], s["offset"])]
        want = (s["client_id"], s["value_format"], s["value_schema_id"], s["trace_id"], s.get("span_id"),
                s.get("trace_format"), "utf8")
        assert (r["client_id"], r["value_format"], r["value_schema_id"], r["trace_id"], r["span_id"],
                r["trace_format"], r["key_format"]) == want, s
        assert ("traceparent: version ff" in (r["detail"] or "")) == bool(s.get("malformed"))
        kinds.add((s["software"], s.get("trace_format"), s["value_format"]))
    # each library wrote every wire format with every trace header kind
    for lib in ("confluent-kafka", "kafka-python", "kafkajs"):
        assert {k[1] for k in kinds if k[0] == lib} - {None} == {"w3c", "b3", "b3multi", "jaeger", "sw8"}, lib
        assert {k[2] for k in kinds if k[0] == lib} == {"confluent-avro", "confluent-protobuf", "confluent-json",
                                                        "apicurio", "json", "utf8", "binary"}, lib
    assert sum(bool(s.get("malformed")) for s in CARRIED["sent"]) >= 3 * 8


def test_every_record_the_consumers_received_carries_what_was_sent(carried_rows):
    """Each group's consumer said which (topic, partition, offset) it received: each is a Fetch
    response row of that consumer, with the producer's trace id and format."""
    sent = {(s["topic"], s["partition"], s["offset"]): s for s in CARRIED["sent"]}
    clients = {"billing": "billing-1", "audit": "audit-1"}
    for group, got in CARRIED["consumed"].items():
        fetched = {(r["topic"], r["partition"], r["log_offset"]): r for r in carried_rows
                   if r["direction"] == "response" and r["client_id"] == clients[group]}
        assert {tuple(g[:3]) for g in got} <= set(fetched) and len(got) >= 60
        for t, p, o, _ in got:
            r, s = fetched[(t, p, o)], sent[(t, p, o)]
            assert (r["trace_id"], r["value_format"], r["value_schema_id"]) == \
                (s["trace_id"], s["value_format"], s["value_schema_id"])


def test_the_registry_records_tell_avro_apart(carried_rows):
    """Avro has no marker: only the registry's own record of id 11 (AVRO) makes it confluent-avro;
    id 22, which no registry record declares, is told from its bytes (protobuf)."""
    regs = [r for r in carried_rows if r["topic"] == "_schemas"]
    assert len(regs) == 3 and all(r["key_format"] == r["value_format"] == "json" for r in regs)
    ids = {r["value_schema_id"]: r["value_format"] for r in carried_rows if r["value_schema_id"]}
    assert ids == {11: "confluent-avro", 12: "confluent-protobuf", 13: "confluent-json", 22: "confluent-protobuf",
                   7: "apicurio"}
