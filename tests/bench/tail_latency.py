"""Live tail latency (issue 21's benchmark, item 1): how long after a message is sent to the
syslog port it arrives as a line of searchd's GET /v1/tail stream (indexer/PROTOCOL.md §4.9),
at a paced ingest rate (default 100,000 msg/s). The target is the feature's bound: p99 <= 1 s.

The load is ingest_latency.py's paced sender (ticks of 10 ms, RFC 3164 lines of 150 B over a
few TCP connections) into logbox as the ingest benchmark runs it (syslog-ng -> spool ->
logbox-indexd, ingest_systems.Logbox), with the real logbox-searchd beside it. Every probe
interval one line carries a unique token; its send time is taken when sendall() returned. A
reader holds one tail stream of `q=tailprobe` (so that only the probes match and none is
skipped) and takes the time each probe's line arrives. Latency = arrived - sent. The API and the
web UI pass the same lines on (one more local hop each). Run it with `make bench-tail`; it
prints the figures and writes them as JSON (--out).

    .venv/bin/python tests/bench/tail_latency.py [--rate 100000] [--seconds 20] [--probes 10]
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "tests"))
sys.path.insert(0, str(TOP / "tests" / "bench"))

from benchlib import machine, machine_line, pct, say  # noqa: E402
from ingest_latency import SIZE, TICK_S, line  # noqa: E402
from ingest_systems import Logbox, Ports, free_port, tls_material  # noqa: E402
from lbtest.searchd import Searchd, UnixHTTPConnection, query_string  # noqa: E402


class Reader(threading.Thread):
    """Reads one tail stream of the probes; the arrival time of each token."""

    def __init__(self, sock: Path) -> None:
        super().__init__(daemon=True)
        self.conn = UnixHTTPConnection(sock, timeout=60)
        self.conn.request("GET", "/v1/tail?" + query_string({"q": "tailprobe", "limit": "1000"}))
        self.resp = self.conn.getresponse()
        if self.resp.status != 200:
            raise RuntimeError(f"tail: {self.resp.status} {self.resp.read()[:300]!r}")
        first = json.loads(self.resp.readline())
        if "through" not in first:
            raise RuntimeError(f"tail: first line {first}")
        self.arrived: dict[str, float] = {}
        self.skipped = 0
        self.lines = 0

    def run(self) -> None:
        try:
            while True:
                raw = self.resp.readline()
                if not raw:
                    return
                now = time.monotonic()
                o = json.loads(raw)
                self.lines += 1
                if "skipped" in o:
                    self.skipped += o["skipped"]
                msg = o.get("message")
                if isinstance(msg, str):
                    for w in msg.split():
                        if w.startswith("tp") and w not in self.arrived:
                            self.arrived[w] = now
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            return  # closed (close() races the last read) or broken

    def close(self) -> None:
        self.resp.close()
        self.conn.close()


def measure(
    logbox: Logbox, searchd_bin: Path, rate: int, seconds: float, probes_per_s: float, conns: int
) -> dict[str, Any]:
    """The paced load into a fresh logbox with searchd and a tail stream beside it."""
    port = logbox.start("tcp")
    sd = Searchd(searchd_bin, logbox.sng.data, logbox.sng.run / "searchd.sock")
    socks: list[socket.socket] = []
    reader: Reader | None = None
    sent_at: dict[str, float] = {}
    try:
        # the logspace exists once a first message is stored
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(line("warm up"))
        sd.start(timeout=30)
        end = time.monotonic() + 30
        while True:
            try:
                reader = Reader(sd.sock)
                break
            except RuntimeError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.2)
        reader.start()
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(conns)]
        per_tick = max(1, round(rate * TICK_S))
        filler = b"".join(line(f"filler: seq {i:06d}") for i in range(per_tick))
        every = max(1, round(1 / (probes_per_s * TICK_S)))
        ticks = int(seconds / TICK_S)
        sent = probes = late = 0
        t0 = time.monotonic()
        for k in range(ticks):
            due = t0 + k * TICK_S
            now = time.monotonic()
            if now < due:
                time.sleep(due - now)
            elif now - due > 1.0:
                late += 1
            chunk = filler
            token = ""
            if k % every == 0:
                token = f"tp{probes:06d}"
                chunk = line(f"tailprobe {token} end") + filler[SIZE:]
                probes += 1
            socks[k % conns].sendall(chunk)
            if token:
                sent_at[token] = time.monotonic()
            sent += per_tick
        send_s = time.monotonic() - t0
        end = time.monotonic() + 30
        while len(reader.arrived) < probes and time.monotonic() < end:
            time.sleep(0.05)
        lat = sorted(reader.arrived[t] - s for t, s in sent_at.items() if t in reader.arrived)
        res: dict[str, Any] = {
            "target_rate": rate,
            "sent": sent,
            "sent_rate": round(sent / send_s),
            "seconds": round(send_s, 2),
            "connections": conns,
            "probes": probes,
            "arrived": len(lat),
            "not_arrived_in_30s": probes - len(lat),
            "skipped": reader.skipped,
            "ticks_late_over_1s": late,
        }
        if lat:
            res.update(
                p50_ms=round(statistics.median(lat) * 1000, 1),
                p99_ms=round(pct(lat, 99) * 1000, 1),
                max_ms=round(lat[-1] * 1000, 1),
            )
        return res
    finally:
        if reader is not None:
            reader.close()
        for s in socks:
            s.close()
        try:
            sd.stop()
        except AssertionError:
            pass
        logbox.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=100_000, help="msg/s sent (default 100,000)")
    ap.add_argument("--seconds", type=float, default=20.0, help="how long (default 20)")
    ap.add_argument("--probes", type=float, default=10.0, help="probes per second (default 10)")
    ap.add_argument("--conns", type=int, default=4, help="TCP connections (default 4)")
    ap.add_argument("--out", type=Path, default=TOP / "build" / "bench" / "tail")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    bin_ = TOP / "build" / "bin"
    logbox = Logbox(
        args.out,
        Ports(free_port(), free_port(), free_port()),
        tls_material(args.out),
        bin_ / "logbox-indexd",
        bin_ / "logbox",
    )
    m = machine()
    say(f"tail latency: {args.rate:,} msg/s for {args.seconds:.0f} s, {args.probes:g} probes/s")
    say(machine_line(m))
    res = measure(logbox, bin_ / "logbox-searchd", args.rate, args.seconds, args.probes, args.conns)
    res["machine"] = m
    ok = "ok" if res.get("p99_ms") is not None and res["p99_ms"] <= 1000 else "MISSED"
    say(
        f"  sent {res['sent_rate']:,} msg/s; probes {res['arrived']}/{res['probes']} arrived; "
        f"send-to-line p50 {res.get('p50_ms')} ms, p99 {res.get('p99_ms')} ms ({ok} <= 1 s), "
        f"max {res.get('max_ms')} ms; skipped {res['skipped']}"
    )
    (args.out / "tail_latency.json").write_text(json.dumps(res, indent=2) + "\n")
    return 0 if ok == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
