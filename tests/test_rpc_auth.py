# Scenario (issue 6): authentication and rights of the RPC API, through real gunicorn (TLS) in
# front of real logbox-searchd, with the accounts in a real LMDB store. The store is built with
# `logbox ingest` (a few messages in logspaces "main" and "web"): the ingest path is not what this
# file checks. Every route of the app (enumerated from create_app().url_map, so that a new route
# cannot slip past: a route missing from the ROUTES table below fails the test) is called with no
# token, malformed tokens, an unknown token, a token with the right id and a wrong secret, an
# expired, a revoked token, the token of a deleted and of a disabled user: 401 with
# WWW-Authenticate: Bearer. A searcher gets 403 on admin routes and on /logspaces/<ls>/... of a
# logspace it may not read (existing or not), and 2xx on its own; health (and login) are the only
# routes open. Then: the login lockout (10 failures in a minute from 127.0.0.1 -> 429 with
# Retry-After, even with the right password and for every user name; tokens keep working),
# session and API token expiry, and the audit log (login, login_failed, login_locked, search,
# export, denied: who, address, action, logspace, query, results, status) read back through
# GET /audit as admin and refused to a searcher.
from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
from lbtest.cli import Logbox
from lbtest.rpc import RpcServer
from lbtest.searchd import Searchd, searchd_binary

pytestmark = pytest.mark.slow

