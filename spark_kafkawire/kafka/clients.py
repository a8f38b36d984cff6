"""Which client library a connection is, and a fingerprint of how it speaks Kafka.

``client_library``: the library named by, in turn,

1. the ClientSoftwareName an ApiVersions v3+ request sent (``confluent-kafka-python`` is librdkafka);
2. a library's default client id (``rdkafka``, ``kafka-python-2.0.2``, ``aiokafka-0.12.0``, ``kafkajs``,
   Java's ``producer-1`` and ``consumer-<group>-1``, ...), where the application did not set its own;
3. the requests the connection sent: at least MIN_PAIRS different (api key, version) pairs, each
   one a release of the library was seen sending (protocol/clients.tsv, from captures of the real
   clients); the library is named where every release whose pairs hold all of the connection's is
   of one library.

Otherwise null: a connection that has sent only requests several libraries send alike (ApiVersions
v2 and Produce v7: kafkajs, and kafka-python 2 pinned to Kafka 2.1) is not named, nor one whose
requests no release in the table sent. The rules are data (protocol/clients.tsv, made by tests/tools/clientsig.py).

``client_fingerprint``: ``kw1_a<ApiVersions version>_<12 hex>``, the hex a SHA-256 of the sorted
(api key, version) pairs the connection sent (their header versions and flexible encodings follow
from them); ``a-`` where no ApiVersions request was seen. Two connections that spoke alike have the
same fingerprint, whoever the client says it is (JA4's idea, for Kafka).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

from ..protocol import client_rules

API_VERSIONS = 18
#: the fewest different requests a connection is named by (two are shared by libraries too often)
MIN_PAIRS = 3


@lru_cache(maxsize=1)
def _patterns() -> tuple[tuple[re.Pattern, str], ...]:
    return tuple((re.compile(p), lib) for p, lib in client_rules().client_ids)


def library(software: str | None, client_id: str | None, pairs: Iterable[tuple[int, int]]) -> str | None:
    """The connection's client library (see the module's rules), or None."""
    if software:
        for prefix, lib in client_rules().software:
            if software.startswith(prefix):
                return lib
    if client_id:
        for pattern, lib in _patterns():
            if pattern.fullmatch(client_id):
                return lib
    seen = set(pairs)
    if len(seen) < MIN_PAIRS:
        return None
    named = {lib for lib, known, _source in client_rules().requests if seen <= known}
    return named.pop() if len(named) == 1 else None


def fingerprint(pairs: Iterable[tuple[int, int]], api_versions: int | None) -> str | None:
    """The connection's client_fingerprint (see the module), or None where it sent no request."""
    import hashlib  # (only where connection rows are made: a read of exchanges does not load it)

    ordered = sorted(set(pairs))
    if not ordered:
        return None
    digest = hashlib.sha256(",".join(f"{k}:{v}" for k, v in ordered).encode()).hexdigest()[:12]
    return f"kw1_a{'-' if api_versions is None else api_versions}_{digest}"
