"""Scheduled reports (API.md §6.4): definitions (CRUD), one period rendered (HTML to download, or
its numbers as JSON) and sent now. The store, the periods, the build and the drawing are
logbox_core's (reports.py, report_build.py, report_render.py).

Who sees what: a report is its owner's; an admin sees and manages every report. Anyone else is
told "not found". Making or changing one needs the read right on its logspace, and its saved
searches must be ones its owner sees on that logspace. A report is built with its owner's rights
at that moment. Every change, render and send is audited.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from flask import Blueprint, Response, g, jsonify
from logbox_core import deliver
from logbox_core.report_build import ReportRefused, build
from logbox_core.report_render import email_message, page
from logbox_core.reports import (
    MEMBERS,
    Report,
    Reports,
    check_report,
    check_searches,
    parse_period,
)
from logbox_core.searchd import SearchdError

from .auth import audit, forbidden
from .errors import STORE_ERRORS, ApiError
from .params import Param, Spec, declare, json_body
from .state import accounts, searchd, state

bp = Blueprint("reports", __name__)

REPORT_ID = Param("id", "string", "the report's id (12 hex digits)", where="path")
PERIOD = Param(
    "period",
    "string",
    "the period: `last` (the last complete one), `current` (the one in progress) or its id "
    "(daily 2026-11-26, weekly 2026-W48, monthly 2026-11)",
    default="last",
)
FORMAT = Param(
    "format",
    "string",
    "html: the page to download (charts inline); json: its numbers",
    default="html",
    enum=("html", "json"),
)
BODY_ERRORS = (400, 401, 403, 413, 415, *STORE_ERRORS)
BUILD_ERRORS = (400, 401, 403, 404, 422, 429, 500, 503, 507)


def store() -> Reports:
    return Reports(accounts())


def _visible(rid: str) -> Report:
    """The report rid when the caller may see it.

    :raises ApiError: 404 when there is none, or it is another's (and the caller no admin).
    """
    r = store().get(rid)
    if r is None or not r.visible_to(g.user):
        raise ApiError(404, "not_found", f"no report '{rid}'")
    return r


def _check(owner_name: str, members: dict) -> None:
    """The caller reads the logspace; the saved searches are the owner's on it (400)."""
    ls = members["logspace"]
    if not g.user.can_read(ls):
        raise forbidden(f"{g.user.name} may not read logspace {ls!r}", ls)
    owner = accounts().get_user(owner_name)
    if owner is None:
        raise ApiError(404, "not_found", f"no user '{owner_name}'")
    check_searches(accounts(), owner, ls, members.get("searches", []))


def _built(r: Report, period: str, action: str) -> Any:
    """One period of r built with its owner's rights (audited as action when refused)."""
    try:
        p = parse_period(r.period, period, time.time())
        return build(accounts(), searchd(), r, p)
    except ReportRefused as e:
        raise forbidden(str(e), r.logspace) from None
    except SearchdError as e:
        audit(action, logspace=r.logspace, status=e.status, detail=f"{r.describe()}: {e.message}")
        raise


@bp.route("/reports", methods=["GET"])
@declare(
    Spec(
        "The reports the caller may see: their own (an admin: every one)",
        answer="ReportList",
        errors=(400, 401),
    )
)
def list_reports(args: dict[str, Any]) -> Any:
    """GET /reports."""
    return jsonify({"reports": [r.to_json() for r in store().list() if r.visible_to(g.user)]})


@bp.route("/reports", methods=["POST"])
@declare(
    Spec(
        "Makes a report (read right on its logspace; its saved searches the caller's on it)",
        body="ReportCreate",
        ok=201,
        answer="Report",
        errors=(*BODY_ERRORS, 404, 409),
    )
)
def create_report(args: dict[str, Any]) -> Any:
    """POST /reports."""
    members = check_report(json_body(MEMBERS, ("name", "logspace", "period")))
    _check(g.user.name, members)
    r = store().create(g.user.name, members)
    audit("report_create", status=201, logspace=r.logspace, detail=r.describe())
    return jsonify(r.to_json()), 201


