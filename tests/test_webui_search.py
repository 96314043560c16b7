# The web UI's search pages (logbox_webui, webui/UI.md) through Flask's test client, in front of
# a real logbox-searchd over a real store built with `logbox ingest` and a real accounts store
# (LMDB): every view's sign-in and logspace rights (anonymous -> /login, no rights -> 403), the
# search page's elements (#total equals searchd's count, tr.hit rows newest first, 60 histogram
# bars whose links zoom and whose counts add up, top hosts/programs whose links refine, stable
# paging, oldest first, export links), highlight marks, the logspace picker, a bad query's error
# with its position (400), searchd down (503), a hostile message (<script>, NUL and control
# bytes, bytes that are not UTF-8) shown inert with its raw bytes exact, exports equal to paging
# through searchd, a query with quotes and angle brackets round-tripping, the audit log, and the
# raw line of a message rebuilt from its fields. Issue 21: an empty query shows the newest
# messages, the histogram's count axis, "Previous page" and "First page", the time zone toggle
# in the URL, and the columns (cols=) with structured-data fields and a long program whole.

from __future__ import annotations

import csv
import html
import io
import json
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient
from lbtest import apps
from lbtest.apps import accounts_of, rfc3339
from lbtest.cli import Logbox
from lbtest.searchd import Searchd
from logbox_webui import create_app
from logbox_webui.security import CSP

N_MAIN = 600
BASE_AGO_S = 3 * 3600
PASSWORD = "correct horse battery"
LONG_PROGRAM = "a-program-name-long-enough-to-be-cut-in-a-column"  # 48 bytes: RFC 5424's most
SD_LINE = (
    f"<14>1 2026-11-22T12:00:00.250+01:00 sdhost {LONG_PROGRAM} 77 ID1 "
    '[eps@32473 c="4242" d="x \\"y\\""][eps@32473 c="17"] sdprobe body'
)
HOSTILE = b"<script>alert('x')</script> <b>bold</b> nul\x00byte esc\x1b[31m bad\xff\xfe end"


def corpus(base_s: int, n: int) -> bytes:
    """n RFC 5424 lines, one every 10 s from base_s, over 5 hosts and 3 programs."""
    words = ["error", "disk", "user", "login", "failed", "ok", "timeout", "cache", "kernel"]
    out = []
    for i in range(n):
        msg = f"{words[i % 9]} {words[(i * 7) % 9]} Req-{i}"
        host = "web 01" if i % 50 == 0 else f"host{i % 5}"  # a value that needs quoting
        out.append(
            f"<{(i % 24) * 8 + i % 8}>1 {rfc3339(base_s + i * 10)} {host.replace(' ', '_')} "
            f"app{i % 3} {1000 + i} - - {msg}".encode()
        )
    return b"\n".join(out) + b"\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, store_cli: Path) -> Path:
    """main (N_MAIN messages over the last ~2 h, then the hostile one), other, secret."""
    d = tmp_path_factory.mktemp("webuistore") / "data"
    d.mkdir()
    base_s = int(time.time()) - BASE_AGO_S
    main = apps.ingest_received(store_cli, d, corpus(base_s, N_MAIN))
    main.ingest(b"<11>1 - evilhost evilapp - - - " + HOSTILE + b"\n")
    main.ingest(SD_LINE.encode() + b"\n")
    Logbox(store_cli, d, logspace="other").ingest(b"".join(b"<14>other %d\n" % i for i in range(7)))
    Logbox(store_cli, d, logspace="secret").ingest(b"<14>secret 1\n<14>secret 2\n")
    return d


@pytest.fixture(scope="module")
def app(searchd: Searchd, tmp_path_factory: pytest.TempPathFactory) -> Flask:
    root = tmp_path_factory.mktemp("webuiapp")
    config = apps.app_config(searchd, root, LOGSPACE_SETTINGS=str(root / "logspaces.json"))
    return apps.add_users(create_app(config), (*apps.USERS, ("nora", "searcher", ("nothing",))))


