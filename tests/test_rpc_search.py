# Scenario (issue 6): the RPC API answers searches exactly as `logbox search` does on the same
# store. Loghub lines (several systems, RFC 5424 and RFC 3164) go through the real ingest path
# (syslog-ng -> FIFO -> logbox-indexd) into a store with two logspaces ("secure" gets the
# auth/authpriv facilities); real logbox-searchd and real gunicorn (TLS) serve the API. Then, for
# seeded generated queries (tokens taken from the stored messages, AND/OR/NOT, juxtaposition,
# wildcards, phrases, host:/program:/pid:/msgid: fields, severity and facility) plus a fixed list,
# the API's search (every page, both orders, several page sizes), count, histogram and top equal
# the CLI's answers (`logbox search --data`, in process, no searchd), refused queries are refused
# alike (bad_query at the same byte offset), and the API's first page is searchd's answer, with
# highlight=1 too (every hit with its spans).
# A searcher with rights to one logspace sees only that one in GET /logspaces, and gets 403 on
# the other.
from __future__ import annotations

import argparse
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from lbtest import corpus, querygen
from lbtest.appliance import Appliance
from lbtest.cli import Logbox, Searcher, message_bytes, parse_bad_query
from lbtest.query import Corpus, Msg
from lbtest.rpc import RpcServer, search_pages
from lbtest.searchd import Searchd, searchd_binary
from lbtest.wait import wait_until

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("LOGBOX_RPC_SEARCH_SEED", "20261122"))
N_QUERIES = int(os.environ.get("LOGBOX_RPC_SEARCH_QUERIES", "80"))
# (system, format, lines): ~6,000 messages; OpenSSH and part of Linux go to "secure".
FEEDS = [
    ("Linux", "5424", 1000),
    ("OpenSSH", "5424", 800),
    ("Apache", "5424", 1000),
    ("HDFS", "5424", 800),
    ("Zookeeper", "5424", 800),
    ("HealthApp", "3164", 800),
    ("Android", "3164", 800),
]
ROUTES = [{"name": "secure", "facility": ["auth", "authpriv"]}]
LOGSPACES = ("main", "secure")
FIXED_QUERIES = [
    b"*",
    b"error",
    b"failed AND password",
    b"error OR warn* OR fail*",
    b"NOT info",
    b"conn*",
    b"*tion",
    b"user?ame",
    b'"session opened"',
    b"severity<=err",
    b"severity:info AND NOT program:sshd",
    b"facility:authpriv OR facility:kern",
    b"program:sshd",
    b"host:combo*",
    b"(error OR exception) AND NOT (debug OR trace)",
    b"zzznothere",
    b"(a OR b",  # refused: unbalanced
    b"severity:nosuch",  # refused: unknown severity
    b"",  # refused: empty
]
TOP_FIELDS = ["host", "program", "pid", "severity", "facility", "message", "msgid"]


@dataclass
class Stack:
    """The appliance, searchd and the API over one store, and what the tests need of it."""

    app: Appliance
    searchd: Searchd
    rpc: RpcServer
    admin: requests.Session
    logbox: Path
    time_from: str  # epoch seconds covering every message
    time_to: str
    stored: dict[str, list[dict[str, Any]]]  # logspace -> cat objects


def converted(system: str, fmt: str, n: int) -> list[bytes]:
    """The first n lines of a loghub sample as the converter frames them (--msg full)."""
    tool = corpus.loghub_tool()
    args = argparse.Namespace(msg="full", format=fmt, sd=False, facility=None)
    lines, _, _ = tool.convert(system, str(corpus.LOGHUB_DIR / system / f"{system}_2k.log"), args)
    return [ln.encode("utf-8", "surrogateescape") for ln in lines[:n]]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path, logbox_bin: Path) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("rpcsearch")
    missing = {s for s, _, _ in FEEDS} - set(corpus.loghub_systems())
    assert not missing, f"loghub samples {missing} missing under {corpus.LOGHUB_DIR}"
    with Appliance(root, routes=ROUTES) as app:
        t0 = int(time.time()) - 2
        sent = 0
        for system, fmt, n in FEEDS:
            lines = converted(system, fmt, n)
            app.send(b"".join(ln + b"\n" for ln in lines), "tcp")
            sent += len(lines)
        wait_until(
            lambda: sum(app.count(ls) for ls in LOGSPACES) >= sent,
            f"all {sent} sent are stored",
            120,
            interval=0.1,
            check=app.assert_alive,
        )
        for ls in LOGSPACES:
            app.settle(ls, quiet=1.0)
        assert sum(app.count(ls) for ls in LOGSPACES) == sent
        stored = {ls: app.messages(ls) for ls in LOGSPACES}
        assert all(stored.values()), {ls: len(v) for ls, v in stored.items()}
        sd = Searchd(searchd_binary(top), app.data, root / "searchd.sock").start()
        try:
            rpc = RpcServer(
                root / "rpc",
                searchd_socket=sd.sock,
                data=app.data,
                indexd_status=app.status_file,
            )
            with rpc:
                admin = rpc.session(rpc.login())
                yield Stack(
                    app, sd, rpc, admin, logbox_bin, str(t0), str(int(time.time()) + 2), stored
                )
        finally:
            sd.stop()


