"""Hostile captures, round 5 (../shared/fuzz-findings/round5/): record metadata, TCP health, secrets
blocks, ClientHello fingerprints and directories of captures. Each file is a test; then the classes
they belong to are closed by properties: every decoder of record content takes any JSON and any
bytes, the terminal escape is decided by Unicode category, no duration is negative, reading records
has a memory bound, and the listing takes every kind of file without opening what is not one.

Independent sources: the notes of round5/ (what each file holds: the client's JA3, the session
each record belongs to), Unicode's character database (unicodedata), the operating system's own
file types (os.stat), and the process's own peak memory (getrusage).
"""

from __future__ import annotations

import json
import os
import random
import socket
import struct
import subprocess
import sys
import unicodedata
import warnings
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import damage
import tlsmutate as tm
from conftest import FINDINGS, ROOT, SAMPLES
from pcapgen import Conversation, produce_request, write_pcap
from test_records import _record, batch
from test_tls_attack import finishes_within
from spark_kafkawire import cli, read_capture
from spark_kafkawire.escape import UNSAFE_CATEGORIES, printable
from spark_kafkawire.kafka import codecs
from spark_kafkawire.kafka.carried import MAX_JSON_LOOK, json_bounded, trace_context, wire_format
from spark_kafkawire.listing import SkippedFileWarning, list_files
from spark_kafkawire.rows.recordrows import RecordRows, learn_schema
from spark_kafkawire.wire.capture import CaptureError

ROUND5 = FINDINGS / "round5"
KEYS_C = ROUND5 / "keys-c.log"
needs_round5 = pytest.mark.skipif(not ROUND5.is_dir(), reason="../shared/fuzz-findings/round5 is not beside the checkout")
MODES = ("PERMISSIVE", "DROPMALFORMED", "FAILFAST")
PROPERTY = settings(max_examples=200, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _read(path, **opts) -> list[dict]:
    with finishes_within(120, str(path)):
        return read_capture(path, **opts).to_pylist()


def _unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on (by Unicode category), besides new lines."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in UNSAFE_CATEGORIES]


# -- 1. a _schemas record whose schemaType is not a string -----------------------------------------------
@needs_round5
@pytest.mark.parametrize("mode", MODES)
def test_a_schema_type_that_is_a_list_is_no_exception(mode):
    rows = _read(ROUND5 / "schemas-type-list.pcap", rows="records", mode=mode)
    assert [(r["topic"], r["status"]) for r in rows] == [("_schemas", "ok")]
    assert rows[0]["value_format"] == "json"  # the registry's record is JSON text, whatever its schemaType


@needs_round5
def test_show_records_of_the_schema_type_list_prints_rows_not_a_traceback(capsys):
    assert cli.main(["show", "--rows", "records", str(ROUND5 / "schemas-type-list.pcap")]) == 0
    out, err = capsys.readouterr()
    assert "_schemas" in out and "Traceback" not in out + err


@pytest.mark.parametrize("schema_type", [["AVRO"], {"a": 1}, 7, None, True, "PROTOBUF"])
def test_the_registry_learner_takes_any_schema_type(schema_type):
    rows = RecordRows("x.pcap")
    key = json.dumps({"keytype": "SCHEMA", "subject": "s", "version": 1}).encode()
    learn_schema(rows.schema_types, key, json.dumps({"id": 5, "schemaType": schema_type, "schema": "{}"}).encode())
    assert rows.schema_types == ({5: "confluent-protobuf"} if schema_type == "PROTOBUF" else {})


# -- 2. a value that inflates to 64 MiB of JSON ---------------------------------------------------------
def _peak_mib(code: str) -> float:
    """The peak resident memory (MiB) of a fresh interpreter running ``code`` (which reads a capture)."""
    # (VmHWM: the peak of this process's own memory since its exec; ru_maxrss would carry the parent's
    # peak over the fork)
    script = f"import sys\nsys.path[:0] = {[str(ROOT), str(ROOT / 'tests'), str(ROOT / 'tests' / 'tools')]!r}\n" \
             f"{code}\nprint(next(int(ln.split()[1]) for ln in open('/proc/self/status') if ln.startswith('VmHWM')) / 1024)\n"
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-2000:]
    return float(r.stdout.split()[-1])


