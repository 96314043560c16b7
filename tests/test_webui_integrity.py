# The web UI's integrity page (/integrity, webui/UI.md) and its public key download
# (/integrity/public-key) through Flask's test client, with a real accounts store (LMDB) and real
# reports: a store made by `logbox keys init` and `logbox ingest` over three UTC days in two
# logspaces, sealed with `logbox seal`, checked by `logbox verify --integrity --json --out`. Only
# admins see either (anonymous callers go to /login, a searcher gets 403, audited as denied); the
# page says so when there is no report yet, and 404s for a logspace the report lacks (a hostile
# name shown inert); it shows what the API's GET /api/v1/logspaces/{logspace}/integrity answers
# for the same report, day for day, with the report's time, whether the verification key was
# used and the sealing; a store with a block edited shows the day not intact and the problem with
# its place; reads are audited as the API's (integrity, integrity_public_key); the key
# downloaded is the file `keys init` wrote, a PEM public key openssl reads, and a file that is
# not one (the private key beside it) is refused with a 500 page that says so. The admin
# navigation and the status dashboard link the page for admins only.

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from lbtest import apps
from lbtest.apps import accounts_of as accounts
from lbtest.apps import rfc3339
from lbtest.cli import Logbox
from lbtest.htmlpage import Node, Page
from lbtest.pubkey import check_public_key_download
from logbox_rpc import create_app as create_rpc
from logbox_webui import create_app
from werkzeug.test import TestResponse

BASE = "https://localhost"
DAYS = 3
PER_DAY = {"main": 12, "other": 5}
HOSTILE = '<script>alert("x")</script>'


# ---------------------------------------------------------------- fixtures


