"""The reader's options, each declared once in OPTIONS (name, field, type, default, check,
meaning, where it is taken: a batch read, the streaming source, the audit job's --option). From
that table come the Options and StreamOptions classes (the block between the markers below, written
by ``make options``; a test checks it), their checks, and the two options tables of docs/
(options_table in docs/options.md, stream_options_table in docs/streaming.md)."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from .wire.frames import DEFAULT_MAX_FRAME
from .wire.inflate import DEFAULT_MAX_RATIO
from .decode.modes import MODES
from .kafka.codecs import DEFAULT_MAX_DECOMPRESSED
from .kafka.records import DEFAULT_MAX_RECORDS
from .rows.table import ROW_SHAPES
from .wire.tcp import DEFAULT_MAX_CONNECTIONS
from .tls.budget import TRIAL_BUDGET, TRIAL_TASK_BUDGET

MAX_SHARES = 1024  # at most this many shares of one file (minPartitions' bound)
TIME_ORDER_MARGIN_NS = 60 * 10**9  # packets may be this much out of time order (merged captures)
DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024  # Spark's spark.sql.files.maxPartitionBytes default
#: shares of one file are not free (each reads all its packets): past 4 the time hardly falls
DEFAULT_MIN_PARTITIONS = min(os.cpu_count() or 1, 4)
#: file names a directory listing picks up (tcpdump -C/-W rotation appends digits to the name)
DEFAULT_GLOB = ("*.pcap,*.pcap[0-9]*,*.pcapng,*.pcapng[0-9]*,*.cap,*.pcap.gz,*.pcapng.gz,*.cap.gz,*.pcap.xz,"
                "*.pcapng.xz,*.cap.xz,*.pcap.zst,*.pcapng.zst,*.cap.zst,*.pcap.bz2,*.pcapng.bz2,*.cap.bz2")


def _bad(name: str, value: object, allowed: str) -> ValueError:
    return ValueError(f"option {name}: {value!r} is not allowed; {allowed}")


def _choice(values: tuple[str, ...], upper: bool = False):
    def rule(name: str, v: object) -> str:
        text = str(v).strip()
        text = text.upper() if upper else text.lower()
        if text not in values:
            raise _bad(name, v, f"one of {', '.join(values)}")
        return text
    return rule


def _bool(name: str, v: object) -> bool:
    if isinstance(v, bool):
        return v
    text = str(v).strip().lower()
    if text not in ("true", "false"):
        raise _bad(name, v, "true or false")
    return text == "true"


def _whole(low: int, high: int, unit: str = ""):
    def rule(name: str, v: object) -> int:
        try:
            n = int(str(v).strip()) if not isinstance(v, int) or isinstance(v, bool) else v
        except ValueError:
            n = None
        if n is None or isinstance(v, bool) or not low <= n <= high:
            raise _bad(name, v, f"a whole number{unit} from {low:,} to {high:,}")
        return n
    return rule


def _ports(name: str, v: object) -> frozenset[int]:
    items = list(v) if isinstance(v, (set, frozenset, list, tuple)) else str(v).replace(" ", "").split(",")
    try:
        ports = frozenset(int(p) for p in items if str(p) != "")
    except ValueError:
        ports = frozenset({0})
    if not ports or not all(1 <= p <= 65535 for p in ports):
        raise _bad(name, v, "comma-separated TCP ports from 1 to 65535")
    return ports


def _patterns(name: str, v: object) -> str:
    text = str(v).strip()
    if not [p for p in text.split(",") if p.strip()]:
        raise _bad(name, v, "comma-separated file name patterns such as *.pcap,*.pcapng")
    return text


def _files(name: str, v: object) -> str:
    text = str(v).strip()
    if not [p for p in text.split(",") if p.strip()]:
        raise _bad(name, v, "a file, or a comma-separated list of files (local paths or URIs)")
    return text


def _url(name: str, v: object) -> str:
    text = str(v).strip()
    if not text.startswith(("http://", "https://")):
        raise _bad(name, v, "an http:// or https:// URL")
    return text


def _seconds(name: str, v: object) -> float:
    try:
        n = float(str(v).strip())
    except ValueError:
        n = -1.0
    if not n >= 0 or isinstance(v, bool):
        raise _bad(name, v, "a number of seconds, 0 or more")
    return n


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _duration(name: str, v: object) -> float:
    """Seconds in a duration: a number of seconds, or a number with s, m, h, d or w."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(v).lower())
    if not m:
        raise _bad(name, v, "a duration such as 3600, 90m, 12h or 7d")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def _text(name: str, v: object) -> str:
    text = str(v).strip()
    if not text:
        raise _bad(name, v, "a directory, local or a URI")
    return text


