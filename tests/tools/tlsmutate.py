"""Attacks on the TLS stage, for tests/test_tls_attack.py and the long campaign (fuzz_campaign.py).

Inputs are the project's real TLS captures (tests/tls/, each with its key log) and what an attack
makes of them: packets dropped, cut short, swapped, bytes flipped inside TLS payload, a record of one
connection spliced into another, garbage inserted, a record header damaged. The truth each input is
checked against is counted here from the packets themselves with dpkt, not by the decoder: the
distinct TCP payload bytes captured per connection and direction, and the bytes lost in between.
"""

from __future__ import annotations

import random
from pathlib import Path

import dpkt

import damage

TLS = Path(__file__).resolve().parents[1] / "tls"
CAPTURES = sorted(TLS.glob("*.pcap"))
MUTATIONS = ("drop", "truncate", "swap", "flip", "splice", "garbage", "header")


def keylog(pcap: Path) -> Path:
    return pcap.with_suffix(".keylog")


def _tcp(buf: bytes):
    ip = dpkt.ethernet.Ethernet(buf).data
    if isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.tcp.TCP):
        return ip, ip.data
    return None, None


def _with_payload(buf: bytes, payload: bytes) -> bytes:
    eth = dpkt.ethernet.Ethernet(buf)
    ip = eth.data
    tcp = ip.data
    tcp.data = payload
    tcp.sum = 0  # recomputed when packed
    ip.sum = 0
    ip.len = len(ip)
    return bytes(eth)


def payload_packets(packets) -> list[int]:
    return [i for i, (_ts, buf) in enumerate(packets) if _tcp(buf)[1] is not None and _tcp(buf)[1].data]


def mutate(packets: list, rng: random.Random, kind: str) -> list:
    """One attack on a capture's packets (Ethernet/IPv4/TCP), at a random data packet."""
    out = list(packets)
    data = payload_packets(out)
    if not data:
        return out
    i = rng.choice(data)
    ts, buf = out[i]
    ip, tcp = _tcp(buf)
    payload = bytes(tcp.data)
    if kind == "drop":
        del out[i]
    elif kind == "truncate":  # a snaplen-like cut: the packet's captured bytes end early
        cut = rng.randrange(1, len(payload) + 1) if len(payload) > 1 else 1
        out[i] = (ts, buf[:len(buf) - cut])
    elif kind == "swap":
        same = [j for j in data if j > i and _tcp(out[j][1])[0].src == ip.src and
                _tcp(out[j][1])[1].sport == tcp.sport][:3]
        if same:
            j = rng.choice(same)
            out[i], out[j] = (out[i][0], out[j][1]), (out[j][0], out[i][1])
    elif kind == "flip":
        b = bytearray(payload)
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        out[i] = (ts, _with_payload(buf, bytes(b)))
    elif kind == "header":  # the bytes where a record header may be
        b = bytearray(payload)
        at = rng.choice([0] + [k for k in range(len(b) - 1) if b[k] in (0x14, 0x15, 0x16, 0x17) and b[k + 1] == 3])
        b[at + rng.randrange(min(5, len(b) - at))] = rng.randrange(256)
        out[i] = (ts, _with_payload(buf, bytes(b)))
    elif kind == "garbage":
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        at = rng.randrange(len(payload) + 1)
        out[i] = (ts, _with_payload(buf, payload[:at] + junk + payload[at:]))
    elif kind == "splice":  # another packet's payload (another connection's records) in this one's place
        j = rng.choice(data)
        other = bytes(_tcp(out[j][1])[1].data)
        out[i] = (ts, _with_payload(buf, other))
    return out


def _segment(buf: bytes):
    """(src ip, src port, dst ip, dst port, seq, flags, payload captured) of an Ethernet/IPv4/TCP
    packet, read from the header fields (a packet cut short keeps what was captured), else None."""
    if len(buf) < 34 or buf[12:14] != b"\x08\x00" or buf[14] >> 4 != 4 or buf[23] != 6:
        return None
    ihl = (buf[14] & 15) * 4
    total = int.from_bytes(buf[16:18], "big")
    t = 14 + ihl
    if len(buf) < t + 20:
        return None
    doff = (buf[t + 12] >> 4) * 4
    sport, dport = int.from_bytes(buf[t:t + 2], "big"), int.from_bytes(buf[t + 2:t + 4], "big")
    seq, flags = int.from_bytes(buf[t + 4:t + 8], "big"), buf[t + 13]
    return buf[26:30], sport, buf[30:34], dport, seq, flags, buf[t + doff:min(len(buf), 14 + total)]


