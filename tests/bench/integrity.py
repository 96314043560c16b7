#!/usr/bin/env python3
"""Integrity benchmark (issue 19; run by `make bench` or `make bench-integrity`; not a test, it
never fails on a missed target).

Side by side in one run, on the size bench's corpora (build/bench/size/, written if missing):
  - `logbox ingest` with hash chains and seals (this build, sealing set up) against a baseline
    logbox without them (--baseline BIN, else the build of --baseline-ref, default the commit
    before the chains, built once into build/bench/integrity/base): msg/s and CPU seconds, the
    median of --runs alternating runs; the target is <= 5 % slower;
  - `logbox verify --integrity` (chains, seals, day roots: every chained byte hashed) and the
    full `logbox verify`, on one core (taskset -c 0): MB of store per second of wall and of
    CPU; the target is >= 300 MB/s;
  - the day's end: one line dated the next day appended, which ends the day (its blocks
    sealed, the whole-day merge, the day root signed), and `logbox seal --force`: seconds.
With --day-msgs N (default 0: off; issue 19's "seal and sign time at day end for a 20 M-message
day" is N = 20000000: ~2.6 GB of lines, a store of ~1.3 GB under --out), also one whole day:
N synth lines (tests/bench/size_corpus.py's generator) dated yesterday (UTC) from 00:00 to at
most 23:59:59 in order, written to a file (removed after), `logbox ingest --received header` of
it into a fresh store with sealing set up, then, timed apart, the day's end (the step above,
with a line dated today) and `logbox seal --force`, and `logbox verify --integrity --json` on one
core (taskset -c 0), which must find the day intact, with its N messages and signed. Each
step's wall and CPU seconds and peak RSS; the store's bytes as ingested and once sealed.
--corpora "" leaves the corpora (and the baseline build) out, so the run is that day alone.
Prints the machine and a table; writes build/bench/integrity.md and integrity.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(TOP / "tests"))
sys.path.insert(0, str(HERE))

import size_corpus  # noqa: E402
from benchlib import (  # noqa: E402
    add_out_option,
    add_program_options,
    du,
    machine,
    machine_line,
    say,
    write_report,  # noqa: E402
)
from size import build_corpus  # noqa: E402

BASELINE_REF = "8d64dcf"  # main before the hash chains (issue 19)
# The corpora's day end: received now, their day is today; this line (--received header) is
# dated later in the year, which ends it.
NEXT_DAY_LINE = b"<14>Dec 31 23:59:59 next-day app: the next day\n"
DAY_SEED = 18


@dataclass
class Timed:
    """A command's wall and CPU seconds, its peak RSS, exit status and output."""

    wall_s: float
    cpu_s: float
    rss_bytes: int
    returncode: int
    stdout: bytes
    stderr: bytes

    def row(self) -> dict[str, float]:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "peak_rss_bytes": self.rss_bytes}


def timed(cmd: Sequence[str], input: bytes | None = None) -> Timed:
    """Runs cmd (stdin: input, else nothing) and waits for it with wait4: its own CPU time and
    peak RSS."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        stdin = subprocess.PIPE if input is not None else subprocess.DEVNULL
        t0 = time.monotonic()
        p = subprocess.Popen(list(cmd), stdin=stdin, stdout=out, stderr=err)
        if p.stdin is not None:
            try:
                p.stdin.write(input or b"")
            except BrokenPipeError:
                pass
            p.stdin.close()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Timed(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, p.returncode,
                     out.read(), err.read())  # fmt: skip


def checked(what: str, t: Timed) -> Timed:
    if t.returncode != 0:
        raise SystemExit(
            f"{what}: exit {t.returncode}: {t.stderr.decode(errors='replace')[-2000:]}"
        )
    return t


def build_baseline(out: Path, ref: str) -> Path:
    """ref's logbox, built once into out/integrity/base (a git worktree)."""
    base = out / "integrity" / "base"
    binary = base / "build" / "bin" / "logbox"
    stamp = base / ".ref"
    if binary.is_file() and stamp.is_file() and stamp.read_text() == ref:
        return binary
    say(f"building the baseline logbox at {ref} in {base}")
    subprocess.run(["git", "-C", str(TOP), "worktree", "remove", "--force", str(base)],
                   capture_output=True)  # fmt: skip
    base.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "-C", str(TOP), "worktree", "add", "--detach", str(base), ref], check=True,
                   capture_output=True)  # fmt: skip
    subprocess.run(["make", "-C", str(base / "indexer"), "-j2", "../build/bin/logbox"], check=True,
                   capture_output=True)  # fmt: skip
    stamp.write_text(ref)
    return binary


