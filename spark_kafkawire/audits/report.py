"""report.html: one self-contained page (inline CSS and SVG, nothing fetched) with the policy
verdicts, what was read, and each audit's tables and plots, for someone who did not run the job."""

from __future__ import annotations

import datetime as dt
import html
from typing import Sequence

from ..escape import printable
from . import HIST_EDGES_MS, Verdict

INTRO = {
    "exchange_summary": "Per API and client: exchanges, errors, latency percentiles (only where at least "
                        "the minimum number of exchanges were timed) and requests left unanswered.",
    "upgrade_readiness": "Every client that sent an (API, version) the target release does not accept: removed "
                         "(below its lowest version; KIP-896 removed many in 4.0), newer (above its highest) or "
                         "absent (an API it does not have). Brokers still advertise old minimums in ApiVersions, "
                         "so this shows only in what clients actually send.",
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
    "lineage": "Who writes to and reads from each topic: producers (client id, address, software) and consumers "
               "(their group where the group protocol shows it) with records and bytes; topics nobody read. The "
               "graph draws producers, topics and consumers, edge width by bytes, the largest first.",
    "consumer_lag": "How far behind each consumer is, from its own Fetch requests: the high watermark in the answer "
                    "minus the offset it asked for (records), and how long ago the record at its position was "
                    "appended where the capture holds that Produce request. Per group and minute the largest and "
                    "the 95th percentile over its partitions' fetches.",
    "client_hygiene": "Patterns on the wire that cost a client or the cluster: one row per client and finding with "
                      "the evidence, the threshold (a policy key) and the setting to change.",
    "capture_health": "How far the other audits can be trusted: the coverage per Kafka listener the verdicts "
                      "rest on (bytes decoded, TLS not decrypted, bytes lost, connections without their start); "
                      "per capture file, bytes the capture lost (gaps), resyncs, bytes that could not be framed, "
                      "damage, unanswered requests; then the connections with damage.",
}
STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;padding:0 1em;color:#222;max-width:80em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;margin-top:2em}h3{font-size:1em;color:#444}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 6px;
text-align:left;vertical-align:top;overflow-wrap:break-word;max-width:40em}th{background:#f3f3f3;white-space:nowrap}
td.n{text-align:right;white-space:nowrap}td{min-width:4em}
.ok{color:#176f2c}.fail{color:#b00020;font-weight:bold}.open{color:#8a5a00;font-weight:bold}.note{color:#666;font-size:.85em}
figure{display:inline-block;margin:.3em 1em .3em 0;max-width:100%;vertical-align:top}
figure svg{max-width:100%;height:auto}
figure.wide{max-width:none}figure.wide svg{min-width:560px;max-width:100%}
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


def _svg(fig, title: str, wide: bool = False) -> str:
    """A figure as inline SVG (text drawn as paths: nothing to escape, no font to fetch), scaled to
    the page, its title for screen readers. ``wide``: a figure whose labels must stay readable
    (the lineage graph) is never drawn narrower than 560 pixels; on a narrower screen it scrolls
    sideways in its own box, as a wide table does."""
    import io

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = svg.replace("<svg ", f'<svg role="img" aria-label="{html.escape(title)}" ', 1)
    if wide:
        return f"<div class='scroll'><figure class='wide'>{svg}</figure></div>"
    return f"<figure>{svg}</figure>"


def _time_axis(ax) -> None:
    """Date ticks that say only what changes (ConciseDateFormatter), 3 to 8 of them."""
    import matplotlib.dates as mdates

    loc = mdates.AutoDateLocator(minticks=3, maxticks=8)
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))


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
    fig, ax = _figure()
    keys = sorted(counts)
    ax.bar(keys, [counts[k] for k in keys], width=step * 0.9, align="edge", color="#4a78b5")
    span = keys[-1] - keys[0] + step
    pad = max(step, span / 40)
    ax.set_xlim(keys[0] - pad, keys[-1] + step + pad)
    _time_axis(ax)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(f"time (UTC), one bar per {'hour' if step >= dt.timedelta(hours=1) else 'minute'}", fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    return _svg(fig, title)


def _label(text: str | None, width: int = 30) -> str:
    """A capture string as a plot label: controls shown as escapes, '$' not read as math, cut to width."""
    t = printable(text if text is not None else "(none)")
    t = t if len(t) <= width else t[: width - 1] + "…"
    return t.replace("$", r"\$")


def flow(title: str, left: dict[tuple[str, str], float], right: dict[tuple[str, str], float],
         limit: int = 20) -> str:
    """Producers -> topics -> consumers: three columns of nodes, the largest (by bytes) first and
    the rest of each column summarised as one node, edges as wide as their bytes."""
    def column(weights: dict[str, float]) -> dict[str, str]:
        ranked = sorted(weights, key=lambda k: (-weights[k], k))
        keep = {k: k for k in ranked[:limit]}
        rest = ranked[limit:]
        keep.update({k: f"{len(rest)} others" for k in rest})
        return keep

    def totals(edges: dict[tuple[str, str], float], side: int) -> dict[str, float]:
        out: dict[str, float] = {}
        for pair, b in edges.items():
            out[pair[side]] = out.get(pair[side], 0) + b
        return out

    produced, fetched = totals(left, 1), totals(right, 0)
    topics = {t: produced.get(t, 0) + fetched.get(t, 0) for t in {*produced, *fetched}}
    cols = [column(totals(left, 0)), column(topics), column(totals(right, 1))]
    nodes = [list(dict.fromkeys(c.values())) for c in cols]
    tall = max(len(n) for n in nodes)
    fig, ax = _figure(7.0, max(2.4, 0.32 * tall + 0.9))
    ys = [{name: 1 - (i + 0.5) / len(n) for i, name in enumerate(n)} for n in nodes]
    edges: dict[tuple[int, str, str], float] = {}
    for k, src in ((0, left), (1, right)):
        for (a, b), w in src.items():
            key = (k, cols[k][a], cols[k + 1][b])
            edges[key] = edges.get(key, 0) + w
    top = max(edges.values(), default=1) or 1
    for (k, a, b), w in sorted(edges.items(), key=lambda kv: kv[1]):
        ax.plot([k + 0.08, k + 0.92], [ys[k][a], ys[k + 1][b]], color="#4a78b5", alpha=0.55,
                linewidth=0.6 + 7 * w / top, solid_capstyle="butt")
    for k, (ha, x) in enumerate((("right", 0.05), ("center", 1.0), ("left", 1.95))):
        for name, y in ys[k].items():
            ax.text(x, y, _label(name), ha=ha, va="center", fontsize=7,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "#eef3fa" if k != 1 else "#fdf3e1", "ec": "#999"})
    for x, ha, head in ((0.05, "right", "producers"), (1.0, "center", "topics"), (1.95, "left", "consumers")):
        ax.text(x, 1.0 + 0.5 / tall, head, ha=ha, va="bottom", fontsize=8, fontweight="bold")
    ax.set_xlim(-1.25, 3.25)
    ax.set_ylim(-0.02, 1.0 + 1.2 / tall)
    ax.axis("off")
    ax.set_title(title, fontsize=9)
    return _svg(fig, title, wide=True)


