#!/usr/bin/env python3
"""syslog-ng alone into the spool (collector/README.md): what it costs and what a stop loses.

    .venv/bin/python tests/bench/collector_spool.py cpu  [--messages 2000000] [--conns 4]
        [--size 150] [--runs 3] [--log-msg-size N] [--fsync]
    .venv/bin/python tests/bench/collector_spool.py stop [--runs 3] [--conns 4]
        [--log-msg-size N ...]

cpu: loggen (TCP, --size bytes, --conns connections, --messages in all) into a real syslog-ng
on the configuration collector/render.py makes; syslog-ng's CPU (user + system ticks of the
whole process, /proc/PID/stat) over the messages it wrote into the spool: CPU µs per message,
and msg/s from loggen's start to the last spool write. Medians of --runs.

stop: lbtest.collector.stop_under_load() for SIGTERM and SIGKILL: 4 connections send numbered
lines as fast as they can, syslog-ng is frozen, what it has read is measured (bytes sent minus
both kernel socket buffers), then it gets the signal: read, in flight (read, not yet in the
spool), lost (read, never in the spool), and whether every connection is gap-free.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lbtest.collector import Collector, stop_under_load  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def ticks(pid: int) -> int:
    """user + system ticks of the whole process pid."""
    s = Path(f"/proc/{pid}/stat").read_text()
    f = s[s.rindex(")") + 2 :].split()
    return int(f[11]) + int(f[12])


def spool_size(spool: Path) -> int:
    return sum(p.stat().st_size for p in spool.glob("*.lbs")) if spool.is_dir() else 0


def count_tcp(spool: Path) -> int:
    """Records of the tcp listener in the spool (loggen's messages hold no LF)."""
    n = 0
    for p in spool.glob("*.lbs"):
        data = p.read_bytes()
        n += data.count(b"\nLS1 ") + data.startswith(b"LS1 ") - data.count(b" internal ")
    return n


def cpu_run(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        doc: dict = {"ports": {"tls": 0}}
        if args.log_msg_size:
            doc["log_msg_size"] = args.log_msg_size[0]
        if args.fsync:
            doc["spool_fsync"] = True
        c = Collector(Path(tmp), doc=doc)
        c.start()
        try:
            assert c.proc is not None and c.spool_dir is not None
            base = count_tcp(c.spool_dir)
            t0_ticks = ticks(c.proc.pid)
            t0 = time.monotonic()
            argv = ["loggen", "-Q", "-r", "1000000000", "-I", "3600", "-s", str(args.size)]
            argv += ["-n", str(args.messages // args.conns), "--active-connections"]
            argv += [str(args.conns), "-i", "-S", "127.0.0.1", str(c.ports["tcp"])]
            gen = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            last, last_t = -1, t0
            while True:
                time.sleep(0.2)
                size = spool_size(c.spool_dir)
                if size != last:
                    last, last_t = size, time.monotonic()
                elif gen.poll() is not None and time.monotonic() - last_t > 1.5:
                    break
            t1_ticks = ticks(c.proc.pid)
            n = count_tcp(c.spool_dir) - base
        finally:
            c.close()
    us = (t1_ticks - t0_ticks) / CLK_TCK * 1e6 / max(n, 1)
    return {"written": n, "msg_per_s": n / (last_t - t0), "cpu_us_per_msg": us}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=("cpu", "stop"))
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--size", type=int, default=150)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--log-msg-size", type=int, nargs="*", default=[])
    ap.add_argument("--fsync", action="store_true", help="cpu: spool_fsync = true")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, {os.uname().release}")
    if args.what == "cpu":
        runs = [cpu_run(args) for _ in range(args.runs)]
        for r in runs:
            print(f"  run: {r}")
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"cpu: loggen {args.size} B, {args.conns} connections, {args.messages} messages"
            f"{', spool_fsync' if args.fsync else ''}: "
            f"median {med['cpu_us_per_msg']:.2f} CPU us/msg of syslog-ng, "
            f"{med['msg_per_s']:.0f} msg/s into the spool"
        )
        return 0
    for size in args.log_msg_size or [0]:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    doc: dict = {"ports": {"tls": 0}}
                    if size:
                        doc["log_msg_size"] = size
                    c = Collector(Path(tmp), doc=doc)
                    c.start()
                    try:
                        r = stop_under_load(c, sig, conns=args.conns)
                    finally:
                        c.close()
                print(
                    f"stop: {sig.name} log_msg_size={size or 'default'} conns={args.conns}: "
                    f"read {r.read}, in flight {r.in_flight}, lost {r.lost}, "
                    f"gap-free {r.gap_free}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
