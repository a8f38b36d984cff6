"""The audits people schedule, as functions from kafkawire's rows (Spark DataFrames) to result
DataFrames. ``jobs/audit.py`` runs them, writes the results as Parquet and a report.

Each audit is one module of this package holding one :class:`~.base.Audit`, ``AUDIT``: its name,
the function that takes :class:`Rows` (the exchanges, connections and partitions rows of the same
captures) and returns ``{table name: DataFrame}`` (every table with a ``capture_date`` column, the
UTC date of the traffic, by which the job partitions what it writes), the report's introduction,
its verdicts and its plots. A new audit is a new module (and its test and docs/audits.md): the
package finds it. :data:`AUDITS` lists them in report order; :func:`policies` judges the results
against :class:`Policy`.

Imports: pyspark, protocol/, wire/fs.py (where results go) and the ground modules; the rows come as
DataFrames, not from the stages.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import Audit, Policy, Results, Rows, Verdict, exit_status, failed, negotiated

__all__ = ["AUDITS", "Audit", "Policy", "Rows", "Verdict", "exit_status", "failed", "judge", "negotiated",
           "policies"]
#: the modules of this package that are not audits
_NOT_AUDITS = {"base", "plots", "report", "output", "job", "loading", "history", "compare", "metrics"}


def _audits() -> dict[str, Audit]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name not in _NOT_AUDITS:
            audit = importlib.import_module(f"{__name__}.{info.name}").AUDIT
            assert audit.name == info.name, f"audits/{info.name}.py describes {audit.name!r}"
            found.append(audit)
    return {a.name: a for a in sorted(found, key=lambda a: a.order)}


#: every audit by name, in report order
AUDITS: dict[str, Audit] = _audits()


def policies(results: Results, policy: Policy, history: list[Verdict] | None = None) -> list[Verdict]:
    """Check collected results (audit -> table -> rows as dicts) against the policy, audit by audit
    in report order; a policy whose audit did not run is not judged. ``history``: the verdicts of
    the policies judged against earlier runs (history.Past.verdicts), weighed on this run's evidence
    as the others."""
    out = [v for a in AUDITS.values() if a.verdicts is not None and a.name in results
           for v in a.verdicts(results, policy)]
    return judge(out + (history or []), results, policy)


def judge(verdicts: list[Verdict], results: Results, policy: Policy) -> list[Verdict]:
    """A verdict that holds on the tables is ok only where capture_health's coverage shows it saw
    enough of what it checks (what its ``needs`` names): at least ``min_exchanges`` decoded Kafka
    exchanges, and no Kafka listener with more than ``max_undecoded_fraction`` of its bytes not
    decoded where those bytes could hide a failure. The TLS policies rest on the handshakes, in
    clear with or without a key log: every connection's handshake seen (its version and suite), and
    for certificates, every certificate (a TLS 1.3 one is encrypted: without the key log, that part
    is what stays inconclusive). Otherwise it is inconclusive, and its detail
    says why in one line. A failure stands: what was seen fails. (Without the coverage table, the
    tables alone are judged.)"""
    cov = results.get("capture_health", {}).get("coverage")
    if cov is None:
        return verdicts
    return [v if v.ok is not True else _evidence(v, cov, policy) for v in verdicts]


def _evidence(v: Verdict, cov: list[dict], policy: Policy) -> Verdict:
    exchanges = sum(r["exchanges"] or 0 for r in cov)
    why = []
    if v.needs == "capture":
        if not sum(r["bytes"] or 0 for r in cov):
            why.append("no Kafka traffic was captured")
    elif v.needs in ("handshakes", "certificates"):
        pass  # (judged from the TLS handshakes, in clear whether or not their records were decrypted)
    elif exchanges < policy.min_exchanges:
        why.append(f"{exchanges} Kafka exchanges decoded (min_exchanges {policy.min_exchanges})")
    if v.needs == "decoded":
        why += [_hidden(r) for r in cov if r["undecoded_fraction"] > policy.max_undecoded_fraction]
    elif v.needs == "plaintext":
        why += [_hidden(r, plaintext=True) for r in cov if r["plaintext_undecoded_fraction"] >
                policy.max_undecoded_fraction]
    elif v.needs == "handshakes":
        why += [f"{r['tls_version_unknown']} TLS connections on {r['listener']} without their handshake"
                for r in cov if r["tls_version_unknown"]]
    elif v.needs == "certificates":
        why += [f"{r['certificates_hidden']} TLS connections on {r['listener']} show their certificate only "
                "decrypted: --tls-keylog FILE decrypts them" for r in cov if r["certificates_hidden"]]
    if not why:
        return v
    more = f"; and {len(why) - 3} more" if len(why) > 3 else ""
    seen = f"{v.detail}, but " if v.needs == "certificates" and v.applies and v.detail != "none seen" else ""
    return Verdict(v.name, None, seen + "; ".join(why[:3]) + more, v.needs)


def _hidden(r: dict, plaintext: bool = False) -> str:
    """Why a listener's traffic could hide what a verdict checks, in one clause."""
    if r["tls_not_decrypted"] and not plaintext:
        return (f"{r['tls_not_decrypted']} TLS connections ({r['tls_undecrypted_bytes']} bytes) on {r['listener']} "
                "were not decrypted: --tls-keylog FILE decrypts them")
    frac = r["plaintext_undecoded_fraction"] if plaintext else r["undecoded_fraction"]
    return (f"{frac:.1%} of the bytes on {r['listener']} were not decoded ({r['lost_bytes']} lost by the capture, "
            f"{r['skipped_bytes']} in no frame)")
