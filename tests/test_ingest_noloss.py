# Scenario (issue 5): nothing is lost between a TCP client and the store.
# 1. 1,000,000 sequence-numbered messages over several TCP connections (routed to two logspaces)
#    while logbox-indexd is killed with SIGKILL at 5 random moments and restarted: every sequence
#    number is stored exactly once, in its logspace (the FIFO, held by the supervisor, keeps what indexd had not consumed; indexd's
#    intent record makes a replay skip what it had stored).
# 2. The same while syslog-ng is restarted mid-stream (SIGTERM, start again). Plain TCP syslog has
#    no acknowledgements: what the receiver's kernel held when syslog-ng closed the connection is
#    gone, and the sender cannot know how much. So the sender does what a real one must: it
#    reconnects and resends from the last sequence number it finds in the store. Every sequence
#    number must be stored at least once; each duplicate is counted and must sit just before a
#    resume point of its connection (syslog-ng re-sending its reliable disk buffer's unacknowledged
#    head after the restart).
# The store is read through `logbox cat`, streamed. LOGBOX_NOLOSS_MESSAGES and LOGBOX_NOLOSS_SEED
# change the volume and the random moments.
from __future__ import annotations

import fcntl
import os
import random
import re
import signal
import socket
import struct
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from lbtest.appliance import Appliance

pytestmark = pytest.mark.slow

N = int(os.environ.get("LOGBOX_NOLOSS_MESSAGES", "1000000"))
SEED = int(os.environ.get("LOGBOX_NOLOSS_SEED", str(int(time.time()))))
CONNS = 4
BATCH = 2000  # messages per sendall
# syslog-ng re-sends at most what it had handed to the pipe without its disk buffer recording
# it: bounded by the 1 MiB pipe (~90-byte frames here) and its output batch.
REPLAY_WINDOW = 50_000
_SEQ = re.compile(rb"noloss c(\d+) s(\d{10})")
_ID = re.compile(rb'\{"id":(\d+),')


def lines(conn: int, lo: int, hi: int) -> bytes:
    return b"".join(
        b"<134>1 2026-11-22T12:00:00Z nl-host noloss - - - noloss c%d s%010d\n" % (conn, s)
        for s in range(lo, hi)
    )


@dataclass
class Sender:
    """One TCP connection sending seqs [lo, hi) in order; on an error it closes, reports where
    it was and waits for the test to tell it where to resume."""

    app: Appliance
    conn: int
    lo: int
    hi: int
    pos: int = 0
    error_pos: int | None = None
    errors: list[str] = field(default_factory=list)
    failure: BaseException | None = None
    idle: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)
    stop: bool = False
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.pos = self.lo
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _connect(self) -> socket.socket:
        deadline = time.monotonic() + 60
        while True:
            try:
                return self.app.connect("tcp", timeout=60)
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _run(self) -> None:
        try:
            sock: socket.socket | None = None
            while not self.stop:
                if self.pos >= self.hi:
                    if sock is not None:
                        sock.close()
                        sock = None
                    self._wait()  # done: the test may still ask for a resend
                    continue
                if sock is None:
                    sock = self._connect()
                end = min(self.pos + BATCH, self.hi)
                try:
                    sock.sendall(lines(self.conn, self.pos, end))
                    self.pos = end
                except OSError as e:
                    sock.close()
                    sock = None
                    self.error_pos = self.pos
                    self.errors.append(f"{e!r} at s{self.pos}")
                    self._wait()
        except BaseException as e:  # reported by the test
            self.failure = e
            self.idle.set()

    def _wait(self) -> None:
        self.idle.set()
        self.go.wait()
        self.go.clear()

    def resume(self, pos: int | None = None) -> None:
        """Continue (from pos when given)."""
        if pos is not None:
            self.pos = pos
        self.idle.clear()
        self.go.set()

    def finish(self) -> None:
        self.stop = True
        self.go.set()
        if self.thread is not None:
            self.thread.join(30)


def start_senders(app: Appliance, conns: int = CONNS, n: int = N) -> list[Sender]:
    step = n // conns
    senders = [
        Sender(app, c, c * step, n if c == conns - 1 else (c + 1) * step) for c in range(conns)
    ]
    for s in senders:
        s.start()
    return senders


def progress(senders: list[Sender]) -> int:
    return sum(s.pos - s.lo for s in senders)


def check_senders(senders: list[Sender]) -> None:
    for s in senders:
        if s.failure is not None:
            raise AssertionError(f"sender c{s.conn} failed") from s.failure


