"""Which files a read takes (list_files: files, directories, globs, object-store URIs) and how
Spark's input partitions share them out (plan)."""

from __future__ import annotations

import fnmatch
import glob
import os
from typing import Iterable, Iterator

from .wire.capture import GZIP_MAGIC, PCAP_MAGICS, PCAPNG_SHB, CaptureError
from .wire.fs import file_size, is_uri, list_uri, local_path, open_binary
from .options import DEFAULT_GLOB, MAX_SHARES, Options

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
