"""The admin pages (admins only): users and their per-logspace rights, API tokens, logspace
settings (delimiters, retention days) and the audit log (webui/UI.md). Every change, done or
refused, is audited with the API's action names (user_create, user_update, user_delete,
token_create, token_revoke) plus logspace_settings."""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import urlencode

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from logbox_core import times
from logbox_core.accounts import (
    AUDIT_ACTIONS,
    ROLES,
    AccountsError,
    Conflict,
    Invalid,
    NotFound,
    User,
    rfc3339,
)
from logbox_core.constants import (
    DEFAULT_DELIMITERS,
    DELIMITERS_MAX,
    LOGSPACE_HTML_PATTERN,
    LOGSPACE_NAME_MAX,
    RETENTION_MAX,
    USER_NAME_HTML_PATTERN,
    logspace_name_ok,
)
from logbox_core.searchd import SearchdError

from . import settings as ls_settings
from .auth import admin_required, audit, current_token, current_user
from .state import accounts, searchd
from .status import desired_settings, indexd_settings

bp = Blueprint("admin", __name__, url_prefix="/admin")

ACTIONS = AUDIT_ACTIONS
DEFAULT_TOKEN_DAYS = 90
MAX_TOKEN_DAYS = 3650
AUDIT_PAGE = 100
AUDIT_PAGE_MAX = 1000
STATUS_OF = {Invalid: 400, NotFound: 404, Conflict: 409}


# ---------------------------------------------------------------- helpers


def status_of(e: AccountsError) -> int:
    """The HTTP status of a refused accounts change (400 invalid, 404, 409 conflict)."""
    for cls, code in STATUS_OF.items():
        if isinstance(e, cls):
            return code
    return 500


def shown(s: object) -> str:
    """s as text safe to print: bytes that were not UTF-8 (\\udcXX) and control characters as
    \\xXX (the page escapes the rest)."""
    if s is None:
        return ""
    text = str(s).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(
        f"\\x{ord(c):02x}" if (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0) else c for c in text
    )


def when(us: int | None) -> str:
    """µs since the epoch as "2026-11-22 18:00:00Z", or "" for None."""
    if us is None:
        return ""
    return rfc3339(us)[:19].replace("T", " ") + "Z"


def known_logspaces() -> list[str]:
    """Every logspace name searchd or the settings file knows (searchd down: the file's)."""
    names: set[str] = set()
    try:
        names.update(s["name"] for s in searchd().logspaces() if isinstance(s.get("name"), str))
    except SearchdError:
        pass
    desired, _ = desired_settings()
    names.update(desired)
    return sorted(names)


def _user_or_404(name: str) -> User:
    """The user called name.

    :raises HTTPException: 404.
    """
    u = accounts().get_user(name)
    if u is None:
        abort(404, description=f"No user '{name}'.")
    return u


def _rights_from_form() -> list[str]:
    """The logspace checkboxes: ["*"] when "all logspaces" is ticked, else the names ticked."""
    picked = [v for v in request.form.getlist("logspaces") if v]
    return ["*"] if "*" in picked else picked


def _users_page(status: int = 200, error: str | None = None, form: dict | None = None) -> Any:
    """The users page (with an error next to the create form and the values given)."""
    users = accounts().list_users()
    body = render_template(
        "admin/users.html",
        users=users,
        when=when,
        logspaces=known_logspaces(),
        roles=ROLES,
        user_name_pattern=USER_NAME_HTML_PATTERN,
        error=error,
        form=form or {"name": "", "role": "searcher", "logspaces": []},
    )
    return body, status


# ---------------------------------------------------------------- users


@bp.route("/", methods=["GET"])
@admin_required
def index() -> Any:
    """GET /admin/: the users page."""
    return redirect(url_for("admin.users"))