def wait_until(
    what: str, cond: Callable[[], bool], check: Callable[[], None], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        check()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def wait_idle(senders: list[Sender], timeout: float = 120) -> None:
    for s in senders:
        if not s.idle.wait(timeout):
            raise AssertionError(f"sender c{s.conn} still sending after {timeout} s (at s{s.pos})")
        check_senders(senders)


class Scan:
    """Incremental `logbox cat`: per connection the highest sequence number stored so far."""

    def __init__(self, app: Appliance) -> None:
        self.app = app
        self.next_id = 1
        self.top: dict[int, int] = {}

    def update(self) -> None:
        for raw in self.app.iter_lines(from_id=self.next_id):
            m, mid = _SEQ.search(raw), _ID.match(raw)
            assert m and mid, f"a message that no sender sent: {raw[:300]!r}"
            c, s = int(m.group(1)), int(m.group(2))
            if s > self.top.get(c, -1):
                self.top[c] = s
            self.next_id = int(mid.group(1)) + 1


def final_check(
    app: Appliance,
    n: int,
    logspaces: dict[str, set[int]] | None = None,
    lost: list[int] | None = None,
) -> tuple[int, dict[int, int]]:
    """Streams the whole store: (messages, {seq: extra copies}). Asserts every seq < n is
    there and nothing else is; with logspaces ({name: its connections}), that each message is
    in its connection's logspace. With lost, the missing sequence numbers are put there for
    the caller to judge instead of failing."""
    seen = bytearray(n)
    dups: dict[int, int] = {}
    total = 0
    for ls, conns in (logspaces or {"main": set(range(CONNS))}).items():
        for raw in app.iter_lines(ls):
            m = _SEQ.search(raw)
            assert m, f"a message that no sender sent in {ls}: {raw[:300]!r}"
            assert int(m.group(1)) in conns, f"in {ls}: {raw[:300]!r}"
            total += _mark(seen, dups, int(m.group(2)), n)
    missing = seen.count(0)
    if missing and lost is not None:
        lost.extend(i for i in range(n) if not seen[i])
    elif missing:
        first = [i for i in range(n) if not seen[i]][:20]
        raise AssertionError(f"{missing} sequence numbers never stored, e.g. {first}")
    return total, dups


def _mark(seen: bytearray, dups: dict[int, int], s: int, n: int) -> int:
    assert s < n, s
    if seen[s]:
        dups[s] = dups.get(s, 0) + 1
    else:
        seen[s] = 1
    return 1


def test_indexd_sigkill_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    # Kills 1, 3 and 5 when the store passes a random count; kills 2 and 4 a few ms after the
    # restart before them, while indexd works through the backlog the FIFO and syslog-ng's
    # disk buffer gathered meanwhile (busy: likely between its intent record and consuming).
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
        senders = start_senders(app)
        try:
            for kind, when in plan:
                if kind == "stored":
                    wait_until(
                        f"{when} messages stored",
                        lambda when=when: app.count() + app.count("odd") >= when,
                        lambda: (check_senders(senders), app.assert_alive()),
                        120,
                    )
                    time.sleep(rng.uniform(0, 0.05))
                else:
                    time.sleep(when)
                app.kill_indexd()
                time.sleep(rng.uniform(0, 0.5))  # the FIFO fills meanwhile
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
    or after the store commit, before consuming the FIFO); still exactly once."""
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
        senders = start_senders(app)

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
                    f"senders at {at}",
                    lambda at=at: progress(senders) >= at,
                    lambda: (check_senders(senders), app.assert_alive()),
                    120,
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
        lost: list[int] = []
        total, dups = final_check(app, N, lost=lost if sig == signal.SIGKILL else None)
        # SIGKILL only: syslog-ng 3.38's pipe writer takes a message off its disk buffer when it
        # starts writing it, not once written (collector/README.md, "What each failure loses"),
        # so a kill -9 in the middle of that write loses that one message. At most one per kill.
        assert len(lost) <= len(moments), f"{len(lost)} lost in {len(moments)} kills: {lost[:20]}"
        if lost:
            print(f"lost to syslog-ng's kill -9 mid-write (at most one per kill): {lost}")
        # Every duplicate must be explained, by where it sits relative to a resume point r of
        # its own connection (the sender's position e when its connection broke):
        # - replayed: in [r - REPLAY_WINDOW, r), stored before the restart and sent again by
        #   syslog-ng from its reliable disk buffer (it had handed them to the FIFO, but its
        #   buffer had not recorded that when it died);
        # - resent: in [r, e), sent again by the client although syslog-ng still held them in its
        #   disk buffer: the store looked drained while syslog-ng had not yet replayed its
        #   buffer after the start. A client cannot tell; at-least-once is the contract.
        step = N // CONNS
        replayed = resent = 0
        unexplained = []
        for seq, copies in dups.items():
            conn = min(seq // step, CONNS - 1)
            rs = resumes.get(conn, [])
            if any(r - REPLAY_WINDOW <= seq < r for _, r in rs):
                replayed += copies
            elif any(r <= seq < e for e, r in rs):
                resent += copies
            else:
                unexplained.append(seq)
        ndup = sum(dups.values())
        print(
            f"{N} messages, 3 syslog-ng restarts ({signal.Signals(sig).name}), {total} stored, "
            f"{ndup} duplicates ({replayed} replayed by syslog-ng, {resent} resent by the "
            f"client), resumes {resumes}, in {elapsed:.1f} s"
        )
        assert total == N - len(lost) + ndup
        assert not unexplained, (
            f"{len(unexplained)} duplicates far from any resume point, e.g. "
            f"{sorted(unexplained)[:20]}; resumes {resumes}"
        )
        assert sum(len(v) for v in resumes.values()) >= 1, "no sender saw a restart"
        # A SIGKILL can tear the frame syslog-ng was writing: indexd drops it as malformed
        # (FORMAT.md §11.1) and the reliable disk buffer sends that message again. The status
        # counts since indexd's start, which was before the restarts.
        malformed = app.status()["malformed"]
        assert malformed == 0 if sig == signal.SIGTERM else malformed <= 3, app.status()


def fifo_bytes(app: Appliance) -> int:
    """Bytes waiting in the FIFO (FIONREAD on the harness's end)."""
    assert app.fifo_fd is not None
    return struct.unpack("i", fcntl.ioctl(app.fifo_fd, termios.FIONREAD, b"\0\0\0\0"))[0]


@pytest.mark.xfail(
    strict=True,
    reason="syslog-ng 3.38's pipe writer takes a message off its disk buffer before the write "
    "completes; stopped with the FIFO full it loses that one message (collector/README.md), "
    "later ones of its connection are stored: a hole no resend fills (4 of 4 runs)",
)
def test_syslogng_stop_with_full_fifo(tmp_path: Path) -> None:
    """syslog-ng stopped (SIGTERM) while indexd is down and the FIFO full, then indexd and
    syslog-ng started again, the senders resending from what the store holds: at least once.
    (collector/README.md says syslog-ng 3.38's pipe writer loses the message it holds then; a
    lost message followed by stored ones of its connection would show here as a hole.)"""
    n = 100_000
    with Appliance(tmp_path, routes=[{"name": "kick", "message": "^kick"}]) as app:
        app.kill_indexd()
        scan = Scan(app)
        senders = start_senders(app, n=n)
        try:
            wait_until(
                "a full FIFO",
                lambda: fifo_bytes(app) > (1 << 20) - 65536,  # its next write does not fit
                lambda: (check_senders(senders), app.assert_alive_named("syslog-ng")),
                60,
            )
            time.sleep(1.0)  # syslog-ng now holds a frame it cannot write
            app.stop_syslogng()
            app.start_indexd()
            app.start_syslogng()
            # syslog-ng 3.38 sends its disk buffer only once a new message arrives (see
            # test_disk_buffer_sent_after_restart_without_traffic): one, to another logspace.
            app.send(b"<13>1 - kick kick - - - kick\n")
            while True:
                wait_idle(senders)
                app.settle(quiet=3.0)
                scan.update()
                if all(scan.top.get(s.conn, -1) == s.hi - 1 for s in senders):
                    break
                for s in senders:
                    s.error_pos = None
                    s.resume(scan.top.get(s.conn, s.lo - 1) + 1)
        finally:
            for s in senders:
                s.finish()
        total, dups = final_check(app, n)  # raises when a sequence number was never stored
        print(
            f"full FIFO stop: {total} stored, {sum(dups.values())} duplicates, "
            f"malformed {app.status()['malformed']}"
        )


def test_disk_buffer_sent_after_restart_without_traffic(tmp_path: Path) -> None:
    """What syslog-ng holds in its disk buffer when it restarts reaches the store without any
    new message arriving."""
    n = 50_000
    with Appliance(tmp_path) as app:
        app.kill_indexd()
        senders = start_senders(app, n=n)
        try:
            wait_until(
                "a full FIFO",
                lambda: fifo_bytes(app) > (1 << 20) - 65536,
                lambda: check_senders(senders),
                60,
            )
            wait_idle(senders)
        finally:
            for s in senders:
                s.finish()
        time.sleep(1.0)
        app.stop_syslogng()
        app.start_indexd()
        drained = app.settle(quiet=1.0)  # what the FIFO held
        app.start_syslogng()
        deadline = time.monotonic() + 15
        while app.count() == drained and time.monotonic() < deadline:
            time.sleep(0.2)
        assert app.count() > drained, f"nothing beyond the FIFO's {drained} in 15 s"
