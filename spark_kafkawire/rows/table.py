"""Exchanges -> Arrow record batches: the row shapes' columns and what all their builders share.

Each row shape (option ``rows``) has one column list here, the single source of both the Spark
schema (DDL) and the Arrow schema. A builder (one per shape, see :mod:`.shapes`) appends to one
column each (compiled, a typed column writing Arrow's buffers; as Python, a list);
:class:`RowBuilder` turns them into a ``pyarrow.RecordBatch`` of exactly that schema.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, ClassVar, Final, cast

import pyarrow as pa
from mypy_extensions import mypyc_attr

from .. import arrays, protocol
from ..kafka import codecs
from ..kafka import records as rec
from ..compiled import native, require
from ..decode.connstate import Endpoints, Request, Response
from ..decode.status import CAPTURE_CHANGED, CAPTURE_DAMAGED, COMPLETE, MALFORMED, SASL_TOKEN, TLS, TRUNCATED, \
    UNDECODED, UNKNOWN_API
from ..decode.modes import DamagePolicy
from ..wire.lane import RowCounts
from ..wire.series import FILE_SHIFT
from ..kafka.headers import RequestHeader
from ..kafka.headline import HEADLINE_FIELDS, SESSION_FIELDS

_ARROW: Final = {
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

#: the types of the headline columns of exchanges and messages rows; their order is headline.py's
_HEADLINE_TYPES: Final = {
    "error_code": "smallint", "error_name": "string", "throttle_time_ms": "int", "topics": "array<string>",
    "partition_count": "int", "record_count": "bigint", "record_bytes": "bigint", "acks": "smallint",
    "transactional_id": "string", "group_id": "string", "member_id": "string", "client_software_name": "string",
    "client_software_version": "string", "sasl_mechanism": "string", "sasl_user": "string", "client_library": "string",
}
_HEADLINE: Final = [(name, _HEADLINE_TYPES[name]) for name in HEADLINE_FIELDS + SESSION_FIELDS]

HEADLINE_NAMES: Final = [name for name, _t in _HEADLINE]
#: the columns that say which exchange a row is of (RowBuilder._identity writes them in this order)
_IDENTITY: Final = ("api_key", "api_name", "api_version", "correlation_id", "client_id")
API_NAMES: Final = protocol.API_NAMES

#: per-direction counts of connections rows (client_*: sent by the client, broker_*: by the broker),
#: in the order ConnectionRows reads them
_DIRECTION_COUNTS: Final = ("bytes", "frames", "frame_bytes", "partial_frames", "partial_bytes", "skipped_bytes",
                            "gap_bytes", "gaps", "resyncs", "retransmitted_segments", "retransmitted_bytes")
_NO_COUNTS: Final = (0,) * len(_DIRECTION_COUNTS)
#: per-direction TCP health of connections rows (wire/health.py): segments out of order, segments lost
#: on the path (and their bytes), zero windows
#: advertised and the time at zero window, round trips from the direction's data to the other's ACK
_DIRECTION_HEALTH: Final = [("data_segments", "bigint"), ("out_of_order", "bigint"), ("lost_segments", "bigint"),
                            ("lost_bytes", "bigint"),
                            ("zero_windows", "bigint"), ("zero_window_ms", "double"),
                            ("rtt_min_ms", "double"), ("rtt_p50_ms", "double")]
#: a TLS connection's bytes per direction (see tls/__init__.py): every captured byte in one of the first three
_TLS_COUNTS: Final = ("read_bytes", "undecrypted_bytes", "other_bytes", "gap_bytes")

_ENDPOINTS: Final = [
    ("capture_file", "string"),
    ("client_ip", "string"),
    ("client_port", "int"),
    ("broker_ip", "string"),
    ("broker_port", "int"),
    ("community_id", "string"),
]

_TIMES: Final = [
    ("request_time", "timestamp"),
    ("response_time", "timestamp"),
    ("latency_ms", "double"),
]
#: how long an exchange's frames took to cross the capture point
_TRANSFER: Final = [("request_transfer_ms", "double"), ("response_transfer_ms", "double")]
#: where an exchange's time went: the network's round trip and the broker's hold
_SPLIT: Final = [("network_ms", "double"), ("broker_ms", "double"), ("network_basis", "string"),
                 ("retransmissions", "int")]
_API: Final = [
    ("api_key", "smallint"),
    ("api_name", "string"),
    ("api_version", "smallint"),
]

COLUMNS: dict[str, list[tuple[str, str]]] = {
    "exchanges": _ENDPOINTS + _TIMES + _TRANSFER + _SPLIT + _API + [
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
        ("response_file", "string"),
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
        ("log_offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestamp_type", "string"),
        ("key", "binary"),
        ("value", "binary"),
        ("headers", "array<struct<key:string,value:binary>>"),
        ("key_format", "string"),
        ("key_schema_id", "bigint"),
        ("value_format", "string"),
        ("value_schema_id", "bigint"),
        ("trace_id", "string"),
        ("span_id", "string"),
        ("trace_format", "string"),
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
        ("handshake_rtt_ms", "double"),
        ("capture_side", "string"),
        ("client_resets", "int"),
        ("broker_resets", "int"),
        ("protocol", "string"),
        ("detail", "string"),
        ("client_fingerprint", "string"),
        ("client_library", "string"),
    ] + [(f"{side}_{what}", "bigint") for side in ("client", "broker") for what in _DIRECTION_COUNTS] + [
        (f"{side}_{what}", typ) for side in ("client", "broker") for what, typ in _DIRECTION_HEALTH] + [
        ("tls_version", "string"),
        ("tls_cipher", "string"),
        ("tls_server_name", "string"),
        ("tls_alpn", "string"),
        ("tls_ja3", "string"),
        ("tls_ja4", "string"),
        ("tls_cert_subject", "string"),
        ("tls_cert_issuer", "string"),
        ("tls_cert_not_after", "string"),
        ("tls_decrypted_bytes", "bigint"),
        ("tls_undecrypted_bytes", "bigint"),
    ] + [(f"{side}_tls_{what}", "bigint") for side in ("client", "broker") for what in _TLS_COUNTS] + [
        ("status", "string"),
    ],
}
ROW_SHAPES: Final = tuple(COLUMNS)
MAX_TIMESTAMP_MS: Final = 253402300800000  # 10000-01-01: later record timestamps are not dates
#: rows into typed columns (arrays.Column) where this module runs compiled, else into lists
TYPED: Final = native


@mypyc_attr(native_class=False)
class Values(list):
    """A column where this module runs as Python: a list (its append is the cheapest there) whose
    ``append_int`` is its ``append``, as the rows call an arrays.Column's."""

    __slots__ = ()
    append_int = list.append


