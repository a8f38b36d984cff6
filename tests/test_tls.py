"""Encrypted Kafka: real clients (kafka-python, its ssl.SSLContext writing the key log) producing and
consuming through a TLS-terminating proxy in front of a real broker, both hops in one capture
(tests/tls/make_tls_captures.py). The plaintext hop is the independent reference: the TLS hop,
decrypted with the client's key log, must carry the same Kafka frames. tshark, given the same key
log, is a second reference."""

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import dpkt
import pytest
from hypothesis import given, settings, strategies as st

import damage
from spark_kafkawire import read_capture
from spark_kafkawire.tls.keylog import KeyLog, KeyLogError
from spark_kafkawire.rows.table import ROW_SHAPES

TLS = Path(__file__).parent / "tls"
MANIFEST = json.loads((TLS / "manifest.json").read_text())
NAMES = sorted(MANIFEST)
VERSION = {"TLSv1_3": "TLS 1.3", "TLSv1_2": "TLS 1.2"}
#: the TLS 1.2 suites the proxy was told to use (OpenSSL's names) by their IANA names (RFC 5289, RFC
#: 7905); TLS 1.3 suites are configured by their IANA names, or left to OpenSSL (TLS_AES_256_GCM_SHA384)
IANA = {"ECDHE-RSA-AES256-GCM-SHA384": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-RSA-CHACHA20-POLY1305": "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "ECDHE-RSA-AES128-SHA256": "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"}


def _suite(info):
    """The suite the capture script configured, by its IANA name."""
    return IANA[info["ciphers"]] if info["ciphers"] else info.get("tls13_suite") or "TLS_AES_256_GCM_SHA384"


def _files(name):
    return TLS / f"{name}.pcap", TLS / f"{name}.keylog"


def _frames(rows, port):
    """The Kafka frames of one hop: (direction, api key, version, correlation id, client id)."""
    return Counter((r["direction"], r["api_key"], r["api_version"], r["correlation_id"], r["client_id"])
                   for r in rows if r["broker_port"] == port and r["direction"])


def _tls_connections(path, port):
    """Client ports of the TCP connections to ``port`` (their SYNs), read with dpkt."""
    with open(path, "rb") as f:
        out = set()
        for _ts, buf in dpkt.pcap.Reader(f):
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            if isinstance(tcp, dpkt.tcp.TCP) and tcp.dport == port and tcp.flags & dpkt.tcp.TH_SYN and \
                    not tcp.flags & dpkt.tcp.TH_ACK:
                out.add(tcp.sport)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_decrypted_tls_hop_carries_the_plaintext_hops_frames(name):
    """With the key log, every frame of the TLS hop is a frame of the plaintext hop, field for
    field; the plaintext hop has more only where the client closed its connection before the proxy
    passed an answer on (that request is then no_response on the TLS hop)."""
    info = MANIFEST[name]
    pcap, keylog = _files(name)
    rows = read_capture(pcap, rows="messages", tlsKeyLog=str(keylog)).to_pylist()
    tls, plain = _frames(rows, info["tls_port"]), _frames(rows, info["broker_port"])
    assert sum(tls.values()) >= 20
    assert tls - plain == Counter()
    exchanges = read_capture(pcap, tlsKeyLog=str(keylog)).to_pylist()
    unanswered = {(r["api_key"], r["api_version"], r["correlation_id"], r["client_id"]) for r in exchanges
                  if r["broker_port"] == info["tls_port"] and r["status"] == "no_response"}
    for direction, key, version, corr, cid in plain - tls:
        assert direction == "response" and (key, version, corr, cid) in unanswered
    assert {r["status"] for r in exchanges} <= {"complete", "no_response"}  # no tls row: all decrypted


@pytest.mark.parametrize("name", NAMES)
def test_records_through_tls_are_what_the_clients_sent_and_got(name):
    info = MANIFEST[name]
    pcap, keylog = _files(name)
    rows = [r for r in read_capture(pcap, rows="records", includeRecords=True, tlsKeyLog=str(keylog)).to_pylist()
            if r["broker_port"] == info["tls_port"]]
    sent = sorted(r["key"] for r in rows if r["direction"] == "request" and r["topic"] == "secure-orders")
    fetched = sorted(r["key"] for r in rows if r["direction"] == "response" and r["topic"] == "secure-orders")
    assert len(sent) == info["delivered"] == 7 and len(fetched) == info["consumed"] == 7
    assert sent == fetched == [f"k{i}".encode() for i in range(7)]


