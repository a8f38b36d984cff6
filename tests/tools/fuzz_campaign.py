"""A long fuzzing campaign (not in CI): `make fuzz` [INPUTS, default 100000].

The mutators of tests/test_fuzz.py, driven by seeded random numbers instead of hypothesis, spread
over two processes: bodies of every layout, arbitrary connection streams, and mutated captures
(pcap bytes, pcapng timestamps and interface options, gzip streams), each decoded in one row shape
in turn, and the TLS captures attacked as tests/tools/tlsmutate.py does (each byte counted once is checked
too). An input that raises anything but the documented CaptureError is written to
tests/fuzz_corpus/<kind>/ (replayed by the tests from then on) and counted; the summary says how
many inputs of each kind ran and failed.
"""

from __future__ import annotations

import multiprocessing
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

KINDS = ("body", "stream", "pcap", "pcapng", "gzip", "tls")


def _one(kind: str, rnd: random.Random, tmp: Path) -> tuple[str, bytes, object]:
    import test_fuzz as tf

    if kind == "tls":  # a TLS capture of tests/tls/ attacked (tlsmutate.py), read with its key log
        import damage
        import tlsmutate as tm

        from spark_kafkawire import read_capture

        pcap = rnd.choice(tm.CAPTURES)
        packets, lt = damage.read(pcap)
        for _ in range(rnd.randrange(1, 4)):
            packets = tm.mutate(packets, rnd, rnd.choice(tm.MUTATIONS))
        path = tm.write(tmp / "tls.pcap", packets, lt)
        data = path.read_bytes()

        def check() -> None:
            conns = read_capture(path, rows="connections", tlsKeyLog=str(tm.keylog(pcap))).to_pylist()
            read_capture(path, rows="messages", tlsKeyLog=str(tm.keylog(pcap)))
            tm.check_accounting(conns, packets)
        return "capture", data, check
    if kind == "body":
        data = bytes(rnd.randrange(256) for _ in range(rnd.randrange(5, 300)))
        return "body", data, lambda: tf.check_body(data)
    if kind == "stream":
        data = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 2000)))
        return "stream", data, lambda: tf.check_stream(data, tmp)
    if kind == "pcap":
        data = bytearray(tf.SAMPLE[: rnd.randrange(24, len(tf.SAMPLE) + 1)])
        for _ in range(rnd.randrange(1, 12)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
    elif kind == "pcapng":
        data = bytearray(tf.SAMPLE_NG)
        for _ in range(rnd.randrange(1, 8)):
            data[rnd.choice(tf.NG_FIELDS)] = rnd.randrange(256)
    else:
        data = bytearray(tf.GZ[: rnd.randrange(11, len(tf.GZ) + 1)])
        for _ in range(rnd.randrange(1, 4)):
            data[rnd.randrange(10, len(data))] = rnd.randrange(256)
    data = bytes(data)
    return "capture", data, lambda: tf.check_capture(data, tmp)


def _worker(args: tuple[int, int]) -> tuple[Counter, Counter, list[str]]:
    import test_fuzz as tf

    seed, count = args
    rnd = random.Random(seed)
    ran, failed, notes = Counter(), Counter(), []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for i in range(count):
            kind = KINDS[i % len(KINDS)]
            corpus_kind, data, run = _one(kind, rnd, tmp)
            ran[kind] += 1
            try:
                run()
            except Exception as e:  # anything but the documented errors is a finding
                failed[kind] += 1
                tf._keep(corpus_kind, data)
                if len(notes) < 5:
                    notes.append(f"{kind}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")
    return ran, failed, notes


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    procs = 2
    start = time.perf_counter()
    with multiprocessing.Pool(procs) as pool:
        results = pool.map(_worker, [(seed, total // procs) for seed in range(procs)])
    ran, failed = Counter(), Counter()
    for r, f, notes in results:
        ran += r
        failed += f
        for n in notes:
            print(n)
    took = time.perf_counter() - start
    print(f"{sum(ran.values()):,} inputs in {took:.0f} s: " + ", ".join(f"{k} {ran[k]:,}" for k in KINDS))
    print(f"failures: {sum(failed.values())}" + (" (" + ", ".join(f"{k} {v}" for k, v in failed.items()) + ")"
                                                 if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
