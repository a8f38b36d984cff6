"""What a run's history says beside the run: what changed since the last run (the report's first
section), a figure beyond its own recent range (a regression; the max_broker_p99_growth policy),
and the Trends plots. Pure functions of this run's history rows (history.tables) and the earlier
runs' rows (history.Past): no file is read here."""

from __future__ import annotations

from typing import Any, Iterable

import pyarrow as pa

from .base import Policy, Verdict

#: a figure beyond this many times its own median over the last RECENT runs is a regression
GROWTH = 2.0
RECENT = 5


def _median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def _names(items: Iterable[str], most: int = 12) -> str:
    got = sorted(items)
    return ", ".join(got[:most]) + (f" and {len(got) - most} more" if len(got) > most else "")


def since_last(now: dict[str, pa.Table], earlier: tuple[list[dict], list[dict]],
               factor: float | None = None) -> list[tuple[str, str]] | None:
    """What changed since the last run in the history, as (what, evidence) lines for the report's
    top; None where the history holds no other run. ``now``: this run's history rows;
    ``earlier``: the history's run_summary and clients rows of other runs (history.Past.earlier);
    ``factor``: a broker p99 beyond this many times its recent median is a regression (GROWTH)."""
    summary, clients = earlier
    runs = sorted({(r["run_time"], r["run_id"]) for r in summary + clients})
    if not runs:
        return None
    last = runs[-1][1]
    when = str(runs[-1][0])[:19]
    out: list[tuple[str, str]] = []
    cur_clients = now["clients"].to_pylist()
    was = {(r["client_id"], r["client_ip"]) for r in clients if r["run_id"] == last}
    is_ = {(r["client_id"], r["client_ip"]) for r in cur_clients}
    label = lambda c: f"{c[0]}@{c[1]}"  # noqa: E731
    if is_ - was:
        out.append((f"{len(is_ - was)} new client(s)", _names(label(c) for c in is_ - was)))
    if was - is_:
        out.append((f"{len(was - is_)} client(s) gone", _names(label(c) for c in was - is_)))
    sent_was: dict[str, set] = {}
    sent_now: dict[str, set] = {}
    for rows, into in (([r for r in clients if r["run_id"] == last], sent_was), (cur_clients, sent_now)):
        for r in rows:
            for api in r["apis"] or []:
                into.setdefault(api, set()).add((r["client_id"], r["client_ip"]))
    for api in sorted(set(sent_now) - set(sent_was)):
        out.append((f"{api} newly sent",
                    f"by {len(sent_now[api])} client(s): {_names(label(c) for c in sent_now[api])}"))
    for api in sorted(set(sent_was) - set(sent_now)):
        out.append((f"{api} no longer sent", f"{len(sent_was[api])} client(s) sent it in the last run"))
    for api in sorted(set(sent_was) & set(sent_now)):
        if len(sent_now[api]) != len(sent_was[api]):
            out.append((f"{api}", f"{len(sent_now[api])} client(s) send it; {len(sent_was[api])} in the last run"))
    out += [(f"{api} broker p99 at {broker}", f"{v:.1f} ms, {v / m:.1f}x its median {m:.1f} ms over the last "
                                              f"{n} run(s)")
            for api, broker, v, m, n in growth(summary, now["run_summary"].to_pylist(), factor or GROWTH)[0]]
    errors_was = {r["api_name"] for r in summary if r["run_id"] == last and r["errors"]}
    names_was = {(r["api_name"], e) for r in summary if r["run_id"] == last for e in r["error_names"] or []}
    for r in now["run_summary"].to_pylist():
        if r["errors"] and r["api_name"] not in errors_was:
            out.append((f"{r['api_name']} errors", f"{r['errors']} at {r['broker']}; none in the last run"))
        for e in r["error_names"] or []:
            if (r["api_name"], e) not in names_was:
                out.append((f"{e} newly seen", f"in {r['api_name']} responses at {r['broker']}; not in the last run"))
    head = f"since the run of {when} UTC"
    return [(head, "")] + out if out else [(head, "nothing changed")]


def growth(summary: list[dict], now: list[dict], factor: float, min_runs: int = 1,
           min_n: int = 0) -> tuple[list[tuple[str, str, float, float, int]], int]:
    """Broker p99 per API and broker beyond ``factor`` times its median over the last RECENT runs
    that had it: (api, broker, p99, median, runs) of each, and how many (API, broker) pairs were
    judged. A pair is judged where at least ``min_runs`` of those runs, and this one, had ``min_n``
    exchanges or more of it (fewer: its p99 is no figure to compare)."""
    recent: dict[tuple[str, str], list[tuple[Any, float]]] = {}
    for r in summary:
        if r["broker_p99_ms"] is not None and (r["exchanges"] or 0) >= min_n:
            recent.setdefault((r["api_name"], r["broker"]), []).append((r["run_time"], r["broker_p99_ms"]))
    over, judged = [], 0
    for r in now:
        seen = [v for _t, v in sorted(recent.get((r["api_name"], r["broker"]), []))[-RECENT:]]
        v = r["broker_p99_ms"]
        if len(seen) < max(min_runs, 1) or v is None or (r["exchanges"] or 0) < min_n:
            continue
        judged += 1
        m = _median(seen)
        if m > 0 and v > factor * m:
            over.append((r["api_name"], r["broker"], v, m, len(seen)))
    return over, judged