def lines(title: str, series: dict[str, dict[dt.datetime, float]], ylabel: str) -> str:
    """One line per series (a consumer group) on a real time axis."""
    return _svg(lines_figure(title, series, ylabel), title)


def lines_figure(title: str, series: dict[str, dict[dt.datetime, float]], ylabel: str):
    """The figure of :func:`lines`; its legend sits beside the plot, never over the data."""
    fig, ax = _figure()
    for name, points in series.items():
        keys = sorted(points)
        ax.plot(keys, [points[k] for k in keys], marker="o", markersize=3, linewidth=1.2, label=_label(name))
    _time_axis(ax)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("time (UTC)", fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_ylim(bottom=0)
    if len(series) > 1:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)
    return fig


def _latency_plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    """A histogram per api that has enough exchanges to show a shape."""
    out = []
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
    return out


def _errors_plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    per: dict = {}
    for r in tables.get("errors_by_hour", []):
        per[r["hour"]] = per.get(r["hour"], 0) + r["exchanges"]
    return [timeline("errored exchanges per hour", per, dt.timedelta(hours=1), "errored exchanges")] if per else []


def _throughput_plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    out = []
    for direction, verb in (("produce", "produced"), ("fetch", "fetched")):
        per: dict = {}
        for r in tables.get("throughput", []):
            if r["direction"] == direction:
                per[r["minute"]] = per.get(r["minute"], 0) + (r["records"] or 0)
        if per:
            out.append(timeline(f"records {verb} per minute", per, dt.timedelta(minutes=1), "records"))
    return out


def _lineage_plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    def who(r: dict) -> str:
        return f"{r['client_id']}@{r['client_ip']}"

    left: dict[tuple[str, str], float] = {}
    for r in tables.get("lineage_producers", []):
        left[(who(r), r["topic"])] = left.get((who(r), r["topic"]), 0) + (r["bytes"] or 0)
    right: dict[tuple[str, str], float] = {}
    for r in tables.get("lineage_consumers", []):
        node = f"group {r['group_id']}" if r["group_id"] is not None else f"{who(r)} (no group)"
        right[(r["topic"], node)] = right.get((r["topic"], node), 0) + (r["bytes"] or 0)
    return [flow("producers -> topics -> consumers (edge width: bytes)", left, right)] if left or right else []


