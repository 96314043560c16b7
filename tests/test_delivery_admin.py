# Scenario (issue 21, alert delivery): the delivery settings through real gunicorn, the API's
# /api/v1/delivery and the web UI's /admin/delivery on one settings file, with the test
# messages going to real receivers started here (aiosmtpd with STARTTLS and AUTH, a syslog
# listener, an HTTPS server, snmptrapd). Searchers are refused (403, audited); secrets written
# never come back in an answer, a page or the audit log; a test over each channel arrives;
# a test that fails says why (also when logbox-alertd, which sends them, is not running); every
# change and test is audited. In Chromium, the admin saves
# the webhook's key and test-fires it from the page.
from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from lbtest.alertd import Alertd
from lbtest.receivers import ReceiverPKI, https_server, smtp_server, snmptrapd, syslog_receiver
from lbtest.rpc import RpcServer
from lbtest.webui import WebuiServer, csrf_token, login
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

pytestmark = pytest.mark.slow

PASSWORD = "relay-Pw-71aa"
SECRET = "hook-Secret-19bb"
COMMUNITY = "trap-Comm-33cc"
SECRETS = (PASSWORD, SECRET, COMMUNITY)


@dataclass
class Env:
    rpc: RpcServer
    web: WebuiServer
    notify: Path
    pki: ReceiverPKI
    root: Path


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("delivery")
    (root / "data").mkdir()
    (root / "etc").mkdir()
    notify = root / "etc" / "notify.json"
    common = {"searchd_socket": root / "no-searchd.sock", "data": root / "data"}

    def env_of(app: str) -> dict[str, str]:
        return {
            "LOGBOX_DELIVERY_SETTINGS": str(notify),
            "LOGBOX_ALERTD_STATUS": str(root / f"alertd-{app}" / "status.json"),
        }

    pki = ReceiverPKI.make(root / "pki")
    with (
        RpcServer(root / "rpc", env=env_of("rpc"), **common) as rpc,
        WebuiServer(root / "web", env=env_of("web"), **common) as web,
    ):
        # The apps have no network: logbox-alertd sends their test messages, one per store.
        sd = root / "no-searchd.sock"
        with (
            Alertd(root / "alertd-rpc", rpc.accounts_path, notify, sd),
            Alertd(root / "alertd-web", web.accounts_path, notify, sd),
        ):
            yield Env(rpc, web, notify, pki, root)


def no_secret(text: str) -> None:
    for s in SECRETS:
        assert s not in text


def test_api_searcher_refused(env: Env) -> None:
    with env.rpc.session(env.rpc.login()) as admin:
        bob = env.rpc.new_searcher(admin, "bob", ["*"])
    base = env.rpc.base
    with bob:
        assert bob.get(base + "/delivery", timeout=30).status_code == 403
        r = bob.put(base + "/delivery", json={"syslog": {"host": "10.1.1.1"}}, timeout=30)
        assert r.status_code == 403
        r = bob.post(base + "/delivery/test", json={"channel": "syslog"}, timeout=30)
        assert r.status_code == 403
    assert not env.notify.exists()


