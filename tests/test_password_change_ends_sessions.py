# Scenario (issue 15, build 7): changing a password ends that user's API session tokens as well
# as their web sessions, through real gunicorn (API and web UI on one accounts store). bob has
# two API sessions (POST /api/v1/login), an API token an admin made for a script, and two web
# sessions. He changes his password in one web session: the other web session and both API
# sessions end (401 "token revoked"); the web session he used and the admin-made API token go on
# (API tokens are credentials of their own, listed and revoked by admins). An admin setting a
# new password (PATCH /api/v1/users/bob) ends his sessions the same way.
from __future__ import annotations

import secrets

import pytest
from lbtest.proxied import sharing_accounts
from lbtest.rpc import RpcServer
from lbtest.webui import csrf_token

pytestmark = pytest.mark.slow


def status(rpc: RpcServer, token: str) -> int:
    with rpc.session(token) as s:
        return s.get(rpc.base + "/me", timeout=60).status_code


def test_password_change_ends_sessions(tmp_path_factory: pytest.TempPathFactory) -> None:
    with sharing_accounts(tmp_path_factory.mktemp("pwchange")) as (rpc, web):
        pw = secrets.token_urlsafe(12)
        rpc.accounts().add_user("bob", pw, "searcher")
        api_sessions = [rpc.login("bob", pw), rpc.login("bob", pw)]
        admin = rpc.login()
        with rpc.session(admin) as s:
            script = s.post(
                rpc.base + "/tokens", json={"user": "bob", "name": "cron"}, timeout=60
            ).json()["token"]
        here, there = web.login_session("bob", pw), web.login_session("bob", pw)
        assert all(status(rpc, t) == 200 for t in [*api_sessions, script])
        page = here.get(web.url + "/password", timeout=60)
        new = secrets.token_urlsafe(14)
        r = here.post(
            web.url + "/password",
            data={"current": pw, "new": new, "new2": new, "csrf_token": csrf_token(page.text)},
            headers={"Referer": web.url + "/password"},
            allow_redirects=False,
            timeout=60,
        )
        assert r.status_code == 302, r.text[:500]
        for t in api_sessions:
            with rpc.session(t) as s:
                r = s.get(rpc.base + "/me", timeout=60)
            assert r.status_code == 401 and "revoked" in r.json()["error"]["message"], r.text
        assert status(rpc, script) == 200
        assert (
            here.get(web.url + "/help/query", allow_redirects=False, timeout=60).status_code == 200
        )
        r = there.get(web.url + "/help/query", allow_redirects=False, timeout=60)
        assert r.status_code == 302 and "/login" in r.headers["Location"], r.status_code
        # an admin's reset ends them too
        fresh = rpc.login("bob", new)
        with rpc.session(admin) as s:
            r = s.patch(rpc.base + "/users/bob", json={"password": secrets.token_urlsafe(14)},
                        timeout=60)  # fmt: skip
            assert r.status_code == 200, r.text
        assert status(rpc, fresh) == 401
        assert status(rpc, script) == 200
        r = here.get(web.url + "/help/query", allow_redirects=False, timeout=60)
        assert r.status_code == 302, r.status_code
        assert status(rpc, admin) == 200  # other users are not concerned
