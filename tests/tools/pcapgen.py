"""Hand-built captures for unit tests: packets built with dpkt, files written by dpkt or by hand."""

from __future__ import annotations

import io
import socket
import struct

import dpkt

CLIENT = ("10.0.0.1", 40000)
BROKER = ("10.0.0.2", 9092)


def _kio_class(api_key: int, version: int, request: bool):
    from pkgutil import resolve_name

    from kio.schema.index import api_key_map, schema_name_map
    from kio.static.constants import EntityType

    et = EntityType.request if request else EntityType.response
    return resolve_name(schema_name_map[api_key_map[api_key]][version][et])


def kio_body(api_key: int, version: int, request: bool, seed: int = 0) -> bytes:
    """A body kio writes for a message generated from Kafka's schema (random, reproducible)."""
    import random

    from kiogen import build, write

    cls = _kio_class(api_key, version, request)
    rnd = random.Random(f"{api_key}/{version}/{request}/{seed}")
    while True:
        try:
            return write(build(cls, rnd))
        except TypeError:
            continue


def _flexible_header(api_key: int, version: int, request: bool, default: bool) -> bool:
    """Header version as kio's generated classes state it (v2 request / v1 response headers)."""
    try:
        cls = _kio_class(api_key, version, request)
    except KeyError:
        return default
    return cls.__header_schema__.__version__ == (2 if request else 1)


def request(api_key: int, version: int, corr: int, client_id: str | None = "cli", body: bytes | None = None,
            flexible: bool | None = None) -> bytes:
    """A whole request frame (size field included): header v1/v2, body from kio unless given."""
    if flexible is None:
        flexible = _flexible_header(api_key, version, True, False)
    if body is None:
        body = kio_body(api_key, version, True)
    cid = b"\xff\xff" if client_id is None else struct.pack("!h", len(client_id.encode())) + client_id.encode()
    hdr = struct.pack("!hhi", api_key, version, corr) + cid + (b"\x00" if flexible else b"")
    payload = hdr + body
    return struct.pack("!i", len(payload)) + payload


def response(corr: int, api_key: int, version: int, body: bytes | None = None) -> bytes:
    """A whole response frame answering (api_key, version): body from kio unless given."""
    flexible = _flexible_header(api_key, version, False, False)
    if body is None:
        body = kio_body(api_key, version, False)
    payload = struct.pack("!i", corr) + (b"\x00" if flexible else b"") + body
    return struct.pack("!i", len(payload)) + payload


def produce_request(version: int, corr: int, client_id: str, records: bytes, acks: int = 1,
                    topic: str = "orders") -> bytes:
    """A Produce request carrying ``records`` for one partition of ``topic``, written by kio."""
    import datetime

    from kiogen import write

    cls = _kio_class(0, version, True)
    mod = __import__(cls.__module__, fromlist=["x"])
    part = mod.PartitionProduceData(index=0, records=records)
    data = mod.TopicProduceData(name=topic, partition_data=(part,))
    req = cls(transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=1), topic_data=(data,))
    return request(0, version, corr, client_id, body=write(req))


def tcp_packet(src, dst, seq: int, payload: bytes = b"", flags: int = dpkt.tcp.TH_ACK, ack: int = 0,
               v6: bool = False) -> bytes:
    """An Ethernet frame carrying one TCP segment, built by dpkt."""
    tcp = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=seq & 0xFFFFFFFF, ack=ack, flags=flags, data=payload)
    if v6:
        ip = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, src[0]), dst=socket.inet_pton(socket.AF_INET6, dst[0]),
                          nxt=dpkt.ip.IP_PROTO_TCP, hlim=64, data=tcp, plen=len(bytes(tcp)))
        ip.extension_hdrs = {}
        et = dpkt.ethernet.ETH_TYPE_IP6
    else:
        ip = dpkt.ip.IP(src=socket.inet_aton(src[0]), dst=socket.inet_aton(dst[0]), p=dpkt.ip.IP_PROTO_TCP, data=tcp)
        et = dpkt.ethernet.ETH_TYPE_IP
    eth = dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=et, data=ip)
    return bytes(eth)


