"""The benchmark's capture: real clients against a real broker, captured by tcpdump.

    python tests/tools/benchcapture.py OUT.pcap [SCALE]       (needs root: network namespaces, tcpdump)

A Tansu broker and confluent-kafka clients in two network namespaces joined by a veth pair with
segmentation offloads off, so segments are MTU-sized as on a real network. The traffic:

- one producer per codec (none, gzip, snappy, lz4, zstd) writing JSON events of 0.3-2 KB with keys
  (large Produce requests, many segments each);
- a consumer group reading them all back (large Fetch responses), committing offsets, with
  heartbeats, JoinGroup/SyncGroup and OffsetFetch;
- many small exchanges: Metadata from an admin client and ListOffsets.

With SCALE 1 the capture is about 100 MB. It is not committed; `make bench` makes it once in
out/bench/.

``build_dense`` makes the frame-dense capture the same way: producers with ``linger.ms=0`` sending
small uncompressed batches (one to four records of 0.5-3 KB per request), a consumer group with
100 ms heartbeats reading some of it, and Metadata refreshes every 200 ms plus an admin client's.

``build_records`` makes the record-heavy capture, as high-rate producers make it: two producers per
codec (none, gzip, snappy, lz4, zstd) writing small records (20-120 bytes, a key, some with headers
such as a W3C traceparent) in batches of up to 200, and a consumer group reading every one back:
about 2 million records, half in Produce requests and half in Fetch responses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "sample_pcaps"))
from make_samples import capture, remove_namespaces, tansu, veth_pair  # noqa: E402  (as the samples are made)

NS_B, NS_C = "kwb-broker", "kwb-client"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

CLIENT = r"""
import json, random, sys, time
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, n, codecs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
rnd = random.Random(7)
admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "bench-admin"})
for f in admin.create_topics([NewTopic(f"events-{c}", 3, 1) for c in codecs]).values():
    f.result(30)

def event(i):
    return json.dumps({"id": i, "user": f"user-{rnd.randrange(50000)}", "ts": 1_700_000_000_000 + i * 7,
                       "kind": rnd.choice(["view", "click", "buy", "search"]),
                       "scores": [round(rnd.random(), 6) for _ in range(rnd.randrange(10, 120))],
                       "note": "".join(rnd.choice("abcdefghij klmnop") for _ in range(rnd.randrange(50, 600)))}).encode()

delivered = {}
for c in codecs:
    p = Producer({"bootstrap.servers": bootstrap, "client.id": f"bench-producer-{c}", "compression.type": c,
                  "linger.ms": 10, "batch.size": 262144})
    for i in range(n):
        p.produce(f"events-{c}", key=b"k%d" % i, value=event(i))
        p.poll(0)
        if i % 2000 == 0:
            admin.list_topics(timeout=10)  # small exchanges in between
    assert p.flush(60) == 0
    delivered[c] = n
# one consumer group reads every topic back (Tansu makes each JoinGroup wait for stragglers)
cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-group", "client.id": "bench-consumer",
                 "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 100,
                 "fetch.max.bytes": 1048576, "max.partition.fetch.bytes": 524288})
cons.subscribe([f"events-{c}" for c in codecs])
consumed, deadline = {c: 0 for c in codecs}, time.time() + 600
while sum(consumed.values()) < n * len(codecs) and time.time() < deadline:
    for m in cons.consume(500, 1.0):
        if m.error() is None:
            consumed[m.topic()[len("events-"):]] += 1
cons.commit(asynchronous=False)
for c in codecs:
    for p in range(3):
        cons.get_watermark_offsets(TopicPartition(f"events-{c}", p), timeout=10)  # ListOffsets
cons.close()
for _ in range(300):
    admin.list_topics(timeout=10)
print(json.dumps({"delivered": delivered, "consumed": consumed}))
"""


DENSE_CLIENT = r"""
import json, random, sys, threading, time
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(11)
admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "dense-admin"})
for f in admin.create_topics([NewTopic(t, 3, 1) for t in ("orders", "clicks", "audit")]).values():
    f.result(30)
stop = threading.Event()
consumed = [0]

def consume():  # a group member heartbeating every 100 ms, reading the audit topic
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dense-group", "client.id": "dense-consumer",
                  "auto.offset.reset": "earliest", "heartbeat.interval.ms": 100, "session.timeout.ms": 6000,
                  "enable.auto.commit": True, "auto.commit.interval.ms": 200,
                  "topic.metadata.refresh.interval.ms": 200})
    c.subscribe(["audit"])
    while not stop.is_set():
        for m in c.consume(100, 0.2):
            if m.error() is None:
                consumed[0] += 1
    c.close()

t = threading.Thread(target=consume)
t.start()
time.sleep(3)
delivered = [0]

def count(err, msg):
    if err is None:
        delivered[0] += 1

