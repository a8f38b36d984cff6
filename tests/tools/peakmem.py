"""The peak memory of a command and every process it starts (Spark's JVM and Python workers among
them): polls /proc twice a second and prints, at the end, the largest resident set of any one
process (with its name) and the largest sum at one time.

    python tests/tools/peakmem.py COMMAND [ARGS...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    return kids


def _rss_kib(pid: int) -> tuple[int, str]:
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields.get("VmRSS", "0 kB").split()[0]), fields.get("Name", "?").strip()
    except (OSError, ValueError):
        return 0, "?"


def main(argv: list[str]) -> int:
    proc = subprocess.Popen(argv)
    largest, name, total_peak = 0, "", 0
    while proc.poll() is None:
        kids = _children()
        todo, total = [proc.pid], 0
        while todo:
            pid = todo.pop()
            rss, what = _rss_kib(pid)
            total += rss
            if rss > largest:
                largest, name = rss, what
            todo.extend(kids.get(pid, []))
        total_peak = max(total_peak, total)
        time.sleep(0.5)
    print(f"peak memory: largest process {largest / 1024:,.0f} MiB ({name}), all processes at once "
          f"{total_peak / 1024:,.0f} MiB", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