BATCH, STREAM = "batch", "stream"


class Option(NamedTuple):
    """One option, declared once: what the reader checks, the classes hold and docs/options.md shows."""

    name: str  # as documented (Spark's option names are case-insensitive; '_' is ignored too)
    field: str  # the attribute of Options (scope batch) or StreamOptions (scope stream)
    kind: str  # the attribute's type, as the generated class declares it
    default: Any  # the value when the option is not given
    check: Callable[[str, object], Any]  # (name, given value) -> the value, or ValueError naming both
    shown: str  # the default as docs/options.md shows it
    meaning: str
    #: BATCH: every read (load, readStream too); STREAM: spark.readStream only (a batch read refuses it)
    scope: str = BATCH
    #: why the audit job's ``--option`` refuses it (empty: the job takes it)
    not_in_job: str = ""


#: every option of the reader, in the order docs/options.md shows them
OPTIONS: tuple[Option, ...] = (
    Option("rows", "rows", "str", "exchanges", _choice(ROW_SHAPES), "`exchanges`",
           "row shape: `exchanges` (one per request/response pair), `messages` (one per frame), `partitions` "
           "(one per exchange, topic and partition), `records` (one per record) or "
           "`connections` (one per TCP connection)", not_in_job="the job chooses rows itself"),
    Option("includeRecords", "include_records", "bool", False, _bool, "false",
           "`true` shows record keys, values and headers in `rows=records` (payload is opt-in; without it those "
           "columns are null, and the rows carry offsets, formats, schema ids and trace context)",
           not_in_job="the job never reads record payload (keys, values, headers)"),
    Option("maxDecompressedBytes", "max_decompressed_bytes", "int", DEFAULT_MAX_DECOMPRESSED,
           _whole(1 << 16, 1 << 40, " of bytes"), "67108864",
           "cap on what the record batches of one request or response decompress to, all together, 65536 to "
           "2^40; past it a batch's row says `over_cap` (and a wrapper's summary `DecompressError`) instead of "
           "allocating more"),
    Option("maxInflateRatio", "max_inflate_ratio", "int", DEFAULT_MAX_RATIO, _whole(10, 1 << 30), "1000",
           "a compressed capture file (gzip, xz, bzip2, zstd) may inflate to this many times its compressed bytes "
           "read so far, once past 64 MiB, 10 to 2^30; past it the file stops with a `capture_damaged` row saying "
           "so (a compression bomb is not inflated for minutes); a file cut short gives what precedes the cut"),
    Option("ports", "ports", "frozenset[int] | None", None, _ports, "all",
           "comma-separated TCP ports, each 1 to 65535 (an empty list is an error); only connections with one of"
           " them are decoded. Without it, every TCP connection is examined and Kafka is recognised by its "
           "bytes, on any port"),
    # a frame must at least hold the largest request header (a 32767-byte client_id and more)
    Option("maxFrameBytes", "max_frame_bytes", "int", DEFAULT_MAX_FRAME, _whole(1 << 16, (1 << 31) - 1, " of bytes"),
           "104857600",
           "largest frame accepted (Kafka's `socket.request.max.bytes`), 65536 (room for the largest request "
           "header) to 2147483647; a larger size field means the stream is not where we thought"),
    Option("pathGlobFilter", "path_glob_filter", "str", DEFAULT_GLOB, _patterns,
           "`*.pcap`, `*.pcapng`, `*.cap`, rotated `*.pcap0`…, and their `.gz`, `.xz`, `.zst`, `.bz2`",
           "comma-separated file name patterns a directory listing picks up (at least one)"),
    Option("batchSize", "batch_size", "int", 8192, _whole(1, 10_000_000), "8192",
           "rows per Arrow record batch, 1 to 10000000; held to even inside one frame (the records of one "
           "Produce request leave in batches of this size, made as they leave)"),
    Option("mode", "mode", "str", "PERMISSIVE", _choice(MODES, upper=True), "`PERMISSIVE`",
           "as Spark's CSV and JSON sources name it. `PERMISSIVE`: damage becomes rows with a status and a "
           "`detail`, never an exception. `DROPMALFORMED`: rows with status `truncated`, `malformed`, "
           "`undecoded` or `capture_damaged` (and record rows `corrupt`, `crc_mismatch`, `over_cap`) are "
           "dropped. `FAILFAST`: the first of them fails the read with an error naming the file, the packet "
           "number and the byte offset. The modes act on exactly the damaged rows of the shape read: in "
           "`connections`, damage inside a connection is in its counts (partial, skipped, gap bytes) and only "
           "`capture_damaged` is a row; in `partitions` and `records`, a damaged exchange of an api with "
           "partitions (records) is one row with its status where none could be read, and damage of other apis "
           "has no row there"),
    Option("endpointUrl", "endpoint_url", "str | None", None, _url, "`AWS_ENDPOINT_URL`",
           "S3 endpoint for `s3://` paths (an S3-compatible server)"),
    Option("maxConnections", "max_connections", "int", DEFAULT_MAX_CONNECTIONS, _whole(1000, 10_000_000), "100000",
           "open TCP connections tracked at once, 1000 to 10000000; past it the longest idle one is retired as "
           "if it had closed (its row says `end_captured` = `evicted`; later packets of it start a new "
           "connection)"),
    Option("maxRecordsPerBatch", "max_records_per_batch", "int", DEFAULT_MAX_RECORDS, _whole(1, 1 << 31), "1000000",
           "records read from one record batch in `rows=records`, 1 to 2^31; the rest of the batch becomes one "
           "row with status `over_cap` saying how many it held"),
    Option("maxPartitionBytes", "max_partition_bytes", "int", DEFAULT_MAX_PARTITION_BYTES,
           _whole(1, 1 << 62, " of bytes"), "134217728",
           "Spark: small files are packed into tasks of at most this many bytes (each file counted 4 MiB more, "
           "as Spark's file sources count it); a file larger than this may be read in shares by several tasks "
           "(see above), 1 to 2^62"),
    Option("minPartitions", "min_partitions", "int", DEFAULT_MIN_PARTITIONS, _whole(1, MAX_SHARES),
           "CPU count, at most 4",
           "Spark: large files are shared out while the load has fewer partitions than this, and small files "
           "are packed into at least this many tasks where there are that many files, 1 to 1024"),
    Option("tlsKeyLog", "tls_key_log", "str | None", None, _files, "none",
           "TLS key log (NSS key log format: SSLKEYLOGFILE, Python keylog_filename, Java agents), or a "
           "comma-separated list of them, local or URIs: TLS connections whose secrets it holds are decrypted "
           "(TLS 1.2 and 1.3: AES-GCM, ChaCha20-Poly1305, AES-CBC with HMAC); read once per process while "
           "unchanged, never shown. A pcapng's Decryption Secrets Blocks (`editcap --inject-secrets`) are used "
           "too, without this option or beside it"),
    Option("tlsTrialBudget", "tls_trial_budget", "int", TRIAL_BUDGET, _whole(0, 1 << 40), "65536",
           "TLS 1.3 connections whose handshake is not in the capture (a rotated file): trial decryptions of "
           "their first record with the key log's unclaimed sessions, per connection, 0 to 2^40; past it the "
           "connection's detail says the budget ran out"),
    Option("tlsTrialTaskBudget", "tls_trial_task_budget", "int", TRIAL_TASK_BUDGET, _whole(0, 1 << 50), "4194304",
           "the same for all connections of one file read (one Spark task), 0 to 2^50"),
    Option("stitch", "stitch", "bool", True, _bool, "true",
           "read the files of a rotation series (`tcpdump -C/-G/-W`, `editcap -c/-i`, a ring buffer: names that "
           "differ only in digits, times that follow one another) as one capture: a connection that goes on "
           "into the next file (its sequence numbers continuing) stays one connection, an exchange cut by the "
           "rotation is paired, and its facts reach the rows of every file; rows keep their own `capture_file`. "
           "`false` reads every file by itself"),
    # the streaming source's own (its --incremental flags are the audit job's)
    Option("completeAfterSeconds", "complete_after_seconds", "float", 60.0, _seconds, "`60`",
           "seconds a rotation series' newest file must stay unchanged to count as complete (the file tcpdump is "
           "still writing waits); a file that is not the newest of its series is complete at once; `0` for files "
           "copied in whole", STREAM),
    Option("maxFilesPerTrigger", "max_files_per_trigger", "int | None", None, _whole(1, 1 << 31), "all",
           "at most this many files per micro-batch (Spark 4.2+ admission control; `trigger(availableNow=True)` "
           "reads in batches of it)", STREAM),
    Option("maxFileAge", "max_file_age", "float", 7 * 86400.0, _duration, "`7d`",
           "what the source remembers: files more than this older than the newest file read are forgotten, and one "
           "that old appearing later is taken as read (`3600`, `90m`, `12h`, `2w` also work)", STREAM),
    Option("stateLocation", "state_location", "str | None", None, _text, "none",
           "a directory (local or a URI) beside the checkpoint where a rotation series' open connections wait "
           "between triggers for the series' next file, so that a series growing between triggers is stitched "
           "across them (no key or secret is written there, and no code: declared records, see docs/state.md; "
           "`kafkawire state DIR` says what it holds); without it each trigger's files are read apart", STREAM),
)

