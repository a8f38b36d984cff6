"""Benchmark: kafkawire against tshark on the same capture, in the same run, as ratios.

    make bench          (needs root once, to capture the benchmark's traffic)
    make bench-instructions   (the instruction lines alone, a few minutes)

The input is made by tests/tools/benchcapture.py from real clients and a real broker (about 160 MB,
MTU-sized segments, Produce and Fetch in every codec, consumer-group and metadata traffic) and
kept in out/bench/. Every timing is the best of three fresh processes, and the reads compared with
tshark (and the TLS hop with its plaintext hop) the best of five, run in turn. Printed:

- instructions: the per-connection work (20,000 one-segment connections, rows=messages) and the
  per-exchange work (the frame-dense capture, rows=exchanges) in CPU instructions counted by
  callgrind, beside the last run's figures (docs/instructions.json, rewritten by each run);

- the audit job at scale: on four copies of the benchmark capture (as four capture points see the
  same traffic), and on four copies of the record-heavy capture, against tshark -T fields on the
  same files, in turn; its phases and largest process;
- the audit job: make demo's run on sample_pcaps/ and a run on one small file, each as a ratio to a
  trivial Spark job started the same way (session start and spark.range(1).count());
- per-core speed: tshark -T fields with the kafka dissector (api key and version, correlation id,
  client id) against read_capture for rows=exchanges (every column, every body decoded, every
  CRC checked), rows=messages and rows=connections; the ratio is tshark's time over ours;
- frames many and small: the frame-dense capture (tests/tools/benchcapture.py, build_dense) read by
  tshark -T fields and by read_capture (rows=exchanges, compiled lane and pure Python), and by
  read_capture with a filter no exchange passes (what reading, reassembly and framing cost alone);
- records many and small: the record-heavy capture (benchcapture.build_records: 2,000,000 records
  of 20-120 bytes in every codec) read by tshark -T fields and by read_capture rows=records (every
  record a row) and rows=exchanges;
- filter pushdown: read_capture with a selective filter (api_key = 3, Metadata) against the same
  read without it;
- Spark: the cost of a query on a tiny capture (planning, scheduling, transfer); then, for the
  capture and for a 2 GB one made of copies of it: as a directory of 4 files, read by Spark
  local[1] and local[2] (scaling efficiency), and local[1] against read_capture on the same files;
  as one file, whole in local[1] against 2 shares in local[2]; without Spark, the same two cores:
  two of the 4 files in two processes at once, and the 2 GB file whole against its 2 shares in two
  processes at once; 200 small files (a rotated capture) in local[2], packed into tasks against a
  task per file, and against Spark's own binaryFile source on the same files;
- a million connections: 10^6 SYN-only and 10^6 one-segment connections, in the default row shape
  and in rows=connections: peak memory and time per packet against the real capture's in that shape
  (the real capture's: the best of 3 reads after a warm-up one; the 10^6 connections' one read),
  and tshark -T fields on the same inputs (its time per packet against its own on the real
  capture, and tshark's time over ours);
- memory: peak resident memory of one file streamed as a Spark task reads it (iter_batches),
  for the capture and for a 2 GB one made of copies of it; tshark -V on the capture for scale;
- hostile inputs (made here): 50,000 one-byte segments behind a lost byte, a Metadata response
  with 200,000 partitions, a 9-million-record batch (rows=records), 4 MB of zeros where a frame
  should start, and a request of magic 1 wrappers that decompress to 1.2 GB: time, peak memory,
  and the cost per unit of work against the same unit in the real capture.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "out" / "bench"
PAIRS = 5  # alternating runs of one file whole and in shares
SMALL_FILES = 200  # files of the small-files line
sys.path[:0] = [str(ROOT / "tests" / "tools"), str(ROOT / "tests")]


def _made(name: str, build: str, what: str) -> tuple[Path, int]:
    """out/bench/NAME.pcap and its broker port, made once by benchcapture's ``build`` function."""
    path = OUT / f"{name}.pcap"
    info = path.with_suffix(".json")
    if not path.exists() or not info.exists():
        import benchcapture

        print(f"making the {what} (real clients and broker, about 2 minutes)...", flush=True)
        getattr(benchcapture, build)(path)
    return path, json.loads(info.read_text())["broker_port"]


def realistic() -> tuple[Path, int]:
    return _made("realistic", "build", "benchmark capture")


def dense() -> tuple[Path, int]:
    """The frame-dense capture (benchcapture.build_dense): small uncompressed Produce requests,
    heartbeats and metadata refreshes."""
    return _made("dense", "build_dense", "frame-dense capture")


def record_heavy() -> tuple[Path, int]:
    """The record-heavy capture (benchcapture.build_records): 2,000,000 small records in every codec,
    half produced and half fetched, in batches of up to 200, as high-rate producers send them."""
    return _made("records", "build_records", "record-heavy capture")


