# logbox-searchd's GET /v1/tail (indexer/PROTOCOL.md §4.9), black box: the real indexd fed on
# its --listen socket and the real searchd over the same store. A stream sends the new matches
# of its query as NDJSON lines within the bound, only matches, oldest first, starting at the
# logspace's end (or after=ID); a burst over the per-tick limit becomes a "skipped" line and the
# newest hits; bad parameters are an ordinary error answer; a client that goes away frees its
# stream (the gauge in /metrics); streams per caller are limited (429); SIGTERM ends every
# stream with its last chunk and searchd exits 0. `logbox search --follow` (the C CLI, reading
# the store in its own process) does the same on a terminal.

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lbtest.apps import running_searchd
from lbtest.frames import frames
from lbtest.indexd import Indexd, send_socket
from lbtest.searchd import Searchd, UnixHTTPConnection, query_string
from lbtest.wait import wait_until

BOUND_S = 3.0  # generous: the feature's bound is 1 s (measured by tests/bench/tail_latency.py)


@pytest.fixture
def sd(indexd: Indexd, top: Path, tmp_path: Path) -> Iterator[Searchd]:
    send_socket(tmp_path / "indexd.sock", frames([b"before the stream needle 0"]))
    indexd.wait_stored(1, timeout=20)
    with running_searchd(top, indexd.data, tmp_path / "sd.sock", ["--threads", "2"]) as d:
        yield d


class Stream:
    """One /v1/tail request, read line by line."""

    def __init__(self, sd: Searchd, params: dict[str, Any], caller: str | None = None) -> None:
        self.conn = UnixHTTPConnection(sd.sock, timeout=10)
        headers = {"X-Logbox-Caller": caller} if caller else {}
        self.conn.request("GET", "/v1/tail?" + query_string(params), headers=headers)
        self.resp = self.conn.getresponse()

    def line(self) -> dict[str, Any]:
        raw = self.resp.readline()
        assert raw.endswith(b"\n"), f"stream ended: {raw!r}"
        return json.loads(raw)

    def until(self, pred: Any, timeout: float = 10) -> list[dict[str, Any]]:
        """Lines up to and including the first one pred accepts."""
        out: list[dict[str, Any]] = []
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            out.append(self.line())
            if pred(out[-1]):
                return out
        raise AssertionError(f"no such line within {timeout} s: {out[-5:]}")

    def close(self) -> None:
        self.resp.close()  # (the socket stays open while the response holds it)
        self.conn.close()


def send(tmp_path: Path, *msgs: bytes) -> None:
    send_socket(tmp_path / "indexd.sock", frames(msgs))


