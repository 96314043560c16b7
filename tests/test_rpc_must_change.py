# Scenario (issue 15, build 7): a generated first password must be changed before the API accepts
# it, through real gunicorn (API and web UI on one accounts store). A user flagged must_change
# (as first boot makes the admin: `add-user --must-change`) gets 403 password_change_required
# from POST /api/v1/login even with the right password, and every call with a token of theirs
# (an API token an admin made) gets the same 403, except POST /logout; the error says where to
# change it. Once they change it in the web UI (/password), the API accepts the new password and
# the token. Locked-out rules still apply: the right password counts as a success.
from __future__ import annotations

import secrets
import subprocess
import sys

import pytest
from lbtest.gunicorn import RPC_DIR
from lbtest.rpc import RpcServer
from lbtest.webui import WebuiServer, csrf_token

pytestmark = pytest.mark.slow


def test_must_change(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("mustchange")
    common = {"searchd_socket": root / "no-searchd.sock", "data": root / "data"}
    (root / "data").mkdir()
    with RpcServer(root / "rpc", **common) as rpc:
        first = secrets.token_urlsafe(12)
        acc = rpc.accounts()
        acc.close()  # the CLI below opens the store in its own process
        subprocess.run(
            [sys.executable, "-m", "logbox_core.accounts", "--path", str(rpc.accounts_path),
             "add-user", "root1", "--role", "admin", "--must-change"],
            input=first + "\n", text=True, check=True, capture_output=True,
            env={"PYTHONPATH": str(RPC_DIR)},
        )  # fmt: skip
        with rpc.session() as s:
            r = s.post(
                rpc.base + "/login", json={"username": "root1", "password": first}, timeout=60
            )
        assert r.status_code == 403, r.text
        err = r.json()["error"]
        assert err["code"] == "password_change_required", err
        assert "/password" in err["message"] and "root1" in err["message"], err
        assert "token" not in r.json()
        admin = rpc.login()
        with rpc.session(admin) as s:
            r = s.post(rpc.base + "/tokens", json={"user": "root1", "name": "ci"}, timeout=60)
            assert r.status_code == 201, r.text
            token = r.json()["token"]
        with rpc.session(token) as s:
            for path in ("/me", "/users", "/audit"):
                r = s.get(rpc.base + path, timeout=60)
                assert r.status_code == 403, (path, r.text)
                assert r.json()["error"]["code"] == "password_change_required"
        # the change, in the web UI (forced at its first sign-in)
        env = {"LOGBOX_ACCOUNTS": str(rpc.accounts_path)}
        with WebuiServer(root / "web", env=env, **common) as web:
            w = web.login_session("root1", first)
            page = w.get(web.url + "/search", timeout=60)
            assert page.url.startswith(web.url + "/password"), page.url
            new = secrets.token_urlsafe(14)
            r = w.post(
                web.url + "/password",
                data={
                    "current": first,
                    "new": new,
                    "new2": new,
                    "csrf_token": csrf_token(page.text),
                },
                headers={"Referer": web.url + "/password"},
                allow_redirects=False,
                timeout=60,
            )
            assert r.status_code == 302, r.text[:500]
        with rpc.session(token) as s:
            assert s.get(rpc.base + "/me", timeout=60).status_code == 200  # an API token stays
        assert rpc.login("root1", new)
        with rpc.session() as s:
            r = s.post(
                rpc.base + "/login", json={"username": "root1", "password": first}, timeout=60
            )
            assert r.status_code == 401