# ---------------------------------------------------------------- helpers


def api(s: requests.Session, url: str, **params: Any) -> requests.Response:
    """GET url with params (bytes values are sent as they are, %-encoded)."""
    return s.get(url, params=params, timeout=120)


def ok(r: requests.Response) -> dict[str, Any]:
    """The JSON body of a 200 answer (asserting the status)."""
    assert r.status_code == 200, f"{r.request.method} {r.url}: {r.status_code} {r.text[:500]}"
    return r.json()


def api_pages(
    st: Stack, ls: str, q: bytes, order: str, limit: int
) -> tuple[list[dict[str, Any]], set[int]]:
    """Every hit of q through the API, page after page with the cursor; also the totals seen."""
    hits: list[dict[str, Any]] = []
    totals: set[int] = set()
    params = {"q": q, "from": st.time_from, "to": st.time_to, "order": order, "limit": limit}
    url = f"{st.rpc.base}/logspaces/{ls}/search"
    for body in search_pages(st.admin, url, params, timeout=120):
        assert len(body["hits"]) <= limit
        hits += body["hits"]
        totals.add(body["total"])
    return hits, totals


def queries(st: Stack) -> list[bytes]:
    """The fixed queries and N_QUERIES seeded ones made from the stored messages of main."""
    vocab = querygen.Vocab.of(Corpus([Msg.from_json(m) for m in st.stored["main"]]))
    gen = querygen.QueryGen(random.Random(SEED), vocab)
    out = list(FIXED_QUERIES)
    while len(out) < len(FIXED_QUERIES) + N_QUERIES:
        q = gen.query()
        if q and b"\x00" not in q and q not in out:
            out.append(q)
    return out


def without_took(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "took_ms"}


# ---------------------------------------------------------------- the tests


