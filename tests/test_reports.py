# Scenario: scheduled reports (rpc/API.md §6.4, logbox_core/reports.py). Messages of known hosts,
# programs and severities go through the real ingest path (syslog-ng -> spool -> logbox-indexd)
# of a local appliance, a real logbox-searchd serves them, and reports are built over the period
# that holds them: their numbers equal an oracle computed from the messages the test sent (count,
# by severity, top hosts and programs, histogram sum = total), for every message and for a saved
# search; the downloadable HTML escapes hostile hosts, programs and names and carries its charts
# as PNG data URIs; a user cannot report on a logspace they may not read (at creation, and at
# build time after losing the right); the schedule emails a report once per period and, after
# downtime, only the last missed period, to a real SMTP server (aiosmtpd, STARTTLS) started here,
# the email's HTML referencing inline PNG charts by cid; and the API's routes, the client
# library, `make run`'s schedule and the web UI's reports page (list, make, download per period,
# send now, delete) work, obey the rights and audit.
from __future__ import annotations

import base64
import datetime as dt
import email
import email.policy
import html
import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from lbtest.appliance import Appliance
from lbtest.collector import free_ports
from lbtest.devrun import DevRun
from lbtest.receivers import Mail, ReceiverPKI, smtp_server
from lbtest.rpc import RpcServer
from lbtest.searchd import Searchd, searchd_binary
from lbtest.wait import wait_until
from logbox_client import Client, LogboxError
from logbox_core import reports
from logbox_core.accounts import Accounts, Invalid
from logbox_core.constants import SEVERITIES
from logbox_core.deliver import SmtpRelay, send_email
from logbox_core.report_build import ReportRefused, build
from logbox_core.report_render import email_message, page
from logbox_core.reports import Reports, check_report, check_searches, parse_period
from logbox_core.searchd import Searchd as SearchdClient
from logbox_rpc import create_app
from logbox_webui import create_app as create_webui

PASSWORD = "correct horse battery"
HOSTS = ["web1", "web2", "db1", "<script>alert(1)</script>", "mail1"]
PROGRAMS = ["sshd", "nginx", '"><svg/onload=alert(2)>', "cron"]
N = 240
ROUTES = [{"name": "secret", "host": "^secrethost"}]
PNG = b"\x89PNG\r\n\x1a\n"
# the tags of report_render's template: a value that became a tag would add another
TEMPLATE_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "b"}
TEMPLATE_TAGS |= {"section", "code", "img", "table", "tr", "th", "td", "div"}


@dataclass
class Sent:
    host: str
    program: str
    severity: int


@dataclass
class Stack:
    app: Appliance
    sd: SearchdClient
    acc: Accounts
    sent: list[Sent]
    clock: list[float]  # the accounts store's clock (None: real time)


def sent_messages() -> list[Sent]:
    out = []
    for i in range(N):
        out.append(Sent(HOSTS[i % 5 if i % 7 else 0], PROGRAMS[i % 4], (i * 3) % 8))
    return out


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("reports")
    msgs = sent_messages()
    with Appliance(root, routes=ROUTES) as app:
        lines = []
        for i, m in enumerate(msgs):
            ts = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            lines.append(f"<{8 + m.severity}>1 {ts} {m.host} {m.program} {i} - - report {i}\n")
        lines += [f"<14>1 - secrethost prog {i} - - secret {i}\n" for i in range(5)]
        app.send("".join(lines).encode(), "tcp")
        wait_until(
            lambda: app.count("main") >= N and app.count("secret") >= 5,
            "all messages stored",
            60,
            interval=0.1,
            check=app.assert_alive,
        )
        app.settle("main", quiet=0.5)
        assert app.count("main") == N
        sd = Searchd(searchd_binary(top), app.data, root / "searchd.sock").start()
        clock = [0.0]
        acc = Accounts(root / "accounts", clock=lambda: clock[0] or time.time())
        acc.add_user("admin", PASSWORD, "admin")
        acc.add_user("alice", PASSWORD, "searcher", ["main"])
        try:
            yield Stack(app, SearchdClient(sd.sock), acc, msgs, clock)
        finally:
            acc.close()
            assert sd.stop() == 0, sd.log()


