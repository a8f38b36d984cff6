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
from functools import lru_cache
from typing import Iterable

from ..protocol import ClientTrait, client_rules, client_traits

API_VERSIONS = 18
#: the fewest different requests a connection is named by (two are shared by libraries too often)
MIN_PAIRS = 3
#: a connection's requests of one api key its traits are read from (a client repeats itself)
TRAIT_REQUESTS = 8
#: the most traits kept per connection (attacker-chosen values: bounded)
MAX_TRAITS = 64
TRAIT_KEYS = frozenset(client_traits())
_UNSEEN = object()


def _walk(value: object, path: tuple[str, ...]) -> list:
    """The values at ``path`` in a decoded body (every element of the lists it walks)."""
    values = [value]
    for step in path:
        many = step.endswith("[]")
        name = step[:-2] if many else step
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
        values = nxt
    return values


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


def traits(api_key: int, body: dict) -> list[tuple[str, bool]]:
    """What a decoded request body shows about its client: (``name=value``, intrinsic) per trait of
    protocol/client_traits.tsv that the body holds."""
    out = []
    for t in client_traits().get(api_key, ()):
        values = _walk(body, t.path)
        if t.kind == "names":
            if values:
                out.append((f"{t.name}={','.join(str(v)[:40] for v in values[:8])}", t.intrinsic))
            continue
        for v in values:
            c = _classed(t, v)
            if c is not None:
                out.append((f"{t.name}={c}", t.intrinsic))
    return out


@lru_cache(maxsize=1)
def _patterns() -> tuple[tuple[re.Pattern, str], ...]:
    return tuple((re.compile(p), lib) for p, lib in client_rules().client_ids)


def library(software: str | None, client_id: str | None, pairs: Iterable[tuple[int, int]],
            shown: Iterable[tuple[str, bool]] = ()) -> str | None:
    """The connection's client library (see the module's rules), or None. ``shown``: its traits."""
    rules = client_rules()
    if software:
        for prefix, lib in rules.software:
            if software.startswith(prefix):
                return lib
    if client_id:
        for pattern, lib in _patterns():
            if pattern.fullmatch(client_id):
                return lib
    intrinsic = {t for t, i in shown if i}  # (settings tell nothing: see the module)
    left = {lib for lib, seen in rules.traits.items() if intrinsic <= seen} if intrinsic else None
    seen_pairs = set(pairs)
    if len(seen_pairs) >= MIN_PAIRS:
        by_pairs = {lib for lib, known, _source in rules.requests if seen_pairs <= known}
        if left is None:
            left = by_pairs
        elif by_pairs and left:
            left = left & by_pairs  # (no release sent these pairs: another broker's versions; traits decide)
            if not left:
                return None  # traits and pairs point at different libraries
    if not left:
        return None
    return left.pop() if len(left) == 1 else None


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
