# The web UI's status dashboard (GET /status, webui/UI.md) through Flask's test client, in front
# of a real logbox-indexd (its status file), a real logbox-searchd over a store built with the
# `logbox` CLI, a live stand-in syslog-ng process and a real accounts store (LMDB): every service
# shows running; the EPS chart (#eps-chart) sums the messages stored per minute over the last hour
# in the logspaces the user may read, its total equals searchd's count over the same hour and its
# axis shows the largest minute; the #logspaces table holds the messages, bytes, days kept and
# retention (desired from the settings file) of the readable logspaces only; #raid says "not on
# RAID"; with no status file, no pid file and no searchd every service shows down (200, never a
# traceback); anonymous callers go to /login; the page reloads itself through a static script.

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from lbtest import apps
from lbtest.apps import rfc3339
from lbtest.cli import Logbox
from lbtest.htmlpage import Node, Page
from lbtest.searchd import Searchd
from logbox_webui import create_app

PASSWORD = "correct horse battery"
BASE = "https://localhost"
NOW = int(time.time())
OLD_S = NOW - 3 * 86400  # 10 messages of main received three days ago
EARLIER_S = NOW - 90 * 60  # 10 messages of main received 90 min ago (outside the chart)
RECENT = {"main": 50, "other": 20, "secret": 5}  # received now (inside the chart's hour)


# ---------------------------------------------------------------- daemons and the app


@pytest.fixture(scope="module")
def appliance(
    tmp_path_factory: pytest.TempPathFactory, store_cli: Path, top: Path, sockdir: Path
) -> Iterator[dict[str, Any]]:
    """A store (main: 10 three days old, 10 from 90 min ago, 50 now; other: 20 now; secret: 5
    now) with indexd, searchd and a stand-in syslog-ng (a live process in a pid file)."""
    base = tmp_path_factory.mktemp("webui_status")
    data = base / "data"
    data.mkdir()
    past = b"".join(
        f"<14>1 {rfc3339(t + i)} h1 app - - - past {i}\n".encode()
        for t in (OLD_S, EARLIER_S)
        for i in range(10)
    )
    apps.ingest_received(store_cli, data, past)
    for ls, n in RECENT.items():
        Logbox(store_cli, data, logspace=ls).ingest(
            b"".join(b"<14>app: now %s %d\n" % (ls.encode(), i) for i in range(n))
        )
    settings = base / "logspaces.json"
    settings.write_text(json.dumps({"version": 1, "logspaces": {"main": {"retention_days": 30}}}))
    with apps.running_services(top, base, data, sockdir / "sd.sock", ["--threads", "2"]) as s:
        yield {
            "base": base,
            "data": data,
            "indexd": s.indexd,
            "searchd": s.searchd,
            "pidfile": s.pidfile,
            "settings": settings,
        }


def make_app(base: Path, **paths: str) -> Flask:
    """A TESTING app with an accounts store under base and the given paths."""
    a = create_app({"ACCOUNTS_PATH": str(base / "accounts"), "TESTING": True, **paths})
    if apps.accounts_of(a).get_user("admin") is None:
        apps.add_users(a)
    return a


@pytest.fixture(scope="module")
def app(appliance: dict[str, Any]) -> Flask:
    return make_app(
        appliance["base"],
        SEARCHD_SOCKET=str(appliance["searchd"].sock),
        DATA_DIR=str(appliance["data"]),
        INDEXD_STATUS=str(appliance["indexd"].status_path),
        SYSLOGNG_PIDFILE=str(appliance["pidfile"]),
        LOGSPACE_SETTINGS=str(appliance["settings"]),
    )


def login(app: Flask, name: str) -> FlaskClient:
    """A client signed in as name (through the login form, with its CSRF token)."""
    c = app.test_client()
    r = c.get("/login", base_url=BASE)
    token = re.search(r'name="csrf_token" value="([^"]+)"', r.text).group(1)
    r = c.post(
        "/login",
        base_url=BASE,
        data={"username": name, "password": PASSWORD, "csrf_token": token},
        headers={"Referer": f"{BASE}/login"},
    )
    assert r.status_code == 302, r.text[:500]
    return c


def dashboard(c: FlaskClient) -> Page:
    r = c.get("/status", base_url=BASE)
    assert r.status_code == 200, r.text[:2000]
    assert "Traceback" not in r.text
    return Page(r.text)


def services(p: Page) -> dict[str, str]:
    return {
        tr.attrs["data-service"]: tr.attrs["data-state"]
        for tr in p.by_id("services").all("tr", "service")
    }