def truth(packets) -> dict:
    """Per TCP direction (src ip, src port, dst ip, dst port): (distinct payload bytes captured,
    bytes lost between them), from the headers' sequence numbers: the first byte is after the SYN
    where the SYN is in the capture, else the lowest sequence number seen; the end is the highest
    byte sent (a packet cut short counts its whole length) or the FIN."""
    flows: dict = {}
    for _ts, buf in packets:
        seg = _segment(buf)
        if seg is None:
            continue
        src, sport, dst, dport, seq, flags, payload = seg
        f = flows.setdefault((src, sport, dst, dport), {"syn": None, "segs": [], "ends": [0]})
        syn = 1 if flags & 0x02 else 0
        if syn:
            f["syn"] = seq + 1
        t = 14 + (buf[14] & 15) * 4
        wire = int.from_bytes(buf[16:18], "big") - (buf[14] & 15) * 4 - (buf[t + 12] >> 4) * 4
        if payload:
            f["segs"].append((seq + syn, len(payload)))
        if wire > 0:
            f["ends"].append((seq + syn, wire))
        if flags & 0x01:
            f["ends"].append((seq + syn, wire))
    out = {}
    for key, f in flows.items():
        if not f["segs"]:
            continue
        base = f["syn"] if f["syn"] is not None else min(s for s, _n in f["segs"])
        spans = sorted(((s - base) & 0xFFFFFFFF, ((s - base) & 0xFFFFFFFF) + n) for s, n in f["segs"])
        captured, at = 0, 0
        for a, b in spans:
            a = max(a, at)
            if b > a:
                captured += b - a
                at = b
        end = max([at] + [((s - base) & 0xFFFFFFFF) + n for s, n in f["ends"][1:]])
        out[key] = (captured, end - captured)
    return out


def check_accounting(conns: list[dict], packets) -> None:
    """Every TLS connection's bytes, per direction: read + undecrypted + other = the distinct
    payload bytes dpkt counts, and (where the stream's start is in the capture and it is one row)
    gap = the bytes lost between them; the connection's undecrypted total is the sum of the not-read
    buckets. (A late packet after a connection ended starts a row of its own: rows of one address
    pair are added up.)"""
    import ipaddress

    want = truth(packets)
    sums: dict = {}
    for r in conns:
        c = ipaddress.ip_address(r["client_ip"]).packed, r["client_port"]
        b = ipaddress.ip_address(r["broker_ip"]).packed, r["broker_port"]
        for side, key in (("client", (*c, *b)), ("broker", (*b, *c))):
            if r["protocol"] == "tls":
                got = [r[f"{side}_tls_{w}_bytes"] for w in ("read", "undecrypted", "other", "gap")]
                assert got[0] + got[1] + got[2] == r[f"{side}_bytes"], (side, got, r["detail"])
            else:
                got = [r[f"{side}_bytes"], 0, 0, r[f"{side}_gap_bytes"]]
            s = sums.setdefault(key, [0, 0, 0, r["start_captured"]])
            s[0] += got[0] + got[1] + got[2]
            s[1] += got[3]
            s[2] += 1
        if r["protocol"] == "tls":
            assert r["tls_undecrypted_bytes"] == sum(r[f"{s}_tls_{w}_bytes"] for s in ("client", "broker")
                                                     for w in ("undecrypted", "other"))
    for key, (captured, lost, rows, start) in sums.items():
        want_captured, want_lost = want.get(key, (0, 0))
        assert captured == want_captured, (key, captured, want_captured)
        if rows == 1 and start:
            assert lost == want_lost, (key, lost, want_lost)


def write(path: Path, packets, linktype: int) -> Path:
    return damage.write(path, packets, linktype)
