"""Generate messages.json, apis.tsv and errors.tsv from Kafka's message schemas, as kio carries them.

    make schemas

kio (PyPI) is generated from Kafka's clients/src/main/resources/common/message/*.json. kio 0.6.x
follows Kafka 4.3; kio 0.5.0 followed Kafka 3.9.0 and still has what 4.0 removed (Produce v0-2,
Fetch v0-3, ..., keys 4-7). This script reads the dataclasses of one kio installation and prints
their wire layout as plain data (``dump``), and merges two dumps, the newer winning for the
(api key, version) pairs both have (``merge``). Nothing here runs when captures are decoded.

releases.tsv's rows for a release come from a clone of apache/kafka (``releases GIT_DIR
3.0=3.0.0 ...``): each *Request.json's validVersions at the release's tag. The rows of 4.0.1, 4.1
and 4.2, whose schemas are not at hand, come from shipped.tsv and the 4.0 and 4.3 rows
(``later-releases``, see :func:`later_releases`).

apis.tsv (api key, name, lowest and highest version, first flexible version) is written from
messages.json alone (``apis_tsv``): its names, each api's request versions and flexible flags, and
the versions named without a layout yet (``untranscribed``); a test holds the two the same.

Layout of messages.json:
  names:    {api_key: Kafka's name of the api}
  untranscribed: {api_key: {"request"|"response": [versions Kafka has whose layout is not here yet]}}
  structs:  list of structs; a struct is a list of fields [name, type, flags, tag, sub]
            name   Kafka's field name (PascalCase)
            type   int8 int16 int32 int64 uint16 float64 bool string bytes uuid records struct
            flags  1 nullable, 2 array, 4 error code
            tag    tagged-field number, or -1 for a regular field
            sub    index of the nested struct for type 'struct', else -1
  messages: {api_key: {"request"|"response": {version: [struct index, flexible 0/1]}}}
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import fields, is_dataclass
from pkgutil import resolve_name

TYPE_MAP = {"datetime_i64": "int64", "timedelta_i32": "int32", "timedelta_i64": "int64", "error_code": "int16"}
NULLABLE, ARRAY, ERROR_CODE = 1, 2, 4
MS_TYPES = ("datetime_i64", "timedelta_i32", "timedelta_i64")


def pascal(snake: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))


def intern(out: list, structs: list, index: dict[str, int]) -> int:
    """Index of a struct in ``structs``, appending it the first time it is seen."""
    key = json.dumps(out)
    if key not in index:
        index[key] = len(structs)
        structs.append(out)
    return index[key]


def dump() -> dict:
    from kio.schema.index import api_key_map, schema_name_map
    from kio.serial._introspect import classify_field, get_field_tag, is_optional
    from kio.static.constants import EntityType

    structs: list = []
    index: dict[str, int] = {}
    memo: dict[type, int] = {}

    def struct_of(cls) -> int:
        if cls in memo:
            return memo[cls]
        out = []
        for f in fields(cls):
            c = classify_field(f)
            flags = (NULLABLE if is_optional(f) else 0) | (ARRAY if c.is_array else 0)
            tag = get_field_tag(f)
            tag = -1 if tag is None else int(tag)
            if is_dataclass(c.type_):
                out.append([pascal(f.name), "struct", flags, tag, struct_of(c.type_)])
            else:
                kt = f.metadata["kafka_type"]
                if kt == "error_code":
                    flags |= ERROR_CODE
                # kio turns millisecond fields into datetimes/timedeltas and drops Kafka's "Ms"
                # suffix (ThrottleTimeMs -> throttle_time): put Kafka's name back
                name = pascal(f.name) + ("Ms" if kt in MS_TYPES else "")
                out.append([name, TYPE_MAP.get(kt, kt), flags, tag, -1])
        memo[cls] = intern(out, structs, index)
        return memo[cls]

    messages: dict = {}
    for api_key, name in api_key_map.items():
        for version, ents in schema_name_map[name].items():
            for et, kind in ((EntityType.request, "request"), (EntityType.response, "response")):
                cls = resolve_name(ents[et])
                sid = struct_of(cls)
                messages.setdefault(str(api_key), {}).setdefault(kind, {})[str(version)] = [sid, int(cls.__flexible__)]
    errors = {}
    try:
        from kio.schema.errors import ErrorCode
    except ImportError:
        ErrorCode = None
    if ErrorCode is not None:
        errors = {int(e.value): e.name.upper() for e in ErrorCode}
    import kio

    names = {str(api_key): pascal(name) for api_key, name in api_key_map.items()}
    return {"kio": getattr(kio, "__version__", "?"), "names": names, "structs": structs, "messages": messages,
            "errors": errors}


def merge(newer: dict, older: dict, *extra: dict) -> dict:
    """The newer dump, plus the (key, version) pairs only the older one has, plus ``extra`` dumps
    (transcriptions of versions newer than kio) whose entries may read ``{"as": version}``: the
    same layout as that version of the same api key and direction; an extra's ``names`` name new
    apis, its ``untranscribed`` the versions it knows of but has no layout for."""
    structs: list = []
    index: dict[str, int] = {}

    def remap(dump: dict, sid: int, memo: dict) -> int:
        if sid in memo:
            return memo[sid]
        out = []
        for name, typ, flags, tag, sub in dump["structs"][sid]:
            out.append([name, typ, flags, tag, remap(dump, sub, memo) if sub >= 0 else -1])
        memo[sid] = intern(out, structs, index)
        return memo[sid]

    messages: dict = {}
    for dump in (newer, older, *extra):
        memo: dict = {}
        for key, kinds in dump["messages"].items():
            for kind, versions in kinds.items():
                for ver, entry in versions.items():
                    slot = messages.setdefault(key, {}).setdefault(kind, {})
                    if ver in slot:
                        continue
                    if isinstance(entry, dict):  # {"as": version}
                        slot[ver] = list(slot[entry["as"]])
                    else:
                        slot[ver] = [remap(dump, entry[0], memo), entry[1]]
    for kinds in messages.values():
        for kind in kinds:
            kinds[kind] = dict(sorted(kinds[kind].items(), key=lambda kv: int(kv[0])))
    messages = dict(sorted(messages.items(), key=lambda kv: int(kv[0])))
    errors = {**older.get("errors", {}), **newer.get("errors", {})}
    sources = [f"kio {newer['kio']}", f"kio {older['kio']}"] + [e["kio"] for e in extra]
    names: dict = {}
    untranscribed: dict = {}
    for dump in (older, newer, *extra):
        names.update(dump.get("names", {}))
        for key, kinds in dump.get("untranscribed", {}).items():
            for kind, versions in kinds.items():
                have = untranscribed.setdefault(key, {}).setdefault(kind, [])
                have[:] = sorted(set(have) | {v for v in versions if str(v) not in messages.get(key, {}).get(kind, {})})
    names = dict(sorted(names.items(), key=lambda kv: int(kv[0])))
    return {"sources": sources, "names": names, "untranscribed": untranscribed, "structs": structs,
            "messages": messages, "errors": errors}


#: apis.tsv's first lines
APIS_HEAD = ("# Kafka API keys: every version any release has had (3.9.0 through 4.3, plus the 4.4 additions).\n"
             "# Written by protocol/generate.py from messages.json (make schemas): its names, its request versions\n"
             "# and flexible flags, and the versions it names without a layout. Do not edit by hand.\n"
             "# Source: Apache Kafka message schemas (validVersions, flexibleVersions). "
             "flexible_from = -1: never flexible.\n"
             "# api_key\tname\tmin_version\tmax_version\tflexible_from\n")


def apis_tsv(messages_json: dict) -> str:
    """apis.tsv's text from messages.json's content: per api key its name, lowest and highest
    request version (with the untranscribed ones) and first flexible version (-1: none)."""
    lines = [APIS_HEAD]
    for key, name in messages_json["names"].items():
        requests = messages_json["messages"][key]["request"]
        versions = {int(v) for v in requests} | set(messages_json["untranscribed"].get(key, {}).get("request", []))
        flexible = [int(v) for v, (_sid, flex) in requests.items() if flex]
        lines.append(f"{key}\t{name}\t{min(versions)}\t{max(versions)}\t{min(flexible, default=-1)}\n")
    return "".join(lines)


def write(merged: dict, folder: str) -> None:
    errors = merged.pop("errors")
    text = json.dumps(merged, separators=(",", ":"))
    text = re.sub(r'\],\[', "],\n[", text)  # one field a line: readable diffs
    with open(f"{folder}/messages.json", "w") as f:
        f.write(text + "\n")
    with open(f"{folder}/apis.tsv", "w") as f:
        f.write(apis_tsv(merged))
    with open(f"{folder}/errors.tsv", "w") as f:
        f.write("# Kafka error codes and names (org.apache.kafka.common.protocol.Errors), via kio\n")
        for code, name in sorted(errors.items(), key=lambda kv: int(kv[0])):
            f.write(f"{code}\t{name}\n")


def release_ranges(git_dir: str, rev: str) -> dict[int, tuple[int, int]]:
    """api key -> (lowest, highest) request version in Kafka's message schemas at ``rev`` of a
    clone of apache/kafka (validVersions of each *Request.json, as Kafka's ApiVersions takes them)."""
    import subprocess

    folder = "clients/src/main/resources/common/message/"
    names = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "--name-only", rev, folder],
                           check=True, capture_output=True, text=True).stdout.split()
    out: dict[int, tuple[int, int]] = {}
    for name in names:
        if not name.endswith("Request.json"):
            continue
        text = subprocess.run(["git", "--git-dir", git_dir, "show", f"{rev}:{name}"],
                              check=True, capture_output=True, text=True).stdout
        key = re.search(r'"apiKey"\s*:\s*(\d+)', text)
        valid = re.search(r'"validVersions"\s*:\s*"(\d+)(?:-(\d+))?"', text)
        if key and valid and re.search(r'"type"\s*:\s*"request"', text):
            low = int(valid.group(1))
            out[int(key.group(1))] = (low, int(valid.group(2) or low))
    return out


