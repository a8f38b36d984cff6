"""Decode once: every row shape from one pass over a capture (reader.iter_shapes, rows/tee.py) and
the audit job's read that writes them all from Spark tasks (spark/scan.py). The truth is each
shape's own read (iter_batches, read_capture): the rows must be exactly those, row for row."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import PUBLIC, SAMPLES, shared_files
from spark_kafkawire import read_capture
from spark_kafkawire.reader import iter_batches, iter_shapes
from spark_kafkawire.rows.table import arrow_schema

TLS = SAMPLES.parent / "tests" / "tls"
SHAPES = ("exchanges", "connections", "partitions", "records", "messages")
CAPTURES = [*sorted(SAMPLES.glob("*.pcap*")), *sorted(TLS.glob("*.pcap")),
            *shared_files(PUBLIC, (".pcap", ".pcapng"))[:12]]


def _options(path) -> dict:
    key = path.with_suffix(".keylog")
    return {"tlsKeyLog": str(key)} if key.exists() else {}


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_one_pass_makes_each_shape_s_own_rows(path):
    opts = _options(path)
    got: dict[str, list] = {s: [] for s in SHAPES}
    for shape, batch in iter_shapes(str(path), opts, SHAPES):
        got[shape].append(batch)
    for shape in SHAPES:
        ours = pa.Table.from_batches(got[shape], schema=arrow_schema(shape))
        alone = pa.Table.from_batches(list(iter_batches(str(path), {**opts, "rows": shape})),
                                      schema=arrow_schema(shape))
        assert ours.equals(alone), (path.name, shape, ours.num_rows, alone.num_rows)


def test_one_pass_in_shares_and_in_small_batches():
    path = SAMPLES / "tansu-confluent-codecs.pcap"
    for share in ((0, 3), (1, 3), (2, 3)):
        got: dict[str, list] = {s: [] for s in SHAPES}
        for shape, batch in iter_shapes(str(path), {"batchSize": 7}, SHAPES, share):
            got[shape].append(batch)
        for shape in SHAPES:
            alone = list(iter_batches(str(path), {"rows": shape, "batchSize": 7}, share=share))
            assert sum(b.num_rows for b in got[shape]) == sum(b.num_rows for b in alone)
            assert pa.Table.from_batches(got[shape], schema=arrow_schema(shape)).equals(
                pa.Table.from_batches(alone, schema=arrow_schema(shape)))


def test_unknown_shapes_are_refused():
    with pytest.raises(ValueError, match="choose from"):
        list(iter_shapes(str(SAMPLES / "mock-kcat.pcap"), {}, ("exchanges", "nope")))


def _written_are_read_captures(out, counts: dict[str, int], shapes) -> None:
    """OUT/rows/<shape> holds exactly read_capture's rows of the samples, and counts says how many."""
    for shape in shapes:
        want = read_capture(SAMPLES, rows=shape)
        got = pq.read_table(out / "rows" / shape, schema=arrow_schema(shape))
        assert counts[shape] == want.num_rows == got.num_rows > 0
        cols = [c for c in want.column_names if c not in ("request", "response")]
        assert sorted(map(str, got.select(cols).to_pylist())) == sorted(map(str, want.select(cols).to_pylist())), \
            shape


@pytest.mark.spark
def test_the_job_s_read_writes_every_shape_from_tasks(spark, tmp_path):
    """Several files packed into several tasks (a small maxPartitionBytes) and one file in shares:
    OUT/rows/<shape> holds exactly read_capture's rows of each shape."""
    from spark_kafkawire.spark.scan import SHAPES as JOB_SHAPES, decode_to_parquet

    opts = {"maxPartitionBytes": "300000", "minPartitions": "4"}
    lines: list[str] = []
    counts = decode_to_parquet([str(SAMPLES)], opts, str(tmp_path), JOB_SHAPES, "spark", spark, lines.append)
    _written_are_read_captures(tmp_path, counts, JOB_SHAPES)
    # a second run replaces the rows, never appends to them
    decode_to_parquet([str(SAMPLES / "mock-kcat.pcap")], {}, str(tmp_path), JOB_SHAPES, "spark", spark)
    assert pq.read_table(tmp_path / "rows" / "exchanges").num_rows == read_capture(SAMPLES / "mock-kcat.pcap").num_rows


