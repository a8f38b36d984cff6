"""One capture file read by several tasks: every share together gives exactly the whole file's rows.

The reference is the unsplit read of the same file (whose own correctness the other tests check
against tshark, kio and the clients): the shares' rows, as a multiset, must equal it row for row
in every row shape, on the sample captures, the public ones, damaged ones and a large capture made
of interleaved copies of a real MTU-segmented one with segments lost, reordered and duplicated.
"""

from collections import Counter
from pathlib import Path

import pytest

import damage
from conftest import FINDINGS, PUBLIC, SAMPLES, shared_files
from spark_kafkawire.decode import pairing as pairing_module
from spark_kafkawire.reader import Options, iter_batches, plan
from spark_kafkawire.rows.table import ROW_SHAPES

SAMPLE_FILES = sorted(p for p in SAMPLES.iterdir() if p.suffix in (".pcap", ".pcapng"))
PUBLIC_FILES = shared_files(PUBLIC, (".pcap", ".pcapng", ".gz"))


def _opts(shape: str, **more) -> dict:
    return {"rows": shape, **({"includeRecords": "true"} if shape == "records" else {}), **more}


def rows(path: Path, shape: str, share=None, predicate=None, **more) -> Counter:
    out: Counter = Counter()
    for b in iter_batches(str(path), _opts(shape, **more), predicate, share):
        for r in b.to_pylist():
            out[tuple(sorted((k, repr(v)) for k, v in r.items()))] += 1
    return out


def shared(path: Path, shape: str, n: int, **more) -> list[Counter]:
    return [rows(path, shape, (k, n), **more) for k in range(n)]


@pytest.mark.parametrize("shape", ROW_SHAPES)
@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_sample_capture_shares_equal_the_whole(path, shape):
    whole = rows(path, shape)
    for n in (2, 3):
        parts = shared(path, shape, n)
        assert sum(parts, Counter()) == whole, f"{path.name} rows={shape} in {n} shares"


@pytest.mark.parametrize("path", PUBLIC_FILES, ids=lambda p: p.name)
def test_public_capture_shares_equal_the_whole(path):
    for shape in ("exchanges", "messages", "connections"):
        assert sum(shared(path, shape, 2), Counter()) == rows(path, shape), f"{path.name} rows={shape}"


def test_damaged_and_hostile_captures_shares_equal_the_whole():
    paths = sorted(FINDINGS.glob("*.pcap*"))
    assert paths
    for path in paths:
        for shape in ("exchanges", "messages"):
            assert sum(shared(path, shape, 2), Counter()) == rows(path, shape), f"{path.name} rows={shape}"


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> Path:
    return damage.interleaved(SAMPLES, tmp_path_factory.mktemp("split") / "large.pcap")


@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_large_damaged_capture_shares_equal_the_whole(large, shape):
    whole = rows(large, shape)
    assert sum(whole.values()) > (100 if shape == "connections" else 1000)
    for n in (2, 4):
        parts = shared(large, shape, n)
        assert sum(parts, Counter()) == whole, f"rows={shape} in {n} shares"
        if shape in ("exchanges", "messages"):  # each share makes about its part of the rows
            for p in parts:
                assert sum(p.values()) >= sum(whole.values()) / n * 0.8


def test_shares_with_a_filter_equal_the_filtered_whole(large):
    from spark_kafkawire.decode.predicate import Predicate
    from spark_kafkawire.rows.table import COLUMNS

    pred = Predicate.parse([("api_key", "in", [1, 3])]).for_shape(n for n, _ in COLUMNS["exchanges"])
    whole = rows(large, "exchanges", None, pred)
    assert whole
    assert sum((rows(large, "exchanges", (k, 3), pred) for k in range(3)), Counter()) == whole


