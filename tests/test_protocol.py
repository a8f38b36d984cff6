"""The API table against kio (generated from Kafka's own schemas) and the header rules."""

import re
from pathlib import Path

import pytest
from kio.index import load_entity_module  # noqa: F401  (kio must import)
from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

from spark_kafkawire import protocol
from spark_kafkawire.kafka.headers import parse_request_header

FACTS = Path(__file__).resolve().parents[2] / "shared" / "protocol-facts.md"


def _kio_class(path: str):
    from pkgutil import resolve_name

    return resolve_name(path)


def test_every_key_0_to_94_is_known():
    assert [a.key for a in protocol.APIS if a] == list(range(95))


def test_flexible_versions_agree_with_kio_for_every_triple_it_has():
    checked = 0
    for key, name in api_key_map.items():
        api = protocol.api(key)
        assert api is not None, f"kio knows api key {key} ({name})"
        for version, entities in schema_name_map[name].items():
            assert api.has_version(version), (key, version)
            for etype in (EntityType.request, EntityType.response):
                cls = _kio_class(entities[etype])
                assert cls.__api_key__ == key
                assert protocol.api(key).is_flexible(version) == cls.__flexible__, (name, version, etype)
                checked += 1
    assert checked > 600  # 302 (key, version) pairs in kio 0.6.5, request and response


def test_names_and_ranges_match_protocol_facts():
    """Names and newest 4.3 versions from the facts sheet (an independent copy of the schemas)."""
    rows = re.findall(r"^\|(\d+)\|([^|]+)\|[^|]+\|[^|]+\|([^|]+)\|([^|]+)\|$", FACTS.read_text(), re.M)
    assert len(rows) == 93
    for key, name, v43, flex in rows:
        api = protocol.api(int(key))
        assert api.name == name.split(" (")[0].strip()
        hi = int(v43.strip().split(" ")[0].split("-")[-1]) if v43.strip() not in ("removed", "-") else None
        if hi is not None:
            assert api.max_version >= hi
        assert api.flexible_from == (-1 if flex.strip() == "none" else int(flex.strip().rstrip("+")))


@pytest.mark.parametrize(
    "key,version,req_hv,resp_hv",
    [
        (7, 0, 0, 0),  # ControlledShutdown v0: request header v0
        (7, 1, 1, 0),
        (7, 3, 2, 1),
        (18, 0, 1, 0),
        (18, 3, 2, 0),  # ApiVersions: response header always v0
        (18, 4, 2, 0),
        (0, 2, 1, 0),  # Produce v2: removed in 4.0, still known
        (0, 8, 1, 0),
        (0, 9, 2, 1),
        (0, 13, 2, 1),
        (1, 11, 1, 0),
        (1, 12, 2, 1),
        (4, 3, 1, 0),  # LeaderAndIsr, removed in 4.0
        (4, 4, 2, 1),
        (17, 1, 1, 0),  # SaslHandshake: never flexible
        (94, 0, 2, 1),
    ],
)
def test_header_versions(key, version, req_hv, resp_hv):
    assert protocol.request_header_version(key, version) == req_hv
    assert protocol.response_header_version(key, version) == resp_hv


def test_unknown_versions_have_no_header_version():
    assert protocol.request_header_version(0, 14) is None
    assert protocol.request_header_version(95, 0) is None
    assert protocol.response_header_version(-1, 0) is None


def test_request_header_bytes_written_by_kio():
    """kio's writer (generated from RequestHeader.json) and our reader agree, v1 and v2."""
    import io

    from kio.schema.request_header.v1.header import RequestHeader as H1
    from kio.schema.request_header.v2.header import RequestHeader as H2
    from kio.serial import entity_writer
    from kio.static.primitive import i16, i32

    for cls, key, ver in ((H1, 3, 4), (H2, 0, 9), (H2, 1, 17)):
        for cid in ("consumer-1", "", None, "ünïcode"):
            buf = io.BytesIO()
            entity_writer(cls)(buf, cls(request_api_key=i16(key), request_api_version=i16(ver),
                                         correlation_id=i32(77), client_id=cid))
            h = parse_request_header(buf.getvalue() + b"BODY")
            assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (key, ver, 77, cid)
            assert h.header_version == (2 if cls is H2 else 1)
            assert h.body_offset == len(buf.getvalue())


