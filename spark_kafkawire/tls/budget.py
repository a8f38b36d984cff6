"""What the trial decryption of a TLS connection whose handshake was not captured may spend (see
session.py): a small module of its own, so that a read that meets no TLS never imports the session,
record layer and key schedule."""

from __future__ import annotations

TRIAL_BUDGET = 1 << 16  # without the handshake: trial decryptions per connection (option tlsTrialBudget)
TRIAL_TASK_BUDGET = 1 << 22  # ... and per task, all connections together (option tlsTrialTaskBudget)


class TrialBudget:
    """What the handshake-less trial may still spend: per connection (``per_connection``) and for
    the whole task (``task_left``, shared by every session of a read)."""

    __slots__ = ("per_connection", "task_left")

    def __init__(self, per_connection: int = TRIAL_BUDGET, task: int = TRIAL_TASK_BUDGET):
        self.per_connection = per_connection
        self.task_left = task