@pytest.mark.parametrize("name", NAMES)
def test_without_the_key_log_one_tls_row_per_connection_with_the_negotiated_version(name):
    info = MANIFEST[name]
    pcap, _ = _files(name)
    rows = [r for r in read_capture(pcap).to_pylist() if r["broker_port"] == info["tls_port"]]
    assert Counter(r["client_port"] for r in rows) == Counter(_tls_connections(pcap, info["tls_port"]))
    for r in rows:
        assert r["status"] == "tls"
        assert r["detail"].startswith(VERSION[info["version"]] + ", TLS_")
        assert "no key log given" in r["detail"]
    conns = [r for r in read_capture(pcap, rows="connections").to_pylist() if r["broker_port"] == info["tls_port"]]
    assert {r["tls_version"] for r in conns} == {VERSION[info["version"]]}
    assert {r["tls_cipher"] for r in conns} == {_suite(info)}
    assert {r["tls_server_name"] for r in conns} == {info["server_name"]}  # the clients' SNI
    assert all(r["tls_decrypted_bytes"] == 0 and r["tls_undecrypted_bytes"] > 0 for r in conns)


def test_a_key_log_missing_one_session_decrypts_the_others(tmp_path):
    name = "tls13-aes256gcm"
    info = MANIFEST[name]
    pcap, keylog = _files(name)
    lines = keylog.read_text().splitlines()
    randoms = sorted({ln.split()[1] for ln in lines if ln and not ln.startswith("#")})
    gone = randoms[0]
    partial = tmp_path / "partial.keylog"
    partial.write_text("\n".join(ln for ln in lines if gone not in ln) + "\n")
    conns = [r for r in read_capture(pcap, rows="connections", tlsKeyLog=str(partial)).to_pylist()
             if r["broker_port"] == info["tls_port"]]
    assert len(conns) == len(randoms)
    undecrypted = [r for r in conns if r["tls_decrypted_bytes"] == 0]
    assert len(undecrypted) == 1 and "the key log has no secret for this session" in undecrypted[0]["detail"]
    assert all(r["tls_undecrypted_bytes"] == 0 for r in conns if r not in undecrypted)
    tls_rows = [r for r in read_capture(pcap, tlsKeyLog=str(partial)).to_pylist() if r["status"] == "tls"]
    assert [r["client_port"] for r in tls_rows] == [undecrypted[0]["client_port"]]


def test_key_material_appears_in_no_output(tmp_path):
    secrets = set()
    for name in NAMES:
        for ln in _files(name)[1].read_text().splitlines():
            if ln and not ln.startswith("#"):
                secrets.add(ln.split()[2].lower())
    for name in NAMES:
        pcap, keylog = _files(name)
        for shape in ROW_SHAPES:
            extra = {"includeRecords": True} if shape == "records" else {}
            text = str(read_capture(pcap, rows=shape, tlsKeyLog=str(keylog), **extra).to_pylist()).lower()
            for s in secrets:
                assert s not in text and s[:32] not in text
    log = KeyLog.read(str(_files(NAMES[0])[1]))
    assert repr(log) == f"KeyLog({len(log)} sessions)"
    missing = tmp_path / "no-such.keylog"
    with pytest.raises(KeyLogError) as e:
        read_capture(_files(NAMES[0])[0], tlsKeyLog=f"{_files(NAMES[0])[1]},{missing}")
    assert str(e.value) == f"tlsKeyLog: {missing}: cannot be read (no such file, or no access)"


