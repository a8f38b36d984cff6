"""Test helpers over the pipeline's stages (the package offers only what the pipeline calls)."""

from __future__ import annotations

from spark_kafkawire.body import DEFAULT_RECORD_OPTIONS, decode_with_facts


def decode_body(api_key: int, version: int, request: bool, data, pos: int, opts=DEFAULT_RECORD_OPTIONS):
    """A body's decoded value and the version whose layout read it (body.decode_with_facts without
    the facts)."""
    value, used, _facts = decode_with_facts(api_key, version, request, data, pos, opts)
    return value, used


def flush(reasm) -> None:
    """End of capture: every open connection of a Reassembler flushed."""
    for _ in reasm.closing():
        pass
