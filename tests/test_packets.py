"""Link layers, IPv4/IPv6 and TCP, checked against packets dpkt builds."""

import socket
import struct

import dpkt
import pytest

from pcapgen import tcp_packet
from spark_kafkawire.wire.capture import Packet
from spark_kafkawire.wire.packets import dissect, ip_text

C, B = ("192.0.2.10", 51000), ("192.0.2.20", 9092)


def _ip_bytes():
    return bytes(dpkt.ethernet.Ethernet(tcp_packet(C, B, 123456, b"hello")).data)


def _check(seg, payload=b"hello", src="192.0.2.10"):
    assert seg is not None
    assert ip_text(seg.src) == src
    assert (seg.sport, seg.dport, seg.seq) == (51000, 9092, 123456)
    assert seg.payload == payload and seg.wire_len == len(payload)


def test_ethernet():
    _check(dissect(Packet(1, 0, 1, tcp_packet(C, B, 123456, b"hello"), 0)))


@pytest.mark.parametrize("tags", [[0x8100], [0x88A8, 0x8100]])
def test_vlan_and_qinq(tags):
    eth = dpkt.ethernet.Ethernet(tcp_packet(C, B, 123456, b"hello"))
    hdr = bytes(eth)[:12]
    for tpid in tags:
        hdr += struct.pack("!HH", tpid, 42)
    frame = hdr + struct.pack("!H", 0x0800) + _ip_bytes()
    parsed = dpkt.ethernet.Ethernet(frame)  # dpkt agrees that this is a tagged IPv4 frame
    assert isinstance(parsed.data, dpkt.ip.IP)
    _check(dissect(Packet(1, 0, 1, frame, 0)))


def test_linux_sll():
    sll = struct.pack("!HHH8sH", 0, 772, 6, b"\x00" * 8, 0x0800) + _ip_bytes()
    assert isinstance(dpkt.sll.SLL(sll).data, dpkt.ip.IP)
    _check(dissect(Packet(1, 0, 113, sll, 0)))


def test_linux_sll2():
    sll2 = struct.pack("!HHIHBB8s", 0x0800, 0, 1, 772, 0, 6, b"\x00" * 8) + _ip_bytes()
    assert isinstance(dpkt.sll2.SLL2(sll2).data, dpkt.ip.IP)
    _check(dissect(Packet(1, 0, 276, sll2, 0)))


@pytest.mark.parametrize("linktype,fam", [(0, struct.pack("<I", 2)), (0, struct.pack(">I", 2)), (108, struct.pack(">I", 2))])
def test_bsd_loopback(linktype, fam):
    _check(dissect(Packet(1, 0, linktype, fam + _ip_bytes(), 0)))


@pytest.mark.parametrize("linktype", [101, 228, 12])
def test_raw_ip(linktype):
    _check(dissect(Packet(1, 0, linktype, _ip_bytes(), 0)))


def test_ipv6():
    c6, b6 = ("2001:db8::10", 51000), ("2001:db8::20", 9092)
    frame = tcp_packet(c6, b6, 123456, b"hello", v6=True)
    assert isinstance(dpkt.ethernet.Ethernet(frame).data, dpkt.ip6.IP6)
    _check(dissect(Packet(1, 0, 1, frame, 0)), src="2001:db8::10")
    raw = bytes(dpkt.ethernet.Ethernet(frame).data)
    _check(dissect(Packet(1, 0, 229, raw, 0)), src="2001:db8::10")
    null6 = struct.pack("<I", 30) + raw
    _check(dissect(Packet(1, 0, 0, null6, 0)), src="2001:db8::10")


def test_snaplen_cut_keeps_wire_length():
    frame = tcp_packet(C, B, 123456, b"x" * 1000)
    seg = dissect(Packet(1, 0, 1, frame[:96], len(frame)))
    assert seg.wire_len == 1000 and len(seg.payload) == 96 - 14 - 20 - 20


def test_ethernet_padding_is_not_payload():
    frame = tcp_packet(C, B, 123456, b"") + b"\x00" * 6  # padded to the 60-byte minimum
    seg = dissect(Packet(1, 0, 1, frame, len(frame)))
    assert seg.payload == b"" and seg.wire_len == 0


def test_not_tcp():
    udp = dpkt.ip.IP(src=socket.inet_aton("1.2.3.4"), dst=socket.inet_aton("5.6.7.8"), p=17,
                     data=dpkt.udp.UDP(sport=1, dport=2, data=b"x"))
    frame = bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=0x0800, data=udp))
    assert dissect(Packet(1, 0, 1, frame, 0)) is None
    assert dissect(Packet(1, 0, 1, b"\x00" * 10, 0)) is None


def test_address_text_remembered_is_ipaddress_text():
    """The rows' address text, remembered per address by the role stage, is what Python's
    ipaddress writes (IPv6 compressed), asked once or again; what is remembered stays bounded."""
    import ipaddress
    import random

    from spark_kafkawire.decode import roles

    rnd = random.Random(7)
    addrs = [bytes(4), b"\xff" * 4, bytes(16), b"\x20\x01\x0d\xb8" + bytes(10) + b"\x00\x01"]
    addrs += [bytes(rnd.randrange(256) for _ in range(rnd.choice((4, 16)))) for _ in range(2000)]
    for _ in range(2):
        for a in addrs:
            assert roles.address_text(a) == str(ipaddress.ip_address(a))
    for i in range(3 * roles.ADDRESSES_KEPT):
        roles.address_text(i.to_bytes(4, "big"))
    assert len(roles._ADDRESS_TEXT) <= roles.ADDRESSES_KEPT
