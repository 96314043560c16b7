# The web UI's admin pages (/admin/..., webui/UI.md) through Flask's test client, with a real
# accounts store (LMDB) and a real logbox-searchd over a store built with the `logbox` CLI: every
# admin view sends anonymous callers to /login and refuses searchers (403, audited as denied);
# every POST without its CSRF token is refused (400) and changes nothing; creating, changing,
# resetting the password of and deleting (after a confirmation step) a user, creating an API
# token (its secret shown once in #new-token, and it works) and revoking it, and writing a
# logspace's settings each do what they say and are audited (user_create, user_update,
# user_delete, token_create, token_revoke, logspace_settings); the last enabled admin cannot be
# disabled, demoted or deleted (409); the settings file is written atomically (a new inode, no
# temporary file left) and bad values are refused with 400 leaving it byte for byte unchanged; the
# audit page filters by user, action and time and pages with #audit-next; hostile token names and
# audit queries (<script>, non-UTF-8 bytes, control bytes) are shown inert.

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from lbtest import apps
from lbtest.apps import accounts_of as accounts
from lbtest.cli import Logbox
from lbtest.htmlpage import Node, Page
from lbtest.searchd import Searchd
from logbox_core import constants
from logbox_core.accounts import TokenError
from logbox_webui import create_app
from logbox_webui import settings as ls_settings
from markupsafe import escape
from werkzeug.test import TestResponse

PASSWORD = "correct horse battery"
BASE = "https://localhost"
HOSTILE = '<script>alert("x")</script><b>bold</b>'


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def searchd(
    tmp_path_factory: pytest.TempPathFactory, store_cli: Path, top: Path, sockdir: Path
) -> Iterator[Searchd]:
    """searchd over a store with logspaces main (5), other (3), secret (2)."""
    data = tmp_path_factory.mktemp("webui_admin") / "data"
    data.mkdir()
    for ls, n in (("main", 5), ("other", 3), ("secret", 2)):
        Logbox(store_cli, data, logspace=ls).ingest(
            b"".join(b"<14>app: hello %d\n" % i for i in range(n))
        )
    with apps.running_searchd(top, data, sockdir / "sd.sock", ["--threads", "1"]) as d:
        yield d


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("webui_admin_app")


@pytest.fixture(scope="module")
def app(searchd: Searchd, root: Path) -> Flask:
    etc = root / "etc"
    etc.mkdir()
    (etc / "logspaces.json").write_text(
        json.dumps(
            {"version": 1, "logspaces": {"future": {"retention_days": 7, "delimiters": ":"}}}
        )
    )
    # what logbox-indexd reports once it applied settings (its status file's members)
    (root / "indexd.status.json").write_text(
        json.dumps(
            {
                "pid": 1,
                "logspaces": {"main": {"retention_days": 14, "delimiters": "=,;"}},
                "settings": {"file": str(etc / "logspaces.json"), "applied": None, "error": None},
            }
        )
    )
    config = apps.app_config(
        searchd, root, **apps.status_files(root), LOGSPACE_SETTINGS=str(etc / "logspaces.json")
    )
    return apps.add_users(create_app(config))


class Browser:
    """A test client with a session: get() pages, post() forms with the page's CSRF token."""

    def __init__(self, app: Flask) -> None:
        self.c: FlaskClient = app.test_client()
        self.csrf = ""

    def get(self, path: str, **kw: Any) -> TestResponse:
        r = self.c.get(path, base_url=BASE, **kw)
        m = re.search(r'name="csrf_token" value="([^"]+)"', r.text)
        if m:
            self.csrf = m.group(1)
        assert "Traceback" not in r.text
        return r

    def post(
        self, path: str, data: dict[str, Any] | None = None, csrf: bool = True
    ) -> TestResponse:
        form = dict(data or {})
        if csrf:
            form["csrf_token"] = self.csrf
        r = self.c.post(path, base_url=BASE, data=form, headers={"Referer": f"{BASE}/"})
        assert "Traceback" not in r.text
        return r


def signed_in(app: Flask, name: str, password: str = PASSWORD) -> Browser:
    b = Browser(app)
    b.get("/login")
    r = b.post("/login", {"username": name, "password": password})
    assert r.status_code == 302, r.text[:500]
    b.get("/admin/users" if name == "admin" else "/status")
    return b


@pytest.fixture(scope="module")
def admin(app: Flask) -> Browser:
    return signed_in(app, "admin")


def last_audit(app: Flask, action: str) -> Any:
    entries, _ = accounts(app).audit_entries(action=action, limit=1)
    assert entries, f"no audit entry for {action}"
    return entries[0]


