"""Packets -> TCP segments.

Strips the link layer (Ethernet with 802.1Q/QinQ tags, Linux cooked SLL and SLL2, BSD loopback
NULL/LOOP, raw IPv4/IPv6), then IPv4 or IPv6 (with extension headers), then TCP. Works on the
captured bytes with ``struct`` offsets: this runs once per packet and is the hot path.

A packet cut by the snaplen keeps what was captured: ``Segment.wire_len`` is the TCP payload
length the IP header announces, ``len(Segment.payload)`` what the capture holds. The difference
becomes a gap in the stream, never silently lost bytes.
"""

from __future__ import annotations

import ipaddress
from struct import Struct
from typing import Final, NamedTuple

from .capture import Packet

# link types (https://www.tcpdump.org/linktypes.html)
LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
_RAW_ALIASES = (12, 14)  # DLT_RAW on some BSDs

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
_VLAN_TPIDS = (0x8100, 0x88A8, 0x9100)

# (Final: the compiled stages that import them read them as constants)
TCP_FIN: Final = 0x01
TCP_SYN: Final = 0x02
TCP_RST: Final = 0x04
TCP_ACK: Final = 0x10

_U16 = Struct("!H")
_U32_LE = Struct("<I")
_U32_BE = Struct("!I")
_U32_PAIR = Struct("!II")
_TCP = Struct("!HHIIBBH")
_NULL_IPV6 = (24, 28, 30)


class Segment(NamedTuple):
    number: int  # packet number in its file
    ts_ns: int
    src: bytes  # 4 or 16 address bytes
    sport: int
    dst: bytes
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes  # captured TCP payload
    wire_len: int  # TCP payload length on the wire (>= len(payload))
    win: int  # the window field (unscaled)
    ip_id: int = -1  # IPv4's identification field (-1: IPv6, which has none)
    dsack: int = -1  # a D-SACK block (RFC 2883: bytes the receiver got twice), (length << 32) | left; -1: none


def _network(linktype: int, d: bytes) -> tuple[int, int]:
    """Return (ethertype, offset of the network header), ethertype 0 if not IP."""
    if linktype == LINKTYPE_ETHERNET:
        if len(d) < 14:
            return 0, 0
        et = (d[12] << 8) | d[13]
        off = 14
        while et in _VLAN_TPIDS and len(d) >= off + 4:
            et = (d[off + 2] << 8) | d[off + 3]
            off += 4
        return et, off
    if linktype == LINKTYPE_LINUX_SLL:
        if len(d) < 16:
            return 0, 0
        return (d[14] << 8) | d[15], 16
    if linktype == LINKTYPE_LINUX_SLL2:
        if len(d) < 20:
            return 0, 0
        return (d[0] << 8) | d[1], 20
    if linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        if len(d) < 4:
            return 0, 0
        fam = _U32_BE.unpack_from(d)[0] if linktype == LINKTYPE_LOOP else _U32_LE.unpack_from(d)[0]
        if fam > 0xFFFF:  # written on a host of the other byte order
            fam = _U32_BE.unpack_from(d)[0] if linktype != LINKTYPE_LOOP else _U32_LE.unpack_from(d)[0]
        if fam == 2:
            return ETH_IPV4, 4
        if fam in _NULL_IPV6:
            return ETH_IPV6, 4
        return 0, 0
    if linktype in (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6) or linktype in _RAW_ALIASES:
        if not d:
            return 0, 0
        v = d[0] >> 4
        return (ETH_IPV4 if v == 4 else ETH_IPV6 if v == 6 else 0), 0
    return 0, 0


_IPV6_EXT = (0, 43, 60)  # hop-by-hop, routing, destination options


_ETH_IPV4_TCP = Struct("!12xH2xHHHxB2x4s4sHHIIBBH")  # Ethernet, IPv4 (20 bytes), TCP: the common case


def _ipv4(d: bytes, off: int) -> tuple[bytes, bytes, int, int, int, int] | None:
    """An IPv4 header at ``off`` carrying TCP: (source, destination, TCP header offset, end of the
    IP packet in ``d``, IP payload length on the wire, identification); None for another protocol
    or a fragment."""
    if len(d) < off + 20 or d[off] >> 4 != 4:
        return None
    ihl = (d[off] & 0x0F) * 4
    if d[off + 9] != 6 or ihl < 20:
        return None
    frag = _U16.unpack_from(d, off + 6)[0]
    if frag & 0x3FFF:  # a fragment (MF set or nonzero offset): not reassembled
        return None
    total = _U16.unpack_from(d, off + 2)[0]
    tcp = off + ihl
    # total == 0 happens with TCP segmentation offload: trust the captured length
    end = off + total if total else len(d)
    return (d[off + 12 : off + 16], d[off + 16 : off + 20], tcp, end, (total - ihl) if total else len(d) - tcp,
            _U16.unpack_from(d, off + 4)[0])