def test_decryption_resumes_after_a_lost_segment(tmp_path):
    """A data segment of the TLS hop lost in the middle of the busiest connection: decryption
    resumes at the next record whose tag verifies (TLS 1.3: with the next record sequence number),
    the lost bytes are reported, and every other frame decodes as in the whole capture."""
    name = "tls13-aes256gcm"
    info = MANIFEST[name]
    pcap, keylog = _files(name)
    packets, linktype = damage.read(pcap)
    port = info["tls_port"]
    sizes = Counter()
    data = []
    for i, (_ts, buf) in enumerate(packets):
        tcp = dpkt.ethernet.Ethernet(buf).data.data
        if tcp.dport == port and tcp.data:
            sizes[tcp.sport] += 1
            data.append((i, tcp.sport))
    busiest = sizes.most_common(1)[0][0]
    theirs = [i for i, sport in data if sport == busiest]
    lost = theirs[len(theirs) // 2]
    damaged = damage.write(tmp_path / "lost.pcap", [p for i, p in enumerate(packets) if i != lost], linktype)
    whole = _frames(read_capture(pcap, rows="messages", tlsKeyLog=str(keylog)).to_pylist(), port)
    got = _frames(read_capture(damaged, rows="messages", tlsKeyLog=str(keylog)).to_pylist(), port)
    missing = whole - got
    request = [k for k in missing if k[0] == "request"]
    assert len(request) == 1  # the request lost with the segment
    _d, key, version, corr, cid = request[0]
    # its answer is still there, but without its request (api key unknown: request_missing); nothing
    # else differs
    assert missing == Counter({request[0]: 1, ("response", key, version, corr, cid): 1})
    assert got - whole == Counter({("response", None, None, corr, None): 1})
    conn = [r for r in read_capture(damaged, rows="connections", tlsKeyLog=str(keylog)).to_pylist()
            if r["client_port"] == busiest][0]
    # the segment's bytes are gap bytes, and only that (they were counted as not decrypted too)
    assert conn["client_tls_gap_bytes"] == damage.tcp_payload_len(packets[lost][1], linktype) > 0
    assert conn["client_tls_read_bytes"] + conn["client_tls_undecrypted_bytes"] + conn["client_tls_other_bytes"] == \
        conn["client_bytes"]
    # frames after the loss were decrypted: the connection's last request is there
    last = max(k[3] for k in whole if k[0] == "request" and k[4].startswith("tls-consumer"))
    assert any(k[3] == last for k in got if k[0] == "request")


def _tshark(pcap, port, *args):
    """tshark's fields of the capture, the TLS hop's port read as TLS carrying Kafka."""
    assert shutil.which("tshark"), "tshark is required (make system-deps installs it)"
    cmd = ["tshark", "-r", str(pcap), "-d", f"tcp.port=={port},tls", "-d", f"tls.port=={port},kafka", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


@pytest.mark.external
@pytest.mark.parametrize("name", NAMES)
def test_tshark_decrypts_the_same_frames(name):
    """tshark, given the same key log, finds the same Kafka frames on the TLS hop."""
    info = MANIFEST[name]
    pcap, keylog = _files(name)
    port = info["tls_port"]
    out = _tshark(pcap, port, "-o", f"tls.keylog_file:{keylog}", "-Y", f"kafka && tcp.port=={port}", "-T", "fields",
                  "-E", "aggregator=;", "-e", "tcp.dstport", "-e", "kafka.correlation_id")
    theirs = Counter()
    for line in out.splitlines():
        dport, corrs = (line.split("\t") + [""])[:2]
        direction = "request" if int(dport) == port else "response"
        for c in corrs.split(";"):
            if c:
                theirs[(direction, int(c))] += 1
    ours = Counter((k[0], k[3]) for k in _frames(read_capture(pcap, rows="messages", tlsKeyLog=str(keylog))
                                                  .to_pylist(), port).elements())
    assert theirs == ours


@pytest.mark.external
def test_key_updates_of_both_directions_are_followed():
    """The capture whose proxy asked for new TLS 1.3 keys every few answers: tshark, decrypting with
    the same key log, sees KeyUpdate messages from both sides on several connections; every record
    after them is decrypted (no byte left undecrypted) and the frames are the plaintext hop's (the
    parametrized test above)."""
    name = "tls13-keyupdate"
    info = MANIFEST[name]
    pcap, keylog = _files(name)
    port = info["tls_port"]
    out = _tshark(pcap, port, "-o", f"tls.keylog_file:{keylog}", "-Y", "tls.handshake.type == 24", "-T", "fields",
                  "-e", "tcp.srcport", "-e", "tcp.dstport")
    sides = Counter("server" if line.split("\t")[0] == str(port) else "client" for line in out.splitlines())
    assert sides["server"] >= 3 and sides["client"] >= 3, sides
    conns = [r for r in read_capture(pcap, rows="connections", tlsKeyLog=str(keylog)).to_pylist()
             if r["broker_port"] == port]
    assert conns and all(r["tls_undecrypted_bytes"] == 0 and r["tls_decrypted_bytes"] > 0 for r in conns)


def test_spark_reads_tls_with_the_key_log(spark):
    name = NAMES[0]
    pcap, keylog = _files(name)
    df = spark.read.format("kafkawire").option("rows", "messages").option("tlsKeyLog", str(keylog)).load(str(pcap))
    got = Counter((r["direction"], r["api_key"], r["correlation_id"], r["client_port"]) for r in df.collect())
    want = Counter((r["direction"], r["api_key"], r["correlation_id"], r["client_port"])
                   for r in read_capture(pcap, rows="messages", tlsKeyLog=str(keylog)).to_pylist())
    assert got == want and sum(got.values()) >= 40


class _Out:
    """A framer stand-in that counts what it is given."""

    def __init__(self):
        self.data_bytes = 0

    def data(self, chunk, ts, number, size=-1):  # (a framer's: the first size bytes of chunk)
        self.data_bytes += len(chunk) if size < 0 else size

    def gap(self, nbytes, ts, number):
        pass

    def start(self):
        pass

    def end(self):
        pass


def _hop_streams(name):
    """The two directions' TCP payload of the TLS hop's busiest connection, in capture order."""
    info = MANIFEST[name]
    pcap, _ = _files(name)
    packets, _lt = damage.read(pcap)
    by_conn = {}
    for _ts, buf in packets:
        tcp = dpkt.ethernet.Ethernet(buf).data.data
        if tcp.data and info["tls_port"] in (tcp.sport, tcp.dport):
            client = tcp.sport if tcp.dport == info["tls_port"] else tcp.dport
            by_conn.setdefault(client, []).append((0 if tcp.dport == info["tls_port"] else 1, bytes(tcp.data)))
    return max(by_conn.values(), key=len)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NAMES), st.integers(0, 10**6), st.binary(max_size=300), st.integers(0, 2000))
