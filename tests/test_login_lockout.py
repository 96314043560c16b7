# Scenario (issue 15, defect 3 and build 3): the login lockout under alternating users, addresses
# and apps. Real gunicorn serving the API and the web UI on one accounts store (LMDB); clients
# leave from several loopback addresses (127.0.0.2, 127.0.0.3, ...: all of 127/8 is this host),
# so the apps see as many client addresses. Checked, each step alternating the API's POST /login
# and the web UI's login form:
# - the defect: nine wrong admin passwords, then a right login as bob, from one address, does not
#   reset the count: the next wrong admin password blocks the address (429, Retry-After), bob's
#   right password included, through both apps;
# - a success takes back only its own user's failures from its address: bob's failures before
#   his sign-in no longer count, another name's still do, and another address is not concerned;
# - failures against one name from many addresses (none reaching its own limit) refuse that name
#   from a new address (429, "for 'carol'"), but not from an address carol signed in from before,
#   and not other names;
# - the refusals are audited (login_locked, with the scope).
from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import requests
from lbtest.proxied import sharing_accounts
from lbtest.rpc import RpcServer
from lbtest.webui import WebuiServer, csrf_token

pytestmark = pytest.mark.slow


@dataclass
class Apps:
    rpc: RpcServer
    web: WebuiServer
    passwords: dict[str, str]

    def api_login(self, source: str, user: str, password: str) -> requests.Response:
        """POST /api/v1/login from source."""
        with self.rpc.session(source=source) as s:
            return s.post(
                self.rpc.base + "/login", json={"username": user, "password": password}, timeout=60
            )

    def web_login(self, source: str, user: str, password: str) -> requests.Response:
        """The web UI's login form from source (GET for the CSRF token, then POST)."""
        with self.web.session(source=source) as s:
            token = csrf_token(s.get(self.web.url + "/login", timeout=60).text)
            return s.post(
                self.web.url + "/login",
                data={"username": user, "password": password, "csrf_token": token},
                headers={"Referer": self.web.url + "/login"},
                allow_redirects=False,
                timeout=60,
            )

    def login(self, app: str, source: str, user: str, password: str | None = None) -> int:
        """A login through app ("api" or "web") with password (default: the right one): 200 for
        a success (the web UI's 302 too), else the status."""
        pw = self.passwords[user] if password is None else password
        if app == "api":
            r = self.api_login(source, user, pw)
            if r.status_code == 429:
                assert r.json()["error"]["code"] == "locked_out", r.text
        else:
            r = self.web_login(source, user, pw)
        if r.status_code == 429:
            assert 0 < int(r.headers["Retry-After"]) <= 300, r.headers
        return 200 if r.status_code in (200, 302) else r.status_code


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Apps]:
    with sharing_accounts(tmp_path_factory.mktemp("lockout")) as (rpc, web):
        acc = rpc.accounts()
        passwords = {"admin": rpc.admin_password}
        for name in ("alice", "bob", "carol"):
            passwords[name] = f"{name}-{secrets.token_urlsafe(12)}"
            acc.add_user(name, passwords[name], "searcher")
        yield Apps(rpc, web, passwords)


def both(n: int) -> Iterator[str]:
    """n app names, alternating."""
    for i in range(n):
        yield ("api", "web")[i % 2]


def test_a_success_as_another_user_does_not_reset_the_count(apps: Apps) -> None:
    src = "127.0.0.2"
    for app in both(9):
        assert apps.login(app, src, "admin", "wrong-password-0") == 401
    assert apps.login("api", src, "bob") == 200  # the old code forgot the 9 failures here
    assert apps.login("web", src, "bob") == 200
    # the 10th wrong admin password within 60 s starts the block (the web page says so at once)
    assert apps.login("api", src, "admin", "wrong-password-1") == 401
    for app in both(2):
        for user in ("bob", "admin"):
            assert apps.login(app, src, user) == 429, (app, user)
    r = apps.api_login(src, "bob", apps.passwords["bob"])
    assert "too many failed logins from 127.0.0.2" in r.json()["error"]["message"], r.text
    r = apps.web_login(src, "bob", apps.passwords["bob"])
    assert "from 127.0.0.2" in r.text and "blocked" in r.text, r.text[:500]
    assert apps.login("api", "127.0.0.12", "bob") == 200  # other addresses are not concerned


def test_a_success_takes_back_only_its_own_users_failures(apps: Apps) -> None:
    src = "127.0.0.3"
    for app in both(5):
        assert apps.login(app, src, "bob", "bob-mistyped-it") == 401
    assert apps.login("web", src, "bob") == 200  # bob's 5 failures are taken back
    for app in both(9):
        assert apps.login(app, src, "mallory", "guess-guess-guess") == 401
    assert apps.login("api", src, "alice") == 200  # alice had no failures: nothing changes
    assert apps.login("web", src, "mallory", "guess-guess-guess") == 429  # mallory's 10th
    assert apps.login("api", src, "bob") == 429
    assert apps.login("api", "127.0.0.13", "alice") == 200


def test_failures_against_one_name_from_many_addresses(apps: Apps) -> None:
    home = "127.0.0.4"
    assert apps.login("api", home, "carol") == 200  # carol's usual address
    n = 0
    for i in range(6):  # 30 failures from 6 addresses, 5 each: no address reaches 10
        for app in both(5):
            assert apps.login(app, f"127.0.0.{20 + i}", "carol", f"guess-{n:04d}-xx") == 401
            n += 1
    # carol from an address she never signed in from: refused, whichever app
    for app in both(2):
        assert apps.login(app, "127.0.0.30", "carol") == 429, app
    r = apps.api_login("127.0.0.31", "carol", apps.passwords["carol"])
    assert r.status_code == 429, r.text
    assert "for 'carol' from addresses it never signed in from" in r.json()["error"]["message"]
    # ... but not from her usual address, and other names are not slowed
    for app in both(2):
        assert apps.login(app, home, "carol") == 200, app
        assert apps.login(app, "127.0.0.30", "alice") == 200, app
    entries, _ = apps.rpc.accounts().audit_entries(action="login_locked", limit=1000)
    scopes = {(e.user, e.address, e.detail) for e in entries if e.status == 429}
    assert ("carol", "127.0.0.30", "user blocked") in scopes, scopes
    assert ("bob", "127.0.0.2", "address blocked") in scopes, scopes
