"""Real captures: ours (sample_pcaps, checked against what the clients reported) and published ones
(../shared/public-captures, checked against what their README says they hold)."""

import json
from collections import Counter

import pytest

from conftest import PUBLIC, SAMPLES
from spark_kafkawire import read_capture

MANIFEST = json.loads((SAMPLES / "manifest.json").read_text())


def rows(path, **opts):
    return read_capture(path, **opts).to_pylist()


# ---- public captures: expectations written from their README ---------------------------------
# file -> [(api_name, api_version, client_id or None)] of the complete exchanges, and broker port
PUBLIC_EXPECTED = {
    "deepflow-00-produce-v2.pcap": ([("Produce", 2, "console-producer")], 9092),
    "deepflow-00-produce-v7-sw8.pcap": ([("Produce", 7, None)], 36333),
    "deepflow-00-produce-v9.pcap": ([("Produce", 9, None)], 36333),
    "deepflow-01-fetch-v12-ok.pcap": ([("Fetch", 12, None)], 36333),
    "deepflow-01-fetch-v12-perf.pcap": ([("Fetch", 12, None)], 9092),
    "deepflow-01-fetch-v12-unknown.pcap": ([("Fetch", 12, None)], 9092),
    "deepflow-11-join-group-v7.pcap": ([("JoinGroup", 7, None)], 36333),
    "deepflow-13-leave-group-v4.pcap": ([("LeaveGroup", 4, None)], 36333),
    "deepflow-14-sync-group-v5.pcap": ([("SyncGroup", 5, None)], 36333),
    "deepflow-18-api-versions-v3.pcap": ([("ApiVersions", 3, None)], 9092),
    "deepflow-mixed-with-unsupported.pcap": ([("Fetch", 13, None), ("OffsetCommit", 8, None),
                                              ("Heartbeat", 4, None)], 9092),
    "gosniffer-kafka.pcap": ([("Metadata", 0, None), ("Produce", 1, None)], 9092),
}


@pytest.mark.parametrize("name", sorted(PUBLIC_EXPECTED))
def test_public_capture_exchanges(name):
    expected, port = PUBLIC_EXPECTED[name]
    got = rows(PUBLIC / name)
    assert all(r["status"] == "complete" for r in got), [(r["status"], r["detail"]) for r in got]
    assert sorted((r["api_name"], r["api_version"]) for r in got) == sorted((a, v) for a, v, _ in expected)
    for (api, ver, cid), r in zip(sorted(expected), sorted(got, key=lambda r: (r["api_name"], r["api_version"]))):
        if cid:
            assert r["client_id"] == cid
    assert {r["broker_port"] for r in got} == {port}


def test_public_api_versions_v3_response_header_is_v0():
    (r,) = rows(PUBLIC / "deepflow-18-api-versions-v3.pcap")
    assert (r["request_header_version"], r["response_header_version"]) == (2, 0)


def test_public_mixed_capture_has_two_connections():
    got = rows(PUBLIC / "deepflow-mixed-with-unsupported.pcap")
    assert len({r["client_port"] for r in got}) == 2


def test_gosniffer_kafka_python_old_versions_over_sll():
    got = rows(PUBLIC / "gosniffer-kafka.pcap")
    assert {r["client_id"] for r in got} == {"kafka-python-producer-1"}


@pytest.mark.parametrize("name", ["ndpi-kafka.pcap", "ndpi-kafka.pcapng"])
def test_ndpi_librdkafka_several_connections_some_one_directional(name):
    got = rows(PUBLIC / name)
    done = Counter((r["api_name"], r["api_version"]) for r in got if r["status"] == "complete")
    assert set(done) >= {("ApiVersions", 0), ("Metadata", 2)}
    assert "rdkafka" in {r["client_id"] for r in got}
    assert len({r["client_port"] for r in got}) >= 5  # several connections
    statuses = Counter(r["status"] for r in got)
    # one-directional flows: answers whose requests are not in the file, and unanswered requests
    assert statuses["request_missing"] > 0 and statuses["no_response"] > 0
    assert set(statuses) <= {"complete", "request_missing", "no_response"}
    assert {r["broker_port"] for r in got} == {9092}


