"""Cross-check against Wireshark's dissector (tshark): for every Kafka frame tshark decodes, our
api_key, api_version, correlation_id and client_id agree."""

import functools
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import PUBLIC, ROOT, SAMPLES
from spark_kafkawire import read_capture
from test_captures import PUBLIC_EXPECTED

MANIFEST = json.loads((SAMPLES / "manifest.json").read_text())
CASES = [(SAMPLES / n, tuple(i["broker_ports"])) for n, i in sorted(MANIFEST.items())]
CASES += [(PUBLIC / n, (port,)) for n, (_, port) in sorted(PUBLIC_EXPECTED.items())]
CASES += [(PUBLIC / "ndpi-kafka.pcap", (9092,)), (PUBLIC / "ndpi-kafka.pcapng", (9092,))]


def tshark_fields(path, ports, fields, display="kafka"):
    """tshark's Kafka packets (or those the display filter keeps) as rows of the given fields
    (multiple values joined by ';')."""
    assert shutil.which("tshark"), "tshark is required (make system-deps installs it)"
    cmd = ["tshark", "-r", str(path), "-Y", display, "-T", "fields", "-E", "separator=\t", "-E", "aggregator=;"]
    for p in ports:
        cmd += ["-d", f"tcp.port=={p},kafka"]
    for f in fields:
        cmd += ["-e", f]
    out = _tshark_output(Path(path), cmd)
    return [(line.split("\t") + [""] * len(fields))[: len(fields)] for line in out.splitlines()]


#: tshark's output on the project's own captures (samples, tests/, the public ones), kept between
#: runs: the same file (path, size, modification time) read by the same tshark with the same
#: arguments gives the same output, and each run costs 0.3-0.5 s. Captures made by a test are not kept.
TSHARK_KEPT = ROOT / "out" / "tshark"
_KEPT_UNDER = (ROOT / "sample_pcaps", ROOT / "tests", PUBLIC.resolve())


@functools.lru_cache(maxsize=1)
def _tshark_version() -> str:
    return subprocess.run(["tshark", "--version"], capture_output=True, text=True, check=True).stdout.split("\n")[0]


def _tshark_output(path: Path, cmd: list[str]) -> str:
    real = path.resolve()
    if not any(real.is_relative_to(d) for d in _KEPT_UNDER):
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    st = real.stat()
    key = hashlib.sha256(json.dumps([_tshark_version(), str(real), st.st_size, st.st_mtime_ns, cmd[3:]])
                         .encode()).hexdigest()[:32]
    kept = TSHARK_KEPT / key
    if kept.exists():
        return kept.read_text()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    TSHARK_KEPT.mkdir(parents=True, exist_ok=True)
    part = kept.with_name(f"{key}.{os.getpid()}.part")  # (another worker may write the same at once)
    part.write_text(out)
    os.replace(part, kept)
    return out


def tshark_pdus(path, ports):
    """(client_port, broker_port, direction, correlation_id) -> (api_key, api_version, client_id)."""
    pdus = {}
    rows = tshark_fields(path, ports, ("tcp.srcport", "tcp.dstport", "kafka.api_key", "kafka.api_version",
                                       "kafka.correlation_id", "kafka.client_id"))
    for sport, dport, keys, vers, corrs, cids in rows:
        sport, dport = int(sport), int(dport)
        request = dport in ports
        corrs = [int(c) for c in corrs.split(";") if c]
        keys = [int(k) for k in keys.split(";") if k]
        vers = [int(v) for v in vers.split(";") if v]
        cids = cids.split(";") if cids else []
        # a field tshark did not decode for every PDU of the packet cannot be aligned: not compared
        for i, corr in enumerate(corrs):
            key = keys[i] if len(keys) == len(corrs) else None
            ver = vers[i] if len(vers) == len(corrs) else None
            cid = cids[i] if request and len(cids) == len(corrs) else None
            conn = (sport, dport) if request else (dport, sport)
            pdus[conn + ("request" if request else "response", corr)] = (key, ver, cid)
    return pdus


@pytest.mark.parametrize("path,ports", CASES, ids=[c[0].name for c in CASES])
def test_header_fields_agree_with_tshark(path, ports):
    theirs = tshark_pdus(path, ports)
    assert theirs, "tshark decoded no Kafka frame at all"
    ours = {}
    for r in read_capture(path, rows="messages").to_pylist():
        if r["direction"]:
            key = (r["client_port"], r["broker_port"], r["direction"], r["correlation_id"])
            ours[key] = (r["api_key"], r["api_version"], r["client_id"])
    for key, (api_key, api_version, client_id) in theirs.items():
        assert key in ours, f"tshark decoded {key}, we did not"
        for theirs_value, mine in zip((api_key, api_version, client_id), ours[key]):
            if theirs_value is not None:
                assert mine == theirs_value, key
    assert len(ours) >= len(theirs)


def tshark_topics_errors(path, ports):
    """(client_port, broker_port, direction, corr) -> (topic names, error codes) of one-PDU packets."""
    out = {}
    # the expert column comes before the topic names: a misread name may hold a line break
    rows = tshark_fields(path, ports, ("tcp.srcport", "tcp.dstport", "kafka.correlation_id",
                                       "_ws.expert.message", "kafka.error", "kafka.topic_name"))
    for sport, dport, corrs, expert, errors, topics in rows:
        if not (sport.isdigit() and dport.isdigit()):
            continue  # the rest of a misread name that held a line break
        corrs = [c for c in corrs.split(";") if c]
        if len(corrs) != 1:
            continue  # several PDUs in one packet: fields cannot be told apart
        if "Unsupported" in expert or "Malformed" in expert:
            continue  # a version this tshark does not know: its fields are guesses
        sport, dport = int(sport), int(dport)
        request = dport in ports
        conn = (sport, dport) if request else (dport, sport)
        out[conn + ("request" if request else "response", int(corrs[0]))] = (
            {t for t in topics.split(";") if t}, {int(e) for e in errors.split(";") if e})
    return out


def test_topics_and_errors_agree_with_tshark():
    """Topic names and error codes of every single-PDU packet tshark decodes, in every capture.

    Debian's tshark misreads some newer versions (it prints error codes Kafka never defined, e.g.
    -30466 for Metadata v12 responses): such PDUs are not compared.
    """
    from spark_kafkawire.kafka.headline import ERRORS

    checked = 0
    for path, ports in CASES:
        ours = {}
        for r in read_capture(path, rows="messages").to_pylist():
            if r["direction"]:
                ours[(r["client_port"], r["broker_port"], r["direction"], r["correlation_id"])] = r
        for key, (topics, errors) in tshark_topics_errors(path, ports).items():
            if any(e not in ERRORS for e in errors):
                continue  # tshark misread this version
            topics.discard("[ Null ]")  # tshark's text for a null name (topics given by id)
            r = ours[key]
            assert topics <= set(r["topics"] or []), (path.name, key, topics, r["topics"])
            if key[2] == "response" and errors and r["status"] == "complete":
                nonzero = errors - {0}
                assert (r["error_code"] in nonzero) if nonzero else r["error_code"] == 0, (path.name, key, errors)
            checked += bool(topics) or bool(errors)
    assert checked > 100
