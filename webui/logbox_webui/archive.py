"""The admin page of the archive targets, /admin/archive (webui/UI.md "Archive"): one form per
logspace (its S3-compatible endpoint, bucket, prefix, credentials, CA file, archive days) and
what logbox-archive last did for it. The settings are logbox_core.archive's, the same file and
rules as the API's /archive (indexer/ARCHIVE.md). The secret key is a password field that is
never filled in: left empty it keeps the stored one. Every save is audited (archive_settings)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, url_for
from logbox_core import archive as ar
from logbox_core.constants import logspace_name_ok

from .auth import admin_required, audit
from .state import searchd

bp = Blueprint("archive", __name__, url_prefix="/admin/archive")

# (member, label, kind): text, number, secret (a password field, never filled)
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("endpoint", "endpoint (https://host[:port])", "text"),
    ("bucket", "bucket", "text"),
    ("prefix", "prefix (optional)", "text"),
    ("region", "region", "text"),
    ("access_key", "access key", "text"),
    ("secret_key", "secret key", "secret"),
    ("ca_file", "CA file, PEM path (empty: the system CAs)", "text"),
    ("archive_days", "archive days (0: forever)", "number"),
    ("part_mb", "part size, MiB", "number"),
)


def _path() -> str:
    return str(current_app.config["ARCHIVE_SETTINGS"])


def _status() -> dict[str, Any]:
    return ar.read_status(current_app.config["ARCHIVE_STATE"])


def _logspaces(targets: dict[str, ar.Target]) -> list[str]:
    names = set(targets)
    try:
        names |= {ls["name"] for ls in searchd().logspaces()}
    except Exception:  # searchd down: the targets still show
        pass
    return sorted(names)


def _page(status: int = 200, error: tuple[str, str] | None = None) -> Any:
    file_error = None
    try:
        targets = ar.load_settings(_path())
    except ar.ArchiveError as e:
        targets, file_error = {}, str(e)
    return (
        render_template(
            "admin/archive.html",
            fields=FIELDS,
            names=_logspaces(targets),
            view={ls: ar.target_json(t) for ls, t in targets.items()},
            status=_status(),
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
    """GET /admin/archive."""
    return _page()


@bp.route("/<logspace>", methods=["POST"])
@admin_required
def save(logspace: str) -> Any:
    """POST /admin/archive/<logspace>: the logspace's target saved (or removed: "remove")."""
    if not logspace_name_ok(logspace):
        abort(404)
    try:
        if request.form.get("remove"):
            ar.write_target(_path(), logspace, None)
            detail = "target removed"
        else:
            body: dict[str, Any] = {}
            for name, _, kind in FIELDS:
                v = request.form.get(name, "").strip()
                if v == "":
                    if name in ("ca_file",):
                        body[name] = None
                    continue
                body[name] = int(v) if kind == "number" and v.lstrip("-").isdigit() else v
            t = ar.write_target(_path(), logspace, body)
            assert t is not None
            detail = f"target {t.where()}"
    except ar.ArchiveError as e:
        msg = str(e).removeprefix("archive settings: ")
        audit("archive_settings", status=400, logspace=logspace, detail=f"refused: {msg}")
        return _page(400, (logspace, msg))
    audit("archive_settings", logspace=logspace, detail=detail)
    flash(f"{logspace}: {detail}.")
    return redirect(url_for("archive.page") + f"#archive-{logspace}", 303)
