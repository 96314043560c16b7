"""Saved searches (API.md §9): a query on a logspace with its time range and columns, private
to its owner or shared with everyone who may read the logspace.

Who sees what: a user sees their own saved searches and the shared ones on logspaces they may
read; any other is "not found" to them (its existence is not told). The owner changes and
deletes theirs; an admin also the shared ones. Saving needs the read right on the logspace,
and the query must parse (searchd is asked, over an empty range). Every change is audited.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, jsonify
from logbox_core.accounts import SavedSearch, check_saved_search
from logbox_core.saved import check_with_searchd

from .auth import audit, forbidden
from .errors import STORE_ERRORS, ApiError
from .params import Param, Spec, declare, json_body
from .state import accounts, searchd

bp = Blueprint("searches", __name__)

SEARCH_ID = Param("id", "string", "the saved search's id (12 hex digits)", where="path")
MEMBERS = ("name", "logspace", "query", "from", "to", "time", "columns", "shared")
BODY_ERRORS = (400, 401, 403, 413, 415, *STORE_ERRORS)


def _visible(sid: str) -> SavedSearch:
    """The saved search sid when the caller may see it.

    :raises ApiError: 404 when there is none, or it is another's and not shared with them.
    """
    s = accounts().get_search(sid)
    if s is None or not s.visible_to(g.user):
        raise ApiError(404, "not_found", f"no saved search '{sid}'")
    return s


def _may_change(s: SavedSearch) -> None:
    """The owner, or an admin for a shared one (audited refusal otherwise)."""
    if s.owner != g.user.name and g.user.role != "admin":
        raise forbidden(f"saved search {s.id} is {s.owner}'s", s.logspace)


@bp.route("/searches", methods=["GET"])
@declare(
    Spec(
        "The saved searches the caller may see: their own, and the shared ones on logspaces "
        "they may read",
        answer="SavedSearchList",
        errors=(400, 401),
    )
)
def list_searches(args: dict[str, Any]) -> Any:
    """GET /searches."""
    mine = [s.to_json() for s in accounts().list_searches() if s.visible_to(g.user)]
    return jsonify({"searches": mine})


@bp.route("/searches", methods=["POST"])
@declare(
    Spec(
        "Saves a search (read right on its logspace; the query must parse)",
        body="SavedSearchCreate",
        ok=201,
        answer="SavedSearch",
        errors=(*BODY_ERRORS, 404, 409, 429, 503),
    )
)
def create_search(args: dict[str, Any]) -> Any:
    """POST /searches."""
    members = check_saved_search(json_body(MEMBERS, ("name", "logspace", "query")))
    ls = members["logspace"]
    if not g.user.can_read(ls):
        raise forbidden(f"{g.user.name} may not read logspace {ls!r}", ls)
    check_with_searchd(searchd(), ls, members)
    s = accounts().save_search(g.user.name, members)
    audit(
        "saved_search_create",
        status=201,
        logspace=ls,
        query=s.query,
        detail=s.describe() + (" (shared)" if s.shared else ""),
    )
    return jsonify(s.to_json()), 201


@bp.route("/searches/<id>", methods=["GET"])
@declare(Spec("A saved search", (SEARCH_ID,), answer="SavedSearch", errors=(400, 401, 404)))
def get_search(id: str, args: dict[str, Any]) -> Any:
    """GET /searches/{id}."""
    return jsonify(_visible(id).to_json())


@bp.route("/searches/<id>", methods=["PATCH"])
@declare(
    Spec(
        "Changes a saved search (its owner; an admin for a shared one)",
        (SEARCH_ID,),
        body="SavedSearchUpdate",
        answer="SavedSearch",
        errors=(*BODY_ERRORS, 404, 429, 503),
    )
)
def update_search(id: str, args: dict[str, Any]) -> Any:
    """PATCH /searches/{id}: any of its members."""
    s = _visible(id)
    _may_change(s)
    members = check_saved_search(json_body(MEMBERS), partial=True)
    ls = members.get("logspace", s.logspace)
    if not g.user.can_read(ls):
        raise forbidden(f"{g.user.name} may not read logspace {ls!r}", ls)
    check_with_searchd(searchd(), ls, {"query": s.query, "from": s.from_, "to": s.to, **members})
    new = accounts().update_search(id, members)
    audit(
        "saved_search_update",
        logspace=new.logspace,
        query=new.query,
        detail=f"{new.describe()}: {', '.join(sorted(members)) or 'nothing'}",
    )
    return jsonify(new.to_json())


@bp.route("/searches/<id>", methods=["DELETE"])
@declare(
    Spec(
        "Deletes a saved search (its owner; an admin for a shared one)",
        (SEARCH_ID,),
        answer="SavedSearch",
        errors=(400, 401, 403, 404, *STORE_ERRORS),
    )
)
def delete_search(id: str, args: dict[str, Any]) -> Any:
    """DELETE /searches/{id}: what it was."""
    s = _visible(id)
    _may_change(s)
    gone = accounts().delete_search(id)
    audit(
        "saved_search_delete",
        logspace=gone.logspace,
        query=gone.query,
        detail=gone.describe(),
    )
    return jsonify(gone.to_json())
