# Hostile input in the web UI (issue 7, webui/UI.md "Sessions and security"), in a real headless
# Chromium: a message holding <script>, an <img onerror>, HTML entities, control bytes and
# invalid UTF-8, sent byte-exact to syslog-ng's octet-counted port and stored by indexd, is shown
# inert on the results page and the message page (no alert, no <script> or <img> element made
# of it, its text shown literally, the bad bytes as \xXX); a query with quotes and angle
# brackets round-trips through the URL (the query box holds it exactly after the load and after
# paging); every page carries the CSP header and the browser reports no CSP violation.
from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from lbtest.appliance import Appliance, octet
from lbtest.cli import message_bytes
from lbtest.searchd import Searchd, searchd_binary
from lbtest.webui import WebuiServer, cookies_session, login
from selenium.common.exceptions import (
    NoAlertPresentException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

pytestmark = pytest.mark.slow

EVIL = (
    b"hostileword <script>alert(1)</script> <img src=x onerror=alert(1)> "
    b"<b>bold</b> &amp; &lt;i&gt; &#60;script&#62; ctl[\x01\x07\x1b[31m\x7f] "
    b"bad[\xff\xfe\xc3(] end"
)
EVIL_HOST = b'"><b>h</b>'
EVIL_PROGRAM = b"<svg/onload=alert(2)>"
QUERY = "\"a b\" <x> 'c'"
ROUNDTRIP = 25  # messages the query matches (three pages of 10)
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


@dataclass
class Stack:
    """The appliance, searchd on its store and the web UI."""

    app: Appliance
    web: WebuiServer
    evil_id: int


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path) -> Iterator[Stack]:
    """The hostile message and ROUNDTRIP messages the quoted query matches, through the real
    ingest path."""
    tmp = tmp_path_factory.mktemp("webui-hostile")
    with Appliance(tmp) as app:
        frames = [
            b"<14>1 2026-11-22T12:00:00Z evil-1 evilapp 66 - - " + EVIL,
            b"<14>1 2026-11-22T12:00:00Z "
            + EVIL_HOST
            + b" "
            + EVIL_PROGRAM
            + b" 9 - - hostilehost",
        ]
        frames += [
            f"<14>1 2026-11-22T12:00:00Z rt-1 rt 7 - - roundtrip {i} a b <x> 'c' end".encode()
            for i in range(ROUNDTRIP)
        ]
        app.send(octet(*frames), port="octet")
        app.wait_count(2 + ROUNDTRIP, timeout=30)
        stored = app.messages()
        (evil,) = (m for m in stored if m["host"] == "evil-1")
        assert message_bytes(evil["message"]) == EVIL, evil  # the bytes arrived exact
        (other,) = (m for m in stored if m["message"] == "hostilehost")
        assert (other["host"], other["program"]) == (EVIL_HOST.decode(), EVIL_PROGRAM.decode())
        sd = Searchd(searchd_binary(top), app.data, app.run / "searchd.sock").start()
        try:
            with WebuiServer(tmp / "webui", searchd_socket=sd.sock, data=app.data) as web:
                yield Stack(app, web, int(evil["id"]))
        finally:
            sd.stop()


@pytest.fixture
def driver_setup(stack: Stack) -> Callable[[WebDriver], None]:
    """`driver` signs in as the admin."""

    def sign_in(d: WebDriver) -> None:
        login(d, stack.web.url, "admin", stack.web.admin_password)
        d.get_log("browser")  # start the console log afresh

    return sign_in


def assert_no_alert(driver: WebDriver) -> None:
    """No JavaScript dialog is open (a script made of the message would have opened one)."""
    time.sleep(0.3)  # an onerror fires once the image failed to load
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018


