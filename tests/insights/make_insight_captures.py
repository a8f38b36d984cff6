"""Make the captures the lineage, consumer_lag and client_hygiene audits are tested on: real clients
(confluent-kafka, kafka-python) against a real broker (Tansu; for lag.pcap librdkafka's mock cluster,
whose ListOffsets answers give the watermarks the test compares with), captured by tcpdump,
each client doing what its configuration says, and manifest.json recording what the clients
themselves reported (deliveries, records consumed, positions, watermarks).

    python tests/insights/make_insight_captures.py [lineage|lag|hygiene ...]   (root: tcpdump)

- lineage.pcap: four producers on three topics, two consumer groups and one group-less consumer;
- lag.pcap: a consumer paused while a producer appends a known number of records, then resumed;
  the client's own position() and the broker's watermarks (get_watermark_offsets) at each moment;
- hygiene.pcap: one client per anti-pattern (small batches, no compression, acks=0, no
  idempotence, metadata storm, connection churn, empty fetches with a short wait, a commit per
  record, requests near max.request.size, a client pinned to Kafka 0.10.1) beside well-configured
  producers and a consumer;
- slow.pcap: a consumer with a small receive buffer that stops reading while fetch answers come:
  the zero windows its own TCP stack advertises;
- clients.pcap: five client libraries (confluent-kafka and kcat on librdkafka, kafka-python,
  aiokafka, kafkajs), each a producer and a consumer group, with client ids that do not name them;
- carried.pcap: producers of three libraries (kafkajs on Node, installed by npm) writing record
  wire formats and trace header kinds (three of them, one per library, every format with every
  kind), a schema registry's records, two consumer groups.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "sample_pcaps"))

from make_samples import capture, mock_cluster, tansu  # noqa: E402

MANIFEST = HERE / "manifest.json"
FINGERPRINTS = HERE.parent / "fingerprints"  # the fingerprints scenario's captures and manifest
VALUE = b"insight record " * 12  # 180 bytes


def _topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "setup-admin"})
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(10)


def _produce(bootstrap: str, client_id: str, topic: str, n: int, partition: int = -1, **conf) -> int:
    from confluent_kafka import Producer

    done = [0]

    def cb(err, _msg):
        if err is None:
            done[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, **conf})
    for i in range(n):
        p.produce(topic, key=f"{client_id}-{i}".encode(), value=VALUE, partition=partition, on_delivery=cb)
        p.poll(0)
    assert p.flush(30) == 0
    return done[0]


def _consume(bootstrap: str, client_id: str, group: str, topics: list[str], want: int, **conf) -> int:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": group,
                  "auto.offset.reset": "earliest", **conf})
    c.subscribe(topics)
    got, t0 = 0, time.time()
    while got < want and time.time() - t0 < 30:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    c.close()
    return got


# -- lineage -----------------------------------------------------------------------------------------
def lineage(out: Path) -> dict:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    with tansu() as (bootstrap, port):
        ports = [port]
        _topics(bootstrap, ["orders", "payments", "metrics"])
        with capture(out, ports):
            delivered = {
                "orders-web": ("orders", _produce(bootstrap, "orders-web", "orders", 40, **{"linger.ms": 10})),
                "payments-svc": ("payments", _produce(bootstrap, "payments-svc", "payments", 30)),
                "metrics-agent": ("metrics", _produce(bootstrap, "metrics-agent", "metrics", 10)),
            }
            kp = KafkaProducer(bootstrap_servers=bootstrap, client_id="orders-mobile")
            futs = [kp.send("orders", VALUE) for _ in range(25)]
            kp.flush(15)
            delivered["orders-mobile"] = ("orders", sum(1 for f in futs if f.succeeded()))
            kp.close(5)
            consumed = {
                "billing-1": ("billing", ["orders", "payments"],
                              _consume(bootstrap, "billing-1", "billing", ["orders", "payments"], 95)),
                "shipping-1": ("shipping", ["orders"], _consume(bootstrap, "shipping-1", "shipping", ["orders"], 65)),
            }
            kc = KafkaConsumer(bootstrap_servers=bootstrap, client_id="auditor", group_id=None,
                               auto_offset_reset="earliest", consumer_timeout_ms=3000)
            kc.assign([TopicPartition("payments", 0)])
            consumed["auditor"] = (None, ["payments"], sum(1 for _ in kc))
            kc.close()
    return {"broker_ports": ports,
            "producers": {cid: {"topic": t, "delivered": n} for cid, (t, n) in delivered.items()},
            "consumers": {cid: {"group": g, "topics": ts, "consumed": n} for cid, (g, ts, n) in consumed.items()},
            "description": "confluent-kafka and kafka-python producers on orders, payments and metrics; groups "
                           "billing (orders, payments) and shipping (orders); auditor reads payments without a "
                           "group; nobody reads metrics."}


# -- consumer lag --------------------------------------------------------------------------------------
def lag(out: Path, before: int = 20, paused: int = 50) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    tp = TopicPartition("events", 0)
    # librdkafka's mock cluster: its ListOffsets answers are the log's (Tansu's count batches)
    with mock_cluster() as (bootstrap, ports):
        with capture(out, ports):
            _produce(bootstrap, "events-producer", "events", before, partition=0)
            c = Consumer({"bootstrap.servers": bootstrap, "client.id": "analytics-1", "group.id": "analytics",
                          "auto.offset.reset": "earliest", "enable.auto.commit": False})
            c.subscribe(["events"])
            got, t0 = 0, time.time()
            while got < before and time.time() - t0 < 30:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    got += 1
            c.commit(asynchronous=False)
            moments = []

            def note(what: str) -> None:
                low, high = c.get_watermark_offsets(tp, timeout=10, cached=False)
                pos = c.position([tp])[0].offset
                moments.append({"moment": what, "time": time.time(), "position": pos, "high_watermark": high,
                                "lag": high - pos})

            for _ in range(4):  # a few idle fetches: caught up
                c.poll(0.3)
            note("caught up")
            c.pause(c.assignment())
            t_pause = time.time()
            _produce(bootstrap, "events-producer", "events", paused, partition=0)
            while time.time() - t_pause < 3:  # paused: no fetch of the partition, the group kept alive
                c.poll(0.2)
            note("paused, the producer done")
            c.resume(c.assignment())
            t0 = time.time()
            while got < before + paused and time.time() - t0 < 30:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    got += 1
                    if m.offset() == before:
                        first_after = {"offset": m.offset(), "timestamp_ms": m.timestamp()[1]}
            for _ in range(4):
                c.poll(0.3)
            note("resumed and caught up")
            c.commit(asynchronous=False)
            c.close()
    return {"broker_ports": ports, "topic": "events", "partition": 0, "group": "analytics",
            "client_id": "analytics-1", "before": before, "produced_while_paused": paused, "consumed": got,
            "moments": moments, "first_record_after_pause": first_after,
            "description": "analytics-1 (group analytics) consumes 20 records of events, pauses, events-producer "
                           "appends 50, the consumer resumes 3 s later and catches up."}


# -- client hygiene ------------------------------------------------------------------------------------
GOOD = {"compression.type": "lz4", "linger.ms": 20, "enable.idempotence": True, "acks": "all"}


def hygiene(out: Path) -> dict:
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaProducer

    bad: dict[str, str] = {}  # client id -> the findings it must get (comma-separated)
    good: list[str] = []
    with tansu() as (bootstrap, port):
        ports = [port]
        _topics(bootstrap, ["clicks", "quiet", "blobs", "legacy"])
        with capture(out, ports, buffer_kib=65536):
            # well configured: batching, compression, idempotence, acks=all; a consumer with defaults
            _produce(bootstrap, "tidy-producer", "clicks", 2000, **GOOD)
            good.append("tidy-producer")
            kp = KafkaProducer(bootstrap_servers=bootstrap, client_id="tidy-kp-producer", compression_type="gzip",
                               linger_ms=20, enable_idempotence=True, acks="all")
            for _ in range(500):
                kp.send("clicks", VALUE)
            kp.flush(15)
            kp.close(5)
            good.append("tidy-kp-producer")
            _consume(bootstrap, "tidy-consumer", "tidy", ["clicks"], 2500)
            good.append("tidy-consumer")
            # one anti-pattern each
            p = Producer({"bootstrap.servers": bootstrap, "client.id": "one-by-one", **GOOD, "linger.ms": 0})
            for i in range(100):  # linger.ms=0 and a flush per record: one record per request
                p.produce("clicks", value=VALUE)
                p.flush(10)
            bad["one-by-one"] = "small_batches"
            _produce(bootstrap, "raw-producer", "clicks", 1000, **{**GOOD, "compression.type": "none", "linger.ms": 50})
            bad["raw-producer"] = "uncompressed"
            _produce(bootstrap, "fire-and-forget", "clicks", 300,
                     **{**GOOD, "acks": 0, "enable.idempotence": False})
            bad["fire-and-forget"] = "acks0"
            _produce(bootstrap, "no-idem", "clicks", 300, **{**GOOD, "enable.idempotence": False})
            bad["no-idem"] = "no_idempotence"
            p = Producer({"bootstrap.servers": bootstrap, "client.id": "meta-storm", **GOOD,
                          "topic.metadata.refresh.interval.ms": 50})
            for _ in range(8):  # a record a second, batched well enough; metadata every 50 ms
                p.produce("clicks", value=VALUE)
                p.poll(1.0)
            p.flush(10)
            bad["meta-storm"] = "metadata_storm"
            for _ in range(12):  # a new producer for every record
                kp = KafkaProducer(bootstrap_servers=bootstrap, client_id="churner", compression_type="gzip",
                                   linger_ms=5, enable_idempotence=True, acks="all")
                kp.send("clicks", VALUE).get(10)
                kp.close(5)
            bad["churner"] = "connection_churn"
            _produce(bootstrap, "quiet-writer", "quiet", 3, **GOOD)
            good.append("quiet-writer")
            c = Consumer({"bootstrap.servers": bootstrap, "client.id": "busy-poller", "group.id": "pollers",
                          "auto.offset.reset": "earliest", "fetch.wait.max.ms": 5})
            assigned: list = []
            c.subscribe(["quiet"], on_assign=lambda _c, parts: assigned.extend(parts))
            t0 = time.time()
            while not assigned and time.time() - t0 < 30:
                c.poll(0.2)
            t0 = time.time()
            while time.time() - t0 < 6:  # an idle topic, fetched with a 5 ms wait
                c.poll(0.2)
            c.close()
            bad["busy-poller"] = "empty_fetches"
            c = Consumer({"bootstrap.servers": bootstrap, "client.id": "commit-each", "group.id": "committers",
                          "auto.offset.reset": "earliest", "enable.auto.commit": False})
            c.subscribe(["clicks"])
            got, t0 = 0, time.time()
            while got < 150 and time.time() - t0 < 30:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    c.commit(message=m, asynchronous=False)
                    got += 1
            c.close()
            bad["commit-each"] = "commit_storm"
            # incompressible values near message.max.bytes: librdkafka sends them uncompressed
            p = Producer({"bootstrap.servers": bootstrap, "client.id": "blob-writer", **GOOD})
            for _ in range(3):
                p.produce("blobs", value=os.urandom(990_000))
                p.flush(20)
            bad["blob-writer"] = "large_requests,uncompressed"
            kp = KafkaProducer(bootstrap_servers=bootstrap, client_id="legacy-app", api_version=(0, 10, 1))
            for _ in range(5):
                kp.send("legacy", VALUE)
            kp.flush(15)
            kp.close(5)
            bad["legacy-app"] = "removed_versions"
    return {"broker_ports": ports, "bad": bad, "good": good,
            "description": "one client per anti-pattern beside well-configured producers and a consumer, against "
                           "Tansu."}

# -- what records carry: formats, schema ids, trace context; delivery ---------------------------------
#: schema ids a registry (its _schemas topic, written here as a registry writes it) declares
REGISTERED = {11: "AVRO", 12: "PROTOBUF", 13: "JSON"}
AVRO_BODY = b"\x02\x0aorder\x06EUR"  # an Avro record (long 1, string "order", string "EUR")
PROTO_BODY = b"\x00\x08\x96\x01\x12\x03abc"  # message index [0], then field 1 = 150, field 2 = "abc"


def _value(kind: str, i: int) -> tuple[bytes, str, int | None]:
    """A value of a wire format -> (bytes, the format kafkawire should name, the schema id)."""
    if kind in ("avro", "avro-kp"):
        return b"\x00" + (11).to_bytes(4, "big") + AVRO_BODY + bytes([i % 100]), "confluent-avro", 11
    if kind == "protobuf":
        return b"\x00" + (12).to_bytes(4, "big") + PROTO_BODY, "confluent-protobuf", 12
    if kind == "protobuf-unregistered":  # told from the bytes alone
        return b"\x00" + (22).to_bytes(4, "big") + PROTO_BODY, "confluent-protobuf", 22
    if kind == "json-schema":
        return b"\x00" + (13).to_bytes(4, "big") + json.dumps({"event": i}).encode(), "confluent-json", 13
    if kind == "apicurio":
        return b"\x00" + (7).to_bytes(8, "big") + AVRO_BODY, "apicurio", 7
    if kind == "json":
        return json.dumps({"plain": i}).encode(), "json", None
    if kind == "utf8":
        return f"line {i}".encode(), "utf8", None
    return b"\xff\xfe" + bytes([i % 256]) + b"\x80", "binary", None


def _trace(kind: str) -> tuple[list[tuple[str, bytes]], dict]:
    """Headers of a trace format -> (headers, what kafkawire should read from them)."""
    import base64
    import secrets

    t, s = secrets.token_hex(16), secrets.token_hex(8)
    if kind == "w3c":
        return [("traceparent", f"00-{t}-{s}-01".encode())], {"trace_id": t, "span_id": s, "trace_format": "w3c"}
    if kind == "b3":
        return [("b3", f"{t}-{s}-1".encode())], {"trace_id": t, "span_id": s, "trace_format": "b3"}
    if kind == "b3multi":
        return ([("X-B3-TraceId", t.encode()), ("X-B3-SpanId", s.encode()), ("X-B3-Sampled", b"1")],
                {"trace_id": t, "span_id": s, "trace_format": "b3multi"})
    if kind == "jaeger":
        return [("uber-trace-id", f"{t}:{s}:0:1".encode())], {"trace_id": t, "span_id": s, "trace_format": "jaeger"}
    if kind == "sw8":
        seg = f"{secrets.token_hex(8)}.1.16{secrets.randbelow(10**10)}"
        b = [base64.b64encode(x.encode()).decode() for x in (t, seg, "svc", "inst", "/pay", "broker:9092")]
        return ([("sw8", f"1-{b[0]}-{b[1]}-0-{b[2]}-{b[3]}-{b[4]}-{b[5]}".encode())],
                {"trace_id": t, "span_id": f"{seg}.0", "trace_format": "sw8"})
    if kind == "bad-w3c":
        return [("traceparent", f"ff-{t}-{s}-01".encode())], {"trace_id": None, "malformed": True}
    return [("app", b"x")], {"trace_id": None}


#: producers: client id, library, topic, value kinds and trace kinds, taken in turn
CARRIED = [
    ("orders-ck", "confluent-kafka", "orders", ["avro"], ["w3c", "b3", "none"]),
    ("orders-kp", "kafka-python", "orders", ["avro-kp", "json"], ["b3multi", "jaeger", "bad-w3c"]),
    ("payments-js", "kafkajs", "payments", ["protobuf"], ["sw8", "w3c"]),
    ("payments-ck", "confluent-kafka", "payments", ["protobuf-unregistered"], ["b3"]),
    ("events-ck", "confluent-kafka", "events", ["json-schema"], ["w3c"]),
    ("misc-kp", "kafka-python", "misc", ["apicurio", "utf8", "binary"], ["none"]),
] + [  # and each library writing every wire format with every trace header kind
    (f"kinds-{short}", lib, "kinds", ["avro", "protobuf", "protobuf-unregistered", "json-schema", "apicurio", "json",
                                      "utf8", "binary"], ["w3c", "b3", "b3multi", "jaeger", "sw8", "bad-w3c", "none"])
    for short, lib in (("ck", "confluent-kafka"), ("kp", "kafka-python"), ("js", "kafkajs"))]


def _kafkajs(bootstrap: str, client_id: str, messages: list[dict]) -> list[dict]:
    """Send with kafkajs on Node (installed with npm into a scratch directory)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "install", "--silent", "--prefix", tmp, "kafkajs@2.2.4"], check=True)
        spec = json.dumps({"bootstrap": bootstrap, "clientId": client_id, "messages": messages})
        out = subprocess.run(["node", str(HERE / "carried_producer.js")], input=spec, capture_output=True,
                             text=True, check=True, env={**os.environ, "NODE_PATH": f"{tmp}/node_modules"}, timeout=60)
    return [json.loads(line) for line in out.stdout.splitlines()]


