"""One row builder per row shape (option ``rows``): each is the decoder's row sink for its shape.

=============  =======================================================================================
exchanges      one row per request/response pair (or lone request, lone response, status row)
messages       one row per frame, each with a status of its own and its exchange's
partitions     one row per topic partition an exchange names
records        one row per record of Produce requests and Fetch responses (made as batches leave)
connections    one row per TCP connection with its byte accounting
=============  =======================================================================================

Which damage gives a row of a shape is decided here, per shape; the mode (see modes) then acts on
exactly those rows: PERMISSIVE shows them, DROPMALFORMED drops them, FAILFAST fails on them.
"""

from __future__ import annotations

from typing import Any, Final, Iterator

import pyarrow as pa

from ..arrays import ColumnBuffer
from ..kafka import codecs
from ..kafka import records as rec
from ..kafka.carried import json_bounded, trace_context, wire_format
from ..kafka.values import RawRecords
from ..decode.connstate import ConnState, Endpoints, Request, Response
from ..decode.status import CAPTURE_CHANGED, CAPTURE_DAMAGED, DAMAGE, TRUNCATED
from ..wire.frames import Frame
from ..wire.series import FILE_SHIFT, LOCAL_MASK
from ..kafka.clients import fingerprint
from ..kafka.headline import GROUP_ID, TRANSACTIONAL_ID, error_name
from ..kafka.partitions import PARTITION_APIS, RECORDS_IN_REQUEST, RECORDS_IN_RESPONSE, partition_rows, topic_partitions
from .timing import LatencySplit, backwards, capture_side, elapsed_ms, transfer_ms
from ..decode.summary import DirectionSummary
from .columns import ADDING, SIDES
from .held import ConnectionsColumns, ExchangesColumns, MessagesColumns, PartitionsColumns, RecordsColumns
from .table import MAX_TIMESTAMP_MS, RowBuilder, frame_status, message_json

#: a damaged exchange's row in rows=partitions where no partition could be read from it
_NO_PARTITION: Final = dict.fromkeys(("topic", "partition", "error_code", "offset", "high_watermark",
                                      "last_stable_offset", "log_start_offset", "timestamp_ms", "record_count",
                                      "record_bytes"))
#: the topic a schema registry keeps its schemas in (Confluent's and Karapace's default), read for
#: each schema id's type
SCHEMAS_TOPIC: Final = "_schemas"
#: the columns of rows=records that differ from record to record of one batch (the rest are the
#: batch's, the exchange's and the connection's: see RecordRows._batch_rows)
PER_RECORD: Final = frozenset(("offset", "log_offset", "timestamp", "key", "value", "headers", "key_format",
                               "key_schema_id", "value_format", "value_schema_id", "trace_id", "span_id",
                               "trace_format", "sequence", "control_type", "detail"))
REGISTRY_TYPES: Final = {"AVRO": "confluent-avro", "PROTOBUF": "confluent-protobuf", "JSON": "confluent-json"}


def _first_frame(req: Request | None, resp: Response | None) -> Frame | None:
    return req.frame if req is not None else resp.frame if resp is not None else None


