"""A connection's identities other tools write: JA4 (FoxIO's TLS client fingerprint) against FoxIO's
own outputs on their captures (tests/ja4/), and the Community ID flow hash against the
specification's published vectors and against corelight's own implementation (the ``communityid``
package) on every capture at hand."""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, SAMPLES
from spark_kafkawire import read_capture
from spark_kafkawire.tls.fingerprints import ja4
from spark_kafkawire.wire.flow import community_id

JA4 = ROOT / "tests" / "ja4"
PUBLIC = ROOT.parent / "shared" / "public-captures"


def _ip(text: str) -> bytes:
    return ipaddress.ip_address(text).packed


# -- JA4 -------------------------------------------------------------------------------------------
def test_ja4_of_the_specifications_worked_example():
    """JA4.md's example: 15 ciphers, 16 extensions (SNI and ALPN h2), its signature algorithms."""
    ciphers = [0x1301, 0x1302, 0x1303, 0xC02B, 0xC02F, 0xC02C, 0xC030, 0xCCA9, 0xCCA8, 0xC013, 0xC014, 0x009C,
               0x009D, 0x002F, 0x0035]
    extensions = [0x001B, 0x0000, 0x0033, 0x0010, 0x4469, 0x0017, 0x002D, 0x000D, 0x0005, 0x0023, 0x0012, 0x002B,
                  0xFF01, 0x000B, 0x000A, 0x0015]
    sigalgs = [0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601]
    assert ja4(0x0303, ciphers + [0x0A0A], [0x1A1A] + extensions, [0x2A2A, 0x0304, 0x0303], b"h2", sigalgs) == \
        "t13d1516h2_8daaf6152771_e5627efa2ab1"
    # no signature algorithms: the extension list alone; no ALPN: 00; no SNI: i
    assert ja4(0x0303, ciphers, [e for e in extensions if e not in (0, 0x10)], [0x0304], None, []) == \
        "t13i1514" + "00_8daaf6152771_6d807ffa2a79"


@pytest.mark.parametrize("value, want", [(b"\xab", "ab"), (b"\x20", "20"), (b"\xab\xcd", "ad"), (b"\x20\x61", "21"),
                                         (b"\x30\xab", "3b"), (b"\x61\x20", "60"), (b"\x30\x31\xab\xcd", "3d"),
                                         (b"\x30\xab\xcd\x31", "01"), (b"http/1.1", "h1"), (b"x", "xx")])
def test_ja4_alpn_characters_as_the_specification_lists_them(value, want):
    assert ja4(0x0303, [0x1301], [0x10], [], value, [])[8:10] == want


@pytest.mark.parametrize("capture", sorted(p.name for p in JA4.glob("*.pcap*") if not p.name.endswith(".json")))
def test_ja4_equals_foxios_on_their_captures(capture):
    truth = json.loads((JA4 / f"{capture}.json").read_text())
    theirs = {}
    for r in truth:
        fps = {v for k, v in r.items() if k.startswith("JA4.")}
        if fps:
            theirs[(r["src"], int(r["srcport"]), r["dst"], int(r["dstport"]))] = fps
    rows = [r for r in read_capture(JA4 / capture, rows="connections").to_pylist() if r["tls_ja4"] is not None]
    ours = {}
    for r in rows:
        ours[(r["client_ip"], r["client_port"], r["broker_ip"], r["broker_port"])] = r["tls_ja4"]
    assert theirs and set(ours) == set(theirs), (sorted(set(theirs) - set(ours))[:3], sorted(set(ours) - set(theirs))[:3])
    wrong = {k: (v, theirs[k]) for k, v in ours.items() if v not in theirs[k]}
    if capture == "tls-non-ascii-alpn.pcapng":
        # FoxIO's implementations write "99" for an ALPN value whose first or last byte is not ASCII;
        # their specification (JA4.md, 2026) says the first and last hex digits of the value: the
        # first ALPN value's bytes as tshark shows them, then everything else as FoxIO's
        (key, (mine, (foxio,))), = wrong.items()
        raw = _first_alpn_raw(JA4 / capture)
        assert foxio[8:10] == "99" and mine[8:10] == raw[0] + raw[-1] and mine[:8] + mine[10:] == foxio[:8] + foxio[10:]
        return
    assert not wrong, list(wrong.items())[:3]


def _first_alpn_raw(path: Path) -> str:
    """The first ALPN value of the capture's first ClientHello, in hex, as tshark reads it."""
    out = subprocess.run(["tshark", "-r", str(path), "-Y", "tls.handshake.type == 1", "-T", "json", "-x"],
                         capture_output=True, text=True, check=True).stdout

    # (tshark's JSON repeats the key per value in one object: the text, not a dict, keeps the first)
    return re.search(r'"tls\.handshake\.extensions_alpn_str_raw": \[\s*"([0-9a-f]+)"', out).group(1)


# -- Community ID ----------------------------------------------------------------------------------
SPEC = [  # the specification's baseline (README "Default settings" and baseline_deflt.json / seed1.json)
    ("1.2.3.4", 1122, "5.6.7.8", 3344, 6, 0, "1:wCb3OG7yAFWelaUydu0D+125CLM="),
    ("5.6.7.8", 3344, "1.2.3.4", 1122, 6, 0, "1:wCb3OG7yAFWelaUydu0D+125CLM="),
    ("1.2.3.4", 1122, "5.6.7.8", 3344, 17, 0, "1:0Mu9InQx6z4ZiCZM/7HXi2WMhOg="),
    ("1.2.3.4", 1122, "5.6.7.8", 3344, 132, 0, "1:EKt4MsxuyaE6mL+hmrEkQ9csDD8="),
    ("128.232.110.120", 34855, "66.35.250.204", 80, 6, 0, "1:LQU9qZlK+B5F3KDmev6m5PMibrg="),
    ("2607:f8b0:400c:c03::1a", 25, "2001:470:e5bf:dead:4957:2174:e82c:4887", 63943, 6, 0,
     "1:/qFaeAR+gFe1KYjMzVDsMv+wgU4="),
]


@pytest.mark.parametrize("sip, sport, dip, dport, proto, seed, want", SPEC)
def test_community_id_equals_the_specifications_vectors(sip, sport, dip, dport, proto, seed, want):
    assert community_id(_ip(sip), sport, _ip(dip), dport, proto, seed) == want


def _captures() -> list[Path]:
    return sorted(SAMPLES.glob("*.pcap*")) + sorted(PUBLIC.glob("*.pcap*"))[:20] + sorted(JA4.glob("*.pcap*"))


def test_community_id_on_every_row_equals_corelights_implementation():
    """Every row shape carries the connection's Community ID; corelight's own package computes
    the same from the row's endpoints."""
    communityid = pytest.importorskip("communityid")
    cid = communityid.CommunityID()
    checked = 0
    for path in [p for p in _captures() if not p.name.endswith(".json")]:
        for shape in ("connections", "exchanges", "messages"):
            for r in read_capture(path, rows=shape).select(
                    ["client_ip", "client_port", "broker_ip", "broker_port", "community_id"]).to_pylist():
                if r["client_ip"] is None:
                    assert r["community_id"] is None
                    continue
                flow = communityid.FlowTuple.make_tcp(r["client_ip"], r["broker_ip"], r["client_port"],
                                                      r["broker_port"])
                assert r["community_id"] == cid.calc(flow), (path.name, r)
                checked += 1
    assert checked > 1000