# (method, path with {} for each variable) -> (who, sample path arguments, query, JSON body).
# who: "open" (no token), "auth" (any valid token), "read" (the first argument is a logspace),
# "owner" (any valid token; the object is the caller's or shared with them, else "not found":
# the samples name none), "admin". The table is checked against the app's url_map both ways.
Sample = tuple[str, tuple[str, ...], dict[str, str], dict[str, Any] | None]
ROUTES: dict[tuple[str, str], Sample] = {
    ("GET", "/api/v1/health"): ("open", (), {}, None),
    ("POST", "/api/v1/login"): ("open", (), {}, {"username": "nobody", "password": "x" * 12}),
    ("POST", "/api/v1/logout"): ("auth", (), {}, None),
    ("GET", "/api/v1/me"): ("auth", (), {}, None),
    ("GET", "/api/v1/openapi.json"): ("auth", (), {}, None),
    ("GET", "/api/v1/logspaces"): ("auth", (), {}, None),
    ("GET", "/api/v1/status"): ("auth", (), {}, None),
    ("GET", "/api/v1/system"): ("admin", (), {}, None),
    ("GET", "/api/v1/searches"): ("auth", (), {}, None),
    ("POST", "/api/v1/searches"): (
        "auth",
        (),
        {},
        {"name": "sample", "logspace": "web", "query": "hello", "from": "-1h"},
    ),
    ("GET", "/api/v1/searches/{}"): ("owner", ("0123456789ab",), {}, None),
    ("PATCH", "/api/v1/searches/{}"): ("owner", ("0123456789ab",), {}, {"name": "renamed"}),
    ("DELETE", "/api/v1/searches/{}"): ("owner", ("0123456789ab",), {}, None),
    ("GET", "/api/v1/reports"): ("auth", (), {}, None),
    ("POST", "/api/v1/reports"): (
        "auth",
        (),
        {},
        {"name": "sample", "logspace": "web", "period": "daily", "recipients": ["a@b.example"]},
    ),
    ("GET", "/api/v1/reports/{}"): ("owner", ("0123456789ab",), {}, None),
    ("PATCH", "/api/v1/reports/{}"): ("owner", ("0123456789ab",), {}, {"name": "renamed"}),
    ("DELETE", "/api/v1/reports/{}"): ("owner", ("0123456789ab",), {}, None),
    ("GET", "/api/v1/reports/{}/render"): ("owner", ("0123456789ab",), {"period": "last"}, None),
    ("POST", "/api/v1/reports/{}/send"): ("owner", ("0123456789ab",), {}, None),
    ("GET", "/api/v1/alerts"): ("auth", (), {}, None),
    # an alert needs a saved search the caller sees: the sample names none ("not found")
    ("POST", "/api/v1/alerts"): (
        "owner",
        (),
        {},
        {"name": "a", "search": "0123456789ab", "condition": {"kind": "any"}, "actions": []},
    ),
    ("GET", "/api/v1/alerts/{}"): ("owner", ("0123456789ab",), {}, None),
    ("PATCH", "/api/v1/alerts/{}"): ("owner", ("0123456789ab",), {}, {"enabled": False}),
    ("DELETE", "/api/v1/alerts/{}"): ("owner", ("0123456789ab",), {}, None),
    ("POST", "/api/v1/alerts/{}/test"): ("owner", ("0123456789ab",), {}, None),
    ("GET", "/api/v1/alerts/{}/history"): ("owner", ("0123456789ab",), {}, None),
    ("GET", "/api/v1/logspaces/{}/search"): ("read", ("main",), {"q": "hello"}, None),
    ("GET", "/api/v1/logspaces/{}/count"): ("read", ("main",), {"q": "hello"}, None),
    ("GET", "/api/v1/logspaces/{}/histogram"): ("read", ("main",), {"q": "hello"}, None),
    ("GET", "/api/v1/logspaces/{}/top"): ("read", ("main",), {"q": "*", "field": "host"}, None),
    ("GET", "/api/v1/logspaces/{}/export"): ("read", ("main",), {"q": "hello"}, None),
    ("GET", "/api/v1/logspaces/{}/messages/{}"): ("read", ("main", "1"), {}, None),
    # a live tail runs until closed: this one ends itself after a second
    ("GET", "/api/v1/logspaces/{}/tail"): ("read", ("main",), {"q": "hello", "seconds": "1"}, None),
    ("GET", "/api/v1/tokens"): ("admin", (), {}, None),
    ("POST", "/api/v1/tokens"): ("admin", (), {}, {"user": "alice", "name": "sample"}),
    ("DELETE", "/api/v1/tokens/{}"): ("admin", ("0123456789ab",), {}, None),
    ("GET", "/api/v1/users"): ("admin", (), {}, None),
    ("POST", "/api/v1/users"): (
        "admin",
        (),
        {},
        {"name": "newbie", "password": "newbie-password-1", "role": "searcher", "logspaces": []},
    ),
    ("GET", "/api/v1/users/{}"): ("admin", ("alice",), {}, None),
    ("PATCH", "/api/v1/users/{}"): ("admin", ("alice",), {}, {"disabled": False}),
    ("DELETE", "/api/v1/users/{}"): ("admin", ("nobody",), {}, None),
    ("GET", "/api/v1/audit"): ("admin", (), {}, None),
    ("GET", "/api/v1/logspaces/{}/integrity"): ("admin", ("main",), {}, None),
    ("GET", "/api/v1/integrity/public-key"): ("admin", (), {}, None),
    ("GET", "/api/v1/delivery"): ("admin", (), {}, None),
    ("PUT", "/api/v1/delivery"): ("admin", (), {}, {"syslog": {"host": "127.0.0.1", "port": 9}}),
    ("POST", "/api/v1/delivery/test"): ("admin", (), {}, {"channel": "syslog"}),
    ("GET", "/api/v1/archive"): ("admin", (), {}, None),
    ("PUT", "/api/v1/archive/{}"): (
        "admin",
        ("main",),
        {},
        {
            "endpoint": "https://127.0.0.1:9",
            "bucket": "logs",
            "access_key": "AK",
            "secret_key": "S",
        },
    ),
    ("DELETE", "/api/v1/archive/{}"): ("admin", ("main",), {}, None),
    ("GET", "/api/v1/sites"): ("admin", (), {}, None),
    ("PUT", "/api/v1/sites/{}"): (
        "admin",
        ("east",),
        {},
        {"url": "https://127.0.0.1:9", "token": "lbx_x_y"},
    ),
    ("DELETE", "/api/v1/sites/{}"): ("admin", ("nosite",), {}, None),
    ("PUT", "/api/v1/multiple/{}"): ("admin", ("every",), {}, {"members": ["main"]}),
    ("DELETE", "/api/v1/multiple/{}"): ("admin", ("every",), {}, None),
}
IGNORED_METHODS = {"HEAD", "OPTIONS"}
EXPIRES_IN = 2  # s: the expired token's lifetime (long enough to be used once first)
MESSAGES = {
    "main": b"<14>1 - mainhost app 1 - - hello main one\n<11>1 - mainhost app 2 - - hello two\n",
    "web": b"<14>1 - webhost nginx 3 - - hello web GET /index.html\n",
}


