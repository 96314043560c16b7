"""Scheduled reports in the web UI (webui/UI.md "Reports"): the list with its download links
(the last complete period and the ones before it), making one, sending one now, scheduling it
or not, deleting. The
same store, rules and audit actions as the API's (rpc/API.md §6.4; logbox_core.reports): a
user sees and changes their own reports, an admin every report; making one needs the read right
on its logspace; a download is built now with the owner's rights."""

from __future__ import annotations

import re
import socket
import time
from typing import Any

from flask import Blueprint, Response, abort, flash, redirect, render_template, request, url_for
from logbox_core import deliver
from logbox_core.accounts import AccountsError
from logbox_core.report_build import ReportRefused, build
from logbox_core.report_render import email_message, page
from logbox_core.reports import (
    PERIODS,
    Period,
    Report,
    Reports,
    check_report,
    check_searches,
    parse_period,
)
from logbox_core.searchd import SearchdError

from .auth import audit, current_user, denied, login_required
from .search import readable_logspaces
from .state import accounts, searchd, state

bp = Blueprint("reports", __name__)

PAST_PERIODS = 6  # download links per report: the last complete period and those before
PAGE_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def store() -> Reports:
    return Reports(accounts())


def _mine(rid: str) -> Report:
    """The report rid when the signed-in user may see it (else 404)."""
    user = current_user()
    assert user is not None
    r = store().get(rid)
    if r is None or not r.visible_to(user):
        abort(404, description=f"No report '{rid}'.")
    return r


def past_periods(r: Report, now: float) -> list[Period]:
    """The last PAST_PERIODS complete periods of r, newest first."""
    p = parse_period(r.period, "last", now)
    out = [p]
    while len(out) < PAST_PERIODS:
        p = p.previous()
        out.append(p)
    return out


@bp.route("/reports")
@login_required
def reports_list() -> Any:
    """GET /reports: the user's reports (an admin: every one) with their download links, and
    the form that makes one."""
    user = current_user()
    assert user is not None
    now = time.time()
    rows = [{"r": r, "periods": past_periods(r, now)} for r in store().list() if r.visible_to(user)]
    searches = [s for s in accounts().list_searches() if s.visible_to(user)]
    try:
        logspaces = [ls["name"] for ls in readable_logspaces()]
    except SearchdError:
        logspaces = []
    return render_template(
        "reports/reports.html",
        rows=rows,
        searches=searches,
        logspaces=logspaces,
        periods=PERIODS,
    )


@bp.route("/reports", methods=["POST"])
@login_required
def create() -> Any:
    """POST /reports: makes a report from the form (name, logspace, period, searches,
    recipients, enabled)."""
    user = current_user()
    assert user is not None
    f = request.form
    body: dict[str, Any] = {
        "name": f.get("name", "").strip(),
        "logspace": f.get("logspace", ""),
        "period": f.get("period", ""),
        "searches": f.getlist("searches"),
        "recipients": [a for a in re.split(r"[\s,;]+", f.get("recipients", "")) if a],
        "enabled": f.get("enabled") == "on",
    }
    try:
        members = check_report(body)
        if not user.can_read(members["logspace"]):
            denied(
                f"{user.name} may not read logspace {members['logspace']!r}", members["logspace"]
            )
        check_searches(accounts(), user, members["logspace"], members.get("searches", []))
        r = store().create(user.name, members)
    except AccountsError as e:
        flash(f"Not made: {e.message}")
        return redirect(url_for("reports.reports_list"), 303)
    audit("report_create", status=201, logspace=r.logspace, detail=r.describe())
    flash(f"Made the report {r.name!r}.")
    return redirect(url_for("reports.reports_list"), 303)


def _built(r: Report, period: str, action: str) -> Any:
    """One period of r built with its owner's rights (a refusal is a 403, audited)."""
    try:
        p = parse_period(r.period, period, time.time())
    except AccountsError as e:
        abort(400, description=e.message)
    try:
        return build(accounts(), searchd(), r, p)
    except ReportRefused as e:
        denied(str(e), r.logspace)
    except SearchdError as e:
        audit(action, logspace=r.logspace, status=e.status, detail=f"{r.describe()}: {e.message}")
        raise


@bp.route("/reports/<id>/download")
@login_required
def download(id: str) -> Any:
    """GET /reports/<id>/download?period=...: the report's page as an attachment."""
    r = _mine(id)
    data = _built(r, request.args.get("period", "last"), "report_render")
    audit(
        "report_render",
        logspace=r.logspace,
        results=sum(s.total for s in data.sections),
        detail=f"{r.describe()}: period {data.period.id}",
    )
    resp = Response(page(data, socket.gethostname()), mimetype="text/html")
    resp.headers["Content-Disposition"] = (
        f'attachment; filename="report-{r.id}-{data.period.id}.html"'
    )
    resp.headers["Content-Security-Policy"] = PAGE_CSP
    return resp


@bp.route("/reports/<id>/send", methods=["POST"])
@login_required
def send(id: str) -> Any:
    """POST /reports/<id>/send: emails the last complete period to the recipients now."""
    r = _mine(id)
    back = redirect(url_for("reports.reports_list"), 303)
    if not r.recipients:
        flash(f"Not sent: the report {r.name!r} has no recipients.")
        return back
    try:
        relay = deliver.load_settings(state().config["DELIVERY_SETTINGS"]).smtp
    except deliver.SettingsError as e:
        flash(f"Not sent: {e}")
        return back
    if relay is None:
        flash("Not sent: no SMTP relay is configured (delivery settings).")
        return back
    data = _built(r, request.form.get("period", "last"), "report_send")
    detail = f"{r.describe()}: period {data.period.id} to {', '.join(r.recipients)}"
    try:
        deliver.send_email(relay, email_message(data, relay, socket.gethostname()))
    except deliver.DeliveryError as e:
        audit("report_send", logspace=r.logspace, status=503, detail=f"{detail}: {e}")
        flash(f"Not sent: {e}")
        return back
    audit("report_send", logspace=r.logspace, detail=detail)
    flash(f"Sent the report {r.name!r} for {data.period.id} to {', '.join(r.recipients)}.")
    return back


@bp.route("/reports/<id>/enabled", methods=["POST"])
@login_required
def set_enabled(id: str) -> Any:
    """POST /reports/<id>/enabled (enabled=on|off): the schedule emails it, or not."""
    r = _mine(id)
    on = request.form.get("enabled") == "on"
    new = store().update(r.id, {"enabled": on})
    audit("report_update", logspace=new.logspace, detail=f"{new.describe()}: enabled")
    flash(f"The report {new.name!r} is {'scheduled' if on else 'not scheduled'}.")
    return redirect(url_for("reports.reports_list"), 303)


@bp.route("/reports/<id>/delete", methods=["POST"])
@login_required
def delete(id: str) -> Any:
    """POST /reports/<id>/delete."""
    _mine(id)
    gone = store().delete(id)
    audit("report_delete", logspace=gone.logspace, detail=gone.describe())
    flash(f"Deleted the report {gone.name!r}.")
    return redirect(url_for("reports.reports_list"), 303)