def carried(out: Path, per_producer: int = 12) -> dict:
    import threading

    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer, KafkaProducer

    topics = ["orders", "payments", "events", "misc", "kinds"]
    sent: list[dict] = []
    consumed: dict[str, list] = {"billing": [], "audit": []}
    with tansu() as (bootstrap, port):
        ports = [port]
        _topics(bootstrap, topics + ["_schemas"])
        with capture(out, ports):
            # a schema registry's own records of its schemas (Confluent's format), before any producer
            reg = Producer({"bootstrap.servers": bootstrap, "client.id": "schema-registry"})
            for sid, kind in REGISTERED.items():
                key = {"keytype": "SCHEMA", "subject": f"s{sid}-value", "version": 1, "magic": 1}
                value = {"subject": f"s{sid}-value", "version": 1, "id": sid, "schema": "{}", "deleted": False}
                if kind != "AVRO":
                    value["schemaType"] = kind
                reg.produce("_schemas", key=json.dumps(key).encode(), value=json.dumps(value).encode())
            assert reg.flush(15) == 0
            stop = threading.Event()

            def billing():  # consumes while the producers produce
                c = Consumer({"bootstrap.servers": bootstrap, "client.id": "billing-1", "group.id": "billing",
                              "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
                              # the broker holds a JoinGroup up to the rebalance timeout (max.poll.interval.ms)
                              "max.poll.interval.ms": 10000, "session.timeout.ms": 6000})
                c.subscribe(["orders", "payments", "events"])
                while not stop.is_set():
                    m = c.poll(0.2)
                    if m is not None and not m.error():
                        consumed["billing"].append([m.topic(), m.partition(), m.offset(), time.time()])
                c.close()

            th = threading.Thread(target=billing)
            th.start()
            time.sleep(3)
            for cid, lib, topic, kinds, traces in CARRIED:
                plan = []
                for i in range(per_producer if not cid.startswith("kinds-") else 8 * 7):
                    value, fmt, sid = _value(kinds[i % len(kinds)], i)
                    headers, trace = _trace(traces[i % len(traces)])
                    plan.append({"client_id": cid, "software": lib, "topic": topic, "key": f"{cid}-{i}",
                                 "value": value, "value_format": fmt, "value_schema_id": sid, "headers": headers,
                                 **trace})
                if lib == "kafkajs":
                    got = _kafkajs(bootstrap, cid, [{"topic": p["topic"], "key": p["key"], "value_hex": p["value"].hex(),
                                                     "headers": {k: v.decode() for k, v in p["headers"]}}
                                                    for p in plan])
                    for p, g in zip(plan, got):
                        p.update(partition=g["partition"], offset=g["offset"], sent=g["sent"])
                elif lib == "kafka-python":
                    kp = KafkaProducer(bootstrap_servers=bootstrap, client_id=cid, acks="all")
                    for p in plan:
                        p["sent"] = time.time()
                        md = kp.send(topic, key=p["key"].encode(), value=p["value"], headers=p["headers"]).get(15)
                        p.update(partition=md.partition, offset=md.offset)
                    kp.close(5)
                else:
                    pr = Producer({"bootstrap.servers": bootstrap, "client.id": cid, "linger.ms": 5})
                    for p in plan:
                        def cb(err, msg, p=p):
                            assert err is None, err
                            p.update(partition=msg.partition(), offset=msg.offset())
                        p["sent"] = time.time()
                        pr.produce(topic, key=p["key"].encode(), value=p["value"], headers=p["headers"],
                                   on_delivery=cb)
                        pr.poll(0)
                    assert pr.flush(15) == 0
                sent += plan
            time.sleep(3)
            stop.set()
            th.join(30)
            kc = KafkaConsumer(*topics, bootstrap_servers=bootstrap, client_id="audit-1", group_id="audit",
                               auto_offset_reset="earliest", consumer_timeout_ms=10000,
                               max_poll_interval_ms=10000, session_timeout_ms=6000)
            for m in kc:
                consumed["audit"].append([m.topic, m.partition, m.offset, time.time()])
            kc.close()
    for p in sent:
        p["value"] = p["value"].hex()
        p["headers"] = [[k, v.decode()] for k, v in p["headers"]]
    return {"broker_ports": ports, "sent": sent, "consumed": consumed, "registered": REGISTERED,
            "description": "six producers (confluent-kafka, kafka-python, kafkajs) writing each wire format and "
                           "trace header kind to four topics, a schema registry's records of its schemas, "
                           "group billing consuming while they produce and group audit after; the clients' own "
                           "account of every record (offset, format, schema id, trace ids, times)."}


