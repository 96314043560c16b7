# The RPC API app (logbox_rpc, rpc/API.md) through Flask's test client, in front of a real
# logbox-searchd over a real store built with `logbox ingest` and a real accounts store (LMDB):
# answers equal searchd's, every error code of API.md §3 is produced for real and is JSON (bad
# query with its position, each bad parameter, unknown and repeated parameters, the 401 variants,
# 403 on a logspace without rights, 404s, 405 with Allow, 409, 413, 415, 422 from a searchd
# started with --max-terms 1, 429 lockout with Retry-After, 500 without a traceback, 503 with
# searchd gone), the admin flows for users, tokens and the audit log, exports in NDJSON and CSV
# equal to paging through search (over several 10,000-hit pages), and the status shape.

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from lbtest import apps
from lbtest.apps import accounts_of, rfc3339
from lbtest.cli import Logbox
from lbtest.pubkey import check_public_key_download
from lbtest.searchd import Searchd, searchd_binary
from logbox_core.export import EXPORT_PAGE
from logbox_rpc import create_app
from werkzeug.test import TestResponse

N_MAIN = 23_000  # three export pages
BASE_AGO_S = 6 * 3600
PASSWORD = "correct horse battery"
API = "/api/v1"


def corpus(base_s: int, n: int) -> bytes:
    """n RFC 5424 lines, 10 per second from base_s; some with SD, some with non-UTF-8 bytes."""
    words = ["error", "disk", "user", "login", "failed", "ok", "timeout", "cache", "kernel"]
    out = []
    for i in range(n):
        sd = f'[ex@32473 user="u{i % 3}"]' if i % 10 == 0 else "-"
        msg = f"{words[i % 9]} {words[(i * 7) % 9]} req-{i}".encode()
        if i % 101 == 0:
            msg += b' "quoted, comma" raw\xff\xfebytes'
        out.append(
            f"<{(i % 24) * 8 + i % 8}>1 {rfc3339(base_s + i // 10)} host{i % 5} app{i % 3} "
            f"{1000 + i % 17} ID{i % 4} {sd} ".encode()
            + msg
        )
    return b"\n".join(out) + b"\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, store_cli: Path) -> Path:
    """A store: main (N_MAIN messages over the last ~6 h), other (20), secret (5)."""
    d = tmp_path_factory.mktemp("rpcstore") / "data"
    d.mkdir()
    base_s = int(time.time()) - BASE_AGO_S
    apps.ingest_received(store_cli, d, corpus(base_s, N_MAIN))
    Logbox(store_cli, d, logspace="other").ingest(
        b"".join(b"<14>hello other %d\n" % i for i in range(20))
    )
    Logbox(store_cli, d, logspace="secret").ingest(
        b"".join(b"<14>hello secret %d\n" % i for i in range(5))
    )
    return d


@pytest.fixture(scope="module")
def app(searchd: Searchd, tmp_path_factory: pytest.TempPathFactory) -> Flask:
    root = tmp_path_factory.mktemp("rpcapp")
    return apps.add_users(create_app(apps.app_config(searchd, root, **apps.status_files(root))))


@pytest.fixture(scope="module")
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture(scope="module")
def admin(app: Flask) -> dict[str, str]:
    """Headers with an admin API token."""
    secret, _ = accounts_of(app).create_token("admin", "tests")
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture(scope="module")
def alice(app: Flask) -> dict[str, str]:
    """Headers with a token of alice (searcher of main and other)."""
    secret, _ = accounts_of(app).create_token("alice", "tests")
    return {"Authorization": f"Bearer {secret}"}


def error(r: TestResponse, status: int, code: str) -> dict[str, Any]:
    """The error object of r, asserting status, code and the JSON shape."""
    assert r.status_code == status, (r.status_code, r.data[:400])
    assert r.mimetype == "application/json", r.data[:200]
    assert r.headers["Cache-Control"] == "no-store"
    body = r.get_json()
    assert set(body) == {"error"}
    err = body["error"]
    assert err["code"] == code and isinstance(err["message"], str), err
    assert "Traceback" not in r.get_data(as_text=True)
    return err


def last_audit(app: Flask, action: str | None = None) -> Any:
    entries, _ = accounts_of(app).audit_entries(action=action, limit=1)
    assert entries, f"no audit entry for {action}"
    return entries[0]


def without_timing(body: dict[str, Any]) -> dict[str, Any]:
    """body without what changes from call to call (took_ms; from/to default to now)."""
    return {k: v for k, v in body.items() if k not in ("took_ms", "from", "to")}


# ---------------------------------------------------------------- answers equal searchd's


@pytest.mark.parametrize(
    "endpoint,params",
    [
        ("search", {"q": "error req-5*", "limit": "7"}),
        ("search", {"q": "disk", "order": "oldest", "limit": "50", "cursor": "100", "total": "0"}),
        ("search", {"q": "raw", "from": "-1d", "to": "now"}),
        ("count", {"q": "host:host2 severity<=err"}),
        ("histogram", {"q": "*", "buckets": "12"}),
        ("top", {"q": "login", "field": "host", "k": "3"}),
        ("top", {"q": "*", "field": "ex@32473.user"}),
    ],
)
def test_query_answers_are_searchds(
    client: FlaskClient,
    searchd: Searchd,
    admin: dict[str, str],
    app: Flask,
    endpoint: str,
    params: dict[str, str],
) -> None:
    r = client.get(f"{API}/logspaces/main/{endpoint}", query_string=params, headers=admin)
    assert r.status_code == 200, r.data[:300]
    assert r.mimetype == "application/json" and r.headers["Cache-Control"] == "no-store"
    want = searchd.get(f"/v1/{endpoint}", {"logspace": "main", **params})
    assert want.status == 200
    got = r.get_json()
    assert without_timing(got) == without_timing(want.json)
    e = last_audit(app, endpoint)
    assert (e.user, e.logspace, e.query, e.status) == ("admin", "main", params["q"], 200)
    assert e.results == got["total"]