def test_a_header_tested_for_plausibility_is_not_misread_for_another_frame():
    """A connection keeps the request header its plausibility test read, for the parse of the same
    frame: never given for other bytes (kio writes the headers: an independent writer)."""
    import io

    from kio.schema.request_header.v2.header import RequestHeader as H2
    from kio.serial import entity_writer
    from kio.static.primitive import i16, i32

    from spark_kafkawire.decode.connstate import ConnState
    from spark_kafkawire.kafka.headers import plausible_request
    from spark_kafkawire.wire.tcp import Connection

    def header(corr, cid):
        buf = io.BytesIO()
        entity_writer(H2)(buf, H2(request_api_key=i16(0), request_api_version=i16(9), correlation_id=i32(corr),
                                  client_id=cid))
        return buf.getvalue()

    a, b = header(5, "producer-a"), header(6, "producer-b")
    assert plausible_request(a[:12], True) is None  # cut in its client id
    st = ConnState(Connection((b"\x01" * 4, 1), (b"\x02" * 4, 2), 0, 1))
    for strict in (True, False):
        h = plausible_request(a + b"BODY", strict)
        st.tested = (a, h)
        got = st.header(b + b"BODY")  # another frame next: read from its own bytes
        assert (got.correlation_id, got.client_id, got.body_offset) == (6, "producer-b", len(b))
        st.tested = (a, h)
        got = st.header(a + b"ANOTHER BODY")  # the frame tested: the same header bytes
        assert got is h and (got.correlation_id, got.client_id, got.body_offset) == (5, "producer-a", len(a))
        got = st.header(a + b"BODY")  # kept for one parse only: read again, alike
        assert got is not h and (got.correlation_id, got.client_id, got.body_offset) == (5, "producer-a", len(a))


def _facts_ranges() -> dict[str, dict[int, tuple[int, int]]]:
    """The facts sheet's 3.9.0 / 4.0.0 / 4.3.x columns as release -> key -> (low, high)."""
    out: dict[str, dict[int, tuple[int, int]]] = {"3.9": {}, "4.0": {}, "4.3": {}}
    for key, *cols in re.findall(r"^\|(\d+)\|[^|]+\|([^|]+)\|([^|]+)\|([^|]+)\|[^|]+\|$", FACTS.read_text(), re.M):
        for release, text in zip(out, cols):
            text = text.split(" (")[0].strip()
            if text not in ("removed", "-"):
                low, _, high = text.partition("-")
                out[release][int(key)] = (int(low), int(high or low))
    return out


def test_release_tables_match_the_facts_sheet_and_kio():
    """releases.tsv: 3.9 was generated from the release branch's schemas, the facts sheet's column
    transcribed from 3.9.0; 4.3 against kio 0.6.5 (generated from the 4.3 schemas) as well."""
    rel = protocol.releases()
    assert list(rel) == ["3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7", "3.8", "3.9", "4.0", "4.0.1", "4.1",
                         "4.2", "4.3"]
    facts = _facts_ranges()
    for release, table in facts.items():
        assert rel[release] == table, release
    kio = {}
    for key, name in api_key_map.items():
        versions = sorted(schema_name_map[name])
        kio[key] = (versions[0], versions[-1])
    # kio keeps Produce v0-2 out like 4.3 does; keys it has and 4.3 lacks would show here
    assert {k: v for k, v in kio.items() if k in rel["4.3"]} == {k: rel["4.3"][k] for k in kio if k in rel["4.3"]}
    assert set(rel["4.3"]) <= set(kio)


