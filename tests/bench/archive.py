#!/usr/bin/env python3
"""Archive benchmark (issue 22; `make bench` or `make bench-archive`; not a test, it never
fails on a missed target).

A store of --days closed days of --msgs-per-day synth lines each (tests/bench/size_corpus.py's
generator, `logbox ingest --received header`), then, against a real SeaweedFS (`weed server
-s3` over HTTPS, tests/lbtest/s3.py) on this machine, side by side in one run:
  - the baseline: boto3's own `upload_file` (s3transfer: multipart, 10 threads, no read-back)
    of the same files: the client library's ceiling on this store;
  - `logbox-archive once`: every day uploaded, read back whole, verified, its manifest written
    (the archive's upload throughput: bytes archived per second, and per day);
  - a second `once`: what a pass over an archived store costs when there is nothing to send;
  - `logbox archive verify`: every archived day read back against its manifest;
  - `logbox archive restore` of one day into an empty store: download, check, import;
  - the same counts on the restored day and on the original store (they must agree).
Prints the machine and a table; writes build/bench/archive.md and archive.json.
"""

from __future__ import annotations

import argparse
import calendar
import itertools
import json
import os
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
from benchlib import add_out_option, du, machine, machine_line, say, write_report  # noqa: E402
from lbtest.s3 import Weed, weed_binary  # noqa: E402

DAY = 86400


def run(argv: list[str], env: dict[str, str] | None = None, what: str = "") -> tuple[float, str]:
    t = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    dt = time.monotonic() - t
    if p.returncode != 0:
        raise SystemExit(f"{what or argv[0]} failed ({p.returncode}): {p.stderr[-3000:]}")
    return dt, p.stdout


def make_store(logbox: Path, store: Path, days: int, per_day: int, seed: int) -> list[int]:
    """days closed days (ending yesterday) of per_day synth lines each, and one line today."""
    today0 = int(time.time()) // DAY * DAY
    src = store.parent / "archive-corpus.log"
    out = []
    with open(src, "wb") as f:
        for i in range(days, 0, -1):
            day0 = today0 - i * DAY
            out.append(int(time.strftime("%Y%m%d", time.gmtime(day0))))
            gen = size_corpus.synth_lines(
                random.Random(seed + i), day0, per_day / 86000, day0 + 86399
            )
            lines = itertools.islice(gen, per_day)
            while batch := list(itertools.islice(lines, 10000)):
                f.write(b"".join(batch))
        tm = time.gmtime(today0 + 1)
        mon = size_corpus.MON[tm.tm_mon - 1]
        f.write(f"<14>{mon} {tm.tm_mday:2d} 00:00:01 today app: the day after\n".encode())
    say(f"ingesting {src.stat().st_size / 1e6:,.0f} MB ({days} days x {per_day:,}) into {store}")
    run(
        [str(logbox), "ingest", "--data", str(store), "--received", "header", str(src)],
        what="ingest",
    )
    src.unlink()
    return out


