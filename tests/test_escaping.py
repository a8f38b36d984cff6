"""Attacker-chosen strings (client ids, topic names) reaching terminals and spreadsheets.

A capture built for the test carries a client id that would retitle the terminal and clear the
screen, and client ids and a topic name that a spreadsheet would run as formulas. Every
human-facing text output shows the control characters escaped (as tshark does); every CSV output
neutralises formula cells as OWASP recommends, unless ``--raw-csv`` asks for the cells as decoded.
"""

from __future__ import annotations

import csv
import io
import json
import re
import struct
import subprocess
import sys

import pytest

from pcapgen import Conversation, request, response, write_pcap
from spark_kafkawire.escape import csv_cell, printable

TERMINAL = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mok\u202egnp.exe"
FORMULAS = ["=cmd|' /C calc'!A0", "@SUM(1+1)*cmd|' /C calc'!A0", "+1+cmd|' /C calc'!A0", "-2+3+cmd|'/C calc'!A0"]
TOPIC = '=HYPERLINK("http://evil.example/","click")'
# control characters that act on a terminal: C0 but for the newline, DEL, C1, bidi overrides
ACTIVE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _metadata_v1(topic: str) -> bytes:
    name = topic.encode()
    return struct.pack(">ih", 1, len(name)) + name


def _list_offsets_v0(topic: str, request: bool) -> bytes:
    """ListOffsets v0 (which Kafka 4.0 refuses) for partition 0 of the topic, by the protocol's
    schema: request replica_id, [topic [partition timestamp max_num_offsets]]; response [topic
    [partition error_code [offset]]]."""
    name = topic.encode()
    head = (struct.pack(">i", -1) if request else b"") + struct.pack(">ih", 1, len(name)) + name
    return head + (struct.pack(">iiqi", 1, 0, -1, 1) if request else struct.pack(">iihiq", 1, 0, 0, 1, 42))


METADATA_V1_EMPTY = struct.pack(">iii", 0, -1, 0)  # no brokers, no controller, no topics


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """ListOffsets v0 (which Kafka 4.0 refuses, so the audit names its client) and Metadata for a
    formula-shaped topic from the terminal-hostile client; ApiVersions from formula-shaped ones."""
    path = tmp_path_factory.mktemp("hostile") / "hostile.pcap"
    packets = []
    c = Conversation(client=("10.9.0.1", 40100)).handshake()
    c.send("c", request(2, 0, 1, TERMINAL, body=_list_offsets_v0(TOPIC, True)))
    c.send("b", response(1, 2, 0, body=_list_offsets_v0(TOPIC, False)))
    c.send("c", request(3, 1, 2, TERMINAL, body=_metadata_v1(TOPIC)))
    c.send("b", response(2, 3, 1, body=METADATA_V1_EMPTY))
    packets += c.fin().packets
    for i, cid in enumerate(FORMULAS):
        c = Conversation(client=("10.9.0.2", 40200 + i)).handshake()
        c.send("c", request(18, 0, 7, cid, body=b""))
        c.send("b", response(7, 18, 0, body=struct.pack(">hi", 0, 0)))
        packets += c.fin().packets
    write_pcap(path, packets)
    return path


