"""Search over archived days (indexer/ARCHIVE.md): a day that logbox-archive verified and
indexd's retention then removed from local disk still answers `logbox search` and
logbox-searchd, read from the object store (a real SeaweedFS, lbtest/s3.py) through ranged
GETs into a bounded local piece cache (--archive-settings, --archive-state, --archive-cache,
--archive-cache-mb):

- every query (hits in both orders, counts, histograms, top values) over the whole range and
  over each day answers exactly as the same store kept local (an oracle: a copy taken before
  the archive), with a cold cache and again warm;
- searchd names the archived days a query read (none for a range of local days), fetches
  bytes cold and none warm (also in a new process on the same cache), pages through every hit
  with cursors as the oracle's searchd does, and keeps its cache within --archive-cache-mb
  while it has to evict;
- the object store down: a query that needs an archived day not in the cache fails and says
  so (searchd: 503 archive_unavailable), a query over local days still answers; up again, the
  answers are the oracle's;
- a piece damaged in the cache or an object replaced in the bucket never gives a wrong answer:
  an error (or, from the cache, the right answer after fetching again), and no crash;
- the API passes searchd's `archive` report on (as its OpenAPI document describes it) and its
  503 archive_unavailable, and the web UI's search page names the archived days it read.

The store is taken down by closing a TCP gate in front of SeaweedFS (new connections refused,
open ones cut, as a stopped server gives): restarting `weed` costs half a minute.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lbtest import apps
from lbtest.apps import sockdir
from lbtest.collector import free_port
from lbtest.indexd import HeldFifo, Indexd
from lbtest.s3 import Weed, weed_binary
from lbtest.searchd import Reply, Searchd, searchd_binary
from lbtest.wait import wait_until
from logbox_rpc import create_app as rpc_app
from logbox_webui import create_app as webui_app
from test_archive import DAY, HOSTS, WORDS, Archive, day_start, iso, make_store

EXTRAS: tuple[list[str], ...] = (
    ["--limit", "50", "--order", "oldest"],
    ["--limit", "50"],
    ["--count"],
    ["--histogram", "24"],
    ["--top", "host"],
)


class Gate:
    """A TCP gate on a port of its own in front of a server: open, it forwards every connection
    to the server; closed, connections are refused and those open are cut."""

    def __init__(self, port: int) -> None:
        self.target = ("127.0.0.1", port)
        self.port = free_port()
        self.lock = threading.Lock()
        self.conns: set[socket.socket] = set()
        self.lsock: socket.socket | None = None
        self.open()

    def open(self) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self.lsock = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def close(self) -> None:
        if self.lsock is not None:
            try:
                self.lsock.shutdown(socket.SHUT_RDWR)  # wakes the accept()
            except OSError:
                pass
            self.lsock.close()
            self.lsock = None
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                c.close()
            self.conns.clear()

    def _accept(self, s: socket.socket) -> None:
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.target)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.conns |= {c, u}
            for src, dst in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while b := src.recv(65536):
                dst.sendall(b)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


@dataclass
class World:
    """The module's store: days (in order) with the first ones archived and removed locally,
    its oracle copy, the archive (its settings point through the gate) and the object store."""

    weed: Weed
    gate: Gate
    a: Archive
    bucket: str
    data: Path
    oracle: Path
    days: list[int]
    archived: list[int]
    tmp: Path
    socks: Path

    def flags(self, cache: Path, mb: int | None = None) -> list[str]:
        """The archive options of `logbox search` and logbox-searchd."""
        out = ["--archive-settings", str(self.a.settings), "--archive-state", str(self.a.state)]
        out += ["--archive-cache", str(cache)]
        return out + (["--archive-cache-mb", str(mb)] if mb is not None else [])

    def whole(self) -> tuple[str, str]:
        """The range of every day of the store."""
        return iso(day_start(self.days[0])), iso(day_start(self.days[-1]) + DAY)


def date(day: int) -> str:
    s = f"{day:08d}"
    return f"{s[:4]}-{s[4:6]}-{s[6:]}"


def one_day(day: int) -> tuple[str, str]:
    return iso(day_start(day)), iso(day_start(day) + DAY)


@pytest.fixture(scope="module")
def world(
    top: Path,
    store_cli: Path,
    store_cli_asan: Path,
    indexd_bin: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("asearch")
    weed = Weed(weed_binary(top), tmp / "weed").start()
    gate = Gate(weed.ports["https"])
    try:
        data = tmp / "data"
        # Random padding makes an archived day's files larger than a 1 MiB cache.
        days = make_store(store_cli, data, [6, 5, 4, 2, 0], 3000, seed=21, extra=120)
        oracle = tmp / "oracle"
        shutil.copytree(data, oracle)
        bucket = weed.bucket("asearch")
        target = weed.target(bucket) | {"endpoint": f"https://localhost:{gate.port}"}
        a = Archive(store_cli_asan, data, tmp / "a", {"main": target})
        a.run("once")
        assert a.verified() == set(days[:4])
        # Retention (3 days) removes the three oldest; the day two days ago stays local,
        # archived too.
        settings = tmp / "logspaces.json"
        settings.write_text(
            json.dumps({"version": 1, "logspaces": {"main": {"retention_days": 3}}})
        )
        fifo = HeldFifo(tmp / "indexd.fifo")
        d = Indexd(
            indexd_bin,
            data,
            tmp / "status.json",
            fifo=fifo,
            args=["--logspaces", str(settings), "--archive-state", str(a.state)],
        )
        d.start()
        try:
            wait_until(
                lambda: d.stderr().count("retention: main: removed") == 3,
                "the three archived days removed",
                15,
                interval=0.05,
            )
        finally:
            assert d.stop() == 0
            fifo.close()
        assert [x["day"] for x in a.days()] == days[3:]
        with sockdir("asearch-") as socks:
            yield World(weed, gate, a, bucket, data, oracle, days, days[:3], tmp, socks)
    finally:
        gate.close()
        weed.stop()


# ---------------------------------------------------------------- the CLI


def queries(rnd: random.Random, rounds: int) -> list[str]:
    out = ["*", "msg"]
    for _ in range(rounds):
        a, b = rnd.sample(WORDS, 2)
        out += [a, f"{a} {b}", f"{a} OR {b}", f"{a} NOT {b}", f'"{a} {b}"']
        out.append(f"host:{rnd.choice(HOSTS)} {a}")
    return out


def search(
    logbox: Path, data: Path, rng: tuple[str, str], extra: list[str], q: str, flags: list[str]
) -> subprocess.CompletedProcess[str]:
    argv = [str(logbox), "search", "--data", str(data), *flags]
    argv += ["--from", rng[0], "--to", rng[1], "--json", *extra, q]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def plan(w: World) -> list[tuple[tuple[str, str], str, list[str]]]:
    """(range, query, options): every kind of answer over the whole range, and a few over each
    day."""
    out = [(w.whole(), q, e) for q in queries(random.Random(22), 2) for e in EXTRAS]
    rnd = random.Random(23)
    for day in w.days:
        for q in queries(rnd, 1)[2:4]:
            out += [(one_day(day), q, e) for e in EXTRAS]
    return out


def test_cli_archived_days_answer_as_local_cold_and_warm(
    world: World, store_cli: Path, store_cli_asan: Path
) -> None:
    w = world
    for day in w.archived:
        rec = json.loads((w.a.state / "main" / "verified" / f"{day:08d}.json").read_text())
        assert "catalog" in rec and "pieces" in rec, sorted(rec)
    todo = plan(w)
    want = []
    for rng, q, e in todo:
        r = search(store_cli, w.oracle, rng, e, q, [])
        assert r.returncode == 0, (rng, q, e, r.stderr)
        want.append(r.stdout)

    # Cold: every sixth query (each kind, over each range) on an empty cache, the ASan build.
    cold = w.tmp / "cli-cold"
    for (rng, q, e), exp in list(zip(todo, want, strict=True))[::6]:
        shutil.rmtree(cold, ignore_errors=True)
        r = search(store_cli_asan, w.data, rng, e, q, w.flags(cold))
        assert r.returncode == 0, (rng, q, e, r.stderr)
        assert r.stdout == exp, ("cold", rng, q, e, r.stderr)
        covered = [d for d in w.archived if rng[0] <= iso(day_start(d)) < rng[1]]
        for d in w.archived:
            named = date(d) in r.stderr or f"{d:08d}" in r.stderr
            assert named == (d in covered), ("stderr names the archived days", rng, q, e, r.stderr)
    shutil.rmtree(cold)

    # Warm: one cache for all, filled by a first pass, then every answer again from it.
    warm = w.tmp / "cli-warm"
    for (rng, q, e), exp in zip(todo, want, strict=True):
        r = search(store_cli, w.data, rng, e, q, w.flags(warm))
        assert (r.returncode, r.stdout) == (0, exp), ("fill", rng, q, e, r.stderr)
    for (rng, q, e), exp in zip(todo, want, strict=True):
        r = search(store_cli, w.data, rng, e, q, w.flags(warm))
        assert (r.returncode, r.stdout) == (0, exp), ("warm", rng, q, e, r.stderr)


# ---------------------------------------------------------------- searchd


def answer(r: Reply, what: Any = None) -> dict[str, Any]:
    """The answer without what differs between two daemons (the time it took, the archive's
    report)."""
    assert r.status == 200, (what, r.status, r.body[:500])
    doc = dict(r.json)
    doc.pop("took_ms", None)
    doc.pop("archive", None)
    return doc


def pages(d: Searchd, params: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Reply]]:
    """Every page of a search, following next_cursor: the answers and the replies."""
    docs, replies, cursor = [], [], "0"
    while cursor is not None:
        r = d.get("/v1/search", params | {"cursor": cursor})
        docs.append(answer(r, (params, cursor)))
        replies.append(r)
        cursor = docs[-1]["next_cursor"]
        assert len(docs) < 1000
    return docs, replies


def requests(w: World) -> list[tuple[str, dict[str, Any]]]:
    """(path, params) of counts, histograms and top values over the whole range and each day."""
    out = []
    rnd = random.Random(24)
    ranges = [w.whole()] + [one_day(d) for d in w.days]
    for frm, to in ranges:
        for q in ["*", *queries(rnd, 1)[2:6]]:
            p = {"q": q, "from": frm, "to": to}
            out += [
                ("/v1/count", p),
                ("/v1/histogram", p | {"buckets": 48}),
                ("/v1/top", p | {"field": "host"}),
                ("/v1/top", p | {"field": "message", "k": 20}),
            ]
    return out


def covered(w: World, params: dict[str, Any]) -> list[str]:
    return [date(d) for d in w.archived if params["from"] <= iso(day_start(d)) < params["to"]]


def test_searchd_archived_days_answer_as_local(world: World, top: Path) -> None:
    w = world
    binary = searchd_binary(top)
    cache = w.tmp / "sd-cache"
    o = Searchd(binary, w.oracle, w.socks / "o.sock", ["--threads", "2"])
    s = Searchd(binary, w.data, w.socks / "a.sock", ["--threads", "2", *w.flags(cache)])
    with o, s:
        # Cold, then warm in the same process.
        p = {"q": "msg", "from": w.whole()[0], "to": w.whole()[1]}
        first = s.get("/v1/count", p)
        assert answer(first) == answer(o.get("/v1/count", p))
        arch = first.json["archive"]
        assert arch["days"] == [date(d) for d in w.archived], arch
        assert arch["fetched_bytes"] > 0 and arch["ms"] >= 0, arch
        again = s.get("/v1/count", p).json["archive"]
        assert again["days"] == arch["days"] and again["fetched_bytes"] == 0, again

        for path, params in requests(w):
            r = s.get(path, params)
            assert answer(r, (path, params)) == answer(o.get(path, params)), (path, params)
            days = covered(w, params)
            if days:
                assert r.json["archive"]["days"] == days, (path, params, r.json["archive"])
            else:
                assert "archive" not in r.json, (path, params, r.json["archive"])

        # Every hit, page by page, in both orders.
        rnd = random.Random(25)
        for q, limit in [("*", 2000), (rnd.choice(WORDS), 100), ("msg NOT w1", 500)]:
            for order in ("newest", "oldest"):
                params = {"q": q, "limit": limit, "order": order}
                params |= dict(zip(("from", "to"), w.whole(), strict=True))
                got, _ = pages(s, params)
                assert got == pages(o, params)[0], params
        # The day before today is archived but still local: read from local disk.
        p = dict(zip(("from", "to"), one_day(w.days[3]), strict=True)) | {"q": "*"}
        assert "archive" not in s.get("/v1/count", p).json
    # A new process on the same cache: warm.
    with Searchd(binary, w.data, w.socks / "a.sock", ["--threads", "2", *w.flags(cache)]) as s:
        r = s.get("/v1/count", {"q": "msg", "from": w.whole()[0], "to": w.whole()[1]})
        assert r.json["archive"]["fetched_bytes"] == 0, r.json


def cache_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def test_searchd_cache_stays_within_its_bound(world: World, top: Path) -> None:
    w = world
    binary = searchd_binary(top)
    cache = w.tmp / "sd-small"
    o = Searchd(binary, w.oracle, w.socks / "o.sock", ["--threads", "2"])
    s = Searchd(binary, w.data, w.socks / "a.sock", ["--threads", "2", *w.flags(cache, mb=1)])
    with o, s:
        fetched = 0
        for rng in [w.whole()] + [one_day(d) for d in w.archived]:
            for order in ("newest", "oldest"):
                params = {"q": "*", "limit": 500, "order": order, "from": rng[0], "to": rng[1]}
                got, replies = pages(s, params)
                assert got == pages(o, params)[0], params
                fetched += sum(r.json["archive"]["fetched_bytes"] for r in replies)
                assert cache_bytes(cache) <= 1 << 20, (params, cache_bytes(cache))
        # More than the bound went through the cache: it evicted, and the answers held.
        assert fetched > 2 << 20, fetched
        for path, params in requests(w)[:20]:
            assert answer(s.get(path, params)) == answer(o.get(path, params)), (path, params)
            assert cache_bytes(cache) <= 1 << 20, (path, params, cache_bytes(cache))


# ---------------------------------------------------------------- failures


def test_store_down_fails_clearly_local_days_still_answer(
    world: World, top: Path, store_cli: Path, store_cli_asan: Path
) -> None:
    w = world
    cached, old = one_day(w.archived[1]), one_day(w.archived[2])
    local = one_day(w.days[3])
    want = {
        rng: search(store_cli, w.oracle, rng, ["--limit", "50"], "msg", []).stdout
        for rng in (old, local, w.whole())
    }
    binary = searchd_binary(top)
    cache, cli = w.tmp / "down-cache", w.tmp / "down-cli"  # searchd's, the CLI's
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(cli, ignore_errors=True)
    o = Searchd(binary, w.oracle, w.socks / "o.sock", ["--threads", "2"])
    s = Searchd(binary, w.data, w.socks / "a.sock", ["--threads", "2", *w.flags(cache)])
    with o, s:
        # One archived day in the cache before the store goes down, another not.
        warm = {"q": "w3", "from": cached[0], "to": cached[1]}
        assert answer(s.get("/v1/count", warm)) == answer(o.get("/v1/count", warm))
        w.gate.close()
        try:
            for rng in (old, w.whole()):
                r = search(store_cli_asan, w.data, rng, ["--limit", "50"], "msg", w.flags(cli))
                assert r.returncode > 0 and r.stdout == "", (rng, r.returncode, r.stdout[:300])
                assert "archive" in r.stderr.lower() and "Sanitizer" not in r.stderr, r.stderr
                for path in ("/v1/search", "/v1/count", "/v1/histogram"):
                    p = {"q": "w7", "from": rng[0], "to": rng[1]}
                    e = s.get(path, p)
                    assert e.status == 503 and e.error()["code"] == "archive_unavailable", (
                        path,
                        p,
                        e.status,
                        e.body[:300],
                    )
            r = search(store_cli, w.data, local, ["--limit", "50"], "msg", w.flags(cli))
            assert (r.returncode, r.stdout) == (0, want[local]), r.stderr
            p = {"q": "msg", "from": local[0], "to": local[1]}
            assert answer(s.get("/v1/count", p)) == answer(o.get("/v1/count", p))
            # What is in the cache needs no store.
            assert answer(s.get("/v1/count", warm)) == answer(o.get("/v1/count", warm))
        finally:
            w.gate.open()
        assert s.healthy()
        for rng in (old, w.whole()):
            r = search(store_cli, w.data, rng, ["--limit", "50"], "msg", w.flags(cli))
            assert (r.returncode, r.stdout) == (0, want[rng]), r.stderr
            for path in ("/v1/search", "/v1/count", "/v1/histogram"):
                p = {"q": "w7", "from": rng[0], "to": rng[1]}
                assert answer(s.get(path, p)) == answer(o.get(path, p)), (path, p)


def flip(p: Path) -> None:
    """Changes a byte in the middle of p."""
    with open(p, "r+b") as f:
        n = f.seek(0, os.SEEK_END)
        f.seek(n // 2)
        b = f.read(1)
        f.seek(n // 2)
        f.write(bytes([b[0] ^ 0x5A]))


def test_damaged_piece_never_answers_wrong(
    world: World, top: Path, store_cli: Path, store_cli_asan: Path
) -> None:
    w = world
    day = w.archived[0]
    rng = one_day(day)
    want = {
        tuple(e): search(store_cli, w.oracle, rng, e, "msg", []).stdout
        for e in (["--limit", "3000"], ["--count"], ["--top", "host"])
    }

    # Damaged in the cache: every file of it changed. An error, or (fetched again) the right
    # answer; never another one.
    cache = w.tmp / "damage-cache"
    shutil.rmtree(cache, ignore_errors=True)
    for e, exp in want.items():
        r = search(store_cli, w.data, rng, list(e), "msg", w.flags(cache))
        assert (r.returncode, r.stdout) == (0, exp), (e, r.stderr)
    files = [p for p in cache.rglob("*") if p.is_file() and p.stat().st_size > 0]
    assert files
    for p in files:
        flip(p)
    for e, exp in want.items():
        r = search(store_cli_asan, w.data, rng, list(e), "msg", w.flags(cache))
        assert "Sanitizer" not in r.stderr and r.returncode >= 0, r.stderr
        if r.returncode == 0:
            assert r.stdout == exp, ("a damaged cache answered wrong", e, r.stderr)
        else:
            assert r.stdout == "", (e, r.stdout[:300])

    # Replaced in the bucket by other bytes of the same size (with the old metadata), the
    # cache empty: every query that needs the object fails, in both programs, and searchd
    # keeps serving. (The message file is not needed for a count.)
    s3 = w.weed.client()
    s = f"{day:08d}"
    pre = f"main/{s[:4]}/{s[4:6]}-{s[6:]}/"
    seg = next(k for k in w.weed.keys(w.bucket, pre) if k.endswith(".seg"))
    hits = ["--limit", "3000"]
    cases = [(seg, [["--count"], hits]), (pre + "messages", [hits])]
    wrong = []
    for key, extras in cases:
        old = s3.get_object(Bucket=w.bucket, Key=key)
        body, meta = old["Body"].read(), old["Metadata"]
        bad = bytearray(body)
        for i in range(0, len(bad), 997):
            bad[i] ^= 0xFF
        s3.put_object(Bucket=w.bucket, Key=key, Body=bytes(bad), Metadata=meta)
        try:
            for e in extras:
                shutil.rmtree(cache, ignore_errors=True)
                r = search(store_cli_asan, w.data, rng, e, "msg", w.flags(cache))
                assert "Sanitizer" not in r.stderr and r.returncode >= 0, r.stderr
                if r.returncode == 0 or r.stdout:
                    wrong.append(("cli", key, e, r.returncode, r.stdout[:100], r.stderr))
                shutil.rmtree(cache, ignore_errors=True)
                with Searchd(searchd_binary(top), w.data, w.socks / "a.sock", w.flags(cache)) as d:
                    p = {"q": "msg", "from": rng[0], "to": rng[1]}
                    path = "/v1/count" if e == ["--count"] else "/v1/search"
                    r2 = d.get(path, p if e == ["--count"] else p | {"limit": 3000})
                    if r2.status < 500 or r2.error()["code"] not in (
                        "archive_unavailable",
                        "internal",
                    ):
                        doc = r2.json
                        doc.pop("hits", None)
                        wrong.append(("searchd", key, path, r2.status, doc))
                    assert d.healthy()
        finally:
            s3.put_object(Bucket=w.bucket, Key=key, Body=body, Metadata=meta)
    assert not wrong, wrong
    shutil.rmtree(cache, ignore_errors=True)
    r = search(store_cli, w.data, rng, ["--count"], "msg", w.flags(cache))
    assert (r.returncode, r.stdout) == (0, want[("--count",)]), r.stderr


# ---------------------------------------------------------------- the API and the web UI


def test_api_and_web_ui_say_what_came_from_the_archive(world: World, top: Path) -> None:
    """The API passes searchd's `archive` on (as its OpenAPI document describes it) and its
    503 archive_unavailable; the web UI's search page names the archived days it read."""
    w = world
    cache = w.tmp / "apps-cache"
    shutil.rmtree(cache, ignore_errors=True)
    s = Searchd(searchd_binary(top), w.data, w.socks / "apps.sock", w.flags(cache))
    o = Searchd(searchd_binary(top), w.oracle, w.socks / "apps-o.sock")
    with s, o:
        api = apps.add_users(rpc_app(apps.app_config(s, w.tmp / "rpcapp")), apps.USERS[:1])
        secret, _ = api.extensions["logbox"].accounts.create_token("admin", "t")
        auth = {"Authorization": f"Bearer {secret}"}
        frm, to = w.whole()
        q = {"q": "msg", "from": frm, "to": to}
        c = api.test_client()
        r = c.get("/api/v1/logspaces/main/count", query_string=q, headers=auth)
        assert r.status_code == 200, r.data[:300]
        doc = r.get_json()
        assert doc["total"] == o.get("/v1/count", q).json["total"]
        assert doc["archive"]["days"] == [date(d) for d in w.archived], doc["archive"]
        assert doc["archive"]["fetched_bytes"] > 0
        spec = c.get("/api/v1/openapi.json", headers=auth).get_json()
        props = spec["components"]["schemas"]["Count"]["properties"]["archive"]["properties"]
        assert set(doc["archive"]) == set(props), (doc["archive"], props)

        ui = apps.add_users(webui_app(apps.app_config(s, w.tmp / "uiapp")), apps.USERS[:1])
        u = ui.test_client()
        page = u.get("/login").get_data(as_text=True)
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert csrf, page[:300]
        login = {"username": "admin", "password": apps.PASSWORD, "csrf_token": csrf.group(1)}
        assert u.post("/login", data=login).status_code == 302
        body = u.get("/search", query_string={"logspace": "main", **q}).get_data(as_text=True)
        note = re.search(r'<p class="muted" id="archive-note">([^<]*)</p>', body)
        assert note, body[:2000]
        assert all(date(d) in note.group(1) for d in w.archived), note.group(1)
        # A range of local days only: no note.
        last = (iso(day_start(w.days[-1])), iso(day_start(w.days[-1]) + DAY))
        body = u.get(
            "/search", query_string={"logspace": "main", "q": "msg", "from": last[0], "to": last[1]}
        ).get_data(as_text=True)
        assert 'id="archive-note"' not in body

        # The store down and a day not read yet: the API's 503 archive_unavailable.
        shutil.rmtree(cache, ignore_errors=True)
        s.stop()
        s.start()
        w.gate.close()
        try:
            r = c.get("/api/v1/logspaces/main/count", query_string=q, headers=auth)
            assert r.status_code == 503, r.data[:300]
            assert r.get_json()["error"]["code"] == "archive_unavailable", r.get_json()
        finally:
            w.gate.open()


