"""The pipeline without Spark: capture files -> Arrow.

``read_capture(path, **options)`` returns a ``pyarrow.Table``; ``iter_batches(file, options)``
streams one file's ``RecordBatch``es with bounded memory (the Spark data source reads each of its
partitions this way). The stages are wired in one place, :func:`build_stages`; the options are
options.py's, the listing of files and the planning of shares listing.py's.
"""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from typing import Generator, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa

from .carry import Carried, Carry, CarryError, warn_user, prepare
from .wire import lane
from .kafka.body import RecordOptions
from .wire.capture import CaptureError, CaptureReader, RowsDue
from .decode.exchanges import Decoder
from .listing import list_files, plan
from .options import TIME_ORDER_MARGIN_NS, Options, job_options, options_table
from .wire.packets import dissect
from .decode.predicate import Predicate
from .rows.shapes import row_builder
from .rows.table import COLUMNS, RowBuilder, arrow_schema
from .rows.tee import Tee
from .wire.lane import RowCounts
from .wire.series import different_starts, file_number, find_series, first_time, overlaps
from .wire.tcp import Reassembler, last_seen
from .tls.budget import TrialBudget
from .kafka.topicids import TopicIds

__all__ = ["CaptureError", "Options", "build_stages", "iter_batches", "iter_shapes", "job_options", "list_files",
           "options_table", "plan", "read_capture", "read_pandas"]


def iter_batches(path: str | Sequence[str], options: Options | Mapping[str, object] | None = None,
                 predicate: Predicate | None = None, share: tuple[int, int] | None = None,
                 carry: Carry | None = None) -> Iterator[pa.RecordBatch]:
    """Decode one capture file, yielding record batches as they fill. A list of files: the files of
    a rotation series (see wire/series.py), in time order, read as one capture.

    ``carry`` (see carry.py): the read goes on from the state an earlier read of the series left
    (``carry.take``), and leaves its own for a later one (``carry.leave``) instead of ending its open
    connections at its last file. No files and a state to take: that state's connections end.

    ``predicate`` (see :mod:`spark_kafkawire.decode.predicate`): only rows it accepts are yielded, and
    requests it rules out by their headers are not body-decoded.

    ``share`` = (k, n): the rows of the k-th of n shares of the file (0 <= k < n). The n shares'
    rows together are exactly the file's rows: every share reads all packets and follows every
    connection, and decodes the bodies of and makes only its own rows (see Decoder)."""
    if share is not None and not (isinstance(share[1], int) and share[1] >= 1 and 0 <= share[0] < share[1]):
        raise ValueError(f"share {share!r}: want (k, n) with 0 <= k < n")
    opts = options if isinstance(options, Options) else Options.parse(options)
    steps = _stepped(_iter_batches(path, opts, predicate, share, (opts.rows,), carry))
    try:
        for _shape, batch in steps:
            yield batch
    finally:
        steps.close()  # (a read left part way ends its steps now, not when collected)


def _stepped(batches: Generator[tuple[str, pa.RecordBatch], None, None]
             ) -> Generator[tuple[str, pa.RecordBatch], None, None]:
    """A read's batches, each step of the read run without the cyclic collector (_no_collections),
    counted among the reads of the process until it ends."""
    _reading[0] += 1
    try:
        while True:
            with _no_collections():
                item = next(batches, None)
            if item is None:
                return
            yield item
    finally:
        batches.close()
        _reading[0] -= 1
        if not _reading[0]:
            gc.unfreeze()


_reading = [0]  # reads running in this process


def _secrets(decoder: Decoder, text: bytes) -> None:
    """A pcapng Decryption Secrets Block's TLS key log: added to the file's key log (made for it
    where option tlsKeyLog gave none); connections that begin after it can use it."""
    if decoder.keylog is None:
        from .tls.keylog import KeyLog

        decoder.keylog = KeyLog()
    decoder.keylog.add_text(text, own=True)


def _key_log(opts: Options):
    """The key log option tlsKeyLog names (cached across reads), or None; the TLS stage is
    imported only when a read needs it."""
    if not opts.tls_key_log:
        return None
    from .tls import keylog

    return keylog.cached(opts.tls_key_log, opts.endpoint_url)