def ingest(
    binary: Path, corpus: Path, store: Path, seal: bool, extra: Sequence[str] = ()
) -> dict[str, float]:
    """corpus ingested into a fresh store (sealing set up when seal), options extra added."""
    subprocess.run(["rm", "-rf", str(store)], check=True)
    store.mkdir(parents=True)
    if seal:
        subprocess.run([str(binary), "keys", "init", "--data", str(store), "--interval", "900"],
                       check=True, capture_output=True)  # fmt: skip
    t = timed([str(binary), "ingest", "--data", str(store), "--sync", "none", *extra, str(corpus)])
    return checked(f"{binary} ingest", t).row()


def end_day(logbox: Path, store: Path, line: bytes = NEXT_DAY_LINE) -> dict[str, float]:
    """The day's end: line, dated a later day, ingested with --received header moves the writer
    to that day, which ends the store's day (its blocks sealed, the whole-day merge, the day
    root signed; the ingest's close waits for the merge)."""
    argv = [str(logbox), "ingest", "--data", str(store), "--sync", "none", "--received", "header"]
    return checked("the day's end", timed([*argv, "-"], input=line)).row()


def seal_now(logbox: Path, store: Path) -> dict[str, float]:
    """`logbox seal --force`."""
    return checked("seal", timed([str(logbox), "seal", "--data", str(store), "--force"])).row()


def write_day(path: Path, n: int, day0: int, seed: int) -> dict[str, Any]:
    """path: n synth lines (size_corpus.synth_lines) of the UTC day starting at day0 (epoch s),
    in time order, at a rate that ends them around 23:53 (none later than 23:59:59)."""
    t = time.monotonic()
    gen = size_corpus.synth_lines(random.Random(seed), day0, n / 86000, day0 + 86399)
    lines = itertools.islice(gen, n)
    size = 0
    with open(path, "wb") as f:
        while batch := list(itertools.islice(lines, 10000)):
            size += f.write(b"".join(batch))
    return {"bytes": size, "write_s": time.monotonic() - t}


def next_day_line(day0: int) -> bytes:
    """An RFC 3164 line dated 00:00:01 of the day after the UTC day starting at day0."""
    tm = time.gmtime(day0 + 86400 + 1)
    mon = size_corpus.MON[tm.tm_mon - 1]
    return f"<14>{mon} {tm.tm_mday:2d} 00:00:01 next-day app: the next day\n".encode()