def test_progress_says_tasks_bytes_and_time_left():
    from spark_kafkawire.spark.scan import Progress, spark_tasks

    class Stage:
        numCompletedTasks, numTasks = 3, 12

    class Job:
        stageIds = [1]

    class Tracker:
        def getJobIdsForGroup(self, group):
            return [7]

        def getJobInfo(self, job):
            return Job()

        def getStageInfo(self, stage):
            return Stage()

    class Context:
        def statusTracker(self):
            return Tracker()

    class Spark:
        sparkContext = Context()

    p = Progress(spark_tasks(Spark(), "g"), "reading the captures", 4_000_000_000, print, estimate_after=20)
    import time

    p.start = time.monotonic() - 60  # 3 of 12 tasks in 60 s: 180 s left
    assert p.line() == "reading the captures: 3 of 12 tasks, about 1.0 GB of 4.0 GB, about 3 min left"
    p.start = time.monotonic() - 5  # too soon to tell
    assert p.line() == "reading the captures: 3 of 12 tasks, about 1.0 GB of 4.0 GB"


def test_the_job_s_local_read_writes_every_shape_from_processes_here(tmp_path):
    """Executor ``processes`` (local captures, the job's own local Spark): the same tasks in
    processes of this machine, begun before Spark starts. OUT/rows/<shape> holds exactly
    read_capture's rows of each shape; progress is said in tasks and bytes; a second run replaces
    the rows; a task that fails (FAILFAST on a file cut short) fails the wait, naming the file, and
    leaves the last run's rows as they were, with no part of its own anywhere under OUT/rows."""
    from spark_kafkawire.spark.scan import SHAPES as JOB_SHAPES, Decode

    opts = {"maxPartitionBytes": "300000", "minPartitions": "4"}
    lines: list[str] = []
    scan = Decode([str(SAMPLES)], opts, str(tmp_path), JOB_SHAPES, "processes", workers=2)
    assert scan.workers == 2 and len(scan.futures) >= 4
    counts = scan.wait(lines.append)
    assert scan._tasks() == (len(scan.futures), len(scan.futures))  # what its progress lines count
    _written_are_read_captures(tmp_path, counts, JOB_SHAPES)
    Decode([str(SAMPLES / "mock-kcat.pcap")], {}, str(tmp_path), JOB_SHAPES, "processes", workers=2).wait()
    kept = read_capture(SAMPLES / "mock-kcat.pcap").num_rows
    assert pq.read_table(tmp_path / "rows" / "exchanges").num_rows == kept
    src = SAMPLES / "tansu-confluent-codecs.pcap"
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
    before = sorted(str(p) for p in (tmp_path / "rows").rglob("*"))
    for executor in ("processes", "here"):
        with pytest.raises(Exception, match=r"cut.pcap: capture_damaged"):
            Decode([str(SAMPLES / "mock-kcat.pcap"), str(cut)], {"mode": "FAILFAST"}, str(tmp_path), JOB_SHAPES, executor).wait()
        assert sorted(str(p) for p in (tmp_path / "rows").rglob("*")) == before, executor
        assert pq.read_table(tmp_path / "rows" / "exchanges").num_rows == kept


def test_the_in_process_executor_writes_the_same_rows(tmp_path):
    """Executor ``here`` (a few small local files, read by the job's driver): the same rows; the
    folder of a run killed before it cleaned up is removed."""
    from spark_kafkawire.spark.scan import SHAPES as JOB_SHAPES, decode_to_parquet

    killed = tmp_path / "rows" / ".run-0badf00d" / "exchanges"  # (a run killed before it cleaned up)
    killed.mkdir(parents=True)
    (killed / "part-00000-0badf00d.parquet").write_bytes(b"PAR1")
    counts = decode_to_parquet([str(SAMPLES)], {"maxPartitionBytes": "300000"}, str(tmp_path), JOB_SHAPES, "here")
    _written_are_read_captures(tmp_path, counts, JOB_SHAPES)
    assert not [p for p in (tmp_path / "rows").iterdir() if p.name.startswith(".")]