def ddl(rows: str) -> str:
    """Spark DDL schema of a row shape."""
    return ", ".join(f"{name} {typ}" for name, typ in COLUMNS[rows])


def arrow_schema(rows: str) -> pa.Schema:
    return pa.schema([pa.field(name, _ARROW[typ]) for name, typ in COLUMNS[rows]])


class RowBuilder(RowCounts):
    """The columns of one row shape being filled (the part every shape's builder shares): rows are
    appended to ``cols`` and leave as record batches (:meth:`flush`); rows not made yet wait in
    ``backlog`` (rows=records, where one frame can hold millions: see :meth:`fill`). A shape's
    builder (see shapes.py) is the decoder's row sink: its ``exchange`` appends that shape's rows."""

    shape: ClassVar[str] = ""  # the row shape, set by each shape's builder
    #: the row of each TCP connection, for shapes that have one (see pairing.RowSink)
    connection: Callable[..., None] | None = None

    def __init__(self, capture_file: str, max_decompressed: int = codecs.DEFAULT_MAX_DECOMPRESSED,
                 mode: str = "PERMISSIVE", max_records: int = rec.DEFAULT_MAX_RECORDS,
                 topic_ids: dict[str, str] | None = None):
        self.schema = arrow_schema(self.shape)
        self.names = [n for n, _ in COLUMNS[self.shape]]
        self.damage = DamagePolicy(mode, capture_file)
        #: the files read, in order (more than one: a rotation series, see wire/series.py); a packet
        #: number says its file's index (series.file_index)
        self.files: list[str] = self.damage.files
        self.max_decompressed = max_decompressed
        self.max_records = max_records
        self.backlog = deque()  # (RowCounts: the fast lane asks for it between packets)
        self.topic_ids: dict[str, str] = topic_ids if topic_ids is not None else {}  # topic id -> name
        self.payload = False  # rows=records: keys, values and headers shown (option includeRecords)
        self.schema_types: dict[int, str] = {}  # rows=records: schema id -> format, from a registry's records
        self._reset()

    def _reset(self) -> None:
        # compiled, each column is typed (arrays.Column: values written into Arrow's buffers as
        # they come); interpreted, a list (its append is the cheapest there), made an array at flush
        self.cols: dict[str, arrays.Column] = {f.name: arrays.column(f.type) for f in self.schema} if TYPED else \
            {n: cast(arrays.Column, Values()) for n in self.names}
        self.endpoint_cols = [self.cols[n] for n, _t in _ENDPOINTS]  # every shape begins with them
        # the headline columns in HEADLINE_NAMES's order, and the identity columns in _IDENTITY's,
        # where the shape has them (held per batch: no lookup by name per row)
        self.headline_cols = self._held(HEADLINE_NAMES)
        self.identity_cols = self._held(_IDENTITY)
        self.count = 0

    def _held(self, names: list[str] | tuple[str, ...]) -> list[arrays.Column]:
        """The columns of these names, in this order, where the shape has them all (else none)."""
        return [self.cols[n] for n in names] if all(n in self.cols for n in names) else []

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
        built: list = []
        bad: dict[int, list[str]] = {}  # row -> columns whose value did not fit
        for field in self.schema:
            col = cols[field.name]
            if TYPED:
                built.append(col.array())
                for row in col.bad:
                    bad.setdefault(row, []).append(field.name)
                continue
            values = cast(list, col)
            if field.type == _ARROW["timestamp"]:
                values = [None if v is None else v // 1000 for v in values]  # ns -> us
            built.append(_array(field, values, bad))
        if bad and "detail" in cols:
            details = built[self.names.index("detail")].to_pylist()
            for row, names in bad.items():
                note = f"out of range, left null: {', '.join(names)}"
                details[row] = f"{details[row]}; {note}" if details[row] else note
            built[self.names.index("detail")] = arrays.array(details, pa.string())
        batch = pa.RecordBatch.from_arrays(built, schema=self.schema)
        self._reset()
        return batch

    def exchange(self, ep: Endpoints | None, req: Request | None, resp: Response | None,
                 status: str, detail: str | None, extra: tuple | None = None) -> None:
        raise NotImplementedError

    def add_file(self, path: str) -> None:
        """The next file of a rotation series is read: its packets' numbers say its index."""
        self.files.append(path)

    # -- pieces of rows several shapes share -----------------------------------------------------
    def _endpoints(self, ep: Endpoints | None, number: int = -1) -> None:
        """The endpoint columns; capture_file is the file of packet ``number`` (-1: of the file
        being read)."""
        capture_file, client_ip, client_port, broker_ip, broker_port, community_id = self.endpoint_cols
        capture_file.append(self.files[number >> FILE_SHIFT] if number >= 0 else self.files[-1])
        if ep is None:
            for col in self.endpoint_cols[1:]:
                col.append(None)
            return
        client_ip.append(ep.client_ip)
        client_port.append_int(ep.client_port)
        broker_ip.append(ep.broker_ip)
        broker_port.append_int(ep.broker_port)
        community_id.append(ep.community_id)

    def _headline(self, extra: tuple | None) -> None:
        """The headline columns, from the exchange's headline values (HEADLINE_NAMES's order)."""
        if extra is None:
            for col in self.headline_cols:
                col.append(None)
            return
        i = 0
        for col in self.headline_cols:
            col.append(extra[i])
            i += 1

    def _api(self, h: RequestHeader | None) -> None:
        """The api columns, from the request's header."""
        c = self.cols
        c["api_key"].append(h.api_key if h else None)
        c["api_name"].append(API_NAMES.get(h.api_key) if h else None)
        c["api_version"].append(h.api_version if h else None)

    def _identity(self, ep: Endpoints | None, req: Request | None, resp: Response | None) -> None:
        """The endpoint and identity columns of an exchange's row (its file: its request's, else
        its response's)."""
        self._endpoints(ep, req.frame.number if req is not None else resp.frame.number if resp is not None else -1)
        api_key, api_name, api_version, correlation_id, client_id = self.identity_cols  # (_IDENTITY's order)
        h = req.header if req is not None else None
        if h is not None:
            api_key.append_int(h.api_key)
            api_name.append(API_NAMES.get(h.api_key))
            api_version.append_int(h.api_version)
            correlation_id.append_int(h.correlation_id)
            client_id.append(h.client_id)
        else:
            api_key.append(None)
            api_name.append(None)
            api_version.append(None)
            correlation_id.append(resp.correlation_id if resp else None)
            client_id.append(None)

    def _status_only(self, ep: Endpoints | None, status: str, detail: str | None) -> None:
        """A row that says something about the capture rather than an exchange, partition or record."""
        self._endpoints(ep)
        for name in self.names[len(_ENDPOINTS) :]:
            self.cols[name].append(status if name == "status" else detail if name == "detail" else None)
        self.count += 1


def _array(field: pa.Field, values: list, bad: dict[int, list[str]]) -> pa.Array:
    """The column as Arrow; a value beyond its type's range (a time outside years 1-9999, an
    int32 column given 2**31, ...) becomes null and is named in the row's detail."""
    arr, rows = arrays.checked(values, field.type)
    for row in rows:
        bad.setdefault(row, []).append(field.name)
    return arr


def frame_status(direction: str | None, req: Request | None, resp: Response | None, status: str,
                 detail: str | None) -> tuple[str, str | None]:
    """The status of one frame of an exchange (rows=messages): ``complete`` when the frame and its
    body decoded, whatever became of the exchange (its status is ``exchange_status``)."""
    if direction is None or status in (SASL_TOKEN, TLS, CAPTURE_DAMAGED, CAPTURE_CHANGED):
        return status, detail
    msg = req if direction == "request" else resp
    assert msg is not None  # a direction is given only for a frame that is there
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


_orjson = require("orjson", "orjson")
_ENCODE: Final = _orjson.dumps
_KEYS: Final = _orjson.OPT_NON_STR_KEYS


def message_json(msg: Request | Response | None) -> bytes | None:
    """A request's or response's body as JSON: the text its decoding wrote (text mode), else its value's."""
    if msg is None:
        return None
    facts = msg.facts
    if facts is not None and facts.text is not None:
        text: bytes = facts.text
        return text
    return body_json(msg.body)


def body_json(body: dict | None) -> bytes | None:
    """A body as compact JSON, UTF-8 bytes (the column builder takes them as they are). orjson: a
    fifth of the json module's time on these bodies; a float64 field holding NaN or infinity
    becomes null (the json module would write NaN, which is not JSON)."""
    return None if body is None else _ENCODE(body, option=_KEYS)
