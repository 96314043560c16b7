# The live tail through the API (rpc/API.md §4.8) and logbox-remote search --follow: real
# indexd fed on its --listen socket, real searchd, real gunicorn (behind nginx unless
# LOGBOX_TEST_PROXY=0, which must not buffer the stream). A message sent after the stream
# started arrives as a line within the bound; the stream is audited once ("tail"); a searcher
# who may not read the logspace gets 403 (audited "denied"); a user's tails per app process
# are bounded (429); logbox-remote search --follow prints new matches as they arrive and says
# on stderr how many were skipped.

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from lbtest.apps import running_searchd
from lbtest.frames import frame, frames
from lbtest.indexd import Indexd, send_socket
from lbtest.rpc import RpcServer

BOUND_S = 3.0  # generous: the feature's bound is 1 s (tests/bench/tail_latency.py measures it)


@dataclass
class Stack:
    rpc: RpcServer
    sock: Path  # indexd's --listen socket

    def send(self, *msgs: bytes, ls: str = "main") -> None:
        send_socket(self.sock, frames(msgs, ls=ls))


@pytest.fixture
def stack(indexd: Indexd, top: Path, tmp_path: Path) -> Iterator[Stack]:
    sock = tmp_path / "indexd.sock"
    send_socket(sock, frame(b"first main", ls="main") + frame(b"first web", ls="web"))
    indexd.wait_stored(2, timeout=20)
    with running_searchd(top, indexd.data, tmp_path / "sd.sock", ["--threads", "2"]) as sd:
        with RpcServer(
            tmp_path / "rpc", searchd_socket=sd.sock, data=indexd.data, workers=1
        ) as rpc:
            yield Stack(rpc, sock)


def lines(r: requests.Response) -> Iterator[dict[str, Any]]:
    for ln in r.iter_lines(chunk_size=1 << 16):
        if ln:
            yield json.loads(ln)


def test_api_tail_streams_new_matches_and_is_audited(stack: Stack) -> None:
    s = stack.rpc.session(stack.rpc.login())
    url = f"{stack.rpc.base}/logspaces/main/tail"
    with s.get(url, params={"q": "needle"}, stream=True, timeout=30) as r:
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"].startswith("application/x-ndjson")
        it = lines(r)
        assert next(it)["through"] == "1"
        t0 = time.monotonic()
        stack.send(b"hay", b"needle in main")
        stack.send(b"needle in web", ls="web")
        o = next(it)
        took = time.monotonic() - t0
        assert o["message"] == "needle in main" and o["id"] == 3, o
        assert took <= BOUND_S, took
    r = s.get(f"{stack.rpc.base}/audit", params={"action": "tail"}, timeout=30)
    entries = r.json()["entries"]
    assert len(entries) == 1, entries
    e = entries[0]
    assert (e["user"], e["logspace"], e["query"], e["status"]) == ("admin", "main", "needle", 200)
    # errors before the stream are ordinary answers, audited too
    r = s.get(url, params={"q": "needle AND ("}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_query"
    r = s.get(url, params={"q": "x", "after": "-1"}, timeout=30)
    assert r.status_code == 400


def test_rights_and_the_per_user_bound(stack: Stack) -> None:
    admin = stack.rpc.session(stack.rpc.login())
    carol = stack.rpc.new_searcher(admin, "carol", ["web"])
    r = carol.get(f"{stack.rpc.base}/logspaces/main/tail", params={"q": "*"}, timeout=30)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    denied = admin.get(
        f"{stack.rpc.base}/audit", params={"action": "denied", "user": "carol"}, timeout=30
    ).json()["entries"]
    assert denied and denied[0]["logspace"] == "main"
    url = f"{stack.rpc.base}/logspaces/web/tail"
    open_ = [carol.get(url, params={"q": "*"}, stream=True, timeout=30) for _ in range(2)]
    assert [r.status_code for r in open_] == [200, 200]
    r = carol.get(url, params={"q": "*"}, timeout=30)
    assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_requests"
    assert r.headers.get("Retry-After") == "1"
    # another user is not held up by carol's
    with admin.get(url, params={"q": "*"}, stream=True, timeout=30) as r:
        assert r.status_code == 200
    for r in open_:
        r.close()


def test_remote_search_follow(stack: Stack, top: Path) -> None:
    token = stack.rpc.login()
    env = dict(
        os.environ, LOGBOX_URL=stack.rpc.url, LOGBOX_CA=str(stack.rpc.cafile), LOGBOX_TOKEN=token
    )
    p = subprocess.Popen(
        [sys.executable, str(top / "rpc" / "logbox-remote"), "search", "--follow", "--json"]
        + ["--limit", "5", "needle"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        # Ctrl-C's default even when this runs in the background of a shell (which starts
        # children with SIGINT ignored, and Python then keeps it ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert p.stdout is not None and p.stderr is not None
        # The stream starts at the logspace's end whenever the command gets there (a loaded
        # machine takes seconds): a warm-up message, sent until one is printed, says it runs.
        deadline = time.monotonic() + 30
        while not select.select([p.stdout], [], [], 0.5)[0]:
            assert time.monotonic() < deadline, "the follow stream never printed"
            stack.send(b"needle warmup")
        stack.send(b"needle one", b"hay", b"needle two")
        got = []
        while len(got) < 2:
            g = json.loads(readline(p.stdout, 10))
            if g["message"] != "needle warmup":
                got.append(g["message"])
        assert got == ["needle one", "needle two"]
        stack.send(*[f"needle burst {i}".encode() for i in range(40)])
        burst = []
        while not burst or burst[-1] != "needle burst 39":
            burst.append(json.loads(readline(p.stdout, 10))["message"])
        # at most 5 a tick: the burst's newest arrive, and the rest are said to be skipped
        assert len(burst) < 40 and burst == sorted(burst, key=lambda m: int(m.split()[-1]))
        err = readline(p.stderr, 10).decode()
        assert err.startswith("logbox-remote: ") and "matches skipped" in err, err
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=10) == 130
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


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