def _lag_plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    out = []
    rows = tables.get("lag_by_group", [])
    most: dict[str, float] = {}
    for r in rows:
        most[r["group"]] = max(most.get(r["group"], 0), r["max_lag"] or 0)
    worst = sorted(most, key=lambda g: (-most[g], g))[:8]
    for col, what in (("max_lag", "largest"), ("p95_lag", "95th percentile")):
        series = {g: {r["minute"]: r[col] for r in rows if r["group"] == g and r[col] is not None} for g in worst}
        if any(series.values()):
            out.append(lines(f"lag per minute, {what} over the group's fetches", series, "records behind"))
    return out


def _hygiene_plots(tables: dict[str, list[dict]], min_n: int) -> list[str]:
    per: dict[str, int] = {}
    for r in tables.get("hygiene_summary", []):
        per[r["finding"]] = per.get(r["finding"], 0) + r["clients"]
    return [bars("clients per finding", list(per), list(per.values()), "finding", "clients")] if per else []


_PLOTS = {"latency": _latency_plots, "errors": _errors_plots, "throughput": _throughput_plots,
          "lineage": _lineage_plots, "consumer_lag": _lag_plots, "client_hygiene": _hygiene_plots}


def _plots(audit: str, tables: dict[str, list[dict]], min_n: int) -> str:
    return "".join(_PLOTS[audit](tables, min_n)) if audit in _PLOTS else ""


def _coverage(rows: list[dict] | None) -> str:
    """Coverage at a glance: per Kafka listener, what share of its bytes was decoded, and what was
    not (the verdicts cite it)."""
    if rows is None:
        return ""
    out = ["<h2 id='coverage'>Coverage: what the verdicts rest on</h2><div class='scroll'><table>"
           "<tr><th>listener</th><th>decoded</th><th>exchanges</th><th>not decoded</th></tr>"]
    for r in rows:
        gaps = []
        if r["tls_not_decrypted"]:
            gaps.append(f"{r['tls_not_decrypted']} TLS connections ({r['tls_undecrypted_bytes']} bytes) not decrypted")
        if r["lost_bytes"]:
            gaps.append(f"{r['lost_bytes']} bytes lost by the capture")
        if r["skipped_bytes"]:
            gaps.append(f"{r['skipped_bytes']} bytes in no frame")
        if r["started_before_capture"]:
            gaps.append(f"{r['started_before_capture']} connections without their start")
        share = 1 - (r["undecoded_fraction"] or 0)
        cls = "ok" if share >= 0.99 else "open"
        out.append(f"<tr><td>{html.escape(str(r['listener']))}</td><td class='{cls}'>{share:.1%}</td>"
                   f"<td>{r['exchanges']}</td><td>{html.escape('; '.join(gaps) or 'nothing')}</td></tr>")
    if not rows:
        out.append("<tr><td colspan='4'>no Kafka listener in the captures</td></tr>")
    out.append("</table></div>")
    return "".join(out)


def render(verdicts: list[Verdict], meta: dict, results: dict[str, dict[str, list[dict]]], min_n: int = 20) -> str:
    """The page; ``min_n``: fewer exchanges of an api than this get no latency histogram."""
    failing = sum(v.ok is False for v in verdicts)
    open_ = sum(v.ok is None for v in verdicts)
    said = ("No policy was judged (set them with --config)." if not verdicts else
            "Every policy holds." if not failing and not open_ else
            "1 policy of {n} fails.".format(n=len(verdicts)) if failing == 1 else
            f"{failing} policies of {len(verdicts)} fail." if failing else "")
    if open_:
        said += (" " if said else "") + (f"{open_} of {len(verdicts)} could not be judged on what was decoded "
                                         "(inconclusive: see why below, and the coverage).")
    parts = [f"<!doctype html><html><head><meta charset='utf-8'>"
             f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>kafkawire audit</title>"
             f"<style>{STYLE}</style></head><body>",
             "<h1>Kafka traffic audit</h1>",
             f"<p class='{'fail' if failing else 'open' if open_ else 'ok'}'>{html.escape(said)}</p>",
             "<div class='scroll'><table><tr><th>policy</th><th>result</th><th>what was found</th></tr>"]
    for v in verdicts:
        cls, word = ("ok", "holds") if v.ok else ("fail", "fails") if v.ok is False else ("open", "inconclusive")
        parts.append(f"<tr><td>{html.escape(v.name)}</td><td class='{cls}'>{word}</td>"
                     f"<td>{html.escape(v.detail)}</td></tr>")
    parts.append("</table></div>")
    parts.append(_coverage(results.get("capture_health", {}).get("coverage")))
    parts.append("<h2>What was read</h2><div class='scroll'><table>")
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