def today(kind: str = "daily") -> reports.Period:
    return parse_period(kind, "current", time.time())


def oracle(msgs: list[Sent]) -> dict[str, Any]:
    """What a report over msgs must say."""
    hosts = Counter(m.host.lower() for m in msgs)
    programs = Counter(m.program.lower() for m in msgs)
    return {
        "total": len(msgs),
        "severities": {
            s: sum(1 for m in msgs if m.severity == i) for i, s in enumerate(SEVERITIES)
        },
        "hosts": sorted(hosts.items(), key=lambda kv: (-kv[1], kv[0].encode())),
        "programs": sorted(programs.items(), key=lambda kv: (-kv[1], kv[0].encode())),
    }


def numbers(sec: Any) -> dict[str, Any]:
    assert sum(n for _, n in sec.histogram) == sec.total
    return {
        "total": sec.total,
        "severities": sec.severities,
        "hosts": sec.hosts,
        "programs": sec.programs,
    }


def make(st: Stack, owner: str, **members: Any) -> reports.Report:
    body = {"name": "daily main", "logspace": "main", "period": "daily", **members}
    return Reports(st.acc).create(owner, check_report(body))


def test_numbers_match_the_oracle(stack: Stack) -> None:
    r = make(stack, "alice")
    for kind in ("daily", "weekly", "monthly"):
        p = today(kind)
        data = build(stack.acc, stack.sd, r, p)
        assert [s.title for s in data.sections] == ["All messages"]
        assert numbers(data.sections[0]) == oracle(stack.sent), kind
        assert len(data.sections[0].histogram) <= p.buckets()
        assert data.alerts is None  # no alerts store: "no alerts defined"
    # A saved search narrows its section; the sections come in the report's order.
    s = stack.acc.save_search(
        "alice", {"name": "sshd", "logspace": "main", "query": "program:sshd"}
    )
    r2 = make(stack, "alice", searches=[s.id])
    data = build(stack.acc, stack.sd, r2, today())
    assert [x.title for x in data.sections] == ["sshd"]
    assert numbers(data.sections[0]) == oracle([m for m in stack.sent if m.program == "sshd"])
    # The period before holds none of them.
    before = build(stack.acc, stack.sd, r2, today().previous())
    assert before.sections[0].total == 0 and before.period.id != data.period.id


def test_alert_counts(stack: Stack) -> None:
    """The alerts' DBs as logbox_core/alerts.py lays them out (alerts: {"id", "owner", "name",
    "search", ...}; alert_history: id + µs time + n -> {"kind", ...}): the owner's alerts on
    the report's logspace and their firings in the period, test firings left out."""
    env, _ = stack.acc._open()
    alerts, history = env.open_db(b"alerts"), env.open_db(b"alert_history")
    s = stack.acc.save_search("alice", {"name": "disk", "logspace": "main", "query": "disk"})
    a_id, b_id, c_id = "a1a1a1a1a1a1", "b2b2b2b2b2b2", "c3c3c3c3c3c3"
    day = today()
    with env.begin(write=True) as txn:
        for aid, owner, name in ((a_id, "alice", "<b>disk</b>"), (b_id, "admin", "admin's"),
                                 (c_id, "alice", "quiet")):  # fmt: skip
            rec = {"id": aid, "owner": owner, "name": name, "search": s.id, "enabled": True}
            txn.put(aid.encode(), json.dumps(rec).encode(), db=alerts)
        fired = [(a_id, day.start_us + 10, "firing"), (a_id, day.start_us + 20, "firing"),
                 (a_id, day.start_us + 30, "test"), (a_id, day.end_us - 1, "firing"),
                 (a_id, day.start_us - 5, "firing"), (b_id, day.start_us + 40, "firing")]  # fmt: skip
        for n, (aid, t, kind) in enumerate(fired):
            key = aid.encode() + t.to_bytes(8, "big") + n.to_bytes(2, "big")
            txn.put(key, json.dumps({"kind": kind, "count": 1}).encode(), db=history)
    r = make(stack, "alice")
    data = build(stack.acc, stack.sd, r, day)
    assert data.alerts == {"<b>disk</b>": 3, "quiet": 0} and data.alerts_defined == 2
    assert build(stack.acc, stack.sd, r, day.previous()).alerts == {"<b>disk</b>": 1, "quiet": 0}
    admin = build(stack.acc, stack.sd, make(stack, "admin"), day)
    assert admin.alerts == {"<b>disk</b>": 3, "admin's": 1, "quiet": 0}
    text = page(data, box="box1")
    assert "<b>disk</b>" not in text and "&lt;b&gt;disk&lt;/b&gt;" in text
    # on another logspace: none of them
    assert build(stack.acc, stack.sd, make(stack, "admin", logspace="secret"), day).alerts is None


class Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.srcs: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "img":
            self.srcs.append(dict(attrs)["src"] or "")


def test_page_escapes_hostile_values_and_holds_png_charts(stack: Stack) -> None:
    s = stack.acc.save_search(
        "alice", {"name": "<script>alert(3)</script>", "logspace": "main", "query": '"<b>" OR *'}
    )
    r = make(stack, "alice", name="<img src=x onerror=alert(4)>", searches=[s.id])
    text = page(build(stack.acc, stack.sd, r, today()), box="box1")
    p = Images()
    p.feed(text)
    assert set(p.tags) <= TEMPLATE_TAGS, set(p.tags) - TEMPLATE_TAGS
    # the hostile host, program and saved search name: there, escaped
    for v in ("<script>alert(1)</script>", '"><svg/onload=alert(2)>', "<script>alert(3)</script>"):
        assert v not in text and v in html.unescape(text)
    assert "<img src=x" not in text
    assert len(p.srcs) == 2  # the histogram and the severities
    for src in p.srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)


def test_rights(stack: Stack) -> None:
    # alice may not read "secret": her saved searches there are refused, and a report on it too.
    with pytest.raises(Invalid):
        check_searches(stack.acc, stack.acc.get_user("admin"), "main", ["0123456789ab"])
    r = make(stack, "alice", logspace="secret")
    with pytest.raises(ReportRefused):
        build(stack.acc, stack.sd, r, today())
    # admin may: the secret messages are counted
    ra = make(stack, "admin", logspace="secret")
    assert build(stack.acc, stack.sd, ra, today()).sections[0].total == 5
    # alice loses main: her report on main is refused from then on
    bob = stack.acc.add_user("bob", PASSWORD, "searcher", ["main"])
    rb = make(stack, bob.name)
    assert build(stack.acc, stack.sd, rb, today()).sections[0].total == N
    stack.acc.update_user("bob", logspaces=["other"])
    with pytest.raises(ReportRefused):
        build(stack.acc, stack.sd, rb, today())


def test_periods() -> None:
    t = dt.datetime(2026, 11, 26, 13, 5, tzinfo=dt.UTC).timestamp()
    assert parse_period("daily", "last", t).id == "2026-11-25"
    assert parse_period("weekly", "current", t).id == "2026-W48"
    assert parse_period("weekly", "2026-W48", t).start == dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
    assert parse_period("monthly", "last", t).id == "2026-10"
    assert parse_period("monthly", "2026-02", t).end == dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    assert parse_period("monthly", "2025-12", t).buckets() == 31
    for kind, bad in (("daily", "2026-11-27"), ("daily", "2026-13-01"), ("weekly", "x")):
        with pytest.raises(Invalid):
            parse_period(kind, bad, t)
    assert re.fullmatch(r"\d{4}-W\d{2}", reports.last_complete("weekly", t).id)


# ---------------------------------------------------------------- email and the schedule


@pytest.fixture(scope="module")
def smtp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, list[Mail]]]:
    """A real SMTP server requiring STARTTLS, and the relay settings that reach it."""
    pki = ReceiverPKI.make(tmp_path_factory.mktemp("reportsmtp"))
    with smtp_server(pki) as (port, box):
        relay = SmtpRelay(
            host="127.0.0.1", port=port, sender="reports@logbox.test", ca=pki.ca.read_text()
        )
        yield relay, box


