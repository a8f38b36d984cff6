"""Record batches: every codec and magic from real clients, control records, bounds, row shapes."""

import gzip
import json
import struct
import sys
import zlib
from collections import Counter, defaultdict

import crc32c
import orjson
import pytest
from librt.strings import BytesWriter

from conftest import SAMPLES
from spark_kafkawire import read_capture
from spark_kafkawire.kafka import codecs
from spark_kafkawire.kafka import batchsummary as summaries
from spark_kafkawire.kafka import records as rec

sys.path.insert(0, str(SAMPLES))
from make_samples import TOPIC_PAYLOAD  # noqa: E402  (what the sample producers sent)

MANIFEST = json.loads((SAMPLES / "manifest.json").read_text())


def records(name, **opts):
    return read_capture(SAMPLES / name, rows="records", includeRecords=True, **opts).to_pylist()


# ---- real clients ------------------------------------------------------------------------------
def test_librdkafka_codecs_decode_to_what_the_producers_sent():
    got = records("tansu-confluent-codecs.pcap")
    by_client = defaultdict(list)
    for r in got:
        assert r["status"] == "ok", r
        if r["direction"] == "request":
            by_client[r["client_id"]].append(r)
    for client in MANIFEST["tansu-confluent-codecs.pcap"]["clients"]:
        mine = by_client[client["client_id"]]
        assert {r["value"] for r in mine} == {TOPIC_PAYLOAD}
        assert {r["magic"] for r in mine} == {2}
        if "compression" in client:  # keys k0..k19, as make_samples.py produced them
            assert {r["codec"] for r in mine} == {client["compression"]}
            assert sorted(r["key"] for r in mine) == sorted(f"k{i}".encode() for i in range(20))
        else:  # the acks=0 producer sent 5 records without keys
            assert len(mine) == 5 and {r["key"] for r in mine} == {None}


def test_kafka_python_every_magic_and_codec():
    """Magic 0 (Kafka 0.9), 1 (0.10) and 2 (2.1) with gzip, xerial snappy, lz4 (old framing for
    magic 0) and zstd: each client's records carry exactly the keys it was given to send."""
    got = records("mock-kafka-python-codecs.pcap")
    clients = MANIFEST["mock-kafka-python-codecs.pcap"]["clients"]
    assert len(clients) == 10
    for client in clients:
        mine = [r for r in got if r["client_id"] == client["client_id"] and r["direction"] == "request"]
        assert mine, client
        assert {r["status"] for r in mine} == {"ok"}
        assert {(r["magic"], r["codec"]) for r in mine} == {(client["magic"], client["compression"])}
        assert {r["key"].decode() for r in mine} == set(client["sent_keys"])
        assert {r["value"] for r in mine} == {TOPIC_PAYLOAD}
        assert all(r["offset"] >= 0 for r in mine)
        if client["magic"] >= 1:
            assert all(r["timestamp"] is not None for r in mine)


def test_old_lz4_framing_has_the_wrong_header_checksum():
    """The magic 0 lz4 bytes really carry the pre-0.10 header checksum (so a strict reader fails)."""
    import lz4.frame
    import xxhash

    rows = read_capture(SAMPLES / "mock-kafka-python-codecs.pcap", rows="messages").to_pylist()
    # find the lz4 frame inside a kp-0-lz4 Produce request's first message set
    frame = next(r for r in rows if r["client_id"] == "kp-0-lz4" and r["api_name"] == "Produce")
    assert frame is not None
    from spark_kafkawire.wire.capture import CaptureReader

    data = b"".join(bytes(p.data) for p in CaptureReader(str(SAMPLES / "mock-kafka-python-codecs.pcap")))
    at = data.find(codecs.LZ4_MAGIC)
    assert at > 0
    desc = data[at + 4 : at + 6]
    correct = (xxhash.xxh32(desc).intdigest() >> 8) & 0xFF
    assert data[at + 6] != correct  # Kafka 0.9's checksum (KAFKA-3160)
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(data[at : at + 400])


