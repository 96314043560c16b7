# Scenario (issue 21, item 1; webui/UI.md "Live tail"): the live view in a real headless
# Chromium, fed by a running local appliance (syslog-ng -> logbox-indexd), through a real
# logbox-searchd and real gunicorn over TLS. From the search page the "Live tail" link opens the
# view with the query and logspace; a message sent to the syslog port after the view went live
# appears as the top row within the bound (generous here; tests/bench/tail_latency.py times it);
# Pause holds new rows aside and says how many, Resume shows them; a burst larger than searchd's
# per-tick limit shows the newest and a visible notice of how many were skipped (rows + skipped
# = sent: nothing is lost silently); the page's CSP holds (no console errors). A user who may
# not read a logspace gets 403 for its view and its event stream.
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from lbtest.appliance import Appliance, octet
from lbtest.searchd import Searchd, searchd_binary
from lbtest.webui import WebuiServer, login, screenshot
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

pytestmark = pytest.mark.slow

BOUND_S = 5.0  # generous against a loaded machine; the feature's bound is 1 s
WORD = "tailprobe"
ROUTES = [{"name": "beta", "host": "^beta-"}]
MAX_ROWS = 150  # the view's bound on rows (TAIL_MAX_ROWS), small here to see it at work


@dataclass
class Stack:
    app: Appliance
    searchd: Searchd
    web: WebuiServer


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("webuitail")
    with Appliance(tmp, routes=ROUTES) as app:
        app.send(octet(b"<14>1 - web-1 app 1 - - before the view"), port="octet")
        app.send(octet(b"<14>1 - beta-1 vault 1 - - beta secret"), port="octet")
        app.wait_count(1, timeout=30)
        app.wait_count(1, logspace="beta", timeout=30)
        sd = Searchd(searchd_binary(top), app.data, app.run / "searchd.sock").start()
        try:
            with WebuiServer(
                tmp / "webui",
                searchd_socket=sd.sock,
                data=app.data,
                indexd_status=app.status_file,
                syslogng_pidfile=app.run / "syslog-ng.pid",
                env={"LOGBOX_TAIL_MAX_ROWS": str(MAX_ROWS)},
            ) as web:
                yield Stack(app, sd, web)
        finally:
            sd.stop()


def send(stack: Stack, *texts: str) -> None:
    stack.app.send(octet(*[f"<14>1 - web-1 app 1 - - {t}".encode() for t in texts]), port="octet")


def rows(driver: WebDriver) -> list[str]:
    """The message cells of the tail table, top (newest) first."""
    # at once, in the page (rows come and go while a test reads them)
    return list(
        driver.execute_script(
            "return Array.from(document.querySelectorAll('#tail-table tbody td.c-msg'))"
            ".map(function (e) { return e.textContent; });"
        )
    )


def wait(driver: WebDriver, cond: Callable[[WebDriver], object], timeout: float = 20) -> None:
    WebDriverWait(driver, timeout, poll_frequency=0.05).until(cond)


def count(d: WebDriver, id_: str) -> int:
    return int(d.find_element(By.ID, id_).text or 0)


def status(driver: WebDriver) -> tuple[str, str]:
    el = driver.find_element(By.ID, "tail-status")
    return el.get_attribute("data-state") or "", el.text


