"""Every column of every row shape, declared once: its name, its type and what it means (as Zeek
declares a log's fields). From this list come the Spark and Arrow schemas (rows/table.py), the
classes that hold a batch's columns by name (rows/held.py, generated: :func:`held_source`) and the
column tables of docs/rows.md (:func:`columns_table`). ``make columns`` (``python -m
spark_kafkawire.rows.columns``, then the compiled stages built again) writes rows/held.py and the
tables into docs/rows.md; tests/test_docs.py holds both to this list.

A shape's columns are a list of :class:`Column`; columns declared together share one meaning (the
docs show them in one row), and a column several shapes have is one object in each (the docs of the
later shapes say "as in" the first). Per-direction columns of connections are declared once and
made for each side (``client_``: sent by the client, ``broker_``: by the broker).
"""

from __future__ import annotations

from typing import NamedTuple

from ..decode.summary import DirectionSummary
from ..kafka.headline import HEADLINE_FIELDS, SESSION_FIELDS


class Column(NamedTuple):
    name: str
    type: str  # Spark SQL's name for it (the Arrow type follows from it, rows/table.py)
    meaning: str  # one line of Markdown: docs/rows.md's


def _cols(names: str, types: str, meaning: str) -> list[Column]:
    """Columns declared together: space-separated names, and one type for all or one each."""
    n, t = names.split(), types.split()
    assert len(t) in (1, len(n)), names
    return [Column(name, t[0] if len(t) == 1 else t[i], meaning) for i, name in enumerate(n)]


# -- the columns every shape begins with ---------------------------------------------------------
ENDPOINTS = _cols("capture_file", "string", "absolute path of the capture; in a rotation series read as one (see "
                  "[Rotation series](#rotation-series)), the file of the row's first byte (an exchange's: its "
                  "request's)") + \
    _cols("client_ip client_port broker_ip broker_port", "string int string int",
          "the connection's two ends (roles decided from the frames; a connection without a Kafka frame takes the "
          "lower port as the broker's)") + \
    _cols("community_id", "string", "the connection's Community ID (v1, seed 0: SHA-1 of its endpoints and "
          "protocol, as Zeek, Suricata and Arkime write it), to join their logs") + \
    _cols("connection_time", "timestamp", "UTC; the connection's first packet in the capture (its connection "
          "row's `first_time`): with the four columns before, names one connection in every row of it, across "
          "the files of a series and the reads of a stream (a client that reuses a port later opens another)")
#: the columns that say which exchange a row is of
IDENTITY = _cols("api_key api_name api_version", "smallint string smallint",
                 "from the request header; names as in Kafka (Produce, Fetch, ListOffsets, …)") + \
    _cols("correlation_id", "int", "the request header's (a response without its request: the response's)") + \
    _cols("client_id", "string", "the request header's")
API = IDENTITY[:3]

TIMES = _cols("request_time response_time", "timestamp",
              "UTC; time of the packet that carried the frame's first byte") + \
    _cols("latency_ms", "double", "response_time − request_time; null where the capture's times run backwards "
          "between them, and `detail` says so (no duration in any row is negative)")

# -- rows=exchanges --------------------------------------------------------------------------------
_TRANSFER = _cols("request_transfer_ms response_transfer_ms", "double",
                  "how long each frame took to cross the capture point: from the packet with its first byte to the "
                  "last arrival of its bytes (the packet with its last byte, or a hole's filler that came later; 0 "
                  "for a frame in one segment); null for a frame cut short, or where times run backwards")