def page(r: TestResponse, status: int = 200) -> Page:
    assert r.status_code == status, (r.status_code, r.text[:1500])
    return Page(r.text)


# ---------------------------------------------------------------- who may

GETS = [
    "/admin/users",
    "/admin/users/alice",
    "/admin/tokens",
    "/admin/logspaces",
    "/admin/audit",
    "/admin/archive",
    "/admin/sites",
]
POSTS = [
    ("/admin/users", {"name": "mallory", "password": PASSWORD, "role": "admin"}),
    ("/admin/users/alice", {"action": "update", "role": "admin"}),
    ("/admin/users/alice/delete", {"confirm": "yes"}),
    ("/admin/tokens", {"user": "alice", "name": "x", "expires_days": "1"}),
    ("/admin/tokens/000000000000/revoke", {}),
    ("/admin/logspaces/main", {"retention_days": "1", "delimiters": ":"}),
    (
        "/admin/archive/main",
        {"endpoint": "https://s3.example", "bucket": "b", "access_key": "a", "secret_key": "s"},
    ),
    ("/admin/sites/site", {"name": "east", "url": "https://127.0.0.1:9", "token": "t"}),
    ("/admin/sites/multiple", {"name": "every", "members": "main"}),
]


def test_anonymous_goes_to_login(app: Flask) -> None:
    b = Browser(app)
    for path in GETS:
        r = b.get(path)
        assert r.status_code == 302 and r.headers["Location"].startswith("/login"), path
    b.get("/login")  # a CSRF token for the anonymous session
    for path, data in POSTS:
        r = b.post(path, data)
        assert r.status_code == 302 and r.headers["Location"].startswith("/login"), path
    assert accounts(app).get_user("mallory") is None


def test_searchers_are_refused(app: Flask) -> None:
    b = signed_in(app, "alice")
    for path in GETS:
        assert b.get(path).status_code == 403, path
        e = last_audit(app, "denied")
        assert (e.user, e.status) == ("alice", 403) and path in e.detail
    for path, data in POSTS:
        assert b.post(path, data).status_code == 403, path
    acc = accounts(app)
    assert acc.get_user("mallory") is None and acc.get_user("alice").role == "searcher"
    assert ls_settings.load(app.config["LOGSPACE_SETTINGS"]).get("main") is None


def test_csrf_refused(app: Flask, admin: Browser) -> None:
    before = Path(app.config["LOGSPACE_SETTINGS"]).read_bytes()
    for path, data in POSTS:
        r = admin.post(path, data, csrf=False)
        assert r.status_code == 400, path
        assert "csrf" in r.text.lower() or "form expired" in r.text.lower()
        r = admin.c.post(path, base_url=BASE, data={**data, "csrf_token": "forged"})
        assert r.status_code == 400, path
    acc = accounts(app)
    assert acc.get_user("mallory") is None and acc.get_user("alice").role == "searcher"
    assert Path(app.config["LOGSPACE_SETTINGS"]).read_bytes() == before


# ---------------------------------------------------------------- users


def users_table(b: Browser) -> dict[str, Node]:
    p = page(b.get("/admin/users"))
    return {tr.attrs["data-name"]: tr for tr in p.by_id("users").all("tr", "user")}


def test_users_page_lists_and_offers_every_logspace(admin: Browser) -> None:
    p = page(admin.get("/admin/users"))
    rows = {tr.attrs["data-name"]: tr for tr in p.by_id("users").all("tr", "user")}
    assert {"admin", "alice"} <= set(rows)
    assert "main, other" in rows["alice"].text and "searcher" in rows["alice"].text
    form = p.by_id("user-create")
    assert form.attrs["method"] == "post" and form.attrs["action"] == "/admin/users"
    names = {i.attrs.get("name") for i in form.all("input")} | {
        s.attrs["name"] for s in form.all("select")
    }
    assert {"name", "password", "role", "logspaces", "csrf_token"} <= names
    assert p.by_id("new-name").attrs["pattern"] == constants.USER_NAME_HTML_PATTERN
    boxes = [i.attrs["value"] for i in form.all("input") if i.attrs.get("name") == "logspaces"]
    assert boxes == ["*", "future", "main", "other", "secret"]  # settings-only "future" too
    roles = [o.attrs["value"] for o in p.by_id("new-role").all("option")]
    assert roles == ["admin", "searcher"]
    assert p.by_id("user-create-submit").attrs["type"] == "submit"


