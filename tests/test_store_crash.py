# Scenario: `logbox ingest --ack` killed with SIGKILL at seeded random moments loses nothing it
# acknowledged and leaves a store that verifies. Message n (1-based, over all runs) is a pure
# function of n and must get id n: each run is fed, through a pipe, the messages after those
# already stored, and killed after a random 20-400 ms (20 runs with --sync none --batch 200,
# 5 with --sync always). After every kill: `verify` passes; the stored messages are exactly
# messages 1..S for some S (a contiguous prefix of what was sent, nothing reordered, invented or
# lost in between); S covers the last acked id; acks only grow; and `lookup` of a token every
# message holds returns 1..S. Finally an uninterrupted ingest of the rest succeeds and the whole
# store checks out again.
from __future__ import annotations

import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from lbtest.cli import Logbox, ingest_summary, message_bytes

SEED = 4242
COMMON = b"crashcommon"
RUN_CAP = 30_000  # at most this many messages fed per run
CHUNK = 250  # messages per pipe write; the writer pauses between writes (~50k msg/s)
FINAL = 3000

pytestmark = pytest.mark.slow


def message(n: int) -> bytes:
    """The message part of message n."""
    return b"seq=%d %s run-of-%d pad%s" % (n, COMMON, n % 97, b"x" * (n % 61))


def frame(n: int) -> bytes:
    """Message n as one RFC 5424 line."""
    return b"<%d>1 2026-01-01T00:00:%02dZ host%d app %d - - %s\n" % (
        8 + n % 8,
        n % 60,
        n % 13,
        n,
        message(n),
    )


class Run:
    """One ingest process fed messages first.. through a pipe, its acks read by a thread."""

    def __init__(self, lb: Logbox, first: int, args: list[str], stderr: Path) -> None:
        self.first = first
        self.sent_upto = first - 1  # messages first..sent_upto were (maybe partly) written
        self.acks: list[int] = []
        self.stdout_junk: list[bytes] = []
        self.stop = threading.Event()
        self.err = open(stderr, "wb")  # noqa: SIM115 (closed in finish())
        self.proc = lb.popen(
            "ingest", *args, "-", stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err
        )
        self.writer = threading.Thread(target=self._feed, daemon=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.writer.start()
        self.reader.start()

    def _feed(self) -> None:
        assert self.proc.stdin is not None
        n = self.first
        try:
            while not self.stop.is_set() and n < self.first + RUN_CAP:
                k = min(CHUNK, self.first + RUN_CAP - n)
                self.sent_upto = n + k - 1
                self.proc.stdin.write(b"".join(frame(i) for i in range(n, n + k)))
                self.proc.stdin.flush()
                n += k
                time.sleep(0.005)
            self.proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if len(parts) == 2 and parts[0] == b"ack" and parts[1].isdigit():
                self.acks.append(int(parts[1]))
            else:
                self.stdout_junk.append(line)

    def finish(self, kill_after: float | None) -> int:
        """Kills the process after kill_after s (None: lets it end); returns its exit status."""
        if kill_after is not None:
            time.sleep(kill_after)
            self.proc.send_signal(signal.SIGKILL)
        rc = self.proc.wait(timeout=120)
        self.stop.set()
        self.writer.join(timeout=30)
        self.reader.join(timeout=30)
        self.err.close()
        return rc


def _check_prefix(lb: Logbox, stored_before: int, what: str) -> int:
    """Checks that the store holds exactly messages 1..S with S >= stored_before; returns S.
    Messages up to stored_before were checked before: only the new ones are read in full."""
    recs = lb.cat(from_id=stored_before + 1)
    ids = [r["id"] for r in recs]
    s = stored_before + len(recs)
    assert ids == list(
        range(stored_before + 1, s + 1)
    ), f"{what}: ids after {stored_before} are not contiguous: {ids[:5]}...{ids[-5:]}"
    for r in recs:
        got = message_bytes(r["message"])
        assert got == message(r["id"]), (
            f"{what}: id {r['id']} holds {got[:80]!r}, but message {r['id']} sent was "
            f"{message(r['id'])[:80]!r}"
        )
    every = lb.lookup(COMMON)
    assert every == list(range(1, s + 1)), (
        f"{what}: lookup {COMMON!r} gave {len(every)} ids "
        f"({every[:3]}...{every[-3:]}), want 1..{s}"
    )
    return s


def _verify(lb: Logbox, what: str) -> None:
    rc, err = lb.verify()
    assert rc == 0, f"{what}: verify exit {rc}:\n{err[-3000:]}"


def test_kill9_during_ingest_loses_nothing_acked(
    store_cli: Path, store: Path, tmp_path: Path
) -> None:
    lb = Logbox(store_cli, store, timeout=120)
    rng = random.Random(SEED)
    plans = [["--sync", "none", "--batch", "200"]] * 20 + [
        ["--sync", "always", "--batch", "200"]
    ] * 5
    stored = 0
    total_acked = 0
    for i, args in enumerate(plans):
        delay = rng.uniform(0.02, 0.4)
        what = (
            f"run {i} ({' '.join(args)}, killed after {delay * 1000:.0f} ms, from id {stored + 1})"
        )
        run = Run(lb, stored + 1, ["--ack", *args], tmp_path / f"ingest-{i}.err")
        rc = run.finish(delay)
        err = (tmp_path / f"ingest-{i}.err").read_text(errors="replace")
        assert rc in (-signal.SIGKILL, 0), f"{what}: ingest exit {rc}:\n{err[-2000:]}"
        assert not run.stdout_junk, f"{what}: stdout holds more than acks: {run.stdout_junk[:3]}"
        assert run.acks == sorted(set(run.acks)), f"{what}: acks not increasing: {run.acks[:20]}"
        if run.acks:
            assert stored < run.acks[0] and run.acks[-1] <= run.sent_upto, (
                f"{what}: acks {run.acks[0]}..{run.acks[-1]} outside the ids fed "
                f"({stored + 1}..{run.sent_upto})"
            )
            total_acked += len(run.acks)
        if stored == 0 and not run.acks:
            # Killed while it was still creating the store (a slow start on a loaded machine):
            # no catalog yet, an empty catalog file, or a catalog without the logspace is
            # nothing stored; no problem may be reported in what exists.
            rc, err = lb.verify()
            if rc != 0 and re.search(r"logspace main: (not found|No such file|Bad file)", err):
                assert "problem" not in err, f"{what}: {err}"
                continue
        _verify(lb, what)
        new = _check_prefix(lb, stored, what)
        last_ack = run.acks[-1] if run.acks else stored
        assert last_ack <= new <= run.sent_upto, (
            f"{what}: store holds 1..{new}, but id {last_ack} was acked "
            f"and only 1..{run.sent_upto} were sent"
        )
        stored = new
    assert total_acked > 0, "no run acked anything before its kill: the test proves nothing"

    # The rest, uninterrupted, from a file.
    rest = tmp_path / "rest.log"
    rest.write_bytes(b"".join(frame(n) for n in range(stored + 1, stored + FINAL + 1)))
    p = lb.ingest(rest)
    assert ingest_summary(p.stderr) == (FINAL, stored + 1, stored + FINAL)
    _verify(lb, "after the final ingest")
    assert _check_prefix(lb, 0, "after the final ingest") == stored + FINAL