def count(sd: Searchd, ls: str, frm: str, to: str) -> int:
    r = sd.get("/v1/count", {"logspace": ls, "q": "*", "from": frm, "to": to})
    assert r.status == 200, r.body
    return r.json["total"]


# ---------------------------------------------------------------- tests


def test_anonymous_goes_to_login(app: Flask) -> None:
    r = app.test_client().get("/status", base_url=BASE)
    assert r.status_code == 302 and r.headers["Location"].startswith("/login")


def test_everything_running(app: Flask, appliance: dict[str, Any]) -> None:
    appliance["indexd"].wait_ready()
    p = dashboard(login(app, "admin"))
    assert services(p) == {"syslog-ng": "running", "indexd": "running", "searchd": "running"}
    assert p.by_id("raid").text == "not on RAID"
    rows = {tr.attrs["data-logspace"]: tr for tr in p.by_id("logspaces").all("tr", "logspace")}
    assert sorted(rows) == ["main", "other", "secret"]
    assert rows["main"].attrs["data-messages"] == "70"
    assert rows["other"].attrs["data-messages"] == "20"
    assert rows["secret"].attrs["data-messages"] == "5"
    for ls in rows:
        assert int(rows[ls].attrs["data-bytes"]) > 0
    # days kept: from the day of the oldest message to the day of the newest, both counted
    first = dt.datetime.fromtimestamp(OLD_S, dt.UTC).date()
    last = dt.datetime.fromtimestamp(NOW, dt.UTC).date()
    assert rows["main"].attrs["data-days"] == str((last - first).days + 1)
    assert rows["other"].attrs["data-days"] == "1"
    # retention: desired from the settings file (30 days for main, nothing for the others), and
    # what indexd applied (its status file: 0 = forever)
    assert rows["main"].all("td", "retention")[0].text.startswith("30")
    assert rows["other"].all("td", "retention")[0].text == "not set (applied: forever)"


def chart(p: Page) -> tuple[Node, list[Node]]:
    svg = p.by_id("eps-chart")
    assert svg.tag == "svg"
    return svg, svg.all("rect", "bar")


def test_eps_chart_counts_the_last_hour(app: Flask, appliance: dict[str, Any]) -> None:
    svg, bars = chart(dashboard(login(app, "admin")))
    frm, to = svg.attrs["data-from"], svg.attrs["data-to"]
    assert int(to) - int(frm) == 3600 and int(to) % 60 == 0 and int(to) >= NOW
    assert len(bars) == 60
    counts = [int(b.attrs["data-count"]) for b in bars]
    total = int(svg.attrs["data-total"])
    assert total == sum(counts)
    sd = appliance["searchd"]
    assert total == sum(count(sd, ls, frm, to) for ls in ("main", "other", "secret"))
    assert total == sum(RECENT.values())  # the 90 min and 3 day old messages are outside
    # the axis names the largest minute, and that bar is the tallest
    assert svg.attrs["data-max"] == str(max(counts))
    assert p_text(svg, "eps-max") == str(max(counts))
    heights = [float(b.attrs["height"]) for b in bars]
    assert heights[counts.index(max(counts))] == max(heights) > 0
    # each bar starts a minute after the previous one
    froms = [int(b.attrs["data-from"]) for b in bars]
    assert froms == list(range(int(frm), int(to), 60))


def p_text(svg: Node, id: str) -> str:
    return next(n for n in svg.all() if n.attrs.get("id") == id).text


def test_logspaces_filtered_by_rights(app: Flask, appliance: dict[str, Any]) -> None:
    p = dashboard(login(app, "alice"))
    rows = [tr.attrs["data-logspace"] for tr in p.by_id("logspaces").all("tr", "logspace")]
    assert rows == ["main", "other"]
    assert "secret" not in p.by_id("logspaces").text
    svg, _ = chart(p)
    assert int(svg.attrs["data-total"]) == RECENT["main"] + RECENT["other"]
    assert services(p)["searchd"] == "running"


def test_everything_down(appliance: dict[str, Any], tmp_path: Path) -> None:
    app = make_app(
        tmp_path,
        SEARCHD_SOCKET=str(tmp_path / "no.sock"),
        DATA_DIR=str(appliance["data"]),
        INDEXD_STATUS=str(tmp_path / "missing.status.json"),
        SYSLOGNG_PIDFILE=str(tmp_path / "missing.pid"),
        LOGSPACE_SETTINGS=str(tmp_path / "missing.json"),
    )
    p = dashboard(login(app, "admin"))
    assert services(p) == {"syslog-ng": "down", "indexd": "down", "searchd": "down"}
    assert p.by_id("health").text == "degraded"
    assert p.by_id("raid").text == "not on RAID"
    assert p.by_id("logspaces").all("tr", "logspace") == []
    svg, bars = chart(p)
    assert svg.attrs["data-total"] == "0" and len(bars) == 60
    # a garbled status file is "down" too
    (tmp_path / "missing.status.json").write_text("{not json")
    assert services(dashboard(login(app, "admin")))["indexd"] == "down"


