"""Scheduled reports (rpc/API.md §6.4): their definitions in the accounts store, their periods,
and the schedule runner that emails each report once per period.

A report is a user's: a logspace, the saved searches it is built from (none: every message of
the logspace), a period (daily, weekly or monthly, in UTC), the addresses it is emailed to and
whether the schedule sends it. One period's statistics are built by logbox_core.report_build
(through searchd, with the owner's read rights at build time) and drawn by
logbox_core.report_render (HTML with matplotlib's charts, an email through
logbox_core.deliver). The one idea of the schedule: a report remembers the end of the last
period it was sent for (`sent_through_us`, at first its creation time); a run sends the last
complete period when it ended after that, so each period is sent once, and after downtime only
the last missed period is caught up.

    python -m logbox_core.reports run-due [--accounts DIR] [--searchd SOCK] [--delivery FILE]
    python -m logbox_core.reports list [--accounts DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import re
import secrets
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .accounts import Accounts, Conflict, Invalid, NotFound, SavedSearch, User, rfc3339
from .constants import logspace_name_problem

log = logging.getLogger("logbox_core.reports")

PERIODS = ("daily", "weekly", "monthly")
REPORT_NAME_MAX = 100  # printable characters
REPORT_SEARCHES_MAX = 10  # saved searches per report (one section each)
RECIPIENTS_MAX = 20
RECIPIENT_MAX = 254  # bytes of an address (RFC 5321's path limit)
REPORTS_PER_USER = 100
ERROR_MAX = 500  # characters of last_error kept
# An address as the reports take it: no whitespace, quotes, angle brackets, commas or
# semicolons (nothing that could start another address or header), one "@".
RECIPIENT_RE = re.compile(r"[^@\s<>,;\"()\[\]\\]{1,64}@[A-Za-z0-9.-]{1,189}")
ID_RE = re.compile(r"[0-9a-f]{12}")
MEMBERS = ("name", "logspace", "searches", "period", "recipients", "enabled")


# ---------------------------------------------------------------- periods


@dataclass(frozen=True)
class Period:
    """One period of a report: [start, end) in UTC, named by id (2026-11-26, 2026-W48, 2026-11)."""

    kind: str
    start: dt.datetime
    end: dt.datetime

    @property
    def id(self) -> str:
        if self.kind == "daily":
            return self.start.strftime("%Y-%m-%d")
        if self.kind == "weekly":
            y, w, _ = self.start.isocalendar()
            return f"{y}-W{w:02d}"
        return self.start.strftime("%Y-%m")

    @property
    def start_us(self) -> int:
        return int(self.start.timestamp()) * 1_000_000

    @property
    def end_us(self) -> int:
        return int(self.end.timestamp()) * 1_000_000

    def previous(self) -> Period:
        """The period before this one."""
        return period_of(self.kind, self.start - dt.timedelta(seconds=1))

    def buckets(self) -> int:
        """The histogram's bars: hours of a day, quarter days of a week, days of a month."""
        return {"daily": 24, "weekly": 28}.get(self.kind) or (self.end - self.start).days

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "from": rfc3339(self.start_us),
            "to": rfc3339(self.end_us),
        }


def period_of(kind: str, t: dt.datetime) -> Period:
    """The period of kind holding the instant t (aware)."""
    t = t.astimezone(dt.UTC)
    day = dt.datetime(t.year, t.month, t.day, tzinfo=dt.UTC)
    if kind == "daily":
        return Period(kind, day, day + dt.timedelta(days=1))
    if kind == "weekly":
        start = day - dt.timedelta(days=day.weekday())
        return Period(kind, start, start + dt.timedelta(days=7))
    if kind == "monthly":
        start = day.replace(day=1)
        nxt = (start + dt.timedelta(days=32)).replace(day=1)
        return Period(kind, start, nxt)
    raise ValueError(f"period: expected one of {', '.join(PERIODS)}, got {kind!r}")


def last_complete(kind: str, now: float) -> Period:
    """The last period of kind that ended at or before now (seconds since the epoch)."""
    return period_of(kind, dt.datetime.fromtimestamp(now, dt.UTC)).previous()


