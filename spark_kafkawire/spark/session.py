"""A SparkSession ready for the kafkawire source, for jobs, notebooks and tests."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


#: a local driver JVM for a job of a minute or two: the quick JIT tier only. Each of the audits' queries
#: is new generated code, and C2's compiler threads spend more on two cores compiling it than its
#: faster code wins back before the job ends (measured: docs/benchmarks.md, the audit job's JIT);
#: room for the quick tier's code, which fills its default 48 MB in such a job
_QUICK_JIT = " -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
#: ... and the parallel (throughput) collector: the default (G1) spends CPU on concurrent marking,
#: which the audits' cached rows and Arrow results (humongous allocations) start again and again;
#: the parallel collector has no concurrent work, and its pauses are as short on a heap of 1 GB
QUICK_JIT_JVM = _QUICK_JIT + " -XX:+UseParallelGC"
#: a local driver JVM for a short job on small input: the quick JIT tier and the serial collector
SMALL_JOB_JVM = _QUICK_JIT + " -XX:+UseSerialGC"


def spark_session(app_name: str = "kafkawire", master: str | None = None, filter_pushdown: bool = False,
                  small_job: bool = False, jvm_log: str | None = None, quick_jit: bool = False,
                  python_tasks: bool = True):
    """Get or create a SparkSession whose Python workers run this interpreter.

    Spark's workers otherwise start ``python3`` from PATH, which may lack pyarrow and this
    package. Under spark-submit the master comes from spark-submit; otherwise it is local[*].

    ``filter_pushdown=True`` sets ``spark.sql.python.filterPushdown.enabled``: filters on header and
    endpoint columns are then applied while decoding. It is off by default because Spark (4.1 to
    4.3) keeps one set of pushed filters per loaded DataFrame: a query that uses one loaded
    DataFrame twice with different filters (a self-join, a union) reads both with one filter set
    and gives wrong rows (docs/rows.md, Filters).

    ``small_job=True`` (a local session only, as the audit job starts one for small captures): the
    driver JVM uses the quick JIT tier and the serial collector (SMALL_JOB_JVM), which start and
    finish a job of small queries sooner. ``quick_jit=True`` (a local session only): the quick JIT
    tier alone and the parallel collector (QUICK_JIT_JVM), as the audit job starts one for captures
    of up to a few GB.

    ``jvm_log``: a JVM started now (and the Python workers it starts) writes its stderr to that file
    instead of this process's (the audit job's log). In a Jupyter kernel, which shows everything
    written to its stderr, a new local session does so by itself, to kafkawire-spark-*.log in the
    temporary folder (named on the session as ``kafkawire_log``): no log4j or Java notes in the cell;
    errors still reach the notebook as Python exceptions.

    ``python_tasks=False``: the caller runs no Python on Spark's workers (no kafkawire read by Spark
    tasks, no Python function in a query; the audit job that decoded its captures itself), so the
    workers' interpreter is not asked for pyarrow and this package, which starts one.
    """
    submitted = spark_submitted()
    if not submitted:  # under spark-submit, its settings (--conf spark.pyspark.python, --archives) decide
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if not submitted:
        log4j = Path(__file__).with_name("log4j2.properties")
        builder = (builder.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
                   .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}" +
                           (SMALL_JOB_JVM if small_job else QUICK_JIT_JVM if quick_jit else "")))
    builder = (
        builder
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if filter_pushdown:  # filters on headers and endpoints applied while decoding (DataSourceReader.pushFilters)
        builder = builder.config("spark.sql.python.filterPushdown.enabled", "true")
    if master or not submitted:
        builder = builder.master(master or "local[*]")
    if jvm_log is None and not submitted and "ipykernel" in sys.modules:
        jvm_log = _notebook_log()
    if jvm_log is None:
        spark = builder.getOrCreate()
    else:
        with jvm_stderr(jvm_log):
            spark = builder.getOrCreate()
        spark.kafkawire_log = jvm_log  # type: ignore[attr-defined]  # (named on the session for the user)
    spark.sparkContext.setLogLevel("ERROR")
    register(spark, python_tasks)  # explicit, in case the installed auto-registration is not visible
    return spark


def _notebook_log() -> str | None:
    """A log file for the JVM a notebook starts, or None where a session already runs (its JVM's
    stderr is what it is)."""
    import tempfile

    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        return None
    with tempfile.NamedTemporaryFile(prefix="kafkawire-spark-", suffix=".log", delete=False) as log:
        return log.name


@contextmanager
def jvm_stderr(path: str) -> Iterator[None]:
    """While inside, this process's stderr (file descriptor 2) is the file at ``path``: a JVM started
    then inherits it for its whole life; this process gets its own back after."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def register(spark, check: bool = True) -> None:
    """Register the 'kafkawire' data source with a SparkSession, after checking (``check``) that
    Spark's Python workers can import this package and pyarrow (else one line says which interpreter
    they run)."""
    from .datasource import KafkaWireDataSource

    if check:
        check_workers(spark)
    spark.dataSource.register(KafkaWireDataSource)


_checked: set[int] = set()


def check_workers(spark) -> None:
    """Fail in one line if Spark's Python workers cannot import pyarrow and this package: the
    alternative is [DATA_SOURCE_NOT_FOUND] or a task failure under a page of Java. Asked through a
    DataFrame (a Python UDF, not Arrow), so that it works on a Spark Connect session too, which has
    no SparkContext."""
    if id(spark) in _checked:
        return
    from pyspark.sql import functions as F

    try:
        exe = spark.conf.get("spark.pyspark.python", None)
    except Exception:  # noqa: BLE001 - a Connect server may not show static settings
        exe = None
    exe = exe or os.environ.get("PYSPARK_PYTHON") or "python3"

    def probe(_):  # defined here: pickled by value, so a worker without this package can run it
        import importlib

        missing = []
        for name in ("pyarrow", "spark_kafkawire"):
            try:
                importlib.import_module(name)
            except ImportError:
                missing.append(name)
        return ",".join(missing)

    try:
        try:
            sc = spark.sparkContext  # a classic session: one tiny task, no Arrow needed on the worker
        except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: a plain Python UDF
            sc = None
        if sc is not None:
            got = sc.parallelize([0], 1).map(probe).collect()[0]
        else:
            got = spark.range(1).select(F.udf(probe, "string", useArrow=False)(F.col("id")).alias("m")) \
                .collect()[0]["m"]
        missing = [m for m in got.split(",") if m]
    except Exception as e:  # the worker did not even start
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise RuntimeError(f"kafkawire: Spark's Python workers ({exe}) failed to start ({first}); set "
                           f"PYSPARK_PYTHON or spark.pyspark.python to an interpreter with pyarrow and "
                           f"spark_kafkawire, e.g. {sys.executable}") from None
    if missing:
        raise RuntimeError(f"kafkawire: Spark's Python workers run {exe}, which cannot import "
                           f"{' and '.join(missing)}; set PYSPARK_PYTHON or spark.pyspark.python to an "
                           f"interpreter that has them, e.g. {sys.executable}")
    _checked.add(id(spark))


def spark_submitted() -> bool:
    """Is this driver started by spark-submit (whose settings then decide)?"""
    return bool(os.environ.get("SPARK_ENV_LOADED") or os.environ.get("PYSPARK_GATEWAY_PORT"))