_SPLIT = _cols(
    "network_ms", "double",
    "the network's round trip between client and broker: the connection's TCP handshake round trip (SYN to the ACK "
    "of the SYN-ACK, as `handshake_rtt_ms`), wherever the capture point sits; where the capture does not show the "
    "handshake clearly (it started mid-connection, as with connections older than the capture; a SYN or SYN-ACK "
    "sent again; a simultaneous open; the broker opened the connection), the connection's own round trips from "
    "data to ACK: the least of the client's data to the broker's ACK (the part beyond the capture point) plus the "
    "least of the broker's data to the client's ACK (the part before), each over the last 2 to 4 minutes of "
    "samples (at least 3), as TCP's windowed min-RTT filter keeps it but longer (on a request-response connection "
    "an ACK is often held for the receiver's next data or its delayed-ACK timer, and a prompt one comes seldom), "
    "leaving out by Karn's rule every ACK of bytes in flight when a copy was sent. Each exchange bounds it: the "
    "part beyond the capture point is at most the time from the request's last byte to the response's first (data "
    "answered by data), and at the client's end (the part before under a fifth of the whole) so is the whole "
    "round trip: there `network_ms` never exceeds `latency_ms`; nor where client and broker are one host (the "
    "same address, or loopback: the capture point is at both ends) or the round trip is under 50 µs, where no side "
    "is told (containers on one host). At the broker's end `latency_ms` holds no "
    "network, and `network_ms` is larger. Null where neither tells it (a TLS connection without its handshake, "
    "no data acknowledged yet)") + _cols(
    "broker_ms", "double",
    "how long the broker held the request: from the last transmission of the request's bytes (the packet that made "
    "the request whole, or a later copy of its bytes sent again because the first was lost) to the first arrival "
    "of the response's, less the part of the round trip between the capture point and the broker (the "
    "handshake's SYN to SYN-ACK as captured: all of the round trip when `capture_side` is `client`, about none "
    "when `broker`, the broker's share when `middle`); 0 at least (a round trip near the request shorter than at "
    "the handshake); null where `network_ms` is, or a frame is missing or cut, or the capture shows the response's "
    "first arrival was delayed by a loss it cannot time, and `detail` says which: the response's first segment "
    "sent again (a copy seen twice, or a hole filled by a segment the broker numbered after the one that opened "
    "it: a copy, however soon it came), or a skip in the broker's IPv4 numbering just before it that no hole "
    "explains (a one-segment "
    "response lost before the capture point shows no other sign; see [TCP health](#tcp-health)). At the client's "
    "end `latency_ms` (first byte to first byte) = `request_transfer_ms` + `network_ms` + `broker_ms`, within the "
    "round trip's variation; at the broker's end it has no network in it (`request_transfer_ms` + "
    "`broker_ms`)") + _cols(
    "network_basis", "string",
    "what `network_ms` (and `broker_ms`'s share of the round trip) rests on: `handshake`, `ack` (data-to-ACK round "
    "trips, see `network_ms`), or null where there is none") + _cols(
    "retransmissions", "int",
    "segments sent again (as `retransmitted_segments` counts them) that carried bytes of this exchange's request "
    "or response, as far as the capture showed them when the response was whole (a copy of response bytes sent "
    "after the capture had them all — at the broker's end — is counted on the connection only); null on TLS "
    "connections (frames are decrypted bytes, not TCP's)")
_STATUS = _cols("status", "string", "see [Status](#status)") + \
    _cols("detail", "string", "why, when status is not `complete`")

#: the headline columns of exchanges and messages rows, by name (their order is the values',
#: kafka/headline.py's HEADLINE_FIELDS then SESSION_FIELDS)
_HEADLINE = {c.name: c for c in _cols(
    "error_code error_name", "smallint string",
    "the response's top-level error, else its first non-zero `*ErrorCode`, else 0; Kafka's name for it "
    "(`NOT_LEADER_OR_FOLLOWER`, …)") + _cols(
    "throttle_time_ms", "int", "the response's ThrottleTimeMs") + _cols(
    "topics", "array<string>",
    "topic names the exchange touches; topic ids (Fetch v13+, Produce v13) resolved from Metadata responses "
    "earlier in the same capture, else the id") + _cols(
    "partition_count", "int", "entries of the outermost `Partition*` arrays (request, else response)") + _cols(
    "record_count record_bytes", "bigint",
    "complete record batches in Produce requests and Fetch/ShareFetch responses") + _cols(
    "acks transactional_id group_id member_id", "smallint string string string", "those request fields") + _cols(
    "client_software_name client_software_version", "string",
    "from the connection's ApiVersions v3+ request, carried onto its later exchanges") + _cols(
    "sasl_mechanism sasl_user", "string",
    "the connection's SASL login: the mechanism its SaslHandshake named and the user its token shows (PLAIN, "
    "SCRAM), carried onto its later exchanges; never the secret") + _cols(
    "client_library", "string",
    "the connection's client library as far as it has shown by this exchange: `librdkafka`, `Java`, "
    "`kafka-python`, `aiokafka`, `kafkajs`, `franz-go`, `Sarama`, …; see [Client library](#client-library)")}