class ExchangeRows(RowBuilder):
    """rows=exchanges. Damage of an exchange is always its row."""

    shape = "exchanges"

    def _reset(self) -> None:
        RowBuilder._reset(self)
        self.held = ExchangesColumns(self.cols)

    def exchange(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None, extra: tuple | None = None) -> None:
        if status in DAMAGE and not self.damage.keep(ep, _first_frame(req, resp), status, detail):
            return
        k = self.held
        self._identity(k, ep, req, resp)
        h = req.header if req is not None else None
        rq = req.frame if req is not None else None
        rs = resp.frame if resp is not None else None
        _frame_columns(rq, k.request_time, k.request_size, k.request_packet)
        _frame_columns(rs, k.response_time, k.response_size, k.response_packet)
        # (a rotation series: the response's file where it is not the request's)
        k.response_file.append(self.files[rs.number >> FILE_SHIFT] if rs is not None and rq is not None and
                               (rs.number ^ rq.number) >> FILE_SHIFT else None)
        k.latency_ms.append(elapsed_ms(rq.ts_ns, rs.ts_ns) if rq and rs else None)
        k.request_transfer_ms.append(transfer_ms(rq))
        k.response_transfer_ms.append(transfer_ms(rs))
        split = LatencySplit(ep, rq, rs)
        # (a loss's recovery would count as the broker's time)
        detail = _noted(_noted(detail, split.why), backwards(rq, rs))
        k.network_ms.append(split.network_ms)
        k.broker_ms.append(split.broker_ms)
        k.network_basis.append(split.basis)
        k.retransmissions.append(split.resent)
        k.request_header_version.append(h.header_version if h else None)
        k.response_header_version.append(resp.header_version if resp else None)
        k.status.append(status)
        k.detail.append(detail)
        k.request.append(message_json(req))
        k.response.append(message_json(resp))
        self._headline(extra)
        self.count += 1


class MessageRows(RowBuilder):
    """rows=messages: a row per frame. Each frame's own status decides whether it is damage."""

    shape = "messages"

    def _reset(self) -> None:
        RowBuilder._reset(self)
        self.held = MessagesColumns(self.cols)

    def exchange(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None, extra: tuple | None = None) -> None:
        for direction, msg in (("request", req), ("response", resp)):
            if msg is not None:
                self._message(ep, direction, req, resp if direction == "response" else None, status, detail, extra)
        if req is None and resp is None:
            self._message(ep, None, None, None, status, detail, extra)

    def _message(self, ep: Endpoints | None, direction: str | None, req: Request | None,
                 resp: Response | None, status: str, detail: str | None, extra: tuple | None) -> None:
        own, own_detail = frame_status(direction, req, resp, status, detail)
        frame = resp.frame if resp is not None else req.frame if req is not None else None
        if own in DAMAGE and not self.damage.keep(ep, frame, own, own_detail):
            return
        k = self.held
        self._identity(k, ep, req, resp, frame.number if frame is not None else -1)
        h = req.header if req is not None else None
        k.direction.append(direction)
        k.time.append(frame.ts_ns if frame else None)
        k.header_version.append(resp.header_version if resp is not None else h.header_version if h else None)
        k.size.append(frame.size if frame else None)
        k.status.append(own)
        k.detail.append(own_detail)
        k.exchange_status.append(status)
        k.packet.append(frame.number & LOCAL_MASK if frame else None)
        msg = resp if resp is not None else req
        k.body.append(message_json(msg))
        self._headline(extra)
        self.count += 1