#: docs/architecture.md (Memory): a read of rows=records holds at most this much besides the interpreter and its
#: libraries (BASE_MIB), for a batch of maxDecompressedBytes (64 MiB by default): the decompressed
#: batch, the value read out of it, its copy in the value column and the Arrow batch
BASE_MIB = 160
RECORDS_BOUND = 4  # times maxDecompressedBytes


@needs_round5
@pytest.mark.slow
@pytest.mark.parametrize("include", [False, True])
def test_the_amplified_json_value_is_read_in_bounded_memory(include):
    cap = codecs.DEFAULT_MAX_DECOMPRESSED >> 20
    code = ("from spark_kafkawire import read_capture\n"
            f"rows = read_capture({str(ROUND5 / 'json-value-amplification.pcap')!r}, rows='records', "
            f"includeRecords={include}).select(['status', 'value_format']).to_pylist()\n"
            "assert rows == [{'status': 'ok', 'value_format': 'json'}], rows")
    peak = _peak_mib(code)
    assert peak < BASE_MIB + RECORDS_BOUND * cap, peak  # it was about 1,800 MiB


def _largest_value_capture(path: Path, codec: int) -> None:
    """One Produce request whose batch holds one record of JSON ``[{},{},...]`` as large as the
    decompression cap allows (maxDecompressedBytes), compressed with ``codec`` (1 gzip, 2 snappy in
    Kafka's xerial framing, 3 lz4 frame, 4 zstd)."""
    n = (codecs.DEFAULT_MAX_DECOMPRESSED - 64) // 3
    value = b"[" + b"{}," * (n - 1) + b"{}]"
    plain = _record(0, None, value)
    assert len(plain) <= codecs.DEFAULT_MAX_DECOMPRESSED
    if codec == 1:
        import gzip

        packed = gzip.compress(plain, compresslevel=1, mtime=0)
    elif codec == 2:
        import snappy

        chunks = [snappy.compress(plain[i:i + (1 << 20)]) for i in range(0, len(plain), 1 << 20)]
        packed = b"\x82SNAPPY\x00" + struct.pack("!ii", 1, 1) + b"".join(struct.pack("!i", len(c)) + c
                                                                             for c in chunks)
    elif codec == 3:
        import lz4.frame

        packed = lz4.frame.compress(plain)
    else:
        import zstandard

        packed = zstandard.ZstdCompressor().compress(plain)
    conv = Conversation().handshake()
    conv.send("c", produce_request(7, 1, "big", batch([plain], attrs=codec, payload=packed)), mss=1448)
    write_pcap(path, conv.fin().packets)


@pytest.mark.slow
@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_records_take_bounded_memory_with_the_largest_value_each_codec_allows(tmp_path, codec):
    """The memory bound of rows=records (docs/architecture.md, Memory), at the largest value the cap lets a
    codec inflate: the row is read (its format told), with and without the payload."""
    path = tmp_path / "largest.pcap"
    _largest_value_capture(path, codec)
    cap = codecs.DEFAULT_MAX_DECOMPRESSED >> 20
    code = ("from spark_kafkawire import read_capture\n"
            f"t = read_capture({str(path)!r}, rows='records', includeRecords=True)\n"
            "rows = t.select(['status', 'value_format', 'codec']).to_pylist()\n"
            "assert [(r['status'], r['value_format']) for r in rows] == [('ok', 'json')], rows\n"
            f"assert t.column('value')[0].as_py()[-4:] == b'{{}},{{}}]'[-4:]\n"
            "del t")
    peak = _peak_mib(code)
    assert peak < BASE_MIB + RECORDS_BOUND * cap, peak


# -- the decoders of record content, on any JSON and any bytes -----------------------------------------
JSON_BYTES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
                     max_leaves=25)


