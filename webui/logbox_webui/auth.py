"""Sign-in: the login, logout and password pages, the session check every request goes through
(an accounts token of kind "web" in the signed session cookie, idle and absolute expiry, the
forced password change), the view decorators and the audit helper (webui/UI.md)."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Flask,
    Response,
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from logbox_core.accounts import AccountsError, Lockout, Token, TokenError, User

from .state import accounts

bp = Blueprint("auth", __name__)

# Endpoints open to anyone (no sign-in needed).
PUBLIC = frozenset({"auth.login", "auth.healthz", "static"})
# Endpoints a user who must change their password may still reach.
WHILE_MUST_CHANGE = frozenset({"auth.password", "auth.logout", "auth.healthz", "static"})

WRONG_LOGIN = "wrong user name or password"


def address() -> str:
    """The client's address (gunicorn: the peer's IP)."""
    return request.remote_addr or "unknown"


def current_user() -> User | None:
    """The signed-in user of this request, or None."""
    return getattr(g, "user", None)


def current_token() -> Token | None:
    """The session token of this request, or None."""
    return getattr(g, "token", None)


def audit(action: str, **kw: Any) -> None:
    """An audit entry by the current user (or kw["user"] when nobody is signed in), from the
    client's address; kw: logspace, query, results, status, detail (Accounts.audit)."""
    user = current_user()
    name = kw.pop("user", None)
    accounts().audit(action, user=user.name if user is not None else name, address=address(), **kw)


def denied(message: str, logspace: str | None = None) -> None:
    """Audits a refusal and answers 403 with message.

    :raises HTTPException: always (403).
    """
    audit(
        "denied",
        logspace=logspace,
        status=403,
        detail=f"{request.method} {request.path}: {message}",
    )
    abort(403, description=message)


def safe_next(target: str | None) -> str | None:
    """target when it is a relative path on this site (no scheme, no host, no "//" or "\\"),
    else None: the only places a sign-in redirects back to."""
    if not target or not isinstance(target, str) or len(target) > 8192:
        return None
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in target):
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return None
    return target


def _here() -> str:
    """This request's path and query, for a redirect back after sign-in."""
    qs = request.query_string.decode("latin-1")
    return request.path + (f"?{qs}" if qs else "")


def login_required(view: Callable) -> Callable:
    """Decorator: anonymous callers are sent to /login (and back here afterwards)."""

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if current_user() is None:
            return redirect(url_for("auth.login", next=_here()))
        return view(*args, **kwargs)

    return wrapper


def admin_required(view: Callable) -> Callable:
    """Decorator: signed in as an admin, else /login (anonymous) or 403 (audited)."""

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        user = current_user()
        if user is None:
            return redirect(url_for("auth.login", next=_here()))
        if user.role != "admin":
            denied(f"{user.name} is not an admin")
        return view(*args, **kwargs)

    return wrapper


def requested_logspace() -> str:
    """The logspace of this request: the route's <logspace>, else ?logspace=, else "main"."""
    ls = (request.view_args or {}).get("logspace")
    if ls is None:
        ls = request.args.get("logspace") or "main"
    return ls


def can_read_required(view: Callable) -> Callable:
    """Decorator: signed in and allowed to read the request's logspace (requested_logspace()),
    else /login (anonymous) or 403 (audited)."""

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        user = current_user()
        if user is None:
            return redirect(url_for("auth.login", next=_here()))
        ls = requested_logspace()
        if not user.can_read(ls):
            denied(f"{user.name} may not read logspace {ls!r}", ls)
        return view(*args, **kwargs)

    return wrapper


def end_session(reason: str | None = None) -> None:
    """Forgets the session (the cookie); reason is flashed on the next page."""
    session.clear()
    if reason:
        flash(reason)


def check_session() -> Response | None:
    """before_request: g.user/g.token from the session's token (verified against the accounts
    store on every request), idle expiry, and the forced password change."""
    g.user = None
    g.token = None
    if request.endpoint == "static":
        return None
    secret = session.get("token")
    if secret is None:
        return None
    acc = accounts()
    try:
        token, user = acc.verify_token(secret)
    except TokenError as e:
        end_session("Your session ended (signed out, expired or revoked): sign in again.")
        current_app.logger.info("web session refused: %s", e.reason)
        return None
    if token.kind != "web":  # only sign-ins made here, never an API token put in a cookie
        end_session("Your session ended: sign in again.")
        current_app.logger.warning("web session refused: a %s token in the cookie", token.kind)
        return None
    now = time.time()
    seen = session.get("seen")
    if not isinstance(seen, int | float) or now - seen > current_app.config["SESSION_IDLE"]:
        try:
            acc.revoke_token(token.id)
        except AccountsError:
            pass
        acc.audit("logout", user=user.name, address=address(), detail=f"token {token.id}: idle")
        end_session("Your session ended after being idle: sign in again.")
        return None
    session["seen"] = round(now, 3)
    g.user, g.token = user, token
    if user.must_change and request.endpoint not in WHILE_MUST_CHANGE:
        return redirect(url_for("auth.password", next=safe_next(_here())))
    return None


