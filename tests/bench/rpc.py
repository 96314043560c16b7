#!/usr/bin/env python3
"""RPC API benchmark (issue 6; run by `make bench` after the search bench, or `make bench-rpc`;
not a test: it never fails on speed).

The store is the search bench's (tests/bench/search.py): N (default 1.5 M) loghub-based
RFC 5424 lines over 7 days, `logbox ingest --received header`, built once and cached under
build/bench/search-v1-<N>-<seed>/ (reused when it exists, by this bench or by
`search.py --messages N`). On it, real logbox-searchd and real gunicorn serving logbox_rpc
(TLS, gthread workers, the tests' harness tests/lbtest/rpc.py). For a common-token and a rare
token search (newest 100, total not counted, the whole 7 days), with 1 and 16 concurrent
clients (threads, each with its own keep-alive connection: http.client over TLS for the API
with a bearer token, over the unix socket for searchd), --runs rounds (the targets interleaved
in each), a fixed number of requests per client per round: requests/s and p50/p95 latency,
medians over the rounds; the added latency at p50 (API - searchd, 1 client) and whether it is
at most 2 ms. Then the export rate: NDJSON of every match of the common token through the API
(messages/s, rows checked against X-Logbox-Total), beside paging through searchd directly with
EXPORT_PAGE (2,000) hits a page, as the API does inside. The clients are Python in this process and run
on the same cores as the servers: their cost is in every figure, alike for both targets.
Prints the machine and a table; writes build/bench/rpc-results.md and rpc-results.json.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import ssl
import statistics
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(TOP / "rpc"))
sys.path.insert(0, str(TOP / "tests"))

import search as sb  # noqa: E402  (the search bench: corpus, store, searchd)
from benchlib import (  # noqa: E402
    KeepAlive,
    add_out_option,
    add_program_options,
    fmt,
    machine,
    machine_line,
    median,
    pct,
    say,
    write_report,
)
from logbox_core.export import EXPORT_PAGE  # noqa: E402

TARGET_ADDED_MS = 2.0
QUERIES = {"common token": "info", "rare token": "trampoline"}
CONCURRENCY = (1, 16)


# ---------------------------------------------------------------- clients


class ApiClient(KeepAlive):
    """One keep-alive HTTPS connection to the API with a bearer token."""

    def __init__(self, port: int, cafile: Path, token: str) -> None:
        ctx = ssl.create_default_context(cafile=str(cafile))
        super().__init__(
            lambda: http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=300),
            {"Authorization": f"Bearer {token}"},
        )

    def get(self, target: str) -> tuple[int, bytes]:
        """GET /api/v1<target>; reconnects once when the server closed the connection."""
        return super().get("/api/v1" + target)


class SearchdClient(KeepAlive):
    """One keep-alive connection to searchd's unix socket."""

    def __init__(self, sock: Path) -> None:
        super().__init__(lambda: sb.UnixHTTP(str(sock), timeout=300))

    def get(self, target: str) -> tuple[int, bytes]:
        """GET /v1<target> (the API's /logspaces/main/<op>?... becomes /v1/<op>?...)."""
        return super().get("/v1" + target)


Client = ApiClient | SearchdClient


def search_target(kind: str, q: str, t0: int, t1: int) -> str:
    """The request target of "newest 100" for the API ("api") or searchd ("searchd")."""
    p = {"q": q, "from": str(t0), "to": str(t1), "limit": "100", "order": "newest", "total": "0"}
    qs = urllib.parse.urlencode(p, quote_via=urllib.parse.quote)
    return ("/logspaces/main/search?" if kind == "api" else "/search?logspace=main&") + qs


def load(clients: list[Client], target: str, per_client: int) -> dict[str, Any]:
    """Every client sends per_client requests back to back, all at once; latencies and the
    rate over the whole round."""
    lat: list[list[float]] = [[] for _ in clients]
    errors: list[str] = []
    start = threading.Barrier(len(clients) + 1)

    def work(i: int) -> None:
        c = clients[i]
        start.wait()
        for _ in range(per_client):
            t = time.perf_counter()
            status, body = c.get(target)
            lat[i].append(time.perf_counter() - t)
            if status != 200:
                errors.append(f"{status} {body[:200]!r}")
                return

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(clients))]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    times = [x for lst in lat for x in lst]
    if errors:
        return {"error": errors[0]}
    return {
        "rps": len(times) / wall,
        "p50_ms": 1000 * statistics.median(times),
        "p95_ms": 1000 * pct(times, 95),
        "requests": len(times),
    }


