"""Decode once, write every row shape: the audit job's read of its captures.

A read of one shape (``spark.read.format("kafkawire")``) decodes the captures for that shape alone,
so four shapes were four decodes. :func:`decode_to_parquet` (and :class:`Decode`, begun at once and
waited for later) plans the files into tasks as the data source does (listing.plan: small files
packed, large ones in shares), and each task decodes its files once (reader.iter_shapes) and writes
each shape's batches to a Parquet file of its own, as Spark's own writers do; the caller gets back
only counts. While the tasks run, :class:`Progress` says every ``every`` seconds how many files and
bytes are done and, once a phase has run long enough to tell, about how long is left.

The executor is a parameter (EXECUTORS): ``here`` (the tasks one after another in this process:
a few small files), ``processes`` (processes of this machine, begun before a local Spark starts so
that the decode and the JVM's start overlap) or ``spark`` (Spark tasks: a cluster, object
storage). Whichever runs them, the rows are those of the same ``scan_task`` calls.

The tasks write into the run's own folder, ``OUT/rows/.run-<id>/<shape>/`` (a name Spark's and
pyarrow's readers pass over); once every task has succeeded, each shape's folder replaces
``OUT/rows/<shape>/``. A run that fails leaves the last run's rows as they were and no part of its
own.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Callable

from ..listing import Unit, list_files, plan
from ..options import Options
from ..wire.fs import is_uri, local_path, resolve

#: the row shapes the audit job reads (records without their payload)
SHAPES = ("exchanges", "connections", "partitions", "records")
EXECUTORS = ("here", "processes", "spark")
GROUP = "kafkawire-scan"


def usable_cpus() -> int:
    """The cores this process may run on (its affinity where the system has one, as Linux does)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (macOS, Windows)
        return os.cpu_count() or 1


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"


def time_left(started: float, done: int, total: int, after: float = 20.0) -> str:
    """``, about N s left`` (or ``min``) at the pace since ``started`` (time.monotonic), once ``after``
    seconds have passed with some of ``total`` done; else nothing."""
    elapsed = time.monotonic() - started
    if not done or done >= total or elapsed < after:
        return ""
    left = elapsed * (total - done) / done
    return f", about {left / 60:.0f} min left" if left >= 90 else f", about {left:.0f} s left"


class Progress:
    """A thread that reports tasks (``tasks()``: done, of all): done of all, the input bytes they
    stand for (tasks are planned to about equal bytes), and, after ``estimate_after`` seconds with
    at least one task done, the time left at the pace so far."""

    def __init__(self, tasks: Callable[[], tuple[int, int]], what: str, total_bytes: int,
                 say: Callable[[str], None], every: float = 10.0, estimate_after: float = 20.0):
        self.tasks = tasks
        self.what, self.total, self.say = what, total_bytes, say
        self.every, self.estimate_after = every, estimate_after
        self.start = time.monotonic()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Progress":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()

    def line(self) -> str | None:
        done, total = self.tasks()
        if not total:
            return None
        return (f"{self.what}: {done} of {total} tasks, about {_size(self.total * done / total)} of "
                f"{_size(self.total)}{time_left(self.start, done, total, self.estimate_after)}")

    def _run(self) -> None:
        while not self.done.wait(self.every):
            text = self.line()
            if text:
                self.say(text)


def spark_tasks(spark, group: str) -> Callable[[], tuple[int, int]]:
    """A Spark job group's tasks, (done, of all), from its status tracker."""
    tracker = spark.sparkContext.statusTracker()

    def tasks() -> tuple[int, int]:
        done = total = 0
        for job in tracker.getJobIdsForGroup(group):
            info = tracker.getJobInfo(job)
            for stage in (info.stageIds if info else ()):
                s = tracker.getStageInfo(stage)
                if s is not None:
                    done += s.numCompletedTasks
                    total += s.numTasks
        return done, total

    return tasks


def _writer_for(out: str, shape: str, name: str, schema, folder: str):
    """A Parquet writer of OUT/rows/<folder>/<shape>/<name> (a local path or a URI)."""
    import pyarrow.parquet as pq

    local = local_path(out)
    if local is not None:
        where = os.path.join(local, "rows", folder, shape)
        os.makedirs(where, exist_ok=True)
        return pq.ParquetWriter(os.path.join(where, name), schema)
    fs, base = resolve(out)
    where = f"{base.rstrip('/')}/rows/{folder}/{shape}"
    fs.create_dir(where)
    return pq.ParquetWriter(f"{where}/{name}", schema, filesystem=fs)