def test_hostile_tls_bytes_are_counted_never_raised(name, where, junk, cut):
    """Bytes spliced into, or cut out of, a real TLS stream (with its key log): the session never
    raises, and never hands on more bytes than it was given."""
    from spark_kafkawire.tls.session import TlsSession

    segments = _hop_streams(name)
    at = where % len(segments)
    d, payload = segments[at]
    segments = segments[:at] + [(d, payload[: cut % (len(payload) + 1)] + junk)] + segments[at + 1:]
    outs = [_Out(), _Out()]
    session = TlsSession(KeyLog.read(str(_files(name)[1])), outs, None)
    given_bytes = 0
    for i, (d, data) in enumerate(segments):
        session.dirs[d].data(data, i, i)
        given_bytes += len(data)
    for x in session.dirs:
        x.end()
    assert sum(o.data_bytes for o in outs) == session.decrypted <= given_bytes


@pytest.mark.external
@pytest.mark.parametrize("name", NAMES)
def test_client_fingerprints_agree_with_tshark(name):
    """The JA3 fingerprint of every ClientHello equals tshark's (tls.handshake.ja3)."""
    info = MANIFEST[name]
    pcap, _ = _files(name)
    port = info["tls_port"]
    out = _tshark(pcap, port, "-Y", "tls.handshake.type == 1", "-T", "fields", "-e", "tcp.srcport",
                  "-e", "tls.handshake.ja3")
    theirs = {int(p): h for p, h in (ln.split("\t") for ln in out.splitlines())}
    ours = {r["client_port"]: r["tls_ja3"] for r in read_capture(pcap, rows="connections").to_pylist()
            if r["broker_port"] == port}
    assert ours == theirs and len(theirs) >= 3


@pytest.mark.parametrize("name", NAMES)
def test_the_certificate_is_the_one_the_proxy_served(name):
    """TLS 1.2 shows the server certificate in clear; TLS 1.3 with the key log, decrypted. It is the
    one make_tls_captures.py made: CN=broker.test, O=kafkawire tests, valid until 2027-11-01."""
    info = MANIFEST[name]
    pcap, keylog = _files(name)
    tls13 = info["version"] == "TLSv1_3"
    for keys in ({"tlsKeyLog": str(keylog)}, {}):
        conns = [r for r in read_capture(pcap, rows="connections", **keys).to_pylist()
                 if r["broker_port"] == info["tls_port"]]
        want = {("O=kafkawire tests,CN=broker.test", "O=kafkawire tests,CN=broker.test", "2027-11-01")}
        if tls13 and not keys:
            want = {(None, None, None)}  # encrypted in TLS 1.3: not shown without the key log
        assert {(r["tls_cert_subject"], r["tls_cert_issuer"], r["tls_cert_not_after"]) for r in conns} == want


