"""logbox_rpc: the HTTPS JSON API of logbox (rpc/API.md), a Flask app under gunicorn."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask, Response
from logbox_core import proxy

from . import (
    admin,
    alerts,
    archive,
    auth,
    delivery,
    errors,
    integrity,
    openapi,
    reports,
    search,
    searches,
    sites,
    status,
)
from .config import load
from .params import MAX_BODY
from .state import State

__all__ = ["create_app"]


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """The app, configured by defaults, LOGBOX_RPC_CONFIG's file, LOGBOX_* and config."""
    app = Flask(__name__, static_folder=None)
    app.config.update(load(config))
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["logbox"] = State(app.config)
    proxy.install(app)
    app.logger.setLevel("INFO")  # installs Flask's stderr handler on the "logbox_rpc" logger
    errors.register(app)
    auth.install(app)
    for bp in (
        search.bp,
        searches.bp,
        reports.bp,
        alerts.bp,
        admin.bp,
        delivery.bp,
        archive.bp,
        sites.bp,
        status.bp,
        integrity.bp,
        openapi.bp,
    ):
        app.register_blueprint(bp, url_prefix="/api/v1")
    app.after_request(_no_store)
    return app


def _no_store(r: Response) -> Response:
    """after_request: answers are never cached."""
    r.headers.setdefault("Cache-Control", "no-store")
    return r
