"""`logbox search` while `logbox ingest --ack` writes (real processes, contract:
indexer/cli/README.md): the loghub corpus, shuffled, streamed at a steady rate in small commits
into a logspace that flushes a segment every 250 ms and so merges every 2 s. A searcher loops
over a few tokens, in process and through logbox-searchd, and checks:

- every acked id older than 1 s whose message holds the token is found;
- the pages of one search never repeat an id, and every hit holds the token;
- the count of a fixed, past time range never goes down;
- no search fails (no damaged-state error while segments are flushed and merged);
and at the end every message of the stream is found, and the store verifies."""

from __future__ import annotations

import random
import subprocess
import threading
import time
from pathlib import Path

import pytest
from lbtest.cli import Logbox, Searcher, message_bytes
from lbtest.corpus import loghub_corpus
from lbtest.oracle import words
from lbtest.searchd import Searchd, searchd_binary
from lbtest.wait import wait_until

RATE = 2000  # messages a second
SECONDS = 20  # of streaming
BATCH = 50  # messages per commit (and ack)
FLUSH_MS = 250  # a segment every 250 ms of ingest: 8 of them merge every 2 s
TOKENS = [b"session", b"failure", b"proxy", b"sent", b"got"]
SETTLE_S = 1.0  # acked this long ago: must be found


class Stream:
    """`logbox ingest --ack` fed at RATE by one thread; another reads the acks."""

    def __init__(self, lb: Logbox, lines: list[bytes]) -> None:
        self.lines = lines
        self.proc = lb.popen(
            "ingest",
            "--ack",
            "--sync",
            "none",
            "--batch",
            str(BATCH),
            "--flush-ms",
            str(FLUSH_MS),
            "-",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lock = threading.Lock()
        self.acks: list[tuple[float, int]] = []  # (monotonic time, last acked id)
        self.stderr = b""
        self.error: BaseException | None = None
        self.threads = [
            threading.Thread(target=self._write, daemon=True),
            threading.Thread(target=self._read_acks, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for t in self.threads:
            t.start()

    def _write(self) -> None:
        assert self.proc.stdin is not None
        try:
            t0 = time.monotonic()
            sent = 0
            while sent < len(self.lines):
                due = min(len(self.lines), int((time.monotonic() - t0) * RATE) + 1)
                if due > sent:
                    self.proc.stdin.write(b"".join(self.lines[sent:due]))
                    self.proc.stdin.flush()
                    sent = due
                time.sleep(0.005)
        except BaseException as e:  # noqa: BLE001 (reported by the test)
            self.error = e
        finally:
            self.proc.stdin.close()

    def _read_acks(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(b"ack "):
                with self.lock:
                    self.acks.append((time.monotonic(), int(line.split()[1])))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def acked_before(self, t: float) -> int:
        """The last id acked at or before monotonic time t (0 if none)."""
        with self.lock:
            done = [i for when, i in self.acks if when <= t]
        return max(done, default=0)

    def running(self) -> bool:
        return self.proc.poll() is None

    def finish(self) -> None:
        rc = self.proc.wait(timeout=120)
        for t in self.threads:
            t.join(timeout=30)
        assert self.error is None, f"feeding ingest failed: {self.error!r}"
        assert rc == 0, f"ingest exited {rc}:\n{self.stderr.decode(errors='replace')[-3000:]}"


def segment_files(data: Path) -> set[str]:
    return {p.name for p in data.glob("main/*/*/index/*.seg")}


def search_ids(s: Searcher, token: bytes, order: str, lo: int) -> list[int]:
    """Every hit of token received since epoch second lo, page after page (200 a page); checks
    that each hit holds the token."""
    out: list[int] = []
    cursor = None
    while True:
        pg = s.page(token.decode(), limit=200, order=order, cursor=cursor, from_=lo, to="+1h")
        for h in pg.hits:
            assert token in words(message_bytes(h["message"])), (token, h)
        out += [h["id"] for h in pg.hits]
        if pg.next_cursor is None:
            return out
        cursor = pg.next_cursor


@pytest.mark.slow
def test_search_while_ingesting(store_cli: Path, tmp_path: Path, top: Path, sockdir: Path) -> None:
    corpus = loghub_corpus()
    random.Random(4).shuffle(corpus)
    stream = [e for e in corpus if b"\n" not in e.raw and b"\r" not in e.raw]
    stream = stream[: RATE * SECONDS]
    lines = [e.raw + b"\n" for e in stream]
    toks = [set(words(e.message)) for e in stream]
    holders = {t: [i for i, ts in enumerate(toks, start=1) if t in ts] for t in TOKENS}
    assert all(len(v) > 50 for v in holders.values()), {t: len(v) for t, v in holders.items()}

    lb = Logbox(store_cli, tmp_path / "data")
    t0 = int(time.time())
    fixed = (t0, t0 + 3)  # a time range that is in the past after 3 s
    sd_bin = searchd_binary(top)
    daemon: Searchd | None = None
    feed = Stream(lb, lines)
    try:
        # Searching starts once the store exists: after the first ack.
        searchers = [("data", Searcher(lb))]
        wait_until(
            lambda: feed.acked_before(time.monotonic()) > 0, "the first ack", 10, interval=0.01
        )
        daemon = Searchd(sd_bin, lb.data, sockdir / "searchd.sock").start()
        searchers.append(("socket", Searcher(lb, daemon.sock)))

        seen_segments: set[str] = set()
        merged = 0
        fixed_counts: dict[str, int] = {}
        rounds = 0
        while feed.running():
            now = time.monotonic()
            settled = feed.acked_before(now - SETTLE_S)
            tok = TOKENS[rounds % len(TOKENS)]
            order = ("newest", "oldest")[rounds % 2]
            for name, s in searchers:
                got = search_ids(s, tok, order, t0 - 60)
                assert len(set(got)) == len(got), f"{name}: an id twice across pages"
                assert got == sorted(got, reverse=order == "newest"), name
                want = [i for i in holders[tok] if i <= settled]
                missing = sorted(set(want) - set(got))
                assert not missing, f"{name}: acked ids not found for {tok!r}: {missing[:20]}"
                if time.time() >= fixed[1] + 1:
                    c = s.count("*", from_=fixed[0], to=fixed[1])
                    assert c >= fixed_counts.get(name, 0), f"{name}: count went down"
                    fixed_counts[name] = c
            segs = segment_files(lb.data)
            merged += len(seen_segments - segs)
            seen_segments = segs
            rounds += 1
        feed.finish()

        assert rounds >= 10, f"only {rounds} search rounds while ingesting"
        assert merged > 0, "no segment was merged away while searching"
        for name, s in searchers:
            for tok in TOKENS:
                got = search_ids(s, tok, "oldest", t0 - 60)
                assert got == holders[tok], f"{name}: {tok!r} after the stream ended"
            assert s.count("*", from_=t0 - 60, to="+1h") == len(stream)
            assert fixed_counts.get(name, 0) > 0
            assert s.count("*", from_=fixed[0], to=fixed[1]) >= fixed_counts[name]
    finally:
        if feed.running():
            feed.proc.kill()
            feed.proc.wait()
        if daemon is not None:
            assert daemon.stop() == 0, daemon.log()
    rc, err = lb.verify()
    assert rc == 0, err
