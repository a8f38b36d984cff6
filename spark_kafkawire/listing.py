"""Which files a read takes (list_files: files, directories, globs, object-store URIs) and how
Spark's input partitions share them out (plan)."""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
import warnings
from typing import Iterable, Iterator, TypeVar

from .wire.capture import PCAP_MAGICS, PCAPNG_SHB, CaptureError, compression
from .escape import printable
from .wire.series import find_series
from .wire.fs import file_kind, file_size, is_uri, list_uri, local_path, open_binary
from .options import DEFAULT_GLOB, MAX_SHARES, Options

T = TypeVar("T")

#: what a file counts for besides its bytes where files are packed into input partitions: Spark's own
#: file sources' default (spark.sql.files.openCostInBytes). A Spark task costs about 55 ms of its own
#: on a laptop (a trivial Python data source, local[1]: docs/benchmarks.md), the time the reader takes
#: for about 50 MB, so many small files are read by few tasks, not one task each.
OPEN_COST = 4 << 20

#: a file (or the files of a rotation series, in order), or a share (k, n) of it: what a task reads
#: with iter_batches
Unit = tuple[str | tuple[str, ...], tuple[int, int] | None]


def pack(units: list[tuple[T, int]], max_bytes: int) -> list[list[T]]:
    """Consecutive units (each with its size in bytes) into groups of at most ``max_bytes``, each
    counted with OPEN_COST: a unit larger than that is a group of its own. The files of a group are
    read one after the other by one task."""
    groups: list[list[T]] = []
    size = 0
    for unit, n in units:
        cost = n + OPEN_COST
        if groups and size + cost <= max_bytes:
            groups[-1].append(unit)
            size += cost
        else:
            groups.append([unit])
            size = cost
    return groups


