"""The streaming source's choice of files, without Spark: which files of a rotating directory are
complete, in which order, and how offsets and admission control walk them. (tests/test_audits.py
runs it in Spark with Trigger.AvailableNow.)"""

from __future__ import annotations

import os
import shutil
import time

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles

from conftest import SAMPLES
from spark_kafkawire.reader import Options
from spark_kafkawire.spark.stream import START, KafkaWireStreamReader, completed_files

SAMPLE = SAMPLES / "mock-kcat.pcap"


def _names(parts) -> list[str]:
    return [os.path.basename(f) for p in parts for f in p.paths]


def _put(d, name, age_s, now):
    shutil.copy(SAMPLE, d / name)
    os.utime(d / name, (now - age_s, now - age_s))


def test_newest_of_a_rotation_series_waits_until_it_settles(tmp_path):
    now = time.time()
    _put(tmp_path, "cap.pcap", 300, now)
    _put(tmp_path, "cap.pcap1", 200, now)
    _put(tmp_path, "cap.pcap2", 5, now)  # tcpdump -C is writing this one
    _put(tmp_path, "other-20261122.pcap", 100, now)  # a series of its own, idle for 100 s
    names = lambda files: [os.path.basename(f) for _m, f, _n in files]  # noqa: E731
    got = completed_files([str(tmp_path)], Options(), settle_s=60, now=now)
    assert names(got) == ["cap.pcap", "cap.pcap1", "other-20261122.pcap"]  # oldest first
    assert names(completed_files([str(tmp_path)], Options(), settle_s=0, now=now))[-1] == "cap.pcap2"
    assert completed_files([str(tmp_path / "cap.pcap2")], Options(), settle_s=60, now=now) == []


