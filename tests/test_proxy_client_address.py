# Behind nginx, the client address the apps see (request.remote_addr: the login lockout, the audit
# log) is the real peer's, and a client cannot choose it: ten failed logins, each sent with a
# different forged X-Forwarded-For, X-Real-IP and Forwarded, lock the real address out (the
# right password then gets 429) on the API and on the web UI, and every audit entry names
# 127.0.0.1, never a forged address nor "unknown". gunicorn trusts the header only on a unix
# socket: LOGBOX_BEHIND_PROXY=1 on a TCP address, or a unix socket without it, is refused.

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from lbtest.gunicorn import RPC_DIR, venv_python
from lbtest.proxied import both_apps
from lbtest.rpc import RpcServer
from lbtest.webui import WebuiServer, csrf_token

FAILURES = 10  # the lockout's limit from one address (API.md §2)


def forged(i: int) -> dict[str, str]:
    """Headers that claim another client address on each try."""
    ip = f"203.0.113.{i + 1}"
    return {
        "X-Forwarded-For": f"{ip}, 198.51.100.{i + 1}",
        "X-Real-IP": ip,
        "Forwarded": f"for={ip}",
    }


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RpcServer, WebuiServer]]:
    with both_apps(tmp_path_factory.mktemp("proxy-addr")) as pair:
        yield pair


def audited_addresses(srv: RpcServer | WebuiServer) -> set[str | None]:
    entries, _ = srv.accounts().audit_entries(limit=1000)
    return {e.address for e in entries}


def test_api_lockout_sees_the_real_address(apps: tuple[RpcServer, WebuiServer]) -> None:
    rpc, _ = apps
    with rpc.session() as s:
        for i in range(FAILURES):
            r = s.post(
                rpc.base + "/login",
                json={"username": "admin", "password": "wrong password " + str(i)},
                headers=forged(i),
                timeout=30,
            )
            assert r.status_code == 401, r.text
        r = s.post(
            rpc.base + "/login",
            json={"username": "admin", "password": rpc.admin_password},
            headers=forged(99),
            timeout=30,
        )
        assert r.status_code == 429, r.text
        assert r.json()["error"]["code"] == "locked_out"
    assert audited_addresses(rpc) == {"127.0.0.1"}


def test_webui_lockout_sees_the_real_address(apps: tuple[RpcServer, WebuiServer]) -> None:
    _, web = apps
    with web.session() as s:
        token = csrf_token(s.get(web.url + "/login", timeout=30).text)

        def login(password: str, i: int) -> int:
            r = s.post(
                web.url + "/login",
                data={"username": "admin", "password": password, "csrf_token": token},
                headers={"Referer": web.url + "/login", **forged(i)},
                timeout=30,
                allow_redirects=False,
            )
            return r.status_code

        for i in range(FAILURES - 1):
            assert login("wrong password " + str(i), i) in (200, 401)
        # the web UI shows the block with the 10th failure already
        assert login("wrong password", FAILURES - 1) in (200, 401, 429)
        assert login(web.admin_password, 99) == 429
    assert audited_addresses(web) == {"127.0.0.1"}


@pytest.mark.parametrize(
    "bind,behind", [("127.0.0.1:0", "1"), ("unix:{sock}", "")], ids=["tcp+proxy", "unix-alone"]
)
def test_gunicorn_trusts_the_header_only_on_a_unix_socket(
    tmp_path: Path, bind: str, behind: str
) -> None:
    env = {
        "PYTHONPATH": str(RPC_DIR),
        "PATH": "/usr/bin:/bin",
        "LOGBOX_RPC_BIND": bind.format(sock=tmp_path / "rpc.sock"),
        "LOGBOX_BEHIND_PROXY": behind,
        "LOGBOX_TLS_CERT": "/nonexistent",
        "LOGBOX_TLS_KEY": "/nonexistent",
    }
    p = subprocess.run(
        [venv_python(), "-m", "gunicorn", "-c", str(RPC_DIR / "gunicorn.conf.py"), "x:y"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode != 0
    assert "LOGBOX_BEHIND_PROXY=1 goes with a unix socket" in p.stderr, p.stderr
