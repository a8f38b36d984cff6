"""A network with a known delay and loss, for the tests: this machine's kernel has no netem.

Three network namespaces: the client's (``<tag>c``, device ``<tag>c0``, 10.77.x.1/24), the broker's
(``<tag>b``, ``<tag>b0``, 10.77.x.2/24) and between them the forwarder's (``<tag>f``), joined by two
veth pairs (segmentation offloads off: frames as a wire carries them). The forwarder is this file
run as a program in the middle namespace: two raw AF_PACKET sockets, one on each veth end, and
every Ethernet frame that arrives on one is sent out of the other ``delay_ms`` later, except a
``loss`` share of the frames carrying TCP payload (chosen by a seeded random generator), dropped.

    with Impaired(delay_ms=20, loss=0.0) as net:
        net.run_in("b", [...])    # the broker, at net.broker_ip
        net.run_in("c", [...])    # the client

    python impair.py DEV_A DEV_B DELAY_MS LOSS SEED      (the forwarder; in the middle namespace)
"""

from __future__ import annotations

import heapq
import os
import random
import select
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

ETH_P_ALL = 0x0003


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def _tcp_payload(frame: bytes) -> bool:
    """An IPv4 TCP frame with payload (ARP, the handshake and pure ACKs are never dropped)."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
        return False
    ihl = (frame[14] & 0x0F) * 4
    total = int.from_bytes(frame[16:18], "big")
    tcp = 14 + ihl
    if len(frame) < tcp + 13:
        return False
    return total - ihl - (frame[tcp + 12] >> 4) * 4 > 0


def forward(dev_a: str, dev_b: str, delay_ms: float, loss: float, seed: int) -> None:
    socks = []
    for dev in (dev_a, dev_b):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((dev, 0))
        s.setblocking(False)
        socks.append(s)
    rng = random.Random(seed)
    delay = delay_ms / 1000
    due: list[tuple[float, int, int, bytes]] = []  # (time to send, order, out socket index, frame)
    n = 0
    dropped = [0, 0]  # frames with TCP payload dropped, from dev_a and from dev_b

    def report(*_) -> None:  # asked to stop: say what was dropped
        print(f"dropped {dropped[0]} {dropped[1]}", flush=True)
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, report)
    print("ready", flush=True)
    while True:
        wait = max(0.0, due[0][0] - time.monotonic()) if due else 1.0
        ready, _, _ = select.select(socks, [], [], wait)
        for s in ready:
            while True:
                try:
                    frame, addr = s.recvfrom(65535)
                except BlockingIOError:
                    break
                if addr[2] == socket.PACKET_OUTGOING:  # our own frames, seen again
                    continue
                if loss and _tcp_payload(frame) and rng.random() < loss:
                    dropped[socks.index(s)] += 1
                    continue
                n += 1
                heapq.heappush(due, (time.monotonic() + delay, n, 1 - socks.index(s), frame))
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, out, frame = heapq.heappop(due)
            socks[out].send(frame)


class Impaired:
    """The three namespaces and the forwarder (see the module)."""

    def __init__(self, delay_ms: float, loss: float = 0.0, seed: int = 1, tag: str | None = None):
        self.delay_ms, self.loss, self.seed = delay_ms, loss, seed
        self.tag = tag or f"kwi{os.getpid() % 10000}"
        net = 77 + os.getpid() % 100
        self.client_ip, self.broker_ip = f"10.{net}.0.1", f"10.{net}.0.2"
        self.ns = {side: f"{self.tag}{side}" for side in "cbf"}
        self.dev = {"c": f"{self.tag}c0", "b": f"{self.tag}b0", "fc": f"{self.tag}f0", "fb": f"{self.tag}f1"}
        self.proc: subprocess.Popen | None = None
        #: frames with TCP payload the forwarder dropped: sent by the client, sent by the broker (after exit)
        self.dropped: tuple[int, int] | None = None

    def __enter__(self) -> "Impaired":
        ns, dev = self.ns, self.dev
        for n in ns.values():
            _sh("ip", "netns", "add", n)
        _sh("ip", "link", "add", dev["c"], "netns", ns["c"], "type", "veth", "peer", "name", dev["fc"], "netns", ns["f"])
        _sh("ip", "link", "add", dev["b"], "netns", ns["b"], "type", "veth", "peer", "name", dev["fb"], "netns", ns["f"])
        for side, d, addr in (("c", dev["c"], self.client_ip), ("b", dev["b"], self.broker_ip), ("f", dev["fc"], None),
                              ("f", dev["fb"], None)):
            if addr:
                self.sh(side, "ip", "addr", "add", f"{addr}/24", "dev", d)
            self.sh(side, "ip", "link", "set", d, "up")
            self.sh(side, "ip", "link", "set", "lo", "up")
            # (tx: checksums computed by the sender, not left to an offload the forwarder would carry unfinished)
            self.sh(side, "ethtool", "-K", d, "tso", "off", "gso", "off", "gro", "off", "tx", "off")
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns["f"], sys.executable, __file__, dev["fc"], dev["fb"],
                                      str(self.delay_ms), str(self.loss), str(self.seed)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.proc.terminate()  # (ip netns exec hands the signal on: it execs the forwarder)
            out, _ = self.proc.communicate(timeout=10)
            words = out.split()
            if len(words) >= 3 and words[-3] == "dropped":
                self.dropped = (int(words[-2]), int(words[-1]))
        for n in self.ns.values():
            subprocess.run(["ip", "netns", "del", n], capture_output=True)

    def sh(self, side: str, *cmd: str) -> None:
        _sh("ip", "netns", "exec", self.ns[side], *cmd)

    def command(self, side: str, cmd: list[str]) -> list[str]:
        """A command run in a side's namespace ("c" the client's, "b" the broker's)."""
        return ["ip", "netns", "exec", self.ns[side], *cmd]


@contextmanager
def impaired(delay_ms: float, loss: float = 0.0, seed: int = 1):
    with Impaired(delay_ms, loss, seed) as net:
        yield net


if __name__ == "__main__":
    forward(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