def _remove(out: str, rel: str) -> None:
    """Remove OUT/rows/<rel> and all under it, where it is."""
    import shutil

    local = local_path(out)
    if local is not None:
        shutil.rmtree(os.path.join(local, "rows", rel), ignore_errors=True)
        return
    fs, base = resolve(out)
    try:
        fs.delete_dir(f"{base.rstrip('/')}/rows/{rel}")
    except (FileNotFoundError, OSError):
        pass


def _remove_stale(out: str) -> None:
    """Remove the folders of runs that were killed before they could clean up (OUT/rows/.run-*): one
    run at a time writes an output directory (its lock, audits/output.py)."""
    local = local_path(out)
    if local is not None:
        try:
            names = os.listdir(os.path.join(local, "rows"))
        except OSError:
            return
    else:
        import pyarrow.fs as pafs

        fs, base = resolve(out)
        try:
            names = [i.base_name for i in fs.get_file_info(pafs.FileSelector(f"{base.rstrip('/')}/rows",
                                                                             allow_not_found=True))]
        except OSError:
            return
    for name in names:
        if name.startswith(".run-"):
            _remove(out, name)


def _publish(out: str, folder: str, shapes: tuple[str, ...]) -> None:
    """Each shape's rows of the run's folder in place of the last run's (OUT/rows/<shape>/; a shape
    without rows leaves none), then the run's folder removed."""
    local = local_path(out)
    for shape in shapes:
        _remove(out, shape)
        if local is not None:
            staged = os.path.join(local, "rows", folder, shape)
            if os.path.isdir(staged):
                os.replace(staged, os.path.join(local, "rows", shape))
            continue
        import pyarrow.fs as pafs

        fs, base = resolve(out)
        root = f"{base.rstrip('/')}/rows"
        staged = f"{root}/{folder}/{shape}"
        files = [i for i in fs.get_file_info(pafs.FileSelector(staged, allow_not_found=True))
                 if i.type == pafs.FileType.File]
        if files:
            fs.create_dir(f"{root}/{shape}")
        for info in files:  # (object storage moves files, not folders)
            fs.move(info.path, f"{root}/{shape}/{info.base_name}")
    _remove(out, folder)


def scan_task(units: list[Unit], options: dict, out: str, shapes: tuple[str, ...], name: str,
              folder: str) -> dict[str, int]:
    """One task: its files decoded once, each shape's rows to OUT/rows/<folder>/<shape>/<name>; the
    rows written per shape."""
    from ..reader import iter_shapes
    from ..rows.table import arrow_schema

    opts = Options.parse(options)
    counts = dict.fromkeys(shapes, 0)
    writers: dict = {}
    try:
        for path, share in units:
            for shape, batch in iter_shapes(path, opts, shapes, share):
                w = writers.get(shape)
                if w is None:
                    w = writers[shape] = _writer_for(out, shape, name, arrow_schema(shape), folder)
                w.write_batch(batch)
                counts[shape] += batch.num_rows
    finally:
        for w in writers.values():
            w.close()
    return counts


class _Scan:
    """The tasks of a read of the captures into every shape: its files planned (listing.plan), and
    the run's own folder they write into (OUT/rows/.run-<id>/)."""

    def __init__(self, paths, options: dict, out: str, shapes: tuple[str, ...]):
        opts = Options.parse(options)
        stats: dict[str, tuple[int, int]] = {}
        files = list_files(paths, opts.path_glob_filter, opts.endpoint_url, stats=stats)
        self.files = len(files)
        self.parts = plan(files, opts, stats)
        self.total = sum(stats[f][0] if f in stats else 0 for f in files)
        if not is_uri(out) or out.startswith("file:"):
            out = os.path.abspath(local_path(out) or out)
        self.out, self.shapes, self.run = out, shapes, uuid.uuid4().hex[:8]
        _remove_stale(out)
        self.folder = f".run-{self.run}"
        self.plain = {k: str(v) for k, v in options.items()}

    def task(self, index: int) -> dict[str, int]:
        return scan_task(self.parts[index], self.plain, self.out, self.shapes,
                         f"part-{index:05d}-{self.run}.parquet", self.folder)