def csrf_of(page: str) -> str:
    m = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert m, page[:500]
    return m.group(1)


def sign_in(app: Flask, user: str) -> FlaskClient:
    """A test client signed in as user."""
    c = app.test_client()
    page = c.get("/login").get_data(as_text=True)
    r = c.post("/login", data={"username": user, "password": PASSWORD, "csrf_token": csrf_of(page)})
    assert r.status_code == 302, r.get_data(as_text=True)[:500]
    return c


@pytest.fixture(scope="module")
def admin(app: Flask) -> FlaskClient:
    return sign_in(app, "admin")


@pytest.fixture(scope="module")
def alice(app: Flask) -> FlaskClient:
    return sign_in(app, "alice")


def page_of(c: FlaskClient, url: str, status: int = 200) -> str:
    r = c.get(url)
    assert r.status_code == status, (r.status_code, r.get_data(as_text=True)[:800])
    assert r.headers["Content-Security-Policy"] == CSP
    body = r.get_data(as_text=True)
    assert "Traceback" not in body
    return body


def total_of(body: str) -> int:
    m = re.search(r'id="total" data-total="(\d+)">(\d+)<', body)
    assert m, "no #total"
    assert m.group(1) == m.group(2)
    return int(m.group(1))


def hit_ids(body: str) -> list[int]:
    return [int(x) for x in re.findall(r'<tr class="hit[^"]*" data-id="(\d+)"', body)]


def href(body: str, elem_id: str) -> str | None:
    m = re.search(rf'<a id="{elem_id}" href="([^"]+)"', body)
    return html.unescape(m.group(1)) if m else None


def sd_get(searchd: Searchd, path: str, **params: Any) -> dict[str, Any]:
    r = searchd.get(path, {"logspace": "main", **params})
    assert r.status == 200, r.body
    return r.json


def last_audit(app: Flask, action: str) -> Any:
    entries, _ = accounts_of(app).audit_entries(action=action, limit=1)
    assert entries, action
    return entries[0]


# ---------------------------------------------------------------- sign-in and rights


@pytest.mark.parametrize(
    "url",
    ["/", "/search", "/search?q=error", "/messages/main/1", "/export?q=x", "/help/query"],
)
def test_anonymous_is_sent_to_login(app: Flask, url: str) -> None:
    r = app.test_client().get(url)
    assert r.status_code == 302
    loc = urlsplit(r.headers["Location"])
    assert loc.path == "/login"
    assert parse_qs(loc.query)["next"] == [url]


@pytest.mark.parametrize(
    "url",
    [
        "/search?q=secret&logspace=secret",
        "/messages/secret/1",
        "/export?q=secret&logspace=secret&format=csv",
    ],
)
def test_logspace_without_rights_is_403(app: Flask, alice: FlaskClient, url: str) -> None:
    body = page_of(alice, url, 403)
    assert "may not read logspace" in body
    e = last_audit(app, "denied")
    assert (e.user, e.logspace, e.status) == ("alice", "secret", 403)


def test_searcher_without_any_logspace(app: Flask) -> None:
    nora = sign_in(app, "nora")
    page_of(nora, "/search", 403)
    page_of(nora, "/search?q=error", 403)
    page_of(nora, "/export?q=error", 403)


def test_logspace_picker_lists_readable_ones(admin: FlaskClient, alice: FlaskClient) -> None:
    def options(body: str) -> list[str]:
        sel = re.search(r'<select id="logspace".*?</select>', body, re.S)
        assert sel
        return re.findall(r'<option value="([^"]+)"', sel.group(0))

    assert options(page_of(alice, "/search")) == ["main", "other"]
    assert options(page_of(admin, "/search")) == ["main", "other", "secret"]
    body = page_of(alice, "/search?q=other&logspace=other")
    assert total_of(body) == 7


# ---------------------------------------------------------------- the search page


