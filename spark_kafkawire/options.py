"""The reader's options: their names, defaults, checks and documentation, in one table (_RULES
and _DOCS), from which README's options table is generated (options_table)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Iterable, Mapping

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


@dataclass(frozen=True)
class Options:
    """Reader options. Names are case-insensitive; values may be strings, as Spark passes them.
    Each option, its default, its allowed values and meaning: :func:`options_table` (README, Options).
    """

    rows: str = "exchanges"
    include_records: bool = False
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED
    max_inflate_ratio: int = DEFAULT_MAX_RATIO
    ports: frozenset[int] | None = None
    max_frame_bytes: int = DEFAULT_MAX_FRAME
    path_glob_filter: str = DEFAULT_GLOB
    batch_size: int = 8192
    mode: str = "PERMISSIVE"
    endpoint_url: str | None = None
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_records_per_batch: int = DEFAULT_MAX_RECORDS
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    min_partitions: int = DEFAULT_MIN_PARTITIONS
    tls_key_log: str | None = None
    tls_trial_budget: int = TRIAL_BUDGET
    tls_trial_task_budget: int = TRIAL_TASK_BUDGET
    stitch: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, object] | None) -> "Options":
        o = {str(k).lower().replace("_", ""): v for k, v in (options or {}).items()}
        unknown = sorted(set(o) - set(_RULES) - {"path", "paths"})
        if unknown:
            raise ValueError(f"unknown kafkawire option(s): {', '.join(unknown)} "
                             f"(options: {', '.join(r[0] for r in _RULES.values())})")
        values = {}
        for key, (name, field, default, rule) in _RULES.items():
            raw = o.get(key)
            values[field] = default if raw is None else rule(name, raw)
        return cls(**values)  # type: ignore[arg-type]  # each value checked above


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


#: one rule per option: option name -> (name as documented, Options field, default, check)
_RULES = {
    "rows": ("rows", "rows", "exchanges", _choice(ROW_SHAPES)),
    "includerecords": ("includeRecords", "include_records", False, _bool),
    "maxdecompressedbytes": ("maxDecompressedBytes", "max_decompressed_bytes", DEFAULT_MAX_DECOMPRESSED,
                             _whole(1 << 16, 1 << 40, " of bytes")),
    "maxinflateratio": ("maxInflateRatio", "max_inflate_ratio", DEFAULT_MAX_RATIO, _whole(10, 1 << 30)),
    "ports": ("ports", "ports", None, _ports),
    # a frame must at least hold the largest request header (a 32767-byte client_id and more)
    "maxframebytes": ("maxFrameBytes", "max_frame_bytes", DEFAULT_MAX_FRAME,
                      _whole(1 << 16, (1 << 31) - 1, " of bytes")),
    "pathglobfilter": ("pathGlobFilter", "path_glob_filter", DEFAULT_GLOB, _patterns),
    "batchsize": ("batchSize", "batch_size", 8192, _whole(1, 10_000_000)),
    "mode": ("mode", "mode", "PERMISSIVE", _choice(MODES, upper=True)),
    "endpointurl": ("endpointUrl", "endpoint_url", None, _url),
    "maxconnections": ("maxConnections", "max_connections", DEFAULT_MAX_CONNECTIONS, _whole(1000, 10_000_000)),
    "maxrecordsperbatch": ("maxRecordsPerBatch", "max_records_per_batch", DEFAULT_MAX_RECORDS,
                           _whole(1, 1 << 31)),
    "maxpartitionbytes": ("maxPartitionBytes", "max_partition_bytes", DEFAULT_MAX_PARTITION_BYTES,
                          _whole(1, 1 << 62, " of bytes")),
    "minpartitions": ("minPartitions", "min_partitions", DEFAULT_MIN_PARTITIONS, _whole(1, MAX_SHARES)),
    "tlskeylog": ("tlsKeyLog", "tls_key_log", None, _files),
    "tlstrialbudget": ("tlsTrialBudget", "tls_trial_budget", TRIAL_BUDGET, _whole(0, 1 << 40)),
    "tlstrialtaskbudget": ("tlsTrialTaskBudget", "tls_trial_task_budget", TRIAL_TASK_BUDGET, _whole(0, 1 << 50)),
    "stitch": ("stitch", "stitch", True, _bool),
}

#: how each option is documented (README's options table is options_table()'s output, checked by a test)
_DOCS = {
    'rows': (
        '`exchanges`',
        'row shape: `exchanges` (one per request/response pair), `messages` (one per frame), `partitions` '
        '(one per exchange, topic and partition), `records` (one per record) or '
        '`connections` (one per TCP connection)'),
    'includeRecords': (
        'false',
        '`true` shows record keys, values and headers in `rows=records` (payload is opt-in; without it those '
        'columns are null, and the rows carry offsets, formats, schema ids and trace context)'),
    'maxDecompressedBytes': (
        '67108864',
        'cap on what the record batches of one request or response decompress to, all together, 65536 to '
        "2^40; past it a batch's row says `over_cap` (and a wrapper's summary `DecompressError`) instead of "
        'allocating more'),
    'maxRecordsPerBatch': (
        '1000000',
        'records read from one record batch in `rows=records`, 1 to 2^31; the rest of the batch becomes one '
        'row with status `over_cap` saying how many it held'),
    'maxInflateRatio': (
        '1000',
        'a compressed capture file (gzip, xz, bzip2, zstd) may inflate to this many times its compressed bytes '
        'read so far, once past 64 MiB, 10 to 2^30; past it the file stops with a `capture_damaged` row saying '
        'so (a compression bomb is not inflated for minutes); a file cut short gives what precedes the cut'),
    'ports': (
        'all',
        'comma-separated TCP ports, each 1 to 65535 (an empty list is an error); only connections with one of'
        ' them are decoded. Without it, every TCP connection is examined and Kafka is recognised by its '
        'bytes, on any port'),
    'maxFrameBytes': (
        '104857600',
        "largest frame accepted (Kafka's `socket.request.max.bytes`), 65536 (room for the largest request "
        'header) to 2147483647; a larger size field means the stream is not where we thought'),
    'pathGlobFilter': (
        '`*.pcap`, `*.pcapng`, `*.cap`, rotated `*.pcap0`…, and their `.gz`, `.xz`, `.zst`, `.bz2`',
        'comma-separated file name patterns a directory listing picks up (at least one)'),
    'batchSize': (
        '8192',
        'rows per Arrow record batch, 1 to 10000000; held to even inside one frame (the records of one '
        'Produce request leave in batches of this size, made as they leave)'),
    'maxConnections': (
        '100000',
        'open TCP connections tracked at once, 1000 to 10000000; past it the longest idle one is retired as '
        'if it had closed (its row says `end_captured` = `evicted`; later packets of it start a new '
        'connection)'),
    'endpointUrl': (
        '`AWS_ENDPOINT_URL`',
        'S3 endpoint for `s3://` paths (an S3-compatible server)'),
    'maxPartitionBytes': (
        '134217728',
        'Spark: small files are packed into tasks of at most this many bytes (each file counted 4 MiB more, '
        "as Spark's file sources count it); a file larger than this may be read in shares by several tasks "
        '(see above), 1 to 2^62'),
    'tlsKeyLog': (
        'none',
        'TLS key log (NSS key log format: SSLKEYLOGFILE, Python keylog_filename, Java agents), or a '
        'comma-separated list of them, local or URIs: TLS connections whose secrets it holds are decrypted '
        '(TLS 1.2 and 1.3: AES-GCM, ChaCha20-Poly1305, AES-CBC with HMAC); read once per process while '
        "unchanged, never shown. A pcapng's Decryption Secrets Blocks (`editcap --inject-secrets`) are used "
        'too, without this option or beside it'),
    'tlsTrialBudget': (
        '65536',
        'TLS 1.3 connections whose handshake is not in the capture (a rotated file): trial decryptions of '
        'their first record with the key log\'s unclaimed sessions, per connection, 0 to 2^40; past it the '
        "connection's detail says the budget ran out"),
    'tlsTrialTaskBudget': (
        '4194304',
        'the same for all connections of one file read (one Spark task), 0 to 2^50'),
    'stitch': (
        'true',
        'read the files of a rotation series (`tcpdump -C/-G/-W`, `editcap -c/-i`, a ring buffer: names that '
        'differ only in digits, times that follow one another) as one capture: a connection that goes on '
        'into the next file (its sequence numbers continuing) stays one connection, an exchange cut by the '
        'rotation is paired, and its facts reach the rows of every file; rows keep their own `capture_file`. '
        '`false` reads every file by itself'),
    'minPartitions': (
        'CPU count, at most 4',
        'Spark: large files are shared out while the load has fewer partitions than this, and small files '
        'are packed into at least this many tasks where there are that many files, 1 to 1024'),
    'mode': (
        '`PERMISSIVE`',
        "as Spark's CSV and JSON sources name it. `PERMISSIVE`: damage becomes rows with a status and a "
        '`detail`, never an exception. `DROPMALFORMED`: rows with status `truncated`, `malformed`, '
        '`undecoded` or `capture_damaged` (and record rows `corrupt`, `crc_mismatch`, `over_cap`) are '
        'dropped. `FAILFAST`: the first of them fails the read with an error naming the file, the packet '
        'number and the byte offset. The modes act on exactly the damaged rows of the shape read: in '
        '`connections`, damage inside a connection is in its counts (partial, skipped, gap bytes) and only '
        '`capture_damaged` is a row; in `partitions` and `records`, a damaged exchange of an api with '
        'partitions (records) is one row with its status where none could be read, and damage of other apis '
        'has no row there'),
}
assert {r[0] for r in _RULES.values()} == set(_DOCS), "every option documented once"


def options_table() -> str:
    """The options as a Markdown table: README's, generated from the rules above."""
    out = ["| option | default | meaning |", "|---|---|---|"]
    for name, _field, _default, _rule in _RULES.values():
        shown, meaning = _DOCS[name]
        out.append(f"| `{name}` | {shown} | {meaning} |")
    return "\n".join(out)


