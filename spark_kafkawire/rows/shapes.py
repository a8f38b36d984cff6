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

from typing import Any, Final

import pyarrow as pa

from ..arrays import ColumnBuffer
from ..kafka import codecs
from ..kafka import records as rec
from ..decode.connstate import ConnState, Endpoints, Request, Response
from ..decode.status import CAPTURE_CHANGED, CAPTURE_DAMAGED, DAMAGE
from ..wire.frames import Frame
from ..wire.series import FILE_SHIFT, LOCAL_MASK
from ..kafka.clients import fingerprint
from ..kafka.headline import GROUP_ID, TRANSACTIONAL_ID, error_name
from ..kafka.partitions import PARTITION_APIS, partition_rows
from .timing import LatencySplit, backwards, capture_side, elapsed_ms, transfer_ms
from ..decode.summary import DirectionSummary
from .columns import ADDING, SIDES
from .held import ConnectionsColumns, ExchangesColumns, MessagesColumns, PartitionsColumns
from .recordrows import RecordRows
from .table import RowBuilder, first_frame, frame_status, message_json, noted

#: a damaged exchange's row in rows=partitions where no partition could be read from it
_NO_PARTITION: Final = dict.fromkeys(("topic", "partition", "error_code", "offset", "high_watermark",
                                      "last_stable_offset", "log_start_offset", "timestamp_ms", "record_count",
                                      "record_bytes"))


class ExchangeRows(RowBuilder):
    """rows=exchanges. Damage of an exchange is always its row."""

    shape = "exchanges"

    def _reset(self) -> None:
        RowBuilder._reset(self)
        self.held = ExchangesColumns(self.cols)

    def exchange(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None, extra: tuple | None = None) -> None:
        if status in DAMAGE and not self.damage.keep(ep, first_frame(req, resp), status, detail):
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
        detail = noted(noted(detail, split.why), backwards(rq, rs))
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
            if not self.damage.keep(ep, first_frame(req, resp), status, detail):
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
        if status == CAPTURE_DAMAGED and self.damage.keep(ep, first_frame(req, resp), status, detail) or \
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