producers = [Producer({"bootstrap.servers": bootstrap, "client.id": f"dense-producer-{i}", "linger.ms": 0,
                       "compression.type": "none", "batch.num.messages": 1 + i % 4, "acks": 1 if i % 2 else -1,
                       "topic.metadata.refresh.interval.ms": 200}) for i in range(4)]
topics = ("orders", "clicks", "audit")
for i in range(n):
    p = producers[i % 4]
    value = bytes(rnd.randrange(32, 127) for _ in range(rnd.randrange(500, 3000)))
    p.produce(topics[i % 3], key=b"k%d" % i, value=value, on_delivery=count)
    p.poll(0)
    if i % 8 == 7:  # a few requests in flight at a time: each request holds one to four records
        p.flush(10)
    if i % 500 == 0:
        admin.list_topics(timeout=10)
for p in producers:
    assert p.flush(60) == 0
time.sleep(2)
stop.set()
t.join()
print(json.dumps({"delivered": delivered[0], "consumed": consumed[0]}))
"""


def build_dense(out: Path, scale: float = 1.0) -> dict:
    """Make the frame-dense capture at ``out`` (see the module's text); the clients' own account
    and the broker port."""
    return build(out, scale, DENSE_CLIENT, 40000)

RECORDS_CLIENT = r"""
import json, random, sys, time
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, n, codecs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
rnd = random.Random(13)
admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "records-admin"})
for f in admin.create_topics([NewTopic(f"ticks-{c}", 3, 1) for c in codecs]).values():
    f.result(30)
words = [b"buy", b"sell", b"view", b"click", b"cart", b"search", b"login", b"logout"]
values = [b'{"u":%d,"e":"%s","v":%d%s}' % (rnd.randrange(100000), rnd.choice(words), rnd.randrange(10**6),
                                         b',"p":"' + b"x" * rnd.randrange(0, 60) + b'"' if rnd.random() < 0.5 else b"")
          for _ in range(4096)]
delivered = {}
for c in codecs:
    for k in range(2):  # two producers per codec, one with a trace header on every fifth record
        p = Producer({"bootstrap.servers": bootstrap, "client.id": f"records-producer-{c}-{k}",
                      "compression.type": c, "linger.ms": 5, "batch.num.messages": 200,
                      "batch.size": 1000000, "queue.buffering.max.messages": 1000000})
        for i in range(n // 2):
            headers = None
            if k and i % 5 == 0:
                headers = [("traceparent", b"00-%032x-%016x-01" % (rnd.getrandbits(128) | 1, rnd.getrandbits(64) | 1))]
            p.produce(f"ticks-{c}", key=b"u%d" % (i % 1000), value=values[i % 4096], headers=headers)
            if i % 1000 == 0:
                p.poll(0)
        assert p.flush(120) == 0
        delivered[c] = delivered.get(c, 0) + n // 2
cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "records-group", "client.id": "records-consumer",
                 "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 500,
                 "fetch.max.bytes": 1048576, "max.partition.fetch.bytes": 16384})
cons.subscribe([f"ticks-{c}" for c in codecs])
consumed, deadline = {c: 0 for c in codecs}, time.time() + 900
while sum(consumed.values()) < n * len(codecs) and time.time() < deadline:
    for m in cons.consume(5000, 1.0):
        if m.error() is None:
            consumed[m.topic()[len("ticks-"):]] += 1
cons.close()
print(json.dumps({"delivered": delivered, "consumed": consumed}))
"""


def build_records(out: Path, scale: float = 1.0) -> dict:
    """Make the record-heavy capture at ``out`` (see the module's text); the clients' own account
    and the broker port."""
    return build(out, scale, RECORDS_CLIENT, 200000)


def build(out: Path, scale: float = 1.0, client: str = CLIENT, n: int = 20000) -> dict:
    """Make the capture at ``out``; returns the clients' own account and the broker port."""
    try:
        veth_pair(NS_B, NS_C, "kwb-b", "kwb-c", "10.232.0")
        out.parent.mkdir(parents=True, exist_ok=True)
        with tansu(host="10.232.0.1", netns=NS_B) as (bootstrap, port), \
                capture(out, [port], iface="kwb-b", netns=NS_B):
            r = subprocess.run(["ip", "netns", "exec", NS_C, sys.executable, "-c", client, bootstrap,
                                str(int(n * scale)), ",".join(CODECS)],
                               capture_output=True, text=True, timeout=1800)
            if r.returncode:
                raise RuntimeError(f"bench clients failed: {r.stderr[-2000:]}")
            account = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        remove_namespaces(NS_B, NS_C)
    account["broker_port"] = port
    (out.with_suffix(".json")).write_text(json.dumps(account, indent=1))
    return account


if __name__ == "__main__":  # benchcapture.py OUT.pcap [SCALE] [dense|records]
    make = {"dense": build_dense, "records": build_records}.get(sys.argv[3] if sys.argv[3:] else "", build)
    print(make(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 1.0))
