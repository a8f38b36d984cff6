"""rows=records: one row per record of Produce requests and Fetch responses, made as batches leave
(see RowBuilder.fill); a magic 2 batch's records written as runs of rows (see RecordRows._batch_rows)."""

from __future__ import annotations

from typing import Final, Iterator

from ..arrays import ColumnBuffer
from ..kafka import codecs
from ..kafka import records as rec
from ..kafka.carried import json_bounded, trace_context, wire_format
from ..kafka.values import RawRecords
from ..decode.connstate import Endpoints, Request, Response
from ..decode.status import DAMAGE, TRUNCATED
from ..wire.frames import Frame
from ..kafka.partitions import RECORDS_IN_REQUEST, RECORDS_IN_RESPONSE, topic_partitions
from .held import RecordsColumns
from .table import MAX_TIMESTAMP_MS, RowBuilder, first_frame, noted

#: the topic a schema registry keeps its schemas in (Confluent's and Karapace's default), read for
#: each schema id's type
SCHEMAS_TOPIC: Final = "_schemas"
#: the columns of rows=records that differ from record to record of one batch (the rest are the
#: batch's, the exchange's and the connection's: see RecordRows._batch_rows)
PER_RECORD: Final = frozenset(("offset", "log_offset", "timestamp", "key", "value", "headers", "key_format",
                               "key_schema_id", "value_format", "value_schema_id", "trace_id", "span_id",
                               "trace_format", "sequence", "control_type", "detail"))
REGISTRY_TYPES: Final = {"AVRO": "confluent-avro", "PROTOBUF": "confluent-protobuf", "JSON": "confluent-json"}