def test_later_releases_come_from_the_explorer_table_and_lie_between_4_0_and_4_3():
    """4.0.1, 4.1 and 4.2 are generated from shipped.tsv (the release that first shipped each newer
    version, from a protocol explorer's changelog pages) and the 4.0 and 4.3 rows: the file holds
    them as generated; every version above 4.0's highest up to 4.3's highest is in shipped.tsv once,
    at 4.1 or 4.2; each key's highest version grows 4.0 <= 4.1 <= 4.2 <= 4.3; and the explorer's
    pages say (checked by hand against them): Produce v13 and Fetch v18 in 4.1, ListOffsets v11 and
    WriteTxnMarkers v2 in 4.2."""
    from spark_kafkawire.protocol.generate import later_releases, read_shipped

    rel = protocol.releases()
    shipped = read_shipped(protocol.data_text("shipped.tsv"))
    assert later_releases(rel, shipped) == {r: rel[r] for r in ("4.0.1", "4.1", "4.2")}
    for key, (_, high) in rel["4.3"].items():
        above = set(range(rel["4.0"][key][1] + 1 if key in rel["4.0"] else rel["4.3"][key][0], high + 1))
        assert set(shipped.get(key, {})) == above, key
        assert all(r in ("4.1", "4.2") for r in shipped.get(key, {}).values()), key
    for key in rel["4.3"]:
        highs = [rel[r][key][1] if key in rel[r] else -1 for r in ("4.0", "4.1", "4.2", "4.3")]
        assert highs == sorted(highs), key
    assert (rel["4.1"][0], rel["4.1"][1], rel["4.1"][2], rel["4.2"][2]) == ((3, 13), (4, 18), (1, 10), (1, 11))
    assert (rel["4.1"][27], rel["4.2"][27]) == ((1, 1), (1, 2))
    # 4.0.1 accepts JoinGroup v0-1 again (the release table's own note); otherwise it is 4.0
    assert rel["4.0"][11] == (2, 9) and rel["4.0.1"][11] == (0, 9)
    assert {k: v for k, v in rel["4.0.1"].items() if k != 11} == {k: v for k, v in rel["4.0"].items() if k != 11}


def test_release_tables_only_grow_at_the_top_and_the_decoder_knows_every_version():
    """A later release never drops a key's newest version (4.0 raised lowest versions, KIP-896), and
    every version a release accepts is one the decoder has a schema for."""
    rel = protocol.releases()
    names = list(rel)
    for older, newer in zip(names, names[1:]):
        for key, (_, high) in rel[older].items():
            if key in rel[newer]:
                assert rel[newer][key][1] >= high or (newer in ("4.1", "4.3") and key in (76, 77, 78, 79)), (older, newer, key)
            else:
                assert newer == "4.0" and key in (4, 5, 6, 7), (older, newer, key)  # only 4.0 removed keys
    for release, table in rel.items():
        for key, (low, high) in table.items():
            api = protocol.api(key)
            assert api is not None and all(api.has_version(v) for v in range(low, high + 1)), (release, key)
    # what 3.0 lacks that 3.9 has: the APIs added in between (KRaft, KIP-848 groups, telemetry, ...)
    assert {68, 71, 75} <= set(rel["3.9"]) - set(rel["3.0"])


def _messages_json() -> dict:
    import json
    from importlib import resources

    return json.loads(resources.files(protocol).joinpath("messages.json").read_text())


def test_apis_tsv_is_what_the_generator_writes_from_messages_json():
    """apis.tsv (header rules, read at every start) is generated from messages.json (body layouts):
    byte for byte what protocol/generate.py writes, so that a version is stated once."""
    from spark_kafkawire.protocol import data_text
    from spark_kafkawire.protocol.generate import apis_tsv

    assert data_text("apis.tsv") == apis_tsv(_messages_json())


def test_apis_tsv_version_ranges_and_flexible_versions_agree_with_messages_json():
    """Read back as the package reads it, apis.tsv names each version messages.json has a layout
    for, and only those and the ones messages.json names as not transcribed yet (the 4.4 line's
    TxnOffsetCommit v6 and the StreamsGroup* v1 responses: their bodies come out with status
    undecoded, never a guess)."""
    doc = _messages_json()
    messages = doc["messages"]
    untranscribed = {(int(key), kind, v) for key, kinds in doc["untranscribed"].items()
                     for kind, versions in kinds.items() for v in versions}
    assert untranscribed == {(28, "request", 6), (28, "response", 6), (88, "response", 1), (89, "response", 1)}
    assert set(map(int, messages)) == set(protocol.API_NAMES)
    for key in protocol.API_NAMES:
        api = protocol.api(key)
        assert doc["names"][str(key)] == api.name
        for kind in ("request", "response"):
            have = {int(v): flexible for v, (_, flexible) in messages[str(key)][kind].items()}
            named = {v for v in range(api.min_version, api.max_version + 1) if (key, kind, v) not in untranscribed}
            assert set(have) == named, (key, kind)
            assert all(bool(f) == api.is_flexible(v) for v, f in have.items()), (key, kind)