def _cli(*args) -> str:
    r = subprocess.run([sys.executable, "-m", "spark_kafkawire", *map(str, args)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _no_active_characters(text: str) -> None:
    found = ACTIVE.findall(text)
    assert not found, sorted(set(found))


def test_escaping_helpers():
    assert printable(TERMINAL) == "\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mok\\u202egnp.exe"
    assert printable("a\\b") == "a\\\\b" and printable("consumer-1") == "consumer-1"
    assert printable("\x85\x9b2J") == "\\x85\\x9b2J"  # C1 controls: a CSI on some terminals
    for f in FORMULAS + [TOPIC, "\t=1", "\r=1"]:
        assert csv_cell(f) == "'" + f
    assert csv_cell("rdkafka") == "rdkafka" and csv_cell("orders=1") == "orders=1"


def test_decoded_as_sent(hostile):
    """The rows themselves keep the strings as the clients sent them: escaping is for display."""
    from spark_kafkawire import read_capture

    rows = read_capture(hostile).to_pylist()
    assert {r["client_id"] for r in rows} == {TERMINAL, *FORMULAS}
    assert [r["topics"] for r in rows if r["api_name"] == "Metadata"] == [[TOPIC]]


@pytest.mark.parametrize("argv", [["summary"], ["show"], ["show", "--columns", "all"],
                                  ["show", "--rows", "messages"], ["show", "--rows", "partitions"]])
def test_terminal_outputs_escape_control_characters(hostile, argv):
    out = _cli(argv[0], hostile, *argv[1:])
    _no_active_characters(out)
    assert printable(TERMINAL)[:40] in out  # shown, escaped (cells are cut at 60 characters)


def test_show_table_has_a_default_column_set(hostile):
    out = _cli("show", hostile)
    header = out.splitlines()[0].split()
    assert header[:2] == ["request_time", "client_ip"] and "request" not in header
    assert max(map(len, out.splitlines())) < 300
    assert "request_header_version" in _cli("show", hostile, "--columns", "all").splitlines()[0]


def _csv_cells(text: str) -> list[str]:
    return [c for row in csv.reader(io.StringIO(text)) for c in row]


def test_csv_cells_are_neutralised_unless_raw(hostile, tmp_path):
    shown = _cli("show", hostile, "--format", "csv", "--columns", "client_id,topics,api_name,correlation_id")
    converted = tmp_path / "x.csv"
    _cli("convert", hostile, "--to", converted)
    for text in (shown, converted.read_text()):
        cells = _csv_cells(text)
        assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
        for f in FORMULAS:
            assert "'" + f in cells
        # a list is a JSON cell: it starts with '[', which no spreadsheet evaluates
        assert [TOPIC] in [json.loads(c) for c in cells if c.startswith("[")]
    raw = _csv_cells(_cli("show", hostile, "--format", "csv", "--raw-csv", "--columns", "client_id"))
    assert set(FORMULAS) <= set(raw)
    raw_file = tmp_path / "raw.csv"
    _cli("convert", hostile, "--to", raw_file, "--raw-csv")
    assert set(FORMULAS) <= set(_csv_cells(raw_file.read_text()))


def test_partitions_csv_topic_cell_is_neutralised(hostile):
    """A topic is a cell of its own in rows=partitions: a formula there is neutralised too."""
    cells = _csv_cells(_cli("show", hostile, "--rows", "partitions", "--format", "csv", "--columns", "topic"))
    assert "'" + TOPIC in cells and TOPIC not in cells


@pytest.mark.spark
def test_audit_job_console_escapes_client_ids(hostile, tmp_path):
    import os

    from conftest import ROOT

    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    r = subprocess.run([sys.executable, str(ROOT / "jobs" / "audit.py"), str(hostile), "--out", str(tmp_path / "a")],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 2, r.stderr[-3000:]  # ListOffsets v0: Kafka 4.0 refuses it
    _no_active_characters(r.stdout)
    verdict = next(ln for ln in r.stdout.splitlines() if "[FAIL] no client sends a version" in ln)
    assert printable(TERMINAL) in verdict
    assert printable(TERMINAL)[:40] in r.stdout.split("exchange summary", 1)[1]


def test_csv_on_a_terminal_is_escaped_as_the_table_is(hostile):
    """`show --format csv` written to a terminal (a pseudo-terminal here) escapes control and format
    characters as the table does; into a pipe it stays as decoded (a program reads it)."""
    import os
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "spark_kafkawire", "show", str(hostile), "--format", "csv",
                             "--columns", "client_id,api_name"], stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the other end closed
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=300) == 0
    os.close(master)
    shown = b"".join(chunks).decode().replace("\r\n", "\n")
    _no_active_characters(shown)
    assert printable(TERMINAL) in shown
    piped = _cli("show", hostile, "--format", "csv", "--columns", "client_id,api_name")
    assert TERMINAL in _csv_cells(piped)