def test_transactional_records_and_commit_markers():
    info = {c["client_id"]: c for c in MANIFEST["tansu-admin-txn.pcap"]["clients"]}
    got = records("tansu-admin-txn.pcap")
    produced = [r for r in got if r["direction"] == "request" and r["client_id"] == "ck-txn"]
    # keys c0..c7 committed (the aborted transaction's records were purged before being sent)
    assert sorted(r["key"] for r in produced) == sorted(f"c{i}".encode() for i in range(info["ck-txn"]["records"]["committed"]))
    assert {r["transactional"] for r in produced} == {True}
    assert len({r["producer_id"] for r in produced}) == 1
    markers = Counter(r["control_type"] for r in got if r["direction"] == "response" and r["control_type"])
    assert markers == {"COMMIT": info["ck-txn"]["transactions"]["committed"]}
    ex = read_capture(SAMPLES / "tansu-admin-txn.pcap").to_pylist()
    end = [json.loads(r["request"])["Committed"] for r in ex if r["api_name"] == "EndTxn"]
    assert end == [True] * info["ck-txn"]["transactions"]["committed"]
    assert {r["transactional_id"] for r in ex if r["api_name"] in ("EndTxn", "AddPartitionsToTxn", "InitProducerId")} == {"txn-audit"}


def test_partition_rows_carry_offsets_the_clients_chose():
    got = read_capture(SAMPLES / "tansu-admin-txn.pcap", rows="partitions").to_pylist()
    by_api = defaultdict(dict)
    for r in got:
        by_api[r["api_name"]][(r["topic"], r["partition"])] = r
    # make_samples.py: send_offsets_to_transaction(audit/0 -> 5, audit/1 -> 2)
    txn = by_api["TxnOffsetCommit"]
    assert {k: r["offset"] for k, r in txn.items()} == {("audit", 0): 5, ("audit", 1): 2}
    assert {r["group_id"] for r in txn.values()} == {"auditors"}
    # ... which the group's OffsetFetch then returns; alter_consumer_group_offsets(audit/0 -> 0)
    assert {k: r["offset"] for k, r in by_api["OffsetFetch"].items()} == {("audit", 0): 5, ("audit", 1): 2}
    assert {k: r["offset"] for k, r in by_api["OffsetCommit"].items()} == {("audit", 0): 0}
    # Produce: record counts per partition add up to the records the producer sent
    assert sum(r["record_count"] for r in by_api["Produce"].values()) <= 8
    produce = [r for r in got if r["api_name"] == "Produce"]
    assert sum(r["record_count"] for r in produce) == info_records("tansu-admin-txn.pcap", "ck-txn")
    assert {r["error_name"] for r in produce} == {"NONE"}
    # Fetch: high watermarks are present and never below the fetch offset
    fetch = [r for r in got if r["api_name"] == "Fetch" and r["status"] == "complete"]
    assert fetch and all(r["high_watermark"] >= r["offset"] for r in fetch)
    assert sum(r["record_count"] for r in fetch) > 0


def info_records(name, client_id):
    c = next(c for c in MANIFEST[name]["clients"] if c["client_id"] == client_id)
    return c["records"]["committed"]


@pytest.mark.parametrize("name", ["tansu-confluent-codecs.pcap", "mock-confluent-group.pcapng", "mock-kcat.pcap"])
def test_partition_record_counts_equal_delivery_reports(name):
    got = read_capture(SAMPLES / name, rows="partitions").to_pylist()
    sent = defaultdict(int)
    for r in got:
        if r["api_name"] == "Produce" and r["error_code"] == 0:
            sent[(r["client_id"], r["topic"])] += r["record_count"]
    for client in MANIFEST[name]["clients"]:
        for topic, n in client.get("delivered", {}).items():
            assert sent[(client["client_id"], topic)] == n


# ---- hand-built batches: damage no client produces ---------------------------------------------
def _varint(n):
    n = (n << 1) ^ (n >> 63)
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _record(offset_delta, key, value, headers=()):
    body = b"\x00" + _varint(0) + _varint(offset_delta)
    body += _varint(-1) if key is None else _varint(len(key)) + key
    body += _varint(-1) if value is None else _varint(len(value)) + value
    body += _varint(len(headers))
    for hk, hv in headers:
        body += _varint(len(hk)) + hk + _varint(len(hv)) + hv
    return _varint(len(body)) + body


