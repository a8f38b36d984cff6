"""What every audit shares: the rows it reads (:class:`Rows`), the policy it is judged by
(:class:`Policy`), the verdicts it gives (:class:`Verdict`), its description (:class:`Audit`), and
the columns several audits derive the same way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from .. import figures, protocol
from ..protocol import GROUP_ID_APIS, KEY

#: the columns of Rows.skipped (and of capture_health.skipped_files)
SKIPPED_FILES = "capture_date date, capture_file string, why string"
#: one audit's results as the job collects them: table name -> rows (as dicts)
Tables = dict[str, list[dict]]
#: every audit's: audit name -> its Tables
Results = dict[str, Tables]


@dataclass
class Rows:
    """The rows of one set of captures, in the shapes the audits read."""

    exchanges: DataFrame
    connections: DataFrame
    partitions: DataFrame
    #: record rows without payload (their formats, schema ids, trace context, log offsets): the
    #: schemas and delivery audits read them; None where they were not read (those audits then fail)
    records: DataFrame | None = None
    #: the files the listing passed over (capture_date, capture_file, why: not a regular file, or a
    #: name no pathGlobFilter pattern matches): capture_health names them; None where not known
    skipped: DataFrame | None = None

    @classmethod
    def load(cls, spark: SparkSession, paths: list[str], options: dict | None = None) -> "Rows":
        def shape(rows: str) -> DataFrame:
            opts = {k: v for k, v in (options or {}).items() if k.lower() != "includerecords"}  # never payload
            return spark.read.format("kafkawire").options(**opts).option("rows", rows).load(paths)

        return cls(shape("exchanges"), shape("connections"), shape("partitions"), shape("records"))

    def record_rows(self) -> DataFrame:
        """The record rows, for the audits that read them; an error naming what is missing if not read."""
        if self.records is None:
            raise ValueError("this audit reads record rows: Rows(exchanges, connections, partitions, records) "
                             "(Rows.load and jobs/audit.py read them)")
        return self.records


@dataclass
class Policy:
    """What a run must find for exit status 0 (``jobs/audit.py`` exits 2 when one fails), and the
    thresholds the audits judge by. A bound left at None is not judged."""

    target_release: str = "4.0"  # no client may send a version this release rejects
    max_error_rate: float | None = None  # errored exchanges / exchanges, overall
    max_p99_ms: dict[str, float] = field(default_factory=dict)  # api_name -> p99 bound (where n >= min_n)
    min_latency_n: int = figures.MIN_LATENCY_N  # fewer exchanges than this: no percentile is claimed
    allow_plain_without_tls: bool = False  # SASL PLAIN on a connection that is not TLS
    allow_weak_tls: bool = False  # TLS 1.0/1.1 (or SSL), or a suite without AEAD (CBC, RC4, 3DES)
    min_certificate_days: int = 30  # a server certificate must be valid this many days from the run
    max_gap_fraction: float | None = None  # bytes lost by the capture / bytes captured, overall
    max_throttled_share: float | None = None  # quotas: a client's throttled answers / its answers with a throttle time
    max_retransmission_rate: float | None = None  # network: bytes sent again / bytes, per listener
    max_broker_p99_ms: float | None = None  # network: an API's broker p99 per listener (Fetch: beyond MaxWaitMs)
    require_consistent_schemas: bool = False  # schemas: each topic in one wire format, registry ids on all or none
    max_delivery_p99_ms: float | None = None  # delivery: a topic's produce-to-fetch p99 (where n >= min_latency_n)
    # lineage
    require_readers: bool = False  # every topic produced to must be fetched by some consumer
    # consumer lag
    max_lag_records: int | None = None  # no consumer may be more records than this behind
    max_lag_seconds: float | None = None  # ... or more seconds behind (where the capture shows the append)
    # client hygiene: the thresholds of the findings, and which findings fail the run
    hygiene_min_requests: int = 20  # fewer Produce (Fetch) requests than this: no batch (fetch) finding
    min_records_per_request: float = 2.0  # small_batches below this many records per Produce request
    max_uncompressed_bytes_per_minute: int = 65536  # uncompressed record bytes a producer sends in a minute
    max_metadata_per_minute: int = 60  # Metadata requests of one client in a minute (default refresh: 5 min)
    max_connections_per_minute: int = 10  # connections one client opens in a minute
    max_commits_per_minute: int = 60  # OffsetCommit requests of one client in a minute
    max_empty_fetch_fraction: float = 0.9  # empty_fetches: more of the Fetch responses than this empty ...
    min_fetch_wait_ms: int = 100  # ... while the consumer waits less than this (fetch.max.wait.ms)
    max_request_size: int = 1048576  # the producers' max.request.size (Kafka's default)
    request_size_fraction: float = 0.9  # large_requests: a Produce request past this share of it
    hygiene_fail_on: list[str] = field(default_factory=list)  # findings that fail the run (default: advice)
    # history: judged against the earlier runs the job's history holds
    max_broker_p99_growth: float | None = None  # an API's broker p99 per listener over its median of the last runs
    min_history_runs: int = 3  # fewer earlier runs with an API and listener than this: that one is not judged
    # evidence: a verdict is ok only on enough of it (else inconclusive, exit status 3)
    min_exchanges: int = 1  # fewer decoded Kafka exchanges than this in all: no verdict holds
    max_undecoded_fraction: float = 0.01  # a Kafka listener with more of its bytes not decoded hides what is checked


def policy_help() -> dict[str, tuple[str, str]]:
    """Each policy's (type, meaning), read from Policy's own declaration (its field and the comment
    beside it): the job's flags and help are made from it."""
    import inspect
    import re as _re

    out: dict[str, tuple[str, str]] = {}
    for line in inspect.getsource(Policy).splitlines():
        m = _re.match(r"\s{4}(\w+): ([^=]+?) = .*?(?:#\s*(.*))?$", line)
        if m:
            out[m.group(1)] = (m.group(2).strip(), (m.group(3) or "").strip())
    return out