def med(rounds: list[dict[str, Any]], key: str) -> float | None:
    return median([r[key] for r in rounds if key in r])


# ---------------------------------------------------------------- export


def export_api(port: int, cafile: Path, token: str, q: str, t0: int, t1: int) -> dict[str, Any]:
    """Streams the NDJSON export of q; rows, bytes, seconds, X-Logbox-Total."""
    ctx = ssl.create_default_context(cafile=str(cafile))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=600)
    p = {"q": q, "from": str(t0), "to": str(t1), "format": "ndjson"}
    t = time.perf_counter()
    conn.request(
        "GET",
        "/api/v1/logspaces/main/export?" + urllib.parse.urlencode(p),
        headers={"Authorization": f"Bearer {token}"},
    )
    r = conn.getresponse()
    if r.status != 200:
        return {"error": f"{r.status} {r.read()[:300]!r}"}
    total = int(r.getheader("X-Logbox-Total") or -1)
    rows = nbytes = 0
    last = b""
    while True:
        chunk = r.read1(1 << 20)
        if not chunk:
            break
        rows += chunk.count(b"\n")
        nbytes += len(chunk)
        last = chunk[-300:]
    secs = time.perf_counter() - t
    conn.close()
    out = {"rows": rows, "bytes": nbytes, "seconds": secs, "total_header": total}
    out["msgs_per_s"] = rows / secs
    tail = last.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    if tail.startswith(b'{"error"'):
        out["error"] = tail.decode(errors="replace")
    return out


def export_searchd(sock: Path, q: str, t0: int, t1: int) -> dict[str, Any]:
    """Every match of q paged straight from searchd, EXPORT_PAGE hits a page (bodies not parsed
    beyond the cursor)."""
    c = SearchdClient(sock)
    p = {
        "q": q,
        "from": str(t0),
        "to": str(t1),
        "limit": str(EXPORT_PAGE),
        "order": "newest",
        "total": "0",
    }
    rows = nbytes = 0
    t = time.perf_counter()
    cursor = None
    while True:
        pp = dict(p, cursor=cursor) if cursor else p
        status, body = c.get("/search?logspace=main&" + urllib.parse.urlencode(pp))
        if status != 200:
            return {"error": f"{status} {body[:300]!r}"}
        doc = json.loads(body)
        rows += len(doc["hits"])
        nbytes += len(body)
        cursor = doc["next_cursor"]
        if cursor is None:
            break
    secs = time.perf_counter() - t
    c.close()
    return {"rows": rows, "bytes": nbytes, "seconds": secs, "msgs_per_s": rows / secs}


