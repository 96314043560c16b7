"""The RPC API in tests: real gunicorn (the venv's `python -m gunicorn`, PYTHONPATH=rpc,
`-c rpc/gunicorn.conf.py 'logbox_rpc:create_app()'`) serving logbox_rpc over TLS on a free
127.0.0.1 port, with a self-signed certificate made by the openssl CLI and an accounts store
(LMDB) holding an admin user "admin" with a random password. Contract: rpc/API.md."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lbtest.gunicorn import (
    RPC_DIR,
    TOP,
    GunicornServer,
    free_port,
    make_certificate,
    venv_python,
)

if TYPE_CHECKING:
    import requests

__all__ = [
    "RPC_DIR",
    "TOP",
    "RpcServer",
    "free_port",
    "make_certificate",
    "search_pages",
    "venv_python",
]


class RpcServer(GunicornServer):
    """Real gunicorn (python -m gunicorn from the venv, PYTHONPATH=rpc, -c rpc/gunicorn.conf.py
    'logbox_rpc:create_app()') serving logbox_rpc over TLS on a free 127.0.0.1 port."""

    PREFIX = "RPC"
    CONF = RPC_DIR / "gunicorn.conf.py"
    APP = "logbox_rpc:create_app()"
    PYTHONPATH = (RPC_DIR,)
    CONFIG_NAME = "rpc.py"
    LOG_NAME = "gunicorn.log"
    SITE = "rpc"
    HEALTH = "/api/v1/health"
    HEALTH_OK = (200, 503)

    @property
    def base(self) -> str:
        """The API's base URL: https://127.0.0.1:<port>/api/v1."""
        return self.url + "/api/v1"

    def session(self, token: str | None = None, source: str | None = None) -> requests.Session:
        """A requests session trusting the certificate, with Authorization: Bearer token, from
        the local address source (default: the system's choice, 127.0.0.1)."""
        s = super().session(source)
        if token:
            s.headers["Authorization"] = f"Bearer {token}"
        return s

    def login(self, username: str = "admin", password: str | None = None) -> str:
        """POST /login; the session token (asserting success)."""
        with self.session() as s:
            r = s.post(
                self.base + "/login",
                json={"username": username, "password": password or self.admin_password},
                timeout=30,
            )
        assert r.status_code == 200, f"login {username}: {r.status_code} {r.text[:300]}"
        return r.json()["token"]

    def new_searcher(
        self, admin: requests.Session, name: str, logspaces: list[str]
    ) -> requests.Session:
        """Creates the searcher name of logspaces through POST /users on admin's session, with
        a random password (asserting 201); a session signed in as them."""
        password = f"{name}-" + os.urandom(6).hex()
        r = admin.post(
            self.base + "/users",
            json={"name": name, "password": password, "role": "searcher", "logspaces": logspaces},
            timeout=30,
        )
        assert r.status_code == 201, r.text
        return self.session(self.login(name, password))


def search_pages(
    s: requests.Session,
    url: str,
    params: dict[str, Any],
    timeout: float = 60,
    most: int = 100_000,
) -> Iterator[dict[str, Any]]:
    """The bodies of GET url (a logspace's /search) with params, page after page with the
    next_cursor of the one before (asserting 200 each); fails after most pages."""
    cursor: str | None = None
    for page in range(1, most + 1):
        p = params if cursor is None else {**params, "cursor": cursor}
        r = s.get(url, params=p, timeout=timeout)
        assert r.status_code == 200, f"page {page} of {url}: {r.status_code} {r.text[:500]}"
        body = r.json()
        yield body
        cursor = body["next_cursor"]
        if cursor is None:
            return
    raise AssertionError("paging does not end")
