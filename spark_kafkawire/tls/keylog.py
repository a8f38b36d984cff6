"""TLS key logs (NSS key log format): the secrets that let TLS captures be decrypted.

Written by SSLKEYLOGFILE (OpenSSL-based clients, librdkafka where built with it, curl, browsers),
Python's ``ssl.SSLContext.keylog_filename``, Go's ``tls.Config.KeyLogWriter``, rustls'
``KeyLogFile`` and Java agents (jSSLKeyLog, extract-tls-secrets). One line per secret::

    CLIENT_RANDOM <client random, hex> <TLS 1.2 master secret, hex>
    CLIENT_HANDSHAKE_TRAFFIC_SECRET <client random> <secret>       (TLS 1.3, and the three below)
    SERVER_HANDSHAKE_TRAFFIC_SECRET <client random> <secret>
    CLIENT_TRAFFIC_SECRET_0 <client random> <secret>
    SERVER_TRAFFIC_SECRET_0 <client random> <secret>

Lines are taken as tshark takes them: a label, the client random and the secret, separated by
white space; fields after these are ignored; comments and other labels are passed over. The same
secrets may also come in a pcapng's Decryption Secrets Block (``editcap --inject-secrets``): see
:meth:`KeyLog.fork`. Where both hold a session, the operator's key log comes first and the block's
secrets are tried where its own do not verify (:meth:`KeyLog.choices`).

Secrets never leave this module and the TLS stage: a KeyLog shows only how many sessions it holds,
and an error names the file, never a line of it.
"""

from __future__ import annotations

import os
import stat
import time
from typing import Iterable, Iterator

from ..wire.fs import local_path, open_binary

