"""Hostile and huge inputs: work grows linearly with the input, rows leave in bounded batches,
decompression has one budget per message, and a size field too small for a header is no frame.

Work is counted, not timed: ``work(fn)`` is the number of Python and C function calls fn makes
(sys.setprofile), so a quadratic walk shows as a ratio, whatever the machine's speed.
"""

from __future__ import annotations

import struct
import sys
import zlib

import dpkt
import pytest

from conftest import FINDINGS
from pcapgen import Conversation, request, response, tcp_packet, write_pcap
from test_records import _record, batch
from spark_kafkawire import read_capture
from spark_kafkawire.kafka import codecs
from spark_kafkawire.kafka import batchsummary as summaries
from spark_kafkawire.kafka import records as rec
from spark_kafkawire.reader import iter_batches

C, B = ("10.1.0.1", 40001), ("10.1.0.2", 9092)


def work(fn) -> int:
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


# -- 1. segments queued behind a hole ------------------------------------------------------------
def _hole_then_tiny_segments(path, n: int) -> None:
    """A connection whose first client byte is lost, then n one-byte segments (all queued)."""
    pk = [tcp_packet(C, B, 1000, flags=dpkt.tcp.TH_SYN),
          tcp_packet(B, C, 5000, flags=dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK, ack=1001)]
    pk += [tcp_packet(C, B, 1002 + i, b"x", ack=5001) for i in range(n)]
    write_pcap(path, pk)


def test_segments_behind_a_hole_take_linear_work(tmp_path):
    small, big = tmp_path / "small.pcap", tmp_path / "big.pcap"
    _hole_then_tiny_segments(small, 1000)
    _hole_then_tiny_segments(big, 4000)
    w_small = work(lambda: read_capture(small, rows="connections"))
    w_big = work(lambda: read_capture(big, rows="connections"))
    assert w_big / w_small < 6, (w_small, w_big)  # 4x the input: linear is ~4, quadratic ~16
    (row,) = read_capture(big, rows="connections").to_pylist()
    assert row["client_bytes"] == 4000 and row["client_gap_bytes"] == 1 and row["client_gaps"] == 1


def test_hole_reproducer_keeps_every_byte_accounted():
    (row,) = read_capture(FINDINGS / "hole-then-5000-tiny-segments.pcap", rows="connections").to_pylist()
    d = "client"
    assert row[f"{d}_bytes"] == row[f"{d}_frame_bytes"] + row[f"{d}_partial_bytes"] + row[f"{d}_skipped_bytes"]
    assert row[f"{d}_gaps"] >= 1


# -- 2. a Metadata response with very many partitions -----------------------------------------------
def _metadata_v1_response(partitions: int, error_at: int) -> bytes:
    """Metadata v1 response (protocol spec layout): one broker, one topic with ``partitions``
    partitions; the one at ``error_at`` has error 9 (REPLICA_NOT_AVAILABLE)."""
    s = lambda t: struct.pack("!h", len(t)) + t  # noqa: E731
    body = struct.pack("!i", 1) + struct.pack("!i", 1) + s(b"b1") + struct.pack("!i", 9092) + struct.pack("!h", -1)
    body += struct.pack("!i", 1)  # controller id
    body += struct.pack("!i", 1) + struct.pack("!h", 0) + s(b"big") + b"\x00" + struct.pack("!i", partitions)
    for p in range(partitions):
        body += struct.pack("!hii", 9 if p == error_at else 0, p, 1) + struct.pack("!ii", 1, 1) + struct.pack("!ii", 1, 1)
    return body


def _metadata_capture(path, partitions: int) -> None:
    conv = Conversation(client=C, broker=B).handshake()
    conv.send("c", request(3, 1, 7, "cli", body=struct.pack("!i", -1)))
    conv.send("b", response(7, 3, 1, body=_metadata_v1_response(partitions, partitions - 1)), mss=1448)
    write_pcap(path, conv.fin().packets)


def test_first_error_of_a_huge_metadata_response_takes_linear_work(tmp_path):
    small, big = tmp_path / "small.pcap", tmp_path / "big.pcap"
    _metadata_capture(small, 5000)
    _metadata_capture(big, 20000)
    w_small = work(lambda: read_capture(small))
    w_big = work(lambda: read_capture(big))
    assert w_big / w_small < 6, (w_small, w_big)
    (row,) = read_capture(big).to_pylist()
    assert row["status"] == "complete" and row["error_code"] == 9 and row["partition_count"] == 20000


