"""Framing, header parsing and pairing, on hand-built streams and captures."""

import struct

import pytest

from pcapgen import Conversation, decoded_rows, request, response
from spark_kafkawire.wire.frames import Framer
from spark_kafkawire.kafka.headers import HeaderError, parse_request_header, parse_response_header, read_uvarint


def test_uvarint():
    assert read_uvarint(b"\x00", 0, 1) == (0, 1)
    assert read_uvarint(b"\x96\x01", 0, 2) == (150, 2)
    assert read_uvarint(b"\xff\xff\xff\xff\x0f", 0, 5) == (0xFFFFFFFF, 5)
    with pytest.raises(HeaderError):
        read_uvarint(b"\xff\xff\xff\xff\xff\xff", 0, 6)  # endless varint
    with pytest.raises(HeaderError):
        read_uvarint(b"\x80", 0, 1)


def test_request_header_v2_skips_tagged_fields_by_size():
    hdr = struct.pack("!hhi", 0, 9, 42) + struct.pack("!h", 3) + b"cli"
    tagged = b"\x02" + b"\x00\x03abc" + b"\x05\x01z"  # two unknown tags
    h = parse_request_header(hdr + tagged + b"BODY")
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id, h.header_version) == (0, 9, 42, "cli", 2)
    assert (hdr + tagged + b"BODY")[h.body_offset:] == b"BODY"


def test_request_header_v0_and_null_client_id():
    h = parse_request_header(struct.pack("!hhi", 7, 0, 5) + b"rest")
    assert (h.header_version, h.client_id, h.body_offset) == (0, None, 8)
    h = parse_request_header(struct.pack("!hhih", 3, 1, 5, -1))
    assert (h.header_version, h.client_id) == (1, None)


@pytest.mark.parametrize("data", [b"\x00\x03", struct.pack("!hhih", 3, 1, 5, 50) + b"short",
                                  struct.pack("!hhih", 3, 1, 5, -7)])
def test_bad_request_headers(data):
    with pytest.raises(HeaderError):
        parse_request_header(data)


def test_response_headers():
    assert parse_response_header(struct.pack("!i", 9) + b"body", 0) == (9, 4)
    assert parse_response_header(struct.pack("!i", 9) + b"\x01\x00\x01x" + b"body", 1) == (9, 8)


def test_framer_splits_across_chunks_and_stamps_first_byte():
    frames = []
    f = Framer(frames.append, synced=True)
    stream = request(3, 1, 1, body=b"") + request(3, 1, 2, body=b"x" * 50) + request(3, 1, 3, body=b"")
    cuts = [0, 3, 20, 21, 60, len(stream)]
    for i in range(len(cuts) - 1):
        f.data(stream[cuts[i] : cuts[i + 1]], ts=100 + i, number=i + 1)
    f.end()
    assert [parse_request_header(fr.data).correlation_id for fr in frames] == [1, 2, 3]
    assert [fr.ts_ns for fr in frames] == [100, 101, 104]  # frame 2 starts at byte 17, in chunk 2
    assert [fr.offset for fr in frames] == [0, 17, 17 + 67]
    assert f.acct.frame_bytes == len(stream) and f.acct.partial_bytes == 0


def test_framer_bad_size_skips_and_accounts():
    frames = []
    f = Framer(frames.append, max_frame=1000, synced=True)
    f.data(struct.pack("!i", 5000) + b"x" * 20, 0, 1)
    assert frames == [] and not f.synced
    f.end()  # the last 7 bytes were held: they might have begun a frame
    assert f.acct.skipped_bytes == 24


def test_pipelined_requests_pair_by_correlation_id(tmp_path):
    c = Conversation().handshake()
    c.send("c", request(3, 1, 10, "p") + request(1, 11, 11, "p") + request(2, 5, 12, "p"))
    answers = [response(10, 3, 1), response(11, 1, 11), response(12, 2, 5)]
    c.send("b", answers[0] + answers[1])
    c.send("b", answers[2])
    rows = decoded_rows(tmp_path, c.fin().packets)
    sizes = [len(a) - 4 for a in answers]
    assert [(r["correlation_id"], r["api_name"], r["response_size"], r["status"]) for r in rows] == [
        (10, "Metadata", sizes[0], "complete"), (11, "Fetch", sizes[1], "complete"),
        (12, "ListOffsets", sizes[2], "complete")]
    assert rows[0]["request_time"] == rows[1]["request_time"]
    assert rows[0]["latency_ms"] == pytest.approx(1.0)  # packets are 1 ms apart
    assert rows[2]["latency_ms"] == pytest.approx(2.0)