def test_rotated_parts_decrypt_without_their_handshakes(tmp_path):
    """The capture rotated into three parts (as tcpdump -C would): connections whose handshake is
    in an earlier part are decrypted by trying the key log's unclaimed TLS 1.3 secrets on their
    first whole record. Together the parts decrypt every byte the whole does, and carry its
    frames."""
    name = "tls13-aes256gcm"
    info = MANIFEST[name]
    pcap, keylog = _files(name)
    packets, _lt = damage.read(pcap)
    parts = damage.split(pcap, tmp_path / "parts", len(packets) // 3 + 1)
    assert len(parts) == 3
    port = info["tls_port"]

    def conns(path):
        return [r for r in read_capture(path, rows="connections", tlsKeyLog=str(keylog)).to_pylist()
                if r["broker_port"] == port]

    whole = conns(pcap)
    pieces = [r for p in parts for r in conns(p)]
    assert len(pieces) > len(whole)  # some connections run across a cut
    assert sum(r["tls_decrypted_bytes"] for r in pieces) == sum(r["tls_decrypted_bytes"] for r in whole)
    assert all(r["tls_undecrypted_bytes"] == 0 for r in pieces)
    frames = Counter()
    for p in parts:
        frames += _frames(read_capture(p, rows="messages", tlsKeyLog=str(keylog)).to_pylist(), port)
    want = _frames(read_capture(pcap, rows="messages", tlsKeyLog=str(keylog)).to_pylist(), port)
    # the same frames; a response whose request is in the part before shows no api (request_missing)
    assert Counter((k[0], k[3]) for k in frames.elements()) == Counter((k[0], k[3]) for k in want.elements())
    assert frames - want == Counter({k: n for k, n in (frames - want).items() if k[0] == "response" and k[1] is None})


def test_security_audit_on_tls_traffic(spark, tmp_path):
    """The security audit on the three TLS captures: versions and suites per client and listener as
    the proxy was configured, none weak; the proxy's certificate with its days left (valid until
    2027-11-01); the loopback client that talks TLS to the proxy and plaintext to the broker (the
    proxy's own hop); a suite without AEAD and TLS 1.1 flagged, from hand-made connection rows."""
    import datetime as dt

    from pyspark.sql import Row

    from spark_kafkawire.audits import AUDITS, Policy, Rows, policies

    paths = [str(_files(n)[0]) for n in NAMES]
    keylogs = ",".join(str(_files(n)[1]) for n in NAMES)

    def shape(rows):
        return spark.read.format("kafkawire").option("rows", rows).option("tlsKeyLog", keylogs).load(paths)

    rows = Rows(shape("exchanges"), shape("connections"), shape("partitions"))
    res = {k: [r.asDict() for r in df.collect()] for k, df in AUDITS["security"](rows, Policy()).items()}
    seen = {(r["listener"].split(":")[1], r["tls_version"], r["tls_cipher"]) for r in res["tls_versions"]}
    want = {(str(i["tls_port"]), VERSION[i["version"]], _suite(i)) for i in MANIFEST.values()}
    assert seen == want
    # weak: the CBC suite only (no AEAD)
    assert {r["tls_cipher"] for r in res["tls_versions"] if r["weak"]} == {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"}
    days = (dt.date(2027, 11, 1) - dt.date.today()).days
    assert {(r["tls_cert_subject"], r["days_left"], r["expiring"]) for r in res["certificates"]} == \
        {("O=kafkawire tests,CN=broker.test", days, days < 30)}
    assert {r["listener"].split(":")[1] for r in res["plaintext_beside_tls"]} == \
        {str(i["broker_port"]) for i in MANIFEST.values()}
    verdicts = {v.name: v.ok for v in policies({"security": res}, Policy(min_certificate_days=days + 1))}
    assert verdicts["no TLS 1.0/1.1 or suite without AEAD"] is False
    assert verdicts[f"no server certificate expires within {days + 1} days"] is False
    # weak TLS, from hand-made connection rows (no client here speaks it)
    conns = rows.connections.limit(0).unionByName(spark.createDataFrame([
        Row(**{**{c: None for c in rows.connections.columns}, "protocol": "tls", "broker_ip": "10.0.0.1",
               "broker_port": 9093, "client_ip": "10.0.0.2", "tls_version": v, "tls_cipher": c,
               "first_time": dt.datetime(2026, 11, 24)})
        for v, c in (("TLS 1.1", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"), ("TLS 1.2", "TLS_RSA_WITH_AES_128_CBC_SHA"),
                     ("TLS 1.2", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"))], schema=rows.connections.schema))
    weak = AUDITS["security"](Rows(rows.exchanges.limit(0), conns, rows.partitions.limit(0)), Policy())
    assert {(r["tls_version"], r["weak"]) for r in weak["tls_versions"].collect()} == \
        {("TLS 1.1", True), ("TLS 1.2", True), ("TLS 1.2", False)}


def test_filters_shares_and_the_streaming_source_read_tls_as_the_whole(tmp_path):
    """With the key log: a filtered read keeps exactly the whole read's rows that pass; the three
    shares of the file together are the whole; the streaming source reads what a batch read does."""
    import os
    import shutil
    import time

    import pyarrow as pa
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from spark_kafkawire.reader import iter_batches
    from spark_kafkawire.spark.stream import KafkaWireStreamReader

    name = "tls13-aes256gcm"
    pcap, keylog = _files(name)
    key = dict(tlsKeyLog=str(keylog))
    whole = read_capture(pcap, **key).to_pylist()
    assert sum(r["api_key"] == 0 for r in whole) >= 2
    assert read_capture(pcap, filters=[("api_key", "=", 0)], **key).to_pylist() == [r for r in whole
                                                                                     if r["api_key"] == 0]
    shares = [r for k in range(3) for b in iter_batches(str(pcap), key, share=(k, 3)) for r in b.to_pylist()]
    ordered = lambda rows: sorted(rows, key=repr)  # noqa: E731
    assert ordered(shares) == ordered(whole)
    d = tmp_path / "rotating"
    d.mkdir()
    shutil.copy(pcap, d / "cap.pcap")
    an_hour_ago = time.time() - 3600  # complete, and well within maxFileAge
    os.utime(d / "cap.pcap", (an_hour_ago, an_hour_ago))
    reader = KafkaWireStreamReader({"path": str(d), "completeAfterSeconds": "0", **key})
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    streamed = [r for p in reader.partitions(reader.initialOffset(), end) for b in reader.read(p)
                for r in pa.Table.from_batches([b]).to_pylist()]
    assert {r["capture_file"] for r in streamed} == {str(d / "cap.pcap")}
    unfiled = lambda rows: ordered([{k: v for k, v in r.items() if k != "capture_file"} for r in rows])  # noqa: E731
    assert unfiled(streamed) == unfiled(whole)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64).map(lambda b: b.replace(b"\x18", b"\x17")), st.integers(0, 70))
def test_the_next_record_header_is_where_a_byte_by_byte_search_finds_it(junk, pos):
    """next_header (a regular expression, then the length check) stops where testing every offset
    in turn would: the first whole record header, else where fewer than five bytes are left."""
    from spark_kafkawire.tls.guess import next_header, record_length

    for b in (junk, junk + b"\x17\x03\x03\x00\x10", junk + b"\x16\x03\x01\xff\xff" + junk):
        i = pos
        while i + 5 <= len(b) and record_length(b, i) < 0:
            i += 1
        assert next_header(b, pos) == i


def test_a_record_is_found_among_its_candidate_sequence_numbers():
    """RecordKeys.find narrows the candidates by one key stream byte each, then opens those: it
    finds the sequence number a TLS 1.3 record was sealed under (checked against the record sealed
    by cryptography itself), for every inner content type, and none outside the range."""
    import os

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from spark_kafkawire.tls.keys import RecordKeys

    key, iv = os.urandom(32), os.urandom(12)
    keys = RecordKeys("gcm", key, iv, True)
    for seq, inner in ((5, b"\x17"), (4095, b"\x16"), (70000, b"\x15" + b"\x00" * 7)):
        plain = os.urandom(300) + inner
        header = b"\x17\x03\x03" + (len(plain) + 16).to_bytes(2, "big")
        nonce = (int.from_bytes(iv, "big") ^ seq).to_bytes(12, "big")
        sealed = AESGCM(key).encrypt(nonce, plain, header)
        assert keys.find(header, sealed, max(0, seq - 1000), 4096) == seq
        assert keys.find(header, sealed, seq + 1, 4096) is None
        assert keys.open(header, sealed, seq) == plain