@pytest.mark.external
def test_the_metadata_reproducer_reads_as_tshark_does():
    """The reproducer (50,000 partitions, which took 4.4 s when the first-error search was
    quadratic): one complete exchange whose error code and partition count are what tshark's Kafka
    dissector reads from the same bytes (50,000 partition errors and the topic's, every one 0)."""
    import subprocess

    path = FINDINGS / "metadata-50000-partitions.pcap"
    out = subprocess.run(["tshark", "-r", str(path), "-d", "tcp.port==9092,kafka", "-T", "fields", "-e", "kafka.error"],
                         capture_output=True, text=True, check=True).stdout
    codes = [int(c) for line in out.split() for c in line.split(",") if c]
    assert len(codes) == 50_001
    (row,) = read_capture(path).to_pylist()
    assert row["status"] == "complete" and row["partition_count"] == 50_000
    assert row["error_code"] == next((c for c in codes if c), 0)


# -- 3. millions of records in one batch --------------------------------------------------------------
def _many_records_capture(path, count: int) -> None:
    recs = [_record(i, None, b"") for i in range(count)]
    plain = b"".join(recs)
    data = batch(recs, attrs=1, payload=_gzip(plain))
    conv = Conversation(client=C, broker=B).handshake()
    from pcapgen import produce_request

    conv.send("c", produce_request(7, 1, "amp", data), mss=1448)
    write_pcap(path, conv.fin().packets)


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data)


@pytest.mark.spies
def test_records_of_one_batch_leave_in_batches_of_batch_size(tmp_path, monkeypatch):
    path = tmp_path / "amp.pcap"
    _many_records_capture(path, 20_000)
    made = []
    real = rec.V2Batch.next

    def counting(self):
        read = real(self)
        if read:
            made.append(self.off_delta)
        return read

    monkeypatch.setattr(rec.V2Batch, "next", counting)
    batches = iter_batches(str(path), {"rows": "records", "includeRecords": "true", "batchSize": 1000})
    first = next(batches)
    assert first.num_rows == 1000
    assert len(made) <= 1001  # the rest of the frame's records are not made yet
    rest = list(batches)
    assert all(b.num_rows <= 1000 for b in rest)
    assert first.num_rows + sum(b.num_rows for b in rest) == 20_000 == len(made)


def test_records_past_the_cap_become_one_status_row(tmp_path):
    path = tmp_path / "amp.pcap"
    _many_records_capture(path, 20_000)
    rows = read_capture(path, rows="records", includeRecords="true", maxRecordsPerBatch=5000).to_pylist()
    assert [r["status"] for r in rows].count("ok") == 5000
    (over,) = [r for r in rows if r["status"] != "ok"]
    assert over["status"] == "over_cap" and "20000 records" in over["detail"]
    assert "maxRecordsPerBatch" in over["detail"]
    with pytest.raises(ValueError, match="maxRecordsPerBatch"):
        read_capture(path, rows="records", includeRecords="true", maxRecordsPerBatch=0)
    dropped = read_capture(path, rows="records", includeRecords="true", maxRecordsPerBatch=5000, mode="DROPMALFORMED")
    assert dropped.num_rows == 5000


def test_row_amplification_reproducer_is_bounded():
    """A 6 KB capture whose batch holds ~9 million records: the default cap stops it."""
    rows = 0
    statuses = set()
    for b in iter_batches(str(FINDINGS / "records-row-amplification.pcap"),
                          {"rows": "records", "includeRecords": "true"}):
        assert b.num_rows <= 8192
        rows += b.num_rows
        statuses |= set(b.column("status").to_pylist())
    assert rows == rec.DEFAULT_MAX_RECORDS + 1 and "over_cap" in statuses


