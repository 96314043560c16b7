"""Both apps behind nginx for the proxy's own tests (test_proxy_*.py): the RPC API and the web UI,
each under real gunicorn on a unix socket behind real nginx (lbtest/gunicorn.py), each with its
own accounts store, and no searchd (what these tests ask needs none: accounts, login, health,
static files). proxy=False gives bare gunicorn on the ports instead (how the defects were
reproduced)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from lbtest.rpc import RpcServer
from lbtest.webui import WebuiServer


@contextlib.contextmanager
def both_apps(root: Path, *, proxy: bool = True) -> Iterator[tuple[RpcServer, WebuiServer]]:
    """The API (root/rpc) and the web UI (root/webui) running, stopped after."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    sock = root / "no-searchd.sock"
    rpc = RpcServer(root / "rpc", searchd_socket=sock, data=data, proxy=proxy)
    web = WebuiServer(root / "webui", searchd_socket=sock, data=data, proxy=proxy)
    with rpc, web:
        yield rpc, web
