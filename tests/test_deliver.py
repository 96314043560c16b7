"""logbox_core.deliver against real receivers started here: aiosmtpd with STARTTLS and AUTH
(a test CA's certificate), a syslog listener on UDP, TCP and TLS, an HTTPS server, and
net-snmp's snmptrapd. Each refusal (plain SMTP, an untrusted certificate, a non-2xx answer, a
wrong community) is checked to deliver nothing, and no error message holds a secret."""

from __future__ import annotations

import email
import email.policy
import hashlib
import hmac
import json
import os
import re
import socket
import stat
import threading
import time
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from lbtest.receivers import ReceiverPKI, https_server, smtp_server, snmptrapd, syslog_receiver
from logbox_core import deliver as dl

PASSWORD = "relay-pw-Zq81x"
SECRET = "hook-secret-9fQ"
COMMUNITY = "comm-s3cret"
ENGINE = "0x80001f8880aabbccdd"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ReceiverPKI:
    return ReceiverPKI.make(tmp_path_factory.mktemp("pki"))


def event(**kw: Any) -> dict[str, Any]:
    e = {
        "alert_id": "a1b2c3",
        "alert": "ssh failures",
        "logspace": "main",
        "query": "program:sshd failed",
        "condition": "more than 5 in 60 s",
        "state": "firing",
        "count": 17,
        "window_s": 60,
        "group": {"field": "host", "value": "web1"},
        "time": "2026-11-27T02:30:00.123456Z",
        "box": "logbox1",
        "url": "https://logbox1/search?q=program%3Asshd",
        "samples": [{"id": "7", "raw": "<38>Nov 27 02:29:59 web1 sshd[1]: Failed password"}],
    }
    e.update(kw)
    return e


def relay(pki: ReceiverPKI, port: int, **kw: Any) -> dl.SmtpRelay:
    return dl.SmtpRelay(
        host="localhost", port=port, sender="logbox@box.example", ca=pki.ca.read_text(), **kw
    )


# ---------------------------------------------------------------- email


def test_email_starttls_auth(pki: ReceiverPKI) -> None:
    with smtp_server(pki, "alerts", PASSWORD) as (port, box):
        s = dl.Settings(smtp=relay(pki, port, username="alerts", password=PASSWORD))
        dl.deliver({"type": "email", "to": ["ops@example.org", "b@example.org"]}, event(), s)
    assert len(box) == 1
    m = box[0]
    assert m.tls and m.login == "alerts"
    assert m.mail_from == "logbox@box.example"
    assert m.rcpt_tos == ["ops@example.org", "b@example.org"]
    msg = email.message_from_bytes(m.data, policy=email.policy.default)
    assert msg["Subject"] == "[logbox] alert ssh failures: 17 matches in main"
    assert msg["From"] == "logbox@box.example"
    assert msg["To"] == "ops@example.org, b@example.org"
    assert msg["X-Logbox-Alert"] == "a1b2c3"
    assert msg["Date"] and msg["Message-ID"]
    body = msg.get_body().get_content()
    assert 'logbox alert "ssh failures" firing: 17 matches in logspace main' in body
    assert "program:sshd failed" in body and "more than 5 in 60 s" in body
    assert "sshd[1]: Failed password" in body
    assert "https://logbox1/search?q=program%3Asshd" in body


def test_email_implicit_tls(pki: ReceiverPKI) -> None:
    with smtp_server(pki, "alerts", PASSWORD, implicit=True) as (port, box):
        r = relay(pki, port, security="tls", username="alerts", password=PASSWORD)
        dl.deliver({"type": "email", "to": ["ops@example.org"]}, event(), dl.Settings(smtp=r))
    assert len(box) == 1 and box[0].tls and box[0].login == "alerts"


