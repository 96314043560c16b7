"""The archive targets (API.md §6.5): where each logspace's closed days go in S3-compatible
object storage, read and changed by admins, and what logbox-archive last did. Secrets are never
answered (`"secret_key_set": true`); every change is audited. The settings and the archiving
are logbox_core.archive's (indexer/ARCHIVE.md)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify
from logbox_core import archive as ar

from .auth import audit
from .errors import STORE_ERRORS, ApiError, bad_parameter
from .params import Param, Spec, declare, json_body

bp = Blueprint("archive", __name__)

ADMIN_ERRORS = (400, 401, 403)
BODY_ERRORS = (400, 401, 403, 413, 415, *STORE_ERRORS)
LOGSPACE = Param("logspace", "string", "the logspace", where="path")


def _path() -> str:
    return str(current_app.config["ARCHIVE_SETTINGS"])


def _status() -> dict[str, Any]:
    return ar.read_status(current_app.config["ARCHIVE_STATE"])


def _load() -> dict[str, ar.Target]:
    try:
        return ar.load_settings(_path())
    except ar.ArchiveError as e:
        raise ApiError(500, "internal", str(e)) from None


@bp.route("/archive", methods=["GET"])
@declare(
    Spec(
        "Every logspace's archive target (the secret shown only as secret_key_set) and what "
        "logbox-archive last did for it",
        answer="Archive",
        errors=(*ADMIN_ERRORS, 500),
        admin=True,
    )
)
def get_archive(args: dict[str, Any]) -> Any:
    """GET /archive."""
    status = _status()
    return jsonify(
        {
            "targets": {
                ls: ar.target_json(t) | {"status": status.get(ls)}
                for ls, t in sorted(_load().items())
            }
        }
    )


@bp.route("/archive/<logspace>", methods=["PUT"])
@declare(
    Spec(
        "Sets a logspace's archive target (a body without secret_key keeps the one set); "
        "logbox-archive uses it at its next pass",
        (LOGSPACE,),
        body="ArchiveTargetUpdate",
        answer="ArchiveTarget",
        errors=(*BODY_ERRORS, 500),
        admin=True,
    )
)
def put_archive(logspace: str, args: dict[str, Any]) -> Any:
    """PUT /archive/{logspace}."""
    body = json_body((*ar.TARGET_KEYS, "secret_key"), ("endpoint", "bucket", "access_key"))
    try:
        t = ar.write_target(_path(), logspace, body)
    except ar.ArchiveError as e:
        msg = str(e)
        if msg.startswith(_path()):
            raise ApiError(500, "internal", msg) from None
        raise bad_parameter(msg.removeprefix("archive settings: ")) from None
    assert t is not None
    audit("archive_settings", logspace=logspace, detail=f"target {t.where()}")
    return jsonify(ar.target_json(t) | {"status": _status().get(logspace)})


@bp.route("/archive/<logspace>", methods=["DELETE"])
@declare(
    Spec(
        "Removes a logspace's archive target: nothing more is uploaded (what is archived stays; "
        "retention deletes its days as before)",
        (LOGSPACE,),
        answer="Deleted",
        errors=(*ADMIN_ERRORS, 404, *STORE_ERRORS, 500),
        admin=True,
    )
)
def delete_archive(logspace: str, args: dict[str, Any]) -> Any:
    """DELETE /archive/{logspace}."""
    if logspace not in _load():
        raise ApiError(404, "not_found", f"{logspace}: no archive target")
    try:
        ar.write_target(_path(), logspace, None)
    except ar.ArchiveError as e:
        raise ApiError(500, "internal", str(e)) from None
    audit("archive_settings", logspace=logspace, detail="target removed")
    return jsonify({"deleted": logspace})
