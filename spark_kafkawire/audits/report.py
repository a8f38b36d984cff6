"""report.html: one self-contained page (inline CSS and SVG, nothing fetched) with the policy
verdicts, what was read, and each audit's tables and plots, for someone who did not run the job."""

from __future__ import annotations

import datetime as dt
import html
import re

from . import AUDITS
from .base import Results, Verdict
from ..escape import printable


def _html(text: str) -> str:
    """Text from a capture (file names, client ids) for the page: control characters shown as
    escapes (as on the terminal: a raw ESC or BEL is no part of a page), then HTML-escaped."""
    return html.escape(printable(text))

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;padding:0 1em;color:#222;max-width:80em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;margin-top:2em}h3{font-size:1em;color:#444}
.scroll{overflow-x:auto;max-width:100%}
.scroll td:first-child,.scroll th:first-child{position:sticky;left:0;z-index:1;background:#fff;
box-shadow:1px 0 0 #ddd}.scroll th:first-child{background:#f3f3f3}
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


#: columns that hold identifiers (ports, ids, keys, versions, partitions): numbers, but not amounts,
#: written as they are (port 57019, not 57,019)
_IDENTIFIER = re.compile(r"(^|_)(port|id|ids|key|version|partition|bucket)s?$")


def _cell(v, amount: bool = True) -> str:
    """A value as people write it: an amount thousands separated (164,100, not 1.641e+05), four
    significant digits below a thousand; an identifier (``amount`` False) as it is; times to the
    second, lists joined."""
    if v is None:
        return ""
    if not amount and isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    if not amount:
        return str(v)
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return str(v)
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if v == 0 or abs(v) >= 0.001:
            return f"{v:.4g}" if abs(v) >= 1 else f"{v:.4f}".rstrip("0").rstrip(".")
        return f"{v:.1e}"
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, (list, tuple)):
        return ", ".join(_cell(x) for x in v)
    return str(v)


def table(rows: list[dict], limit: int = MAX_ROWS) -> str:
    if not rows:
        return '<p class="note">no rows</p>'
    # a column empty in every row says nothing: left out, and named once below the table
    empty = [c for c in rows[0] if all(r[c] is None or r[c] == "" or r[c] == [] for r in rows)]
    cols = [c for c in rows[0] if c not in empty] or list(rows[0])
    if len(cols) > 1 and cols[0] == "capture_date":  # the column held in place names the row, not its day
        cols = cols[1:] + cols[:1]
    head = "".join(f"<th>{_html(c)}</th>" for c in cols)
    amounts = {c: not _IDENTIFIER.search(c) for c in cols}
    body = []
    for r in rows[:limit]:
        cells = "".join(f'<td class="n">{_html(_cell(r[c]))}</td>'
                        if amounts[c] and isinstance(r[c], (int, float)) and not isinstance(r[c], bool)
                        else f"<td>{_html(_cell(r[c], amounts[c]))}</td>" for c in cols)
        body.append(f"<tr>{cells}</tr>")
    more = f'<p class="note">{len(rows) - limit:,} more rows in the Parquet output</p>' if len(rows) > limit else ""
    if empty and len(cols) < len(rows[0]):
        more += f'<p class="note">empty in every row: {_html(", ".join(empty))}</p>'
    return f"<div class='scroll'><table><tr>{head}</tr>{''.join(body)}</table></div>{more}"


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
            gaps.append(f"{r['tls_not_decrypted']:,} TLS connections ({r['tls_undecrypted_bytes']:,} bytes) "
                        "not decrypted")
        if r["lost_bytes"]:
            gaps.append(f"{r['lost_bytes']:,} bytes lost by the capture")
        if r["skipped_bytes"]:
            gaps.append(f"{r['skipped_bytes']:,} bytes in no frame")
        if r["started_before_capture"]:
            gaps.append(f"{r['started_before_capture']} connections without their start")
        share = 1 - (r["undecoded_fraction"] or 0)
        cls = "ok" if share >= 0.99 else "open"
        out.append(f"<tr><td>{_html(str(r['listener']))}</td><td class='{cls}'>{share:.1%}</td>"
                   f"<td class='n'>{r['exchanges']:,}</td><td>{_html('; '.join(gaps) or 'nothing')}</td></tr>")
    if not rows:
        out.append("<tr><td colspan='4'>no Kafka listener in the captures</td></tr>")
    out.append("</table></div>")
    return "".join(out)


def _since(lines: list[tuple[str, str]] | None) -> str:
    """The report's first section: what changed since the last run in the history (compare.since_last)."""
    if not lines:
        return ""
    head, *rest = lines
    parts = [f"<h2 id='since'>Since the last run</h2><p class='note'>{_html(head[0])}"
             f"{': ' + _html(head[1]) if head[1] else ''}</p>"]
    if rest:
        parts.append("<div class='scroll'><table><tr><th>what</th><th>evidence</th></tr>")
        parts += [f"<tr><td>{_html(what)}</td><td>{_html(why)}</td></tr>" for what, why in rest]
        parts.append("</table></div>")
    return "".join(parts)


def render(verdicts: list[Verdict], meta: dict, results: Results, min_n: int = 20,
           since: list[tuple[str, str]] | None = None, trends: list[str] | None = None) -> str:
    """The page; ``min_n``: fewer exchanges of an api than this get no latency histogram; ``since``:
    what changed since the last run in the history (compare.since_last), the page's first section;
    ``trends``: its plots per run (compare.trends, SVG), after the verdicts."""
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
             "<h1>Kafka traffic audit</h1>", _since(since),
             f"<p class='{'fail' if failing else 'open' if open_ else 'ok' if verdicts else 'note'}'>"
             f"{_html(said)}</p>",
             "<div class='scroll'><table><tr><th>policy</th><th>result</th><th>what was found</th></tr>"]
    for v in verdicts:
        cls, word = (("note", "not applicable") if v.status == "n/a" else ("ok", "holds") if v.ok else
                     ("fail", "fails") if v.ok is False else ("open", "inconclusive"))
        parts.append(f"<tr><td>{_html(v.name)}</td><td class='{cls}'>{word}</td>"
                     f"<td>{_html(v.detail)}</td></tr>")
    parts.append("</table></div>")
    if trends:
        parts.append("<h2 id='trends'>Trends</h2><p class='note'>One point per run in the history.</p>")
        parts += trends
    parts.append(_coverage(results.get("capture_health", {}).get("coverage")))
    parts.append("<h2>What was read</h2><div class='scroll'><table>")
    for k, v in meta.items():
        parts.append(f"<tr><th>{_html(k)}</th><td>{_html(_cell(v))}</td></tr>")
    parts.append("</table></div><p class='note'>Contents: " + ", ".join(
        f"<a href='#{a}'>{a.replace('_', ' ')}</a>" for a in results) + "</p>")
    for audit, tables in results.items():
        described = AUDITS.get(audit)
        parts.append(f"<h2 id='{audit}'>{audit.replace('_', ' ')}</h2>"
                     f"<p>{_html(described.intro if described else '')}</p>")
        if described is not None and described.plots is not None:
            parts.append("".join(described.plots(tables, min_n)))
        for name, rows in tables.items():
            if name == "latency_histogram":
                continue
            if len(tables) > 1:
                parts.append(f"<h3>{name.replace('_', ' ')} ({len(rows)} rows)</h3>")
            parts.append(table(rows))
    parts.append("</body></html>")
    return "\n".join(parts)