def parts(raw: bytes) -> tuple[str, dict[str, bytes], email.message.EmailMessage]:
    """An email's HTML part and its inline images by Content-ID (without <>)."""
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(msg, email.message.EmailMessage)
    body = msg.get_body(("html",))
    assert body is not None
    images = {}
    for part in msg.walk():
        if part.get_content_type() == "image/png":
            assert part.get_content_disposition() == "inline"
            images[part["Content-ID"].strip("<>")] = part.get_content()
    return body.get_content(), images, msg


def check_email(raw: bytes, expect: dict[str, Any]) -> email.message.EmailMessage:
    """The email's charts are inline PNGs its HTML references by cid, and its totals are the
    oracle's."""
    text, images, msg = parts(raw)
    cids = re.findall(r'src="cid:([^"]+)"', text)
    assert len(cids) == 2 and set(cids) == set(images), (cids, list(images))
    for png in images.values():
        assert png.startswith(PNG) and len(png) > 1000
    assert msg.get_body(("plain",)) is not None
    total = re.search(r'<b class="total">(\d+)</b>', text)
    assert total and int(total.group(1)) == expect["total"]
    for sev, n in expect["severities"].items():
        assert f"{sev} {n}" in msg.get_body(("plain",)).get_content() or n == 0
    return msg


def test_email_through_a_starttls_relay(stack: Stack, smtp: tuple[Any, list[Mail]]) -> None:
    relay, box = smtp
    box.clear()
    r = make(stack, "alice", recipients=["ops@example.org", "boss@example.org"])
    send_email(relay, email_message(build(stack.acc, stack.sd, r, today()), relay, box="box1"))
    wait_until(lambda: len(box) == 1, "the report is received", 10)
    m = box[0]
    assert m.tls and m.mail_from == "reports@logbox.test"
    assert sorted(m.rcpt_tos) == ["boss@example.org", "ops@example.org"]
    msg = check_email(m.data, oracle(stack.sent))
    assert msg["Subject"] == "[logbox] daily main: main, daily report " + today().id


def test_run_due_sends_once_per_period_and_catches_up(
    stack: Stack, smtp: tuple[Any, list[Mail]]
) -> None:
    relay, box = smtp
    box.clear()
    now = time.time()
    stack.clock[0] = now
    try:
        r = make(stack, "alice", name="sched", recipients=["ops@example.org"])
        r_off = make(stack, "alice", name="off", recipients=["ops@example.org"], enabled=False)
    finally:
        stack.clock[0] = 0.0
    store = Reports(stack.acc)
    mine = {r.id, r_off.id}

    def run(at: float) -> list[reports.RunResult]:
        out = [x for x in reports.run_due(stack.acc, stack.sd, relay, now=at) if x.report in mine]
        assert all(x.error is None for x in out), out
        return out

    # made today: yesterday's period ended before it, so nothing is due today
    assert run(now) == []
    end = today().end.timestamp()
    # just after today's end: today's period is sent, once, with today's messages
    sent = run(end + 300)
    assert [(x.report, x.period) for x in sent] == [(r.id, today().id)]

    # (other tests' reports with recipients are due too: only "sched" is looked at)
    def got() -> list[Mail]:
        return [m for m in box if b"Subject: [logbox] sched:" in m.data]

    wait_until(lambda: len(got()) == 1, "the report is received", 10)
    check_email(got()[0].data, oracle(stack.sent))
    assert run(end + 900) == [] and store.get(r.id).last_sent == today().id
    # three days down: only the last missed period is sent
    later = end + 3 * 86400 + 60
    sent = run(later)
    assert [x.period for x in sent] == [reports.last_complete("daily", later).id]
    assert run(later + 60) == []
    wait_until(lambda: len(got()) == 2, "the caught-up report is received", 10)
    time.sleep(0.2)
    assert len(got()) == 2
    # a relay that refuses: recorded, audited, and still due
    dead = SmtpRelay(host="127.0.0.1", port=1, sender="reports@logbox.test")
    after = later + 86400
    fails = [x for x in reports.run_due(stack.acc, stack.sd, dead, now=after) if x.report in mine]
    assert len(fails) == 1 and "127.0.0.1:1" in (fails[0].error or "")
    assert store.get(r.id).last_error == fails[0].error
    assert [x.period for x in run(after)] == [reports.last_complete("daily", after).id]
    assert store.get(r.id).last_error is None
    entries, _ = stack.acc.audit_entries(action="report_send")
    sends = [e for e in entries if r.id in (e.detail or "")]
    assert len(sends) == 4 and sum(e.status != 200 for e in sends) == 1
    # an owner who loses the right: refused, recorded and audited once, not at every run
    stack.clock[0] = now
    try:
        stack.acc.add_user("dora", PASSWORD, "searcher", ["main"])
        rd = make(stack, "dora", name="dora's", recipients=["ops@example.org"])
    finally:
        stack.clock[0] = 0.0
    stack.acc.update_user("dora", logspaces=["other"])
    mine.add(rd.id)
    first = [x for x in reports.run_due(stack.acc, stack.sd, relay, now=after) if x.report == rd.id]
    assert len(first) == 1 and "may not read" in (first[0].error or "")
    assert [
        x for x in reports.run_due(stack.acc, stack.sd, relay, now=after) if x.report == rd.id
    ] == []
    entries, _ = stack.acc.audit_entries(action="report_send", user="dora")
    assert [e.status for e in entries] == [403]
    assert store.get(rd.id).last_sent is None and "may not read" in (
        store.get(rd.id).last_error or ""
    )


