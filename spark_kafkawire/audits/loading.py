"""The audit job's captures into rows: which executor decodes them (spark/scan.py's
decode_to_parquet: in this process, processes of this machine while Spark starts, or Spark tasks;
an --incremental run reads them as a stream's micro-batches) and the rows the audits read."""

from __future__ import annotations

from typing import Callable

from ..spark.scan import SHAPES  # (the rows the audits read; records without payload)

SMALL_INPUT = 64 << 20  # local captures up to this size in all: decoded by the driver, rows kept in memory
QUICK_JIT_INPUT = 2 << 30  # local captures up to this size in all: the driver JVM's quick JIT tier alone (session.py)
#: rows of a shape per partition the audits read: each of their queries pays per task (scheduling,
#: a task's start, its share of every shuffle), and the audits run several queries at once, which
#: keeps the cores busy without splitting a few thousand rows across them
ROWS_PER_TASK = 500_000


def local_within(captures: list[str], size: int | None, limit: int = SMALL_INPUT) -> bool:
    """Are the captures local files of ``limit`` bytes or less in all (``size``: see input_bytes;
    None: not known), read by a job not started by spark-submit (whose cluster then decodes)?"""
    from ..spark.session import spark_submitted
    from ..wire.fs import is_uri

    if any(is_uri(c) and not c.startswith("file:") for c in captures) or spark_submitted() or limit <= 0:
        return False
    return size is not None and size <= limit


def input_bytes(args, options: dict) -> int | None:
    """The captures' bytes in all, from one listing (None where they cannot be listed here)."""
    import spark_kafkawire

    stats: dict = {}
    try:
        spark_kafkawire.list_files(list(args.captures), spark_kafkawire.Options.parse(options).path_glob_filter,
                                   stats=stats)
    except (OSError, ValueError, spark_kafkawire.CaptureError):
        return None
    return sum(size for size, _mtime in stats.values())


def local_scan(args, out: str, options: dict, size: int | None, small: bool, say: Callable[[str], None]):
    """The decode (scan.Decode, executor ``processes``) of local captures read by a job whose Spark
    is local (not spark-submit's), begun now, before Spark starts; else None (Spark tasks decode, or
    this process: ``small``)."""
    import sys

    if args.incremental or small or not local_within(args.captures, size, sys.maxsize):
        return None
    from ..spark.scan import Decode

    here = Decode(args.captures, options, out, SHAPES, "processes")
    say(f"reading the captures here while Spark starts: {len(here.futures)} tasks in {here.workers} processes")
    return here


def load_rows(spark, args, output, options: dict[str, str], say: Callable[[str], None], small: bool = False,
              here=None):
    """Decode the captures into out/rows/<shape> (appending only new files with --incremental)
    and return the rows the audits read, and how many new rows were read (None: not counted).
    ``here``: the scan.Decode already decoding them (local captures, see run)."""
    out = output.uri
    new: int | None = None
    say("Spark started" + ("; the captures are being read" if here is not None else ", reading the captures"))
    if args.incremental:
        for shape in SHAPES:
            # (stateLocation: a rotation series that grows between runs is stitched across them)
            reader = spark.readStream.format("kafkawire").options(**options).option("rows", shape) \
                .option("completeAfterSeconds", str(args.complete_after_seconds)) \
                .option("stateLocation", f"{args.checkpoint}/series/{shape}")
            if args.max_files_per_trigger:
                reader = reader.option("maxFilesPerTrigger", str(args.max_files_per_trigger))
            q = (reader.load(args.captures[0]).writeStream.format("parquet").option("path", f"{out}/rows/{shape}")
                 .option("checkpointLocation", f"{args.checkpoint}/{shape}").trigger(availableNow=True).start())
            q.awaitTermination()
            new = (new or 0) + sum(p.numInputRows or 0 for p in q.recentProgress)
    else:  # each task decodes its files once into every shape: here, in processes, or Spark tasks
        from ..spark.scan import decode_to_parquet

        if here is not None:
            counts = here.wait(say)
        elif small:  # a few small local files: decoded here (no Python workers to start), the same rows
            counts = decode_to_parquet(args.captures, options, out, SHAPES, "here")
        else:
            counts = decode_to_parquet(args.captures, options, out, SHAPES, "spark", spark, say)
        say("rows written: " + ", ".join(f"{shape} {n:,}" for shape, n in counts.items()))
        return _read(spark, out, counts), new
    return _read(spark, out), new


def _read(spark, out: str, counts: dict[str, int] | None = None):
    """The Rows of OUT/rows/ (``counts``: the rows written per shape). Each shape's reader is a few
    calls into a JVM just started (listing, planning): made at once, on every core."""
    from concurrent.futures import ThreadPoolExecutor

    from . import Rows

    def read(shape: str):
        return _rows(spark, f"{out}/rows/{shape}", shape, None if counts is None else counts.get(shape))

    with ThreadPoolExecutor(len(SHAPES)) as pool:
        return Rows(*pool.map(read, SHAPES))


def no_rows(spark, schema: str):
    """An empty frame of ``schema`` that no Python worker makes: Spark turns a Python list, even an
    empty one, into tasks that run Python (the job that decodes here runs none, see job._session);
    an RDD of no partitions has no task."""
    return spark.createDataFrame(spark.sparkContext.emptyRDD(), schema)


def tasks_for(rows: int) -> int:
    """The partitions the audits read ``rows`` rows of a shape in (ROWS_PER_TASK each, at least one)."""
    return max(1, -(-rows // ROWS_PER_TASK))


def _rows(spark, path: str, shape: str, count: int | None = None):
    """The rows written so far (none yet: an empty frame of the shape, e.g. an incremental run
    over an empty directory); ``count``: how many were written, read in tasks_for(count)
    partitions where Spark's listing would make more (it splits files by bytes and cores)."""
    from pyspark.errors import AnalysisException

    from ..rows.table import ddl

    try:
        frame = spark.read.schema(ddl(shape)).parquet(path)
    except AnalysisException:
        return no_rows(spark, ddl(shape))
    frame = _named(frame)
    return frame if count is None else frame.coalesce(tasks_for(count))


def _named(frame):
    """Rows written by a version before connection_time (an earlier night's): their connections are
    named by their four endpoint columns alone (connection_time 1970-01-01), in every shape alike,
    so that they still group and join as one connection each."""
    from pyspark.sql import functions as F

    return frame.withColumn("connection_time", F.coalesce("connection_time", F.lit(0).cast("timestamp")))