def test_live_view_pause_resume_and_skipped(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    login(driver, web.url, "admin", web.admin_password)
    driver.get(f"{web.url}/search?q={WORD}&logspace=main")
    driver.find_element(By.ID, "live-tail-link").click()
    wait(driver, lambda d: "/tail" in d.current_url)
    assert f"q={WORD}" in driver.current_url and "logspace=main" in driver.current_url
    assert driver.find_element(By.ID, "q").get_attribute("value") == WORD
    wait(driver, lambda d: status(d)[0] == "live")
    assert rows(driver) == []  # only what arrives from now on

    # A message sent to the syslog port appears at the top within the bound.
    t0 = time.monotonic()
    send(stack, f"{WORD} first", "not a match")
    wait(driver, lambda d: rows(d)[:1] == [f"{WORD} first"])
    took = time.monotonic() - t0
    assert took <= BOUND_S, took
    assert driver.find_element(By.ID, "tail-count").text == "1"

    # Pause: new matches are held aside and counted; Resume shows them.
    pause = driver.find_element(By.ID, "tail-pause")
    pause.click()
    assert pause.get_attribute("aria-pressed") == "true" and pause.text == "Resume"
    send(stack, f"{WORD} while paused 1", f"{WORD} while paused 2")
    wait(driver, lambda d: status(d) == ("paused", "Paused: 2 new"))
    assert rows(driver) == [f"{WORD} first"]
    pause.click()
    assert pause.text == "Pause"
    wait(driver, lambda d: len(rows(d)) == 3)
    assert rows(driver) == [f"{WORD} while paused 2", f"{WORD} while paused 1", f"{WORD} first"]
    assert status(driver)[0] == "live"

    # A burst over the per-tick limit (100): the newest are shown, the rest said skipped;
    # rows over the view's bound are removed and counted. Nothing goes without a word.
    skipped_el = driver.find_element(By.ID, "tail-skipped")
    dropped_el = driver.find_element(By.ID, "tail-dropped")
    assert not skipped_el.is_displayed() and not dropped_el.is_displayed()
    # first two batches below the per-tick limit, apart: more rows than the view keeps
    for b in range(2):
        send(stack, *[f"{WORD} batch {b} {i}" for i in range(90)])
        time.sleep(0.8)
    wait(driver, lambda d: rows(d)[:1] == [f"{WORD} batch 1 89"])
    assert len(rows(driver)) == MAX_ROWS
    assert dropped_el.is_displayed()
    assert count(driver, "tail-dropped-count") == 3 + 180 - MAX_ROWS
    assert not skipped_el.is_displayed()
    before = count(driver, "tail-dropped-count") + MAX_ROWS  # rows received so far
    n = 400
    send(stack, *[f"{WORD} burst {i}" for i in range(n)])

    def settled(d: WebDriver) -> bool:
        received = count(d, "tail-dropped-count") + len(rows(d))
        return received - before + count(d, "tail-skipped-count") == n

    wait(driver, settled, timeout=30)
    assert skipped_el.is_displayed()
    assert count(driver, "tail-skipped-count") > 0
    assert len(rows(driver)) <= MAX_ROWS
    assert rows(driver)[0] == f"{WORD} burst {n - 1}"
    screenshot(driver, "webui-tail")
    errors = [
        e for e in driver.get_log("browser") if e.get("level") == "SEVERE" and "tail" in str(e)
    ]
    assert not errors, errors


def test_rights(stack: Stack) -> None:
    web = stack.web
    web.accounts().add_user("mainonly", "mainonly-password-1", "searcher", ["main"])
    with web.login_session("mainonly", "mainonly-password-1") as s:
        for path in (
            f"/tail?q={WORD}&logspace=beta",
            f"/tail/stream?q={WORD}&logspace=beta",
        ):
            r = s.get(web.url + path, timeout=30, allow_redirects=False)
            assert r.status_code == 403, (path, r.status_code, r.text[:300])
        r = s.get(web.url + f"/tail?q={WORD}&logspace=main", timeout=30)
        assert r.status_code == 200
        r = s.get(web.url + "/tail?q=raw%FF&logspace=main", timeout=30)  # not UTF-8
        assert r.status_code == 200 and "q=raw%FF" in r.text
        with s.get(web.url + f"/tail/stream?q={WORD}&logspace=main", stream=True, timeout=30) as r:
            assert r.status_code == 200
            assert r.headers["Content-Type"].startswith("text/event-stream")
            # (X-Accel-Buffering: no is taken by nginx in front, which then does not buffer)
            it = r.iter_lines()
            assert next(it) == b"retry: 3000"
            next(it)
            assert next(it).startswith(b"id: ")
    entries, _ = web.accounts().audit_entries(action="tail", user="mainonly")
    assert [(e.logspace, e.query, e.status) for e in entries] == [("main", WORD, 200)]
    denied, _ = web.accounts().audit_entries(action="denied", user="mainonly")
    assert len(denied) == 2 and all(e.logspace == "beta" for e in denied)