def growth_verdicts(policy: Policy, now: list[dict], earlier: tuple[list[dict], list[dict]] | None) -> list[Verdict]:
    """The max_broker_p99_growth policy (none where it is not set): no API's broker p99 on a listener
    beyond that many times its median over the last runs the history holds (RECENT at most), judged
    only where min_history_runs earlier runs had min_latency_n exchanges of it. ``now``: this run's
    run_summary rows (history.tables); ``earlier``: None without a history (--history none)."""
    factor = policy.max_broker_p99_growth
    if factor is None:
        return []
    name = f"no API's broker p99 beyond {factor:g}x its median over the last runs"
    if earlier is None:
        return [Verdict(name, None, "no history to compare with (--history none)")]
    over, judged = growth(earlier[0], now, factor, policy.min_history_runs, policy.min_latency_n)
    if not judged:
        runs = len({r["run_id"] for r in earlier[0]})
        return [Verdict(name, None, f"the history holds {runs} earlier run(s); no API and listener with "
                                    f"{policy.min_latency_n} exchanges in this run and in {policy.min_history_runs} "
                                    "of them (min_history_runs, min_latency_n)")]
    said = [f"{api} on {broker}: broker p99 {v:.1f} ms, {v / m:.1f}x its median {m:.1f} ms over {n} run(s)"
            for api, broker, v, m, n in over]
    from .base import found

    return [Verdict(name, not over, found(said) if over else f"{judged} API(s) and listener(s) judged")]


#: the most series a trend plot draws (the busiest), and the most runs (the latest)
TREND_SERIES = 12
TREND_RUNS = 60


def trends(now: dict[str, pa.Table], earlier: tuple[list[dict], list[dict]]) -> list[str]:
    """The report's Trends plots (SVG), one point per run in the history and this run: exchanges and
    the error rate, network and broker p99 per API (the slowest broker's), segments sent again,
    clients per library. None with fewer than two runs. ``now``, ``earlier``: as for since_last."""
    from .plots import lines

    past_summary, past_clients = earlier
    summary = past_summary + now["run_summary"].to_pylist()
    clients = past_clients + now["clients"].to_pylist()
    times = sorted({r["run_time"] for r in summary + clients})[-TREND_RUNS:]
    if len(times) < 2:
        return []
    keep = set(times)
    per_run: dict[str, dict] = {"exchanges": {}, "errors": {}, "resent": {}}
    p99: dict[str, dict[str, dict]] = {"network": {}, "broker": {}}
    for r in summary:
        t = r["run_time"]
        if t not in keep:
            continue
        per_run["exchanges"][t] = per_run["exchanges"].get(t, 0) + (r["exchanges"] or 0)
        per_run["errors"][t] = per_run["errors"].get(t, 0) + (r["errors"] or 0)
        per_run["resent"][t] = per_run["resent"].get(t, 0) + (r["retransmissions"] or 0)
        for what in p99:
            v = r[f"{what}_p99_ms"]
            if v is not None:
                points = p99[what].setdefault(r["api_name"], {})
                points[t] = max(points.get(t, 0.0), v)
    libraries: dict[str, dict] = {}
    for r in clients:
        if r["run_time"] in keep:
            points = libraries.setdefault(r["client_library"] or "unnamed", {})
            points[r["run_time"]] = points.get(r["run_time"], 0) + 1
    rate = {t: per_run["errors"][t] / n for t, n in per_run["exchanges"].items() if n}

    def busiest(series: dict[str, dict]) -> dict[str, dict]:
        top = sorted(series, key=lambda k: -max(series[k].values()))[:TREND_SERIES]
        return {k: series[k] for k in sorted(top)}

    return [lines("Exchanges per run", {"exchanges": per_run["exchanges"]}, "exchanges"),
            lines("Error rate per run", {"errored share": rate}, "share of exchanges"),
            lines("Network p99 per API (ms)", busiest(p99["network"]), "ms"),
            lines("Broker p99 per API (ms)", busiest(p99["broker"]), "ms"),
            lines("Segments sent again per run", {"retransmissions": per_run["resent"]}, "segments"),
            lines("Clients per library", busiest(libraries), "clients")]