# -- a consumer that cannot keep up ---------------------------------------------------------------------
def slow(out: Path, records: int = 150, size: int = 8_000) -> dict:
    """A kafka-python consumer with a small socket receive buffer that stops reading between polls
    while the broker (Tansu) answers its fetches: its TCP stack advertises a zero window, and the
    broker probes until the consumer reads again."""
    from kafka import KafkaConsumer

    value = bytes(range(256)) * (size // 256)
    with tansu() as (bootstrap, port), capture(out, [port], buffer_kib=16384):
        _topics(bootstrap, ["bulk"])
        delivered = _produce_values(bootstrap, "bulk-producer", "bulk", records, value)
        c = KafkaConsumer("bulk", bootstrap_servers=bootstrap, client_id="slow-consumer", group_id=None,
                          auto_offset_reset="earliest", receive_buffer_bytes=4096, fetch_max_bytes=1 << 20,
                          max_partition_fetch_bytes=1 << 20, max_poll_records=5, consumer_timeout_ms=8000)
        got, stalls, t0 = 0, 0, time.time()
        while got < delivered and time.time() - t0 < 60:
            batch = c.poll(timeout_ms=1000)
            got += sum(len(v) for v in batch.values())
            if stalls < 8:  # not reading: the fetch answer fills the receive buffer
                time.sleep(0.5)
                stalls += 1
        c.close()
    return {"broker_port": port, "topic": "bulk", "delivered": delivered, "consumed": got, "stalls": stalls,
            "receive_buffer_bytes": 4096, "client_id": "slow-consumer",
            "description": f"bulk-producer (confluent-kafka) writes {records} records of {size} bytes to Tansu; "
                           "slow-consumer (kafka-python, receive_buffer_bytes=4096) reads them, sleeping 0.5 s "
                           "after each of its first eight polls: its zero windows are the kernel's own."}


def _produce_values(bootstrap: str, client_id: str, topic: str, n: int, value: bytes) -> int:
    from confluent_kafka import Producer

    done = [0]

    def cb(err, _msg):
        if err is None:
            done[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5})
    for _ in range(n):
        p.produce(topic, value=value, on_delivery=cb)
        p.poll(0)
    assert p.flush(30) == 0
    return done[0]


