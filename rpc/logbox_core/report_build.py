"""One period of a report, built: its statistics asked of searchd as the report's owner, and the
alert counts of its logspace read from the accounts store (rpc/API.md §6.2).

Each section (a saved search, or every message) is four searchd answers over the period:
/v1/histogram (its total is the section's count), /v1/top field=severity, host and program.
Rights are the owner's at build time: an owner who may no longer read the logspace (or was
disabled or deleted) gets ReportRefused, never numbers. Alert counts come from the
`alert_history` DB when it exists (written by the alerts, logbox-alertd), read defensively:
a record is counted when it is a JSON object on this logspace whose time falls in the period
and whose state is not "test"; without the DB the report says no alerts are defined.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass, field
from typing import Any

import lmdb

from .accounts import Accounts
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
    alerts, defined = alert_counts(acc, report.logspace, period)
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


def _time_us(rec: dict) -> int | None:
    """A history record's time: time_us (µs), or time (RFC 3339)."""
    if isinstance(rec.get("time_us"), int):
        return rec["time_us"]
    t = rec.get("time")
    if isinstance(t, str):
        try:
            return int(dt.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() * 1e6)
        except ValueError:
            return None
    return None


def alert_counts(acc: Accounts, logspace: str, period: Period) -> tuple[dict[str, int] | None, int]:
    """How often each alert on logspace fired in period (by alert name), and how many alerts
    are defined on it; (None, 0) when the alerts store does not exist (no alerts defined)."""
    defined = 0
    names: dict[str, str] = {}
    found = _named_db(acc, b"alerts")
    if found is not None:
        env, db = found
        with env.begin(db=db) as txn:
            for _, v in txn.cursor():
                rec = _loads(v)
                if rec and rec.get("logspace") == logspace:
                    defined += 1
                    names[str(rec.get("id"))] = str(rec.get("name", rec.get("id")))
    hist = _named_db(acc, b"alert_history")
    if hist is None:
        return (None, 0) if found is None else ({}, defined)
    counts: dict[str, int] = {}
    env, db = hist
    with env.begin(db=db) as txn:
        for _, v in txn.cursor():
            rec = _loads(v)
            if not rec or rec.get("logspace") != logspace or rec.get("state") == "test":
                continue
            t = _time_us(rec)
            if t is None or not period.start_us <= t < period.end_us:
                continue
            aid = str(rec.get("alert_id", ""))
            name = str(rec.get("alert") or names.get(aid) or aid or "alert")
            counts[name] = counts.get(name, 0) + 1
    if found is None and not counts:
        return None, 0
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))), defined


def _loads(v: bytes) -> dict | None:
    try:
        rec = json.loads(v)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None