def test_message_and_logspaces(
    client: FlaskClient, searchd: Searchd, admin: dict[str, str], alice: dict[str, str]
) -> None:
    r = client.get(f"{API}/logspaces/main/messages/102", headers=admin)
    assert r.status_code == 200
    assert r.get_json() == searchd.get("/v1/messages/102", {"logspace": "main"}).json
    assert "raw\udcff\udcfebytes" in r.get_json()["message"]
    every = client.get(f"{API}/logspaces", headers=admin).get_json()
    assert every == searchd.get("/v1/logspaces").json
    assert [ls["name"] for ls in every["logspaces"]] == ["main", "other", "secret"]
    mine = client.get(f"{API}/logspaces", headers=alice).get_json()
    assert [ls["name"] for ls in mine["logspaces"]] == ["main", "other"]


def test_query_bytes_pass_through(client: FlaskClient, admin: dict[str, str]) -> None:
    """q may hold bytes that are not UTF-8: they reach searchd as they are."""
    r = client.get(f"{API}/logspaces/main/count?q=raw%FF%FEbytes&from=-1d", headers=admin)
    assert r.status_code == 200, r.data
    assert r.get_json()["total"] == len(range(0, N_MAIN, 101))


def test_me_and_health(client: FlaskClient, alice: dict[str, str]) -> None:
    r = client.get(f"{API}/me", headers=alice)
    assert r.status_code == 200
    body = r.get_json()
    assert body["user"] == {
        "name": "alice",
        "role": "searcher",
        "logspaces": ["main", "other"],
        "disabled": False,
        "created": body["user"]["created"],
    }
    assert body["token"]["user"] == "alice" and body["token"]["kind"] == "api"
    h = client.get(f"{API}/health")
    assert h.status_code == 200 and h.get_json() == {"status": "ok"}


def test_status_shape(client: FlaskClient, alice: dict[str, str]) -> None:
    r = client.get(f"{API}/status", headers=alice)
    assert r.status_code == 200, r.data[:300]
    s = r.get_json()
    assert {"time", "health", "services", "logspaces", "disk", "raid"} <= set(s)
    assert s["services"]["searchd"]["state"] == "running"
    assert s["health"] in ("ok", "degraded")
    assert {ls["name"] for ls in s["logspaces"]} <= {"main", "other"}


def test_archive_targets_and_status(
    client: FlaskClient, admin: dict[str, str], alice: dict[str, str], app: Flask
) -> None:
    """PUT, GET and DELETE /archive (admins only: 403 for alice); the secret is kept when a
    change omits it and never answered; a bad target is a 400 naming the member; the file is
    0640. /status shows logbox-archive's status of each logspace the caller may read, the
    target and error to admins only, and a failing logspace is a problem."""
    c = app.config
    body = {
        "endpoint": "https://s3.example:9000",
        "bucket": "logs",
        "prefix": "box1",
        "access_key": "AK",
        "secret_key": "the-secret",
        "archive_days": 400,
    }
    assert client.put(f"{API}/archive/main", json=body, headers=alice).status_code == 403
    r = client.put(f"{API}/archive/main", json=body, headers=admin)
    assert r.status_code == 200, r.data
    got = r.get_json()
    assert got["secret_key_set"] is True and "secret_key" not in got and got["archive_days"] == 400
    assert last_audit(app, "archive_settings").logspace == "main"
    assert os.stat(c["ARCHIVE_SETTINGS"]).st_mode & 0o777 == 0o640
    # a change without the secret keeps it
    r = client.put(f"{API}/archive/main", json={**body, "secret_key": None} | {}, headers=admin)
    assert r.status_code == 400  # null is not a secret
    nosecret = {k: v for k, v in body.items() if k != "secret_key"} | {"archive_days": 0}
    r = client.put(f"{API}/archive/main", json=nosecret, headers=admin)
    assert r.status_code == 200 and r.get_json()["archive_days"] == 0
    assert json.loads(open(c["ARCHIVE_SETTINGS"]).read())["targets"]["main"]["secret_key"] == (
        "the-secret"
    )
    for bad, member in (
        ({"endpoint": "http://s3.example"}, "endpoint"),
        ({"bucket": "X"}, "bucket"),
    ):
        err = error(
            client.put(f"{API}/archive/main", json={**body, **bad}, headers=admin),
            400,
            "bad_parameter",
        )
        assert member in err["message"], err
    r = client.get(f"{API}/archive", headers=admin)
    assert r.status_code == 200 and set(r.get_json()["targets"]) == {"main"}
    assert "the-secret" not in r.get_data(as_text=True)
    assert client.get(f"{API}/archive", headers=alice).status_code == 403

    state = Path(c["ARCHIVE_STATE"])
    state.mkdir(exist_ok=True)
    (state / "status.json").write_text(
        json.dumps(
            {
                "version": 1,
                "logspaces": {
                    "main": {
                        "target": "https://s3.example:9000/logs/box1",
                        "days_local": 3,
                        "days_archived": 9,
                        "bytes_archived": 12345,
                        "failures": 2,
                        "ok": False,
                        "error": {
                            "time": "2026-11-27T00:00:00Z",
                            "message": "EndpointConnectionError: down",
                        },
                    }
                },
            }
        )
    )
    s = client.get(f"{API}/status", headers=admin).get_json()
    main = {ls["name"]: ls for ls in s["logspaces"]}["main"]
    assert main["archive"]["days_archived"] == 9 and main["archive"]["target"].endswith("/box1")
    assert any(p.startswith("archive: main: EndpointConnectionError") for p in s["problems"])
    s = client.get(f"{API}/status", headers=alice).get_json()
    main = {ls["name"]: ls for ls in s["logspaces"]}["main"]
    assert main["archive"]["days_archived"] == 9
    assert main["archive"]["target"] is None and main["archive"]["error"] is None
    assert "box1" not in json.dumps(s)

    assert client.delete(f"{API}/archive/main", headers=alice).status_code == 403
    assert client.delete(f"{API}/archive/main", headers=admin).status_code == 200
    error(client.delete(f"{API}/archive/main", headers=admin), 404, "not_found")
    assert client.get(f"{API}/archive", headers=admin).get_json() == {"targets": {}}
    (state / "status.json").unlink()


