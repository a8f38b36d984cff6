"""Which client library a connection is, and a fingerprint of how it speaks Kafka.

``client_library``: the library named by, in turn,

1. the ClientSoftwareName an ApiVersions v3+ request sent (``confluent-kafka-python`` is librdkafka);
2. a library's default client id (``rdkafka``, ``kafka-python-2.0.2``, ``aiokafka-0.12.0``, ``kafkajs``,
   Java's ``producer-1`` and ``consumer-<group>-1``, ...), where the application did not set its own;
3. what its requests show (``traits``: protocol/client_traits.tsv): the libraries whose connections
   were seen showing every intrinsic trait it shows (how the library is written: the epochs and
   sequences a producer writes where it has no producer id, whether Fetch uses sessions, the leader
   epochs it knows, what it commits as metadata, its subscription's version), narrowed by the
   (api key, version) pairs it sent (at least MIN_PAIRS: every one a release of the library sent).
   Named where one library is left. Settings (acks, timeouts, Fetch's wait and sizes, assignors) are
   in the fingerprint but name nothing: a library's default in one release is another's in the next
   (kafka-python 2's 30 s session timeout is kafkajs' default; 3.0's is 45 s), and any user may set it.

Otherwise null: a connection whose traits no library was seen showing, whose traits and pairs point
at different libraries, or that several libraries could have sent alike. What each library was seen
showing is data (protocol/clients.tsv, made by tests/tools/clientsig.py from captures of the real
clients at their defaults and with common settings changed).

``client_fingerprint``: ``kw2_a<ApiVersions version>_<pairs>_<traits>``: ``a-`` where no ApiVersions
request was seen; ``<pairs>`` 12 hex of a SHA-256 of the sorted (api key, version) pairs the
connection sent (their header versions and flexible encodings follow from them); ``<traits>`` 12 hex
of a SHA-256 of its sorted traits, intrinsic and settings (``000000000000`` where it showed none).
Two connections that spoke alike have the same fingerprint, whoever the client says it is (JA4's
idea, for Kafka); a connection picked up mid-stream has the fingerprint of what it showed.
"""

from __future__ import annotations

import re
from typing import Final, Iterable

from ..compiled import require
from ..protocol import ClientTrait, client_rules, client_traits

API_VERSIONS: Final = 18
#: the fewest different requests a connection is named by (two are shared by libraries too often)
MIN_PAIRS: Final = 3
#: a connection's requests of one api key its traits are read from (a client repeats itself)
TRAIT_REQUESTS: Final = 8
#: the most traits kept per connection (attacker-chosen values: bounded)
MAX_TRAITS: Final = 64
TRAIT_KEYS: Final = frozenset(client_traits())
_UNSEEN = object()


def _walk(value: object, steps: tuple[tuple[str, bool], ...]) -> list:
    """The values at a path's ``steps`` ((name, a list's every element) each) in a decoded body (at
    most 16 elements of each list it walks)."""
    if len(steps) == 1 and not steps[0][1]:  # (a top-level field: most traits)
        got = value.get(steps[0][0], _UNSEEN) if isinstance(value, dict) else _UNSEEN
        return [] if got is _UNSEEN else [got]
    values = [value]
    for name, many in steps:
        nxt = []
        for v in values:
            got = v.get(name, _UNSEEN) if isinstance(v, dict) else _UNSEEN
            if got is _UNSEEN:
                continue
            if many:
                if isinstance(got, list):
                    nxt.extend(got[:16])
            else:
                nxt.append(got)
        if not nxt:
            return nxt
        values = nxt
    return values


#: protocol/client_traits.tsv's traits per api key (held here: not looked up per request)
_TRAITS: Final = client_traits()
#: the most client ids (by_name) and request texts (traits_of_text) remembered, each (attacker-chosen: bounded)
CACHED: Final = 4096


def _sign(v: object) -> str | None:
    return None if not isinstance(v, int) or isinstance(v, bool) else "+" if v > 0 else str(v) if v >= -1 else "<-1"


def _classed(t: ClientTrait, v: object) -> str | None:
    if t.kind == "sign":
        return _sign(v)
    if t.kind == "ids":
        if not isinstance(v, dict) or not isinstance(v.get("ProducerId"), int):
            return None
        pid = "-1" if v["ProducerId"] == -1 else "id"
        return f"{pid}/{_sign(v.get('ProducerEpoch'))}/{_sign(v.get('BaseSequence'))}"
    if t.kind == "null":
        return "null" if v is None else "empty" if v in ("", []) else "set"
    if t.kind == "b64u16":
        import base64
        import binascii

        try:
            raw = base64.b64decode(v, validate=True) if isinstance(v, str) else b""
        except (binascii.Error, ValueError):
            return None
        return str(int.from_bytes(raw[:2], "big")) if len(raw) >= 2 else None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)[:40] if isinstance(v, (int, str)) else None


_LOADS: Final = require("orjson", "orjson").loads
#: per api key: a short body text -> its traits (a dict per key: no (key, text) tuple to make and hash)
_BY_TEXT: dict[int, dict[bytes, tuple[tuple[str, bool], ...]]] = {}
#: the longest body text traits_of_text keeps the traits of
KEPT_TEXT: Final = 512


