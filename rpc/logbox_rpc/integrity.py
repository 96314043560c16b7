"""A logspace's integrity as the last verify found it, day by day (API.md §4); admins only."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify
from logbox_core import integrity as core

from .auth import audit
from .errors import ApiError
from .params import Param, Spec, declare

bp = Blueprint("integrity", __name__)

LOGSPACE = Param("logspace", "string", "the logspace", where="path")


@bp.route("/logspaces/<logspace>/integrity", methods=["GET"])
@declare(
    Spec(
        "The logspace's integrity as the last verify found it: per day intact, sealed up to "
        "when, signed, time-stamped; the problems with their place",
        (LOGSPACE,),
        answer="Integrity",
        errors=(400, 401, 403, 404),
        admin=True,
    )
)
def integrity(logspace: str, args: dict[str, Any]) -> Any:
    """GET /logspaces/{logspace}/integrity."""
    path = current_app.config["INTEGRITY_REPORT"]
    doc = core.load(path)
    if doc is None:
        raise ApiError(404, "not_found", "no verify report yet (the daily verify has not run)")
    e = core.logspace(doc, logspace)
    if e is None:
        raise ApiError(404, "not_found", f"the last verify has no logspace {logspace}")
    audit("integrity", logspace=logspace)
    return jsonify(
        {
            "logspace": logspace,
            "verified_at": doc.get("time"),
            "integrity_only": doc.get("integrity_only") is True,
            "checked_with_key": doc.get("checked_with_key") is True,
            "ok": e.get("ok") is True,
            "messages": e.get("messages"),
            "sealing": e.get("sealing"),
            "days_signed": e.get("days_signed"),
            "days_timestamped": e.get("days_timestamped"),
            "problems": e.get("problems") or [],
            "days": e.get("days") or [],
        }
    )