def assert_inert(driver: WebDriver, container: str) -> None:
    """The message is shown as text inside #container: no element made of it, the markup and
    entities shown literally, the control and invalid bytes as \\xXX."""
    el = driver.find_element(By.ID, container)
    assert not el.find_elements(By.TAG_NAME, "script"), f"a <script> in #{container}"
    assert not el.find_elements(By.TAG_NAME, "img"), f"an <img> in #{container}"
    assert not el.find_elements(By.TAG_NAME, "b"), f"a <b> in #{container}"
    assert not driver.find_elements(By.CSS_SELECTOR, "[onerror]")
    text = el.text
    for literal in (
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "<b>bold</b>",
        "&amp; &lt;i&gt; &#60;script&#62;",
    ):
        assert literal in text, (literal, text)
    for esc in ("\\x01", "\\x07", "\\x1b", "\\xff", "\\xfe"):
        assert esc in text, (esc, text)
    shown = [s.text for s in el.find_elements(By.CSS_SELECTOR, "span.esc")]
    assert "\\xff" in shown and "\\x01" in shown, shown
    assert "\x01" not in text and "\x1b" not in text and "\ufffd" not in text, repr(text)
    assert_no_alert(driver)


def directives(policy: str) -> set[str]:
    """A CSP's directives, whitespace normalised (their order does not matter)."""
    return {" ".join(d.split()) for d in policy.split(";") if d.strip()}


def csp_violations(driver: WebDriver) -> list[str]:
    """The browser console's messages about the Content-Security-Policy."""
    return [
        e["message"]
        for e in driver.get_log("browser")
        if "Content Security Policy" in e["message"] or "Content-Security-Policy" in e["message"]
    ]