def test_api_settings_and_test_fire(env: Env) -> None:
    pki, base = env.pki, env.rpc.base
    ca = pki.ca.read_text()
    with (
        env.rpc.session(env.rpc.login()) as s,
        smtp_server(pki, "alerts", PASSWORD) as (smtp_port, box),
        syslog_receiver(pki) as sl,
        https_server(pki) as (hook_port, posted),
        snmptrapd(env.root / "trapd", COMMUNITY) as trapd,
    ):
        body = {
            "smtp": {"host": "localhost", "port": smtp_port, "sender": "lb@box.example",
                     "username": "alerts", "password": PASSWORD, "ca": ca, "timeout": 5},
            "syslog": {"host": "localhost", "port": sl.tls, "transport": "tls", "ca": ca},
            "webhook": {"secret": SECRET},
            "snmp": {"host": "127.0.0.1", "port": trapd.port, "community": COMMUNITY},
        }  # fmt: skip
        r = s.put(base + "/delivery", json=body, timeout=30)
        assert r.status_code == 200, r.text
        no_secret(r.text)
        got = r.json()
        assert got["smtp"]["password_set"] is True and "password" not in got["smtp"]
        assert got["webhook"] == {"secret_set": True, "timeout": 10.0}
        assert got["snmp"]["community_set"] is True and got["syslog"]["port"] == sl.tls
        r = s.get(base + "/delivery", timeout=30)
        assert r.status_code == 200 and r.json() == got
        no_secret(r.text)
        # the file holds the secrets, readable by its owner and group only
        assert stat.S_IMODE(os.stat(env.notify).st_mode) == 0o640
        assert json.loads(env.notify.read_text())["smtp"]["password"] == PASSWORD
        # an update without the password keeps it
        smtp = {k: v for k, v in body["smtp"].items() if k != "password"}
        r = s.put(base + "/delivery", json={"smtp": smtp}, timeout=30)
        assert r.status_code == 200 and r.json()["smtp"]["password_set"] is True

        def fire(**kw: object) -> dict:
            r = s.post(base + "/delivery/test", json=kw, timeout=60)
            assert r.status_code == 200, r.text
            no_secret(r.text)
            return r.json()

        res = fire(channel="email", to=["ops@example.org"])
        assert res["delivered"] is True and res["error"] is None, res
        assert len(box) == 1 and box[0].tls and box[0].login == "alerts"
        assert box[0].rcpt_tos == ["ops@example.org"]
        assert b"[logbox] TEST alert delivery test" in box[0].data
        assert fire(channel="syslog")["delivered"] is True
        kind, frame = sl.wait()[0]
        assert kind == "tls" and b'[logbox-alert@32473 id="test"' in frame
        url = f"https://localhost:{hook_port}/in"
        assert fire(channel="webhook", url=url, ca=ca)["delivered"] is True
        want = "sha256=" + hmac.new(SECRET.encode(), posted[0].body, hashlib.sha256).hexdigest()
        assert posted[0].headers["X-Logbox-Signature-256"] == want
        assert json.loads(posted[0].body)["state"] == "test"
        assert fire(channel="snmp")["delivered"] is True
        trapd.wait_for('"delivery test"')
        # failures say why, and send nothing
        bad = fire(channel="webhook", url=url, ca=pki.other_ca.read_text())
        assert bad["delivered"] is False and "certificate not trusted" in bad["error"]
        assert len(posted) == 1
        r = s.post(base + "/delivery/test", json={"channel": "pager"}, timeout=30)
        assert r.status_code == 400
        r = s.put(base + "/delivery", json={"smtp": {"host": "x", "port": 0}}, timeout=30)
        assert r.status_code == 400 and "smtp.port" in r.json()["error"]["message"]
        # audited
        r = s.get(base + "/audit", params={"action": "delivery_test"}, timeout=30)
        details = [e["detail"] for e in r.json()["entries"]]
        assert "email: delivered" in details and "snmp: delivered" in details
        assert any(d.startswith("webhook: failed: ") for d in details)
        r = s.get(base + "/audit", params={"action": "delivery_settings"}, timeout=30)
        assert any("smtp=set" in e["detail"] for e in r.json()["entries"])
        no_secret(r.text)


def web_post(s: requests.Session, web: WebuiServer, path: str, data: dict) -> requests.Response:
    page = s.get(web.url + "/admin/delivery", timeout=30)
    return s.post(
        web.url + path,
        data={**data, "csrf_token": csrf_token(page.text)},
        headers={"Referer": web.url + "/admin/delivery"},
        timeout=60,
    )


