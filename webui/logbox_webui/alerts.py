"""Alerts in the web UI (webui/UI.md "Alerts"): the list with each alert's state, the form that
makes one from a saved search and edits it, test-fire, delete, and the history page. The same
store, rules and audit actions as the API's (rpc/API.md §6.3): an alert is its owner's (an admin
sees and changes every one); making or re-pointing one needs the saved search to be visible to
the user and its logspace readable; logbox-alertd does the test-fire and records it."""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, url_for
from logbox_core.accounts import AccountsError, SavedSearch
from logbox_core.alerts import (
    ACTION_TYPES,
    GROUP_FIELDS,
    Alert,
    AlertStore,
    check_alert,
    read_status,
    state_of,
)

from .auth import audit, current_user, denied, login_required
from .saved import visible as visible_searches
from .state import accounts

bp = Blueprint("alerts", __name__)


def store() -> AlertStore:
    return AlertStore(accounts())


def _mine(aid: str) -> Alert:
    """The alert aid when the signed-in user may see it (owner, admin), else 404."""
    user = current_user()
    assert user is not None
    a = store().get(aid)
    if a is None or (a.owner != user.name and user.role != "admin"):
        abort(404, description=f"No alert '{aid}'.")
    return a


def _search_for(sid: str) -> SavedSearch:
    """The saved search sid, visible to the user, on a logspace they may read (404 / 403)."""
    user = current_user()
    assert user is not None
    s = accounts().get_search(sid)
    if s is None or not s.visible_to(user):
        abort(404, description=f"No saved search '{sid}'.")
    if not user.can_read(s.logspace):
        denied(f"{user.name} may not read logspace {s.logspace!r}", s.logspace)
    return s


def _states() -> tuple[dict[str, dict], bool]:
    svc, states = read_status(current_app.config.get("ALERTD_STATUS"), time.time())
    return states, svc["state"] == "running"


def _body(f: Any) -> dict[str, Any]:
    """The alert form as an API body (check_alert checks it)."""
    kind = f.get("kind", "any")
    cond: dict[str, Any] = {"kind": kind}
    if kind != "any":
        cond |= {
            "n": _number(f.get("n")),
            "window_s": _number(f.get("window_s")),
            "group_by": f.get("group_by") or None,
        }
    actions: list[dict[str, Any]] = []
    to = [x.strip() for x in (f.get("email") or "").replace(";", ",").split(",") if x.strip()]
    if to:
        actions.append({"type": "email", "to": to})
    if f.get("syslog") == "on":
        actions.append({"type": "syslog"})
    if (f.get("webhook_url") or "").strip():
        ca = (f.get("webhook_ca") or "").strip()
        actions.append(
            {"type": "webhook", "url": f["webhook_url"].strip(), "ca": (ca + "\n") if ca else None}
        )
    if f.get("snmp") == "on":
        actions.append({"type": "snmp"})
    return {
        "name": (f.get("name") or "").strip(),
        "search": f.get("search", ""),
        "condition": cond,
        "actions": actions,
        "cooldown_s": _number(f.get("cooldown_s") or "300"),
        "enabled": f.get("enabled") == "on",
    }


def _number(v: str | None) -> Any:
    """A form's integer, or the text itself (check_alert then says what is wrong)."""
    v = (v or "").strip()
    return int(v) if v.isdigit() else v


def _form_values(a: Alert | None, search: str | None) -> dict[str, Any]:
    """What the form shows: the alert's members, or a new alert's defaults."""
    if a is None:
        return {"name": "", "search": search or "", "kind": "any", "n": "", "window_s": "60",
                "group_by": "", "cooldown_s": "300", "enabled": True, "email": "",
                "syslog": False, "webhook_url": "", "webhook_ca": "", "snmp": False}  # fmt: skip
    c = a.condition
    by = {act["type"]: act for act in a.actions}
    return {
        "name": a.name,
        "search": a.search,
        "kind": c["kind"],
        "n": c.get("n", ""),
        "window_s": c.get("window_s", "60"),
        "group_by": c.get("group_by") or "",
        "cooldown_s": a.cooldown_s,
        "enabled": a.enabled,
        "email": ", ".join(by.get("email", {}).get("to", [])),
        "syslog": "syslog" in by,
        "webhook_url": by.get("webhook", {}).get("url", ""),
        "webhook_ca": by.get("webhook", {}).get("ca") or "",
        "snmp": "snmp" in by,
    }


