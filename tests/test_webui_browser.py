# Scenario (issue 7, webui/UI.md): the web UI in a real headless Chromium, over messages that
# came in through the real collector path (syslog-ng -> logbox-indexd), searched through a real
# logbox-searchd, served by real gunicorn over TLS. The admin signs in, searches (the total
# equals `logbox search --count`, the histogram has bars), zooms by clicking a bar, pages (no
# row twice, newest first), turns the order around, opens a message, refines by a top host,
# exports CSV (as many rows as the total) and signs out. The admin creates a user who may read
# only the logspace "main": that user sees only "main" and gets 403 for "beta"'s search and
# messages. The search runs from the keyboard alone. The integrity page, reached from the
# dashboard, shows the day table of a real `logbox verify --json --out` report of the store for
# each logspace chosen in its selector. Screenshots of the search page, the dashboard and the
# integrity page are saved under tests/artifacts/ (also when a step fails). Issue 21's search
# page: an empty query shows the newest messages; times in the browser's zone (Chromium's zone
# set through CDP) and in UTC with the toggle; the histogram's count axis; paging back; the
# column chooser with a structured-data field; a long program name whole; the raw line on the
# message page; the dashboard's chart as wide as its card.
from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from lbtest.appliance import Appliance, octet
from lbtest.cli import Logbox, Searcher
from lbtest.searchd import Searchd, searchd_binary
from lbtest.webui import (
    WebuiServer,
    cookies_session,
    login,
    screenshot,
)
from selenium.common.exceptions import NoSuchElementException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

pytestmark = pytest.mark.slow

WORD = "webprobe"
BATCHES = 3
PER_BATCH = 25  # in main: 15 from web-1, 5 from web-2, 5 from web-3
BETA_PER_BATCH = 5
PAGE = 20
ROUTES = [{"name": "beta", "host": "^beta-"}]
LONG_PROGRAM = "a-program-name-long-enough-to-be-cut-in-a-column"  # 48 bytes: RFC 5424's most
SD_FRAME = (
    f'<14>1 2026-11-22T12:00:00Z sdhost {LONG_PROGRAM} 77 ID1 [eps@32473 c="4242"] sdprobe body'
)


@dataclass
class Stack:
    """The appliance, searchd on its store, the web UI, and the CLI to compare with."""

    app: Appliance
    searchd: Searchd
    web: WebuiServer
    main: Searcher
    beta: Searcher
    report: Path  # the web UI's INTEGRITY_REPORT (absent until a test runs verify)


def host_of(i: int) -> str:
    """The host of the i-th main message of a batch."""
    return ("web-1", "web-1", "web-1", "web-2", "web-3")[i % 5]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path) -> Iterator[Stack]:
    """Messages sent to syslog-ng's octet-counted port in three batches a little over a second
    apart (so that a narrow histogram has several bars), stored by indexd, searched through a
    real searchd, shown by the web UI."""
    tmp = tmp_path_factory.mktemp("webui")
    with Appliance(tmp, routes=ROUTES) as app:
        n = 0
        for b in range(BATCHES):
            frames = []
            for i in range(PER_BATCH):
                n += 1
                frames.append(
                    f"<14>1 2026-11-22T12:00:00Z {host_of(i)} app{i % 2} {1000 + n} - - "
                    f"{WORD} batch {b} number {n} status=ok".encode()
                )
            for i in range(BETA_PER_BATCH):
                frames.append(
                    f"<14>1 2026-11-22T12:00:00Z beta-1 vault 7 - - {WORD} betasecret "
                    f"batch {b} item {i}".encode()
                )
            app.send(octet(*frames), port="octet")
            app.wait_count((b + 1) * PER_BATCH, timeout=30)
            app.wait_count((b + 1) * BETA_PER_BATCH, logspace="beta", timeout=30)
            if b + 1 < BATCHES:
                time.sleep(1.2)
        # One more in main, after the batches: the newest message, not matching WORD.
        app.send(octet(SD_FRAME.encode()), port="octet")
        app.wait_count(BATCHES * PER_BATCH + 1, timeout=30)
        sd = Searchd(searchd_binary(top), app.data, app.run / "searchd.sock").start()
        try:
            with WebuiServer(
                tmp / "webui",
                searchd_socket=sd.sock,
                data=app.data,
                indexd_status=app.status_file,
                syslogng_pidfile=app.run / "syslog-ng.pid",
                env={"LOGBOX_INTEGRITY_REPORT": str(tmp / "integrity.json")},
            ) as web:
                lb = Path(top / "build" / "bin" / "logbox")
                yield Stack(
                    app,
                    sd,
                    web,
                    Searcher(Logbox(lb, app.data, "main"), socket=sd.sock),
                    Searcher(Logbox(lb, app.data, "beta"), socket=sd.sock),
                    tmp / "integrity.json",
                )
        finally:
            sd.stop()