def later_releases(rows: dict[str, dict[int, tuple[int, int]]],
                   shipped: dict[int, dict[int, str]]) -> dict[str, dict[int, tuple[int, int]]]:
    """The ranges of 4.0.1, 4.1 and 4.2 from 4.0's and 4.3's and the release that first shipped each
    newer version (shipped.tsv: api key -> version -> release). 4.0.1 is 4.0 with JoinGroup v0-1
    accepted again (as 4.3 has it). From 4.1 each key's lowest version is 4.3's (4.1
    took back the share-group APIs' early-access v0, and kept JoinGroup's), its highest the newest
    version shipped by then; a key 4.0 lacks is there from the release that shipped its first version."""
    v40, v43 = rows["4.0"], rows["4.3"]
    out = {"4.0.1": {**v40, 11: (v43[11][0], v40[11][1])}}
    for rel in ("4.1", "4.2"):
        table = {}
        for key in sorted(set(v40) | set(shipped)):
            new = [v for v, r in shipped.get(key, {}).items() if _release(r) <= _release(rel)]
            high = max(new, default=v40[key][1] if key in v40 else -1)
            if high >= 0 and key in v43:
                table[key] = (v43[key][0], high)
        out[rel] = table
    return out


def _release(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.split("."))


def read_shipped(text: str) -> dict[int, dict[int, str]]:
    """shipped.tsv: api key -> version -> the release that first shipped it."""
    out: dict[int, dict[int, str]] = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            key, version, release, _evidence = line.split("\t")
            out.setdefault(int(key), {})[int(version)] = release
    return out


if __name__ == "__main__":
    if sys.argv[1] == "later-releases":  # later-releases: releases.tsv's rows of 4.0.1, 4.1 and 4.2
        from . import data_text, releases
        later = later_releases(releases(), read_shipped(data_text("shipped.tsv")))
        for release, table in later.items():
            for key, (low, high) in sorted(table.items()):
                print(f"{release}\t{key}\t{low}\t{high}")
        sys.exit(0)
    if sys.argv[1] == "releases":  # releases GIT_DIR RELEASE=REV ...: rows of releases.tsv
        for arg in sys.argv[3:]:
            release, _, rev = arg.partition("=")
            for key, (low, high) in sorted(release_ranges(sys.argv[2], rev).items()):
                print(f"{release}\t{key}\t{low}\t{high}")
    elif sys.argv[1] == "dump":
        json.dump(dump(), sys.stdout)
    elif sys.argv[1] == "merge":
        dumps = []
        for path in sys.argv[2:-1]:
            with open(path) as f:
                dumps.append(json.load(f))
        write(merge(*dumps), sys.argv[-1])