@bp.route("/reports/<id>", methods=["GET"])
@declare(Spec("A report", (REPORT_ID,), answer="Report", errors=(400, 401, 404)))
def get_report(id: str, args: dict[str, Any]) -> Any:
    """GET /reports/{id}."""
    return jsonify(_visible(id).to_json())


@bp.route("/reports/<id>", methods=["PATCH"])
@declare(
    Spec(
        "Changes a report (its owner or an admin)",
        (REPORT_ID,),
        body="ReportUpdate",
        answer="Report",
        errors=(*BODY_ERRORS, 404),
    )
)
def update_report(id: str, args: dict[str, Any]) -> Any:
    """PATCH /reports/{id}: any of its members."""
    r = _visible(id)
    members = check_report(json_body(MEMBERS), partial=True)
    _check(r.owner, {"logspace": r.logspace, "searches": list(r.searches), **members})
    new = store().update(id, members)
    audit(
        "report_update",
        logspace=new.logspace,
        detail=f"{new.describe()}: {', '.join(sorted(members)) or 'nothing'}",
    )
    return jsonify(new.to_json())


@bp.route("/reports/<id>", methods=["DELETE"])
@declare(
    Spec(
        "Deletes a report (its owner or an admin)",
        (REPORT_ID,),
        answer="Report",
        errors=(400, 401, 404, *STORE_ERRORS),
    )
)
def delete_report(id: str, args: dict[str, Any]) -> Any:
    """DELETE /reports/{id}: what it was."""
    _visible(id)
    gone = store().delete(id)
    audit("report_delete", logspace=gone.logspace, detail=gone.describe())
    return jsonify(gone.to_json())


@bp.route("/reports/<id>/render", methods=["GET"])
@declare(
    Spec(
        "One period of a report, built now with its owner's rights: the HTML page to download "
        "(charts as data: URIs) or its numbers",
        (REPORT_ID, PERIOD, FORMAT),
        answer="ReportData",
        media={"text/html": "the report's page, as the attachment report-<id>-<period>.html"},
        errors=BUILD_ERRORS,
    )
)
def render_report(id: str, args: dict[str, Any]) -> Any:
    """GET /reports/{id}/render?period=...&format=html|json."""
    r = _visible(id)
    data = _built(r, args["period"], "report_render")
    audit(
        "report_render",
        logspace=r.logspace,
        results=sum(s.total for s in data.sections),
        detail=f"{r.describe()}: period {data.period.id}",
    )
    if args["format"] == "json":
        return jsonify(data.to_json())
    resp = Response(page(data, socket.gethostname()), mimetype="text/html")
    name = f"report-{r.id}-{data.period.id}.html"
    resp.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    resp.headers["Content-Security-Policy"] = (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
    )
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


@bp.route("/reports/<id>/send", methods=["POST"])
@declare(
    Spec(
        "Emails one period of a report to its recipients now (the schedule is not changed)",
        (REPORT_ID, PERIOD),
        answer="ReportSent",
        errors=(*BUILD_ERRORS, 409),
    )
)
def send_report(id: str, args: dict[str, Any]) -> Any:
    """POST /reports/{id}/send?period=...: 409 without recipients, 503 without an SMTP relay
    or when it fails."""
    r = _visible(id)
    if not r.recipients:
        raise ApiError(409, "conflict", f"{r.describe()} has no recipients")
    settings_path = state().config["DELIVERY_SETTINGS"]
    try:
        relay = deliver.load_settings(settings_path).smtp
    except deliver.SettingsError as e:
        raise ApiError(503, "unavailable", str(e)) from None
    if relay is None:
        raise ApiError(503, "unavailable", "no SMTP relay configured (delivery settings)")
    data = _built(r, args["period"], "report_send")
    detail = f"{r.describe()}: period {data.period.id} to {', '.join(r.recipients)}"
    try:
        deliver.send_email(relay, email_message(data, relay, socket.gethostname()))
    except deliver.DeliveryError as e:
        audit("report_send", logspace=r.logspace, status=503, detail=f"{detail}: {e}")
        raise ApiError(503, "unavailable", str(e)) from None
    audit("report_send", logspace=r.logspace, detail=detail)
    return jsonify({"report": r.id, "period": data.period.id, "to": list(r.recipients)})