# ---------------------------------------------------------------- reading pages


def params(driver: WebDriver) -> dict[str, str]:
    """The current URL's query parameters (the last value of each)."""
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(driver.current_url).query))


def total(driver: WebDriver) -> int:
    """#total's number (asserting that its text and data-total agree)."""
    el = driver.find_element(By.ID, "total")
    text = el.text.strip()
    assert re.fullmatch(r"\d+", text), f"#total holds {text!r}, not digits only"
    assert el.get_attribute("data-total") == text, (el.get_attribute("data-total"), text)
    return int(text)


def rows(driver: WebDriver) -> list[WebElement]:
    """The result rows (tr.hit) of #results."""
    return driver.find_elements(By.CSS_SELECTOR, "#results tr.hit")


def row_id(row: WebElement) -> int:
    """A result row's data-id."""
    v = row.get_attribute("data-id")
    assert v and v.isdigit(), f"tr.hit data-id={v!r}"
    return int(v)


def cells(row: WebElement) -> list[str]:
    """A result row's cell texts: received, host, program, severity, message."""
    return [td.text for td in row.find_elements(By.TAG_NAME, "td")]


def received(row: WebElement) -> str:
    """A row's receive time: a <time datetime> in it when there is one, else the first cell."""
    for t in row.find_elements(By.CSS_SELECTOR, "time[datetime]"):
        return t.get_attribute("datetime") or ""
    return cells(row)[0]


def wait_url(driver: WebDriver, old: str, timeout: float = 30) -> None:
    """Waits until the browser is on another URL than old, with the page loaded."""
    WebDriverWait(driver, timeout).until(
        lambda d: d.current_url != old
        and d.execute_script("return document.readyState") == "complete"
    )


def click_and_wait(driver: WebDriver, el: WebElement) -> None:
    """Clicks el (a link or button that loads another page) and waits for it."""
    old = driver.current_url
    el.click()
    wait_url(driver, old)


def open_search(driver: WebDriver, base: str, **q: str | int) -> None:
    """GET /search with the given parameters."""
    driver.get(base + "/search?" + urllib.parse.urlencode({k: str(v) for k, v in q.items()}))


def row_link(row: WebElement) -> WebElement:
    """The link of a result row to its message (an <a> to /messages/ in it, else the row)."""
    for a in row.find_elements(By.CSS_SELECTOR, "a[href*='/messages/']"):
        return a
    return row


def logout(driver: WebDriver) -> None:
    """Submits the sign-out form (POST /logout)."""
    form = driver.find_element(By.CSS_SELECTOR, "form[action$='/logout']")
    old = driver.current_url
    button = form.find_element(By.CSS_SELECTOR, "button, input[type=submit]")
    menu = driver.find_elements(
        By.XPATH, "//details[.//form[contains(@action, '/logout')]][not(@open)]/summary"
    )
    if menu:  # in a closed menu (<details>): open it as a user would
        menu[0].click()
    button.click()
    WebDriverWait(driver, 30).until(lambda d: d.current_url != old or "/login" in d.current_url)


def change_password_if_asked(driver: WebDriver, current: str, new: str) -> bool:
    """Fills the forced password change (/password) when the app sent the browser there;
    returns whether it did."""
    if "/password" not in urllib.parse.urlsplit(driver.current_url).path:
        return False
    driver.find_element(By.NAME, "current").send_keys(current)
    driver.find_element(By.NAME, "new").send_keys(new)
    driver.find_element(By.NAME, "new2").send_keys(new)
    old = driver.current_url
    driver.find_element(By.CSS_SELECTOR, "#password-form [type=submit]").click()
    wait_url(driver, old)
    assert "/password" not in urllib.parse.urlsplit(driver.current_url).path, driver.page_source
    return True


# ---------------------------------------------------------------- the search flow