#: option key (lower case, no '_') -> its declaration
_BY_KEY: dict[str, Option] = {o.name.lower(): o for o in OPTIONS}
#: the streaming source's own option keys (a batch read leaves them to readStream)
STREAM_KEYS = frozenset(k for k, o in _BY_KEY.items() if o.scope == STREAM)


def _key(name: object) -> str:
    return str(name).lower().replace("_", "")


def default_of(field: str) -> Any:
    """The declared default of an option, by its field (what the generated classes start from)."""
    return next(o.default for o in OPTIONS if o.field == field)


def checked(options: Mapping[str, object] | None, scope: str) -> dict[str, Any]:
    """The options of one scope, checked, by field, defaults filled in. A batch read refuses a name
    it does not know (a stream option among them); the streaming source's own are picked out of
    everything it is given."""
    given = {_key(k): v for k, v in (options or {}).items()}
    if scope == BATCH:
        unknown = sorted(set(given) - {k for k, o in _BY_KEY.items() if o.scope == BATCH} - {"path", "paths"})
        if unknown:
            raise ValueError(f"unknown kafkawire option(s): {', '.join(unknown)} "
                             f"(options: {', '.join(o.name for o in OPTIONS if o.scope == BATCH)})")
    out = {}
    for key, o in _BY_KEY.items():
        if o.scope == scope:
            raw = given.get(key)
            out[o.field] = o.default if raw is None else o.check(o.name, raw)
    return out


