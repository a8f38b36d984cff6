"""The command line's first look (``kafkawire summary``): the tables it prints, made from the
exchange and connection rows without Spark, with the figures defined where the audits' are
(figures.py): per api, client and broker; per client (library, the latency split, losses); errors;
statuses; API versions per client; per file, the capture's health."""

from __future__ import annotations

import pyarrow as pa

from . import figures
from .decode.status import CAPTURE_DAMAGED

SUMMARY_ROWS = 50  # rows of each summary table shown; a line counts the rest


def summary(table: pa.Table, health: pa.Table, min_latency_n: int = figures.MIN_LATENCY_N) -> dict[str, pa.Table]:
    """Per api, client and broker, the exchange_summary audit's figures (figures.SUMMARY:
    exchanges, errors, timed exchanges, p50/p99 latency in ms where at least ``min_latency_n`` were
    timed, unanswered, version negotiations); errors by name; statuses; then per file the capture
    health audit's figures. Like tshark's -z statistics, the figures defined where the audits'
    are (figures.py)."""
    flags = {name: figures.mask(what, table).to_pylist() for name, what in figures.SUMMARY if isinstance(what, tuple)}
    counted = figures.mask(figures.SUMMARISED, table).to_pylist()
    damage = figures.mask(figures.DAMAGED, table).to_pylist()
    groups: dict[tuple, dict] = {}
    errors: dict[tuple, int] = {}
    statuses: dict[str, int] = {}
    damaged: dict[str, int] = {}
    rows = table.select(["capture_file", "api_name", "client_id", "broker_ip", "broker_port", "error_name",
                         "latency_ms", "status"]).to_pylist()
    for i, r in enumerate(rows):
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        if damage[i]:
            damaged[r["capture_file"]] = damaged.get(r["capture_file"], 0) + 1
        if not counted[i]:
            continue
        api = r["api_name"] or figures.NOT_CAPTURED
        g = groups.setdefault((api, r["client_id"], f"{r['broker_ip']}:{r['broker_port']}"),
                              {"exchanges": 0, "latency": [], **{name: 0 for name in flags}})
        g["exchanges"] += 1
        for name, marks in flags.items():
            g[name] += marks[i]
        if flags["timed"][i]:
            g["latency"].append(r["latency_ms"])
        if flags["errors"][i]:
            errors[(api, r["error_name"])] = errors.get((api, r["error_name"]), 0) + 1
    order = sorted(groups.items(), key=lambda kv: (-kv[1]["exchanges"], kv[0][0], kv[0][1] or ""))

    def measure(g: dict, name: str, what) -> float | int | None:
        if isinstance(what, float):
            return figures.quantile(g["latency"], what) if g["timed"] >= min_latency_n else None
        return g[name]

    by_api = pa.table({"api_name": [k[0] for k, _ in order], "client_id": [k[1] for k, _ in order],
                       "broker": [k[2] for k, _ in order],
                       **{name: [measure(g, name, what) for _, g in order] for name, what in figures.SUMMARY}})
    err = sorted(errors.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or ""))
    by_error = pa.table({"api_name": [k[0] for k, _ in err], "error_name": [k[1] for k, _ in err],
                         "exchanges": [n for _, n in err]})
    st = sorted(statuses.items(), key=lambda kv: (-kv[1], kv[0]))
    by_status = pa.table({"status": [k for k, _ in st], "rows": [n for _, n in st]})
    return {"exchanges by api, client and broker": by_api, "clients": clients(table, health, min_latency_n),
            "errors": by_error, "statuses": by_status,
            "api versions by client": _versions(table), "capture health": _files(health, damaged)}