def test_refresh_by_static_script_only(app: Flask) -> None:
    c = login(app, "admin")
    r = c.get("/status", base_url=BASE)
    html = r.text
    assert "style=" not in html
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, re.S)
    assert scripts and all("src=" in attrs and body.strip() == "" for attrs, body in scripts)
    assert "/static/js/status.js" in html
    js = c.get("/static/js/status.js", base_url=BASE)
    assert js.status_code == 200 and b"location.reload" in js.data
    assert "Content-Security-Policy" in r.headers


def test_searchd_down_indexd_running(appliance: dict[str, Any], tmp_path: Path) -> None:
    """searchd down: shown down, the logspaces (from indexd's status) stay, their days kept
    from the store's day directories, and the chart is empty."""
    app = make_app(
        tmp_path,
        SEARCHD_SOCKET=str(tmp_path / "no.sock"),
        DATA_DIR=str(appliance["data"]),
        INDEXD_STATUS=str(appliance["indexd"].status_path),
        SYSLOGNG_PIDFILE=str(appliance["pidfile"]),
        LOGSPACE_SETTINGS=str(appliance["settings"]),
    )
    p = dashboard(login(app, "alice"))
    assert services(p) == {"syslog-ng": "running", "indexd": "running", "searchd": "down"}
    rows = {tr.attrs["data-logspace"]: tr for tr in p.by_id("logspaces").all("tr", "logspace")}
    assert sorted(rows) == ["main", "other"]
    first = dt.datetime.fromtimestamp(OLD_S, dt.UTC).date()
    last = dt.datetime.fromtimestamp(NOW, dt.UTC).date()
    assert rows["main"].attrs["data-days"] == str((last - first).days + 1)
    assert rows["main"].attrs["data-messages"] == ""
    svg, _ = chart(p)
    assert svg.attrs["data-total"] == "0"
    assert "searchd is down" in p.root.text


def test_archive_table(appliance: dict[str, Any], tmp_path: Path) -> None:
    """logbox-archive's status file: a row per archived logspace the user may read, with its
    figures; the target and error to admins only; a failing logspace is a problem."""
    state = tmp_path / "archive-state"
    state.mkdir()
    per = {
        "main": {
            "target": "https://s3.example:9000/logs/site1",
            "days_local": 3,
            "days_archived": 40,
            "bytes_archived": 5 * 1024 * 1024,
            "pending": 1,
            "last_upload": {"date": "2026-11-25", "verified": "2026-11-26T00:05:00Z"},
            "failures": 2,
            "ok": False,
            "error": {"time": "2026-11-27T01:00:00Z", "message": "EndpointConnectionError: down"},
        },
        "secret": {"days_archived": 7, "ok": True, "failures": 0},
    }
    (state / "status.json").write_text(json.dumps({"version": 1, "logspaces": per}))
    app = make_app(
        tmp_path,
        SEARCHD_SOCKET=str(appliance["searchd"].sock),
        DATA_DIR=str(appliance["data"]),
        INDEXD_STATUS=str(appliance["indexd"].status_path),
        SYSLOGNG_PIDFILE=str(appliance["pidfile"]),
        LOGSPACE_SETTINGS=str(appliance["settings"]),
        ARCHIVE_STATE=str(state),
    )
    p = dashboard(login(app, "admin"))
    rows = {tr.attrs["data-logspace"]: tr for tr in p.by_id("archive").all("tr", "archive-ls")}
    assert set(rows) == {"main", "secret"}
    main = rows["main"]
    assert main.attrs["data-ok"] == "false" and main.attrs["data-days-archived"] == "40"
    assert "2026-11-25" in main.text and "EndpointConnectionError: down" in main.text
    assert "5.0 MiB" in main.text or "5.2 MB" in main.text or "5 MiB" in main.text, main.text
    assert any("archive: main" in li.text for li in p.by_id("problems").all("li"))
    p = dashboard(login(app, "alice"))
    rows = {tr.attrs["data-logspace"]: tr for tr in p.by_id("archive").all("tr", "archive-ls")}
    assert set(rows) == {"main"}  # not secret
    assert "EndpointConnectionError" not in p.by_id("archive").text
    assert "site1" not in dashboard(login(app, "alice")).root.text
