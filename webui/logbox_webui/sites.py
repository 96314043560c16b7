"""The admin page of remote and multiple logspaces, /admin/sites (webui/UI.md "Sites"): one form
per site (another logbox box: its URL, an API token of a user there, the CA its certificate must
chain to, the deadline) with the logspaces it offers or why it did not answer, a form to add a
site, and one form per multiple logspace (its members) plus one to add one. The settings are
logbox_core.federation's, the same file and rules as the API's /sites and /multiple (rpc/API.md
§4.1, §6.6). The token is a password field that is never filled in: left empty it keeps the
stored one. Every save is audited (site_settings)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for
from logbox_core import federation as fed

from .auth import admin_required, audit
from .state import searchd

bp = Blueprint("sites", __name__, url_prefix="/admin/sites")


def _path() -> str:
    return str(current_app.config["SITES_SETTINGS"])


def _page(status: int = 200, error: tuple[str, str] | None = None) -> Any:
    file_error = None
    try:
        settings = fed.load_settings(_path())
    except fed.FederationError as e:
        settings, file_error = fed.EMPTY, str(e)
    warnings: list[str] = []
    offered: dict[str, list[str]] = {n: [] for n in settings.sites}
    if settings.sites:
        for ls in fed.site_logspaces(settings.sites, warnings):
            offered[ls["site"]].append(ls["name"])
    problems = {
        n: next((w.split(": ", 1)[1] for w in warnings if w.startswith(f"site {n}: ")), None)
        for n in settings.sites
    }
    return (
        render_template(
            "admin/sites.html",
            sites={n: fed.site_json(s) for n, s in sorted(settings.sites.items())},
            offered=offered,
            problems=problems,
            multiple=dict(sorted(settings.multiple.items())),
            path=_path(),
            error=error,
            form=request.form if error else {},
            file_error=file_error,
        ),
        status,
    )


@bp.route("", methods=["GET"])
@admin_required
def page() -> Any:
    """GET /admin/sites."""
    return _page()


def _refused(key: str, e: fed.FederationError) -> Any:
    audit("site_settings", status=400, detail=f"{key} refused: {e}")
    return _page(400, (key, str(e)))


@bp.route("/site", methods=["POST"])
@admin_required
def save_site() -> Any:
    """POST /admin/sites/site: a site saved (name, url, token, ca, deadline_ms) or removed
    ("remove")."""
    f = request.form
    name = f.get("name", "").strip()
    key = f"site-{name}" if f.get("existing") else "site-new"
    try:
        if f.get("remove"):
            fed.write_site(_path(), name, None)
            detail = f"site {name} removed"
        else:
            body: dict[str, Any] = {k: f.get(k, "").strip() for k in ("url", "token", "ca")}
            d = f.get("deadline_ms", "").strip()
            if d:
                body["deadline_ms"] = int(d) if d.isdigit() else d
            s = fed.write_site(_path(), name, body)
            detail = f"site {name}: {s.sites[name].url}"
    except fed.FederationError as e:
        return _refused(key, e)
    audit("site_settings", detail=detail)
    flash(f"{detail}.")
    return redirect(url_for("sites.page") + (f"#site-{name}" if not f.get("remove") else ""), 303)


@bp.route("/multiple", methods=["POST"])
@admin_required
def save_multiple() -> Any:
    """POST /admin/sites/multiple: a multiple logspace saved (name, members: comma or space
    separated) or removed ("remove")."""
    f = request.form
    name = f.get("name", "").strip()
    key = f"multiple-{name}" if f.get("existing") else "multiple-new"
    try:
        if f.get("remove"):
            fed.write_multiple(_path(), name, None)
            detail = f"multiple {name} removed"
        else:
            members = [m for m in f.get("members", "").replace(",", " ").split() if m]
            local = [ls["name"] for ls in searchd().logspaces()]
            fed.write_multiple(_path(), name, members, local)
            detail = f"multiple {name}: {', '.join(members)}"
    except fed.FederationError as e:
        return _refused(key, e)
    audit("site_settings", logspace=name or None, detail=detail)
    flash(f"{detail}.")
    return redirect(
        url_for("sites.page") + (f"#multiple-{name}" if not f.get("remove") else ""), 303
    )
