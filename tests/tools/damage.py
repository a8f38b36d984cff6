"""Damage real sample captures on purpose, the ways production captures are damaged.

    python tests/tools/damage.py SOURCE.pcap OUTDIR

writes, next to each other: segments reordered, segments duplicated, 1% of data segments dropped,
the file split in parts of N packets (rotation, as ``editcap -c``), cut at arbitrary bytes (a
file still being written), packets cut to 96 bytes (as ``editcap -s 96``), and Kafka's port carrying
TLS, HTTP and random bytes. The tests compare what is decoded from each with the undamaged source.
"""

from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

import dpkt

SEED = 20261121


def read(path: Path) -> tuple[list[tuple[float, bytes]], int]:
    with open(path, "rb") as f:
        r = dpkt.pcap.Reader(f)
        return [(ts, bytes(buf)) for ts, buf in r], r.datalink()


def write(path: Path, packets: list[tuple[float, bytes]], linktype: int, snaplen: int = 262144) -> Path:
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=snaplen, linktype=linktype)
        for ts, buf in packets:
            w.writepkt(buf, ts=ts)
    return path


def tcp_payload_len(buf: bytes, linktype: int) -> int:
    """Payload length of an Ethernet/IPv4/TCP packet (0 for anything else)."""
    if linktype != dpkt.pcap.DLT_EN10MB:
        raise ValueError("the damage script works on Ethernet captures")
    eth = dpkt.ethernet.Ethernet(buf)
    ip = eth.data
    if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
        return 0
    return len(ip.data.data)


def _flow(buf: bytes, linktype: int) -> tuple | None:
    """(src, sport, dst, dport) of an Ethernet/IPv4/TCP packet carrying data, else None."""
    if linktype != dpkt.pcap.DLT_EN10MB:
        raise ValueError("the damage script works on Ethernet captures")
    ip = dpkt.ethernet.Ethernet(buf).data
    if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP) or not ip.data.data:
        return None
    return (ip.src, ip.data.sport, ip.dst, ip.data.dport)


def reordered(packets, linktype, rng):
    """Segments overtaking each other: each data segment swapped with the next data segment of
    the same flow and direction (within ten packets, the other direction silent in between), half
    of the time. Timestamps stay in order."""
    out = list(packets)
    last: dict[tuple, int] = {}
    for i, (_ts, b) in enumerate(out):
        flow = _flow(b, linktype)
        if flow is None:
            continue
        last.pop((flow[2], flow[3], flow[0], flow[1]), None)  # the other direction spoke: causality
        j = last.pop(flow, None)
        if j is not None and i - j <= 10 and rng.random() < 0.5:
            out[i], out[j] = (out[i][0], out[j][1]), (out[j][0], out[i][1])
        else:
            last[flow] = i
    return out


def duplicated(packets, linktype, rng):
    """Every fifth data segment captured twice (a retransmission)."""
    out = []
    for n, (ts, b) in enumerate(packets):
        out.append((ts, b))
        if tcp_payload_len(b, linktype) and n % 5 == 0:
            out.append((ts + 1e-6, b))
    return out


def _with_payload(buf: bytes, payload: bytes) -> bytes:
    """An Ethernet/IPv4/TCP packet with its TCP payload replaced (lengths and checksums redone)."""
    eth = dpkt.ethernet.Ethernet(buf)
    ip = eth.data
    ip.data.data = payload
    ip.data.sum = 0
    ip.len = ip.__hdr_len__ + len(ip.opts) + len(bytes(ip.data))
    ip.sum = 0
    return bytes(eth)


def overlapped(packets, linktype, rng, same: bool, share: float = 0.3):
    """Reorder plus an overlapping retransmission: of two consecutive data segments A and B of one
    direction (the other direction silent in between), B is captured first, then A extended into
    B by 1 to len(B) bytes, carrying B's bytes (``same``) or other bytes there. Whatever A's copy
    says, B's bytes were captured first and must win. Returns (packets, pairs mutated)."""
    out = list(packets)
    last: dict[tuple, int] = {}
    mutated = 0
    for i, (_ts, b) in enumerate(out):
        flow = _flow(b, linktype)
        if flow is None:
            continue
        last.pop((flow[2], flow[3], flow[0], flow[1]), None)
        j = last.pop(flow, None)
        if j is None or rng.random() >= share:
            last[flow] = i
            continue
        a_tcp = dpkt.ethernet.Ethernet(out[j][1]).data.data
        b_tcp = dpkt.ethernet.Ethernet(out[i][1]).data.data
        if (b_tcp.seq - a_tcp.seq) & 0xFFFFFFFF != len(a_tcp.data):
            last[flow] = i
            continue
        k = rng.randint(1, len(b_tcp.data))
        tail = b_tcp.data[:k] if same else bytes((x ^ 0x5A) for x in b_tcp.data[:k])
        longer = _with_payload(out[j][1], bytes(a_tcp.data) + tail)
        out[i], out[j] = (out[i][0], longer), (out[j][0], out[i][1])
        mutated += 1
    return out, mutated


