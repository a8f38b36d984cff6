"""Write spark_kafkawire/protocol/clients.tsv: how client libraries are named (kafka/clients.py).

    python tests/tools/clientsig.py          (check: --check, as tests/test_client_library.py does)

The software names and default client ids are the libraries' own (their sources, cited per line);
the request pairs are read from tests/insights/clients.pcap, where real clients of each library
(tests/insights/make_insight_captures.py, scenario clients) produced and consumed against a
current broker: for each library release, every (api key, version) pair its connections sent. The
traits (protocol/client_traits.tsv) are read from tests/fingerprints/fingerprints.pcap (scenario
fingerprints: each library at its defaults and with common settings changed, on Tansu): per library,
every intrinsic trait its connections showed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "spark_kafkawire" / "protocol" / "clients.tsv"
CAPTURE = ROOT / "tests" / "insights" / "clients.pcap"
FINGERPRINTS = ROOT / "tests" / "fingerprints" / "fingerprints.pcap"

#: ClientSoftwareName prefixes (ApiVersions v3+, KIP-511) and the library they are
SOFTWARE = [
    ("confluent-kafka-", "librdkafka", "confluent-kafka-python/-go/-dotnet/-javascript: librdkafka's wrappers"),
    ("librdkafka", "librdkafka", "librdkafka's client.software.name default"),
    ("node-rdkafka", "librdkafka", "node-rdkafka, a librdkafka wrapper"),
    ("apache-kafka-java", "Java", "the Java client (AppInfoParser)"),
    ("kafka-python", "kafka-python", "kafka-python's client_software_name"),
    ("kgo", "franz-go", "franz-go's default SoftwareNameAndVersion"),
    ("franz-go", "franz-go", "franz-go"),
    ("sarama", "Sarama", "Sarama"),
    ("segmentio-kafka-go", "kafka-go", "segmentio/kafka-go"),
]
#: default client ids (regular expressions, whole id) where the application sets none
CLIENT_IDS = [
    ("rdkafka", "librdkafka", "librdkafka's client.id default"),
    (r"kafka-python-[0-9][0-9a-z.+-]*", "kafka-python", "kafka-python: 'kafka-python-' + __version__"),
    (r"aiokafka-[0-9][0-9a-z.+-]*", "aiokafka", "aiokafka: 'aiokafka-' + __version__"),
    ("kafkajs", "kafkajs", "kafkajs' clientId default"),
    (r"(producer|consumer)-[0-9]+", "Java", "the Java client: producer-N, consumer-N"),
    (r"consumer-.+-[0-9]+", "Java", "the Java consumer in a group: consumer-<group>-N"),
    ("kgo", "franz-go", "franz-go's ClientID default"),
    ("sarama", "Sarama", "Sarama's ClientID default"),
]


def request_rows() -> list[tuple[str, str, str]]:
    """(library, pairs, source) per library release of clients.pcap."""
    from spark_kafkawire import read_capture

    manifest = json.loads((ROOT / "tests" / "insights" / "manifest.json").read_text())["clients.pcap"]
    pairs: dict[str, set[tuple[int, int]]] = {}
    software: dict[str, str] = {}
    for r in read_capture(str(CAPTURE)).to_pylist():
        cid = r["client_id"] or ""
        prefix = cid.rsplit("-", 1)[0]
        if prefix not in manifest["libraries"] or r["api_key"] is None:
            continue
        pairs.setdefault(prefix, set()).add((r["api_key"], r["api_version"]))
        if r["client_software_name"]:
            software[prefix] = f"{r['client_software_name']} {r['client_software_version']}"
    rows = []
    for prefix, lib in sorted(manifest["libraries"].items()):
        release = software.get(prefix) or manifest["versions"][prefix]
        rows.append((lib, ",".join(f"{k}:{v}" for k, v in sorted(pairs[prefix])),
                     f"clients.pcap: {release}"))
    return rows


def connection_traits(path: Path) -> dict[tuple, tuple[str | None, set[tuple[str, bool]]]]:
    """Connection (client ip and port, broker ip and port, connection_time) -> (its first client id,
    the traits its requests showed), read from the exchanges' request bodies as the decoder reads
    them: the first TRAIT_REQUESTS requests of each api key."""
    from spark_kafkawire import read_capture
    from spark_kafkawire.kafka import clients

    out: dict[tuple, tuple[str | None, set[tuple[str, bool]]]] = {}
    counts: dict[tuple, int] = {}
    rows = sorted(read_capture(str(path)).to_pylist(), key=lambda r: (r["request_time"] is None, r["request_time"]))
    for r in rows:
        conn = (r["client_ip"], r["client_port"], r["broker_ip"], r["broker_port"], r["connection_time"])
        cid, shown = out.setdefault(conn, (r["client_id"], set()))
        if cid is None and r["client_id"]:
            out[conn] = (r["client_id"], shown)
        if r["api_key"] not in clients.TRAIT_KEYS or r["request"] is None:
            continue
        n = counts[conn, r["api_key"]] = counts.get((conn, r["api_key"]), 0) + 1
        if n <= clients.TRAIT_REQUESTS:
            shown.update(clients.traits(r["api_key"], json.loads(r["request"])))
    return out


def trait_rows() -> list[tuple[str, str, str, str]]:
    """(kind, traits, library, source): per library, the intrinsic traits its connections showed in
    fingerprints.pcap (at its defaults and tuned)."""
    entry = json.loads((FINGERPRINTS.parent / "manifest.json").read_text())["fingerprints.pcap"]
    intrinsic: dict[str, set[str]] = {}
    runners: dict[str, set[str]] = {}
    for cid, shown in connection_traits(FINGERPRINTS).values():
        who = entry["clients"].get(cid or "")
        if who is None:
            continue
        lib = who["library"]
        runners.setdefault(lib, set()).add(entry["versions"][who["runner"]])
        intrinsic.setdefault(lib, set()).update(t for t, i in shown if i)
    out = []
    for lib in sorted(intrinsic):
        source = f"fingerprints.pcap: {', '.join(sorted(runners[lib]))}"
        out.append(("traits", " ".join(sorted(intrinsic[lib])), lib, source))
    return out


def text() -> str:
    out = ["# How a connection's client library is named (spark_kafkawire/kafka/clients.py). Made by",
           "# tests/tools/clientsig.py: do not edit. kind, match, library, source:",
           "# software: a ClientSoftwareName prefix; client_id: a default client id (regular expression);",
           "# requests: every (api key:version) a release of the library sent a current broker;",
           "# traits: every intrinsic trait (client_traits.tsv) the library's connections showed, at any setting"]
    out += [f"software\t{m}\t{lib}\t{why}" for m, lib, why in SOFTWARE]
    out += [f"client_id\t{m}\t{lib}\t{why}" for m, lib, why in CLIENT_IDS]
    out += [f"requests\t{pairs}\t{lib}\t{why}" for lib, pairs, why in request_rows()]
    out += [f"{kind}\t{traits}\t{lib}\t{why}" for kind, traits, lib, why in trait_rows()]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    want = text()
    if "--check" in sys.argv:
        sys.exit(0 if OUT.read_text() == want else "clients.tsv is not what clientsig.py makes of clients.pcap")
    OUT.write_text(want)
    print(f"wrote {OUT}")