def test_create_user(app: Flask, admin: Browser) -> None:
    r = admin.post(
        "/admin/users",
        {"name": "bob", "password": PASSWORD, "role": "searcher", "logspaces": ["main", "secret"]},
    )
    assert r.status_code == 303 and r.headers["Location"].endswith("/admin/users")
    bob = accounts(app).get_user("bob")
    assert (bob.role, bob.logspaces, bob.disabled, bob.must_change) == (
        "searcher",
        ("main", "secret"),
        False,
        False,
    )
    e = last_audit(app, "user_create")
    assert (e.user, e.status) == ("admin", 201) and "bob" in e.detail
    rows = users_table(admin)
    assert "main, secret" in rows["bob"].text
    # "all logspaces" wins over single ones; must_change is kept
    r = admin.post(
        "/admin/users",
        {
            "name": "carol",
            "password": PASSWORD,
            "role": "searcher",
            "logspaces": ["*", "main"],
            "must_change": "1",
        },
    )
    assert r.status_code == 303
    carol = accounts(app).get_user("carol")
    assert carol.logspaces == ("*",) and carol.must_change


@pytest.mark.parametrize(
    "form,status,words",
    [
        ({"name": "Bad Name", "password": PASSWORD, "role": "searcher"}, 400, "name:"),
        ({"name": "dave", "password": "short", "role": "searcher"}, 400, "password:"),
        ({"name": "dave", "password": PASSWORD, "role": "root"}, 400, "role:"),
        ({"name": "dave", "password": PASSWORD, "logspaces": ["../x"]}, 400, "logspaces:"),
        ({"name": "admin", "password": PASSWORD, "role": "searcher"}, 409, "exists"),
    ],
)
def test_create_user_refused(
    app: Flask, admin: Browser, form: dict[str, Any], status: int, words: str
) -> None:
    r = admin.post("/admin/users", form)
    p = page(r, status)
    err = p.by_id("user-create-error")
    assert "flash" in err.attrs["class"] and words in err.text
    assert accounts(app).get_user("dave") is None
    e = last_audit(app, "user_create")
    assert e.status == status and words in e.detail
    # the form keeps what was typed (not the password)
    assert p.by_id("new-name").attrs["value"] == form["name"]


def test_update_user(app: Flask, admin: Browser) -> None:
    acc = accounts(app)
    acc.add_user("erin", PASSWORD, "searcher", ("main",))
    p = page(admin.get("/admin/users/erin"))
    edit = p.by_id("user-edit")
    checked = [
        i.attrs["value"]
        for i in edit.all("input")
        if "checked" in i.attrs and i.attrs["name"] == "logspaces"
    ]
    assert checked == ["main"]
    r = admin.post(
        "/admin/users/erin",
        {"action": "update", "role": "searcher", "logspaces": ["other"], "disabled": "1"},
    )
    assert r.status_code == 303
    erin = acc.get_user("erin")
    assert erin.logspaces == ("other",) and erin.disabled
    e = last_audit(app, "user_update")
    assert e.status == 200 and "erin" in e.detail and "disabled" in e.detail
    r = admin.post("/admin/users/erin", {"action": "update", "role": "admin"})
    erin = acc.get_user("erin")
    assert r.status_code == 303 and erin.role == "admin" and not erin.disabled
    assert erin.logspaces == ()
    # unknown user: 404 page
    assert admin.get("/admin/users/nobody").status_code == 404
    assert admin.post("/admin/users/nobody", {"action": "update"}).status_code == 404


def test_reset_password(app: Flask, admin: Browser) -> None:
    acc = accounts(app)
    acc.add_user("frank", PASSWORD, "searcher", ("main",))
    new = "a brand new password"
    r = admin.post(
        "/admin/users/frank",
        {"action": "password", "password": new, "password2": new, "must_change": "1"},
    )
    assert r.status_code == 303
    assert acc.check_password("frank", new) is not None
    assert acc.check_password("frank", PASSWORD) is None
    assert acc.get_user("frank").must_change
    e = last_audit(app, "user_update")
    assert "frank" in e.detail and "password" in e.detail and new not in e.detail
    # signing in now leads to the password page
    b = Browser(app)
    b.get("/login")
    r = b.post("/login", {"username": "frank", "password": new})
    assert r.status_code == 302 and "/password" in r.headers["Location"]
    # two different passwords: 400, nothing changed
    r = admin.post(
        "/admin/users/frank",
        {"action": "password", "password": "x" * 12, "password2": "y" * 12},
    )
    assert "differ" in page(r, 400).by_id("user-error").text
    assert acc.check_password("frank", new) is not None


