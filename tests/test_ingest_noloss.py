# Scenario (issues 5 and 16): nothing is lost between a TCP client and the store.
# 1. 1,000,000 sequence-numbered messages over several TCP connections (routed to two logspaces)
#    while logbox-indexd is killed with SIGKILL at 5 random moments and restarted: every sequence
#    number is stored exactly once, in its logspace (the spool keeps what indexd had not stored;
#    indexd's intent record makes a replay skip what it had stored).
# 2. 30 SIGKILLs a few ms apart while indexd works through a backlog: still exactly once.
# 3. syslog-ng stopped (SIGTERM) or killed (SIGKILL) mid-stream and started again. Plain TCP syslog
#    has no acknowledgements: what the receiver's kernel held when syslog-ng closed the connection
#    is gone, and the sender cannot know how much. So the sender does what a real one must: it
#    reconnects and resends from the last sequence number it finds in the store. Every sequence
#    number must be stored at least once, and a duplicate may only be one the client sent again
#    itself. With SIGTERM syslog-ng writes everything it had read into the spool before it exits.
# The store is read through `logbox cat`, streamed. LOGBOX_NOLOSS_MESSAGES and LOGBOX_NOLOSS_SEED
# change the volume and the random moments.
from __future__ import annotations

import os
import random
import re
import signal
import time
from pathlib import Path

import pytest
from lbtest.appliance import Appliance
from lbtest.seqload import (
    CONNS,
    Scan,
    check_senders,
    final_check,
    progress,
    start_senders,
    wait_idle,
)
from lbtest.wait import wait_until

pytestmark = pytest.mark.slow

N = int(os.environ.get("LOGBOX_NOLOSS_MESSAGES", "1000000"))
SEED = int(os.environ.get("LOGBOX_NOLOSS_SEED", str(int(time.time()))))


def test_indexd_sigkill_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    # Kills 1, 3 and 5 when the store passes a random count; kills 2 and 4 a few ms after the
    # restart before them, while indexd works through the backlog the spool gathered meanwhile
    # (busy: likely between its intent record and its position).
    at = sorted(int(rng.uniform(0.03, 0.9) * N) for _ in range(3))
    plan: list[tuple[str, float]] = [
        ("stored", at[0]),
        ("after restart", rng.uniform(0.001, 0.03)),
        ("stored", at[1]),
        ("after restart", rng.uniform(0.001, 0.03)),
        ("stored", at[2]),
    ]
    print(f"seed {SEED}: SIGKILL indexd at {plan}")
    t0 = time.monotonic()
    # Connections 1 and 3 go to a second logspace: one batch of indexd spans two stores, and a
    # replay must skip per logspace.
    logspaces = {"main": {0, 2}, "odd": {1, 3}}
    routes = [{"name": "odd", "message": "^noloss c[13] "}]
    with Appliance(tmp_path, routes=routes) as app:
        senders = start_senders(app, n=N)
        try:
            for kind, when in plan:
                if kind == "stored":
                    wait_until(
                        lambda when=when: app.count() + app.count("odd") >= when,
                        f"{when} messages are stored",
                        120,
                        interval=0.01,
                        check=lambda: (check_senders(senders), app.assert_alive()),
                    )
                    time.sleep(rng.uniform(0, 0.05))
                else:
                    time.sleep(when)
                app.kill_indexd()
                time.sleep(rng.uniform(0, 0.5))  # the spool grows meanwhile
                app.start_indexd()
            wait_idle(senders)
            half = sum(s.hi - s.lo for s in senders if s.conn in logspaces["odd"])
            app.wait_count(N - half, timeout=120, exact=False)
            app.wait_count(half, "odd", timeout=120, exact=False)
            stored = app.settle(quiet=1.0) + app.count("odd")
            elapsed = time.monotonic() - t0
            for s in senders:
                assert not s.errors, f"c{s.conn}: syslog-ng dropped the connection: {s.errors}"
        finally:
            for s in senders:
                s.finish()
        total, dups = final_check(app, N, logspaces)
        assert not dups, f"{len(dups)} sequence numbers stored twice, e.g. {sorted(dups)[:20]}"
        assert total == stored == N
        st = app.status()
        assert st["malformed"] == 0, st
        assert app.starts["indexd"] == 6
        replays = len(re.findall(r"previous indexd", app.stderr_of("indexd")))
        print(
            f"{N} messages, 5 SIGKILLs ({replays} left a batch to finish), exactly once, "
            f"in {elapsed:.1f} s"
        )


