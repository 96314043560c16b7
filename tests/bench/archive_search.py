#!/usr/bin/env python3
"""Search over archived days benchmark (issue 22; `make bench` or `make bench-archive-search`;
not a test, it never fails on a missed target).

A store of --msgs synth lines (tests/bench/size_corpus.py's generator, default 20,000,000;
$LOGBOX_BENCH_ARCHIVE_SEARCH_N for a quicker run) over --days closed days (ending the day
before yesterday) and one line today, `logbox ingest --received header`. A copy of it is the
baseline, every day local. Then, against a real SeaweedFS (`weed server -s3` over HTTPS,
tests/lbtest/s3.py) on this machine: `logbox-archive once` archives and verifies every closed
day, and a real logbox-indexd's retention (1 day) removes them from local disk, so that the
store keeps only today and reads the closed days from the bucket.

Each query over the closed days, through logbox-searchd (no deadline; one kept-alive client;
wall time):
  - local: searchd on the copy, the median of --reps warm runs after one unmeasured;
  - archived cold: a fresh searchd on a fresh, empty piece cache, the first answer, the median
    of --cold-reps such starts (the object store's own files stay in the OS page cache);
  - archived warm: one searchd on one cache, the median of --reps runs after one unmeasured;
for: newest 100 of a rare token (RARE) with its total; a count of a common word; a 100-bucket
histogram of it. Every answer (but its time and its archive report) must equal the local one.
Targets: archived warm <= 2x local; archived cold <= 2 s for the rare token's newest 100.
Prints the machine and a table; writes build/bench/archive_search.md and archive_search.json,
and removes its work folder.
"""

from __future__ import annotations

import argparse
import calendar
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(TOP / "tests"))
sys.path.insert(0, str(HERE))

import size_corpus  # noqa: E402
from benchlib import (  # noqa: E402
    KeepAlive,
    add_out_option,
    add_program_options,
    du,
    machine,
    machine_line,
    median,
    say,
    write_report,
)
from lbtest.indexd import HeldFifo, Indexd  # noqa: E402
from lbtest.s3 import Weed, weed_binary  # noqa: E402
from lbtest.searchd import Searchd, UnixHTTPConnection  # noqa: E402
from lbtest.wait import wait_until  # noqa: E402

DAY = 86400
WARM_RATIO = 2.0
COLD_MS = 2000.0
RARE = "51234"