class Decode:
    """The captures decoded once into OUT/rows/<shape>/ for each of ``shapes``, by ``executor``
    (EXECUTORS; ``spark``: the SparkSession's tasks; ``processes``: ``workers`` processes of this
    machine, forked at once, before Spark starts a JVM or a thread). :meth:`wait` reports progress
    (``say``, see Progress), puts the rows in place once every task succeeded and returns the rows
    written per shape; a task that failed raises there, and the last run's rows stay."""

    def __init__(self, paths, options: dict, out: str, shapes: tuple[str, ...] = SHAPES, executor: str = "here",
                 spark=None, workers: int | None = None):
        if executor not in EXECUTORS or (executor == "spark") != (spark is not None):
            raise ValueError(f"executor {executor!r}: one of {', '.join(EXECUTORS)} (spark with a SparkSession)")
        self.scan = _Scan(paths, options, out, shapes)
        self.executor, self.spark = executor, spark
        self.futures: list = []
        self.pool = None
        self.workers = 1
        if executor == "processes":
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                                  else None)
            self.workers = max(1, min(workers or usable_cpus(), len(self.scan.parts)))
            self.pool = ProcessPoolExecutor(self.workers, mp_context=context, initializer=_behind_spark)
            self.futures = [self.pool.submit(_local_task, self.scan, i) for i in range(len(self.scan.parts))]
        self.done = 0

    def wait(self, say: Callable[[str], None] | None = None) -> dict[str, int]:
        try:
            tasks = spark_tasks(self.spark, GROUP) if self.executor == "spark" else self._tasks
            if say is None:
                results = self._run()
            else:
                with Progress(tasks, "reading the captures", self.scan.total, say):
                    results = self._run()
            _publish(self.scan.out, self.scan.folder, self.scan.shapes)
        finally:
            self.close()
        counts = dict.fromkeys(self.scan.shapes, 0)
        for r in results:
            for shape, n in r.items():
                counts[shape] += n
        return counts

    def _run(self) -> list[dict[str, int]]:
        if self.executor == "processes":
            return [f.result() for f in self.futures]
        if self.executor == "here":
            out = []
            for i in range(len(self.scan.parts)):
                out.append(self.scan.task(i))
                self.done += 1
            return out
        scan = self.scan

        def task(index: int, _rows) -> list[dict[str, int]]:
            return [scan.task(index)]

        sc = self.spark.sparkContext
        sc.setJobGroup(GROUP, f"kafkawire: decode {scan.files} capture files once into {', '.join(scan.shapes)}")
        try:
            return sc.parallelize(range(len(scan.parts)), max(1, len(scan.parts))).mapPartitionsWithIndex(task) \
                .collect()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)

    def _tasks(self) -> tuple[int, int]:
        done = sum(f.done() for f in self.futures) if self.futures else self.done
        return done, len(self.scan.parts)

    def close(self) -> None:
        """Stop: tasks not begun are not run (a job that failed before it waited), and what the run
        wrote and did not put in place is removed."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        _remove(self.scan.out, self.scan.folder)


def decode_to_parquet(paths, options: dict, out: str, shapes: tuple[str, ...] = SHAPES, executor: str = "here",
                      spark=None, say: Callable[[str], None] | None = None) -> dict[str, int]:
    """Decode the captures once into OUT/rows/<shape>/ for each shape, replacing the last run's rows
    once every task succeeded (see Decode); the rows written per shape."""
    return Decode(paths, options, out, shapes, executor, spark).wait(say)


def _behind_spark() -> None:
    """A decoding process (executor ``processes``) yields the cores to Spark's start, which is one
    JVM's work after another and so the longer road to the audits: the decode takes what it leaves,
    and both cores once it is up (the job waits for the rows then)."""
    import os

    try:
        os.nice(10)
    except OSError:  # (not allowed here: the same decode, at the same priority)
        pass


def _local_task(scan: _Scan, index: int) -> dict[str, int]:
    return scan.task(index)