def test_delete_user_asks_first(app: Flask, admin: Browser) -> None:
    acc = accounts(app)
    acc.add_user("gina", PASSWORD, "searcher", ("main",))
    secret, _ = acc.create_token("gina", "script")
    p = page(admin.post("/admin/users/gina/delete"))
    confirm = p.by_id("user-delete-confirm")
    assert {i.attrs["name"]: i.attrs["value"] for i in confirm.all("input")}["confirm"] == "yes"
    assert acc.get_user("gina") is not None
    r = admin.post("/admin/users/gina/delete", {"confirm": "yes"})
    assert r.status_code == 303
    assert acc.get_user("gina") is None
    with pytest.raises(TokenError):
        acc.verify_token(secret)
    e = last_audit(app, "user_delete")
    assert (e.user, e.status, e.detail) == ("admin", 200, "user gina")
    assert "gina" not in users_table(admin)


def test_last_admin(app: Flask, admin: Browser) -> None:
    acc = accounts(app)
    for u in acc.list_users():  # leave "admin" the only enabled admin
        if u.role == "admin" and u.name != "admin":
            acc.update_user(u.name, role="searcher")
    for form, path in (
        ({"action": "update", "role": "admin", "disabled": "1"}, "/admin/users/admin"),
        ({"action": "update", "role": "searcher", "logspaces": ["*"]}, "/admin/users/admin"),
        ({"confirm": "yes"}, "/admin/users/admin/delete"),
    ):
        r = admin.post(path, form)
        err = page(r, 409).by_id("user-error")
        assert "last enabled admin" in err.text
        e = last_audit(app, "user_delete" if "delete" in path else "user_update")
        assert e.status == 409
    a = acc.get_user("admin")
    assert a.role == "admin" and not a.disabled


# ---------------------------------------------------------------- tokens


def test_create_and_revoke_token(app: Flask, admin: Browser) -> None:
    acc = accounts(app)
    r = admin.post("/admin/tokens", {"user": "alice", "name": HOSTILE, "expires_days": "30"})
    p = page(r, 201)
    secret = p.by_id("new-token").text
    token, user = acc.verify_token(secret)
    assert user.name == "alice" and token.name == HOSTILE and token.kind == "api"
    assert 29.9 * 86400 < (token.expires_us - token.created_us) / 1e6 <= 30 * 86400
    e = last_audit(app, "token_create")
    assert (e.user, e.status) == ("admin", 201) and token.id in e.detail
    # inert: the name is escaped wherever it is shown
    assert HOSTILE not in r.text and str(escape(HOSTILE)) in r.text
    listing = admin.get("/admin/tokens")
    assert HOSTILE not in listing.text
    rows = {tr.attrs["data-id"]: tr for tr in Page(listing.text).by_id("tokens").all("tr", "token")}
    assert HOSTILE in rows[token.id].text and rows[token.id].attrs["data-revoked"] == "false"
    assert secret not in listing.text  # shown once
    # never expiring
    r = admin.post("/admin/tokens", {"user": "admin", "name": "cron", "expires_days": ""})
    never, _ = acc.verify_token(page(r, 201).by_id("new-token").text)
    assert never.expires_us is None
    # revoke
    r = admin.post(f"/admin/tokens/{token.id}/revoke")
    assert r.status_code == 303
    with pytest.raises(TokenError) as ex:
        acc.verify_token(secret)
    assert ex.value.reason == "revoked"
    e = last_audit(app, "token_revoke")
    assert e.user == "admin" and token.id in e.detail
    rows = {
        tr.attrs["data-id"]: tr
        for tr in page(admin.get("/admin/tokens")).by_id("tokens").all("tr", "token")
    }
    assert rows[token.id].attrs["data-revoked"] == "true"
    assert admin.post("/admin/tokens/0123456789ab/revoke").status_code == 404
    assert admin.post("/admin/tokens/nonsense/revoke").status_code == 404


@pytest.mark.parametrize(
    "form,status",
    [
        ({"user": "nobody", "name": "x", "expires_days": "1"}, 404),
        ({"user": "alice", "name": "", "expires_days": "1"}, 400),
        ({"user": "alice", "name": "x", "expires_days": "0"}, 400),
        ({"user": "alice", "name": "x", "expires_days": "99999"}, 400),
        ({"user": "alice", "name": "x", "expires_days": "1.5"}, 400),
        ({"user": "alice", "name": "tab\there", "expires_days": "1"}, 400),
    ],
)
def test_create_token_refused(
    app: Flask, admin: Browser, form: dict[str, str], status: int
) -> None:
    n = len(accounts(app).list_tokens())
    p = page(admin.post("/admin/tokens", form), status)
    assert "Token not created" in p.by_id("token-create-error").text
    assert "new-token" not in p.ids
    assert len(accounts(app).list_tokens()) == n
    assert last_audit(app, "token_create").status == status