def test_email_html_inline_image_unchanged(pki: ReceiverPKI) -> None:
    png = bytes(range(256)) * 8
    msg = EmailMessage()
    msg["Subject"] = "report"
    msg["To"] = "r@example.org"
    msg.set_content("text part")
    msg.add_alternative('<html><body><img src="cid:chart1"></body></html>', subtype="html")
    msg.get_payload()[1].add_related(png, "image", "png", cid="<chart1>")
    with smtp_server(pki) as (port, box):
        dl.send_email(relay(pki, port), msg)
    got = email.message_from_bytes(box[0].data, policy=email.policy.default)
    html = got.get_body(("html",))
    assert 'src="cid:chart1"' in html.get_content()
    imgs = [p for p in got.walk() if p.get_content_type() == "image/png"]
    assert len(imgs) == 1 and imgs[0].get_content() == png and imgs[0]["Content-ID"] == "<chart1>"


def test_email_plain_smtp_refused(pki: ReceiverPKI) -> None:
    with smtp_server(None) as (port, box):
        with pytest.raises(dl.DeliveryError, match="does not offer STARTTLS"):
            dl.deliver({"type": "email", "to": ["a@example.org"]}, event(), dl.Settings(smtp=relay(pki, port)))  # fmt: skip
    assert box == []


def test_email_wrong_ca_refused(pki: ReceiverPKI) -> None:
    with smtp_server(pki, "alerts", PASSWORD) as (port, box):
        r = relay(pki, port, username="alerts", password=PASSWORD)
        r.ca = pki.other_ca.read_text()
        with pytest.raises(dl.DeliveryError, match="certificate not trusted") as e:
            dl.deliver({"type": "email", "to": ["a@example.org"]}, event(), dl.Settings(smtp=r))
        # the system CAs do not know the test CA either
        r.ca = None
        with pytest.raises(dl.DeliveryError, match="certificate not trusted"):
            dl.deliver({"type": "email", "to": ["a@example.org"]}, event(), dl.Settings(smtp=r))
    assert box == []
    assert PASSWORD not in str(e.value)


def test_email_bad_password_not_shown(pki: ReceiverPKI) -> None:
    with smtp_server(pki, "alerts", PASSWORD) as (port, box):
        r = relay(pki, port, username="alerts", password="wrong-" + PASSWORD)
        with pytest.raises(dl.DeliveryError, match="login as 'alerts' refused") as e:
            dl.deliver({"type": "email", "to": ["a@example.org"]}, event(), dl.Settings(smtp=r))
    assert box == [] and PASSWORD not in str(e.value)
    assert PASSWORD not in repr(r)


def test_email_without_relay() -> None:
    with pytest.raises(dl.DeliveryError, match="no SMTP relay"):
        dl.deliver({"type": "email", "to": ["a@example.org"]}, event(), dl.Settings())


# ---------------------------------------------------------------- syslog

RFC5424 = re.compile(
    rb"^<(?P<pri>\d{1,3})>1 (?P<ts>\S+) (?P<host>\S+) (?P<app>\S+) (?P<proc>\S+) (?P<msgid>\S+) "
    rb"(?P<sd>\[.*?[^\\]\]) (?P<msg>.*)$",
    re.S,
)


def sd_params(sd: bytes) -> dict[str, str]:
    return {
        k.decode(): re.sub(rb"\\(.)", rb"\1", v).decode()
        for k, v in re.findall(rb' ([a-z_]+)="((?:[^"\\]|\\.)*)"', sd)
    }


@pytest.mark.parametrize("transport", ["udp", "tcp", "tls"])
def test_syslog(pki: ReceiverPKI, transport: str) -> None:
    with syslog_receiver(pki) as r:
        t = dl.SyslogTarget(
            host="127.0.0.1" if transport != "tls" else "localhost",
            port=getattr(r, transport),
            transport=transport,
            facility="local3",
            ca=pki.ca.read_text(),
        )
        dl.deliver({"type": "syslog"}, event(alert='ssh "bad" ]x'), dl.Settings(syslog=t))
        kind, frame = r.wait()[0]
    assert kind == transport
    m = RFC5424.match(frame)
    assert m, frame
    assert int(m["pri"]) == 19 * 8 + 4  # local3.warning
    assert m["ts"] == b"2026-11-27T02:30:00.123456Z"
    assert (m["host"], m["app"], m["proc"], m["msgid"]) == (b"logbox1", b"logbox", b"-", b"alert")
    assert m["sd"].startswith(b"[logbox-alert@32473 ")
    assert sd_params(m["sd"]) == {
        "id": "a1b2c3",
        "name": 'ssh "bad" ]x',
        "state": "firing",
        "logspace": "main",
        "count": "17",
        "window": "60",
        "group_field": "host",
        "group_value": "web1",
    }
    assert m["msg"].startswith(b"\xef\xbb\xbflogbox alert ")
    assert b"17 matches in logspace main (host=web1)" in m["msg"]


