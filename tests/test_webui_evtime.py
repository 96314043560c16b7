# Scenario (issue 21, webui/UI.md "time-basis"): event-time ranges on the search page in a real
# headless Chromium, over a store that `logbox ingest` wrote now (receive time: today) of
# messages whose devices' clocks said 2025-06-01 (some), 2099 (some) or nothing (some), searched
# through a real logbox-searchd, served by real gunicorn over TLS. The range 2025-06-01 by
# receive time holds nothing; switching the select to "Event time" searches again at once with
# time=event in the URL, finds exactly the messages `logbox cat` says were stamped in that
# range, and shows both times (the event-time column first); the choice stays in the URL of the
# paging, preset and column links.
from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from lbtest.cli import Logbox
from lbtest.searchd import Searchd, searchd_binary
from lbtest.webui import WebuiServer, login
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

pytestmark = pytest.mark.slow

E0 = 1748736000  # 2025-06-01T00:00:00Z
N = 90
US = 1_000_000


def stamp(i: int) -> str:
    if i % 3 == 0:
        return "-"
    if i % 3 == 1:
        return "2099-01-01T00:00:00Z"
    s = E0 + i * 60
    return f"2025-06-01T{s % 86400 // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}.5Z"


@dataclass
class Stack:
    web: WebuiServer
    event_ids: list[int]  # stamped 2025-06-01 (the day E0 starts), by `logbox cat`


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path, store_cli: Path) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("webevt")
    data = tmp / "data"
    data.mkdir()
    lb = Logbox(store_cli, data)
    lb.ingest(
        b"".join(b"<14>1 %s evhost app - - - clockprobe n%d\n" % (stamp(i).encode(), i)
                 for i in range(1, N + 1))
    )  # fmt: skip
    day = [
        m["id"]
        for m in lb.cat()
        if m["timestamp_us"] is not None and E0 <= m["timestamp_us"] // US < E0 + 86400
    ]
    assert len(day) == N // 3
    with Searchd(searchd_binary(top), data, tmp / "sd.sock") as sd:
        with WebuiServer(tmp / "webui", searchd_socket=sd.sock, data=data) as web:
            yield Stack(web, day)


def params(driver: WebDriver) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(driver.current_url).query))


def ids(driver: WebDriver) -> list[int]:
    return [
        int(tr.get_attribute("data-id") or 0)
        for tr in driver.find_elements(By.CSS_SELECTOR, "#results tr.hit")
    ]


def test_event_time_select(stack: Stack, driver: WebDriver) -> None:
    web = stack.web
    login(driver, web.url, "admin", web.admin_password)
    q = {"q": "clockprobe", "from": "2025-06-01", "to": "2025-06-02", "tz": "utc", "limit": "20"}
    driver.get(web.url + "/search?" + urllib.parse.urlencode(q))
    assert driver.find_element(By.ID, "total").text == "0"  # received today, not in 2025
    sel = Select(driver.find_element(By.ID, "time-basis"))
    assert sel.first_selected_option.get_attribute("value") == "received"
    old = driver.current_url
    sel.select_by_value("event")  # searches again at once (no submit click)
    WebDriverWait(driver, 30).until(
        lambda d: d.current_url != old
        and d.execute_script("return document.readyState") == "complete"
    )
    p = params(driver)
    assert p["time"] == "event" and p["q"] == "clockprobe" and p["from"] == "2025-06-01"
    assert driver.find_element(By.ID, "total").text == str(len(stack.event_ids))
    assert driver.find_element(By.ID, "time-basis-note").text == "by event time"
    assert (
        Select(driver.find_element(By.ID, "time-basis")).first_selected_option.get_attribute(
            "value"
        )
        == "event"
    )
    # Newest received first, both times shown: the event time first.
    want = sorted(stack.event_ids, reverse=True)
    assert ids(driver) == want[:20]
    heads = [
        th.get_attribute("data-col")
        for th in driver.find_elements(By.CSS_SELECTOR, "#results thead th")
    ]
    assert heads[:2] == ["timestamp", "time"], heads
    row = driver.find_element(By.CSS_SELECTOR, "#results tr.hit")
    ev = row.find_element(By.CSS_SELECTOR, "td.c-ts time").get_attribute("datetime") or ""
    rc = row.find_element(By.CSS_SELECTOR, "td.c-time time").get_attribute("datetime") or ""
    assert ev.startswith("2025-06-01T") and not rc.startswith("2025"), (ev, rc)
    # The choice stays in the links: next page, presets, the column chooser's form.
    nxt = driver.find_element(By.ID, "next-page").get_attribute("href") or ""
    assert "time=event" in nxt
    driver.get(nxt)
    assert ids(driver) == want[20:40]
    for a in driver.find_elements(By.CSS_SELECTOR, "a.preset"):
        assert "time=event" in (a.get_attribute("href") or "")
    hidden = driver.find_elements(By.CSS_SELECTOR, "#columns-form input[type=hidden][name=time]")
    assert [h.get_attribute("value") for h in hidden] == ["event"]
    # Back to received time: nothing again.
    old = driver.current_url
    Select(driver.find_element(By.ID, "time-basis")).select_by_value("received")
    WebDriverWait(driver, 30).until(
        lambda d: d.current_url != old
        and d.execute_script("return document.readyState") == "complete"
    )
    assert driver.find_element(By.ID, "total").text == "0"