def test_indexd_sigkill_storm(tmp_path: Path) -> None:
    """30 SIGKILLs a few ms apart while indexd works through a backlog of 200,000 messages
    gathered while it was down: most kills land inside a batch (after its intent record, before
    or after the store commit, before its position is written); still exactly once."""
    n, kills = 200_000, 30
    rng = random.Random(SEED + 2)
    with Appliance(tmp_path, routes=[{"name": "odd", "message": "^noloss c[13] "}]) as app:
        app.kill_indexd()
        senders = start_senders(app, n=n)
        try:
            wait_idle(senders)
        finally:
            for s in senders:
                s.finish()
        progress_at_kill = []
        for _ in range(kills):
            app.start_indexd()
            time.sleep(rng.uniform(0.0, 0.15))  # it stores its first batch after ~0.1 s
            app.kill_indexd()
            progress_at_kill.append(app.count() + app.count("odd"))
        app.start_indexd()
        half = sum(s.hi - s.lo for s in senders if s.conn in (1, 3))
        app.wait_count(n - half, timeout=120)
        app.wait_count(half, "odd", timeout=120)
        app.settle(quiet=1.0)
        total, dups = final_check(app, n, {"main": {0, 2}, "odd": {1, 3}})
        assert not dups, f"{len(dups)} sequence numbers stored twice, e.g. {sorted(dups)[:20]}"
        assert total == n
        replays = len(re.findall(r"previous indexd", app.stderr_of("indexd")))
        print(f"{kills} kills, stored at each: {progress_at_kill}; {replays} left a batch")
        assert app.status()["malformed"] == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_syslogng_restart_at_least_once(tmp_path: Path, sig: int) -> None:
    rng = random.Random(SEED + 1)
    moments = sorted(int(rng.uniform(0.1, 0.85) * N) for _ in range(3))
    print(f"seed {SEED}: restart syslog-ng when the senders pass {moments}")
    t0 = time.monotonic()
    resumes: dict[int, list[tuple[int, int]]] = {}  # conn -> [(error pos, resume pos)]
    with Appliance(tmp_path) as app:
        scan = Scan(app)
        senders = start_senders(app, n=N)

        def reconcile() -> None:
            """Once the pipeline is drained, every idle sender resumes after the last
            sequence number of its connection that the store holds."""
            wait_idle(senders)
            app.settle(quiet=1.5)
            scan.update()
            for s in senders:
                top = scan.top.get(s.conn, s.lo - 1)
                if top + 1 < s.hi or s.error_pos is not None:
                    resumes.setdefault(s.conn, []).append((s.error_pos or s.pos, top + 1))
                    s.error_pos = None
                    s.resume(top + 1)

        try:
            for at in moments:
                wait_until(
                    lambda at=at: progress(senders) >= at,
                    f"the senders reach {at}",
                    120,
                    interval=0.01,
                    check=lambda: (check_senders(senders), app.assert_alive()),
                )
                app.stop_syslogng(sig)
                app.start_syslogng()
                reconcile()
            while True:  # the end: senders done, and the store holds each one's last seq
                wait_idle(senders)
                app.settle(quiet=1.5)
                scan.update()
                if all(scan.top.get(s.conn, -1) == s.hi - 1 for s in senders):
                    break
                reconcile()
            elapsed = time.monotonic() - t0
        finally:
            for s in senders:
                s.finish()
        total, dups = final_check(app, N)  # raises when a sequence number was never stored
        # Every duplicate must be one the client sent again itself: in [r, e) of a resume point
        # r of its own connection (e: the sender's position when its connection broke). syslog-ng
        # writes a connection's messages into the spool in order, so what a stop or a kill
        # loses is a tail of each connection, which the client's resend fills.
        step = N // CONNS
        unexplained = []
        for seq in dups:
            conn = min(seq // step, CONNS - 1)
            if not any(r <= seq < e for e, r in resumes.get(conn, [])):
                unexplained.append(seq)
        ndup = sum(dups.values())
        torn = app.status().get("spool", {}).get("torn", 0)
        print(
            f"{N} messages, 3 syslog-ng restarts ({signal.Signals(sig).name}), {total} stored, "
            f"{ndup} duplicates (resent by the client), torn spool records {torn}, "
            f"resumes {resumes}, in {elapsed:.1f} s"
        )
        assert total == N + ndup
        assert not unexplained, (
            f"{len(unexplained)} duplicates far from any resume point, e.g. "
            f"{sorted(unexplained)[:20]}; resumes {resumes}"
        )
        assert sum(len(v) for v in resumes.values()) >= 1, "no sender saw a restart"
        # A SIGKILL can tear the record syslog-ng was writing: indexd counts it as torn and skips
        # it (FORMAT.md §13); the client sends that message again. Nothing is malformed.
        malformed = app.status()["malformed"]
        assert malformed == 0, app.status()
        if sig == signal.SIGTERM:
            assert torn == 0, app.status()