def template(rule: str) -> str:
    """A Flask rule with each <converter:variable> as {}."""
    return re.sub(r"<[^<>]+>", "{}", rule)


def app_routes(tmp: Path, searchd_sock: Path, data: Path) -> set[tuple[str, str]]:
    """(method, template) of every rule under /api/v1 of a freshly created app."""
    import logbox_rpc

    app = logbox_rpc.create_app(
        {
            "SEARCHD_SOCKET": str(searchd_sock),
            "ACCOUNTS_PATH": str(tmp / "urlmap-accounts"),
            "DATA_DIR": str(data),
        }
    )
    out = set()
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/v1"):
            continue
        for m in sorted((rule.methods or set()) - IGNORED_METHODS):
            out.add((m, template(rule.rule)))
    return out


@dataclass
class Users:
    """Passwords and tokens of the test users."""

    passwords: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)  # name -> a valid token


@dataclass
class Stack:
    rpc: RpcServer
    searchd: Searchd
    data: Path
    root: Path
    admin_token: str
    users: Users

    def url(self, tmpl: str, args: tuple[str, ...]) -> str:
        return f"https://127.0.0.1:{self.rpc.port}" + tmpl.format(*args)

    def call(
        self,
        method: str,
        tmpl: str,
        args: tuple[str, ...],
        params: dict[str, str],
        body: dict[str, Any] | None,
        auth: str | None,
        token: str | None,
    ) -> requests.Response:
        """One request; auth is the whole Authorization header, token a bearer token."""
        headers = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if auth is not None:
            headers["Authorization"] = auth
        return requests.request(
            method,
            self.url(tmpl, args),
            params=params,
            json=body,
            headers=headers,
            verify=str(self.rpc.cafile),
            timeout=60,
        )

    def admin(self) -> requests.Session:
        return self.rpc.session(self.admin_token)


def add_user(
    st: Stack, name: str, role: str = "searcher", logspaces: list[str] | None = None
) -> str:
    """Creates a user through the API; returns a fresh API token of theirs."""
    password = f"{name}-password-{secrets.token_hex(4)}"
    s = st.admin()
    r = s.post(
        f"{st.rpc.base}/users",
        json={"name": name, "password": password, "role": role, "logspaces": logspaces or ["*"]},
        timeout=30,
    )
    assert r.status_code == 201, r.text
    st.users.passwords[name] = password
    return new_token(st, name)


def new_token(st: Stack, user: str, expires_in: int | None = None, name: str = "") -> str:
    r = st.admin().post(
        f"{st.rpc.base}/tokens",
        json={"user": user, "name": name or f"t-{secrets.token_hex(3)}", "expires_in": expires_in},
        timeout=30,
    )
    assert r.status_code == 201, r.text
    tok = r.json()["token"]
    assert re.fullmatch(r"lbx_[0-9a-f]{12}_[A-Za-z0-9_-]{43}", tok), tok
    return tok


def me(st: Stack, token: str) -> int:
    r = requests.get(
        f"{st.rpc.base}/me",
        headers={"Authorization": f"Bearer {token}"},
        verify=str(st.rpc.cafile),
        timeout=30,
    )
    return r.status_code


def login(st: Stack, user: str, password: str) -> requests.Response:
    return requests.post(
        f"{st.rpc.base}/login",
        json={"username": user, "password": password},
        verify=str(st.rpc.cafile),
        timeout=30,
    )