def day_files(store: Path, day: int) -> list[Path]:
    d = f"{day:08d}"
    root = store / "main" / d[:4] / f"{d[4:6]}-{d[6:]}"
    return sorted(p for p in root.rglob("*") if p.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--logbox", type=Path, default=TOP / "build" / "bin" / "logbox")
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--msgs-per-day", type=int, default=300_000)
    ap.add_argument("--part-mb", type=int, default=16)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--work", type=Path, default=TOP / "build" / "bench" / "archive")
    add_out_option(ap)
    args = ap.parse_args()
    work: Path = args.work
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    m = machine()
    say(machine_line(m))
    store = work / "store"
    days = make_store(args.logbox, store, args.days, args.msgs_per_day, args.seed)
    store_bytes = du(store)

    weed = Weed(weed_binary(TOP), work / "weed").start()
    res: dict[str, Any] = {"machine": m, "days": args.days, "msgs_per_day": args.msgs_per_day}
    try:
        s3 = weed.client()
        weed.bucket("baseline")
        weed.bucket("archive")
        # the baseline: boto3's transfer manager, the same files, no read-back
        files = [(d, p) for d in days for p in day_files(store, d)]
        nbytes = sum(p.stat().st_size for _, p in files)
        t = time.monotonic()
        for d, p in files:
            s3.upload_file(str(p), "baseline", f"{d}/{p.relative_to(store)}")
        base_s = time.monotonic() - t
        res["baseline"] = {"bytes": nbytes, "seconds": base_s, "mb_s": nbytes / base_s / 1e6}
        say(f"baseline boto3 upload_file: {nbytes / 1e6:,.1f} MB in {base_s:.2f} s")

        settings = work / "archive.json"
        settings.write_text(
            json.dumps(
                {"version": 1, "targets": {"main": weed.target("archive", part_mb=args.part_mb)}}
            )
        )
        state = work / "archive-state"
        env = dict(
            os.environ,
            PYTHONPATH=str(TOP / "rpc"),
            LOGBOX_ARCHIVE_SETTINGS=str(settings),
            LOGBOX_ARCHIVE_STATE=str(state),
            LOGBOX_DATA=str(store),
            LOGBOX_BIN=str(args.logbox),
        )
        tool = [sys.executable, "-m", "logbox_core.archive"]
        once_s, _ = run([*tool, "once"], env, "logbox-archive once")
        recs = [
            json.loads(p.read_text()) for p in sorted((state / "main" / "verified").glob("*.json"))
        ]
        archived = sum(r["bytes"] for r in recs)
        res["archive"] = {
            "seconds": once_s,
            "bytes": archived,
            "mb_s": archived / once_s / 1e6,
            "per_day": [
                {"date": r["date"], "bytes": r["bytes"], "seconds": r["seconds"]} for r in recs
            ],
        }
        say(f"logbox-archive once: {archived / 1e6:,.1f} MB in {once_s:.2f} s (upload + read-back)")
        again_s, _ = run([*tool, "once"], env, "second pass")
        res["second_pass_s"] = again_s
        verify_s, _ = run([*tool, "verify"], env, "verify")
        res["verify"] = {"seconds": verify_s, "mb_s": archived / verify_s / 1e6}

        fresh = work / "fresh"
        run([str(args.logbox), "ingest", "--data", str(fresh), "-"], what="empty store")
        day = days[len(days) // 2]
        env2 = dict(env, LOGBOX_DATA=str(fresh), LOGBOX_ARCHIVE_STATE=str(work / "state2"))
        restore_s, _ = run([*tool, "restore", "--day", str(day)], env2, "restore")
        rb = sum(p.stat().st_size for p in day_files(fresh, day))
        res["restore"] = {
            "day": day,
            "bytes": rb,
            "seconds": restore_s,
            "mb_s": rb / restore_s / 1e6,
        }
        day0 = calendar.timegm(time.strptime(f"{day:08d}", "%Y%m%d"))
        frm = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(day0))
        to = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(day0 + DAY))
        counts = {}
        for q in ("*", "error", "connection refused"):
            a = run(
                [
                    str(args.logbox),
                    "search",
                    "--data",
                    str(store),
                    "--from",
                    frm,
                    "--to",
                    to,
                    "--count",
                    q,
                ]
            )[1]
            b = run(
                [
                    str(args.logbox),
                    "search",
                    "--data",
                    str(fresh),
                    "--from",
                    frm,
                    "--to",
                    to,
                    "--count",
                    q,
                ]
            )[1]
            counts[q] = (a.strip(), b.strip())
        res["restore"]["counts_agree"] = all(a == b for a, b in counts.values())
        res["restore"]["counts"] = counts
    finally:
        weed.stop()

    b, a = res["baseline"], res["archive"]
    lines = [
        "# Archive to S3-compatible object storage",
        "",
        machine_line(m),
        "",
        f"Store: {args.days} closed days x {args.msgs_per_day:,} messages, {store_bytes / 1e6:,.1f} MB "
        f"on disk; SeaweedFS `weed server -s3` (HTTPS) on the same machine; part size {args.part_mb} MiB.",
        "",
        "| step | MB | seconds | MB/s |",
        "| --- | ---: | ---: | ---: |",
        f"| boto3 upload_file (baseline: upload only, 10 threads) | {b['bytes'] / 1e6:,.1f} | {b['seconds']:.2f} | {b['mb_s']:,.1f} |",
        f"| logbox-archive once (upload, read back, verify, manifest) | {a['bytes'] / 1e6:,.1f} | {a['seconds']:.2f} | {a['mb_s']:,.1f} |",
        f"| logbox-archive once again (nothing to send) | | {res['second_pass_s']:.2f} | |",
        f"| logbox archive verify (every day read back) | {a['bytes'] / 1e6:,.1f} | {res['verify']['seconds']:.2f} | {res['verify']['mb_s']:,.1f} |",
        f"| logbox archive restore (one day) | {res['restore']['bytes'] / 1e6:,.1f} | {res['restore']['seconds']:.2f} | {res['restore']['mb_s']:,.1f} |",
        "",
        f"Archive ÷ baseline throughput: {a['mb_s'] / b['mb_s']:.2f}. Counts on the restored day equal "
        f"the original's: {res['restore']['counts_agree']} ({res['restore']['counts']}).",
        "",
    ]
    write_report(args.out, "archive", "\n".join(lines), res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