def test_unanswered_and_orphan_responses(tmp_path):
    c = Conversation().handshake()
    c.send("b", response(99, 3, 1))  # answers a request sent before the capture started
    c.send("c", request(3, 1, 1, "x"))
    c.send("b", response(1, 3, 1))
    c.send("c", request(3, 1, 2, "x"))  # never answered
    rows = decoded_rows(tmp_path, c.packets)
    st = {r["correlation_id"]: (r["status"], r["api_name"]) for r in rows}
    assert st == {99: ("request_missing", None), 1: ("complete", "Metadata"), 2: ("no_response", "Metadata")}
    assert [r["detail"] for r in rows if r["correlation_id"] == 2] == ["capture ended before a response"]


def test_acks_zero_produce(tmp_path):
    # Produce v7: transactional_id (null) then acks=0; the broker answers only the later Metadata
    body = struct.pack("!hhi", -1, 0, 1000) + struct.pack("!i", 0)
    c = Conversation().handshake()
    c.send("c", request(0, 7, 1, "fire-and-forget", body=body))
    c.send("c", request(3, 7, 2, "fire-and-forget"))
    c.send("b", response(2, 3, 7))
    rows = decoded_rows(tmp_path, c.fin().packets)
    assert [(r["api_name"], r["status"], r["detail"]) for r in rows] == [
        ("Produce", "no_response", "acks=0: no response expected"), ("Metadata", "complete", None)]


def test_flexible_produce_acks(tmp_path):
    body = b"\x00" + struct.pack("!hi", 0, 1000) + b"\x01\x00"  # compact null transactional_id, acks 0
    c = Conversation().handshake()
    c.send("c", request(0, 9, 5, "flex", body=body, flexible=True))
    rows = decoded_rows(tmp_path, c.fin().packets)
    assert rows[0]["detail"] == "acks=0: no response expected"


def test_client_found_without_syn_on_any_port(tmp_path):
    c = Conversation(client=("10.1.1.1", 1234), broker=("10.1.1.2", 55555))  # client has the lower port
    c.send("c", request(18, 3, 7, "late", flexible=True))
    c.send("b", response(7, 18, 3))
    rows = decoded_rows(tmp_path, c.packets)
    assert [(r["client_ip"], r["client_port"], r["broker_port"], r["status"]) for r in rows] == [
        ("10.1.1.1", 1234, 55555, "complete")]


def test_one_directional_connection_of_requests(tmp_path):
    c = Conversation(broker=("10.0.0.2", 36333))
    for i in range(5):
        c.send("c", request(12, 4, i, "hb", flexible=True))
    rows = decoded_rows(tmp_path, c.packets)
    assert [r["status"] for r in rows] == ["no_response"] * 5
    assert {r["broker_port"] for r in rows} == {36333}


def test_ports_option(tmp_path):
    a = Conversation(broker=("10.0.0.2", 9092)).handshake()
    a.send("c", request(3, 1, 1))
    b = Conversation(client=("10.0.0.3", 40001), broker=("10.0.0.4", 19092)).handshake()
    b.send("c", request(3, 1, 1))
    pk = a.packets + b.packets
    assert {r["broker_port"] for r in decoded_rows(tmp_path, pk)} == {9092, 19092}
    assert {r["broker_port"] for r in decoded_rows(tmp_path, pk, ports="19092")} == {19092}
    assert {r["broker_port"] for r in decoded_rows(tmp_path, pk, PORTS="9092, 19092")} == {9092, 19092}


def test_messages_rows(tmp_path):
    c = Conversation().handshake()
    c.send("c", request(3, 12, 4, "m", flexible=True))
    c.send("b", response(4, 3, 12))
    rows = decoded_rows(tmp_path, c.fin().packets, rows="messages")
    assert [(r["direction"], r["api_name"], r["header_version"], r["correlation_id"], r["client_id"], r["status"])
            for r in rows] == [("request", "Metadata", 2, 4, "m", "complete"),
                               ("response", "Metadata", 1, 4, "m", "complete")]  # api and client from the request
    assert rows[1]["time"] > rows[0]["time"]


def test_unknown_api_version(tmp_path):
    c = Conversation().handshake()
    c.send("c", request(0, 3, 1, "ok") + request(3, 99, 2, "future", body=b""))
    c.send("b", response(1, 0, 3) + response(2, 3, 12))
    rows = decoded_rows(tmp_path, c.fin().packets)
    assert [r["status"] for r in rows] == ["complete", "unknown_api"]


