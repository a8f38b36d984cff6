"""The readers generated from the layouts (codegen.py) against the interpreter (body.py), the
reference: the same value, the same headline facts, the same error, on every layout kio can write,
every sample frame, and those bodies cut short or with bytes flipped."""

import json
import random

import pytest

from pcapgen import kio_body
from spark_kafkawire.kafka import body
from test_bodies import TRIPLES, _sample_frames


#: what a Facts holds (body.Facts)
FACT_FIELDS = ("error", "error_level", "topics", "partitions", "records", "record_bytes", "topic_ids", "in_partitions")


def _run(generated, key, ver, is_req, data, pos):
    saved = body.GENERATED
    body.GENERATED = generated
    try:
        value, used, facts = body.decode_with_facts(key, ver, is_req, data, pos)
        f = {k: getattr(facts, k) for k in FACT_FIELDS}
        return json.dumps(value, sort_keys=True, default=list), used, f
    except (body.BodyError, KeyError) as e:
        return type(e).__name__, str(e)
    finally:
        body.GENERATED = saved


def _same(key, ver, is_req, data, pos=0):
    assert _run(True, key, ver, is_req, data, pos) == _run(False, key, ver, is_req, data, pos), (key, ver, is_req)


@pytest.mark.parametrize("key,ver,kind", TRIPLES, ids=[f"{k}-v{v}-{e}" for k, v, e in TRIPLES])
def test_generated_reader_equals_interpreter(key, ver, kind):
    rnd = random.Random(f"codegen/{key}/{ver}/{kind}")
    for seed in range(2):
        data = kio_body(key, ver, kind == "request", seed)
        _same(key, ver, kind == "request", data)
        # damaged copies: cut short, or a byte changed (lengths and counts go wrong)
        _same(key, ver, kind == "request", data[: rnd.randrange(len(data) + 1)])
        if data:
            i = rnd.randrange(len(data))
            _same(key, ver, kind == "request", data[:i] + bytes([rnd.randrange(256)]) + data[i + 1 :])


def test_generated_reader_equals_interpreter_on_sample_frames():
    frames = _sample_frames()
    assert len(frames) > 1000
    for _name, key, ver, is_req, data, pos in frames:
        _same(key, ver, is_req, data, pos)
