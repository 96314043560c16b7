# Scenario: saved searches in the web UI (webui/UI.md "Saved searches"), through the Flask app
# with a real searchd over a real store: the search page lists the saved searches the user may
# see and saves the one on screen (CSRF-protected form), the saved search's link runs it (the
# same matches), a shared one shows to a reader of its logspace and not to anyone else, the
# owner deletes theirs and nobody else's, a bad query is not saved, and each change is audited.
# The API's side is in test_rpc_app.py (test_saved_searches); the store is the accounts store.
from __future__ import annotations

import html
import re
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient
from lbtest import apps
from lbtest.apps import accounts_of
from lbtest.cli import Logbox
from lbtest.searchd import Searchd
from logbox_webui import create_app
from werkzeug.test import TestResponse

PASSWORD = "correct horse battery"
BASE = "https://localhost"  # the session cookie is Secure; Flask-WTF checks the Referer over HTTPS


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, store_cli: Path) -> Path:
    """main: 40 messages of the last hour, 10 of them "failed"; secret: two."""
    d = tmp_path_factory.mktemp("webuisaved") / "data"
    d.mkdir()
    now = int(time.time())
    lines = [
        f"<14>1 {apps.rfc3339(now - 3000 + i * 60)} host{i % 4} sshd {i} - - "
        f"{'failed' if i % 4 == 0 else 'accepted'} login {i}".encode()
        for i in range(40)
    ]
    apps.ingest_received(store_cli, d, b"\n".join(lines) + b"\n")
    Logbox(store_cli, d, logspace="secret").ingest(b"<14>secret failed 1\n<14>secret 2\n")
    return d


@pytest.fixture(scope="module")
def app(searchd: Searchd, tmp_path_factory: pytest.TempPathFactory) -> Flask:
    root = tmp_path_factory.mktemp("webuisavedapp")
    users = (*apps.USERS, ("nora", "searcher", ("secret",)))
    return apps.add_users(create_app(apps.app_config(searchd, root)), users)


class Client:
    """A test client over HTTPS that sends a same-site Referer with each POST."""

    def __init__(self, app: Flask) -> None:
        self.c: FlaskClient = app.test_client()

    def get(self, url: str) -> TestResponse:
        return self.c.get(url, base_url=BASE)

    def post(self, url: str, data: dict) -> TestResponse:
        return self.c.post(url, base_url=BASE, data=data, headers={"Referer": f"{BASE}/"})


def sign_in(app: Flask, user: str) -> Client:
    c = Client(app)
    page = c.get("/login").get_data(as_text=True)
    r = c.post("/login", {"username": user, "password": PASSWORD, "csrf_token": csrf(page)})
    assert r.status_code == 302, r.get_data(as_text=True)[:500]
    return c