def clients(table: pa.Table, health: pa.Table, min_latency_n: int = figures.MIN_LATENCY_N) -> pa.Table:
    """Per client (client id): its library (client_library, the one most of its rows name), its
    exchanges and connections, the latency split at p50 and p99 (network_ms, broker_ms: over the
    exchanges whose broker time was timed, where at least ``min_latency_n`` were; ``broker_untimed``:
    those a loss the capture shows kept untimed) and the segments its connections lost on the path
    each way (client_lost, broker_lost). Busiest first."""
    rows = table.select(["client_id", "client_library", "client_ip", "client_port", "broker_ip", "broker_port",
                         "network_ms", "broker_ms", "status"]).to_pylist()
    counted = figures.mask(figures.SUMMARISED, table).to_pylist()
    who: dict[tuple, str | None] = {}  # a connection's client: the first client id its requests gave
    for r in rows:
        conn = (r["client_ip"], r["client_port"], r["broker_ip"], r["broker_port"])
        if who.get(conn) is None:
            who[conn] = r["client_id"]
    per: dict[str | None, dict] = {}
    for i, r in enumerate(rows):
        if not counted[i]:
            continue
        conn = (r["client_ip"], r["client_port"], r["broker_ip"], r["broker_port"])
        g = per.setdefault(who[conn], {"libraries": {}, "exchanges": 0, "conns": set(), "net": [], "brk": [],
                                            "untimed": 0, "client_lost": 0, "broker_lost": 0})
        g["exchanges"] += 1
        g["conns"].add(conn)
        if r["client_library"]:
            g["libraries"][r["client_library"]] = g["libraries"].get(r["client_library"], 0) + 1
        if r["broker_ms"] is not None:
            g["net"].append(r["network_ms"])
            g["brk"].append(r["broker_ms"])
        elif r["network_ms"] is not None:
            g["untimed"] += 1
    is_connection = figures.mask(figures.CONNECTION, health).to_pylist()
    for i, c in enumerate(health.select(["client_ip", "client_port", "broker_ip", "broker_port",
                                         "client_lost_segments", "broker_lost_segments"]).to_pylist()):
        conn = (c["client_ip"], c["client_port"], c["broker_ip"], c["broker_port"])
        of = per.get(who[conn]) if is_connection[i] and conn in who else None
        if of is not None:  # (a connection with no exchange counted, a TLS one not decrypted: no client)
            of["client_lost"] += c["client_lost_segments"] or 0
            of["broker_lost"] += c["broker_lost_segments"] or 0
    order = sorted(per.items(), key=lambda kv: (-kv[1]["exchanges"], kv[0] or ""))

    def q(values: list[float], at: float) -> float | None:
        return figures.quantile(values, at) if len(values) >= min_latency_n else None

    return pa.table({
        "client_id": [k for k, _ in order],
        "library": [max(g["libraries"], key=g["libraries"].get) if g["libraries"] else None for _, g in order],
        "exchanges": [g["exchanges"] for _, g in order], "connections": [len(g["conns"]) for _, g in order],
        **{f"{name}_{p}_ms": [q(g[key], at) for _, g in order]
           for key, name in (("net", "network"), ("brk", "broker")) for p, at in (("p50", 0.5), ("p99", 0.99))},
        "broker_untimed": [g["untimed"] for _, g in order],
        "client_lost": [g["client_lost"] for _, g in order], "broker_lost": [g["broker_lost"] for _, g in order]})


def _versions(table: pa.Table) -> pa.Table:
    """Per client (id, software it named) and api: the request versions it sent and how many
    exchanges: the upgrade question (which versions does each client use?) answered without Spark.
    (The audit job's upgrade_readiness says which of them a target release refuses.)"""
    seen: dict[tuple, dict[int, int]] = {}
    cols = table.select(["client_id", "client_software_name", "client_software_version", "api_key", "api_name",
                         "api_version"]).to_pylist()
    for r in cols:
        if r["api_version"] is None or r["api_name"] is None:
            continue
        software = " ".join(x for x in (r["client_software_name"], r["client_software_version"]) if x) or None
        versions = seen.setdefault((r["client_id"], software, r["api_key"], r["api_name"]), {})
        versions[r["api_version"]] = versions.get(r["api_version"], 0) + 1
    order = sorted(seen.items(), key=lambda kv: (kv[0][0] or "", kv[0][1] or "", kv[0][2]))
    return pa.table({"client_id": [k[0] for k, _ in order], "client_software": [k[1] for k, _ in order],
                     "api_name": [k[3] for k, _ in order],
                     "versions": [", ".join(f"v{v}" for v in sorted(vs)) for _, vs in order],
                     "exchanges": [sum(vs.values()) for _, vs in order]})


def _files(health: pa.Table, damaged: dict[str, int]) -> pa.Table:
    """Per capture file: connections, the per-direction sums of figures.FILE_SUMS, damaged
    exchanges, and the file's own damage."""
    files: dict[str, dict] = {}

    def of(name: str) -> dict:
        return files.setdefault(name, {"connections": 0, **{s: 0 for s in figures.FILE_SUMS},
                                       "damaged_exchanges": damaged.get(name, 0), "file_damage": "none"})

    is_connection = figures.mask(figures.CONNECTION, health).to_pylist()
    for i, r in enumerate(health.to_pylist()):
        f = of(r["capture_file"])
        if r["status"] == CAPTURE_DAMAGED:
            f["file_damage"] = r["detail"]
        elif is_connection[i]:
            f["connections"] += 1
            for s in figures.FILE_SUMS:
                f[s] += figures.both(r, s)
    for name in damaged:
        of(name)
    names = sorted(files)
    columns = ["connections", *figures.FILE_SUMS, "damaged_exchanges", "file_damage"]
    return pa.table({"capture_file": names, **{col: [files[n][col] for n in names] for col in columns}})
