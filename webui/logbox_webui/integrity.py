"""The integrity page (GET /integrity, admins only): a logspace as the last `logbox verify
--json --out` report found it, day by day (intact, chained, sealed, signed, time-stamped), with
the report's time, whether seals were checked with the verification key, the sealing summary and
the problems with their place; and the download of the public key the days are signed with
(GET /integrity/public-key). The report is read and shaped by logbox_core.integrity, as the
API's GET /api/v1/logspaces/{logspace}/integrity does; reads are audited with the API's action
names (integrity, integrity_public_key)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, abort, current_app, render_template, request
from logbox_core import integrity as core

from .auth import admin_required, audit

bp = Blueprint("integrity", __name__)

PUBKEY_NAME = "logbox-sign.pub"  # the download's file name, the API's too


@bp.route("/integrity", methods=["GET"])
@admin_required
def page() -> Any:
    """GET /integrity?logspace=NAME: the logspace's part of the last report (main when not
    given and the report has it, else its first); a page that says so when there is no report
    yet (200) or the report has no such logspace (404)."""
    c = current_app.config
    path = c["INTEGRITY_REPORT"]
    doc = core.load(path)
    asked = request.args.get("logspace", "")
    names = core.names(doc) if doc is not None else []
    name = asked or ("main" if "main" in names or not names else names[0])
    view = core.view(doc, name) if doc is not None else None
    status = 404 if doc is not None and view is None else 200
    if view is not None:
        audit("integrity", logspace=name)
    body = render_template(
        "integrity/integrity.html",
        report_path=path,
        has_report=doc is not None,
        names=names,
        name=name,
        v=view,
        pubkey_path=c["SIGN_PUBKEY"],
    )
    return body, status


@bp.route("/integrity/public-key", methods=["GET"])
@admin_required
def public_key() -> Any:
    """GET /integrity/public-key: the PEM file SIGN_PUBKEY names, as the attachment
    logbox-sign.pub (404 when there is none, 500 when it is not a PEM public key)."""
    try:
        pem = core.public_key(current_app.config["SIGN_PUBKEY"])
    except core.PublicKeyError as e:
        if e.status != 404:
            current_app.logger.error("integrity: %s", e.message)
        abort(e.status, description=e.message)
    audit("integrity_public_key", detail=f"{len(pem)} bytes")
    return Response(
        pem,
        mimetype="application/x-pem-file",
        headers={"Content-Disposition": f"attachment; filename={PUBKEY_NAME}"},
    )