def audit(st: Stack, token: str | None = None, **params: str) -> list[dict[str, Any]]:
    """Every audit entry matching params (all pages), newest first."""
    s = st.rpc.session(token or st.admin_token)
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        p = dict(params, limit="1000")
        if cursor:
            p["cursor"] = cursor
        r = s.get(f"{st.rpc.base}/audit", params=p, timeout=30)
        assert r.status_code == 200, r.text
        body = r.json()
        out += body["entries"]
        cursor = body.get("next_cursor")
        if not cursor:
            return out


def make_stack(
    root: Path, top: Path, logbox_bin: Path, env: dict[str, str] | None
) -> Iterator[Stack]:
    data = root / "data"
    data.mkdir(parents=True)
    for ls, lines in MESSAGES.items():
        Logbox(logbox_bin, data, ls).ingest(lines)
    sd = Searchd(searchd_binary(top), data, root / "searchd.sock").start()
    try:
        with RpcServer(root / "rpc", searchd_socket=sd.sock, data=data, env=env) as rpc:
            admin = rpc.login()
            yield Stack(rpc, sd, data, root, admin, Users())
    finally:
        sd.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path, logbox_bin: Path) -> Iterator[Stack]:
    yield from make_stack(tmp_path_factory.mktemp("rpcauth"), top, logbox_bin, None)


# ---------------------------------------------------------------- every route


def test_route_table_covers_the_app(stack: Stack) -> None:
    routes = app_routes(stack.root, stack.searchd.sock, stack.data)
    missing = sorted(routes - ROUTES.keys())
    assert not missing, f"routes without sample arguments in ROUTES (add them): {missing}"
    gone = sorted(ROUTES.keys() - routes)
    assert not gone, f"ROUTES lists routes the app does not have: {gone}"


def bad_tokens(st: Stack) -> dict[str, tuple[str | None, str | None]]:
    """name -> (Authorization header, bearer token): every way of not being authenticated."""
    s = st.users
    right = s.tokens["alice"]
    wrong_secret = right[:17] + ("A" if right[17] != "A" else "B") + right[18:]
    unknown = f"lbx_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}"
    return {
        "no token": (None, None),
        "empty bearer": ("Bearer ", None),
        "bearer without a token": ("Bearer", None),
        "basic scheme": ("Basic YWRtaW46YWRtaW4=", None),
        "garbage": (None, "not-a-token"),
        "truncated": (None, right[:-5]),
        "bad id": (None, "lbx_XYZ_" + right[17:]),
        "unknown": (None, unknown),
        "right id, wrong secret": (None, wrong_secret),
        "token of another scheme": (f"Token {right}", None),
        "expired": (None, s.tokens["expired"]),
        "revoked": (None, s.tokens["revoked"]),
        "logged out": (None, s.tokens["logged_out"]),
        "deleted user": (None, s.tokens["dave"]),
        "disabled user": (None, s.tokens["erin"]),
        "web UI session": (None, s.tokens["web"]),
    }


