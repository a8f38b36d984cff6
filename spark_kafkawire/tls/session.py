"""A TLS connection: its handshake, its keys from a key log (or a trial of the key log's sessions
where the handshake was not captured) and its two directions' records decrypted into the Kafka
framers."""

from __future__ import annotations

from typing import Callable

from .handshake import Handshake
from .keys import Keys, suite_fits, tls12_keys, tls13_keys
from .direction import TlsDirection
from .suites import SUITES
from .budget import TrialBudget
from .trial import NO_KEY_LOG, Trial



class TlsSession(Handshake, Trial):
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
        self.choice = 0  # which of the session's sets of secrets the keys are made from (KeyLog.choices)
        #: a trial verified one record, and no second record has verified yet: its plaintext is held (a
        #: record of another connection's session spliced in verifies too; its neighbours do not)
        self.unconfirmed = False
        self.refused: set[bytes] = set()  # sessions a trial found, then refuted (not tried again here)
        self.before_trial: int | None = None  # client_dir before the trial set it

    def release(self) -> None:
        """The connection has ended: keep the directions' counts, drop the links to the directions,
        the framers and the listener (the directions link back here), so that no reference cycle is
        left."""
        if self.counts is None:
            self.counts = [x.counts() for x in self.dirs]
        self.dirs = []
        self.outputs = []
        self.on_client = None

    def stash(self) -> None:
        """Before the connection's state is written for a later read (carry.py): the key log and the
        directions' keys are let go; :meth:`rekey` makes them again from the later read's key log."""
        self.keylog = None
        for x in self.dirs:
            x.stash()

    def rekey(self, keylog) -> None:
        self.keylog = keylog
        if keylog is not None and self.trialled and self.client_random is not None:
            keylog.claim(self.client_random)  # (no other connection's trial takes its session)
        for x in self.dirs:
            x.rekey()

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

    def other_secrets(self, used: int) -> bool:
        """The keys made from the session's secrets choice ``used`` verified no record: is there a
        later choice (the capture's own secrets where the key log's differ, see KeyLog.choices)? The
        session then takes it (``choice``), for both directions."""
        if self.choice > used:
            return True
        if self.keylog is None or self.client_random is None or \
                len(self.keylog.choices(self.client_random)) <= used + 1:
            return False
        self.choice = used + 1
        return True

    def _session_secrets(self) -> dict[str, bytes] | None:
        if self.keylog is None or not self.keylog.given:
            self.fail(NO_KEY_LOG)
            return None
        secrets = None
        if self.client_random is not None:
            choices = self.keylog.choices(self.client_random)
            secrets = choices[self.choice] if self.choice < len(choices) else None
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