@contextmanager
def _no_collections():
    """The cyclic garbage collector is not run while a read decodes, and what the read keeps is
    left out of its later runs. A read makes no reference cycles (tests/test_collector.py checks it on
    every capture at hand: connections' framers and TLS sessions are unlinked when they end), but
    every connection keeps a few dozen objects while it is open, and collecting walks each of them:
    10^6 one-segment connections read in 13% less time without it. So each step of a read runs
    with the collector off, and at its end every object then alive is frozen (``gc.freeze``: they
    are not walked again), until the last read of the process ends (``gc.unfreeze``). The caller's
    code between batches runs with the collector as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def iter_shapes(path: str | Sequence[str], options: Options | Mapping[str, object] | None = None,
                shapes: Iterable[str] = ("exchanges", "connections", "partitions", "records"),
                share: tuple[int, int] | None = None) -> Iterator[tuple[str, pa.RecordBatch]]:
    """Decode one capture file once into several row shapes: ``(shape, batch)`` pairs as batches
    fill. Each shape's rows are exactly those ``iter_batches`` makes of it (option ``rows`` is
    not used); the file is read and decoded once for all of them."""
    wanted = tuple(dict.fromkeys(shapes))
    bad = [x for x in wanted if x not in COLUMNS]
    if bad or not wanted:
        raise ValueError(f"shapes {list(shapes)!r}: choose from {', '.join(COLUMNS)}")
    yield from _stepped(_iter_batches(path, options, None, share, wanted))


def _iter_batches(paths: str | Sequence[str], options: Options | Mapping[str, object] | None,
                  predicate: Predicate | None, share: tuple[int, int] | None,
                  shapes: tuple[str, ...], carry: Carry | None = None
                  ) -> Generator[tuple[str, pa.RecordBatch], None, None]:
    opts = options if isinstance(options, Options) else Options.parse(options)
    files = [paths] if isinstance(paths, str) else list(paths)
    if predicate:  # (a series is read up to the last file the filters keep: the ones before carry its state)
        wanted = [i for i, f in enumerate(files) if predicate.file_ok(f)]
        if not wanted:
            return
        files = files[: wanted[-1] + 1]
    carried = carry.load(shapes) if carry is not None else None
    if not files and carried is None:
        return
    read = _ReadPipeline(files[0] if carried is None else carried.files[0], opts, predicate, share, shapes, carried)
    # the files of the series so far (a carried state's first), and the time of the first packet of
    # the file read last (see next_file)
    series = list(carried.files) if carried is not None else []
    began = carried.began if carried is not None else None
    damage = None
    for path in files:
        index = len(series)
        series.append(path)
        if index:  # the next file of a rotation series
            if damage is not None:
                read.decoder.damaged(damage)
            began = yield from read.next_file(path, began, series[-2])
        elif len(files) > 1 or carry is not None:
            began = first_time(path, opts.endpoint_url)
        reader = CaptureReader(path, opts.endpoint_url, lane=read.lane, max_inflate_ratio=opts.max_inflate_ratio,
                               on_secrets=lambda text: _secrets(read.decoder, text), first_number=file_number(index, 0))
        settled = yield from read.packets(reader)
        damage = None if reader.damage is None else str(reader.damage)
        if settled:
            break
    if carry is not None and carry.leave is not None and series:
        if damage is not None:
            read.decoder.damaged(damage)
        yield from read.leave(carry, series, began)
        return
    read.decoder.ending = True
    yield from read.closing()
    if damage is not None:  # (the last file's: after its connections' rows)
        read.decoder.damaged(damage)
    yield from read.due(True)


class _ReadPipeline:
    """One read's stages, row builders and batching, over the file or the files of a series."""

    def __init__(self, first_file: str, opts: Options, predicate: Predicate | None, share: tuple[int, int] | None,
                 shapes: tuple[str, ...], carried: Carried | None = None):
        self.opts = opts
        self.shapes = shapes
        topics = carried.decoder.topics if carried is not None else TopicIds()
        self.builders = [row_builder(shape, first_file, opts.max_decompressed_bytes, opts.mode,
                                     opts.max_records_per_batch, topic_ids=topics.names,
                                     payload=opts.include_records and shape == "records")
                         for shape in shapes]
        self.tee = Tee(self.builders) if len(self.builders) > 1 else None
        self.sink: RowCounts = self.tee if self.tee is not None else self.builders[0]
        if carried is None:
            self.decoder, self.reasm = build_stages(self.sink, opts, predicate, share, topics, shapes)
        else:  # a read that goes on from an earlier read of the series (carry.py)
            for b in self.builders:
                for path in carried.files[1:]:
                    b.add_file(path)
            carried.attach(self.sink, _key_log(opts))
            self.decoder, self.reasm = carried.decoder, carried.reasm
        self.limit = opts.batch_size
        self.keep = predicate.filter if predicate else None
        # a bound on request_time: past it (and a margin for packets a little out of time order),
        # reading stops as soon as every exchange that started in time is settled
        self.until = predicate.time_upper() if predicate else None
        self.stop_from = None if self.until is None else self.until + TIME_ORDER_MARGIN_NS
        self.past = lane.PastBound()  # packets timed past stop_from, the lane's and the reader's
        self.lane = lane.make(self.reasm, self.sink, self.limit, self.stop_from, self.past)

    def packets(self, reader: CaptureReader) -> Generator[tuple[str, pa.RecordBatch], None, bool]:
        """A file's packets through the stages, batches handed on as they fill; True where a time
        filter's bound was passed with everything before it settled (reading stops)."""
        sink, limit, decoder, reasm, past = self.sink, self.limit, self.decoder, self.reasm, self.past
        segment = reasm.segment  # (feed's work without its call: the fields straight from the Segment)
        stop_from, until = self.stop_from, self.until
        for pkt in reader:
            if isinstance(pkt, RowsDue):  # the fast lane took packets and made rows
                if sink.count >= limit or sink.backlog:
                    yield from self.due(False)
                continue
            seg = dissect(pkt)
            if seg is not None:
                segment(*seg)
                if sink.count >= limit or sink.backlog:
                    yield from self.due(False)
            if stop_from is not None and until is not None and pkt.ts_ns > stop_from:
                past.checks += 1
                if past.checks % lane.CHECK_EVERY == 1 and decoder.settled(list(reasm.live), until):
                    return True
        return False

    def next_file(self, path: str, began: int | None, before: str | None = None
                  ) -> Generator[tuple[str, pa.RecordBatch], None, int | None]:
        """Between two files of a series (the one read began at ``began``): where the next does not
        overlap it in time (series.overlaps), open connections are held for their next segments to
        show whether they go on (tcp.Held); where it does, they are not one capture, and
        every open connection ends here, as at a capture's end. Returns the next file's first
        packet time."""
        for b in self.builders:
            b.add_file(path)
        last = last_seen(self.reasm)
        first = first_time(path, self.opts.endpoint_url)
        endpoint = self.opts.endpoint_url
        distinct = None if before is None else lambda: different_starts(before, path, endpoint)
        if last is None or first is None or began is None or not overlaps(began, last, first, distinct):
            self.reasm.held.hold(self.reasm)
            return first
        self.decoder.ending = True
        yield from self.closing()
        self.decoder.ending = False
        return first

    def leave(self, carry: Carry, series: list[str], began: int | None
              ) -> Generator[tuple[str, pa.RecordBatch], None, None]:
        """The read's end where its series may go on in a later read (carry.py): the open connections
        that may be carried give a row for their part so far (Decoder.part_row), are held, as at a
        file boundary, and written with the stages' state to ``carry.leave``; the others end here,
        as at a capture's end. Where the state cannot be written (said on stderr), every connection
        ends here."""
        decoder, reasm = self.decoder, self.reasm
        newest = last_seen(reasm)
        decoder.ending = True
        for conn in prepare(decoder, reasm, newest):
            reasm.held.end(reasm, conn)
            yield from self.filled()
        decoder.ending = False
        for conn in list(reasm.live):  # each carried connection's row for this read's part of it
            decoder.part_row(conn)
            yield from self.filled()
        reasm.held.hold(reasm)
        yield from self.due(True)
        try:
            carry.save(Carried(series, began, self.shapes, decoder, reasm), newest)
        except (CarryError, OSError) as e:
            warn_user(f"{series[-1]}: {e}; its open connections end here")
            decoder.ending = True
            yield from self.closing()
            yield from self.due(True)

    def closing(self) -> Iterator[tuple[str, pa.RecordBatch]]:
        """Every open connection ended (the capture's end), batches handed on as they fill."""
        sink, limit = self.sink, self.limit
        for _ in self.reasm.closing():  # (one turn a connection: the test inline, not a call)
            if sink.count >= limit or sink.backlog:
                yield from self.due(False)

    def filled(self) -> Iterator[tuple[str, pa.RecordBatch]]:
        """The batches that are full, where any is (between two steps that may make many rows)."""
        if self.sink.count >= self.limit or self.sink.backlog:
            yield from self.due(False)

    def due(self, final: bool) -> Iterator[tuple[str, pa.RecordBatch]]:
        return _due(self.builders, self.tee, self.limit, self.keep, final)


