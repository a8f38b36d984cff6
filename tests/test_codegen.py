"""The readers generated from the layouts (codegen.py) against the interpreter (body.py), the
reference: the same value, the same headline facts, the same error, on every layout kio can write,
every sample frame, and those bodies cut short or with bytes flipped."""

import json
import random

import pytest

from pcapgen import kio_body
from spark_kafkawire.kafka import body, message
from test_bodies import TRIPLES, _sample_frames


#: what a Facts holds (body.Facts)
FACT_FIELDS = ("error", "error_level", "topics", "partitions", "records", "record_bytes", "topic_ids", "in_partitions")


def _run(generated, key, ver, is_req, data, pos):
    saved = message.GENERATED
    message.GENERATED = generated
    try:
        value, used, facts = message.decode_with_facts(key, ver, is_req, data, pos)
        f = {k: getattr(facts, k) for k in FACT_FIELDS}
        return json.dumps(value, sort_keys=True, default=list), used, f
    except (body.BodyError, KeyError) as e:
        return type(e).__name__, str(e)
    finally:
        message.GENERATED = saved


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


def _text(key, ver, is_req, data, pos):
    """The interpreter's text mode against orjson's text of the interpreter's value (dict mode),
    and the facts of both: equal, or the same error. Text mode's value keeps the top level's
    scalars, as the dict mode has them."""
    import orjson

    saved = message.GENERATED
    message.GENERATED = False
    try:
        out = []
        for text in (True, False):
            try:
                value, used, facts = message.decode_with_facts(key, ver, is_req, data, pos, body.RecordOptions(text=text))
            except (body.BodyError, KeyError) as e:
                out.append(((type(e).__name__, str(e)), None))
                continue
            f = {k: getattr(facts, k) for k in FACT_FIELDS}
            written = facts.text if text and facts.text is not None else \
                orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
            out.append(((written, used, f), value))
        (a, top), (b, value) = out
        if top is not None:
            assert all(value[k] == v for k, v in top.items()), (key, ver, is_req)
            assert all(k in top for k, v in value.items() if v is not None and not isinstance(v, (list, dict))), \
                (key, ver, is_req)
        return a, b
    finally:
        message.GENERATED = saved


def _same_text(key, ver, is_req, data, pos=0):
    a, b = _text(key, ver, is_req, data, pos)
    assert a == b, (key, ver, is_req)


@pytest.mark.parametrize("key,ver,kind", TRIPLES, ids=[f"{k}-v{v}-{e}" for k, v, e in TRIPLES])
def test_text_mode_writes_what_orjson_writes_of_the_value(key, ver, kind):
    """Text mode (the JSON written while the body is read) equals orjson.dumps of the value the
    dict mode builds, byte for byte, with the same facts: on every layout kio can write, and on
    copies cut short or with a byte changed (the same error, or the same value read again)."""
    rnd = random.Random(f"text/{key}/{ver}/{kind}")
    for seed in range(2):
        data = kio_body(key, ver, kind == "request", seed)
        _same_text(key, ver, kind == "request", data)
        _same_text(key, ver, kind == "request", data[: rnd.randrange(len(data) + 1)])
        _same_text(key, ver, kind == "request", data + b"\x00\x01")  # trailing bytes
        if data:
            i = rnd.randrange(len(data))
            _same_text(key, ver, kind == "request", data[:i] + bytes([rnd.randrange(256)]) + data[i + 1 :])


def test_text_mode_writes_what_orjson_writes_on_sample_frames():
    frames = _sample_frames()
    for _name, key, ver, is_req, data, pos in frames:
        _same_text(key, ver, is_req, data, pos)
