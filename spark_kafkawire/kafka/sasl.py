"""Bytes with the shape of a SASL token: never read as a Kafka header or field.

A SASL token can be read as Kafka data when the handshake that announces it was not captured, or
after a gap the resync scan crossed: a request header's client id, say, may then be cut out of a
PLAIN token and carry its password. Whatever was captured before, a value with a token's shape is
refused wherever a header or body field is read, so no secret leaves the decoder that way.

The shapes (RFC 4616, RFC 5802, RFC 7628):

* PLAIN: ``authzid NUL authcid NUL passwd``: two NULs with a non-empty name between them;
* a SCRAM client-final message: ``c=<binding>,r=<nonce>[,ext],p=<proof>``;
* OAUTHBEARER: a key/value list separated by ``\\x01`` with ``auth=``, or ``auth=Bearer <token>``.

``suspect`` is the cheap first test, for every string read (three scans in C); ``token_shaped``
the whole one, for the few strings the first lets through.
"""

from __future__ import annotations

import re
from typing import Final

_SHAPES: Final = re.compile(
    r"\x00[^\x00]+\x00"  # PLAIN
    r"|(?:^|,)c=[A-Za-z0-9+/=]*,r=[^,]+(?:,[^,]*)*?,p="  # SCRAM client-final
    r"|\x01auth=|auth=Bearer\s",  # OAUTHBEARER
    re.IGNORECASE | re.DOTALL)


def suspect(text: str) -> bool:
    """Could the string be a SASL token? (False for nearly every real string, fast.)"""
    return "\x00" in text or "\x01" in text or ",p=" in text or "uth=" in text


def token_shaped(text: str) -> bool:
    """Does the string have the shape of a SASL PLAIN, SCRAM client-final or OAUTHBEARER token?"""
    return suspect(text) and _SHAPES.search(text) is not None