def _due(builders: list[RowBuilder], tee: Tee | None, limit: int, keep,
         final: bool) -> Iterator[tuple[str, pa.RecordBatch]]:
    """Each shape's batches that are due (see _batches), with its shape's name."""
    for b in builders:
        for batch in _batches(b, limit, keep, final):
            yield b.shape, batch
    if tee is not None:
        tee.recount()


def build_stages(sink, opts: Options | None = None, predicate: Predicate | None = None,
                 share: tuple[int, int] | None = None,
                 topics: TopicIds | None = None, shapes: tuple[str, ...] | None = None) -> tuple[Decoder, Reassembler]:
    """The decoding stages wired in order, from the row sink back: frames, exchanges and TLS
    (Decoder) fed by the TCP reassembler. Feed the reassembler the segments ``packets.dissect``
    makes of a capture's packets, then ``closing()`` it. ``sink``: the row builder (or anything
    with its ``exchange``/``connection`` calls; a Tee for several ``shapes``, else option rows')."""
    opts = opts or Options()
    shapes = shapes or (opts.rows,)
    decoder = Decoder(sink, opts.max_frame_bytes,
                      # text mode (bodies written as JSON as they are read) keeps only the top level
                      # of a body as values: not where partitions or records are read from it too
                      RecordOptions(opts.max_decompressed_bytes, keep_raw="records" in shapes,
                                    text=("exchanges" in shapes or "messages" in shapes)
                                    and "partitions" not in shapes and "records" not in shapes),
                      predicate=predicate, decode_bodies=shapes != ("connections",),
                      share=share if share is not None and share[1] > 1 else None,
                      topic_ids=topics if topics is not None else TopicIds(),
                      keylog=_key_log(opts),
                      trial_budget=TrialBudget(opts.tls_trial_budget, opts.tls_trial_task_budget))
    return decoder, Reassembler(decoder, ports=opts.ports, max_connections=opts.max_connections)


