# logbox-searchd, black box: the real daemon on a unix socket over a real store built with
# `logbox ingest`. Every endpoint's answer is checked against an independent expectation (the
# stored messages as `logbox cat` prints them, matched by brute force with the tokenizer oracle,
# and `logbox lookup`); every refused request gets its documented status and error code and the
# daemon stays healthy; many requests at once are all answered, broad queries do not hold up
# quick ones; a damaged segment is a warning, not a crash; SIGTERM ends it with status 0.
# Protocol: indexer/PROTOCOL.md.

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from lbtest import oracle, query
from lbtest.cli import Logbox, message_bytes
from lbtest.oracle import fold, tokenize, words
from lbtest.searchd import Searchd, UnixHTTPConnection, query_string, searchd_binary
from lbtest.wait import wait_until

Record = dict[str, Any]
Pred = Callable[[Record], bool]
Store = tuple[Path, "Truth", int]

N_MAIN = 3000
PER_TS = 15  # messages sharing one time stamp (one time-map entry, one catalog write, each)
GAP_S = 100  # seconds between two time stamps: 3000 messages over 5.5 h
VOCAB = [
    "error", "warning", "disk", "user", "login", "failed", "ok", "connection", "timeout",
    "refused", "accepted", "session", "opened", "closed", "kernel", "panic", "retry", "cache",
]  # fmt: skip
HOSTS = ["h0", "h1", "H2", "h3", "web-4"]
PROGRAMS = ["sshd", "cron", "kernel", "app"]
SEVERITIES = ["emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"]
FACILITIES = ["kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
              "authpriv", "ftp", "ntp", "security", "console", "solaris-cron"] + [
              f"local{i}" for i in range(8)]  # fmt: skip


# ---------------------------------------------------------------- the store and its truth


def rfc3339(s: int) -> str:
    return dt.datetime.fromtimestamp(s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_corpus(base_s: int, n: int, seed: int) -> list[bytes]:
    """n RFC 5424 lines, PER_TS of them at base_s, PER_TS at base_s + GAP_S, ... (ingested
    with --received header, so these are also their receive times)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        pri = (i % 24) * 8 + (i % 8)
        words = [rng.choice(VOCAB) for _ in range(rng.randint(3, 8))]
        if i % 50 == 0:
            words.insert(1, "Connection:Error")
        if i % 97 == 0:
            words.append("caf\xe9")  # UTF-8 é
        msg = " ".join(words).encode()
        if i % 113 == 0:
            msg += b" raw\xff\xfebytes"  # not UTF-8: \udcXX escapes in JSON
        msg += f" req-{i}".encode()
        sd = f'[ex@32473 user="u{i % 3}" code="{500 + i % 4}"]' if i % 10 == 0 else "-"
        line = (
            f"<{pri}>1 {rfc3339(base_s + i // PER_TS * GAP_S)} {HOSTS[i % len(HOSTS)]} "
            f"{PROGRAMS[i % len(PROGRAMS)]} {1000 + i % 17} ID{i % 5} {sd} "
        ).encode() + msg
        out.append(line)
    return out


class Truth:
    """The stored messages (`logbox cat`) and brute-force answers over them."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records
        self.by_id = {r["id"]: r for r in records}
        self.tokens = {r["id"]: tokenize(message_bytes(r["message"])) for r in records}
        # what a word finds: the tokens and their forms (FORMAT.md §6)
        self.words = {r["id"]: set(words(message_bytes(r["message"]))) for r in records}

    def ids(self, pred: Pred, lo_us: int | None = None, hi_us: int | None = None) -> list[int]:
        """Ids (ascending) of records satisfying pred, received in [lo_us, hi_us)."""
        return [
            r["id"]
            for r in self.records
            if (lo_us is None or r["received_us"] >= lo_us)
            and (hi_us is None or r["received_us"] < hi_us)
            and pred(r)
        ]

    def has_token(self, tok: bytes) -> Pred:
        return lambda r: fold(tok) in self.words[r["id"]]

    def has_phrase(self, *toks: bytes) -> Pred:
        """The phrase rule of QUERY.md §1 (lbtest/query.py: adjacent tokens, the outer words
        may be forms at the token's edge)."""
        q = query.Phrase(
            query.NS_TEXT, tuple(re.sub(rb"([*?\\])", rb"\\\1", fold(t)) for t in toks)
        )

        def pred(r: dict[str, Any]) -> bool:
            return query.matches(q, query.text_terms(message_bytes(r["message"])))

        return pred


@pytest.fixture(scope="module")
def searchd_bin(top: Path) -> Path:
    return searchd_binary(top)


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory: pytest.TempPathFactory, store_cli: Path) -> Store:
    """A store: logspace main (N_MAIN messages over the last ~6 h) and logspace other (20)."""
    data = tmp_path_factory.mktemp("searchd") / "data"
    data.mkdir()
    base_s = int(time.time()) - 6 * 3600
    lines = make_corpus(base_s, N_MAIN, seed=7)
    main = Logbox(store_cli, data)
    main.check(main.run("ingest", "--received", "header", "-", input=b"\n".join(lines) + b"\n"))
    other = Logbox(store_cli, data, logspace="other")
    other.ingest(b"".join(b"<14>hello other %d\n" % i for i in range(20)))
    records = main.cat()
    assert len(records) == N_MAIN
    assert records[0]["received_us"] == base_s * 1_000_000
    return data, Truth(records), base_s


