"""Test helpers over the pipeline's stages (the package offers only what the pipeline calls)."""

from __future__ import annotations

from spark_kafkawire.kafka.body import DEFAULT_RECORD_OPTIONS
from spark_kafkawire.kafka.message import decode_with_facts


def decode_body(api_key: int, version: int, request: bool, data, pos: int, opts=DEFAULT_RECORD_OPTIONS):
    """A body's decoded value and the version whose layout read it (message.decode_with_facts without
    the facts)."""
    value, used, _facts = decode_with_facts(api_key, version, request, data, pos, opts)
    return value, used


def flush(reasm) -> None:
    """End of capture: every open connection of a Reassembler flushed."""
    for _ in reasm.closing():
        pass


def stages(sink, **options):
    """(decoder, reassembler): the pipeline's stages wired as the reader wires them
    (reader.build_stages), ending in a test's own ``sink``; ``options`` as the reader takes them."""
    from spark_kafkawire.options import Options
    from spark_kafkawire.reader import build_stages

    return build_stages(sink, Options.parse(options))


def run(path, sink, **options):
    """Every packet of the capture at ``path`` through the stages into ``sink``, the open
    connections flushed at its end; returns (decoder, reassembler)."""
    from spark_kafkawire.wire.capture import CaptureReader
    from spark_kafkawire.wire.packets import dissect

    decoder, reasm = stages(sink, **options)
    for pkt in CaptureReader(str(path)):
        seg = dissect(pkt)
        if seg is not None:
            reasm.feed(seg)
    flush(reasm)
    return decoder, reasm
