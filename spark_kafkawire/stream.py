"""A directory that tcpdump keeps rotating (``-C`` / ``-G``) as a stream of completed capture files.

``spark.readStream.format("kafkawire").load(dir)``: an offset is the last file read, in order of
modification time (then name); a micro-batch reads the completed files after it, one partition
each, as the batch source reads them. A file is completed when it is not the newest of its
rotation series (same directory, same name once digits are set aside: ``cap.pcap``, ``cap.pcap1``,
``cap-20261122-1000.pcap`` ...) or has not changed for ``completeAfterSeconds`` (default 60): the
file tcpdump is still writing is left for a later trigger. An empty directory is "nothing new".

Admission control (Spark 4.2+): option ``maxFilesPerTrigger`` caps the files of one micro-batch;
``trigger(availableNow=True)`` reads every file completed when the query starts, in batches of that
size, then stops. A file that appears with a modification time older than the last one read is
not read (as with Spark's own file stream source, files are expected to arrive in time order).
"""

from __future__ import annotations

import os
import re
import time
from typing import Iterator

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from .fs import local_path, resolve
from .reader import Options, _paths_option, iter_batches, list_files

try:  # Spark 4.2+: admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxFiles, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older Spark: every trigger reads all that is complete
    ReadLimit = ReadAllAvailable = ReadMaxFiles = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

START = {"mtime_ns": -1, "path": ""}
_DIGITS = re.compile(r"\d+")


def _mtime_ns(path: str, endpoint: str | None) -> int:
    local = local_path(path)
    if local is not None:
        return os.stat(local).st_mtime_ns
    fs, p = resolve(path, endpoint)
    return int(fs.get_file_info(p).mtime_ns or 0)


def completed_files(paths: list[str], opts: Options, settle_s: float, now: float | None = None,
                    checked: set[str] | None = None) -> list[tuple[int, str]]:
    """(mtime_ns, path) of every completed capture file, oldest first. ``checked``: files known to
    be captures already (see list_files)."""
    files = list_files(paths, opts.path_glob_filter, opts.endpoint_url, allow_empty=True, checked=checked)
    stamped = [(_mtime_ns(f, opts.endpoint_url), f) for f in files]
    newest: dict[tuple[str, str], tuple[int, str]] = {}
    for m, f in stamped:
        head, name = os.path.split(f)
        key = (head, _DIGITS.sub("#", name))
        if key not in newest or (m, f) > newest[key]:
            newest[key] = (m, f)
    now_ns = int((time.time() if now is None else now) * 1e9)
    writing = {v for v in newest.values() if now_ns - v[0] < settle_s * 1e9}
    return sorted(x for x in stamped if x not in writing)


def _after(files: list[tuple[int, str]], offset: dict) -> list[tuple[int, str]]:
    mark = (offset["mtime_ns"], offset["path"])
    return [x for x in files if x > mark]


def _offset(x: tuple[int, str]) -> dict:
    return {"mtime_ns": x[0], "path": x[1]}


class CaptureFile(InputPartition):
    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


class KafkaWireStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict):
        o = {str(k).lower(): v for k, v in options.items()}
        settle = o.pop("completeafterseconds", "60")
        max_files = o.pop("maxfilespertrigger", None)
        try:
            self.settle_s = float(settle)
            if self.settle_s < 0:
                raise ValueError
        except ValueError:
            raise ValueError(f"option completeAfterSeconds: {settle!r} is not allowed; a number of seconds, "
                             f"0 or more") from None
        try:
            self.max_files = None if max_files is None else int(max_files)
            if self.max_files is not None and self.max_files < 1:
                raise ValueError
        except ValueError:
            raise ValueError(f"option maxFilesPerTrigger: {max_files!r} is not allowed; a whole number, "
                             f"1 or more") from None
        self.opts = Options.parse({k: v for k, v in o.items() if k not in ("path", "paths")})
        self.paths = _paths_option(options)
        if not self.paths:
            raise ValueError("kafkawire: give the capture directory to load(), e.g. load('captures/')")
        for p in self.paths:
            local = local_path(p)
            if local is not None and not os.path.exists(local):
                raise FileNotFoundError(f"kafkawire: {p}: no such file or directory")
        self.target: dict | None = None  # Trigger.AvailableNow: nothing past this
        self.checked: set[str] = set()  # files known to be captures: each is opened to check once
        self.listed: list[tuple[int, str]] = []  # the last listing, which partitions() reuses

    def _completed(self) -> list[tuple[int, str]]:
        self.listed = completed_files(self.paths, self.opts, self.settle_s, checked=self.checked)
        return self.listed

    def initialOffset(self) -> dict:
        return dict(START)

    def getDefaultReadLimit(self):
        if ReadMaxFiles is not None and self.max_files:
            return ReadMaxFiles(self.max_files)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        files = self._completed()
        self.target = _offset(files[-1]) if files else dict(START)

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        start = start or dict(START)
        new = _after(self._completed(), start)
        if self.target is not None:
            new = [x for x in new if x <= (self.target["mtime_ns"], self.target["path"])]
        if ReadMaxFiles is not None and isinstance(limit, ReadMaxFiles):
            new = new[: limit.max_files]
        return _offset(new[-1]) if new else start

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        stop = (end["mtime_ns"], end["path"])
        # the listing latestOffset made, if it reaches the end offset (after a restart, a new one)
        files = self.listed if stop in self.listed else self._completed()
        return [CaptureFile(f) for m, f in _after(files, start) if (m, f) <= stop]

    def read(self, partition: CaptureFile) -> Iterator:
        yield from iter_batches(partition.path, self.opts)

    def commit(self, end: dict) -> None:
        pass