def test_search_zoom_page_open_refine_export_logout(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    main_total = BATCHES * PER_BATCH
    assert stack.main.count(WORD) == main_total
    login(driver, web.url, "admin", web.admin_password)
    assert urllib.parse.urlsplit(driver.current_url).path == "/search", driver.current_url
    (cookie,) = (c for c in driver.get_cookies() if c["name"] == "logbox_session")
    assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Strict", cookie

    # A search typed into the box, in the logspace main, over the last hour.
    Select(driver.find_element(By.ID, "logspace")).select_by_value("main")
    q = driver.find_element(By.ID, "q")
    q.clear()
    q.send_keys(WORD)
    click_and_wait(driver, driver.find_element(By.ID, "search-submit"))
    assert params(driver).get("q") == WORD
    preset = driver.find_element(By.CSS_SELECTOR, ".preset[data-range='1h']")
    click_and_wait(driver, preset)
    p = params(driver)
    assert p.get("q") == WORD and p.get("logspace", "main") == "main", driver.current_url
    before = total(driver)
    assert before == main_total == stack.main.count(WORD)
    bars = driver.find_elements(By.CSS_SELECTOR, "#histogram a.bar")
    assert bars, "no bars in #histogram"
    assert sum(int(b.get_attribute("data-count") or 0) for b in bars) == before
    screenshot(driver, "webui-search")

    # Zoom: click the fullest bar.
    bar = max(bars, key=lambda b: int(b.get_attribute("data-count") or 0))
    want = int(bar.get_attribute("data-count") or 0)
    assert want > 0
    click_and_wait(driver, bar)
    zoomed = params(driver)
    assert (zoomed.get("from"), zoomed.get("to")) != (p.get("from"), p.get("to"))
    assert zoomed.get("q") == WORD
    after = total(driver)
    assert after == want <= before
    assert after == stack.main.count(WORD, from_=zoomed["from"], to=zoomed["to"])
    zbars = driver.find_elements(By.CSS_SELECTOR, "#histogram a.bar")
    assert sum(int(b.get_attribute("data-count") or 0) for b in zbars) == after
    if after == before:  # the three batches, 1.2 s apart, in 1 s buckets now
        assert len([b for b in zbars if int(b.get_attribute("data-count") or 0)]) >= 2

    # Paging over the whole hour, PAGE rows at a time: every message once, newest first.
    open_search(driver, web.url, q=WORD, logspace="main", limit=PAGE, **range_of(p))
    assert total(driver) == main_total
    seen: list[int] = []
    times: list[str] = []
    pages = 0
    while True:
        pages += 1
        rs = rows(driver)
        assert 0 < len(rs) <= PAGE
        seen += [row_id(r) for r in rs]
        times += [received(r) for r in rs]
        nxt = driver.find_elements(By.ID, "next-page")
        if not nxt:
            break
        assert pages < 20, "paging does not end"
        click_and_wait(driver, nxt[0])
        assert params(driver).get("q") == WORD
    assert len(seen) == len(set(seen)) == main_total, seen
    assert seen == sorted(seen, reverse=True), seen
    assert times == sorted(times, reverse=True), times
    assert pages == -(-main_total // PAGE)
    first = driver.find_element(By.ID, "first-page")
    click_and_wait(driver, first)
    assert [row_id(r) for r in rows(driver)] == seen[:PAGE]

    # Oldest first.
    click_and_wait(driver, driver.find_element(By.ID, "order-toggle"))
    assert params(driver).get("order") == "oldest"
    ids = [row_id(r) for r in rows(driver)]
    assert ids == sorted(seen)[: len(ids)], ids
    assert total(driver) == main_total

    # One message.
    hit = rows(driver)[0]
    hit_id = row_id(hit)
    click_and_wait(driver, row_link(hit))
    assert urllib.parse.urlsplit(driver.current_url).path == f"/messages/main/{hit_id}"
    msg = driver.find_element(By.ID, "message")
    assert WORD in msg.text and msg.find_elements(By.TAG_NAME, "dl")
    assert driver.find_element(By.ID, "raw").text.strip()
    (stored,) = (m for m in stack.app.messages("main") if m["id"] == hit_id)
    assert stored["message"] in msg.text

    # Refine by the top host.
    open_search(driver, web.url, q=WORD, logspace="main", **range_of(p))
    top = driver.find_elements(By.CSS_SELECTOR, "#top-hosts a.top-value")
    assert top, "no values in #top-hosts"
    assert "web-1" in top[0].text, [t.text for t in top]
    click_and_wait(driver, top[0])
    refined = params(driver)
    assert "host:web-1" in refined.get("q", ""), refined
    n_host = BATCHES * 15
    assert total(driver) == n_host == stack.main.count(refined["q"])
    hosts = {cells(r)[1] for r in rows(driver)}
    assert hosts == {"web-1"}, hosts

    # Export what is shown, as CSV, with the browser's cookies.
    link = driver.find_element(By.ID, "export-csv")
    href = link.get_attribute("href") or ""
    eq = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(href).query))
    assert eq.get("q") == refined["q"] and eq.get("format") == "csv", href
    with cookies_session(driver, web) as s:
        r = s.get(href, timeout=60)
        assert r.status_code == 200, r.text[:300]
        assert "csv" in r.headers.get("Content-Type", "")
        assert "attachment" in r.headers.get("Content-Disposition", "")
        table = list(csv.reader(io.StringIO(r.content.decode("utf-8"))))
        assert len(table) - 1 == total(driver), table[:3]
        nd = driver.find_element(By.ID, "export-ndjson").get_attribute("href") or ""
        r = s.get(nd, timeout=60)
        assert r.status_code == 200
        lines = [json.loads(x) for x in r.content.splitlines() if x.strip()]
        assert len(lines) == n_host and {x["host"] for x in lines} == {"web-1"}

    # Sign out: the search sends the browser to the login page again.
    logout(driver)
    driver.get(web.url + "/search?q=" + WORD)
    assert urllib.parse.urlsplit(driver.current_url).path == "/login", driver.current_url
    assert driver.find_elements(By.ID, "login")