def parse_period(kind: str, text: str, now: float) -> Period:
    """The period of kind named by text: its id (2026-11-26, 2026-W48, 2026-11), `last` (the
    last complete one, the default) or `current` (the one in progress).

    :raises Invalid: text names no period of kind, or one that has not started.
    """
    cur = period_of(kind, dt.datetime.fromtimestamp(now, dt.UTC))
    if text in ("", "last"):
        return cur.previous()
    if text == "current":
        return cur
    forms = {
        "daily": (r"\d{4}-\d{2}-\d{2}", "2026-11-26"),
        "weekly": (r"\d{4}-W\d{2}", "2026-W48"),
        "monthly": (r"\d{4}-\d{2}", "2026-11"),
    }
    pattern, example = forms[kind]
    start: dt.datetime | None = None
    if re.fullmatch(pattern, text):
        try:
            if kind == "daily":
                start = dt.datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=dt.UTC)
            elif kind == "weekly":
                d = dt.date.fromisocalendar(int(text[:4]), int(text[6:]), 1)
                start = dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC)
            else:
                start = dt.datetime.strptime(text + "-01", "%Y-%m-%d").replace(tzinfo=dt.UTC)
        except ValueError:
            start = None
    if start is None:
        raise Invalid(f"period: expected last, current or a {kind} period like {example}")
    p = period_of(kind, start)
    if p.start > cur.start:
        raise Invalid(f"period: {text} has not started yet")
    return p


# ---------------------------------------------------------------- definitions


@dataclass(frozen=True)
class Report:
    """A report definition (API.md "Report") and its schedule state."""

    id: str
    owner: str
    name: str
    logspace: str
    searches: tuple[str, ...]
    period: str
    recipients: tuple[str, ...]
    enabled: bool
    created_us: int
    updated_us: int
    sent_through_us: int  # the end of the last period the schedule sent (at first: created)
    last_sent: str | None  # that period's id
    last_run_us: int | None  # when the schedule last tried to send it
    last_error: str | None  # why that try failed (None: it worked)

    def to_json(self) -> dict:
        """API.md "Report"."""
        return {
            "id": self.id,
            "owner": self.owner,
            "name": self.name,
            "logspace": self.logspace,
            "searches": list(self.searches),
            "period": self.period,
            "recipients": list(self.recipients),
            "enabled": self.enabled,
            "created": rfc3339(self.created_us),
            "updated": rfc3339(self.updated_us),
            "last_sent": self.last_sent,
            "last_run": None if self.last_run_us is None else rfc3339(self.last_run_us),
            "last_error": self.last_error,
        }

    @classmethod
    def _from(cls, rec: dict) -> Report:
        return cls(
            rec["id"],
            rec["owner"],
            rec["name"],
            rec["logspace"],
            tuple(rec["searches"]),
            rec["period"],
            tuple(rec["recipients"]),
            rec["enabled"],
            rec["created_us"],
            rec["updated_us"],
            rec["sent_through_us"],
            rec.get("last_sent"),
            rec.get("last_run_us"),
            rec.get("last_error"),
        )

    def describe(self) -> str:
        """How the audit log names it: `report ID 'NAME' of OWNER`."""
        return f"report {self.id} {self.name!r} of {self.owner}"

    def visible_to(self, user: User) -> bool:
        """Its owner's; an admin sees (and manages) every report."""
        return self.owner == user.name or (user.role == "admin" and not user.disabled)


def check_report(body: object, *, partial: bool = False) -> dict:
    """The members of a report's JSON body, checked: name, logspace, searches, period,
    recipients, enabled (name, logspace and period required unless partial).

    :raises Invalid: an unknown or malformed member.
    """
    if not isinstance(body, dict):
        raise Invalid("expected a JSON object")
    extra = sorted(set(body) - set(MEMBERS))
    if extra:
        raise Invalid(f"{extra[0]}: unknown member")
    for k in () if partial else ("name", "logspace", "period"):
        if k not in body:
            raise Invalid(f"{k}: required")
    out: dict = {}
    if "name" in body:
        n = body["name"]
        if not isinstance(n, str) or not 1 <= len(n) <= REPORT_NAME_MAX or not n.isprintable():
            raise Invalid(f"name: expected 1 to {REPORT_NAME_MAX} printable characters")
        out["name"] = n
    if "logspace" in body:
        ls = body["logspace"]
        if (why := logspace_name_problem(ls)) is not None:
            raise Invalid(f"logspace: {why}: {ls!r}")
        out["logspace"] = ls
    if "searches" in body:
        ss = body["searches"]
        if (
            not isinstance(ss, list)
            or len(ss) > REPORT_SEARCHES_MAX
            or not all(isinstance(s, str) and ID_RE.fullmatch(s) for s in ss)
        ):
            raise Invalid(f"searches: expected at most {REPORT_SEARCHES_MAX} saved search ids")
        out["searches"] = list(dict.fromkeys(ss))
    if "period" in body:
        if body["period"] not in PERIODS:
            raise Invalid(f"period: expected one of {', '.join(PERIODS)}")
        out["period"] = body["period"]
    if "recipients" in body:
        rs = body["recipients"]
        if (
            not isinstance(rs, list)
            or len(rs) > RECIPIENTS_MAX
            or not all(
                isinstance(r, str) and len(r) <= RECIPIENT_MAX and RECIPIENT_RE.fullmatch(r)
                for r in rs
            )
        ):
            raise Invalid(f"recipients: expected at most {RECIPIENTS_MAX} email addresses")
        out["recipients"] = list(dict.fromkeys(rs))
    if "enabled" in body:
        if not isinstance(body["enabled"], bool):
            raise Invalid("enabled: expected true or false")
        out["enabled"] = body["enabled"]
    return out