@pytest.fixture(scope="module")
def daemon(corpus_store: Store, searchd_bin: Path, sockdir: Path) -> Iterator[Searchd]:
    """One daemon over corpus_store for the read-only tests."""
    data, _, _ = corpus_store
    with Searchd(searchd_bin, data, sockdir / "main.sock", ["--threads", "4"]) as d:
        yield d


@pytest.fixture(scope="module")
def truth(corpus_store: Store) -> Truth:
    return corpus_store[1]


def search_ids(d: Searchd, q: str, **params: Any) -> tuple[list[int], dict[str, Any]]:
    """Every hit of q, oldest first, in one page."""
    r = d.get("/v1/search", {"q": q, "limit": 10000, "order": "oldest", **params})
    assert r.status == 200, r.body[:500]
    body = r.json
    return [h["id"] for h in body["hits"]], body


# ---------------------------------------------------------------- happy paths


@pytest.mark.parametrize(
    "q,pred",
    [
        ("error", lambda t: t.has_token(b"error")),
        ("ERROR", lambda t: t.has_token(b"error")),
        ("req-42", lambda t: t.has_token(b"req-42")),
        ('"failed login"', lambda t: t.has_phrase(b"failed", b"login")),
        ("Connection:Error", lambda t: t.has_phrase(b"connection", b"error")),
        ("caf\xe9", lambda t: t.has_token("caf\xe9".encode())),
        ("disk AND NOT timeout", lambda t: lambda r: t.has_token(b"disk")(r) and not t.has_token(b"timeout")(r)),
        ("panic OR cache", lambda t: lambda r: t.has_token(b"panic")(r) or t.has_token(b"cache")(r)),
        ("host:h2", lambda t: lambda r: r["host"].lower() == "h2"),
        ("program:cron severity<=err", lambda t: lambda r: r["program"] == "cron" and r["severity"] <= 3),
        ("facility:local7", lambda t: lambda r: r["facility"] == 23),
        ("ex@32473.user:u1", lambda t: lambda r: 'user="u1"' in r["sd"]),
        ("*", lambda t: lambda r: True),
    ],
)  # fmt: skip
def test_search_matches_brute_force(
    daemon: Searchd, truth: Truth, q: str, pred: Callable[[Truth], Pred]
) -> None:
    ids, body = search_ids(daemon, q)
    want = truth.ids(pred(truth))
    assert want, f"the corpus should hold matches of {q!r}"
    assert ids == want
    assert body["total"] == len(want)
    assert body["next_cursor"] is None
    assert body["logspace"] == "main" and body["warnings"] == []
    assert isinstance(body["query"], str) and isinstance(body["took_ms"], float)
    assert body["segments"] >= 1
    # A hit is the message exactly as `logbox cat` prints it (the same lb_msg_json).
    for h in body["hits"][:50]:
        assert h == truth.by_id[h["id"]]


def test_search_lookup_agrees(daemon: Searchd, corpus_store: Store, store_cli: Path) -> None:
    data, _, _ = corpus_store
    lb = Logbox(store_cli, data)
    assert search_ids(daemon, "timeout")[0] == lb.lookup("timeout")
    assert search_ids(daemon, "host:web-4")[0] == lb.lookup("web-4", field="host")


def test_search_bytes_round_trip(daemon: Searchd, truth: Truth) -> None:
    ids, body = search_ids(daemon, "raw")
    assert ids == truth.ids(truth.has_token(b"raw"))
    for h in body["hits"]:
        assert b"raw\xff\xfebytes" in message_bytes(h["message"])