def test_empty_query_shows_the_newest(admin: FlaskClient, searchd: Searchd) -> None:
    body = page_of(admin, "/search")
    assert '<form id="search-form"' in body and 'id="q"' in body and 'id="search-submit"' in body
    assert re.findall(r'class="preset[^"]*" data-range="(\w+)"', body) == [
        "15m", "1h", "24h", "7d", "30d",
    ]  # fmt: skip
    assert 'name="from"' in body and 'name="to"' in body
    # No query: every message of the range (the last 24 h), newest first; the box stays empty.
    want = sd_get(searchd, "/v1/search", q="*", **{"from": "-24h"}, limit=50)
    assert total_of(body) == want["total"] > 50
    assert hit_ids(body) == [h["id"] for h in want["hits"]]
    assert re.search(r'<input id="q" name="q" type="search" value=""', body)
    for link in (href(body, "next-page"), href(body, "order-toggle")):
        assert link and "q" not in parse_qs(urlsplit(link).query), link
    oldest = page_of(admin, href(body, "order-toggle") or "")
    ids = hit_ids(oldest)
    assert ids == sorted(ids) and total_of(oldest) == want["total"]
    # A narrower range: the newest of it.
    body = page_of(admin, "/search?q=&from=-15m")
    assert total_of(body) == sd_get(searchd, "/v1/count", q="*", **{"from": "-15m"})["total"]
    assert page_of(admin, "/help/query").count("host:web1") >= 1
    r = admin.get("/")
    assert r.status_code == 302 and r.headers["Location"].endswith("/search")


def test_search_page_elements(app: Flask, admin: FlaskClient, searchd: Searchd) -> None:
    body = page_of(admin, "/search?q=error&from=-1d")
    want = sd_get(searchd, "/v1/search", q="error", **{"from": "-1d"}, limit=50)
    assert total_of(body) == want["total"] > 50
    assert hit_ids(body) == [h["id"] for h in want["hits"]]
    assert len(hit_ids(body)) == 50
    first = want["hits"][0]
    assert f'href="/messages/main/{first["id"]}?q=error"' in body
    shown = page_of(admin, f"/messages/main/{first['id']}?q=error")
    assert "<mark>error</mark>" in shown
    # a q that does not parse leaves the message unmarked
    assert "<mark>" not in page_of(admin, f"/messages/main/{first['id']}?q=%28error")
    # Matched tokens marked, case kept: exactly searchd's spans (highlight=1), one <mark> each.
    assert "<mark>error</mark>" in body
    spans = sd_get(searchd, "/v1/search", q="error", **{"from": "-1d"}, limit=50, highlight=1)
    marks = re.findall(r"<mark>([^<]*)</mark>", body)
    want_marks = [
        h["message"].encode("utf-8", "surrogateescape")[a:b].decode("utf-8", "replace")
        for h in spans["hits"]
        for a, b in h["spans"]
    ]
    assert [html.unescape(m) for m in marks] == want_marks and len(marks) >= 50
    # Histogram: 60 buckets whose counts add up to the total, each a zoom link.
    svg = re.search(r'<svg id="histogram".*?</svg>', body, re.S)
    assert svg
    bars = re.findall(
        r'<a class="bar" href="([^"]+)" data-from="([^"]+)" data-to="([^"]+)" data-count="(\d+)"',
        svg.group(0),
    )
    assert 55 <= len(bars) <= 60
    assert sum(int(b[3]) for b in bars) == want["total"]
    busiest = max(bars, key=lambda b: int(b[3]))
    link = html.unescape(busiest[0])
    qs = parse_qs(urlsplit(link).query)
    assert qs["from"] == [busiest[1]] and qs["to"] == [busiest[2]] and qs["q"] == ["error"]
    zoomed = page_of(admin, link)
    assert total_of(zoomed) == int(busiest[3]) > 0
    # Top hosts and programs, each value adding itself to the query.
    for field, elem in (("host", "top-hosts"), ("program", "top-programs")):
        block = re.search(rf'<ol id="{elem}".*?</ol>', body, re.S)
        assert block
        values = re.findall(r'<a class="top-value" href="([^"]+)">([^<]+)</a>', block.group(0))
        top = sd_get(searchd, "/v1/top", q="error", field=field, k=10, **{"from": "-1d"})
        assert [v for _, v in values] == [v["value"] for v in top["values"]]
        link, value = values[0]
        q = parse_qs(urlsplit(html.unescape(link)).query)["q"][0]
        assert q == f"error {field}:{value}"
        refined = page_of(admin, html.unescape(link))
        assert total_of(refined) == top["values"][0]["count"]
    assert href(body, "export-csv") and href(body, "export-ndjson")
    e = last_audit(app, "search")
    assert (e.user, e.logspace, e.query, e.status) == (
        "admin",
        "main",
        f"error {field}:{value}",
        200,
    )