LABELS = frozenset({"CLIENT_RANDOM", "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                    "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"})
MAX_KEYLOG_BYTES = 256 << 20  # a key log larger than this is refused (about two million sessions)
REMOTE_KEEP_S = 60  # a key log read from object storage is read again after this long
MAX_HISTORY = 1 << 20  # sessions claimed remembered across the files of a process (see KeyLog.history)
_TLS13 = ("CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0")


class KeyLogError(ValueError):
    """A key log that cannot be read: names the file only."""


class KeyLog:
    """Secrets by client random: ``secrets(client_random)`` -> {label: secret}.

    The secrets read from files are shared (a read of several capture files reads the key log once,
    see :func:`cached`); what one capture file's connections claim is its own: each file reads with
    a :meth:`fork`, which may add the file's own secrets (a pcapng Decryption Secrets Block)."""

    def __init__(self) -> None:
        self._by_random: dict[bytes, dict[str, bytes]] = {}
        self._own: dict[bytes, dict[str, bytes]] = {}  # this fork's secrets (from the capture file itself)
        #: client randoms of the sessions a connection of this file claimed (its handshake, or a trial that
        #: verified): no other connection's trial tries them (see tls.TlsSession.trial)
        self.claimed: set[bytes] = set()
        self.shaken: set[bytes] = set()  # ... of those, the sessions whose ClientHello is in the file
        self.given = False  # secrets were given (a file, or a Decryption Secrets Block): else "no key log"
        self._order: list[bytes] | None = None  # TLS 1.3 sessions in the log's order (for trials)
        self._index: dict[bytes, int] | None = None
        self._anchor: int | None = None  # the earliest position in _order claimed so far
        self._base: KeyLog | None = None  # the log a fork was made from
        #: the sessions connections of the files read with this log claimed, in the order claimed:
        #: the latest of them is where a rotated file's cut connections began
        self.history: list[bytes] = []

    def __repr__(self) -> str:  # never the secrets
        return f"KeyLog({len(self)} sessions)"

    def __len__(self) -> int:
        return len(self._by_random) + sum(1 for r in self._own if r not in self._by_random)

    def add_text(self, text: bytes, own: bool = False) -> None:
        """Take the secrets of key-log text (own: the capture file's own, for this fork only)."""
        into = self._own if own else self._by_random
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 3 or parts[0].decode("ascii", "replace") not in LABELS:
                continue  # comments, other labels (EXPORTER_SECRET, early data), damaged lines
            try:
                random, secret = bytes.fromhex(parts[1].decode("ascii")), bytes.fromhex(parts[2].decode("ascii"))
            except (ValueError, UnicodeDecodeError):
                continue
            if len(random) == 32 and 32 <= len(secret) <= 64:
                into.setdefault(random, {})[parts[0].decode("ascii")] = secret
        self.given = True
        self._order = self._index = None
        self._anchor = None

    def fork(self) -> "KeyLog":
        """A view of the same secrets with nothing claimed (one capture file's)."""
        view = KeyLog()
        view._by_random = self._by_random
        view.given = self.given
        view._base = self
        return view

    def secrets(self, client_random: bytes) -> dict[str, bytes] | None:
        """The session's secrets: the operator's key log's first (option tlsKeyLog), else the capture
        file's own (a Decryption Secrets Block); see :meth:`choices`."""
        given = self._by_random.get(client_random)
        if given is not None:
            return given
        return self._own.get(client_random) if self._own else None

    def choices(self, client_random: bytes) -> list[dict[str, bytes]]:
        """Every set of secrets known for the session, the key log's first: where the key log and
        the capture's own secrets differ, both are tried (a capture's secrets block may be wrong)."""
        out = [d for d in (self._by_random.get(client_random), self._own.get(client_random) if self._own else None)
               if d is not None]
        return out[:1] if len(out) == 2 and out[0] == out[1] else out

    def randoms(self) -> Iterable[bytes]:
        return list(self._by_random) + [r for r in self._own if r not in self._by_random]

    def _positions(self) -> tuple[list[bytes], dict[bytes, int]]:
        if self._order is None or self._index is None:
            order = [r for r in self.randoms() if any(k in (self.secrets(r) or ()) for k in _TLS13)]
            self._order, self._index = order, {r: i for i, r in enumerate(order)}
        return self._order, self._index

    def claim(self, client_random: bytes) -> None:
        """A connection of this file has this session (its handshake, or a trial that verified)."""
        self.claimed.add(client_random)
        if self._index is not None:
            i = self._index.get(client_random)
            if i is not None and (self._anchor is None or i < self._anchor):
                self._anchor = i
        if self._base is not None and len(self._base.history) < MAX_HISTORY:
            self._base.history.append(client_random)

    def trial_order(self) -> Iterator[bytes]:
        """The TLS 1.3 sessions no connection of this file claimed, most likely first: those just
        before the earliest session this file's handshakes claimed (the log is in time order, and a
        rotated file's cut connections began just before its first new ones), going back, then
        those after it. Without a claimed session in this file: from the latest session a file read
        before with this log claimed (the file before it in the rotation), back; else newest first."""
        had = self._index is not None
        order, index = self._positions()
        if not had:  # the claims so far (made before the positions were known)
            for r in self.claimed:
                i = index.get(r)
                if i is not None and (self._anchor is None or i < self._anchor):
                    self._anchor = i
        anchor = self._anchor
        if anchor is None and self._base is not None:
            before = [index[r] for r in self._base.history if r in index]
            anchor = max(before) + 1 if before else None
        if anchor is None:
            anchor = len(order)
        claimed = self.claimed
        for i in range(anchor - 1, -1, -1):
            if order[i] not in claimed:
                yield order[i]
        for i in range(anchor, len(order)):
            if order[i] not in claimed:
                yield order[i]

    @classmethod
    def read(cls, paths: str, endpoint: str | None = None) -> "KeyLog":
        """The key logs of a comma-separated list of files (local paths or URIs)."""
        log = cls()
        for path in (p.strip() for p in paths.split(",")):
            if not path:
                continue
            try:
                local = local_path(path)
            except Exception:
                raise KeyLogError(f"tlsKeyLog: {path}: cannot be read (no such file, or no access)") from None
            if local is not None:
                try:
                    mode = os.stat(local).st_mode
                except OSError:
                    raise KeyLogError(f"tlsKeyLog: {path}: cannot be read (no such file, or no access)") from None
                if not stat.S_ISREG(mode):
                    raise KeyLogError(f"tlsKeyLog: {path}: not a regular file (a FIFO, device or directory is not "
                                      "read: copy the key log to a file)")
            try:
                with open_binary(path, endpoint) as f:
                    data = f.read(MAX_KEYLOG_BYTES + 1)
            except Exception:
                raise KeyLogError(f"tlsKeyLog: {path}: cannot be read (no such file, or no access)") from None
            if len(data) > MAX_KEYLOG_BYTES:
                raise KeyLogError(f"tlsKeyLog: {path}: larger than {MAX_KEYLOG_BYTES >> 20} MiB")
            log.add_text(data)
        log.given = True
        return log


_cache: dict[tuple[str, str | None], tuple[tuple[tuple[int, int, int] | None, ...], float, KeyLog]] = {}


def _stamp(paths: str) -> tuple[tuple[int, int, int] | None, ...]:
    """What tells whether the local files of a key-log list changed (None for remote ones)."""
    out: list[tuple[int, int, int] | None] = []
    for path in (p.strip() for p in paths.split(",")):
        try:
            local = local_path(path) if path else None
        except Exception:
            local = None
        if local is None:
            out.append(None)
            continue
        try:
            st = os.stat(local)
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


def cached(paths: str, endpoint: str | None = None) -> KeyLog:
    """The key logs of ``paths``, read once in this process while the files are unchanged (remote
    ones: for REMOTE_KEEP_S), as a fresh :meth:`~KeyLog.fork` for one capture file."""
    key = (paths, endpoint)
    stamp = _stamp(paths)
    hit = _cache.get(key)
    now = time.monotonic()
    if hit is None or hit[0] != stamp or (None in stamp and now - hit[1] > REMOTE_KEEP_S):
        _cache.clear()  # one key log at a time: they can be large
        hit = _cache[key] = (stamp, now, KeyLog.read(paths, endpoint))
    return hit[2].fork()