def test_search_pages_newest_first(daemon: Searchd, truth: Truth) -> None:
    want = sorted(truth.ids(truth.has_token(b"retry")), reverse=True)
    got, cursor, pages = [], None, 0
    while True:
        params: dict[str, Any] = {"q": "retry", "limit": 97}
        if cursor:
            params["cursor"] = cursor
        r = daemon.get("/v1/search", params)
        assert r.status == 200, r.body[:300]
        b = r.json
        got += [h["id"] for h in b["hits"]]
        assert b["total"] == len(want)
        pages += 1
        if b["next_cursor"] is None:
            break
        assert b["next_cursor"] == str(got[-1])
        cursor = b["next_cursor"]
    assert got == want and pages == -(-len(want) // 97)
    r = daemon.get("/v1/search", {"q": "retry", "limit": 5, "total": 0})
    assert r.json["total"] is None and len(r.json["hits"]) == 5


def test_time_range(daemon: Searchd, truth: Truth, corpus_store: Store) -> None:
    _, _, base_s = corpus_store
    lo, hi = base_s + 67 * GAP_S, base_s + 133 * GAP_S
    ids, body = search_ids(daemon, "*", **{"from": rfc3339(lo), "to": str(hi)})
    # [from, to): the messages received at `to` are outside.
    assert ids == list(range(67 * PER_TS + 1, 133 * PER_TS + 1))
    assert ids == truth.ids(lambda r: True, lo * 1_000_000, hi * 1_000_000)
    assert body["from"] == lo * 1_000_000 and body["to"] == hi * 1_000_000
    # Relative times: the last hour (give or take the second the request takes).
    before = time.time()
    ids, _ = search_ids(daemon, "*", **{"from": "-1h"})
    after = time.time()
    assert ids and ids == list(range(ids[0], N_MAIN + 1))
    assert truth.by_id[ids[0]]["received_us"] >= (before - 3600 - 1) * 1e6
    assert ids[0] == 1 or truth.by_id[ids[0] - 1]["received_us"] < (after - 3600 + 1) * 1e6
    # The default range is the last 24 h: everything.
    assert daemon.get("/v1/count", {"q": "*"}).json["total"] == N_MAIN
    # Without from, the range is the day before to.
    b = daemon.get("/v1/count", {"q": "*", "to": hi}).json
    assert b["from"] == (hi - 86400) * 1_000_000 and b["total"] == 133 * PER_TS


def test_count(daemon: Searchd, truth: Truth) -> None:
    for q, pred in [
        ("login", truth.has_token(b"login")),
        ("host:web-4", lambda r: r["host"] == "web-4"),
    ]:
        r = daemon.get("/v1/count", {"q": q})
        assert r.status == 200
        b = r.json
        assert b["total"] == len(truth.ids(pred))
        assert "hits" not in b and b["warnings"] == [] and b["logspace"] == "main"


def test_histogram(daemon: Searchd, truth: Truth, corpus_store: Store) -> None:
    _, _, base_s = corpus_store
    lo, hi, n = base_s, base_s + N_MAIN // PER_TS * GAP_S, 10
    r = daemon.get("/v1/histogram", {"q": "error", "from": lo, "to": hi, "buckets": n})
    assert r.status == 200, r.body[:300]
    b = r.json
    step = -(-(hi - lo) // n)
    assert b["step_us"] == step * 1_000_000
    want = Counter(
        (truth.by_id[i]["received_us"] // 1_000_000 - lo) // step
        for i in truth.ids(truth.has_token(b"error"))
    )
    assert [x["from"] for x in b["buckets"]] == [
        (lo + k * step) * 1_000_000 for k in range(len(b["buckets"]))
    ]
    assert [x["count"] for x in b["buckets"]] == [want.get(k, 0) for k in range(len(b["buckets"]))]
    assert b["total"] == sum(want.values()) == sum(x["count"] for x in b["buckets"])


@pytest.mark.parametrize(
    "field", ["host", "program", "severity", "facility", "message", "ex@32473.code"]
)
def test_top(daemon: Searchd, truth: Truth, field: str) -> None:
    def values(r: dict[str, Any]) -> set[str]:
        if field == "host":
            return {r["host"].lower()}
        if field == "program":
            return {r["program"].lower()}
        if field == "severity":
            return {SEVERITIES[r["severity"]]}
        if field == "facility":
            return {FACILITIES[r["facility"]]}
        if field == "message":
            return {t.decode("utf-8", "surrogateescape") for t in truth.words[r["id"]]}
        return set(_sd_codes(r))

    k = 4
    r = daemon.get("/v1/top", {"q": "failed", "field": field, "k": k})
    assert r.status == 200, r.body[:300]
    b = r.json
    matching = truth.ids(truth.has_token(b"failed"))
    counts = Counter(v for i in matching for v in values(truth.by_id[i]))
    # Ties go by the term's bytes: a facility or severity is stored as its number.
    names = {"severity": SEVERITIES, "facility": FACILITIES}.get(field)

    def key(kv: tuple[str, int]) -> tuple[int, bytes]:
        v = bytes([names.index(kv[0])]) if names else kv[0].encode("utf-8", "surrogateescape")
        return (-kv[1], v)

    want = sorted(counts.items(), key=key)[:k]
    assert [(v["value"], v["count"]) for v in b["values"]] == want
    assert b["field"] == field and b["total"] == len(matching)


def _sd_codes(r: dict[str, Any]) -> list[str]:
    sd = r["sd"]
    i = sd.find('code="')
    return [sd[i + 6 : sd.index('"', i + 6)]] if i >= 0 else []


def test_message_by_id(daemon: Searchd, truth: Truth) -> None:
    for i in (1, 113, N_MAIN):
        r = daemon.get(f"/v1/messages/{i}")
        assert r.status == 200
        assert r.json == truth.by_id[i]
    r = daemon.get("/v1/messages/5", {"logspace": "other"})
    assert r.status == 200 and r.json["message"] == "hello other 4"
    assert daemon.get(f"/v1/messages/{N_MAIN + 1}").error()["code"] == "not_found"
    for bad in ("0", "x1", "18446744073709551616"):
        r = daemon.get(f"/v1/messages/{bad}")
        assert r.status == 400 and r.error()["code"] == "bad_parameter", bad


def test_logspaces(daemon: Searchd) -> None:
    r = daemon.get("/v1/logspaces")
    assert r.status == 200
    assert r.json == {
        "logspaces": [
            {
                "name": "main",
                "first_id": 1,
                "next_id": N_MAIN + 1,
                "messages": N_MAIN,
                "delimiters": oracle.DEFAULT_DELIMS.decode(),
            },
            {
                "name": "other",
                "first_id": 1,
                "next_id": 21,
                "messages": 20,
                "delimiters": oracle.DEFAULT_DELIMS.decode(),
            },
        ]
    }
    r = daemon.get("/v1/count", {"q": "other", "logspace": "other"})
    assert r.json["total"] == 20 and r.json["logspace"] == "other"


def test_health_and_metrics(daemon: Searchd) -> None:
    r = daemon.get("/health")
    assert r.status == 200 and r.json == {"status": "ok"}
    daemon.get("/v1/count", {"q": "("})
    r = daemon.get("/metrics")
    assert r.status == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.body.decode()
    assert 'logbox_searchd_requests_total{endpoint="count",status="400"}' in text
    assert 'logbox_searchd_request_duration_seconds_bucket{endpoint="search",le="+Inf"}' in text
    assert "logbox_searchd_queries_in_flight " in text
    assert "logbox_searchd_uptime_seconds " in text
    assert f'logbox_logspace_next_id{{logspace="main"}} {N_MAIN + 1}' in text
    assert f'logbox_logspace_messages{{logspace="main"}} {N_MAIN}' in text
    for line in text.splitlines():
        assert line.startswith("#") or len(line.split(" ")) == 2, line


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "path,params,status,code,names",
    [
        ("/v1/search", {"q": "error AND )"}, 400, "bad_query", None),
        ("/v1/search", {"q": "(error OR disk"}, 400, "bad_query", None),
        ("/v1/search", {"q": "error)"}, 400, "bad_query", None),
        ("/v1/count", {"q": ""}, 400, "bad_query", None),
        ("/v1/count", {"q": "severity:loud"}, 400, "bad_query", None),
        ("/v1/count", {"q": "x" * 20000}, 400, "bad_query", None),
        ("/v1/count", {"q": "x" * 100_000}, 414, "uri_too_long", None),
        ("/v1/count", {}, 400, "bad_parameter", "q"),
        ("/v1/top", {"q": "*", "field": "colour"}, 400, "bad_parameter", "field"),
        ("/v1/top", {"q": "*"}, 400, "bad_parameter", "field"),
        ("/v1/top", {"q": "*", "field": "host", "k": 1001}, 400, "bad_parameter", "k"),
        ("/v1/count", {"q": "*", "from": "-1h", "to": "-2h"}, 400, "bad_parameter", "from"),
        ("/v1/count", {"q": "*", "from": "yesterday"}, 400, "bad_parameter", "from"),
        ("/v1/search", {"q": "*", "limit": 0}, 400, "bad_parameter", "limit"),
        ("/v1/search", {"q": "*", "limit": 10001}, 400, "bad_parameter", "limit"),
        ("/v1/search", {"q": "*", "limit": "ten"}, 400, "bad_parameter", "limit"),
        ("/v1/search", {"q": "*", "order": "random"}, 400, "bad_parameter", "order"),
        ("/v1/search", {"q": "*", "cursor": "-1"}, 400, "bad_parameter", "cursor"),
        ("/v1/histogram", {"q": "*", "buckets": 0}, 400, "bad_parameter", "buckets"),
        ("/v1/search", {"q": "*", "colour": "red"}, 400, "bad_parameter", "colour"),
        ("/v1/search", {"q": "*", "highlight": 2}, 400, "bad_parameter", "highlight"),
        ("/v1/count", {"q": "*", "highlight": 1}, 400, "bad_parameter", "highlight"),
        ("/v1/search", [("q", "a"), ("q", "b")], 400, "bad_parameter", "q"),
        ("/v1/search", {"q": "*", "logspace": "Bad/Name"}, 400, "bad_parameter", "logspace"),
        ("/v1/search", {"q": "*", "logspace": "nosuch"}, 404, "not_found", "nosuch"),
        ("/v2/search", {"q": "*"}, 404, "not_found", None),
    ],
)  # fmt: skip
def test_refused(
    daemon: Searchd, path: str, params: Any, status: int, code: str, names: str | None
) -> None:
    r = daemon.get(path, params)
    assert r.status == status, r.body[:300]
    assert r.headers["content-type"] == "application/json"
    err = r.error()
    assert err["code"] == code
    if names:
        assert names in err["message"]
    if code == "bad_query":
        q = dict(params)["q"] if not isinstance(params, list) else ""
        assert isinstance(err["position"], int) and 0 <= err["position"] <= len(q)
    else:
        assert "position" not in err
    assert daemon.healthy()


def test_bad_query_positions(daemon: Searchd) -> None:
    # QUERY.md §1: the offset of the offending token.
    assert daemon.get("/v1/count", {"q": "error AND )"}).error()["position"] == 10
    assert daemon.get("/v1/count", {"q": "disk error)"}).error()["position"] == 10
    assert daemon.get("/v1/count", {"q": 'a "open'}).error()["position"] == 2


def test_wildcards_everywhere_is_valid(daemon: Searchd, truth: Truth) -> None:
    r = daemon.get("/v1/count", {"q": "*?*?*?"})
    assert r.status == 200, r.body[:300]
    assert r.json["total"] == len(
        truth.ids(lambda x: any(len(t) >= 3 for t in truth.tokens[x["id"]]))
    )


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "HEAD", "OPTIONS"])
def test_only_get(daemon: Searchd, method: str) -> None:
    r = daemon.request(method, "/v1/search", {"q": "error"})
    assert r.status == 405 and r.headers["allow"] == "GET"
    if method != "HEAD":
        assert r.error()["code"] == "method_not_allowed"
    assert daemon.healthy()


