"""TLS key logs (NSS key log format): the secrets that let TLS captures be decrypted.

Written by SSLKEYLOGFILE (OpenSSL-based clients, librdkafka where built with it, curl, browsers),
Python's ``ssl.SSLContext.keylog_filename``, Go's ``tls.Config.KeyLogWriter``, rustls'
``KeyLogFile`` and Java agents (jSSLKeyLog, extract-tls-secrets). One line per secret::

    CLIENT_RANDOM <client random, hex> <TLS 1.2 master secret, hex>
    CLIENT_HANDSHAKE_TRAFFIC_SECRET <client random> <secret>       (TLS 1.3, and the three below)
    SERVER_HANDSHAKE_TRAFFIC_SECRET <client random> <secret>
    CLIENT_TRAFFIC_SECRET_0 <client random> <secret>
    SERVER_TRAFFIC_SECRET_0 <client random> <secret>

Secrets never leave this module and tls.py: a KeyLog shows only how many sessions it holds, and
an error names the file, never a line of it.
"""

from __future__ import annotations

from typing import Iterable

from .fs import open_binary

LABELS = frozenset({"CLIENT_RANDOM", "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                    "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"})
MAX_KEYLOG_BYTES = 256 << 20  # a key log larger than this is refused (about two million sessions)


class KeyLogError(ValueError):
    """A key log that cannot be read: names the file only."""


class KeyLog:
    """Secrets by client random: ``secrets(client_random)`` -> {label: secret}."""

    def __init__(self) -> None:
        self._by_random: dict[bytes, dict[str, bytes]] = {}
        #: client randoms of the handshakes read so far: the rest are what a connection whose
        #: handshake is not in the capture may be (see tls.TlsSession.trial)
        self.claimed: set[bytes] = set()

    def __repr__(self) -> str:  # never the secrets
        return f"KeyLog({len(self._by_random)} sessions)"

    def __len__(self) -> int:
        return len(self._by_random)

    def add_text(self, text: bytes) -> None:
        for line in text.splitlines():
            parts = line.split()
            if len(parts) != 3 or parts[0].decode("ascii", "replace") not in LABELS:
                continue  # comments, other labels (EXPORTER_SECRET, early data), damaged lines
            try:
                random, secret = bytes.fromhex(parts[1].decode("ascii")), bytes.fromhex(parts[2].decode("ascii"))
            except (ValueError, UnicodeDecodeError):
                continue
            if len(random) == 32 and 32 <= len(secret) <= 64:
                self._by_random.setdefault(random, {})[parts[0].decode("ascii")] = secret

    def secrets(self, client_random: bytes) -> dict[str, bytes] | None:
        return self._by_random.get(client_random)

    def randoms(self) -> Iterable[bytes]:
        return self._by_random.keys()

    def unclaimed(self) -> list[tuple[bytes, dict[str, bytes]]]:
        """The TLS 1.3 sessions no handshake read so far claimed, newest last (the log's order)."""
        return [(r, s) for r, s in self._by_random.items() if r not in self.claimed and "CLIENT_TRAFFIC_SECRET_0" in s]

    @classmethod
    def read(cls, paths: str, endpoint: str | None = None) -> "KeyLog":
        """The key logs of a comma-separated list of files (local paths or URIs)."""
        log = cls()
        for path in (p.strip() for p in paths.split(",")):
            if not path:
                continue
            try:
                with open_binary(path, endpoint) as f:
                    data = f.read(MAX_KEYLOG_BYTES + 1)
            except Exception:
                raise KeyLogError(f"tlsKeyLog: {path}: cannot be read (no such file, or no access)") from None
            if len(data) > MAX_KEYLOG_BYTES:
                raise KeyLogError(f"tlsKeyLog: {path}: larger than {MAX_KEYLOG_BYTES >> 20} MiB")
            log.add_text(data)
        return log
