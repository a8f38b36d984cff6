"""The trial of a TLS connection whose handshake was not captured (a rotated file, a capture started
late): the key log's sessions that no connection of the file claimed are tried on its first
protected record, within budgets, and a session found is held unconfirmed until a second record
verifies (:class:`Trial`, a part of session.py's TlsSession)."""

from __future__ import annotations

from typing import Any, Callable

from .keys import TLS13, Keys, Payload, tls13_keys
from .recordstream import TRIAL_RECORDS
from .budget import TrialBudget

NO_KEY_LOG = "no key log given (option tlsKeyLog, or a pcapng Decryption Secrets Block)"


class Trial:
    """What TlsSession does where its handshake is missing: ``spend`` the budgets, ``trial`` the key
    log's sessions, then ``confirm`` or ``refute`` the session found."""

    keylog: Any
    budget: TrialBudget
    trial_work: int
    client_dir: int | None
    on_client: Callable[[int], None] | None
    version: int | None
    suite: int | None
    client_random: bytes | None
    trialled: bool
    unconfirmed: bool
    refused: set[bytes]
    before_trial: int | None
    dirs: list

    def fail(self, why: str) -> None:
        raise NotImplementedError

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

    def confirm(self) -> None:
        """A second record verified under the trial's session: it is this connection's; the held
        plaintext goes on."""
        self.unconfirmed = False
        for x in self.dirs:
            x.release_held()

    def refute(self) -> None:
        """The record after the one the trial verified does not verify: that record was another
        session's (spliced in, or sent again elsewhere). The session is given back, the held record
        counted as not decrypted, and the trial starts again without that session."""
        self.unconfirmed = False
        random = self.client_random
        if random is not None:
            self.refused.add(random)
            if self.keylog is not None:
                self.keylog.claimed.discard(random)
        self.trialled = False
        self.version = self.suite = self.client_random = None
        self.client_dir = self.before_trial
        for x in self.dirs:
            x.drop_held()
        self.fail("a record verified with another connection's session, and the records after it did not: "
                  "not this connection's (not decrypted)")

    def trial(self, d: int, header: bytes, payload: Payload) -> tuple[Keys, bytes] | None:
        """A connection whose handshake is not in the capture (a rotated file, a capture started
        late): its first whole protected record is tried with the TLS 1.3 application secrets of
        the key log's sessions that no connection of this file has claimed, nearest in the log to
        the sessions this file's handshakes claimed first (a rotated file's cut connections began
        just before them), AES-GCM suites before ChaCha20, record sequence numbers 0 to
        TRIAL_RECORDS, within the budgets. Keys that verify it are this direction's, and the session
        is claimed by this connection: no other connection tries it. Its plaintext is held until a
        second record verifies (``confirm``); where the next one does not (``refute``), the session is
        given back: one record of another connection spliced in claims nothing."""
        log = self.keylog
        if log is None or not log.given:
            self.fail(NO_KEY_LOG)
            return None
        labels = ("CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0") if self.client_dir is None else \
            ("CLIENT_TRAFFIC_SECRET_0" if d == self.client_dir else "SERVER_TRAFFIC_SECRET_0",)
        for suites in ((0x1301, 0x1302), (0x1303,)):
            for random in log.trial_order():
                if random in self.refused:
                    continue
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
                        self.before_trial = self.client_dir
                        self.version, self.suite, self.client_random = TLS13, suite, random
                        log.claim(random)
                        self.unconfirmed = True
                        if self.client_dir is None:
                            self.client_dir = d if label.startswith("CLIENT") else 1 - d
                            if self.on_client is not None:
                                self.on_client(self.client_dir)
                        self.trialled = True
                        return keys, secret  # type: ignore[return-value]
        self.fail("the handshake is not in the capture, and no secret of the key log that no other connection "
                  "claimed verified its records")
        return None