def check_searches(acc: Accounts, owner: User, logspace: str, ids: Sequence[str]) -> None:
    """Each saved search of a report must be one its owner sees, on the report's logspace.

    :raises Invalid: one that is not (named by its id).
    """
    for sid in ids:
        s = acc.get_search(sid)
        if s is None or not s.visible_to(owner):
            raise Invalid(f"searches: no saved search '{sid}'")
        if s.logspace != logspace:
            raise Invalid(f"searches: saved search '{sid}' is on logspace {s.logspace!r}")


def sections(acc: Accounts, report: Report, owner: User) -> list[tuple[str, SavedSearch | None]]:
    """The sections of a report as (title, saved search): one per saved search it names (None
    for one its owner no longer sees or that moved to another logspace), or one of every
    message of the logspace."""
    if not report.searches:
        return [("All messages", None)]
    out: list[tuple[str, SavedSearch | None]] = []
    for sid in report.searches:
        s = acc.get_search(sid)
        ok = s is not None and s.visible_to(owner) and s.logspace == report.logspace
        out.append((s.name if ok and s else f"saved search {sid}", s if ok else None))
    return out


# ---------------------------------------------------------------- the store


def _dumps(rec: dict) -> bytes:
    return json.dumps(rec, separators=(",", ":")).encode()


class Reports:
    """The report definitions in the accounts store's `reports` DB (key: the report's id)."""

    def __init__(self, acc: Accounts) -> None:
        self.acc = acc

    def create(self, owner: str, members: dict) -> Report:
        """A new report of owner from check_report's members (enabled unless told).

        :raises NotFound: no such user.
        :raises Conflict: owner has REPORTS_PER_USER already.
        """
        now = self.acc._now_us()
        users = self.acc._db(b"users")
        with self.acc._txn(b"reports", write=True) as txn:
            if txn.get(owner.encode(), db=users) is None:
                raise NotFound(f"no user '{owner}'")
            mine = sum(1 for _, v in txn.cursor() if json.loads(v)["owner"] == owner)
            if mine >= REPORTS_PER_USER:
                raise Conflict(f"'{owner}' has {REPORTS_PER_USER} reports already")
            while True:
                rid = secrets.token_hex(6)
                if txn.get(rid.encode()) is None:
                    break
            rec = {
                "id": rid,
                "owner": owner,
                "name": members["name"],
                "logspace": members["logspace"],
                "searches": members.get("searches", []),
                "period": members["period"],
                "recipients": members.get("recipients", []),
                "enabled": members.get("enabled", True),
                "created_us": now,
                "updated_us": now,
                "sent_through_us": now,
                "last_sent": None,
                "last_run_us": None,
                "last_error": None,
            }
            txn.put(rid.encode(), _dumps(rec))
        return Report._from(rec)

    def get(self, rid: str) -> Report | None:
        """The report with that id, or None."""
        if not isinstance(rid, str) or not ID_RE.fullmatch(rid):
            return None
        with self.acc._txn(b"reports") as txn:
            raw = txn.get(rid.encode())
        return Report._from(json.loads(raw)) if raw else None

    def list(self) -> list[Report]:
        """Every report, by name then id (the caller keeps what a user may see)."""
        with self.acc._txn(b"reports") as txn:
            out = [Report._from(json.loads(v)) for _, v in txn.cursor()]
        return sorted(out, key=lambda r: (r.name.casefold(), r.id))

    def _change(self, rid: str, change: Callable[[dict], None]) -> Report:
        with self.acc._txn(b"reports", write=True) as txn:
            raw = txn.get(rid.encode()) if ID_RE.fullmatch(str(rid)) else None
            if raw is None:
                raise NotFound(f"no report '{rid}'")
            rec = json.loads(raw)
            change(rec)
            txn.put(rid.encode(), _dumps(rec))
        return Report._from(rec)

    def update(self, rid: str, members: dict) -> Report:
        """Changes the given members (check_report(partial=True)).

        :raises NotFound: no such report.
        """

        def change(rec: dict) -> None:
            rec.update(members)
            rec["updated_us"] = max(self.acc._now_us(), rec["created_us"])

        return self._change(rid, change)

    def record_run(self, rid: str, period: Period | None, error: str | None) -> Report:
        """The schedule's try: sent for period (error None), or failed with error."""

        def change(rec: dict) -> None:
            rec["last_run_us"] = self.acc._now_us()
            rec["last_error"] = None if error is None else error[:ERROR_MAX]
            if error is None and period is not None:
                rec["sent_through_us"] = max(rec["sent_through_us"], period.end_us)
                rec["last_sent"] = period.id

        return self._change(rid, change)

    def delete(self, rid: str) -> Report:
        """Deletes a report; what it was.

        :raises NotFound: no such report.
        """
        with self.acc._txn(b"reports", write=True) as txn:
            raw = txn.get(rid.encode()) if ID_RE.fullmatch(str(rid)) else None
            if raw is None:
                raise NotFound(f"no report '{rid}'")
            txn.delete(rid.encode())
        return Report._from(json.loads(raw))