def _render_form(a: Alert | None, values: dict[str, Any], error: str | None = None) -> Any:
    states, running = _states()
    return render_template(
        "alerts/edit.html",
        alert=a,
        v=values,
        searches=visible_searches(),
        group_fields=GROUP_FIELDS,
        action_types=ACTION_TYPES,
        status=state_of(a, states, running) if a else None,
        error=error,
    ), 400 if error else 200


def rows() -> tuple[list[dict[str, Any]], bool]:
    """The signed-in user's alerts (an admin's: all) with their saved search and state, and
    whether logbox-alertd runs (the list page and the dashboard)."""
    user = current_user()
    assert user is not None
    states, running = _states()
    out = []
    for a in store().list():
        if a.owner != user.name and user.role != "admin":
            continue
        s = accounts().get_search(a.search)
        out.append({"a": a, "s": s, "status": state_of(a, states, running)})
    return out, running


@bp.route("/alerts")
@login_required
def alert_list() -> Any:
    """GET /alerts: the user's alerts (an admin's: all) and their states."""
    got, running = rows()
    return render_template("alerts/list.html", rows=got, running=running)


@bp.route("/alerts/new", methods=["GET", "POST"])
@login_required
def alert_new() -> Any:
    """GET /alerts/new?search=ID: the form; POST: makes the alert."""
    if request.method == "GET":
        sid = request.args.get("search")
        if sid:
            _search_for(sid)
        return _render_form(None, _form_values(None, sid))
    user = current_user()
    assert user is not None
    body = _body(request.form)
    try:
        members = check_alert(body)
    except AccountsError as e:
        return _render_form(None, dict(request.form), e.message)
    s = _search_for(members["search"])
    a = store().create(user.name, members)
    audit(
        "alert_create",
        status=201,
        logspace=s.logspace,
        query=s.query,
        detail=f"{a.describe()} on {s.describe()}: {a.condition_text()}",
    )
    flash(f"Alert {a.name!r} made.")
    return redirect(url_for("alerts.alert_edit", id=a.id), 303)


@bp.route("/alerts/<id>", methods=["GET", "POST"])
@login_required
def alert_edit(id: str) -> Any:
    """GET /alerts/<id>: its form, state and buttons; POST: saves the form."""
    a = _mine(id)
    if request.method == "GET":
        return _render_form(a, _form_values(a, None))
    body = _body(request.form)
    try:
        members = check_alert(body)
    except AccountsError as e:
        return _render_form(a, dict(request.form), e.message)
    s = _search_for(members["search"]) if members["search"] != a.search else None
    if s is None:
        s = accounts().get_search(a.search)
    new = store().update(id, members)
    audit(
        "alert_update",
        logspace=s.logspace if s else None,
        query=s.query if s else None,
        detail=f"{new.describe()}: {', '.join(sorted(members))}",
    )
    flash(f"Alert {new.name!r} saved.")
    return redirect(url_for("alerts.alert_edit", id=id), 303)


@bp.route("/alerts/<id>/test", methods=["POST"])
@login_required
def alert_test(id: str) -> Any:
    """POST /alerts/<id>/test: hands a test-fire to logbox-alertd; to the history page."""
    a = _mine(id)
    s = _search_for(a.search)
    store().request_test(id, current_user().name)  # type: ignore[union-attr]
    audit("alert_test", status=202, logspace=s.logspace, query=s.query, detail=a.describe())
    flash(f"Test-fire of {a.name!r} asked for: it shows here within a few seconds.")
    return redirect(url_for("alerts.alert_history", id=id), 303)


@bp.route("/alerts/<id>/delete", methods=["POST"])
@login_required
def alert_delete(id: str) -> Any:
    """POST /alerts/<id>/delete."""
    a = _mine(id)
    s = accounts().get_search(a.search)
    store().delete(id)
    audit(
        "alert_delete",
        logspace=s.logspace if s else None,
        query=s.query if s else None,
        detail=a.describe(),
    )
    flash(f"Deleted the alert {a.name!r}.")
    return redirect(url_for("alerts.alert_list"), 303)


@bp.route("/alerts/<id>/history")
@login_required
def alert_history(id: str) -> Any:
    """GET /alerts/<id>/history: firings, test-fires and failed deliveries, newest first."""
    a = _mine(id)
    before = request.args.get("before")
    entries = store().history(a.id, 100, before)
    more = entries[-1]["id"] if len(entries) == 100 else None
    states, running = _states()
    return render_template(
        "alerts/history.html",
        alert=a,
        entries=entries,
        more=more,
        status=state_of(a, states, running),
    )