#: the client libraries of clients.pcap: each a producer and a consumer in a group, client ids that do
#: not name the library (PREFIX-producer, PREFIX-consumer)
LIBRARIES = {"lib-a": "librdkafka", "lib-b": "librdkafka", "lib-c": "kafka-python", "lib-d": "aiokafka",
             "lib-e": "kafkajs"}  # lib-a: confluent-kafka; lib-b: kcat


def _kafka_python(bootstrap: str, prefix: str, topic: str, n: int) -> int:
    from kafka import KafkaConsumer, KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, client_id=f"{prefix}-producer", acks="all")
    for i in range(n):
        p.send(topic, key=b"k%d" % i, value=b"v%d" % i).get(10)
    p.close()
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, client_id=f"{prefix}-consumer", group_id=f"{prefix}-group",
                      auto_offset_reset="earliest", consumer_timeout_ms=8000)
    got = sum(1 for _ in zip(range(n), c))
    c.close()
    return got


def _aiokafka(bootstrap: str, prefix: str, topic: str, n: int) -> int:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> int:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=f"{prefix}-producer", acks="all")
        await p.start()
        for i in range(n):
            await p.send_and_wait(topic, key=b"k%d" % i, value=b"v%d" % i)
        await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, client_id=f"{prefix}-consumer",
                             group_id=f"{prefix}-group", auto_offset_reset="earliest")
        await c.start()
        got = 0
        try:
            while got < n:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 20)
                got += sum(len(v) for v in batch.values())
        finally:
            await c.stop()
        return got

    return asyncio.run(run())