assert list(_HEADLINE) == list(HEADLINE_FIELDS + SESSION_FIELDS), "the headline columns are the headline's values"
HEADLINE = list(_HEADLINE.values())

EXCHANGES = ENDPOINTS + TIMES + _TRANSFER + _SPLIT + API + _cols(
    "request_header_version response_header_version", "tinyint", "derived from api key and version") + \
    IDENTITY[3:] + _cols("request_size response_size", "int", "the frames' int32 size fields") + _STATUS + _cols(
    "request_packet response_packet", "bigint",
    "packet number (as Wireshark counts) of each frame's first byte, in its own file") + _cols(
    "response_file", "string",
    "in a rotation series, the file of the response's first byte where it is not `capture_file` (the rotation cut "
    "the exchange); else null") + _cols(
    "request response", "string", "JSON of the whole decoded body, see [Bodies](#bodies)") + HEADLINE

# -- rows=messages ---------------------------------------------------------------------------------
MESSAGES = ENDPOINTS + _cols(
    "direction", "string", "`request` or `response` (null on a row about the capture, not a frame)") + _cols(
    "time", "timestamp", "UTC; time of the packet that carried the frame's first byte") + API + _cols(
    "header_version", "tinyint", "the frame's header version, derived from api key and version") + \
    IDENTITY[3:] + _cols("size", "int", "the frame's int32 size field") + _cols(
    "status", "string",
    "this frame's own: `complete` when the frame and its body decoded (a request whose response never came, or "
    "did not fit its schema, is still `complete`), else `truncated`, `malformed`, `unknown_api`, `undecoded` or "
    "`request_missing`; `mode` applies to it") + _cols(
    "detail", "string", "why, when status is not `complete`") + _cols(
    "exchange_status", "string", "the status of the exchange the frame belongs to, as in `rows=exchanges`") + _cols(
    "packet", "bigint", "packet number (as Wireshark counts) of the frame's first byte, in its own file") + _cols(
    "body", "string", "the frame's body as JSON, see [Bodies](#bodies)") + HEADLINE

# -- rows=partitions -------------------------------------------------------------------------------
PARTITIONS = ENDPOINTS + TIMES + API + IDENTITY[3:] + _STATUS + _cols(
    "topic partition", "string int", "topic ids resolved as in `topics`") + _cols(
    "error_code error_name", "smallint string", "the partition's error in the response") + _cols(
    "offset", "bigint",
    "Produce: BaseOffset the broker appended at; Fetch: FetchOffset asked for; OffsetCommit/TxnOffsetCommit: "
    "CommittedOffset sent; OffsetFetch: CommittedOffset returned; ListOffsets: Offset found; DeleteRecords: Offset "
    "to delete before; OffsetForLeaderEpoch: EndOffset") + _cols(
    "high_watermark last_stable_offset log_start_offset", "bigint",
    "Fetch (and Produce's log start offset)") + _cols(
    "timestamp_ms", "bigint", "ListOffsets' Timestamp, Produce's LogAppendTimeMs") + _cols(
    "record_count record_bytes", "bigint",
    "complete batches of the partition (Produce request, Fetch/ShareFetch response)") + \
    [_HEADLINE["group_id"], _HEADLINE["transactional_id"]]

# -- rows=records ----------------------------------------------------------------------------------
_FORMAT = (
    "the wire format of the key (value): `confluent-avro`, `confluent-protobuf`, `confluent-json` (Confluent's "
    "schema-registry framing, magic byte 0 and a 4-byte schema id, with the schema type told: by the registry's own "
    "record of that id where the capture holds its `_schemas` topic (a record of at most 64 KiB whose `schemaType` "
    "is one of the registry's type names; any other JSON is passed over), else `-json` where the rest is a JSON "
    "document and `-protobuf` where it is message indexes and a whole Protocol Buffers message; Avro has no marker "
    "of its own, so an Avro value whose registry record is not in the capture is plain `confluent`), `confluent` "
    "(the framing, type not told), `apicurio` (magic 0 and an 8-byte global id, whose first four bytes are zero, "
    "which no Confluent id is), `json` (a JSON object or array: parsed whole up to 64 KiB; a longer one is told by "
    "a bounded look, never parsed: its first 64 KiB are JSON tokens in UTF-8 and it ends with the bracket closing "
    "its first, so a value inflating to megabytes of `[{},{},...]` costs its bytes, not millions of objects), "
    "`utf8` (other UTF-8 text), `binary`; null for a null key (value)")