def test_results_are_sent_before_the_top_values(admin: FlaskClient) -> None:
    r = admin.get("/search?q=error&from=-1d", buffered=False)
    chunks = [c for c in r.response if c]
    r.close()
    assert len(chunks) == 2
    assert b'<tr class="hit' in chunks[0] and b'id="histogram"' in chunks[0]
    assert b'id="total"' in chunks[0]
    assert b'id="top-hosts"' not in chunks[0] and b'id="top-hosts"' in chunks[1]


def test_relative_times_resolved_once() -> None:
    from logbox_webui.search import resolve_time

    now = 1_795_000_000_123_456
    assert resolve_time("now", now) == "2026-11-18T11:06:40.123456Z"
    assert resolve_time("-15m", now) == "2026-11-18T10:51:40.123456Z"
    assert resolve_time("+1d", now) == "2026-11-19T11:06:40.123456Z"
    assert resolve_time("2026-11-01", now) == "2026-11-01"
    assert resolve_time(None, now) is None


def test_a_flash_shows_once_on_the_streamed_page(app: Flask) -> None:
    c = sign_in(app, "alice")
    with c.session_transaction() as sess:
        sess["_flashes"] = [("message", "hello once")]
    assert "hello once" in page_of(c, "/search?q=error")
    assert "hello once" not in page_of(c, "/search?q=error")


def test_top_value_that_needs_quotes(admin: FlaskClient, searchd: Searchd) -> None:
    # host "web_01" holds no space, but a value with one is quoted by the link.
    from logbox_webui.search import add_term, field_term

    assert field_term("host", "web 01") == 'host:"web 01"'
    assert field_term("host", 'a"b*') == 'host:"a\\"b\\*"'
    assert field_term("program", "sshd") == "program:sshd"
    assert add_term("a OR b", "host:x") == "(a OR b) host:x"
    body = page_of(admin, "/search?" + "q=" + "host%3A%22web_01%22" + "&from=-1d")
    assert (
        total_of(body)
        == sd_get(searchd, "/v1/count", q='host:"web_01"', **{"from": "-1d"})["total"]
    )


def test_paging_is_stable_and_oldest_first(admin: FlaskClient, searchd: Searchd) -> None:
    want = sd_get(searchd, "/v1/search", q="disk", limit=140, **{"from": "-1d"})
    body = page_of(admin, "/search?q=disk&from=-1d&limit=40")
    got = hit_ids(body)
    url = href(body, "next-page")
    while url and len(got) < 140:
        nxt = page_of(admin, url)
        got += hit_ids(nxt)
        url = href(nxt, "next-page")
    assert got[:140] == [h["id"] for h in want["hits"]]
    assert got == sorted(got, reverse=True)
    assert href(body, "first-page") is None and href(body, "prev-page") is None
    second = page_of(admin, href(body, "next-page") or "")
    first = page_of(admin, href(second, "first-page") or "")
    assert hit_ids(first) == hit_ids(body)
    assert hit_ids(page_of(admin, href(second, "prev-page") or "")) == hit_ids(body)
    oldest = page_of(admin, href(body, "order-toggle") or "")
    ids = hit_ids(oldest)
    assert ids == sorted(ids) and ids[0] == min(h["id"] for h in want["hits"] + [{"id": 10**9}])


