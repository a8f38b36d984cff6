"""Headline columns and JSON bodies, checked against the clients' own account and kio."""

import base64
import json
import struct
from collections import defaultdict

import pytest

from conftest import SAMPLES
from pcapgen import Conversation, request, response, write_pcap
from spark_kafkawire import read_capture
from stages import decode_body, flush, stages
from spark_kafkawire.kafka.headline import error_name

MANIFEST = json.loads((SAMPLES / "manifest.json").read_text())


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_produced_record_counts_match_delivery_reports(name):
    """Records in Produce requests answered without error == messages the client saw delivered."""
    rows = read_capture(SAMPLES / name).to_pylist()
    sent = defaultdict(lambda: defaultdict(int))
    for r in rows:
        if r["api_name"] == "Produce" and r["status"] == "complete" and r["error_code"] == 0:
            assert len(r["topics"]) == 1
            sent[r["client_id"]][r["topics"][0]] += r["record_count"]
    for client in MANIFEST[name]["clients"]:
        if client.get("delivered"):
            delivered = {t: n for t, n in client["delivered"].items() if n}
            assert dict(sent[client["client_id"]]) == delivered, client["client_id"]


def test_json_bodies_are_valid_and_use_kafka_field_names():
    rows = read_capture(SAMPLES / "tansu-confluent-codecs.pcap").to_pylist()
    produce = next(r for r in rows if r["api_name"] == "Produce")
    req = json.loads(produce["request"])
    assert set(req) >= {"TransactionalId", "Acks", "TimeoutMs", "TopicData"}
    batches = req["TopicData"][0]["PartitionData"][0]["Records"]
    assert all(b["Magic"] == 2 and b["CrcValid"] for b in batches)
    resp = json.loads(produce["response"])
    assert "ThrottleTimeMs" in resp and produce["throttle_time_ms"] == resp["ThrottleTimeMs"]
    codecs = {json.loads(r["request"])["TopicData"][0]["PartitionData"][0]["Records"][0]["Codec"]
              for r in rows if r["api_name"] == "Produce"}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}


def test_client_software_is_carried_onto_the_connection():
    rows = read_capture(SAMPLES / "tansu-aiokafka-any.pcap").to_pylist()
    for r in read_capture(SAMPLES / "mock-confluent-group.pcapng").to_pylist():
        if r["client_id"] == "ck-producer" and r["api_name"] == "Produce":
            assert r["client_software_name"] == "confluent-kafka-python"
    assert rows  # aiokafka sends ApiVersions v0: no software name to carry
    assert all(r["client_software_name"] is None for r in rows)


def test_group_id_and_member_id():
    rows = read_capture(SAMPLES / "mock-kafka-python-nsec.pcap").to_pylist()
    join = next(r for r in rows if r["api_name"] == "SyncGroup")
    assert join["group_id"] == "kp-group" and join["member_id"]


def test_error_names_are_kafkas():
    from kio.schema.errors import ErrorCode

    assert error_name(6) == "NOT_LEADER_OR_FOLLOWER"
    assert error_name(35) == "UNSUPPORTED_VERSION"
    for e in ErrorCode:
        assert error_name(int(e.value)) == e.name.upper()


def test_sasl_plain_password_is_redacted(tmp_path):
    secret = b"s3cr3t-passw0rd"
    token = b"\x00alice\x00" + secret
    body = struct.pack("!i", len(token)) + token  # SaslAuthenticate v1 request: auth_bytes
    c = Conversation().handshake()
    c.send("c", request(17, 1, 1, "sasl", body=struct.pack("!h", 5) + b"PLAIN"))
    c.send("b", response(1, 17, 1, body=struct.pack("!hi", 0, 1) + struct.pack("!h", 5) + b"PLAIN"))
    c.send("c", request(36, 1, 2, "sasl", body=body))
    c.send("b", response(2, 36, 1, body=struct.pack("!hhi", 0, -1, 0) + struct.pack("!q", 3600000)))
    path = tmp_path / "sasl.pcap"
    write_pcap(path, c.fin().packets)
    for shape in ("exchanges", "messages"):
        t = read_capture(path, rows=shape)
        text = json.dumps(t.to_pylist(), default=str)
        assert "s3cr3t" not in text and base64.b64encode(secret).decode()[:12] not in text
        assert base64.b64encode(token).decode() not in text
    auth = next(r for r in read_capture(path).to_pylist() if r["api_name"] == "SaslAuthenticate")
    assert json.loads(auth["request"])["AuthBytes"] == {"redacted": True, "length": len(token),
                                                        "mechanism_hint": "PLAIN", "user": "alice"}
    assert auth["status"] == "complete"