def test_header_versions_remembered_per_request_are_the_protocols():
    """The decoder remembers, per (api key, version), a request's header version (kafka/headers.py)
    and how its response is read (decode/pairing.py: header version, decoded whatever the filter);
    asked twice, each equals the protocol's own answer, for known, unknown and negative numbers,
    and what is remembered stays bounded."""
    from spark_kafkawire.decode.pairing import RESPONSE_READS_KEPT, _RESPONSE_READS, response_read
    from spark_kafkawire.decode.predicate import always_decode
    from spark_kafkawire.kafka import headers

    for _ in range(2):
        for key in range(-2, 100):
            for version in (-1, 0, 1, 2, 3, 4, 9, 12, 13, 17, 40, 32767):
                assert headers.request_header_version(key, version) == protocol.request_header_version(key, version)
                hv = protocol.response_header_version(key, version)
                assert response_read(key, version) == (hv, hv is not None and always_decode(key, version, False))
    assert len(headers._HEADER_VERSIONS) <= headers.HEADER_VERSIONS_KEPT
    assert len(_RESPONSE_READS) <= RESPONSE_READS_KEPT
    for version in range(3 * headers.HEADER_VERSIONS_KEPT):
        headers.request_header_version(0, version)
        response_read(0, version)
    assert len(headers._HEADER_VERSIONS) <= headers.HEADER_VERSIONS_KEPT
    assert len(_RESPONSE_READS) <= RESPONSE_READS_KEPT


def test_message_codes_are_one_to_one():
    """The decoder finds a body's layout by one integer made of api key, version and direction:
    every int16 key and version the wire can hold gives its own, and the layouts found so are the
    layouts of messages.json."""
    from spark_kafkawire.kafka.headers import message_code
    from spark_kafkawire.kafka.layouts import schemas

    s = schemas()
    assert s.layouts == {message_code(*k): v for k, v in s.messages.items()}
    edge = (-32768, -2, -1, 0, 1, 2, 255, 256, 32766, 32767)
    codes = {message_code(k, v, r) for k in edge for v in edge for r in (False, True)}
    assert len(codes) == len(edge) ** 2 * 2


def _named_releases(text: str, known: list[str]) -> set[str]:
    """The releases a text names: each one written out, and every release of the table within a
    range the text writes ("3.0 to 3.9", "3.0 ... 3.9", "3.0-3.9")."""


    named = set(re.findall(r"(?<![\d.])\d\.\d+(?:\.\d+)?(?![\d.]*\d)", text))
    for lo, hi in re.findall(r"(\d\.\d+)\s*(?:to|\.\.\.|-)\s*(\d\.\d+)", text):
        if lo in known and hi in known:
            named.update(known[known.index(lo): known.index(hi) + 1])
    return named


def test_the_docs_name_the_release_tables_releases():
    """Where docs/audits.md says which releases --target-release takes, they name the
    release table's (protocol/releases.tsv) and no other: a release added to the table fails this
    until the docs say it (the job's --help lists them from the table itself)."""
    known = list(protocol.releases())
    root = Path(__file__).resolve().parents[1]
    audits = root.joinpath("docs", "audits.md").read_text()
    part = audits[audits.index("`--target-release` takes any"):audits.index("`--help` lists them")]
    assert _named_releases(part, known) == set(known), part
    row = next(line for line in root.joinpath("docs", "audits.md").read_text().splitlines()
               if line.startswith("| `target_release`"))
    row = row[row.index("(") : row.index("the releases whose")]
    assert _named_releases(row, known) == set(known), row
