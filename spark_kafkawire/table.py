"""Exchanges -> Arrow record batches.

Each row shape (option ``rows``) has one column list here, the single source of both the Spark
schema (DDL) and the Arrow schema. Builders append to one Python list per column and turn them
into a ``pyarrow.RecordBatch`` of exactly that schema.
"""

from __future__ import annotations

from collections import deque
from typing import Iterator

import pyarrow as pa

from . import columns, protocol
from . import records as rec
from .body import RawRecords
from .capture import MalformedCaptureError
from .exchanges import (CAPTURE_CHANGED, CAPTURE_DAMAGED, COMPLETE, DAMAGE, MALFORMED, SASL_TOKEN, TLS, TRUNCATED,
                        UNDECODED, UNKNOWN_API, Endpoints, Request, Response)
from .headline import error_name
from .partitions import PARTITION_APIS, RECORDS_IN_REQUEST, RECORDS_IN_RESPONSE, partition_rows, topic_partitions

#: a damaged exchange's row in rows=partitions where no partition could be read from it
_NO_PARTITION = dict.fromkeys(("topic", "partition", "error_code", "offset", "high_watermark", "last_stable_offset",
                               "log_start_offset", "timestamp_ms", "record_count", "record_bytes"))

_ARROW = {
    "string": pa.string(),
    "int": pa.int32(),
    "smallint": pa.int16(),
    "tinyint": pa.int8(),
    "bigint": pa.int64(),
    "double": pa.float64(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "array<string>": pa.list_(pa.string()),
    "binary": pa.binary(),
    "boolean": pa.bool_(),
    "array<struct<key:string,value:binary>>": pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
}

#: headline columns of exchanges and messages rows (see headline.py)
_HEADLINE = [
    ("error_code", "smallint"),
    ("error_name", "string"),
    ("throttle_time_ms", "int"),
    ("topics", "array<string>"),
    ("partition_count", "int"),
    ("record_count", "bigint"),
    ("record_bytes", "bigint"),
    ("acks", "smallint"),
    ("transactional_id", "string"),
    ("group_id", "string"),
    ("member_id", "string"),
    ("client_software_name", "string"),
    ("client_software_version", "string"),
    ("sasl_mechanism", "string"),
    ("sasl_user", "string"),
]

#: per-direction counts of connections rows (client_*: sent by the client, broker_*: by the broker),
#: in the order RowBuilder.connection reads them
_DIRECTION_COUNTS = ("bytes", "frames", "frame_bytes", "partial_frames", "partial_bytes", "skipped_bytes",
                     "gap_bytes", "gaps", "resyncs")
_NO_COUNTS = (0,) * len(_DIRECTION_COUNTS)

_ENDPOINTS = [
    ("capture_file", "string"),
    ("client_ip", "string"),
    ("client_port", "int"),
    ("broker_ip", "string"),
    ("broker_port", "int"),
]

_TIMES = [
    ("request_time", "timestamp"),
    ("response_time", "timestamp"),
    ("latency_ms", "double"),
]
_API = [
    ("api_key", "smallint"),
    ("api_name", "string"),
    ("api_version", "smallint"),
]

COLUMNS: dict[str, list[tuple[str, str]]] = {
    "exchanges": _ENDPOINTS + _TIMES + _API + [
        ("request_header_version", "tinyint"),
        ("response_header_version", "tinyint"),
        ("correlation_id", "int"),
        ("client_id", "string"),
        ("request_size", "int"),
        ("response_size", "int"),
        ("status", "string"),
        ("detail", "string"),
        ("request_packet", "bigint"),
        ("response_packet", "bigint"),
        ("request", "string"),
        ("response", "string"),
    ] + _HEADLINE,
    "messages": _ENDPOINTS + [
        ("direction", "string"),
        ("time", "timestamp"),
        ("api_key", "smallint"),
        ("api_name", "string"),
        ("api_version", "smallint"),
        ("header_version", "tinyint"),
        ("correlation_id", "int"),
        ("client_id", "string"),
        ("size", "int"),
        ("status", "string"),
        ("detail", "string"),
        ("exchange_status", "string"),
        ("packet", "bigint"),
        ("body", "string"),
    ] + _HEADLINE,
    "partitions": _ENDPOINTS + _TIMES + _API + [
        ("correlation_id", "int"),
        ("client_id", "string"),
        ("status", "string"),
        ("detail", "string"),
        ("topic", "string"),
        ("partition", "int"),
        ("error_code", "smallint"),
        ("error_name", "string"),
        ("offset", "bigint"),
        ("high_watermark", "bigint"),
        ("last_stable_offset", "bigint"),
        ("log_start_offset", "bigint"),
        ("timestamp_ms", "bigint"),
        ("record_count", "bigint"),
        ("record_bytes", "bigint"),
        ("group_id", "string"),
        ("transactional_id", "string"),
    ],
    "records": _ENDPOINTS + [
        ("time", "timestamp"),
        ("direction", "string"),
        ("api_key", "smallint"),
        ("api_name", "string"),
        ("api_version", "smallint"),
        ("correlation_id", "int"),
        ("client_id", "string"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestamp_type", "string"),
        ("key", "binary"),
        ("value", "binary"),
        ("headers", "array<struct<key:string,value:binary>>"),
        ("producer_id", "bigint"),
        ("producer_epoch", "smallint"),
        ("sequence", "int"),
        ("transactional", "boolean"),
        ("control_type", "string"),
        ("codec", "string"),
        ("magic", "tinyint"),
        ("batch_offset", "bigint"),
        ("status", "string"),
        ("detail", "string"),
    ],
    "connections": _ENDPOINTS + [
        ("first_time", "timestamp"),
        ("last_time", "timestamp"),
        ("first_packet", "bigint"),
        ("start_captured", "boolean"),
        ("end_captured", "string"),
        ("protocol", "string"),
        ("detail", "string"),
    ] + [(f"{side}_{what}", "bigint") for side in ("client", "broker") for what in _DIRECTION_COUNTS] + [
        ("status", "string"),
    ],
}
ROW_SHAPES = tuple(COLUMNS)
MAX_TIMESTAMP_MS = 253402300800000  # 10000-01-01: later record timestamps are not dates
MIN_TIME_US, MAX_TIME_US = -62135596800 * 10**6, 253402300799 * 10**6 + 999999  # years 1 to 9999, as Spark


def ddl(rows: str) -> str:
    """Spark DDL schema of a row shape."""
    return ", ".join(f"{name} {typ}" for name, typ in COLUMNS[rows])


def arrow_schema(rows: str) -> pa.Schema:
    return pa.schema([pa.field(name, _ARROW[typ]) for name, typ in COLUMNS[rows]])


class RowBuilder:
    """A RowSink that collects rows of one shape as columns."""

    def __init__(self, rows: str, capture_file: str, max_decompressed: int = rec.DEFAULT_MAX_DECOMPRESSED,
                 mode: str = "PERMISSIVE", max_records: int = rec.DEFAULT_MAX_RECORDS):
        self.shape = rows
        self.mode = mode
        #: the row of each TCP connection: only rows=connections has them
        self.connection = self._connection if rows == "connections" else None
        self.schema = arrow_schema(rows)
        self.capture_file = capture_file
        self.names = [n for n, _ in COLUMNS[rows]]
        self.max_decompressed = max_decompressed
        self.max_records = max_records
        self._count_cols = {side: [f"{side}_{what}" for what in _DIRECTION_COUNTS] for side in ("client", "broker")}
        #: rows not made yet, in order: generators that each append one row per step (rows=records,
        #: where one frame can hold millions); see fill()
        self.backlog: deque = deque()
        self.topic_ids: dict[str, str] = {}  # the decoder's topic id -> name map
        self._reset()

    def _reset(self) -> None:
        self.cols: dict[str, list] = {n: [] for n in self.names}
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def fill(self, limit: int) -> None:
        """Make rows from the backlog until ``limit`` rows are held or the backlog is empty."""
        backlog = self.backlog
        while backlog and self.count < limit:
            for _ in backlog[0]:
                if self.count >= limit:
                    break
            else:
                backlog.popleft()

    def flush(self) -> pa.RecordBatch:
        cols = self.cols
        arrays = []
        bad: dict[int, list[str]] = {}  # row -> columns whose value did not fit
        for field in self.schema:
            values = cols[field.name]
            if field.type == _ARROW["timestamp"]:
                values = [None if v is None else v // 1000 for v in values]  # ns -> us
            arrays.append(self._array(field, values, bad))
        if bad and "detail" in cols:
            details = arrays[self.names.index("detail")].to_pylist()
            for row, names in bad.items():
                note = f"out of range, left null: {', '.join(names)}"
                details[row] = f"{details[row]}; {note}" if details[row] else note
            arrays[self.names.index("detail")] = columns.array(details, pa.string())
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._reset()
        return batch

    @staticmethod
    def _array(field: pa.Field, values: list, bad: dict[int, list[str]]) -> pa.Array:
        """The column as Arrow; a value beyond its type's range (a time outside years 1-9999, an
        int32 column given 2**31, ...) becomes null and is named in the row's detail."""
        timestamp = field.type == _ARROW["timestamp"]
        try:
            arr = columns.array(values, field.type)
            if not timestamp or not len(arr) or arr.null_count == len(arr):
                return arr
            times = [v for v in values if v is not None]
            if MIN_TIME_US <= min(times) and max(times) <= MAX_TIME_US:
                return arr
        except (pa.ArrowInvalid, OverflowError, TypeError):
            pass
        kept = []
        for row, v in enumerate(values):
            try:
                if v is not None and timestamp and not MIN_TIME_US <= v <= MAX_TIME_US:
                    raise OverflowError
                pa.array([v], type=field.type)
                kept.append(v)
            except (pa.ArrowInvalid, OverflowError, TypeError):
                kept.append(None)
                bad.setdefault(row, []).append(field.name)
        return pa.array(kept, type=field.type)

    def _endpoints(self, ep: Endpoints | None) -> None:
        c = self.cols
        c["capture_file"].append(self.capture_file)
        c["client_ip"].append(ep.client_ip if ep else None)
        c["client_port"].append(ep.client_port if ep else None)
        c["broker_ip"].append(ep.broker_ip if ep else None)
        c["broker_port"].append(ep.broker_port if ep else None)

    def _headline(self, extra: dict | None) -> None:
        c = self.cols
        for name, _t in _HEADLINE:
            c[name].append(extra.get(name) if extra else None)

    def _connection(self, conn, ep: Endpoints, client_dir: int, protocol_name: str, framers) -> None:
        """One row per TCP connection (rows=connections: the builder's ``connection``)."""
        c = self.cols
        self._endpoints(ep)
        c["first_time"].append(conn.first_ts)
        c["last_time"].append(conn.last_ts)
        c["first_packet"].append(conn.first_number)
        c["start_captured"].append(conn.client is not None)
        halves = conn.halves
        if conn.evicted:
            end = "evicted"
        elif conn.rst:
            end = "rst"
        elif halves and halves[0].fin and halves[1].fin:
            end = "fin"
        elif halves and (halves[0].fin or halves[1].fin):
            end = "half_closed"
        else:
            end = "open"
        c["end_captured"].append(end)
        c["protocol"].append(protocol_name)
        c["detail"].append(None)
        for side, d in (("client", client_dir), ("broker", 1 - client_dir)):
            if framers is None:  # the connection never carried payload
                values = _NO_COUNTS
            else:
                f = framers[d]
                a = f.acct
                values = (halves[d].captured, a.frames, a.frame_bytes, a.partial_frames, a.partial_bytes,
                          a.skipped_bytes, a.gap_bytes, a.gaps, f.resyncs)
            for name, v in zip(self._count_cols[side], values):
                c[name].append(v)
        c["status"].append("connection")
        self.count += 1

    def _damage(self, ep: Endpoints | None, frame, status: str, detail: str | None) -> bool:
        """Apply the mode to a damaged row: True to keep it (PERMISSIVE), False to drop it."""
        if self.mode == "PERMISSIVE":
            return True
        if self.mode == "DROPMALFORMED":
            return False
        where = f"packet {frame.number}, stream byte {frame.offset}" if frame is not None else ""
        conn = f" ({ep.client_ip}:{ep.client_port} -> {ep.broker_ip}:{ep.broker_port})" if ep else ""
        raise MalformedCaptureError(f"{self.capture_file}: {where}{conn}: {status}: {detail} (mode FAILFAST)"
                                    if where else f"{self.capture_file}: {status}: {detail} (mode FAILFAST)")

    def _damage_has_row(self, req: Request | None, resp: Response | None, status: str) -> bool:
        """Does damage of an exchange give a row of this shape? The modes act on exactly these:
        PERMISSIVE shows them, DROPMALFORMED drops them, FAILFAST fails on them.

        exchanges (and messages, per frame): always. connections: only a damaged capture file;
        other damage is in the connection's counts (partial, skipped, gap bytes). partitions: when
        the exchange's api has partitions, or its api is unknown; its rows carry the damage status
        (one row where no partition could be read). records (decided in _records, where it is
        known whether records were read): a row with the damage status where none could be."""
        if self.shape == "connections":
            return status == CAPTURE_DAMAGED
        if self.shape == "partitions" and (req is not None or resp is not None):
            h = req.header if req is not None else None
            return h is None or h.api_key in PARTITION_APIS
        return True

    def exchange(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None, extra: dict | None = None) -> None:
        if self.shape == "messages":  # each frame's row has a status of its own
            for direction, msg in (("request", req), ("response", resp)):
                if msg is not None:
                    self._message(ep, direction, req, resp if direction == "response" else None, status, detail,
                                  extra)
            if req is None and resp is None:
                self._message(ep, None, None, None, status, detail, extra)
            return
        if status in DAMAGE and self.shape != "records":  # records: per batch, see _records
            if not self._damage_has_row(req, resp, status):
                return  # this shape has no row for it (and so no FAILFAST): see _damage_has_row
            frame = req.frame if req is not None else resp.frame if resp is not None else None
            if not self._damage(ep, frame, status, detail):
                return
        if self.shape == "connections":
            if status in (CAPTURE_DAMAGED, CAPTURE_CHANGED):
                self._status_only(ep, status, detail)
            return
        if self.shape == "partitions":
            return self._partitions(ep, req, resp, status, detail, extra)
        if self.shape == "records":
            return self._records(ep, req, resp, status, detail)
        c = self.cols
        self._endpoints(ep)
        h = req.header if req is not None else None
        rq = req.frame if req is not None else None
        rs = resp.frame if resp is not None else None
        c["request_time"].append(rq.ts_ns if rq else None)
        c["response_time"].append(rs.ts_ns if rs else None)
        c["latency_ms"].append((rs.ts_ns - rq.ts_ns) / 1e6 if rq and rs else None)
        c["api_key"].append(h.api_key if h else None)
        c["api_name"].append(protocol.API_NAMES.get(h.api_key) if h else None)
        c["api_version"].append(h.api_version if h else None)
        c["request_header_version"].append(h.header_version if h else None)
        c["response_header_version"].append(resp.header_version if resp else None)
        c["correlation_id"].append(h.correlation_id if h else resp.correlation_id if resp else None)
        c["client_id"].append(h.client_id if h else None)
        c["request_size"].append(rq.size if rq else None)
        c["response_size"].append(rs.size if rs else None)
        c["status"].append(status)
        c["detail"].append(detail)
        c["request_packet"].append(rq.number if rq else None)
        c["response_packet"].append(rs.number if rs else None)
        c["request"].append(_json(req.body) if req is not None else None)
        c["response"].append(_json(resp.body) if resp is not None else None)
        self._headline(extra)
        self.count += 1

    def _message(self, ep: Endpoints | None, direction: str | None, req: Request | None,
                 resp: Response | None, status: str, detail: str | None, extra: dict | None) -> None:
        own, own_detail = frame_status(direction, req, resp, status, detail)
        if own in DAMAGE:
            frame = resp.frame if resp is not None else req.frame if req is not None else None
            if not self._damage(ep, frame, own, own_detail):
                return
        c = self.cols
        self._endpoints(ep)
        h = req.header if req is not None else None
        frame = resp.frame if resp is not None else req.frame if req is not None else None
        c["direction"].append(direction)
        c["time"].append(frame.ts_ns if frame else None)
        c["api_key"].append(h.api_key if h else None)
        c["api_name"].append(protocol.API_NAMES.get(h.api_key) if h else None)
        c["api_version"].append(h.api_version if h else None)
        if resp is not None:
            c["header_version"].append(resp.header_version)
            c["correlation_id"].append(resp.correlation_id)
        else:
            c["header_version"].append(h.header_version if h else None)
            c["correlation_id"].append(h.correlation_id if h else None)
        c["client_id"].append(h.client_id if h else None)
        c["size"].append(frame.size if frame else None)
        c["status"].append(own)
        c["detail"].append(own_detail)
        c["exchange_status"].append(status)
        c["packet"].append(frame.number if frame else None)
        msg = resp if resp is not None else req
        c["body"].append(_json(msg.body) if msg is not None else None)
        self._headline(extra)
        self.count += 1


    def _identity(self, ep: Endpoints | None, req: Request | None, resp: Response | None) -> None:
        c = self.cols
        self._endpoints(ep)
        h = req.header if req is not None else None
        c["api_key"].append(h.api_key if h else None)
        c["api_name"].append(protocol.API_NAMES.get(h.api_key) if h else None)
        c["api_version"].append(h.api_version if h else None)
        c["correlation_id"].append(h.correlation_id if h else resp.correlation_id if resp else None)
        c["client_id"].append(h.client_id if h else None)

    def _status_only(self, ep: Endpoints | None, status: str, detail: str | None) -> None:
        """A row that says something about the capture rather than a partition or record."""
        self._endpoints(ep)
        for name in self.names[len(_ENDPOINTS) :]:
            self.cols[name].append(status if name == "status" else detail if name == "detail" else None)
        self.count += 1

    def _partitions(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                    status: str, detail: str | None, extra: dict | None) -> None:
        if req is None and resp is None:
            return self._status_only(ep, status, detail)
        h = req.header if req is not None else None
        entries = partition_rows(h.api_key if h else None, req.body if req is not None else None,
                                 resp.body if resp is not None else None, self.topic_ids)
        if not entries and status in DAMAGE:  # damaged: a row says so, though no partition was read
            entries = [_NO_PARTITION]
        rq = req.frame if req is not None else None
        rs = resp.frame if resp is not None else None
        c = self.cols
        for e in entries:
            self._identity(ep, req, resp)
            c["request_time"].append(rq.ts_ns if rq else None)
            c["response_time"].append(rs.ts_ns if rs else None)
            c["latency_ms"].append((rs.ts_ns - rq.ts_ns) / 1e6 if rq and rs else None)
            c["status"].append(status)
            c["detail"].append(detail)
            for name in ("topic", "partition", "error_code", "offset", "high_watermark", "last_stable_offset",
                         "log_start_offset", "timestamp_ms", "record_count", "record_bytes"):
                c[name].append(e[name])
            c["error_name"].append(error_name(e["error_code"]))
            c["group_id"].append(extra.get("group_id") if extra else None)
            c["transactional_id"].append(extra.get("transactional_id") if extra else None)
            self.count += 1

    def _records(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None) -> None:
        """Queue the rows of one exchange: they are made as batches leave (see fill()). Damage of
        the exchange is a row (and so subject to the mode) only where no record could be read:
        records that were read carry their own status."""
        def damaged() -> None:
            frame = req.frame if req is not None else resp.frame if resp is not None else None
            if self._damage(ep, frame, status, detail):
                self.backlog.append(self._status_row(ep, status, detail))

        if req is None and resp is None:
            if status in DAMAGE:
                damaged()
            else:
                self.backlog.append(self._status_row(ep, status, detail))
            return
        h = req.header if req is not None else None
        if h is None:  # an exchange of an unknown api: it may have carried records
            if status in DAMAGE:
                damaged()
            return
        if h.api_key in RECORDS_IN_REQUEST:
            direction, msg = "request", req
        elif h.api_key in RECORDS_IN_RESPONSE:
            if resp is None:  # a Fetch whose response is missing: damaged if cut, else nothing to read
                if status in DAMAGE:
                    damaged()
                return
            direction, msg = "response", resp
        else:
            return  # no records in this api: nothing of it here, damaged or not
        parts = [(t, i, f["Records"]) for t, i, f in topic_partitions(msg.body, self.topic_ids)
                 if isinstance(f.get("Records"), RawRecords)]
        if parts:
            self.backlog.append(self._record_rows(ep, req, resp, direction, msg, parts))
        elif status in DAMAGE:  # damaged: a row says so, though no record was read
            damaged()

    def _status_row(self, ep: Endpoints | None, status: str, detail: str | None) -> Iterator[None]:
        self._status_only(ep, status, detail)
        yield

    def _record_rows(self, ep: Endpoints | None, req: Request | None, resp: Response | None, direction: str,
                     msg, parts: list) -> Iterator[None]:
        """One row per record of the message's record fields, one per step."""
        budget = rec.Budget(self.max_decompressed)  # one for all the batches of the message
        for topic, index, raw in parts:
            for r in rec.iter_records(raw.data, budget, self.max_records):
                c = self.cols  # a new set of columns after each batch leaves
                # a batch cut at the end of a Fetch response is how brokers fill fetch sizes: not damage
                if r.status not in ("ok", "truncated") and \
                        not self._damage(ep, msg.frame, f"records {r.status}", r.detail):
                    continue
                self._identity(ep, req, resp)
                c["time"].append(msg.frame.ts_ns)
                c["direction"].append(direction)
                c["topic"].append(topic)
                c["partition"].append(index)
                c["offset"].append(r.offset)
                ts = r.timestamp_ms
                c["timestamp"].append(ts * 1_000_000 if ts is not None and 0 <= ts < MAX_TIMESTAMP_MS else None)
                c["timestamp_type"].append(r.timestamp_type)
                c["key"].append(r.key)
                c["value"].append(r.value)
                c["headers"].append([{"key": k, "value": v} for k, v in r.headers] if r.headers is not None else None)
                c["producer_id"].append(r.producer_id)
                c["producer_epoch"].append(r.producer_epoch)
                c["sequence"].append(r.sequence)
                c["transactional"].append(r.transactional)
                c["control_type"].append(r.control_type)
                c["codec"].append(r.codec)
                c["magic"].append(r.magic)
                c["batch_offset"].append(r.batch_offset)
                c["status"].append(r.status)
                c["detail"].append(r.detail)
                self.count += 1
                yield


def frame_status(direction: str | None, req: Request | None, resp: Response | None, status: str,
                 detail: str | None) -> tuple[str, str | None]:
    """The status of one frame of an exchange (rows=messages): ``complete`` when the frame and its
    body decoded, whatever became of the exchange (its status is ``exchange_status``)."""
    if direction is None or status in (SASL_TOKEN, TLS, CAPTURE_DAMAGED, CAPTURE_CHANGED):
        return status, detail
    msg = req if direction == "request" else resp
    if not msg.frame.complete:
        return TRUNCATED, "cut short by a gap in the capture or its end"
    h = req.header if req is not None else None
    if h is None:  # a request header that did not parse; a response without its request
        return (MALFORMED, detail) if direction == "request" else (status, detail)
    if direction == "response" and status == MALFORMED:  # the response header did not parse
        return MALFORMED, detail
    if h.header_version is None:
        return UNKNOWN_API, f"api key {h.api_key} version {h.api_version} is not defined"
    if msg.error:
        return UNDECODED, msg.error
    return COMPLETE, None


_orjson = rec.require("orjson", "orjson")
_ENCODE = _orjson.dumps
_KEYS = _orjson.OPT_NON_STR_KEYS


def _json(body: dict | None) -> bytes | None:
    """A body as compact JSON, UTF-8 bytes (the column builder takes them as they are). orjson: a
    fifth of the json module's time on these bodies; a float64 field holding NaN or infinity
    becomes null (the json module would write NaN, which is not JSON)."""
    return None if body is None else _ENCODE(body, option=_KEYS)


def status_batch(shape: str, capture_file: str, status: str, detail: str) -> pa.RecordBatch:
    """One row of the shape that says something of a whole file (no connection, no frame)."""
    rows = RowBuilder(shape, capture_file)
    rows.exchange(None, None, None, status, detail, None)
    rows.fill(1)  # rows=records makes its rows as batches leave
    return rows.flush()