# ---------------------------------------------------------------- the API


@pytest.fixture(scope="module")
def api(
    stack: Stack, smtp: tuple[Any, list[Mail]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[FlaskClient, Any, dict[str, dict[str, str]]]:
    """The API app over the same searchd (its own accounts store: one LMDB environment per
    process), its notify.json naming the test's SMTP relay; the bearer headers of its users."""
    relay, _ = smtp
    root = tmp_path_factory.mktemp("reportsapi")
    notify = root / "notify.json"
    notify.write_text(
        json.dumps(
            {
                "version": 1,
                "smtp": {"host": relay.host, "port": relay.port, "sender": relay.sender,
                         "ca": relay.ca},
            }
        )
    )  # fmt: skip
    app = create_app(
        {
            "SEARCHD_SOCKET": str(stack.sd.socket_path),
            "ACCOUNTS_PATH": str(root / "accounts"),
            "DELIVERY_SETTINGS": str(notify),
            "TESTING": True,
        }
    )
    acc = app.extensions["logbox"].accounts
    acc.add_user("admin", PASSWORD, "admin")
    acc.add_user("alice", PASSWORD, "searcher", ["main"])
    acc.add_user("carol", PASSWORD, "searcher", ["main"])
    heads = {
        u: {"Authorization": f"Bearer {acc.create_token(u, 'tests')[0]}"}
        for u in ("admin", "alice", "carol")
    }
    return app.test_client(), app, heads


def test_api(
    api: tuple[FlaskClient, Any, dict[str, dict[str, str]]],
    stack: Stack,
    smtp: tuple[Any, list[Mail]],
) -> None:
    client, app, h = api
    box = smtp[1]
    acc = app.extensions["logbox"].accounts
    url = "/api/v1/reports"
    body = {"name": "ops", "logspace": "main", "period": "daily", "recipients": ["ops@x.example"]}
    r = client.post(url, json=body, headers=h["alice"])
    assert r.status_code == 201, r.data
    rep = r.get_json()
    assert rep["owner"] == "alice" and rep["enabled"] and rep["last_sent"] is None
    # alice's: carol does not see it ("not found"), the admin does
    assert client.get(url, headers=h["carol"]).get_json()["reports"] == []
    assert client.get(f"{url}/{rep['id']}", headers=h["carol"]).status_code == 404
    assert [x["id"] for x in client.get(url, headers=h["admin"]).get_json()["reports"]] == [
        rep["id"]
    ]
    # rights: alice may not report on secret, nor move hers there
    r = client.post(url, json={**body, "logspace": "secret"}, headers=h["alice"])
    assert r.status_code == 403 and r.get_json()["error"]["code"] == "forbidden"
    r = client.patch(f"{url}/{rep['id']}", json={"logspace": "secret"}, headers=h["alice"])
    assert r.status_code == 403
    # bad members; someone else's saved search
    for bad in ({"period": "hourly"}, {"recipients": ["a@b, c@d"]}, {"searches": ["x"]}):
        r = client.post(url, json={**body, **bad}, headers=h["alice"])
        assert r.status_code == 400 and r.get_json()["error"]["code"] == "bad_parameter", bad
    other = acc.save_search("carol", {"name": "c", "logspace": "main", "query": "cron"})
    r = client.post(url, json={**body, "searches": [other.id]}, headers=h["alice"])
    assert r.status_code == 400 and other.id in r.get_json()["error"]["message"]
    # the numbers of today, as JSON and as the page to download
    r = client.get(f"{url}/{rep['id']}/render?period=current&format=json", headers=h["alice"])
    assert r.status_code == 200, r.data
    sec = r.get_json()["sections"][0]
    assert sec["total"] == N and sec["severities"] == oracle(stack.sent)["severities"]
    r = client.get(f"{url}/{rep['id']}/render?period=current", headers=h["alice"])
    assert r.status_code == 200 and r.mimetype == "text/html"
    assert r.headers["Content-Disposition"] == (
        f'attachment; filename="report-{rep["id"]}-{today().id}.html"'
    )
    assert r.get_data(as_text=True).count("data:image/png;base64,") == 2
    r = client.get(f"{url}/{rep['id']}/render?period=2999-01-01", headers=h["alice"])
    assert r.status_code == 400
    # send now: to the SMTP server, audited
    n = len(box)
    r = client.post(f"{url}/{rep['id']}/send?period=current", headers=h["alice"])
    assert r.status_code == 200, r.data
    assert r.get_json() == {"report": rep["id"], "period": today().id, "to": ["ops@x.example"]}
    wait_until(lambda: len(box) == n + 1, "the report is received", 10)
    check_email(box[-1].data, oracle(stack.sent))
    # losing the right: render and send are refused
    acc.update_user("alice", logspaces=["other"])
    try:
        r = client.get(f"{url}/{rep['id']}/render", headers=h["alice"])
        assert r.status_code == 403
    finally:
        acc.update_user("alice", logspaces=["main"])
    r = client.patch(f"{url}/{rep['id']}", json={"enabled": False}, headers=h["admin"])
    assert r.status_code == 200 and r.get_json()["enabled"] is False
    r = client.delete(f"{url}/{rep['id']}", headers=h["alice"])
    assert (
        r.status_code == 200
        and client.get(f"{url}/{rep['id']}", headers=h["alice"]).status_code == 404
    )
    entries, _ = acc.audit_entries(limit=1000)
    acts = [e.action for e in entries if rep["id"] in (e.detail or "")]
    for a in ("report_create", "report_render", "report_send", "report_update", "report_delete"):
        assert a in acts, (a, acts)


# ---------------------------------------------------------------- make run


def test_make_run_emails_due_reports(
    top: Path, tmp_path: Path, smtp: tuple[Any, list[Mail]]
) -> None:
    """`make run`'s supervisor runs the schedule: a report made before the last period ended
    (as if long ago) is emailed for that period, through the relay of <data>/etc/notify.json."""
    relay, box = smtp
    data = tmp_path / "data"
    (data / "etc").mkdir(parents=True)
    (data / "run").mkdir()
    ports = free_ports()
    (data / "etc" / "collector.toml").write_text(
        "[ports]\n" + "".join(f"{k} = {v}\n" for k, v in ports.items())
    )
    smtp_doc = {"host": relay.host, "port": relay.port, "sender": relay.sender, "ca": relay.ca}
    (data / "etc" / "notify.json").write_text(json.dumps({"version": 1, "smtp": smtp_doc}))
    acc = Accounts(data / "accounts")
    try:
        acc.add_user("admin", PASSWORD, "admin")
        store = Reports(acc)
        r = store.create("admin", check_report({"name": "devrun", "logspace": "main",
                                                "period": "daily",
                                                "recipients": ["ops@example.org"]}))  # fmt: skip
        store._change(r.id, lambda rec: rec.update(sent_through_us=0))
    finally:
        acc.close()
    d = DevRun(top, data, extra={"LOGBOX_ADMIN_PASSWORD": PASSWORD})
    want = reports.last_complete("daily", time.time()).id
    try:
        line = d.until(f"period {want} sent", timeout=90)
        assert r.id in line, line
        got = [m for m in box if b"Subject: [logbox] devrun:" in m.data]
        assert len(got) == 1 and got[0].tls and got[0].rcpt_tos == ["ops@example.org"]
        check_email(got[0].data, oracle([]))
    finally:
        out = "".join(d.lines) + d.stop()
    assert d.proc.returncode == 0, out


# ---------------------------------------------------------------- logbox_client


def test_client_through_gunicorn(
    stack: Stack, smtp: tuple[Any, list[Mail]], tmp_path: Path
) -> None:
    """logbox_client's report methods against the real API (gunicorn behind nginx)."""
    relay, box = smtp
    notify = tmp_path / "notify.json"
    smtp_doc = {"host": relay.host, "port": relay.port, "sender": relay.sender, "ca": relay.ca}
    notify.write_text(json.dumps({"version": 1, "smtp": smtp_doc}))
    rpc = RpcServer(
        tmp_path / "rpc",
        searchd_socket=Path(stack.sd.socket_path),
        data=stack.app.data,
        workers=1,
        threads=4,
        env={"LOGBOX_DELIVERY_SETTINGS": str(notify)},
    )
    with rpc:
        c = Client(rpc.url, verify=str(rpc.cafile))
        c.login("admin", rpc.admin_password)
        s = c.save_search("crons", "program:cron")
        r = c.create_report("cron weekly", period="weekly", searches=[s["id"]],
                            recipients=["ops@example.org"])  # fmt: skip
        assert [x["id"] for x in c.reports()] == [r["id"]] and c.report(r["id"]) == r
        data = c.report_data(r["id"], "current")
        cron = oracle([m for m in stack.sent if m.program == "cron"])
        assert data["period"]["id"] == today("weekly").id
        assert data["sections"][0]["total"] == cron["total"]
        page_html = c.render_report(r["id"], "current").decode()
        assert page_html.count("data:image/png;base64,") == 2
        n = len(box)
        assert c.send_report(r["id"], "current")["to"] == ["ops@example.org"]
        wait_until(lambda: len(box) == n + 1, "the report is received", 10)
        check_email(box[-1].data, cron)
        assert c.update_report(r["id"], enabled=False)["enabled"] is False
        assert c.delete_report(r["id"])["id"] == r["id"]
        with pytest.raises(LogboxError) as e:
            c.report(r["id"])
        assert e.value.status == 404


# ---------------------------------------------------------------- the web UI

BASE = "https://localhost"  # the session cookie is Secure; Flask-WTF checks the Referer


class Browser:
    """The web UI's test client over HTTPS, signed in, sending a same-site Referer."""

    def __init__(self, app: Any, user: str) -> None:
        self.c = app.test_client()
        page = self.get("/login").get_data(as_text=True)
        r = self.post("/login", {"username": user, "password": PASSWORD, "csrf_token": csrf(page)})
        assert r.status_code == 302, r.get_data(as_text=True)[:500]

    def get(self, url: str) -> Any:
        return self.c.get(url, base_url=BASE)

    def post(self, url: str, data: dict[str, Any]) -> Any:
        return self.c.post(url, base_url=BASE, data=data, headers={"Referer": f"{BASE}/"})


def csrf(page: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert m, page[:500]
    return m.group(1)


def test_web_ui(stack: Stack, smtp: tuple[Any, list[Mail]], tmp_path: Path) -> None:
    relay, box = smtp
    notify = tmp_path / "notify.json"
    smtp_doc = {"host": relay.host, "port": relay.port, "sender": relay.sender, "ca": relay.ca}
    notify.write_text(json.dumps({"version": 1, "smtp": smtp_doc}))
    app = create_webui(
        {
            "SEARCHD_SOCKET": stack.sd.socket_path,
            "ACCOUNTS_PATH": str(tmp_path / "accounts"),
            "DATA_DIR": str(stack.app.data),
            "DELIVERY_SETTINGS": str(notify),
            "TESTING": True,
        }
    )
    acc = app.extensions["logbox"].accounts
    acc.add_user("alice", PASSWORD, "searcher", ["main"])
    acc.add_user("carol", PASSWORD, "searcher", ["main"])
    s = acc.save_search("alice", {"name": "ssh", "logspace": "main", "query": "program:sshd"})
    alice = Browser(app, "alice")
    page = alice.get("/reports").get_data(as_text=True)
    assert 'id="report-form"' in page and 'id="nav-reports"' in page
    assert f'value="{s.id}"' in page  # her saved search is offered
    hostile = "<script>alert(5)</script>"
    form = {"csrf_token": csrf(page), "name": hostile, "logspace": "main", "period": "daily",
            "searches": [s.id], "recipients": "ops@example.org, boss@example.org",
            "enabled": "on"}  # fmt: skip
    r = alice.post("/reports", form)
    assert r.status_code == 303
    page = alice.get("/reports").get_data(as_text=True)
    assert hostile not in page and html.escape(hostile) in page
    (rid,) = re.findall(r'<tr class="report" data-id="([0-9a-f]{12})"', page)
    assert f'id="report-download-{rid}"' in page and f'id="report-send-{rid}"' in page
    periods = re.findall(r'class="report-period" data-period="([^"]+)"', page)
    assert periods[-1] == "current" and len(periods) == 6, periods
    assert periods[0] == today().previous().previous().id
    # downloads: the period so far holds the sshd messages; an earlier one none
    r = alice.get(f"/reports/{rid}/download?period=current")
    assert r.status_code == 200 and r.mimetype == "text/html"
    assert (
        r.headers["Content-Disposition"] == f'attachment; filename="report-{rid}-{today().id}.html"'
    )
    body = r.get_data(as_text=True)
    assert body.count("data:image/png;base64,") == 2 and hostile not in body
    sshd = oracle([m for m in stack.sent if m.program == "sshd"])
    assert f'<b class="total">{sshd["total"]}</b>' in body
    r = alice.get(f"/reports/{rid}/download?period={periods[0]}")
    assert r.status_code == 200 and '<b class="total">0</b>' in r.get_data(as_text=True)
    # send now (the last complete period), through the SMTP server
    n = len(box)
    r = alice.post(f"/reports/{rid}/send", {"csrf_token": csrf(page)})
    assert r.status_code == 303
    wait_until(lambda: len(box) == n + 1, "the report is received", 10)
    assert sorted(box[-1].rcpt_tos) == ["boss@example.org", "ops@example.org"]
    check_email(box[-1].data, oracle([]))
    # carol sees none of it; a report on a logspace alice may not read is refused
    carol = Browser(app, "carol")
    assert rid not in carol.get("/reports").get_data(as_text=True)
    assert carol.get(f"/reports/{rid}/download").status_code == 404
    assert carol.post(f"/reports/{rid}/delete", {"csrf_token": csrf(page)}).status_code in (
        400,
        404,
    )
    r = alice.post("/reports", {**form, "name": "secret", "logspace": "secret", "searches": []})
    assert r.status_code == 403
    # not scheduled, then scheduled again
    r = alice.post(f"/reports/{rid}/enabled", {"csrf_token": csrf(page), "enabled": "off"})
    assert r.status_code == 303 and Reports(acc).get(rid).enabled is False
    assert "(not scheduled)" in alice.get("/reports").get_data(as_text=True)
    r = alice.post(f"/reports/{rid}/enabled", {"csrf_token": csrf(page), "enabled": "on"})
    assert r.status_code == 303 and Reports(acc).get(rid).enabled is True
    # deleted by its owner; everything audited
    r = alice.post(f"/reports/{rid}/delete", {"csrf_token": csrf(page)})
    assert r.status_code == 303 and rid not in alice.get("/reports").get_data(as_text=True)
    entries, _ = acc.audit_entries(user="alice", limit=1000)
    acts = {e.action for e in entries if rid in (e.detail or "")}
    assert {
        "report_create",
        "report_render",
        "report_send",
        "report_update",
        "report_delete",
    } <= acts
