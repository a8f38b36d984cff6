"""The audit run's figures as Prometheus metrics: ``--metrics-file PATH`` writes them in Prometheus'
text format (for the node exporter's textfile collector: written whole under a temporary name, then
renamed; no timestamps), ``--pushgateway URL`` pushes them, both through prometheus-client.

Names follow OpenTelemetry's messaging semantic conventions as Prometheus spells them:
``messaging_client_operation_duration_seconds`` (a histogram of each exchange's latency, first
request byte to first response byte; labels ``messaging_system="kafka"``,
``messaging_operation_name`` the API, ``server_address``, ``server_port``, ``error_type`` the error
name where the exchange failed, as the audits count failures, ``messaging_destination_name`` the
topic of an exchange that names one, where the run names at most MAX_TOPIC_LABELS topics). What
only the wire knows goes under the product's prefix: ``kafkawire_network_duration_seconds`` and
``kafkawire_broker_duration_seconds`` (the same exchanges' latency split), ``kafkawire_exchanges`` by API and status,
``kafkawire_bytes`` by direction, ``kafkawire_retransmitted_segments`` and ``kafkawire_lost_segments``
by side, ``kafkawire_policy_result`` (1 per policy and its status) and
``kafkawire_capture_window_end_seconds``. Client ids and addresses are no labels by default (their
number is unbounded, and they are chosen by whoever connects); ``--metrics-labels
client_id,client_address`` adds them to the duration histograms and ``kafkawire_exchanges`` for the
busiest MAX_CLIENT_SERIES clients, the others counted together as ``client_id="other"``. Label
values are escaped by prometheus-client's text format (backslash, double quote, new line).

A push that fails (the Pushgateway down, a refused URL) is said on stderr in one line naming the
URL; the run's report, tables and exit status stand.
"""

from __future__ import annotations

from typing import Any

#: histogram buckets (seconds): OpenTelemetry's advice for messaging operation durations
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
LABELS = ("messaging_operation_name", "server_address", "server_port", "error_type", "messaging_destination_name")
#: the most clients --metrics-labels names one by one
MAX_CLIENT_SERIES = 200
#: the client labels --metrics-labels may add, and the exchange rows' columns they come from
CLIENT_LABELS = {"client_id": "client_id", "client_address": "client_ip"}


def client_labels(value: str) -> tuple[str, ...]:
    import argparse

    got = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    bad = [v for v in got if v not in CLIENT_LABELS]
    if bad:
        raise argparse.ArgumentTypeError(f"{bad[0]!r}: choose from {', '.join(CLIENT_LABELS)}")
    return got


#: the most topics the run may name for messaging_destination_name to be given (else it is empty)
MAX_TOPIC_LABELS = 20
DURATIONS = (("messaging_client_operation_duration_seconds", "latency_ms",
              "Kafka request/response exchanges as the capture saw them: first request byte to first response byte"),
             ("kafkawire_network_duration_seconds", "network_ms",
              "the part of each exchange's latency on the network (round trip between client and broker)"),
             ("kafkawire_broker_duration_seconds", "broker_ms",
              "the part of each exchange's latency the broker held the request"))