@pytest.mark.spies
def test_a_share_decodes_only_its_bodies(large, monkeypatch):
    """The point of a share: the bodies of the other shares' rows are not decoded (only those whose
    state every share needs: ApiVersions, SASL, topic ids)."""
    calls = [0]
    real = pairing_module.decode_with_facts

    def counting(api_key, version, request, *a, **k):
        calls[0] += not always_decode(api_key, version, request)
        return real(api_key, version, request, *a, **k)

    monkeypatch.setattr(pairing_module, "decode_with_facts", counting)
    from spark_kafkawire.decode.predicate import always_decode

    rows(large, "exchanges")
    whole, calls[0] = calls[0], 0
    rows(large, "exchanges", (1, 2))
    assert 0 < calls[0] < 0.6 * whole


@pytest.mark.spies
def test_a_share_decodes_a_repeated_metadata_answer_once(large, monkeypatch):
    """Responses every share decodes for the topic ids they teach (Metadata) are remembered by their
    bytes: a share decodes the repeated answers that are not its rows once, not each time (the
    capture holds 12 copies of each sample, so each answer comes a dozen times)."""
    calls = [0]
    real = pairing_module.decode_with_facts

    def counting(api_key, version, request, *a, **k):
        calls[0] += api_key == 3 and not request
        return real(api_key, version, request, *a, **k)

    monkeypatch.setattr(pairing_module, "decode_with_facts", counting)
    rows(large, "exchanges")
    whole, calls[0] = calls[0], 0
    rows(large, "exchanges", (0, 2))
    assert whole > 50
    assert calls[0] < 0.65 * whole  # its own half, and the others' distinct answers once


def test_share_must_be_within_its_count():
    with pytest.raises(ValueError, match=r"share \(2, 2\)"):
        list(iter_batches(str(SAMPLE_FILES[0]), {}, None, (2, 2)))


# -- planning: which files are shared out -----------------------------------------------------------

def _plan(files, **opts):
    return plan([str(f) for f in files], Options.parse(opts))


def test_plan_shares_a_large_file_up_to_min_partitions(tmp_path):
    big = tmp_path / "big.pcap"
    big.write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(9996))  # 10,000 bytes
    got = _plan([big], maxPartitionBytes=3000, minPartitions=8)
    assert got == [[(str(big), (k, 4))] for k in range(4)]  # at most one per 3000 bytes: 4, a task each
    assert _plan([big], maxPartitionBytes=3000, minPartitions=2) == [[(str(big), (0, 2))], [(str(big), (1, 2))]]
    assert _plan([big], maxPartitionBytes=10_000, minPartitions=8) == [[(str(big), None)]]  # not larger


def test_plan_leaves_loads_with_enough_files_and_gzip_alone(tmp_path):
    a, b, gz = tmp_path / "a.pcap", tmp_path / "b.pcap", tmp_path / "c.pcap.gz"
    for p in (a, b):
        p.write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(9996))
    gz.write_bytes(b"\x1f\x8b" + bytes(99998))
    assert _plan([a, b], maxPartitionBytes=1000, minPartitions=2) == [[(str(a), None)], [(str(b), None)]]
    assert _plan([gz], maxPartitionBytes=1000, minPartitions=4) == [[(str(gz), None)]]
    # the largest per partition gets the next share
    small = tmp_path / "s.pcap"
    small.write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(2996))
    got = _plan([a, small], maxPartitionBytes=1000, minPartitions=4)
    assert Counter(f for units in got for f, _ in units) == {str(a): 3, str(small): 1}


def test_plan_packs_small_files_as_sparks_file_sources_do(tmp_path):
    """Spark's rule for its file sources (FilePartition.getFilePartitions): partitions of at most
    min(maxPartitionBytes, max(openCostInBytes, all bytes / minPartitions)) bytes, each file counted
    with openCostInBytes (4 MiB), filled in order; 20 files of 1,000 bytes count 20 * (4 MiB + 1,000)."""
    files = []
    for i in range(20):
        files.append(tmp_path / f"part{i:02}.pcap")
        files[-1].write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(996))
    names = [str(f) for f in files]

    def groups(**opts):
        got = _plan(files, **opts)
        assert [f for units in got for f, _ in units] == names  # every file once, in listing order
        assert all(share is None for units in got for _, share in units)
        return [len(units) for units in got]

    assert groups(minPartitions=1) == [20]  # 84 MB < 128 MiB: one task
    assert groups(minPartitions=2) == [10, 10]
    assert groups(minPartitions=4) == [5, 5, 5, 5]
    assert groups(minPartitions=1, maxPartitionBytes=str(10 << 20)) == [2] * 10  # 3 files count > 10 MiB
    assert groups(minPartitions=1, maxPartitionBytes="8192") == [1] * 20  # a task per file


