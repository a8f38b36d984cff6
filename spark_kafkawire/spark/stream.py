"""A directory that tcpdump keeps rotating (``-C`` / ``-G``), or that capture files are copied
into, as a stream of completed capture files.

``spark.readStream.format("kafkawire").load(dir)``. Like Spark's own file stream source, the
source remembers which files it has read, not where in an order it stopped: every completed file is
read exactly once, whatever its modification time and whenever it arrives (files gathered from
several capture hosts, copied with ``cp -p`` or ``rsync -t``, moved in after a run).

* A file is **completed** when it is not the newest of its rotation series (same directory, same
  name once digits are set aside: ``cap.pcap``, ``cap.pcap1``, ``cap-20261122-1000.pcap`` ...) or
  has not changed for ``completeAfterSeconds`` (default 60): the file tcpdump is still writing is
  left for a later trigger.
* The **offset** is the set of files read so far, each with its size and modification time (kept
  in Spark's checkpoint, so a restarted query knows them). A micro-batch reads the completed files
  not in it, oldest first.
* **What is remembered** is bounded by ``maxFileAge`` (default 7 days, as Spark's file source): a
  file whose modification time is more than that older than the newest file read is forgotten,
  and a file that old appearing later is taken as read already (not read). Within the bound,
  nothing is skipped.
* A file already read that **changes** (grows, is replaced, gets a new modification time) or
  vanishes before its batch reads it is not read again: it gets one row with status
  ``capture_changed`` whose detail says what changed, and is remembered as it is now.
* A micro-batch's files are packed into input partitions of about ``maxPartitionBytes`` (listing.pack: each
  file counted with 4 MiB more for opening it, as Spark's file sources do), so a trigger over
  thousands of small files is a few tasks, not thousands. The directory is listed once per trigger
  and each file is opened once to check it is a capture, the first time it is seen.

* With option ``stateLocation`` (a directory beside the checkpoint), a rotation series that grows
  between triggers is stitched across them: a trigger's read of a series leaves its open
  connections' state there (carry.py), the trigger that reads the series' next file goes on from it,
  and a batch's commit lets go of the states it went on from.

Admission control (Spark 4.2+): option ``maxFilesPerTrigger`` caps the files of one micro-batch;
``trigger(availableNow=True)`` reads every file completed when the query starts, in batches of that
size, then stops. An empty directory is "nothing new".
"""

from __future__ import annotations

import os
import re
import sys
import time
from functools import partial
from typing import Iterator, Sequence

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from ..decode.status import CAPTURE_CHANGED
from ..wire.fs import local_path
from ..escape import printable
from ..listing import list_files, pack
from ..options import STREAM_KEYS, Options, StreamOptions, paths_option
from ..reader import iter_batches
from ..wire.series import different_starts, find_series, first_time, overlaps, template
from .. import carry
from ..carry import Carry
from ..rows.shapes import status_batch

try:  # Spark 4.2+: admission control and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxFiles, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older Spark: every trigger reads all that is complete
    ReadLimit = ReadAllAvailable = ReadMaxFiles = None  # type: ignore[assignment, misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

#: the offset before anything was read: no files, nothing forgotten
START = {"v": 2, "forgotten_before_ns": -1, "files": {}}
_DIGITS = re.compile(r"\d+")

#: a completed file: (modification time in ns, path, size)
Listed = tuple[int, str, int]


def completed_files(paths: list[str], opts: Options, settle_s: float, now: float | None = None,
                    checked: set[str] | None = None) -> list[Listed]:
    """Every completed capture file, oldest first, from one listing. ``checked``: files known to
    be captures already (see list_files)."""
    done, writing = _listing(paths, opts, settle_s, now, checked)
    _say_waiting(writing, settle_s)
    return done


def waiting_files(paths: list[str], opts: Options, settle_s: float, now: float | None = None) -> list[Listed]:
    """The capture files not complete yet (each the newest of its rotation series, changed less than
    ``settle_s`` ago), oldest first: each counts once unchanged ``settle_s`` after its modification
    time, or once a newer file of its series appears."""
    return sorted(_listing(paths, opts, settle_s, now, None)[1])


def _listing(paths: list[str], opts: Options, settle_s: float, now: float | None,
             checked: set[str] | None) -> tuple[list[Listed], set[Listed]]:
    stats: dict[str, tuple[int, int]] = {}
    files = list_files(paths, opts.path_glob_filter, opts.endpoint_url, allow_empty=True, checked=checked,
                       stats=stats)
    stamped = [(stats[f][1], f, stats[f][0]) for f in files]
    newest: dict[tuple[str, str], Listed] = {}
    for x in stamped:
        head, name = os.path.split(x[1])
        key = (head, _DIGITS.sub("#", name))
        if key not in newest or x[:2] > newest[key][:2]:
            newest[key] = x
    now_ns = int((time.time() if now is None else now) * 1e9)
    writing = {v for v in newest.values() if now_ns - v[0] < settle_s * 1e9}
    return sorted(x for x in stamped if x not in writing), writing


