# Sign-in of the web UI (logbox_webui, webui/UI.md "Sessions and security") through Flask's test
# client with a real accounts store (LMDB): the login form, the generic refusal, the lockout
# (429 page after 10 failures from one address, audited), the session cookie's flags, CSRF on
# every POST (none or a wrong token: 400), the security headers with the exact CSP on every
# page (error pages and downloads too), sessions verified on every request (logout, an admin's
# revocation and disabling the user end them at once), idle expiry, the forced password change
# of a must_change user, the password page's refusals, no open redirect after sign-in, the
# admin_required and can_read_required decorators, /healthz, the config's refusal to start
# without a secret key, and the audit entries of all this.

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import argon2
import pytest
from flask import Blueprint, Flask
from flask.testing import FlaskClient
from logbox_core.accounts import Accounts
from logbox_webui import create_app
from logbox_webui.auth import admin_required, can_read_required
from logbox_webui.config import ConfigError
from logbox_webui.security import CSP

# Cheap argon2 parameters: these tests sign in often (the search tests use the real ones).
FAST = argon2.PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
PASSWORD = "correct horse battery"
NEW_PASSWORD = "battery staple horse"


def make_app(tmp: Path, **cfg: object) -> Flask:
    """An app on an accounts store in tmp (searchd is not needed by these pages)."""
    a = create_app(
        {
            "SEARCHD_SOCKET": str(tmp / "no-searchd.sock"),
            "ACCOUNTS_PATH": str(tmp / "accounts"),
            "TESTING": True,
            **cfg,
        }
    )
    extra = Blueprint("extra", __name__)

    @extra.route("/only-admins")
    @admin_required
    def only_admins() -> str:
        return "admin page"

    @extra.route("/read/<logspace>")
    @can_read_required
    def read(logspace: str) -> str:
        return f"reading {logspace}"

    a.register_blueprint(extra)
    a.extensions["logbox"]._accounts = Accounts(tmp / "accounts", hasher=FAST)
    acc = accounts_of(a)
    acc.add_user("admin", PASSWORD, "admin")
    acc.add_user("alice", PASSWORD, "searcher", ("main",))
    return a


def accounts_of(app: Flask) -> Accounts:
    return app.extensions["logbox"].accounts


@pytest.fixture
def app(tmp_path: Path) -> Flask:
    return make_app(tmp_path)