def test_bad_query_shows_the_position(admin: FlaskClient, app: Flask) -> None:
    body = page_of(admin, "/search?q=%28a+OR+b", 400)
    err = re.search(r'<section class="error-box" id="query-error".*?</section>', body, re.S)
    assert err, body[:2000]
    assert 'data-position="7"' in err.group(0)
    assert '(a OR b<mark class="error-pos"> </mark>' in err.group(0)
    body = page_of(admin, "/search?q=%22%3Cb%3E+x+NOT", 400)
    assert "&lt;b&gt;" in body and "<b>" not in body.split('id="query-error"')[1]
    e = last_audit(app, "search")
    assert e.status == 400 and e.query == '"<b> x NOT'
    assert "bad_query" in e.detail
    page_of(admin, "/search?q=x&from=yesterday-ish", 400)
    page_of(admin, "/search?q=x&limit=0", 400)


def test_query_with_quotes_and_brackets_round_trips(admin: FlaskClient) -> None:
    q = "\"<a href=x>\" OR 'y' OR error&x"
    body = page_of(admin, "/search?" + _qs(q=q, **{"from": "-1d"}))
    value = re.search(r'<input id="q" name="q" type="search" value="([^"]*)"', body)
    assert value and html.unescape(value.group(1)) == q
    nxt = href(body, "order-toggle")
    assert nxt and parse_qs(urlsplit(nxt).query)["q"] == [q]


def test_query_with_bytes_that_are_not_utf8(admin: FlaskClient, searchd: Searchd) -> None:
    body = page_of(admin, "/search?q=bad%FF%FE+OR+raw%FF&from=-1d")
    assert (
        total_of(body)
        == sd_get(searchd, "/v1/count", q=b"bad\xff\xfe OR raw\xff", **{"from": "-1d"})["total"]
    )
    # The links keep the bytes; the page shows them as \xXX.
    nxt = href(body, "order-toggle")
    assert nxt and "q=bad%FF%FE+OR+raw%FF" in nxt
    assert "bad\\xff\\xfe" in body


def _qs(**params: str) -> str:
    from urllib.parse import urlencode

    return urlencode(params)


def test_searchd_down_is_503(searchd: Searchd, tmp_path: Path) -> None:
    a = create_app(
        {
            "SEARCHD_SOCKET": str(tmp_path / "none.sock"),
            "ACCOUNTS_PATH": str(tmp_path / "acc"),
            "TESTING": True,
        }
    )
    accounts_of(a).add_user("bob", PASSWORD, "admin")
    c = sign_in(a, "bob")
    for url in ("/search?q=x", "/messages/main/1", "/export?q=x"):
        body = page_of(c, url, 503)
        assert "unavailable" in body


# ---------------------------------------------------------------- one message


def test_hostile_message_is_inert(admin: FlaskClient, searchd: Searchd, app: Flask) -> None:
    found = sd_get(searchd, "/v1/search", q="program:evilapp", **{"from": "-1d"})
    assert found["total"] == 1
    mid = found["hits"][0]["id"]
    listing = page_of(admin, "/search?q=program%3Aevilapp&from=-1d")
    row = re.search(r'<tr class="hit.*?</tr>', listing, re.S)
    assert row
    assert "<script>" not in listing and "<b>bold" not in listing
    assert "&lt;script&gt;" in row.group(0)
    body = page_of(admin, f"/messages/main/{mid}")
    assert "<script>" not in body and "<b>bold" not in body
    text = re.search(r'<pre id="message-text">(.*?)</pre>', body, re.S)
    assert text
    t = text.group(1)
    assert "<script" not in t and "&lt;script&gt;" in t and "&lt;b&gt;bold" in t
    assert '<span class="esc">\\x00</span>' in t
    assert '<span class="esc">\\x1b</span>' in t
    assert '<span class="esc">\\xff</span><span class="esc">\\xfe</span>' in t
    assert "\x00" not in body and "\x1b" not in body
    raw = re.search(r'<pre id="raw" class="hexdump">(.*?)</pre>', body, re.S)
    assert raw
    hexes = re.findall(r'<span class="hex">([0-9a-f ]*)</span>', raw.group(1))
    assert bytes.fromhex("".join(hexes).replace(" ", "")) == HOSTILE
    assert 'id="message"' in body and "<dl" in body
    assert "evilhost" in body and "(3)" in body  # severity err (3)
    # the sender's address, or "unknown" when the message came without one
    assert re.search(
        r'<dd class="f-peer">(<span class="muted">unknown</span>|[0-9a-f.:]+)</dd>', body
    )
    e = last_audit(app, "message")
    assert (e.user, e.logspace, e.results, e.detail) == ("admin", "main", 1, f"id {mid}")
    around = page_of(admin, href(body, "context-host") or "")
    assert total_of(around) == 1 and hit_ids(around) == [mid]
    assert mid in hit_ids(page_of(admin, href(body, "context-all") or ""))
    page_of(admin, "/messages/main/999999", 404)
    page_of(admin, "/messages/nope/1", 404)


