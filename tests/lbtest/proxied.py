"""Both apps behind nginx, mostly without searchd (what these tests ask needs none: accounts, login,
health, static files): the RPC API and the web UI, each under real gunicorn on a unix socket
behind real nginx (lbtest/gunicorn.py). For the proxy's own tests (test_proxy_*.py) each has its
own accounts store, and proxy=False gives bare gunicorn on the ports instead (how the defects
were reproduced); for the login and session tests both share the API's store. Or both over a
real searchd (over_searchd), for the suites that search through both apps."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lbtest.rpc import RpcServer
from lbtest.searchd import Searchd, searchd_binary
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


@contextlib.contextmanager
def sharing_accounts(root: Path) -> Iterator[tuple[RpcServer, WebuiServer]]:
    """The API (root/rpc) and the web UI (root/web) running on one accounts store, the API's
    (rpc.accounts()), as on the appliance; stopped after."""
    common = {"searchd_socket": root / "no-searchd.sock", "data": root / "data"}
    (root / "data").mkdir()
    with RpcServer(root / "rpc", **common) as rpc:
        env = {"LOGBOX_ACCOUNTS": str(rpc.accounts_path)}
        with WebuiServer(root / "web", env=env, **common) as web:
            yield rpc, web


@contextlib.contextmanager
def over_searchd(
    top: Path, root: Path, data: Path, **paths: Any
) -> Iterator[tuple[RpcServer, WebuiServer]]:
    """A real searchd over the store data (root/searchd.sock), and the API (root/rpc) and the
    web UI (root/web) over it, one worker each, with paths (indexd_status=, syslogng_pidfile=)
    passed on; all stopped after."""
    sd = Searchd(searchd_binary(top), data, root / "searchd.sock").start()
    try:
        with (
            RpcServer(root / "rpc", searchd_socket=sd.sock, data=data, workers=1, **paths) as rpc,
            WebuiServer(root / "web", searchd_socket=sd.sock, data=data, workers=1, **paths) as web,
        ):
            yield rpc, web
    finally:
        sd.stop()
