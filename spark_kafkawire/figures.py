"""The figures the summaries count, defined once for both places that count them: ``kafkawire
summary`` over Arrow tables on one machine (:func:`mask`), and the audits over Spark DataFrames
(``audits.base.condition``).

A figure is a count of rows that meet a condition. Conditions are data, a small tree over a row's
columns, so each engine evaluates the same definition with its own operators:

* ``("eq", column, value)``, ``("ne", column, value)``, ``("gt", column, value)``,
  ``("in", column, (values...))``, ``("null", column)``, ``("notnull", column)``;
* ``("and", c, ...)``, ``("or", c, ...)``, ``("not", c)``.

Comparisons with a null are null and combine as SQL's three-valued logic (Kleene); a row whose
condition ends null is not counted, in both engines.
"""

from __future__ import annotations

from typing import Any

from .decode.status import CAPTURE_DAMAGED, DAMAGE, NO_RESPONSE
from .decode.status import REQUEST_MISSING as MISSING
from .protocol import NEGOTIATION

Condition = tuple[Any, ...]

# -- exchange rows ---------------------------------------------------------------------------------
#: an answer that is version negotiation (ApiVersions answered UNSUPPORTED_VERSION), not a failure
NEGOTIATED: Condition = ("or", *[("and", ("eq", "api_key", key), ("eq", "error_code", code))
                                 for key, code in sorted(NEGOTIATION)])
#: an errored exchange: an error code other than 0 that is not negotiation
ERRORED: Condition = ("and", ("notnull", "error_code"), ("ne", "error_code", 0), ("not", NEGOTIATED))
#: a request the capture shows unanswered
UNANSWERED: Condition = ("eq", "status", NO_RESPONSE)
#: an exchange with its response time
TIMED: Condition = ("notnull", "latency_ms")
#: an exchange the damage of the capture cut, garbled or left undecoded (not the file's own damage)
DAMAGED: Condition = ("in", "status", tuple(sorted(DAMAGE - {CAPTURE_DAMAGED})))
#: a response whose request was not captured
REQUEST_MISSING: Condition = ("eq", "status", MISSING)
#: the exchanges a summary counts: those with an api, and responses whose request is missing (under
#: NOT_CAPTURED where the response does not show its api)
SUMMARISED: Condition = ("or", ("notnull", "api_name"), REQUEST_MISSING)
NOT_CAPTURED = "(request not captured)"

#: the summary's columns per group, in order: a count of the rows meeting a condition (None: every
#: row), or (for the percentiles) the latency quantile, given only where at least ``min_latency_n``
#: exchanges were timed and rounded to 3 places
SUMMARY: list[tuple[str, Condition | None | float]] = [
    ("exchanges", None), ("errors", ERRORED), ("timed", TIMED), ("p50_ms", 0.5), ("p99_ms", 0.99),
    ("unanswered", UNANSWERED), ("negotiated", NEGOTIATED)]
#: fewer timed exchanges than this in a group: no percentile is claimed (policy min_latency_n)
MIN_LATENCY_N = 20

# -- connection rows -------------------------------------------------------------------------------
#: a connection's row (not a file's damage)
CONNECTION: Condition = ("eq", "status", "connection")
#: a TLS connection not (wholly) decrypted: bytes left undecrypted, or none decrypted
TLS_NOT_DECRYPTED: Condition = ("and", ("eq", "protocol", "tls"),
                                ("or", ("gt", "tls_undecrypted_bytes", 0), ("null", "tls_decrypted_bytes"),
                                 ("eq", "tls_decrypted_bytes", 0)))
#: the per-direction counts a capture file's health adds up, client's and broker's together
FILE_SUMS = ("bytes", "gap_bytes", "skipped_bytes", "resyncs")


def mask(cond: Condition, table) -> Any:
    """The rows of a pyarrow Table that meet ``cond``, as a boolean array without nulls."""
    import pyarrow.compute as pc

    return pc.fill_null(_arrow(cond, table, pc), False)


def _arrow(cond: Condition, table, pc) -> Any:
    op, *args = cond
    if op in ("and", "or"):
        parts = [_arrow(c, table, pc) for c in args]
        out = parts[0]
        for p in parts[1:]:
            out = pc.and_kleene(out, p) if op == "and" else pc.or_kleene(out, p)
        return out
    if op == "not":
        return pc.invert(_arrow(args[0], table, pc))
    col = table.column(args[0])
    if op == "null":
        return pc.is_null(col)
    if op == "notnull":
        return pc.is_valid(col)
    if op == "in":
        return pc.if_else(pc.is_valid(col), pc.is_in(col, value_set=_values(args[1], col.type)), None)
    return {"eq": pc.equal, "ne": pc.not_equal, "gt": pc.greater}[op](col, args[1])


def _values(values: tuple, typ) -> Any:
    import pyarrow as pa

    return pa.array(list(values), typ)


def both(row: dict, what: str) -> int:
    """A per-direction count of a connection row, the client's and the broker's added (nulls as 0)."""
    return (row.get(f"client_{what}") or 0) + (row.get(f"broker_{what}") or 0)


def quantile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (as Spark's percentile, numpy's default and
    DuckDB's quantile_cont), rounded to 3 places."""
    if not values:
        return None
    values = sorted(values)
    pos = (len(values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return round(values[lo] + (values[hi] - values[lo]) * (pos - lo), 3)