def test_hostile_message_is_inert_in_results_and_detail(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    driver.get(web.url + "/search?" + urllib.parse.urlencode({"q": "hostileword", "from": "-1h"}))
    assert_no_alert(driver)
    rows = driver.find_elements(By.CSS_SELECTOR, "#results tr.hit")
    assert [r.get_attribute("data-id") for r in rows] == [str(stack.evil_id)]
    assert_inert(driver, "results")
    assert "hostileword" in [m.text for m in driver.find_elements(By.CSS_SELECTOR, "#results mark")]
    assert driver.title != "pwned"

    driver.get(web.url + f"/messages/main/{stack.evil_id}")
    assert_inert(driver, "message")
    raw = driver.find_element(By.ID, "raw").text.lower()
    assert "ff" in raw and "fe" in raw and "3c" in raw, raw  # the hex dump: \xff \xfe <
    assert "<script>" not in driver.find_element(By.ID, "raw").get_attribute("innerHTML")
    assert csp_violations(driver) == []


def test_hostile_host_and_program_are_inert(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    driver.get(web.url + "/search?" + urllib.parse.urlencode({"q": "hostilehost", "from": "-1h"}))
    assert_no_alert(driver)
    (row,) = driver.find_elements(By.CSS_SELECTOR, "#results tr.hit")
    cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
    assert cells[1] == EVIL_HOST.decode() and cells[2] == EVIL_PROGRAM.decode(), cells
    for area in ("results", "top-hosts", "top-programs"):
        el = driver.find_element(By.ID, area)
        assert not el.find_elements(By.TAG_NAME, "b"), area
        assert not el.find_elements(By.CSS_SELECTOR, "svg[onload]"), area
    assert EVIL_HOST.decode() in driver.find_element(By.ID, "top-hosts").text
    assert EVIL_PROGRAM.decode() in driver.find_element(By.ID, "top-programs").text
    # Refining by the hostile host quotes it: the query finds the message again.
    link = driver.find_element(By.CSS_SELECTOR, "#top-hosts a.top-value")
    old = driver.current_url
    link.click()
    WebDriverWait(driver, 30).until(lambda d: d.current_url != old)
    assert_no_alert(driver)
    q = driver.find_element(By.ID, "q").get_attribute("value") or ""
    assert "host:" in q, q
    assert driver.find_element(By.ID, "total").text == "1", (q, driver.page_source[:2000])
    driver.get(web.url + f"/messages/main/{other_id(stack)}")
    assert_no_alert(driver)
    msg = driver.find_element(By.ID, "message")
    assert not msg.find_elements(By.TAG_NAME, "b") and not driver.find_elements(
        By.CSS_SELECTOR, "svg[onload]"
    )
    assert EVIL_HOST.decode() in msg.text and EVIL_PROGRAM.decode() in msg.text
    assert csp_violations(driver) == []


def other_id(stack: Stack) -> int:
    """The id of the message with the hostile host and program."""
    (m,) = (m for m in stack.app.messages() if m["message"] == "hostilehost")
    return int(m["id"])


def gone(element: WebElement) -> bool:
    """Whether the element's document has been replaced. Chrome reports a node of a document being
    torn down either as stale or as "does not belong to the document"; both mean gone."""
    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as e:
        if "does not belong to the document" in str(e):
            return True
        raise
    return False


def test_query_with_quotes_and_brackets_round_trips(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    url = web.url + "/search?" + urllib.parse.urlencode({"q": QUERY, "from": "-1h", "limit": 10})
    driver.get(url)
    box = driver.find_element(By.ID, "q")
    assert box.get_attribute("value") == QUERY
    assert driver.find_element(By.ID, "total").text == str(ROUNDTRIP)
    assert not driver.find_elements(By.ID, "query-error")
    seen = [r.get_attribute("data-id") for r in driver.find_elements(By.CSS_SELECTOR, "tr.hit")]
    pages = 1
    while nxt := driver.find_elements(By.ID, "next-page"):
        old = driver.current_url
        nxt[0].click()
        WebDriverWait(driver, 30).until(lambda d, old=old: d.current_url != old)
        pages += 1
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(driver.current_url).query))
        assert q.get("q") == QUERY, driver.current_url
        assert driver.find_element(By.ID, "q").get_attribute("value") == QUERY
        seen += [
            r.get_attribute("data-id") for r in driver.find_elements(By.CSS_SELECTOR, "tr.hit")
        ]
    assert pages == 3 and len(seen) == len(set(seen)) == ROUNDTRIP
    # Submitting the form again keeps it too (the browser encodes what the box holds).
    old = driver.current_url
    old_q = driver.find_element(By.ID, "q")
    driver.find_element(By.ID, "search-submit").click()
    # the old page must be gone before the new one is read (its readyState is "complete")
    WebDriverWait(driver, 30).until(lambda d: gone(old_q))
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )
    assert driver.find_element(By.ID, "q").get_attribute("value") == QUERY
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(driver.current_url).query))
    assert q.get("q") == QUERY, (old, driver.current_url)
    assert_no_alert(driver)
    assert csp_violations(driver) == []


def test_csp_header_on_every_page(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    with cookies_session(driver, web) as s:
        for path in (
            "/login",
            "/search?q=hostileword&from=-1h",
            f"/messages/main/{stack.evil_id}",
            "/help/query",
            "/status",
            "/search?q=%22unclosed",
            "/no-such-page",
        ):
            r = s.get(web.url + path, timeout=30, allow_redirects=False)
            got = r.headers.get("Content-Security-Policy", "")
            assert directives(got) == directives(CSP), (path, r.status_code, got)
            assert r.headers.get("X-Content-Type-Options") == "nosniff", path
            assert "max-age" in r.headers.get("Strict-Transport-Security", ""), path
            assert r.headers.get("Referrer-Policy") == "same-origin", path
            if r.status_code == 200:
                assert "no-store" in r.headers.get("Cache-Control", ""), path
    # A page with a query error marks the position, in the browser, without a CSP complaint.
    driver.get(web.url + "/search?q=" + urllib.parse.quote('"unclosed <b>x</b>'))
    err = driver.find_element(By.ID, "query-error")
    assert err.find_elements(By.CSS_SELECTOR, "mark.error-pos")
    assert not err.find_elements(By.TAG_NAME, "b")
    assert driver.find_element(By.ID, "q").get_attribute("value") == '"unclosed <b>x</b>'
    assert csp_violations(driver) == []