def dropped(packets, linktype, rng, share=0.01):
    """About ``share`` of the data segments lost; returns (packets, indexes of those dropped)."""
    data = [i for i, (_ts, b) in enumerate(packets) if tcp_payload_len(b, linktype)]
    lost = set(rng.sample(data, max(1, int(len(data) * share))))
    return [p for i, p in enumerate(packets) if i not in lost], sorted(lost)


def moved_ports(data: bytes, broker: int, copy: int, stride: int = 131) -> bytes:
    """An Ethernet/IPv4/TCP packet of copy number ``copy`` of a capture: its client port moved, never
    onto the broker's, so that copies are connections of their own."""
    d = bytearray(data)
    tcp = 14 + (d[14] & 0x0F) * 4
    for at in (tcp, tcp + 2):
        port = struct.unpack_from("!H", d, at)[0]
        if port != broker:
            moved = (port - 1024 + stride * copy) % 60000 + 1024
            struct.pack_into("!H", d, at, moved + 1 if moved == broker else moved)
    return bytes(d)


def interleaved(samples: Path, path: Path, copies: int = 12) -> Path:
    """``copies`` copies of each Ethernet sample capture (MTU-segmented Produce and Fetch, admin and
    transactions, SASL logins, kcat), on other client ports and interleaved in time, so that dozens
    of connections are open at once and learn topic ids from each other; then 1% of the segments
    lost, some reordered and some duplicated."""
    from collections import Counter

    from spark_kafkawire.wire.capture import CaptureReader

    out: list[tuple[float, bytes]] = []
    for name in ("veth-confluent-mtu.pcap", "tansu-confluent-codecs.pcap", "tansu-admin-txn.pcap",
                 "stub-sasl.pcap", "mock-kcat.pcap"):
        pkts = list(CaptureReader(str(samples / name)))
        broker = Counter(struct.unpack_from("!H", p.data, 14 + (p.data[14] & 0x0F) * 4 + 2)[0] for p in pkts
                         ).most_common(1)[0][0]
        start, span = pkts[0].ts_ns, pkts[-1].ts_ns - pkts[0].ts_ns
        for i in range(copies):
            for p in pkts:
                out.append((1_700_000_000 + (p.ts_ns - start + i * span // 5) / 1e9, moved_ports(p.data, broker, i)))
    out.sort(key=lambda x: x[0])
    rng = random.Random(7)
    out, _lost = dropped(out, dpkt.pcap.DLT_EN10MB, rng)
    out = reordered(out, dpkt.pcap.DLT_EN10MB, rng)
    out = duplicated(out, dpkt.pcap.DLT_EN10MB, rng)
    return write(path, out, dpkt.pcap.DLT_EN10MB)


def _records(path: Path) -> tuple[bytes, list[bytes]]:
    """A classic pcap file's global header and its records (record header and data), as they are."""
    data = path.read_bytes()
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    out, pos = [], 24
    while pos + 16 <= len(data):
        caplen = struct.unpack_from(endian + "I", data, pos + 8)[0]
        out.append(data[pos:pos + 16 + caplen])
        pos += 16 + caplen
    return data[:24], out


def split(path: Path, out: Path, count: int) -> list[Path]:
    """Rotate like tcpdump -C (or editcap -c): parts of ``count`` packets, each with the source's
    file header, every record byte for byte."""
    out.mkdir(parents=True, exist_ok=True)
    head, records = _records(path)
    parts = []
    for i in range(0, len(records), count):
        part = out / f"part_{i // count:05d}.pcap"
        part.write_bytes(head + b"".join(records[i:i + count]))
        parts.append(part)
    return parts


def snaplen(path: Path, out: Path, length: int = 96) -> Path:
    """Packets cut to ``length`` captured bytes, as tcpdump -s (or editcap -s) does: the original
    length stays in each record header."""
    head, records = _records(path)
    endian = "<" if head[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    snap = struct.pack(endian + "I", length)
    cut = []
    for r in records:
        caplen = struct.unpack_from(endian + "I", r, 8)[0]
        if caplen > length:
            r = r[:8] + snap + r[12:16 + length]
        cut.append(r)
    out.write_bytes(head[:16] + (snap if struct.unpack_from(endian + "I", head, 16)[0] > length else head[16:20])
                    + head[20:] + b"".join(cut))
    return out


def truncated(path: Path, out: Path, at: int) -> Path:
    out.write_bytes(path.read_bytes()[:at])
    return out


def not_kafka(out: Path, port: int = 9092) -> Path:
    """TLS, HTTP and random bytes on Kafka's port: whole TCP connections, SYN to FIN."""
    rng = random.Random(SEED)
    # (record and handshake lengths as a TLS stack writes them: a record followed by stray bytes is
    # no TLS, see spark_kafkawire/tls/guess.py's TlsGuess)
    client_hello = bytes.fromhex("16030100f6010000f20303") + bytes(rng.randrange(256) for _ in range(240))
    server_hello = bytes.fromhex("160303007c020000780303") + bytes(rng.randrange(256) for _ in range(118))
    app_data = bytes.fromhex("1703030200") + bytes(rng.randrange(256) for _ in range(512))
    http_req = b"GET /metrics HTTP/1.1\r\nHost: broker:9092\r\nUser-Agent: curl/8.5\r\n\r\n"
    http_resp = b"HTTP/1.1 200 OK\r\nContent-Length: 4000\r\n\r\n" + bytes(rng.randrange(256) for _ in range(4000))
    noise = [bytes(rng.randrange(256) for _ in range(rng.randrange(200, 1400))) for _ in range(300)]
    conns = [
        (41000, [(0, client_hello), (1, server_hello), (0, app_data), (1, app_data)]),
        (41001, [(0, http_req), (1, http_resp)]),
        (41002, [(i % 2, b) for i, b in enumerate(noise)]),
    ]
    packets = []
    t = 1_700_000_000.0
    for cport, talk in conns:
        seq = [1000, 5000]
        ends = [("10.9.0.2", cport), ("10.9.0.1", port)]

        def pkt(d, flags, payload=b""):
            nonlocal t
            t += 0.0001
            src, dst = ends[d], ends[1 - d]
            tcp = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=seq[d], ack=seq[1 - d], flags=flags, win=65535,
                               data=payload)
            seq[d] = (seq[d] + len(payload) + (1 if flags & (dpkt.tcp.TH_SYN | dpkt.tcp.TH_FIN) else 0)) & 0xFFFFFFFF
            ip = dpkt.ip.IP(src=bytes(map(int, src[0].split("."))), dst=bytes(map(int, dst[0].split("."))),
                            p=dpkt.ip.IP_PROTO_TCP, data=tcp, ttl=64)
            ip.len = len(bytes(ip))
            eth = dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
            packets.append((t, bytes(eth)))

        pkt(0, dpkt.tcp.TH_SYN)
        pkt(1, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK)
        pkt(0, dpkt.tcp.TH_ACK)
        for d, payload in talk:
            for k in range(0, len(payload), 1448):
                pkt(d, dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH, payload[k : k + 1448])
        pkt(0, dpkt.tcp.TH_FIN | dpkt.tcp.TH_ACK)
        pkt(1, dpkt.tcp.TH_FIN | dpkt.tcp.TH_ACK)
    return write(out, packets, dpkt.pcap.DLT_EN10MB)


def main(source: str, outdir: str) -> None:
    src, out = Path(source), Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    packets, lt = read(src)
    rng = random.Random(SEED)
    write(out / "reordered.pcap", reordered(packets, lt, rng), lt)
    write(out / "duplicated.pcap", duplicated(packets, lt, rng), lt)
    write(out / "dropped.pcap", dropped(packets, lt, rng)[0], lt)
    split(src, out / "rotated", max(2, len(packets) // 5))
    snaplen(src, out / "snaplen96.pcap")
    truncated(src, out / "truncated.pcap", src.stat().st_size * 2 // 3 + 7)
    not_kafka(out / "not-kafka.pcap")
    print("\n".join(str(p) for p in sorted(out.rglob("*.pcap"))))


if __name__ == "__main__":
    main(*sys.argv[1:3])