def range_of(p: dict[str, str]) -> dict[str, str]:
    """The from/to parameters of a search URL's parameters (those present)."""
    return {k: p[k] for k in ("from", "to") if k in p}


def test_drag_across_bars_zooms(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    got = [m["received"] for m in stack.app.messages("main")]
    first = datetime.fromisoformat(min(got).replace("Z", "+00:00")) - timedelta(seconds=2)
    last = datetime.fromisoformat(max(got).replace("Z", "+00:00")) + timedelta(seconds=3)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    login(driver, web.url, "admin", web.admin_password)
    open_search(
        driver,
        web.url,
        q=WORD,
        logspace="main",
        **{"from": first.strftime(fmt), "to": last.strftime(fmt)},
    )
    assert total(driver) == BATCHES * PER_BATCH
    bars = driver.find_elements(By.CSS_SELECTOR, "#histogram a.bar")
    counts = [int(b.get_attribute("data-count") or 0) for b in bars]
    full = [i for i, c in enumerate(counts) if c]
    assert len(full) >= 2, counts  # three batches 1.2 s apart, 1 s bars
    lo, hi = full[0], full[-2]  # not the last batch: the zoom must leave it out
    want = (bars[lo].get_attribute("data-from"), bars[hi].get_attribute("data-to"))
    old = driver.current_url
    ActionChains(driver).click_and_hold(bars[lo]).pause(0.1).move_to_element(
        bars[(lo + hi) // 2]
    ).pause(0.1).move_to_element(bars[hi]).pause(0.1).release().perform()
    wait_url(driver, old)
    p = params(driver)
    assert (p.get("from"), p.get("to")) == want, driver.current_url
    assert total(driver) == sum(counts[lo : hi + 1]) < BATCHES * PER_BATCH
    assert p.get("q") == WORD


def test_search_from_the_keyboard(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    login(driver, web.url, "admin", web.admin_password)
    open_search(driver, web.url, logspace="main")
    # Out of the query box (its autofocus) without clicking: the page under a click is results.
    driver.execute_script("document.activeElement.blur()")
    ActionChains(driver).send_keys("/").perform()
    WebDriverWait(driver, 5).until(
        lambda d: d.execute_script("return document.activeElement.id") == "q"
    )
    active = driver.switch_to.active_element
    active.send_keys(Keys.CONTROL, "a")
    active.send_keys(f"{WORD} host:web-2")
    old = driver.current_url
    active.send_keys(Keys.ENTER)
    wait_url(driver, old)
    assert params(driver).get("q") == f"{WORD} host:web-2"
    assert total(driver) == BATCHES * 5 == stack.main.count(f"{WORD} host:web-2")


# ---------------------------------------------------------------- the dashboard


def test_status_dashboard(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    try:
        login(driver, web.url, "admin", web.admin_password)
        driver.get(web.url + "/status")
        for id_ in ("eps-chart", "services", "raid", "logspaces"):
            assert driver.find_elements(By.ID, id_), f"no #{id_} on /status"
        assert driver.find_element(By.ID, "eps-chart").tag_name.lower() == "svg"
        table = driver.find_element(By.ID, "logspaces").text
        for name in ("main", "beta"):
            assert name in table, table
        services = driver.find_element(By.ID, "services").text
        assert "searchd" in services and "indexd" in services, services
        assert "down" not in services.lower(), services  # all three run
    finally:
        with contextlib.suppress(Exception):
            screenshot(driver, "webui-status")


def test_integrity_page(stack: Stack, driver: WebDriver, top: Path) -> None:
    web = stack.web
    p = subprocess.run(
        [str(top / "build" / "bin" / "logbox"), "verify", "--data", str(stack.app.data)]
        + ["--integrity", "--json", "--out", str(stack.report)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    want = {e["logspace"]: e for e in json.loads(stack.report.read_text())["logspaces"]}
    try:
        login(driver, web.url, "admin", web.admin_password)
        driver.get(web.url + "/status")
        click_and_wait(driver, driver.find_element(By.ID, "status-integrity"))
        # main: the batches and SD_FRAME
        for logspace, n in (("main", BATCHES * PER_BATCH + 1), ("beta", BATCHES * BETA_PER_BATCH)):
            if logspace != "main":
                Select(driver.find_element(By.ID, "integrity-logspace")).select_by_value(logspace)
                click_and_wait(driver, driver.find_element(By.ID, "integrity-select-submit"))
            assert params(driver).get("logspace", "main") == logspace
            days = driver.find_elements(By.CSS_SELECTOR, "#integrity-days tr.day")
            assert days, driver.find_element(By.ID, "main").text[:1000]
            assert all(d.get_attribute("data-intact") == "yes" for d in days)
            counts = [d.find_element(By.CSS_SELECTOR, "td.messages").text for d in days]
            assert counts == [str(d["messages"]) for d in want[logspace]["days"]], counts
            assert driver.find_element(By.ID, "integrity-messages").text == str(n)
            assert driver.find_element(By.ID, "integrity-ok").text == "intact"
    finally:
        with contextlib.suppress(Exception):
            screenshot(driver, "webui-integrity")


# ---------------------------------------------------------------- rights per logspace


def fill_user_create(driver: WebDriver, name: str, password: str, logspace: str) -> None:
    """Fills and submits #user-create: a searcher who may read logspace only."""
    form = driver.find_element(By.ID, "user-create")
    form.find_element(By.NAME, "name").send_keys(name)
    for el in form.find_elements(
        By.CSS_SELECTOR, "input[name='password'], input[name='password2']"
    ):
        el.send_keys(password)
    with contextlib.suppress(NoSuchElementException):
        role = form.find_element(By.NAME, "role")
        if role.tag_name.lower() == "select":
            Select(role).select_by_value("searcher")
        else:
            form.find_element(By.CSS_SELECTOR, "input[name='role'][value='searcher']").click()
    spaces = form.find_elements(By.NAME, "logspaces")
    assert spaces, "#user-create has no logspaces field"
    if spaces[0].tag_name.lower() == "select":
        sel = Select(spaces[0])
        if sel.is_multiple:
            sel.deselect_all()
        sel.select_by_value(logspace)
    elif (spaces[0].get_attribute("type") or "").lower() in ("checkbox", "radio"):
        for box in spaces:
            if box.is_selected() != (box.get_attribute("value") == logspace):
                box.click()
    else:
        spaces[0].clear()
        spaces[0].send_keys(logspace)
    old = driver.current_url
    form.find_element(By.CSS_SELECTOR, "button[type=submit], input[type=submit]").click()
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
        and (d.current_url != old or d.find_elements(By.CSS_SELECTOR, ".flash"))
    )


def test_user_reads_only_its_logspace(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    name = f"reader{int(time.time() * 1000) % 100000}"
    password = "reader-password-1234"
    new_password = "reader-password-5678"
    beta_id = stack.app.messages("beta")[0]["id"]
    login(driver, web.url, "admin", web.admin_password)
    driver.get(web.url + "/admin/users")
    fill_user_create(driver, name, password, "main")
    user = web.accounts().get_user(name)
    assert user is not None, driver.page_source[:2000]
    assert user.role == "searcher" and list(user.logspaces) == ["main"], user
    assert name in driver.page_source
    logout(driver)

    login(driver, web.url, name, password)
    if change_password_if_asked(driver, password, new_password):
        password = new_password
    open_search(driver, web.url, q=WORD)
    options = [
        o.get_attribute("value") for o in Select(driver.find_element(By.ID, "logspace")).options
    ]
    assert options == ["main"], options
    assert total(driver) == BATCHES * PER_BATCH
    assert "betasecret" not in driver.page_source

    with cookies_session(driver, web) as s:
        for path in (
            f"/messages/beta/{beta_id}",
            f"/search?q={WORD}&logspace=beta",
            f"/export?q={WORD}&logspace=beta&format=csv",
        ):
            r = s.get(web.url + path, timeout=30, allow_redirects=False)
            assert r.status_code == 403, (path, r.status_code, r.text[:300])
            assert "betasecret" not in r.text
        r = s.get(web.url + "/admin/users", timeout=30, allow_redirects=False)
        assert r.status_code == 403, r.status_code
    driver.get(web.url + f"/messages/beta/{beta_id}")
    assert "403" in driver.page_source and "betasecret" not in driver.page_source
    assert not driver.find_elements(By.ID, "message")
    # The admin sees beta's message.
    logout(driver)
    login(driver, web.url, "admin", web.admin_password)
    driver.get(web.url + f"/messages/beta/{beta_id}")
    assert "betasecret" in driver.find_element(By.ID, "message").text


# ---------------------------------------------------------------- issue 21: the search page


def sd_message(stack: Stack) -> dict:
    """The message of SD_FRAME as stored."""
    (m,) = (m for m in stack.app.messages("main") if m["program"] == LONG_PROGRAM)
    return m


def test_empty_query_shows_the_newest(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    login(driver, web.url, "admin", web.admin_password)
    open_search(driver, web.url, logspace="main")
    newest = max(m["id"] for m in stack.app.messages("main"))
    ids = [row_id(r) for r in rows(driver)]
    assert ids and ids[0] == newest == sd_message(stack)["id"], ids
    assert ids == sorted(ids, reverse=True)
    assert total(driver) == len(stack.app.messages("main"))
    assert driver.find_element(By.ID, "q").get_attribute("value") == ""
    click_and_wait(driver, driver.find_element(By.ID, "search-submit"))
    assert params(driver).get("q", "") == ""  # the box stays empty in the URL
    assert [row_id(r) for r in rows(driver)][0] == newest


def shown_time(row: WebElement) -> str:
    """The text of a row's receive time."""
    return row.find_element(By.CSS_SELECTOR, "td.c-time time").text


def test_times_in_the_browsers_zone_and_utc(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    zone = "Asia/Kathmandu"  # +05:45 all year: no daylight saving to reason about
    driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": zone})
    login(driver, web.url, "admin", web.admin_password)
    open_search(driver, web.url, q=WORD, logspace="main", **{"from": "-1h"})
    fmt = "%Y-%m-%d %H:%M:%S.%f"

    def want(row: WebElement, offset: timedelta) -> str:
        (m,) = (m for m in stack.app.messages("main") if m["id"] == row_id(row))
        utc = datetime.fromisoformat(m["received"].replace("Z", "+00:00"))
        return (utc + offset).strftime(fmt)[:23]

    kathmandu = timedelta(hours=5, minutes=45)
    row = rows(driver)[0]
    assert shown_time(row) == want(row, kathmandu)
    # The zone's name as the browser spells it (ICU: Asia/Katmandu).
    named = driver.execute_script("return Intl.DateTimeFormat().resolvedOptions().timeZone")
    assert named in (zone, "Asia/Katmandu")
    assert driver.find_element(By.CSS_SELECTOR, "#results th.c-time .tz-name").text == named
    assert received(row).startswith(want(row, timedelta()).replace(" ", "T"))  # UTC there
    # The toggle: UTC, kept in the URL while paging, and back.
    click_and_wait(driver, driver.find_element(By.ID, "tz-toggle"))
    assert params(driver).get("tz") == "utc"
    row = rows(driver)[0]
    assert shown_time(row) == want(row, timedelta())
    assert driver.find_element(By.CSS_SELECTOR, "#results th.c-time .tz-name").text == "UTC"
    nxt = driver.find_elements(By.ID, "next-page")
    if nxt:
        click_and_wait(driver, nxt[0])
        assert params(driver).get("tz") == "utc"
    click_and_wait(driver, driver.find_element(By.ID, "tz-toggle"))
    assert "tz" not in params(driver)
    row = rows(driver)[0]
    assert shown_time(row) == want(row, kathmandu)


def test_histogram_axis_and_counts(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    login(driver, web.url, "admin", web.admin_password)
    open_search(driver, web.url, q=WORD, logspace="main", **{"from": "-1h"})
    counts = [
        int(b.get_attribute("data-count") or 0)
        for b in driver.find_elements(By.CSS_SELECTOR, "#histogram a.bar")
    ]
    assert sum(counts) == total(driver) == BATCHES * PER_BATCH
    axis = driver.find_element(By.ID, "histogram-y-axis")
    assert axis.is_displayed()
    ticks = axis.find_elements(By.CSS_SELECTOR, "text.y-tick")
    values = [int(t.get_attribute("data-value") or -1) for t in ticks]
    assert values[0] == 0 and values == sorted(values)
    assert int(axis.get_attribute("data-max") or 0) == values[-1] >= max(counts)
    assert all(t.text for t in ticks)  # labelled
    # Each bar's count in its tooltip (<title>).
    titles = driver.execute_script(
        "return Array.from(document.querySelectorAll('#histogram a.bar title'),"
        " t => t.textContent)"
    )
    assert [int(t.rsplit(": ", 1)[1]) for t in titles] == counts
    # The axis stands beside the bars, as tall.
    box = driver.execute_script(
        "const a = document.getElementById('histogram-y-axis').getBoundingClientRect();"
        "const h = document.getElementById('histogram').getBoundingClientRect();"
        "return [a.top, a.height, a.right, h.top, h.height, h.left];"
    )
    assert abs(box[0] - box[3]) < 1 and abs(box[1] - box[4]) < 1 and box[2] <= box[5] + 1


def test_previous_page(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    login(driver, web.url, "admin", web.admin_password)
    open_search(driver, web.url, q=WORD, logspace="main", limit=PAGE, **{"from": "-1h"})
    assert not driver.find_elements(By.ID, "first-page")  # on the first page
    assert not driver.find_elements(By.ID, "prev-page")
    pages = [[row_id(r) for r in rows(driver)]]
    for _ in range(2):
        click_and_wait(driver, driver.find_element(By.ID, "next-page"))
        pages.append([row_id(r) for r in rows(driver)])
    assert len({i for p in pages for i in p}) == 3 * PAGE
    click_and_wait(driver, driver.find_element(By.ID, "prev-page"))
    assert [row_id(r) for r in rows(driver)] == pages[1]
    assert driver.find_element(By.ID, "page-number").get_attribute("data-page") == "2"
    click_and_wait(driver, driver.find_element(By.ID, "first-page"))
    assert [row_id(r) for r in rows(driver)] == pages[0]
    assert not driver.find_elements(By.ID, "first-page")


def test_columns_and_long_program(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    login(driver, web.url, "admin", web.admin_password)
    open_search(driver, web.url, q="sdprobe", logspace="main", **{"from": "-1h"})
    (row,) = rows(driver)
    # The program name whole: all its text, none of it clipped.
    prog = row.find_element(By.CSS_SELECTOR, "td.c-prog")
    assert prog.text.replace("\n", "") == LONG_PROGRAM
    clipped = driver.execute_script(
        "const td = arguments[0]; return td.scrollWidth > td.clientWidth + 1", prog
    )
    assert not clipped
    # The chooser: facility and peer on, host off, a structured-data field.
    driver.find_element(By.CSS_SELECTOR, "#column-chooser summary").click()
    form = driver.find_element(By.ID, "columns-form")
    for name in ("facility", "peer", "host"):
        form.find_element(By.CSS_SELECTOR, f"input[name='cols'][value='{name}']").click()
    form.find_element(By.ID, "cols-sd").send_keys("eps@32473.c")
    click_and_wait(driver, driver.find_element(By.ID, "columns-submit"))
    assert params(driver).get("q") == "sdprobe"
    cols = "time,program,severity,facility,peer,eps@32473.c,message"
    heads = [
        th.get_attribute("data-col")
        for th in driver.find_elements(By.CSS_SELECTOR, "#results thead th")
    ]
    assert heads == cols.split(","), heads
    (row,) = rows(driver)
    cell = {td.get_attribute("data-col"): td.text for td in row.find_elements(By.TAG_NAME, "td")}
    m = sd_message(stack)
    assert cell["eps@32473.c"] == "4242"
    assert cell["facility"] == "user" and cell["peer"] == m["peer"] != ""
    # Kept in the URL (one cols=) when searching again.
    q = driver.find_element(By.ID, "q")
    q.clear()
    q.send_keys("sdprobe OR nothing")
    click_and_wait(driver, driver.find_element(By.ID, "search-submit"))
    assert params(driver).get("cols") == cols


def test_message_page_raw_line(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    m = sd_message(stack)
    login(driver, web.url, "admin", web.admin_password)
    driver.get(web.url + f"/messages/main/{m['id']}")
    line = driver.find_element(By.ID, "raw-line").text
    assert line == SD_FRAME.replace("2026-11-22T12:00:00Z", m["timestamp"]), line


def test_status_chart_fills_its_card(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    login(driver, web.url, "admin", web.admin_password)
    for width in (1280, 1900):
        driver.set_window_size(width, 900)
        driver.get(web.url + "/status")
        got = driver.execute_script(
            "const svg = document.getElementById('eps-chart');"
            "const card = svg.closest('.lb-card'); const cs = getComputedStyle(card);"
            "return [svg.getBoundingClientRect().width,"
            " card.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight)];"
        )
        assert abs(got[0] - got[1]) <= 3, (width, got)
        assert got[0] > 720  # wider than its drawing's own size


def open_saved(driver: WebDriver) -> None:
    """Opens the search page's saved-searches box (a <details>) when it is closed."""
    box = driver.find_element(By.ID, "saved-box")
    if box.get_attribute("open") is None:
        box.find_element(By.TAG_NAME, "summary").click()


def test_saved_search(stack: Stack, driver: WebDriver) -> None:
    """Saving the search on screen from the search page, in the browser: it is listed there
    and on /saved, its link runs it again (the same matches, range and columns), and it is
    deleted from /saved."""
    web = stack.web
    login(driver, web.url, "admin", web.admin_password)
    open_search(
        driver, web.url, q=WORD, logspace="main", cols="time,host,program", **{"from": "-1h"}
    )
    want = total(driver)
    assert want > 0
    open_saved(driver)
    name = f"browser {WORD}"
    driver.find_element(By.ID, "save-name").send_keys(name)
    driver.find_element(By.ID, "save-shared").click()
    click_and_wait(driver, driver.find_element(By.ID, "save-submit"))
    assert f"Saved search '{name}' (shared)." in driver.find_element(By.TAG_NAME, "main").text
    p = params(driver)
    assert (p["q"], p["from"], p["cols"]) == (WORD, "-1h", "time,host,program")
    open_saved(driver)
    links = driver.find_elements(By.CSS_SELECTOR, "#saved-list a.saved-run")
    assert [a.text for a in links] == [name]
    open_search(driver, web.url)  # elsewhere, then back through the saved link
    open_saved(driver)
    click_and_wait(driver, driver.find_element(By.CSS_SELECTOR, "#saved-list a.saved-run"))
    assert total(driver) == want and params(driver)["cols"] == "time,host,program"
    driver.get(web.url + "/saved")
    (row,) = driver.find_elements(By.CSS_SELECTOR, "#saved-searches tr.saved")
    assert name in row.text and "yes" in row.text  # shared
    row.find_element(By.CSS_SELECTOR, "button.danger").click()  # back on /saved: same URL
    WebDriverWait(driver, 30).until(EC.staleness_of(row))
    assert not driver.find_elements(By.CSS_SELECTOR, "#saved-searches tr.saved")
    assert f"Deleted the saved search '{name}'." in driver.find_element(By.TAG_NAME, "main").text