RECORDS = ENDPOINTS + _cols(
    "time direction", "timestamp string",
    "the frame that carried the record: `request` (Produce) or `response` (Fetch)") + IDENTITY + _cols(
    "topic partition offset", "string int bigint",
    "offsets as the frame states them (in Produce requests, relative to the batch)") + _cols(
    "log_offset", "bigint",
    "the record's offset in the partition's log: in a Fetch response, its offset; in a Produce request, the "
    "BaseOffset the response says the partition's records were appended at plus the record's place among them (as "
    "the broker assigns offsets); null where the produce failed, has no response (acks=0) or a batch before it "
    "could not be read. (topic, partition, log_offset) joins a record produced with the same record fetched") + \
    _cols("timestamp timestamp_type", "timestamp string", "CreateTime or LogAppendTime") + _cols(
    "key value", "binary", "payload: null without `includeRecords`") + _cols(
    "headers", "array<struct<key:string,value:binary>>", "magic 2 only; payload: null without `includeRecords`") + \
    _cols("key_format", "string", _FORMAT) + _cols(
    "key_schema_id", "bigint", "the registry's schema id (Confluent) or global id (Apicurio)") + _cols(
    "value_format", "string", _FORMAT) + _cols(
    "value_schema_id", "bigint", "the registry's schema id (Confluent) or global id (Apicurio)") + _cols(
    "trace_id span_id trace_format", "string",
    "the trace context in the record's headers, as the tracers write it: `w3c` (`traceparent`), `b3` (single `b3` "
    "header), `b3multi` (`X-B3-TraceId` and `X-B3-SpanId`), `jaeger` (`uber-trace-id`, ids padded to 16 or 32 hex "
    "digits) or `sw8` (SkyWalking: its trace id; the span id is the segment id, a dot and the span number); the "
    "first kind present in that order, the last of repeated headers; ids in lowercase hex. A malformed header (not "
    "ASCII, wrong lengths, not hex, version ff, all-zero ids) gives nulls and says why in `detail`") + _cols(
    "producer_id producer_epoch sequence transactional", "bigint smallint int boolean",
    "magic 2 only; `sequence` is the batch's base sequence plus the record's offset delta, wrapping to 0 after "
    "2147483647 as Kafka does") + _cols(
    "control_type", "string", "control records: COMMIT, ABORT, LEADER_CHANGE, …") + _cols(
    "codec magic batch_offset", "string tinyint bigint", "the batch the record came from") + _cols(
    "status detail", "string",
    "`ok`; or, as one row for the whole batch: `truncated` (cut at the end of a Fetch or of the capture), "
    "`crc_mismatch`, `over_cap` (past `maxDecompressedBytes`, or the rest of a batch past `maxRecordsPerBatch`), "
    "`corrupt` (does not decompress or parse). On an `ok` row, `detail` names a malformed trace header or a key or "
    "value with magic byte 0 too short for a schema id")

