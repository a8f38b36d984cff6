"""Real clients' SASL logins and SCRAM credential admin calls: no secret reaches any output."""

import base64
import json
import re
import struct

import pytest

from conftest import SAMPLES
from spark_kafkawire import read_capture
from spark_kafkawire.wire.capture import CaptureReader

MANIFEST = json.loads((SAMPLES / "manifest.json").read_text())
WITH_SECRETS = sorted(n for n, info in MANIFEST.items() if info.get("secrets"))
SHAPES = [{"rows": "exchanges"}, {"rows": "messages"}, {"rows": "partitions"},
          {"rows": "records", "includeRecords": "true"}]


def _scram_proofs(name):
    """SCRAM client proofs and server signatures as they are on the wire (client-final, server-final)."""
    raw = b"".join(bytes(p.data) for p in CaptureReader(str(SAMPLES / name)))
    proofs = set(re.findall(rb",p=([A-Za-z0-9+/=]{20,})", raw))
    signatures = set(re.findall(rb"v=([A-Za-z0-9+/=]{20,})", raw))
    return {p.decode() for p in proofs | signatures}


def _forms(secret: str):
    b = secret.encode()
    return {secret, base64.b64encode(b).decode(), b.hex()}


@pytest.mark.parametrize("name", WITH_SECRETS)
@pytest.mark.parametrize("opts", SHAPES, ids=lambda o: o["rows"])
def test_no_secret_in_any_output(name, opts):
    secrets = set(MANIFEST[name]["secrets"])
    if name == "stub-sasl.pcap":
        proofs = _scram_proofs(name)
        assert len(proofs) >= 6  # 3 SCRAM logins: a proof and a server signature each
        secrets |= proofs
        # the PLAIN passwords (alice's and mallory's wrong one) are on the wire in clear
        raw = b"".join(bytes(p.data) for p in CaptureReader(str(SAMPLES / name)))
        assert sum(s.encode() in raw for s in MANIFEST[name]["secrets"]) == 2
    text = json.dumps(read_capture(SAMPLES / name, **opts).to_pylist(), default=str)
    for s in secrets:
        for form in _forms(s):
            assert form not in text, (s, form)


def test_logins_stay_auditable():
    """Mechanism, user and outcome of each login remain: only the secret goes."""
    rows = read_capture(SAMPLES / "stub-sasl.pcap").to_pylist()
    for client in MANIFEST["stub-sasl.pcap"]["clients"]:
        mine = [r for r in rows if r["client_id"] == client["client_id"]]
        hs = [json.loads(r["request"]) for r in mine if r["api_name"] == "SaslHandshake"]
        assert hs and {h["Mechanism"] for h in hs} == {client["mechanism"]}
        auth = [r for r in mine if r["api_name"] == "SaslAuthenticate"]
        first = json.loads(auth[0]["request"])["AuthBytes"]
        assert first["redacted"] is True and first["user"] == client["user"]
        assert first["mechanism_hint"] == client["mechanism"].split("-")[0]
        names = {r["error_name"] for r in auth}
        if client["logged_in"]:
            assert names == {"NONE"} and any(r["api_name"] == "Metadata" for r in mine)
        else:
            assert "SASL_AUTHENTICATION_FAILED" in names


def test_scram_credentials_admin_is_redacted():
    rows = read_capture(SAMPLES / "tansu-admin-txn.pcap").to_pylist()
    alter = next(json.loads(r["request"]) for r in rows if r["api_name"] == "AlterUserScramCredentials")
    up = alter["Upsertions"][0]
    assert up["Name"] == "alice" and up["Iterations"] == 4096
    assert up["Salt"]["redacted"] and up["SaltedPassword"]["redacted"]


