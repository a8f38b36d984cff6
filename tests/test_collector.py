"""A read and the cyclic garbage collector: a read makes no reference cycles, runs with the
collector off and leaves nothing behind (reader._no_collections). Run in both modes."""

from __future__ import annotations

from pathlib import Path

from conftest import FINDINGS, PUBLIC, SAMPLES, shared_files
from spark_kafkawire.reader import iter_batches


def test_a_read_leaves_nothing_behind():
    """The stages' objects join the garbage collection: a connection's framers hold sides that hold
    the decoder and the connection, and the connection's halves hold the framers. After a whole read,
    a shared one, and one given up after its first batch (a LIMIT, a cancelled task), nothing of
    the decoder is left once the collector has run (a worker reading file after file would grow).
    While a read is under way what it keeps is frozen (left out of the collector's runs), and no
    longer once it has ended, given up or not."""
    import gc

    from spark_kafkawire.decode import exchanges

    def decoders() -> int:  # live Decoder objects (compiled or not, the collector tracks them)
        gc.collect()
        return sum(type(o) is exchanges.Decoder for o in gc.get_objects())

    path = str(SAMPLES / "mock-confluent-group.pcapng")
    before = decoders()
    for share in (None, (0, 2)):
        for _ in iter_batches(path, {}, share=share):
            pass
        batches = iter_batches(path, {"batchSize": 1}, share=share)
        next(batches)
        assert gc.get_freeze_count() > 1000  # the read's objects, the decoder's among them
        del batches
        assert gc.get_freeze_count() == 0
    assert decoders() == before


def _cycle_inputs() -> list[tuple[Path, dict]]:
    tls = Path(__file__).resolve().parent / "tls"
    return [(p, {}) for p in sorted(SAMPLES.glob("*.pcap*"))] + \
        [(p, {"tlsKeyLog": str(p.with_suffix(".keylog"))}) for p in sorted(tls.glob("*.pcap"))] + \
        [(p, {}) for p in shared_files(PUBLIC, (".pcap", ".pcapng", ".cap")) +
         shared_files(FINDINGS, (".pcap", ".pcapng", ".gz"))]


def test_a_read_makes_no_reference_cycles():
    """Reads run with the cyclic garbage collector off (reader._no_collections): that is sound
    only because a read makes no garbage that only the collector can free. Every sample, TLS
    (decrypted), public and fuzz-found capture, read whole with the collector off: collecting
    afterwards finds nothing (a connection's framers and TLS session are unlinked at its end)."""
    import gc

    inputs = _cycle_inputs()
    assert len(inputs) > 40
    for path, opts in inputs:
        list(iter_batches(str(path), opts))  # first: imports, generated readers, caches
    def reads(each: bool) -> dict[str, int]:
        gc.collect()
        gc.disable()
        try:
            found = {}
            for path, opts in inputs:
                for _ in iter_batches(str(path), opts):
                    pass
                if each:
                    found[path.name] = gc.collect()
            return found if each else {"all": gc.collect()}
        finally:
            gc.enable()

    # (one collection after them all; where it finds anything, one after each read names the input)
    if reads(False)["all"]:
        assert not {name: n for name, n in reads(True).items() if n}


def test_the_collector_visits_each_field_of_the_stage_objects_once():
    """The collector sees every reference of a connection's objects once: a field a class declares
    that a class built on it declares again would be a second member (compiled) that the collector
    visits twice, and a cycle through it would never be freed."""
    import gc

    from test_lane import declared_slots
    from spark_kafkawire.wire import frames, tcp

    slots = {**declared_slots("tcp"), **declared_slots("halfstream"), **declared_slots("frames")}
    made = [tcp.Connection((b"\x01" * 4, 1), (b"\x02" * 4, 2), 0, 1), tcp.HalfStream(None, 1 << 20),
            frames.Framer(print), frames.Accounting()]
    for obj in made:
        own = [n for c in type(obj).__mro__ for n in slots.get(c.__name__, ())]
        assert len(own) == len(set(own)), type(obj)  # no field declared again by a subclass
        for name in own:
            old = getattr(obj, name)
            if isinstance(old, bool) or name in ("acct", "buf", "health", "scan"):
                continue  # (a bool holds no reference; these have types of their own)
            # an int field holds an int object beyond 62 bits (a new one for each field)
            value = int("9" * 30) + len(name) if old is None and name == "base" or isinstance(old, int) else [name]
            try:
                setattr(obj, name, value)
            except TypeError:  # a field of another type (compiled, its type is checked)
                continue
            assert sum(r is value for r in gc.get_referents(obj)) == 1, (type(obj), name)