def plan(files: list[str], opts: Options, sizes: dict[str, tuple[int, int]] | None = None) -> list[list[Unit]]:
    """Spark's input partitions: each a list of (file, share) read one after the other by one task.

    A rotation series (wire/series.py; option stitch) counts as one file of all its files' bytes:
    its files are read in order by one pipeline, so that its connections go on from file to file;
    a series larger than ``maxPartitionBytes`` is read in shares like a large file.

    Shares: while the load has fewer files than ``minPartitions``, the file with the most bytes
    per partition that is larger than ``maxPartitionBytes`` (and not compressed, which only
    reads from its start) gets one more share, up to one per ``maxPartitionBytes``. A file in n
    shares is read by n tasks (see iter_batches): each reads all the file's packets and makes a
    share of its rows, so the rows are exactly the whole file's and the shares save the decoding,
    not the reading.

    Packing, as Spark's file sources do: the files (and shares) in listing order are packed into
    partitions of at most min(maxPartitionBytes, max(OPEN_COST, all bytes / minPartitions)) bytes,
    each counted with OPEN_COST, so a load of many small files (a rotated capture) is a few tasks
    and still at least ``minPartitions`` where it has that many files. Rows are each file's (or
    share's) read by itself, whichever partition it is in. ``sizes``: (size, modification time) of
    files from their listing (list_files' ``stats``); others are asked for."""
    def size_of(f: str) -> int:
        known = sizes.get(f) if sizes else None
        return known[0] if known is not None else file_size(f, opts.endpoint_url)

    runs = find_series(files, opts.endpoint_url) if opts.stitch and len(files) > 1 else [[f] for f in files]
    keys: list[str | tuple[str, ...]] = [run[0] if len(run) == 1 else tuple(run) for run in runs]
    size = {k: sum(size_of(f) for f in run) for k, run in zip(keys, runs)}
    most: dict[str | tuple[str, ...], int] = {}  # file -> most shares
    if len(keys) < opts.min_partitions:
        for k, run in zip(keys, runs):
            if size[k] > opts.max_partition_bytes and not any(_compressed(f, opts.endpoint_url) for f in run):
                most[k] = min(-(-size[k] // opts.max_partition_bytes), MAX_SHARES)
    parts = dict.fromkeys(keys, 1)
    total = len(keys)
    while total < opts.min_partitions:
        grow = [k for k in most if parts[k] < most[k]]
        if not grow:
            break
        k = max(grow, key=lambda k: size[k] / parts[k])
        parts[k] += 1
        total += 1
    units = [((k, None if parts[k] == 1 else (i, parts[k])), size[k] // parts[k]) for k in keys
             for i in range(parts[k])]
    every = sum(n + OPEN_COST for _u, n in units)
    return pack(units, min(opts.max_partition_bytes, max(OPEN_COST, every // opts.min_partitions)))


def _compressed(path: str, endpoint: str | None) -> bool:
    with open_binary(path, endpoint) as f:
        return compression(f.read(6)) is not None


def _is_capture(path: str, endpoint: str | None = None) -> bool:
    """Starts like a capture, or is too short to tell (a rotated file tcpdump has just opened:
    read as a damaged capture, not refused)."""
    with open_binary(path, endpoint) as f:
        first = f.read(6)
    head = first[:4]
    return head in PCAP_MAGICS or head == PCAPNG_SHB or compression(first) is not None or \
        (len(head) < 4 and any(m.startswith(head) for m in (*PCAP_MAGICS, PCAPNG_SHB)))


def list_files(paths: str | os.PathLike | Iterable[str | os.PathLike], path_glob_filter: str = DEFAULT_GLOB,
               endpoint: str | None = None, allow_empty: bool = False,
               checked: set[str] | None = None, stats: dict[str, tuple[int, int]] | None = None) -> list[str]:
    """Expand files, directories (recursively) and globs into a sorted list of capture files.

    Files named directly or matched by a glob are always read; a directory contributes the files
    whose names match ``path_glob_filter`` (hidden files and those starting with '_' skipped, as
    Spark's file sources do). Only regular files are read (symbolic links followed): a FIFO,
    socket, device or broken link in a directory or a glob's matches is skipped with a
    SkippedFileWarning naming it, and one named directly is refused (CaptureError); none is opened,
    so none can block the read. A named file that is not a capture raises ``CaptureError``. URIs
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
            unmatched: list[str] = []
            found.extend(list_uri(p, patterns, endpoint, stats, unmatched))
            _name_unmatched(p, unmatched)
        elif os.path.isdir(local):
            found.extend(_walk(local, patterns))
        elif os.path.isfile(local):
            found.append(local)
        elif os.path.exists(local):  # named directly: refused, never opened (a FIFO would block the read)
            raise CaptureError(f"kafkawire: {printable(local)}: {_kind(local)}: not read (a capture is read from a "
                               "file)")
        else:
            matches = sorted(glob.glob(local, recursive=True))
            if not matches:
                raise FileNotFoundError(f"kafkawire: path does not exist: {local}")
            for m in matches:
                if os.path.isdir(m):
                    found.extend(list_files(m, path_glob_filter, allow_empty=True, stats=stats))
                elif _regular(m):
                    found.append(m)
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
    skipped (files and folders, as Spark's file sources skip them), in name order. The others are
    named, all in one SkippedFileWarning: no file of a directory is passed over silently."""
    unmatched: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for name in sorted(files):
            if name.startswith((".", "_")):
                continue
            path = os.path.join(root, name)
            if not any(fnmatch.fnmatch(name, pat) for pat in patterns):
                unmatched.append(path)
            elif _regular(path):
                yield path
    _name_unmatched(folder, unmatched)


def _name_unmatched(folder: str, unmatched: list[str]) -> None:
    """One SkippedFileWarning naming a directory's files whose names match no pathGlobFilter
    pattern (the first five in its message, all in its ``skipped``)."""
    if not unmatched:
        return
    why = "its name matches no pathGlobFilter pattern"
    names = ", ".join(printable(p[len(folder):].lstrip("/") if p.startswith(folder) else p) for p in unmatched[:5])
    more = f" and {len(unmatched) - 5} more" if len(unmatched) > 5 else ""
    warnings.warn(SkippedFileWarning(f"kafkawire: skipped {len(unmatched)} file{'s' * (len(unmatched) != 1)} of "
                                     f"{printable(folder)} whose names match no pathGlobFilter pattern: {names}{more}",
                                     [(p if is_uri(p) else os.path.abspath(p), why) for p in unmatched]),
                  stacklevel=3)


class SkippedFileWarning(UserWarning):
    """Files of a listed directory (or a glob's matches) not read: one that is not a regular file
    (a FIFO, socket or device) or cannot be looked at (never opened), or files whose names match no
    pathGlobFilter pattern. ``skipped``: each file's absolute path and why, for a table of them
    (the audit job's capture_health.skipped_files)."""

    def __init__(self, message: str, skipped: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.skipped = skipped or []


def _kind(path: str) -> str:
    """What a path that is not a regular file is, in words."""
    try:
        return f"{file_kind(os.stat(path).st_mode) or 'a regular file'}, not a regular file"
    except OSError as e:  # a broken symbolic link, no access
        return f"cannot be looked at ({e.strerror})"


def _regular(path: str) -> bool:
    """Is a listed path a regular file (symbolic links followed)? Any other is skipped with a
    SkippedFileWarning naming it and what it is."""
    try:
        if stat.S_ISREG(os.stat(path).st_mode):
            return True
    except OSError:
        pass
    why = _kind(path)
    warnings.warn(SkippedFileWarning(f"kafkawire: skipped {printable(path)}: {why}", [(os.path.abspath(path), why)]),
                  stacklevel=2)
    return False


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