def test_garbage_on_the_socket(daemon: Searchd) -> None:
    for junk in (
        b"\x00\xff garbage\r\n\r\n",
        b"GET /health HTTP/1.1\r\n" + b"X: y\r\n" * 5000 + b"\r\n",
        b"GET",
    ):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect(str(daemon.sock))
        s.sendall(junk)
        s.shutdown(socket.SHUT_WR)
        try:
            s.recv(4096)
        except OSError:
            pass
        s.close()
    assert daemon.healthy()


def test_bytes_in_errors(daemon: Searchd) -> None:
    # Bytes that are not UTF-8 come back as \udcXX escapes, so the body is still valid JSON.
    err = daemon.get("/v1/count", {"q": b"facility:\xff\xfe"}).error()
    assert err["code"] == "bad_query" and "\udcff\udcfe" in err["message"]
    err = daemon.get("/v1/count", {"q": "*", b"\xff": "1"}).error()
    assert err["code"] == "bad_parameter" and "\udcff" in err["message"]


def test_keep_alive(daemon: Searchd, truth: Truth) -> None:
    c = UnixHTTPConnection(daemon.sock)
    try:
        for i in range(30):
            q = VOCAB[i % len(VOCAB)] if i % 3 else "(broken"
            c.request("GET", "/v1/count?" + query_string({"q": q}))
            r = c.getresponse()
            body = json.loads(r.read())
            if i % 3:
                assert r.status == 200 and body["total"] == len(
                    truth.ids(truth.has_token(q.encode()))
                )
            else:
                assert r.status == 400 and body["error"]["code"] == "bad_query"
            assert not r.will_close
    finally:
        c.close()