def install(app: Flask) -> None:
    """Registers the blueprint, the session check and the template globals."""
    app.before_request(check_session)
    app.register_blueprint(bp)
    app.jinja_env.globals["current_user"] = current_user


@bp.route("/healthz")
def healthz() -> Response:
    """GET /healthz: "ok" (for load balancers)."""
    return Response("ok\n", mimetype="text/plain")


def _refused(lock: Lockout, username: str) -> tuple[str, int, dict[str, str]]:
    """The 429 page of a sign-in attempt the lockout refused (audited as "login_locked")."""
    accounts().audit(
        "login_locked",
        user=username[:64] or None,
        address=address(),
        status=429,
        detail=f"{lock.scope} blocked",
    )
    return _locked_page(lock)


def _locked_page(lock: Lockout) -> tuple[str, int, dict[str, str]]:
    """The 429 page of a lockout."""
    secs = math.ceil(lock.seconds)
    minutes = math.ceil(secs / 60)
    if lock.scope == "address":
        why = f"Too many failed sign-ins from {address()}: sign-in from this address"
    else:
        why = (
            f"Too many failed sign-ins for this user name from elsewhere: its sign-in from "
            f"{address()}, where it never signed in before,"
        )
    message = f"{why} is blocked for {secs} s (about {minutes} min)."
    body = render_template(
        "errors/error.html", status=429, title="Too many sign-ins", message=message
    )
    return body, 429, {"Retry-After": str(secs)}


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    """GET /login: the form; POST /login: checks the password (with the API's lockout), starts a
    web session and goes back to the page asked for."""
    nxt = safe_next(request.values.get("next"))
    if request.method == "GET":
        if current_user() is not None:
            return redirect(nxt or url_for("search.search"))
        return render_template("auth/login.html", next=nxt, username="")
    username = request.form.get("username", "")
    password = request.form.get("password", "")
    acc = accounts()
    addr = address()
    lock = acc.login_attempt(addr, username)
    if lock is not None:
        return _refused(lock, username)
    user = acc.check_password(username, password) if username and password else None
    if user is None:
        block = acc.login_failed(addr, username)
        acc.audit("login_failed", user=username[:64] or None, address=addr, status=401)
        if block > 0:
            acc.audit(
                "login_locked",
                user=username[:64] or None,
                address=addr,
                status=401,
                detail=f"address blocked for {math.ceil(block)} s",
            )
            return _locked_page(Lockout("address", block))
        flash(f"{WRONG_LOGIN.capitalize()}.")
        return render_template("auth/login.html", next=nxt, username=username), 401
    acc.login_succeeded(addr, user.name)
    old = session.get("token")
    if old:  # a sign-in over a live session ends the old one
        try:
            acc.revoke_token(old.split("_")[1])
        except (AccountsError, IndexError):
            pass
    secret, token = acc.create_token(
        user.name, "web session", kind="web", ttl=current_app.config["SESSION_TTL"]
    )
    session.clear()
    session.permanent = True
    session["token"] = secret
    session["seen"] = round(time.time(), 3)
    acc.audit("login", user=user.name, address=addr, status=200, detail=f"web, token {token.id}")
    if user.must_change:
        return redirect(url_for("auth.password", next=nxt))
    return redirect(nxt or url_for("search.search"))


@bp.route("/logout", methods=["POST"])
def logout() -> Response:
    """POST /logout: revokes the session's token and forgets the cookie."""
    token = current_token()
    if token is not None:
        try:
            accounts().revoke_token(token.id)
        except AccountsError:
            pass
        audit("logout", detail=f"web, token {token.id}")
    end_session("Signed out.")
    return redirect(url_for("auth.login"))


@bp.route("/password", methods=["GET", "POST"])
@login_required
def password() -> Any:
    """GET/POST /password: change one's own password (current, new twice); the forced page while
    the user's must_change flag is set."""
    user = current_user()
    assert user is not None
    nxt = safe_next(request.values.get("next"))
    if request.method == "GET":
        return render_template("auth/password.html", user=user, next=nxt)
    acc = accounts()
    addr = address()
    lock = acc.login_attempt(addr, user.name)
    if lock is not None:
        return _refused(lock, user.name)
    current = request.form.get("current", "")
    new = request.form.get("new", "")
    new2 = request.form.get("new2", "")
    error = None
    ended = 0
    if acc.check_password(user.name, current) is None:
        acc.login_failed(addr, user.name)
        audit("denied", status=403, detail="password change: wrong current password")
        error = "The current password is wrong."
    else:
        acc.login_succeeded(addr, user.name)
        if new != new2:
            error = "The two new passwords differ."
        elif new == current:
            error = "The new password must differ from the current one."
    if error is None:
        me = current_token()
        try:
            _, ended = acc.change_password(
                user.name, new, keep_token=me.id if me is not None else None
            )
        except AccountsError as e:
            error = f"{e}."
    if error is not None:
        flash(error)
        return render_template("auth/password.html", user=user, next=nxt), 400
    audit(
        "user_update",
        detail=f"{user.name}: own password changed, {ended} other sessions ended (web and API)",
    )
    flash("Password changed.")
    return redirect(nxt or url_for("search.search"))