#: the streaming source's own options (``spark.readStream`` only: spark/stream.py checks their values):
#: lower-case key -> (name, default, default as README shows it, meaning). The one table the stream
#: reader takes its defaults from, the batch source leaves out, the audit job's --incremental flags
#: default to, and README shows (stream_options_table)
STREAM_OPTIONS: dict[str, tuple[str, str | None, str, str]] = {
    "completeafterseconds": (
        "completeAfterSeconds", "60", "`60`",
        "seconds a rotation series' newest file must stay unchanged to count as complete (the file tcpdump is still "
        "writing waits); a file that is not the newest of its series is complete at once; `0` for files copied in "
        "whole"),
    "maxfilespertrigger": (
        "maxFilesPerTrigger", None, "all",
        "at most this many files per micro-batch (Spark 4.2+ admission control; `trigger(availableNow=True)` reads "
        "in batches of it)"),
    "maxfileage": (
        "maxFileAge", "7d", "`7d`",
        "what the source remembers: files more than this older than the newest file read are forgotten, and one "
        "that old appearing later is taken as read (`3600`, `90m`, `12h`, `2w` also work)"),
    "statelocation": (
        "stateLocation", None, "none",
        "a directory (local or a URI) beside the checkpoint where a rotation series' open connections wait between "
        "triggers for the series' next file, so that a series growing between triggers is stitched across them "
        "(no key or secret is written there, and no code: declared records, see docs/state.md; `kafkawire state DIR` "
        "says what it holds); without it each trigger's files are read apart"),
}


def stream_options_table() -> str:
    """The streaming source's options as a Markdown table: README's, generated from STREAM_OPTIONS."""
    out = ["| option | default | meaning |", "|---|---|---|"]
    for name, _default, shown, meaning in STREAM_OPTIONS.values():
        out.append(f"| `{name}` | {shown} | {meaning} |")
    return "\n".join(out)


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
        if key.lower() in ("rows", "path", "paths"):
            raise ValueError(f"--option {pair!r}: the job chooses {key.lower()} itself")
        if key.lower() == "includerecords":
            raise ValueError(f"--option {pair!r}: the job never reads record payload (keys, values, headers)")
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