def _kcat(bootstrap: str, prefix: str, topic: str, n: int) -> int:
    import subprocess

    data = "".join(f"v{i}\n" for i in range(n))
    subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", f"client.id={prefix}-producer"], input=data,
                   text=True, check=True, timeout=60)
    out = subprocess.run(["kcat", "-C", "-b", bootstrap, "-G", f"{prefix}-group", "-X", f"client.id={prefix}-consumer",
                          "-X", "auto.offset.reset=earliest", "-c", str(n), "-e", topic], capture_output=True,
                         text=True, timeout=60)
    return len(out.stdout.splitlines())


def _js_clients(bootstrap: str, prefix: str, topic: str, n: int) -> int:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "install", "--silent", "--prefix", tmp, "kafkajs@2.2.4"], check=True)
        spec = json.dumps({"bootstrap": bootstrap, "prefix": prefix, "topic": topic, "n": n})
        out = subprocess.run(["node", str(HERE / "clients_kafkajs.js")], input=spec, capture_output=True, text=True,
                             check=True, env={**os.environ, "NODE_PATH": f"{tmp}/node_modules"}, timeout=90)
    return json.loads(out.stdout.splitlines()[-1])["consumed"]


def clients(out: Path, n: int = 20) -> dict:
    """Five client libraries, each a producer and a consumer group of its own on a topic of its own."""
    import re
    import subprocess

    from confluent_kafka import Producer

    def confluent(bootstrap: str, prefix: str, topic: str, n: int) -> int:
        p = Producer({"bootstrap.servers": bootstrap, "client.id": f"{prefix}-producer", "acks": "all"})
        for i in range(n):
            p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
        assert p.flush(30) == 0
        return _consume(bootstrap, f"{prefix}-consumer", f"{prefix}-group", [topic], n)

    run = {"lib-a": confluent, "lib-c": _kafka_python, "lib-d": _aiokafka, "lib-e": _js_clients}
    consumed = {}
    # (kcat's librdkafka 2.0 does not take Tansu's ApiVersions answer: it runs against librdkafka's
    # mock cluster, captured with the rest)
    with tansu() as (bootstrap, port), mock_cluster() as (mock, mock_ports), capture(out, [port, *mock_ports]):
        _topics(bootstrap, [f"{prefix}-topic" for prefix in run])
        for prefix, make in run.items():
            consumed[prefix] = make(bootstrap, prefix, f"{prefix}-topic", n)
        consumed["lib-b"] = _kcat(mock, "lib-b", "lib-b-topic", n)
    import aiokafka
    import confluent_kafka
    import kafka

    kcat = subprocess.run(["kcat", "-V"], capture_output=True, text=True).stdout
    versions = {"lib-a": f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})",
                "lib-b": re.sub(r"(?s).*Version (\S+) .*librdkafka (\S+) .*", r"kcat \1 (librdkafka \2)", kcat), "lib-c": f"kafka-python {kafka.__version__}",
                "lib-d": f"aiokafka {aiokafka.__version__}", "lib-e": "kafkajs 2.2.4"}
    return {"broker_ports": [port, *mock_ports], "libraries": LIBRARIES, "produced": n, "consumed": consumed,
            "versions": versions,
            "description": "five client libraries (confluent-kafka and kcat on librdkafka, kafka-python, aiokafka, "
                           "kafkajs), each a producer and a consumer group, client ids not naming the library"}


