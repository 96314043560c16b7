"""A logspace's integrity as the last verify found it, day by day, and the public key its days
are signed with (API.md §4); admins only."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify
from logbox_core import integrity as core

from .auth import audit
from .errors import STORE_ERRORS, ApiError, log
from .params import Param, Spec, declare

bp = Blueprint("integrity", __name__)

LOGSPACE = Param("logspace", "string", "the logspace", where="path")
PUBKEY_NAME = "logbox-sign.pub"  # the download's file name


@bp.route("/logspaces/<logspace>/integrity", methods=["GET"])
@declare(
    Spec(
        "The logspace's integrity as the last verify found it: per day intact, sealed up to "
        "when, signed, time-stamped; the problems with their place",
        (LOGSPACE,),
        answer="Integrity",
        errors=(400, 401, 403, 404, *STORE_ERRORS),
        admin=True,
    )
)
def integrity(logspace: str, args: dict[str, Any]) -> Any:
    """GET /logspaces/{logspace}/integrity."""
    path = current_app.config["INTEGRITY_REPORT"]
    doc = core.load(path)
    if doc is None:
        raise ApiError(404, "not_found", "no verify report yet (the daily verify has not run)")
    v = core.view(doc, logspace)
    if v is None:
        raise ApiError(404, "not_found", f"the last verify has no logspace {logspace}")
    audit("integrity", logspace=logspace)
    return jsonify(v)


@bp.route("/integrity/public-key", methods=["GET"])
@declare(
    Spec(
        "The public key (PEM) the store's day roots are signed with, to check them elsewhere "
        "(`logbox verify --pubkey FILE`)",
        media={"application/x-pem-file": f"the PEM public key, as the attachment {PUBKEY_NAME}"},
        errors=(400, 401, 403, 404, *STORE_ERRORS),
        admin=True,
    )
)
def public_key(args: dict[str, Any]) -> Any:
    """GET /integrity/public-key: the file SIGN_PUBKEY names."""
    try:
        pem = core.public_key(current_app.config["SIGN_PUBKEY"])
    except core.PublicKeyError as e:
        if e.status == 404:
            raise ApiError(404, "not_found", e.message) from None
        log.error("integrity: %s", e.message)
        raise ApiError(500, "internal", e.message) from None
    audit("integrity_public_key", detail=f"{len(pem)} bytes")
    return Response(
        pem,
        mimetype="application/x-pem-file",
        headers={"Content-Disposition": f"attachment; filename={PUBKEY_NAME}"},
    )