def batch(recs, attrs=0, base=100, payload=None, pid=7, crc=None, base_sequence=0):
    """A magic 2 record batch laid out as protocol-facts.md's table says."""
    payload = b"".join(recs) if payload is None else payload
    after_crc = struct.pack("!hiqqqhii", attrs, len(recs) - 1, 1_700_000_000_000, 1_700_000_000_000, pid, 0,
                            base_sequence, len(recs)) + payload
    c = crc32c.crc32c(after_crc) if crc is None else crc
    head = struct.pack("!qiib", base, 4 + 1 + 4 + len(after_crc), 0, 2) + struct.pack("!I", c)
    return head + after_crc


def test_abort_and_commit_markers_decoded():
    abort = batch([_record(0, struct.pack("!hh", 0, 0), struct.pack("!hi", 0, 0))], attrs=0x30)
    commit = batch([_record(0, struct.pack("!hh", 0, 1), struct.pack("!hi", 0, 0))], attrs=0x30, base=101)
    got = list(rec.iter_records(abort + commit))
    assert [r.control_type for r in got] == ["ABORT", "COMMIT"]
    assert [b["ControlType"] for b in summaries.summarize(abort + commit)] == ["ABORT", "COMMIT"]


def test_headers_offsets_and_nulls():
    data = batch([_record(0, b"k", b"v", [(b"trace", b"abc")]), _record(1, None, None)])
    got = list(rec.iter_records(data))
    assert [(r.offset, r.key, r.value) for r in got] == [(100, b"k", b"v"), (101, None, None)]
    assert got[0].headers == [("trace", b"abc")] and got[0].producer_id == 7


def test_crc_mismatch_is_reported_not_fatal():
    bad = batch([_record(0, b"k", b"v")], crc=1234)
    assert summaries.summarize(bad)[0]["CrcValid"] is False
    assert [r.status for r in rec.iter_records(bad)] == ["crc_mismatch"]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_bomb_stops_at_the_cap(codec):
    import cramjam

    inner = _record(0, None, b"\x00" * (4 << 20))
    compress = {1: gzip.compress, 2: lambda b: bytes(cramjam.snappy.compress_raw(b)),
                3: lambda b: bytes(cramjam.lz4.compress(b)), 4: lambda b: bytes(cramjam.zstd.compress(b))}[codec]
    data = batch([inner], attrs=codec, payload=compress(inner))
    assert len(data) < 300_000
    got = list(rec.iter_records(data, 1 << 20))
    assert [r.status for r in got] == ["over_cap"] and "maxDecompressedBytes" in got[0].detail
    assert [r.status for r in rec.iter_records(data, 8 << 20)] == ["ok"]


def test_magic1_wrapper_count_and_corrupt_payload():
    def msg(offset, value, attrs=0, magic=1):
        body = struct.pack("!bbq", magic, attrs, 1_700_000_000_000) + struct.pack("!i", -1) + \
            struct.pack("!i", len(value)) + value
        return struct.pack("!qiI", offset, len(body) + 4, zlib.crc32(body)) + body

    inner = msg(0, b"a") + msg(1, b"b") + msg(2, b"c")
    wrapper = msg(2, gzip.compress(inner), attrs=1)
    assert summaries.summarize(wrapper)[0]["RecordCount"] == 3
    assert [r.value for r in rec.iter_records(wrapper)] == [b"a", b"b", b"c"]
    assert [r.offset for r in rec.iter_records(wrapper)] == [0, 1, 2]
    broken = msg(2, b"not gzip at all", attrs=1)
    assert "DecompressError" in summaries.summarize(broken)[0]
    assert [r.status for r in rec.iter_records(broken)] == ["corrupt"]
    nested = msg(5, gzip.compress(wrapper), attrs=1)
    assert [r.status for r in rec.iter_records(nested)] == ["corrupt"]