def test_raw_sasl_tokens_after_handshake_v0_show_nothing(tmp_path):
    """After SaslHandshake v0 the client sends its PLAIN token without a Kafka header (and a
    SCRAM broker answers likewise): no value read from those bytes reaches a column or a detail,
    not even as a number (two password characters read as a client_id length)."""
    import struct

    from pcapgen import Conversation, decoded_rows, request, response

    password = b"3cr3t-Pa55w0rd"
    token = b"\x00alice\x00" + password
    c = Conversation().handshake()
    c.send("c", request(17, 0, 1, "legacy", body=struct.pack("!h", 5) + b"PLAIN"))
    c.send("b", response(1, 17, 0, body=struct.pack("!hi", 0, 1) + struct.pack("!h", 5) + b"PLAIN"))
    c.send("c", struct.pack("!i", len(token)) + token)
    challenge = b"r=nonce,s=" + base64.b64encode(b"saltsalt") + b",i=4096"
    c.send("b", struct.pack("!i", len(challenge)) + challenge)
    c.send("c", request(3, 1, 2, "legacy", body=struct.pack("!i", 0)))
    c.send("b", response(2, 3, 1))
    packets = c.fin().packets
    numbers = {str(v) for w in (password, challenge) for i in range(len(w) - 1)
               for v in (struct.unpack_from("!h", w, i)[0], struct.unpack_from("!H", w, i)[0])}
    numbers |= {str(struct.unpack_from("!i", w, i)[0]) for w in (password, challenge) for i in range(len(w) - 3)}
    for shape in SHAPES[:2]:
        rows = decoded_rows(tmp_path, packets, **shape)
        tokens = [r for r in rows if r["status"] == "sasl_token"]
        assert len(tokens) == 2, rows
        for r in tokens:
            assert all(r[k] is None for k in ("api_key", "api_version", "correlation_id", "client_id"))
        text = json.dumps(rows, default=str)
        for form in list(_forms(password.decode())) + [challenge.decode(), "saltsalt", base64.b64encode(b"saltsalt").decode()]:
            assert form not in text
        for r in rows:
            assert not set(re.findall(r"-?\d+", r["detail"] or "")) & numbers, r["detail"]
        # the Kafka request after the login decodes as usual
        assert [r["api_name"] for r in rows if r["status"] == "complete"][-1:] == ["Metadata"]


SHAPES_ALL = SHAPES + [{"rows": "connections"}]


@pytest.mark.parametrize("opts", SHAPES_ALL, ids=lambda o: o["rows"])
def test_no_secret_residue_in_hostile_sasl_bodies(opts):
    """PLAIN tokens hidden where a length does not cover them (unknown tagged fields, bytes after a
    short AuthBytes) and echoed by a broker in an ErrorMessage: none of it reaches any output. The
    passwords are taken from the capture's own bytes (authzid NUL user NUL password)."""
    from conftest import FINDINGS

    path = FINDINGS / "sasl-secret-residue.pcap"
    raw = b"".join(bytes(p.data) for p in CaptureReader(str(path)))
    passwords = {m.decode() for m in re.findall(rb"\x00alice\x00([\x21-\x7e]{8,})", raw)}
    assert passwords
    text = json.dumps(read_capture(path, **opts).to_pylist(), default=str)
    # and when the file is read in shares by several tasks (each decodes only its rows' bodies)
    from spark_kafkawire.reader import iter_batches

    text += json.dumps([r for n in (2, 3) for k in range(n)
                        for b in iter_batches(str(path), opts, None, (k, n)) for r in b.to_pylist()], default=str)
    for pw in passwords:
        for secret in (pw, "\x00alice\x00" + pw):
            for form in _forms(secret):
                assert form not in text, form
    if opts["rows"] == "exchanges":
        rows = read_capture(path).to_pylist()
        bodies = [json.loads(r[k]) for r in rows for k in ("request", "response") if r[k]]
        tagged = [t for b in bodies for t in b.get("_unknown_tagged_fields", [])]
        assert tagged and all(set(t) == {"tag", "length"} for t in tagged)  # lengths only
        trailing = [b["_trailing_bytes"] for b in bodies if "_trailing_bytes" in b]
        assert trailing and all(t["redacted"] and t["length"] > 0 for t in trailing)
        echoed = [b["ErrorMessage"] for b in bodies if b.get("ErrorMessage")]
        assert echoed and all("[redacted]" in m for m in echoed)  # the rest of the message stays


