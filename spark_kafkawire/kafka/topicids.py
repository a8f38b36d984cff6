"""Topic ids -> names, learnt from the responses of a capture (Metadata, CreateTopics, ...).

Kafka 2.8+ names topics by id in Fetch and elsewhere; the rows show names where a response in the
capture taught them. A share of a file (see listing.plan) does not show every response but must
learn from each: such bodies are decoded for their ids alone and remembered by their bytes, since
clients ask for the same metadata again and again.
"""

from __future__ import annotations

from typing import Callable, Final

from .body import Facts

LEARNED: Final = 256  # bodies remembered for the topic ids they teach
LEARNED_BYTES: Final = 64 << 10  # the largest such body remembered (at most 16 MiB in all)


class TopicIds:
    """The capture's topic id -> name map (``names``), shared by the decoder and the row sink."""

    def __init__(self, names: dict[str, str] | None = None) -> None:
        self.names: dict[str, str] = {} if names is None else names
        self._learned: dict[tuple[int, int, bytes], dict[str, str]] = {}

    def taught(self, facts: Facts | None) -> None:
        """A decoded body's topic ids."""
        if facts is not None and facts.topic_ids:
            self.names.update(facts.topic_ids)

    def learn(self, api_key: int, version: int, body: bytes | None, decode: Callable[[], Facts | None]) -> None:
        """A body decoded only for the ids it teaches: ``body`` its bytes where it may be
        remembered by them (None: decode it every time), ``decode`` decodes it."""
        if body is not None:
            key = (api_key, version, body)
            ids = self._learned.get(key)
            if ids is not None:
                self.names.update(ids)
                return
        facts = decode()
        ids = dict(facts.topic_ids) if facts is not None else {}
        if body is not None:
            if len(self._learned) >= LEARNED:
                self._learned.clear()
            self._learned[key] = ids
        self.names.update(ids)
