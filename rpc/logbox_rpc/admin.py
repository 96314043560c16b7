"""Administration: API tokens, users and the audit log (API.md §2, §4, §6); admins only."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, jsonify
from logbox_core.accounts import AUDIT_ACTIONS, ROLES, NotFound
from logbox_core.constants import USER_NAME_PATTERN

from .auth import audit
from .errors import STORE_ERRORS, ApiError, bad_parameter
from .params import Param, Spec, declare, json_body, member, parse_time
from .state import accounts

bp = Blueprint("admin", __name__)

ACTIONS = AUDIT_ACTIONS
DEFAULT_TOKEN_TTL = 90 * 86400
MAX_TOKEN_TTL = 10 * 365 * 86400
ADMIN_ERRORS = (400, 401, 403)
BODY_ERRORS = (400, 401, 403, 413, 415, *STORE_ERRORS)
TOKEN_ID = Param("id", "string", "the token's id (12 hex digits)", where="path")
USER_NAME = Param("name", "string", "the user name", where="path")


# ---------------------------------------------------------------- tokens


@bp.route("/tokens", methods=["GET"])
@declare(
    Spec(
        "API and session tokens (never their secrets)",
        (Param("user", "string", "only this user's tokens"),),
        answer="TokenList",
        errors=ADMIN_ERRORS,
        admin=True,
    )
)
def list_tokens(args: dict[str, Any]) -> Any:
    """GET /tokens."""
    return jsonify({"tokens": [t.to_json() for t in accounts().list_tokens(args.get("user"))]})


@bp.route("/tokens", methods=["POST"])
@declare(
    Spec(
        "A new API token; its secret is shown this once",
        body="TokenCreate",
        ok=201,
        answer="NewToken",
        errors=(*BODY_ERRORS, 404),
        admin=True,
    )
)
def create_token(args: dict[str, Any]) -> Any:
    """POST /tokens: body {"user" (default: the caller), "name", "expires_in" (s or null)}."""
    body = json_body(("user", "name", "expires_in"))
    user = member(body, "user", str, "a user name") or g.user.name
    name = member(body, "name", str, "a string")
    name = "api" if name is None else name
    if len(name) > 200:
        raise bad_parameter("name: longer than 200 characters")
    ttl: int | None = DEFAULT_TOKEN_TTL
    if "expires_in" in body:
        ttl = member(body, "expires_in", int, f"seconds 1..{MAX_TOKEN_TTL} or null")
        if ttl is not None and not 1 <= ttl <= MAX_TOKEN_TTL:
            raise bad_parameter(
                f"expires_in: expected seconds 1..{MAX_TOKEN_TTL} or null, got {ttl}"
            )
    acc = accounts()
    if acc.get_user(user) is None:
        raise ApiError(404, "not_found", f"no user '{user}'")
    secret, token = acc.create_token(user, name, kind="api", ttl=ttl)
    audit("token_create", status=201, detail=f"token {token.id} for {user}")
    return jsonify({"token": secret, **token.to_json()}), 201


@bp.route("/tokens/<id>", methods=["DELETE"])
@declare(
    Spec(
        "Revokes a token",
        (TOKEN_ID,),
        answer="Token",
        errors=(*ADMIN_ERRORS, 404, *STORE_ERRORS),
        admin=True,
    )
)
def revoke_token(id: str, args: dict[str, Any]) -> Any:
    """DELETE /tokens/{id}."""
    acc = accounts()
    if acc.get_token(id) is None:
        raise ApiError(404, "not_found", f"no token '{id}'")
    token = acc.revoke_token(id)
    audit("token_revoke", detail=f"token {id} of {token.user}")
    return jsonify(token.to_json())


# ---------------------------------------------------------------- users


def _logspaces(body: dict[str, Any]) -> list[str] | None:
    """body["logspaces"] checked: a list of names or ["*"]."""
    v = member(body, "logspaces", list, 'a list of logspace names or ["*"]')
    if v is not None and not all(isinstance(x, str) and x for x in v):
        raise bad_parameter('logspaces: expected a list of logspace names or ["*"]')
    return v


def _role(body: dict[str, Any]) -> str | None:
    """body["role"] checked."""
    v = member(body, "role", str, " or ".join(ROLES))
    if v is not None and v not in ROLES:
        raise bad_parameter(f"role: expected {' or '.join(ROLES)}, got {v!r}")
    return v


def _user(name: str) -> Any:
    """The user called name.

    :raises ApiError: 404.
    """
    u = accounts().get_user(name)
    if u is None:
        raise ApiError(404, "not_found", f"no user '{name}'")
    return u


@bp.route("/users", methods=["GET"])
@declare(Spec("Every user", answer="UserList", errors=ADMIN_ERRORS, admin=True))
def list_users(args: dict[str, Any]) -> Any:
    """GET /users."""
    return jsonify({"users": [u.to_json() for u in accounts().list_users()]})


@bp.route("/users", methods=["POST"])
@declare(
    Spec(
        "A new user",
        body="UserCreate",
        ok=201,
        answer="User",
        errors=(*BODY_ERRORS, 409),
        admin=True,
    )
)
def create_user(args: dict[str, Any]) -> Any:
    """POST /users: body {"name", "password", "role" (searcher), "logspaces" (["*"])}."""
    body = json_body(("name", "password", "role", "logspaces"), ("name", "password"))
    name = member(body, "name", str, f"a user name {USER_NAME_PATTERN}")
    password = member(body, "password", str, "a string of at least 12 characters")
    role = _role(body) or "searcher"
    logspaces = _logspaces(body)
    user = accounts().add_user(
        name, password, role, tuple(logspaces) if logspaces is not None else ("*",)
    )
    audit("user_create", status=201, detail=f"user {user.name} ({user.role})")
    return jsonify(user.to_json()), 201


@bp.route("/users/<name>", methods=["GET"])
@declare(Spec("One user", (USER_NAME,), answer="User", errors=(*ADMIN_ERRORS, 404), admin=True))
def get_user(name: str, args: dict[str, Any]) -> Any:
    """GET /users/{name}."""
    return jsonify(_user(name).to_json())


@bp.route("/users/<name>", methods=["PATCH"])
@declare(
    Spec(
        "Changes a user: any of password, role, logspaces, disabled",
        (USER_NAME,),
        body="UserUpdate",
        answer="User",
        errors=(*BODY_ERRORS, 404, 409),
        admin=True,
    )
)
def update_user(name: str, args: dict[str, Any]) -> Any:
    """PATCH /users/{name}."""
    body = json_body(("password", "role", "logspaces", "disabled"))
    _user(name)
    password = member(body, "password", str, "a string of at least 12 characters")
    role = _role(body)
    logspaces = _logspaces(body)
    disabled = member(body, "disabled", bool, "true or false")
    user = accounts().update_user(
        name,
        password=password,
        role=role,
        logspaces=tuple(logspaces) if logspaces is not None else None,
        disabled=disabled,
        keep_token=g.token.id if name == g.user.name else None,  # a new password ends sessions
    )
    audit("user_update", detail=f"user {name}: {', '.join(sorted(body)) or 'nothing'}")
    return jsonify(user.to_json())


@bp.route("/users/<name>", methods=["DELETE"])
@declare(
    Spec(
        "Deletes a user and revokes their tokens",
        (USER_NAME,),
        answer="Deleted",
        errors=(*ADMIN_ERRORS, 404, 409, *STORE_ERRORS),
        admin=True,
    )
)
def delete_user(name: str, args: dict[str, Any]) -> Any:
    """DELETE /users/{name}."""
    acc = accounts()
    _user(name)
    tokens = [t for t in acc.list_tokens(name) if t.revoked_us is None]
    acc.delete_user(name)
    for t in tokens:
        try:
            acc.revoke_token(t.id)
        except NotFound:
            pass
    audit("user_delete", detail=f"user {name}")
    return jsonify({"deleted": name})


# ---------------------------------------------------------------- audit log


@bp.route("/audit", methods=["GET"])
@declare(
    Spec(
        "The audit log, newest first",
        (
            Param(
                "from", "time", "entries at or after this time (RFC 3339, -1h, now, epoch seconds)"
            ),
            Param("to", "time", "entries before this time"),
            Param("user", "string", "only this user's entries"),
            Param("action", "string", "only this action", enum=ACTIONS),
            Param("limit", "integer", "entries per page", default=100, minimum=1, maximum=1000),
            Param("cursor", "integer", "the next_cursor of the previous page", minimum=1),
        ),
        answer="AuditPage",
        errors=ADMIN_ERRORS,
        admin=True,
    )
)
def audit_log(args: dict[str, Any]) -> Any:
    """GET /audit."""
    from_us = parse_time("from", args["from"]) if "from" in args else None
    to_us = parse_time("to", args["to"]) if "to" in args else None
    if from_us is not None and to_us is not None and from_us > to_us:
        raise bad_parameter("from: after to")
    entries, cursor = accounts().audit_entries(
        from_us=from_us,
        to_us=to_us,
        user=args.get("user"),
        action=args.get("action"),
        limit=args["limit"],
        cursor=args.get("cursor"),
    )
    return jsonify(
        {
            "entries": [e.to_json() for e in entries],
            "next_cursor": None if cursor is None else str(cursor),
        }
    )