# ---------------------------------------------------------------- the schedule


def due(report: Report, now: float) -> Period | None:
    """The period the schedule sends report for at now: the last complete one, when it ended
    after the last one sent (or after the report was made); None when nothing is due."""
    if not report.enabled or not report.recipients:
        return None
    p = last_complete(report.period, now)
    return p if p.end_us > report.sent_through_us else None


@dataclass
class RunResult:
    """What run_due did with one report."""

    report: str
    period: str
    error: str | None


def run_due(
    acc: Accounts,
    searchd: Any,
    relay: Any,
    *,
    now: float | None = None,
    box: str | None = None,
) -> list[RunResult]:
    """Builds and emails every report that is due (see due()), recording each try in the
    report and in the audit log ("report_send", by the report's owner, from "schedule").
    A failed one stays due and is tried again at the next run; one refused because its owner
    may not read the logspace (status 403) is recorded once, not again while that lasts.

    :param relay: the SMTP relay (logbox_core.deliver's SmtpRelay); None: every due report
        fails with "no SMTP relay configured".
    """
    from . import deliver
    from .report_build import ReportRefused, build
    from .report_render import email_message

    now = time.time() if now is None else now
    box = box or socket.gethostname()
    store = Reports(acc)
    out: list[RunResult] = []
    for r in store.list():
        p = due(r, now)
        if p is None:
            continue
        error: str | None = None
        status = 200
        try:
            if relay is None:
                raise deliver.DeliveryError("no SMTP relay configured")
            data = build(acc, searchd, r, p, now=now)
            deliver.send_email(relay, email_message(data, relay, box=box))
        except ReportRefused as e:
            error, status = str(e), 403
            if error == r.last_error:  # refused as last time: said once, not every run
                continue
        except deliver.DeliveryError as e:
            error, status = str(e), 503
        except Exception as e:  # a searchd failure, a store failure: tried again next run
            error, status = f"{type(e).__name__}: {e}", 503
        store.record_run(r.id, p, error)
        acc.audit(
            "report_send",
            user=r.owner,
            address="schedule",
            logspace=r.logspace,
            status=status,
            detail=f"{r.describe()}: period {p.id} to {', '.join(r.recipients)}"
            + ("" if error is None else f": {error}"),
        )
        if error is None:
            log.info("%s: period %s sent", r.describe(), p.id)
        else:
            log.error("%s: period %s not sent: %s", r.describe(), p.id, error)
        out.append(RunResult(r.id, p.id, error))
    return out


def relay_of(path: str) -> Any:
    """The SMTP relay of the delivery settings file at path (None without one).

    :raises SettingsError: the file cannot be read or is not valid.
    """
    from . import deliver

    return deliver.load_settings(path).smtp


def main(argv: Sequence[str] | None = None) -> int:
    """The CLI: run-due (the systemd timer's and `make run`'s) and list."""
    from . import deliver
    from .searchd import Searchd

    ap = argparse.ArgumentParser(prog="logbox-reports", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--accounts", default=os.environ.get("LOGBOX_ACCOUNTS", "/var/lib/logbox-accounts")
    )
    ap.add_argument(
        "--searchd", default=os.environ.get("LOGBOX_SEARCHD_SOCKET", "/run/logbox/searchd.sock")
    )
    ap.add_argument(
        "--delivery",
        default=os.environ.get("LOGBOX_DELIVERY_SETTINGS", "/etc/logbox/settings/notify.json"),
        help="the delivery settings file (logbox_core.deliver; its SMTP relay)",
    )
    sub = ap.add_subparsers(dest="verb", required=True)
    sub.add_parser("run-due", help="email every report whose period ended since its last run")
    sub.add_parser("list", help="the report definitions, one JSON object a line")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="logbox-reports: %(message)s")
    acc = Accounts(args.accounts)
    try:
        if args.verb == "list":
            for r in Reports(acc).list():
                print(json.dumps(r.to_json()))
            return 0
        try:
            relay = relay_of(args.delivery)
        except deliver.SettingsError as e:
            log.error("%s", e)
            return 2
        results = run_due(acc, Searchd(args.searchd), relay)
        return 1 if any(r.error for r in results) else 0
    finally:
        acc.close()


if __name__ == "__main__":
    sys.exit(main())