def test_syslog_tls_untrusted(pki: ReceiverPKI) -> None:
    with syslog_receiver(pki) as r:
        t = dl.SyslogTarget(host="localhost", port=r.tls, transport="tls")  # system CAs
        with pytest.raises(dl.DeliveryError, match=r"syslog to localhost:\d+ \(tls\): certificate not trusted"):  # fmt: skip
            dl.deliver({"type": "syslog"}, event(), dl.Settings(syslog=t))
        time.sleep(0.2)
        assert r.frames == []


# ---------------------------------------------------------------- webhook


def test_webhook_signed(pki: ReceiverPKI) -> None:
    with https_server(pki) as (port, got):
        s = dl.Settings(webhook=dl.WebhookSettings(secret=SECRET))
        action = {"type": "webhook", "url": f"https://localhost:{port}/hook?x=1", "ca": pki.ca.read_text()}  # fmt: skip
        dl.deliver(action, event(), s)
    assert len(got) == 1
    p = got[0]
    assert p.path == "/hook?x=1"
    assert p.headers["Content-Type"] == "application/json"
    assert json.loads(p.body) == event()
    want = "sha256=" + hmac.new(SECRET.encode(), p.body, hashlib.sha256).hexdigest()
    assert p.headers[dl.SIGNATURE_HEADER] == want


def test_webhook_untrusted_and_non_2xx(pki: ReceiverPKI) -> None:
    with https_server(pki) as (port, got):
        url = f"https://localhost:{port}/hook"
        for ca in (None, pki.other_ca.read_text()):
            with pytest.raises(dl.DeliveryError, match="certificate not trusted"):
                dl.deliver({"type": "webhook", "url": url, "ca": ca}, event(), dl.Settings())
        assert got == []
    with https_server(pki, status=500) as (port, got):
        url = f"https://localhost:{port}/secret-token-path"
        with pytest.raises(dl.DeliveryError, match=r"answered 500") as e:
            dl.deliver({"type": "webhook", "url": url, "ca": pki.ca.read_text()}, event(), dl.Settings())  # fmt: skip
        assert len(got) == 1 and "secret-token-path" not in str(e.value)
    with pytest.raises(dl.DeliveryError, match="must be https"):
        dl.deliver({"type": "webhook", "url": "http://localhost/x"}, event(), dl.Settings())


# ---------------------------------------------------------------- SNMP


def test_snmp_v2c(tmp_path: Path) -> None:
    with snmptrapd(tmp_path, COMMUNITY) as trapd:
        wrong = dl.SnmpTarget(host="127.0.0.1", port=trapd.port, community="not-" + COMMUNITY)
        dl.deliver({"type": "snmp"}, event(alert="first"), dl.Settings(snmp=wrong))
        t = dl.SnmpTarget(host="127.0.0.1", port=trapd.port, community=COMMUNITY)
        dl.deliver({"type": "snmp"}, event(alert="second"), dl.Settings(snmp=t))
        text = trapd.wait_for('"second"')
    assert '"first"' not in text  # the wrong community's trap was dropped
    line = next(x for x in text.splitlines() if '"second"' in x)
    o = dl.SNMP_OBJECTS
    assert f".1.3.6.1.6.3.1.1.4.1.0 = OID: .{dl.SNMP_TRAP_FIRING}" in line
    for want in (
        f'.{o}.1 = STRING: "a1b2c3"',
        f'.{o}.2 = STRING: "second"',
        f'.{o}.3 = STRING: "main"',
        f'.{o}.4 = STRING: "firing"',
        f".{o}.5 = Gauge32: 17",
        f".{o}.7 = Gauge32: 60",
        f'.{o}.8 = STRING: "host"',
        f'.{o}.9 = STRING: "web1"',
        f'.{o}.10 = STRING: "2026-11-27T02:30:00.123456Z"',
        f'.{o}.11 = STRING: "logbox1"',
    ):
        assert want in line, (want, line)