@pytest.fixture(scope="module")
def users(stack: Stack) -> Users:
    """alice (searcher, all logspaces), carol (searcher of "web"), dave (deleted), erin
    (disabled), expired / revoked / logged-out tokens of alice."""
    st = stack
    u = st.users
    u.tokens["alice"] = add_user(st, "alice")
    u.tokens["carol"] = add_user(st, "carol", logspaces=["web"])
    u.tokens["dave"] = add_user(st, "dave")
    u.tokens["erin"] = add_user(st, "erin")
    u.tokens["revoked"] = new_token(st, "alice")
    u.tokens["logged_out"] = new_token(st, "alice")
    # a browser's sign-in (the web UI's cookie holds it): valid, but not for the API
    u.tokens["web"] = st.rpc.accounts().create_token("alice", "web session", kind="web", ttl=3600)[
        0
    ]
    for name in ("dave", "erin", "revoked", "logged_out"):
        assert me(st, u.tokens[name]) == 200, name  # each worked before it was spoilt
    t_expiring = time.monotonic()
    u.tokens["expired"] = new_token(st, "alice", expires_in=EXPIRES_IN)
    assert me(st, u.tokens["expired"]) == 200
    s = st.admin()
    tid = u.tokens["revoked"].split("_")[1]
    r = s.delete(f"{st.rpc.base}/tokens/{tid}", timeout=30)
    assert r.status_code == 200 and r.json()["revoked"], r.text
    r = requests.post(
        f"{st.rpc.base}/logout",
        headers={"Authorization": f"Bearer {u.tokens['logged_out']}"},
        verify=str(st.rpc.cafile),
        timeout=30,
    )
    assert r.status_code == 200 and r.json() == {"revoked": u.tokens["logged_out"].split("_")[1]}
    r = s.delete(f"{st.rpc.base}/users/dave", timeout=30)
    assert r.status_code == 200 and r.json() == {"deleted": "dave"}, r.text
    r = s.patch(f"{st.rpc.base}/users/erin", json={"disabled": True}, timeout=30)
    assert r.status_code == 200 and r.json()["disabled"] is True, r.text
    time.sleep(max(0.0, EXPIRES_IN + 1.2 - (time.monotonic() - t_expiring)))
    return u


def test_unauthenticated_calls_are_refused(stack: Stack, users: Users) -> None:
    st = stack
    problems = []
    for (method, tmpl), (who, args, params, body) in ROUTES.items():
        if who == "open":
            continue
        for what, (auth, token) in bad_tokens(st).items():
            r = st.call(method, tmpl, args, params, body, auth, token)
            code = (
                r.json().get("error", {}).get("code")
                if r.headers.get("Content-Type", "").startswith("application/json")
                else None
            )
            if r.status_code != 401 or code != "unauthorized":
                problems.append(f"{method} {tmpl} with {what}: {r.status_code} {r.text[:200]}")
            elif not r.headers.get("WWW-Authenticate", "").startswith("Bearer"):
                problems.append(f"{method} {tmpl} with {what}: no WWW-Authenticate: Bearer")
    assert not problems, "\n".join(problems)