# -- rows=connections ------------------------------------------------------------------------------
#: what each direction of a connection sent, counted (decode/summary.py's DirectionSummary has
#: exactly these fields, in this order); made for each side
DIRECTION = _cols(
    "bytes", "bigint",
    "distinct TCP payload bytes captured, counted by the TCP stage from sequence numbers: every byte once, however "
    "many copies") + _cols(
    "frames frame_bytes", "bigint", "complete frames, and their bytes (size fields included)") + _cols(
    "partial_frames partial_bytes", "bigint", "frames cut by a gap or the end, and their bytes") + _cols(
    "skipped_bytes", "bigint",
    "bytes in no frame: before the first boundary found, after a gap until the next, TLS or other protocols") + \
    _cols("gap_bytes gaps", "bigint", "what the capture lost (holes, snaplen cuts): bytes, and how many times") + \
    _cols("resyncs", "bigint", "frame boundaries found by scanning rather than at a captured stream start") + _cols(
    "retransmitted_segments retransmitted_bytes", "bigint",
    "segments with payload sent again: every whole copy of bytes the capture already showed, whenever it comes, "
    "and a segment that fills a hole late (more than a round trip after the later data, not yet acknowledged: its "
    "first copy was lost before the capture point) or as a fast retransmission; a keep-alive not counted; see [TCP "
    "health](#tcp-health)") + _cols(
    "data_segments", "bigint",
    "segments with payload the capture saw from the side (copies included, keep-alives not): what "
    "`lost_segments` is a share of") + _cols(
    "out_of_order", "bigint",
    "segments with payload that filled a hole (bytes a later segment had skipped) within a round trip of that "
    "later segment, or whose bytes the receiver had already acknowledged (the capture saw it after the receiver "
    "had it): overtaken on the way; apart from `retransmitted_segments`. Where tshark differs: it calls a copy "
    "that comes after later data out of order (here: sent again, the capture shows it twice) and a late segment "
    "already acknowledged a spurious retransmission (here: out of order, the capture shows it once)") + _cols(
    "lost_segments lost_bytes", "bigint",
    "segments the capture shows were lost on the path, on either side of the capture point. Beyond it: a copy of "
    "bytes already seen whose first copy the receiver had not acknowledged (the sender sent it again), taken back "
    "when the receiver reports the bytes received twice (a D-SACK block: the ACK was lost, not the data). Before "
    "it: skips in the sender's IPv4 numbering, where that numbering steps by one per packet (Linux and the BSDs "
    "number each connection's packets so; trusted after 8 steps, 80% of them by one), which also shows a "
    "one-segment message lost whole; else (IPv6, other numberings) a segment that filled a hole late or as a fast "
    "retransmission, which shows only where later data came first. A spurious copy (its bytes already "
    "acknowledged) and a segment only out of order are not lost. `lost_bytes` counts the bytes of the segments "
    "whose bytes the capture shows (not of a packet known only by its number). A packet the capture itself "
    "dropped also skips a number; what the capture lost shows in `gap_bytes`") + _cols(
    "zero_windows", "bigint",
    "segments advertising a zero window (none of SYN, FIN, RST set; tshark's `tcp.analysis.zero_window`): "
    "`client_`: the client could not take more (a consumer that cannot keep up); `broker_`: the broker could not "
    "(overloaded)") + _cols(
    "zero_window_ms", "double",
    "time spent at zero window: from each run's first zero-window segment to the same side's next segment "
    "advertising a window, or the connection's last packet; a run whose next segment is timed before it (times "
    "running backwards) adds nothing") + _cols(
    "rtt_min_ms rtt_p50_ms", "double",
    "round trips from that side's data segments to the other side's ACKs of them, as the capture point sees them "
    "(tshark's `tcp.analysis.ack_rtt`: an ACK acknowledging exactly a data segment's end, the first copy not yet "
    "acknowledged): least and median (the lower of the middle two); `client_rtt_*` is the capture point to the "
    "broker and back (plus the broker's delayed ACK), `broker_rtt_*` the capture point to the client and back. "
    "Null without a sample. Up to 65,536 samples per direction; past that every other one, evenly through the "
    "connection")
#: the counts that add up over a connection's rows (carry.py: each row counts its part); the rest
#: (round trips) are of the connection so far
ADDING = [c.name for c in DIRECTION if not c.name.startswith("rtt_")]
#: a TLS connection's bytes per direction (tls/session.py's TlsCounts): every captured byte in one of the first three
TLS_DIRECTION = _cols(
    "tls_read_bytes tls_undecrypted_bytes tls_other_bytes", "bigint",
    "TLS connections, every captured byte once: `tls_read_bytes` (records read: in clear, or decrypted; headers "
    "and protection included) + `tls_undecrypted_bytes` (protected records not decrypted, and the captured part "
    "of a record a gap or the end cut) + `tls_other_bytes` (in no record read: passed over while finding a record "
    "boundary after damage or a gap, before the connection was known to be TLS, late copies) = `bytes`") + _cols(
    "tls_gap_bytes", "bigint", "TLS connections: bytes the capture lost (never counted as undecrypted)")
assert [c.name for c in DIRECTION + TLS_DIRECTION] == list(DirectionSummary._fields), \
    "the per-direction columns are the summary's fields"
SIDES = ("client", "broker")


def per_side(columns: list[Column]) -> list[Column]:
    """The columns for each side, client's first: ``client_<name>``, ``broker_<name>``."""
    return [Column(f"{side}_{c.name}", c.type, c.meaning) for side in SIDES for c in columns]


