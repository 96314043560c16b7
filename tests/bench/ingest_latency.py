"""Searchable latency for the ingest benchmark (ingest_e2e.py): how long after a message is sent
searchd finds it, at a paced load (issue 16's target: p99 <= 1 s at 100,000 msg/s).

A paced sender (loggen's way: the load is cut in ticks of 10 ms, each tick's messages sent at
once, a tick late is caught up) writes RFC 3164 lines of 150 B over a few TCP connections into
logbox (the Logbox system of ingest_systems.py). Every probe interval one line carries a unique
token (`lbp<run>x<n>`), and its send time is taken when sendall() returned. A second thread asks
the real logbox-searchd (on the store indexd writes, HTTP over its unix socket, as the tests do:
tests/lbtest/searchd.py), every 50 ms, one `GET /v1/search?q=<tok1> OR <tok2> ...` for the
probes not yet found, and takes the time a probe's message is first among the hits. Latency =
found - sent; its resolution is one round (50 ms plus the search). A query per probe and per
round, back to back, made the prober its own load: with 20 probes a second the outstanding
probes, and so the queries, grew with the latency they caused (p99 45 s against 0.5 s with 2).
"""

from __future__ import annotations

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

from lbtest.searchd import Searchd, UnixHTTPConnection, query_string  # noqa: E402

TICK_S = 0.01
SIZE = 150
ROUND_S = 0.05  # the prober asks at most 20 times a second, as a live view would
MAX_PER_QUERY = 200


def line(text: str) -> bytes:
    """One RFC 3164 line of SIZE bytes (LF included) holding text."""
    head = f"<13>{time.strftime('%b %e %H:%M:%S', time.gmtime())} benchhost {text} "
    return (head + "x" * max(0, SIZE - 1 - len(head))).encode()[: SIZE - 1] + b"\n"


def pct(v: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(v)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


class Prober(threading.Thread):
    """Asks searchd for every probe sent and not yet found, round after round."""

    def __init__(self, sock: Path) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.sent: dict[str, float] = {}  # token -> monotonic send time
        self.found: dict[str, float] = {}  # token -> latency (s)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.queries = 0
        self.errors: list[str] = []
        self.took_ms: list[float] = []  # searchd's own time per round
        self.tail = 0  # the most unindexed messages a round searched by brute force

    def add(self, token: str, t: float) -> None:
        with self.lock:
            self.sent[token] = t

    def outstanding(self) -> list[tuple[str, float]]:
        with self.lock:
            return [(k, t) for k, t in self.sent.items() if k not in self.found]

    def run(self) -> None:
        c = UnixHTTPConnection(self.sock, timeout=30)
        while not self.done.is_set():
            t_round = time.monotonic()
            todo = self.outstanding()[:MAX_PER_QUERY]
            if todo:
                try:
                    self._round(c, todo)
                except OSError as e:
                    self.errors.append(str(e))
                    c.close()
                    c = UnixHTTPConnection(self.sock, timeout=30)
            time.sleep(max(0.0, t_round + ROUND_S - time.monotonic()))
        c.close()

    def _round(self, c: UnixHTTPConnection, todo: list[tuple[str, float]]) -> None:
        """One search for every outstanding probe (`tok1 OR tok2 ...`): which of them it finds."""
        q = query_string(
            {
                "q": " OR ".join(token for token, _ in todo),
                "from": "-1h",
                "to": "+1h",
                "limit": str(len(todo)),
                "total": "0",
            }
        )
        c.request("GET", "/v1/search?" + q)
        r = c.getresponse()
        body = r.read()
        self.queries += 1
        now = time.monotonic()
        if r.status == 200:
            doc = json.loads(body)
            self.took_ms.append(float(doc.get("took_ms", 0)))
            self.tail = max(self.tail, int(doc.get("tail") or 0))
            text = " ".join(h.get("message", "") for h in doc.get("hits", []))
            with self.lock:
                for token, t in todo:
                    if token in text:
                        self.found[token] = now - t
        elif r.status == 404 and b"no logspace" in body:
            pass  # nothing stored yet
        elif len(self.errors) < 20:
            self.errors.append(f"{r.status}: {body[:200]!r}")


def measure(
    logbox: Any, searchd_bin: Path, rate: int, seconds: float, probes_per_s: float, conns: int
) -> dict[str, Any]:
    """Runs the paced load into a fresh logbox with searchd beside it; the latencies."""
    port = logbox.start("tcp")
    sd = Searchd(searchd_bin, logbox.sng.data, logbox.sng.run / "searchd.sock")
    socks: list[socket.socket] = []
    prober: Prober | None = None
    try:
        sd.start(timeout=30)
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(conns)]
        prober = Prober(sd.sock)
        prober.start()
        run = f"{int(time.time()) % 100000}"
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
                token = f"lbp{run}x{probes:06d}"
                chunk = line(f"probe: {token} end") + filler[SIZE:]
                probes += 1
            socks[k % conns].sendall(chunk)
            if token:
                prober.add(token, time.monotonic())
            sent += per_tick
        send_s = time.monotonic() - t0
        end = time.monotonic() + 30
        while prober.outstanding() and time.monotonic() < end:
            time.sleep(0.05)
        prober.done.set()
        prober.join(10)
        lat = sorted(prober.found.values())
        res: dict[str, Any] = {
            "target_rate": rate,
            "sent": sent,
            "sent_rate": round(sent / send_s),
            "seconds": round(send_s, 2),
            "connections": conns,
            "probes": probes,
            "found": len(lat),
            "not_found_in_30s": probes - len(lat),
            "queries": prober.queries,
            "search_took_ms_p50": round(statistics.median(prober.took_ms), 1)
            if prober.took_ms
            else None,
            "search_took_ms_max": round(max(prober.took_ms), 1) if prober.took_ms else None,
            "max_tail": prober.tail,
            "errors": prober.errors[:5],
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
        if prober is not None:
            prober.done.set()
        for s in socks:
            s.close()
        try:
            sd.stop()
        except AssertionError:
            pass
        logbox.stop()
