"""Security settings of every answer: the session cookie's flags, a foreign Origin refused and
CSRF checked on every POST (Flask-WTF), and the headers (CSP, HSTS, nosniff, referrer policy, no caching of pages)."""

from __future__ import annotations

from flask import Flask, Response, abort, request
from flask_wtf.csrf import CSRFProtect
from logbox_core.origin import foreign_origin

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "Strict-Transport-Security": "max-age=31536000",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
SESSION_COOKIE = "logbox_session"

csrf = CSRFProtect()


def install(app: Flask) -> None:
    """Cookie flags, CSRF protection and the headers for app."""
    app.config.update(
        SESSION_COOKIE_NAME=SESSION_COOKIE,
        SESSION_COOKIE_SECURE=True,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        PERMANENT_SESSION_LIFETIME=int(app.config["SESSION_TTL"]),
        WTF_CSRF_TIME_LIMIT=None,  # the token lives as long as the session
        WTF_CSRF_SSL_STRICT=True,  # HTTPS: the Referer must be this site
    )
    app.before_request(_check_origin)  # before CSRFProtect's check: a foreign Origin is a 403
    csrf.init_app(app)
    app.after_request(_headers)


def _check_origin() -> None:
    """before_request: a POST (PUT, PATCH, DELETE) whose Origin is another site is refused.

    :raises HTTPException: 403.
    """
    origin = request.headers.get("Origin")
    if foreign_origin(request.method, origin, request.scheme, request.host):
        abort(403, description=f"Cross-origin {request.method} refused (Origin: {origin:.100}).")


def _headers(r: Response) -> Response:
    """after_request: the security headers; pages and data are never cached (static files may)."""
    for k, v in HEADERS.items():
        r.headers.setdefault(k, v)
    if not request.path.startswith("/static/"):
        r.headers["Cache-Control"] = "no-store"
    return r