class RecordRows(RowBuilder):
    """rows=records: rows are made as batches leave (see RowBuilder.fill). Damage of an exchange
    is a row only where no record could be read; records that were read carry their own status."""

    shape = "records"

    def _reset(self) -> None:
        RowBuilder._reset(self)
        self.held = RecordsColumns(self.cols)
        #: the columns alike on every record of a magic 2 batch: written once for a run of its rows
        self.batch_columns = [self.cols[name] for name in self.names if name not in PER_RECORD]

    def exchange(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None, extra: tuple | None = None) -> None:
        if req is None and resp is None:
            self._status(ep, None, status, detail)
            return
        h = req.header if req is not None else None
        if req is None or h is None:  # an exchange of an unknown api: it may have carried records
            self._damaged(ep, req, resp, status, detail)
            return
        msg: Request | Response
        if h.api_key in RECORDS_IN_REQUEST:
            direction, msg = "request", req
        elif h.api_key in RECORDS_IN_RESPONSE and resp is not None:
            direction, msg = "response", resp
        else:  # no records in this api (or a Fetch whose response is missing): a row only if damaged
            if h.api_key in RECORDS_IN_RESPONSE:
                self._damaged(ep, req, resp, status, detail)
            return
        parts = [(t, i, f["Records"]) for t, i, f in topic_partitions(msg.body, self.topic_ids)
                 if isinstance(f.get("Records"), RawRecords)]
        if parts:
            self.backlog.append(self._record_rows(ep, req, resp, direction, msg, parts))
        else:  # damaged: a row says so, though no record was read
            self._damaged(ep, req, resp, status, detail)

    def _damaged(self, ep: Endpoints | None, req: Request | None, resp: Response | None, status: str,
                 detail: str | None) -> None:
        if status in DAMAGE:
            self._status(ep, first_frame(req, resp), status, detail)

    def _status(self, ep: Endpoints | None, frame: Frame | None, status: str, detail: str | None) -> None:
        if status not in DAMAGE or self.damage.keep(ep, frame, status, detail):
            self.backlog.append(self._status_row(ep, status, detail))

    def _status_row(self, ep: Endpoints | None, status: str, detail: str | None) -> Iterator[None]:
        self._status_only(ep, status, detail)
        yield

    def _record_rows(self, ep: Endpoints | None, req: Request | None, resp: Response | None, direction: str,
                     msg: Request | Response, parts: list) -> Iterator[None]:
        """The rows of the records of the message's record fields, a step per row or per run of a
        batch's rows (at most as many as the rows taken (RowBuilder.fill) leave room for)."""
        budget = codecs.Budget(self.max_decompressed)  # one for all the batches of the message
        appended = _appended(resp, self.topic_ids) if direction == "request" else None
        for topic, index, raw in parts:
            # a Produce request's records are appended at the response's BaseOffset, one offset each in turn
            base = appended.get((topic, index)) if appended is not None else None
            position = 0
            for item in rec.batches(raw.data, budget, self.max_records):
                if isinstance(item, rec.V2Batch):
                    while True:
                        made = self._batch_rows(ep, req, resp, direction, msg, topic, index, item,
                                                appended is None, base + position if base is not None else -1)
                        position += made
                        if made:
                            yield
                        if item.i >= item.count:  # read (else the run was cut where the rows taken are full)
                            break
                    if item.problem is None:
                        continue
                    r = item.problem
                else:
                    r = item
                if r.status != "ok":
                    base = None  # how many records a batch not read whole held is not known: later offsets neither
                    # a batch cut at the end of a Fetch response is how brokers fill fetch sizes: not damage
                    if r.status != TRUNCATED and \
                            not self.damage.keep(ep, msg.frame, f"records {r.status}", r.detail):
                        continue
                k = self.held  # a new set of columns after each batch leaves
                self._batch_fields(k, ep, req, resp, msg, direction, topic, index, r.timestamp_type, r.producer_id,
                                   r.producer_epoch, r.transactional, r.codec, r.magic, r.batch_offset, r.status)
                k.offset.append(r.offset)
                if appended is None:  # a Fetch response states each record's offset in the log
                    k.log_offset.append(r.offset if r.status == "ok" else None)
                else:  # a Produce request's: the response's BaseOffset, one offset each in turn
                    k.log_offset.append(base + position if base is not None else None)
                position += 1
                ts = r.timestamp_ms
                k.timestamp.append(ts * 1_000_000 if ts is not None and 0 <= ts < MAX_TIMESTAMP_MS else None)
                _payload(k, self.payload, r.key, r.value, r.headers)
                self._carried(k, topic, r.key, r.value, r.headers, r.detail, r.status == "ok")
                k.sequence.append(r.sequence)
                k.control_type.append(r.control_type)
                self.count += 1
                yield

    def _batch_rows(self, ep: Endpoints | None, req: Request | None, resp: Response | None, direction: str,
                    msg: Request | Response, topic: str | None, index: int | None, b: rec.V2Batch,
                    fetched: bool, log_offset: int) -> int:
        """Rows of the next records of a magic 2 batch, as many as the rows taken leave room for
        (at least one): the first row whole, then only the columns that differ from record to
        record; the rest (``batch_columns``, and the payload's, sequence's and control type's where
        the batch has none) are repeated once at the end. The number of rows made. ``fetched``:
        the records say their own offset in the log (a Fetch response's); else ``log_offset`` is
        the first one's (a Produce request's, from its response; -1: not known)."""
        k = self.held  # a new set of columns after each batch leaves
        room = max(1, self.limit - self.count)
        payload = self.payload
        sequenced = b.bseq >= 0
        made = 0
        while made < room and b.next():
            if not made:
                self._batch_fields(k, ep, req, resp, msg, direction, topic, index, b.timestamp_type(), b.pid, b.pepoch,
                                   b.transactional, b.codec, 2, b.base, "ok")
            if payload or not made:
                _payload(k, payload, b.key, b.value, b.headers)
            if sequenced or not made:
                k.sequence.append(b.sequence())
            if b.control or not made:
                k.control_type.append(b.control_type())
            offset = b.base + b.off_delta
            k.offset.append_int(offset)
            if fetched:
                k.log_offset.append_int(offset)
            elif log_offset >= 0:
                k.log_offset.append_int(log_offset + made)
            else:
                k.log_offset.append(None)
            ts = b.timestamp_ms()
            k.timestamp.append(ts * 1_000_000 if ts is not None and ts < MAX_TIMESTAMP_MS else None)
            self._carried(k, topic, b.key, b.value, b.headers, None, True)
            made += 1
        if made > 1:
            more = made - 1
            for col in self.batch_columns:
                col.repeat_last(more)
            if not payload:
                k.key.repeat_last(more)
                k.value.repeat_last(more)
                k.headers.repeat_last(more)
            if not sequenced:
                k.sequence.repeat_last(more)
            if not b.control:
                k.control_type.repeat_last(more)
        self.count += made
        return made

    def _batch_fields(self, k: RecordsColumns, ep: Endpoints | None, req: Request | None, resp: Response | None,
                      msg: Request | Response, direction: str, topic: str | None, index: int | None,
                      timestamp_type: str | None, producer_id: int | None, producer_epoch: int | None,
                      transactional: bool | None, codec: str, magic: int, batch_offset: int | None,
                      status: str) -> None:
        """The columns of a record's row that are its batch's, its exchange's and its connection's
        (on every row of a magic 2 batch alike: ``batch_columns``)."""
        self._identity(k, ep, req, resp)
        k.time.append(msg.frame.ts_ns)
        k.direction.append(direction)
        k.topic.append(topic)
        k.partition.append(index)
        k.timestamp_type.append(timestamp_type)
        k.producer_id.append(producer_id)
        k.producer_epoch.append(producer_epoch)
        k.transactional.append(transactional)
        k.codec.append(codec)
        k.magic.append(magic)
        k.batch_offset.append(batch_offset)
        k.status.append(status)

    def _carried(self, k: RecordsColumns, topic: str | None, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes | None]] | None, detail: str | None, ok: bool) -> None:
        """What the record carries besides its payload (always): trace context, and the wire format
        and schema id of key and value; ``detail`` says what is malformed."""
        if headers:
            trace, span, fmt, problem = trace_context(headers)
            k.trace_id.append(trace)
            k.span_id.append(span)
            k.trace_format.append(fmt)
            detail = noted(detail, problem)
        else:
            k.trace_id.append(None)
            k.span_id.append(None)
            k.trace_format.append(None)
        if topic == SCHEMAS_TOPIC and ok:
            learn_schema(self.schema_types, key, value)
        detail = _format(self.schema_types, k.key_format, k.key_schema_id, "key", key, detail)
        detail = _format(self.schema_types, k.value_format, k.value_schema_id, "value", value, detail)
        k.detail.append(detail)