# ---------------------------------------------------------------- logspace settings


def forms_of(p: Page) -> dict[str, Node]:
    return {f.attrs["data-logspace"]: f for f in p.root.all("form", "logspace-settings")}


def values(form: Node) -> dict[str, str]:
    return {i.attrs["name"]: i.attrs.get("value", "") for i in form.all("input")}


def test_logspaces_page(app: Flask, admin: Browser) -> None:
    p = page(admin.get("/admin/logspaces"))
    forms = forms_of(p)
    assert sorted(forms) == ["future", "main", "other", "secret"]
    # future: only in the settings file; main: applied values from indexd's status file
    assert values(forms["future"])["retention_days"] == "7"
    assert values(forms["future"])["delimiters"] == ":"
    assert values(forms["main"])["retention_days"] == "14"
    assert values(forms["main"])["delimiters"] == "=,;"
    assert values(forms["other"])["delimiters"] == constants.DEFAULT_DELIMITERS
    assert forms["main"].attrs["action"] == "/admin/logspaces/main"
    assert "newly stored" in p.root.text or "stored from then on" in p.root.text
    # The new-logspace field states the name rule as logbox_core.constants has it.
    new = p.by_id("new-logspace").attrs
    assert new["pattern"] == constants.LOGSPACE_HTML_PATTERN
    assert new["maxlength"] == str(constants.LOGSPACE_NAME_MAX)
    # ?new= shows a form for a logspace that does not exist yet
    assert "brand-new" in forms_of(page(admin.get("/admin/logspaces?new=brand-new")))


def test_write_settings(app: Flask, admin: Browser) -> None:
    path = Path(app.config["LOGSPACE_SETTINGS"])
    inode = path.stat().st_ino
    delims = "&:~?![]=,;()'\"/\\|<>{}*"
    r = admin.post("/admin/logspaces/main", {"retention_days": "30", "delimiters": delims})
    assert r.status_code == 303, r.text[:500]
    doc = json.loads(path.read_bytes())
    assert doc == {
        "version": 1,
        "logspaces": {
            "future": {"retention_days": 7, "delimiters": ":"},
            "main": {"retention_days": 30, "delimiters": delims},
        },
    }
    assert path.stat().st_ino != inode  # replaced by rename, not rewritten in place
    assert sorted(os.listdir(path.parent)) == ["logspaces.json"]  # no temporary file left
    e = last_audit(app, "logspace_settings")
    assert (e.user, e.logspace, e.status) == ("admin", "main", 200) and "30" in e.detail
    forms = forms_of(page(admin.get("/admin/logspaces")))
    assert values(forms["main"]) | {"csrf_token": ""} == {
        "retention_days": "30",
        "delimiters": delims,
        "csrf_token": "",
    }
    # a logspace not in the store yet; 0 days = forever, no delimiters but white space
    r = admin.post("/admin/logspaces/brand-new", {"retention_days": "0", "delimiters": ""})
    assert r.status_code == 303
    assert ls_settings.load(path)["brand-new"] == ls_settings.LogspaceSettings(0, "")


@pytest.mark.parametrize(
    "name,form,words",
    [
        ("main", {"retention_days": "-1", "delimiters": ":"}, "retention_days"),
        ("main", {"retention_days": "36501", "delimiters": ":"}, "retention_days"),
        ("main", {"retention_days": "ten", "delimiters": ":"}, "retention_days"),
        ("main", {"retention_days": "", "delimiters": ":"}, "retention_days"),
        ("main", {"retention_days": "1", "delimiters": ":a"}, "delimiters"),
        ("main", {"retention_days": "1", "delimiters": ": "}, "delimiters"),
        ("main", {"retention_days": "1", "delimiters": "7"}, "delimiters"),
        ("main", {"retention_days": "1", "delimiters": "é"}, "delimiters"),
        ("main", {"retention_days": "1", "delimiters": "\t"}, "delimiters"),
        ("main", {"retention_days": "1", "delimiters": ":" * 64}, "at most 63"),
        ("Bad.Name", {"retention_days": "1", "delimiters": ":"}, "logspace"),
        ("<script>", {"retention_days": "1", "delimiters": ":"}, "logspace"),
        ("catalog", {"retention_days": "1", "delimiters": ":"}, "reserved logspace name"),
    ],
)
def test_bad_settings_change_nothing(
    app: Flask, admin: Browser, name: str, form: dict[str, str], words: str
) -> None:
    path = Path(app.config["LOGSPACE_SETTINGS"])
    before = path.read_bytes()
    inode = path.stat().st_ino
    r = admin.post(f"/admin/logspaces/{name}", form)
    p = page(r, 400)
    assert words in p.by_id("logspace-error").text
    assert "<script>" not in r.text.split("</head>", 1)[1].replace("<script src=", "")
    assert path.read_bytes() == before and path.stat().st_ino == inode
    e = last_audit(app, "logspace_settings")
    assert e.status == 400 and words in e.detail