# ---------------------------------------------------------------- last: a day leaves local disk


def test_a_day_that_leaves_local_disk_under_a_running_searchd(
    world: World, top: Path, indexd_bin: Path
) -> None:
    """The day two days ago, archived and still local, is deleted by retention while searchd
    runs (and has its files open): the next answers read it from the archive, equal to the
    oracle, with the day named in `archive` (its local files are let go). Runs last: it
    changes the module's store."""
    w = world
    day = w.days[3]
    assert day in w.a.verified() and day not in w.archived
    rng = (iso(day_start(day)), iso(day_start(day) + DAY))
    asks = [
        ("/v1/count", {"q": "msg"}),
        ("/v1/histogram", {"q": "msg", "buckets": 24}),
        ("/v1/top", {"q": "*", "field": "host"}),
        ("/v1/search", {"q": "msg", "limit": 500}),
        # many candidates to check (a phrase): the second reader's days too
        ("/v1/count", {"q": f'"{WORDS[1]} {WORDS[2]}" OR "{WORDS[3]} {WORDS[4]}"'}),
    ]
    cache = w.tmp / "leave-cache"
    s = Searchd(searchd_binary(top), w.data, w.socks / "leave.sock", w.flags(cache))
    o = Searchd(searchd_binary(top), w.oracle, w.socks / "leave-o.sock")
    with s, o:
        for whole in (rng, w.whole()):
            for path, p in asks:
                q = p | {"from": whole[0], "to": whole[1]}
                r = s.get(path, q)
                assert answer(r) == answer(o.get(path, q)), (path, q)
                assert date(day) not in r.json.get("archive", {}).get("days", []), r.json
        settings = w.tmp / "leave-logspaces.json"
        settings.write_text(
            json.dumps({"version": 1, "logspaces": {"main": {"retention_days": 1}}})
        )
        fifo = HeldFifo(w.tmp / "leave.fifo")
        d = Indexd(
            indexd_bin,
            w.data,
            w.tmp / "leave-status.json",
            fifo=fifo,
            args=["--logspaces", str(settings), "--archive-state", str(w.a.state)],
        )
        d.start()
        try:
            wait_until(
                lambda: "retention: main: removed" in d.stderr(),
                "the day removed",
                15,
                interval=0.05,
            )
        finally:
            assert d.stop() == 0, d.stderr()
            fifo.close()
        assert [x["day"] for x in w.a.days()] == w.days[4:], d.stderr()
        for whole in (rng, w.whole()):
            for path, p in asks:
                q = p | {"from": whole[0], "to": whole[1]}
                r = s.get(path, q)
                assert answer(r) == answer(o.get(path, q)), (path, q)
                assert date(day) in r.json["archive"]["days"], (path, q, r.json.get("archive"))
        # searchd let the deleted files go: none of the day's is open or mapped any more
        held = subprocess.run(
            ["ls", "-l", f"/proc/{s.proc.pid}/fd"], capture_output=True, text=True
        ).stdout
        held += Path(f"/proc/{s.proc.pid}/maps").read_text()
        s_day = f"{day:08d}"
        assert f"{s_day[:4]}/{s_day[4:6]}-{s_day[6:]}" not in held, held
