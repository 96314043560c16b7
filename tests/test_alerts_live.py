# Scenario: alerts on the running local appliance (`make run`: syslog-ng, indexd, searchd,
# logbox-alertd, the API and the web UI behind nginx). Through the API an admin saves a search and
# makes an alert on it with the four actions: an HTTPS webhook (a real HTTPS server the test
# starts, trusted through the action's CA), syslog (a real syslog listener), email (aiosmtpd with
# STARTTLS required) and an SNMP trap (net-snmp's snmptrapd), the last three named in the
# delivery settings file: a message sent to the syslog port reaches all four within 5 s, with the
# message among the webhook's samples; a test-fire reaches them too and both show in the alert's history;
# GET /status lists logbox-alertd as running and the alert's state. A searcher cannot make an
# alert on a saved search of a logspace they may not read, nor see another's alert. Every change
# and the test-fire are in the audit log. In Chromium: an alert made from a saved search's link,
# listed, test-fired, and the test in its history page.
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lbtest.collector import free_ports, send_tcp
from lbtest.devrun import DevRun
from lbtest.receivers import (
    Mail,
    ReceiverPKI,
    SyslogReceiver,
    TrapReceiver,
    https_server,
    smtp_server,
    snmptrapd,
    syslog_receiver,
)
from lbtest.webui import login, screenshot
from logbox_client import Client, LogboxError
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

PASSWORD = "given-admin-password-42"
BOUND_S = 5.0
COMMUNITY = "alert-live-community"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ReceiverPKI:
    return ReceiverPKI.make(tmp_path_factory.mktemp("alertpki"))


@pytest.fixture(scope="module")
def receiver(pki: ReceiverPKI) -> Iterator[SyslogReceiver]:
    with syslog_receiver(pki) as r:
        yield r


@pytest.fixture(scope="module")
def smtp(pki: ReceiverPKI) -> Iterator[tuple[int, list[Mail]]]:
    with smtp_server(pki) as got:  # STARTTLS required
        yield got


@pytest.fixture(scope="module")
def traps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrapReceiver]:
    with snmptrapd(tmp_path_factory.mktemp("traps"), COMMUNITY) as t:
        yield t


@pytest.fixture(scope="module")
def data(
    tmp_path_factory: pytest.TempPathFactory,
    pki: ReceiverPKI,
    receiver: SyslogReceiver,
    smtp: tuple[int, list[Mail]],
    traps: TrapReceiver,
) -> Path:
    data = tmp_path_factory.mktemp("alertlive") / "data"
    (data / "etc").mkdir(parents=True)
    ports = free_ports()
    (data / "etc" / "collector.toml").write_text(
        "[ports]\n" + "".join(f"{k} = {v}\n" for k, v in ports.items())
    )
    (data / "etc" / "ports.json").write_text(json.dumps(ports))
    settings = {
        "version": 1,
        "syslog": {"host": "127.0.0.1", "port": receiver.udp, "transport": "udp"},
        "smtp": {"host": "127.0.0.1", "port": smtp[0], "security": "starttls",
                 "sender": "logbox@box.example", "ca": pki.ca.read_text()},
        "snmp": {"host": "127.0.0.1", "port": traps.port, "version": "2c",
                 "community": COMMUNITY},
    }  # fmt: skip
    (data / "etc" / "notify.json").write_text(json.dumps(settings))
    return data


@pytest.fixture(scope="module")
def devrun(top: Path, data: Path) -> Iterator[DevRun]:
    d = DevRun(top, data, extra={"LOGBOX_ADMIN_PASSWORD": PASSWORD})
    d.until("press Ctrl-C", timeout=60)
    yield d
    d.close()