def traits_of_text(api_key: int, text: bytes) -> tuple[tuple[str, bool], ...] | None:
    """traits() of a body given as its JSON text; a short text's are kept (one client's requests
    repeat: its Metadata, its Fetch with the same offsets), at most CACHED of them per api key."""
    short = len(text) <= KEPT_TEXT
    kept = _BY_TEXT.get(api_key)
    if kept is None:
        kept = _BY_TEXT[api_key] = {}
    if short:
        got = kept.get(text)
        if got is not None:
            return got
    body = _LOADS(text)
    if not isinstance(body, dict):
        return None
    found = traits(api_key, body)
    if short:
        if len(kept) >= CACHED:
            kept.clear()
        kept[text] = found
    return found


def traits(api_key: int, body: dict) -> tuple[tuple[str, bool], ...]:
    """What a decoded request body shows about its client: (``name=value``, intrinsic) per trait of
    protocol/client_traits.tsv that the body holds."""
    out = []
    for t in _TRAITS.get(api_key, ()):
        values = _walk(body, t.steps)
        if t.kind == "names":
            if values:
                out.append((f"{t.name}={','.join(str(v)[:40] for v in values[:8])}", t.intrinsic))
            continue
        for v in values:
            c = _classed(t, v)
            if c is not None:
                out.append((f"{t.name}={c}", t.intrinsic))
    return tuple(out)


_PATTERNS: Final = tuple((re.compile(p), lib) for p, lib in client_rules().client_ids)
_BY_ID: dict[str | None, str | None] = {}
_NO_LIBS: Final[frozenset[str]] = frozenset()
_NO_ENTRIES: Final[frozenset[int]] = frozenset()
#: clients.tsv indexed for rule 3: each intrinsic trait's libraries (those seen showing it), and
#: each (api key, version) pair's "requests" rows (a library's release seen sending it)
_TRAIT_LIBS: Final = {t: frozenset(lib for lib, seen in client_rules().traits.items() if t in seen)
                      for seen_traits in client_rules().traits.values() for t in seen_traits}
_ENTRY_LIB: Final = tuple(lib for lib, _known, _source in client_rules().requests)
_PAIR_ENTRIES: Final = {p: frozenset(i for i, (_lib, known, _s) in enumerate(client_rules().requests) if p in known)
                        for _lib, known, _source in client_rules().requests for p in known}


def library(software: str | None, client_id: str | None, pairs: Iterable[tuple[int, int]],
            shown: Iterable[tuple[str, bool]] = ()) -> str | None:
    """The connection's client library (see the module's rules), or None. ``shown``: its traits."""
    named = by_name(software, client_id)
    if named is not None:
        return named
    left: frozenset[str] | None = None  # the libraries seen showing every intrinsic trait it shows
    for t, intrinsic in shown:
        if intrinsic:  # (settings tell nothing: see the module)
            libs = _TRAIT_LIBS.get(t, _NO_LIBS)
            left = libs if left is None else left & libs
            if not left:
                return None
    seen = pairs if isinstance(pairs, set) else set(pairs)
    if len(seen) >= MIN_PAIRS:
        by_pairs = _sent_all(seen)
        if left is None:
            left = by_pairs
        elif by_pairs and left:
            left = left & by_pairs  # (no release sent these pairs: another broker's versions; traits decide)
            if not left:
                return None  # traits and pairs point at different libraries
    if not left or len(left) != 1:
        return None
    return next(iter(left))


def _sent_all(pairs: set[tuple[int, int]]) -> frozenset[str]:
    """The libraries one of whose releases was seen sending every one of these pairs."""
    entries: frozenset[int] | None = None
    for p in pairs:
        e = _PAIR_ENTRIES.get(p, _NO_ENTRIES)
        entries = e if entries is None else entries & e
        if not entries:
            return _NO_LIBS
    return frozenset(_ENTRY_LIB[i] for i in entries) if entries else _NO_LIBS


def by_name(software: str | None, client_id: str | None) -> str | None:
    """The library a software name or a default client id names (rules 1 and 2), or None. (Client
    ids' are kept: one client's connections repeat them; attacker-chosen ids only fill CACHED.)"""
    if software:
        for prefix, lib in client_rules().software:
            if software.startswith(prefix):
                return lib
    if client_id in _BY_ID:
        return _BY_ID[client_id]
    if len(_BY_ID) >= CACHED:
        _BY_ID.clear()
    got = None
    if client_id:
        for pattern, lib in _PATTERNS:
            if pattern.fullmatch(client_id):
                got = lib
                break
    _BY_ID[client_id] = got
    return got


def fingerprint(pairs: Iterable[tuple[int, int]], api_versions: int | None,
                shown: Iterable[tuple[str, bool]] = ()) -> str | None:
    """The connection's client_fingerprint (see the module), or None where it sent no request."""
    import hashlib  # (only where connection rows are made: a read of exchanges does not load it)

    ordered = sorted(set(pairs))
    if not ordered:
        return None
    digest = hashlib.sha256(",".join(f"{k}:{v}" for k, v in ordered).encode()).hexdigest()[:12]
    named = sorted({t for t, _i in shown})
    traits_digest = hashlib.sha256(" ".join(named).encode()).hexdigest()[:12] if named else "0" * 12
    return f"kw2_a{'-' if api_versions is None else api_versions}_{digest}_{traits_digest}"