def day_bench(logbox: Path, work: Path, n: int) -> dict[str, Any]:
    """One day of n messages (yesterday, UTC) in a fresh sealed store: the ingest, the day's
    end, the seal and verify --integrity, each timed; the store's bytes."""
    day0 = (int(time.time()) // 86400 - 1) * 86400
    day = time.strftime("%Y-%m-%d", time.gmtime(day0))
    corpus, store = work / "day.log", work / "day"
    work.mkdir(parents=True, exist_ok=True)
    say(f"day {day}: writing {n:,} lines to {corpus}")
    r: dict[str, Any] = {"day": day, "messages": n, "corpus": write_day(corpus, n, day0, DAY_SEED)}
    say(f"  {r['corpus']['bytes'] / 1e6:,.0f} MB in {r['corpus']['write_s']:.0f} s; ingesting")
    try:
        r["ingest"] = ingest(logbox, corpus, store, True, ["--received", "header"])
    finally:
        corpus.unlink()
    r["ingest"]["msg_s"] = n / r["ingest"]["wall_s"]
    r["store_bytes_ingested"] = du(store)
    say(f"  ingest {r['ingest']['wall_s']:.1f} s ({r['ingest']['msg_s']:,.0f} msg/s), "
        f"{r['store_bytes_ingested'] / 1e6:,.0f} MB; ending the day")  # fmt: skip
    index = store / "main" / time.strftime("%Y/%m-%d", time.gmtime(day0)) / "index"
    r["segments_ingested"] = len(list(index.glob("*.seg")))
    r["day_end"] = end_day(logbox, store, next_day_line(day0))
    r["seal"] = seal_now(logbox, store)
    r["segments"] = len(list(index.glob("*.seg")))
    r["store_bytes"] = du(store)
    v = timed(["taskset", "-c", "0", str(logbox), "verify", "--data", str(store), "--integrity",
               "--json"])  # fmt: skip
    r["verify_integrity"] = {**v.row(), "mb_s_wall": r["store_bytes"] / 1e6 / v.wall_s,
                             "mb_s_cpu": r["store_bytes"] / 1e6 / v.cpu_s,
                             "exit": v.returncode}  # fmt: skip
    doc = json.loads(v.stdout) if v.stdout.strip() else {}
    days = [d for ls in doc.get("logspaces", []) for d in ls.get("days", []) if d["day"] == day]
    r["verify_day"] = days[0] if days else None
    r["day_ok"] = bool(
        v.returncode == 0 and doc.get("ok") and days and days[0]["intact"]
        and days[0]["signed"] == "yes" and days[0]["messages"] == n
    )  # fmt: skip
    say(f"  day end {r['day_end']['wall_s']:.2f} s, seal {r['seal']['wall_s']:.3f} s, verify "
        f"--integrity {v.wall_s:.2f} s; the day {'signed and intact' if r['day_ok'] else 'NOT OK'}")  # fmt: skip
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_program_options(ap, "logbox")
    add_out_option(ap)
    ap.add_argument("--baseline", type=Path, help="a logbox without chains (default: built)")
    ap.add_argument("--baseline-ref", default=BASELINE_REF)
    ap.add_argument("--corpora", default="synth,lhlike")
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--day-msgs", type=int, default=0, metavar="N",
                    help="also one day of N messages: its end, seal and verify (0: off)")  # fmt: skip
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    kinds = [k for k in args.corpora.split(",") if k]
    base = (args.baseline or build_baseline(out, args.baseline_ref)) if kinds else None
    m = machine()
    say(machine_line(m))
    res: dict[str, Any] = {
        "machine": m,
        "logbox": str(args.logbox),
        "baseline": str(base),
        "corpora": {},
    }
    work = out / "integrity"
    for kind in kinds:
        assert base is not None
        (out / "size").mkdir(exist_ok=True)
        c = build_corpus(out / "size", kind, args.mb, 18)
        corpus = Path(c["path"])
        say(f"{kind}: {c['lines']:,} lines, {c['bytes'] / 1e6:.1f} MB")
        runs: dict[str, list[dict[str, float]]] = {"chained": [], "baseline": []}
        for _ in range(args.runs):
            runs["baseline"].append(ingest(base, corpus, work / "b", seal=False))
            runs["chained"].append(ingest(args.logbox, corpus, work / "c", seal=True))
        r: dict[str, Any] = {"lines": c["lines"], "bytes": c["bytes"]}
        for k, v in runs.items():
            r[k] = {
                "msg_s": statistics.median(c["lines"] / x["wall_s"] for x in v),
                "cpu_s": statistics.median(x["cpu_s"] for x in v),
            }
        r["rate_ratio"] = r["chained"]["msg_s"] / r["baseline"]["msg_s"]
        r["cpu_ratio"] = r["chained"]["cpu_s"] / r["baseline"]["cpu_s"]
        store = work / "c"
        r["store_bytes"] = du(store)
        r["chain_bytes"] = sum(p.stat().st_size for p in store.rglob("chain"))
        for name, extra in (("integrity", ["--integrity"]), ("full", [])):
            t = checked(f"verify {extra}", timed(
                ["taskset", "-c", "0", str(args.logbox), "verify", "--data", str(store), *extra]
            ))  # fmt: skip
            r[f"verify_{name}"] = {"wall_s": t.wall_s, "cpu_s": t.cpu_s,
                                   "mb_s_wall": r["store_bytes"] / 1e6 / t.wall_s,
                                   "mb_s_cpu": r["store_bytes"] / 1e6 / t.cpu_s}  # fmt: skip
        r["day_end_s"] = end_day(args.logbox, store)["wall_s"]
        r["seal_s"] = seal_now(args.logbox, store)["wall_s"]
        t = timed([str(args.logbox), "verify", "--data", str(store), "--integrity"])
        r["after_day_end"] = t.stdout.decode().strip()
        res["corpora"][kind] = r
        say(f"  ingest {r['chained']['msg_s']:,.0f} msg/s against {r['baseline']['msg_s']:,.0f} "
            f"({r['rate_ratio']:.3f}x), CPU {r['cpu_ratio']:.3f}x; verify --integrity "
            f"{r['verify_integrity']['mb_s_wall']:,.0f} MB/s")  # fmt: skip
    if args.day_msgs > 0:
        res["day"] = day_bench(args.logbox, work, args.day_msgs)
    lines = ["# Integrity benchmark (issue 19)", "", machine_line(m), ""]
    if res["corpora"]:
        lines += corpora_table(res, args.logbox, base)
    if "day" in res:
        lines += day_table(res["day"])
    write_report(out, "integrity", "\n".join(lines), res)
    return 0


