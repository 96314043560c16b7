"""Authentication: the bearer token check every route but health and login goes through
(rights per logspace, admin-only routes), and the login, logout and me routes (API.md §2)."""

from __future__ import annotations

import math
from typing import Any

from flask import Blueprint, Flask, current_app, g, jsonify, request
from logbox_core.accounts import Lockout, StoreWriteError, TokenError
from logbox_core.origin import foreign_origin

from .errors import STORE_ERRORS, WWW_AUTHENTICATE, ApiError, bad_parameter, log
from .params import Spec, declare, json_body, spec_of
from .state import accounts

bp = Blueprint("auth", __name__)

TOKEN_MESSAGES = {
    "malformed": "malformed token",
    "unknown": "unknown token",
    "expired": "token expired",
    "revoked": "token revoked",
    "user": "the token's user is disabled or deleted",
}


def address() -> str:
    """The client's address (gunicorn: the peer's IP)."""
    return request.remote_addr or "unknown"


def audit(action: str, **kw: Any) -> None:
    """An audit entry by the current caller (g.user when known)."""
    user = g.user.name if getattr(g, "user", None) is not None else kw.pop("user", None)
    kw.pop("user", None)
    accounts().audit(action, user=user, address=address(), **kw)


def audit_refusal(action: str, **kw: Any) -> None:
    """audit() of a refusal, best effort: a refusal is safe without its entry, so a store
    without space to record it (logged) does not turn a 401/403 into a 507."""
    try:
        audit(action, **kw)
    except StoreWriteError as e:
        log.error("audit entry of a refusal not written: %s", e.message)


def unauthorized(message: str) -> ApiError:
    """A 401 (audited as "denied")."""
    audit_refusal("denied", status=401, detail=f"{request.method} {request.path}: {message}")
    return ApiError(401, "unauthorized", message, {"WWW-Authenticate": WWW_AUTHENTICATE})


def forbidden(message: str, logspace: str | None = None) -> ApiError:
    """A 403 (audited as "denied")."""
    audit_refusal(
        "denied",
        logspace=logspace,
        status=403,
        detail=f"{request.method} {request.path}: {message}",
    )
    return ApiError(403, "forbidden", message)


def locked_out(username: str, addr: str, lock: Lockout) -> ApiError:
    """The 429 of a refused login attempt (audited as "login_locked")."""
    secs = math.ceil(lock.seconds)
    if lock.scope == "address":
        why = f"too many failed logins from {addr}"
    else:
        why = f"too many failed logins for {username[:64]!r} from addresses it never signed in from"
    audit_refusal("login_locked", user=username[:64], status=429, detail=f"{lock.scope} blocked")
    return ApiError(429, "locked_out", f"{why}: try again in {secs} s", {"Retry-After": str(secs)})


def password_change_required(name: str) -> ApiError:
    """The 403 of a user whose password was generated (must_change): nothing is accepted from
    them until it is changed (audited as "denied")."""
    message = (
        f"the password of {name!r} must be changed before the API accepts it: change it in the "
        f"web UI (/password), or have an admin set a new one (PATCH /api/v1/users/{name})"
    )
    audit_refusal("denied", user=name, status=403, detail=f"{request.method} {request.path}: "
                  "password change required")  # fmt: skip
    return ApiError(403, "password_change_required", message)


def check_request() -> None:
    """before_request: a foreign Origin on a POST/PUT/PATCH/DELETE, the bearer token, the role
    and the logspace rights of the route.

    :raises ApiError: 401, 403.
    """
    g.user = None
    g.token = None
    if foreign_origin(request.method, request.headers.get("Origin"), request.scheme, request.host):
        raise forbidden(
            f"cross-origin {request.method} refused (Origin: {request.headers['Origin']!r:.100})"
        )
    if request.url_rule is None:  # 404/405: answered by the routing error
        return
    view = current_app.view_functions.get(request.endpoint or "")
    spec = spec_of(view) if view else None
    if spec is not None and not spec.auth:
        return
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if not header:
        raise unauthorized("no token (Authorization: Bearer <token>)")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("expected Authorization: Bearer <token>")
    try:
        g.token, g.user = accounts().verify_token(token.strip())
    except TokenError as e:
        raise unauthorized(TOKEN_MESSAGES.get(e.reason, "bad token")) from None
    if g.token.kind == "web":  # a browser's sign-in works in the web UI only
        g.user = g.token = None
        raise unauthorized("a web UI session is not an API token (POST /api/v1/login)")
    if g.user.must_change and request.endpoint != "auth.logout":
        raise password_change_required(g.user.name)
    if spec is not None and spec.admin and g.user.role != "admin":
        raise forbidden(f"{g.user.name} is not an admin")
    logspace = (request.view_args or {}).get("logspace")
    if logspace is not None and not g.user.can_read(logspace):
        raise forbidden(f"{g.user.name} may not read logspace {logspace!r}", logspace)


def install(app: Flask) -> None:
    """Registers the blueprint and the token check."""
    app.before_request(check_request)
    app.register_blueprint(bp, url_prefix="/api/v1")


@bp.route("/login", methods=["POST"])
@declare(
    Spec(
        "Log in: a session token for a user name and password",
        body="LoginRequest",
        answer="LoginResult",
        errors=(400, 401, 403, 413, 415, 429, *STORE_ERRORS),
        auth=False,
    )
)
def login(args: dict[str, Any]) -> Any:
    """POST /login: checks the password (argon2 even for unknown users), with the lockout."""
    body = json_body(("username", "password"), ("username", "password"))
    username, password = body["username"], body["password"]
    if not isinstance(username, str):
        raise bad_parameter("username: expected a string")
    if not isinstance(password, str):
        raise bad_parameter("password: expected a string")
    acc = accounts()
    addr = address()
    lock = acc.login_attempt(addr, username)
    if lock is not None:
        raise locked_out(username, addr, lock)
    user = acc.check_password(username, password)
    if user is None:
        block = acc.login_failed(addr, username)
        acc.audit("login_failed", user=username[:64], address=addr, status=401)
        if block > 0:
            acc.audit(
                "login_locked",
                user=username[:64],
                address=addr,
                status=401,
                detail=f"address blocked for {math.ceil(block)} s",
            )
        raise ApiError(
            401,
            "unauthorized",
            "wrong user name or password",
            {"WWW-Authenticate": WWW_AUTHENTICATE},
        )
    acc.login_succeeded(addr, user.name)
    if user.must_change:
        raise password_change_required(user.name)
    secret, token = acc.create_token(
        user.name, "session", kind="session", ttl=current_app.config["SESSION_TTL"]
    )
    acc.audit("login", user=user.name, address=addr, status=200, detail=f"token {token.id}")
    t = token.to_json()
    return jsonify(
        {"token": secret, "id": token.id, "expires": t["expires"], "user": user.to_json()}
    )


@bp.route("/logout", methods=["POST"])
@declare(
    Spec("Log out: revokes the token of this call", answer="Revoked", errors=(401, *STORE_ERRORS))
)
def logout(args: dict[str, Any]) -> Any:
    """POST /logout: revokes the caller's token."""
    accounts().revoke_token(g.token.id)
    audit("logout", detail=f"token {g.token.id}")
    return jsonify({"revoked": g.token.id})


@bp.route("/me", methods=["GET"])
@declare(Spec("The caller: user and token", answer="Me", errors=(400, 401)))
def me(args: dict[str, Any]) -> Any:
    """GET /me."""
    return jsonify({"user": g.user.to_json(), "token": g.token.to_json()})