# --- generated from OPTIONS by `make options`: do not edit (tests/test_options.py) ---
@dataclass(frozen=True)
class Options:
    """Reader options: those every read takes (options_table, docs/options.md)."""

    rows: str = default_of('rows')
    include_records: bool = default_of('include_records')
    max_decompressed_bytes: int = default_of('max_decompressed_bytes')
    max_inflate_ratio: int = default_of('max_inflate_ratio')
    ports: frozenset[int] | None = default_of('ports')
    max_frame_bytes: int = default_of('max_frame_bytes')
    path_glob_filter: str = default_of('path_glob_filter')
    batch_size: int = default_of('batch_size')
    mode: str = default_of('mode')
    endpoint_url: str | None = default_of('endpoint_url')
    max_connections: int = default_of('max_connections')
    max_records_per_batch: int = default_of('max_records_per_batch')
    max_partition_bytes: int = default_of('max_partition_bytes')
    min_partitions: int = default_of('min_partitions')
    tls_key_log: str | None = default_of('tls_key_log')
    tls_trial_budget: int = default_of('tls_trial_budget')
    tls_trial_task_budget: int = default_of('tls_trial_task_budget')
    stitch: bool = default_of('stitch')

    @classmethod
    def parse(cls, options: Mapping[str, object] | None) -> Options:
        return cls(**checked(options, BATCH))


@dataclass(frozen=True)
class StreamOptions:
    """The streaming source's own options (spark.readStream; stream_options_table)."""

    complete_after_seconds: float = default_of('complete_after_seconds')
    max_files_per_trigger: int | None = default_of('max_files_per_trigger')
    max_file_age: float = default_of('max_file_age')
    state_location: str | None = default_of('state_location')

    @classmethod
    def parse(cls, options: Mapping[str, object] | None) -> StreamOptions:
        return cls(**checked(options, STREAM))
# --- end of generated ---