def test_settings_module(tmp_path: Path) -> None:
    p = tmp_path / "ls.json"
    assert ls_settings.load(p) == {}
    ls_settings.set_logspace(p, "a", 3, "")
    ls_settings.set_logspace(p, "b", "5", ":;")
    assert ls_settings.load(p) == {
        "a": ls_settings.LogspaceSettings(3, ""),
        "b": ls_settings.LogspaceSettings(5, ":;"),
    }
    for bad in (
        b"{",
        b"[]",
        b'{"version": 2, "logspaces": {}}',
        b'{"version": 1, "logspaces": {"a": {"retention_days": "3"}}}',
        b'{"version": 1, "logspaces": {"a": {"retention_days": true}}}',
        b'{"version": 1, "logspaces": {"a": {"colour": 1}}}',
        b'{"version": 1, "logspaces": {"A": {}}}',
    ):
        p.write_bytes(bad)
        with pytest.raises(ls_settings.SettingsError):
            ls_settings.load(p)
        # a broken file is not overwritten by a change of one logspace
        with pytest.raises(ls_settings.SettingsError):
            ls_settings.set_logspace(p, "a", 1, ":")
        assert p.read_bytes() == bad
    with pytest.raises(ls_settings.SettingsError):
        ls_settings.write_atomically(tmp_path / "missing" / "ls.json", b"{}")
    with pytest.raises(ls_settings.SettingsError):
        ls_settings.set_logspace(tmp_path / "missing" / "ls.json", "a", 1, ":")
    assert sorted(os.listdir(tmp_path)) == ["ls.json"]
    # the file's permissions are kept; a new file is 0644
    p.unlink()
    ls_settings.set_logspace(p, "a", 1, ":")
    assert p.stat().st_mode & 0o7777 == 0o644
    p.chmod(0o640)
    ls_settings.set_logspace(p, "b", 2, ";")
    assert p.stat().st_mode & 0o7777 == 0o640 and set(ls_settings.load(p)) == {"a", "b"}


def test_settings_writers_in_processes_lose_nothing(tmp_path: Path) -> None:
    """Eight processes each set 25 logspaces at once: every one of the 200 is in the file."""
    import multiprocessing

    p = tmp_path / "ls.json"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_set_many, args=(str(p), i)) for i in range(8)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(60)
        assert pr.exitcode == 0
    got = ls_settings.load(p)
    assert len(got) == 200 and got["w3-17"] == ls_settings.LogspaceSettings(17, ":")
    assert sorted(os.listdir(tmp_path)) == ["ls.json"]


def _set_many(path: str, worker: int) -> None:
    for j in range(25):
        ls_settings.set_logspace(path, f"w{worker}-{j}", j, ":")


# ---------------------------------------------------------------- the audit log


def audit_rows(p: Page) -> list[Node]:
    return p.by_id("audit").all("tr", "audit-entry")


def test_audit_filters_and_paging(app: Flask, admin: Browser) -> None:
    acc = accounts(app)
    for i in range(5):
        acc.audit("search", user="zed", address="10.0.0.9", logspace="main", query=f"q{i}")
    acc.audit("login", user="zed", address="10.0.0.9")
    p = page(admin.get("/admin/audit?user=zed&action=search&limit=2"))
    rows = audit_rows(p)
    assert [r.all("td", "query")[0].text for r in rows] == ["q4", "q3"]
    seen = []
    while True:
        rows = audit_rows(p)
        assert all(r.attrs["data-action"] == "search" for r in rows)
        seen += [r.all("td", "query")[0].text for r in rows]
        if "audit-next" not in p.ids:
            break
        nxt = p.by_id("audit-next").attrs["href"]
        assert "user=zed" in nxt and "action=search" in nxt and "limit=2" in nxt
        p = page(admin.get(nxt))
    assert seen == ["q4", "q3", "q2", "q1", "q0"]
    # time range: everything by zed in the last minute, nothing from an hour ago to 30 min ago
    assert len(audit_rows(page(admin.get("/admin/audit?user=zed&from=-1m&to=now")))) == 6
    assert audit_rows(page(admin.get("/admin/audit?user=zed&from=-1h&to=-30m"))) == []
    since = time.strftime("%Y-%m-%d %H:%M", time.gmtime(time.time() - 120))
    assert len(audit_rows(page(admin.get(f"/admin/audit?user=zed&from={since}")))) == 6
    # bad filters: 400 with the reason, no traceback
    for q in ("from=yesterday", "from=now&to=-1h", "limit=0", "cursor=x"):
        assert page(admin.get(f"/admin/audit?{q}"), 400).by_id("audit-error").text