def check_policy(p: Policy, source: str | None = None) -> None:
    """Every policy of ``p`` of its type and in its range, else ValueError in one line naming it and
    the value: ``source`` (a config file) and ``name = value``, or, without one, the flag
    (``--max-error-rate 5.0``). Rates, fractions and shares from 0 to 1, counts, sizes and times 0 or
    more, switches true or false."""
    from dataclasses import fields

    for f in fields(p):
        v, kind, name = getattr(p, f.name), str(f.type), f.name
        said = f"{source}: {name} = {v!r}" if source else f"--{name.replace('_', '-')} {v!r}"
        if kind == "bool":
            if not isinstance(v, bool):
                raise ValueError(f"{said}: want true or false")
        elif kind.startswith(("int", "float")):
            if v is None and "None" in kind:
                continue
            number = isinstance(v, (int, float)) and not isinstance(v, bool) and \
                (kind.startswith("float") or isinstance(v, int)) and v == v  # (NaN is no number)
            if not number:
                raise ValueError(f"{said}: want {'a whole number' if kind.startswith('int') else 'a number'}")
            if name.endswith(("_fraction", "_rate", "_share")) and not 0 <= v <= 1:
                raise ValueError(f"{said}: want a fraction from 0 to 1 (e.g. 0.01 for 1%)")
            if v < 0:
                raise ValueError(f"{said}: want 0 or more")
            if name.endswith("_growth") and v < 1:
                raise ValueError(f"{said}: want a factor of 1 or more (e.g. 2 for twice the recent median)")
        elif name == "max_p99_ms":
            if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(ms, (int, float))
                                                  and not isinstance(ms, bool) and ms >= 0 for k, ms in v.items()):
                raise ValueError(f"{said}: want API names and milliseconds of 0 or more, e.g. {{\"Produce\": 500}}")
        elif kind == "str" and not isinstance(v, str):
            raise ValueError(f"{said}: want a string")


#: what a verdict needs to have seen to hold (see audits.judge): ``decoded`` the Kafka exchanges on
#: every listener (undecoded bytes anywhere could hide a failure); ``plaintext`` only the plaintext
#: ones (a TLS connection cannot carry a login in clear); ``handshakes`` the TLS handshakes (in
#: clear); ``certificates`` the server certificates (TLS 1.3 shows them only decrypted);
#: ``capture`` the capture itself
NEEDS = ("decoded", "plaintext", "handshakes", "certificates", "capture")


@dataclass
class Verdict:
    """One policy judged: its name, whether it holds (True), fails (False) or could not be judged on
    the evidence (None: inconclusive), what was found, and what it needs to have seen (NEEDS)."""

    name: str
    ok: bool | None
    detail: str
    needs: str = "decoded"
    #: False: the policy has nothing to judge in these captures (no TLS seen for a TLS policy): it
    #: holds, said as "not applicable", never as a green "ok ... none seen"
    applies: bool = True

    @property
    def status(self) -> str:
        if self.ok and not self.applies:
            return "n/a"
        return "ok" if self.ok else "FAIL" if self.ok is False else "inconclusive"