# ---------------------------------------------------------------- errors


def test_bad_query_keeps_position(client: FlaskClient, admin: dict[str, str], app: Flask) -> None:
    r = client.get(f"{API}/logspaces/main/search", query_string={"q": "(a OR b"}, headers=admin)
    err = error(r, 400, "bad_query")
    assert err["position"] == 7
    e = last_audit(app, "search")
    assert (e.status, e.query) == (400, "(a OR b")


@pytest.mark.parametrize(
    "endpoint,params,name",
    [
        ("search", {"q": "x", "limit": "0"}, "limit"),
        ("search", {"q": "x", "limit": "10001"}, "limit"),
        ("search", {"q": "x", "limit": "ten"}, "limit"),
        ("search", {"q": "x", "order": "sideways"}, "order"),
        ("search", {"q": "x", "cursor": "-1"}, "cursor"),
        ("search", {"q": "x", "total": "2"}, "total"),
        ("search", {"limit": "5"}, "q"),
        ("search", {"q": "x", "from": "yesterday-ish"}, "from"),
        ("search", {"q": "x", "from": "2026-01-02", "to": "2026-01-01"}, "from"),
        ("search", {"q": "x", "to": "a" * 300}, "to"),
        ("search", {"q": "x", "bogus": "1"}, "bogus"),
        ("count", {"q": "x", "limit": "5"}, "limit"),
        ("histogram", {"q": "x", "buckets": "0"}, "buckets"),
        ("top", {"q": "x"}, "field"),
        ("top", {"q": "x", "field": "host", "k": "1001"}, "k"),
        ("top", {"q": "x", "field": "nosuchfield"}, "field"),
        ("export", {"q": "x", "format": "xml"}, "format"),
    ],
)
def test_bad_parameters(
    client: FlaskClient, admin: dict[str, str], endpoint: str, params: dict[str, str], name: str
) -> None:
    r = client.get(f"{API}/logspaces/main/{endpoint}", query_string=params, headers=admin)
    err = error(r, 400, "bad_parameter")
    assert err["message"].startswith(name), err


