#!/usr/bin/env python3
"""Federation benchmark (issue 22; `make bench` or `make bench-federation`; not a test, it never
fails on a missed target).

Four boxes on this machine, each started the way `make run` starts one (appliance/devrun.py):
three sites holding a third of --msgs synth lines each (tests/bench/size_corpus.py, different
seeds, over --days days, `logbox ingest --received header`), and box o holding all of them in
its own `main`. On o, the three sites are added (URL, token, CA) and a multiple logspace
`fed` = s1:main + s2:main + s3:main. Then, side by side in one run, each query through o's API
(HTTPS, one kept-alive client, the median of --reps warm runs after one unmeasured):
  - local: o's `main` (one box holding every message: the baseline);
  - federated: o's `fed` (three boxes, merged by o);
for: newest 100 of a rare word with the total; newest 100 of everything without the total; a
count of a common word; a 100-bucket histogram; the top 10 hosts. The answers must agree
(totals, buckets, top values; the hits' messages as sets); the target is federated <= local +
20 ms. Prints the machine and a table; writes build/bench/federation.md and federation.json.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(TOP / "tests"))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(TOP / "rpc"))

import size_corpus  # noqa: E402
from benchlib import add_out_option, machine, machine_line, median, say, write_report  # noqa: E402
from lbtest.collector import free_ports  # noqa: E402
from lbtest.devrun import DevRun  # noqa: E402
from logbox_client import Client  # noqa: E402

DAY = 86400
PASSWORD = "bench-federation-1"
SITES = ("s1", "s2", "s3")
TARGET_MS = 20.0


def corpus(path: Path, n: int, seed: int, t0: int, t1: int) -> None:
    """n synth lines from t0 to t1 into path."""
    gen = size_corpus.synth_lines(random.Random(seed), t0, n / (t1 - t0), t1)
    with open(path, "wb") as f:
        lines = itertools.islice(gen, n)
        while batch := list(itertools.islice(lines, 10000)):
            f.write(b"".join(batch))


def merged(sources: list[Path], out: Path) -> None:
    """The sources' lines in one file in time order (each source is in time order): box o
    receives them as the sites did, so a receive-time histogram has the same buckets."""

    def key(line: bytes) -> tuple[int, bytes]:
        head = line.split(b">", 1)[1][:15]  # Mmm dd hh:mm:ss
        mon = size_corpus.MON.index(head[:3].decode())
        return (mon * 100 + int(head[4:6]), head[7:15])

    files = [open(p, "rb") for p in sources]
    try:
        with open(out, "wb") as f:
            f.writelines(heapq.merge(*files, key=key))
    finally:
        for fh in files:
            fh.close()


def ingest(logbox: Path, data: Path, sources: list[Path]) -> None:
    data.mkdir(parents=True)
    for src in sources:
        subprocess.run(
            [str(logbox), "ingest", "--data", str(data), "--received", "header", str(src)],
            check=True,
            capture_output=True,
        )


def start(data: Path) -> DevRun:
    (data / "etc").mkdir(parents=True, exist_ok=True)
    ports = free_ports()
    (data / "etc" / "collector.toml").write_text(
        "[ports]\n" + "".join(f"{k} = {v}\n" for k, v in ports.items())
    )
    return DevRun(TOP, data, extra={"LOGBOX_ADMIN_PASSWORD": PASSWORD})


def timed(c: Client, path: str, params: dict[str, str], reps: int) -> tuple[float, dict[str, Any]]:
    """The median wall time (ms) of reps calls after one unmeasured, and the last answer."""
    doc = c.call("GET", path, params=params)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        doc = c.call("GET", path, params=params)
        times.append((time.perf_counter() - t) * 1000)
    m = median(times)
    assert m is not None
    return m, doc


def same(what: str, a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether the federated answer b equals the local a in what the query returns."""
    if a.get("total") != b.get("total"):
        return False
    if what == "histogram":
        ha = [x for x in a["buckets"] if x["count"]]
        hb = [x for x in b["buckets"] if x["count"]]
        if ha != hb:
            diff = [(x, y) for x, y in zip(ha, hb, strict=False) if x != y][:3]
            say(f"histograms differ: {len(ha)} and {len(hb)} buckets, steps "
                f"{a.get('step_us')} {b.get('step_us')}, first: {diff}")  # fmt: skip
        return ha == hb
    if what == "top":
        return a["values"] == b["values"]
    if what == "search":

        def ids(doc: dict[str, Any]) -> set[tuple[Any, ...]]:
            return {(h["received_us"], h["host"], h["message"]) for h in doc["hits"]}

        return ids(a) == ids(b)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--logbox", type=Path, default=TOP / "build" / "bin" / "logbox")
    ap.add_argument("--msgs", type=int, default=3_000_000, help="messages over the three sites")
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--work", type=Path, default=TOP / "build" / "bench" / "federation")
    add_out_option(ap)
    args = ap.parse_args()
    work: Path = args.work
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    m = machine()
    say(machine_line(m))
    t1 = int(time.time()) - 3600
    t0 = t1 - args.days * DAY
    srcs = []
    for i, _ in enumerate(SITES):
        src = work / f"site{i}.log"
        corpus(src, args.msgs // len(SITES), args.seed + i, t0, t1)
        srcs.append(src)
    say(f"ingesting {args.msgs:,} messages into three sites and all of them into box o")
    t = time.monotonic()
    for name, src in zip(SITES, srcs, strict=True):
        ingest(args.logbox, work / name, [src])
    merged(srcs, work / "all.log")
    ingest(args.logbox, work / "o", [work / "all.log"])
    (work / "all.log").unlink()
    say(f"ingested in {time.monotonic() - t:.0f} s")
    for src in srcs:
        src.unlink()

    runs = {name: start(work / name) for name in (*SITES, "o")}
    res: dict[str, Any] = {"machine": m, "msgs": args.msgs, "days": args.days, "reps": args.reps}
    try:
        for d in runs.values():
            d.until("press Ctrl-C", timeout=180)
        clients = {n: d.api("admin", PASSWORD, timeout=120) for n, d in runs.items()}
        o = clients["o"]
        for name in SITES:
            d = runs[name]
            token = clients[name].create_token("federation")["token"]
            o.call("PUT", f"/sites/{name}", body={
                "url": f"https://127.0.0.1:{d.rpc_port}", "token": token,
                "ca": (d.data / "tls" / "https.crt").read_text()})  # fmt: skip
        o.call("PUT", "/multiple/fed", body={"members": [f"{s}:main" for s in SITES]})
        rng = {"from": str(t0 - 60), "to": str(t1 + 60)}
        # a rare word: of the 1,000 most frequent, the one nearest 1,000 matches
        words = o.top("*", "message", logspace="main", from_=t0 - 60, to=t1 + 60, k=1000)
        rare = min(
            (w for w in words if w["value"].isalpha()), key=lambda w: abs(w["count"] - 1000)
        )["value"]
        common = size_corpus.WORDS[0]
        queries = [
            ("search", f"newest 100 of {rare!r}, with the total",
             {"q": rare, "limit": "100"}),
            ("search", "newest 100 of *, no total", {"q": "*", "limit": "100", "total": "0"}),
            ("count", f"count {common!r}", {"q": common}),
            ("histogram", f"histogram {common!r}, 100 buckets", {"q": common, "buckets": "100"}),
            ("top", "top 10 hosts of *", {"q": "*", "field": "host", "k": "10"}),
        ]  # fmt: skip
        rows = []
        for what, label, params in queries:
            p = dict(rng, **params)
            loc_ms, loc = timed(o, f"/logspaces/main/{what}", p, args.reps)
            fed_ms, fed = timed(o, f"/logspaces/fed/{what}", p, args.reps)
            ok = same(what, loc, fed)
            rows.append({"query": label, "what": what, "local_ms": loc_ms, "fed_ms": fed_ms,
                         "over_ms": fed_ms - loc_ms, "ratio": fed_ms / loc_ms,
                         "total": loc.get("total"), "same": ok,
                         "met": fed_ms <= loc_ms + TARGET_MS})  # fmt: skip
            say(f"{label}: local {loc_ms:.1f} ms, federated {fed_ms:.1f} ms, same answer: {ok}")
        res["rows"] = rows
    finally:
        for d in runs.values():
            d.close()

    lines = [
        "# Federation benchmark",
        "",
        machine_line(m),
        "",
        f"{args.msgs:,} synth messages over {args.days} days: three sites of a third each, and "
        "box o holding all of them. Each query through o's API (HTTPS, kept-alive client), the "
        f"median of {args.reps} warm runs. Local: o's `main`. Federated: o's multiple logspace "
        "`fed` over the three sites (each a whole box on this machine). Target: federated <= "
        f"local + {TARGET_MS:.0f} ms.",
        "",
        "| query | matches | local ms | federated ms | federated - local ms | same answer | "
        "target met |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in res["rows"]:
        total = "" if r["total"] is None else f"{r['total']:,}"
        lines.append(
            f"| {r['query']} | {total} | {r['local_ms']:.1f} | {r['fed_ms']:.1f} | "
            f"{r['over_ms']:+.1f} | {'yes' if r['same'] else 'NO'} | "
            f"{'yes' if r['met'] else 'no'} |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    write_report(args.out, "federation", "\n".join(lines) + "\n", res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