def test_hostile_counts_and_truncation():
    huge = batch([_record(0, b"k", b"v")])
    huge = huge[:57] + struct.pack("!i", 2_000_000_000) + huge[61:]  # recordsCount
    fixed = huge[:17] + struct.pack("!I", crc32c.crc32c(huge[21:])) + huge[21:]
    assert [r.status for r in rec.iter_records(fixed)] == ["corrupt"]
    cut = batch([_record(0, b"k", b"v")])[:-3]
    assert [r.status for r in rec.iter_records(cut)] == ["truncated"]


def test_record_payload_is_opt_in():
    """Without includeRecords, record rows are there with their metadata and without keys, values
    and headers; with it, the same rows carry them."""
    bare = read_capture(SAMPLES / "tansu-confluent-codecs.pcap", rows="records").to_pylist()
    full = read_capture(SAMPLES / "tansu-confluent-codecs.pcap", rows="records", includeRecords=True).to_pylist()
    assert len(bare) == len(full) > 100
    assert all(r["key"] is None and r["value"] is None and r["headers"] is None for r in bare)
    assert any(r["value"] for r in full)
    payload = {"key", "value", "headers"}
    assert [{k: v for k, v in r.items() if k not in payload} for r in bare] == \
        [{k: v for k, v in r.items() if k not in payload} for r in full]
    assert b"sample payload" not in json.dumps(bare, default=str).encode()
    with pytest.raises(ValueError, match="maxDecompressedBytes"):
        read_capture(SAMPLES / "mock-kcat.pcap", maxDecompressedBytes="0")
    # exchange rows never carry payload bytes
    t = read_capture(SAMPLES / "tansu-confluent-codecs.pcap")
    text = json.dumps(t.to_pylist(), default=str)
    assert "sample payload" not in text


def test_producer_sequence_wraps_after_int_max(tmp_path):
    """Kafka wraps a producer's sequence to 0 after Int.MAX (DefaultRecordBatch.incrementSequence):
    a batch with baseSequence 2147483647 holds the records of sequences 2147483647, 0 and 1."""
    from pcapgen import Conversation, decoded_rows, produce_request, response

    data = batch([_record(i, b"k%d" % i, b"v") for i in range(3)], base_sequence=2147483647)
    assert [r.sequence for r in rec.iter_records(data)] == [2147483647, 0, 1]
    c = Conversation().handshake()
    c.send("c", produce_request(9, 1, "wrap", data))
    c.send("b", response(1, 0, 9))
    rows = decoded_rows(tmp_path, c.fin().packets, rows="records", includeRecords="true")
    assert [(r["key"], r["sequence"], r["status"]) for r in rows] == [
        (b"k0", 2147483647, "ok"), (b"k1", 0, "ok"), (b"k2", 1, "ok")]


@pytest.mark.parametrize("module,package", [("crc32c", "crc32c"), ("cramjam", "cramjam"), ("zstandard", "zstandard"),
                                            ("lz4.frame", "lz4"), ("orjson", "orjson")])
def test_a_missing_compiled_dependency_fails_naming_it(module, package):
    """An executor whose Python lacks a codec or CRC library must fail, never give rows without
    CRC checks or records (a clean executor once did)."""
    import subprocess

    code = (f"import sys; sys.modules[{module!r}] = None\n"
            f"from spark_kafkawire import read_capture\nread_capture({str(SAMPLES / 'mock-kcat.pcap')!r})")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode != 0
    assert f"needs the Python package {package!r}" in r.stderr.strip().splitlines()[-1]


# ---- the batch summary against kafka-python's own batch parser ---------------------------------
def _raw_records_fields():
    """Every records field of the sample captures' frames (their bytes, as the client sent them)."""
    from spark_kafkawire.kafka import body, message
    from test_bodies import _sample_frames

    found = []

    def walk(v):
        if isinstance(v, body.RawRecords):
            found.append(v.data)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for _name, key, ver, is_req, data, pos in _sample_frames():
        if key in (0, 1):  # Produce, Fetch
            try:
                value, _used, _facts = message.decode_with_facts(key, ver, is_req, data, pos,
                                                               body.RecordOptions(keep_raw=True))
            except (body.BodyError, KeyError):
                continue
            walk(value)
    return [d for d in found if d]


