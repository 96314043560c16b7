"""Saved searches in the web UI (webui/UI.md "Saved searches"): the list page, saving the search
on screen, deleting. The same store, rules and audit actions as the API's (rpc/API.md §6.1):
a user sees their own and the shared ones on logspaces they may read; saving needs the read
right and a query searchd parses; the owner deletes theirs, an admin also shared ones."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from logbox_core.accounts import AccountsError, SavedSearch, check_saved_search
from logbox_core.saved import check_with_searchd
from logbox_core.searchd import SearchdError

from .auth import audit, current_user, denied, login_required
from .search import search_url
from .state import accounts, searchd

bp = Blueprint("saved", __name__)


def run_url(s: SavedSearch) -> str:
    """The search page showing s: its query, logspace, range and columns."""
    params: dict[str, Any] = {"q": s.query, "logspace": s.logspace}
    if s.from_ is not None:
        params["from"] = s.from_
    if s.to is not None:
        params["to"] = s.to
    if s.time != "received":
        params["time"] = s.time
    if s.columns:
        params["cols"] = ",".join(s.columns)
    return search_url(**params)


def visible() -> list[SavedSearch]:
    """The saved searches the signed-in user may see."""
    user = current_user()
    assert user is not None
    return [s for s in accounts().list_searches() if s.visible_to(user)]


def may_change(s: SavedSearch) -> bool:
    """Whether the signed-in user may delete s: theirs, or an admin and s is shared."""
    user = current_user()
    return user is not None and (s.owner == user.name or (user.role == "admin" and s.shared))


@bp.route("/saved")
@login_required
def saved_list() -> Any:
    """GET /saved: every saved search the user may see, with links that run them."""
    rows = [{"s": s, "href": run_url(s), "deletable": may_change(s)} for s in visible()]
    return render_template("search/saved.html", rows=rows, me=current_user())


@bp.route("/saved", methods=["POST"])
@login_required
def save() -> Any:
    """POST /saved: saves the search of the form (name, q, logspace, from, to, time, cols,
    shared);
    back to that search with a message."""
    f = request.form
    cols = [c for c in (f.get("cols") or "").split(",") if c]
    body: dict[str, Any] = {
        "name": f.get("name", "").strip(),
        "logspace": f.get("logspace", ""),
        "query": f.get("q", ""),
        "from": f.get("from") or None,
        "to": f.get("to") or None,
        "time": f.get("time") or "received",
        "columns": cols,
        "shared": f.get("shared") == "on",
    }
    back = search_url(**{k: v for k, v in (("q", body["query"]), ("logspace", body["logspace"]),
                                           ("from", body["from"]), ("to", body["to"]))
                         if v})  # fmt: skip
    try:
        members = check_saved_search(body)
    except AccountsError as e:
        flash(f"Not saved: {e.message}")
        return redirect(back, 303)
    user = current_user()
    assert user is not None
    if not user.can_read(members["logspace"]):
        denied(f"{user.name} may not read logspace {members['logspace']!r}", members["logspace"])
    try:
        check_with_searchd(searchd(), members["logspace"], members)
        s = accounts().save_search(user.name, members)
    except SearchdError as e:
        flash(f"Not saved: {e.message}")
        return redirect(back, 303)
    except AccountsError as e:
        flash(f"Not saved: {e.message}")
        return redirect(back, 303)
    audit(
        "saved_search_create",
        status=201,
        logspace=s.logspace,
        query=s.query,
        detail=s.describe() + (" (shared)" if s.shared else ""),
    )
    flash(f"Saved search {s.name!r}" + (" (shared)." if s.shared else "."))
    return redirect(run_url(s), 303)


@bp.route("/saved/<id>/delete", methods=["POST"])
@login_required
def delete(id: str) -> Any:
    """POST /saved/<id>/delete."""
    user = current_user()
    assert user is not None
    s = accounts().get_search(id)
    if s is None or not s.visible_to(user):
        abort(404, description=f"No saved search '{id}'.")
    if not may_change(s):
        denied(f"saved search {id} is {s.owner}'s", s.logspace)
    gone = accounts().delete_search(id)
    audit(
        "saved_search_delete",
        logspace=gone.logspace,
        query=gone.query,
        detail=gone.describe(),
    )
    flash(f"Deleted the saved search {gone.name!r}.")
    return redirect(url_for("saved.saved_list"), 303)
