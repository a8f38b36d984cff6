"""Kafka protocol knowledge, loaded from data files in this folder.

``apis.tsv`` lists every API key Kafka has defined with the versions it has had and the first
flexible version (KIP-482), written by generate.py from messages.json (a test holds them equal).
Header versions follow from that table by rule, never by per-version branches:

* request header v2 if the version is flexible, else v1; v0 for ControlledShutdown v0;
* response header v1 if flexible, else v0; always v0 for ApiVersions (key 18).

``releases.tsv``: each release's request versions; ``errors.tsv``: error codes; ``messages.json``:
every message layout, read by kafka/body.py. The one source of protocol facts for every stage, the
audits included (api keys by name, the API sets).

Imports: nothing of the package (it is data and its loaders).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache


def data_text(name: str) -> str:
    """A data file of this package (apis.tsv, messages.json, ...): read from the package's folder,
    or through importlib.resources where the package is not one (a zip); that module, with the
    tempfile, shutil and zipfile it imports, costs 4 ms of a read's start."""
    try:
        with open(os.path.join(os.path.dirname(__file__), name), encoding="utf-8") as f:
            return f.read()
    except OSError:
        from importlib import resources

        return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int  # -1: never flexible

    def has_version(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from >= 0 and version >= self.flexible_from


def _load() -> tuple[Api | None, ...]:
    text = data_text("apis.tsv")
    apis: dict[int, Api] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, name, lo, hi, flex = line.split("\t")
        apis[int(key)] = Api(int(key), name, int(lo), int(hi), int(flex))
    table: list[Api | None] = [None] * (max(apis) + 1)
    for number, api in apis.items():
        table[number] = api
    return tuple(table)


APIS: tuple[Api | None, ...] = _load()
#: api_key -> name, for building lookup columns
API_NAMES: dict[int, str] = {a.key: a.name for a in APIS if a is not None}


#: api key by Kafka's name (apis.tsv): ``KEY["Fetch"] == 1``. The rest of the package names api keys
#: through this table and the sets below, never by number.
KEY: dict[str, int] = {a.name: a.key for a in APIS if a is not None}
API_VERSIONS_KEY = KEY["ApiVersions"]
CONTROLLED_SHUTDOWN_KEY = KEY["ControlledShutdown"]
SASL_HANDSHAKE_KEY = KEY["SaslHandshake"]
SASL_AUTHENTICATE_KEY = KEY["SaslAuthenticate"]
#: the requests of a SASL login
SASL_APIS = (SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY)
PRODUCE_KEY = KEY["Produce"]
#: requests that carry records (Produce) and responses that carry them to a consumer (Fetch, ShareFetch)
RECORDS_IN_REQUEST = frozenset({PRODUCE_KEY})
RECORDS_IN_RESPONSE = frozenset({KEY["Fetch"], KEY["ShareFetch"]})
#: api keys whose bodies list (topic, partition) entries: the rows=partitions rows
PARTITION_APIS = frozenset(KEY[n] for n in ("Produce", "Fetch", "ListOffsets", "OffsetCommit", "OffsetFetch",
                                           "DeleteRecords", "OffsetForLeaderEpoch", "TxnOffsetCommit", "ShareFetch"))
#: requests whose GroupId ties the client that sends them to a consumer group
GROUP_ID_APIS = frozenset(KEY[n] for n in ("OffsetCommit", "OffsetFetch", "JoinGroup", "Heartbeat", "LeaveGroup",
                                          "SyncGroup", "TxnOffsetCommit", "ConsumerGroupHeartbeat",
                                          "ShareGroupHeartbeat"))
#: the classic group protocol's membership requests (a member joins, syncs, beats, leaves)
GROUP_MEMBERSHIP_APIS = (KEY["JoinGroup"], KEY["SyncGroup"], KEY["LeaveGroup"], KEY["Heartbeat"])
#: the nil UUID: a topic id field that names no topic (Kafka's Uuid.ZERO_UUID)
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
UNSUPPORTED_VERSION = 35
#: (api_key, error_code) answers that are version negotiation, not failures: a broker answers an
#: ApiVersions request of a version it does not know with UNSUPPORTED_VERSION and the versions it
#: has, and the client asks again at one of them (KIP-511). Counted apart from errors.
NEGOTIATION = frozenset({(API_VERSIONS_KEY, UNSUPPORTED_VERSION)})


def api(key: int) -> Api | None:
    return APIS[key] if 0 <= key < len(APIS) else None


def request_header_version(key: int, version: int) -> int | None:
    """Header version of a request, or None when (key, version) was never defined. (The decoder
    remembers the answers itself, in compiled code: kafka/headers.py.)"""
    a = api(key)
    if a is None or not a.has_version(version):
        return None
    if key == CONTROLLED_SHUTDOWN_KEY and version == 0:
        return 0
    return 2 if a.is_flexible(version) else 1


def response_header_version(key: int, version: int) -> int | None:
    """Header version of the response to a request of (key, version), or None if unknown. (The
    decoder remembers the answers itself: decode/pairing.py, response_read.)"""
    a = api(key)
    if a is None or not a.has_version(version):
        return None
    if key == API_VERSIONS_KEY:
        return 0
    return 1 if a.is_flexible(version) else 0


@lru_cache(maxsize=1)
def releases() -> dict[str, dict[int, tuple[int, int]]]:
    """releases.tsv: for each Kafka release, api key -> (lowest, highest) request version it
    accepts. A key a release does not list, it does not have. Read once (callers do not change it)."""
    text = data_text("releases.tsv")
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            rel, key, low, high = line.split("\t")
            out.setdefault(rel, {})[int(key)] = (int(low), int(high))
    return dict(sorted(out.items(), key=lambda kv: tuple(int(p) for p in kv[0].split("."))))


@dataclass(frozen=True, slots=True)
class ClientRules:
    """clients.tsv: how a connection's client library is named (kafka/clients.py)."""

    #: (prefix of the ClientSoftwareName an ApiVersions v3+ request sends, library)
    software: tuple[tuple[str, str], ...]
    #: (a library's default client id, as a regular expression, library)
    client_ids: tuple[tuple[str, str], ...]
    #: (library, the (api key, version) pairs its release sends a current broker, where seen)
    requests: tuple[tuple[str, frozenset[tuple[int, int]], str], ...]
    #: library -> the intrinsic traits (client_traits.tsv) its connections were seen showing, any setting
    traits: dict[str, frozenset[str]]


@dataclass(frozen=True, slots=True)
class ClientTrait:
    """A row of client_traits.tsv: what one field of a request shows about its client."""

    api_key: int
    name: str
    #: the field path as (name, whether it is a list whose every element is walked) steps (written
    #: in the table as names joined by ".", a list's name ending in [])
    steps: tuple[tuple[str, bool], ...]
    kind: str  # how the value is written (exact, sign, null, names, b64u16, ids)
    intrinsic: bool  # how the library is written (else a setting)


@lru_cache(maxsize=1)
def client_traits() -> dict[int, tuple[ClientTrait, ...]]:
    """client_traits.tsv, by api key, read once."""
    out: dict[int, list[ClientTrait]] = {}
    for line in data_text("client_traits.tsv").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, name, path, kind, which, _meaning = line.split("\t")
        if kind not in ("exact", "sign", "null", "names", "b64u16", "ids") or which not in ("intrinsic", "setting"):
            raise ValueError(f"client_traits.tsv: {name}: unknown class {kind!r} or kind {which!r}")
        steps = tuple((step[:-2], True) if step.endswith("[]") else (step, False) for step in path.split("."))
        out.setdefault(int(key), []).append(ClientTrait(int(key), name, steps, kind, which == "intrinsic"))
    return {k: tuple(v) for k, v in out.items()}


@lru_cache(maxsize=1)
def client_rules() -> ClientRules:
    """clients.tsv, read once."""
    software, client_ids, requests = [], [], []
    traits: dict[str, frozenset[str]] = {}
    for line in data_text("clients.tsv").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kind, match, library, source = line.split("\t")
        if kind == "software":
            software.append((match, library))
        elif kind == "client_id":
            client_ids.append((match, library))
        elif kind == "requests":
            pairs = frozenset((int(k), int(v)) for k, v in (p.split(":") for p in match.split(",")))
            requests.append((library, pairs, source))
        elif kind == "traits":
            traits[library] = traits.get(library, frozenset()) | frozenset(match.split(" "))
        else:
            raise ValueError(f"clients.tsv: unknown kind {kind!r}")
    return ClientRules(tuple(software), tuple(client_ids), tuple(requests), traits)