def csrf_of(page: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert m, page[:500]
    return m.group(1)


def login(c: FlaskClient, user: str, password: str = PASSWORD, **extra: str) -> object:
    page = c.get("/login").get_data(as_text=True)
    return c.post(
        "/login",
        data={"username": user, "password": password, "csrf_token": csrf_of(page), **extra},
    )


def signed_in(app: Flask, user: str) -> FlaskClient:
    c = app.test_client()
    r = login(c, user)
    assert r.status_code == 302, r.get_data(as_text=True)[:400]
    return c


def last_audit(app: Flask, action: str) -> object:
    entries, _ = accounts_of(app).audit_entries(action=action, limit=1)
    assert entries, action
    return entries[0]


def location(r: object) -> str:
    loc = urlsplit(r.headers["Location"])
    return loc.path + (f"?{loc.query}" if loc.query else "")


def session_cookie(c: FlaskClient) -> str:
    cookie = c.get_cookie("logbox_session") if hasattr(c, "get_cookie") else None
    if cookie is not None:
        return cookie.value
    return next(ck.value for ck in c.cookie_jar if ck.name == "logbox_session")


# ---------------------------------------------------------------- login


def test_login_form(app: Flask) -> None:
    r = app.test_client().get("/login")
    assert r.status_code == 200
    body = r.get_data(as_text=True)
    assert '<form id="login" method="post"' in body
    for needle in ('name="username"', 'name="password"', 'id="login-submit"', 'name="csrf_token"'):
        assert needle in body
    assert r.headers["Content-Security-Policy"] == CSP


def test_login_ok_sets_a_strict_cookie_and_a_web_token(app: Flask) -> None:
    c = app.test_client()
    r = login(c, "alice", next="/search?q=a")
    assert r.status_code == 302 and location(r) == "/search?q=a"
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith("logbox_session=")
    for flag in ("Secure", "HttpOnly", "SameSite=Strict", "Path=/"):
        assert flag in cookie.split("; ")
    tokens = [t for t in accounts_of(app).list_tokens("alice") if t.kind == "web"]
    assert len(tokens) == 1 and tokens[0].revoked_us is None
    assert tokens[0].expires_us is not None
    e = last_audit(app, "login")
    assert (e.user, e.status) == ("alice", 200) and tokens[0].id in e.detail
    assert c.get("/help/query").status_code == 200


@pytest.mark.parametrize("user,password", [("alice", "wrong password!"), ("nobody", PASSWORD)])
def test_wrong_login_is_generic(app: Flask, user: str, password: str) -> None:
    c = app.test_client()
    r = login(c, user, password)
    assert r.status_code == 401
    body = r.get_data(as_text=True)
    assert "Wrong user name or password." in body and 'class="flash"' in body
    assert "no user" not in body.lower()
    e = last_audit(app, "login_failed")
    assert (e.user, e.status) == (user, 401)
    assert c.get("/search").status_code == 302


def test_lockout_after_ten_failures(app: Flask) -> None:
    c = app.test_client()
    c.environ_base["REMOTE_ADDR"] = "192.0.2.7"
    for i in range(9):
        assert login(c, "alice", "wrong password!").status_code == 401, i
    r = login(c, "alice", "wrong password!")
    assert r.status_code == 429
    body = r.get_data(as_text=True)
    assert "blocked" in body and "192.0.2.7" in body and "Traceback" not in body
    assert int(r.headers["Retry-After"]) > 250
    # Even the right password is refused while blocked; another address is not.
    r = login(c, "alice")
    assert r.status_code == 429
    e = last_audit(app, "login_locked")
    assert (e.user, e.address, e.status) == ("alice", "192.0.2.7", 429)
    other = app.test_client()
    other.environ_base["REMOTE_ADDR"] = "192.0.2.8"
    assert login(other, "alice").status_code == 302


# ---------------------------------------------------------------- CSRF and headers


def test_post_without_or_with_a_wrong_csrf_token_is_400(app: Flask) -> None:
    c = app.test_client()
    c.get("/login")
    r = c.post("/login", data={"username": "alice", "password": PASSWORD})
    assert r.status_code == 400 and "CSRF" in r.get_data(as_text=True)
    r = c.post("/login", data={"username": "alice", "password": PASSWORD, "csrf_token": "x" * 40})
    assert r.status_code == 400
    assert r.headers["Content-Security-Policy"] == CSP
    s = signed_in(app, "alice")
    assert s.post("/logout").status_code == 400
    assert s.post("/logout", data={"csrf_token": "forged"}).status_code == 400
    assert s.post("/password", data={"current": PASSWORD}).status_code == 400
    assert s.get("/help/query").status_code == 200  # still signed in


@pytest.mark.parametrize(
    "url,status",
    [
        ("/login", 200),
        ("/healthz", 200),
        ("/search", 302),
        ("/nope", 404),
        ("/static/css/logbox.css", 200),
        ("/static/js/logbox.js", 200),
    ],
)
def test_security_headers_on_every_answer(app: Flask, url: str, status: int) -> None:
    r = app.test_client().get(url)
    assert r.status_code == status
    assert r.headers["Content-Security-Policy"] == CSP
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Referrer-Policy"] == "same-origin"
    assert r.headers["Strict-Transport-Security"].startswith("max-age=")
    if not url.startswith("/static/"):
        assert r.headers["Cache-Control"] == "no-store"
    r.close()


def test_signed_in_pages_have_the_headers_and_no_inline_script(app: Flask) -> None:
    c = signed_in(app, "admin")
    for url in ("/help/query", "/password", "/only-admins", "/nope"):
        r = c.get(url)
        assert r.headers["Content-Security-Policy"] == CSP, url
        assert r.headers["Cache-Control"] == "no-store"
        body = r.get_data(as_text=True)
        assert "style=" not in body and re.search(r"<script(?![^>]*\bsrc=)", body) is None
        assert re.search(r"\son[a-z]+=", body) is None


def test_healthz_anonymous(app: Flask) -> None:
    r = app.test_client().get("/healthz")
    assert r.status_code == 200 and r.get_data(as_text=True).strip() == "ok"


# ---------------------------------------------------------------- sessions


def test_logout_revokes_the_session(app: Flask) -> None:
    c = signed_in(app, "alice")
    stolen = session_cookie(c)
    page = c.get("/help/query").get_data(as_text=True)
    r = c.post("/logout", data={"csrf_token": csrf_of(page)})
    assert r.status_code == 302 and location(r) == "/login"
    assert all(t.revoked_us is not None for t in accounts_of(app).list_tokens("alice"))
    assert last_audit(app, "logout").user == "alice"
    assert c.get("/help/query").status_code == 302
    # The cookie as it was before logout is worth nothing now.
    other = app.test_client()
    other.set_cookie("localhost", "logbox_session", stolen)
    r = other.get("/help/query")
    assert r.status_code == 302 and location(r).startswith("/login")


def test_revocation_and_disabling_end_the_session_at_once(app: Flask) -> None:
    acc = accounts_of(app)
    c = signed_in(app, "alice")
    assert c.get("/help/query").status_code == 200
    (tok,) = (t for t in acc.list_tokens("alice") if t.kind == "web")
    acc.revoke_token(tok.id)
    assert c.get("/help/query").status_code == 302
    c = signed_in(app, "alice")
    acc.update_user("alice", disabled=True)
    assert c.get("/help/query").status_code == 302
    assert login(app.test_client(), "alice").status_code == 401


def test_idle_session_expires(tmp_path: Path) -> None:
    # Seconds wide enough for a loaded machine: 1 s idle in a 4 s window, then 4.5 s.
    app = make_app(tmp_path, SESSION_IDLE=4)
    c = signed_in(app, "alice")
    assert c.get("/help/query").status_code == 200
    time.sleep(1)
    assert c.get("/help/query").status_code == 200  # a request keeps it alive
    time.sleep(4.5)
    r = c.get("/help/query")
    assert r.status_code == 302 and location(r).startswith("/login")
    assert all(t.revoked_us is not None for t in accounts_of(app).list_tokens("alice"))
    e = last_audit(app, "logout")
    assert e.user == "alice" and "idle" in e.detail


def test_absolute_session_ttl(tmp_path: Path) -> None:
    app = make_app(tmp_path, SESSION_TTL=4)
    c = signed_in(app, "alice")
    assert c.get("/help/query").status_code == 200
    time.sleep(4.2)
    assert c.get("/help/query").status_code == 302


# ---------------------------------------------------------------- password


def test_forced_password_change(app: Flask) -> None:
    acc = accounts_of(app)
    acc.add_user("root1", PASSWORD, "admin", must_change=True)
    c = app.test_client()
    r = login(c, "root1", next="/help/query")
    assert r.status_code == 302 and location(r).startswith("/password")
    for url in ("/search", "/help/query", "/only-admins"):
        r = c.get(url)
        assert r.status_code == 302 and location(r).startswith("/password"), url
    page = c.get("/password").get_data(as_text=True)
    assert 'id="must-change"' in page
    token = csrf_of(page)
    form = {"current": PASSWORD, "new": NEW_PASSWORD, "new2": NEW_PASSWORD, "csrf_token": token}
    r = c.post("/password", data={**form, "next": "/help/query"})
    assert r.status_code == 302 and location(r) == "/help/query"
    assert acc.get_user("root1").must_change is False
    assert acc.check_password("root1", NEW_PASSWORD) is not None
    assert c.get("/help/query").status_code == 200
    e = last_audit(app, "user_update")
    assert e.user == "root1" and "password" in e.detail


def test_password_change_ends_the_other_sessions(app: Flask) -> None:
    acc = accounts_of(app)
    here, there = signed_in(app, "alice"), signed_in(app, "alice")
    _, api_session = acc.create_token("alice", "session", kind="session", ttl=3600)
    _, api_token = acc.create_token("alice", "ci", kind="api", ttl=3600)
    token = csrf_of(here.get("/password").get_data(as_text=True))
    form = {"current": PASSWORD, "new": NEW_PASSWORD, "new2": NEW_PASSWORD, "csrf_token": token}
    assert here.post("/password", data=form).status_code == 302
    assert here.get("/help/query").status_code == 200
    assert there.get("/help/query").status_code == 302
    # the API session (a password login) ends too; an admin's API token stays
    assert acc.get_token(api_session.id).revoked_us is not None
    assert acc.get_token(api_token.id).revoked_us is None
    assert "2 other sessions ended (web and API)" in last_audit(app, "user_update").detail


def test_password_change_refusals(app: Flask) -> None:
    c = signed_in(app, "alice")
    token = csrf_of(c.get("/password").get_data(as_text=True))
    cases = [
        ({"current": "wrong password!", "new": NEW_PASSWORD, "new2": NEW_PASSWORD}, "wrong"),
        ({"current": PASSWORD, "new": NEW_PASSWORD, "new2": NEW_PASSWORD + "x"}, "differ"),
        ({"current": PASSWORD, "new": "short", "new2": "short"}, "password"),
    ]
    for form, word in cases:
        r = c.post("/password", data={**form, "csrf_token": token})
        assert r.status_code == 400, form
        assert word in r.get_data(as_text=True)
    assert accounts_of(app).check_password("alice", PASSWORD) is not None


# ---------------------------------------------------------------- redirects and rights


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example",
        "javascript:alert(1)",
        "http:/evil",
        "/search\r\nX: y",
    ],
)
def test_no_open_redirect(app: Flask, target: str) -> None:
    r = login(app.test_client(), "alice", next=target)
    assert r.status_code == 302
    assert location(r) == "/search"