def tls_workload() -> tuple[Path, Path, dict]:
    """The TLS workload (tests/tls/make_tls_captures.py): one capture holding the TLS hop and its
    plaintext hop, and the client's key log."""
    path, keylog, info = OUT / "tls-bench.pcap", OUT / "tls-bench.keylog", OUT / "tls-bench.json"
    if not (path.exists() and keylog.exists() and info.exists()):
        sys.path.insert(0, str(ROOT / "tests" / "tls"))
        from make_tls_captures import bench_capture

        print("making the TLS benchmark capture (kafka-python through a TLS proxy to Tansu)...", flush=True)
        bench_capture(OUT)
    return path, keylog, json.loads(info.read_text())


def best_of(cmd: list[str], runs: int = 3, env: dict | None = None) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=None if env is None else {**os.environ, **env})
        best = min(best, time.perf_counter() - t)
    return best


#: turns of the reads compared in turn (tshark and ours, the TLS hop and its plaintext hop): with the
#: best of three, frame-dense's ratio stayed at 4.98x after a change that two in-turn runs of 7 and 15
#: turns each measured 5-6% faster (2026-11-27)
TURNS = 5


def interleaved(cmds: list[tuple[list[str], dict | None]], runs: int = TURNS) -> list[float]:
    """Each command's best of ``runs``, the commands run in turn (A, B, C, A, B, C, ...): this
    machine's speed drifts by up to 1.7x over minutes, and a ratio of two times taken in turn is
    not skewed by a slow minute falling on one of them as two blocks of runs would be."""
    best = [float("inf")] * len(cmds)
    for _ in range(runs):
        for i, (cmd, env) in enumerate(cmds):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env=None if env is None else {**os.environ, **env})
            best[i] = min(best[i], time.perf_counter() - t)
    return best


#: what a read's process does first where numpy is not installed, as with `pip install spark-kafkawire`
#: alone (numpy comes with pandas, pyspark's SQL extras and matplotlib): pyarrow imports numpy at its
#: own import whenever it can (pyarrow >= 16, about 40 ms of a read's start on this machine), and a
#: None in sys.modules makes that import fail just as a missing numpy does
NO_NUMPY = "import sys; sys.modules['numpy'] = None; "


def ours(path: Path, rows: str = "exchanges", filters: list | None = None, first: str = "", **options) -> list[str]:
    return [sys.executable, "-c", first + "import spark_kafkawire as k; "
            f"k.read_capture({str(path)!r}, rows={rows!r}, filters={filters!r}, **{options!r})"]


def at_once(cmds: list[list[str]]) -> float:
    """Wall time of these commands started together."""
    t = time.perf_counter()
    for proc in [subprocess.Popen(cmd) for cmd in cmds]:
        if proc.wait():
            raise subprocess.CalledProcessError(proc.returncode, proc.args)
    return time.perf_counter() - t


def tshark_fields(path: Path, port: int) -> list[str]:
    return ["tshark", "-r", str(path), "-d", f"tcp.port=={port},kafka", "-T", "fields", "-e", "kafka.api_key",
            "-e", "kafka.api_version", "-e", "kafka.correlation_id", "-e", "kafka.client_id"]