def test_every_public_capture_decodes():
    names = sorted(p.name for p in PUBLIC.iterdir() if p.suffix in (".pcap", ".pcapng"))
    assert len(names) == 14
    t = read_capture(PUBLIC)
    assert t.num_rows > 0
    assert {p.split("/")[-1] for p in t.column("capture_file").to_pylist()} == set(names)
    assert not set(t.column("status").to_pylist()) - {"complete", "request_missing", "no_response"}


# ---- our sample captures, against the clients' own account (manifest.json) -------------------
@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_sample_capture_matches_what_the_clients_did(name):
    info = MANIFEST[name]
    got = rows(SAMPLES / name)
    assert {r["broker_port"] for r in got} <= set(info["broker_ports"])
    assert {r["broker_ip"] for r in got} == ({"10.231.0.1"} if name.startswith("veth") else {"127.0.0.1"})
    seen_clients = {r["client_id"] for r in got}
    for client in info["clients"]:
        assert client["client_id"] in seen_clients
        mine = [r for r in got if r["client_id"] == client["client_id"]]
        apis = {r["api_name"] for r in mine if r["status"] == "complete"}
        if client.get("delivered"):
            assert "Produce" in apis, client
        if client.get("consumed"):
            assert "Fetch" in apis, client
        if client.get("group") and client.get("consumed"):
            assert {"FindCoordinator", "JoinGroup", "SyncGroup", "OffsetCommit"} <= apis, client
        elif client.get("group"):  # never got an assignment (Tansu left the join pending)
            assert {"FindCoordinator", "JoinGroup"} <= {r["api_name"] for r in mine}, client
    # what is not complete is explained by what the clients saw: consumers' long-poll Fetches cut
    # by close or capture end; a DeleteRecords the client saw fail with a transport error; the
    # JoinGroup/LeaveGroup of a group member Tansu never let in (it consumed nothing)
    explained = {("no_response", "Fetch")}
    calls = {k: v for c in info["clients"] for k, v in c.get("calls", {}).items()}
    if "transport failure" in calls.get("delete_records", ""):
        explained.add(("no_response", "DeleteRecords"))
    if any(c.get("group") and not c.get("consumed") for c in info["clients"]):
        explained |= {("no_response", "JoinGroup"), ("no_response", "LeaveGroup")}
    for r in got:
        if r["status"] != "complete":
            assert (r["status"], r["api_name"]) in explained, r


def test_kafka_python_pinned_to_0_10_1_sends_produce_v2():
    got = rows(SAMPLES / "mock-kafka-python-nsec.pcap")
    produce = {r["client_id"]: r["api_version"] for r in got if r["api_name"] == "Produce"}
    assert produce["kp-0.10.1"] == 2  # Kafka 0.10.1 speaks Produce v2 (removed in 4.0)
    assert produce["kp-2.1"] == 7  # Kafka 2.1 speaks Produce v7


def test_mock_cluster_three_brokers_on_random_ports():
    info = MANIFEST["mock-confluent-group.pcapng"]
    got = rows(SAMPLES / "mock-confluent-group.pcapng")
    assert len(info["broker_ports"]) == 3 and 9092 not in info["broker_ports"]
    assert {r["broker_port"] for r in got} == set(info["broker_ports"])


def test_mtu_sized_segments_reassemble_large_frames():
    got = rows(SAMPLES / "veth-confluent-mtu.pcap")
    produce = [r for r in got if r["api_name"] == "Produce"]
    assert produce and all(r["status"] == "complete" for r in produce)
    assert max(r["request_size"] for r in produce) > 20 * 1448  # many segments per frame


def test_link_types_and_formats_of_the_samples():
    from spark_kafkawire.wire.capture import CaptureReader

    kinds = {}
    for name in MANIFEST:
        r = CaptureReader(str(SAMPLES / name))
        first = next(iter(r))
        kinds[name] = (r.format, first.linktype)
    assert kinds["tansu-aiokafka-any.pcap"] == ("pcap", 276)  # tcpdump -i any: SLL2
    assert kinds["mock-confluent-group.pcapng"] == ("pcapng", 1)
    assert kinds["tansu-confluent-codecs.pcap"] == ("pcap", 1)


def test_acks0_producer_against_tansu_is_answered():
    got = rows(SAMPLES / "tansu-confluent-codecs.pcap")
    acks0 = [r for r in got if r["client_id"] == "ck-acks0" and r["api_name"] == "Produce"]
    assert acks0 and all(r["status"] == "complete" for r in acks0)  # Tansu answers acks=0
