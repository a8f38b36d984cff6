"""report.html: one self-contained page (inline CSS and SVG, nothing fetched) with the policy
verdicts, what was read, and each audit's tables and plots, for someone who did not run the job."""

from __future__ import annotations

import datetime as dt
import html
from typing import Sequence

from . import HIST_EDGES_MS, Verdict

INTRO = {
    "exchange_summary": "Per API and client: exchanges, errors, latency percentiles (only where at least "
                        "the minimum number of exchanges were timed) and requests left unanswered.",
    "upgrade_readiness": "Every client that sent an (API, version) a Kafka release from 4.0 on no longer accepts "
                         "(KIP-896 removed them in 4.0). Brokers still advertise old minimums in ApiVersions, so "
                         "this shows only in what clients actually send.",
    "clients": "Every client id and address: software (from ApiVersions v3+), APIs and versions used, SASL login "
               "(mechanism and user, never the secret), traffic, first and last seen.",
    "errors": "Exchanges whose response carries an error code, by hour, API, error, topic, client and broker; "
              "the top offenders; the error rate per day.",
    "latency": "Response time of complete exchanges: percentiles per API, broker and client where n is large "
               "enough to mean it, a histogram per API, and the slowest exchanges. Fetch waits up to the "
               "consumer's fetch.max.wait.ms by design.",
    "throughput": "Records and bytes produced and fetched per topic, client and minute; compression codecs seen "
                  "per client (record batches).",
    "groups": "Consumer-group churn: JoinGroup/SyncGroup/LeaveGroup/Heartbeat per group and member, "
              "rebalances (new generations) per hour, group errors such as REBALANCE_IN_PROGRESS.",
    "security": "SASL mechanisms per listener; SASL PLAIN logins on connections that are not TLS (the password "
                "crosses the network readable; it is never stored here); clients that never authenticate on a "
                "listener where others do; TLS versions, suites and client fingerprints (JA3) per client and "
                "listener, TLS 1.0/1.1 and suites without AEAD flagged; server certificates by days left; "
                "clients that use TLS and also plaintext Kafka.",
    "capture_health": "How far the other audits can be trusted: per capture file, bytes the capture lost (gaps), "
                      "resyncs, bytes that could not be framed, damage, unanswered requests; then the "
                      "connections with damage.",
}
STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;padding:0 1em;color:#222;max-width:80em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;margin-top:2em}h3{font-size:1em;color:#444}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 6px;
text-align:left;vertical-align:top;overflow-wrap:break-word;max-width:40em}th{background:#f3f3f3;white-space:nowrap}
td.n{text-align:right;white-space:nowrap}td{min-width:4em}
.ok{color:#176f2c}.fail{color:#b00020;font-weight:bold}.note{color:#666;font-size:.85em}
figure{display:inline-block;margin:.3em 1em .3em 0;max-width:100%;vertical-align:top}
figure svg{max-width:100%;height:auto}
@media (max-width:40em){body{margin:.5em auto;padding:0 .5em}table{font-size:.75em}}
"""
MAX_ROWS = 25


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.0f}"
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, (list, tuple)):
        return ", ".join(_cell(x) for x in v)
    return str(v)


def table(rows: list[dict], limit: int = MAX_ROWS) -> str:
    if not rows:
        return '<p class="note">no rows</p>'
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows[:limit]:
        cells = "".join(f'<td class="n">{html.escape(_cell(r[c]))}</td>' if isinstance(r[c], (int, float))
                        and not isinstance(r[c], bool) else f"<td>{html.escape(_cell(r[c]))}</td>" for c in cols)
        body.append(f"<tr>{cells}</tr>")
    more = f'<p class="note">{len(rows) - limit} more rows in the Parquet output</p>' if len(rows) > limit else ""
    return f"<div class='scroll'><table><tr>{head}</tr>{''.join(body)}</table></div>{more}"


def _figure(width_in: float = 6.0, height_in: float = 2.6):
    from matplotlib.figure import Figure  # no pyplot: no global state, no display

    fig = Figure(figsize=(width_in, height_in))
    return fig, fig.subplots()


def _svg(fig, title: str) -> str:
    """A figure as inline SVG (text drawn as paths: nothing to escape, no font to fetch), scaled to
    the page, its title for screen readers."""
    import io

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = svg.replace("<svg ", f'<svg role="img" aria-label="{html.escape(title)}" ', 1)
    return f"<figure>{svg}</figure>"


def bars(title: str, labels: list[str], values: Sequence[float], xlabel: str, ylabel: str) -> str:
    """A bar chart of categories (latency buckets)."""
    fig, ax = _figure(4.2, 2.4)
    ax.bar(range(len(values)), values, color="#4a78b5")
    ax.set_xticks(range(len(labels)), labels, rotation=40, ha="right", fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    return _svg(fig, title)


def timeline(title: str, counts: dict[dt.datetime, float], step: dt.timedelta, ylabel: str) -> str:
    """Bars on a real time axis, one per ``step`` (an hour, a minute): a gap in time is a gap on
    the axis, not two neighbouring bars."""
    import matplotlib.dates as mdates

    fig, ax = _figure()
    keys = sorted(counts)
    ax.bar(keys, [counts[k] for k in keys], width=step * 0.9, align="edge", color="#4a78b5")
    span = keys[-1] - keys[0] + step
    pad = max(step, span / 40)
    ax.set_xlim(keys[0] - pad, keys[-1] + step + pad)
    loc = mdates.AutoDateLocator(minticks=3, maxticks=8)
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(f"time (UTC), one bar per {'hour' if step >= dt.timedelta(hours=1) else 'minute'}", fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    return _svg(fig, title)


def _plots(audit: str, tables: dict[str, list[dict]], min_n: int) -> str:
    out = []
    if audit == "latency":  # a histogram per api that has enough exchanges to show a shape
        hist = tables.get("latency_histogram", [])
        labels = [f"≤{e:g}" for e in HIST_EDGES_MS] + [f">{HIST_EDGES_MS[-1]:g}"]
        for api in sorted({r["api_name"] for r in hist if r["api_name"]}):
            counts = [0] * len(labels)
            for r in hist:
                if r["api_name"] == api:
                    counts[r["bucket"]] += r["exchanges"]
            if sum(counts) >= min_n:
                out.append(bars(f"{api}: {sum(counts)} exchanges by latency", labels, counts,
                                "latency (ms, bucket's upper bound)", "exchanges"))
    elif audit == "errors":
        per: dict = {}
        for r in tables.get("errors_by_hour", []):
            per[r["hour"]] = per.get(r["hour"], 0) + r["exchanges"]
        if per:
            out.append(timeline("errored exchanges per hour", per, dt.timedelta(hours=1), "errored exchanges"))
    elif audit == "throughput":
        for direction, verb in (("produce", "produced"), ("fetch", "fetched")):
            per = {}
            for r in tables.get("throughput", []):
                if r["direction"] == direction:
                    per[r["minute"]] = per.get(r["minute"], 0) + (r["records"] or 0)
            if per:
                out.append(timeline(f"records {verb} per minute", per, dt.timedelta(minutes=1), "records"))
    return "".join(out)


def render(verdicts: list[Verdict], meta: dict, results: dict[str, dict[str, list[dict]]], min_n: int = 20) -> str:
    """The page; ``min_n``: fewer exchanges of an api than this get no latency histogram."""
    failing = sum(not v.ok for v in verdicts)
    said = ("Every policy holds." if not failing else
            "1 policy of {n} fails.".format(n=len(verdicts)) if failing == 1 else
            f"{failing} policies of {len(verdicts)} fail.")
    parts = [f"<!doctype html><html><head><meta charset='utf-8'>"
             f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>kafkawire audit</title>"
             f"<style>{STYLE}</style></head><body>",
             "<h1>Kafka traffic audit</h1>",
             f"<p class='{'fail' if failing else 'ok'}'>{said}</p>",
             "<div class='scroll'><table><tr><th>policy</th><th>result</th><th>what was found</th></tr>"]
    for v in verdicts:
        parts.append(f"<tr><td>{html.escape(v.name)}</td><td class='{'ok' if v.ok else 'fail'}'>"
                     f"{'holds' if v.ok else 'fails'}</td><td>{html.escape(v.detail)}</td></tr>")
    parts.append("</table></div><h2>What was read</h2><div class='scroll'><table>")
    for k, v in meta.items():
        parts.append(f"<tr><th>{html.escape(k)}</th><td>{html.escape(_cell(v))}</td></tr>")
    parts.append("</table></div><p class='note'>Contents: " + ", ".join(
        f"<a href='#{a}'>{a.replace('_', ' ')}</a>" for a in results) + "</p>")
    for audit, tables in results.items():
        parts.append(f"<h2 id='{audit}'>{audit.replace('_', ' ')}</h2><p>{html.escape(INTRO.get(audit, ''))}</p>")
        parts.append(_plots(audit, tables, min_n))
        for name, rows in tables.items():
            if name == "latency_histogram":
                continue
            if len(tables) > 1:
                parts.append(f"<h3>{name.replace('_', ' ')} ({len(rows)} rows)</h3>")
            parts.append(table(rows))
    parts.append("</body></html>")
    return "\n".join(parts)