def test_webui_page(env: Env) -> None:
    web = env.web
    web.accounts().add_user("carol", "carol-password-1", "searcher", ("*",))
    carol = web.login_session("carol", "carol-password-1")
    assert carol.get(web.url + "/admin/delivery", timeout=30).status_code == 403
    s = web.login_session()
    with syslog_receiver(env.pki) as sl:
        r = web_post(
            s,
            web,
            "/admin/delivery/syslog",
            {"host": "127.0.0.1", "port": str(sl.udp), "transport": "udp", "facility": "local5",
             "ca": "", "timeout": ""},
        )  # fmt: skip
        assert r.status_code == 200 and "/admin/delivery#delivery-syslog" in r.url, r.text[:300]
        page = r.text
        no_secret(page)
        for i in ("delivery-smtp-form", "delivery-syslog-form", "delivery-webhook-form",
                  "delivery-snmp-form", "delivery-test-email", "delivery-test-syslog",
                  "delivery-test-webhook", "delivery-test-snmp", "delivery-smtp-password"):  # fmt: skip
            assert f'id="{i}"' in page, i
        assert 'id="delivery-syslog-port" value="%d"' % sl.udp in page
        r = web_post(s, web, "/admin/delivery/test/syslog", {})
        assert r.status_code == 200
        assert 'id="delivery-test-result" data-delivered="true"' in r.text, r.text[:2000]
        kind, frame = sl.wait()[0]
        assert kind == "udp" and frame.startswith(b"<%d>1 " % (21 * 8 + 5))
    # the SMTP form: an empty password field keeps the stored password
    before = json.loads(env.notify.read_text())["smtp"]
    assert before is not None and before["password"] == PASSWORD
    form = {"host": "localhost", "port": "2525", "security": "starttls",
            "sender": "lb@box.example", "username": "alerts", "password": "", "ca": "",
            "timeout": "7"}  # fmt: skip
    r = web_post(s, web, "/admin/delivery/smtp", form)
    assert r.status_code == 200
    after = json.loads(env.notify.read_text())["smtp"]
    assert after["password"] == PASSWORD and after["port"] == 2525 and after["timeout"] == 7
    assert 'data-set="true"' in r.text
    no_secret(r.text)
    # refused values say which member
    r = web_post(
        s, web, "/admin/delivery/snmp", {"host": "nms", "version": "2c", "clear_community": "1"}
    )
    assert r.status_code == 400 and 'id="delivery-snmp-error"' in r.text
    assert "snmp.community" in r.text
    # a failed test says why
    r = web_post(s, web, "/admin/delivery/test/email", {"to": "ops@example.org"})
    assert 'data-delivered="false"' in r.text and "email via localhost:2525" in r.text
    # removal
    r = web_post(s, web, "/admin/delivery/syslog", {"remove": "1"})
    assert r.status_code == 200 and json.loads(env.notify.read_text())["syslog"] is None
    entries = web.accounts().audit_entries(action="delivery_settings", limit=50)[0]
    assert {"syslog=set", "smtp=set", "syslog=removed"} <= {e.detail for e in entries}
    assert any(e.status == 400 for e in entries)


def test_browser_webhook_test_fire(env: Env, driver: WebDriver) -> None:
    """In Chromium: the admin sets the webhook's signing key, then sends a test to a real HTTPS
    server; the page says it was delivered and the request carries the right signature."""
    web = env.web
    login(driver, web.url, "admin", web.admin_password)
    driver.get(web.url + "/admin/delivery")
    key = "browser-" + SECRET
    driver.find_element(By.ID, "delivery-webhook-secret").send_keys(key)
    driver.find_element(By.ID, "delivery-webhook-save").click()
    # saved: back on the page at the section (303 to /admin/delivery#delivery-webhook)
    WebDriverWait(driver, 10).until(lambda d: d.current_url.endswith("#delivery-webhook"))
    assert driver.find_element(By.ID, "delivery-webhook-state").text == "configured"
    field = driver.find_element(By.ID, "delivery-webhook-secret")
    assert field.get_attribute("value") == "" and field.get_attribute("data-set") == "true"
    assert key not in driver.page_source
    with https_server(env.pki) as (port, posted):
        driver.find_element(By.ID, "delivery-test-webhook-url").send_keys(
            f"https://localhost:{port}/browser"
        )
        driver.find_element(By.ID, "delivery-test-webhook-ca").send_keys(env.pki.ca.read_text())
        driver.find_element(By.ID, "delivery-test-webhook").click()
        result = WebDriverWait(driver, 20).until(
            lambda d: d.find_element(By.ID, "delivery-test-result")
        )
        assert result.get_attribute("data-delivered") == "true", result.text
        assert len(posted) == 1 and posted[0].path == "/browser"
    want = "sha256=" + hmac.new(key.encode(), posted[0].body, hashlib.sha256).hexdigest()
    assert posted[0].headers["X-Logbox-Signature-256"] == want