def test_anonymous_redirect_keeps_the_page(app: Flask) -> None:
    c = app.test_client()
    r = c.get("/help/query?x=1")
    assert r.status_code == 302
    assert parse_qs(urlsplit(r.headers["Location"]).query)["next"] == ["/help/query?x=1"]
    assert location(c.get("/password")).startswith("/login?next=")
    token = csrf_of(c.get("/login").get_data(as_text=True))
    r = c.post("/password", data={"csrf_token": token, "current": PASSWORD})
    assert r.status_code == 302 and location(r).startswith("/login")
    r = c.post("/logout", data={"csrf_token": token})
    assert r.status_code == 302 and location(r) == "/login"
    # A signed-in user asking for /login goes on to the page.
    s = signed_in(app, "alice")
    r = s.get("/login?next=/help/query")
    assert r.status_code == 302 and location(r) == "/help/query"


def test_admin_required_and_can_read_required(app: Flask) -> None:
    anon = app.test_client()
    assert location(anon.get("/only-admins")).startswith("/login")
    assert location(anon.get("/read/main")).startswith("/login")
    alice = signed_in(app, "alice")
    r = alice.get("/only-admins")
    assert r.status_code == 403 and "not an admin" in r.get_data(as_text=True)
    e = last_audit(app, "denied")
    assert (e.user, e.status) == ("alice", 403)
    assert alice.get("/read/main").get_data(as_text=True) == "reading main"
    r = alice.get("/read/secret")
    assert r.status_code == 403
    assert last_audit(app, "denied").logspace == "secret"
    admin = signed_in(app, "admin")
    assert admin.get("/only-admins").get_data(as_text=True) == "admin page"
    assert admin.get("/read/secret").status_code == 200