def test_bad_options():
    from spark_kafkawire import Options

    with pytest.raises(ValueError, match="rows"):
        Options.parse({"rows": "packets"})
    with pytest.raises(ValueError, match="unknown"):
        Options.parse({"colour": "blue"})


def test_message_rows_have_the_status_of_their_own_frame(tmp_path):
    """rows=messages: a request whose body decoded is `complete` even when the broker's answer
    does not fit its schema; the exchange's status is in exchange_status."""
    from pcapgen import Conversation, decoded_rows, request, response

    c = Conversation().handshake()
    c.send("c", request(3, 1, 1, "cli", body=b"\x00\x00\x00\x00"))
    c.send("b", response(1, 3, 1, body=b"\x00\x00\x00\x05\xff"))  # 5 brokers promised, one byte follows
    c.send("c", request(3, 1, 2, "cli", body=b"\x00\x00\x00\x00"))  # never answered
    rows = decoded_rows(tmp_path, c.packets, rows="messages")
    got = [(r["correlation_id"], r["direction"], r["status"], r["exchange_status"]) for r in rows]
    assert got == [(1, "request", "complete", "undecoded"), (1, "response", "undecoded", "undecoded"),
                   (2, "request", "complete", "no_response")]
    assert rows[1]["detail"].startswith("response body") and rows[0]["detail"] is None
    # DROPMALFORMED drops the frame that did not decode, not its well-formed request
    kept = decoded_rows(tmp_path, c.packets, rows="messages", mode="DROPMALFORMED")
    assert [(r["correlation_id"], r["direction"]) for r in kept] == [(1, "request"), (2, "request")]


def test_framer_takes_a_whole_frame_chunk_from_a_stream_seen_from_its_middle():
    """A chunk that is exactly one frame with a plausible header starts framing at once: the
    frame, its stamp and the counts are what the boundary scan gives."""
    from spark_kafkawire.kafka.headers import looks_like_request

    def framer(frames):
        return Framer(frames.append, synced=False, plausible=lambda b, strict: looks_like_request(b))

    one, two = request(3, 1, 7, body=b"\x00" * 4), request(18, 3, 8, body=b"\x00\x00")
    frames = []
    f = framer(frames)  # connection seen from its middle: finding the boundary is a resync
    f.data(one, 10, 1)
    f.data(two, 11, 2)
    f.end()
    assert [(fr.ts_ns, fr.number, fr.offset, fr.size, fr.data) for fr in frames] == \
        [(10, 1, 0, len(one) - 4, one[4:]), (11, 2, len(one), len(two) - 4, two[4:])]
    assert (f.synced, f.resyncs, f.acct.frames, f.acct.frame_bytes, f.acct.skipped_bytes) == \
        (True, 1, 2, len(one) + len(two), 0)

    frames = []
    f = framer(frames)
    f.start()  # SYN seen: the first byte is a frame's, no resync
    f.data(one, 10, 1)
    assert len(frames) == 1 and f.resyncs == 0

    frames = []
    f = framer(frames)  # three stray bytes first: the frame after them is found by the scan
    f.data(b"\x01\x02\x03", 9, 1)
    f.data(one, 10, 2)
    f.end()
    assert [fr.data for fr in frames] == [one[4:]] and f.acct.skipped_bytes == 3 and f.resyncs == 1

    frames = []
    f = framer(frames)  # the right length for its size field, but no request header: not a frame
    junk = struct.pack("!i", 8) + struct.pack("!hhi", 999, 99, 1)
    f.data(junk, 10, 1)
    f.end()
    assert frames == [] and f.acct.skipped_bytes == len(junk) and f.acct.frames == 0


