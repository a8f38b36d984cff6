"""Benchmark: decode time against tshark on the same capture, in the same run.

    make bench

Builds a larger capture from a real sample (each copy of its connections moved to other client
ports and later in time), then times, each as a fresh process and best of 3:
  - kafkawire: read_capture(file) -> Arrow table of exchanges
  - tshark:    tshark -r file -d tcp.port==P,kafka -T fields -e kafka.api_key ... (header fields only)
  - tshark -V: the same file fully dissected, every field printed (closer to what we decode)
and prints the ratio. Spark is not involved (its start-up would dominate).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from pathlib import Path

import dpkt

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "sample_pcaps" / "tansu-confluent-codecs.pcap"


def build(out: Path, copies: int) -> tuple[int, int]:
    from spark_kafkawire.capture import CaptureReader

    broker = json.loads((ROOT / "sample_pcaps" / "manifest.json").read_text())[SOURCE.name]["broker_ports"][0]
    pkts = list(CaptureReader(str(SOURCE)))
    span = pkts[-1].ts_ns - pkts[0].ts_ns + 1_000_000
    n = 0
    with open(out, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=1, nano=True, snaplen=262144)
        def moved(port: int, i: int) -> int:
            """Copy i's client port: never the broker's (that would make a self-connection)."""
            port = (port + 7 * i) % 64000 + 1024
            return port + 1 if port == broker else port

        for i in range(copies):
            for p in pkts:
                d = bytearray(p.data)
                tcp = 14 + (d[14] & 0x0F) * 4  # Ethernet + IPv4
                sport, dport = struct.unpack_from("!HH", d, tcp)
                if sport != broker:
                    struct.pack_into("!H", d, tcp, moved(sport, i))
                if dport != broker:
                    struct.pack_into("!H", d, tcp + 2, moved(dport, i))
                w.writepkt(bytes(d), ts=(p.ts_ns + i * span) / 1e9)
                n += 1
    return n, broker


def best_of(cmd: list[str], runs: int = 3, keep_output: bool = False) -> tuple[float, str]:
    """Best wall time of ``runs`` runs, and (with keep_output) what the last run printed.

    Output not kept goes to /dev/null, so that a peer printing a lot is not slowed by a pipe.
    """
    best, out = float("inf"), ""
    for _ in range(runs):
        t = time.perf_counter()
        r = subprocess.run(cmd, check=True, stdout=subprocess.PIPE if keep_output else subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, text=True)
        best = min(best, time.perf_counter() - t)
        out = (r.stdout or "").strip()
    return best, out


PEAK_OURS = """
import resource, sys
from spark_kafkawire.reader import iter_batches
rows = sum(b.num_rows for b in iter_batches(sys.argv[1]))  # one file, streamed: what a Spark task does
print(rows, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
PEAK_CHILD = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def peak_memory(path: Path, broker: int) -> tuple[int, int]:
    """Peak resident memory (KiB) decoding ``path``: kafkawire streaming one file, and tshark -V."""
    ours = subprocess.run([sys.executable, "-c", PEAK_OURS, str(path)], check=True, capture_output=True, text=True)
    peer = subprocess.run([sys.executable, "-c", PEAK_CHILD, "tshark", "-r", str(path), "-d",
                           f"tcp.port=={broker},kafka", "-V"], check=True, capture_output=True, text=True)
    return int(ours.stdout.split()[1]), int(peer.stdout.strip())


def main() -> None:
    copies = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    out_dir = ROOT / "out" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "bench.pcap"
    packets, broker = build(path, copies)
    ours, rows = best_of([sys.executable, "-c",
                          f"import spark_kafkawire as k; print(k.read_capture({str(path)!r}).num_rows)"],
                         keep_output=True)
    tshark, _ = best_of(["tshark", "-r", str(path), "-d", f"tcp.port=={broker},kafka", "-T", "fields",
                      "-e", "kafka.api_key", "-e", "kafka.api_version", "-e", "kafka.correlation_id",
                      "-e", "kafka.client_id"])
    tshark_v, _ = best_of(["tshark", "-r", str(path), "-d", f"tcp.port=={broker},kafka", "-V"])
    size = path.stat().st_size / 1e6
    print(f"input: {packets} packets, {size:.1f} MB, {rows} exchanges ({copies} copies of {SOURCE.name})")
    print(f"kafkawire read_capture: {ours:6.2f} s  ({packets / ours:,.0f} packets/s)")
    print(f"tshark header fields:   {tshark:6.2f} s  ({packets / tshark:,.0f} packets/s)")
    print(f"tshark full dissection: {tshark_v:6.2f} s  ({packets / tshark_v:,.0f} packets/s)")
    print(f"ratio kafkawire/tshark header fields: {ours / tshark:.2f}; kafkawire/tshark -V: {ours / tshark_v:.2f}"
          "  (below 1: faster than tshark)")
    # memory: the same decode on this file and on one five times larger
    big = out_dir / "bench-x5.pcap"
    big_packets, _ = build(big, copies * 5)
    for label, p, n in (("1x", path, packets), ("5x", big, big_packets)):
        mine, peer = peak_memory(p, broker)
        print(f"peak memory {label} ({n} packets, {p.stat().st_size / 1e6:.0f} MB): kafkawire {mine / 1024:.0f} MiB, "
              f"tshark -V {peer / 1024:.0f} MiB, ratio {mine / peer:.2f}")


if __name__ == "__main__":
    main()
