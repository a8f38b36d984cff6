"""Exchanges -> Arrow record batches: the row shapes' schemas and what all their builders share.

Each row shape (option ``rows``) has its columns declared once in :mod:`.columns`: from them come
the Spark schema (DDL) and the Arrow schema here. A builder (one per shape, see :mod:`.shapes`)
appends to each column (compiled, a typed column writing Arrow's buffers; as Python, a list),
holding a batch's columns by name (:mod:`.held`); :class:`RowBuilder` turns them into a
``pyarrow.RecordBatch`` of exactly that schema.
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
from ..wire.frames import Frame
from ..wire.lane import RowCounts
from ..wire.series import FILE_SHIFT
from .columns import ENDPOINTS, HEADLINE, SHAPES
from .held import EndpointsColumns, IdentityColumns

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

#: each shape's (name, type) of its columns, from their declarations (rows/columns.py)
COLUMNS: dict[str, list[tuple[str, str]]] = {shape: [(c.name, c.type) for c in cols] for shape, cols in SHAPES.items()}
#: the headline columns of exchanges and messages rows, in the order of the headline's values
HEADLINE_NAMES: Final = [c.name for c in HEADLINE]
_N_ENDPOINTS: Final = len(ENDPOINTS)  # every shape begins with them
API_NAMES: Final = protocol.API_NAMES
ROW_SHAPES: Final = tuple(COLUMNS)
MAX_TIMESTAMP_MS: Final = 253402300800000  # 10000-01-01: later record timestamps are not dates
#: rows into typed columns (arrays.ColumnBuffer) where this module runs compiled, else into lists
TYPED: Final = native


@mypyc_attr(native_class=False)
class Values(list):
    """A column where this module runs as Python: a list (its append is the cheapest there) whose
    ``append_int`` is its ``append``, as the rows call an arrays.ColumnBuffer's."""

    __slots__ = ()
    append_int = list.append

    def repeat_last(self, n: int) -> None:
        self.extend([self[-1]] * n)


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
        self.limit = 1  # the rows fill takes (a step of the backlog may make several, up to this)
        self.payload = False  # rows=records: keys, values and headers shown (option includeRecords)
        self.schema_types: dict[int, str] = {}  # rows=records: schema id -> format, from a registry's records
        self._reset()

    def _reset(self) -> None:
        # compiled, each column is typed (arrays.ColumnBuffer: values written into Arrow's buffers as
        # they come); interpreted, a list (its append is the cheapest there), made an array at flush
        self.cols: dict[str, arrays.ColumnBuffer] = {f.name: arrays.column(f.type) for f in self.schema} if TYPED else \
            {n: cast(arrays.ColumnBuffer, Values()) for n in self.names}
        # the headline columns in the order of the headline's values, where the shape has them
        self.headline_cols = self._held(HEADLINE_NAMES)
        self.count = 0

    def _held(self, names: list[str] | tuple[str, ...]) -> list[arrays.ColumnBuffer]:
        """The columns of these names, in this order, where the shape has them all (else none)."""
        return [self.cols[n] for n in names] if all(n in self.cols for n in names) else []

    def __len__(self) -> int:
        return self.count

    def fill(self, limit: int) -> None:
        """Make rows from the backlog until ``limit`` rows are held or the backlog is empty."""
        self.limit = limit
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
    def _endpoints(self, k: EndpointsColumns, ep: Endpoints | None, number: int = -1) -> None:
        """The endpoint columns; capture_file is the file of packet ``number`` (-1: of the file
        being read)."""
        k.capture_file.append(self.files[number >> FILE_SHIFT] if number >= 0 else self.files[-1])
        if ep is None:
            for col in (k.client_ip, k.client_port, k.broker_ip, k.broker_port, k.community_id, k.connection_time):
                col.append(None)
            return
        k.client_ip.append(ep.client_ip)
        k.client_port.append_int(ep.client_port)
        k.broker_ip.append(ep.broker_ip)
        k.broker_port.append_int(ep.broker_port)
        k.community_id.append(ep.community_id)
        k.connection_time.append(ep.first_ns)

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

    def _identity(self, k: IdentityColumns, ep: Endpoints | None, req: Request | None, resp: Response | None,
                  number: int = -1) -> None:
        """The endpoint and identity columns of an exchange's row (its file: packet ``number``'s,
        else its request's, else its response's)."""
        if number < 0:
            number = req.frame.number if req is not None else resp.frame.number if resp is not None else -1
        self._endpoints(k, ep, number)
        h = req.header if req is not None else None
        if h is not None:
            k.api_key.append_int(h.api_key)
            k.api_name.append(API_NAMES.get(h.api_key))
            k.api_version.append_int(h.api_version)
            k.correlation_id.append_int(h.correlation_id)
            k.client_id.append(h.client_id)
        else:
            k.api_key.append(None)
            k.api_name.append(None)
            k.api_version.append(None)
            k.correlation_id.append(resp.correlation_id if resp is not None else None)
            k.client_id.append(None)

    def _status_only(self, ep: Endpoints | None, status: str, detail: str | None) -> None:
        """A row that says something about the capture rather than an exchange, partition or record."""
        self._endpoints(EndpointsColumns(self.cols), ep)
        for name in self.names[_N_ENDPOINTS:]:
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


def first_frame(req: Request | None, resp: Response | None) -> Frame | None:
    return req.frame if req is not None else resp.frame if resp is not None else None


def noted(detail: str | None, note: str | None) -> str | None:
    """A row's detail with a note added (after a "; "), where there is one."""
    if not note:
        return detail
    return f"{detail}; {note}" if detail else note