def test_an_empty_directory_is_nothing_new_and_a_missing_one_an_error(tmp_path):
    reader = KafkaWireStreamReader({"path": str(tmp_path)})
    start = reader.initialOffset()
    assert start == START and reader.latestOffset(start, ReadAllAvailable()) == start
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        KafkaWireStreamReader({"path": str(tmp_path / "nothing-here")})
    for bad in ({"maxFilesPerTrigger": "0"}, {"completeAfterSeconds": "-1"}, {"maxFilesPerTrigger": "x"},
                {"maxFileAge": "a week"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            KafkaWireStreamReader({"path": str(tmp_path), **bad})


def test_offsets_walk_the_files_in_order_within_the_read_limit(tmp_path):
    now = time.time()
    for i in range(5):
        _put(tmp_path, f"cap.pcap{i}", 500 - i, now)
    reader = KafkaWireStreamReader({"path": str(tmp_path), "maxFilesPerTrigger": "2", "completeAfterSeconds": "0"})
    assert reader.getDefaultReadLimit() == ReadMaxFiles(2)
    start, seen = reader.initialOffset(), []
    while True:
        end = reader.latestOffset(start, ReadMaxFiles(2))
        if end == start:
            break
        batch = _names(reader.partitions(start, end))
        assert 1 <= len(batch) <= 2
        seen += batch
        start = end
    assert seen == [f"cap.pcap{i}" for i in range(5)]
    # Trigger.AvailableNow: a file that arrives after the query started waits for the next run
    reader = KafkaWireStreamReader({"path": str(tmp_path), "completeAfterSeconds": "0"})
    reader.prepareForTriggerAvailableNow()
    _put(tmp_path, "cap.pcap9", 0, time.time())
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert sorted(_names(reader.partitions(reader.initialOffset(), end))) == [f"cap.pcap{i}" for i in range(5)]
    rows = sum(b.num_rows for p in reader.partitions(reader.initialOffset(), end) for b in reader.read(p))
    from spark_kafkawire import read_capture

    assert rows == 5 * read_capture(SAMPLE).num_rows


def test_each_file_is_opened_once_to_check_it_however_many_triggers(tmp_path, monkeypatch):
    """A rotation directory is listed at every trigger; a file already known to be a capture is not
    opened again to check it (on object storage, a request per file per trigger), and a batch's
    partitions come from the listing its offset came from."""
    from spark_kafkawire import listing as reader_module

    now = time.time()
    for i in range(4):
        _put(tmp_path, f"cap.pcap{i}", 500 - i, now)
    opened = []
    real = reader_module._is_capture
    monkeypatch.setattr(reader_module, "_is_capture", lambda f, e=None: opened.append(f) or real(f, e))
    reader = KafkaWireStreamReader({"path": str(tmp_path), "completeAfterSeconds": "0"})
    start = reader.initialOffset()
    for _ in range(3):
        end = reader.latestOffset(start, ReadAllAvailable())
        assert len(_names(reader.partitions(start, end))) == (4 if start == START else 0)
        start = end
    assert sorted(opened) == sorted(str(tmp_path / f"cap.pcap{i}") for i in range(4))
    _put(tmp_path, "cap.pcap9", 1, time.time())
    end = reader.latestOffset(start, ReadAllAvailable())
    assert _names(reader.partitions(start, end)) == ["cap.pcap9"]
    assert len(opened) == 5


# -- exactly once, whatever the order files arrive in -----------------------------------------------
def _run(reader, start):
    """One trigger: (end offset, names of the files read, rows of capture_changed)."""
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    parts = reader.partitions(start, end)
    changed = [r for p in parts for b in reader.read(p) for r in b.to_pylist() if r["status"] == "capture_changed"]
    return end, sorted(_names(parts)), changed


def _first_read(tmp_path, files: dict[str, float]):
    """A directory of copies of the sample, each as old as given (seconds), read by one trigger:
    (directory, reader, end offset, names read, now)."""
    d = tmp_path / "in"
    d.mkdir()
    now = time.time()
    for name, age in files.items():
        _put(d, name, age, now)
    reader = KafkaWireStreamReader({"path": str(d), "completeAfterSeconds": "0"})
    end, read, _ = _run(reader, reader.initialOffset())
    return d, reader, end, read, now


def test_late_files_are_read_whatever_their_modification_time(tmp_path):
    """Files gathered from two capture hosts (an older mtime arriving late), copied with cp -p, with
    the same mtime as the last file read but a name sorting before it, or moved in after a run: each
    is read once, in the next trigger."""
    d, reader, end, read, now = _first_read(tmp_path, {"hostB-0900.pcap": 3600, "hostB-1000.pcap": 60})
    assert read == ["hostB-0900.pcap", "hostB-1000.pcap"]
    _put(d, "hostA-0800.pcap", 7200, now)  # host A's file, copied late with its own (older) mtime
    _put(d, "aaa.pcap", 60, now)  # the same mtime as the last one read, a name sorting before it
    (tmp_path / "staged.pcap").write_bytes(SAMPLE.read_bytes())
    os.utime(tmp_path / "staged.pcap", (now - 5000, now - 5000))
    os.rename(tmp_path / "staged.pcap", d / "staged.pcap")  # mv keeps the mtime
    end2, read, _ = _run(reader, end)
    assert read == ["aaa.pcap", "hostA-0800.pcap", "staged.pcap"]
    # a restarted query (a new reader, the committed offset from the checkpoint) reads nothing again
    again = KafkaWireStreamReader({"path": str(d), "completeAfterSeconds": "0"})
    end3, read, changed = _run(again, end2)
    assert end3 == end2 and read == [] and changed == []


def test_a_file_that_changes_after_it_was_read_is_reported_not_read_again(tmp_path):
    d, reader, end, read, now = _first_read(tmp_path, {"a.pcap": 600, "b.pcap": 600})
    assert read == ["a.pcap", "b.pcap"]
    with open(d / "a.pcap", "ab") as f:  # grows after it was read
        f.write(b"\x00" * 16)
    os.utime(d / "a.pcap", (now - 600, now - 600))
    shutil.copy(SAMPLES / "tansu-aiokafka-any.pcap", d / "b.pcap")  # replaced
    end2, read, changed = _run(reader, end)
    assert read == []
    assert sorted(os.path.basename(r["capture_file"]) for r in changed) == ["a.pcap", "b.pcap"]
    grown = next(r for r in changed if r["capture_file"].endswith("a.pcap"))
    size = SAMPLE.stat().st_size
    assert f"size {size} -> {size + 16} bytes" in grown["detail"] and "not read again" in grown["detail"]
    # reported once: the next trigger has nothing to say
    end3, read, changed = _run(reader, end2)
    assert end3 == end2 and read == [] and changed == []


def test_what_is_remembered_is_bounded_by_max_file_age(tmp_path):
    """Files more than maxFileAge older than the newest file read are forgotten (the offset stays
    small); a file that old arriving later is taken as read already, as Spark's file source does."""
    d = tmp_path / "in"
    d.mkdir()
    now = time.time()
    for i in range(3):
        _put(d, f"day{i}.pcap", (3 - i) * 86400, now)
    reader = KafkaWireStreamReader({"path": str(d), "completeAfterSeconds": "0", "maxFileAge": "36h"})
    end, read, _ = _run(reader, reader.initialOffset())
    assert read == ["day0.pcap", "day1.pcap", "day2.pcap"]
    _put(d, "older.pcap", 4 * 86400, now)  # older than the bound: not read
    _put(d, "recent.pcap", 2 * 86400, now)  # within it, though older than the newest: read
    end2, read, _ = _run(reader, end)
    assert read == ["recent.pcap"]
    # day0 is forgotten (more than 36 h older than day2): not read again for all that
    assert sorted(os.path.basename(p) for p in stream_files(end2)) == ["day1.pcap", "day2.pcap", "recent.pcap"]
    assert _run(reader, end2)[1] == []


def stream_files(offset):
    from spark_kafkawire.spark.stream import _files

    return _files(offset)


def test_small_files_are_packed_into_few_partitions(tmp_path):
    """Like Spark's file sources: thousands of small files are a few tasks, each file counted with
    an open cost of 4 MiB (maxPartitionBytes 128 MiB: 31 files a partition)."""
    d = tmp_path / "in"
    d.mkdir()
    now = time.time()
    for i in range(100):
        _put(d, f"cap-{i:03d}.pcap", 1000 - i, now)
    reader = KafkaWireStreamReader({"path": str(d), "completeAfterSeconds": "0"})
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    parts = reader.partitions(start, end)
    assert [len(p.paths) for p in parts] == [31, 31, 31, 7]
    assert _names(parts) == [f"cap-{i:03d}.pcap" for i in range(100)]  # oldest first


def test_an_offset_of_the_first_stream_version_counts_what_it_read(tmp_path):
    """A checkpoint written before (offset: the last file read, by mtime then name) goes on where it
    stopped: the files up to it are read already."""
    now = time.time()
    for i in range(3):
        _put(tmp_path, f"cap.pcap{i}", 500 - i, now)
    reader = KafkaWireStreamReader({"path": str(tmp_path), "completeAfterSeconds": "0"})
    old = {"mtime_ns": os.stat(tmp_path / "cap.pcap1").st_mtime_ns, "path": str(tmp_path / "cap.pcap1")}
    _end, read, _ = _run(reader, old)
    assert read == ["cap.pcap2"]


def test_files_that_wait_are_named_once_on_stderr(tmp_path, capsys):
    """A query right after cp reads nothing: one line on stderr (Spark's log) says how many files
    wait for completeAfterSeconds, names one, and how files copied whole are read at once; it is
    not repeated while the same files wait."""
    now = time.time()
    _put(tmp_path, "cap.pcap", 3, now)
    assert completed_files([str(tmp_path)], Options(), settle_s=60, now=now) == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kafkawire stream: 1 file(s) wait until unchanged for "
                                               "completeAfterSeconds (60 s)")
    assert str(tmp_path / "cap.pcap") in err[0] and "completeAfterSeconds=0" in err[0]
    completed_files([str(tmp_path)], Options(), settle_s=60, now=now)
    assert capsys.readouterr().err == ""