class PartitionRows(RowBuilder):
    """rows=partitions. Damage gives rows where the exchange's api has partitions or is unknown;
    they carry the damage status (one row where no partition could be read)."""

    shape = "partitions"

    def _reset(self) -> None:
        RowBuilder._reset(self)
        self.held = PartitionsColumns(self.cols)

    def exchange(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None, extra: tuple | None = None) -> None:
        if req is None and resp is None:
            if status not in DAMAGE or self.damage.keep(ep, None, status, detail):
                self._status_only(ep, status, detail)
            return
        h = req.header if req is not None else None
        if status in DAMAGE:
            if h is not None and h.api_key not in PARTITION_APIS:
                return  # no partition rows for this api, damaged or not
            if not self.damage.keep(ep, _first_frame(req, resp), status, detail):
                return
        entries = partition_rows(h.api_key if h else None, req.body if req is not None else None,
                                 resp.body if resp is not None else None, self.topic_ids)
        if not entries and status in DAMAGE:  # damaged: a row says so, though no partition was read
            entries = [_NO_PARTITION]
        rq = req.frame if req is not None else None
        rs = resp.frame if resp is not None else None
        k = self.held
        for e in entries:
            self._identity(k, ep, req, resp)
            k.request_time.append(rq.ts_ns if rq else None)
            k.response_time.append(rs.ts_ns if rs else None)
            k.latency_ms.append(elapsed_ms(rq.ts_ns, rs.ts_ns) if rq and rs else None)
            k.status.append(status)
            k.detail.append(detail)
            k.topic.append(e["topic"])
            k.partition.append(e["partition"])
            k.error_code.append(e["error_code"])
            k.error_name.append(error_name(e["error_code"]))
            k.offset.append(e["offset"])
            k.high_watermark.append(e["high_watermark"])
            k.last_stable_offset.append(e["last_stable_offset"])
            k.log_start_offset.append(e["log_start_offset"])
            k.timestamp_ms.append(e["timestamp_ms"])
            k.record_count.append(e["record_count"])
            k.record_bytes.append(e["record_bytes"])
            k.group_id.append(extra[GROUP_ID] if extra else None)
            k.transactional_id.append(extra[TRANSACTIONAL_ID] if extra else None)
            self.count += 1


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
            self._status(ep, _first_frame(req, resp), status, detail)

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
                self._identity(k, ep, req, resp)
                k.time.append(msg.frame.ts_ns)
                k.direction.append(direction)
                k.topic.append(topic)
                k.partition.append(index)
                k.offset.append(r.offset)
                if appended is None:  # a Fetch response states each record's offset in the log
                    k.log_offset.append(r.offset if r.status == "ok" else None)
                else:  # a Produce request's: the response's BaseOffset, one offset each in turn
                    k.log_offset.append(base + position if base is not None else None)
                position += 1
                ts = r.timestamp_ms
                k.timestamp.append(ts * 1_000_000 if ts is not None and 0 <= ts < MAX_TIMESTAMP_MS else None)
                k.timestamp_type.append(r.timestamp_type)
                self._payload(k, r.key, r.value, r.headers)
                self._carried(k, topic, r.key, r.value, r.headers, r.detail, r.status == "ok")
                k.producer_id.append(r.producer_id)
                k.producer_epoch.append(r.producer_epoch)
                k.sequence.append(r.sequence)
                k.transactional.append(r.transactional)
                k.control_type.append(r.control_type)
                k.codec.append(r.codec)
                k.magic.append(r.magic)
                k.batch_offset.append(r.batch_offset)
                k.status.append(r.status)
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
                self._identity(k, ep, req, resp)
                k.time.append(msg.frame.ts_ns)
                k.direction.append(direction)
                k.topic.append(topic)
                k.partition.append(index)
                k.timestamp_type.append(b.timestamp_type())
                k.producer_id.append_int(b.pid)
                k.producer_epoch.append_int(b.pepoch)
                k.transactional.append(b.transactional)
                k.codec.append(b.codec)
                k.magic.append_int(2)
                k.batch_offset.append_int(b.base)
                k.status.append("ok")
            if payload or not made:
                self._payload(k, b.key, b.value, b.headers)
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

    def _payload(self, k: RecordsColumns, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes | None]] | None) -> None:
        """The payload: key, value and headers with ``payload`` (option includeRecords), else null."""
        if self.payload:
            k.key.append(key)
            k.value.append(value)
            k.headers.append([{"key": name, "value": v} for name, v in headers] if headers is not None else None)
        else:
            k.key.append(None)
            k.value.append(None)
            k.headers.append(None)

    def _carried(self, k: RecordsColumns, topic: str | None, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes | None]] | None, detail: str | None, ok: bool) -> None:
        """What the record carries besides its payload (always): trace context, and the wire format
        and schema id of key and value; ``detail`` says what is malformed."""
        if headers:
            trace, span, fmt, problem = trace_context(headers)
            k.trace_id.append(trace)
            k.span_id.append(span)
            k.trace_format.append(fmt)
            detail = _noted(detail, problem)
        else:
            k.trace_id.append(None)
            k.span_id.append(None)
            k.trace_format.append(None)
        if topic == SCHEMAS_TOPIC and ok:
            self._learn_schema(key, value)
        detail = self._format(k.key_format, k.key_schema_id, "key", key, detail)
        detail = self._format(k.value_format, k.value_schema_id, "value", value, detail)
        k.detail.append(detail)

    def _format(self, format_col: ColumnBuffer, schema_id_col: ColumnBuffer, side: str, data: bytes | None,
                detail: str | None) -> str | None:
        """The wire format and schema id of a key or value into their columns; the detail with what
        is malformed in it."""
        wire, sid, problem = wire_format(data)
        if sid is not None and wire is not None and wire.startswith("confluent"):
            wire = self.schema_types.get(sid, wire)
        format_col.append(wire)
        schema_id_col.append(sid)
        return _noted(detail, f"{side}: {problem}" if problem else None)

    def _learn_schema(self, key: bytes | None, value: bytes | None) -> None:
        """A schema registry's record of a schema (its ``_schemas`` topic): the id's schema type."""
        k, v = json_bounded(key), json_bounded(value)
        if isinstance(k, dict) and k.get("keytype") == "SCHEMA" and isinstance(v, dict) and \
                isinstance(v.get("id"), int) and not isinstance(v.get("id"), bool):
            kind = v.get("schemaType", "AVRO")  # any JSON value: a producer wrote it
            if isinstance(kind, str) and kind in REGISTRY_TYPES:
                self.schema_types[v["id"]] = REGISTRY_TYPES[kind]


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


