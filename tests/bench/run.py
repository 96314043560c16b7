#!/usr/bin/env python3
"""Store ingest benchmark (run by `make bench`; not a test).

Builds a loghub-like corpus of N messages (tests/lbtest/corpus.py big_corpus, cached under
build/bench/), then on that same file measures:
  - `logbox ingest` into a fresh store, median of --runs runs: wall time, msg/s, MB/s of input,
    peak RSS (the child's rusage), and `logbox stats --json` bytes on disk as % of the input;
  - the baseline, gzip -1: time to compress the file to /dev/null and its size as % of the
    input (gzip -6 size for reference);
and prints the machine, a table with the targets beside, and writes build/bench/store.json.
Exits non-zero if a logbox command fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "tests"))

from benchlib import add_out_option, add_program_options, cpu_model, mem_bytes  # noqa: E402
from lbtest import corpus  # noqa: E402

TARGET_MSGS = 500_000
TARGET_PCT = 20.0
MEM_LIMIT = 1 << 30


def machine() -> dict[str, Any]:
    """nproc, CPU model, kernel, memory, Python (this report's own shape of benchlib's)."""
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "kernel": platform.release(),
        "mem_bytes": mem_bytes(),
        "python": platform.python_version(),
    }


def build_corpus(n: int, seed: int, out: Path) -> tuple[Path, float]:
    """The corpus file for (n, seed), built unless cached; (path, seconds spent building)."""
    path = out / f"corpus-{n}-{seed}.log"
    meta = path.with_suffix(".json")
    if path.is_file() and meta.is_file():
        m = json.loads(meta.read_text())
        if m.get("messages") == n and m.get("bytes") == path.stat().st_size:
            return path, 0.0
    t = time.monotonic()
    tmp = path.with_suffix(".tmp")
    size = corpus.big_corpus(n, tmp, seed=seed)
    tmp.rename(path)
    meta.write_text(json.dumps({"messages": n, "seed": seed, "bytes": size}))
    return path, time.monotonic() - t


def timed(argv: list[str], stdout: Any = subprocess.DEVNULL) -> tuple[int, float, int, bytes]:
    """Runs argv; (exit status, wall seconds, peak RSS bytes, stderr)."""
    t = time.monotonic()
    p = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE)
    assert p.stderr is not None
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, wall, ru.ru_maxrss * 1024, err


def fail(what: str, rc: int, err: bytes) -> None:
    sys.stderr.write(f"bench: {what} failed (exit {rc}):\n{err.decode(errors='replace')[-3000:]}\n")
    sys.exit(1)


def ingest_runs(logbox: Path, path: Path, n: int, runs: int, work: Path) -> dict[str, Any]:
    """Ingests path into a fresh store `runs` times; the median run and the stats of the last."""
    results = []
    stats: dict[str, Any] = {}
    for i in range(runs):
        data = work / "store"
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        argv = [str(logbox), "ingest", "--data", str(data), str(path)]
        rc, wall, rss, err = timed(argv)
        if rc != 0:
            fail(f"run {i + 1}: {' '.join(argv)}", rc, err)
        results.append(
            {"wall_s": wall, "rss_bytes": rss, "summary": err.decode(errors="replace").strip()}
        )
        print(
            f"  ingest run {i + 1}/{runs}: {wall:.2f} s, {n / wall:,.0f} msg/s, peak RSS {rss / 2**20:.0f} MiB"
        )
        st = subprocess.run(
            [str(logbox), "stats", "--data", str(data), "--json"], capture_output=True
        )
        if st.returncode != 0:
            fail("logbox stats --json", st.returncode, st.stderr)
        try:
            stats = json.loads(st.stdout)
        except ValueError:
            fail("logbox stats --json (bad JSON)", st.returncode, st.stdout)
        if stats.get("messages") != n:
            fail(f"stats: {stats.get('messages')} messages stored, {n} sent", 1, st.stdout)
    shutil.rmtree(work / "store", ignore_errors=True)
    med = statistics.median(r["wall_s"] for r in results)
    return {
        "runs": results,
        "wall_s": med,
        "rss_bytes": max(r["rss_bytes"] for r in results),
        "stats": stats,
    }


def gzip_size(level: int, path: Path) -> tuple[int, float]:
    """(compressed bytes, seconds) of gzip -LEVEL, counted from a pipe."""
    t = time.monotonic()
    p = subprocess.Popen(["gzip", f"-{level}", "-c", str(path)], stdout=subprocess.PIPE)
    assert p.stdout is not None
    size = 0
    while chunk := p.stdout.read(1 << 20):
        size += len(chunk)
    if p.wait() != 0:
        sys.exit(f"bench: gzip -{level} failed")
    return size, time.monotonic() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--messages", type=int, default=3_000_000, help="corpus size (default %(default)s)"
    )
    ap.add_argument(
        "--runs", type=int, default=3, help="ingest runs, median taken (default %(default)s)"
    )
    ap.add_argument("--seed", type=int, default=1)
    add_program_options(ap, "logbox")
    add_out_option(ap)
    args = ap.parse_args(argv)

    if not args.logbox.is_file():
        sys.exit(f"bench: {args.logbox} not found (make build)")
    args.out.mkdir(parents=True, exist_ok=True)
    m = machine()
    print(
        f"machine: {m['nproc']} CPUs, {m['cpu']}, kernel {m['kernel']}, {m['mem_bytes'] / 2**30:.1f} GiB"
    )
    print(f"corpus: {args.messages:,} messages (loghub-like, seed {args.seed}) ...")
    path, built = build_corpus(args.messages, args.seed, args.out)
    raw = path.stat().st_size
    print(f"  {path} ({raw / 1e6:,.0f} MB{f', built in {built:.1f} s' if built else ', cached'})")
    os.sync()
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm the cache

    print("logbox ingest:")
    ing = ingest_runs(args.logbox, path, args.messages, args.runs, args.out)
    print("gzip baseline:")
    rc, gz1_time, _, err = timed(["gzip", "-1", "-c", str(path)])
    if rc != 0:
        fail("gzip -1", rc, err)
    gz1_size, _ = gzip_size(1, path)
    gz6_size, gz6_time = gzip_size(6, path)
    print(f"  gzip -1: {gz1_time:.2f} s; gzip -6: {gz6_time:.2f} s")

    wall = ing["wall_s"]
    st = ing["stats"]
    disk = int(st.get("disk_bytes", 0))
    rows = [
        (
            "ingest msg/s",
            f"{args.messages / wall:,.0f}",
            f">= {TARGET_MSGS:,}",
            args.messages / wall >= TARGET_MSGS,
        ),
        ("ingest MB/s (input)", f"{raw / wall / 1e6:,.1f}", "", None),
        ("gzip -1 MB/s", f"{raw / gz1_time / 1e6:,.1f}", "", None),
        ("ingest MB/s / gzip -1 MB/s", f"{gz1_time / wall:.2f}", "", None),
        (
            "disk (stats) % of input",
            f"{100 * disk / raw:.1f} %",
            f"<= {TARGET_PCT:.0f} %",
            100 * disk / raw <= TARGET_PCT,
        ),
        (
            "  messages / index / catalog",
            "{:,} / {:,} / {:,} B".format(
                st.get("messages_bytes", 0), st.get("index_bytes", 0), st.get("catalog_bytes", 0)
            ),
            "",
            None,
        ),
        ("gzip -1 size % of input", f"{100 * gz1_size / raw:.1f} %", "", None),
        ("gzip -6 size % of input", f"{100 * gz6_size / raw:.1f} %", "", None),
        (
            "peak RSS",
            f"{ing['rss_bytes'] / 2**20:,.0f} MiB",
            f"<= {MEM_LIMIT // 2**20} MiB",
            ing["rss_bytes"] <= MEM_LIMIT,
        ),
    ]
    print()
    print(f"{'measure':32} {'value':>22}  {'target':>12}")
    for name, value, target, ok in rows:
        mark = "" if ok is None else ("  ok" if ok else "  MISSED")
        print(f"{name:32} {value:>22}  {target:>12}{mark}")

    report = {
        "machine": m,
        "corpus": {"path": str(path), "messages": args.messages, "bytes": raw, "seed": args.seed},
        "ingest": {
            "runs": ing["runs"],
            "median_wall_s": wall,
            "msg_per_s": args.messages / wall,
            "mb_per_s": raw / wall / 1e6,
            "peak_rss_bytes": ing["rss_bytes"],
            "stats": st,
            "disk_pct_of_input": 100 * disk / raw,
        },
        "gzip": {
            "level1_wall_s": gz1_time,
            "level1_mb_per_s": raw / gz1_time / 1e6,
            "level1_bytes": gz1_size,
            "level1_pct": 100 * gz1_size / raw,
            "level6_bytes": gz6_size,
            "level6_pct": 100 * gz6_size / raw,
        },
        "ingest_vs_gzip1_speed": gz1_time / wall,
        "targets": {"msg_per_s": TARGET_MSGS, "disk_pct": TARGET_PCT, "rss_bytes": MEM_LIMIT},
    }
    (args.out / "store.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out / 'store.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