def csrf(page: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert m, page[:500]
    return m.group(1)


def text(c: Client, url: str) -> str:
    r = c.get(url)
    assert r.status_code == 200, (r.status_code, r.get_data(as_text=True)[:500])
    return r.get_data(as_text=True)


def total(page: str) -> int:
    m = re.search(r'id="total" data-total="(\d+)"', page)
    assert m, "no #total"
    return int(m.group(1))


def saved_links(page: str) -> dict[str, str]:
    """name -> href of the search page's saved-search links."""
    box = page[page.index('id="saved-list"') :]
    box = box[: box.index("</ul>")]
    return {
        html.unescape(m.group(2)): html.unescape(m.group(1))
        for m in re.finditer(r'<a class="saved-run" href="([^"]+)">([^<]*)</a>', box)
    }


def save(c: Client, search: str, name: str, shared: bool = False) -> str:
    """Saves the search on the page at `search` through its form; where it was sent."""
    page = text(c, search)
    assert 'id="save-search"' in page
    fields = dict(
        re.findall(
            r'<input type="hidden" name="(\w+)" value="([^"]*)"',
            page.split('id="save-search"')[1].split("</form>")[0],
        )
    )  # noqa: E501
    form = {k: html.unescape(v) for k, v in fields.items()}
    form["name"] = name
    if shared:
        form["shared"] = "on"
    r = c.post("/saved", form)
    assert r.status_code == 303, re.findall(
        r"[^>]*CSRF[^<]*|[^>]*[Rr]eferr?er[^<]*", r.get_data(as_text=True)
    )
    return r.headers["Location"]


def test_save_list_run_share_delete(app: Flask) -> None:
    alice, admin, nora = sign_in(app, "alice"), sign_in(app, "admin"), sign_in(app, "nora")
    search = "/search?q=failed&logspace=main&from=-2h"
    want = total(text(alice, search))
    assert want == 10
    where = save(alice, search, "ssh <failures>")
    # back on the search it saved, with a message
    q = parse_qs(urlsplit(where).query)
    assert q["q"] == ["failed"] and q["logspace"] == ["main"] and q["from"] == ["-2h"]
    page = text(alice, where)
    assert "Saved search &#39;ssh &lt;failures&gt;&#39;." in page
    links = saved_links(page)
    assert list(links) == ["ssh <failures>"]
    assert total(text(alice, links["ssh <failures>"])) == want  # the link runs it
    (s,) = accounts_of(app).list_searches()
    assert (s.owner, s.query, s.from_, s.shared) == ("alice", "failed", "-2h", False)
    e = accounts_of(app).audit_entries(action="saved_search_create", limit=1)[0][0]
    assert (e.user, e.logspace, e.status) == ("alice", "main", 201)
    # private: nobody else sees it, and it cannot be deleted by them (not found)
    assert saved_links(text(admin, "/search")) == {}
    r = admin.post(f"/saved/{s.id}/delete", {"csrf_token": csrf(text(admin, "/saved"))})
    assert r.status_code == 404
    # shared on main: admin (reads everything) sees it, nora (secret only) does not
    accounts_of(app).update_search(s.id, {"shared": True})
    assert list(saved_links(text(admin, "/search"))) == ["ssh <failures>"]
    assert saved_links(text(nora, "/search")) == {}
    assert s.id not in text(nora, "/saved")
    # the manage page: alice's row has a delete button, the admin's too (shared), and it goes
    listing = text(alice, "/saved")
    assert f'id="saved-delete-{s.id}"' in listing and 'id="saved-searches"' in listing
    r = alice.post(f"/saved/{s.id}/delete", {"csrf_token": csrf(listing)})
    assert r.status_code == 303 and accounts_of(app).list_searches() == []
    e = accounts_of(app).audit_entries(action="saved_search_delete", limit=1)[0][0]
    assert e.user == "alice" and e.detail == f"saved search {s.id} 'ssh <failures>' of alice"


def test_not_saved(app: Flask) -> None:
    """A query searchd cannot parse, a logspace the user may not read, no CSRF token, no
    name: nothing saved, and the page says why."""
    alice = sign_in(app, "alice")
    token = csrf(text(alice, "/search?q=failed&logspace=main"))
    base = {"csrf_token": token, "logspace": "main", "q": "failed", "name": "x"}
    r = alice.post("/saved", {**base, "q": "(failed OR"})
    assert r.status_code == 303
    back = alice.get(r.headers["Location"])  # the search again: 400, its query error shown
    assert back.status_code == 400 and "Not saved: " in back.get_data(as_text=True)
    r = alice.post("/saved", {**base, "logspace": "secret"})
    assert r.status_code == 403
    r = alice.post("/saved", {k: v for k, v in base.items() if k != "csrf_token"})
    assert r.status_code == 400
    r = alice.post("/saved", {**base, "name": ""})
    assert r.status_code == 303 and "Not saved: name" in text(alice, r.headers["Location"])
    assert accounts_of(app).list_searches() == []


def test_saved_event_time(app: Flask) -> None:
    """A search by event time (time=event) is saved with it, and its link runs it so."""
    alice = sign_in(app, "alice")
    search = "/search?q=failed&logspace=main&from=-2h&time=event"
    want = total(text(alice, search))
    assert want == 10
    where = save(alice, search, "failures by event time")
    assert parse_qs(urlsplit(where).query)["time"] == ["event"]
    (s,) = (s for s in accounts_of(app).list_searches() if s.name == "failures by event time")
    assert s.time == "event" and s.to_json()["time"] == "event"
    link = saved_links(text(alice, "/search"))["failures by event time"]
    assert parse_qs(urlsplit(html.unescape(link)).query)["time"] == ["event"]
    page = text(alice, link)
    assert total(page) == want and 'id="time-basis-note"' in page
    accounts_of(app).delete_search(s.id)
