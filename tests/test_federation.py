# Scenario: remote and multiple logspaces (rpc/API.md §4.1, logbox_core/federation.py). Three
# real boxes, each started the way `make run` starts one (appliance/devrun.py: syslog-ng, indexd,
# searchd, the API behind nginx) on its own ports and data: sites a and b each receive part of a
# corpus, and box o receives all of it. On o, an admin adds a and b as sites (URL, an API token of
# each, its CA) and a multiple logspace `fed` = a:main + b:main. The oracle is o's own `main`:
# over `fed`, counts, histograms (by event time, so the buckets do not depend on when each box
# received a message), top values (hosts built so that the exact answer needs the over-fetch and
# the per-candidate counts) and every page of a search, newest and oldest, must equal it. Rights
# on remote logspaces are the local user's; a site that is down is a warning and the rest answer.
from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lbtest.collector import free_ports, send_tcp
from lbtest.devrun import DevRun
from logbox_client import Client, LogboxError
from logbox_core import federation as fed

PASSWORD = "fed-admin-pass-1"
NOW = int(time.time())
HOURS = 6


def corpus() -> tuple[list[bytes], list[bytes]]:
    """Site a's and site b's RFC 5424 lines (o gets both). Each site has 60 hosts of its own
    (100 down to 41 messages) and three shared ones: `big` (600 on a, 40 on b), `mid` (95 on
    a, 70 on b) and `shared` (80 on each: below 60 other hosts on each site, yet the third
    overall). Every message has its own pid but 31: 30 on a and 1 on b have pid 777777, so a
    site has more pids than a top lists, and b lists its own first ones, not 777777."""
    rnd = random.Random(22)
    words = ["error", "refused", "login", "accepted", "timeout", "disk", "full", "retry",
             "connection", "user", "root", "session", "opened", "closed", "kernel"]  # fmt: skip
    progs = ["sshd", "cron", "kernel", "nginx", "postfix"]
    serial = 0

    def lines(site: str) -> list[bytes]:
        nonlocal serial
        special = 30 if site == "a" else 1
        hosts = [(f"{site}{i:02d}", 100 - i) for i in range(60)]
        hosts += [("shared", 80), ("mid", 95 if site == "a" else 70)]
        hosts += [("big", 600 if site == "a" else 40)]
        out = []
        for host, n in hosts:
            for _ in range(n):
                serial += 1
                pri = rnd.choice((3, 4, 6, 7)) + 8 * rnd.choice((1, 3, 4, 10))
                ts = NOW - rnd.randrange(HOURS * 3600)
                stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
                text = " ".join(rnd.choice(words) for _ in range(rnd.randrange(2, 7)))
                prog = rnd.choice(progs)
                pid = 777777 if len(out) < special else serial
                out.append(f"<{pri}>1 {stamp} {host} {prog} {pid} - - {text}\n".encode())
        rnd.shuffle(out)
        return out

    return lines("a"), lines("b")


def start(top: Path, root: Path, name: str) -> DevRun:
    data = root / name
    (data / "etc").mkdir(parents=True)
    ports = free_ports()
    (data / "etc" / "collector.toml").write_text(
        "[ports]\n" + "".join(f"{k} = {v}\n" for k, v in ports.items())
    )
    d = DevRun(top, data, extra={"LOGBOX_ADMIN_PASSWORD": PASSWORD})
    d.tcp_port = ports["tcp"]  # type: ignore[attr-defined]
    return d


