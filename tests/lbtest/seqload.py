"""Sequence-numbered load for the no-loss tests: senders over TCP connections to the test
appliance (lbtest.appliance), each sending "noloss c<conn> s<seq>" messages in order (optionally
paced to a rate), and the checks that read the store back through `logbox cat`: every sequence
number stored, how often, in which logspace.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from dataclasses import dataclass, field

from lbtest.appliance import Appliance

CONNS = 4
BATCH = 2000  # messages per sendall
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
    rate: float = 0.0  # messages per second on this connection; 0: as fast as it goes
    started: float = 0.0

    def start(self) -> None:
        self.pos = self.lo
        self.started = time.monotonic()
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
                batch = BATCH
                if self.rate:
                    batch = max(1, int(self.rate / 100))  # 100 sends a second
                    due = self.started + (self.pos - self.lo) / self.rate
                    time.sleep(max(0.0, due - time.monotonic()))
                end = min(self.pos + batch, self.hi)
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


def start_senders(app: Appliance, n: int, conns: int = CONNS, rate: float = 0) -> list[Sender]:
    """conns connections sending [0, n) between them; rate: messages per second in all
    (0: as fast as they go)."""
    step = n // conns
    senders = [
        Sender(app, c, c * step, n if c == conns - 1 else (c + 1) * step, rate=rate / conns)
        for c in range(conns)
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
    logspaces: dict[str, set[int] | None] | None = None,
    lost: list[int] | None = None,
) -> tuple[int, dict[int, int]]:
    """Streams the whole store: (messages, {seq: extra copies}). Asserts every seq < n is
    there and nothing else is; with logspaces ({name: its connections}), that each message is
    in its connection's logspace. With lost, the missing sequence numbers are put there for
    the caller to judge instead of failing."""
    seen = bytearray(n)
    dups: dict[int, int] = {}
    total = 0
    for ls, conns in (logspaces or {"main": None}).items():
        for raw in app.iter_lines(ls):
            m = _SEQ.search(raw)
            assert m, f"a message that no sender sent in {ls}: {raw[:300]!r}"
            assert conns is None or int(m.group(1)) in conns, f"in {ls}: {raw[:300]!r}"
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
