# Scenario: the time map (receive time -> id, which turns a search's time range into an id
# range) stays exact when the writer is killed. Messages carry their own time stamps, a new
# second every few messages, and are ingested with `--received header`, so nearly every message
# starts a time-map step. Entries reach the catalog in batches, after their messages; a kill -9
# can leave messages whose entries never got there. After each kill, and again after the next
# writer's recovery, the count of `*` over seeded random whole-second ranges equals the count of
# stored messages (from `logbox cat`) whose receive time is in the range.
from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

from lbtest.cli import Logbox

SEED = 77
T0 = 1_790_000_000  # 2026-09-21T13:46:40Z, seconds
PER_SECOND = 3
RUNS = 6


def frame(n: int) -> bytes:
    """Message n (1-based) as an RFC 5424 line; PER_SECOND messages share a second."""
    t = time.gmtime(T0 + (n - 1) // PER_SECOND)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", t)
    return b"<14>1 %s h%d app - - - tick %d\n" % (stamp.encode(), n % 5, n)


def check_ranges(lb: Logbox, rng: random.Random, what: str) -> int:
    """Compares `search --count '*'` with the stored receive times over random ranges."""
    received = [m["received_us"] for m in lb.cat()]
    if not received:
        return 0
    lo_s = received[0] // 1_000_000 - 2
    hi_s = received[-1] // 1_000_000 + 3
    ranges = [(lo_s, hi_s), (hi_s - 2, hi_s), (hi_s - 4, hi_s - 1)]
    ranges += [tuple(sorted(rng.sample(range(lo_s, hi_s + 1), 2))) for _ in range(25)]
    for a, b in ranges:
        want = sum(1 for r in received if a * 1_000_000 <= r < b * 1_000_000)
        p = lb.check(lb.run("search", "--count", "--from", str(a), "--to", str(b), "*"))
        got = int(p.stdout)
        assert got == want, f"{what}: [{a}, {b}) counted {got}, stored {want}"
    return len(received)


def test_time_map_exact_after_kills_and_recovery(store_cli: Path, store: Path) -> None:
    lb = Logbox(store_cli, store, timeout=120)
    rng = random.Random(SEED)
    stored = 0
    for i in range(RUNS):
        proc = lb.popen(
            "ingest",
            "--received",
            "header",
            "--sync",
            "none",
            "--batch",
            "50",
            "-",
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None
        try:
            for k in range(stored + 1, stored + 20_000, 500):
                proc.stdin.write(b"".join(frame(n) for n in range(k, k + 500)))
                proc.stdin.flush()
                time.sleep(0.01)
                if rng.random() < 0.08:
                    break
        except BrokenPipeError:
            pass
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # As a reader finds it right after the kill, then after the next writer recovered.
        check_ranges(lb, rng, f"run {i}, after the kill")
        lb.check(lb.run("ingest", "-", input=b""))
        stored = check_ranges(lb, rng, f"run {i}, after recovery")
    assert stored > 0, "nothing was stored: the test proves nothing"