class ConnectionRows(RowBuilder):
    """rows=connections: one row per TCP connection (the decoder calls ``connection``). Only a
    damaged capture file is damage here; other damage is in the connection's counts."""

    shape = "connections"

    def __init__(self, capture_file: str, max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED,
                 mode: str = "PERMISSIVE", max_records: int = rec.DEFAULT_MAX_RECORDS,
                 topic_ids: dict[str, str] | None = None):
        super().__init__(capture_file, max_decompressed, mode, max_records, topic_ids)
        #: each side's per-direction columns, named from the summary's fields, and whether each
        #: adds up over a carried connection's rows (else it is of the connection so far)
        self._side_names = [[(f"{side}_{name}", name in ADDING or name.startswith("tls_"))
                             for name in DirectionSummary._fields] for side in SIDES]
        self.connection = self._connection

    def exchange(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None, extra: tuple | None = None) -> None:
        if status == CAPTURE_DAMAGED and self.damage.keep(ep, _first_frame(req, resp), status, detail) or \
                status == CAPTURE_CHANGED:
            self._status_only(ep, status, detail)

    def _reset(self) -> None:
        RowBuilder._reset(self)
        self.held = ConnectionsColumns(self.cols)

    def _connection(self, conn, ep: Endpoints, client_dir: int, protocol_name: str,
                    sides: tuple[DirectionSummary, DirectionSummary], tls) -> None:
        k = self.held
        self._endpoints(k, ep, conn.first_number)
        k.first_time.append(conn.first_ts)
        k.last_time.append(conn.last_ts)
        k.first_packet.append(conn.first_number & LOCAL_MASK)
        k.start_captured.append(conn.client is not None)
        k.end_captured.append(_end(conn))
        rtt, near = conn.round_trip()
        k.handshake_rtt_ms.append(rtt / 1e6 if rtt is not None else None)
        k.capture_side.append(capture_side(conn, client_dir, rtt, near))
        k.client_resets.append(int(conn.reset_by == client_dir))
        k.broker_resets.append(int(conn.reset_by == 1 - client_dir))
        k.protocol.append(protocol_name)
        k.detail.append(tls.describe() if tls else None)
        st: ConnState | None = conn.state  # (the decoder's, see exchanges.Decoder)
        k.client_fingerprint.append(fingerprint(st.spoken, st.api_versions, st.shown) if st is not None else None)
        k.client_library.append(st.library()[0] if st is not None else None)
        # a connection carried across reads (carry.py): each of its rows counts what came after the
        # counts of its rows before (reported), so that its rows' counts add up to the connection's
        reported = st.reported if st is not None else None
        part = _PartCounts(reported) if reported is not None else None
        c = self.cols
        for names, summary in zip(self._side_names, sides):
            for (name, adds), v in zip(names, summary):
                c[name].append(v if part is None or not adds else part.since(name, v))
        k.tls_version.append(tls.version_name if tls else None)
        k.tls_cipher.append(tls.suite_name if tls else None)
        k.tls_server_name.append(tls.server_name if tls else None)
        k.tls_alpn.append(",".join(tls.alpn) if tls and tls.alpn else None)
        k.tls_ja3.append(tls.ja3 if tls else None)
        k.tls_ja4.append(tls.ja4 if tls else None)
        cert = tls.cert if tls else None
        k.tls_cert_subject.append(cert[0] if cert else None)
        k.tls_cert_issuer.append(cert[1] if cert else None)
        k.tls_cert_not_after.append(cert[2] if cert else None)
        for name, col, count in (("tls_decrypted_bytes", k.tls_decrypted_bytes, tls.decrypted if tls else None),
                                 ("tls_undecrypted_bytes", k.tls_undecrypted_bytes, tls.undecrypted if tls else None)):
            col.append(count if part is None else part.since(name, count))
        k.status.append("connection")
        if part is not None and st is not None:
            st.reported = part.now
        self.count += 1