def test_scram_proof_echoed_by_the_broker_is_redacted(tmp_path):
    """A SCRAM client-final message's proof, echoed in the broker's ErrorMessage and hidden in an
    unknown tagged field of the response: neither reaches the output; the user name does."""
    import struct

    from pcapgen import Conversation, decoded_rows, request, response

    proof = base64.b64encode(b"0123456789abcdefghij").decode()
    first = b"n,,n=bob,r=clientnonce"
    final = f"c=biws,r=clientnonceservernonce,p={proof}".encode()

    def auth_request(corr, token):  # SaslAuthenticate v2 (flexible): compact bytes, no tags
        return request(36, 2, corr, "scram", body=bytes([len(token) + 1]) + token + b"\x00")

    def auth_response(corr, message: bytes, tag: bytes = b""):
        body = struct.pack("!h", 58) + bytes([len(message) + 1]) + message + b"\x01" + struct.pack("!q", 0)
        body += (b"\x01\x05" + bytes([len(tag)]) + tag) if tag else b"\x00"
        return response(corr, 36, 2, body=body)

    c = Conversation().handshake()
    c.send("c", request(17, 1, 1, "scram", body=struct.pack("!h", 13) + b"SCRAM-SHA-256"))
    c.send("b", response(1, 17, 1, body=struct.pack("!hi", 0, 1) + struct.pack("!h", 13) + b"SCRAM-SHA-256"))
    c.send("c", auth_request(2, first))
    c.send("b", auth_response(2, b"", b""))
    c.send("c", auth_request(3, final))
    c.send("b", auth_response(3, f"invalid proof {proof} for bob".encode(), proof.encode()))
    rows = decoded_rows(tmp_path, c.fin().packets)
    text = json.dumps(rows, default=str)
    for form in _forms(proof):
        assert form not in text
    auth = [json.loads(r["request"]) for r in rows if r["api_name"] == "SaslAuthenticate"]
    assert auth[0]["AuthBytes"]["user"] == "bob"
    last = json.loads([r for r in rows if r["api_name"] == "SaslAuthenticate"][-1]["response"])
    assert last["ErrorMessage"] == "invalid proof [redacted] for bob"
    assert last["_unknown_tagged_fields"] == [{"tag": 5, "length": len(proof)}]


def _in_any_form(secret: str, text: str) -> bool:
    """The secret in clear, in hex, or inside any base64 run of the text (at any alignment)."""
    if secret in text or secret.encode().hex() in text:
        return True
    for run in re.findall(r"[A-Za-z0-9+/]{8,}={0,2}", text):
        for cut in range(4):
            part = run[cut:]
            part = part[: len(part) - len(part) % 4] if not part.endswith("=") else part
            try:
                if secret.encode() in base64.b64decode(part, validate=False):
                    return True
            except ValueError:
                pass
    return False