@dataclass(frozen=True)
class Audit:
    """One audit, whole: the one description the job, the report and the docs take it from.

    ``run`` makes its tables from the rows (``{table name: DataFrame}``, each with a
    ``capture_date`` column); ``intro`` is the paragraph the report opens its section with;
    ``verdicts`` judges its collected tables against the policy (only the policies set; the job
    then weighs each verdict against the capture's coverage, see ``audits.judge``); ``plots`` draws
    its report figures (SVG) from them, ``min_n`` the fewest exchanges a distribution is drawn for;
    ``order`` its place in the report."""

    name: str
    order: int
    run: Callable[[Rows, Policy], dict[str, DataFrame]]
    intro: str
    verdicts: Callable[[Results, Policy], list[Verdict]] | None = None
    plots: Callable[[Tables, int], list[str]] | None = None

    def __call__(self, rows: Rows, policy: Policy) -> dict[str, DataFrame]:
        return self.run(rows, policy)


def found(items: list[str], most: int = 20) -> str:
    """What a verdict found, for its detail: the first ``most`` items and how many more, or
    ``none seen``."""
    if not items:
        return "none seen"
    return "; ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def exit_status(verdicts: list[Verdict]) -> int:
    """0 every verdict holds, 2 one fails, 3 none fails but one is inconclusive."""
    if any(v.ok is False for v in verdicts):
        return 2
    return 3 if any(v.ok is None for v in verdicts) else 0


def ex_time(ex: DataFrame) -> DataFrame:
    """Exchange rows with ``time`` (request time, else response time) and ``capture_date``."""
    return ex.withColumns({"time": F.expr("coalesce(request_time, response_time)"),
                           "capture_date": F.expr("to_date(coalesce(request_time, response_time))")})


def listener() -> F.Column:
    """``broker_ip:broker_port``."""
    return F.expr("concat_ws(':', broker_ip, cast(broker_port as string))")


def refused(ex: DataFrame, release: str) -> DataFrame:
    """The exchanges at an (api, version) Kafka ``release`` does not accept, with ``release`` and
    ``refusal``: ``removed`` (below the release's lowest version), ``newer`` (above its highest) or
    ``absent`` (an api the release does not have). ApiVersions above the highest is negotiation (the
    broker answers it with its ranges, KIP-511), not a refusal, and ``newer`` is said only of
    connections that sent no ApiVersions request (one that did adapts to an older broker); an api
    key no release defines is left to the ``unknown_api`` status. The release's table is an
    expression (a map literal of about a hundred keys), not a join: no extra Spark job for it."""
    table = protocol.releases()[release]
    known = sorted(protocol.API_NAMES)

    def bound(i: int) -> F.Column:  # one SQL map literal: one call to Spark, not two hundred
        pairs = ", ".join(f"{k}, {table.get(k, (-1, -1))[i]}" for k in known)
        return F.expr(f"try_element_at(map({pairs}), cast(api_key as int))")

    low, high, v = bound(0), bound(1), F.col("api_version")
    refusal = (F.when(low < 0, F.lit("absent"))
               .when(v < low, F.lit("removed"))
               .when((v > high) & (F.col("api_key") != protocol.API_VERSIONS_KEY), F.lit("newer")))
    out = (ex.where(v.isNotNull() & F.col("api_key").isNotNull())
           .withColumn("refusal", refusal).where(F.col("refusal").isNotNull()))
    # a version newer than the release knows is a finding only where the connection shows no
    # negotiation: a client that asked the broker's ApiVersions adapts to an older broker
    negotiated = ex.where(F.col("api_key") == protocol.API_VERSIONS_KEY).select(*CONN).distinct()
    newer = out.where(F.col("refusal") == "newer").join(negotiated, CONN, "left_anti")
    return out.where(F.col("refusal") != "newer").unionByName(newer).withColumn("release", F.lit(release))


#: what names one connection in its rows, whichever file or night each came from (rows.columns)
CONN = ["client_ip", "client_port", "broker_ip", "broker_port", "connection_time"]


CLIENT = ["client_id", "client_ip"]


def _software() -> Column:
    """What an exchange row says of its client's software: the name and version its ApiVersions
    request sent, else the library its requests show (``aiokafka (by its requests)``), else null."""
    return F.coalesce(F.when(F.col("client_software_name").isNotNull(),
                             F.concat_ws(" ", "client_software_name", "client_software_version")),
                      F.concat(F.col("client_library"), F.lit(" (by its requests)")))