def _table(scope: str) -> str:
    out = ["| option | default | meaning |", "|---|---|---|"]
    out += [f"| `{o.name}` | {o.shown} | {o.meaning} |" for o in OPTIONS if o.scope == scope]
    return "\n".join(out)


def options_table() -> str:
    """The options every read takes, as a Markdown table: docs/options.md's, generated from OPTIONS."""
    return _table(BATCH)


def stream_options_table() -> str:
    """The streaming source's own options as a Markdown table: docs/streaming.md's, generated from OPTIONS."""
    return _table(STREAM)


_DOC: dict[str, str] = {
    BATCH: "Reader options: those every read takes (options_table, docs/options.md).",
    STREAM: "The streaming source's own options (spark.readStream; stream_options_table).",
}


def generated_source() -> str:
    """The classes between the markers: one frozen dataclass per scope, a field per option."""
    out = []
    for scope, cls in ((BATCH, "Options"), (STREAM, "StreamOptions")):
        out += ["@dataclass(frozen=True)", f"class {cls}:", f'    """{_DOC[scope]}"""', ""]
        out += [f"    {o.field}: {o.kind} = default_of({o.field!r})" for o in OPTIONS if o.scope == scope]
        out += ["", "    @classmethod",
                f"    def parse(cls, options: Mapping[str, object] | None) -> {cls}:",
                f"        return cls(**checked(options, {scope.upper()}))", "", ""]
    return "\n".join(out[:-2])


_BEGIN = "# --- generated from OPTIONS"
_END = "# --- end of generated ---"


def with_generated(text: str) -> str:
    """This module's text with its generated block written again from OPTIONS."""
    head, _, rest = text.partition(_BEGIN)
    _old, _, tail = rest.partition(_END)
    line = rest.split("\n", 1)[0]
    return f"{head}{_BEGIN}{line}\n{generated_source()}\n{_END}{tail}"


def job_options(pairs: Iterable[str], **named: object) -> dict[str, str]:
    """Reader options from a job's command line: named flags (None: not given) and repeated
    ``--option KEY=VALUE``, checked as every option is, so that a bad one fails before Spark
    starts. The row shape is the job's to choose."""
    out = {k: str(v) for k, v in named.items() if v is not None}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--option {pair!r}: want KEY=VALUE, e.g. --option minPartitions=8")
        if _key(key) in ("path", "paths"):
            raise ValueError(f"--option {pair!r}: the job chooses {key.lower()} itself")
        declared = _BY_KEY.get(_key(key))
        if declared is not None and declared.not_in_job:
            raise ValueError(f"--option {pair!r}: {declared.not_in_job}")
        out[key] = value.strip()
    Options.parse(out)
    return out


def paths_option(options: Mapping[str, object]) -> list[str]:
    """The paths Spark (or a caller) passed: option 'path', or 'paths' as a JSON list."""
    o = {str(k).lower(): v for k, v in options.items()}
    out: list[str] = []
    if "paths" in o:
        v = o["paths"]
        out.extend(json.loads(v) if isinstance(v, str) else list(v))  # type: ignore[call-overload]
    if "path" in o:
        v = o["path"]
        out.extend([v] if isinstance(v, str) else list(v))  # type: ignore[call-overload]
    return out


#: where each scope's table is shown (in docs/)
TABLE_DOCS: dict[str, str] = {BATCH: "options.md", STREAM: "streaming.md"}


def _with_table(text: str, scope: str) -> str:
    """A document's text with the scope's options table made again from OPTIONS (found by its first option)."""
    lines = text.split("\n")
    first = next(o.name for o in OPTIONS if o.scope == scope)
    at = next(i for i, ln in enumerate(lines) if ln.startswith(f"| `{first}` |"))
    start, end = at - 2, at
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    lines[start:end] = _table(scope).split("\n")
    return "\n".join(lines)


def main() -> None:
    """Write the generated classes into this module and the options tables into docs/."""
    from pathlib import Path

    here = Path(__file__)
    here.write_text(with_generated(here.read_text()))
    for scope, name in TABLE_DOCS.items():
        doc = here.parent.parent / "docs" / name
        if doc.exists():
            doc.write_text(_with_table(doc.read_text(), scope))
    print(f"wrote {here.name}'s options classes and the options tables of docs/", file=sys.stderr)


if __name__ == "__main__":
    main()
