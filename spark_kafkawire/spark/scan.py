"""Decode once, write every row shape: the audit job's read of its captures.

A read of one shape (``spark.read.format("kafkawire")``) decodes the captures for that shape alone,
so four shapes were four decodes. :func:`write_shapes` plans the files into tasks as the data source
does (listing.plan: small files packed, large ones in shares), and each task decodes its files once
(reader.iter_shapes) and writes each shape's batches to a Parquet file of its own under
``OUT/rows/<shape>/``, as Spark's own writers do; the driver gets back only counts. While the tasks
run, :class:`Progress` says every ``every`` seconds how many files and bytes are done and, once a
phase has run long enough to tell, about how long is left.

The same tasks run as Spark tasks (:func:`write_shapes`) or, for local captures read by a job that
starts its own local Spark, in processes of this machine (:class:`LocalScan`), started before
Spark is so that the decode and the JVM's start overlap. Either way the rows are those of the same
``scan_task`` calls.
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

SHAPES = ("exchanges", "connections", "partitions", "records")
GROUP = "kafkawire-scan"


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


def _writer_for(out: str, shape: str, name: str, schema):
    """A Parquet writer of OUT/rows/<shape>/<name> (a local path or a URI)."""
    import pyarrow.parquet as pq

    local = local_path(out)
    if local is not None:
        folder = os.path.join(local, "rows", shape)
        os.makedirs(folder, exist_ok=True)
        return pq.ParquetWriter(os.path.join(folder, name), schema)
    fs, base = resolve(out)
    folder = f"{base.rstrip('/')}/rows/{shape}"
    fs.create_dir(folder)
    return pq.ParquetWriter(f"{folder}/{name}", schema, filesystem=fs)


def _clear(out: str, shapes: tuple[str, ...]) -> None:
    """Remove the rows a run before wrote (the rows describe this run's captures only)."""
    import shutil

    local = local_path(out)
    for shape in shapes:
        if local is not None:
            shutil.rmtree(os.path.join(local, "rows", shape), ignore_errors=True)
        else:
            fs, base = resolve(out)
            try:
                fs.delete_dir(f"{base.rstrip('/')}/rows/{shape}")
            except (FileNotFoundError, OSError):
                pass


def scan_task(units: list[Unit], options: dict, out: str, shapes: tuple[str, ...], name: str) -> dict[str, int]:
    """One task: its files decoded once, each shape's rows to OUT/rows/<shape>/<name>; the rows
    written per shape."""
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
                    w = writers[shape] = _writer_for(out, shape, name, arrow_schema(shape))
                w.write_batch(batch)
                counts[shape] += batch.num_rows
    finally:
        for w in writers.values():
            w.close()
    return counts


def write_shapes(spark, paths, options: dict, out: str, shapes: tuple[str, ...] = SHAPES,
                 say: Callable[[str], None] | None = None) -> dict[str, int]:
    """Decode the captures once into OUT/rows/<shape>/ for each shape (replacing what a run before
    wrote there); the rows written per shape. One Spark job of one task per input partition (see
    listing.plan); ``say``: progress lines while it runs (see Progress)."""
    scan = _Scan(paths, options, out, shapes)

    def task(index: int, _rows) -> list[dict[str, int]]:
        return [scan.task(index)]

    sc = spark.sparkContext
    sc.setJobGroup(GROUP, f"kafkawire: decode {scan.files} capture files once into {', '.join(shapes)}")
    try:
        rdd = sc.parallelize(range(len(scan.parts)), max(1, len(scan.parts))).mapPartitionsWithIndex(task)
        if say is None:
            results = rdd.collect()
        else:
            with Progress(spark_tasks(spark, GROUP), "reading the captures", scan.total, say):
                results = rdd.collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return _added(shapes, results)


class _Scan:
    """The tasks of a read of the captures into every shape: its files planned (listing.plan) and
    the rows a run before wrote removed."""

    def __init__(self, paths, options: dict, out: str, shapes: tuple[str, ...]):
        opts = Options.parse(options)
        stats: dict[str, tuple[int, int]] = {}
        files = list_files(paths, opts.path_glob_filter, opts.endpoint_url, stats=stats)
        self.files = len(files)
        self.parts = plan(files, opts, stats)
        self.total = sum(stats[f][0] if f in stats else 0 for f in files)
        if not is_uri(out) or out.startswith("file:"):
            out = os.path.abspath(local_path(out) or out)
        _clear(out, shapes)
        self.out, self.shapes, self.run = out, shapes, uuid.uuid4().hex[:8]
        self.plain = {k: str(v) for k, v in options.items()}

    def task(self, index: int) -> dict[str, int]:
        return scan_task(self.parts[index], self.plain, self.out, self.shapes,
                         f"part-{index:05d}-{self.run}.parquet")


def _added(shapes: tuple[str, ...], results: list[dict[str, int]]) -> dict[str, int]:
    counts = dict.fromkeys(shapes, 0)
    for r in results:
        for shape, n in r.items():
            counts[shape] += n
    return counts


class LocalScan:
    """:func:`write_shapes`' tasks in ``workers`` processes of this machine, begun at once (forked
    before Spark starts a JVM or a thread), for a job that reads local captures with its own local
    Spark: the decode runs while Spark starts, and no Python worker of Spark's is started for it.
    :meth:`wait` reports progress as write_shapes does and returns the rows written per shape; a
    task that failed raises there."""

    def __init__(self, paths, options: dict, out: str, shapes: tuple[str, ...], workers: int):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.scan = _Scan(paths, options, out, shapes)
        self.started = time.monotonic()
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        self.workers = max(1, min(workers, len(self.scan.parts)))
        self.pool = ProcessPoolExecutor(self.workers, mp_context=context, initializer=_behind_spark)
        self.futures = [self.pool.submit(_local_task, self.scan, i) for i in range(len(self.scan.parts))]

    def wait(self, say: Callable[[str], None] | None = None) -> dict[str, int]:
        try:
            if say is None:
                results = [f.result() for f in self.futures]
            else:
                with Progress(self._tasks, "reading the captures", self.scan.total, say):
                    results = [f.result() for f in self.futures]
        finally:
            self.close()
        return _added(self.scan.shapes, results)

    def _tasks(self) -> tuple[int, int]:
        return sum(f.done() for f in self.futures), len(self.futures)

    def close(self) -> None:
        """Stop: tasks not begun are not run (a job that failed before it waited)."""
        self.pool.shutdown(wait=True, cancel_futures=True)


def _behind_spark() -> None:
    """A LocalScan process yields the cores to Spark's start, which is one JVM's work after another
    and so the longer road to the audits: the decode takes what it leaves, and both cores once it
    is up (the job waits for the rows then)."""
    import os

    try:
        os.nice(10)
    except OSError:  # (not allowed here: the same decode, at the same priority)
        pass


def _local_task(scan: _Scan, index: int) -> dict[str, int]:
    return scan.task(index)
