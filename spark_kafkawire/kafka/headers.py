"""Kafka frame headers: request and response headers, by the header rules of
:mod:`spark_kafkawire.protocol` (the header version follows from api key and version).

A request header is api key, api version, correlation id, then (v1+) a client id and (v2) tagged
fields; a response header is the correlation id, then (v1) tagged fields. A client id with the
shape of a SASL token is refused, never read (see :mod:`spark_kafkawire.kafka.sasl`).
"""

from __future__ import annotations

from typing import Final

from librt.strings import read_i16_be, read_i32_be

from .. import protocol
from .sasl import token_shaped
from .wiretypes import Bytes, uvarint


class HeaderError(ValueError):
    pass


def message_code(api_key: int, version: int, request: bool) -> int:
    """A message's api key, version and direction as one integer (int16 key and version, as a
    header holds them): the key of what is remembered per message kind."""
    return (api_key << 17) | ((version & 0xFFFF) << 1) | (1 if request else 0)


#: client ids read so far, by their bytes: a client sends the same one in every request (its
#: text, checked for a token's shape once); bounded (the bytes come from the capture)
_CLIENT_IDS: Final[dict[bytes, str]] = {}
CLIENT_IDS_KEPT: Final = 1024
#: request header versions found so far, by message_code (-1: not a known request);
#: bounded (the numbers come from the capture)
_HEADER_VERSIONS: Final[dict[int, int]] = {}
HEADER_VERSIONS_KEPT: Final = 4096


def request_header_version(key: int, version: int) -> int | None:
    """protocol.request_header_version, remembered here (its cache's call costs more than the
    lookup, once a request)."""
    k = message_code(key, version, True)
    hv = _HEADER_VERSIONS.get(k)
    if hv is None:
        found = protocol.request_header_version(key, version)
        hv = -1 if found is None else found
        if len(_HEADER_VERSIONS) >= HEADER_VERSIONS_KEPT:
            _HEADER_VERSIONS.clear()
        _HEADER_VERSIONS[k] = hv
    return None if hv < 0 else hv


class RequestHeader:
    """A parsed request header. (A class, not a named tuple: compiled, it is a native class whose
    fields are read without a lookup; nothing unpacks it as a tuple.)"""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "header_version", "body_offset")

    def __init__(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                 header_version: int | None, body_offset: int):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.header_version = header_version  # None when (api_key, api_version) is not a known one
        self.body_offset = body_offset

    def __repr__(self) -> str:
        return (f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r}, "
                f"header_version={self.header_version}, body_offset={self.body_offset})")


def read_uvarint(buf: Bytes, pos: int, limit: int) -> tuple[int, int]:
    """Unsigned varint at pos (at most 5 bytes); returns (value, next position)."""
    value, after = uvarint(buf, pos, limit, 5)
    if after < 0:
        raise HeaderError("bad unsigned varint")
    return value, after


def skip_tagged_fields(buf: Bytes, pos: int, limit: int) -> int:
    if pos < limit and buf[pos] == 0:  # no tagged fields: nearly every header
        return pos + 1
    count, pos = read_uvarint(buf, pos, limit)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, limit)
        size, pos = read_uvarint(buf, pos, limit)
        pos += size
        if pos > limit:
            raise HeaderError("tagged field overruns the frame")
    return pos


def parse_request_header(data: Bytes) -> RequestHeader:
    """Parse a request header (data starts after the size field)."""
    n = len(data)
    if n < 8:
        raise HeaderError(f"request header needs 8 bytes, frame has {n}")
    key: int = read_i16_be(data, 0)
    version: int = read_i16_be(data, 2)
    corr: int = read_i32_be(data, 4)
    hv = request_header_version(key, version)
    if hv == 0:
        return RequestHeader(key, version, corr, None, 0, 8)
    # v1 and v2 (and unknown versions, read as v1): client_id with an int16 length
    if n < 10:
        raise HeaderError("request header ends before client_id")
    ln: int = read_i16_be(data, 8)
    pos = 10
    client_id = None
    if ln >= 0:
        if pos + ln > n:
            raise HeaderError("client_id length overruns the frame")  # no value: it may be secret bytes
        client_id = _client_id(data[pos : pos + ln])
        pos += ln
    elif ln != -1:
        raise HeaderError("negative client_id length")
    if hv == 2:
        pos = skip_tagged_fields(data, pos, n)
    return RequestHeader(key, version, corr, client_id, hv, pos)


def _client_id(raw: bytes) -> str:
    """A client id's text from its bytes (HeaderError: not UTF-8, or a SASL token's shape)."""
    known = _CLIENT_IDS.get(raw)
    if known is not None:
        return known
    try:
        client_id = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HeaderError("client_id is not UTF-8") from None
    if token_shaped(client_id):  # no value: it is a secret's bytes, not a client id
        raise HeaderError("client_id has the shape of a SASL token (withheld)")
    if len(_CLIENT_IDS) >= CLIENT_IDS_KEPT:
        _CLIENT_IDS.clear()
    _CLIENT_IDS[raw] = client_id
    return client_id


def parse_response_header(data: Bytes, header_version: int | None) -> tuple[int, int]:
    """Return (correlation_id, body offset) of a response header."""
    if len(data) < 4:
        raise HeaderError(f"response header needs 4 bytes, frame has {len(data)}")
    corr: int = read_i32_be(data, 0)
    pos = 4
    if header_version == 1:
        pos = skip_tagged_fields(data, pos, len(data))
    return corr, pos


def looks_like_request(data: Bytes) -> bool:
    """A strict test that a frame body starts with a request header of a known API."""
    return plausible_request(data, True) is not None


def plausible_request(data: Bytes, strict: bool) -> RequestHeader | None:
    """The request header data starts with, where it passes looks_like_request (``strict``) or,
    loosely, is a well-formed request header of any api key and version a client could send
    (0-999, 0-99: accepted at a stream's start, so that requests for unknown apis are still
    reported); else None."""
    if not strict:
        if len(data) < 10:
            return None
        if not (0 <= read_i16_be(data, 0) < 1000 and 0 <= read_i16_be(data, 2) < 100 and read_i32_be(data, 4) >= 0):
            return None
    try:
        h = parse_request_header(data)
    except HeaderError:
        return None
    if strict and (h.header_version is None or h.correlation_id < 0):
        return None
    return h
