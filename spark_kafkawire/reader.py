"""The pipeline without Spark: capture files -> Arrow.

``read_capture(path, **options)`` returns a ``pyarrow.Table``; ``iter_batches(file, options)``
streams one file's ``RecordBatch``es with bounded memory (the Spark data source reads each of its
partitions this way).
"""

from __future__ import annotations

import fnmatch
import gc
import glob
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generator, Iterable, Iterator, Mapping

import pyarrow as pa

from .body import RecordOptions
from .capture import GZIP_MAGIC, PCAP_MAGICS, PCAPNG_SHB, CaptureError, CaptureReader, RowsDue
from .exchanges import Decoder
from . import lane
from .frames import DEFAULT_MAX_FRAME
from .fs import file_size, is_uri, list_uri, local_path, open_binary
from .packets import decode
from .predicate import Predicate
from .records import DEFAULT_MAX_DECOMPRESSED, DEFAULT_MAX_RECORDS
from . import keylog
from .keylog import KeyLog
from .modes import MODES
from .rowshapes import row_builder
from .table import COLUMNS, ROW_SHAPES, RowBuilder, arrow_schema
from .tls import TRIAL_BUDGET, TRIAL_TASK_BUDGET, TrialBudget
from .topicids import TopicIds
from .tcp import DEFAULT_MAX_CONNECTIONS, Reassembler

MAX_SHARES = 1024  # at most this many shares of one file (minPartitions' bound)
TIME_ORDER_MARGIN_NS = 60 * 10**9  # packets may be this much out of time order (merged captures)
DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024  # Spark's spark.sql.files.maxPartitionBytes default
#: shares of one file are not free (each reads all its packets): past 4 the time hardly falls
DEFAULT_MIN_PARTITIONS = min(os.cpu_count() or 1, 4)
#: file names a directory listing picks up (tcpdump -C/-W rotation appends digits to the name)
DEFAULT_GLOB = "*.pcap,*.pcap[0-9]*,*.pcapng,*.pcapng[0-9]*,*.cap,*.pcap.gz,*.pcapng.gz,*.cap.gz"


@dataclass(frozen=True)
class Options:
    """Reader options. Names are case-insensitive; values may be strings, as Spark passes them.
    Each option, its default, its allowed values and meaning: :func:`options_table` (README, Options).
    """

    rows: str = "exchanges"
    include_records: bool = False
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED
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
        if values["rows"] == "records" and not values["include_records"]:
            raise ValueError("rows=records shows record keys and values (payload): set option includeRecords=true")
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
}

#: how each option is documented (README's options table is options_table()'s output, checked by a test)
_DOCS = {
    'rows': (
        '`exchanges`',
        'row shape: `exchanges` (one per request/response pair), `messages` (one per frame), `partitions` '
        '(one per exchange, topic and partition), `records` (one per record; needs `includeRecords`) or '
        '`connections` (one per TCP connection)'),
    'includeRecords': (
        'false',
        '`true` allows `rows=records`, whose rows carry record keys, values and headers (payload is opt-in)'),
    'maxDecompressedBytes': (
        '67108864',
        'cap on what the record batches of one request or response decompress to, all together, 65536 to '
        "2^40; past it a batch's row says `over_cap` (and a wrapper's summary `DecompressError`) instead of "
        'allocating more'),
    'maxRecordsPerBatch': (
        '1000000',
        'records read from one record batch in `rows=records`, 1 to 2^31; the rest of the batch becomes one '
        'row with status `over_cap` saying how many it held'),
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
        '`*.pcap`, `*.pcapng`, `*.cap`, rotated `*.pcap0`…, and their `.gz`',
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
        'Spark: a file larger than this may be read in shares by several tasks (see above), 1 to 2^62'),
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
    'minPartitions': (
        'CPU count, at most 4',
        'Spark: large files are shared out while the load has fewer partitions than this, 1 to 1024'),
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


