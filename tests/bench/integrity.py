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
Prints the machine and a table; writes build/bench/integrity.md and integrity.json.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(TOP / "tests"))
sys.path.insert(0, str(HERE))

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


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], **kw: Any) -> tuple[float, float, subprocess.CompletedProcess[bytes]]:
    """(wall s, CPU s of the command, its result)."""
    c0, t0 = children_cpu(), time.monotonic()
    p = subprocess.run(cmd, capture_output=True, **kw)
    return time.monotonic() - t0, children_cpu() - c0, p


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


def ingest(binary: Path, corpus: Path, store: Path, seal: bool) -> dict[str, float]:
    subprocess.run(["rm", "-rf", str(store)], check=True)
    store.mkdir(parents=True)
    if seal:
        subprocess.run([str(binary), "keys", "init", "--data", str(store), "--interval", "900"],
                       check=True, capture_output=True)  # fmt: skip
    wall, cpu, p = timed(
        [str(binary), "ingest", "--data", str(store), "--sync", "none", str(corpus)]
    )
    if p.returncode != 0:
        raise SystemExit(f"{binary} ingest: {p.stderr.decode()[-2000:]}")
    return {"wall_s": wall, "cpu_s": cpu}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_program_options(ap, "logbox")
    add_out_option(ap)
    ap.add_argument("--baseline", type=Path, help="a logbox without chains (default: built)")
    ap.add_argument("--baseline-ref", default=BASELINE_REF)
    ap.add_argument("--corpora", default="synth,lhlike")
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    base = args.baseline or build_baseline(out, args.baseline_ref)
    m = machine()
    say(machine_line(m))
    res: dict[str, Any] = {
        "machine": m,
        "logbox": str(args.logbox),
        "baseline": str(base),
        "corpora": {},
    }
    work = out / "integrity"
    for kind in args.corpora.split(","):
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
            wall, cpu, p = timed(
                ["taskset", "-c", "0", str(args.logbox), "verify", "--data", str(store), *extra]
            )
            if p.returncode != 0:
                raise SystemExit(f"verify {extra}: {p.stderr.decode()[-2000:]}")
            r[f"verify_{name}"] = {"wall_s": wall, "cpu_s": cpu,
                                   "mb_s_wall": r["store_bytes"] / 1e6 / wall,
                                   "mb_s_cpu": r["store_bytes"] / 1e6 / cpu}  # fmt: skip
        # The day's end: a line of the next day ends it (sealed blocks, whole-day merge, root).
        line = b"<14>Dec 31 23:59:59 next-day app: the next day\n"
        env = dict(os.environ)
        wall, _cpu, p = timed([str(args.logbox), "ingest", "--data", str(store), "--sync", "none",
                               "--received", "header", "-"], input=line, env=env)  # fmt: skip
        r["day_end_s"] = wall
        wall, _cpu, p = timed([str(args.logbox), "seal", "--data", str(store), "--force"])
        r["seal_s"] = wall
        wall, cpu, p = timed([str(args.logbox), "verify", "--data", str(store), "--integrity"])
        r["after_day_end"] = p.stdout.decode().strip()
        res["corpora"][kind] = r
        say(f"  ingest {r['chained']['msg_s']:,.0f} msg/s against {r['baseline']['msg_s']:,.0f} "
            f"({r['rate_ratio']:.3f}x), CPU {r['cpu_ratio']:.3f}x; verify --integrity "
            f"{r['verify_integrity']['mb_s_wall']:,.0f} MB/s")  # fmt: skip
    lines = [
        "# Integrity benchmark (issue 19)",
        "",
        machine_line(m),
        "",
        f"logbox {args.logbox} with chains and seals; baseline {base} (no chains).",
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
    write_report(out, "integrity", "\n".join(lines), res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