def test_audit_shows_hostile_values_inert(app: Flask, admin: Browser) -> None:
    acc = accounts(app)
    query = HOSTILE + " raw\udcff\udcfe ctl\x01\x1b"
    acc.audit("search", user="yves", address="10.0.0.8", logspace="main", query=query,
              detail="<img src=x onerror=alert(1)>")  # fmt: skip
    r = admin.get("/admin/audit?user=yves")
    assert r.status_code == 200
    assert HOSTILE not in r.text and "<img src=x" not in r.text
    row = audit_rows(Page(r.text))[0]
    text = row.all("td", "query")[0].text
    assert HOSTILE in text and "raw\\xff\\xfe" in text and "ctl\\x01\\x1b" in text
    assert "<img src=x onerror=alert(1)>" in row.all("td", "detail")[0].text
    # and a hostile filter value round-trips inert too
    r = admin.get("/admin/audit", query_string={"user": HOSTILE, "action": "<b>x</b>"})
    assert r.status_code == 200 and HOSTILE not in r.text and "<b>x</b>" not in r.text


def test_pages_with_searchd_down(app: Flask, tmp_path: Path) -> None:
    """Every admin page still answers with searchd gone; logspaces come from the file."""
    other = create_app(
        {
            **app.config,
            "SEARCHD_SOCKET": str(tmp_path / "gone.sock"),
            "ACCOUNTS_PATH": str(tmp_path / "accounts"),  # one LMDB environment per process
        }
    )
    accounts(other).add_user("admin", PASSWORD, "admin")
    accounts(other).add_user("alice", PASSWORD, "searcher", ("main",))
    b = signed_in(other, "admin")
    for path in GETS:
        assert b.get(path).status_code == 200, path
    p = page(b.get("/admin/logspaces"))
    assert "future" in forms_of(p) and "secret" not in forms_of(p)
    assert "searchd" in p.root.text
    boxes = [
        i.attrs["value"]
        for i in page(b.get("/admin/users")).by_id("user-create").all("input")
        if i.attrs.get("name") == "logspaces"
    ]
    assert "*" in boxes and "secret" not in boxes


# ---------------------------------------------------------------- archive targets


def test_archive_page(app: Flask, admin: Browser) -> None:
    """/admin/archive: a form per logspace; a save writes archive.json (0640) and is audited;
    the secret is never shown and an empty field keeps it; a bad target says why and changes
    nothing; logbox-archive's status is shown; "Stop archiving" removes the target."""
    path = Path(app.config["ARCHIVE_SETTINGS"])
    p = page(admin.get("/admin/archive"))
    assert p.by_id("admin-archive").attrs.get("aria-current") == "page"
    assert {"main", "other"} <= {
        s.attrs["data-logspace"] for s in p.root.all("section", "archive-target")
    }
    assert p.by_id("archive-main-state").text == "not archived"
    form = {
        "endpoint": "https://s3.example:9000",
        "bucket": "logs",
        "prefix": "box1",
        "region": "",
        "access_key": "AKID",
        "secret_key": "web-secret",
        "ca_file": "",
        "archive_days": "90",
        "part_mb": "",
    }
    r = admin.post("/admin/archive/main", form)
    assert r.status_code == 303 and r.headers["Location"].endswith("/admin/archive#archive-main")
    doc = json.loads(path.read_text())["targets"]["main"]
    assert (
        doc["secret_key"] == "web-secret" and doc["archive_days"] == 90 and doc["ca_file"] is None
    )
    assert path.stat().st_mode & 0o777 == 0o640
    assert last_audit(app, "archive_settings").detail == "target https://s3.example:9000/logs/box1"
    p = page(admin.get("/admin/archive"))
    assert "web-secret" not in p.root.text and "web-secret" not in admin.get("/admin/archive").text
    assert p.by_id("archive-main-state").text == "archived to https://s3.example:9000/logs/box1"
    assert p.by_id("archive-main-secret_key").attrs["value"] == ""
    # empty keeps the secret
    r = admin.post("/admin/archive/main", {**form, "secret_key": "", "archive_days": "0"})
    assert r.status_code == 303
    doc = json.loads(path.read_text())["targets"]["main"]
    assert doc["secret_key"] == "web-secret" and doc["archive_days"] == 0
    before = path.read_bytes()
    r = admin.post("/admin/archive/main", {**form, "endpoint": "http://s3.example"})
    assert r.status_code == 400
    assert "TLS is required" in page(r, 400).by_id("archive-main-error").text
    assert path.read_bytes() == before
    state = Path(app.config["ARCHIVE_STATE"])
    state.mkdir(exist_ok=True)
    (state / "status.json").write_text(
        json.dumps({"logspaces": {"main": {"days_archived": 12, "days_local": 3, "ok": True}}})
    )
    st = page(admin.get("/admin/archive")).by_id("archive-main-status")
    assert st.attrs["data-ok"] == "true" and "12 days archived" in st.text
    r = admin.post("/admin/archive/main", {"remove": "1"})
    assert r.status_code == 303 and "main" not in json.loads(path.read_text())["targets"]
    (state / "status.json").unlink()