@PROPERTY
@given(JSON_BYTES, JSON_BYTES, st.sampled_from([b"", b"\x00\x00\x00\x00\x07", b"\x00\x00\x00\x00\x00\x00\x00\x00\x03"]))
def test_record_content_decoders_take_any_json(key, value, framing):
    kb, vb = json.dumps(key).encode(), json.dumps(value).encode()
    for data in (kb, vb, framing + vb):
        fmt, sid, problem = wire_format(data)
        assert fmt in (None, "confluent-json", "confluent-protobuf", "confluent", "apicurio", "json", "utf8", "binary")
    rows = RecordRows("x.pcap")
    learn_schema(rows.schema_types, kb, vb)
    learn_schema(rows.schema_types, json.dumps({"keytype": "SCHEMA"}).encode(), vb)
    assert all(isinstance(k, int) and v.startswith("confluent-") for k, v in rows.schema_types.items())
    trace_context([("traceparent", vb), ("b3", kb), ("X-B3-TraceId", vb), ("uber-trace-id", kb), ("sw8", vb)])


@PROPERTY
@given(st.binary(max_size=300), st.binary(max_size=300),
       st.lists(st.tuples(st.sampled_from(["traceparent", "b3", "X-B3-TraceId", "x-b3-spanid", "uber-trace-id", "sw8",
                                           "other"]), st.none() | st.binary(max_size=80)), max_size=6))
def test_record_content_decoders_take_any_bytes(key, value, headers):
    for data in (key, value, b"\x00" + value, b"[" + value, b"{" + value + b"}"):
        wire_format(data)
    trace, span, fmt, problem = trace_context(headers)
    assert (trace is None) == (fmt is None)
    learn_schema({}, key, value)


def test_json_is_told_by_a_bounded_look():
    """Up to MAX_JSON_LOOK bytes a value is parsed; beyond, its first MAX_JSON_LOOK bytes are lexed as
    JSON tokens (RFC 8259) and its last bracket checked, never parsed."""
    n = MAX_JSON_LOOK
    assert json_bounded(b"[" + b"{}," * n + b"{}]") is None  # too long to parse
    assert wire_format(b"[" + b"{}," * n + b"{}]")[0] == "json"
    assert wire_format(b'{"a": "' + "é".encode() * n + b'"}')[0] == "json"
    assert wire_format(b"[" + b"{}," * n + b"{}")[0] == "utf8"  # not closed
    assert wire_format(b"[\x01" + b"{}," * n + b"{}]")[0] == "utf8"  # a control byte is no JSON token
    assert wire_format(b"[" + b'"\xff",' * n + b"1]")[0] == "binary"
    assert wire_format(b"[1, 2]")[0] == "json" and wire_format(b"[1, 2")[0] == "utf8"