# ---------------------------------------------------------------- concurrency


def test_concurrent_requests(daemon: Searchd, truth: Truth) -> None:
    jobs = [(w, len(truth.ids(truth.has_token(w.encode())))) for w in VOCAB] * 3
    jobs += [
        (f"host:{h}", len(truth.ids(lambda r, h=h: r["host"].lower() == h.lower()))) for h in HOSTS
    ]

    def one(job: tuple[str, int]) -> tuple[str, int, int]:
        r = daemon.get("/v1/count", {"q": job[0]})
        return job[0], r.status, r.json.get("total", -1)

    with ThreadPoolExecutor(max_workers=16) as ex:
        got = list(ex.map(one, jobs))
    assert [(q, 200, n) for q, n in jobs] == got


BIG_N = 300_000  # messages in big_store


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory, store_cli: Path) -> Path:
    """BIG_N messages with random hex tokens: a wildcard phrase over them takes a while."""
    data = tmp_path_factory.mktemp("big") / "data"
    data.mkdir()
    rng = random.Random(3)
    lines = b"".join(
        b"<14>1 - h%d app - - - tok%x w%x x%x\n"
        % (i % 7, rng.getrandbits(40), rng.getrandbits(32), rng.getrandbits(24))
        for i in range(BIG_N)
    )
    Logbox(store_cli, data).ingest(lines)
    return data