@pytest.mark.parametrize("opts, message", [
    ({"maxPartitionBytes": "0"}, "option maxPartitionBytes: '0' is not allowed"),
    ({"maxPartitionBytes": "lots"}, "option maxPartitionBytes: 'lots' is not allowed"),
    ({"minPartitions": "0"}, "option minPartitions: '0' is not allowed"),
    ({"minPartitions": "5000"}, "option minPartitions: '5000' is not allowed"),
])
def test_split_options_are_checked(opts, message):
    with pytest.raises(ValueError, match=message):
        Options.parse(opts)


def test_spark_reads_one_file_in_shares(spark):
    path = SAMPLES / "veth-confluent-mtu.pcap"

    def load(shape, parts):
        df = spark.read.format("kafkawire").options(**_opts(shape), maxPartitionBytes="20000",
                                                    minPartitions=str(parts)).load(str(path))
        assert df.rdd.getNumPartitions() == parts
        return Counter(tuple(sorted((k, repr(v)) for k, v in r.items())) for r in df.toArrow().to_pylist())

    for shape in ("exchanges", "messages", "connections"):
        assert load(shape, 3) == load(shape, 1), shape


def test_spark_shares_every_sample_capture(spark):
    """The sample directory with a small maxPartitionBytes: every file larger than it is read in
    shares by several tasks; and with the default, its files packed into three tasks: the rows equal
    those of one task per file, in every row shape."""
    def load(shape, **opts):
        df = spark.read.format("kafkawire").options(**_opts(shape), **opts).load(str(SAMPLES))
        return df.rdd.getNumPartitions(), Counter(tuple(sorted((k, repr(v)) for k, v in r.items()))
                                                  for r in df.toArrow().to_pylist())

    for shape in ROW_SHAPES:
        n_whole, whole = load(shape, maxPartitionBytes="8192", minPartitions="1")  # a task per file
        n_shared, shared_rows = load(shape, maxPartitionBytes="8192", minPartitions="40")
        # packed: 9 small files each counted 4 MiB, at most half of all bytes a task: 4 + 4 + 1
        n_packed, packed = load(shape, minPartitions="2")
        assert (n_whole, n_shared, n_packed) == (len(SAMPLE_FILES), 40, 3)
        assert shared_rows == whole, shape
        assert packed == whole, shape


def _each_share_both_ways(monkeypatch, path: Path, shape: str, n: int) -> None:
    """Each share's rows read with the lane and without it: the same, share by share (not only
    together)."""
    for k in range(n):
        monkeypatch.delenv("KAFKAWIRE_PURE_PYTHON", raising=False)
        fast = rows(path, shape, (k, n))
        monkeypatch.setenv("KAFKAWIRE_PURE_PYTHON", "1")
        pure = rows(path, shape, (k, n))
        assert fast == pure, f"{path.name} rows={shape}, share {k} of {n}: {fast - pure} with the lane, " \
                             f"{pure - fast} without"
    monkeypatch.delenv("KAFKAWIRE_PURE_PYTHON")


@pytest.mark.parametrize("path", SAMPLE_FILES + PUBLIC_FILES, ids=lambda p: p.name)
def test_each_share_is_the_same_with_the_lane_and_without(monkeypatch, path):
    """With the lane reading the packets of every share, each share's rows are exactly those the
    Python stages make for it."""
    for shape in ("exchanges", "messages", "connections"):
        _each_share_both_ways(monkeypatch, path, shape, 2)


@pytest.mark.compiled
def test_each_share_on_a_damaged_capture_with_the_lane_and_without(monkeypatch, large):
    """The same on the damaged interleaved capture (lost, reordered and duplicated segments, SASL,
    acks=0, transactions), in 3 shares."""
    _each_share_both_ways(monkeypatch, large, "exchanges", 3)