#: fingerprints.pcap's clients: each library at its defaults and with settings users commonly change
#: (idempotence, compression, acks, timeouts, fetch wait and size, isolation level, assignor; aiokafka's
#: and kafkajs' idempotent producers are not among them: Tansu does not answer their InitProducerId v0), as
#: (library, setting name, producer settings, consumer settings) in each library's own spelling
SETTINGS = {
    "ck": ("librdkafka", {"default": ({}, {}),
                          "tuned": ({"enable.idempotence": True, "compression.type": "lz4", "request.timeout.ms": 10000,
                                     "linger.ms": 2},
                                    {"fetch.wait.max.ms": 100, "fetch.min.bytes": 1000, "isolation.level":
                                     "read_uncommitted", "partition.assignment.strategy": "cooperative-sticky"})}),
    "kp": ("kafka-python", {"default": ({}, {}),
                            "tuned": ({"enable_idempotence": False, "acks": 1, "compression_type": "gzip",
                                       "request_timeout_ms": 10000},
                                      {"fetch_max_wait_ms": 100, "fetch_min_bytes": 1000,
                                       "isolation_level": "read_committed"})}),
    "aio": ("aiokafka", {"default": ({}, {}),
                         "tuned": ({"acks": 1, "compression_type": "gzip", "request_timeout_ms": 10000},
                                   {"fetch_max_wait_ms": 100, "fetch_min_bytes": 1000,
                                    "isolation_level": "read_committed"})}),
    "js": ("kafkajs", {"default": ({}, {}),
                       "tuned": ({"maxInFlightRequests": 1, "send": {"compression": "gzip", "timeout": 10000}},
                                 {"maxWaitTimeInMs": 100, "minBytes": 1000, "readUncommitted": True})}),
    "kcat": ("librdkafka", {"default": ({}, {}),
                            "tuned": ({"enable.idempotence": "true", "compression.codec": "gzip"},
                                      {"fetch.wait.max.ms": "100", "fetch.min.bytes": "1000"})}),
}
#: who cannot run where: kcat's librdkafka 2.0 does not take Tansu's ApiVersions answer; kafka-python
#: 3.0 cannot decode the mock cluster's (and, pinned to an older version, gets no metadata)
SKIP = {"tansu": {"kcat"}, "mock": {"kp"}}
FP_RECORDS = 40  # records each producer sends, one at a time
FP_GAP = 0.05  # s between them
FP_LINGER = 4.0  # s each consumer goes on fetching after its last record


