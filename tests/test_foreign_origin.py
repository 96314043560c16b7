# Scenario (issue 15, build 7): a request that changes something (POST, PATCH, DELETE) with an
# Origin header naming another site is refused, through real gunicorn: the API answers 403 JSON
# (forbidden) before looking at the token or the password, the web UI a 403 page before its CSRF
# check; "null" counts as foreign. The same request with this site's Origin, or with none (a
# script), goes through; reads (GET) are not concerned.
from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from lbtest.proxied import sharing_accounts
from lbtest.rpc import RpcServer
from lbtest.webui import WebuiServer, csrf_token

pytestmark = pytest.mark.slow

FOREIGN = ("https://evil.example", "null", "https://127.0.0.1:1", "http://127.0.0.1")


@dataclass
class Apps:
    rpc: RpcServer
    web: WebuiServer
    bob: str


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Apps]:
    with sharing_accounts(tmp_path_factory.mktemp("origin")) as (rpc, web):
        bob = f"bob-{secrets.token_urlsafe(12)}"
        rpc.accounts().add_user("bob", bob, "searcher")
        yield Apps(rpc, web, bob)


def test_api(apps: Apps) -> None:
    rpc = apps.rpc
    login = {"username": "bob", "password": apps.bob}
    with rpc.session() as s:
        for origin in FOREIGN:
            r = s.post(rpc.base + "/login", json=login, headers={"Origin": origin}, timeout=60)
            assert r.status_code == 403, (origin, r.status_code, r.text)
            assert r.headers["Content-Type"].startswith("application/json")
            err = r.json()["error"]
            assert err["code"] == "forbidden" and "cross-origin" in err["message"], err
        assert s.post(rpc.base + "/login", json=login, timeout=60).status_code == 200
        r = s.post(rpc.base + "/login", json=login, headers={"Origin": rpc.url}, timeout=60)
        assert r.status_code == 200, r.text
    admin = rpc.login()
    with rpc.session(admin) as s:
        evil = {"Origin": "https://evil.example"}
        calls = [
            ("POST", "/tokens", {"name": "x"}),
            ("PATCH", "/users/bob", {"disabled": True}),
            ("DELETE", "/users/bob", None),
            ("POST", "/logout", None),
        ]
        for method, path, body in calls:
            r = s.request(method, rpc.base + path, json=body, headers=evil, timeout=60)
            assert r.status_code == 403, (method, path, r.status_code, r.text)
            assert r.json()["error"]["code"] == "forbidden"
        assert s.get(rpc.base + "/users/bob", headers=evil, timeout=60).json()["disabled"] is False
        r = s.post(
            rpc.base + "/tokens", json={"name": "x"}, headers={"Origin": rpc.url}, timeout=60
        )
        assert r.status_code == 201, r.text
        assert s.get(rpc.base + "/me", timeout=60).status_code == 200  # not logged out
    entries, _ = rpc.accounts().audit_entries(action="denied", limit=100)
    assert any("cross-origin" in (e.detail or "") for e in entries), entries


def test_web_ui(apps: Apps) -> None:
    web = apps.web

    def post_login(origin: str | None) -> int:
        with web.session() as s:
            token = csrf_token(s.get(web.url + "/login", timeout=60).text)
            headers = {"Referer": web.url + "/login"}
            if origin is not None:
                headers["Origin"] = origin
            r = s.post(
                web.url + "/login",
                data={"username": "bob", "password": apps.bob, "csrf_token": token},
                headers=headers,
                allow_redirects=False,
                timeout=60,
            )
            if r.status_code == 403:
                assert "Cross-origin POST refused" in r.text and "<html" in r.text.lower(), r.text
            return r.status_code

    for origin in FOREIGN:
        assert post_login(origin) == 403, origin
    assert post_login(web.url) == 302
    assert post_login(None) == 302
    # a signed-in browser: a cross-site logout form is refused, the session lives on
    s = web.login_session("bob", apps.bob)
    token = csrf_token(s.get(web.url + "/password", timeout=60).text)
    r = s.post(
        web.url + "/logout",
        data={"csrf_token": token},
        headers={"Origin": "https://evil.example", "Referer": web.url + "/password"},
        allow_redirects=False,
        timeout=60,
    )
    assert r.status_code == 403, r.status_code
    assert s.get(web.url + "/help/query", allow_redirects=False, timeout=60).status_code == 200