# ---------------------------------------------------------------- export


def _paged(searchd: Searchd, q: str, rng: dict[str, str], order: str = "newest") -> list[dict]:
    out, cursor = [], "0"
    while True:
        page = sd_get(searchd, "/v1/search", q=q, limit=100, order=order, cursor=cursor, **rng)
        out += page["hits"]
        if page["next_cursor"] is None:
            return out
        cursor = page["next_cursor"]


def test_export_equals_paging(app: Flask, admin: FlaskClient, searchd: Searchd) -> None:
    body = page_of(admin, "/search?q=error+OR+disk&from=-1d")
    url = href(body, "export-ndjson")
    assert url
    qs = parse_qs(urlsplit(url).query)
    rng = {"from": qs["from"][0], "to": qs["to"][0]}
    want = _paged(searchd, "error OR disk", rng)
    r = admin.get(url)
    assert r.status_code == 200 and r.mimetype == "application/x-ndjson"
    assert r.headers["Content-Security-Policy"] == CSP
    got = [json.loads(line) for line in r.get_data().splitlines()]
    r.close()
    assert got == want and len(got) == total_of(body)
    e = last_audit(app, "export")
    assert (e.user, e.query, e.results, e.status) == ("admin", "error OR disk", len(want), 200)
    csv_url = href(body, "export-csv")
    assert csv_url
    r = admin.get(csv_url)
    assert r.status_code == 200 and r.mimetype == "text/csv"
    assert "attachment" in r.headers["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(r.get_data().decode("utf-8", "surrogateescape"))))
    r.close()
    assert rows[0][:3] == ["id", "received", "timestamp"]
    assert [int(x[0]) for x in rows[1:]] == [h["id"] for h in want]
    assert [x[-1] for x in rows[1:]] == [h["message"] for h in want]
    # oldest first
    r = admin.get(url.replace("order=newest", "order=oldest"))
    got = [json.loads(line) for line in r.get_data().splitlines()]
    r.close()
    assert [h["id"] for h in got] == sorted(h["id"] for h in want)
    # bad parameters
    page_of(admin, "/export?q=x&format=xml", 400)
    page_of(admin, "/export?q=(x", 400)


# ---------------------------------------------------------------- issue 21: the search page


def test_histogram_axis_and_counts(admin: FlaskClient) -> None:
    body = page_of(admin, "/search?q=error&from=-1d")
    svg = re.search(r'<svg id="histogram".*?</svg>', body, re.S)
    axis = re.search(r'<svg id="histogram-y-axis"[^>]*data-max="(\d+)".*?</svg>', body, re.S)
    assert svg and axis
    counts = [int(c) for c in re.findall(r'<a class="bar"[^>]* data-count="(\d+)"', svg.group(0))]
    titles = re.findall(r"<title>[^<]*: (\d+)</title>", svg.group(0))
    assert [int(t) for t in titles] == counts  # each bar's count in its tooltip
    assert sum(counts) == total_of(body)
    ticks = [int(v) for v in re.findall(r'class="y-tick"[^>]* data-value="(\d+)"', axis.group(0))]
    assert ticks[0] == 0 and ticks == sorted(ticks) and len(ticks) >= 2
    assert int(axis.group(1)) == ticks[-1] >= max(counts) > 0
    assert f'data-axis-max="{ticks[-1]}"' in svg.group(0)
    # The fullest bar's height is its share of the axis.
    heights = [float(h) for h in re.findall(r'<rect class="fill"[^>]* height="([0-9.]+)"', body)]
    assert max(heights) == pytest.approx(max(counts) / ticks[-1] * (120 - 4), abs=0.01)


def test_previous_page_is_the_page_before(admin: FlaskClient, searchd: Searchd) -> None:
    want = sd_get(searchd, "/v1/search", q="disk", limit=90, **{"from": "-1d"})["hits"]
    pages = [page_of(admin, "/search?q=disk&from=-1d&limit=30")]
    for _ in range(2):
        pages.append(page_of(admin, href(pages[-1], "next-page") or ""))
    assert [hit_ids(p) for p in pages] == [[h["id"] for h in want[k : k + 30]] for k in (0, 30, 60)]
    assert [re.search(r'data-page="(\d+)"', p).group(1) for p in pages] == ["1", "2", "3"]
    back = page_of(admin, href(pages[2], "prev-page") or "")
    assert hit_ids(back) == hit_ids(pages[1])
    assert hit_ids(page_of(admin, href(back, "prev-page") or "")) == hit_ids(pages[0])
    assert hit_ids(page_of(admin, href(pages[2], "first-page") or "")) == hit_ids(pages[0])
    page_of(admin, "/search?q=disk&cursor=5&prev=1,x", 400)


def test_time_zone_toggle_in_the_url(admin: FlaskClient) -> None:
    body = page_of(admin, "/search?q=disk&from=-1d&limit=30")
    assert '<table id="results" data-tz="local"' in body
    rows = re.findall(r'<tr class="hit.*?</tr>', body, re.S)
    assert rows and all('<time datetime="' in r and 'data-us="' in r for r in rows)
    utc = href(body, "tz-toggle")
    assert utc and parse_qs(urlsplit(utc).query)["tz"] == ["utc"]
    body = page_of(admin, utc)
    assert '<table id="results" data-tz="utc"' in body
    nxt = href(body, "next-page")
    assert nxt and parse_qs(urlsplit(nxt).query)["tz"] == ["utc"]  # kept while paging
    assert '<input type="hidden" name="tz" value="utc">' in body
    local = href(body, "tz-toggle")
    assert local and "tz" not in parse_qs(urlsplit(local).query)
    page_of(admin, "/search?q=disk&tz=Europe/Paris", 400)


def _columns(body: str) -> list[str]:
    thead = re.search(r"<thead>.*?</thead>", body, re.S)
    assert thead
    return [html.unescape(c) for c in re.findall(r'<th class="[^"]*" data-col="([^"]+)"', thead[0])]


def _cells(body: str) -> list[dict[str, str]]:
    out = []
    for row in re.findall(r'<tr class="hit.*?</tr>', body, re.S):
        cells = re.findall(r'<td class="[^"]*" data-col="([^"]+)">(.*?)</td>', row, re.S)
        out.append({html.unescape(k): html.unescape(re.sub(r"<[^>]+>", "", v)) for k, v in cells})
    return out


def test_columns_chosen_in_the_url(admin: FlaskClient) -> None:
    body = page_of(admin, "/search?q=sdprobe&from=-1d")
    assert _columns(body) == ["time", "host", "program", "severity", "message"]
    (row,) = _cells(body)
    assert row["program"] == LONG_PROGRAM and row["host"] == "sdhost"
    chooser = re.search(r'<form id="columns-form".*?</form>', body, re.S)
    assert chooser
    boxes = re.findall(r'name="cols" value="(\w+)"( checked)?', chooser.group(0))
    assert [v for v, _ in boxes] == [
        "time", "timestamp", "host", "program", "severity", "facility", "peer", "pid", "msgid",
        "message",
    ]  # fmt: skip
    assert [v for v, on in boxes if on] == ["time", "host", "program", "severity", "message"]
    # The chooser's answer: checkboxes and the structured-data fields, each as cols=.
    cols = ["time", "program", "facility", "peer", "pid", "msgid", "eps@32473.c,eps@32473.d"]
    url = "/search?q=sdprobe&from=-1d&" + "&".join(f"cols={c}" for c in cols) + "&cols=message"
    body = page_of(admin, url)
    want = ["time", "program", "facility", "peer", "pid", "msgid", "eps@32473.c", "eps@32473.d"]
    assert _columns(body) == [*want, "message"]
    (row,) = _cells(body)
    assert row["eps@32473.c"] == "4242, 17"  # the parameter in both elements
    assert row["eps@32473.d"] == 'x "y"'
    assert (row["program"], row["facility"], row["pid"], row["msgid"]) == (
        LONG_PROGRAM, "user", "77", "ID1",
    )  # fmt: skip
    assert "sdprobe" in row["message"]
    # Kept in the URL as one cols=, by every link and the search form.
    for link in (href(body, "order-toggle"), href(body, "tz-toggle")):
        assert link and parse_qs(urlsplit(link).query)["cols"] == [",".join([*want, "message"])]
    assert re.search(r'id="cols-sd" name="cols" value="eps@32473.c,eps@32473.d"', body)
    # Unknown columns are refused; the default ones are left out of links.
    page_of(admin, "/search?q=x&cols=time,nosuch", 400)
    page_of(admin, "/search?q=x&cols=a%3Db.c", 400)
    body = page_of(admin, "/search?q=sdprobe&from=-1d&cols=time,host,program,severity,message")
    assert "cols" not in parse_qs(urlsplit(href(body, "order-toggle") or "").query)


def test_message_page_shows_the_raw_line(admin: FlaskClient, searchd: Searchd) -> None:
    (hit,) = sd_get(searchd, "/v1/search", q="sdprobe", **{"from": "-1d"})["hits"]
    body = page_of(admin, f"/messages/main/{hit['id']}")
    line = re.search(r'<pre id="raw-line" class="raw-line">(.*?)</pre>', body, re.S)
    assert line
    # The line as it was sent, but for the time stamp's form (the stored one, µs).
    ts = hit["timestamp"]
    assert ts and ts.startswith("2026-11-22T12:00:00.25")
    assert html.unescape(line.group(1)) == SD_LINE.replace("2026-11-22T12:00:00.250+01:00", ts)
    # Control bytes and bytes that are not UTF-8 are shown escaped, as everywhere.
    (evil,) = sd_get(searchd, "/v1/search", q="program:evilapp", **{"from": "-1d"})["hits"]
    body = page_of(admin, f"/messages/main/{evil['id']}")
    line = re.search(r'<pre id="raw-line" class="raw-line">(.*?)</pre>', body, re.S)
    assert line and line.group(1).startswith("&lt;11&gt;1 - evilhost evilapp - - - &lt;script")
    assert '<span class="esc">\\x00</span>' in line.group(1)


def test_raw_line_of_each_form() -> None:
    from logbox_webui.search import raw_line

    base = {
        "facility": 4, "severity": 6, "timestamp": "2026-11-22T09:05:07.000000+00:00",
        "timestamp_us": 1, "host": "h1", "program": "sshd", "pid": "42", "msgid": "",
        "sd": "", "message": "Accepted key",
    }  # fmt: skip
    assert raw_line({**base, "flags": ["rfc5424"]}) == (
        "<38>1 2026-11-22T09:05:07.000000+00:00 h1 sshd 42 - - Accepted key"
    )
    assert raw_line({**base, "flags": ["rfc3164"]}) == (
        "<38>Nov 22 09:05:07 h1 sshd[42]: Accepted key"
    )
    assert raw_line({**base, "flags": ["noheader"], "facility": None}) == "Accepted key"
