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
from spark_kafkawire.stream import START, KafkaWireStreamReader, completed_files

SAMPLE = SAMPLES / "mock-kcat.pcap"


def _put(d, name, age_s, now):
    shutil.copy(SAMPLE, d / name)
    os.utime(d / name, (now - age_s, now - age_s))


def test_newest_of_a_rotation_series_waits_until_it_settles(tmp_path):
    now = time.time()
    _put(tmp_path, "cap.pcap", 300, now)
    _put(tmp_path, "cap.pcap1", 200, now)
    _put(tmp_path, "cap.pcap2", 5, now)  # tcpdump -C is writing this one
    _put(tmp_path, "other-20261122.pcap", 100, now)  # a series of its own, idle for 100 s
    names = lambda files: [os.path.basename(f) for _m, f in files]  # noqa: E731
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
    for bad in ({"maxFilesPerTrigger": "0"}, {"completeAfterSeconds": "-1"}, {"maxFilesPerTrigger": "x"}):
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
        batch = [os.path.basename(p.path) for p in reader.partitions(start, end)]
        assert 1 <= len(batch) <= 2
        seen += batch
        start = end
    assert seen == [f"cap.pcap{i}" for i in range(5)]
    # Trigger.AvailableNow: a file that arrives after the query started waits for the next run
    reader = KafkaWireStreamReader({"path": str(tmp_path), "completeAfterSeconds": "0"})
    reader.prepareForTriggerAvailableNow()
    _put(tmp_path, "cap.pcap9", 0, time.time())
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert os.path.basename(end["path"]) == "cap.pcap4"
    rows = sum(b.num_rows for p in reader.partitions(reader.initialOffset(), end) for b in reader.read(p))
    from spark_kafkawire import read_capture

    assert rows == 5 * read_capture(SAMPLE).num_rows


def test_each_file_is_opened_once_to_check_it_however_many_triggers(tmp_path, monkeypatch):
    """A rotation directory is listed at every trigger; a file already known to be a capture is not
    opened again to check it (on object storage, a request per file per trigger), and a batch's
    partitions come from the listing its offset came from."""
    from spark_kafkawire import reader as reader_module

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
        assert len(reader.partitions(start, end)) == (4 if start == START else 0)
        start = end
    assert sorted(opened) == sorted(str(tmp_path / f"cap.pcap{i}") for i in range(4))
    _put(tmp_path, "cap.pcap9", 1, time.time())
    end = reader.latestOffset(start, ReadAllAvailable())
    assert [os.path.basename(p.path) for p in reader.partitions(start, end)] == ["cap.pcap9"]
    assert len(opened) == 5
