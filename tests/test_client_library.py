"""Which client library a connection is (kafka/clients.py): client_library and client_fingerprint.

Checked against what ran: tests/insights/clients.pcap, where real clients of five libraries
(confluent-kafka and kcat on librdkafka, kafka-python, aiokafka, kafkajs on Node) produced and
consumed with client ids that do not name them, and every sample capture, whose manifest says which
library each client id was. Read whole (connections from their first request) and cut to its second
half (editcap -r: connections picked up mid-stream). A library named is never wrong; what is named how
often is docs/rows.md's table (printed here with -s).
"""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spark_kafkawire import read_capture
from spark_kafkawire.kafka import clients

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ROOT / "tests" / "insights" / "clients.pcap"
#: the library each sample manifest's "software" is
LIBRARY = {"confluent-kafka": "librdkafka", "kcat": "librdkafka", "kafka-python": "kafka-python",
           "aiokafka": "aiokafka", "kafkajs": "kafkajs"}


def _truth() -> dict[Path, dict[str, str]]:
    """Capture -> client id -> the library that ran it (the manifests)."""
    out: dict[Path, dict[str, str]] = {}
    samples = json.loads((ROOT / "sample_pcaps" / "manifest.json").read_text())
    for name, entry in samples.items():
        out[ROOT / "sample_pcaps" / name] = {c["client_id"]: LIBRARY[c["software"]] for c in entry.get("clients", [])}
    libs = json.loads((ROOT / "tests" / "insights" / "manifest.json").read_text())["clients.pcap"]["libraries"]
    out[CLIENTS] = {f"{prefix}-{role}": lib for prefix, lib in libs.items() for role in ("producer", "consumer")}
    return out


def _connections(path: Path) -> list[tuple[str, str | None, str | None]]:
    """(client id, client_library, client_fingerprint) of each connection that sent a request."""
    first_id: dict[int, str] = {}
    for r in read_capture(str(path)).to_pylist():
        if r["client_id"] is not None:
            first_id.setdefault(r["client_port"], r["client_id"])
    return [(first_id.get(r["client_port"]), r["client_library"], r["client_fingerprint"])
            for r in read_capture(str(path), rows="connections").to_pylist() if r["client_fingerprint"]]


def _second_half(path: Path, out: Path) -> Path:
    packets = int(subprocess.run(["capinfos", "-c", "-M", "-T", str(path)], capture_output=True, text=True,
                                 check=True).stdout.splitlines()[-1].split("\t")[-1])
    subprocess.run(["editcap", "-r", str(path), str(out), f"{packets // 2}-{packets}"], check=True)
    return out


def _tally(tmp_path: Path, mid: bool) -> collections.Counter:
    tally: collections.Counter = collections.Counter()
    for path, truth in _truth().items():
        read = _second_half(path, tmp_path / f"half-{path.name}") if mid else path
        for cid, got, _fp in _connections(read):
            if cid not in truth:
                continue
            want = truth[cid]
            tally[want, "connections"] += 1
            tally[want, "named" if got == want else "null" if got is None else f"WRONG: {got}"] += 1
    return tally


def test_the_table_is_what_the_real_clients_sent() -> None:
    """protocol/clients.tsv is what tests/tools/clientsig.py makes of clients.pcap."""
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "tools" / "clientsig.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.skipif(shutil.which("editcap") is None, reason="editcap (Wireshark) not installed")
@pytest.mark.parametrize("mid", [False, True], ids=["from-the-first-request", "mid-stream"])
def test_a_library_named_is_the_one_that_ran(tmp_path: Path, mid: bool) -> None:
    tally = _tally(tmp_path, mid)
    print(f"\n{'mid-stream' if mid else 'whole'}: {dict(sorted(tally.items()))}")
    assert not [k for k in tally if k[1].startswith("WRONG")], tally
    for lib in ("librdkafka", "kafka-python", "aiokafka", "kafkajs"):
        assert tally[lib, "named"] >= 2, (lib, tally)  # every library is named, from its requests too
    share = 0.8 if mid else 0.95  # (librdkafka sends its name in ApiVersions: named where that was seen)
    assert tally["librdkafka", "named"] >= share * tally["librdkafka", "connections"]


def test_libraries_that_send_no_software_name_are_named_by_their_requests() -> None:
    """aiokafka and kafkajs send ApiVersions v0 and v2 (no software name); clients.pcap's client ids
    (lib-d-*, lib-e-*) are not their defaults: the requests alone name them, where a connection sent
    at least three kinds (aiokafka's producer connections sent two each: not named)."""
    named = collections.defaultdict(set)
    for cid, lib, _fp in _connections(CLIENTS):
        if cid and cid.startswith(("lib-d-", "lib-e-")):
            named[cid].add(lib)
    assert named["lib-d-producer"] == {None} and "aiokafka" in named["lib-d-consumer"]
    assert "kafkajs" in named["lib-e-producer"] and "kafkajs" in named["lib-e-consumer"]


def test_a_fingerprint_is_one_library_and_holds_across_captures() -> None:
    """No fingerprint is shared by two libraries; aiokafka's producer bootstrap connection (ApiVersions
    v0, Metadata v5) has one fingerprint in clients.pcap and in the sample made another day."""
    libraries = collections.defaultdict(set)
    by_capture = collections.defaultdict(set)
    for path, truth in _truth().items():
        for cid, _lib, fp in _connections(path):
            if cid in truth:
                libraries[fp].add(truth[cid])
                by_capture[path.name, truth[cid]].add(fp)
    assert all(len(libs) == 1 for libs in libraries.values()), {fp: libs for fp, libs in libraries.items()
                                                                 if len(libs) > 1}
    assert by_capture["clients.pcap", "aiokafka"] & by_capture["tansu-aiokafka-any.pcap", "aiokafka"]
    assert clients.fingerprint([(18, 0), (3, 5)], 0) == \
        "kw1_a0_" + __import__("hashlib").sha256(b"3:5,18:0").hexdigest()[:12]


@pytest.mark.parametrize("software, client_id, pairs, want", [
    ("confluent-kafka-python", "orders", [], "librdkafka"),
    ("apache-kafka-java", None, [], "Java"),
    (None, "rdkafka", [], "librdkafka"),
    (None, "aiokafka-0.12.0", [], "aiokafka"),
    (None, "kafka-python-2.0.2", [], "kafka-python"),
    (None, "consumer-orders-1", [], "Java"),
    (None, "my-app", [(18, 2), (0, 7)], None),  # kafkajs and kafka-python 2 send these two alike
    (None, "my-app", [(18, 0), (3, 5), (0, 7)], "aiokafka"),
    (None, "my-app", [(18, 0), (3, 5), (0, 99)], None),  # a request no release in the table sent
])
def test_the_rules_in_order(software, client_id, pairs, want) -> None:
    assert clients.library(software, client_id, pairs) == want
