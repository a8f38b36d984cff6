"""A TLS connection: its handshake, its keys from a key log (or a trial of the key log's sessions
where the handshake was not captured) and its two directions' records decrypted into the Kafka
framers."""

from __future__ import annotations

from typing import Callable

from .handshake import Handshake
from .keys import TLS13, Keys, Payload, suite_fits, tls12_keys, tls13_keys
from .records import TRIAL_RECORDS, TlsDirection
from .suites import SUITES
from .budget import TrialBudget

NO_KEY_LOG = "no key log given (option tlsKeyLog, or a pcapng Decryption Secrets Block)"


class TlsSession(Handshake):
    """One TLS connection: what its handshake says in clear, and, with its secrets from a key log,
    its two byte streams decrypted into the Kafka framers (``outputs``, by direction).

    ``start_captured``: the connection's first bytes are in the capture (its SYN was), so a record
    before any handshake is not tried with the key log's sessions. Counts: ``decrypted`` (plaintext
    bytes handed on); each direction's ``read``, ``undecrypted``, ``other`` and ``gap`` (see the
    module's docstring); ``problem`` says why bytes were not decrypted."""

    def __init__(self, keylog, outputs: list, client_dir: int | None, on_client: Callable[[int], None] | None = None,
                 start_captured: bool = False, budget: TrialBudget | None = None):
        self.keylog = keylog
        self.outputs = outputs
        self.client_dir = client_dir
        self.on_client = on_client
        self.start_captured = start_captured
        self.budget = budget if budget is not None else TrialBudget()
        self.dirs = [TlsDirection(self, 0), TlsDirection(self, 1)]
        self.counts: list[tuple[int, int, int, int]] | None = None  # the directions' counts, once released
        Handshake.__init__(self)
        self.decrypted = 0
        self.problem: str | None = None
        self.trials = 0  # trial decryptions after gaps so far (at most RESYNC_BUDGET)
        self.trial_work = 0  # trial decryptions without the handshake so far (see trial)
        self.trialled = False  # decrypted without its handshake (see trial)

    def release(self) -> None:
        """The connection has ended: keep the directions' counts, drop the links to the directions,
        the framers and the listener (the directions link back here), so that no reference cycle is
        left."""
        if self.counts is None:
            self.counts = [x.counts() for x in self.dirs]
        self.dirs = []
        self.outputs = []
        self.on_client = None

    def direction_counts(self, d: int) -> tuple[int, int, int, int]:
        """(read, undecrypted, other, gap) bytes of direction d."""
        return self.counts[d] if self.counts is not None else self.dirs[d].counts()

    @property
    def undecrypted(self) -> int:
        """Captured bytes of the connection that were not read: records not decrypted and bytes in
        no record read."""
        return sum(c[1] + c[2] for c in (self.direction_counts(0), self.direction_counts(1)))

    def describe(self) -> str:
        """A row's detail: the negotiated version and suite, server name, ALPN, and what became of
        the encrypted bytes."""
        from ..escape import printable

        _ = self.cert  # read now: a certificate that cannot be read is among the notes
        parts = [self.version_name or "TLS (version not captured)"]
        if self.suite is not None:
            parts.append(str(self.suite_name))
        if self.server_name:
            parts.append(f"server name {printable(self.server_name)}")
        if self.alpn:
            parts.append("ALPN " + ",".join(printable(a) for a in self.alpn))
        parts.extend(self.notes)
        undecrypted = self.undecrypted
        if self.decrypted and not undecrypted:
            state = f"decrypted ({self.decrypted} bytes)"
        elif self.decrypted:
            state = f"{self.decrypted} bytes decrypted, {undecrypted} not: {self.problem}"
        else:
            state = f"encrypted, not decrypted: {self.problem or self._no_keys()}"
        return ", ".join(parts) + ": " + state

    def _no_keys(self) -> str:
        return NO_KEY_LOG if self.keylog is None or not self.keylog.given else "no record to decrypt"

    def fail(self, why: str) -> None:
        """Bytes were not decrypted: the first reason is the one shown."""
        if self.problem is None:
            self.problem = why

    # -- keys ----------------------------------------------------------------------------------
    def _suite_ok(self) -> bool:
        """Are the version and suite known, decrypted here, and do they fit each other? (The problem
        says why not.)"""
        if self.suite is None or self.version is None:
            self.fail("the handshake is not in the capture")
            return False
        name, kind = SUITES.get(self.suite, (f"0x{self.suite:04X}", None))[:2]
        if kind is None:
            self.fail(f"cipher suite {name} is not decrypted")
            return False
        if not suite_fits(self.suite, self.version):
            self.fail(f"cipher suite {name} does not fit {self.version_name or f'version 0x{self.version:04X}'}")
            return False
        return True

    def _session_secrets(self) -> dict[str, bytes] | None:
        if self.keylog is None or not self.keylog.given:
            self.fail(NO_KEY_LOG)
            return None
        secrets = self.keylog.secrets(self.client_random) if self.client_random is not None else None
        if secrets is None:
            self.fail("the key log has no secret for this session" if self.client_random is not None
                      else "the handshake is not in the capture")
        return secrets

    def tls13(self, label: str) -> tuple[Keys, bytes] | None:
        """TLS 1.3 record keys from the key log's traffic secret ``label``, with that secret."""
        if not self._suite_ok():
            return None
        secrets = self._session_secrets()
        secret = secrets.get(label) if secrets else None
        if secret is None:
            if secrets is not None:
                self.fail("the key log has no secret for this session")
            return None
        keys = tls13_keys(secret, self.suite)  # type: ignore[arg-type]
        if keys is None:
            self.fail("the key log's secret does not fit the cipher suite")
            return None
        return keys, secret

    def tls12(self, d: int) -> Keys | None:
        """TLS 1.1/1.2 record keys of direction d from the master secret."""
        if not self._suite_ok():
            return None
        secrets = self._session_secrets()
        master = secrets.get("CLIENT_RANDOM") if secrets else None
        if master is None or self.server_random is None or self.client_random is None:
            if secrets is not None:
                self.fail("the key log has no secret for this session")
            return None
        try:
            return tls12_keys(self.suite, self.version, master, self.server_random,  # type: ignore[arg-type]
                              self.client_random, d == self.client_dir, self.etm)
        except ValueError as e:
            self.fail(str(e))
            return None

    def spend(self, count: int) -> int:
        """Trial decryptions granted of ``count`` asked (0 when a budget is spent: the problem says
        which)."""
        b = self.budget
        grant = max(0, min(count, b.per_connection - self.trial_work, b.task_left))
        if grant <= 0:
            self.fail("the handshake is not in the capture, and the trial budget ran out before a secret of the key "
                      "log verified its records (" + ("option tlsTrialTaskBudget, for all connections of the file)"
                                                      if b.task_left <= 0 else "option tlsTrialBudget)"))
        self.trial_work += grant
        b.task_left -= grant
        return grant

    def trial(self, d: int, header: bytes, payload: Payload) -> tuple[Keys, bytes] | None:
        """A connection whose handshake is not in the capture (a rotated file, a capture started
        late): its first whole protected record is tried with the TLS 1.3 application secrets of
        the key log's sessions that no connection of this file has claimed, nearest in the log to
        the sessions this file's handshakes claimed first (a rotated file's cut connections began
        just before them), AES-GCM suites before ChaCha20, record sequence numbers 0 to
        TRIAL_RECORDS, within the budgets. Keys that verify it are this direction's, and the session
        is claimed by this connection: no other connection tries it."""
        log = self.keylog
        if log is None or not log.given:
            self.fail(NO_KEY_LOG)
            return None
        labels = ("CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0") if self.client_dir is None else \
            ("CLIENT_TRAFFIC_SECRET_0" if d == self.client_dir else "SERVER_TRAFFIC_SECRET_0",)
        for suites in ((0x1301, 0x1302), (0x1303,)):
            for random in log.trial_order():
                secrets = log.secrets(random) or {}
                for label in labels:
                    secret = secrets.get(label)
                    for suite in suites if secret is not None else ():
                        keys = tls13_keys(secret, suite)  # type: ignore[arg-type]
                        if keys is None:
                            continue
                        count = self.spend(TRIAL_RECORDS)
                        if not count:
                            return None
                        seq = keys.find(header, payload, 0, count)
                        if seq is None:
                            continue
                        keys.seq = seq
                        self.version, self.suite, self.client_random = TLS13, suite, random
                        log.claim(random)
                        if self.client_dir is None:
                            self.client_dir = d if label.startswith("CLIENT") else 1 - d
                            if self.on_client is not None:
                                self.on_client(self.client_dir)
                        self.trialled = True
                        return keys, secret  # type: ignore[return-value]
        self.fail("the handshake is not in the capture, and no secret of the key log that no other connection "
                  "claimed verified its records")
        return None