# -- 4. magic 0/1 wrappers: one decompression budget per message --------------------------------------
def _v1_message(offset: int, value: bytes, attrs: int = 0, bad_crc: bool = False) -> bytes:
    """A magic 1 message (protocol-facts.md: offset, size, crc, magic, attributes, timestamp, key, value)."""
    body = struct.pack("!bbq", 1, attrs, 1_700_000_000_000) + struct.pack("!i", -1) + \
        struct.pack("!i", len(value)) + value
    crc = zlib.crc32(body) ^ (1 if bad_crc else 0)
    return struct.pack("!qiI", offset, len(body) + 4, crc) + body


def _wrapper(n_inner: int, inner_size: int, bad_crc: bool = False) -> bytes:
    inner = b"".join(_v1_message(i, b"\x00" * inner_size) for i in range(n_inner))
    return _v1_message(n_inner - 1, _gzip(inner), attrs=1, bad_crc=bad_crc)


@pytest.fixture
def produced(monkeypatch) -> list[int]:
    """Bytes each decompression made (counted through codecs.decompress)."""
    made: list[int] = []
    real = codecs.decompress

    def counting(codec, data, cap=codecs.DEFAULT_MAX_DECOMPRESSED):
        try:
            out = real(codec, data, cap)
        except codecs.RecordError:
            made.append(cap + 1)  # at most cap + 1 bytes were made before it stopped
            raise
        made.append(len(out))
        return out

    monkeypatch.setattr(codecs, "decompress", counting)
    return made


@pytest.mark.spies
def test_wrappers_of_one_message_share_one_budget(produced):
    cap = 1 << 20
    wrappers = [_wrapper(64, 8 << 10) for _ in range(20)]  # each inflates to ~0.5 MiB
    summary = summaries.summarize(b"".join(wrappers), cap)
    assert len(summary) == 20
    counted = [b["RecordCount"] for b in summary]
    assert counted[0] == 64 and counted[-1] is None  # the budget ran out part of the way
    assert "maxDecompressedBytes" in summary[-1]["DecompressError"]
    assert sum(produced) <= 2 * cap + 2
    # records rows draw on one budget per message too
    produced.clear()
    got = list(rec.iter_records(b"".join(wrappers), codecs.Budget(cap)))
    assert sum(produced) <= 2 * cap + 2
    assert sum(r.status == "ok" for r in got) < 20 * 64 and got[-1].status == "over_cap"


@pytest.mark.spies
def test_a_wrapper_whose_crc_fails_is_not_decompressed(monkeypatch):
    calls = []
    monkeypatch.setattr(codecs, "decompress", lambda *a, **k: calls.append(a) or b"")
    (s,) = summaries.summarize(_wrapper(4, 10, bad_crc=True))
    assert s["CrcValid"] is False and s["RecordCount"] is None and calls == []


@pytest.mark.spies
def test_wrapper_bomb_reproducer_decompresses_within_budget(produced):
    (row,) = read_capture(FINDINGS / "magic1-wrapper-bombs.pcap").to_pylist()
    assert sum(produced) <= 2 * codecs.DEFAULT_MAX_DECOMPRESSED + 2
    assert row["request"] is not None


# -- 5. zero-size frames --------------------------------------------------------------------------------
def test_zero_bytes_are_not_a_million_frames(tmp_path):
    """One ApiVersions request, 1 MiB of zeros, another request: the zeros are skipped bytes
    (a size field below the smallest header is no frame), found with little work."""
    def capture(path, zeros):
        conv = Conversation(client=C, broker=B).handshake()
        conv.send("c", request(18, 0, 1, "cli", body=b"") + b"\x00" * zeros + request(18, 0, 2, "cli", body=b""),
                  mss=1448)
        conv.send("b", response(2, 18, 0))
        write_pcap(path, conv.fin().packets)

    capture(tmp_path / "z1.pcap", 256 << 10)
    capture(tmp_path / "z4.pcap", 1 << 20)
    rows = read_capture(tmp_path / "z4.pcap").to_pylist()
    assert sorted((r["correlation_id"], r["status"]) for r in rows) == [(1, "no_response"), (2, "complete")]
    (conn,) = read_capture(tmp_path / "z4.pcap", rows="connections").to_pylist()
    assert conn["client_skipped_bytes"] == 1 << 20 and conn["client_frames"] == 2
    w1 = work(lambda: read_capture(tmp_path / "z1.pcap"))
    w4 = work(lambda: read_capture(tmp_path / "z4.pcap"))
    assert w4 / w1 < 6, (w1, w4)