@pytest.mark.parametrize("name", ["sasl-token-read-as-header.pcap", "sasl-handshake-lost.pcap"])
@pytest.mark.parametrize("opts", SHAPES_ALL, ids=lambda o: o["rows"])
def test_a_sasl_token_is_never_read_as_a_header(name, opts, tmp_path):
    """The SaslHandshake request lost (or a gap before a token): the resync scan used to read a
    request header inside a PLAIN token, its client id ``\\x00alice\\x00<password>\\x00``. The
    password (taken from the capture's own bytes) reaches no output in any form: rows of every
    shape, a file read in shares, the command line's show and summary."""
    from conftest import FINDINGS
    from spark_kafkawire.reader import iter_batches

    path = FINDINGS / name
    raw = b"".join(bytes(p.data) for p in CaptureReader(str(path)))
    passwords = {m.decode() for m in re.findall(rb"\x00alice\x00([\x21-\x7e]{8,})", raw)}
    assert passwords
    rows = read_capture(path, **opts).to_pylist()
    assert rows or opts["rows"] != "connections"  # the token's bytes are counted as skipped there
    text = json.dumps(rows, default=str)
    text += json.dumps([r for n in (2, 3) for k in range(n)
                        for b in iter_batches(str(path), opts, None, (k, n)) for r in b.to_pylist()], default=str)
    if opts["rows"] == "exchanges":
        from spark_kafkawire import cli

        for argv in (["show", str(path), "--format", "json"], ["show", str(path), "--format", "csv"],
                     ["summary", str(path)], ["convert", str(path), "--to", str(tmp_path / "x.csv")]):
            import contextlib
            import io

            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                cli.main(argv)
            text += out.getvalue()
        text += (tmp_path / "x.csv").read_text()
    for pw in passwords:
        assert not _in_any_form(pw, text), pw
    # no client id is a token: none holds a NUL byte
    assert not any("\x00" in (r.get("client_id") or "") for r in rows)


@pytest.mark.parametrize("value", [
    "\x00alice\x00S3cr3tPa55w0rd", "admin\x00alice\x00pw", "\x00alice\x00pw\x00",
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.\x01\x01", "auth=Bearer abc.def.ghi"])
def test_token_shapes_are_refused_as_header_and_field(value):
    """PLAIN (RFC 4616), SCRAM client-final (RFC 5802) and OAUTHBEARER (RFC 7628) shapes: a header
    whose client id has one is no header; a body string that has one makes the body undecoded."""
    import struct

    from stages import decode_body
    from spark_kafkawire.kafka.headers import HeaderError, parse_request_header
    from spark_kafkawire.kafka.sasl import token_shaped

    assert token_shaped(value)
    cid = value.encode()
    header = struct.pack(">hhih", 3, 1, 7, len(cid)) + cid
    with pytest.raises(HeaderError, match="SASL token"):
        parse_request_header(header + b"\x00\x00\x00\x00")
    # Metadata v1 request: one topic whose name is the token
    body = struct.pack(">ih", 1, len(cid)) + cid
    with pytest.raises(Exception, match="SASL token"):
        decode_body(3, 1, True, body, 0)


@pytest.mark.parametrize("value", ["consumer-1", "rdkafka", "a=b,c=d", "k=v,p=q", "my\x01tool", "Auth=1"])
def test_ordinary_strings_are_not_token_shaped(value):
    from spark_kafkawire.kafka.sasl import token_shaped

    assert not token_shaped(value)


def test_client_ids_remembered_by_their_bytes_never_let_a_token_through():
    """Client ids are remembered by their bytes (a client sends the same one each time): a token's
    shape is refused every time it comes, a valid id read the second time is the first's text, and
    what is remembered stays bounded however many distinct ids a capture holds."""
    from spark_kafkawire.kafka import headers as hd

    def header(client_id: bytes) -> bytes:  # Metadata v4: request header v1
        return struct.pack("!hhih", 3, 4, 7, len(client_id)) + client_id

    token = b"\x00alice\x00" + b"pw-" * 6
    for _ in range(3):
        with pytest.raises(hd.HeaderError, match="SASL token"):
            hd.parse_request_header(header(token))
    assert token not in hd._CLIENT_IDS
    first = hd.parse_request_header(header(b"app-1")).client_id
    assert first == "app-1" and hd.parse_request_header(header(b"app-1")).client_id == "app-1"
    with pytest.raises(hd.HeaderError, match="UTF-8"):
        hd.parse_request_header(header(b"\xff\xfe"))
    for i in range(3 * hd.CLIENT_IDS_KEPT):
        assert hd.parse_request_header(header(b"c%d" % i)).client_id == f"c{i}"
    assert len(hd._CLIENT_IDS) <= hd.CLIENT_IDS_KEPT