@bp.route("/users", methods=["GET", "POST"])
@admin_required
def users() -> Any:
    """GET /admin/users: every user and the create form; POST: creates a user."""
    if request.method == "GET":
        return _users_page()
    name = request.form.get("name", "").strip()
    password = request.form.get("password", "")
    role = request.form.get("role", "searcher")
    rights = _rights_from_form()
    must_change = request.form.get("must_change") == "1"
    form = {"name": name, "role": role, "logspaces": rights, "must_change": must_change}
    try:
        user = accounts().add_user(name, password, role, rights, must_change=must_change)
    except AccountsError as e:
        code = status_of(e)
        audit("user_create", status=code, detail=f"user {shown(name)[:80]}: {e.message}")
        return _users_page(code, f"User not created: {e.message}", form)
    audit(
        "user_create",
        status=201,
        detail=f"user {user.name} ({user.role}; logspaces {', '.join(user.logspaces) or 'none'})",
    )
    flash(f"User {user.name} created.")
    return redirect(url_for("admin.users"), 303)


def _user_page(user: User, status: int = 200, error: str | None = None) -> Any:
    """One user's page: the edit form, the password reset, delete, their tokens."""
    tokens = [t for t in accounts().list_tokens(user.name) if t.kind == "api"]
    body = render_template(
        "admin/user.html",
        account=user,
        me=current_user(),
        tokens=tokens,
        when=when,
        logspaces=sorted(set(known_logspaces()) | (set(user.logspaces) - {"*"})),
        roles=ROLES,
        error=error,
    )
    return body, status


@bp.route("/users/<name>", methods=["GET", "POST"])
@admin_required
def user(name: str) -> Any:
    """GET /admin/users/<name>: the user's page; POST: action=update (role, logspaces,
    disabled) or action=password (a new password; must_change)."""
    u = _user_or_404(name)
    if request.method == "GET":
        return _user_page(u)
    action = request.form.get("action", "update")
    acc = accounts()
    try:
        if action == "password":
            password = request.form.get("password", "")
            if password != request.form.get("password2", password):
                raise Invalid("password: the two passwords differ")
            must_change = request.form.get("must_change") == "1"
            me = current_token()  # an admin resetting their own: this session goes on
            u, ended = acc.change_password(
                name, password, must_change=must_change, keep_token=me.id if me else None
            )
            what = "password reset" + (" (must change at next sign-in)" if must_change else "")
            what += f", {ended} sessions ended (web and API)"
        elif action == "update":
            role = request.form.get("role", u.role)
            rights = _rights_from_form()
            disabled = request.form.get("disabled") == "1"
            before = u
            u = acc.update_user(name, role=role, logspaces=rights, disabled=disabled)
            changes = []
            if before.role != u.role:
                changes.append(f"role {before.role} → {u.role}")
            if before.logspaces != u.logspaces:
                changes.append(f"logspaces {', '.join(u.logspaces) or 'none'}")
            if before.disabled != u.disabled:
                changes.append("disabled" if u.disabled else "enabled")
            what = "; ".join(changes) or "nothing changed"
        else:
            raise Invalid(f"action: expected update or password, got {shown(action)[:40]!r}")
    except AccountsError as e:
        code = status_of(e)
        audit("user_update", status=code, detail=f"user {name}: {e.message}")
        return _user_page(acc.get_user(name) or u, code, f"Not changed: {e.message}")
    audit("user_update", detail=f"user {name}: {what}")
    flash(f"User {name}: {what}.")
    return redirect(url_for("admin.user", name=name), 303)


@bp.route("/users/<name>/delete", methods=["POST"])
@admin_required
def delete_user(name: str) -> Any:
    """POST /admin/users/<name>/delete: without confirm=yes the confirmation page; with it,
    deletes the user (their tokens are revoked)."""
    u = _user_or_404(name)
    if request.form.get("confirm") != "yes":
        return render_template("admin/user_delete.html", account=u, me=current_user())
    try:
        accounts().delete_user(name)
    except AccountsError as e:
        code = status_of(e)
        audit("user_delete", status=code, detail=f"user {name}: {e.message}")
        return _user_page(u, code, f"Not deleted: {e.message}")
    audit("user_delete", detail=f"user {name}")
    flash(f"User {name} deleted; their tokens are revoked.")
    return redirect(url_for("admin.users"), 303)


# ---------------------------------------------------------------- tokens


def _tokens_page(
    status: int = 200,
    error: str | None = None,
    new: tuple[str, Any] | None = None,
    form: dict | None = None,
) -> Any:
    """The tokens page: the list (optionally one user's), the create form, a new secret."""
    acc = accounts()
    only = request.args.get("user") or None
    tokens = acc.list_tokens(only)
    body = render_template(
        "admin/tokens.html",
        tokens=tokens,
        users=acc.list_users(),
        only=only,
        when=when,
        now_us=int(time.time() * 1_000_000),
        error=error,
        new=new,
        form=form or {"user": "", "name": "", "expires_days": str(DEFAULT_TOKEN_DAYS)},
        max_days=MAX_TOKEN_DAYS,
    )
    return body, status


