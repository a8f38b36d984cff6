"""Careless inputs get a clear error or a status, never a silently wrong or empty answer: option
values, loads that find no capture, and rotation directories whose newest file is still empty."""

import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, SAMPLES
from spark_kafkawire import CaptureError, read_capture
from spark_kafkawire.wire.capture import MalformedCaptureError

CAPTURE = SAMPLES / "mock-kcat.pcap"
BAD = [("maxFrameBytes", -1), ("maxFrameBytes", 0), ("maxFrameBytes", 10), ("maxFrameBytes", "abc"),
       ("ports", "99999"), ("ports", ""), ("ports", "abc"), ("ports", "0"), ("batchSize", 0), ("batchSize", -5),
       ("maxDecompressedBytes", "1e9"), ("mode", "lenient"), ("includeRecords", "yes"), ("rows", "packets"),
       ("pathGlobFilter", " , "), ("endpointUrl", "localhost:9000")]


@pytest.mark.parametrize("name,value", BAD, ids=[f"{n}={v}" for n, v in BAD])
def test_bad_option_values_are_named(name, value):
    with pytest.raises(ValueError) as e:
        read_capture(CAPTURE, **{name: value})
    assert f"option {name}" in str(e.value) and repr(value if isinstance(value, str) else value) in str(e.value)


def test_good_option_values_still_work():
    whole = read_capture(CAPTURE).to_pylist()
    got = read_capture(CAPTURE, ports=" 43395 , 44379", batchSize="7", maxFrameBytes="65536", mode="failfast")
    assert got.to_pylist() == [r for r in whole if r["broker_port"] in (43395, 44379)]


def test_nothing_found_is_an_error(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("not a capture")
    (other / "meta.json").write_text("{}")
    for d in (empty, other):
        with pytest.raises(CaptureError, match=rf"no capture file in {d}.*pathGlobFilter"):
            read_capture(d)
    r = subprocess.run([sys.executable, str(ROOT / "jobs" / "exchange_summary.py"), str(empty)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "no capture file" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_rotation_directory_with_a_file_still_being_written(tmp_path):
    """tcpdump -C/-G: the newest file is empty or its header is cut short. It is a damaged capture
    (a row saying so in PERMISSIVE, nothing in DROPMALFORMED, an error naming it in FAILFAST); the
    other files are read."""
    d = tmp_path / "rot"
    d.mkdir()
    shutil.copy(CAPTURE, d / "cap.pcap0")
    shutil.copy(SAMPLES / "tansu-aiokafka-any.pcap", d / "cap.pcap1")
    (d / "cap.pcap2").write_bytes(b"")
    (d / "cap.pcap3").write_bytes(CAPTURE.read_bytes()[:20])
    good = read_capture([d / "cap.pcap0", d / "cap.pcap1"]).num_rows
    rows = read_capture(d).to_pylist()
    damaged = {r["capture_file"].rsplit("/", 1)[-1]: r["detail"] for r in rows if r["status"] == "capture_damaged"}
    assert set(damaged) == {"cap.pcap2", "cap.pcap3"} and all("header" in v for v in damaged.values())
    assert len(rows) - len(damaged) == good
    assert read_capture(d, mode="DROPMALFORMED").num_rows == good
    with pytest.raises(MalformedCaptureError, match="cap.pcap2"):
        read_capture(d, mode="FAILFAST")
    # a file named like a capture whose bytes are another format is still refused
    (d / "cap.pcap4").write_text("GET / HTTP/1.1\r\n")
    with pytest.raises(CaptureError, match="cap.pcap4"):
        read_capture(d)


def test_the_options_are_documented_once_and_readme_shows_that_table():
    """docs/options.md's table is what options.options_table() generates from the one declaration
    (OPTIONS) whose checks the values pass: an option added, renamed or given a new default cannot be
    left undocumented."""
    from conftest import ROOT
    from spark_kafkawire.options import BATCH, OPTIONS, options_table

    table = options_table()
    assert table in (ROOT / "docs" / "options.md").read_text()
    assert [ln.split("`")[1] for ln in table.splitlines()[2:]] == [o.name for o in OPTIONS if o.scope == BATCH]


def test_the_option_classes_are_generated_from_the_declaration():
    """Options and StreamOptions are the block options.py's generator writes from OPTIONS (not a second
    list kept by hand): a field per declared option, of its declared type, starting at its declared
    default; and every declared check refuses a value with the option's name in the message."""
    import dataclasses
    import inspect

    import spark_kafkawire.options as options
    from spark_kafkawire.options import BATCH, OPTIONS, STREAM, Options, StreamOptions

    text = inspect.getsource(options)
    assert options.with_generated(text) == text, "run make options"
    for cls, scope in ((Options, BATCH), (StreamOptions, STREAM)):
        declared = [o for o in OPTIONS if o.scope == scope]
        fields = dataclasses.fields(cls)
        assert [(f.name, f.type, f.default) for f in fields] == [(o.field, o.kind, o.default) for o in declared]
        assert dataclasses.asdict(cls.parse({})) == {o.field: o.default for o in declared}
    for o in OPTIONS:
        with pytest.raises(ValueError, match=f"option {o.name}: '' is not allowed"):
            o.check(o.name, "")
    # the audit job's --option refuses exactly what the declaration says it does not take
    refused = {o.name for o in OPTIONS if o.not_in_job}
    assert refused == {"rows", "includeRecords"}
    for name in refused:
        with pytest.raises(ValueError, match="the job"):
            options.job_options([f"{name}=x"])


def test_the_stream_options_come_from_one_table():
    """The streaming source's own options: docs/streaming.md's table of them is stream_options_table(); the
    batch source leaves exactly those out, the stream reader takes exactly those (and their defaults:
    an unchanged newest file waits completeAfterSeconds=60), and the audit job's --incremental flags
    default to them."""
    import subprocess
    import sys

    from conftest import ROOT
    from spark_kafkawire.options import OPTIONS, STREAM, Options, StreamOptions, stream_options_table
    from spark_kafkawire.spark.stream import KafkaWireStreamReader

    assert stream_options_table() in (ROOT / "docs" / "streaming.md").read_text()
    reader = KafkaWireStreamReader({"path": str(ROOT / "sample_pcaps")})
    assert reader.settle_s == StreamOptions().complete_after_seconds == 60
    assert reader.max_files is None and reader.state is None and reader.max_age_ns == 7 * 86400 * 10**9
    given = KafkaWireStreamReader({"path": str(ROOT / "sample_pcaps"), "maxFileAge": "90m",
                                   "max_files_per_trigger": "3", "completeAfterSeconds": "0.5"})
    assert (given.max_age_ns, given.max_files, given.settle_s) == (5400 * 10**9, 3, 0.5)
    for bad, what in (("maxFileAge", "a duration"), ("maxFilesPerTrigger", "a whole number"),
                      ("completeAfterSeconds", "a number of seconds")):
        with pytest.raises(ValueError, match=f"option {bad}: '-1' is not allowed; {what}"):
            KafkaWireStreamReader({"path": str(ROOT / "sample_pcaps"), bad: "-1"})
    for name in (o.name for o in OPTIONS if o.scope == STREAM):
        with pytest.raises(ValueError, match="unknown kafkawire option"):
            Options.parse({name: "1"})  # (not a batch option)
    job = subprocess.run([sys.executable, str(ROOT / "jobs" / "audit.py"), "--help"], capture_output=True, text=True,
                         check=True).stdout
    assert "default 60" in " ".join(job.split())
