"""indexd alone on spool files: N records of 150-byte messages (RFC 3164 lines as syslog-ng
receives them, FORMAT.md §13) are written into spool files of 100,000 records each (one per
second of receipt) before logbox-indexd starts; the rate is records stored / seconds from its
start until the status file (written every 100 ms) says all are stored, and the CPU is indexd's
own (user + system, /proc) over the same time. Medians of --runs runs.

    .venv/bin/python tests/bench/spool_feed.py [--n 2000000] [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import word_messages  # noqa: E402
from lbtest.indexd import Indexd  # noqa: E402
from lbtest.spool import file_name, record  # noqa: E402

TOP = Path(__file__).resolve().parent.parent.parent
PER_FILE = 100_000
T0 = 1795359974.0


def corpus(n: int, size: int = 150, distinct: int = 4096) -> list[bytes]:
    """The spool files' contents: n records whose messages are exactly size bytes."""
    msgs = [m.encode() for m in word_messages(size, distinct)]
    files = []
    for f0 in range(0, n, PER_FILE):
        out = bytearray()
        for i in range(f0, min(n, f0 + PER_FILE)):
            raw = b"<38>Nov 22 10:%02d:%02d host%d sshd[%d]: " % (
                i // 60000 % 60,
                i // 1000 % 60,
                i % 50,
                1000 + i % 300,
            )
            out += record(
                raw + msgs[i % distinct], T0 + i / 1e5, "tcp", "10.0.%d.%d" % (i % 7, i % 50)
            )
        files.append(bytes(out))
    return files


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of pid so far."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def run_once(files: list[bytes], n: int, tmp: Path) -> tuple[float, float]:
    data = tmp / "data"
    spool = data / "spool"
    spool.mkdir(parents=True)
    for k, blob in enumerate(files):
        (spool / file_name(T0 + k, run="bench")).write_bytes(blob)
    conf = tmp / "indexd.conf"
    conf.write_text("status_interval_ms = 100\n")
    binary = TOP / "build" / "bin" / "logbox-indexd"
    d = Indexd(binary, data, tmp / "status.json", args=["--config", str(conf)])
    t0 = time.monotonic()
    d.start(wait=False)
    assert d.proc is not None
    while True:
        st = d.status(missing_ok=True)
        if st and st.get("pid") == d.proc.pid and st["stored"] >= n:
            break
        if d.proc.poll() is not None:
            raise SystemExit(f"indexd exited {d.proc.returncode}:\n{d.stderr()[-2000:]}")
        time.sleep(0.002)
    el = time.monotonic() - t0
    cpu = cpu_s(d.proc.pid)
    rc = d.stop()
    if rc != 0:
        raise SystemExit(f"indexd exited {rc}:\n{d.stderr()[-2000:]}")
    return n / el, cpu / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    a = ap.parse_args()
    files = corpus(a.n)
    size = sum(len(b) for b in files)
    print(f"{a.n} records in {len(files)} spool files, {size / a.n:.0f} bytes each on average")
    rates, cpus = [], []
    for _ in range(a.runs):
        with tempfile.TemporaryDirectory(prefix="spbench") as t:
            r, c = run_once(files, a.n, Path(t))
            rates.append(r)
            cpus.append(c)
            print(f"  {r:,.0f} msg/s, {c:.2f} CPU µs/msg")
    out = {"msgs": a.n, "msg_s": statistics.median(rates), "cpu_us": statistics.median(cpus)}
    print(f"median {out['msg_s']:,.0f} msg/s, {out['cpu_us']:.2f} CPU µs/msg")
    if a.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
