"""The one error shape of the API (API.md §3) and the handlers that give it to every failure:
API errors, searchd and accounts errors, werkzeug's HTTP errors and uncaught exceptions."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, json
from logbox_core.accounts import AccountsError
from logbox_core.export import error_status
from logbox_core.searchd import SearchdError
from werkzeug.exceptions import HTTPException

log = logging.getLogger("logbox_rpc")

# The one table of the API's error codes (API.md §3): an answer's status -> its code. werkzeug's
# errors, searchd's and the accounts store's are answered by it; openapi.py describes the
# statuses from it; logbox_client restates it (it depends on nothing of logbox),
# pinned by tests/test_error_codes_pinned.py.
STATUS_CODES = {
    400: "bad_parameter",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "too_broad",
    429: "locked_out",
    500: "internal",
    503: "unavailable",
    507: "insufficient_storage",
}
# accounts error code -> status: the statuses the accounts store's errors (AccountsError.code)
# take, read backwards
ACCOUNTS_STATUS = {STATUS_CODES[s]: s for s in (400, 401, 404, 409, 503, 507)}
WWW_AUTHENTICATE = 'Bearer realm="logbox"'
# a route that writes the accounts store (a change, or the audit entry of a read) may answer
# these: 503 unavailable (it cannot be written), 507 insufficient_storage (no space)
STORE_ERRORS = (503, 507)


class ApiError(Exception):
    """A failure to answer with error_response (raised by views and helpers)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        self.extra = extra

    def response(self) -> Response:
        """This error as a response."""
        r = error_response(self.status, self.code, self.message, **self.extra)
        r.headers.update(self.headers)
        return r


def bad_parameter(message: str) -> ApiError:
    """A 400 bad_parameter (message starts with the parameter's name)."""
    return ApiError(400, "bad_parameter", message)


def error_response(status: int, code: str, message: str, **extra: Any) -> Response:
    """The JSON error answer {"error": {"code", "message", ...extra}} with status."""
    body = {"error": {"code": code, "message": message, **extra}}
    r = Response(json.dumps(body), status=status, mimetype="application/json")
    r.headers["Cache-Control"] = "no-store"
    if status == 401:
        r.headers["WWW-Authenticate"] = WWW_AUTHENTICATE
    return r


def searchd_error_response(e: SearchdError) -> Response:
    """searchd's error, same status and shape (bad_query keeps its position, a 429 or busy 503
    its Retry-After; a 5xx is logged)."""
    if e.status >= 500:
        log.error("searchd: %s %s: %s", e.status, e.code, e.message)
    status = error_status(e)
    if status == 500:
        return error_response(500, "internal", "internal error (logged)")
    if status not in STATUS_CODES and status != 414:
        log.error("searchd: unexpected %s %s: %s", status, e.code, e.message)
        return error_response(500, "internal", "internal error (logged)")
    extra = {"position": e.position} if e.position is not None else {}
    r = error_response(status, e.code, e.message, **extra)
    # 429: this user has too many searches waiting in searchd (or a busy 503): when to retry.
    if e.retry_after is not None and status in (429, 503):
        r.headers["Retry-After"] = str(e.retry_after)
    return r


def accounts_error_response(e: AccountsError) -> Response:
    """An accounts store error as its status (Invalid 400, NotFound 404, Conflict 409)."""
    code = getattr(e, "code", "internal")
    status = ACCOUNTS_STATUS.get(code)
    if status is None:
        log.exception("accounts: %s", e)
        return error_response(500, "internal", "internal error (logged)")
    if status in (503, 507):
        log.error("accounts: %s", e.message)
        return error_response(507, code, f"{e.message}; try again when space is freed")
    return error_response(status, code, str(e.args[0]) if e.args else code)


def http_error_response(e: HTTPException) -> Response:
    """werkzeug's HTTP errors (routing 404/405, 413, 415, bad JSON...) in our shape."""
    status = e.code or 500
    code = STATUS_CODES.get(status, "internal" if status >= 500 else "bad_parameter")
    message = {
        404: "no such route",
        405: "method not allowed",
        413: "request body over 64 KiB",
        415: "the body must be application/json",
    }.get(status, e.description or e.name)
    if status >= 500:
        log.error("HTTP %s: %s", status, e.description)
        message = "internal error (logged)"
    r = error_response(status, code, message)
    for k, v in e.get_headers():
        if k.lower() in ("allow", "retry-after"):
            r.headers[k] = v
    return r


def internal_error_response(e: Exception) -> Response:
    """An uncaught exception: logged with its traceback, answered 500 internal without it."""
    log.error("uncaught exception", exc_info=e)
    return error_response(500, "internal", "internal error (logged)")


def register(app: Flask) -> None:
    """Installs the handlers on app."""
    app.register_error_handler(ApiError, lambda e: e.response())
    app.register_error_handler(SearchdError, searchd_error_response)
    app.register_error_handler(AccountsError, accounts_error_response)
    app.register_error_handler(HTTPException, http_error_response)
    app.register_error_handler(Exception, internal_error_response)
