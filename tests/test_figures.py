"""The figures both summaries count (spark_kafkawire/figures.py), evaluated over Arrow the way
``kafkawire summary`` does, against the rules as the protocol states them: ApiVersions answered
UNSUPPORTED_VERSION (error 35, KIP-511) is negotiation, not an error; a null error code is no error;
a null latency is not timed; the file's own damage is not an exchange's. (The same definitions over
Spark, against the command line's: tests/test_audits.py.)"""

import pyarrow as pa

from spark_kafkawire import figures

API_VERSIONS, PRODUCE, FETCH = 18, 0, 1
UNSUPPORTED_VERSION, NOT_LEADER = 35, 6

#: (api_key, error_code, status, latency_ms, api_name) -> (errored, negotiated, timed, unanswered, damaged, counted)
CASES = [
    ((API_VERSIONS, UNSUPPORTED_VERSION, "complete", 0.2, "ApiVersions"), (False, True, True, False, False, True)),
    ((API_VERSIONS, 0, "complete", 0.2, "ApiVersions"), (False, False, True, False, False, True)),
    ((PRODUCE, UNSUPPORTED_VERSION, "complete", 1.0, "Produce"), (True, False, True, False, False, True)),
    ((FETCH, NOT_LEADER, "complete", 3.0, "Fetch"), (True, False, True, False, False, True)),
    ((FETCH, None, "no_response", None, "Fetch"), (False, False, False, True, False, True)),
    ((PRODUCE, None, "truncated", None, "Produce"), (False, False, False, False, True, True)),
    ((None, None, "malformed", None, None), (False, False, False, False, True, False)),
    ((None, None, "undecoded", None, None), (False, False, False, False, True, False)),
    ((None, None, "capture_damaged", None, None), (False, False, False, False, False, False)),
    ((None, 0, "request_missing", None, None), (False, False, False, False, False, True)),
    ((None, NOT_LEADER, "request_missing", None, "Fetch"), (True, False, False, False, False, True)),
]


def test_exchange_figures_follow_the_protocol_rules():
    table = pa.table({name: [c[0][i] for c in CASES] for i, name in
                      enumerate(("api_key", "error_code", "status", "latency_ms", "api_name"))},
                     schema=pa.schema([("api_key", pa.int16()), ("error_code", pa.int16()), ("status", pa.string()),
                                       ("latency_ms", pa.float64()), ("api_name", pa.string())]))
    got = [figures.mask(c, table).to_pylist() for c in (figures.ERRORED, figures.NEGOTIATED, figures.TIMED,
                                                         figures.UNANSWERED, figures.DAMAGED, figures.SUMMARISED)]
    for i, (row, want) in enumerate(CASES):
        assert tuple(g[i] for g in got) == want, row


def test_tls_not_decrypted_and_connection_rows():
    table = pa.table({"status": ["connection", "connection", "connection", "connection", "capture_damaged"],
                      "protocol": ["tls", "tls", "tls", "kafka", None],
                      "tls_undecrypted_bytes": [0, 1200, None, None, None],
                      "tls_decrypted_bytes": [5000, 800, None, None, None]})
    assert figures.mask(figures.TLS_NOT_DECRYPTED, table).to_pylist() == [False, True, True, False, False]
    assert figures.mask(figures.CONNECTION, table).to_pylist() == [True, True, True, True, False]


def test_quantile_interpolates_between_ranks():
    # numpy's default ("linear"): position (n - 1) * q between the sorted values
    assert figures.quantile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert figures.quantile([1.0, 2.0, 3.0, 4.0, 100.0], 0.99) == round(4 + 96 * 0.96, 3)
    assert figures.quantile([], 0.5) is None
    assert figures.both({"client_bytes": 3, "broker_bytes": None}, "bytes") == 3