@dataclass
class Store:
    """A store with sealing set up, its verification key and the CLI."""

    data: Path
    key: str
    cli: Path

    def verify(self, out: Path, data: Path | None = None, key: bool = False) -> int:
        """`logbox verify --integrity --json --out out` of data (else this store): its exit."""
        argv = [str(self.cli), "verify", "--data", str(data or self.data), "--integrity"]
        argv += ["--key", self.key] if key else []
        p = subprocess.run([*argv, "--json", "--out", str(out)], capture_output=True, text=True)
        assert p.returncode in (0, 1), p.stderr
        assert out.is_file(), p.stderr
        return p.returncode


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, store_cli: Path) -> Store:
    """keys init, then PER_DAY messages a day over the DAYS UTC days before today in main and
    other (the ended days are signed), then a seal."""
    data = tmp_path_factory.mktemp("webui_integrity") / "data"
    made = subprocess.run(
        [str(store_cli), "keys", "init", "--data", str(data)], capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    key = re.findall(r"^    ([0-9a-f]{64})$", made.stdout, re.M)
    assert len(key) == 1, made.stdout
    today = int(time.time()) // 86400 * 86400
    for ls, n in PER_DAY.items():
        lines = b"".join(
            f"<14>1 {rfc3339(today - (DAYS - d) * 86400 + 3600 + i)} web-01 app - - - "
            f"{ls} day {d} message {i}\n".encode()
            for d in range(DAYS)
            for i in range(n)
        )
        lb = Logbox(store_cli, data, logspace=ls)
        lb.check(lb.run("ingest", "--received", "header", "-", input=lines))
    seal = subprocess.run(
        [str(store_cli), "seal", "--data", str(data), "--force"], capture_output=True, text=True
    )
    assert seal.returncode == 0, seal.stderr
    return Store(data, key[0], store_cli)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("webui_integrity_app")


def config(root: Path, store: Store, accounts_dir: str) -> dict[str, Any]:
    """A TESTING app's configuration: no searchd (the pages here do not ask it), the report
    and the public key under root and the store."""
    return {
        "SEARCHD_SOCKET": str(root / "no-searchd.sock"),
        "ACCOUNTS_PATH": str(root / accounts_dir),
        "DATA_DIR": str(store.data),
        "INTEGRITY_REPORT": str(root / "integrity.json"),
        "SIGN_PUBKEY": str(store.data / "indexd" / "sign.pub"),
        **apps.status_files(root),
        "TESTING": True,
    }


@pytest.fixture(scope="module")
def app(root: Path, store: Store) -> Flask:
    return apps.add_users(create_app(config(root, store, "accounts")))


@pytest.fixture(scope="module")
def rpc(root: Path, store: Store) -> Flask:
    """The RPC API on the same report and key (an accounts store of its own)."""
    return apps.add_users(create_rpc(config(root, store, "rpc-accounts")), apps.USERS[:1])


class Browser:
    """A test client with a session (the login form's CSRF token)."""

    def __init__(self, app: Flask) -> None:
        self.c = app.test_client()

    def get(self, path: str) -> TestResponse:
        r = self.c.get(path, base_url=BASE)
        assert "Traceback" not in r.text
        return r


def signed_in(app: Flask, name: str) -> Browser:
    b = Browser(app)
    r = b.get("/login")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', r.text)
    assert csrf
    r = b.c.post(
        "/login",
        base_url=BASE,
        data={"username": name, "password": apps.PASSWORD, "csrf_token": csrf.group(1)},
        headers={"Referer": f"{BASE}/"},
    )
    assert r.status_code == 302, r.text[:500]
    return b


@pytest.fixture(scope="module")
def admin(app: Flask) -> Browser:
    return signed_in(app, "admin")


def page(r: TestResponse, status: int = 200) -> Page:
    assert r.status_code == status, (r.status_code, r.text[:1500])
    return Page(r.text)


def last_audit(app: Flask, action: str) -> Any:
    entries, _ = accounts(app).audit_entries(action=action, limit=1)
    assert entries, f"no audit entry for {action}"
    return entries[0]


def audit_count(app: Flask, action: str) -> int:
    entries, _ = accounts(app).audit_entries(action=action, limit=1000)
    return len(entries)


def day_rows(p: Page) -> list[Node]:
    return p.by_id("integrity-days").all("tr", "day")


def api_view(rpc: Flask, logspace: str) -> dict[str, Any]:
    """What the API answers for logspace from the same report."""
    secret, _ = accounts(rpc).create_token("admin", "integrity")
    r = rpc.test_client().get(
        f"/api/v1/logspaces/{logspace}/integrity", headers={"Authorization": f"Bearer {secret}"}
    )
    assert r.status_code == 200, r.data[:400]
    return r.get_json()


# ---------------------------------------------------------------- who may


def test_anonymous_and_searchers_are_refused(app: Flask) -> None:
    anon = Browser(app)
    for path in ("/integrity", "/integrity?logspace=main", "/integrity/public-key"):
        r = anon.get(path)
        assert r.status_code == 302 and r.headers["Location"].startswith("/login"), path
    alice = signed_in(app, "alice")
    for path in ("/integrity", "/integrity?logspace=main", "/integrity/public-key"):
        r = alice.get(path)
        assert r.status_code == 403, path
        assert "integrity-days" not in r.text and "BEGIN PUBLIC KEY" not in r.text
        e = last_audit(app, "denied")
        assert (e.user, e.status) == ("alice", 403) and path.split("?")[0] in e.detail


def test_links_for_admins_only(app: Flask, admin: Browser) -> None:
    p = page(admin.get("/admin/users"))
    assert p.by_id("admin-integrity").attrs["href"] == "/integrity"
    p = page(admin.get("/status"))
    assert p.by_id("status-integrity").attrs["href"] == "/integrity"
    p = page(admin.get("/integrity"))
    assert p.by_id("admin-integrity").attrs.get("aria-current") == "page"
    assert p.by_id("nav-admin").attrs.get("aria-current") == "page"
    alice = signed_in(app, "alice")
    r = alice.get("/status")
    assert r.status_code == 200 and "status-integrity" not in r.text


# ---------------------------------------------------------------- the page


def test_no_report_yet(app: Flask, admin: Browser, root: Path) -> None:
    (root / "integrity.json").unlink(missing_ok=True)
    before = audit_count(app, "integrity")
    p = page(admin.get("/integrity"))
    assert "No verify report yet" in p.by_id("integrity-none").text
    assert "integrity-days" not in p.ids and "integrity-problems" not in p.ids
    assert audit_count(app, "integrity") == before  # nothing was shown


def test_clean_report_as_the_api_shows_it(
    app: Flask, admin: Browser, rpc: Flask, root: Path, store: Store
) -> None:
    report = root / "integrity.json"
    assert store.verify(report) == 0
    doc = json.loads(report.read_text())
    p = page(admin.get("/integrity"))
    # the selector offers the report's logspaces, main chosen
    opts = p.by_id("integrity-logspace").all("option")
    assert [o.attrs["value"] for o in opts] == ["main", "other"]
    assert [o.attrs["value"] for o in opts if "selected" in o.attrs] == ["main"]
    want = api_view(rpc, "main")
    assert want["ok"] is True and len(want["days"]) == DAYS
    assert p.by_id("integrity-ok").attrs["data-ok"] == "yes"
    assert p.by_id("integrity-time").text == doc["time"] == want["verified_at"]
    assert p.by_id("integrity-key").attrs["data-key"] == "no"
    assert p.by_id("integrity-messages").text == str(want["messages"]) == str(DAYS * 12)
    assert p.by_id("integrity-signed").text == str(want["days_signed"])
    assert want["days_signed"] >= DAYS - 1  # the ended days (ingest signs them)
    s = want["sealing"]
    assert s["setup"] and s["seals"] >= 1
    sealing = p.by_id("integrity-sealing").text
    assert f"sealed through epoch {s['last_epoch']} at {s['last_sealed']}" in sealing
    assert "seals not checked (no verification key)" in sealing
    assert p.by_id("integrity-problems").attrs["data-count"] == "0"
    rows = day_rows(p)
    assert [r.attrs["data-day"] for r in rows] == [d["day"] for d in want["days"]]
    for r, d in zip(rows, want["days"], strict=True):
        assert r.attrs["data-intact"] == "yes" and r.attrs["data-signed"] == d["signed"]
        cells = {c.attrs["class"].split()[-1]: c.text for c in r.all("td")}
        assert cells == {
            "messages": str(d["messages"]),
            "intact": "yes",
            "chained": "yes" if d["chained"] else "no",
            "sealed-epoch": str(d["sealed_epoch"]) if d["sealed_epoch"] is not None else "–",
            "sealed-through": d["sealed_through"] or "–",
            "signed": d["signed"],
            "timestamped": d["timestamped"],
            "problems-n": "0",
        }
    e = last_audit(app, "integrity")
    assert (e.user, e.logspace, e.status) == ("admin", "main", 200)
    # the other logspace, chosen in the selector
    p = page(admin.get("/integrity?logspace=other"))
    rows = day_rows(p)
    assert [r.attrs["data-day"] for r in rows] == [d["day"] for d in api_view(rpc, "other")["days"]]
    assert sum(int(r.all("td", "messages")[0].text) for r in rows) == DAYS * 5
    assert last_audit(app, "integrity").logspace == "other"


def test_checked_with_the_verification_key(admin: Browser, root: Path, store: Store) -> None:
    assert store.verify(root / "integrity.json", key=True) == 0
    p = page(admin.get("/integrity"))
    assert p.by_id("integrity-key").attrs["data-key"] == "yes"
    assert "every seal checked with the verification key" in p.by_id("integrity-sealing").text


def test_unknown_logspace(app: Flask, admin: Browser, root: Path, store: Store) -> None:
    assert store.verify(root / "integrity.json") == 0
    before = audit_count(app, "integrity")
    for name in ("nosuch", HOSTILE):
        r = admin.get("/integrity?" + f"logspace={name}")
        p = page(r, 404)
        assert f"has no logspace {name}" in p.by_id("integrity-none").text
        assert "integrity-days" not in p.ids
        assert HOSTILE not in r.text
    assert audit_count(app, "integrity") == before


def test_tampered_store_shows_the_day_and_the_problem(
    admin: Browser, rpc: Flask, root: Path, store: Store
) -> None:
    copy = root / "tampered"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(store.data, copy)
    messages = sorted(copy.glob("main/*/*/messages"))[1]
    b = bytearray(messages.read_bytes())
    b[len(b) // 2] ^= 0x40
    messages.write_bytes(bytes(b))
    day = f"{messages.parent.parent.name}-{messages.parent.name}"
    assert store.verify(root / "integrity.json", data=copy) == 1
    want = api_view(rpc, "main")
    p = page(admin.get("/integrity?logspace=main"))
    assert p.by_id("integrity-ok").attrs["data-ok"] == "no"
    bad = [r for r in day_rows(p) if r.attrs["data-intact"] == "no"]
    assert [r.attrs["data-day"] for r in bad] == [day]
    assert bad[0].all("td", "problems-n")[0].text != "0"
    problems = p.by_id("integrity-problems")
    assert problems.attrs["data-count"] == str(len(want["problems"])) != "0"
    items = problems.all("li", "problem")
    assert [(i.all("code", "path")[0].text, i.all("span", "what")[0].text) for i in items] == [
        (x["path"], x["what"]) for x in want["problems"]
    ]
    edited = [i for i in items if "edited" in i.text]
    assert edited and edited[0].attrs["data-day"] == day
    assert str(messages.parent) in edited[0].all("code", "path")[0].text
    # the other logspace is untouched
    p = page(admin.get("/integrity?logspace=other"))
    assert p.by_id("integrity-ok").attrs["data-ok"] == "yes"


# ---------------------------------------------------------------- the public key


def test_public_key_download(app: Flask, admin: Browser, store: Store, tmp_path: Path) -> None:
    assert store.verify(Path(app.config["INTEGRITY_REPORT"])) == 0
    p = page(admin.get("/integrity"))
    assert p.by_id("integrity-public-key").attrs["href"] == "/integrity/public-key"
    r = admin.get("/integrity/public-key")
    assert r.status_code == 200
    check_public_key_download(
        r.mimetype, r.headers, r.data, store.data / "indexd" / "sign.pub", tmp_path
    )
    e = last_audit(app, "integrity_public_key")
    assert (e.user, e.status) == ("admin", 200)


def test_public_key_missing_or_not_one(app: Flask, admin: Browser, store: Store) -> None:
    old = app.config["SIGN_PUBKEY"]
    try:
        app.config["SIGN_PUBKEY"] = str(store.data / "nosuch.pub")
        r = admin.get("/integrity/public-key")
        assert r.status_code == 404 and "no public key at" in r.text
        app.config["SIGN_PUBKEY"] = str(store.data / "indexd" / "sign.key")
        r = admin.get("/integrity/public-key")
        assert r.status_code == 500 and "is not a PEM public key" in r.text
        assert "PRIVATE" not in r.text and r.mimetype == "text/html"
    finally:
        app.config["SIGN_PUBKEY"] = old