def test_topic_ids_resolved_from_metadata():
    import uuid

    tid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    # Metadata v12 response with one topic (name + id) so that a later Fetch v13 by id resolves
    from pcapgen import _kio_class
    from kiogen import write

    mcls = _kio_class(3, 12, False)
    mod = __import__(mcls.__module__, fromlist=["x"])
    import datetime

    from kio.schema.errors import ErrorCode

    topic = mod.MetadataResponseTopic(error_code=ErrorCode.none, name="orders", topic_id=tid, is_internal=False, partitions=(),
                                      topic_authorized_operations=-2147483648)
    meta = mcls(throttle_time=datetime.timedelta(0), brokers=(), cluster_id=None, controller_id=1, topics=(topic,))
    fcls = _kio_class(1, 13, True)
    fmod = __import__(fcls.__module__, fromlist=["x"])
    fetch = fcls(max_wait=datetime.timedelta(milliseconds=500), min_bytes=1,
                 topics=(fmod.FetchTopic(topic_id=tid, partitions=()),), forgotten_topics_data=())
    got = decode_body(1, 13, True, write(fetch), 0)[0]
    assert got["Topics"][0]["TopicId"] == str(tid)
    from headline_reference import headline, learn_topic_ids

    ids: dict = {}
    learn_topic_ids(decode_body(3, 12, False, write(meta), 0)[0], ids)
    assert headline(1, got, None, ids)["topics"] == ["orders"]
    assert headline(1, got, None, {})["topics"] == [str(tid)]


def test_facts_gathered_while_decoding_equal_the_walk_over_the_decoded_bodies():
    """The headline columns come from facts noted while each body is decoded (one pass); the
    walkers over the decoded values (tests/tools/headline_reference.py) are the reference: every exchange of
    every sample and public capture must agree, column for column."""
    from conftest import PUBLIC
    from spark_kafkawire.wire.capture import CaptureReader
    from headline_reference import headline
    from spark_kafkawire.kafka.headline import HEADLINE_FIELDS, headline_from_facts
    from spark_kafkawire.wire.packets import dissect

    class Both:
        def __init__(self):
            self.pairs = 0

        def exchange(self, ep, req, resp, status, detail, extra):
            if extra is None:
                return
            h = req.header if req is not None else None
            key = h.api_key if h else None
            ids = dict(decoder.topic_ids)
            walked = headline(key, req.body if req else None, resp.body if resp else None, ids)
            values = headline_from_facts(key, req.body if req else None, req.facts if req else None,
                                         resp.body if resp else None, resp.facts if resp else None, ids)
            noted = dict(zip(HEADLINE_FIELDS, values, strict=True))
            assert noted == walked, (key, noted, walked)
            self.pairs += 1

    total = 0
    paths = sorted(p for d in (SAMPLES, PUBLIC) for p in d.iterdir() if p.suffix in (".pcap", ".pcapng"))
    for path in paths:
        sink = Both()
        # (rows that show no body JSON: the decoder keeps whole values, which the walk reads; the
        # rows that show it keep the top level only, test_codegen checks that mode)
        decoder, reasm = stages(sink, rows="partitions")
        for pkt in CaptureReader(str(path)):
            seg = dissect(pkt)
            if seg is not None:
                reasm.feed(seg)
        flush(reasm)
        total += sink.pairs
    assert total > 600
