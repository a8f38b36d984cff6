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
    (lib-d-*, lib-e-*) are not their defaults: the requests alone name them. aiokafka's producer is
    named on the connection it produces on, from what its batches show (no producer id, epoch -1,
    sequence 0, leader epoch -1: aiokafka's alone), not on its bootstrap connection (ApiVersions v0
    and Metadata v5 only: other libraries send those too)."""
    named = collections.defaultdict(set)
    for cid, lib, _fp in _connections(CLIENTS):
        if cid and cid.startswith(("lib-d-", "lib-e-")):
            named[cid].add(lib)
    assert named["lib-d-producer"] == {None, "aiokafka"} and "aiokafka" in named["lib-d-consumer"]
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
    sha = __import__("hashlib").sha256
    assert clients.fingerprint([(18, 0), (3, 5)], 0) == f"kw2_a0_{sha(b'3:5,18:0').hexdigest()[:12]}_000000000000"
    assert clients.fingerprint([(0, 7)], None, [("produce.acks=-1", False), ("produce.ple=0", True)]) == \
        f"kw2_a-_{sha(b'0:7').hexdigest()[:12]}_{sha(b'produce.acks=-1 produce.ple=0').hexdigest()[:12]}"


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


@pytest.mark.parametrize("shown, want", [
    # a producer without a producer id: the epoch and sequence it writes are its library's own
    ({"produce.ids=-1/-1/0", "produce.ple=-1"}, "aiokafka"),
    ({"produce.ids=-1/0/0", "produce.ple=0"}, "kafkajs"),
    ({"produce.ids=-1/-1/-1", "produce.ple=0"}, None),  # librdkafka and kafka-python without idempotence alike
    ({"produce.ids=-1/-1/0", "produce.ple=0"}, None),  # no library was seen writing these together
    # Fetch: no session, no leader epoch known: aiokafka and kafkajs (and librdkafka 2.0). A setting
    # names nothing, not even kafkajs' 5 s default wait (any user may set it; a default changes
    # between releases: kafka-python 2's 30 s session timeout is kafkajs' default)
    ({"fetch.session=-1", "fetch.cle=-1", "fetch.wait=5000"}, None),
    ({"join.subscription=0", "join.session=30000"}, None),
    ({"fetch.session=-1", "fetch.cle=0", "fetch.lso=-1"}, "librdkafka"),  # knows the leader epoch, no session
    ({"commit.meta=null"}, "kafkajs"),
])
def test_what_requests_show_names_a_library(shown, want) -> None:
    """The rules of protocol/clients.tsv (made from fingerprints.pcap), by hand-picked traits: the
    trait lists in clients.tsv are what each library's connections showed (client ids, the manifest)."""
    known = {t.name for ts in __import__("spark_kafkawire.protocol", fromlist=["x"]).client_traits().values()
             for t in ts}
    marked = [(t, next(tr.intrinsic for ts in clients.client_traits().values() for tr in ts
                       if tr.name == t.split("=")[0])) for t in shown]
    assert all(t.split("=")[0] in known for t in shown)
    assert clients.library(None, "my-app", [], marked) == want


def _cut_connections(src: Path, dst: Path, share: float) -> Path:
    """``src`` with each TCP connection's first ``share`` of packets left out (dpkt): every
    connection picked up mid-stream, as a capture begun while clients ran."""
    import dpkt

    with open(src, "rb") as f:
        reader = dpkt.pcap.Reader(f)
        link = reader.datalink()
        packets = list(reader)

    def conn(buf: bytes) -> tuple:
        ip = (dpkt.ethernet.Ethernet(buf) if link == dpkt.pcap.DLT_EN10MB else dpkt.sll.SLL(buf)).data
        return tuple(sorted([(ip.src, ip.data.sport), (ip.dst, ip.data.dport)]))

    keys = [conn(buf) for _ts, buf in packets]
    total = collections.Counter(keys)
    seen: collections.Counter = collections.Counter()
    with open(dst, "wb") as f:
        writer = dpkt.pcap.Writer(f, linktype=link)
        for (ts, buf), k in zip(packets, keys):
            seen[k] += 1
            if seen[k] > share * total[k]:
                writer.writepkt(buf, ts)
    return dst


FINGERPRINTS = ROOT / "tests" / "fingerprints"
#: how many requests with traits (Produce, Fetch, OffsetCommit, ...) a connection must send after the
#: cut to be counted as one that could be named
TELLING = 3


