"""Alerts (API.md §6.3): a saved search plus a condition and actions, evaluated by logbox-alertd
(logbox_core/alertd.py) as messages arrive.

Who sees what: an alert is its owner's; an admin sees and changes every alert; anyone else gets
"not found" for another's (its existence is not told). Making or re-pointing an alert needs the
saved search to be visible to the caller and its logspace readable by them (alertd checks the
owner's right again at every evaluation). A test-fire is handed to alertd (the only process
that may reach the network): 202, and its outcome shows in the alert's history. Every change
and test-fire is audited.
"""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, current_app, g, jsonify
from logbox_core.accounts import SavedSearch
from logbox_core.alerts import MEMBERS, Alert, AlertStore, check_alert, read_status, state_of

from .auth import audit, forbidden
from .errors import STORE_ERRORS, ApiError
from .params import Param, Spec, declare, json_body
from .state import accounts

bp = Blueprint("alerts", __name__)

ALERT_ID = Param("id", "string", "the alert's id (12 hex digits)", where="path")
HISTORY_PARAMS = (
    ALERT_ID,
    Param("limit", "integer", "entries, newest first", default=100, minimum=1, maximum=1000),
    Param(
        "before",
        "string",
        "an entry's id: only older ones (the next page)",
        pattern="[0-9a-f]{20}",
    ),
)
BODY_ERRORS = (400, 401, 403, 413, 415, *STORE_ERRORS)


def store() -> AlertStore:
    return AlertStore(accounts())


def _visible(aid: str) -> Alert:
    """The alert aid when the caller may see it (its owner, an admin).

    :raises ApiError: 404 otherwise.
    """
    a = store().get(aid)
    if a is None or (a.owner != g.user.name and g.user.role != "admin"):
        raise ApiError(404, "not_found", f"no alert '{aid}'")
    return a


def _search_for(sid: str) -> SavedSearch:
    """The saved search sid, which the caller must see and whose logspace they must read.

    :raises ApiError: 404 when they do not see it, 403 when they may not read its logspace.
    """
    s = accounts().get_search(sid)
    if s is None or not s.visible_to(g.user):
        raise ApiError(404, "not_found", f"no saved search '{sid}'")
    if not g.user.can_read(s.logspace):
        raise forbidden(f"{g.user.name} may not read logspace {s.logspace!r}", s.logspace)
    return s


def view(a: Alert, states: dict[str, dict] | None = None, running: bool | None = None) -> dict:
    """API.md "Alert": the definition, its saved search's logspace and query, its state."""
    if states is None or running is None:
        svc, states = read_status(current_app.config["ALERTD_STATUS"], time.time())
        running = svc["state"] == "running"
    s = accounts().get_search(a.search)
    return {
        **a.to_json(),
        "logspace": s.logspace if s else None,
        "query": s.query if s else None,
        "condition_text": a.condition_text(),
        "status": state_of(a, states, running),
    }


def visible_views() -> list[dict]:
    """The caller's alerts (an admin's: all) as API.md "Alert"."""
    svc, states = read_status(current_app.config["ALERTD_STATUS"], time.time())
    running = svc["state"] == "running"
    return [
        view(a, states, running)
        for a in store().list()
        if a.owner == g.user.name or g.user.role == "admin"
    ]


@bp.route("/alerts", methods=["GET"])
@declare(
    Spec(
        "The caller's alerts (an admin's: every alert), with their states",
        answer="AlertList",
        errors=(400, 401),
    )
)
def list_alerts(args: dict[str, Any]) -> Any:
    """GET /alerts."""
    return jsonify({"alerts": visible_views()})