_COUNTS_END = [c.name for c in DIRECTION].index("data_segments")  # the byte accounting, then the TCP health
CONNECTIONS = ENDPOINTS + _cols(
    "first_time last_time first_packet", "timestamp timestamp bigint",
    "the connection's first and last packet's times, and its first packet's number in its file") + _cols(
    "start_captured", "boolean", "the SYN is in the capture") + _cols(
    "end_captured", "string",
    "`fin` (both sides), `half_closed`, `rst`, `open` (still open when the capture ends), or `evicted` (retired to "
    "stay within `maxConnections`)") + _cols(
    "handshake_rtt_ms", "double",
    "the TCP handshake's round trip: SYN to the ACK of the SYN-ACK (tshark's `tcp.analysis.initial_rtt`); null "
    "where the capture does not show it whole or shows it unclearly (a SYN or SYN-ACK sent again, a simultaneous "
    "open)") + _cols(
    "capture_side", "string",
    "where the capture point sits, from the handshake: `client` (the SYN-ACK came a round trip after the SYN, the "
    "ACK at once: captured at the client's end), `broker` (the other way round) or `middle` (neither side's share "
    "of the round trip below 20%); where the handshake was not captured, from the connection's own data-to-ACK "
    "round trips by the same rule (the broker's data to the client's ACK is the part on the client's side), where "
    "they add up to 1 ms or more (an ACK may wait some tens of µs for its receiver); null where neither tells it, "
    "or under 50 µs (both ends seen from one host, as on loopback)") + _cols(
    "client_resets broker_resets", "int",
    "1 on the side whose RST ended the connection (who reset it), else 0; an RST after the end is a late copy, not "
    "counted") + _cols(
    "protocol", "string",
    "`kafka` (frames found), `tls` (TLS records), `unknown` (neither: HTTP, random bytes, or no payload)") + _cols(
    "detail", "string",
    "on a TLS connection's row, what its TLS says (as the `tls` row's detail); on a `capture_damaged` row, where "
    "the damage starts; else null") + _cols(
    "client_fingerprint", "string",
    "how the connection spoke Kafka, in the spirit of JA4: `kw2_a<version of its ApiVersions request, or ->_<12 "
    "hex>_<12 hex>`, the first hex from a SHA-256 of the sorted (api key, version) pairs it sent (their header "
    "versions and flexible encodings follow from them), the second of the sorted traits its requests showed "
    "(`000000000000` where none): field values such as Produce's acks and timeout, a batch's producer id, epoch "
    "and sequence, Fetch's wait, sizes, isolation level and session, the assignors a consumer offers, in their "
    "order; see [Client library](#client-library). Connections that spoke alike have one fingerprint whatever "
    "their client ids say; a connection picked up mid-stream has the fingerprint of what it showed; null for a "
    "connection that sent no request") + _cols(
    "client_library", "string", "see [Client library](#client-library)") + \
    per_side(DIRECTION[:_COUNTS_END]) + per_side(DIRECTION[_COUNTS_END:]) + _cols(
    "tls_version", "string",
    "TLS connections: the version the two sides agreed on (ServerHello's supported_versions for TLS 1.3, not the "
    "record layer's)") + _cols(
    "tls_cipher", "string", "the cipher suite chosen, by its IANA name") + _cols(
    "tls_server_name", "string", "the server name (SNI) the client asked for") + _cols(
    "tls_alpn", "string", "the application protocols offered (or the one chosen), comma-separated") + _cols(
    "tls_ja3", "string",
    "the client's JA3 fingerprint (MD5 of its ClientHello's version, suites, extensions, groups and point formats, "
    "GREASE left out): it names a TLS stack (a JVM's, OpenSSL's), not one client") + _cols(
    "tls_ja4", "string",
    "the client's JA4 fingerprint (FoxIO's: `t`, version, SNI or not, counts of suites and extensions, the first "
    "ALPN's first and last characters; then truncated SHA-256 of the suites sorted and of the extensions sorted "
    "with the signature algorithms): unlike JA3 it stays the same when a client shuffles its extensions. After a "
    "HelloRetryRequest, the second ClientHello's") + _cols(
    "tls_cert_subject tls_cert_issuer tls_cert_not_after", "string",
    "the server certificate's subject and issuer (RFC 4514) and expiry date: in clear in TLS 1.2, from the "
    "decrypted handshake in TLS 1.3") + _cols(
    "tls_decrypted_bytes", "bigint", "application bytes decrypted and handed to framing") + _cols(
    "tls_undecrypted_bytes", "bigint",
    "captured bytes of the connection not read (the sum of both directions' `tls_undecrypted_bytes` and "
    "`tls_other_bytes`; the `tls` row's detail says why)") + per_side(TLS_DIRECTION) + _cols(
    "status", "string", "`connection` (or `capture_damaged` for a damaged file's row)")