def _fp_confluent(bootstrap: str, prefix: str, topic: str, pconf: dict, cconf: dict) -> int:
    from confluent_kafka import Consumer, Producer

    p = Producer({"bootstrap.servers": bootstrap, "client.id": f"{prefix}-producer", **pconf})
    for i in range(FP_RECORDS):
        p.produce(topic, key=b"k%d" % i, value=VALUE)
        p.flush(10)
        time.sleep(FP_GAP)
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": f"{prefix}-consumer", "group.id": f"{prefix}-group",
                  "auto.offset.reset": "earliest", **cconf})
    c.subscribe([topic])
    got, t0, last = 0, time.time(), None
    while time.time() - t0 < 40 and (last is None or time.time() - last < FP_LINGER):
        m = c.poll(0.2)
        if m is not None and not m.error():
            got += 1
            if got == FP_RECORDS:
                last = time.time()
    c.close()
    return got


def _fp_kafka_python(bootstrap: str, prefix: str, topic: str, pconf: dict, cconf: dict) -> int:
    from kafka import KafkaConsumer, KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, client_id=f"{prefix}-producer", **pconf)
    for i in range(FP_RECORDS):
        p.send(topic, key=b"k%d" % i, value=VALUE).get(10)
        time.sleep(FP_GAP)
    p.close()
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, client_id=f"{prefix}-consumer", group_id=f"{prefix}-group",
                      auto_offset_reset="earliest", **cconf)
    got, t0, last = 0, time.time(), None
    while time.time() - t0 < 40 and (last is None or time.time() - last < FP_LINGER):
        for records in c.poll(200).values():
            got += len(records)
        if got >= FP_RECORDS and last is None:
            last = time.time()
    c.close()
    return got


def _fp_aiokafka(bootstrap: str, prefix: str, topic: str, pconf: dict, cconf: dict) -> int:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> int:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=f"{prefix}-producer", **pconf)
        await p.start()
        for i in range(FP_RECORDS):
            await p.send_and_wait(topic, key=b"k%d" % i, value=VALUE)
            await asyncio.sleep(FP_GAP)
        await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, client_id=f"{prefix}-consumer",
                             group_id=f"{prefix}-group", auto_offset_reset="earliest", **cconf)
        await c.start()
        got, t0, last = 0, time.time(), None
        try:
            while time.time() - t0 < 40 and (last is None or time.time() - last < FP_LINGER):
                batch = await c.getmany(timeout_ms=200)
                got += sum(len(v) for v in batch.values())
                if got >= FP_RECORDS and last is None:
                    last = time.time()
        finally:
            await c.stop()
        return got

    return asyncio.run(run())


def _fp_kafkajs(bootstrap: str, prefix: str, topic: str, pconf: dict, cconf: dict) -> int:
    import subprocess
    import tempfile

    pconf = dict(pconf)
    send = pconf.pop("send", {})
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["npm", "install", "--silent", "--prefix", tmp, "kafkajs@2.2.4"], check=True)
        spec = json.dumps({"bootstrap": bootstrap, "prefix": prefix, "topic": topic, "n": FP_RECORDS,
                           "gapMs": int(FP_GAP * 1000), "lingerMs": int(FP_LINGER * 1000), "producer": pconf,
                           "consumer": cconf, "send": send})
        out = subprocess.run(["node", str(HERE / "clients_kafkajs.js")], input=spec, capture_output=True, text=True,
                             check=True, env={**os.environ, "NODE_PATH": f"{tmp}/node_modules"}, timeout=120)
    return json.loads(out.stdout.splitlines()[-1])["consumed"]


