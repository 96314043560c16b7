# Scenario (issue 15, item 7): a searcher's status shows no pids, paths or other logspaces'
# counts. A store with logspaces main and secret, a real logbox-indexd (its status file), a
# real logbox-searchd, a syslog-ng pid file naming a process that has exited (so that a problem
# names a pid and a path), and real gunicorn serving the API and the web UI. An admin's
# GET /api/v1/status and /status page show both logspaces, the pids, the data directory and
# the problem as it is. A searcher of main alone sees only main, no pid anywhere, no path or
# device name, null for the figures summed over every logspace (eps, stored, malformed, the
# store's bytes), and the problem cut to "syslog-ng: see the status as an admin"; nothing in the
# answer or the page names secret, the data directory or the pid file. A searcher of "*" (who
# may read every logspace) gets the sums back, still without pids or paths. A hold's reason,
# md RAID device names and texts in disk, which this appliance does not show, are hidden the
# same way (for_user on such a status object).
from __future__ import annotations

import json
import re
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
from lbtest.proxied import over_searchd
from lbtest.rpc import RpcServer
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
    paths = {"indexd_status": indexd.status_path, "syslogng_pidfile": pidfile}
    try:
        with over_searchd(top, root, data, **paths) as (rpc, web):
            for server in (rpc, web):
                for name, spaces in USERS.items():
                    server.accounts().add_user(name, PASSWORD, "searcher", spaces)
            assert indexd.proc is not None
            yield Stack(root, data, pidfile, gone.pid, indexd.proc.pid, rpc, web)
    finally:
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
    assert s["services"]["syslog-ng"] == {"state": "down", "pid": st.dead_pid, "resources": None}
    assert s["services"]["indexd"]["resources"]["source"] == "proc"
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


def cells(p: Page, cls: str) -> dict[str, str]:
    """Each service row's cell of class cls (cpu, memory)."""
    return {
        tr.attrs["data-service"]: tr.all("td", cls)[0].text
        for tr in p.by_id("services").all("tr", "service")
    }


def test_web_ui_status_page(stack: Stack) -> None:
    st = stack
    admin, html = web_page(st, "admin")
    assert pid_cells(admin)["indexd"] == str(st.indexd_pid)
    assert pid_cells(admin)["syslog-ng"] == str(st.dead_pid)
    assert str(st.data) in html and "secret" in html
    # what indexd and searchd use, for the admin; syslog-ng is down: none
    assert re.fullmatch(r"\d+\.\d s", cells(admin, "cpu")["indexd"]), cells(admin, "cpu")
    assert re.fullmatch(r"[\d.]+ [KMG]iB", cells(admin, "memory")["searchd"]), cells(
        admin, "memory"
    )
    assert cells(admin, "cpu")["syslog-ng"] == "–"
    solo, html = web_page(st, "solo")
    assert set(pid_cells(solo).values()) <= {"–", ""}
    assert set(cells(solo, "cpu").values()) == set(cells(solo, "memory").values()) == {"–"}
    assert [tr.attrs["data-logspace"] for tr in solo.by_id("logspaces").all("tr", "logspace")] == [
        "main"
    ]
    assert solo.by_id("stored").text == "–" and solo.by_id("eps-60s").text == "–"
    assert solo.by_id("quarantined").text == "–"
    assert admin.by_id("quarantined").text.startswith("0 (")  # "0 (N in the dead-letter file)"
    assert solo.by_id("problems").text == "syslog-ng: see the status as an admin"
    for secret in ("secret", str(st.root), str(st.pidfile)):
        assert secret not in html, secret
    assert json.dumps(str(st.data))[1:-1] not in html


def test_holds_raid_and_disk_texts_hidden() -> None:
    """What the appliance above does not show (a hold, md RAID, a text in disk) is hidden the
    same way: logbox_core.status.for_user on such a status object."""
    from logbox_core.accounts import User
    from logbox_core.status import for_user

    doc = {
        "time": "2026-11-22T18:00:00.000000Z",
        "health": "degraded",
        "services": {
            "indexd": {"state": "running", "pid": 13, "uptime_s": 5.0, "holding": "logspace "
                       "secret: /var/lib/logbox/secret/2026/11-22/messages: disk full"},
            "searchd": {"state": "running", "pid": 14, "resources": {"source": "cgroup",
                        "cpu_s": 1.5, "rss_bytes": 4096, "io_read_bytes": None,
                        "io_write_bytes": 8, "processes": 1}},
        },
        "eps": {"1s": 1.0, "60s": 2.0},
        "stored": 10,
        "malformed": 0,
        "quarantined": 2,
        "deadletter": {"records": 5, "last_reason": "logspace secret: a message the store "
                       "cannot hold", "last_at": "2026-11-22T17:00:00.000000Z"},
        "logspaces": [{"name": "main", "bytes": 1}, {"name": "secret", "bytes": 2}],
        "disk": {"path": "/var/lib/logbox", "total_bytes": 9, "free_bytes": 1, "full": True,
                 "store_bytes": 3, "note": "/var/lib/logbox is full"},
        "raid": {"device": "md0", "level": "raid1", "state": "degraded", "disks": 2,
                 "active": 1, "progress": None, "read_only": False,
                 "members": [{"device": "sdb1", "number": 0, "state": "in_sync"}]},
        "problems": ["indexd: holding: logspace secret: /var/lib/logbox/secret: disk full",
                     "raid: md0 (raid1) is degraded, 1 of 2 disks active", "raid: again"],
    }  # fmt: skip
    solo = User("solo", "searcher", ("main",), False, 0)
    admin = User("root", "admin", (), False, 0)
    assert for_user(doc, admin) == doc
    s = for_user(doc, solo)
    assert s["services"]["indexd"] == {
        "state": "running", "pid": None, "uptime_s": 5.0, "holding": "see the status as an admin"
    }  # fmt: skip
    assert s["services"]["searchd"] == {"state": "running", "pid": None, "resources": None}
    assert s["disk"] == {"path": None, "total_bytes": 9, "free_bytes": 1, "full": True,
                         "store_bytes": None, "note": None}  # fmt: skip
    assert s["raid"]["device"] is None and s["raid"]["members"] == []
    assert s["raid"]["state"] == "degraded" and s["raid"]["active"] == 1
    assert s["problems"] == [
        "indexd: see the status as an admin",
        "raid: see the status as an admin",
    ]
    assert s["quarantined"] is None
    assert s["deadletter"] == {"records": None, "last_reason": "see the status as an admin",
                               "last_at": "2026-11-22T17:00:00.000000Z"}  # fmt: skip
    every = User("every", "searcher", ("*",), False, 0)
    e = for_user(doc, every)
    assert e["quarantined"] == 2 and e["deadletter"]["records"] == 5
    assert e["deadletter"]["last_reason"] == "see the status as an admin"
    assert "secret" not in json.dumps(s) and "/var" not in json.dumps(s)
    assert doc["services"]["indexd"]["pid"] == 13, "the caller's object is left as it was"