def api(devrun: DevRun, user: str = "admin", password: str = PASSWORD) -> Client:
    c = Client(
        f"https://127.0.0.1:{devrun.rpc_port}",
        verify=str(devrun.data / "tls" / "https.crt"),
        timeout=20,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            c.login(user, password)
            return c
        except LogboxError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def wait(what: str, check: object, timeout: float = 20, every: float = 0.05) -> object:
    deadline = time.monotonic() + timeout
    while True:
        got = check()  # type: ignore[operator]
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def send_when_listening(port: int, data: bytes, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return send_tcp(port, data)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_alert_fires_to_real_receivers_within_bound(
    devrun: DevRun,
    data: Path,
    pki: ReceiverPKI,
    receiver: SyslogReceiver,
    smtp: tuple[int, list[Mail]],
    traps: TrapReceiver,
) -> None:
    ports = json.loads((data / "etc" / "ports.json").read_text())
    c = api(devrun)
    send_when_listening(ports["tcp"], b"<14>1 - web1 app - - - warming up\n")
    wait("logspace main", lambda: "main" in [x["name"] for x in c.logspaces()])
    s = c.save_search("disk errors", "diskfailure")
    with https_server(pki) as (port, posted):
        a = c.create_alert(
            "disk",
            s["id"],
            {"kind": "any"},
            [
                {"type": "webhook", "url": f"https://127.0.0.1:{port}/hook",
                 "ca": pki.ca.read_text()},
                {"type": "syslog"},
                {"type": "email", "to": ["ops@example.org"]},
                {"type": "snmp"},
            ],
            cooldown_s=0,
        )  # fmt: skip
        assert a["logspace"] == "main" and a["query"] == "diskfailure"
        wait("alertd to evaluate it", lambda: c.alert(a["id"])["status"]["state"] == "ok")
        t0 = time.monotonic()
        send_tcp(ports["tcp"], b"<11>1 - web7 kernel - - - sda diskfailure at sector 42\n")
        try:
            wait("the webhook", lambda: posted, timeout=BOUND_S + 5, every=0.01)
        except AssertionError:
            info = f"{c.alert(a['id'])} {c.alert_history(a['id'])}"
            devrun.proc.send_signal(2)
            out = devrun.proc.communicate(timeout=30)[0]
            raise AssertionError(f"{info} {''.join(devrun.lines)} {out}") from None
        took = time.monotonic() - t0
        assert took <= BOUND_S, f"arrival to alert took {took:.2f} s"
        event = json.loads(posted[0].body)
        assert event["alert_id"] == a["id"] and event["state"] == "firing"
        assert event["count"] == 1 and event["logspace"] == "main"
        assert "diskfailure at sector 42" in event["samples"][0]["message"]
        assert event["url"] and "/search?" in event["url"]
        # and the other three channels, each within the bound too
        lines = receiver.wait(1)
        assert any(a["id"].encode() in raw for _, raw in lines), lines
        wait("the mail", lambda: smtp[1], timeout=max(0.1, BOUND_S - (time.monotonic() - t0)))
        mail = smtp[1][0]
        assert mail.tls and mail.rcpt_tos == ["ops@example.org"]
        assert a["id"].encode() in mail.data
        traps.wait_for(a["id"], timeout=max(0.1, BOUND_S - (time.monotonic() - t0)))
        # a test-fire from the API reaches the receivers and the history
        req = c.test_alert(a["id"])
        wait("the test webhook", lambda: len(posted) >= 2, timeout=10)
        assert json.loads(posted[1].body)["state"] == "test"

        def entries() -> list[dict]:
            return c.alert_history(a["id"])["entries"]

        hist = wait("both in the history", lambda: len(entries()) >= 2 and entries())
        assert [e["kind"] for e in hist[:2]] == ["test", "firing"], hist  # type: ignore[index]
        assert hist[0]["request"] == req["request"] and hist[0]["ok"], hist  # type: ignore[index]
        assert [r["type"] for r in hist[1]["results"]] == [  # type: ignore[index]
            "webhook", "syslog", "email", "snmp"
        ]  # fmt: skip
        assert hist[1]["count"] == 1 and hist[1]["ok"], hist  # type: ignore[index]
    st = c.status()
    assert st["services"]["alertd"]["state"] == "running"
    mine = [x for x in st["alerts"] if x["id"] == a["id"]]
    assert mine and mine[0]["state"] in ("ok", "firing", "cooldown"), st["alerts"]
    actions = [e["action"] for e in c.call("GET", "/audit")["entries"]]
    assert {"alert_create", "alert_test"} <= set(actions)


def test_alert_rights(devrun: DevRun) -> None:
    admin = api(devrun)
    admin.call(
        "POST",
        "/users",
        body={"name": "sam", "password": "sam-password-123", "role": "searcher",
              "logspaces": ["main"]},
    )  # fmt: skip
    shared = admin.save_search("main stuff", "y", shared=True)
    a = admin.create_alert("admin's", shared["id"], {"kind": "any"}, [])
    sam = api(devrun, "sam", "sam-password-123")
    own = sam.save_search("sam's own", "z")
    with pytest.raises(LogboxError) as e:
        sam.alert(a["id"])
    assert e.value.status == 404  # another's alert is not found
    assert a["id"] not in [x["id"] for x in sam.alerts()]
    cond = {"kind": "above", "n": 5, "window_s": 60, "group_by": "host"}
    ok = sam.create_alert("sam's", shared["id"], cond, [])
    assert ok["owner"] == "sam" and ok["condition"] == cond
    with pytest.raises(LogboxError) as e:
        sam.create_alert("bad", shared["id"], {"kind": "above", "n": 5}, [])
    assert e.value.status == 400 and "window_s" in e.value.message
    # sam loses main: the alert goes forbidden, and no new alert on main is allowed
    admin.call("PATCH", "/users/sam", body={"logspaces": ["other"]})
    wait("forbidden", lambda: admin.alert(ok["id"])["status"]["state"] == "forbidden", 10)
    assert "may not read logspace 'main'" in admin.alert(ok["id"])["status"]["reason"]
    with pytest.raises(LogboxError) as e:
        sam.create_alert("no", shared["id"], {"kind": "any"}, [])
    assert e.value.status == 404  # a shared search of a logspace sam may not read: not theirs
    with pytest.raises(LogboxError) as e:
        sam.create_alert("no", own["id"], {"kind": "any"}, [])
    assert e.value.status == 403  # their own, on a logspace they may no longer read
    admin.delete_alert(ok["id"])
    actions = [e["action"] for e in admin.call("GET", "/audit")["entries"]]
    assert "alert_delete" in actions and "denied" in actions


def test_alert_ui_in_chromium(
    devrun: DevRun, data: Path, pki: ReceiverPKI, driver: WebDriver
) -> None:
    """Chromium: a saved search's "Alert" link, the form filled in (a webhook to the test's
    HTTPS server), the alert listed with its state, test-fire, and the history showing it."""
    c = api(devrun)
    s = c.save_search("ui search", "uiprobe")
    base = f"https://127.0.0.1:{devrun.webui_port}"
    login(driver, base, "admin", PASSWORD)
    with https_server(pki) as (port, posted):
        driver.get(base + "/saved")
        driver.find_element(By.ID, f"saved-alert-{s['id']}").click()
        WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.ID, "alert-form"))
        assert (
            Select(driver.find_element(By.ID, "alert-search")).first_selected_option.get_attribute(
                "value"
            )
            == s["id"]
        )
        driver.find_element(By.ID, "alert-name").send_keys("ui alert")
        Select(driver.find_element(By.ID, "alert-kind")).select_by_value("above")
        driver.find_element(By.ID, "alert-n").send_keys("3")
        Select(driver.find_element(By.ID, "alert-group")).select_by_value("host")
        driver.find_element(By.ID, "alert-webhook-url").send_keys(f"https://127.0.0.1:{port}/ui")
        driver.find_element(By.ID, "alert-webhook-ca").send_keys(pki.ca.read_text())
        driver.find_element(By.ID, "alert-submit").click()
        WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.ID, "alert-test-submit"))
        aid = driver.current_url.rstrip("/").rsplit("/", 1)[-1]
        a = c.alert(aid)
        assert a["name"] == "ui alert" and a["condition"] == {
            "kind": "above", "n": 3, "window_s": 60, "group_by": "host"
        }  # fmt: skip
        assert a["actions"][0]["type"] == "webhook" and a["enabled"]
        driver.find_element(By.ID, "nav-alerts").click()
        row = WebDriverWait(driver, 10).until(
            lambda d: d.find_element(By.CSS_SELECTOR, f'tr.alert[data-id="{aid}"]')
        )
        assert row.get_attribute("data-state") in ("pending", "ok")
        row.find_element(By.CSS_SELECTOR, "a.alert-edit").click()
        WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.ID, "alert-test-submit"))
        driver.find_element(By.ID, "alert-test-submit").click()
        WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.ID, "alert-history"))

        def shown(d: WebDriver) -> list[WebElement]:
            d.refresh()
            return d.find_elements(By.CSS_SELECTOR, 'tr.history-entry[data-kind="test"]')

        entry = WebDriverWait(driver, 15, poll_frequency=0.5).until(shown)[0]
        assert entry.get_attribute("data-ok") == "true", entry.text
        assert "webhook: ok" in entry.text
        assert posted and json.loads(posted[0].body)["state"] == "test"
        screenshot(driver, "alert-history")
