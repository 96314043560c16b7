# Scenario (issue 16): logbox-indexd stopped for 2 minutes under a steady 50,000 msg/s load over
# four TCP connections, then started again. syslog-ng keeps accepting into the spool meanwhile
# (no sender is held: the spool is on disk), and indexd catches up by itself: every sequence
# number is stored exactly once, and no spool file is left once everything is stored. The
# catch-up rate (backlog stored per second after the start) is printed; it is a figure for the
# note, not a pass condition. LOGBOX_DOWN_SECONDS and LOGBOX_DOWN_RATE change the defaults.
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from lbtest.appliance import Appliance
from lbtest.seqload import check_senders, final_check, start_senders, wait_idle
from lbtest.wait import wait_until

pytestmark = pytest.mark.slow

DOWN_S = float(os.environ.get("LOGBOX_DOWN_SECONDS", "120"))
RATE = float(os.environ.get("LOGBOX_DOWN_RATE", "50000"))
LEAD_S = 5.0  # load before indexd stops
TAIL_S = 5.0  # load after it starts again


def spool_files(app: Appliance) -> list[Path]:
    return sorted(p for p in app.spool.iterdir() if p.is_file())


def test_indexd_down_two_minutes_under_load(tmp_path: Path) -> None:
    n = int(RATE * (LEAD_S + DOWN_S + TAIL_S))
    with Appliance(tmp_path) as app:
        senders = start_senders(app, n=n, rate=RATE)
        try:
            wait_until(
                lambda: app.count() > 0,
                "the first messages are stored",
                60,
                interval=0.01,
                check=lambda: (check_senders(senders), app.assert_alive()),
            )
            time.sleep(LEAD_S)
            assert app.kill_indexd(signal.SIGTERM) == 0, app.stderr_of("indexd")[-2000:]
            stopped = time.monotonic()
            stored_before = app.count()
            while time.monotonic() - stopped < DOWN_S:
                check_senders(senders)
                app.assert_alive_named("syslog-ng")
                time.sleep(1.0)
            sent_while_down = sum(s.pos - s.lo for s in senders) - stored_before
            spooled = sum(p.stat().st_size for p in spool_files(app))
            t_start = time.monotonic()
            app.start_indexd()
            # the backlog: what was sent up to the start; caught up once that much is stored
            backlog_total = stored_before + sent_while_down
            wait_until(
                lambda: app.count() >= backlog_total,
                "the backlog is stored",
                600,
                interval=0.01,
                check=lambda: (check_senders(senders), app.assert_alive()),
            )
            caught_up = time.monotonic() - t_start
            wait_idle(senders, timeout=DOWN_S + 120)
            app.wait_count(n, timeout=300)
        finally:
            for s in senders:
                s.finish()
        for s in senders:
            assert not s.errors, f"c{s.conn}: the connection broke: {s.errors}"
        total, dups = final_check(app, n)
        assert not dups, f"{len(dups)} sequence numbers stored twice, e.g. {sorted(dups)[:20]}"
        assert total == n
        st = app.status()
        assert st["malformed"] == 0, st
        # every stored spool file is deleted (the live one may still be open: wait for it)
        wait_until(lambda: not spool_files(app), "the spool is empty", 60, interval=0.01)
        rate = sent_while_down / caught_up if caught_up > 0 else float("inf")
        print(
            f"indexd down {DOWN_S:.0f} s under {RATE:.0f} msg/s: {sent_while_down} messages "
            f"({spooled / 1e6:.1f} MB of spool) waited; caught up in {caught_up:.1f} s "
            f"({rate:.0f} msg/s of backlog while the load went on); {n} stored exactly once"
        )
