"""The report's plots: SVG drawn by matplotlib (no pyplot, no global state), one function per kind."""

from __future__ import annotations

import datetime as dt
import html
from typing import Sequence

from ..escape import printable


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


def _spread(ax, values: Sequence[float], ylabel: str) -> str:
    """A value axis on a log scale where the bars span more than 30x (a 500 ms Fetch long-poll beside
    1 ms requests would flatten every other bar): each bar stays visible; the label says so."""
    positive = [v for v in values if v and v > 0]
    if len(positive) > 1 and max(positive) > 30 * min(positive):
        ax.set_yscale("log")
        return f"{ylabel} (log scale)"
    return ylabel


def bars(title: str, labels: list[str], values: Sequence[float], xlabel: str, ylabel: str) -> str:
    """A bar chart of categories (latency buckets, topics: labels are capture strings, shown as such)."""
    fig, ax = _figure(4.2, 2.4)
    ax.bar(range(len(values)), values, color="#4a78b5")
    ylabel = _spread(ax, values, ylabel)
    ax.set_xticks(range(len(labels)), [_label(t) for t in labels], rotation=40, ha="right", fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    return _svg(fig, title)


def stacked(title: str, labels: list[str], parts: dict[str, Sequence[float]], xlabel: str, ylabel: str) -> str:
    """Bars of categories (labels: capture strings, shown as such), each the sum of named parts
    stacked in the order given, with a legend."""
    fig, ax = _figure(4.8, 2.6)
    bottom = [0.0] * len(labels)
    for (name, values), color in zip(parts.items(), ("#4a78b5", "#e08a3c", "#5aa55a", "#b54a4a")):
        ax.bar(range(len(labels)), values, bottom=bottom, color=color, label=_label(name))
        bottom = [b + (v or 0) for b, v in zip(bottom, values)]
    ylabel = _spread(ax, bottom, ylabel)
    ax.set_xticks(range(len(labels)), [_label(t) for t in labels], rotation=40, ha="right", fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=7)
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
    import matplotlib

    fig, ax = _figure()
    # a colour of its own for each of 20 series, and a line style with it beyond (tab10's ten
    # colours repeated after ten: 17 listeners could not be told apart)
    colours = matplotlib.colormaps["tab20"].colors  # type: ignore[attr-defined]  # a ListedColormap
    styles = ("-", "--", ":", "-.")
    every = [k for points in series.values() for k in points]
    for i, (name, points) in enumerate(series.items()):
        keys = sorted(points)
        ax.plot(keys, [points[k] for k in keys], marker="o", markersize=3, linewidth=1.2, label=_label(name),
                color=colours[i % len(colours)], linestyle=styles[(i // len(colours)) % len(styles)])
    if every:  # the axis spans the data (one point alone would be drawn over four years)
        first, last = min(every), max(every)
        pad = max((last - first) / 20, dt.timedelta(seconds=30))
        ax.set_xlim(first - pad, last + pad)
    _time_axis(ax)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("time (UTC)", fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_ylim(bottom=0)
    if len(series) > 1:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)
    return fig