def test_find_boundary_is_a_function_of_the_held_bytes():
    """The frame-boundary search alone: garbage, then two frames (sizes from the bytes built here).
    The first frame is found where it starts, chained to the second; a candidate whose next frame
    is not there yet is waited for, unless no more bytes will come."""
    from spark_kafkawire.wire.boundary import find_boundary

    def plausible(head: bytes, strict: bool) -> int:  # a header of api key 18 (ApiVersions), version 3
        return int(head[:4] == b"\x00\x12\x00\x03")

    one = request(18, 3, 1)
    two = request(18, 3, 2)
    garbage = b"\xff\x01\x02"
    scan = bytearray(garbage + one + two)
    assert find_boundary(scan, 0, False, [], 1 << 20, plausible, False)[0] == len(garbage)
    # only the first frame held: its successor cannot confirm it yet, so the search waits there
    held = bytearray(garbage + one + b"\x00")
    found, stopped, _ = find_boundary(held, 0, False, [], 1 << 20, plausible, False)
    assert found is None and stopped == len(garbage)
    # no more bytes will come: a plausible candidate is taken
    assert find_boundary(held, 0, False, [], 1 << 20, plausible, True)[0] == len(garbage)
    # nothing plausible: every offset but the last few is ruled out
    assert find_boundary(bytearray(b"\xff" * 40), 0, False, [], 1 << 20, plausible, False)[:2] == (None, 33)


def test_a_frames_fields():
    """A Frame keeps what it is made with, in order (fields()), the last packet's time None unless
    given, and shows them."""
    from spark_kafkawire.wire.frames import Frame

    made = Frame(5, 2, 100, 9, b"\x00\x03\x00\x0c\x00\x00\x00\x07x", False)
    assert made.fields() == (5, 2, 100, 9, b"\x00\x03\x00\x0c\x00\x00\x00\x07x", False, None)
    assert (made.offset, made.size, made.complete, made.last_ts) == (100, 9, False, None)
    assert Frame(1, 2, 3, 0, b"", True, 7).last_ts == 7
    assert repr(made) == "Frame(ts_ns=5, number=2, offset=100, size=9, 9 bytes, complete=False, last_ts=None)"


def test_the_first_size_bytes_of_a_chunk_frame_as_that_slice_would():
    """Framer.data(chunk, ts, number, size) takes chunk[:size] (a TLS 1.3 record's plaintext before
    its inner content type and padding): a large frame grown from such chunks, small frames, a frame
    split at the chunk's end, and the first chunk (given to on_first) come out as the slices would."""
    big = request(0, 9, 7, body=bytes(range(256)) * 400)  # a frame of 100 KiB: many chunks
    stream = request(3, 1, 1, body=b"") + big + request(3, 1, 2, body=b"y" * 30) + request(3, 1, 3, body=b"")
    firsts = []

    def run(sized: bool) -> list:
        frames: list = []
        f = Framer(frames.append, synced=True, on_first=lambda chunk, ts, n: firsts.append(bytes(chunk)) or False)
        pos, step = 0, 1
        while pos < len(stream):
            piece = stream[pos : pos + step]
            if sized:
                f.data(piece + b"\x17\x00\x00", 1, pos, len(piece))  # inner type and padding after it
            else:
                f.data(piece, 1, pos)
            pos += len(piece)
            step = step * 3 + 5 if step < 16000 else 16000 + pos % 7
        f.end()
        assert f.acct.frame_bytes == len(stream) and f.acct.skipped_bytes == 0
        return [(fr.offset, fr.size, bytes(fr.data), fr.complete) for fr in frames]

    assert run(True) == run(False)
    assert [len(x) for x in run(False)] == [4] * 4 and firsts[0] == firsts[1] == stream[:1]
    assert run(True)[1][2] == big[4:]  # (the large frame's bytes, against the frame as written)


def test_a_frame_in_progress_is_sized_for_the_whole_frame_once_a_sixteenth_has_come():
    """The framer's append (the fast lane's, where it is built): a large frame's buffer takes the
    frame's whole size once a sixteenth of it has arrived, so that it is not copied again as it grows
    (Python's bytearray += would both shrink a buffer reserved ahead and regrow it step by step)."""
    from spark_kafkawire.wire import frames

    target, chunk = 1 << 20, bytes(range(256)) * 64  # 16 KiB chunks of a 1 MiB frame
    buf = bytearray()
    sizes = []  # the buffer's allocations as it grew
    for i in range(64):
        frames._append(buf, chunk, 0, len(chunk), target)
        if buf.__alloc__() not in sizes:
            sizes.append(buf.__alloc__())
    assert bytes(buf) == chunk * 64
    if frames._append is not frames._append_py:
        # doubling while less than a sixteenth has come, then the whole frame, and no more growth
        assert sizes == [2 * 16384 + 1, 2 * 49152 + 1, target + 1]
    frames._append(buf, b"abcdef", 2, 3, target)
    assert buf[-3:] == b"cde"
    if frames._append is not frames._append_py:
        with pytest.raises(ValueError):
            frames._append(buf, b"abc", 2, 5, target)
