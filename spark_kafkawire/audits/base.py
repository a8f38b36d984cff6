"""What every audit shares: the rows it reads (:class:`Rows`), the policy it is judged by
(:class:`Policy`), and the columns several audits derive the same way."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .. import protocol


@dataclass
class Rows:
    """The rows of one set of captures, in the shapes the audits read."""

    exchanges: DataFrame
    connections: DataFrame
    partitions: DataFrame

    @classmethod
    def load(cls, spark: SparkSession, paths: list[str], options: dict | None = None) -> "Rows":
        def shape(rows: str) -> DataFrame:
            return spark.read.format("kafkawire").options(**(options or {})).option("rows", rows).load(paths)

        return cls(shape("exchanges"), shape("connections"), shape("partitions"))


@dataclass
class Policy:
    """What a run must find for exit status 0 (``jobs/audit.py`` exits 2 when one fails), and the
    thresholds the audits judge by. A bound left at None is not judged."""

    target_release: str = "4.0"  # no client may send a version this release rejects
    max_error_rate: float | None = None  # errored exchanges / exchanges, overall
    max_p99_ms: dict[str, float] = field(default_factory=dict)  # api_name -> p99 bound (where n >= min_n)
    min_latency_n: int = 20  # fewer exchanges than this: no percentile is claimed
    allow_plain_without_tls: bool = False  # SASL PLAIN on a connection that is not TLS
    allow_weak_tls: bool = False  # TLS 1.0/1.1 (or SSL), or a suite without AEAD (CBC, RC4, 3DES)
    min_certificate_days: int = 30  # a server certificate must be valid this many days from the run
    max_gap_fraction: float | None = None  # bytes lost by the capture / bytes captured, overall
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
    # evidence: a verdict is ok only on enough of it (else inconclusive, exit status 3)
    min_exchanges: int = 1  # fewer decoded Kafka exchanges than this in all: no verdict holds
    max_undecoded_fraction: float = 0.01  # a Kafka listener with more of its bytes not decoded hides what is checked


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

    @property
    def status(self) -> str:
        return "ok" if self.ok else "FAIL" if self.ok is False else "inconclusive"


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
    broker answers it with its ranges, KIP-511), not a refusal; an api key no release defines is
    left to the ``unknown_api`` status. The release's table is an expression (a map literal of
    about a hundred keys), not a join: no extra Spark job for it."""
    table = protocol.releases()[release]
    known = sorted(protocol.API_NAMES)

    def bound(i: int) -> F.Column:  # one SQL map literal: one call to Spark, not two hundred
        pairs = ", ".join(f"{k}, {table.get(k, (-1, -1))[i]}" for k in known)
        return F.expr(f"try_element_at(map({pairs}), cast(api_key as int))")

    low, high, v = bound(0), bound(1), F.col("api_version")
    refusal = (F.when(low < 0, F.lit("absent"))
               .when(v < low, F.lit("removed"))
               .when((v > high) & (F.col("api_key") != protocol.API_VERSIONS_KEY), F.lit("newer")))
    return (ex.where(v.isNotNull() & F.col("api_key").isNotNull())
            .withColumn("refusal", refusal).where(F.col("refusal").isNotNull())
            .withColumn("release", F.lit(release)))
