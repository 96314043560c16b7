"""One period of a report, built: its statistics asked of searchd as the report's owner, and the
alert counts of its logspace read from the accounts store (rpc/API.md §6.4).

Each section (a saved search, or every message) is four searchd answers over the period:
/v1/histogram (its total is the section's count), /v1/top field=severity, host and program.
Rights are the owner's at build time: an owner who may no longer read the logspace (or was
disabled or deleted) gets ReportRefused, never numbers. Alert counts come from the
alerts' DBs (`alerts`, `alert_history`: logbox_core/alerts.py, written by logbox-alertd) when
they exist, read by name without creating them: the owner's alerts on the logspace (an admin's:
every one) and how often each fired in the period; without any the report says no alerts are
defined.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import lmdb

from .accounts import Accounts, User
from .constants import SEVERITIES
from .reports import Period, Report, sections
from .searchd import Searchd, caller_name

TOP_K = 10  # hosts and programs listed per section


class ReportRefused(Exception):
    """The report cannot be built for its owner (no read right, no such or a disabled user)."""


@dataclass
class Section:
    """One section's numbers (None throughout when its saved search is gone)."""

    title: str
    query: str | None
    total: int = 0
    severities: dict[str, int] = field(default_factory=dict)  # every severity name, in order
    hosts: list[tuple[str, int]] = field(default_factory=list)
    programs: list[tuple[str, int]] = field(default_factory=list)
    step_us: int = 0
    histogram: list[tuple[int, int]] = field(default_factory=list)  # (from µs, count)
    warnings: list[str] = field(default_factory=list)


@dataclass
class ReportData:
    """One built period of a report: what report_render draws."""

    report: Report
    period: Period
    built_us: int
    sections: list[Section]
    alerts: dict[str, int] | None  # alert name -> times it fired; None: no alerts defined
    alerts_defined: int

    def to_json(self) -> dict:
        """The numbers as JSON (API.md "ReportData")."""
        return {
            "report": self.report.to_json(),
            "period": self.period.to_json(),
            "sections": [
                {
                    "title": s.title,
                    "query": s.query,
                    "total": s.total,
                    "severities": s.severities,
                    "hosts": [{"value": v, "count": n} for v, n in s.hosts],
                    "programs": [{"value": v, "count": n} for v, n in s.programs],
                    "step_us": s.step_us,
                    "histogram": [{"from": t, "count": n} for t, n in s.histogram],
                    "warnings": s.warnings,
                }
                for s in self.sections
            ],
            "alerts": self.alerts,
        }


def _top(sd: Searchd, base: dict[str, str], name: str, k: int) -> list[tuple[str, int]]:
    ans = sd.get("/v1/top", {**base, "field": name, "k": str(k)})
    return [(v["value"], int(v["count"])) for v in ans["values"]]


def build_section(sd: Searchd, logspace: str, period: Period, title: str, query: str) -> Section:
    """One section's numbers for query over period.

    :raises SearchdError: searchd refused or failed.
    """
    base = {
        "logspace": logspace,
        "q": query,
        "from": str(period.start_us // 1_000_000),
        "to": str(period.end_us // 1_000_000),
    }
    hist = sd.get("/v1/histogram", {**base, "buckets": str(period.buckets())})
    sev = dict(_top(sd, base, "severity", len(SEVERITIES)))
    s = Section(title, query, total=int(hist["total"]), step_us=int(hist["step_us"]))
    s.histogram = [(int(b["from"]), int(b["count"])) for b in hist["buckets"]]
    s.severities = {name: sev.get(name, 0) for name in SEVERITIES}
    s.hosts = _top(sd, base, "host", TOP_K)
    s.programs = _top(sd, base, "program", TOP_K)
    s.warnings = list(dict.fromkeys(hist.get("warnings", [])))
    return s


def build(
    acc: Accounts, sd: Searchd, report: Report, period: Period, *, now: float | None = None
) -> ReportData:
    """The report's numbers over period, asked of searchd as its owner.

    :raises ReportRefused: the owner may not read the report's logspace (now).
    :raises SearchdError: searchd refused or failed.
    """
    owner = acc.get_user(report.owner)
    if owner is None or not owner.can_read(report.logspace):
        raise ReportRefused(
            f"{report.describe()}: {report.owner} may not read logspace {report.logspace!r}"
        )
    asking = sd.as_caller(caller_name("user", owner.name))
    out: list[Section] = []
    for title, saved in sections(acc, report, owner):
        if saved is None and report.searches:
            out.append(Section(title, None, warnings=["this saved search is no longer there"]))
            continue
        query = "*" if saved is None else saved.query
        out.append(build_section(asking, report.logspace, period, title, query))
    alerts, defined = alert_counts(acc, owner, report.logspace, period)
    now = time.time() if now is None else now
    return ReportData(report, period, int(now * 1_000_000), out, alerts, defined)


# ---------------------------------------------------------------- alert counts


def _named_db(acc: Accounts, name: bytes) -> tuple[lmdb.Environment, Any] | None:
    """The accounts environment and its DB name, when that DB exists (never created here)."""
    env, dbs = acc._open()
    if name in dbs:
        return env, dbs[name]
    try:
        return env, env.open_db(name, create=False)
    except lmdb.Error:  # NotFoundError: no such DB; DbsFullError: no handle slot for it
        return None


def alert_counts(
    acc: Accounts, owner: User, logspace: str, period: Period
) -> tuple[dict[str, int] | None, int]:
    """How often each of owner's alerts on logspace (an admin's: every alert on it) fired in
    period, by alert name (test firings not counted), and how many there are; (None, 0) when
    there is none (or no alerts store).

    The alerts' layout (logbox_core/alerts.py): `alerts` holds {"id", "owner", "name", "search"
    (a saved search id: the logspace is the saved search's)...}; `alert_history` keys are the
    alert id (12 bytes) + 8 bytes big-endian µs time + 2 bytes n, values {"kind": "firing" |
    "test", ...}.
    """
    found = _named_db(acc, b"alerts")
    if found is None:
        return None, 0
    env, db = found
    recs: list[tuple[str, dict]] = []
    with env.begin(db=db) as txn:
        for k, v in txn.cursor():
            rec = _loads(v)
            if rec and (rec.get("owner") == owner.name or owner.role == "admin"):
                recs.append((k.decode("ascii", "replace"), rec))
    names: dict[str, str] = {}
    for aid, rec in recs:
        ls = rec.get("logspace")
        if ls is None and isinstance(rec.get("search"), str):
            s = acc.get_search(rec["search"])
            ls = None if s is None else s.logspace
        if ls == logspace:
            name = str(rec.get("name") or aid)
            names[aid] = name if name not in names.values() else f"{name} ({aid})"
    if not names:
        return None, 0
    counts = dict.fromkeys(names.values(), 0)
    hist = _named_db(acc, b"alert_history")
    if hist is not None:
        env, db = hist
        with env.begin(db=db) as txn:
            cur = txn.cursor()
            for aid, name in names.items():
                prefix = aid.encode()
                if not cur.set_range(prefix + period.start_us.to_bytes(8, "big")):
                    continue
                for k, v in cur:
                    if not k.startswith(prefix) or len(k) < len(prefix) + 8:
                        break
                    if int.from_bytes(k[len(prefix) : len(prefix) + 8], "big") >= period.end_us:
                        break
                    rec = _loads(v)
                    if rec is not None and rec.get("kind") != "test":
                        counts[name] += 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].casefold()))
    return dict(ranked), len(names)


def _loads(v: bytes) -> dict | None:
    try:
        rec = json.loads(v)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None