# ---------------------------------------------------------------- report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=1_500_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5, help="rounds (medians over them)")
    ap.add_argument("--requests", type=int, default=200, help="requests per round, 1 client")
    ap.add_argument(
        "--requests-each", type=int, default=25, help="requests per client per round, 16 clients"
    )
    ap.add_argument("--export-runs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="gunicorn workers")
    ap.add_argument("--threads", type=int, default=8, help="gunicorn threads per worker")
    add_program_options(ap, "logbox", "searchd")
    add_out_option(ap)
    ap.add_argument("--no-api", action="store_true", help="searchd alone (no gunicorn)")
    args = ap.parse_args(argv)

    for b in (args.logbox, args.searchd):
        if not b.is_file():
            sys.exit(f"bench-rpc: {b} not found (make build)")
    if not args.no_api:
        from lbtest.rpc import RpcServer  # the tests' harness: real gunicorn over TLS

    work = args.out / f"search-{sb.VERSION}-{args.messages}-{args.seed}"
    work.mkdir(parents=True, exist_ok=True)
    m = machine()
    say(machine_line(m))
    say(f"corpus: {args.messages:,} lines (loghub-based, seed {args.seed}) in {work}")
    cm = sb.build_corpus(work, args.messages, args.seed)
    say(
        f"  {cm['bytes'] / 1e9:.2f} GB"
        + (f", built in {cm['built_s']:.1f} s" if cm["built_s"] else ", cached")
    )
    sm = sb.build_store(work, args.logbox, work / "corpus.log", args.messages)
    st = sm["stats"]
    say(
        f"store: {st.get('messages', 0):,} messages, {st.get('segments')} segments, "
        f"{st.get('disk_bytes', 0) / 1e6:,.0f} MB"
        + (f", built in {sm['built_s']:.1f} s" if sm["built_s"] else ", cached")
    )
    t0, t1 = sb.START, sb.START + sb.SPAN
    say("warming the page cache (store) ...")
    for f in (work / "store").rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                while fh.read(1 << 22):
                    pass

    rundir = args.out / "rpc-run"
    rundir.mkdir(parents=True, exist_ok=True)
    sock = rundir / "searchd.sock"
    sd = sb.Searchd(args.searchd, work / "store", sock, None)
    res: dict[str, Any] = {"load": {}, "export": {}}
    counts: dict[str, int] = {}
    conn_note = ""
    try:
        probe = SearchdClient(sock)
        for name, q in QUERIES.items():
            p = urllib.parse.urlencode({"q": q, "from": t0, "to": t1, "logspace": "main"})
            _, body = probe.get("/count?" + p)
            counts[name] = json.loads(body)["total"]
            say(f"  {name} `{q}`: {counts[name]:,} matches")
        probe.close()
        rpc = None
        if not args.no_api:
            rpc = RpcServer(
                rundir / "rpc",
                searchd_socket=sock,
                data=work / "store",
                workers=args.workers,
                threads=args.threads,
            )
        with rpc or contextlib.nullcontext():
            token = rpc.login() if rpc else ""
            say(
                "servers: logbox-searchd (threads = CPUs)"
                + (
                    f", gunicorn {args.workers} gthread workers x {args.threads} threads, TLS "
                    f"on 127.0.0.1:{rpc.port}"
                    if rpc
                    else " (no API: --no-api)"
                )
            )
            makers: dict[str, Callable[[], Client]] = {"searchd": lambda: SearchdClient(sock)}
            if rpc:
                makers["api"] = lambda: ApiClient(rpc.port, rpc.cafile, token)
            pools = {
                (k, n): [mk() for _ in range(n)] for k, mk in makers.items() for n in CONCURRENCY
            }
            cells = [(k, name, n) for name in QUERIES for n in CONCURRENCY for k in makers]
            rounds: dict[tuple[str, str, int], list[dict[str, Any]]] = {c: [] for c in cells}
            for r in range(args.runs):
                say(f"round {r + 1}/{args.runs} ...")
                for k, name, n in cells:
                    clients = pools[(k, n)]
                    target = search_target(k, QUERIES[name], t0, t1)
                    per = args.requests if n == 1 else args.requests_each
                    load(clients, target, 2)  # warm-up: connections open, caches warm
                    out = load(clients, target, per)
                    rounds[(k, name, n)].append(out)
                    say(
                        f"  {k:8} {name:13} {n:2} clients: "
                        + (
                            out["error"]
                            if "error" in out
                            else f"{out['rps']:8.1f} req/s  p50 {out['p50_ms']:7.2f} ms  "
                            f"p95 {out['p95_ms']:7.2f} ms"
                        )
                    )
            connects = {f"{k}/{n}": sum(c.connects for c in cl) for (k, n), cl in pools.items()}
            for cl in pools.values():
                for c in cl:
                    c.close()
            conn_note = ", ".join(f"{k}: {v}" for k, v in connects.items())
            for cell, rr in rounds.items():
                res["load"]["|".join(map(str, cell))] = {
                    "rps": med(rr, "rps"),
                    "p50_ms": med(rr, "p50_ms"),
                    "p95_ms": med(rr, "p95_ms"),
                    "rounds": rr,
                }

            q = QUERIES["common token"]
            say(
                f"export: NDJSON of `{q}` ({counts['common token']:,} matches), "
                f"{args.export_runs} runs ..."
            )
            for kind in makers:
                runs = []
                for _ in range(args.export_runs):
                    if kind == "api":
                        assert rpc is not None
                        out = export_api(rpc.port, rpc.cafile, token, q, t0, t1)
                    else:
                        out = export_searchd(sock, q, t0, t1)
                    runs.append(out)
                    say(
                        f"  {kind:8} "
                        + (
                            out["error"]
                            if "error" in out
                            else f"{out['rows']:,} rows, {out['bytes'] / 1e6:,.0f} MB in "
                            f"{out['seconds']:.1f} s: {out['msgs_per_s']:,.0f} msg/s"
                        )
                    )
                res["export"][kind] = {"msgs_per_s": med(runs, "msgs_per_s"), "runs": runs}
    finally:
        sd.stop()

    # ------------------------------------------------------------ the table
    m2 = machine()
    L = res["load"]
    lines = [
        "| query | clients | searchd req/s | searchd p50 / p95 ms | API req/s | API p50 / p95 ms "
        "| added p50 ms | API / searchd req/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    added: dict[str, float | None] = {}
    for name, q in QUERIES.items():
        for n in CONCURRENCY:
            s = L[f"searchd|{name}|{n}"]
            a = L.get(f"api|{name}|{n}", {"rps": None, "p50_ms": None, "p95_ms": None})
            add = a["p50_ms"] - s["p50_ms"] if a["p50_ms"] is not None and s["p50_ms"] else None
            if n == 1:
                added[name] = add
            ratio = a["rps"] / s["rps"] if a["rps"] and s["rps"] else None
            lines.append(
                f"| {name} `{q}` ({counts.get(name, 0):,} matches) | {n} | {fmt(s['rps'], ',.0f')} "
                f"| {fmt(s['p50_ms'])} / {fmt(s['p95_ms'])} | {fmt(a['rps'], ',.0f')} "
                f"| {fmt(a['p50_ms'])} / {fmt(a['p95_ms'])} | {fmt(add)} | {fmt(ratio, '.2f')} |"
            )
    verdicts = [
        f"- added latency at p50, 1 client, {name}: {fmt(v)} ms -> "
        + ("n/a" if v is None else ("<= 2 ms: yes" if v <= TARGET_ADDED_MS else "<= 2 ms: NO"))
        for name, v in added.items()
    ]
    ea, es = res["export"].get("api", {}), res["export"].get("searchd", {})
    api_runs = ea.get("runs", [])
    rows_ok = bool(api_runs) and all(
        r.get("rows") == r.get("total_header") == counts.get("common token") for r in api_runs
    )
    md = [
        "# RPC API benchmark (issue 6)",
        "",
        f"- machine: {m['nproc']} CPUs ({m['cpu']}), {m['mem_gib']} GiB RAM, kernel {m['kernel']}; "
        f"load average at start {m['loadavg'][0]:.2f}, at end {m2['loadavg'][0]:.2f}; "
        f"Python {platform.python_version()}",
        f"- store: {st.get('messages', 0):,} messages (loghub-based, 7 days), "
        f"{st.get('disk_bytes', 0) / 1e6:,.0f} MB; {work / 'store'}",
        f"- servers: logbox-searchd on a unix socket; gunicorn ({args.workers} gthread workers x "
        f"{args.threads} threads, TLS) serving logbox_rpc in front of it",
        f"- load: search newest 100 (total not counted) over the 7 days; {args.runs} rounds, "
        f"each {args.requests} requests with 1 client, {args.requests_each} per client with 16; "
        "one keep-alive connection per client (connections opened: "
        f"{conn_note}); medians over the rounds of each round's req/s, p50 and p95 (nearest rank)",
        "- clients are Python threads in the bench process, on the same cores as the servers",
        "",
        *lines,
        "",
        *verdicts,
        "",
        "Export (NDJSON, every match of the common token, medians of "
        f"{args.export_runs} runs): API {fmt(ea.get('msgs_per_s'), ',.0f')} msg/s"
        + (
            " (rows = X-Logbox-Total = count)"
            if rows_ok
            else " (ROWS DIFFER from the count)"
            if api_runs
            else ""
        )
        + f"; searchd paged directly, {EXPORT_PAGE:,} a page: {fmt(es.get('msgs_per_s'), ',.0f')} msg/s",
        "",
    ]
    text = "\n".join(md)
    raw = {"machine": m, "store": sm, "counts": counts, "results": res, "added_p50_ms": added}
    write_report(args.out, "rpc-results", text, raw, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