def test_api_answers_as_the_cli(stack: Stack) -> None:
    st = stack
    rng = random.Random(SEED + 1)
    lb = Logbox(st.logbox, st.app.data, "main")
    cli = Searcher(lb)
    times = {"from_": st.time_from, "to": st.time_to}
    base = f"{st.rpc.base}/logspaces/main"
    problems: list[str] = []
    matched = refused = 0
    for q in queries(st):
        shown = q.decode("utf-8", "replace")
        p = cli.run(q, count=True, **times)
        if p.returncode != 0:
            pos, msg, _, _ = parse_bad_query(p.stderr)
            refused += 1
            for what in ("search", "count", "histogram", "top"):
                extra = {"field": "host"} if what == "top" else {}
                r = api(st.admin, f"{base}/{what}", q=q, **{"from": st.time_from}, **extra)
                err = r.json().get("error", {}) if r.status_code == 400 else {}
                if r.status_code != 400 or err.get("code") != "bad_query":
                    problems.append(f"{shown!r} {what}: CLI refuses ({msg}), API {r.status_code}")
                elif err.get("position") != pos:
                    problems.append(
                        f"{shown!r} {what}: bad_query at {err.get('position')}, CLI at {pos}"
                    )
            continue
        total = int(p.stdout)
        matched += total > 0
        params = {"q": q, "from": st.time_from, "to": st.time_to}
        # count
        body = ok(api(st.admin, f"{base}/count", **params))
        if body["total"] != total:
            problems.append(f"{shown!r} count: API {body['total']}, CLI {total}")
        # search, every page, both orders
        for order in ("newest", "oldest"):
            limit = rng.choice([7, 100, 1000, 10000])
            hits, totals = api_pages(st, "main", q, order, limit)
            want = cli.all(q, limit=1000, order=order, **times)
            if totals != {total}:
                problems.append(f"{shown!r} search {order}: totals {totals}, CLI {total}")
            if [h["id"] for h in hits] != [h["id"] for h in want]:
                problems.append(
                    f"{shown!r} search {order} limit {limit}: {len(hits)} ids, CLI {len(want)}; "
                    f"first API {[h['id'] for h in hits[:5]]}, CLI {[h['id'] for h in want[:5]]}"
                )
            elif hits != want:
                bad = next(i for i, (a, b) in enumerate(zip(hits, want, strict=True)) if a != b)
                problems.append(f"{shown!r} {order}: hit {bad} differs: {hits[bad]} != {want[bad]}")
        # the first page is searchd's answer as it is
        first = ok(api(st.admin, f"{base}/search", **params, limit=50))
        direct = st.searchd.get("/v1/search", {"logspace": "main", **params, "limit": 50}).json
        if without_took(first) != without_took(direct):
            problems.append(f"{shown!r} first page differs from searchd's: {first} != {direct}")
        # highlight=1 is passed on: every hit carries searchd's spans
        hl = {**params, "limit": 50, "highlight": 1}
        first = ok(api(st.admin, f"{base}/search", **hl))
        direct = st.searchd.get("/v1/search", {"logspace": "main", **hl}).json
        if without_took(first) != without_took(direct) or not all(
            "spans" in h for h in first["hits"]
        ):
            problems.append(f"{shown!r} highlighted page differs from searchd's: {first}")
        # histogram
        buckets = rng.choice([1, 7, 100, 500])
        body = ok(api(st.admin, f"{base}/histogram", **params, buckets=buckets))
        want_h = cli.histogram(q, buckets, **times)
        got_h = [(b["from"], b["count"]) for b in body["buckets"]]
        if got_h != [(b["from_us"], b["count"]) for b in want_h]:
            problems.append(f"{shown!r} histogram {buckets}: {got_h[:5]}... != CLI {want_h[:5]}")
        if body["total"] != total or sum(c for _, c in got_h) != total:
            problems.append(f"{shown!r} histogram total {body['total']}, CLI count {total}")
        # top
        field, k = rng.choice(TOP_FIELDS), rng.choice([1, 5, 20])
        body = ok(api(st.admin, f"{base}/top", **params, field=field, k=k))
        want_t = cli.top(q, field, **times)[:k]  # the CLI gives the first 10
        got_t = [(message_bytes(v["value"], "top value"), v["count"]) for v in body["values"]]
        if got_t[:10] != want_t or len(got_t) > k or body["field"] != field:
            problems.append(f"{shown!r} top {field} k={k}: {got_t} != CLI {want_t}")
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems[:40])
    # the generated queries are not all trivial
    assert matched >= N_QUERIES // 4, f"only {matched} queries matched anything"
    assert refused >= 3, refused


def test_message_by_id_is_the_stored_one(stack: Stack) -> None:
    st = stack
    msgs = st.stored["main"]
    for m in [msgs[0], msgs[len(msgs) // 2], msgs[-1]]:
        got = ok(api(st.admin, f"{st.rpc.base}/logspaces/main/messages/{m['id']}"))
        assert got == m
    nxt = msgs[-1]["id"] + 1000
    r = api(st.admin, f"{st.rpc.base}/logspaces/main/messages/{nxt}")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text


def test_logspaces_as_admin_and_as_searcher(stack: Stack) -> None:
    st = stack
    got = ok(api(st.admin, f"{st.rpc.base}/logspaces"))["logspaces"]
    direct = st.searchd.get("/v1/logspaces").json["logspaces"]
    # syslog-ng's own messages (logspace "system") may arrive meanwhile: names and the quiet
    # logspaces are compared
    assert [x["name"] for x in got] == [x["name"] for x in direct]
    assert set(LOGSPACES) <= {x["name"] for x in got}
    for ls in LOGSPACES:
        (a,) = (x for x in got if x["name"] == ls)
        (b,) = (x for x in direct if x["name"] == ls)
        assert a == b
        assert a["messages"] == len(st.stored[ls])

    sec = st.rpc.new_searcher(st.admin, "sec", ["secure"])
    mine = ok(api(sec, f"{st.rpc.base}/logspaces"))["logspaces"]
    assert [x["name"] for x in mine] == ["secure"]
    r = api(sec, f"{st.rpc.base}/logspaces/main/search", q="*", **{"from": st.time_from})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
    # on its own logspace, the searcher gets what the CLI gets
    hits = ok(
        api(
            sec,
            f"{st.rpc.base}/logspaces/secure/search",
            q="*",
            order="oldest",
            limit=10000,
            **{"from": st.time_from, "to": st.time_to},
        )
    )["hits"]
    assert hits == st.stored["secure"]
