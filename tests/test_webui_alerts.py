# Scenario: alerts in the web UI (webui/UI.md "Alerts") through the Flask app with a real
# searchd over a real store and the accounts in a real LMDB store: a user makes an alert from a
# saved search through the CSRF-protected form (a bad form is refused with the reason and
# nothing saved), edits it, asks for a test-fire (handed to logbox-alertd: the request is in the
# alert's record) and deletes it; each step is audited. Rights: the form refuses a saved search
# of a logspace the user may not read (403) or may not see (404), another user's alert is not
# found (404) while an admin sees and changes it, and the list shows only one's own. The history
# page lists what alertd recorded; the state says logbox-alertd is not running when it is not.
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient
from lbtest import apps
from lbtest.apps import accounts_of
from lbtest.cli import Logbox
from lbtest.searchd import Searchd
from logbox_core.alerts import AlertStore
from logbox_webui import create_app
from werkzeug.test import TestResponse

PASSWORD = "correct horse battery"
BASE = "https://localhost"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, store_cli: Path) -> Path:
    d = tmp_path_factory.mktemp("webuialerts") / "data"
    d.mkdir()
    now = int(time.time())
    apps.ingest_received(
        store_cli, d, f"<14>1 {apps.rfc3339(now - 60)} h1 sshd - - - failed login\n".encode()
    )
    Logbox(store_cli, d, logspace="secret").ingest(b"<14>secret failed 1\n")
    return d


@pytest.fixture(scope="module")
def app(searchd: Searchd, tmp_path_factory: pytest.TempPathFactory) -> Flask:
    root = tmp_path_factory.mktemp("webuialertsapp")
    users = (*apps.USERS, ("nora", "searcher", ("secret",)))
    cfg = apps.app_config(searchd, root, ALERTD_STATUS=str(root / "alertd.status.json"))
    return apps.add_users(create_app(cfg), users)


class Client:
    def __init__(self, app: Flask) -> None:
        self.c: FlaskClient = app.test_client()

    def get(self, url: str) -> TestResponse:
        return self.c.get(url, base_url=BASE)

    def post(self, url: str, data: dict) -> TestResponse:
        return self.c.post(url, base_url=BASE, data=data, headers={"Referer": f"{BASE}/"})