def corpora_table(res: dict[str, Any], logbox: Path, base: Path | None) -> list[str]:
    lines = [
        f"logbox {logbox} with chains and seals; baseline {base} (no chains).",
        "",
        "| corpus | ingest msg/s (chained / baseline) | rate | CPU | chain bytes / store | "
        "verify --integrity MB/s (wall / CPU) | full verify MB/s (wall / CPU) | day end s | seal s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind, r in res["corpora"].items():
        vi, vf = r["verify_integrity"], r["verify_full"]
        lines.append(
            f"| {kind} | {r['chained']['msg_s']:,.0f} / {r['baseline']['msg_s']:,.0f} | "
            f"{r['rate_ratio']:.3f}x | {r['cpu_ratio']:.3f}x | "
            f"{r['chain_bytes'] / r['store_bytes']:.4f} | {vi['mb_s_wall']:,.0f} / {vi['mb_s_cpu']:,.0f} | "
            f"{vf['mb_s_wall']:,.0f} / {vf['mb_s_cpu']:,.0f} | {r['day_end_s']:.2f} | {r['seal_s']:.3f} |"
        )
    lines += ["", "Targets: ingest <= 5 % slower with chains and seals; verify >= 300 MB/s of store "
              "on one core (taskset -c 0).", ""]  # fmt: skip
    return lines


def day_table(d: dict[str, Any]) -> list[str]:
    gib = 2**30
    ing, de, se, vi = d["ingest"], d["day_end"], d["seal"], d["verify_integrity"]
    vd = d["verify_day"] or {}
    return [
        f"## One day of {d['messages']:,} messages ({d['day']}, synth lines, "
        f"{d['corpus']['bytes'] / 1e6:,.0f} MB)",
        "",
        "| step | wall s | CPU s | peak RSS GiB | |",
        "| --- | --- | --- | --- | --- |",
        f"| ingest (--received header, sealing set up) | {ing['wall_s']:.1f} | {ing['cpu_s']:.1f} | "
        f"{ing['peak_rss_bytes'] / gib:.2f} | {ing['msg_s']:,.0f} msg/s |",
        f"| the day's end (one line of the next day: seal, whole-day merge, day root) | "
        f"{de['wall_s']:.2f} | {de['cpu_s']:.2f} | {de['peak_rss_bytes'] / gib:.2f} | |",
        f"| seal --force | {se['wall_s']:.3f} | {se['cpu_s']:.3f} | "
        f"{se['peak_rss_bytes'] / gib:.2f} | |",
        f"| verify --integrity --json (taskset -c 0) | {vi['wall_s']:.2f} | {vi['cpu_s']:.2f} | "
        f"{vi['peak_rss_bytes'] / gib:.2f} | {vi['mb_s_wall']:,.0f} MB/s wall, "
        f"{vi['mb_s_cpu']:,.0f} CPU |",
        "",
        f"Store: {d['store_bytes_ingested']:,} bytes in {d['segments_ingested']} segments as "
        f"ingested, {d['store_bytes']:,} in {d['segments']} once the day is ended and sealed. "
        f"verify: day {d['day']}, {vd.get('messages', '?')} messages, "
        f"intact {vd.get('intact', '?')}, signed {vd.get('signed', '?')}: "
        f"{'ok' if d['day_ok'] else 'NOT OK'}.",
        "",
    ]


if __name__ == "__main__":
    sys.exit(main())
