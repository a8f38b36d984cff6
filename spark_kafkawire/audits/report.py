"""report.html: one self-contained page (inline CSS and SVG, nothing fetched) with the policy
verdicts, what was read, and each audit's tables and plots, for someone who did not run the job."""

from __future__ import annotations

import datetime as dt
import html
import math

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
                "listener where others do.",
    "capture_health": "How far the other audits can be trusted: per capture file, bytes the capture lost (gaps), "
                      "resyncs, bytes that could not be framed, damage, unanswered requests; then the "
                      "connections with damage.",
}
STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:80em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;margin-top:2em}h3{font-size:1em;color:#444}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 6px;
text-align:left;vertical-align:top}th{background:#f3f3f3}td.n{text-align:right}
.ok{color:#176f2c}.fail{color:#b00020;font-weight:bold}.note{color:#666;font-size:.85em}
svg{margin:.3em 1em .3em 0}
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
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{more}"


def bars(title: str, labels: list[str], values: list[float], width: int = 420, height: int = 160) -> str:
    """An inline SVG bar chart."""
    top = max(values) if values and max(values) > 0 else 1
    n = max(len(values), 1)
    bw = (width - 40) / n
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 40}" role="img">',
             f'<title>{html.escape(title)}</title>',
             f'<text x="0" y="12" font-size="12">{html.escape(title)}</text>']
    for i, (lab, v) in enumerate(zip(labels, values)):
        h = (height - 30) * v / top
        x = 30 + i * bw
        parts.append(f'<rect x="{x:.1f}" y="{height - h:.1f}" width="{max(bw - 2, 1):.1f}" height="{h:.1f}" '
                     f'fill="#4a78b5"><title>{html.escape(lab)}: {_cell(v)}</title></rect>')
        if n <= 14 or i % math.ceil(n / 12) == 0:
            parts.append(f'<text x="{x:.1f}" y="{height + 14}" font-size="9" '
                         f'transform="rotate(35 {x:.1f} {height + 14})">{html.escape(lab)}</text>')
    parts.append(f'<text x="0" y="{height - (height - 30) + 10}" font-size="9">{_cell(top)}</text>')
    parts.append(f'<line x1="28" y1="{height}" x2="{width}" y2="{height}" stroke="#999"/></svg>')
    return "".join(parts)


def _plots(audit: str, tables: dict[str, list[dict]], min_n: int) -> str:
    out = []
    if audit == "latency":  # a histogram per api that has enough exchanges to show a shape
        hist = tables.get("latency_histogram", [])
        labels = [f"≤{e:g} ms" for e in HIST_EDGES_MS] + [f">{HIST_EDGES_MS[-1]:g} ms"]
        for api in sorted({r["api_name"] for r in hist if r["api_name"]}):
            counts = [0] * len(labels)
            for r in hist:
                if r["api_name"] == api:
                    counts[r["bucket"]] += r["exchanges"]
            if sum(counts) >= min_n:
                out.append(bars(f"{api}: {sum(counts)} exchanges by latency", labels, counts, width=300,
                                height=120))
    elif audit == "errors":
        per = {}
        for r in tables.get("errors_by_hour", []):
            per[r["hour"]] = per.get(r["hour"], 0) + r["exchanges"]
        if per:
            keys = sorted(per)
            out.append(bars("errored exchanges per hour", [k.strftime("%m-%d %H:00") for k in keys],
                            [per[k] for k in keys]))
    elif audit == "throughput":
        for direction in ("produce", "fetch"):
            per = {}
            for r in tables.get("throughput", []):
                if r["direction"] == direction:
                    per[r["minute"]] = per.get(r["minute"], 0) + (r["records"] or 0)
            if per:
                keys = sorted(per)
                out.append(bars(f"records {direction}d per minute", [k.strftime("%H:%M") for k in keys],
                                [per[k] for k in keys]))
    return "".join(out)


def render(verdicts: list[Verdict], meta: dict, results: dict[str, dict[str, list[dict]]], min_n: int = 20) -> str:
    """The page; ``min_n``: fewer exchanges of an api than this get no latency histogram."""
    ok = all(v.ok for v in verdicts)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>kafkawire audit</title>"
             f"<style>{STYLE}</style></head><body>",
             "<h1>Kafka traffic audit</h1>",
             f"<p class='{'ok' if ok else 'fail'}'>{'Every policy holds.' if ok else 'A policy fails.'}</p>",
             "<table><tr><th>policy</th><th>result</th><th>what was found</th></tr>"]
    for v in verdicts:
        parts.append(f"<tr><td>{html.escape(v.name)}</td><td class='{'ok' if v.ok else 'fail'}'>"
                     f"{'holds' if v.ok else 'fails'}</td><td>{html.escape(v.detail)}</td></tr>")
    parts.append("</table><h2>What was read</h2><table>")
    for k, v in meta.items():
        parts.append(f"<tr><th>{html.escape(k)}</th><td>{html.escape(_cell(v))}</td></tr>")
    parts.append("</table><p class='note'>Contents: " + ", ".join(
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