def make_store(logbox: Path, store: Path, msgs: int, days: int, seed: int) -> list[int]:
    """msgs synth lines over days closed days ending the day before yesterday, and one line
    today, streamed into `logbox ingest`. The closed days (YYYYMMDD)."""
    today0 = int(time.time()) // DAY * DAY
    per_day = msgs // days
    p = subprocess.Popen(
        [str(logbox), "ingest", "--data", str(store), "--received", "header", "-"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdin is not None
    out = []
    for i in range(days + 1, 1, -1):
        day0 = today0 - i * DAY
        out.append(int(time.strftime("%Y%m%d", time.gmtime(day0))))
        gen = size_corpus.synth_lines(random.Random(seed + i), day0, per_day / 86000, day0 + 86399)
        lines = itertools.islice(gen, per_day)
        while batch := list(itertools.islice(lines, 10000)):
            p.stdin.write(b"".join(batch))
        say(f"  {out[-1]}: {per_day:,} lines")
    tm = time.gmtime(today0 + 1)
    mon = size_corpus.MON[tm.tm_mon - 1]
    p.stdin.write(f"<14>{mon} {tm.tm_mday:2d} 00:00:01 today app: the day after\n".encode())
    p.stdin.close()
    err = p.stderr.read() if p.stderr else b""
    if p.wait() != 0:
        raise SystemExit(f"logbox ingest failed ({p.returncode}): {err[-3000:].decode()}")
    return out


def archive_and_remove(
    args: argparse.Namespace, work: Path, store: Path, weed: Weed, days: list[int]
) -> tuple[Path, Path]:
    """Every closed day archived (logbox-archive once) and then removed by indexd's retention.
    The archive settings and state."""
    weed.bucket("archive")
    settings = work / "archive.json"
    target = weed.target("archive", part_mb=16)
    settings.write_text(json.dumps({"version": 1, "targets": {"main": target}}))
    state = work / "archive-state"
    env = dict(
        os.environ,
        PYTHONPATH=str(TOP / "rpc"),
        LOGBOX_ARCHIVE_SETTINGS=str(settings),
        LOGBOX_ARCHIVE_STATE=str(state),
        LOGBOX_DATA=str(store),
        LOGBOX_BIN=str(args.logbox),
    )
    t = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "logbox_core.archive", "once"],
        env=env,
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise SystemExit(f"logbox-archive once failed: {p.stderr[-3000:]}")
    verified = {int(v.stem) for v in (state / "main" / "verified").glob("*.json")}
    if verified != set(days):
        raise SystemExit(f"archived {sorted(verified)}, expected {days}")
    say(f"archived and verified {len(days)} days in {time.monotonic() - t:.1f} s")

    ls = work / "logspaces.json"
    ls.write_text(json.dumps({"version": 1, "logspaces": {"main": {"retention_days": 1}}}))
    fifo = HeldFifo(work / "indexd.fifo")
    d = Indexd(
        args.indexd,
        store,
        work / "indexd-status.json",
        fifo=fifo,
        args=["--logspaces", str(ls), "--archive-state", str(state)],
        stderr_path=work / "indexd.stderr",
    )
    d.start()
    try:
        wait_until(
            lambda: d.stderr().count("retention: main: removed") == len(days),
            "retention removed the archived days",
            300,
            interval=0.2,
        )
    finally:
        d.stop()
        fifo.close()
    say(f"retention removed them: {sorted(p.name for p in (store / 'main').rglob('??-??'))} left")
    return settings, state


class Daemon:
    """A logbox-searchd and one kept-alive client to it."""

    def __init__(self, binary: Path, data: Path, sock: Path, args: list[str]) -> None:
        sock.unlink(missing_ok=True)
        # No deadline: a slow answer is measured, not cut.
        self.d = Searchd(binary, data, sock, ["--deadline-ms", "0", *args]).start(timeout=120)
        self.http = KeepAlive(lambda: UnixHTTPConnection(sock, timeout=600))

    def get(self, path: str, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """The wall time (ms) of GET path?params and the answer (exits on an error)."""
        t = time.perf_counter()
        status, body = self.http.get(path + "?" + urllib.parse.urlencode(params))
        ms = (time.perf_counter() - t) * 1000
        if status != 200:
            raise SystemExit(f"searchd: {path} {params}: {status} {body[:500]!r}")
        return ms, json.loads(body)

    def timed(self, path: str, params: dict[str, Any], reps: int) -> tuple[float, dict[str, Any]]:
        """The median wall time (ms) of reps calls after one unmeasured, and the last answer."""
        _, doc = self.get(path, params)
        times = []
        for _ in range(reps):
            ms, doc = self.get(path, params)
            times.append(ms)
        m = median(times)
        assert m is not None
        return m, doc

    def close(self) -> None:
        self.http.close()
        self.d.stop()


def core(doc: dict[str, Any]) -> dict[str, Any]:
    """An answer without its time and its archive report: what must equal the local one."""
    return {k: v for k, v in doc.items() if k not in ("took_ms", "archive")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_program_options(ap, "logbox", "indexd", "searchd")
    n = int(os.environ.get("LOGBOX_BENCH_ARCHIVE_SEARCH_N", "20000000"))
    ap.add_argument("--msgs", type=int, default=n, help="messages over the closed days")
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--cold-reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--work", type=Path, default=TOP / "build" / "bench" / "archive_search")
    add_out_option(ap)
    args = ap.parse_args()
    work: Path = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    m = machine()
    say(machine_line(m))
    res: dict[str, Any] = {"machine": m, "msgs": args.msgs, "days": args.days, "reps": args.reps}
    weed = None
    daemons: list[Daemon] = []
    try:
        store, local = work / "store", work / "local"
        say(f"ingesting {args.msgs:,} messages over {args.days} days into {store}")
        t = time.monotonic()
        days = make_store(args.logbox, store, args.msgs, args.days, args.seed)
        res["ingest_s"] = time.monotonic() - t
        res["store_bytes"] = du(store)
        say(f"ingested in {res['ingest_s']:.0f} s: {res['store_bytes'] / 1e6:,.1f} MB")
        shutil.copytree(store, local)

        weed = Weed(weed_binary(TOP), work / "weed").start()
        settings, state = archive_and_remove(args, work, store, weed, days)
        flags = ["--archive-settings", str(settings), "--archive-state", str(state)]

        def archived(cache: Path) -> Daemon:
            shutil.rmtree(cache, ignore_errors=True)
            d = Daemon(
                args.searchd,
                store,
                work / f"{cache.name}.sock",
                [*flags, "--archive-cache", str(cache)],
            )
            daemons.append(d)
            return d

        def stop(d: Daemon) -> None:
            daemons.remove(d)
            d.close()

        loc = Daemon(args.searchd, local, work / "l.sock", [])
        daemons.append(loc)
        first = calendar.timegm(time.strptime(f"{days[0]:08d}", "%Y%m%d"))
        last = calendar.timegm(time.strptime(f"{days[-1]:08d}", "%Y%m%d"))
        rng = {"from": str(first), "to": str(last + DAY)}
        # A rare token: a number that a port, a size or an id takes now and then (125
        # matches in 20 M, spread over every day).
        rare = RARE
        common = size_corpus.WORDS[0]
        queries = [
            ("search", f"newest 100 of {rare!r}, with the total", {"q": rare, "limit": 100}),
            ("count", f"count {common!r}", {"q": common}),
            ("histogram", f"histogram {common!r}, 100 buckets", {"q": common, "buckets": 100}),
        ]  # fmt: skip

        rows = []
        warm = archived(work / "cache-warm")
        for what, label, params in queries:
            p = rng | params
            path = f"/v1/{what}"
            loc_ms, want = loc.timed(path, p, args.reps)
            cold_ms, fetched, same = [], [], True
            for i in range(args.cold_reps):
                d = archived(work / f"cache-cold{i}")
                ms, doc = d.get(path, p)
                stop(d)
                cold_ms.append(ms)
                fetched.append(doc.get("archive", {}).get("fetched_bytes"))
                same = same and core(doc) == core(want)
            _, fill = warm.get(path, p)  # fills the warm cache
            warm_ms, doc = warm.timed(path, p, args.reps)
            same = same and core(doc) == core(want) and core(fill) == core(want)
            arch = doc.get("archive", {})
            row = {
                "query": label,
                "what": what,
                "total": want.get("total"),
                "local_ms": loc_ms,
                "warm_ms": warm_ms,
                "ratio": warm_ms / loc_ms,
                "cold_ms": median(cold_ms),
                "cold_runs_ms": cold_ms,
                "cold_fetched_bytes": fetched,
                "warm_fetched_bytes": arch.get("fetched_bytes"),
                "archive_days": arch.get("days"),
                "same": same,
                "warm_met": warm_ms <= WARM_RATIO * loc_ms,
            }
            if what == "search":
                row["cold_met"] = row["cold_ms"] <= COLD_MS
            rows.append(row)
            say(
                f"{label}: {row['total']:,} matches; local {loc_ms:.1f} ms, archived warm "
                f"{warm_ms:.1f} ms, cold {row['cold_ms']:.1f} ms; same answer: {same}"
            )
            if not same:
                say(f"  local:    {json.dumps(core(want))[:600]}")
                say(f"  archived: {json.dumps(core(doc))[:600]}")
        res["rows"] = rows
        res["rare"] = rare
    finally:
        for d in daemons:
            d.close()
        if weed is not None:
            weed.stop()
        shutil.rmtree(work, ignore_errors=True)

    lines = [
        "# Search over archived days",
        "",
        machine_line(m),
        "",
        f"{args.msgs:,} synth messages over {args.days} closed days ({res['store_bytes'] / 1e6:,.1f} "
        "MB on disk), archived to SeaweedFS (`weed server -s3`, HTTPS, on this machine) and "
        "removed from local disk by indexd's retention; each query over those days through "
        "logbox-searchd. Local: the same days kept local (a copy), the median of "
        f"{args.reps} warm runs. Archived warm: one searchd, its piece cache filled, the median "
        f"of {args.reps} runs. Archived cold: a fresh searchd on an empty cache, the first "
        f"answer, the median of {args.cold_reps} (SeaweedFS's files stay in the OS page cache). "
        f"Targets: archived warm <= {WARM_RATIO:.0f}x local; archived cold <= "
        f"{COLD_MS / 1000:.0f} s for the rare token's newest 100.",
        "",
        "| query | matches | local ms | archived warm ms | warm / local | archived cold ms | "
        "cold fetched MB | same answer | target met |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in res["rows"]:
        fetched = [b for b in r["cold_fetched_bytes"] if b is not None]
        mb = f"{median(fetched) / 1e6:,.1f}" if fetched else "—"
        met = r["warm_met"] and r.get("cold_met", True)
        lines.append(
            f"| {r['query']} | {r['total']:,} | {r['local_ms']:.1f} | {r['warm_ms']:.1f} | "
            f"{r['ratio']:.2f} | {r['cold_ms']:.1f} | {mb} | {'yes' if r['same'] else 'NO'} | "
            f"{'yes' if met else 'no'} |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    write_report(args.out, "archive_search", "\n".join(lines) + "\n", res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
