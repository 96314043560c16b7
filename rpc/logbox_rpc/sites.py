"""Remote and multiple logspaces (API.md §4.1, §6.6): the sites this box searches (another
logbox box's URL, an API token of a user there and its CA) and the multiple logspaces, read and
changed by admins; and the merged answers of a query on a remote or multiple logspace
(logbox_core.federation). Tokens are never answered (`"token_set": true`); every change is
audited."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, g, jsonify
from logbox_core import federation as fed
from logbox_core.constants import LOGSPACE_PATTERN
from logbox_core.searchd import SearchdError

from .auth import audit, forbidden
from .errors import STORE_ERRORS, ApiError, bad_parameter
from .params import Param, Spec, declare, json_body
from .state import searchd

bp = Blueprint("sites", __name__)

ADMIN_ERRORS = (400, 401, 403)
BODY_ERRORS = (400, 401, 403, 413, 415, *STORE_ERRORS)
SITE = Param("site", "string", f"the site's name (`{fed.SITE_NAME_PATTERN}`)", where="path",
             pattern=fed.SITE_NAME_PATTERN)  # fmt: skip
MULTIPLE = Param("name", "string", f"the multiple logspace (`{LOGSPACE_PATTERN}`)",
                 where="path", pattern=LOGSPACE_PATTERN)  # fmt: skip


def _path() -> str:
    return str(current_app.config["SITES_SETTINGS"])


def settings() -> fed.Sites:
    """The sites and multiple logspaces (500 when the file cannot be used)."""
    try:
        return fed.load_settings(_path())
    except fed.FederationError as e:
        raise ApiError(500, "internal", str(e)) from None


def _doc(s: fed.Sites) -> dict[str, Any]:
    return {
        "sites": {n: fed.site_json(site) for n, site in sorted(s.sites.items())},
        "multiple": {n: list(m) for n, m in sorted(s.multiple.items())},
    }


def _write(write: Any) -> fed.Sites:
    """write() (a federation write); 400 for what it refuses, 500 when the file cannot be
    read or written."""
    try:
        return write()
    except fed.FederationError as e:
        msg = str(e)
        if msg.startswith(_path()):
            raise ApiError(500, "internal", msg) from None
        raise bad_parameter(msg) from None


@bp.route("/sites", methods=["GET"])
@declare(
    Spec(
        "The sites (other logbox boxes; tokens shown only as token_set) and the multiple "
        "logspaces",
        answer="Sites",
        errors=(*ADMIN_ERRORS, 500),
        admin=True,
    )
)
def get_sites(args: dict[str, Any]) -> Any:
    """GET /sites."""
    return jsonify(_doc(settings()))


@bp.route("/sites/<site>", methods=["PUT"])
@declare(
    Spec(
        "Adds or changes a site: its logspaces are then searchable as site:logspace (a body "
        "without token keeps the one set)",
        (SITE,),
        body="SiteUpdate",
        answer="Site",
        errors=(*BODY_ERRORS, 500),
        admin=True,
    )
)
def put_site(site: str, args: dict[str, Any]) -> Any:
    """PUT /sites/{site}."""
    body = json_body(fed.SITE_KEYS, ("url",))
    s = _write(lambda: fed.write_site(_path(), site, body))
    audit("site_settings", detail=f"site {site}: {s.sites[site].url}")
    return jsonify(fed.site_json(s.sites[site]))


@bp.route("/sites/<site>", methods=["DELETE"])
@declare(
    Spec(
        "Removes a site (refused while a multiple logspace has one of its logspaces)",
        (SITE,),
        answer="Deleted",
        errors=(*ADMIN_ERRORS, 404, *STORE_ERRORS, 500),
        admin=True,
    )
)
def delete_site(site: str, args: dict[str, Any]) -> Any:
    """DELETE /sites/{site}."""
    if site not in settings().sites:
        raise ApiError(404, "not_found", f"no site {site!r}")
    _write(lambda: fed.write_site(_path(), site, None))
    audit("site_settings", detail=f"site {site} removed")
    return jsonify({"deleted": site})


@bp.route("/multiple/<name>", methods=["PUT"])
@declare(
    Spec(
        "Sets a multiple logspace: a name that searches its members (local logspaces and "
        "site:logspace) at once",
        (MULTIPLE,),
        body="MultipleUpdate",
        answer="Multiple",
        errors=(*BODY_ERRORS, 500, 503),
        admin=True,
    )
)
def put_multiple(name: str, args: dict[str, Any]) -> Any:
    """PUT /multiple/{name}."""
    members = json_body(("members",), ("members",))["members"]
    try:
        local = [ls["name"] for ls in searchd().logspaces()]
    except SearchdError as e:
        raise ApiError(e.status, e.code, e.message) from None
    _write(lambda: fed.write_multiple(_path(), name, members, local))
    audit("site_settings", logspace=name, detail=f"multiple {name}: {', '.join(members)}")
    return jsonify({"name": name, "members": members})


@bp.route("/multiple/<name>", methods=["DELETE"])
@declare(
    Spec(
        "Removes a multiple logspace",
        (MULTIPLE,),
        answer="Deleted",
        errors=(*ADMIN_ERRORS, 404, *STORE_ERRORS, 500),
        admin=True,
    )
)
def delete_multiple(name: str, args: dict[str, Any]) -> Any:
    """DELETE /multiple/{name}."""
    if name not in settings().multiple:
        raise ApiError(404, "not_found", f"no multiple logspace {name!r}")
    _write(lambda: fed.write_multiple(_path(), name, None))
    audit("site_settings", logspace=name, detail=f"multiple {name} removed")
    return jsonify({"deleted": name})


# ---------------------------------------------------------------- queries


def members(logspace: str) -> list[fed.Member] | None:
    """The members a query on logspace reaches (None: a plain local logspace), each one the
    caller may read (403 otherwise; the logspace itself was checked by auth)."""
    try:
        ms = fed.resolve(_path(), logspace)
    except fed.FederationError as e:
        raise ApiError(404, "not_found", f"logspace {logspace!r}: {e}") from None
    if (no := fed.unreadable(ms, g.user.can_read)) is not None:
        raise forbidden(f"{g.user.name} may not read logspace {no!r} of {logspace!r}", logspace)
    return ms


def remote_logspaces() -> tuple[list[dict[str, Any]], list[str]] | None:
    """The sites' logspaces and the multiple logspaces the caller may read, for GET
    /logspaces, with a warning per site that did not answer; None when none is set."""
    admin = g.user.role == "admin"
    try:
        s = fed.load_settings(_path())
    except fed.FederationError as e:
        return [], [str(e) if admin else "the remote logspaces cannot be listed now (logged)"]
    if not s.sites and not s.multiple:
        return None
    out, warnings = fed.listing(s, g.user.can_read)
    if not admin:  # sites' addresses and errors are the admins' business
        warnings = [w.split(":", 1)[0] + ": did not answer" for w in warnings]
    return out, warnings


def not_federated(logspace: str, what: str) -> None:
    """400 for what (export, tail) on a remote or multiple logspace, which it does not serve."""
    if members(logspace) is not None:
        raise bad_parameter(
            f"logspace: {what} is served for local logspaces only; ask the member's own box "
            f"(or page through search, which merges members)"
        )


def remote_message(logspace: str, ms: list[fed.Member], id: int, q: str | None) -> Any:
    """GET /logspaces/{site:logspace}/messages/{id} answered by the site."""
    try:
        doc = fed.remote_message(ms, logspace, id, q)
    except SearchdError as e:
        audit("message", logspace=logspace, status=e.status, detail=f"id {id}: {e.code}")
        raise
    audit("message", logspace=logspace, results=1, detail=f"id {id}")
    return jsonify(doc)


def federated(what: str, logspace: str, ms: list[fed.Member], args: dict[str, Any]) -> Any:
    """The merged answer of GET /logspaces/{logspace}/<what> over ms, audited as what."""
    q = args["q"]
    params = {k: str(v) for k, v in args.items() if v is not None}
    try:
        doc = fed.Federated(searchd(), ms, logspace).get(f"/v1/{what}", params)
    except SearchdError as e:
        audit(what, logspace=logspace, query=q, status=e.status, detail=f"{e.code}: {e.message}")
        raise
    audit(what, logspace=logspace, query=q, results=doc.get("total"))
    return jsonify(doc)