def _payload(k: RecordsColumns, payload: bool, key: bytes | None, value: bytes | None,
             headers: list[tuple[str, bytes | None]] | None) -> None:
    """The payload: key, value and headers with ``payload`` (option includeRecords), else null."""
    if payload:
        k.key.append(key)
        k.value.append(value)
        k.headers.append([{"key": name, "value": v} for name, v in headers] if headers is not None else None)
    else:
        k.key.append(None)
        k.value.append(None)
        k.headers.append(None)


def _format(schema_types: dict[int, str], format_col: ColumnBuffer, schema_id_col: ColumnBuffer, side: str,
            data: bytes | None, detail: str | None) -> str | None:
    """The wire format and schema id of a key or value into their columns (a schema id's type as
    the registry's records told it, in ``schema_types``); the detail with what is malformed in it."""
    wire, sid, problem = wire_format(data)
    if sid is not None and wire is not None and wire.startswith("confluent"):
        wire = schema_types.get(sid, wire)
    format_col.append(wire)
    schema_id_col.append(sid)
    return noted(detail, f"{side}: {problem}" if problem else None)


def learn_schema(schema_types: dict[int, str], key: bytes | None, value: bytes | None) -> None:
    """A schema registry's record of a schema (its ``_schemas`` topic): the id's schema type."""
    k, v = json_bounded(key), json_bounded(value)
    if isinstance(k, dict) and k.get("keytype") == "SCHEMA" and isinstance(v, dict) and \
            isinstance(v.get("id"), int) and not isinstance(v.get("id"), bool):
        kind = v.get("schemaType", "AVRO")  # any JSON value: a producer wrote it
        if isinstance(kind, str) and kind in REGISTRY_TYPES:
            schema_types[v["id"]] = REGISTRY_TYPES[kind]


def _appended(resp: Response | None, topic_ids: dict[str, str]) -> dict[tuple, int]:
    """(topic, partition) -> the BaseOffset a Produce response says the partition's records were
    appended at (where it names no error)."""
    if resp is None:
        return {}
    out: dict[tuple, int] = {}
    for topic, index, f in topic_partitions(resp.body, topic_ids):
        base = f.get("BaseOffset")
        if isinstance(base, int) and base >= 0 and f.get("ErrorCode", 0) == 0:
            out[(topic, index)] = base
    return out