# -- 3. the terminal escape, by Unicode category -----------------------------------------------------
def test_every_code_point_is_escaped_exactly_when_its_category_is_unsafe():
    for n in range(0x110000):
        c = chr(n)
        out = printable(c)
        if c == "\\":
            assert out == "\\\\"
        elif unicodedata.category(c) in UNSAFE_CATEGORIES:
            assert out == (f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"), hex(n)
        else:
            assert out == c, hex(n)


@needs_round5
def test_show_and_summary_escape_the_bidirectional_and_tag_characters(capsys):
    pcap = str(ROUND5 / "terminal-alm-unescaped.pcap")
    for argv in (["show", pcap], ["summary", pcap], ["show", "--rows", "messages", pcap]):
        assert cli.main(argv) == 0
        out, err = capsys.readouterr()
        assert not _unsafe(out + err), (argv, _unsafe(out + err))
        if argv[0] == "show":
            assert "A\\u061cB\\ufff9C\\U000e0041D" in out


# -- 4. durations ----------------------------------------------------------------------------------
_DURATIONS = {"exchanges": ("latency_ms", "request_transfer_ms", "response_transfer_ms", "network_ms", "broker_ms"),
              "connections": ("handshake_rtt_ms", "client_zero_window_ms", "broker_zero_window_ms", "client_rtt_min_ms",
                              "client_rtt_p50_ms", "broker_rtt_min_ms", "broker_rtt_p50_ms")}


def _no_negative_duration(path, backwards: list | None = None) -> int:
    """Durations of every row null or at least 0; an exchange whose response is timed before its
    request says why its latency is null (counted in ``backwards``)."""
    seen = 0
    for shape, names in _DURATIONS.items():
        for r in _read(path, rows=shape):
            for name in names:
                assert r[name] is None or r[name] >= 0, (path, shape, name, r[name])
                seen += r[name] is not None
            if shape == "exchanges" and r["request_time"] and r["response_time"] and \
                    r["response_time"] < r["request_time"]:
                assert r["latency_ms"] is None and "packet times run backwards" in r["detail"], r
                if backwards is not None:
                    backwards.append(r)
    return seen


@needs_round5
def test_time_running_backwards_gives_no_negative_zero_window_time():
    (row,) = _read(ROUND5 / "zero-window-ms-negative.pcap", rows="connections")
    assert row["client_zero_window_ms"] == 0.0 and row["client_zero_windows"] >= 1
    _no_negative_duration(ROUND5 / "zero-window-ms-negative.pcap")


def test_no_duration_is_negative_whatever_the_packet_times(tmp_path):
    """Each sample capture with packet times shuffled among neighbours (time running backwards
    anywhere): every duration of every row is null or at least 0."""
    rng = random.Random(20261127)
    seen = 0
    backwards: list = []
    for pcap in sorted(SAMPLES.glob("*.pcap"))[:8]:
        packets, lt = damage.read(pcap)
        for _ in range(3):
            times = [ts for ts, _ in packets]
            for _k in range(max(1, len(times) // 5)):
                i = rng.randrange(len(times))
                j = min(len(times) - 1, i + rng.randrange(1, 4))
                times[i], times[j] = times[j], times[i]
            path = damage.write(tmp_path / f"t-{pcap.stem}.pcap", [(t, b) for t, (_, b) in zip(times, packets)], lt)
            seen += _no_negative_duration(path, backwards)
    assert seen > 100 and len(backwards) >= 5, len(backwards)


# -- 5. files that are not regular files ------------------------------------------------------------------
def _every_kind(folder: Path) -> dict[str, Path]:
    """A folder with a capture and one of each other kind of file a directory can hold."""
    folder.mkdir()
    kinds = {"capture": folder / "a.pcap"}
    kinds["capture"].write_bytes((SAMPLES / "mock-kcat.pcap").read_bytes())
    kinds["link"] = folder / "b-link.pcap"
    kinds["link"].symlink_to(kinds["capture"])
    kinds["fifo"] = folder / "c-pipe.pcap"
    os.mkfifo(kinds["fifo"])
    kinds["broken"] = folder / "d-broken.pcap"
    kinds["broken"].symlink_to(folder / "nowhere")
    kinds["device"] = folder / "e-zero.pcap"
    kinds["device"].symlink_to("/dev/zero")
    kinds["socket"] = folder / "f-sock.pcap"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(kinds["socket"]))
    s.close()
    (folder / "sub").mkdir()
    return kinds


def test_the_listing_reads_regular_files_and_names_every_other_kind(tmp_path):
    kinds = _every_kind(tmp_path / "d")
    with finishes_within(60, "a directory with a FIFO"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        files = list_files(tmp_path / "d")
        rows = read_capture(tmp_path / "d", rows="connections").to_pylist()
    assert files == [str(kinds["capture"]), str(kinds["link"])]
    assert {Path(r["capture_file"]).name for r in rows} == {"a.pcap", "b-link.pcap"}
    said = [str(w.message) for w in caught if issubclass(w.category, SkippedFileWarning)]
    for kind, what in (("fifo", "a FIFO"), ("broken", "cannot be looked at"), ("device", "a character device"),
                       ("socket", "a socket")):
        assert any(str(kinds[kind]) in m and what in m for m in said), (kind, said)
    # named directly: refused in one line naming it, never opened
    for kind, what in (("fifo", "a FIFO"), ("device", "a character device"), ("socket", "a socket")):
        with finishes_within(20, kind), pytest.raises(CaptureError) as e:
            read_capture(kinds[kind])
        assert str(kinds[kind]) in str(e.value) and what in str(e.value)
    # a glob's matches: as a directory's
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert list_files(str(tmp_path / "d" / "*.pcap")) == files


def test_summary_of_a_directory_with_a_fifo_ends_and_names_it(tmp_path, capsys):
    kinds = _every_kind(tmp_path / "d")
    with finishes_within(60, "kafkawire summary"):
        assert cli.main(["summary", str(tmp_path / "d")]) == 0
    out, err = capsys.readouterr()
    assert "connections" in out and f"kafkawire: skipped {kinds['fifo']}: a FIFO, not a regular file" in err, err


def test_a_file_swapped_for_a_fifo_after_the_listing_is_refused_not_waited_for(tmp_path):
    from spark_kafkawire.reader import iter_batches
    from spark_kafkawire.wire.fs import NotRegularFile

    fifo = tmp_path / "late.pcap"
    os.mkfifo(fifo)
    with finishes_within(20, "a FIFO opened by a task"), pytest.raises(NotRegularFile, match="a FIFO"):
        list(iter_batches(str(fifo), {}))


# -- 6-9. TLS -----------------------------------------------------------------------------------------
@needs_round5
def test_a_connection_that_opened_with_a_client_hello_is_never_read_as_kafka():
    """The broker's first record cut short: the connection stays TLS, and no Kafka frame is made of
    the ClientHello's extensions (it was an OffsetForLeaderEpoch v0 request, correlation id 852010)."""
    pcap = ROUND5 / "tls-trunc-record-resync-frame.pcap"
    rows = _read(pcap, rows="messages", tlsKeyLog=str(KEYS_C))
    assert rows and all(r["direction"] is None and r["status"] == "tls" for r in rows), rows
    conns = _read(pcap, rows="connections", tlsKeyLog=str(KEYS_C))
    assert [r["protocol"] for r in conns] == ["tls"]
    packets, _lt = damage.read(pcap)
    tm.check_accounting(conns, packets)


@needs_round5
def test_a_spliced_record_claims_no_other_session():
    """A handshake-less connection with one record of another connection spliced in: that record
    verifies under the other connection's session, the records after it do not, so it is not this
    connection's; each request shows on one connection only, and the other decrypts whole."""
    pcap = ROUND5 / "tls-spliced-record-claims-other-session.pcap"
    rows = _read(pcap, rows="messages", tlsKeyLog=str(KEYS_C))
    where: dict[tuple, set] = {}
    for r in rows:
        if r["direction"] == "request":
            where.setdefault((r["api_key"], r["correlation_id"]), set()).add(r["client_port"])
    assert where and all(len(ports) == 1 for ports in where.values()), where
    conns = {r["client_port"]: r for r in _read(pcap, rows="connections", tlsKeyLog=str(KEYS_C))}
    spliced = [r for r in conns.values() if not r["start_captured"]]
    assert len(spliced) == 1 and "not this connection's" in spliced[0]["detail"]
    assert spliced[0]["tls_decrypted_bytes"] == 0
    whole = [r for r in conns.values() if r["start_captured"]]
    assert whole and all(r["tls_undecrypted_bytes"] == 0 and r["tls_decrypted_bytes"] > 0 for r in whole)
    packets, _lt = damage.read(pcap)
    tm.check_accounting(list(conns.values()), packets)


def test_a_trial_session_confirmed_by_its_next_record_still_decrypts(tmp_path):
    """The confirmation a trial now waits for costs a real handshake-less connection nothing: a
    capture cut after its handshakes decrypts as many bytes as before."""
    pcap = tm.TLS / "tls13-aes256gcm.pcap"
    packets, lt = damage.read(pcap)
    whole = _read(pcap, rows="connections", tlsKeyLog=str(tm.keylog(pcap)))
    cut = damage.write(tmp_path / "cut.pcap", packets[len(packets) // 3:], lt)
    late = _read(cut, rows="connections", tlsKeyLog=str(tm.keylog(pcap)))
    assert any(not r["start_captured"] and r["protocol"] == "tls" for r in late)
    assert sum(r["tls_decrypted_bytes"] or 0 for r in late) > 0
    assert all(r["tls_undecrypted_bytes"] == 0 for r in late if r["protocol"] == "tls"), \
        [r["detail"] for r in late]
    assert sum(r["tls_decrypted_bytes"] or 0 for r in whole) > sum(r["tls_decrypted_bytes"] or 0 for r in late)


@needs_round5
def test_the_key_log_comes_before_a_capture_s_wrong_secrets_block():
    pcap = ROUND5 / "dsb-wrong-secrets-override-keylog.pcapng"
    (conn,) = _read(pcap, rows="connections", tlsKeyLog=str(KEYS_C))
    assert conn["tls_decrypted_bytes"] > 0 and conn["tls_undecrypted_bytes"] == 0, conn["detail"]
    (alone,) = _read(pcap, rows="connections")  # the block's secrets alone: wrong, nothing decrypted
    assert not alone["tls_decrypted_bytes"] and "does not verify" in alone["detail"]


def test_a_capture_s_secrets_block_is_tried_where_the_key_log_s_secrets_are_wrong(tmp_path):
    """The other way round: a wrong key log given, the capture's own right secrets in its block."""
    from spark_kafkawire.tls.keylog import KeyLog

    log = KeyLog()
    right = b"CLIENT_RANDOM " + b"11" * 32 + b" " + b"22" * 48
    wrong = b"CLIENT_RANDOM " + b"11" * 32 + b" " + b"33" * 48
    log.add_text(wrong)
    view = log.fork()
    view.add_text(right, own=True)
    assert view.secrets(bytes.fromhex("11" * 32)) == {"CLIENT_RANDOM": bytes.fromhex("33" * 48)}
    assert [c["CLIENT_RANDOM"] for c in view.choices(bytes.fromhex("11" * 32))] == \
        [bytes.fromhex("33" * 48), bytes.fromhex("22" * 48)]
    view2 = log.fork()
    view2.add_text(wrong, own=True)  # the same secrets twice: one choice
    assert len(view2.choices(bytes.fromhex("11" * 32))) == 1


@needs_round5
def test_only_the_client_s_hello_describes_the_client():
    """The round's note gives the client's own hello: JA3 20828f55105489117fbcc2e808172c75, server
    name kafka.example; a second ClientHello from the broker's side changes neither."""
    (row,) = _read(ROUND5 / "ja3-broker-clienthello-overrides.pcap", rows="connections")
    assert row["tls_ja3"] == "20828f55105489117fbcc2e808172c75"
    assert row["tls_server_name"] == "kafka.example" and row["tls_alpn"] != "h2"
    assert "ClientHello from the server's side" in row["detail"]


# -- 10: the job's header (with the job tests: test_audits.test_the_job_counts_files_and_exchanges...) --

# -- the bounded mutation campaign over the new surfaces -------------------------------------------
def _client_hello_mutations(packets, rng):
    """The first client data packet of a TLS capture (its ClientHello) with bytes flipped inside the
    hello, or the hello sent again from the broker's side."""
    data = tm.payload_packets(packets)
    out = list(packets)
    i = data[0]
    ts, buf = out[i]
    ip, tcp = tm._tcp(buf)
    payload = bytearray(tcp.data)
    if rng.random() < 0.3:
        j = next(k for k in data if tm._tcp(out[k][1])[1].sport != tcp.sport)
        bts, bbuf = out[j]
        out.insert(j, (bts, tm._with_payload(bbuf, bytes(payload))))
        return out
    for _ in range(rng.randrange(1, 6)):
        payload[rng.randrange(5, len(payload))] = rng.randrange(256)
    out[i] = (ts, tm._with_payload(buf, bytes(payload)))
    return out


def _records_capture(path: Path, rng: random.Random) -> None:
    """Produce requests whose records carry random trace headers, keys and values (JSON, framed
    JSON, bytes), on _schemas and other topics."""
    def value() -> bytes | None:
        pick = rng.randrange(6)
        if pick == 0:
            return None
        if pick == 1:
            return bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        doc = rng.choice([[], {}, {"schemaType": rng.choice([["x"], {"y": 1}, "JSON", 3])}, {"id": rng.randrange(9)},
                          [{}] * rng.randrange(50), {"keytype": "SCHEMA"}, "s", 1.5])
        text = json.dumps(doc).encode()
        if pick == 2:
            text = text[:rng.randrange(len(text) + 1)]
        return (b"\x00" + struct.pack("!i", rng.randrange(5)) + text) if pick == 3 else text

    conv = Conversation().handshake()
    for n in range(4):
        recs = []
        for k in range(rng.randrange(1, 6)):
            headers = [(rng.choice([b"traceparent", b"b3", b"X-B3-TraceId", b"uber-trace-id", b"sw8"]),
                        bytes(rng.randrange(32, 127) for _ in range(rng.randrange(60))))
                       for _ in range(rng.randrange(3))]
            recs.append(_record(k, value(), value() or b"", headers))
        topic = rng.choice(["_schemas", "orders"])
        conv.send("c", produce_request(7, n + 1, "fz", batch(recs, attrs=0), topic=topic), mss=1448)
    write_pcap(path, conv.fin().packets)


def _secrets_block_mutation(data: bytes, rng: random.Random) -> bytes:
    """The pcapng with bytes of its Decryption Secrets Block (type 0x0000000A) flipped."""
    out = bytearray(data)
    pos = 0
    while pos + 12 <= len(out):
        btype, blen = struct.unpack_from("<II", out, pos)
        if blen < 12:
            break
        if btype == 0x0000000A:
            for _ in range(rng.randrange(1, 6)):
                out[pos + rng.randrange(8, blen - 4)] = rng.randrange(256)
        pos += blen
    return bytes(out)


@needs_round5
def test_a_bounded_mutation_campaign_over_the_new_surfaces(tmp_path):
    """The attack that found round 5, bounded: a fixed seed; record metadata (trace headers, schema
    framing, the _schemas topic) in every mode, ClientHello bytes and a hello from the broker's side,
    pcapng secrets blocks, and packet times. No exception, each read ends, every byte counted once,
    no negative duration."""
    rng = random.Random(20261127)
    kinds: Counter = Counter()
    for n in range(40):
        path = tmp_path / f"r{n}.pcap"
        _records_capture(path, rng)
        for mode in MODES:
            _read(path, rows="records", mode=mode)
        kinds["records"] += 1
    cache = {p: damage.read(p) for p in tm.CAPTURES}
    for n in range(60):
        pcap = tm.CAPTURES[n % len(tm.CAPTURES)]
        packets, lt = cache[pcap]
        out = _client_hello_mutations(packets, rng)
        path = tm.write(tmp_path / f"h{n}.pcap", out, lt)
        conns = _read(path, rows="connections", tlsKeyLog=str(tm.keylog(pcap)))
        _read(path, rows="messages", tlsKeyLog=str(tm.keylog(pcap)))
        tm.check_accounting(conns, out)
        kinds["hello"] += 1
    ng = (ROUND5 / "dsb-wrong-secrets-override-keylog.pcapng").read_bytes()
    for n in range(30):
        path = tmp_path / f"s{n}.pcapng"
        path.write_bytes(_secrets_block_mutation(ng, rng))
        for keys in ({}, {"tlsKeyLog": str(KEYS_C)}):
            try:
                _read(path, rows="connections", **keys)
            except CaptureError:
                pass
        kinds["secrets"] += 1
    assert kinds == {"records": 40, "hello": 60, "secrets": 30}