class Conversation:
    """Builds the packets of one TCP connection between CLIENT and BROKER."""

    def __init__(self, client=CLIENT, broker=BROKER, isn_c: int = 1000, isn_b: int = 5000, v6: bool = False,
                 acks: bool = True):
        self.client, self.broker, self.v6 = client, broker, v6
        self.acks = acks  # data segments acknowledge what the other side sent (False: ack 0)
        self.isn = {"c": isn_c, "b": isn_b}
        self.seq = {"c": isn_c + 1, "b": isn_b + 1}
        self.packets: list[bytes] = []

    def handshake(self) -> "Conversation":
        self.packets.append(tcp_packet(self.client, self.broker, self.isn["c"], flags=dpkt.tcp.TH_SYN, v6=self.v6))
        self.packets.append(tcp_packet(self.broker, self.client, self.isn["b"],
                                       flags=dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK, v6=self.v6))
        return self

    def send(self, side: str, data: bytes, mss: int | None = None) -> list[bytes]:
        src, dst = (self.client, self.broker) if side == "c" else (self.broker, self.client)
        ack = self.seq["b" if side == "c" else "c"] if self.acks else 0  # all the other side sent, as TCP does
        out = []
        for i in range(0, len(data), mss or max(len(data), 1)):
            chunk = data[i : i + (mss or len(data))]
            out.append(tcp_packet(src, dst, self.seq[side], chunk, flags=dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH, ack=ack,
                                  v6=self.v6))
            self.seq[side] += len(chunk)
        self.packets.extend(out)
        return out

    def fin(self) -> "Conversation":
        for side in ("c", "b"):
            src, dst = (self.client, self.broker) if side == "c" else (self.broker, self.client)
            self.packets.append(tcp_packet(src, dst, self.seq[side], flags=dpkt.tcp.TH_FIN | dpkt.tcp.TH_ACK, v6=self.v6))
        return self


def write_pcap(path, packets, linktype: int = dpkt.pcap.DLT_EN10MB, nano: bool = False, start: float = 1_700_000_000.0,
               step: float = 0.001) -> None:
    """Write with dpkt's own pcap writer (little endian)."""
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=linktype, nano=nano, snaplen=262144)
        for i, p in enumerate(packets):
            w.writepkt(p, ts=start + i * step)


def decoded_rows(tmp_path, packets, **opts) -> list[dict]:
    """Write packets to a pcap in tmp_path and decode it: the rows, as dicts."""
    from spark_kafkawire import read_capture

    path = tmp_path / "decoded.pcap"
    write_pcap(path, packets)
    return read_capture(path, **opts).to_pylist()


def write_pcap_be(path, packets, linktype: int = 1, nano: bool = False, start_s: int = 1_700_000_000) -> None:
    """A big-endian pcap, written by hand (as a big-endian host's libpcap would)."""
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    with open(path, "wb") as f:
        f.write(struct.pack(">IHHiIII", magic, 2, 4, 0, 0, 262144, linktype))
        for i, p in enumerate(packets):
            f.write(struct.pack(">IIII", start_s + i, 7, len(p), len(p)) + p)


def _block(btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def _opt(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)


def pcapng_bytes(interfaces, packets) -> bytes:
    """interfaces: [(linktype, tsresol byte or None)]; packets: [(iface, ticks, data)]."""
    out = io.BytesIO()
    out.write(_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)))
    for linktype, tsresol in interfaces:
        opts = (_opt(9, bytes([tsresol])) if tsresol is not None else b"") + struct.pack("<HH", 0, 0)
        out.write(_block(1, struct.pack("<HHI", linktype, 0, 262144) + opts))
    for iface, ticks, data in packets:
        out.write(_block(6, struct.pack("<IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF, len(data), len(data)) + data))
    return out.getvalue()