def metric(sd: Searchd, name: str) -> float:
    for ln in sd.get("/metrics").body.decode().splitlines():
        if ln.startswith(name + " "):
            return float(ln.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def test_new_matches_arrive_within_the_bound_oldest_first(sd: Searchd, tmp_path: Path) -> None:
    s = Stream(sd, {"q": "needle"})
    assert s.resp.status == 200
    assert s.resp.getheader("Content-Type") == "application/x-ndjson"
    assert s.resp.getheader("X-Accel-Buffering") == "no"
    first = s.line()
    assert first["through"] == "1" and isinstance(first["time"], int)  # the end: only new ones
    t0 = time.monotonic()
    send(tmp_path, b"hay one", b"needle one", b"hay two", b"needle two")
    lines = s.until(lambda o: o.get("message") == "needle two")
    took = time.monotonic() - t0
    hits = [o for o in lines if "id" in o]
    assert [h["message"] for h in hits] == ["needle one", "needle two"]
    assert [h["id"] for h in hits] == [3, 5]
    assert took <= BOUND_S, took
    # Idle: a heartbeat within SD_TAIL_HEARTBEAT_S (5 s) says how far it looked.
    hb = s.until(lambda o: "through" in o, timeout=8)[-1]
    assert hb["through"] == "5"
    s.close()


def test_after_replays_and_errors_are_plain_answers(sd: Searchd, tmp_path: Path) -> None:
    s = Stream(sd, {"q": "needle", "after": "0"})
    lines = s.until(lambda o: "through" in o)
    assert [o.get("message") for o in lines[:-1]] == ["before the stream needle 0"]
    s.close()
    r = sd.get("/v1/tail", {"q": "needle AND (", "after": "0"})
    assert r.status == 400 and r.error()["code"] == "bad_query"
    r = sd.get("/v1/tail", {"q": "x", "logspace": "nope"})
    assert r.status == 404 and r.error()["code"] == "not_found"
    r = sd.get("/v1/tail", {"q": "x", "limit": "0"})
    assert r.status == 400
    r = sd.get("/v1/tail", {"q": "x", "cursor": "1"})
    assert r.status == 400


def test_a_burst_over_the_limit_is_skipped_and_said(sd: Searchd, tmp_path: Path) -> None:
    s = Stream(sd, {"q": "burst", "limit": "5"})
    s.line()
    send(tmp_path, *[f"burst {i}".encode() for i in range(60)])
    got: list[str] = []
    skipped = 0
    end = time.monotonic() + 10
    while len(got) + skipped < 60 and time.monotonic() < end:
        o = s.line()
        if "skipped" in o:
            skipped += o["skipped"]
        elif "message" in o:
            got.append(o["message"])
    assert len(got) + skipped == 60
    assert skipped > 0
    assert got[-1] == "burst 59"  # the newest are kept
    nums = [int(m.split()[1]) for m in got]
    assert nums == sorted(nums)
    assert metric(sd, "logbox_searchd_tail_skipped_total") >= skipped
    s.close()


def test_a_reader_that_lags_is_told_what_it_missed(
    sd: Searchd, indexd: Indexd, tmp_path: Path
) -> None:
    """6 MB of matches while the client reads nothing: searchd holds back (at most about
    1 MiB unsent plus one tick of at most 1 MiB), and what it did not send is counted."""
    s = Stream(sd, {"q": "big", "limit": "10000"})
    s.line()
    n = 3000
    pad = " ".join(["padding"] * 250)  # 2 KB
    for k in range(0, n, 500):
        send(tmp_path, *[f"big {i} {pad}".encode() for i in range(k, k + 500)])
    indexd.wait_stored(1 + n, timeout=60)
    time.sleep(1.5)  # ticks come and go while nothing is read
    got = skipped = size = 0
    last = ""
    while got + skipped < n:
        raw = s.resp.readline()
        size += len(raw)
        o = json.loads(raw)
        if "skipped" in o:
            skipped += o["skipped"]
        elif "message" in o:
            got += 1
            last = o["message"]
    assert got + skipped == n
    assert skipped > 0
    assert last.startswith(f"big {n - 1} ")
    assert size < 5 * 1024 * 1024, size  # of 6 MB that matched
    s.close()


def test_streams_are_freed_and_limited_per_caller(sd: Searchd, tmp_path: Path) -> None:
    streams = [Stream(sd, {"q": "x"}, caller="user:a") for _ in range(4)]
    for s in streams:
        assert s.resp.status == 200
        s.line()
    fifth = Stream(sd, {"q": "x"}, caller="user:a")
    assert fifth.resp.status == 429
    assert fifth.resp.getheader("Retry-After") == "1"
    other = Stream(sd, {"q": "x"}, caller="user:b")
    assert other.resp.status == 200
    assert metric(sd, "logbox_searchd_tail_streams") == 5
    for s in streams + [other, fifth]:
        s.close()
    # The client going away ends its stream and frees it.
    wait_until(lambda: metric(sd, "logbox_searchd_tail_streams") == 0, "streams freed", 5)
    assert sd.healthy()
    again = Stream(sd, {"q": "x"}, caller="user:a")
    assert again.resp.status == 200
    again.close()


def test_sigterm_ends_every_stream_cleanly(sd: Searchd, tmp_path: Path) -> None:
    s = Stream(sd, {"q": "x"})
    s.line()
    t0 = time.monotonic()
    sd.signal(signal.SIGTERM)
    rest = s.resp.read()  # the terminating chunk ends it: no IncompleteRead
    assert rest == b"" or rest.endswith(b"\n")
    assert sd.proc is not None
    assert sd.proc.wait(timeout=10) == 0
    assert time.monotonic() - t0 < 5
    with pytest.raises((OSError, http.client.HTTPException)):
        Stream(sd, {"q": "x"})


# ---------------------------------------------------------------- logbox search --follow


def readline(f: Any, timeout: float) -> bytes:
    """One line of a pipe, failing after timeout."""
    end = time.monotonic() + timeout
    buf = b""
    while not buf.endswith(b"\n"):
        left = end - time.monotonic()
        assert left > 0, f"no line within {timeout} s: {buf!r}"
        r, _, _ = select.select([f], [], [], left)
        if r:
            c = os.read(f.fileno(), 1)
            assert c, f"pipe closed: {buf!r}"
            buf += c
    return buf


def test_cli_search_follow(indexd: Indexd, store_cli_asan: Path, tmp_path: Path) -> None:
    """`logbox search --follow --data` (the ASan build): new matches as NDJSON lines within
    the bound, a burst's skipped matches on stderr, exit 0 on SIGTERM."""
    send(tmp_path, b"needle before")
    indexd.wait_stored(1, timeout=20)
    p = subprocess.Popen(
        [str(store_cli_asan), "search", "--follow", "--data", str(indexd.data), "--json"]
        + ["--limit", "5", "needle"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert p.stdout is not None and p.stderr is not None
        # It starts at the end ("needle before" is never printed), whenever it gets there on
        # a loaded machine: a warm-up message, sent until one is printed, says it runs.
        deadline = time.monotonic() + 30
        while not select.select([p.stdout], [], [], 0.5)[0]:
            assert time.monotonic() < deadline, "--follow never printed"
            send(tmp_path, b"needle warmup")
        t0 = time.monotonic()
        send(tmp_path, b"needle one", b"hay", b"needle two")
        got: list[str] = []
        while len(got) < 2:
            m = json.loads(readline(p.stdout, 10))["message"]
            assert m != "needle before"
            if m != "needle warmup":
                got.append(m)
        assert time.monotonic() - t0 <= BOUND_S
        assert got == ["needle one", "needle two"]
        send(tmp_path, *[f"needle burst {i}".encode() for i in range(30)])
        burst: list[str] = []
        skipped = 0
        # every burst message is printed or counted (one or more ticks of at most 5)
        while skipped + len(burst) < 30:
            r, _, _ = select.select([p.stdout, p.stderr], [], [], 5)
            assert r, (skipped, burst)
            if p.stderr in r:
                err = readline(p.stderr, 5).decode()
                assert err.startswith("logbox: ") and "matches skipped" in err, err
                skipped += int(err.split()[1])
            if p.stdout in r:
                burst.append(json.loads(readline(p.stdout, 5))["message"])
        assert skipped + len(burst) == 30 and skipped > 0
        assert burst[-1] == "needle burst 29"
        assert burst == sorted(burst, key=lambda m: int(m.split()[-1]))
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == 0
        assert b"ERROR" not in p.stderr.read()  # (ASan)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    r = subprocess.run(
        [str(store_cli_asan), "search", "--follow", "--socket", "/nonexistent", "x"],
        capture_output=True,
    )
    assert r.returncode == 2 and b"--follow" in r.stderr