@bp.route("/tokens", methods=["GET", "POST"])
@admin_required
def tokens() -> Any:
    """GET /admin/tokens: every token; POST: a new API token, its secret shown this once."""
    if request.method == "GET":
        return _tokens_page()
    user = request.form.get("user", "")
    name = request.form.get("name", "")
    days = request.form.get("expires_days", "").strip()
    form = {"user": user, "name": name, "expires_days": days}
    acc = accounts()
    try:
        if days in ("", "never"):
            ttl = None
        elif re.fullmatch(r"[0-9]{1,5}", days) and 1 <= int(days) <= MAX_TOKEN_DAYS:
            ttl = int(days) * 86400
        else:
            raise Invalid(
                f"expires_days: expected a whole number of days 1..{MAX_TOKEN_DAYS}, "
                "or empty for never"
            )
        if acc.get_user(user) is None:
            raise NotFound(f"no user '{shown(user)[:64]}'")
        secret, token = acc.create_token(user, name, kind="api", ttl=ttl)
    except AccountsError as e:
        code = status_of(e)
        audit("token_create", status=code, detail=f"for {shown(user)[:64]}: {e.message}")
        return _tokens_page(code, f"Token not created: {e.message}", form=form)
    audit("token_create", status=201, detail=f"token {token.id} for {user}")
    return _tokens_page(201, new=(secret, token))


@bp.route("/tokens/<id>/revoke", methods=["POST"])
@admin_required
def revoke_token(id: str) -> Any:
    """POST /admin/tokens/<id>/revoke."""
    acc = accounts()
    if acc.get_token(id) is None:
        abort(404, description=f"No token '{id}'.")
    token = acc.revoke_token(id)
    audit("token_revoke", detail=f"token {id} of {token.user}")
    flash(f"Token {id} ({token.name}) of {token.user} revoked.")
    back = request.form.get("back")
    if back == "user" and acc.get_user(token.user) is not None:
        return redirect(url_for("admin.user", name=token.user), 303)
    return redirect(url_for("admin.tokens"), 303)


# ---------------------------------------------------------------- logspace settings


def _logspaces_page(
    status: int = 200, error: tuple[str, str] | None = None, form: dict | None = None
) -> Any:
    """The logspaces page: per logspace the desired and applied settings and its form."""
    c = current_app.config
    from_searchd: dict[str, dict] = {}
    searchd_error = None
    try:
        from_searchd = {s["name"]: s for s in searchd().logspaces()}
    except SearchdError as e:
        searchd_error = e.message
    desired, file_error = desired_settings()
    applied, indexd_top = indexd_settings(c.get("INDEXD_STATUS"))
    names = set(from_searchd) | set(desired)
    new = request.args.get("new", "").strip()
    if form and form.get("name"):
        new = form["name"]
    if new and logspace_name_ok(new):
        names.add(new)
    rows = []
    for name in sorted(names):
        want = desired.get(name)
        have = applied.get(name, {})
        sd = from_searchd.get(name)
        rows.append(
            {
                "name": name,
                "messages": sd.get("messages") if sd else None,
                "in_store": sd is not None,
                "retention_desired": want.retention_days if want else None,
                "delimiters_desired": want.delimiters if want else None,
                "retention_applied": have.get("retention_days"),
                "delimiters_applied": have.get("delimiters"),
            }
        )
    body = render_template(
        "admin/logspaces.html",
        rows=rows,
        default_delimiters=DEFAULT_DELIMITERS,
        settings_path=c.get("LOGSPACE_SETTINGS"),
        file_error=file_error,
        searchd_error=searchd_error,
        indexd_settings=indexd_top,
        error=error,
        form=form or {},
        new=new,
        retention_max=RETENTION_MAX,
        delimiters_max=DELIMITERS_MAX,
        logspace_pattern=LOGSPACE_HTML_PATTERN,
        logspace_name_max=LOGSPACE_NAME_MAX,
    )
    return body, status