_said: list[frozenset] = [frozenset()]


def _say_waiting(writing: set[Listed], settle_s: float) -> None:
    """One line on stderr (Spark's log) when files wait to be complete, each time that set changes:
    a query right after ``cp`` otherwise reads nothing and says nothing."""
    names = frozenset(p for _m, p, _n in writing)
    if names and names != _said[0]:
        first = sorted(names)[0]
        print(f"kafkawire stream: {len(names)} file(s) wait until unchanged for completeAfterSeconds ({settle_s:g} s)"
              f" as the newest of their rotation series, e.g. {printable(first)}; files copied in whole can be read at "
              "once with completeAfterSeconds=0", file=sys.stderr, flush=True)
    _said[0] = names


# -- offsets: the files read so far, by directory -----------------------------------------------------
def _files(offset: dict) -> dict[str, tuple[int, int]]:
    """path -> (size, mtime_ns) of the files an offset says were read."""
    return {os.path.join(d, name) if d else name: (v[0], v[1])
            for d, names in offset.get("files", {}).items() for name, v in names.items()}


def _offset(files: dict[str, tuple[int, int]], forgotten_before_ns: int) -> dict:
    by_dir: dict[str, dict[str, list[int]]] = {}
    for path in sorted(files):
        d, name = os.path.split(path) if "/" in path else ("", path)
        by_dir.setdefault(d, {})[name] = list(files[path])
    return {"v": 2, "forgotten_before_ns": forgotten_before_ns, "files": by_dir}


def _changed(was: tuple[int, int], now: tuple[int, int]) -> str:
    how = []
    if now[0] != was[0]:
        how.append(f"size {was[0]} -> {now[0]} bytes")
    if now[1] != was[1]:
        how.append(f"modified {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(now[1] / 1e9))} UTC")
    return f"changed after it was read ({', '.join(how)}): not read again; the rows of what was read stay"


class CaptureFiles(InputPartition):
    """Files of one micro-batch read by one task, and the files it reports as changed; with option
    stateLocation, where each run of files takes and leaves its series' state (carry.Carry; an empty
    run: a state whose connections end)."""

    def __init__(self, paths: list[str | tuple[str, ...]], changed: Sequence[tuple[str, str]] = (),
                 carries: Sequence[Carry | None] = ()):
        super().__init__((tuple(paths), tuple(changed)))
        self.paths = list(paths)
        self.changed = list(changed)  # (path, detail)
        self.carries = list(carries) or [None] * len(self.paths)

    @property
    def path(self) -> str:  # one file's partition, as before
        first = self.paths[0]
        return first if isinstance(first, str) else first[0]


class KafkaWireStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict):
        o = {str(k).lower(): v for k, v in options.items()}
        own = StreamOptions.parse(o)
        self.settle_s = own.complete_after_seconds
        self.max_files = own.max_files_per_trigger
        self.max_age_ns = int(own.max_file_age * 1e9)
        self.opts = Options.parse({k: v for k, v in o.items() if k.replace("_", "") not in STREAM_KEYS})
        self.paths = paths_option(options)
        if not self.paths:
            raise ValueError("kafkawire: give the capture directory to load(), e.g. load('captures/')")
        for p in self.paths:
            local = local_path(p)
            if local is not None and not os.path.exists(local):
                raise FileNotFoundError(f"kafkawire: {p}: no such file or directory")
        #: option stateLocation: where each rotation series' open connections wait between triggers
        #: for the series' next file (carry.py); without it, each trigger's files are read apart
        self.state: str | None = own.state_location
        self.target: set[str] | None = None  # Trigger.AvailableNow: the files completed when it started
        self.checked: set[str] = set()  # files known to be captures: each is opened to check once

    def _completed(self, known: dict[str, tuple[int, int]] = {}) -> list[Listed]:  # noqa: B006 - read only
        self.checked.update(known)  # files read before (a restarted query) are captures
        return completed_files(self.paths, self.opts, self.settle_s, checked=self.checked)

    def initialOffset(self) -> dict:
        return _offset({}, -1)

    def getDefaultReadLimit(self):
        if ReadMaxFiles is not None and self.max_files:
            return ReadMaxFiles(self.max_files)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {p for _m, p, _n in self._completed()}

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        start = self._upgrade(start or self.initialOffset())
        seen = _files(start)
        horizon = start.get("forgotten_before_ns", -1)
        if seen:  # files more than maxFileAge older than the newest read are forgotten
            horizon = max(horizon, max(m for _n, m in seen.values()) - self.max_age_ns)
        listing = self._completed(seen)
        if self.target is not None:
            listing = [x for x in listing if x[1] in self.target]
        new = [x for x in listing if x[1] not in seen and x[0] >= horizon]
        changed = [x for x in listing if x[1] in seen and seen[x[1]] != (x[2], x[0])]
        if ReadMaxFiles is not None and isinstance(limit, ReadMaxFiles):
            new = new[: limit.max_files]
        if not new and not changed:
            return start
        # what was read before and is now past the bound is forgotten; this batch's files are kept
        # (the batch is what its end offset holds and its start does not)
        files = {p: v for p, v in seen.items() if v[1] >= horizon}
        for m, p, n in new + changed:
            files[p] = (n, m)
        return _offset(files, horizon)

    def _upgrade(self, offset: dict) -> dict:
        """An offset of the first streaming source (the last file read, by modification time then
        name): every completed file up to it counts as read."""
        if "mtime_ns" not in offset:
            return offset
        mark = (offset["mtime_ns"], offset["path"])
        files = {p: (n, m) for m, p, n in self._completed() if (m, p) <= mark}
        return _offset(files, -1)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        before, after = _files(self._upgrade(start)), _files(end)
        new = sorted((v[1], p, v[0]) for p, v in after.items() if p not in before)
        changed = [(p, _changed(before[p], v)) for p, v in sorted(after.items()) if p in before and before[p] != v]
        sizes = {p: n for _m, p, n in new}
        runs = find_series([p for _m, p, _n in new], self.opts.endpoint_url) if self.opts.stitch and len(new) > 1 \
            else [[p] for _m, p, _n in new]
        carries, flush = self._carries(runs, before, after)
        groups = pack([(i, sum(sizes[p] for p in run)) for i, run in enumerate(runs)], self.opts.max_partition_bytes)
        if changed or flush:  # their rows ride with the first group
            groups = groups or [[]]
        units: list[str | tuple[str, ...]] = [run[0] if len(run) == 1 else tuple(run) for run in runs]
        return [CaptureFiles([units[i] for i in g] + ([()] * len(flush) if k == 0 else []),
                             changed if k == 0 else (), [carries[i] for i in g] + (flush if k == 0 else []))
                for k, g in enumerate(groups)]

    def _carries(self, runs: list[list[str]], before: dict, after: dict
                 ) -> tuple[list[Carry | None], list[Carry | None]]:
        """With option stateLocation: for each run of new files, the state it goes on from (the state
        an earlier trigger left at the end of a file of its series read before, the latest that it
        does not overlap in time: series.overlaps) and where it leaves its own; and the states whose
        series has no file remembered any more (maxFileAge): their connections end in this batch."""
        if self.state is None or not self.opts.stitch:
            return [None] * len(runs), []
        endpoint = self.opts.endpoint_url
        found = carry.entries(self.state, endpoint)
        used: set[str] = set()
        out: list[Carry | None] = []
        for run in runs:
            shape, first = template(run[0]), first_time(run[0], endpoint)
            best: tuple[str, dict] | None = None
            for key, e in found.items():
                began, last = e.get("began"), e.get("last")
                if key in used or e.get("template") != list(shape) or e.get("last_file") not in before or \
                        first is None or began is None or last is None or \
                        overlaps(began, last, first, partial(different_starts, str(e["last_file"]), run[0], endpoint)):
                    continue
                if best is None or last > best[1]["last"]:
                    best = (key, e)
            if best is not None:
                used.add(best[0])
            out.append(carry.Carry(None if best is None else carry.state_path(self.state, best[0]),
                                   carry.state_path(self.state, carry.key_of(run[-1])), endpoint,
                                   continues=None if best is None else best[0], template=shape))
        flush: list[Carry | None] = [carry.Carry(carry.state_path(self.state, key), None, endpoint)
                                     for key, e in sorted(found.items())
                                     if key not in used and e.get("last_file") not in after]
        return out, flush

    def read(self, partition: CaptureFiles) -> Iterator:  # type: ignore[override]  # partitions are ours
        for path, detail in partition.changed:
            yield status_batch(self.opts.rows, path, CAPTURE_CHANGED, detail)
        for run, held in zip(partition.paths, partition.carries):
            try:
                yield from iter_batches(run, self.opts, carry=held)
            except FileNotFoundError as e:  # gone between the listing and its task
                gone = run if isinstance(run, str) else str(e.filename or run[0])
                yield status_batch(self.opts.rows, gone, CAPTURE_CHANGED,
                                   "removed before it was read: its rows are not in the stream")

    def commit(self, end: dict) -> None:
        """A batch is done: the states it went on from, and those whose connections it ended, are
        let go (a batch run again before its commit finds them still there)."""
        if self.state is None:
            return
        done = _files(end)
        found = carry.entries(self.state, self.opts.endpoint_url)
        continued = {e.get("continues") for e in found.values() if e.get("last_file") in done}
        for key, e in found.items():
            if e.get("last_file") not in done or key in continued:
                carry.delete(self.state, key, self.opts.endpoint_url)