@bp.route("/alerts", methods=["POST"])
@declare(
    Spec(
        "Makes an alert on a saved search the caller sees, on a logspace they may read",
        body="AlertCreate",
        ok=201,
        answer="Alert",
        errors=(*BODY_ERRORS, 404, 409),
    )
)
def create_alert(args: dict[str, Any]) -> Any:
    """POST /alerts."""
    members = check_alert(json_body(MEMBERS, ("name", "search", "condition", "actions")))
    s = _search_for(members["search"])
    a = store().create(g.user.name, members)
    audit(
        "alert_create",
        status=201,
        logspace=s.logspace,
        query=s.query,
        detail=f"{a.describe()} on {s.describe()}: {a.condition_text()}",
    )
    return jsonify(view(a)), 201


@bp.route("/alerts/<id>", methods=["GET"])
@declare(Spec("An alert", (ALERT_ID,), answer="Alert", errors=(400, 401, 404)))
def get_alert(id: str, args: dict[str, Any]) -> Any:
    """GET /alerts/{id}."""
    return jsonify(view(_visible(id)))


@bp.route("/alerts/<id>", methods=["PATCH"])
@declare(
    Spec(
        "Changes an alert (its owner, an admin)",
        (ALERT_ID,),
        body="AlertUpdate",
        answer="Alert",
        errors=(*BODY_ERRORS, 404),
    )
)
def update_alert(id: str, args: dict[str, Any]) -> Any:
    """PATCH /alerts/{id}: any of its members."""
    a = _visible(id)
    members = check_alert(json_body(MEMBERS), partial=True)
    if "search" in members:
        s = _search_for(members["search"])
    else:
        s = accounts().get_search(a.search)
    new = store().update(id, members)
    audit(
        "alert_update",
        logspace=s.logspace if s else None,
        query=s.query if s else None,
        detail=f"{new.describe()}: {', '.join(sorted(members)) or 'nothing'}",
    )
    return jsonify(view(new))


@bp.route("/alerts/<id>", methods=["DELETE"])
@declare(
    Spec(
        "Deletes an alert and its history (its owner, an admin)",
        (ALERT_ID,),
        answer="Alert",
        errors=(400, 401, 404, *STORE_ERRORS),
    )
)
def delete_alert(id: str, args: dict[str, Any]) -> Any:
    """DELETE /alerts/{id}: what it was."""
    a = _visible(id)
    out = view(a)
    store().delete(id)
    audit("alert_delete", logspace=out["logspace"], query=out["query"], detail=a.describe())
    return jsonify(out)


@bp.route("/alerts/<id>/test", methods=["POST"])
@declare(
    Spec(
        "Test-fires an alert: logbox-alertd delivers a test event to every action within a "
        "second or so; the outcome is in its history (entry with this request id)",
        (ALERT_ID,),
        ok=202,
        answer="AlertTest",
        errors=(400, 401, 403, 404, *STORE_ERRORS),
    )
)
def test_alert(id: str, args: dict[str, Any]) -> Any:
    """POST /alerts/{id}/test."""
    a = _visible(id)
    s = accounts().get_search(a.search)
    if s is None:
        raise ApiError(404, "not_found", f"no saved search '{a.search}' (the alert's)")
    if not g.user.can_read(s.logspace):
        raise forbidden(f"{g.user.name} may not read logspace {s.logspace!r}", s.logspace)
    rid = store().request_test(id, g.user.name)
    audit("alert_test", status=202, logspace=s.logspace, query=s.query, detail=a.describe())
    return jsonify({"alert": id, "request": rid}), 202


@bp.route("/alerts/<id>/history", methods=["GET"])
@declare(
    Spec(
        "What an alert fired: firings, test-fires, failed deliveries, newest first",
        HISTORY_PARAMS,
        answer="AlertHistory",
        errors=(400, 401, 404),
    )
)
def alert_history(id: str, args: dict[str, Any]) -> Any:
    """GET /alerts/{id}/history."""
    a = _visible(id)
    entries = store().history(a.id, args["limit"], args.get("before"))
    more = entries[-1]["id"] if len(entries) == args["limit"] else None
    return jsonify({"alert": a.id, "entries": entries, "next_before": more})
