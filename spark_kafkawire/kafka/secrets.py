"""Secret fields: what may be said of one (its length, a SASL user name), and a body with secrets
sealed so that none of their texts appears anywhere else in it."""

from __future__ import annotations

import base64
from binascii import b2a_base64
from typing import Final

from .values import Redacted
from .wiretypes import Bytes

#: bytes fields that carry credentials: SASL tokens (PLAIN passwords, SCRAM proofs and server
#: signatures), delegation-token HMACs, SCRAM salts and salted passwords, and Envelope's wrapped
#: request. Their values never leave the decoder; only a length (and a SASL user name) remain.
SECRET_FIELDS: Final = frozenset({"AuthBytes", "Hmac", "Salt", "SaltedPassword", "RequestData"})


def redact(name: str, data: Bytes) -> dict:
    """What may be said of a secret: its length, and the user name of a SASL PLAIN/SCRAM token."""
    data = bytes(data)
    out = Redacted(redacted=True, length=len(data))
    secrets = [data.decode("utf-8", "replace"), b64(data)]
    if name == "AuthBytes":
        parts = data.split(b"\x00")
        if len(parts) == 3:  # PLAIN: authzid NUL user NUL password
            out["mechanism_hint"] = "PLAIN"
            out["user"] = parts[1].decode("utf-8", "replace")
            secrets.append(parts[2].decode("utf-8", "replace"))
        elif data[:3] in (b"n,,", b"y,,", b"p=t") or data[:2] in (b"n,", b"y,"):  # SCRAM client-first
            for attr in data.split(b","):
                if attr.startswith(b"n=") and len(attr) > 2:
                    out["mechanism_hint"] = "SCRAM"
                    out["user"] = attr[2:].decode("utf-8", "replace")
        # SCRAM proofs and signatures, OAUTHBEARER tokens
        for attr in data.replace(b"\x01", b",").split(b","):
            for prefix in (b"p=", b"v=", b"auth=Bearer ", b"auth="):
                if attr.startswith(prefix) and len(attr) > len(prefix):
                    secrets.append(attr[len(prefix):].decode("utf-8", "replace"))
                    break
    out.secrets = [x for x in secrets if x]
    return out


def seal(value: dict, secrets: list[str]) -> dict:
    """A body of a message with secret fields (SASL, delegation tokens, SCRAM credentials), made
    safe to show: unknown tagged fields and trailing bytes (which could hold a token a length got
    wrong) become their lengths, and any string that contains a secret of this body or of the
    connection's earlier ones (``secrets``, added to) has it replaced by ``[redacted]``."""
    _collect(value, secrets)
    return _sealed(value, sorted(set(secrets), key=len, reverse=True))


def _collect(value, secrets: list[str]) -> None:
    if isinstance(value, Redacted):
        secrets.extend(getattr(value, "secrets", ()))
    elif isinstance(value, dict):
        for v in value.values():
            _collect(v, secrets)
    elif isinstance(value, list):
        for v in value:
            _collect(v, secrets)


def _sealed(value, secrets: list[str]):
    if isinstance(value, Redacted):
        return value
    if isinstance(value, dict):
        out: dict = {}
        for k, v in value.items():
            if k == "_unknown_tagged_fields":
                out[k] = [{"tag": t["tag"], "length": len(base64.b64decode(t["data"]))} for t in v]
            elif k == "_trailing_bytes":
                out[k] = {"redacted": True, "length": len(base64.b64decode(v))}
            else:
                out[k] = _sealed(v, secrets)
        return out
    if isinstance(value, list):
        return [_sealed(v, secrets) for v in value]
    if isinstance(value, str):
        for x in secrets:
            if x in value:
                value = value.replace(x, "[redacted]")
    return value


def b64(data: Bytes) -> str:
    return b2a_base64(data, newline=False).decode()  # (base64.b64encode's own call, without its Python frame)
