"""Status and health (API.md §7)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, g, jsonify
from logbox_core import status as core_status
from logbox_core import system as core_system

from . import alerts
from .errors import error_response
from .params import Spec, declare
from .state import searchd

bp = Blueprint("status", __name__)


@bp.route("/status", methods=["GET"])
@declare(
    Spec(
        "The appliance's state: services, rates, logspaces, disk, RAID",
        answer="Status",
        errors=(400, 401),
    )
)
def status(args: dict[str, Any]) -> Any:
    """GET /status: logbox_core.status.gather as the caller may see it (for_user)."""
    c = current_app.config
    doc = core_status.gather(
        data_dir=c["DATA_DIR"],
        indexd_status=c["INDEXD_STATUS"],
        syslogng_pidfile=c["SYSLOGNG_PIDFILE"],
        searchd=searchd(),
        integrity_report=c["INTEGRITY_REPORT"],
        alertd_status=c["ALERTD_STATUS"],
        archive_state=c.get("ARCHIVE_STATE"),
    )
    out = core_status.for_user(doc, g.user)
    out["alerts"] = [
        {k: v[k] for k in ("id", "name", "owner", "logspace", "enabled")} | v["status"]
        for v in alerts.visible_views()
    ]
    return jsonify(out)


@bp.route("/system", methods=["GET"])
@declare(
    Spec(
        "The machine the box runs on: CPU, memory, disks, RAID, store, kernel, logbox version "
        "and the settings that change performance figures",
        answer="System",
        errors=(400, 401, 403),
        admin=True,
    )
)
def system(args: dict[str, Any]) -> Any:
    """GET /system: logbox_core.system.gather."""
    c = current_app.config
    return jsonify(
        core_system.gather(
            data_dir=c["DATA_DIR"], indexd_status=c["INDEXD_STATUS"], build_info=c["BUILD_INFO"]
        )
    )


@bp.route("/health", methods=["GET"])
@declare(
    Spec(
        "Whether the API can reach searchd (no authentication)",
        answer="Health",
        errors=(400, 503),
        auth=False,
    )
)
def health(args: dict[str, Any]) -> Any:
    """GET /health: 200 {"status": "ok"} when searchd answers, else 503 unavailable."""
    if searchd().health():
        return jsonify({"status": "ok"})
    return error_response(503, "unavailable", "searchd cannot be reached")