def test_nav_shows_admin_only_to_admins(app: Flask) -> None:
    body = signed_in(app, "alice").get("/help/query").get_data(as_text=True)
    assert 'id="nav-search"' in body and 'id="nav-status"' in body
    assert 'id="nav-admin"' not in body
    assert '<form method="post" action="/logout" id="logout">' in body
    body = signed_in(app, "admin").get("/help/query").get_data(as_text=True)
    assert 'id="nav-admin"' in body


# ---------------------------------------------------------------- configuration


def test_refuses_to_start_without_a_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGBOX_WEBUI_CONFIG", str(tmp_path / "none.py"))
    monkeypatch.setenv("LOGBOX_WEBUI_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="SECRET_KEY"):
        create_app({"ACCOUNTS_PATH": str(tmp_path / "a")})
    (tmp_path / "secret").write_bytes(b"s" * 32)
    monkeypatch.setenv("LOGBOX_WEBUI_SECRET_FILE", str(tmp_path / "secret"))
    (tmp_path / "webui.py").write_text("SESSION_IDLE = 99\n")
    monkeypatch.setenv("LOGBOX_WEBUI_CONFIG", str(tmp_path / "webui.py"))
    monkeypatch.setenv("LOGBOX_SESSION_TTL", "77")
    a = create_app({"ACCOUNTS_PATH": str(tmp_path / "a"), "SEARCHD_TIMEOUT": 5})
    assert a.config["SECRET_KEY"] == b"s" * 32
    assert (a.config["SESSION_IDLE"], a.config["SESSION_TTL"], a.config["SEARCHD_TIMEOUT"]) == (
        99,
        77,
        5,
    )
    assert a.config["SESSION_COOKIE_NAME"] == "logbox_session"