def send(d: DevRun, lines: list[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            send_tcp(d.tcp_port, b"".join(lines))  # type: ignore[attr-defined]
            return
        except ConnectionRefusedError:
            assert time.monotonic() < deadline, "the collector did not listen"
            time.sleep(0.1)


def wait_count(c: Client, n: int, logspace: str = "main") -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            got = c.count("*", logspace=logspace, from_="-1d", to="+1h")
        except LogboxError:
            got = -1
        if got == n:
            return
        assert time.monotonic() < deadline, f"{logspace}: {got} of {n} messages"
        time.sleep(0.2)


class Boxes:
    def __init__(self, a: DevRun, b: DevRun, o: DevRun, ca: Client, cb: Client, co: Client):
        self.a, self.b, self.o = a, b, o
        self.ca, self.cb, self.co = ca, cb, co


@pytest.fixture(scope="module")
def boxes(top: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Boxes]:
    root = tmp_path_factory.mktemp("fed")
    runs = [start(top, root, n) for n in ("a", "b", "o")]
    try:
        for d in runs:
            d.until("press Ctrl-C", timeout=90)
        ca, cb, co = (d.api("admin", PASSWORD) for d in runs)
        la, lb = corpus()
        send(runs[0], la)
        send(runs[1], lb)
        send(runs[2], la + lb)
        wait_count(ca, len(la))
        wait_count(cb, len(lb))
        wait_count(co, len(la) + len(lb))
        for name, d, c in (("a", runs[0], ca), ("b", runs[1], cb)):
            token = c.create_token("federation")["token"]
            co.call(
                "PUT",
                f"/sites/{name}",
                body={
                    "url": f"https://127.0.0.1:{d.rpc_port}",
                    "token": token,
                    "ca": (d.data / "tls" / "https.crt").read_text(),
                    "deadline_ms": 3000,
                },
            )
        co.call("PUT", "/multiple/fed", body={"members": ["a:main", "b:main"]})
        yield Boxes(*runs, ca, cb, co)  # type: ignore[call-arg]
    finally:
        for d in runs:
            d.close()


RANGE = {"from_": NOW - HOURS * 3600 - 60, "to": NOW + 60, "time": "event"}
QUERIES = ["*", "error", "refused AND NOT login", "host:a1*", '"connection refused"',
           "severity:err", "program:sshd OR program:cron", "host:shared", "nothing-matches-this"]  # fmt: skip


def test_settings_are_admin_only_and_keep_tokens(boxes: Boxes) -> None:
    """GET /sites shows the sites without their tokens; PUT without a token keeps it; bad
    settings are refused and change nothing; the file is 0640."""
    doc = boxes.co.call("GET", "/sites")
    assert set(doc["sites"]) == {"a", "b"} and doc["multiple"] == {"fed": ["a:main", "b:main"]}
    assert doc["sites"]["a"]["token_set"] is True and "token" not in doc["sites"]["a"]
    raw = (boxes.o.data / "etc" / "sites.json").read_text()
    assert (boxes.o.data / "etc" / "sites.json").stat().st_mode & 0o777 == 0o640
    url = doc["sites"]["a"]["url"]
    boxes.co.call("PUT", "/sites/a", body={"url": url, "ca": doc["sites"]["a"]["ca"],
                                           "deadline_ms": 3000})  # fmt: skip
    assert (
        json.loads((boxes.o.data / "etc" / "sites.json").read_text())["sites"]["a"]["token"]
        == json.loads(raw)["sites"]["a"]["token"]
    )
    for path, body in (
        ("/sites/c", {"url": "http://127.0.0.1:1", "token": "x"}),
        ("/sites/c", {"url": "https://127.0.0.1:1"}),  # no token
        ("/sites/C", {"url": "https://127.0.0.1:1", "token": "x"}),
        ("/multiple/m", {"members": ["zz:main"]}),  # no such site
        ("/multiple/m", {"members": ["nosuchlocal"]}),
        ("/multiple/main", {"members": ["a:main"]}),  # a local logspace's name
    ):
        with pytest.raises(LogboxError) as e:
            boxes.co.call("PUT", path, body=body)
        assert e.value.status == 400, (path, e.value)
    assert (boxes.o.data / "etc" / "sites.json").read_text().count('"c"') == 0
    # the stored token goes only to the URL it was given for
    with pytest.raises(LogboxError) as e:
        boxes.co.call("PUT", "/sites/a", body={"url": "https://127.0.0.1:1"})
    assert e.value.status == 400 and "token" in e.value.message
    assert json.loads((boxes.o.data / "etc" / "sites.json").read_text())["sites"]["a"]["url"] == url
    with pytest.raises(LogboxError) as e:
        boxes.co.call("DELETE", "/sites/a")  # fed has a:main
    assert e.value.status == 400


def test_logspaces_lists_remote_and_multiple(boxes: Boxes) -> None:
    names = {ls["name"]: ls for ls in boxes.co.logspaces()}
    assert {"main", "a:main", "b:main", "fed"} <= set(names)
    assert names["a:main"]["site"] == "a"
    assert names["a:main"]["messages"] == boxes.ca.logspaces()[0]["messages"]
    assert names["fed"]["members"] == ["a:main", "b:main"]


@pytest.mark.parametrize("q", QUERIES)
def test_count_and_histogram_equal_one_box(boxes: Boxes, q: str) -> None:
    c = boxes.co
    assert c.count(q, logspace="fed", **RANGE) == c.count(q, logspace="main", **RANGE)
    want = c.histogram(q, logspace="main", buckets=37, **RANGE)
    got = c.histogram(q, logspace="fed", buckets=37, **RANGE)
    assert got["step_us"] == want["step_us"] and got["total"] == want["total"]
    nz = [b for b in want["buckets"] if b["count"]]
    assert [b for b in got["buckets"] if b["count"]] == nz
    assert [m["ok"] for m in got["members"]] == [True, True] and got["warnings"] == []
    # one remote logspace alone is its site's own answer
    assert c.count(q, logspace="a:main", **RANGE) == boxes.ca.count(q, **RANGE)


@pytest.mark.parametrize(
    ("field", "k", "q"),
    [("host", 5, "*"), ("host", 3, "error"), ("host", 1, "*"), ("program", 5, "*"),
     ("severity", 8, "*"), ("facility", 4, "refused"), ("message", 6, "*"),
     ("host", 50, "login")],
)  # fmt: skip
def test_top_is_exact(boxes: Boxes, field: str, k: int, q: str) -> None:
    """The top values equal the one box's, counts and order, including `shared`, which is
    below 60 other hosts on each site."""
    c = boxes.co
    want = c.top(q, field, logspace="main", k=k, **RANGE)
    doc = c.call("GET", "/logspaces/fed/top",
                 params={"q": q, "field": field, "k": str(k), "from": str(RANGE["from_"]),
                         "to": str(RANGE["to"]), "time": "event"})  # fmt: skip
    assert doc["values"] == want, (doc["values"], want)
    assert doc["warnings"] == []
    if field == "host" and k == 5 and q == "*":
        assert [v["value"] for v in want[:3]] == ["big", "mid", "shared"]


def test_top_asks_for_the_counts_of_candidates(boxes: Boxes) -> None:
    """The first pid (777777: 30 on a, 1 on b) is in a's list of pids but not in b's (b has
    more pids than a top lists, all counted once, and lists its first ones by bytes): b is asked
    how many it has (the top pids of the messages with that pid), as its audit shows, and the
    answer is exact."""
    c = boxes.co
    q = "NOT host:nobody"
    want = c.top(q, "pid", logspace="main", k=1, **RANGE)
    assert want == [{"value": "777777", "count": 31}]
    doc = c.call("GET", "/logspaces/fed/top",
                 params={"q": q, "field": "pid", "k": "1", "from": str(RANGE["from_"]),
                         "to": str(RANGE["to"]), "time": "event"})  # fmt: skip
    assert doc["values"] == want and doc["warnings"] == []
    audit = boxes.cb.call("GET", "/audit", params={"action": "top", "limit": "1000"})["entries"]
    asked = [e["query"] for e in audit if (e.get("query") or "").startswith(f"({q}) AND")]
    assert asked == [f"({q}) AND (pid:777777)"], asked  # one value: the others are exact
    # a was asked nothing: it listed 777777 itself
    audit = boxes.ca.call("GET", "/audit", params={"action": "top", "limit": "1000"})["entries"]
    assert not [e for e in audit if (e.get("query") or "").startswith(f"({q}) AND")]
    # top 5 pids: 777777, then four counted once: b is asked for the top 5 as they stand (their
    # counts are exact), but the thousands of values counted once that nobody listed could be
    # among them (ties by bytes), more than it asks about: a warning says so
    doc = c.call("GET", "/logspaces/fed/top",
                 params={"q": q, "field": "pid", "k": "5", "from": str(RANGE["from_"]),
                         "to": str(RANGE["to"]), "time": "event"})  # fmt: skip
    assert doc["values"][0] == want[0] and len(doc["values"]) == 5
    assert any(w.startswith("top: the order may be inexact") for w in doc["warnings"])


def all_hits(c: Client, logspace: str, order: str, q: str, limit: int) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10000):
        page = c.search(q, logspace=logspace, order=order, limit=limit, cursor=cursor, **RANGE)
        assert len(page["hits"]) <= limit
        hits += page["hits"]
        cursor = page["next_cursor"]
        if cursor is None:
            return hits
    pytest.fail("the pages did not end")


@pytest.mark.parametrize(("order", "q", "limit"),
                         [("newest", "*", 997), ("oldest", "error", 113), ("newest", "host:shared", 7)])  # fmt: skip
def test_search_pages_equal_one_box(boxes: Boxes, order: str, q: str, limit: int) -> None:
    """Paging through every match with the cursor gives each message once, the same messages
    as the one box, merged in (received, member, id) order."""
    c = boxes.co

    def ident(h: dict[str, Any]) -> tuple[str, int, str, str]:
        return (h["host"], h["timestamp_us"], h["pid"], h["message"])

    got = all_hits(c, "fed", order, q, limit)
    want = all_hits(c, "main", order, q, limit)
    assert len(got) == len(want) > 0
    assert Counter(map(ident, got)) == Counter(map(ident, want))
    assert len({(h["logspace"], h["id"]) for h in got}) == len(got)
    keys = [(h["received_us"], h["logspace"], h["id"]) for h in got]
    assert keys == sorted(keys, reverse=order == "newest")
    first = c.search(q, logspace="fed", order=order, limit=limit, **RANGE)
    assert first["total"] == len(want)
    # a hit of a remote logspace is its site's message
    h = got[0]
    assert (
        c.call("GET", f"/logspaces/{h['logspace']}/messages/{h['id']}")["message"] == h["message"]
    )


def test_bad_requests(boxes: Boxes) -> None:
    c = boxes.co
    for path, params, status in (
        ("/logspaces/fed/count", {"q": "(unbalanced"}, 400),
        ("/logspaces/fed/search", {"q": "*", "cursor": "f1"}, 400),  # not 2 members
        ("/logspaces/fed/search", {"q": "*", "cursor": "f1.2.3.4.5.6.7.8.9.10.11"}, 400),
        ("/logspaces/zz:main/count", {"q": "*"}, 404),
        ("/logspaces/fed/export", {"q": "*"}, 400),
        ("/logspaces/fed/messages/1", {}, 400),
        ("/logspaces/a:nosuch/count", {"q": "*"}, 404),
    ):
        with pytest.raises(LogboxError) as e:
            c.call("GET", path, params=params)
        assert e.value.status == status, (path, e.value)


def test_rights_apply_to_remote_logspaces(boxes: Boxes) -> None:
    c = boxes.co
    c.call("POST", "/users", body={"name": "onlya", "password": "onlya-pass-1234",
                                   "role": "searcher", "logspaces": ["a:main"]})  # fmt: skip
    u = boxes.o.api("onlya", "onlya-pass-1234")
    assert u.count("*", logspace="a:main", **RANGE) == boxes.ca.count("*", **RANGE)
    assert {ls["name"] for ls in u.logspaces()} == {"a:main"}
    for ls in ("b:main", "fed", "main"):
        with pytest.raises(LogboxError) as e:
            u.count("*", logspace=ls, **RANGE)
        assert e.value.status == 403, ls
    # "*" is every local logspace, not another box's: adding a site gives nobody its data
    c.call("POST", "/users", body={"name": "star", "password": "star-pass-12345",
                                   "role": "searcher", "logspaces": ["*"]})  # fmt: skip
    u = boxes.o.api("star", "star-pass-12345")
    assert u.count("*", logspace="main", **RANGE) == c.count("*", logspace="main", **RANGE)
    local = {ls["name"] for ls in c.logspaces() if "site" not in ls and "members" not in ls}
    assert {ls["name"] for ls in u.logspaces()} == local  # fed: its members are remote
    for ls in ("a:main", "fed"):
        with pytest.raises(LogboxError) as e:
            u.count("*", logspace=ls, **RANGE)
        assert e.value.status == 403, ls


def test_web_ui_searches_a_multiple_logspace(boxes: Boxes) -> None:
    """In Chromium on o's web UI: the logspace menu offers a:main, b:main and fed; a search of
    fed shows the one box's total, pages on with the merged cursor to the same hits, and a hit
    opens its site's message."""
    from lbtest.webui import browser, login
    from selenium.webdriver.common.by import By

    c = boxes.co
    q = "error"
    want = c.count(q, logspace="main", **RANGE)
    url = f"https://127.0.0.1:{boxes.o.webui_port}"
    rng = f"from={RANGE['from_']}&to={RANGE['to']}&time=event"
    with browser() as d:
        login(d, url, "admin", PASSWORD)
        d.get(f"{url}/search?logspace=fed&q={q}&{rng}&limit=50")
        opts = [
            o.get_attribute("value") for o in d.find_elements(By.CSS_SELECTOR, "#logspace option")
        ]
        assert {"main", "a:main", "b:main", "fed"} <= set(opts), opts
        assert int(d.find_element(By.ID, "total").get_attribute("data-total")) == want
        assert not d.find_elements(By.CSS_SELECTOR, "p.warning")
        seen = []
        for _ in range(3):
            rows = d.find_elements(By.CSS_SELECTOR, "tr.hit")
            assert len(rows) == 50
            seen += [r.get_attribute("data-href") for r in rows]
            d.find_element(By.ID, "next-page").click()
        assert len(set(seen)) == 150  # each page new hits, each one a member's message
        api = all_hits(c, "fed", "newest", q, 150)[:150]
        assert [h.split("?")[0] for h in seen] == [
            f"/messages/{h['logspace']}/{h['id']}" for h in api
        ]
        d.get(url + "/admin/sites")
        for name in ("a", "b"):
            state = d.find_element(By.ID, f"site-{name}-state")
            assert state.get_attribute("data-ok") == "true" and f"{name}:main" in state.text
        assert d.find_element(By.ID, "multiple-fed-members").get_attribute("value") == (
            "a:main, b:main"
        )
        d.get(url + seen[0])
        text = d.find_element(By.ID, "message-text").text
        assert text == api[0]["message"]
        assert d.find_element(By.ID, "message").get_attribute("data-logspace") == api[0]["logspace"]


def test_a_site_down_is_a_warning(boxes: Boxes) -> None:
    """Last: b stops. fed answers with a's part and a warning naming b:main, within b's
    deadline; b:main alone is 503."""
    c = boxes.co
    want = boxes.ca.count("error", **RANGE)
    boxes.b.stop()
    t0 = time.monotonic()
    doc = c.call("GET", "/logspaces/fed/count", params={
        "q": "error", "from": str(RANGE["from_"]), "to": str(RANGE["to"]), "time": "event"})  # fmt: skip
    assert time.monotonic() - t0 < 3 + 2
    assert doc["total"] == want
    assert [m["ok"] for m in doc["members"]] == [True, False]
    assert any(w.startswith("b:main: ") for w in doc["warnings"]), doc["warnings"]
    page = c.search("error", logspace="fed", limit=50, **RANGE)
    assert page["total"] == want and {h["logspace"] for h in page["hits"]} == {"a:main"}
    with pytest.raises(LogboxError) as e:
        c.count("error", logspace="b:main", **RANGE)
    assert e.value.status == 503
    names = c.call("GET", "/logspaces")
    assert any("site b" in w for w in names["warnings"])


def test_names() -> None:
    """The name rules: site:logspace in rights; the cursor's form."""
    assert fed.split_remote("a:main") == ("a", "main")
    assert fed.split_remote("a:") is None and fed.split_remote("A:main") is None
    assert fed.name_problem("a:main") is None and fed.name_problem("a:b:c") is not None
    cur = [0, None, 12345678901234567890]
    assert fed.decode_cursor(fed.encode_cursor(cur), 3) == cur
    assert fed.encode_cursor([None, None]) is None
    assert fed.values_query("x", "host", ['a b*"(', "c\td"]) == (
        '(x) AND (host:a\\ b\\*\\"\\( OR host:c\\\td)'
    )
    assert fed.escape_value("pid", "\x1f:") == "\\\x1f\\:"
    assert fed.escape_value("severity", "err") == "err"


def test_a_broken_answer_is_refused() -> None:
    """A member's answer missing what the merge reads, or of the wrong types (a broken box, or
    another version), is refused as bad_response (a warning naming it), never merged."""
    hit = {k: 0 if k.endswith(("id", "_us")) else "" for k in fed.HIT_KEYS}
    good = {
        "count": {"total": 3},
        "histogram": {"total": 1, "step_us": 1, "buckets": [{"from": 0, "count": 1}]},
        "top": {"total": 1, "values": [{"value": "a", "count": 1}]},
        "search": {"total": 1, "hits": [hit], "next_cursor": "7"},
    }
    for what, doc in good.items():
        assert fed.checked(what, doc) is doc
    bad = [
        ("count", {"total": "3"}),
        ("count", {"total": [1]}),
        ("count", {"total": 1, "warnings": "x"}),
        ("histogram", {"total": 1, "step_us": 1, "buckets": [{"from": "x", "count": 1}]}),
        ("histogram", {"total": 1, "buckets": []}),
        ("top", {"total": 1, "values": "abc"}),
        ("top", {"total": 1, "values": [{"value": 1, "count": 1}]}),
        ("search", {"total": 1, "hits": "x", "next_cursor": None}),
        ("search", {"total": 1, "hits": [dict(hit, id="1")], "next_cursor": None}),
        ("search", {"total": 1, "hits": [{"id": 1}], "next_cursor": None}),
        ("search", {"total": 1, "hits": [], "next_cursor": "f3.x"}),
    ]
    for what, doc in bad:
        with pytest.raises(fed.MemberError) as e:
            fed.checked(what, doc)
        assert e.value.code == "bad_response", (what, doc)