def _fp_kcat(bootstrap: str, prefix: str, topic: str, pconf: dict, cconf: dict) -> int:
    import subprocess

    x = [a for k, v in pconf.items() for a in ("-X", f"{k}={v}")]
    # (one process per record would be one connection each: one producer fed through a paced pipe)
    proc = subprocess.Popen(["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", f"client.id={prefix}-producer",
                             "-X", "linger.ms=0", *x], stdin=subprocess.PIPE, text=True)
    for i in range(FP_RECORDS):
        proc.stdin.write(f"v{i}\n")
        proc.stdin.flush()
        time.sleep(FP_GAP)
    proc.stdin.close()
    proc.wait(60)
    y = [a for k, v in cconf.items() for a in ("-X", f"{k}={v}")]
    c = subprocess.Popen(["kcat", "-C", "-u", "-b", bootstrap, "-G", f"{prefix}-group", "-X", f"client.id={prefix}-consumer",
                          "-X", "auto.offset.reset=earliest", *y, topic], stdout=subprocess.PIPE, text=True)
    got, t0, last = 0, time.time(), None
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(c.stdout, selectors.EVENT_READ)
    while time.time() - t0 < 40 and (last is None or time.time() - last < FP_LINGER):
        if sel.select(0.2) and c.stdout.readline():
            got += 1
            if got == FP_RECORDS:
                last = time.time()
    c.terminate()
    c.wait(20)
    return got


FP_RUN = {"ck": _fp_confluent, "kp": _fp_kafka_python, "aio": _fp_aiokafka, "js": _fp_kafkajs, "kcat": _fp_kcat}


def fingerprints(out: Path) -> dict:
    """Each library at its defaults and tuned, one producer and one consumer group each, long enough that
    every connection goes on after a cut: on Tansu (fingerprints.pcap, which the client rules are made
    from) and on librdkafka's mock cluster (fingerprints-mock.pcap, where they are measured; kcat's
    librdkafka 2.0 runs there only, a release the rules never saw; kafka-python on Tansu only: SKIP)."""
    import aiokafka
    import confluent_kafka
    import kafka

    entries: dict = {}
    for broker in ("tansu", "mock"):
        path = out if broker == "tansu" else out.with_name("fingerprints-mock.pcap")
        clients, consumed = {}, {}
        with (tansu() if broker == "tansu" else mock_cluster()) as (bootstrap, ports):
            ports = [ports] if isinstance(ports, int) else ports
            with capture(path, ports):
                runs = [(lab, st) for lab in SETTINGS for st in SETTINGS[lab][1] if lab not in SKIP[broker]]
                names = [f"fp-{lab}-{st}-topic" for lab, st in runs]
                if broker == "tansu":
                    _topics(bootstrap, names)
                else:  # (the mock cluster makes a topic when a producer's Metadata request names it)
                    from confluent_kafka import Producer

                    admin = Producer({"bootstrap.servers": bootstrap, "client.id": "setup-admin"})
                    for name in names:
                        admin.list_topics(name, timeout=10)
                for lab, st in runs:
                    prefix = f"fp-{lab}-{st}"
                    lib, settings = SETTINGS[lab]
                    consumed[prefix] = FP_RUN[lab](bootstrap, prefix, f"{prefix}-topic", *settings[st])
                    print(broker, prefix, consumed[prefix], flush=True)
                    for role in ("producer", "consumer"):
                        clients[f"{prefix}-{role}"] = {"library": lib, "setting": st, "runner": lab}
        entries["fingerprints.pcap" if broker == "tansu" else "fingerprints-mock.pcap"] = {
            "broker": broker, "broker_ports": ports, "clients": clients, "consumed": consumed,
            "produced": FP_RECORDS, "settings": {lab: {st: list(v) for st, v in s.items()} for lab, (_l, s) in
                                                 SETTINGS.items()},
            "versions": {"ck": f"confluent-kafka {confluent_kafka.__version__} (librdkafka "
                               f"{confluent_kafka.libversion()[0]})", "kp": f"kafka-python {kafka.__version__}",
                         "aio": f"aiokafka {aiokafka.__version__}", "js": "kafkajs 2.2.4", "kcat": "kcat (librdkafka 2.0)"},
            "description": "each library at its defaults and tuned (settings), a producer sending one record at a time "
                           "and a consumer group fetching on after its last record"}
    return entries


SCENARIOS = {"lineage": lineage, "lag": lag, "hygiene": hygiene, "carried": carried, "slow": slow, "clients": clients,
             "fingerprints": fingerprints}


def main(names: list[str]) -> None:
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    for name in names or list(SCENARIOS):
        out = HERE / f"{name}.pcap"
        if name == "fingerprints":  # (its own folder: the audit tests read every capture of this one)
            out = FINGERPRINTS / "fingerprints.pcap"
            FINGERPRINTS.mkdir(exist_ok=True)
            (FINGERPRINTS / "manifest.json").write_text(json.dumps(SCENARIOS[name](out), indent=2, sort_keys=True)
                                                        + "\n")
        else:
            manifest[f"{name}.pcap"] = SCENARIOS[name](out)
        print(name, out.stat().st_size, "bytes", flush=True)
    MANIFEST.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