def _kafka_python_batches(data: bytes) -> tuple[list[dict], bool]:
    """kafka-python's reading of a records field: each whole batch's header fields, and whether
    bytes were left that make no whole batch (a cut one)."""
    from kafka.record.default_records import DefaultRecordBatch
    from kafka.record.legacy_records import LegacyRecordBatch

    names = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    out, pos = [], 0
    while len(data) - pos >= 17:
        size = 12 + struct.unpack_from("!i", data, pos + 8)[0]
        if size > len(data) - pos:
            break
        chunk, magic = data[pos : pos + size], data[pos + 16]
        if magic == 2:
            b = DefaultRecordBatch(chunk)
            out.append({"BaseOffset": b.base_offset, "Length": b.size_in_bytes, "Magic": 2,
                        "PartitionLeaderEpoch": b.leader_epoch, "Crc": b.crc, "Codec": names[b.compression_type],
                        "TimestampType": ("CreateTime", "LogAppendTime")[b.timestamp_type],
                        "Transactional": b.is_transactional, "Control": b.is_control_batch,
                        "LastOffsetDelta": b.last_offset_delta, "BaseTimestamp": b.first_timestamp,
                        "MaxTimestamp": b.max_timestamp, "ProducerId": b.producer_id,
                        "ProducerEpoch": b.producer_epoch, "BaseSequence": b.base_sequence,
                        "RecordCount": b.records_count, "CrcValid": b.validate_crc()})
        else:
            b = LegacyRecordBatch(chunk, magic)
            out.append({"BaseOffset": b.base_offset, "Length": size, "Magic": magic, "Crc": b._crc,
                        "Codec": names[b.compression_type], "CrcValid": b.validate_crc()})
        pos += size
    return out, pos < len(data)


def _compare(data: bytes) -> None:
    ours = summaries.summarize(data)
    theirs, cut = _kafka_python_batches(data)
    whole = [b for b in ours if not b.get("Truncated")]
    assert len(whole) == len(theirs) and bool(len(ours) - len(whole)) == cut
    for a, b in zip(whole, theirs):
        assert {k: a.get(k) for k in b} == b
    out = BytesWriter()
    count, size = summaries.summary_into(b"pad" + data, 3, 3 + len(data), codecs.Budget(), out)  # (where it lies)
    assert out.getvalue() == orjson.dumps(ours)
    assert (count, size) == summaries.totals(ours)
    assert size == sum(b["Length"] for b in theirs)


def test_batch_summary_is_what_kafka_python_reads():
    """Each batch's summary (its header fields, codec, flags and CRC check) is what kafka-python's
    own batch classes read from the same bytes, on every records field the sample clients sent
    (every codec and magic), on copies cut short and with a byte changed; and the totals the text
    mode counts are those of the values."""
    import random

    fields = _raw_records_fields()
    assert len(fields) > 50 and {f[16] for f in fields} >= {0, 1, 2}
    rnd = random.Random("summary/kafka-python")
    for data in fields:
        _compare(data)
        _compare(data[: rnd.randrange(len(data))])
        i = rnd.randrange(len(data))
        if i not in range(8, 12) and data[16] == 2 and i != 16:  # (the length and magic say where batches end)
            _compare(data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1 :])