# ---------------------------------------------------------------- sites


def test_sites_page(app: Flask, admin: Browser) -> None:
    """/admin/sites: a site added writes sites.json (0640) and is audited; the token is never
    shown and an empty field keeps it; a site that does not answer says so; a bad URL or a
    multiple logspace named like a local one says why and changes nothing; a site a multiple
    logspace uses cannot be removed until the multiple logspace is."""
    path = Path(app.config["SITES_SETTINGS"])
    p = page(admin.get("/admin/sites"))
    assert p.by_id("admin-sites").attrs.get("aria-current") == "page"
    assert p.by_id("sites-none") and p.by_id("multiple-none")
    form = {"name": "east", "url": "https://127.0.0.1:9", "token": "lbx_web_token",
            "ca": "", "deadline_ms": "500"}  # fmt: skip
    r = admin.post("/admin/sites/site", form)
    assert r.status_code == 303 and r.headers["Location"].endswith("/admin/sites#site-east")
    doc = json.loads(path.read_text())["sites"]["east"]
    assert doc == {"url": "https://127.0.0.1:9", "token": "lbx_web_token", "deadline_ms": 500}
    assert path.stat().st_mode & 0o777 == 0o640
    assert last_audit(app, "site_settings").detail == "site east: https://127.0.0.1:9"
    text = admin.get("/admin/sites").text
    assert "lbx_web_token" not in text
    p = page(admin.get("/admin/sites"))
    state = p.by_id("site-east-state")
    assert state.attrs["data-ok"] == "false" and "Not answering" in state.text
    assert p.by_id("site-east-token").attrs["value"] == ""
    r = admin.post(
        "/admin/sites/site", {**form, "existing": "1", "token": "", "deadline_ms": "900"}
    )
    assert r.status_code == 303
    doc = json.loads(path.read_text())["sites"]["east"]
    assert doc["token"] == "lbx_web_token" and doc["deadline_ms"] == 900
    before = path.read_bytes()
    r = admin.post("/admin/sites/site", {**form, "existing": "1", "url": "http://127.0.0.1:9"})
    assert r.status_code == 400 and "url" in page(r, 400).by_id("site-east-error").text
    r = admin.post("/admin/sites/multiple", {"name": "main", "members": "east:main"})
    assert r.status_code == 400
    assert "local logspace" in page(r, 400).by_id("multiple-new-error").text
    assert path.read_bytes() == before
    r = admin.post("/admin/sites/multiple", {"name": "every", "members": "main, east:main"})
    assert r.status_code == 303
    assert json.loads(path.read_text())["multiple"] == {"every": ["main", "east:main"]}
    assert page(admin.get("/admin/sites")).by_id("multiple-every-members").attrs["value"] == (
        "main, east:main"
    )
    r = admin.post("/admin/sites/site", {"name": "east", "existing": "1", "remove": "1"})
    assert r.status_code == 400
    assert "multiple logspace every has east:main" in page(r, 400).by_id("site-east-error").text
    r = admin.post("/admin/sites/multiple", {"name": "every", "existing": "1", "remove": "1"})
    assert r.status_code == 303
    r = admin.post("/admin/sites/site", {"name": "east", "existing": "1", "remove": "1"})
    assert r.status_code == 303 and json.loads(path.read_text())["sites"] == {}
