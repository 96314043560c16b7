# Scenario (issue 15, item 7): a searcher's status shows no pids, paths or other logspaces'
# counts. A store with logspaces main and secret, a real logbox-indexd (its status file), a
# real logbox-searchd, a syslog-ng pid file naming a process that has exited (so that a problem
# names a pid and a path), and real gunicorn serving the API and the web UI. An admin's
# GET /api/v1/status and /status page show both logspaces, the pids, the data directory and
# the problem as it is. A searcher of main alone sees only main, no pid anywhere, no path or
# device name, null for the figures summed over every logspace (eps, stored, malformed, the
# store's bytes), and the problem cut to "syslog-ng: see the status as an admin"; nothing in the
# answer or the page names secret, the data directory or the pid file. A searcher of "*" (who
# may read every logspace) gets the sums back, still without pids or paths.
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lbtest.cli import Logbox
from lbtest.htmlpage import Page
from lbtest.indexd import HeldFifo, Indexd
from lbtest.rpc import RpcServer
from lbtest.searchd import Searchd, searchd_binary
from lbtest.webui import WebuiServer

pytestmark = pytest.mark.slow

PASSWORD = "status-searcher-password"
USERS = {"solo": ["main"], "every": ["*"]}


@dataclass
class Stack:
    root: Path
    data: Path
    pidfile: Path
    dead_pid: int
    indexd_pid: int
    rpc: RpcServer
    web: WebuiServer


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path, logbox_bin: Path) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("statussearcher")
    data = root / "data"
    data.mkdir()
    for ls, n in (("main", 30), ("secret", 7)):
        Logbox(logbox_bin, data, logspace=ls).ingest(
            b"".join(b"<14>app: %s %d\n" % (ls.encode(), i) for i in range(n))
        )
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    pidfile = root / "syslog-ng.pid"
    pidfile.write_text(f"{gone.pid}\n")
    fifo = HeldFifo(root / "indexd.fifo")
    indexd = Indexd(top / "build" / "bin" / "logbox-indexd", data, root / "indexd.status", fifo)
    indexd.start()
    sd = Searchd(searchd_binary(top), data, root / "searchd.sock").start()
    paths: dict[str, Any] = {
        "searchd_socket": sd.sock,
        "data": data,
        "indexd_status": indexd.status_path,
        "syslogng_pidfile": pidfile,
        "workers": 1,
    }
    try:
        with RpcServer(root / "rpc", **paths) as rpc, WebuiServer(root / "web", **paths) as web:
            for server in (rpc, web):
                for name, spaces in USERS.items():
                    server.accounts().add_user(name, PASSWORD, "searcher", spaces)
            assert indexd.proc is not None
            yield Stack(root, data, pidfile, gone.pid, indexd.proc.pid, rpc, web)
    finally:
        sd.stop()
        indexd.stop()
        fifo.close()


def api_status(st: Stack, user: str) -> tuple[dict[str, Any], str]:
    token = st.rpc.login(user, None if user == "admin" else PASSWORD)
    r = st.rpc.session(token).get(st.rpc.base + "/status", timeout=60)
    assert r.status_code == 200, r.text[:300]
    return r.json(), r.text


def pids(doc: Any) -> list[Any]:
    """Every non-null value of a "pid" member, anywhere in doc."""
    if isinstance(doc, dict):
        found = [v for k, v in doc.items() if k == "pid" and v is not None]
        return found + [p for v in doc.values() for p in pids(v)]
    if isinstance(doc, list):
        return [p for v in doc for p in pids(v)]
    return []


def test_admin_sees_everything(stack: Stack) -> None:
    st = stack
    s, _ = api_status(st, "admin")
    assert [ls["name"] for ls in s["logspaces"]] == ["main", "secret"]
    assert s["services"]["indexd"]["pid"] == st.indexd_pid
    assert s["services"]["syslog-ng"] == {"state": "down", "pid": st.dead_pid}
    assert s["disk"]["path"] == str(st.data) and s["disk"]["store_bytes"] > 0
    assert isinstance(s["stored"], int) and s["eps"]["60s"] is not None
    assert any(str(st.pidfile) in p for p in s["problems"]), s["problems"]


def test_searcher_of_one_logspace(stack: Stack) -> None:
    st = stack
    s, text = api_status(st, "solo")
    assert [ls["name"] for ls in s["logspaces"]] == ["main"]
    assert pids(s) == []
    assert {n: v["state"] for n, v in s["services"].items()} == {
        "syslog-ng": "down",
        "indexd": "running",
        "searchd": "running",
    }
    assert s["eps"] == {"1s": None, "60s": None}
    assert s["stored"] is None and s["malformed"] is None
    assert s["disk"]["path"] is None and s["disk"]["store_bytes"] is None
    assert s["disk"]["total_bytes"] > 0 and s["disk"]["free_bytes"] > 0
    assert s["problems"] == ["syslog-ng: see the status as an admin"]
    assert s["health"] == "degraded"
    for secret in ("secret", str(st.root)):
        assert secret not in text, secret


def test_searcher_of_every_logspace(stack: Stack) -> None:
    st = stack
    s, text = api_status(st, "every")
    assert [ls["name"] for ls in s["logspaces"]] == ["main", "secret"]
    assert pids(s) == [] and str(st.root) not in text
    assert isinstance(s["stored"], int) and s["disk"]["store_bytes"] > 0


def web_page(st: Stack, user: str) -> tuple[Page, str]:
    s = st.web.login_session(user, None if user == "admin" else PASSWORD)
    r = s.get(st.web.url + "/status", timeout=60)
    assert r.status_code == 200, r.text[:300]
    return Page(r.text), r.text


def pid_cells(p: Page) -> dict[str, str]:
    return {
        tr.attrs["data-service"]: tr.all("td")[1].text
        for tr in p.by_id("services").all("tr", "service")
    }


def test_web_ui_status_page(stack: Stack) -> None:
    st = stack
    admin, html = web_page(st, "admin")
    assert pid_cells(admin)["indexd"] == str(st.indexd_pid)
    assert pid_cells(admin)["syslog-ng"] == str(st.dead_pid)
    assert str(st.data) in html and "secret" in html
    solo, html = web_page(st, "solo")
    assert set(pid_cells(solo).values()) <= {"–", ""}  # (searchd has no pid member)
    assert [tr.attrs["data-logspace"] for tr in solo.by_id("logspaces").all("tr", "logspace")] == [
        "main"
    ]
    assert solo.by_id("stored").text == "–" and solo.by_id("eps-60s").text == "–"
    assert solo.by_id("problems").text == "syslog-ng: see the status as an admin"
    for secret in ("secret", str(st.root), str(st.pidfile)):
        assert secret not in html, secret
    assert json.dumps(str(st.data))[1:-1] not in html
