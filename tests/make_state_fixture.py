"""Writes tests/states/format-2.carry: the state the stream leaves after the first half of
sample_pcaps/mock-confluent-group.pcapng cut by 20 packets (test_state.py reads it). Run by
``make state-fixture`` when the carried declarations change (keep the older state then)."""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_state import FIXTURE, _first_half, _parts, _the_state  # noqa: E402

with tempfile.TemporaryDirectory() as d:
    tmp = Path(d)
    parts = _parts(tmp)
    _first_half(parts, tmp / "rotating", tmp / "state")
    FIXTURE.mkdir(exist_ok=True)
    (FIXTURE / "format-2.carry").write_bytes(_the_state(tmp / "state").read_bytes())
    print("written", FIXTURE / "format-2.carry")