def plan(files: list[str], opts: Options) -> list[tuple[str, tuple[int, int] | None]]:
    """Input partitions for Spark: (file, share). A file is one partition; while the load has fewer
    than ``minPartitions``, the file with the most bytes per partition that is larger than
    ``maxPartitionBytes`` (and not gzip-compressed, which only reads from its start) gets one more,
    up to one per ``maxPartitionBytes``. A file in n partitions is read in n shares (see
    iter_batches): each task reads all the file's packets and makes a share of its rows, so the
    rows are exactly the whole file's and the shares save the decoding, not the reading."""
    most: dict[str, tuple[int, int]] = {}  # file -> (size, most partitions)
    if len(files) < opts.min_partitions:
        for f in files:
            size = file_size(f, opts.endpoint_url)
            if size > opts.max_partition_bytes and not _gzip(f, opts.endpoint_url):
                most[f] = (size, min(-(-size // opts.max_partition_bytes), MAX_SHARES))
    parts = dict.fromkeys(files, 1)
    total = len(files)
    while total < opts.min_partitions:
        grow = [f for f in most if parts[f] < most[f][1]]
        if not grow:
            break
        f = max(grow, key=lambda f: most[f][0] / parts[f])
        parts[f] += 1
        total += 1
    return [(f, None if parts[f] == 1 else (k, parts[f])) for f in files for k in range(parts[f])]


def _gzip(path: str, endpoint: str | None) -> bool:
    with open_binary(path, endpoint) as f:
        return f.read(2) == GZIP_MAGIC


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
        out[key] = value.strip()
    Options.parse(out)
    return out


def _paths_option(options: Mapping[str, object]) -> list[str]:
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


def _is_capture(path: str, endpoint: str | None = None) -> bool:
    """Starts like a capture, or is too short to tell (a rotated file tcpdump has just opened:
    read as a damaged capture, not refused)."""
    with open_binary(path, endpoint) as f:
        head = f.read(4)
    return head in PCAP_MAGICS or head == PCAPNG_SHB or head[:2] == GZIP_MAGIC or \
        (len(head) < 4 and any(m.startswith(head) for m in (*PCAP_MAGICS, PCAPNG_SHB)))


def list_files(paths: str | os.PathLike | Iterable[str | os.PathLike], path_glob_filter: str = DEFAULT_GLOB,
               endpoint: str | None = None, allow_empty: bool = False,
               checked: set[str] | None = None, stats: dict[str, tuple[int, int]] | None = None) -> list[str]:
    """Expand files, directories (recursively) and globs into a sorted list of capture files.

    Files named directly or matched by a glob are always read; a directory contributes the files
    whose names match ``path_glob_filter`` (hidden files and those starting with '_' skipped, as
    Spark's file sources do). A named file that is not a capture raises ``CaptureError``. URIs
    (``s3://bucket/dir``, ``gs://``, ``abfs://``, ``hdfs://``) are listed through pyarrow.fs
    (see fs.py); ``file:`` URIs are local paths. ``checked``: files already known to be captures
    (not opened again; those found to be are added: a stream lists its directory every trigger).
    ``stats``: filled with each file's (size, modification time in ns), from the same listing.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    patterns = [p for p in path_glob_filter.split(",") if p]
    found: list[str] = []
    for p in paths:
        p = os.fspath(p)
        local = local_path(p)
        if local is None:
            found.extend(list_uri(p, patterns, endpoint, stats))
        elif os.path.isdir(local):
            found.extend(_walk(local, patterns))
        elif os.path.isfile(local):
            found.append(local)
        else:
            matches = sorted(glob.glob(local, recursive=True))
            if not matches:
                raise FileNotFoundError(f"kafkawire: path does not exist: {local}")
            for m in matches:
                found.extend(list_files(m, path_glob_filter, stats=stats) if os.path.isdir(m) else [m])
    out = sorted(dict.fromkeys(f if is_uri(f) else os.path.abspath(f) for f in found))
    if stats is not None:
        for f in out:
            if not is_uri(f):
                st = os.stat(f)
                stats[f] = (st.st_size, st.st_mtime_ns)
    if not out and not allow_empty:  # (a stream's directory may be empty: nothing new yet)
        named = ", ".join(os.fspath(p) for p in paths)
        raise CaptureError(f"kafkawire: no capture file in {named} (pathGlobFilter {path_glob_filter})")
    _check_captures(out, endpoint, checked)
    return out


def _walk(folder: str, patterns: list[str]) -> Iterator[str]:
    """The files under ``folder`` whose names match one of ``patterns``, hidden and '_' names
    skipped (files and folders), in name order."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for name in sorted(files):
            if not name.startswith((".", "_")) and any(fnmatch.fnmatch(name, pat) for pat in patterns):
                yield os.path.join(root, name)


def _check_captures(files: list[str], endpoint: str | None, checked: set[str] | None) -> None:
    """Raise CaptureError for the first file that is not a pcap or pcapng capture (those in
    ``checked`` are known to be; those found to be are added)."""
    for f in files:
        if checked is not None and f in checked:
            continue
        if not _is_capture(f, endpoint):
            raise CaptureError(f"{f}: not a pcap or pcapng capture file")
        if checked is not None:
            checked.add(f)


def iter_batches(path: str, options: Options | Mapping[str, object] | None = None,
                 predicate: Predicate | None = None, share: tuple[int, int] | None = None) -> Iterator[pa.RecordBatch]:
    """Decode one capture file, yielding record batches as they fill.

    ``predicate`` (see :mod:`spark_kafkawire.predicate`): only rows it accepts are yielded, and
    requests it rules out by their headers are not body-decoded.

    ``share`` = (k, n): the rows of the k-th of n shares of the file (0 <= k < n). The n shares'
    rows together are exactly the file's rows: every share reads all packets and follows every
    connection, and decodes the bodies of and makes only its own rows (see Decoder)."""
    if share is not None and not (isinstance(share[1], int) and share[1] >= 1 and 0 <= share[0] < share[1]):
        raise ValueError(f"share {share!r}: want (k, n) with 0 <= k < n")
    _reading[0] += 1
    batches = _iter_batches(path, options, predicate, share)
    try:
        while True:
            with _no_collections():
                batch = next(batches, None)
            if batch is None:
                return
            yield batch
    finally:
        batches.close()
        _reading[0] -= 1
        if not _reading[0]:
            gc.unfreeze()


_reading = [0]  # reads running in this process


def _secrets(decoder: Decoder, text: bytes) -> None:
    """A pcapng Decryption Secrets Block's TLS key log: added to the file's key log (made for it
    where option tlsKeyLog gave none); connections that begin after it can use it."""
    if decoder.keylog is None:
        decoder.keylog = KeyLog()
    decoder.keylog.add_text(text, own=True)


@contextmanager
def _no_collections():
    """The cyclic garbage collector is not run while a read decodes, and what the read keeps is
    left out of its later runs. A read makes no reference cycles (tests/test_collector.py checks it on
    every capture at hand: connections' framers and TLS sessions are unlinked when they end), but
    every connection keeps a few dozen objects while it is open, and collecting walks each of them:
    10^6 one-segment connections read in 13% less time without it. So each step of a read runs
    with the collector off, and at its end every object then alive is frozen (``gc.freeze``: they
    are not walked again), until the last read of the process ends (``gc.unfreeze``). The caller's
    code between batches runs with the collector as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _iter_batches(path: str, options: Options | Mapping[str, object] | None,
                  predicate: Predicate | None,
                  share: tuple[int, int] | None) -> Generator[pa.RecordBatch, None, None]:
    opts = options if isinstance(options, Options) else Options.parse(options)
    if predicate and not predicate.file_ok(path):
        return
    topics = TopicIds()
    sink = row_builder(opts.rows, path, opts.max_decompressed_bytes, opts.mode, opts.max_records_per_batch,
                       topic_ids=topics.names)
    decoder = Decoder(sink, opts.max_frame_bytes,
                      RecordOptions(opts.max_decompressed_bytes, keep_raw=opts.rows == "records"),
                      predicate=predicate, decode_bodies=opts.rows != "connections",
                      share=share if share is not None and share[1] > 1 else None, topic_ids=topics,
                      keylog=keylog.cached(opts.tls_key_log, opts.endpoint_url) if opts.tls_key_log else None,
                      trial_budget=TrialBudget(opts.tls_trial_budget, opts.tls_trial_task_budget))
    reasm = Reassembler(decoder, ports=opts.ports, max_connections=opts.max_connections)
    limit = opts.batch_size
    feed = reasm.feed
    keep = predicate.filter if predicate else None
    # a bound on request_time: past it (and a margin for packets a little out of time order),
    # reading stops as soon as every exchange that started in time is settled
    until = predicate.time_upper() if predicate else None
    stop_from = None if until is None else until + TIME_ORDER_MARGIN_NS
    past = lane.PastBound()  # packets timed past stop_from, the lane's and the reader's
    fast = lane.make(reasm, sink, limit, stop_from, past)
    reader = CaptureReader(path, opts.endpoint_url, lane=fast, on_secrets=lambda text: _secrets(decoder, text))
    for pkt in reader:
        if isinstance(pkt, RowsDue):  # the fast lane took packets and made rows
            if sink.count >= limit or sink.backlog:
                yield from _batches(sink, limit, keep, False)
            continue
        seg = decode(pkt)
        if seg is not None:
            feed(seg)
            if sink.count >= limit or sink.backlog:
                yield from _batches(sink, limit, keep, False)
        if stop_from is not None and until is not None and pkt.ts_ns > stop_from:
            past.checks += 1
            if past.checks % lane.CHECK_EVERY == 1 and decoder.settled(reasm.open_connections(), until):
                break
    decoder.ending = True
    for _ in reasm.closing():
        if sink.count >= limit or sink.backlog:
            yield from _batches(sink, limit, keep, False)
    if reader.damage is not None:
        decoder.damaged(str(reader.damage))
    yield from _batches(sink, limit, keep, True)


def _batches(sink: RowBuilder, limit: int, keep, final: bool) -> Iterator[pa.RecordBatch]:
    """Full batches of ``limit`` rows (all that is left when ``final``), taking rows from the
    builder's backlog (the records of one frame can be millions) only as batches leave."""
    while True:
        sink.fill(limit)
        if not sink.count or (sink.count < limit and not final):
            return
        batch = sink.flush()
        if keep is not None:
            batch = keep(batch)
        if batch.num_rows:
            yield batch


def read_capture(path: str | os.PathLike | Iterable[str | os.PathLike], filters: Iterable[tuple] | None = None,
                 **options: object) -> pa.Table:
    """Decode capture files (a file, directory, glob or a list of them) into one Arrow table.

    ``filters``: ``[(column, op, value), ...]``, all of which a row must pass (op one of
    ``= != < <= > >= in``, or ``'not null'`` without a value), on capture_file, the endpoint
    columns, api_key, api_name, api_version, client_id, request_time or status. Work is skipped
    early: files by name, request bodies (and their responses) by header. Values: whole numbers for
    api_key, api_version and the ports, a datetime or nanoseconds for request_time, strings for
    the rest, a list for ``in``; a null matches no row, as in SQL.

    ``options``: reader options, names case-insensitive, each checked as :func:`options_table`
    (README, Options) says."""
    opts = Options.parse(options)
    pred = Predicate.parse(filters).for_shape(n for n, _ in COLUMNS[opts.rows])
    files = [f for f in list_files(path, opts.path_glob_filter, opts.endpoint_url) if pred.file_ok(f)]
    batches = [b for f in files for b in iter_batches(f, opts, pred)]
    return pa.Table.from_batches(batches, schema=arrow_schema(opts.rows))


def read_pandas(path: str | os.PathLike | Iterable[str | os.PathLike], filters: Iterable[tuple] | None = None,
                **options: object):
    """:func:`read_capture` as a pandas DataFrame whose integer, boolean and string columns are
    pandas' nullable types: a missing api_version stays <NA> instead of turning the column into
    floats (3.0). Timestamps are UTC."""
    import pandas as pd

    nullable = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
                pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype(), pa.string(): pd.StringDtype()}
    return read_capture(path, filters, **options).to_pandas(types_mapper=nullable.get)
