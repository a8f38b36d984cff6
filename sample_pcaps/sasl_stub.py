"""A small stub broker that completes SASL PLAIN and SCRAM logins, for capturing real clients' bytes.

Neither broker available for the sample captures completes a PLAIN login, so this stub answers
just enough of the protocol for a real client to log in and ask for metadata: ApiVersions,
SaslHandshake, SaslAuthenticate (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, checked against USERS) and
Metadata (this stub as the only broker, no topics). Responses are written by kio, which is generated
from Kafka's message schemas; the header versions come from spark_kafkawire.protocol.

    with SaslStub() as port: ...   # listens on 127.0.0.1:port in a thread
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import hmac
import io
import os
import socket
import socketserver
import struct
import threading
import types
import typing
from importlib import import_module

from spark_kafkawire import protocol

USERS = {"alice": "alice-plain-Secret1", "bob": "bob-scram-Secret2"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_ITERATIONS = 4096
#: what this stub advertises: api key -> (min, max)
SUPPORTED = {3: (0, 12), 17: (0, 1), 18: (0, 3), 36: (0, 2)}
_MODULES = {3: "metadata", 17: "sasl_handshake", 18: "api_versions", 36: "sasl_authenticate"}


def _kio_response(api_key: int, version: int, **values):
    """A kio response object of this key and version, its fields filled from ``values`` or zero."""
    mod = import_module(f"kio.schema.{_MODULES[api_key]}.v{version}.response")
    cls = next(c for n, c in vars(mod).items() if n.endswith("Response") and dataclasses.is_dataclass(c)
               and c.__module__ == mod.__name__ and not n.startswith("_") and hasattr(c, "__api_key__"))
    return _fill(cls, values)


def _fill(cls, values: dict):
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            kwargs[f.name] = values[f.name]
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        else:
            kwargs[f.name] = _zero(hints[f.name])
    return cls(**kwargs)


def _zero(t):
    """The zero value of a kio field type: (), None, 0 of its own type, ""."""
    if typing.get_origin(t) is tuple:
        return ()
    if typing.get_origin(t) in (typing.Union, types.UnionType):  # X | None
        return None
    if isinstance(t, type) and issubclass(t, datetime.timedelta):
        return datetime.timedelta(0)
    return t() if t in (str, bytes, bool) else t(0)


def _write(obj) -> bytes:
    from kio.serial import entity_writer

    buf = io.BytesIO()
    entity_writer(type(obj))(buf, obj)
    return buf.getvalue()


class _Scram:
    def __init__(self, mechanism: str):
        self.hash = hashlib.sha256 if mechanism.endswith("256") else hashlib.sha512
        self.salt = os.urandom(16)
        self.state = "first"

    def step(self, token: bytes) -> bytes | None:
        h = self.hash
        if self.state == "first":
            self.client_first_bare = token.decode().split(",", 2)[2]
            attrs = dict(a.split("=", 1) for a in self.client_first_bare.split(","))
            self.user = attrs["n"]
            nonce = attrs["r"] + base64.b64encode(os.urandom(12)).decode()
            self.server_first = f"r={nonce},s={base64.b64encode(self.salt).decode()},i={SCRAM_ITERATIONS}"
            self.state = "final"
            return self.server_first.encode()
        final = token.decode()
        without_proof, proof = final.rsplit(",p=", 1)
        salted = hashlib.pbkdf2_hmac(h().name, USERS.get(self.user, "").encode(), self.salt, SCRAM_ITERATIONS)
        client_key = hmac.new(salted, b"Client Key", h).digest()
        auth = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.new(h(client_key).digest(), auth, h).digest()
        expected = bytes(a ^ b for a, b in zip(client_key, signature))
        if base64.b64decode(proof) != expected:
            return None
        server_sig = hmac.new(hmac.new(salted, b"Server Key", h).digest(), auth, h).digest()
        return b"v=" + base64.b64encode(server_sig)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        mechanism = None
        scram = None
        while True:
            head = _recv(sock, 4)
            if head is None:
                return
            frame = _recv(sock, struct.unpack("!i", head)[0])
            if frame is None:
                return
            key, ver, corr = struct.unpack_from("!hhi", frame)
            body = self.answer(key, ver, frame, mechanism, scram)
            if key == 17:
                mechanism = self.asked
                scram = _Scram(mechanism) if mechanism and mechanism.startswith("SCRAM") else None
            if body is None:
                return
            header = struct.pack("!i", corr)
            if protocol.response_header_version(key, ver) == 1:
                header += b"\x00"
            sock.sendall(struct.pack("!i", len(header) + len(body)) + header + body)

    def answer(self, key: int, ver: int, frame: bytes, mechanism, scram) -> bytes | None:
        from kio.schema.errors import ErrorCode

        lo, hi = SUPPORTED.get(key, (0, -1))
        if key == 18 and ver > hi:  # the ApiVersions fallback: a v0 body with error 35
            return _write(_kio_response(18, 0, error_code=ErrorCode.unsupported_version, api_keys=()))
        if not lo <= ver <= hi:
            return None
        body = _body_offset(frame, key, ver)
        if key == 18:
            mod = import_module(f"kio.schema.api_versions.v{ver}.response")
            keys = tuple(_fill(mod.ApiVersion, {"api_key": k, "min_version": a, "max_version": b})
                         for k, (a, b) in SUPPORTED.items())
            return _write(_kio_response(18, ver, api_keys=keys))
        if key == 17:
            n = struct.unpack_from("!h", frame, body)[0]
            asked = frame[body + 2 : body + 2 + n].decode()
            ok = asked in MECHANISMS
            self.asked = asked if ok else None
            return _write(_kio_response(17, ver, mechanisms=MECHANISMS,
                                        error_code=ErrorCode.none if ok else ErrorCode.unsupported_sasl_mechanism))
        if key == 36:
            token = _read_bytes(frame, body, flexible=ver >= 2)
            if mechanism == "PLAIN":
                _authz, user, password = token.split(b"\x00")
                ok = USERS.get(user.decode()) == password.decode()
                reply = b""
            else:
                reply = scram.step(token) if scram else None
                ok = reply is not None
            return _write(_kio_response(
                36, ver, auth_bytes=reply or b"",
                error_code=ErrorCode.none if ok else ErrorCode.sasl_authentication_failed,
                error_message=None if ok else "authentication failed"))
        if key == 3:
            mod = import_module(f"kio.schema.metadata.v{ver}.response")
            host, port = self.server.server_address  # type: ignore[attr-defined]
            broker = _fill(mod.MetadataResponseBroker, {"node_id": 1, "host": host, "port": port})
            return _write(_kio_response(3, ver, brokers=(broker,), controller_id=1, cluster_id="sasl-stub"))
        return None


def _body_offset(frame: bytes, key: int, ver: int) -> int:
    """Where the body starts: after api key, version, correlation id, client id (and tags in v2)."""
    n = struct.unpack_from("!h", frame, 8)[0]
    pos = 10 + max(n, 0)
    if protocol.request_header_version(key, ver) == 2:
        count = frame[pos]  # no tagged fields are sent by the clients captured here
        assert count == 0
        pos += 1
    return pos


def _read_bytes(frame: bytes, pos: int, flexible: bool) -> bytes:
    if flexible:
        n, shift = 0, 0
        while True:
            b = frame[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        return frame[pos : pos + n - 1]
    n = struct.unpack_from("!i", frame, pos)[0]
    return frame[pos + 4 : pos + 4 + n]


def _recv(sock: socket.socket, n: int) -> bytes | None:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return out


class SaslStub:
    def __init__(self, host: str = "127.0.0.1"):
        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer((host, 0), _Handler)
        self.server.daemon_threads = True

    def __enter__(self) -> int:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.server.server_address[1]

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