@bp.route("/logspaces", methods=["GET"])
@admin_required
def logspaces() -> Any:
    """GET /admin/logspaces."""
    return _logspaces_page()


@bp.route("/logspaces/<name>", methods=["POST"])
@admin_required
def logspace(name: str) -> Any:
    """POST /admin/logspaces/<name>: writes retention_days and delimiters for the logspace
    into the settings file (logbox-indexd applies it)."""
    retention = request.form.get("retention_days", "")
    delimiters = request.form.get("delimiters", "")
    form = {"name": name, "retention_days": retention, "delimiters": delimiters}
    path = current_app.config.get("LOGSPACE_SETTINGS")
    try:
        if not path:
            raise ls_settings.SettingsError("no LOGSPACE_SETTINGS file is configured")
        new = ls_settings.set_logspace(path, name, retention, delimiters)
    except ls_settings.SettingsError as e:
        audit(
            "logspace_settings",
            logspace=name if logspace_name_ok(name) else None,
            status=400,
            detail=f"refused: {e}",
        )
        return _logspaces_page(400, (name, str(e)), form)
    detail = f"retention_days {new.retention_days}, delimiters {new.delimiters!r}"
    audit("logspace_settings", logspace=name, detail=detail)
    flash(f"Logspace {name}: {detail} written to {path}; logbox-indexd applies it shortly.")
    return redirect(url_for("admin.logspaces") + f"#ls-{name}", 303)


# ---------------------------------------------------------------- audit log


def parse_time(text: str, member: str) -> int:
    """A filter time as µs since the epoch (logbox_core.times: RFC 3339, "YYYY-MM-DD[ HH:MM[:SS]]"
    in UTC when no offset, "now", "-15m", epoch seconds).

    :raises Invalid: anything else.
    """
    try:
        return times.parse_time(text)
    except ValueError as e:
        raise Invalid(f"{member}: {e}") from None


@bp.route("/audit", methods=["GET"])
@admin_required
def audit_log() -> Any:
    """GET /admin/audit: the audit log, newest first, filtered by user, action, from, to;
    paged by cursor (the next page holds older entries)."""
    args = request.args
    f = {k: args.get(k, "") for k in ("user", "action", "from", "to", "limit", "cursor")}
    error = None
    entries: list[Any] = []
    next_cursor = None
    try:
        from_us = parse_time(f["from"], "from") if f["from"].strip() else None
        to_us = parse_time(f["to"], "to") if f["to"].strip() else None
        if from_us is not None and to_us is not None and from_us > to_us:
            raise Invalid("from: after to")
        limit = AUDIT_PAGE
        if f["limit"].strip():
            if not re.fullmatch(r"[0-9]{1,4}", f["limit"].strip()):
                raise Invalid(f"limit: expected 1..{AUDIT_PAGE_MAX}")
            limit = int(f["limit"])
            if not 1 <= limit <= AUDIT_PAGE_MAX:
                raise Invalid(f"limit: expected 1..{AUDIT_PAGE_MAX}")
        cursor = None
        if f["cursor"].strip():
            if not re.fullmatch(r"[0-9]{1,20}", f["cursor"].strip()):
                raise Invalid("cursor: expected the number of a previous page's next link")
            cursor = int(f["cursor"])
        entries, next_cursor = accounts().audit_entries(
            from_us=from_us,
            to_us=to_us,
            user=f["user"].strip() or None,
            action=f["action"].strip() or None,
            limit=limit,
            cursor=cursor,
        )
    except Invalid as e:
        error = e.message
    next_url = None
    if next_cursor is not None:
        keep = [(k, v) for k, v in f.items() if v and k != "cursor"]
        next_url = url_for("admin.audit_log") + "?" + urlencode([*keep, ("cursor", next_cursor)])
    first_url = None
    if f["cursor"]:
        keep = [(k, v) for k, v in f.items() if v and k != "cursor"]
        first_url = url_for("admin.audit_log") + ("?" + urlencode(keep) if keep else "")
    body = render_template(
        "admin/audit.html",
        entries=entries,
        f=f,
        actions=ACTIONS,
        error=error,
        next_url=next_url,
        first_url=first_url,
        when=when,
        shown=shown,
    )
    return body, 400 if error else 200