#: every row shape (option ``rows``) and its columns, in order
SHAPES: dict[str, list[Column]] = {"exchanges": EXCHANGES, "messages": MESSAGES, "partitions": PARTITIONS,
                                   "records": RECORDS, "connections": CONNECTIONS}
for _shape, _columns in SHAPES.items():
    _names = [c.name for c in _columns]
    assert len(set(_names)) == len(_names), f"rows={_shape}: a column declared twice"


# -- what is made from the declarations ----------------------------------------------------------
def columns_table(shape: str) -> str:
    """The shape's columns as a Markdown table (docs/rows.md's): columns declared together in one
    line (the sides of a per-direction column too); columns of an earlier shape say so."""
    lines: list[tuple[list[Column], str]] = []  # (columns, meaning), in the order of their first column
    by_key: dict[object, int] = {}
    earlier = list(SHAPES)[: list(SHAPES).index(shape)]
    for c in SHAPES[shape]:
        origin = next((s for s in earlier if any(c is d for d in SHAPES[s])), None)
        key: object = ("as in", origin) if origin else c.meaning
        meaning = f"as in `rows={origin}`" if origin else c.meaning
        if key in by_key:
            lines[by_key[key]][0].append(c)
        else:
            by_key[key] = len(lines)
            lines.append(([c], meaning))
    out = ["| column | type | |", "|---|---|---|"]
    for cols, meaning in lines:
        types = [c.type for c in cols]
        shown = "" if meaning.startswith("as in") else types[0] if len(set(types)) == 1 else ", ".join(types)
        out.append(f"| {', '.join(c.name for c in cols)} | {shown} | {meaning} |")
    return "\n".join(out)


_HELD_BASES = {"Endpoints": ENDPOINTS, "Identity": ENDPOINTS + IDENTITY}


def held_source() -> str:
    """rows/held.py: for each shape a class holding its columns of one batch as attributes named
    as the columns (resolved by name once per batch; compiled, an attribute read is a field read)."""
    out = ['"""The columns of one batch of each row shape, held by name (generated from rows/columns.py by',
           '``python -m spark_kafkawire.rows.columns``: do not edit)."""', "", "from __future__ import annotations",
           "", "from ..arrays import ColumnBuffer", ""]

    def cls(name: str, base: str | None, columns: list[Column], inherited: set[str]) -> None:
        out.extend(["", f"class {name}Columns{f'({base}Columns)' if base else ''}:",
                    "    def __init__(self, cols: dict[str, ColumnBuffer]) -> None:"])
        if base:
            out.append("        super().__init__(cols)")
        for c in columns:
            if c.name not in inherited:
                out.append(f'        self.{c.name} = cols["{c.name}"]')
        out.append("")

    cls("Endpoints", None, ENDPOINTS, set())
    cls("Identity", "Endpoints", ENDPOINTS + IDENTITY, {c.name for c in ENDPOINTS})
    for shape, columns in SHAPES.items():
        names = {c.name for c in columns}
        base = "Identity" if all(c.name in names for c in IDENTITY) else "Endpoints"
        cls(shape.capitalize(), base, columns, {c.name for c in _HELD_BASES[base]})
    return "\n".join(out).rstrip("\n") + "\n"


def docs_with_tables(text: str) -> str:
    """docs/rows.md with each shape's table (between its markers) made again."""
    import re

    return re.sub(r"(<!-- columns of rows=(\w+) -->\n)(.*?)(\n<!-- end -->)",
                  lambda m: m.group(1) + columns_table(m.group(2)) + m.group(4), text, flags=re.S)


def main() -> int:
    """Write rows/held.py and docs/rows.md's tables (the checkout's: run from it)."""
    from pathlib import Path

    held, rows_md = Path(__file__).with_name("held.py"), Path(__file__).resolve().parents[2] / "docs" / "rows.md"
    held.write_text(held_source())
    rows_md.write_text(docs_with_tables(rows_md.read_text()))
    print(f"wrote {held} and the column tables of {rows_md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