class _PartCounts:
    """The counts of a connection's row where its rows before counted part of it (carry.py): each
    count less what they counted (``before``); ``now``: the counts so far, for its next row."""

    def __init__(self, before: dict[str, Any]):
        self.before = before
        self.now: dict[str, Any] = {}

    def since(self, name: str, total: Any) -> Any:  # (Any: whole counts stay int, times float)
        if total is None:
            return None
        self.now[name] = total
        return total - self.before.get(name, 0)


def _frame_columns(frame: Frame | None, time: ColumnBuffer, size: ColumnBuffer, packet: ColumnBuffer) -> None:
    """A frame's time, size and packet number into their columns (null without the frame); by
    append_int: unboxed where compiled."""
    if frame is not None:
        time.append_int(frame.ts_ns)
        size.append_int(frame.size)
        packet.append_int(frame.number & LOCAL_MASK)
    else:
        time.append(None)
        size.append(None)
        packet.append(None)


def _end(conn) -> str:
    """How much of a connection's end the capture holds (column end_captured)."""
    halves = conn.halves
    if conn.evicted:
        return "evicted"
    if conn.rst:
        return "rst"
    if halves and halves[0].fin and halves[1].fin:
        return "fin"
    if halves and (halves[0].fin or halves[1].fin):
        return "half_closed"
    return "open"


BUILDERS: dict[str, type[RowBuilder]] = {b.shape: b for b in (ExchangeRows, MessageRows, PartitionRows, RecordRows,
                                                              ConnectionRows)}


def row_builder(shape: str, capture_file: str, max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED,
                mode: str = "PERMISSIVE", max_records: int = rec.DEFAULT_MAX_RECORDS,
                topic_ids: dict[str, str] | None = None, payload: bool = False) -> RowBuilder:
    """The row sink of a shape; ``payload``: rows=records shows keys, values and headers."""
    sink = BUILDERS[shape](capture_file, max_decompressed, mode, max_records, topic_ids)
    sink.payload = payload
    return sink


def status_batch(shape: str, capture_file: str, status: str, detail: str) -> pa.RecordBatch:
    """One row of the shape that says something of a whole file (no connection, no frame)."""
    rows = row_builder(shape, capture_file)
    rows.exchange(None, None, None, status, detail, None)
    rows.fill(1)  # rows=records makes its rows as batches leave
    return rows.flush()


def _noted(detail: str | None, note: str | None) -> str | None:
    """A row's detail with a note added (after a "; "), where there is one."""
    if not note:
        return detail
    return f"{detail}; {note}" if detail else note