def _ipv6(d: bytes, off: int) -> tuple[bytes, bytes, int, int, int, int] | None:
    """An IPv6 header at ``off`` (extension headers skipped) carrying TCP, as :func:`_ipv4` (no
    identification: -1)."""
    if len(d) < off + 40 or d[off] >> 4 != 6:
        return None
    plen = _U16.unpack_from(d, off + 4)[0]
    nxt = d[off + 6]
    tcp = off + 40
    end = tcp + plen if plen else len(d)
    ip_payload_wire = plen if plen else len(d) - tcp
    while nxt in _IPV6_EXT and len(d) >= tcp + 8:
        nxt = d[tcp]
        hl = (d[tcp + 1] + 1) * 8
        tcp += hl
        ip_payload_wire -= hl
    if nxt != 6:  # not TCP, or a fragment (44): not reassembled
        return None
    return d[off + 8 : off + 24], d[off + 24 : off + 40], tcp, end, ip_payload_wire, -1


_MASK32: Final = 0xFFFFFFFF
_TIMESTAMPS_ONLY: Final = b"\x01\x01\x08\x0a"  # NOP, NOP, timestamps: the common options, no SACK


def _dsack(d: bytes, pos: int, end: int, ack: int) -> int:
    """The D-SACK block among the TCP options d[pos:end] (RFC 2883: the first SACK block, where the
    cumulative ACK covers it or the second block holds it, reports bytes received twice), as
    (length << 32) | left edge, the length at most 2**31 - 1; -1 for none."""
    while pos < end:
        kind = d[pos]
        if kind == 0:
            return -1
        if kind == 1:
            pos += 1
            continue
        if pos + 1 >= end:
            return -1
        length = d[pos + 1]
        if length < 2:
            return -1
        if kind == 5:
            if length < 10 or pos + 10 > end:
                return -1
            left, right = _U32_PAIR.unpack_from(d, pos + 2)
            dup = (ack - right) & _MASK32 < 0x80000000
            if not dup and length >= 18 and pos + 18 <= end:
                l2, r2 = _U32_PAIR.unpack_from(d, pos + 10)
                dup = (left - l2) & _MASK32 < 0x80000000 and (r2 - right) & _MASK32 < 0x80000000
            return (((right - left) & 0x7FFFFFFF) << 32) | left if dup else -1
        pos += length
    return -1


def dissect(pkt: Packet) -> Segment | None:
    """The TCP segment a packet carries, or None if it carries none we can use."""
    d = pkt.data
    if pkt.linktype == LINKTYPE_ETHERNET and len(d) >= 54 and d[14] == 0x45:
        # untagged Ethernet, IPv4 without options: one unpack for both headers
        et, total, ip_id, frag, proto, src, dst, sport, dport, seq, ack, doff, flags, win = \
            _ETH_IPV4_TCP.unpack_from(d)
        if et == ETH_IPV4 and proto == 6 and not frag & 0x3FFF and doff >= 0x50:
            doff = (doff >> 4) * 4
            start = 34 + doff
            dsack = -1 if doff == 20 or (doff == 32 and d[54:58] == _TIMESTAMPS_ONLY) or start > len(d) else \
                _dsack(d, 54, start, ack)
            if total:
                wire_len = total - 20 - doff
                if wire_len < 0:
                    return None
                end = 14 + total
                payload = d[start:end] if end < len(d) else d[start:]
            else:  # TCP segmentation offload: trust the captured length
                payload = d[start:]
                wire_len = len(payload)
            return Segment(pkt.number, pkt.ts_ns, src, sport, dst, dport, seq, ack, flags, payload, wire_len, win,
                           ip_id, dsack)
    et, off = _network(pkt.linktype, d)
    ip = _ipv4(d, off) if et == ETH_IPV4 else _ipv6(d, off) if et == ETH_IPV6 else None
    if ip is None:
        return None
    src, dst, tcp, end, ip_payload_wire, ip_id = ip
    if len(d) < tcp + 20:
        return None
    sport, dport, seq, ack, doff, flags, win = _TCP.unpack_from(d, tcp)
    doff = (doff >> 4) * 4
    if doff < 20:
        return None
    start = tcp + doff
    wire_len = ip_payload_wire - doff
    if wire_len < 0:
        return None
    payload = d[start : min(end, len(d), start + wire_len)]
    dsack = _dsack(d, tcp + 20, start, ack) if doff > 20 and start <= len(d) else -1
    return Segment(pkt.number, pkt.ts_ns, src, sport, dst, dport, seq, ack, flags, payload, wire_len, win, ip_id,
                   dsack)


def ip_text(addr: bytes) -> str:
    """Printable form of 4 or 16 address bytes (IPv6 compressed, as Wireshark shows it). (The role
    stage remembers each address's text, in compiled code: decode/roles.py, address_text.)"""
    return str(ipaddress.ip_address(addr))