def frames(exchanges: Any, connections: Any, args: Any = None) -> dict[str, list[dict]]:
    """The run's figures, from its rows (Spark DataFrames), as rows small enough for the driver.
    ``args``: the job's arguments (their ``metrics_labels``: the client labels to add)."""
    from pyspark.sql import functions as F

    from ..decode.status import CAPTURE_CHANGED, CAPTURE_DAMAGED, TLS
    from .base import failed

    ex = exchanges.where(F.col("api_name").isNotNull() & ~F.col("status").isin(CAPTURE_DAMAGED, CAPTURE_CHANGED, TLS))
    keys = [F.col("api_name").alias("messaging_operation_name"), F.coalesce("broker_ip", F.lit("")).alias(
        "server_address"), F.coalesce(F.col("broker_port").cast("string"), F.lit("")).alias("server_port"),
        F.when(failed(), F.coalesce("error_name", F.col("error_code").cast("string"))).otherwise(F.lit(""))
        .alias("error_type")]
    # the topic where an exchange names exactly one, and only where the run's topics are few
    one = F.when(F.size("topics") == 1, F.col("topics")[0])
    few = ex.select(one.alias("t")).where(F.col("t").isNotNull()).distinct().limit(MAX_TOPIC_LABELS + 1).count() \
        <= MAX_TOPIC_LABELS
    keys.append((F.coalesce(one, F.lit("")) if few else F.lit("")).alias("messaging_destination_name"))
    chosen = tuple(getattr(args, "metrics_labels", ()) or ())
    if chosen:  # the busiest clients by name, the rest as "other"
        cols = [CLIENT_LABELS[c] for c in chosen]
        top = ex.groupBy(*cols).count().orderBy(F.desc("count"), *cols).limit(MAX_CLIENT_SERIES)
        busiest = F.broadcast(top.select(*[F.col(c).alias(f"_top_{c}") for c in cols], F.lit(True).alias("_named")))
        ex = ex.join(busiest, on=[F.col(c).eqNullSafe(F.col(f"_top_{c}")) for c in cols], how="left")
        keys += [F.when(F.col("_named"), F.coalesce(col, F.lit(""))).otherwise(F.lit("other")).alias(label)
                 for label, col in zip(chosen, cols)]
    agg = []
    for name, col, _help in DURATIONS:
        s = F.col(col) / 1000.0
        agg += [F.count(col).alias(f"{name}:count"), F.sum(s).alias(f"{name}:sum")]
        agg += [F.count(F.when(s <= b, 1)).alias(f"{name}:{i}") for i, b in enumerate(BUCKETS)]
    out = {"durations": [r.asDict() for r in ex.groupBy(*keys).agg(*agg).collect()]}
    out["exchanges"] = [r.asDict() for r in ex.groupBy(F.col("api_name").alias("messaging_operation_name"), "status",
                                                       *keys[len(LABELS):]).count().collect()]
    sums = [F.sum(F.coalesce(f"{side}_{what}", F.lit(0))).alias(f"{side}_{what}")
            for side in ("client", "broker") for what in ("bytes", "retransmitted_segments", "lost_segments")]
    out["connections"] = [r.asDict() for r in connections.agg(*sums).collect()]
    return out


def registry(figures: dict[str, list[dict]], verdicts: list, window_end: Any, args: Any = None) -> Any:
    """A prometheus-client registry holding the run's metrics (a collector of fixed values).
    ``args``: the job's arguments (their ``metrics_labels``, as for frames)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

    chosen = tuple(getattr(args, "metrics_labels", ()) or ())
    labels = LABELS + chosen

    class Run:
        def collect(self):
            for name, _col, text in DURATIONS:
                h = HistogramMetricFamily(name, text, labels=("messaging_system",) + labels)
                for r in figures["durations"]:
                    if not r[f"{name}:count"]:
                        continue
                    buckets = [(_le(b), r[f"{name}:{i}"]) for i, b in enumerate(BUCKETS)]
                    buckets.append(("+Inf", r[f"{name}:count"]))
                    h.add_metric(["kafka"] + [r[k] for k in labels], buckets, r[f"{name}:sum"] or 0.0)
                yield h
            g = GaugeMetricFamily("kafkawire_exchanges", "exchanges the run read, by API and status",
                                  labels=("messaging_operation_name", "status") + chosen)
            for r in figures["exchanges"]:
                g.add_metric([r["messaging_operation_name"], r["status"]] + [r[k] for k in chosen], r["count"])
            yield g
            c = (figures["connections"] or [{}])[0]
            for metric, what, text in (("kafkawire_bytes", "bytes", "bytes the capture saw each side send"),
                                       ("kafkawire_retransmitted_segments", "retransmitted_segments",
                                        "segments each side sent again"),
                                       ("kafkawire_lost_segments", "lost_segments",
                                        "segments of each side the capture shows were lost on the path")):
                g = GaugeMetricFamily(metric, text, labels=("side",))
                for side in ("client", "broker"):
                    g.add_metric([side], c.get(f"{side}_{what}") or 0)
                yield g
            g = GaugeMetricFamily("kafkawire_policy_result", "1 for each policy and the status it was judged",
                                  labels=("policy", "status"))
            for v in verdicts:
                g.add_metric([v.name, v.status], 1)
            yield g
            if window_end is not None:
                yield GaugeMetricFamily("kafkawire_capture_window_end_seconds",
                                        "the last exchange the run read (Unix time)", value=window_end.timestamp())

    reg = CollectorRegistry()
    reg.register(Run())
    return reg


def _le(b: float) -> str:
    return repr(float(b))


def write(reg: Any, path: str | None, gateway: str | None) -> None:
    """The metrics written to ``path`` (atomically) and/or pushed to the Pushgateway at ``gateway``."""
    from prometheus_client import push_to_gateway, write_to_textfile

    if path:
        write_to_textfile(path, reg)
    if gateway:
        try:
            push_to_gateway(gateway, job="kafkawire_audit", registry=reg, timeout=30)
        except (OSError, ValueError) as e:  # (urllib's errors are OSErrors; a URL it cannot use, ValueError)
            from ..carry import warn_user

            warn_user(f"--pushgateway {gateway}: the metrics were not pushed ({str(e)[:300]})")