def test_snmp_v3_authpriv(tmp_path: Path) -> None:
    with snmptrapd(tmp_path, COMMUNITY, (ENGINE, "alertd", "auth-pass-1", "priv-pass-1")) as trapd:
        t = dl.SnmpTarget(
            host="127.0.0.1",
            port=trapd.port,
            version="3",
            user="alertd",
            auth_password="auth-pass-1",
            priv_password="priv-pass-1",
            engine_id=ENGINE,
        )
        dl.deliver({"type": "snmp"}, event(state="test", alert="v3 test"), dl.Settings(snmp=t))
        line = trapd.wait_for('"v3 test"')
    assert f"OID: .{dl.SNMP_TRAP_TEST}" in line


# ---------------------------------------------------------------- settings


@pytest.fixture
def notify(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "notify.json"


def test_settings_file(notify: Path, pki: ReceiverPKI) -> None:
    assert dl.load_settings(notify) == dl.Settings()
    s = dl.write_settings(
        notify,
        {
            "smtp": {"host": "mail.example.org", "sender": "lb@example.org", "username": "u",
                     "password": PASSWORD, "ca": pki.ca.read_text()},
            "syslog": {"host": "10.0.0.9", "transport": "tls"},
            "webhook": {"secret": SECRET},
            "snmp": {"host": "nms.example.org", "community": COMMUNITY},
        },
    )  # fmt: skip
    assert stat.S_IMODE(os.stat(notify).st_mode) == 0o640
    assert s.syslog is not None and s.syslog.port == 6514
    assert dl.load_settings(notify) == s
    view = json.dumps(dl.settings_json(s))
    for secret in (PASSWORD, SECRET, COMMUNITY):
        assert secret not in view
    pub = dl.settings_json(s)
    assert pub["smtp"]["password_set"] is True and "password" not in pub["smtp"]
    assert pub["snmp"]["community_set"] is True and pub["snmp"]["auth_password_set"] is False
    # an update that omits a secret keeps it; null removes a channel
    s2 = dl.write_settings(notify, {"smtp": {"host": "mail2.example.org", "sender": "lb@example.org", "username": "u"}, "syslog": None})  # fmt: skip
    assert s2.smtp is not None and s2.smtp.password == PASSWORD and s2.smtp.port == 587
    assert s2.syslog is None and s2.snmp == s.snmp
    # refused updates leave the file as it was
    before = notify.read_bytes()
    for bad, msg in (
        ({"smtp": {"host": "x", "security": "none"}}, "smtp.security"),
        ({"snmp": {"host": "x", "version": "2c", "community": None}}, "snmp.community"),
        ({"pager": {}}, "pager: unknown channel"),
        (
            {"snmp": {"host": "x", "community": "a b"}},
            r"snmp.community: expected one word.*\(secret\)",
        ),
        ({"smtp": {"host": "x", "ca": "not pem"}}, "smtp.ca"),
    ):
        with pytest.raises(dl.SettingsError, match=msg):
            dl.write_settings(notify, bad)
    assert notify.read_bytes() == before


def test_delivery_time_bounded(pki: ReceiverPKI) -> None:
    """A relay that answers a line every 0.3 s (each step within its 1 s timeout) is given up
    after 3 timeouts."""
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = srv.accept()
        with conn:
            while not stop.wait(0.3):
                try:
                    conn.sendall(b"220-still greeting\r\n")
                except OSError:
                    return

    threading.Thread(target=trickle, daemon=True).start()
    try:
        r = relay(pki, srv.getsockname()[1], timeout=1)
        t0 = time.monotonic()
        with pytest.raises(dl.DeliveryError, match=r"connect: gave up after 3 s"):
            dl.deliver({"type": "email", "to": ["a@example.org"]}, event(), dl.Settings(smtp=r))
        assert time.monotonic() - t0 < 5
    finally:
        stop.set()
        srv.close()
