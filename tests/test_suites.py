"""The cipher suite table (tls/suites.py), the one source the record layer, the session and the
security audit read, against OpenSSL's own account of the same suites (Python's ssl module): for
every suite both know, AEAD or not, the cipher and its key length, and TLS 1.3 or not agree."""

from __future__ import annotations

import ssl

from spark_kafkawire.audits.security import AEAD_SUITES
from spark_kafkawire.tls.suites import SUITES, TLS13_SUITES


def _openssl() -> dict[int, dict]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    return {c["id"] & 0xFFFF: c for c in ctx.get_ciphers()}


def test_the_suites_agree_with_openssl():
    theirs = _openssl()
    both = sorted(set(SUITES) & set(theirs))
    assert len(both) >= 12, both  # (OpenSSL builds differ in what they offer: most are there)
    for suite in both:
        ours, c = SUITES[suite], theirs[suite]
        assert ours.aead == c["aead"], (ours, c)
        assert ours.key_len * 8 == c["alg_bits"], (ours, c)
        if ours.cipher.startswith(("AES", "CHACHA20")):
            assert ours.cipher.lower() == c["symmetric"], (ours, c)
        assert ours.tls13 == (c["protocol"] == "TLSv1.3") == (suite in TLS13_SUITES), (ours, c)


def test_the_security_audit_takes_aead_from_the_table():
    """Which suites the audit does not flag: the table's AEAD ones, by name, and no other (not a
    search of the names for "GCM")."""
    assert set(AEAD_SUITES) == {s.name for s in SUITES.values() if s.aead}
    assert "TLS_AES_128_CCM_SHA256" in AEAD_SUITES  # (AEAD without "GCM" in its name)
    assert not any("CBC" in name or "RC4" in name for name in AEAD_SUITES)