def software(ex: DataFrame) -> DataFrame:
    """Per connection: the client software its ApiVersions request named (else its library)."""
    return (ex.where(_software().isNotNull()).groupBy(*CONN).agg(F.first(_software()).alias("software")))


def client_software(ex: DataFrame) -> DataFrame:
    """Per (client id, address): every client software seen (else library), joined."""
    return (ex.where(_software().isNotNull()).groupBy(*CLIENT)
            .agg(F.array_join(F.array_sort(F.collect_set(_software())), ", ").alias("client_software")))


def records_by(parts: DataFrame, keys: tuple[int, ...]) -> DataFrame:
    t = F.coalesce("request_time", "response_time")
    return (parts.where(F.col("api_key").isin(*keys) & F.col("record_count").isNotNull())
            .withColumn("time", t).withColumn("capture_date", F.to_date(t)))


def with_groups(df: DataFrame, rows: Rows) -> DataFrame:
    """``df`` (with client_id, client_ip, topic) with ``group_id`` and ``group_basis``: the groups
    whose offsets of that topic the client committed, else the groups the client is a member of
    (one row per group), else null. A Fetch request names no group, so a consumer's (client id,
    address) is matched with the groups that client joined, heartbeated or committed offsets for
    (the group-id APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
    TxnOffsetCommit, ConsumerGroupHeartbeat, ShareGroupHeartbeat); where it committed offsets of
    the topic it fetched, that group is the one (``group_basis`` says which evidence was used)."""
    ex = rows.exchanges.where(F.col("api_key").isin(*GROUP_ID_APIS) & F.col("group_id").isNotNull())
    # each a list per key, as few rows as the clients: joined to ``df`` in one pass over it (a
    # union of the two cases would compute ``df`` twice)
    members = ex.groupBy(*CLIENT).agg(F.collect_set("group_id").alias("_member_of"))
    committed = (rows.partitions.where(F.col("api_key").isin(KEY["OffsetCommit"], KEY["TxnOffsetCommit"])
                                         & F.col("group_id").isNotNull())
                 .groupBy(*CLIENT, "topic").agg(F.collect_set("group_id").alias("_committed_to")))
    keys = [*CLIENT, "topic"]
    return (df.join(committed, keys, "left").join(members, CLIENT, "left")
            .select(*keys, *(c for c in df.columns if c not in keys),
                    F.explode_outer(F.coalesce("_committed_to", "_member_of")).alias("group_id"),
                    F.when(F.col("_committed_to").isNotNull(), F.lit("offsets committed"))
                    .when(F.col("_member_of").isNotNull(), F.lit("membership")).alias("group_basis")))


def condition(cond: figures.Condition) -> Column:
    """A condition of figures.py as a Spark column, null as false (the same definition
    ``kafkawire summary`` evaluates over Arrow tables)."""
    return F.coalesce(_spark(cond), F.lit(False))


def _spark(cond: figures.Condition) -> Column:
    op, *args = cond
    if op in ("and", "or"):
        parts = [_spark(c) for c in args]
        out = parts[0]
        for p in parts[1:]:
            out = (out & p) if op == "and" else (out | p)
        return out
    if op == "not":
        return ~_spark(args[0])
    col = F.col(args[0])
    if op == "null":
        return col.isNull()
    if op == "notnull":
        return col.isNotNull()
    if op == "in":
        return col.isin(*args[1])
    return {"eq": col == args[1], "ne": col != args[1], "gt": col > args[1]}[op]


def connections(cond: Column | None = None) -> Column:
    """How many connections a group's rows are of (those of rows meeting ``cond``): each once, however
    many rows it has (one per part: the nights of --incremental runs; exchanges of several files)."""
    named = F.struct(*CONN)
    return F.count_distinct(named if cond is None else F.when(cond, named))


def count_of(cond: figures.Condition) -> Column:
    """How many rows of a group meet a condition of figures.py."""
    return F.sum(F.when(condition(cond), 1).otherwise(0))


def negotiated() -> Column:
    """An answer that is version negotiation (figures.NEGOTIATED), not a failure."""
    return condition(figures.NEGOTIATED)


def failed() -> Column:
    """An errored exchange (figures.ERRORED: an error code other than 0, and not version
    negotiation): the one rule the audits, the notebook and ``kafkawire summary`` count errors by."""
    return condition(figures.ERRORED)