def csrf(page: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert m, page[:500]
    return m.group(1)


def sign_in(app: Flask, user: str) -> Client:
    c = Client(app)
    page = c.get("/login").get_data(as_text=True)
    r = c.post("/login", {"username": user, "password": PASSWORD, "csrf_token": csrf(page)})
    assert r.status_code == 302
    return c


def text(c: Client, url: str, status: int = 200) -> str:
    r = c.get(url)
    assert r.status_code == status, (r.status_code, r.get_data(as_text=True)[:500])
    return r.get_data(as_text=True)


def test_make_edit_test_delete_and_rights(app: Flask) -> None:
    acc = accounts_of(app)
    store = AlertStore(acc)
    alice, admin, nora = sign_in(app, "alice"), sign_in(app, "admin"), sign_in(app, "nora")
    s = acc.save_search("alice", {"name": "ssh", "logspace": "main", "query": "failed"})
    secret = acc.save_search("admin", {"name": "sec", "logspace": "secret", "query": "failed",
                                       "shared": True})  # fmt: skip
    # the saved search's "Alert" link, the form with it chosen
    assert f'id="saved-alert-{s.id}"' in text(alice, "/saved")
    form_page = text(alice, f"/alerts/new?search={s.id}")
    assert f'<option value="{s.id}" selected>' in form_page
    token = csrf(form_page)
    body = {"csrf_token": token, "name": "ssh storm", "search": s.id, "kind": "above",
            "n": "5", "window_s": "60", "group_by": "host", "cooldown_s": "120",
            "enabled": "on", "email": "ops@example.org, b@example.org", "syslog": "on"}  # fmt: skip
    # refusals: nothing saved, the reason shown
    r = alice.post("/alerts/new", {**body, "window_s": "0"})
    assert r.status_code == 400 and 'id="alert-error"' in r.get_data(as_text=True)
    assert "window_s" in r.get_data(as_text=True)
    r = alice.post("/alerts/new", {**body, "email": "not an address"})
    assert r.status_code == 400 and store.list() == []
    r = alice.post("/alerts/new", {**body, "search": secret.id})
    assert r.status_code == 404  # a shared search of a logspace alice may not read: not hers
    nora_own = acc.save_search("nora", {"name": "n", "logspace": "main", "query": "x"})
    r = nora.post("/alerts/new", {**body, "csrf_token": csrf(text(nora, "/alerts/new")),
                                  "search": nora_own.id})  # fmt: skip
    assert r.status_code == 403  # her own saved search, on a logspace she may not read
    assert store.list() == []
    # made
    r = alice.post("/alerts/new", body)
    assert r.status_code == 303
    (a,) = store.list()
    assert r.headers["Location"].endswith(f"/alerts/{a.id}")
    assert (a.owner, a.name, a.cooldown_s) == ("alice", "ssh storm", 120)
    assert a.condition == {"kind": "above", "n": 5, "window_s": 60, "group_by": "host"}
    assert a.actions == ({"type": "email", "to": ["ops@example.org", "b@example.org"]},
                         {"type": "syslog"})  # fmt: skip
    e = acc.audit_entries(action="alert_create", limit=1)[0][0]
    assert (e.user, e.logspace, e.status) == ("alice", "main", 201)
    # listed with its state (alertd does not run here), for alice and the admin, not nora
    listing = text(alice, "/alerts")
    assert f'data-id="{a.id}" data-state="unknown"' in listing and 'id="alertd-down"' in listing
    assert a.id in text(admin, "/alerts") and a.id not in text(nora, "/alerts")
    dash = text(alice, "/status")  # the dashboard's alerts card
    assert f'<tr class="status-alert" data-id="{a.id}" data-state="unknown">' in dash
    assert 'id="status-alerts"' not in text(nora, "/status")
    text(nora, f"/alerts/{a.id}", 404)
    text(nora, f"/alerts/{a.id}/history", 404)
    # edited: disabled, any
    page = text(alice, f"/alerts/{a.id}")
    assert 'id="alert-test-submit"' in page and 'id="alert-state"' in page
    edit = {**body, "csrf_token": csrf(page), "kind": "any"}
    del edit["enabled"]
    r = alice.post(f"/alerts/{a.id}", edit)
    assert r.status_code == 303
    a2 = store.get(a.id)
    assert a2 is not None and a2.condition == {"kind": "any"} and not a2.enabled
    assert acc.audit_entries(action="alert_update", limit=1)[0][0].user == "alice"
    # the admin may change it too (the owner stays)
    r = admin.post(f"/alerts/{a.id}", {**edit, "csrf_token": csrf(text(admin, f"/alerts/{a.id}")),
                                       "name": "renamed"})  # fmt: skip
    assert r.status_code == 303 and store.get(a.id).owner == "alice"  # type: ignore[union-attr]
    # test-fire: handed to alertd, audited; the history page shows what alertd recorded
    r = alice.post(f"/alerts/{a.id}/test", {"csrf_token": csrf(page)})
    assert r.status_code == 303 and r.headers["Location"].endswith(f"/alerts/{a.id}/history")
    req = store.get(a.id).test_request  # type: ignore[union-attr]
    assert req is not None and req["by"] == "alice"
    assert acc.audit_entries(action="alert_test", limit=1)[0][0].status == 202
    store.record(a.id, {"kind": "test", "request": req["id"], "by": "alice", "count": 1,
                        "group": None, "results": [{"type": "syslog", "ok": False,
                                                    "error": "syslog: refused"}],
                        "ok": False, "error": "syslog: refused"})  # fmt: skip
    hist = text(alice, f"/alerts/{a.id}/history")
    assert 'data-kind="test" data-ok="false"' in hist and "syslog: refused" in hist
    # deleted (another's: not found), audited
    r = nora.post(f"/alerts/{a.id}/delete", {"csrf_token": csrf(text(nora, "/alerts"))})
    assert r.status_code == 404
    r = alice.post(f"/alerts/{a.id}/delete", {"csrf_token": csrf(page)})
    assert r.status_code == 303 and store.list() == [] and store.history(a.id) == []
    assert acc.audit_entries(action="alert_delete", limit=1)[0][0].user == "alice"