# Phrases of inner wildcards: every message is a candidate to read and check. Without term
# blobs (--term-cache-mb 0) the wildcards also walk the dictionaries.
SLOW_Q = '"*a* *b*" OR "*c* *d*"'
SLOW_ARGS = ["--term-cache-mb", "0", "--max-terms", "100000000"]  # keep SLOW_Q slow and allowed


def test_broad_queries_do_not_block_quick_ones(
    big_store: Path, searchd_bin: Path, sockdir: Path
) -> None:
    d = Searchd(
        searchd_bin,
        big_store,
        sockdir / "big.sock",
        ["--threads", "4", *SLOW_ARGS],
    ).start()
    try:
        t0 = time.monotonic()
        r = d.get("/v1/count", {"q": SLOW_Q})
        slow_alone = time.monotonic() - t0
        assert r.status == 200, r.body[:300]
        assert slow_alone > 0.2, f"the broad query took only {slow_alone:.3f} s: not a test"

        done: dict[str, float] = {}

        def slow(i: int) -> None:
            r = d.get("/v1/count", {"q": SLOW_Q})
            assert r.status == 200
            done[f"slow{i}"] = time.monotonic()

        threads = [threading.Thread(target=slow, args=(i,)) for i in range(2)]
        start = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(min(0.05, slow_alone / 4))
        t1 = time.monotonic()
        assert d.get("/health").status == 200
        health = time.monotonic() - t1
        t1 = time.monotonic()
        r = d.get("/v1/count", {"q": "host:h3"})
        quick = time.monotonic() - t1
        done["quick"] = time.monotonic()
        assert r.status == 200 and r.json["total"] == len(range(3, BIG_N, 7))
        for t in threads:
            t.join()
        assert health < 0.1, f"/health took {health:.3f} s while broad queries ran"
        assert done["quick"] < min(done["slow0"], done["slow1"]), (
            f"the quick query ({quick:.3f} s) finished after the broad ones "
            f"({min(done['slow0'], done['slow1']) - start:.3f} s)"
        )
    finally:
        assert d.stop() == 0, d.log()


