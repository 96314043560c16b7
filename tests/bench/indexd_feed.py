"""indexd alone: pre-encoded frames of 150-byte messages written as fast as possible into the FIFO
(held like the supervisor holds it, passed as fd 3) or a --listen socket; the rate is frames
stored / seconds from the first write until the status file says all are stored. Medians of
--runs runs.

    .venv/bin/python tests/bench/indexd_feed.py [--n 2000000] [--runs 3] [--via fifo|socket]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import word_messages  # noqa: E402
from lbtest.frames import frame  # noqa: E402
from lbtest.indexd import HeldFifo, Indexd  # noqa: E402

TOP = Path(__file__).resolve().parent.parent.parent


def corpus(n: int, size: int = 150, distinct: int = 4096) -> bytes:
    """n frames; messages of exactly size bytes made of words and numbers."""
    msgs = word_messages(size, distinct)
    t0 = 1795359974.0
    out = bytearray()
    for i in range(n):
        out += frame(
            msgs[i % distinct],
            host=f"host{i % 50}",
            program="sshd",
            pid=str(1000 + i % 300),
            rtime=t0 + i / 1e5,
            pri=38,
            fmt="3",
        )
    return bytes(out)


def run_once(blob: bytes, n: int, via: str, tmp: Path) -> float:
    data = tmp / "data"
    status = tmp / "status.json"
    binary = TOP / "build" / "bin" / "logbox-indexd"
    conf = tmp / "indexd.conf"
    conf.write_text("status_interval_ms = 100\n")
    args = ["--config", str(conf)]
    if via == "fifo":
        fifo = HeldFifo(tmp / "indexd.fifo")
        d = Indexd(binary, data, status, fifo=fifo, args=args)
    else:
        fifo = None
        args += ["--listen", str(tmp / "indexd.sock")]
        d = Indexd(binary, data, status, args=args)
    d.start()
    t0 = time.monotonic()
    if fifo is not None:
        w = fifo.writer()
        view = memoryview(blob)
        while view:
            k = os.write(w, view[: 1 << 20])
            view = view[k:]
        os.close(w)
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(tmp / "indexd.sock"))
        s.sendall(blob)
        s.close()
    while True:
        st = d.status()
        if st and st["stored"] >= n:
            break
        time.sleep(0.002)
    # (The status file is written every 100 ms here: elapsed is that precise.)
    el = time.monotonic() - t0
    rc = d.stop()
    if fifo is not None:
        fifo.close()
    if rc != 0:
        raise SystemExit(f"indexd exited {rc}:\n{d.stderr()[-2000:]}")
    return n / el


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--via", choices=("fifo", "socket"), default="fifo")
    a = ap.parse_args()
    blob = corpus(a.n)
    print(f"{a.n} frames, {len(blob) / a.n:.0f} bytes each on average, via {a.via}")
    rates = []
    for _ in range(a.runs):
        with tempfile.TemporaryDirectory(prefix="ixbench") as t:
            r = run_once(blob, a.n, a.via, Path(t))
            rates.append(r)
            print(f"  {r:,.0f} frames/s")
    print(f"median {statistics.median(rates):,.0f} frames/s")


if __name__ == "__main__":
    main()