def _recall(path: Path, truth: dict[str, dict]) -> collections.Counter:
    """(library, role, 'connections' | 'named' | 'null' | 'WRONG: x') counts of the connections that
    sent at least TELLING requests with traits in ``path``."""
    rows = read_capture(str(path)).to_pylist()
    first: dict[tuple, str] = {}
    telling: collections.Counter = collections.Counter()
    for r in rows:
        conn = (r["client_port"], r["connection_time"])
        if r["client_id"]:
            first.setdefault(conn, r["client_id"])
        if r["api_key"] in clients.TRAIT_KEYS and r["request"] is not None:
            telling[conn] += 1
    tally: collections.Counter = collections.Counter()
    for r in read_capture(str(path), rows="connections").to_pylist():
        conn = (r["client_port"], r["connection_time"])
        who = truth.get(first.get(conn, ""))
        if who is None or telling[conn] < TELLING:
            continue
        want, got = who["library"], r["client_library"]
        key = (want, who["setting"])
        tally[key + ("connections",)] += 1
        tally[key + ("named" if got == want else "null" if got is None else f"WRONG: {got}",)] += 1
    return tally


@pytest.mark.parametrize("capture", ["fingerprints.pcap", "fingerprints-mock.pcap"])
def test_mid_stream_connections_are_named_from_what_they_send(tmp_path: Path, capture: str) -> None:
    """Real clients of four libraries (five releases) at their defaults and tuned, each connection cut
    at a quarter, half and three quarters of its packets: no library named is wrong, and most
    connections that go on sending are named. fingerprints-mock.pcap is librdkafka's mock cluster, a
    broker the rules were not made from (they come from fingerprints.pcap, on Tansu), with kcat's
    librdkafka 2.0, a release they never saw. docs/rows.md's table is what this prints (-s)."""
    truth = json.loads((FINGERPRINTS / "manifest.json").read_text())[capture]["clients"]
    total: collections.Counter = collections.Counter()
    for share in (0.25, 0.5, 0.75):
        total += _recall(_cut_connections(FINGERPRINTS / capture, tmp_path / f"cut-{share}.pcap", share), truth)
    print(f"\n{capture}, cut at 1/4, 1/2, 3/4:")
    for lib, setting in sorted({k[:2] for k in total}):
        print(f"| {lib} | {setting} | {total[lib, setting, 'named']} of {total[lib, setting, 'connections']} |")
    assert not [k for k in total if k[2].startswith("WRONG")], total
    for lib in {k[0] for k in total}:
        named = sum(v for k, v in total.items() if k[0] == lib and k[2] == "named")
        connections = sum(v for k, v in total.items() if k[0] == lib and k[2] == "connections")
        assert named >= 0.3 * connections, (lib, named, connections)


def test_fingerprints_are_what_the_requests_sent() -> None:
    """Each connection's client_fingerprint is kw2 of its pairs and of the traits its requests' JSON
    bodies show (read again from the exchange rows by tests/tools/clientsig.py)."""
    sys.path.insert(0, str(ROOT / "tests" / "tools"))
    import clientsig

    shown = clientsig.connection_traits(FINGERPRINTS / "fingerprints.pcap")
    pairs: dict[tuple, set] = collections.defaultdict(set)
    api_versions: dict[tuple, int] = {}
    for r in read_capture(str(FINGERPRINTS / "fingerprints.pcap")).to_pylist():
        conn = (r["client_ip"], r["client_port"], r["broker_ip"], r["broker_port"], r["connection_time"])
        if r["api_key"] is not None:
            pairs[conn].add((r["api_key"], r["api_version"]))
            if r["api_key"] == 18:
                api_versions.setdefault(conn, r["api_version"])
    checked = 0
    for r in read_capture(str(FINGERPRINTS / "fingerprints.pcap"), rows="connections").to_pylist():
        conn = (r["client_ip"], r["client_port"], r["broker_ip"], r["broker_port"], r["connection_time"])
        if r["client_fingerprint"] and shown.get(conn, (None, set()))[1]:
            assert r["client_fingerprint"] == clients.fingerprint(pairs[conn], api_versions.get(conn),
                                                                  shown[conn][1]), conn
            checked += 1
    assert checked >= 20


def test_what_is_kept_between_connections_is_bounded():
    """Client ids and short request texts are remembered across connections (one client repeats
    them), attacker-chosen ones only up to clients.CACHED each; a remembered answer is the first's."""
    first = clients.by_name(None, "rdkafka")
    for i in range(clients.CACHED + 10):
        clients.by_name(None, f"id-{i}")
        clients.traits_of_text(3, b'{"Topics":null,"AllowAutoTopicCreation":%d}' % (i % 2))
        clients.traits_of_text(1, b'{"MaxWaitMs":%d}' % i)
    assert len(clients._BY_ID) <= clients.CACHED
    assert all(len(kept) <= clients.CACHED for kept in clients._BY_TEXT.values())
    assert clients.by_name(None, "rdkafka") == first == "librdkafka"
    body = {"Topics": None, "AllowAutoTopicCreation": True}
    assert clients.traits_of_text(3, b'{"Topics":null,"AllowAutoTopicCreation":true}') == clients.traits(3, body)