def test_the_batch_header_layout_is_kafka_pythons():
    """The one statement of the batch headers (batchheader._V2_HEADER, _V01_HEADER), from which the
    Structs and every offset read in place are made, against kafka-python's own constants and
    header Structs."""
    from kafka.record.default_records import DefaultRecordBase as D
    from kafka.record.legacy_records import LegacyRecordBase as L

    from spark_kafkawire.kafka import batchheader as bh

    assert bh._V2.format.lstrip("!>") == D.HEADER_STRUCT.format.lstrip("!>")
    assert bh._V2.size == D.HEADER_STRUCT.size == bh.V2_SIZE == 61
    assert (bh.V2_CRC, bh.V2_ATTRIBUTES, bh.LOG_OVERHEAD) == (D.CRC_OFFSET, D.ATTRIBUTES_OFFSET, D.AFTER_LEN_OFFSET)
    assert (bh.AT_MAGIC, bh.LOG_OVERHEAD) == (L.MAGIC_OFFSET, L.LOG_OVERHEAD)
    assert bh._V01.format.lstrip("!>") == L.HEADER_STRUCT_V0.format.lstrip("!>")
    assert "".join(t for _, t in bh._V01_HEADER) == L.HEADER_STRUCT_V1.format.lstrip("!>")
    # magic 0: the key's length where magic 1's timestamp starts; magic 1: after the timestamp
    assert (bh.V01_TIMESTAMP, bh.V01_TIMESTAMP + 8) == (L.KEY_OFFSET_V0, L.KEY_OFFSET_V1)
    # each field where DefaultRecordBatch's header Struct puts it
    fields = D.HEADER_STRUCT.unpack(bytes(range(61)))
    own = bh._V2.unpack(bytes(range(61)))
    assert own == fields


def _leb128(n: int) -> bytes:
    """An unsigned varint as LEB128 writes it (7 bits a byte, least significant first)."""
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def test_the_one_varint_reader_reads_what_leb128_writes_and_says_why_it_cannot():
    """kafka/wiretypes.uvarint, the reader of bodies, headers, records and record values: every
    width LEB128 writes, read within its bounds; cut by the end or longer than allowed, said apart
    (each caller raises its own error); and each caller's error from it."""
    from spark_kafkawire.kafka.headers import HeaderError, read_uvarint
    from spark_kafkawire.kafka.wiretypes import VARINT_CUT, VARINT_LONG, uvarint

    for n in [0, 1, 127, 128, 300, 2**14 - 1, 2**14, 2**21, 2**28 - 1, 2**28, 2**31 - 1, 2**35, 2**63 - 1, 2**64 - 1]:
        enc = _leb128(n)
        buf = b"\xff" + enc + b"\xff"
        assert uvarint(buf, 1, len(buf), 10) == (n, 1 + len(enc)), n
        assert uvarint(buf, 1, len(buf), 5) == ((n, 1 + len(enc)) if len(enc) <= 5 else (0, VARINT_LONG)), n
        if len(enc) > 1:
            assert uvarint(buf, 1, len(enc), 10) == (0, VARINT_CUT), n  # the end before its last byte
    assert uvarint(b"", 0, 0, 5) == (0, VARINT_CUT)
    assert rec.zigzag_varint(_leb128(3), 0, 1) == (-2, 1)  # zigzag: 3 is -2
    with pytest.raises(rec.RecordError, match="longer than 10 bytes"):
        rec.zigzag_varint(b"\x80" * 11, 0, 11)
    with pytest.raises(rec.RecordError, match="runs past the end"):
        rec.zigzag_varint(b"\x80\x80", 0, 2)
    with pytest.raises(HeaderError):
        read_uvarint(b"\x80" * 6, 0, 6)


@pytest.mark.parametrize("name", ["tansu-confluent-codecs.pcap", "mock-kafka-python-codecs.pcap",
                                  "tansu-admin-txn.pcap", "mock-confluent-group.pcapng"])
@pytest.mark.parametrize("payload", [False, True])
def test_a_batch_written_as_runs_of_rows_equals_its_records_one_row_at_a_time(name, payload):
    """A magic 2 batch's records are written as runs of rows, the columns alike on every record of
    the batch written once per run (RecordRows._batch_rows). With one row per Arrow batch
    (``batchSize=1``) every run is one row, each written whole: the rows must be the same, so a
    column that differs from record to record but were taken as the batch's would show here."""
    runs = read_capture(SAMPLES / name, rows="records", includeRecords=payload)
    alone = read_capture(SAMPLES / name, rows="records", includeRecords=payload, batchSize=1)
    assert runs.num_rows == alone.num_rows > 0
    assert runs.to_pylist() == alone.to_pylist()
    if name == "tansu-confluent-codecs.pcap":  # (batches of many records: runs of rows were made)
        batches = Counter((r["capture_file"], r["correlation_id"], r["topic"], r["partition"], r["batch_offset"])
                          for r in runs.to_pylist())
        assert max(batches.values()) > 1