def _batches(sink: RowBuilder, limit: int, keep, final: bool) -> Iterator[pa.RecordBatch]:
    """Full batches of ``limit`` rows (all that is left when ``final``), taking rows from the
    builder's backlog (the records of one frame can be millions) only as batches leave."""
    while True:
        sink.fill(limit)
        if not sink.count or (sink.count < limit and not final):
            return
        batch = sink.flush()
        if keep is not None:
            batch = keep(batch)
        if batch.num_rows:
            yield batch


def read_capture(path: str | os.PathLike | Iterable[str | os.PathLike], filters: Iterable[tuple] | None = None,
                 **options: object) -> pa.Table:
    """Decode capture files (a file, directory, glob or a list of them) into one Arrow table.

    ``filters``: ``[(column, op, value), ...]``, all of which a row must pass (op one of
    ``= != < <= > >= in``, or ``'not null'`` without a value), on capture_file, the endpoint
    columns, api_key, api_name, api_version, client_id, request_time or status. Work is skipped
    early: files by name, request bodies (and their responses) by header. Values: whole numbers for
    api_key, api_version and the ports, a datetime or nanoseconds for request_time, strings for
    the rest, a list for ``in``; a null matches no row, as in SQL.

    ``options``: reader options, names case-insensitive, each checked as :func:`options_table`
    (README, Options) says."""
    opts = Options.parse(options)
    pred = Predicate.parse(filters).for_shape(n for n, _ in COLUMNS[opts.rows])
    files = list_files(path, opts.path_glob_filter, opts.endpoint_url)
    runs = find_series(files, opts.endpoint_url) if opts.stitch else [[f] for f in files]
    batches = [b for run in runs if any(pred.file_ok(f) for f in run)
               for b in iter_batches(run if len(run) > 1 else run[0], opts, pred)]
    return pa.Table.from_batches(batches, schema=arrow_schema(opts.rows))


def read_pandas(path: str | os.PathLike | Iterable[str | os.PathLike], filters: Iterable[tuple] | None = None,
                **options: object):
    """:func:`read_capture` as a pandas DataFrame whose integer, boolean and string columns are
    pandas' nullable types: a missing api_version stays <NA> instead of turning the column into
    floats (3.0). Timestamps are UTC."""
    import pandas as pd

    nullable = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
                pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype(), pa.string(): pd.StringDtype()}
    return read_capture(path, filters, **options).to_pandas(types_mapper=nullable.get)