def test_open_routes(stack: Stack, users: Users) -> None:
    st = stack
    r = st.call("GET", "/api/v1/health", (), {}, None, None, None)
    assert r.status_code == 200 and r.json() == {"status": "ok"}, r.text
    r = st.call(
        "POST", "/api/v1/login", (), {}, {"username": "nobody", "password": "x" * 12}, None, None
    )
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", r.text
    r = login(st, "alice", st.users.passwords["alice"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["user"]["name"] == "alice" and body["token"].startswith("lbx_"), body
    assert me(st, body["token"]) == 200
    # a disabled or deleted user cannot log in either
    assert login(st, "erin", st.users.passwords["erin"]).status_code == 401
    assert login(st, "dave", st.users.passwords["dave"]).status_code == 401


def test_rights(stack: Stack, users: Users) -> None:
    st = stack
    carol = users.tokens["carol"]
    problems = []
    for (method, tmpl), (who, args, params, body) in ROUTES.items():
        if who == "admin":
            r = st.call(method, tmpl, args, params, body, None, carol)
            if r.status_code != 403 or r.json()["error"]["code"] != "forbidden":
                problems.append(f"searcher on {method} {tmpl}: {r.status_code} {r.text[:200]}")
        elif who == "read":
            for ls in ("main", "nope"):  # exists / does not: 403 alike
                r = st.call(method, tmpl, (ls, *args[1:]), params, body, None, carol)
                if r.status_code != 403 or r.json()["error"]["code"] != "forbidden":
                    problems.append(f"searcher on {method} {tmpl} {ls}: {r.status_code}")
            r = st.call(method, tmpl, ("web", *args[1:]), params, body, None, carol)
            if r.status_code != 200:
                problems.append(f"searcher on own {method} {tmpl}: {r.status_code} {r.text[:200]}")
        elif who == "owner":  # any signed-in user gets past the checks: someone else's, or
            # (as here) no such object, is "not found"
            r = st.call(method, tmpl, args, params, body, None, carol)
            if r.status_code != 404 or r.json()["error"]["code"] != "not_found":
                problems.append(f"searcher on {method} {tmpl}: {r.status_code} {r.text[:200]}")
        elif who == "auth":
            fresh = new_token(st, "carol")  # logout revokes the token it is called with
            r = st.call(method, tmpl, args, params, body, None, fresh)
            if not 200 <= r.status_code < 300:
                problems.append(f"searcher on {method} {tmpl}: {r.status_code} {r.text[:200]}")
    # an admin passes every check (some sample objects do not exist: 404 is fine)
    for (method, tmpl), (who, args, params, body) in ROUTES.items():
        if who == "open":
            continue
        fresh = new_token(st, "admin")
        r = st.call(method, tmpl, args, params, body, None, fresh)
        if r.status_code in (401, 403) or r.status_code >= 500:
            problems.append(f"admin on {method} {tmpl}: {r.status_code} {r.text[:200]}")
    assert not problems, "\n".join(problems)


def test_rights_follow_the_user_at_each_call(stack: Stack, users: Users) -> None:
    st = stack
    tok = add_user(st, "frank", logspaces=["web"])
    url = f"{st.rpc.base}/logspaces/main/count"
    s = st.rpc.session(tok)
    assert s.get(url, params={"q": "hello"}, timeout=30).status_code == 403
    a = st.admin()
    r = a.patch(f"{st.rpc.base}/users/frank", json={"logspaces": ["web", "main"]}, timeout=30)
    assert r.status_code == 200, r.text
    r = s.get(url, params={"q": "hello"}, timeout=30)
    assert r.status_code == 200 and r.json()["total"] == 2, r.text
    assert s.get(f"{st.rpc.base}/users", timeout=30).status_code == 403
    r = a.patch(f"{st.rpc.base}/users/frank", json={"role": "admin"}, timeout=30)
    assert r.status_code == 200, r.text
    assert s.get(f"{st.rpc.base}/users", timeout=30).status_code == 200
    r = a.patch(
        f"{st.rpc.base}/users/frank", json={"role": "searcher", "logspaces": []}, timeout=30
    )
    assert r.status_code == 200, r.text
    assert s.get(url, params={"q": "hello"}, timeout=30).status_code == 403


# ---------------------------------------------------------------- audit


def test_audit_log(stack: Stack, users: Users) -> None:
    st = stack
    carol_pw = st.users.passwords["carol"]
    assert login(st, "carol", "wrong-password-123").status_code == 401
    r = login(st, "carol", carol_pw)
    assert r.status_code == 200, r.text
    s = st.rpc.session(r.json()["token"])
    r = s.get(f"{st.rpc.base}/logspaces/web/search", params={"q": "hello"}, timeout=30)
    assert r.status_code == 200 and r.json()["total"] == 1, r.text
    r = s.get(f"{st.rpc.base}/logspaces/web/export", params={"q": "hello OR nginx"}, timeout=30)
    assert r.status_code == 200 and r.content.count(b"\n") == 1, r.text
    r = s.get(f"{st.rpc.base}/logspaces/main/search", params={"q": "secret"}, timeout=30)
    assert r.status_code == 403
    # a searcher may not read the audit log (and that is audited too)
    r = s.get(f"{st.rpc.base}/audit", timeout=30)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text

    entries = audit(st, user="carol")
    assert entries == sorted(entries, key=lambda e: e["time"], reverse=True)

    def one(action: str, **want: Any) -> dict[str, Any]:
        got = [
            e for e in entries if e["action"] == action and all(e[k] == v for k, v in want.items())
        ]
        assert got, f"no {action} entry with {want} among {entries}"
        e = got[0]
        assert e["user"] == "carol" and e["address"] == "127.0.0.1", e
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", e["time"])
        return e

    one("login_failed", status=401)
    one("login", status=200)
    one("search", logspace="web", query="hello", results=1, status=200)
    one("export", logspace="web", query="hello OR nginx", results=1, status=200)
    e = one("denied", logspace="main", status=403)
    assert e["query"] in (None, "secret"), e  # the refused query may be recorded
    one("denied", status=403, logspace=None)  # GET /audit
    # the action filter works, and a refused unauthenticated call is recorded as well
    requests.get(
        f"{st.rpc.base}/me",
        headers={"Authorization": "Bearer nope"},
        verify=str(st.rpc.cafile),
        timeout=30,
    )
    denied = audit(st, action="denied")
    assert denied and all(e["action"] == "denied" for e in denied)
    assert any(e["status"] == 401 for e in denied), denied[:5]


# ---------------------------------------------------------------- lockout and expiry


@pytest.fixture
def short_ttl(tmp_path: Path, top: Path, logbox_bin: Path) -> Iterator[Stack]:
    """A stack of its own (its lockout state must not spill over) with 3 s sessions."""
    yield from make_stack(tmp_path, top, logbox_bin, {"LOGBOX_SESSION_TTL": "3"})


def test_lockout_and_session_expiry(short_ttl: Stack) -> None:
    st = short_ttl
    t_login = time.time()
    session = st.admin_token  # a 3 s session token from the harness's login
    assert me(st, session) == 200
    admin_api = new_token(st, "admin")  # no expiry given: 90 days
    st.admin_token = admin_api
    bob = add_user(st, "bob")
    add_user(st, "victim")
    victim_pw = st.users.passwords["victim"]
    statuses = [login(st, "victim", f"wrong-password-{i:03d}").status_code for i in range(10)]
    assert statuses[:9] == [401] * 9 and statuses[9] in (401, 429), statuses
    for user, pw in (("victim", victim_pw), ("bob", st.users.passwords["bob"]), ("x", "y" * 12)):
        r = login(st, user, pw)
        assert r.status_code == 429, (user, r.status_code, r.text)
        assert r.json()["error"]["code"] == "locked_out", r.text
        retry = int(r.headers["Retry-After"])
        assert 0 < retry <= 300, retry
    # tokens keep working for everyone
    assert me(st, bob) == 200
    assert me(st, admin_api) == 200
    # the failures and the lockout are audited
    failed = audit(st, action="login_failed")
    assert len([e for e in failed if e["user"] == "victim"]) >= 9, failed
    assert all(e["address"] == "127.0.0.1" and e["status"] == 401 for e in failed)
    locked = audit(st, action="login_locked")
    assert {e["user"] for e in locked} >= {"victim", "bob"}, locked
    # each refused attempt is a 429 entry (the lockout's start may be recorded beside them)
    assert len([e for e in locked if e["status"] == 429]) >= 3, locked
    # the session token from before the lockout expires after LOGBOX_SESSION_TTL
    time.sleep(max(0.0, t_login + 3.5 - time.time()))
    assert me(st, session) == 401
    assert me(st, admin_api) == 200


def test_api_token_expiry(stack: Stack, users: Users) -> None:
    st = stack
    tok = new_token(st, "alice", expires_in=2, name="short")
    t = time.monotonic()
    assert me(st, tok) == 200
    r = st.admin().get(f"{st.rpc.base}/tokens", params={"user": "alice"}, timeout=30)
    assert r.status_code == 200
    (info,) = (x for x in r.json()["tokens"] if x["id"] == tok.split("_")[1])
    assert info["expires"] is not None and info["kind"] == "api" and info["user"] == "alice"
    assert info["last_used"] is not None
    assert "token" not in info and tok not in r.text, "token secrets are never listed"
    time.sleep(max(0.0, 2.5 - (time.monotonic() - t)))
    assert me(st, tok) == 401
    # with no expiry
    tok = new_token(st, "alice", expires_in=None)
    r = st.admin().get(f"{st.rpc.base}/tokens", params={"user": "alice"}, timeout=30)
    (info,) = (x for x in r.json()["tokens"] if x["id"] == tok.split("_")[1])
    assert info["expires"] is None, info
    assert me(st, tok) == 200
