"""logbox_webui: the web UI of logbox (webui/UI.md), a Flask app under gunicorn, HTTPS only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask, Request, render_template
from flask_wtf.csrf import CSRFError
from logbox_core import proxy
from logbox_core.accounts import StoreWriteError
from logbox_core.searchd import SearchdError
from markupsafe import Markup
from werkzeug.exceptions import HTTPException, InternalServerError

from . import (
    admin,
    alerts,
    archive,
    auth,
    delivery,
    integrity,
    reports,
    saved,
    search,
    security,
    sites,
    status,
    tail,
)
from .config import load
from .state import State

__all__ = ["create_app"]


class WebRequest(Request):
    """Requests whose %-escaped bytes that are not UTF-8 stay bytes (\\udcXX, as searchd's
    strings carry them), so a query holding them round-trips through the URL."""

    encoding_errors = "surrogateescape"


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """The app, configured by defaults, LOGBOX_WEBUI_CONFIG's file, LOGBOX_* and config."""
    app = Flask(__name__)
    app.request_class = WebRequest
    app.config.update(load(config))
    app.config.setdefault("MAX_CONTENT_LENGTH", 1 << 20)  # forms are small
    app.extensions["logbox"] = State(app.config)
    proxy.install(app)
    app.logger.setLevel("INFO")
    security.install(app)
    auth.install(app)
    # one blueprint per area (webui/UI.md): search, the status dashboard, the admin pages and
    # the integrity page (admins too)
    app.register_blueprint(search.bp)
    app.register_blueprint(saved.bp)
    app.register_blueprint(reports.bp)
    app.register_blueprint(alerts.bp)
    app.register_blueprint(tail.bp)
    app.register_blueprint(status.bp)
    app.register_blueprint(admin.bp)
    app.register_blueprint(delivery.bp)
    app.register_blueprint(archive.bp)
    app.register_blueprint(sites.bp)
    app.register_blueprint(integrity.bp)
    app.jinja_env.finalize = _printable
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(CSRFError, _csrf_error)
    app.register_error_handler(SearchdError, _searchd_error)
    app.register_error_handler(StoreWriteError, _store_error)
    app.register_error_handler(Exception, _internal_error)
    return app


def _printable(value: Any) -> Any:
    """Jinja finalize: a str holding bytes that are not UTF-8 (\\udcXX) prints them as \\xXX
    (a page is always valid UTF-8)."""
    if isinstance(value, str) and not isinstance(value, Markup):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return (
                "".join(
                    f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in value
                )
                .encode("utf-8", "replace")
                .decode("utf-8")
            )
    return value


def error_page(status: int, title: str, message: str) -> tuple[str, int]:
    """The error page: the status, a title and a message, never a traceback."""
    return render_template("errors/error.html", status=status, title=title, message=message), status


def _http_error(e: HTTPException) -> Any:
    """Routing errors, abort() and the like as the error page."""
    if e.code is None or e.code < 400:
        return e
    return error_page(e.code, e.name, e.description or e.name)


def _csrf_error(e: CSRFError) -> Any:
    """A POST without a valid CSRF token: 400."""
    return error_page(
        400, "Form expired or forged", f"{e.description} Reload the page and try again."
    )


def _searchd_error(e: SearchdError) -> Any:
    """searchd refused or could not be reached (503: down)."""
    if e.status == 503:
        return error_page(
            503, "Search unavailable", f"The search daemon is unavailable: {e.message}"
        )
    if e.status == 429:
        wait = e.retry_after or 1
        page, status = error_page(429, "Too many searches", f"{e.message} (try again in {wait} s).")
        return page, status, {"Retry-After": str(wait)}
    return error_page(e.status if e.status >= 400 else 502, "Search failed", e.message)


def _store_error(e: StoreWriteError) -> Any:
    """The accounts store cannot write a change (a sign-in, an audit entry): 507 when it has no
    space, else 503."""
    from flask import current_app

    current_app.logger.error("accounts: %s", e.message)
    title = "Insufficient storage" if e.status == 507 else "Accounts store unavailable"
    return error_page(e.status, title, f"{e.message.capitalize()}: try again later.")


def _internal_error(e: Exception) -> Any:
    """Anything else: logged with its traceback, answered 500 without one."""
    if isinstance(e, HTTPException):
        return _http_error(e)
    from flask import current_app

    current_app.logger.error("internal error", exc_info=e)
    return error_page(500, InternalServerError.name, "Internal error (logged).")