def test_deadline_and_max_terms(big_store: Path, searchd_bin: Path, sockdir: Path) -> None:
    with Searchd(searchd_bin, big_store, sockdir / "dl.sock", ["--deadline-ms", "20"]) as d:
        r = d.get("/v1/count", {"q": SLOW_Q})
        assert r.status == 422, r.body[:300]
        assert r.error()["code"] == "too_broad" and "deadline" in r.error()["message"]
        assert d.get("/v1/count", {"q": "host:h3"}).status == 200
        assert d.healthy()
    with Searchd(searchd_bin, big_store, sockdir / "mt.sock", ["--max-terms", "1000"]) as d:
        r = d.get("/v1/search", {"q": "tok*"})
        assert r.status == 422, r.body[:300]
        assert r.error()["code"] == "too_broad" and "1000 terms" in r.error()["message"]
        assert d.get("/v1/count", {"q": "host:h3"}).json["total"] == len(range(3, BIG_N, 7))
        assert d.healthy()


# ---------------------------------------------------------------- damage, life cycle


def test_damaged_segment_is_a_warning(
    store: Path, store_cli: Path, searchd_bin: Path, sockdir: Path
) -> None:
    data = store
    lb = Logbox(store_cli, data)
    for part in range(2):  # two ingests: two segments
        lb.ingest(b"".join(b"<14>part%d item %d common\n" % (part, i) for i in range(2000)))
    segs = sorted(data.rglob("*.seg"))
    assert len(segs) >= 2, segs
    victim = segs[0]
    size = victim.stat().st_size
    with open(victim, "r+b") as f:
        f.seek(size // 2)
        f.write(b"\xa5" * 64)
    with Searchd(searchd_bin, data, sockdir / "dmg.sock", ["--threads", "2"]) as d:
        # "?*" reads every text term's ids, so it meets the damaged bytes wherever they are.
        r = d.get("/v1/search", {"q": "?*", "limit": 10})
        assert r.status == 200, r.body[:300]
        b = r.json
        assert b["warnings"] and any(victim.name in w for w in b["warnings"]), b["warnings"]
        assert b["total"] == 2000 and all(h["id"] > 2000 for h in b["hits"])
        r = d.get("/v1/count", {"q": "?*"})
        assert r.status == 200 and r.json["warnings"] and r.json["total"] == 2000
        assert victim.name in d.log()
        assert d.healthy()
        assert (
            'logbox_searchd_errors_total{kind="damaged_segment"}' in d.get("/metrics").body.decode()
        )


def test_new_messages_and_sighup(
    store: Path, store_cli: Path, searchd_bin: Path, sockdir: Path
) -> None:
    data = store
    lb = Logbox(store_cli, data)
    lb.ingest(b"<14>first batch alpha\n" * 10)
    with Searchd(searchd_bin, data, sockdir / "hup.sock", ["--threads", "2"]) as d:
        assert d.get("/v1/count", {"q": "alpha"}).json["total"] == 10
        lb.ingest(b"<14>second batch alpha\n" * 5)
        d.signal(signal.SIGHUP)
        time.sleep(0.1)
        assert d.get("/v1/count", {"q": "alpha"}).json["total"] == 15
        assert d.get("/v1/logspaces").json["logspaces"][0]["next_id"] == 16
        assert "SIGHUP" in d.log()


def test_store_created_after_start(
    store: Path, store_cli: Path, searchd_bin: Path, sockdir: Path
) -> None:
    # searchd may start before indexd has created the catalog: 503 until it exists.
    data = store
    with Searchd(searchd_bin, data, sockdir / "late.sock") as d:
        for path in ("/v1/count", "/v1/logspaces"):
            r = d.get(path, {"q": "x"} if path == "/v1/count" else None)
            assert r.status == 503 and r.error()["code"] == "unavailable", r.body
        assert d.healthy()
        Logbox(store_cli, data).ingest(b"<14>late arrival\n")
        seen: list[Any] = [None]

        def answered() -> Any:
            seen[0] = r = d.get("/v1/count", {"q": "late"})
            return r if r.status != 503 else None

        r = wait_until(
            answered, "searchd answers again", 5, interval=0.1, detail=lambda: str(seen[0].body)
        )
        assert r.status == 200 and r.json["total"] == 1


def test_sigterm_finishes_in_flight_and_exits_0(
    big_store: Path, searchd_bin: Path, sockdir: Path
) -> None:
    d = Searchd(searchd_bin, big_store, sockdir / "term.sock", ["--threads", "2", *SLOW_ARGS])
    d.start()
    answers: list[int] = []
    t = threading.Thread(target=lambda: answers.append(d.get("/v1/count", {"q": SLOW_Q}).status))
    t.start()
    time.sleep(0.1)
    d.signal(signal.SIGTERM)
    t.join(30)
    assert d.proc is not None
    assert d.proc.wait(30) == 0, d.log()
    assert answers == [200], d.log()
    assert not d.sock.exists()
    assert "stopped" in d.log()


def test_socket_file(corpus_store: Store, searchd_bin: Path, sockdir: Path) -> None:
    data, _, _ = corpus_store
    path = sockdir / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()  # a socket file nobody listens on
    with Searchd(searchd_bin, data, path) as d:
        assert stat.S_IMODE(path.stat().st_mode) == 0o660
        # A second daemon on a live socket refuses to start and leaves the first alone.
        p = subprocess.run(
            [str(searchd_bin), "--allow-root", "--data", str(data), "--socket", str(path)],
            capture_output=True,
            timeout=10,
        )
        assert p.returncode == 1 and b"listening on" in p.stderr, p.stderr
        assert d.healthy()
    assert not path.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the root check only applies to root")
def test_refuses_root(corpus_store: Store, searchd_bin: Path, sockdir: Path) -> None:
    data, _, _ = corpus_store
    p = subprocess.run(
        [str(searchd_bin), "--data", str(data), "--socket", str(sockdir / "root.sock")],
        capture_output=True,
        timeout=10,
    )
    assert p.returncode == 1 and b"refusing to run as root" in p.stderr
    assert not (sockdir / "root.sock").exists()


def test_bad_options(corpus_store: Store, searchd_bin: Path, sockdir: Path, tmp_path: Path) -> None:
    data, _, _ = corpus_store
    base = [str(searchd_bin), "--allow-root", "--socket", str(sockdir / "opt.sock")]
    for extra, rc in [([], 2), (["--data", str(data), "--threads", "0"], 1),
                      (["--data", str(tmp_path / "missing")], 1)]:  # fmt: skip
        p = subprocess.run(base + extra, capture_output=True, timeout=10)
        assert p.returncode == rc, (extra, p.stderr)


def test_systemd_notify(corpus_store: Store, searchd_bin: Path, sockdir: Path) -> None:
    data, _, _ = corpus_store
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(str(sockdir / "notify"))
    ns.settimeout(5)
    env = {"NOTIFY_SOCKET": str(sockdir / "notify"), "WATCHDOG_USEC": "200000"}
    with Searchd(searchd_bin, data, sockdir / "notify.sock", env=env):
        got = [ns.recv(4096).decode()]
        assert got[0].startswith("READY=1\nSTATUS=listening on")
        got += [ns.recv(4096).decode() for _ in range(2)]  # 100 ms apart
        assert got[1:] == ["WATCHDOG=1", "WATCHDOG=1"]
    while (m := ns.recv(4096).decode()) == "WATCHDOG=1":
        pass
    assert m.startswith("STOPPING=1")
    ns.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can switch users")
def test_drops_to_user(corpus_store: Store, searchd_bin: Path) -> None:
    import pwd

    nobody = pwd.getpwnam("nobody")
    data, _, _ = corpus_store
    # A copy of the store the user can read (LMDB readers also write the lock file).
    top = Path(tempfile.mkdtemp(prefix="sdu", dir="/tmp"))
    try:
        shutil.copytree(data, top / "data")
        for p in [top, *top.rglob("*")]:
            p.chmod(0o777 if p.is_dir() else 0o666)
        with Searchd(searchd_bin, top / "data", top / "u.sock", ["--user", "nobody"]) as d:
            st = (top / "u.sock").stat()
            assert (st.st_uid, st.st_gid) == (nobody.pw_uid, nobody.pw_gid)
            assert stat.S_IMODE(st.st_mode) == 0o660
            status = Path(f"/proc/{d.proc.pid}/status").read_text()
            uids = next(line for line in status.splitlines() if line.startswith("Uid:"))
            assert uids.split()[1:] == [str(nobody.pw_uid)] * 4
            groups = next(line for line in status.splitlines() if line.startswith("Groups:"))
            assert groups.split()[1:] in ([], [str(nobody.pw_gid)])
            assert d.get("/v1/count", {"q": "*"}).json["total"] == N_MAIN
        assert not (top / "u.sock").exists()
    finally:
        shutil.rmtree(top, ignore_errors=True)