def test_repeated_and_unknown_parameters(client: FlaskClient, admin: dict[str, str]) -> None:
    r = client.get(f"{API}/logspaces/main/search?q=a&q=b", headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("q:")
    r = client.get(f"{API}/logspaces/main/count?q=a&limit=1&limit=2", headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("limit:")
    for path in ("/me", "/logspaces", "/users", "/tokens", "/status", "/health", "/audit"):
        r = client.get(f"{API}{path}?nope=1", headers=admin)
        assert error(r, 400, "bad_parameter")["message"].startswith("nope:"), path
    r = client.get(f"{API}/logspaces/main/messages/0", headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("id:")
    r = client.get(f"{API}/logspaces/main/messages/x1", headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("id:")
    r = client.get(f"{API}/logspaces/Bad!/count?q=x", headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("logspace:")


def test_unauthorized_variants(client: FlaskClient, app: Flask) -> None:
    acc = accounts_of(app)
    _, _ = acc.create_token("alice", "short", ttl=0.5)
    expired, _ = acc.create_token("alice", "short", ttl=0.2)
    revoked, t = acc.create_token("alice", "gone")
    acc.revoke_token(t.id)
    unknown = "lbx_0123456789ab_" + "A" * 43
    time.sleep(0.3)
    cases = {
        "none": {},
        "basic": {"Authorization": "Basic YWRtaW46eA=="},
        "empty bearer": {"Authorization": "Bearer "},
        "malformed": {"Authorization": "Bearer not-a-token"},
        "unknown": {"Authorization": f"Bearer {unknown}"},
        "expired": {"Authorization": f"Bearer {expired}"},
        "revoked": {"Authorization": f"Bearer {revoked}"},
    }
    for what, headers in cases.items():
        for path in ("/me", "/logspaces/main/search?q=x", "/openapi.json", "/users"):
            r = client.get(API + path, headers=headers)
            error(r, 401, "unauthorized")
            assert r.headers["WWW-Authenticate"] == 'Bearer realm="logbox"', what
    e = last_audit(app, "denied")
    assert e.status == 401 and e.user is None and "revoked" in e.detail
    r = client.get(f"{API}/me", headers={"Authorization": f"Bearer {expired}"})
    assert "expired" in error(r, 401, "unauthorized")["message"]


def test_forbidden(
    client: FlaskClient, alice: dict[str, str], admin: dict[str, str], app: Flask
) -> None:
    for endpoint in ("search?q=x", "count?q=x", "export?q=x", "messages/1", "top?q=x&field=host"):
        r = client.get(f"{API}/logspaces/secret/{endpoint}", headers=alice)
        error(r, 403, "forbidden")
        # The same for a logspace that does not exist: no hint either way.
        r = client.get(f"{API}/logspaces/nosuch/{endpoint}", headers=alice)
        error(r, 403, "forbidden")
    e = last_audit(app, "denied")
    assert (e.user, e.logspace, e.status) == ("alice", "nosuch", 403)
    for method, path in (("GET", "/users"), ("GET", "/audit"), ("POST", "/tokens")):
        r = client.open(API + path, method=method, headers=alice, json={})
        error(r, 403, "forbidden")
    # An admin reads every logspace; a missing one is then 404.
    r = client.get(f"{API}/logspaces/secret/count?q=hello", headers=admin)
    assert r.status_code == 200 and r.get_json()["total"] == 5
    r = client.get(f"{API}/logspaces/nosuch/count?q=x", headers=admin)
    assert "nosuch" in error(r, 404, "not_found")["message"]


def test_not_found_and_method_not_allowed(client: FlaskClient, admin: dict[str, str]) -> None:
    for path in ("/nope", "/logspaces/main", "/users/nobody", "/logspaces/main/messages/99999999"):
        error(client.get(API + path, headers=admin), 404, "not_found")
    error(client.get("/", headers=admin), 404, "not_found")
    error(client.delete(f"{API}/tokens/0123456789ab", headers=admin), 404, "not_found")
    r = client.post(f"{API}/tokens", json={"user": "nobody"}, headers=admin)
    error(r, 404, "not_found")
    r = client.delete(f"{API}/logspaces/main/search?q=x", headers=admin)
    error(r, 405, "method_not_allowed")
    assert set(r.headers["Allow"].split(", ")) == {"GET", "HEAD", "OPTIONS"}
    r = client.get(f"{API}/login")
    error(r, 405, "method_not_allowed")
    assert "POST" in r.headers["Allow"]


def test_body_errors(client: FlaskClient, admin: dict[str, str]) -> None:
    r = client.post(f"{API}/users", data=b"name=x", headers=admin, content_type="text/plain")
    error(r, 415, "unsupported_media_type")
    big = {"name": "bob", "password": "x" * 70000}
    error(client.post(f"{API}/users", json=big, headers=admin), 413, "too_large")
    error(client.post(f"{API}/login", json={"username": "x" * 70000}), 413, "too_large")
    r = client.post(f"{API}/users", data=b"{nope", headers=admin, content_type="application/json")
    assert error(r, 400, "bad_parameter")["message"].startswith("body")
    r = client.post(f"{API}/users", json=["a"], headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("body")
    r = client.post(
        f"{API}/users", json={"name": "bob", "password": PASSWORD, "x": 1}, headers=admin
    )
    assert error(r, 400, "bad_parameter")["message"].startswith("x:")
    r = client.post(f"{API}/users", json={"name": "bob"}, headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("password")
    r = client.post(f"{API}/users", json={"name": "bob", "password": "short"}, headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("password")
    r = client.post(f"{API}/users", json={"name": "Bob!", "password": PASSWORD}, headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("name")
    r = client.post(
        f"{API}/users", json={"name": "bob", "password": PASSWORD, "role": "root"}, headers=admin
    )
    assert error(r, 400, "bad_parameter")["message"].startswith("role")
    r = client.post(f"{API}/tokens", json={"expires_in": "soon"}, headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("expires_in")
    r = client.post(f"{API}/tokens", json={"expires_in": 0}, headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("expires_in")
    r = client.patch(f"{API}/users/alice", json={"disabled": "yes"}, headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("disabled")


def test_conflicts(client: FlaskClient, admin: dict[str, str]) -> None:
    r = client.post(f"{API}/users", json={"name": "alice", "password": PASSWORD}, headers=admin)
    error(r, 409, "conflict")
    error(client.delete(f"{API}/users/admin", headers=admin), 409, "conflict")
    r = client.patch(f"{API}/users/admin", json={"role": "searcher"}, headers=admin)
    error(r, 409, "conflict")


def test_too_broad(app: Flask, data: Path, top: Path, sockdir: Path, admin: dict[str, str]) -> None:
    d = Searchd(searchd_binary(top), data, sockdir / "mt.sock", ["--max-terms", "1"]).start()
    try:
        app2 = create_app({**app.config, "SEARCHD_SOCKET": str(d.sock)})
        app2.extensions["logbox"]._accounts = accounts_of(app)  # one LMDB env per process
        c = app2.test_client()
        r = c.get(f"{API}/logspaces/main/search", query_string={"q": "req-1*"}, headers=admin)
        assert "too broad" in error(r, 422, "too_broad")["message"]
        r = c.get(f"{API}/logspaces/main/export", query_string={"q": "req-1*"}, headers=admin)
        error(r, 422, "too_broad")
    finally:
        assert d.stop() == 0, d.log()


def test_unavailable_when_searchd_is_gone(
    app: Flask, data: Path, top: Path, sockdir: Path, admin: dict[str, str]
) -> None:
    d = Searchd(searchd_binary(top), data, sockdir / "gone.sock").start()
    app2 = create_app({**app.config, "SEARCHD_SOCKET": str(d.sock)})
    app2.extensions["logbox"]._accounts = accounts_of(app)
    c = app2.test_client()
    assert c.get(f"{API}/health").status_code == 200
    assert c.get(f"{API}/logspaces/main/count?q=x", headers=admin).status_code == 200
    assert d.stop() == 0
    error(c.get(f"{API}/health"), 503, "unavailable")
    for path in ("/logspaces/main/count?q=x", "/logspaces/main/export?q=x", "/logspaces"):
        error(c.get(API + path, headers=admin), 503, "unavailable")
    r = c.get(f"{API}/status", headers=admin)
    assert r.status_code == 200 and r.get_json()["services"]["searchd"]["state"] == "down"


def test_export_cut_by_searchd_ends_with_an_error_line(
    app: Flask, data: Path, top: Path, sockdir: Path, admin: dict[str, str]
) -> None:
    """searchd gone after the first page: NDJSON ends with {"error": ...}, CSV with a
    "# error: ..." row, both audited with the rows sent."""
    for fmt in ("ndjson", "csv"):
        d = Searchd(searchd_binary(top), data, sockdir / "cut.sock").start()
        app2 = create_app({**app.config, "SEARCHD_SOCKET": str(d.sock)})
        app2.extensions["logbox"]._accounts = accounts_of(app)
        r = app2.test_client().get(
            f"{API}/logspaces/main/export",
            query_string={"q": "*", "format": fmt},
            headers=admin,
            buffered=False,
        )
        assert r.status_code == 200 and int(r.headers["X-Logbox-Total"]) == N_MAIN
        it = iter(r.response)
        first = next(it)
        if fmt == "csv":
            first += next(it)
        assert d.stop() == 0
        rest = b"".join(it)
        r.close()
        lines = (first + rest).splitlines()
        page = EXPORT_PAGE
        if fmt == "ndjson":
            assert len(lines) == page + 1  # one page and the error line
            assert json.loads(lines[-1])["error"]["code"] == "unavailable"
        else:
            assert len(lines) == page + 2  # header + one page + the error row
            assert lines[-1].startswith(b"# error: unavailable: "), lines[-1]
        e = last_audit(app, "export")
        assert (e.results, e.status) == (page, 503) and f"cut after {page} rows" in e.detail


def test_internal_error_is_json_without_traceback(app: Flask, admin: dict[str, str]) -> None:
    app2 = create_app({**app.config, "SEARCHD_SOCKET": "/nonexistent/sd.sock"})
    app2.extensions["logbox"]._accounts = accounts_of(app)

    def boom() -> None:
        raise RuntimeError("secret detail")

    app2.add_url_rule("/api/v1/boom", "boom", boom)
    r = app2.test_client().get(f"{API}/boom", headers=admin)
    err = error(r, 500, "internal")
    assert "secret" not in r.get_data(as_text=True) and "RuntimeError" not in err["message"]


# ---------------------------------------------------------------- login, lockout, sessions


def login(c: FlaskClient, user: str, password: str, addr: str = "127.0.0.1") -> TestResponse:
    return c.post(
        f"{API}/login",
        json={"username": user, "password": password},
        environ_base={"REMOTE_ADDR": addr},
    )


def test_login_logout(client: FlaskClient, app: Flask) -> None:
    r = login(client, "alice", PASSWORD)
    assert r.status_code == 200, r.data
    body = r.get_json()
    assert set(body) == {"token", "id", "expires", "user"}
    assert body["token"].startswith(f"lbx_{body['id']}_") and len(body["token"]) == 4 + 12 + 1 + 43
    assert body["user"]["name"] == "alice"
    h = {"Authorization": f"Bearer {body['token']}"}
    me = client.get(f"{API}/me", headers=h).get_json()
    assert me["token"]["kind"] == "session" and me["token"]["id"] == body["id"]
    r = client.post(f"{API}/logout", headers=h)
    assert r.status_code == 200 and r.get_json() == {"revoked": body["id"]}
    assert last_audit(app, "logout").user == "alice"
    error(client.get(f"{API}/me", headers=h), 401, "unauthorized")
    error(login(client, "alice", "wrong password!"), 401, "unauthorized")
    error(login(client, "nobody", PASSWORD), 401, "unauthorized")
    assert last_audit(app, "login_failed").user == "nobody"
    r = client.post(f"{API}/login", json={"username": "alice"})
    assert error(r, 400, "bad_parameter")["message"].startswith("password")


def test_lockout(client: FlaskClient, app: Flask) -> None:
    addr = "10.9.8.7"
    for _ in range(10):
        error(login(client, "alice", "not the password", addr), 401, "unauthorized")
    r = login(client, "alice", PASSWORD, addr)  # even the right password
    error(r, 429, "locked_out")
    assert 290 <= int(r.headers["Retry-After"]) <= 300
    assert last_audit(app, "login_locked").address == addr
    assert login(client, "alice", PASSWORD, "10.9.8.6").status_code == 200  # other addresses


# ---------------------------------------------------------------- admin flows


def test_user_and_token_admin(client: FlaskClient, admin: dict[str, str], app: Flask) -> None:
    r = client.post(
        f"{API}/users",
        json={"name": "bob", "password": PASSWORD, "role": "searcher", "logspaces": ["other"]},
        headers=admin,
    )
    assert r.status_code == 201, r.data
    assert r.get_json()["logspaces"] == ["other"] and r.get_json()["role"] == "searcher"
    assert last_audit(app, "user_create").detail.startswith("user bob")
    names = [u["name"] for u in client.get(f"{API}/users", headers=admin).get_json()["users"]]
    assert {"admin", "alice", "bob"} <= set(names)
    assert client.get(f"{API}/users/bob", headers=admin).get_json()["name"] == "bob"

    r = client.post(
        f"{API}/tokens", json={"user": "bob", "name": "ci", "expires_in": 3600}, headers=admin
    )
    assert r.status_code == 201, r.data
    tok = r.get_json()
    assert tok["token"].startswith(f"lbx_{tok['id']}_") and tok["kind"] == "api"
    assert tok["user"] == "bob" and tok["name"] == "ci" and tok["expires"] and not tok["revoked"]
    bob = {"Authorization": f"Bearer {tok['token']}"}
    assert client.get(f"{API}/logspaces/other/count?q=hello", headers=bob).status_code == 200
    error(client.get(f"{API}/logspaces/main/count?q=x", headers=bob), 403, "forbidden")
    listed = client.get(f"{API}/tokens?user=bob", headers=admin).get_json()["tokens"]
    assert [t["id"] for t in listed] == [tok["id"]] and "token" not in listed[0]

    # Rights change at once.
    r = client.patch(f"{API}/users/bob", json={"logspaces": ["main"]}, headers=admin)
    assert r.status_code == 200 and r.get_json()["logspaces"] == ["main"]
    assert client.get(f"{API}/logspaces/main/count?q=x", headers=bob).status_code == 200
    r = client.patch(f"{API}/users/bob", json={"disabled": True}, headers=admin)
    assert r.get_json()["disabled"] is True
    error(client.get(f"{API}/me", headers=bob), 401, "unauthorized")
    client.patch(
        f"{API}/users/bob", json={"disabled": False, "password": PASSWORD + "2"}, headers=admin
    )
    assert login(client, "bob", PASSWORD + "2").status_code == 200
    assert client.get(f"{API}/me", headers=bob).status_code == 200

    r = client.delete(f"{API}/tokens/{tok['id']}", headers=admin)
    assert r.status_code == 200 and r.get_json()["revoked"]
    assert last_audit(app, "token_revoke").detail.startswith(f"token {tok['id']}")
    error(client.get(f"{API}/me", headers=bob), 401, "unauthorized")

    tok2 = client.post(
        f"{API}/tokens", json={"user": "bob", "expires_in": None}, headers=admin
    ).get_json()
    assert tok2["expires"] is None
    r = client.delete(f"{API}/users/bob", headers=admin)
    assert r.status_code == 200 and r.get_json() == {"deleted": "bob"}
    error(client.get(f"{API}/users/bob", headers=admin), 404, "not_found")
    error(
        client.get(f"{API}/me", headers={"Authorization": f"Bearer {tok2['token']}"}),
        401,
        "unauthorized",
    )
    assert accounts_of(app).get_token(tok2["id"]).revoked_us is not None


def test_audit_log(
    client: FlaskClient, app: Flask, admin: dict[str, str], alice: dict[str, str]
) -> None:
    t0 = time.time()
    for i in range(3):
        client.get(f"{API}/logspaces/main/count", query_string={"q": f"audit-{i}"}, headers=alice)
    r = client.get(
        f"{API}/audit",
        query_string={"user": "alice", "action": "count", "limit": 2, "from": str(int(t0))},
        headers=admin,
    )
    assert r.status_code == 200, r.data
    page = r.get_json()
    assert [e["query"] for e in page["entries"]] == ["audit-2", "audit-1"]
    e = page["entries"][0]
    assert set(e) == {
        "id",
        "time",
        "user",
        "address",
        "action",
        "logspace",
        "query",
        "results",
        "status",
        "detail",
    }
    assert (e["user"], e["action"], e["logspace"], e["results"], e["status"]) == (
        "alice",
        "count",
        "main",
        0,
        200,
    )
    # the id is a decimal string, exactly the store's (beyond 2^53: a JSON number would round)
    assert isinstance(e["id"], str) and int(e["id"]) > 2**53
    stored = accounts_of(app).audit_entries(user="alice", action="count", limit=1)[0][0]
    assert e["id"] == str(stored.id)
    r = client.get(
        f"{API}/audit",
        query_string={
            "user": "alice",
            "action": "count",
            "limit": 2,
            "cursor": page["next_cursor"],
            "from": str(int(t0)),
        },
        headers=admin,
    )
    assert [e["query"] for e in r.get_json()["entries"]] == ["audit-0"]
    assert r.get_json()["next_cursor"] is None
    r = client.get(f"{API}/audit", query_string={"from": "-1h", "to": "-2h"}, headers=admin)
    error(r, 400, "bad_parameter")
    r = client.get(f"{API}/audit", query_string={"action": "dance"}, headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("action")
    r = client.get(f"{API}/audit", query_string={"from": "2026-99-01"}, headers=admin)
    assert error(r, 400, "bad_parameter")["message"].startswith("from")


# ---------------------------------------------------------------- export


def page_through(searchd: Searchd, q: str, order: str, **params: str) -> list[dict[str, Any]]:
    """Every hit of q by paging through searchd's /v1/search (1000 a page)."""
    hits: list[dict[str, Any]] = []
    cursor = "0"
    while cursor is not None:
        r = searchd.get(
            "/v1/search",
            {"q": q, "order": order, "limit": 1000, "cursor": cursor, "total": 0, **params},
        )
        assert r.status == 200, r.body[:300]
        hits += r.json["hits"]
        cursor = r.json["next_cursor"]
    return hits


@pytest.mark.parametrize("order", ["newest", "oldest"])
def test_export_ndjson_equals_paging(
    client: FlaskClient, searchd: Searchd, admin: dict[str, str], app: Flask, order: str
) -> None:
    want = page_through(searchd, "*", order)
    assert len(want) == N_MAIN
    r = client.get(
        f"{API}/logspaces/main/export", query_string={"q": "*", "order": order}, headers=admin
    )
    assert r.status_code == 200
    assert r.mimetype == "application/x-ndjson"
    assert int(r.headers["X-Logbox-Total"]) == N_MAIN
    lines = r.get_data().split(b"\n")
    assert lines[-1] == b""
    got = [json.loads(x) for x in lines[:-1]]
    r.close()
    assert got == want
    e = last_audit(app, "export")
    assert (e.user, e.logspace, e.query, e.results, e.status) == ("admin", "main", "*", N_MAIN, 200)


def test_export_csv_equals_paging(
    client: FlaskClient, searchd: Searchd, admin: dict[str, str], app: Flask
) -> None:
    q = "error OR raw"
    want = page_through(searchd, q, "newest", **{"from": "-1d"})
    r = client.get(
        f"{API}/logspaces/main/export",
        query_string={"q": q, "format": "csv", "from": "-1d"},
        headers=admin,
    )
    assert r.status_code == 200 and r.mimetype == "text/csv"
    assert int(r.headers["X-Logbox-Total"]) == len(want)
    text = r.get_data().decode("utf-8", "surrogateescape")
    r.close()
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows[0] == (
        "id,received,timestamp,host,peer,program,pid,msgid,facility,severity,flags,sd,message"
    ).split(",")
    assert len(rows) - 1 == len(want)

    def as_row(h: dict[str, Any]) -> list[str]:
        return [
            str(h["id"]), h["received"], h["timestamp"] or "", h["host"], h["peer"], h["program"],
            h["pid"], h["msgid"], "" if h["facility"] is None else str(h["facility"]),
            "" if h["severity"] is None else str(h["severity"]), "|".join(h["flags"]), h["sd"],
            h["message"],
        ]  # fmt: skip

    assert rows[1:] == [as_row(h) for h in want]
    raw = [h for h in want if "raw" in h["message"]]
    assert raw and b"raw\xff\xfebytes" in r.get_data()  # the stored bytes, not escapes
    assert last_audit(app, "export").results == len(want)


def test_export_is_a_snapshot(
    client: FlaskClient, admin: dict[str, str], data: Path, store_cli: Path
) -> None:
    """Messages stored after an export began are not in it, in either order, although they
    match and fall in its time range (here: a second page is read after they arrive)."""
    lb = Logbox(store_cli, data, logspace="snap")
    base_s = int(time.time()) - 3600
    lines = [
        f"<14>1 {rfc3339(base_s + i // 100)} h p - - - snap {i}".encode() for i in range(10_500)
    ]
    lb.check(lb.run("ingest", "--received", "header", "-", input=b"\n".join(lines) + b"\n"))
    for order in ("oldest", "newest"):
        r = client.get(
            f"{API}/logspaces/snap/export",
            query_string={"q": "snap", "order": order, "from": str(base_s - 10)},
            headers=admin,
            buffered=False,
        )
        assert r.status_code == 200
        total = int(r.headers["X-Logbox-Total"])
        late = f"<14>1 {rfc3339(base_s + 5)} h p - - - snap later-{order}".encode()
        lb.check(lb.run("ingest", "--received", "header", "-", input=late + b"\n"))
        body = r.get_data()
        r.close()
        assert body.count(b"\n") == total
        assert f"later-{order}".encode() not in body


# ---------------------------------------------------------------- configuration


def test_configuration_layers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defaults, then LOGBOX_RPC_CONFIG's file, then LOGBOX_* variables, then the mapping."""
    from logbox_rpc.config import ConfigError, load

    monkeypatch.setenv("LOGBOX_RPC_CONFIG", str(tmp_path / "absent.py"))
    for var in ("LOGBOX_SEARCHD_SOCKET", "LOGBOX_ACCOUNTS", "LOGBOX_SESSION_TTL", "LOGBOX_DATA"):
        monkeypatch.delenv(var, raising=False)
    c = load()
    assert c["SEARCHD_SOCKET"] == "/run/logbox/searchd.sock" and c["SESSION_TTL"] == 43200
    f = tmp_path / "rpc.py"
    f.write_text(
        'SEARCHD_SOCKET = "/f.sock"\nACCOUNTS_PATH = "/f/acc"\nSESSION_TTL = 60\nlower = 1\n'
    )
    monkeypatch.setenv("LOGBOX_RPC_CONFIG", str(f))
    monkeypatch.setenv("LOGBOX_ACCOUNTS", "/env/acc")
    monkeypatch.setenv("LOGBOX_SESSION_TTL", "120")
    c = load({"SEARCHD_SOCKET": "/map.sock"})
    assert (c["SEARCHD_SOCKET"], c["ACCOUNTS_PATH"], c["SESSION_TTL"]) == (
        "/map.sock",
        "/env/acc",
        120,
    )
    assert "lower" not in c
    monkeypatch.setenv("LOGBOX_SESSION_TTL", "soon")
    with pytest.raises(ConfigError, match="LOGBOX_SESSION_TTL"):
        load()
    monkeypatch.delenv("LOGBOX_SESSION_TTL")
    f.write_text("SESSION_TTL = (\n")
    with pytest.raises(ConfigError, match="rpc.py"):
        create_app()


def test_session_ttl_from_config(app: Flask, client: FlaskClient) -> None:
    app2 = create_app({**app.config, "SESSION_TTL": 5})
    app2.extensions["logbox"]._accounts = accounts_of(app)
    r = login(app2.test_client(), "alice", PASSWORD, "10.1.1.1")
    assert r.status_code == 200
    t = accounts_of(app).get_token(r.get_json()["id"])
    assert t.kind == "session" and t.expires_us - t.created_us == 5_000_000


# ---------------------------------------------------------------- integrity (API.md §9)


def test_integrity_report(
    app: Flask,
    client: FlaskClient,
    admin: dict[str, str],
    alice: dict[str, str],
    data: Path,
    store_cli: Path,
    tmp_path: Path,
) -> None:
    """GET /logspaces/{logspace}/integrity serves the last `logbox verify --json --out`
    report's entry, admins only, audited; a report with problems, or none for two days, is a
    /status problem."""
    report = tmp_path / "integrity.json"
    old = app.config["INTEGRITY_REPORT"]
    app.config["INTEGRITY_REPORT"] = str(report)
    try:
        error(client.get(f"{API}/logspaces/main/integrity", headers=admin), 404, "not_found")
        p = subprocess.run(
            [
                str(store_cli),
                "verify",
                "--data",
                str(data),
                "--integrity",
                "--json",
                "--out",
                str(report),
            ],
            capture_output=True,
        )
        assert p.returncode == 0, p.stderr
        r = client.get(f"{API}/logspaces/main/integrity", headers=admin)
        assert r.status_code == 200, r.data[:400]
        body = r.get_json()
        assert body["logspace"] == "main" and body["ok"] is True and body["problems"] == []
        assert body["messages"] == N_MAIN and body["integrity_only"] is True
        assert body["days"] and all(d["intact"] and d["chained"] for d in body["days"]), body
        assert sum(d["messages"] for d in body["days"]) == N_MAIN
        e = last_audit(app, "integrity")
        assert e.user == "admin" and e.logspace == "main"
        error(client.get(f"{API}/logspaces/main/integrity", headers=alice), 403, "forbidden")
        error(client.get(f"{API}/logspaces/nosuch/integrity", headers=admin), 404, "not_found")
        assert not [x for x in client.get(f"{API}/status", headers=admin).get_json()["problems"]
                    if x.startswith("integrity:")]  # fmt: skip
        # A store with a block edited: the report names it, /status says so.
        copy = tmp_path / "copy"
        shutil.copytree(data, copy)
        day = sorted(copy.glob("main/*/*/messages"))[0]
        b = bytearray(day.read_bytes())
        b[len(b) // 2] ^= 0x40
        day.write_bytes(bytes(b))
        p = subprocess.run(
            [
                str(store_cli),
                "verify",
                "--data",
                str(copy),
                "--integrity",
                "--json",
                "--out",
                str(report),
            ],
            capture_output=True,
        )
        assert p.returncode == 1
        body = client.get(f"{API}/logspaces/main/integrity", headers=admin).get_json()
        assert body["ok"] is False and body["problems"], body
        bad = [d for d in body["days"] if not d["intact"]]
        assert len(bad) == 1 and bad[0]["day"] == day.parent.parent.name + "-" + day.parent.name
        assert any("edited" in x["what"] and x["day"] == bad[0]["day"] for x in body["problems"])
        st = client.get(f"{API}/status", headers=admin).get_json()
        assert st["health"] == "degraded"
        assert any(
            x.startswith("integrity: verify found 1 problems (main)") for x in st["problems"]
        ), st
        st = client.get(f"{API}/status", headers=alice).get_json()
        assert "integrity: see the status as an admin" in st["problems"], st["problems"]
        # Two days without a new report: stale.
        t = time.time() - 3 * 86400
        os.utime(report, (t, t))
        st = client.get(f"{API}/status", headers=admin).get_json()
        assert any("the last verify ran" in x for x in st["problems"]), st["problems"]
    finally:
        app.config["INTEGRITY_REPORT"] = old


def test_integrity_public_key(
    app: Flask,
    client: FlaskClient,
    admin: dict[str, str],
    alice: dict[str, str],
    store_cli: Path,
    tmp_path: Path,
) -> None:
    """GET /integrity/public-key serves SIGN_PUBKEY, the PEM `logbox keys init` made, as the
    attachment logbox-sign.pub, admins only, audited; 404 without the file, 500 (saying so) for
    a file that is not a PEM public key, such as the private key beside it."""
    data = tmp_path / "data"
    old = app.config["SIGN_PUBKEY"]
    app.config["SIGN_PUBKEY"] = str(data / "indexd" / "sign.pub")
    url = f"{API}/integrity/public-key"
    try:
        err = error(client.get(url, headers=admin), 404, "not_found")
        assert str(data / "indexd" / "sign.pub") in err["message"]
        made = subprocess.run(
            [str(store_cli), "keys", "init", "--data", str(data)], capture_output=True
        )
        assert made.returncode == 0, made.stderr
        r = client.get(url, headers=admin)
        assert r.status_code == 200, r.data[:400]
        check_public_key_download(
            r.mimetype, r.headers, r.data, data / "indexd" / "sign.pub", tmp_path
        )
        e = last_audit(app, "integrity_public_key")
        assert e.user == "admin" and e.status == 200
        error(client.get(url, headers=alice), 403, "forbidden")
        error(client.get(url + "?x=1", headers=admin), 400, "bad_parameter")
        # The private key is PEM too, but not a public key: refused, its bytes not sent.
        app.config["SIGN_PUBKEY"] = str(data / "indexd" / "sign.key")
        r = client.get(url, headers=admin)
        err = error(r, 500, "internal")
        assert "is not a PEM public key" in err["message"], err
        assert b"PRIVATE" not in r.data
    finally:
        app.config["SIGN_PUBKEY"] = old


# ---------------------------------------------------------------- saved searches


def test_saved_searches(client: FlaskClient, app: Flask, admin: dict, alice: dict) -> None:
    """CRUD through the API; who sees and changes what (private, shared, logspace rights);
    the query and the times checked by searchd; every change audited."""
    url = f"{API}/searches"
    body = {"name": "ssh failures", "logspace": "main", "query": "program:sshd AND failed",
            "from": "-1h", "columns": ["time", "host", "eps@32473.c"]}  # fmt: skip
    r = client.post(url, json=body, headers=alice)
    assert r.status_code == 201, r.data
    mine = r.get_json()
    assert mine["owner"] == "alice" and mine["shared"] is False and mine["to"] is None
    assert mine["columns"] == ["time", "host", "eps@32473.c"] and len(mine["id"]) == 12
    e = last_audit(app, "saved_search_create")
    assert (e.user, e.logspace, e.query, e.status) == ("alice", "main", body["query"], 201)
    # private: the admin does not see it, and gets "not found", not "forbidden"
    assert client.get(url, headers=admin).get_json()["searches"] == []
    error(client.get(f"{url}/{mine['id']}", headers=admin), 404, "not_found")
    assert client.get(url, headers=alice).get_json()["searches"] == [mine]
    # shared on main: the admin (who reads every logspace) sees it and may delete it
    r = client.patch(f"{url}/{mine['id']}", json={"shared": True, "name": "SSH"}, headers=alice)
    assert r.status_code == 200 and r.get_json()["shared"] and r.get_json()["name"] == "SSH"
    assert [s["id"] for s in client.get(url, headers=admin).get_json()["searches"]] == [mine["id"]]
    # a shared search on a logspace alice may not read is invisible to her
    r = client.post(url, json={**body, "logspace": "secret", "shared": True}, headers=admin)
    assert r.status_code == 201
    secret_id = r.get_json()["id"]
    assert secret_id not in [s["id"] for s in client.get(url, headers=alice).get_json()["searches"]]
    error(client.get(f"{url}/{secret_id}", headers=alice), 404, "not_found")
    error(client.delete(f"{url}/{secret_id}", headers=alice), 404, "not_found")
    # alice may not save on secret, nor move hers there
    error(client.post(url, json={**body, "logspace": "secret"}, headers=alice), 403, "forbidden")
    r = client.patch(f"{url}/{mine['id']}", json={"logspace": "secret"}, headers=alice)
    error(r, 403, "forbidden")
    # the admin's shared one on main: alice sees it but may not change it
    r = client.post(url, json={**body, "shared": True, "name": "admin's"}, headers=admin)
    theirs = r.get_json()["id"]
    assert client.get(f"{url}/{theirs}", headers=alice).status_code == 200
    error(client.patch(f"{url}/{theirs}", json={"name": "x"}, headers=alice), 403, "forbidden")
    error(client.delete(f"{url}/{theirs}", headers=alice), 403, "forbidden")
    # bad input: searchd's query and time errors, members, ids
    r = client.post(url, json={**body, "query": "(a OR b"}, headers=alice)
    assert error(r, 400, "bad_query")["position"] is not None
    error(client.post(url, json={**body, "from": "yesterday-ish"}, headers=alice), 400,
          "bad_parameter")  # fmt: skip
    for bad in ({"name": ""}, {"columns": ["a b"]}, {"shared": "yes"}, {"extra": 1},
                {"logspace": "Main"}, {"query": "x" * 5000}):  # fmt: skip
        error(client.post(url, json={**body, **bad}, headers=alice), 400, "bad_parameter")
    error(client.post(url, json={"name": "n"}, headers=alice), 400, "bad_parameter")
    error(client.get(f"{url}/nothex", headers=alice), 404, "not_found")
    # the admin deletes alice's shared one; she deletes nothing twice
    r = client.delete(f"{url}/{mine['id']}", headers=admin)
    assert r.status_code == 200 and r.get_json()["name"] == "SSH"
    e = last_audit(app, "saved_search_delete")
    assert e.user == "admin" and e.detail == f"saved search {mine['id']} 'SSH' of alice"
    error(client.delete(f"{url}/{mine['id']}", headers=alice), 404, "not_found")
    for sid in (secret_id, theirs):
        assert client.delete(f"{url}/{sid}", headers=admin).status_code == 200