def split_into(path: Path, parts: int) -> Path:
    """The capture as a directory of ``parts`` files (editcap, as a rotating tcpdump would)."""
    out = OUT / (f"parts{parts}" if path.name == "realistic.pcap" else f"{path.stem}-parts{parts}")
    if not out.exists():
        out.mkdir()
        total = int(subprocess.run(["capinfos", "-c", "-M", "-T", str(path)], capture_output=True, text=True,
                                   check=True).stdout.strip().splitlines()[-1].split("\t")[-1])
        subprocess.run(["editcap", "-c", str(-(-total // parts)), str(path), str(out / "part.pcap")], check=True)
    return out


SPARK_TIMED = """
import json, os, sys, time, spark_kafkawire
spark = spark_kafkawire.spark_session("bench", master=sys.argv[1])
opts = json.loads(sys.argv[3])
runs = int(sys.argv[4])
WARM_QUERIES = 10
def query(path):
    spark.read.format("kafkawire").options(**opts).load(path).write.format("noop").mode("overwrite").save()
def cpu():  # seconds of CPU used so far by the JVM and by Spark's Python workers
    out = {"jvm": 0.0, "python": 0.0}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kind = "jvm" if b"java" in cmd else "python" if b"pyspark.daemon" in cmd else None
        if kind:
            out[kind] += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out
# warm-up: workers start, files are cached, and the JVM compiles its hot paths over the first
# queries (its JIT compilers take ~2.5 s of CPU in the first and keep at it for about ten: unwarmed,
# they compete with the Python workers for a 2-core machine's cores, and local[1] leaves them one)
for _ in range(WARM_QUERIES):
    query(sys.argv[5])
best, used = 1e9, None
for _ in range(runs):
    before, t = cpu(), time.perf_counter()
    query(sys.argv[2])
    took = time.perf_counter() - t
    if took < best:
        after = cpu()
        best, used = took, {k: after[k] - before[k] for k in after}
print(json.dumps({"time": best, **used}))
"""
INPROCESS_TIMED = """
import sys, time, spark_kafkawire
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
if runs > 1:
    spark_kafkawire.read_capture(sys.argv[1], stitch=False)
best = 1e9
for _ in range(runs):
    t = time.perf_counter()
    spark_kafkawire.read_capture(sys.argv[1], stitch=False)
    best = min(best, time.perf_counter() - t)
print(best)
"""
# The files of a folder read one at a time, as a stream's triggers read them: with "carry", each
# read leaves its open connections' state in a file for the next (carry.py); with "apart", none.
BY_TRIGGER = """
import os, sys, tempfile
from spark_kafkawire.carry import Carry
from spark_kafkawire.reader import iter_batches
files = sorted(os.path.join(sys.argv[1], n) for n in os.listdir(sys.argv[1]))
state, before = tempfile.mkdtemp(), None
for f in files:
    leave = os.path.join(state, os.path.basename(f) + ".carry") if sys.argv[2] == "carry" else None
    for _ in iter_batches([f], {}, carry=Carry(before, leave) if leave else None):
        pass
    before = leave
"""
# A child's peak memory: the high-water mark of its own address space (VmHWM). Not ru_maxrss:
# Linux carries the spawning process's peak over into a child started by vfork and exec, so a
# child of this (large) bench process would report at least the bench's own size.
PEAK = """
def peak_kib():
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""
PEAK_OURS = PEAK + """
import sys
from spark_kafkawire.reader import iter_batches
rows = sum(b.num_rows for b in iter_batches(sys.argv[1]))  # one file, streamed: what a Spark task does
print(rows, peak_kib())
"""
PEAK_TIMED = PEAK + """
import sys, time
from spark_kafkawire.reader import iter_batches
runs = 1
if sys.argv[3:] == ["warm"]:  # read once first (first-use costs are not per packet), then the best of 3
    sum(b.num_rows for b in iter_batches(sys.argv[1], {"rows": sys.argv[2]}))
    runs = 3
took = float("inf")
for _ in range(runs):
    t = time.perf_counter()
    rows = sum(b.num_rows for b in iter_batches(sys.argv[1], {"rows": sys.argv[2]}))
    took = min(took, time.perf_counter() - t)
print(rows, peak_kib(), took)
"""
#: many small files (a rotated capture) through Spark, local[2], the three queries in turn after warm-up:
#: kafkawire with its files packed into tasks (the default), kafkawire with a task per file (as before
#: packing), and Spark's own binaryFile source on the same files (its file sources pack them too)
SMALL_FILES_TIMED = """
import json, sys, time, spark_kafkawire
spark = spark_kafkawire.spark_session("bench", master="local[2]")
d = sys.argv[1]
def packed():
    spark.read.format("kafkawire").load(d).write.format("noop").mode("overwrite").save()
def each():
    (spark.read.format("kafkawire").options(maxPartitionBytes="8192", minPartitions="1").load(d)
     .write.format("noop").mode("overwrite").save())
def binary():
    spark.read.format("binaryFile").load(d).write.format("noop").mode("overwrite").save()
queries = {"packed": packed, "each": each, "binaryFile": binary}
for q in queries.values():
    q(); q()
best = dict.fromkeys(queries, 1e9)
for _ in range(3):
    for name, q in queries.items():
        t = time.perf_counter()
        q()
        best[name] = min(best[name], time.perf_counter() - t)
tasks = spark.read.format("kafkawire").load(d).rdd.getNumPartitions()
print(json.dumps({**best, "tasks": tasks}))
"""
SHARE_READ = """
import sys
from spark_kafkawire.reader import iter_batches
k, n = int(sys.argv[2]), int(sys.argv[3])
sum(b.num_rows for b in iter_batches(sys.argv[1], {}, share=None if n == 1 else (k, n)))
"""
# (the child's own peak: it is started by this small script, whose peak is all it inherits)
PEAK_CHILD = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def copies(path: Path, broker: int, n: int) -> Path:
    """A large capture: ``n`` copies of ``path``, each on other client ports and later in time."""
    out = OUT / f"copies{n}.pcap"
    if out.exists():
        return out
    import dpkt
    from damage import moved_ports

    from spark_kafkawire.wire.capture import CaptureReader

    pkts = list(CaptureReader(str(path)))
    span = pkts[-1].ts_ns - pkts[0].ts_ns + 1_000_000_000
    with open(out, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=1, nano=True, snaplen=262144)
        for i in range(n):
            for p in pkts:
                w.writepkt(moved_ports(p.data, broker, i, stride=97), ts=(p.ts_ns + i * span) / 1e9)
    return out


def many_connections(kind: str, n: int = 1_000_000) -> Path:
    """``n`` TCP connections of one packet each: a SYN per port (a scan), or one 30-byte request
    segment each (connections whose ends were not captured)."""
    out = OUT / f"{kind}-{n}.pcap"
    if out.exists():
        return out
    eth = b"\x04" * 6 + b"\x02" * 6 + b"\x08\x00"
    body = b"" if kind == "syn" else struct.pack("!ihhi", 26, 3, 1, 7) + b"\x00\x03cli" + b"\x00" * 13
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        for i in range(n):
            src = bytes([10, 1 + i // 60000 % 250, 0, 1])
            tcp = struct.pack("!HHIIBBHHH", 1024 + i % 60000, 9092, 1000, 0, 0x50, 0x02 if kind == "syn" else 0x18,
                              65535, 0, 0)
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + len(body), 0, 0, 64, 6, 0, src, b"\x0a\x00\x00\x02")
            pkt = eth + ip + tcp + body
            f.write(struct.pack("<IIII", 1_700_000_000 + i // 10000, i % 10000 * 100, len(pkt), len(pkt)) + pkt)
    return out


HOSTILE_TIMED = PEAK + """
import json, sys, time
from spark_kafkawire.reader import iter_batches
for b in iter_batches(sys.argv[3], json.loads(sys.argv[2])):  # a warm-up: imports, generated readers
    pass
t = time.perf_counter()
rows = sum(b.num_rows for b in iter_batches(sys.argv[1], json.loads(sys.argv[2])))
print(rows, peak_kib(), time.perf_counter() - t)
"""


def _hostile_input(kind: str, scale: int) -> tuple[Path, dict, int]:
    """A hostile capture of ``kind`` at ``scale`` (1: the full size; 50: a fiftieth), made once
    into out/bench/hostile: (path, options, units of work in it)."""
    import zlib

    import test_hostile as th
    from pcapgen import Conversation, produce_request, request, write_pcap

    d = OUT / "hostile"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{kind}-{scale}.pcap"
    n = {"hole": 50_000, "metadata": 200_000, "records": 9_000_000, "zeros": 4 << 20, "wrappers": 20}[kind]
    n = max(1, n // scale)
    if not path.exists():
        conv = Conversation(client=th.C, broker=th.B).handshake()
        if kind == "hole":
            th._hole_then_tiny_segments(path, n)
        elif kind == "metadata":
            th._metadata_capture(path, n)
        elif kind == "records":  # 7-byte records, all alike: 63 MB, under the decompression cap
            z = zlib.compressobj(9, zlib.DEFLATED, 31)
            one = th._record(0, None, b"")
            body = b"".join(z.compress(one * min(100_000, n - i)) for i in range(0, n, 100_000)) + z.flush()
            from test_records import batch

            conv.send("c", produce_request(7, 1, "amp", batch([one] * n, attrs=1, payload=body)), mss=1448)
        elif kind == "zeros":
            conv.send("c", request(18, 0, 1, "cli", body=b"") + bytes(n) + request(18, 0, 2, "cli", body=b""),
                      mss=1448)
        else:  # magic 1 zstd wrappers of 60 MB each: 1.2 GB in all at full size
            import zstandard

            inner = th._v1_message(0, b"") * ((60 << 20) // 34)
            wrapper = th._v1_message(0, zstandard.ZstdCompressor(level=19).compress(inner), attrs=4)
            conv.send("c", produce_request(3, 1, "old", wrapper * n), mss=1448)
        if kind not in ("hole", "metadata"):
            write_pcap(path, conv.fin().packets)
    opts = {"hole": {"rows": "connections"}, "records": {"rows": "records", "includeRecords": "true"}}.get(kind, {})
    units = {"hole": n, "metadata": n, "records": n, "zeros": n, "wrappers": n}[kind]
    return path, opts, units


HOSTILE = [("hole", "50,000 one-byte segments behind a lost byte", "segment"),
           ("metadata", "a Metadata response with 200,000 partitions", "partition"),
           ("records", "a 9,000,000-record batch, rows=records", "record"),
           ("zeros", "4 MiB of zeros where a frame should start", "byte"),
           ("wrappers", "20 magic 1 wrappers of 60 MB each (1.2 GB)", "wrapper")]


def hostile(path: Path) -> None:
    """Each hostile input at full size against a fiftieth of it (work per unit: linear is 1x),
    and where the unit exists in the real capture (packets, bytes, records), against that."""

    def timed(p: Path, opts: dict, warm: Path) -> tuple[int, float, float]:
        best = None
        for _ in range(3):
            r = subprocess.run([sys.executable, "-c", HOSTILE_TIMED, str(p), json.dumps(opts), str(warm)],
                               check=True, capture_output=True, text=True)
            rows, kib, took = r.stdout.split()
            if best is None or float(took) < best[2]:
                best = (int(rows), int(kib) / 1024, float(took))
        return best

    real = {"segment": timed(path, {"rows": "connections"}, path)[2] / 120_018,
            "byte": timed(path, {}, path)[2] / path.stat().st_size}
    rec_rows, _m, rec_t = timed(path, {"rows": "records", "includeRecords": "true"}, path)
    real["record"] = rec_t / rec_rows
    print("hostile inputs (each read after a warm-up read of a fiftieth of it, in the same process):")
    for kind, label, unit in HOSTILE:
        big, opts, n_big = _hostile_input(kind, 1)
        small, _o, n_small = _hostile_input(kind, 50)
        rows, mib, took = timed(big, opts, small)
        rows_small, _m, took_small = timed(small, opts, small)
        if unit == "record":  # records past maxRecordsPerBatch are one row: count the rows made
            n_big, n_small = rows, rows_small
        per_big, per_small = took / n_big, took_small / n_small
        line = (f"  {label}: {took:.2f} s, {mib:.0f} MiB peak, {rows} rows; per {unit} {per_big / per_small:.2f}x "
                f"a fiftieth of it")
        if unit in real and unit != "byte":
            line += f", {per_big / real[unit]:.2f}x the real capture's"
        line += f"; per byte of capture {took / big.stat().st_size / real['byte']:.2f}x the real capture's"
        print(line, flush=True)


def audit_job() -> None:
    """The audit job (make demo's, and on one small file) against a trivial Spark job started the
    same way (spark_session for a small job, then spark.range(1).count()), whole processes, in turn."""
    root = ROOT
    samples = root / "sample_pcaps"
    out = root / "out" / "bench" / "audit"
    trivial = [sys.executable, "-c", "import spark_kafkawire as k; s = k.spark_session('trivial', small_job=True); "
               "s.range(1).count(); s.stop()"]
    job = [sys.executable, str(root / "jobs" / "audit.py"), "--quiet", "--out"]
    cmds = [trivial, job + [str(out / "demo"), str(samples)],
            job + [str(out / "one"), str(samples / "tansu-confluent-codecs.pcap")]]
    best = [float("inf")] * len(cmds)
    for _ in range(3):
        for i, cmd in enumerate(cmds):
            t = time.perf_counter()
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode not in (0, 2, 3):  # 2, 3: verdicts (the samples fail two policies on purpose)
                raise subprocess.CalledProcessError(r.returncode, cmd)
            best[i] = min(best[i], time.perf_counter() - t)
    base, demo, one = best
    print(f"audit job: sample_pcaps/ (make demo) {demo:.1f} s = {demo / base:.2f}x a trivial Spark job ({base:.1f} s); "
          f"one small file {one:.1f} s = {one / base:.2f}x", flush=True)


def audit_job_at_scale(path: Path, port: int, points: int = 4, what: str = "the benchmark capture") -> None:
    """The audit job on ``points`` copies of a capture (the same traffic seen at several capture
    points) against tshark -T fields on the same files one after the other, in turn (best of two
    each: the job takes minutes); then the job's phases of that run and its largest process."""
    four = OUT / (f"points{points}" if path.name == "realistic.pcap" else f"{path.stem}-points{points}")
    four.mkdir(exist_ok=True)
    for i in range(points):
        f = four / f"point{i}.pcap"
        if not f.exists():
            os.link(path, f)
    size = sum(f.stat().st_size for f in four.glob("*.pcap"))
    peer_cmd = ["sh", "-c", " ; ".join(" ".join(tshark_fields(f, port)) + " > /dev/null"
                                         for f in sorted(four.glob("*.pcap")))]
    job = [sys.executable, str(ROOT / "tests" / "tools" / "peakmem.py"), sys.executable,
           str(ROOT / "jobs" / "audit.py"), str(four), "--out", str(OUT / f"audit-scale-{four.name}")]
    best_peer = best_job = float("inf")
    phases = peak = ""
    for _ in range(2):
        t = time.perf_counter()
        subprocess.run(peer_cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best_peer = min(best_peer, time.perf_counter() - t)
        t = time.perf_counter()
        r = subprocess.run(job, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode not in (0, 2, 3):
            raise subprocess.CalledProcessError(r.returncode, job, stderr=r.stderr)
        took = time.perf_counter() - t
        if took < best_job:
            best_job = took
            lines = r.stderr.splitlines()
            stamp = {k: next((float(ln.split("[")[1].split("s]")[0]) for ln in lines if k in ln), None)
                     for k in ("Spark started", "rows written", "running", "judging")}
            # (local captures are read by processes of the job's machine while Spark starts)
            phases = (f"Spark started at {stamp['Spark started']:.1f} s, the rows written at "
                      f"{stamp['rows written']:.1f} s, audits {stamp['judging'] - stamp['running']:.1f} s"
                      ) if None not in stamp.values() else ""
            peak = next((ln.split("peak memory: ")[1] for ln in lines if "peak memory: " in ln), "")
    print(f"audit job on {points} copies of {what} ({size / 1e6:.0f} MB, as {points} capture "
          f"points see the same traffic): {best_job:.1f} s = {best_job / best_peer:.2f}x tshark -T fields on the "
          f"same files ({best_peer:.1f} s); {phases}; peak memory: {peak}", flush=True)


#: the instruction lines' last figures (written by each run of ``instructions``)
INSTRUCTIONS = ROOT / "docs" / "instructions.json"


def _instructions(path: Path, rows: str) -> int:
    """CPU instructions (callgrind) of a fresh process reading ``path`` in ``rows``: the same count
    whatever else the machine does."""
    out = OUT / "callgrind.out"
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *ours(path, rows)],
                          capture_output=True, text=True, cwd=OUT)
    out.unlink(missing_ok=True)
    found = [line for line in done.stderr.splitlines() if "Collected :" in line]
    if done.returncode or not found:
        raise SystemExit(f"callgrind failed on {path}: {done.stderr[-2000:]}")
    return int(found[-1].split(":")[-1].strip())


def instructions() -> None:
    """The per-connection and per-exchange work in CPU instructions (callgrind), beside the last
    run's figures (docs/instructions.json): a change that makes either costlier shows here, whatever
    the machine's load. Each is a read's count less a read of a one-exchange sample (imports, start)."""
    if not shutil.which("valgrind"):
        print("instructions: valgrind is not installed (make system-deps): skipped")
        return
    import spark_kafkawire as kw

    dpath, _ = dense()
    segment = many_connections("segment", 20_000)
    lines = {"one-segment connections, rows=messages, per connection": (segment, "messages", 20_000),
             "frame-dense capture, rows=exchanges, per exchange": (dpath, "exchanges",
                                                                   kw.read_capture(str(dpath)).num_rows)}
    base = {rows: _instructions(ROOT / "sample_pcaps" / "veth-confluent-mtu.pcap", rows)
            for rows in ("messages", "exchanges")}
    last = json.loads(INSTRUCTIONS.read_text()) if INSTRUCTIONS.exists() else {}
    now = {"date": time.strftime("%Y-%m-%d"), "commit": _commit(), "lines": {}}
    for name, (path, rows, units) in lines.items():
        per = (_instructions(path, rows) - base[rows]) / units
        now["lines"][name] = round(per)
        before = last.get("lines", {}).get(name)
        beside = (f"; last {before:,} ({last['date']}, {last['commit']}): {per / before - 1:+.1%}"
                  if before else "")
        print(f"instructions: {name}: {per:,.0f}{beside}", flush=True)
    INSTRUCTIONS.write_text(json.dumps(now, indent=1) + "\n")


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return done.stdout.strip() or "unknown"


def main() -> None:
    if sys.argv[1:] == ["instructions"]:
        instructions()
        return
    instructions()
    audit_job()
    path, port = realistic()
    audit_job_at_scale(path, port)
    rpath, rport = record_heavy()
    audit_job_at_scale(rpath, rport, what="the record-heavy capture")
    size = path.stat().st_size
    env_note = f"{os.cpu_count()} cores"
    print(f"input: {path.name}, {size / 1e6:.0f} MB ({env_note}); every time the best of 3 fresh processes "
          f"(of {TURNS} for tshark and the reads compared with it, run in turn)")

    shapes = ("exchanges", "messages", "connections")
    # the last: what the compiled code buys, the same read by the Python stages alone
    peer, *times, core, pure = interleaved([(tshark_fields(path, port), None)] +
                                           [(ours(path, r), None) for r in shapes] +
                                           [(ours(path, first=NO_NUMPY), None),
                                            (ours(path), {"KAFKAWIRE_PURE_PYTHON": "1"})])
    print(f"tshark -T fields (kafka dissector):      {peer:6.2f} s")
    for rows, t in zip(shapes, times):
        print(f"kafkawire read_capture rows={rows:<11} {t:6.2f} s   tshark/kafkawire = {peer / t:.2f}x"
              f"  ({size / t / 1e6:.0f} MB/s)")
    print(f"  the same where numpy is not installed (a core install: pyarrow then does not import it) {core:.2f} s"
          f"   tshark/kafkawire = {peer / core:.2f}x")
    print(f"  the same, pure Python (no compiled code){pure:6.2f} s   tshark/kafkawire = {peer / pure:.2f}x",
          flush=True)

    # frames many and small: the per-exchange work (body decoding, pairing, rows) is all the time
    dpath, dport = dense()
    import spark_kafkawire as kw

    n = kw.read_capture(str(dpath)).num_rows
    dpeer, t, framing, pure = interleaved([(tshark_fields(dpath, dport), None), (ours(dpath), None),
                                           (ours(dpath, filters=[("api_key", "=", 99)]), None),
                                           (ours(dpath), {"KAFKAWIRE_PURE_PYTHON": "1"})])
    dsize = dpath.stat().st_size
    print(f"frame-dense capture: {dpath.name}, {dsize / 1e6:.0f} MB, {n} exchanges "
          f"({n / dsize * 1e8:,.0f} per 100 MB); tshark -T fields {dpeer:.2f} s")
    print(f"  kafkawire read_capture rows=exchanges {t:6.2f} s   tshark/kafkawire = {dpeer / t:.2f}x  "
          f"({t / n * 1e6:.0f} us per exchange)")
    print(f"  the same with no exchange to decode (api_key = 99: reading, reassembly, framing) {framing:.2f} s")
    print(f"  the same, pure Python (no compiled code){pure:6.2f} s   tshark/kafkawire = {dpeer / pure:.2f}x",
          flush=True)

    # records many and small: every record a row (rows=records), against tshark's headline fields
    rpath, rport = record_heavy()
    records = kw.read_capture(str(rpath), rows="records").num_rows
    rpeer, rrec, rex = interleaved([(tshark_fields(rpath, rport), None), (ours(rpath, "records"), None),
                                    (ours(rpath), None)])
    print(f"record-heavy capture: {rpath.name}, {rpath.stat().st_size / 1e6:.0f} MB, {records:,} records; "
          f"tshark -T fields {rpeer:.2f} s")
    print(f"  kafkawire read_capture rows=records {rrec:6.2f} s = {rrec / rpeer:.2f}x tshark's time "
          f"({rrec / records * 1e6:.2f} us per record); rows=exchanges {rex:.2f} s", flush=True)

    # TLS: the same Kafka frames read from the TLS hop with the key log and from the plaintext hop
    tpath, keylog, tinfo = tls_workload()
    tls_t, plain_t = interleaved([(ours(tpath, ports=str(tinfo["tls_port"]), tlsKeyLog=str(keylog)), None),
                                  (ours(tpath, ports=str(tinfo["broker_port"])), None)])
    mb = tpath.stat().st_size / 1e6
    print(f"TLS 1.3 hop with the key log {tls_t:.2f} s, its plaintext hop {plain_t:.2f} s "
          f"({mb:.0f} MB capture, both hops): TLS/plaintext = {tls_t / plain_t:.2f}x", flush=True)

    # a rotation series: the capture cut into 10 files, read as one capture (option stitch, the
    # default) against each file by itself, in turn
    rotated = split_into(path, 10)
    stitched, apart = interleaved([(ours(rotated), None), (ours(rotated, stitch="false"), None)])
    print(f"rotation series (the capture as 10 files, editcap -c): read as one {stitched:.2f} s, each file by itself "
          f"{apart:.2f} s: stitching costs {stitched / apart - 1:+.1%}", flush=True)

    # the same 10 files as a stream with stateLocation reads them, one file per trigger: each read
    # leaves its open connections' state for the next (carry.py), against each file read apart
    carried, alone = interleaved([([sys.executable, "-c", BY_TRIGGER, str(rotated), "carry"], None),
                                  ([sys.executable, "-c", BY_TRIGGER, str(rotated), "apart"], None)])
    print(f"rotation series one file per trigger (stateLocation): {carried:.2f} s carrying the open connections "
          f"from file to file, {alone:.2f} s each file by itself: carrying costs {carried / alone - 1:+.1%}", flush=True)

    full = best_of(ours(path))
    selective = best_of(ours(path, filters=[("api_key", "=", 3)]))
    print(f"filter api_key = 3 (Metadata): {selective:.2f} s against {full:.2f} s unfiltered: "
          f"{full / selective:.2f}x faster")
    from spark_kafkawire.wire.capture import CaptureReader

    stamps = [p.ts_ns for p in CaptureReader(str(path))]
    until = stamps[0] + (stamps[-1] - stamps[0]) // 5
    window = best_of(ours(path, filters=[("request_time", "<", until)]))
    print(f"filter request_time in the first fifth of the capture: {window:.2f} s: {full / window:.2f}x faster")

    cpu_seen: dict[str, list[float]] = {}

    def spark_time(master: str, p: Path, runs: int = 3, **opts) -> float:
        """Best of ``runs`` queries after three warm-up queries of the bench capture; notes the CPU the
        JVM and the Python workers used in it (Spark's own share of a 2-core machine)."""
        out = json.loads(subprocess.run([sys.executable, "-c", SPARK_TIMED, master, str(p), json.dumps(opts),
                                         str(runs), str(path)], capture_output=True, text=True,
                                        check=True).stdout.splitlines()[-1])
        cpu_seen.setdefault(master, []).append(out["jvm"] / (out["jvm"] + out["python"]))
        return out["time"]

    def in_process(p: Path, runs: int = 3) -> float:
        return float(subprocess.run([sys.executable, "-c", INPROCESS_TIMED, str(p), str(runs)], capture_output=True,
                                    text=True, check=True).stdout.split()[-1])

    # what a Spark query costs besides the reading: planning, scheduling, the worker, the transfer
    tiny = spark_time("local[1]", ROOT / "sample_pcaps" / "mock-kcat.pcap")
    cpu_seen.clear()
    print(f"Spark's own cost of a query (a 60 KB capture, local[1]): {tiny:.2f} s")

    def scaling(label: str, p: Path, runs: int) -> None:
        parts = split_into(p, 4)  # (four files each read by itself: stitch=false)
        one, two = spark_time("local[1]", parts, runs, stitch="false"), spark_time("local[2]", parts, runs,
                                                                                  stitch="false")
        plain = in_process(parts, runs)
        print(f"Spark on {label} as 4 files: local[1] {one:.2f} s, local[2] {two:.2f} s: scaling efficiency "
              f"{one / (2 * two):.1%}; local[1] / read_capture ({plain:.2f} s) = {one / plain:.2f}", flush=True)
        series = spark_time("local[2]", parts, runs)
        print(f"  the 4 files as a rotation series (stitched: 2 shares, each task reads all 4 files), local[2] "
              f"{series:.2f} s: {series / two:.2f}x the files read apart", flush=True)
        # one file: whole in one task, or in 2 shares (each task reads every packet, decodes half the
        # rows); alternated five times and the medians taken, the gain being close to this
        # machine's run-to-run variation
        wholes, shared = [], []
        for _ in range(PAIRS):
            wholes.append(spark_time("local[1]", p, runs, minPartitions=1))
            shared.append(spark_time("local[2]", p, runs, minPartitions=2))
        whole, shares = sorted(wholes)[PAIRS // 2], sorted(shared)[PAIRS // 2]
        print(f"Spark on {label} as one file (medians of {PAIRS} alternating runs): local[1] whole {whole:.2f} s, "
              f"local[2] in 2 shares {shares:.2f} s: {whole / shares:.2f}x faster, scaling efficiency "
              f"{whole / (2 * shares):.1%}", flush=True)

    big = copies(path, port, max(1, -(-2_000_000_000 // size)))
    scaling(f"the capture ({size / 1e6:.0f} MB)", path, 3)
    scaling(f"{big.stat().st_size / 1e9:.1f} GB", big, 1)
    # a rotated capture: many small files, packed into few tasks as Spark's file sources pack them
    small_dir = OUT / "small-files"
    if not small_dir.exists():
        small_dir.mkdir()
        for i in range(SMALL_FILES):
            shutil.copyfile(ROOT / "sample_pcaps" / "mock-kcat.pcap", small_dir / f"kcat.pcap{i}")
    out = json.loads(subprocess.run([sys.executable, "-c", SMALL_FILES_TIMED, str(small_dir)], capture_output=True,
                                    text=True, check=True).stdout.splitlines()[-1])
    print(f"Spark on {SMALL_FILES} small files (16 KB each), local[2]: packed into {out['tasks']} tasks "
          f"{out['packed']:.2f} s, a task per file {out['each']:.2f} s ({out['each'] / out['packed']:.1f}x); "
          f"Spark's binaryFile source on them {out['binaryFile']:.2f} s (kafkawire/binaryFile = "
          f"{out['packed'] / out['binaryFile']:.2f})", flush=True)
    # the same two cores without Spark: two read_capture processes on two of those files at once, and
    # the one large file whole in one process against its 2 shares in two processes at once
    two_files = sorted(split_into(big, 4).iterdir())[:2]
    seq = min(sum(at_once([ours(f)]) for f in two_files) for _ in range(2))
    par = min(at_once([ours(f) for f in two_files]) for _ in range(2))
    print(f"without Spark, two files of {two_files[0].stat().st_size / 1e6:.0f} MB: one after the other {seq:.2f} s, "
          f"two processes at once {par:.2f} s: scaling efficiency {seq / (2 * par):.1%}", flush=True)
    share = [[sys.executable, "-c", SHARE_READ, str(big), str(k), str(n)] for k, n in ((0, 1), (0, 2), (1, 2))]
    whole = min(at_once(share[:1]) for _ in range(2))
    par = min(at_once(share[1:]) for _ in range(2))
    print(f"without Spark, {big.stat().st_size / 1e9:.1f} GB as one file: whole {whole:.2f} s, its 2 shares in two "
          f"processes at once {par:.2f} s: scaling efficiency {whole / (2 * par):.1%}", flush=True)
    print("the JVM's share of the CPU the queries used (the rest: Spark's Python workers): " +
          ", ".join(f"{m} {min(v):.0%}-{max(v):.0%}" for m, v in cpu_seen.items()), flush=True)

    # one-packet connections against ordinary traffic per packet, timed the same way (in-process,
    # the reading alone), in the default row shape and in rows=connections (a row per connection)
    n_packets = sum(1 for _ in CaptureReader(str(path)))
    # the peer on the same inputs: tshark -T fields, one run each (its start-up is 1% of it)
    peer_per = {}
    for kind in ("syn", "segment"):
        many = many_connections(kind)
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", PEAK_CHILD] + tshark_fields(many, 9092), check=True,
                           capture_output=True, text=True)
        peer_per[kind] = (time.perf_counter() - t) / 1_000_000
        print(f"10^6 one-packet connections ({kind}), tshark -T fields: {int(r.stdout) / 1024:.0f} MiB peak, "
              f"{peer_per[kind] * 1e6:.1f} us/packet ({peer_per[kind] * n_packets / peer:.2f}x its own per packet on "
              f"the real capture, {peer / n_packets * 1e6:.1f} us)", flush=True)
    for shape in ("exchanges", "connections"):
        r = subprocess.run([sys.executable, "-c", PEAK_TIMED, str(path), shape, "warm"], check=True,
                           capture_output=True, text=True)
        ordinary = float(r.stdout.split()[2]) / n_packets
        for kind in ("syn", "segment"):
            many = many_connections(kind)
            r = subprocess.run([sys.executable, "-c", PEAK_TIMED, str(many), shape], check=True, capture_output=True,
                               text=True)
            rows, kib, took = r.stdout.split()
            per = float(took) / 1_000_000
            print(f"10^6 one-packet connections ({kind}, rows={shape}): {int(kib) / 1024:.0f} MiB peak, "
                  f"{per * 1e6:.1f} us/packet ({per / ordinary:.2f}x the real capture's {ordinary * 1e6:.1f} us per "
                  f"packet), {rows} rows; tshark/kafkawire = {peer_per[kind] / per:.2f}x", flush=True)

    for label, p in (("capture", path), ("2 GB", big)):
        r = subprocess.run([sys.executable, "-c", PEAK_OURS, str(p)], check=True, capture_output=True, text=True)
        rows, kib = r.stdout.split()
        line = f"peak memory, {label} ({p.stat().st_size / 1e9:.2f} GB, {rows} rows): kafkawire {int(kib) / 1024:.0f} MiB"
        if p == path:
            t = subprocess.run([sys.executable, "-c", PEAK_CHILD, "tshark", "-r", str(p), "-d",
                                f"tcp.port=={port},kafka", "-V"], check=True, capture_output=True, text=True)
            line += f", tshark -V {int(t.stdout) / 1024:.0f} MiB"
        print(line, flush=True)

    hostile(path)


if __name__ == "__main__":
    main()
