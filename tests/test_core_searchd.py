# logbox_core.searchd, the API's and web UI's client of logbox-searchd, against the real daemon
# over a real store built with `logbox ingest`: answers equal what a plain one-shot http.client
# request gets; searchd's errors (bad_query with position, bad_parameter, not_found) arrive as
# SearchdError with their status and code; a stopped, killed or missing searchd, a socket nobody
# answers on and a silent one are 503 unavailable; one connection per thread is kept alive and
# reused; a connection searchd closed (restart, idle close) is replaced once, transparently; 16
# threads at once get their own answers; a forked child opens its own connection.

from __future__ import annotations

import gc
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from lbtest.cli import Logbox
from lbtest.forked import in_forked_child
from lbtest.searchd import Searchd as Daemon
from lbtest.searchd import StandIn, recv_head, searchd_binary
from logbox_core.searchd import Searchd, SearchdError

WORDS = ["alpha", "beta", "gamma", "delta", "error", "disk", "login", "failed"]
N = 500
# A fixed time range around the store (a relative one moves between two requests).
T0, T1 = str(int(time.time()) - 3600), str(int(time.time()) + 3600)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, store_cli: Path) -> Path:
    """A store: logspace main (N messages received now, some not UTF-8) and other (5)."""
    d = tmp_path_factory.mktemp("core_searchd") / "data"
    d.mkdir()
    lines = b"".join(
        b"<%d>host%d app: %s %s n%d%s\n"
        % (
            8 + i % 8,
            i % 3,
            WORDS[i % len(WORDS)].encode(),
            WORDS[(i * 7) % len(WORDS)].encode(),
            i,
            b" raw\xff\xfe" if i % 50 == 0 else b"",
        )
        for i in range(N)
    )
    Logbox(store_cli, d).ingest(lines)
    Logbox(store_cli, d, logspace="other").ingest(b"<14>hello other\n" * 5)
    return d


@pytest.fixture(scope="module")
def daemon(data: Path, top: Path, sockdir: Path) -> Iterator[Daemon]:
    """One searchd over data for the read-only tests."""
    with Daemon(searchd_binary(top), data, sockdir / "ro.sock", ["--threads", "2"]) as d:
        yield d


@pytest.fixture
def client(daemon: Daemon) -> Iterator[Searchd]:
    c = Searchd(daemon.sock, timeout=30)
    yield c
    c.close()


def without_took(obj: dict) -> dict:
    """obj without its timing member (two runs of one search differ only there)."""
    return {k: v for k, v in obj.items() if k != "took_ms"}


# ---------------------------------------------------------------- answers


@pytest.mark.parametrize(
    "path,params",
    [
        ("/v1/search", {"q": "error", "limit": "1000", "order": "oldest", "from": T0, "to": T1}),
        ("/v1/search", [("q", "n4*"), ("limit", "3"), ("from", T0), ("to", T1)]),
        ("/v1/search", {"q": "disk OR login", "limit": "7", "cursor": "400", "from": T0, "to": T1}),
        ("/v1/count", {"q": "host:host1 failed", "from": T0, "to": T1}),
        ("/v1/histogram", {"q": "*", "from": T0, "to": T1, "buckets": "10"}),
        ("/v1/top", {"q": "*", "field": "host", "k": "5", "from": T0, "to": T1}),
        ("/v1/count", {"q": "hello", "logspace": "other", "from": T0, "to": T1}),
        ("/v1/messages/51", {}),
        ("/v1/logspaces", ()),
    ],
)
def test_answers_equal_raw_client(
    client: Searchd, daemon: Daemon, path: str, params: dict | list
) -> None:
    want = daemon.get(path, params or None)
    assert want.status == 200, want.body[:300]
    got = client.get(path, params)
    assert without_took(got) == without_took(want.json)
    if "took_ms" not in want.json:
        assert client.get_raw(path, params) == want.body


def test_bytes_round_trip(client: Searchd) -> None:
    # q with a byte that is not UTF-8 is sent as that byte; hits carry \udcXX escapes.
    body = client.get("/v1/search", {"q": "raw\udcff\udcfe", "limit": "100"})
    assert body["total"] == N // 50
    assert body["query"].encode("utf-8", "surrogateescape") == b"raw\xff\xfe"
    for h in body["hits"]:
        assert b" raw\xff\xfe" in h["message"].encode("utf-8", "surrogateescape")


def test_health_and_logspaces(client: Searchd) -> None:
    assert client.health() is True
    spaces = client.logspaces()
    assert [s["name"] for s in spaces] == ["main", "other"]
    assert spaces[0]["messages"] == N and spaces[1]["messages"] == 5


# ---------------------------------------------------------------- errors


def test_bad_query(client: Searchd, daemon: Daemon) -> None:
    want = daemon.get("/v1/search", {"q": "(a OR b"}).error()
    with pytest.raises(SearchdError) as ei:
        client.get("/v1/search", {"q": "(a OR b"})
    e = ei.value
    assert (e.status, e.code, e.message, e.position) == (
        400,
        "bad_query",
        want["message"],
        want["position"],
    )
    assert isinstance(e.position, int)
    assert e.to_json() == {"error": want}
    # The connection stays usable after an error answer.
    assert client.get("/v1/count", {"q": "alpha"})["total"] > 0
    assert client.connects == 1


@pytest.mark.parametrize(
    "path,params,status,code,starts",
    [
        ("/v1/search", {"q": "x", "limit": "0"}, 400, "bad_parameter", "limit: "),
        ("/v1/search", {"q": "x", "bogus": "1"}, 400, "bad_parameter", "unknown parameter"),
        ("/v1/search", {}, 400, "bad_parameter", "q"),
        ("/v1/count", {"q": "x", "logspace": "nope"}, 404, "not_found", "no logspace 'nope'"),
        ("/v1/messages/99999", {}, 404, "not_found", ""),
        ("/v1/nothing", {}, 404, "not_found", ""),
    ],
)
def test_error_mapping(
    client: Searchd, path: str, params: dict, status: int, code: str, starts: str
) -> None:
    with pytest.raises(SearchdError) as ei:
        client.get_raw(path, params)
    e = ei.value
    assert (e.status, e.code) == (status, code), e
    assert e.message.startswith(starts) and e.position is None
    assert e.to_json() == {"error": {"code": code, "message": e.message}}


def test_socket_missing(tmp_path: Path) -> None:
    c = Searchd(tmp_path / "none.sock", timeout=2)
    with pytest.raises(SearchdError) as ei:
        c.get("/v1/logspaces")
    e = ei.value
    assert (e.status, e.code) == (503, "unavailable")
    assert e.message.startswith("searchd unavailable: ") and "none.sock" in e.message
    assert c.health() is False
    c.close()


def test_nobody_listening(sockdir: Path) -> None:
    # A socket file left behind with nobody on it (searchd killed): connection refused.
    path = sockdir / "dead.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()
    try:
        c = Searchd(path, timeout=2)
        with pytest.raises(SearchdError) as ei:
            c.get("/health")
        assert (ei.value.status, ei.value.code) == (503, "unavailable")
        assert "refused" in ei.value.message
        c.close()
    finally:
        path.unlink()


def test_timeout(sockdir: Path) -> None:
    # A listener that accepts and never answers: the client gives up after its timeout.
    path = sockdir / "mute.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(4)
    try:
        c = Searchd(path, timeout=0.3)
        t0 = time.monotonic()
        with pytest.raises(SearchdError) as ei:
            c.get("/v1/logspaces")
        assert 0.25 < time.monotonic() - t0 < 5
        assert (ei.value.status, ei.value.code) == (503, "unavailable")
        assert "0.3 s" in ei.value.message
        c.close()
    finally:
        s.close()
        path.unlink()


class CannedServer(StandIn):
    """A unix listener that answers each request with the next canned answer (bytes), then
    closes the connection after close_after answers on it. Only for answers searchd never
    gives on purpose (protocol breaches) and for a close that searchd gives after 60 s idle."""

    def __init__(self, path: Path, answers: list[bytes], close_after: int = 1_000_000) -> None:
        self.answers = answers
        self.close_after = close_after
        self.accepted = 0
        super().__init__(path)

    def serve(self, conn: socket.socket) -> None:
        self.accepted += 1
        buf = b""
        for _ in range(self.close_after):
            buf = recv_head(conn, buf)
            if b"\r\n\r\n" not in buf:
                break
            buf = buf.split(b"\r\n\r\n", 1)[1]
            conn.sendall(self.answers.pop(0))


def http_answer(status: str, body: bytes, ctype: str = "application/json") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def test_protocol_breaches(sockdir: Path) -> None:
    srv = CannedServer(
        sockdir / "canned.sock",
        [
            http_answer("413 Payload Too Large", b"<html>too large</html>", "text/html"),
            http_answer("500 Internal Server Error", b"not json"),
            http_answer("503 Service Unavailable", b""),
            http_answer("200 OK", b"[1, 2]"),
            http_answer("200 OK", b"{trunc"),
        ],
    )
    try:
        c = Searchd(srv.path, timeout=5)
        got = []
        for _ in range(5):
            with pytest.raises(SearchdError) as ei:
                c.get("/v1/logspaces")
            got.append((ei.value.status, ei.value.code))
        assert got == [
            (502, "internal"),
            (502, "internal"),
            (503, "unavailable"),
            (502, "internal"),
            (502, "internal"),
        ]
        assert srv.accepted == 1  # all on one kept-alive connection
        c.close()
    finally:
        srv.close()


def test_idle_close_is_retried_once(sockdir: Path) -> None:
    # The server closes each connection after one answer, as searchd does after 60 s idle:
    # the next request notices on the reused connection and is sent again on a new one.
    ok = http_answer("200 OK", b'{"logspaces": []}')
    srv = CannedServer(sockdir / "idle.sock", [ok] * 3, close_after=1)
    try:
        c = Searchd(srv.path, timeout=5)
        for _ in range(3):
            assert c.logspaces() == []
            time.sleep(0.05)  # the server's close has arrived
        assert c.connects == 3 and srv.accepted == 3
        c.close()
    finally:
        srv.close()


# ---------------------------------------------------------------- connections


def test_keep_alive_reuse(client: Searchd, daemon: Daemon) -> None:
    pid = daemon.proc.pid
    before = searchd_sockets(pid)
    client.health()
    sock = client._local.conn.sock
    for i in range(200):
        assert client.get("/v1/count", {"q": WORDS[i % len(WORDS)]})["total"] > 0
    assert client._local.conn.sock is sock  # the very same socket object
    assert client.connects == 1
    assert searchd_sockets(pid) == before + 1  # one connection on searchd's side


def searchd_sockets(pid: int) -> int:
    """How many sockets the process holds open (its listener and its connections)."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return n


def test_recovers_after_restart(data: Path, top: Path, sockdir: Path) -> None:
    d = Daemon(searchd_binary(top), data, sockdir / "rs.sock", ["--threads", "1"]).start()
    c = Searchd(d.sock, timeout=10)
    try:
        assert c.get("/v1/count", {"q": "alpha"})["total"] > 0
        # SIGTERM: searchd closes our idle connection and removes its socket.
        assert d.stop() == 0
        with pytest.raises(SearchdError) as ei:
            c.get("/v1/count", {"q": "alpha"})
        assert (ei.value.status, ei.value.code) == (503, "unavailable")
        assert not c.health()
        d.start()
        assert c.get("/v1/count", {"q": "alpha"})["total"] > 0
        # SIGKILL while our connection is open and idle; a new searchd on the same path.
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        with pytest.raises(SearchdError) as ei:
            c.get("/health")
        assert ei.value.code == "unavailable"
        d.start()
        n = c.connects
        assert c.health()
        assert c.connects == n + 1
        # A restart between two calls on a kept-alive connection is invisible to the caller.
        assert d.stop() == 0
        d.start()
        assert c.logspaces()[0]["messages"] == N
        # The pid is asked on the kept-alive connection (no new one each time) and is the new
        # searchd's after a restart: a connection to a dead one is not trusted.
        n = c.connects
        assert c.peer_pid() == d.proc.pid and c.as_caller("user:x").peer_pid() == d.proc.pid
        assert c.connects == n
        old = d.proc.pid
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        assert c.peer_pid() is None
        d.start()
        assert d.proc.pid != old and c.peer_pid() == d.proc.pid
    finally:
        c.close()
        d.stop()


def test_sixteen_threads(client: Searchd, daemon: Daemon) -> None:
    want = {w: daemon.get("/v1/count", {"q": w}).json["total"] for w in WORDS}
    barrier = threading.Barrier(16)

    def work(t: int) -> list[tuple[str, int]]:
        barrier.wait()
        out = []
        for i in range(40):
            w = WORDS[(t + i) % len(WORDS)]
            out.append((w, client.get("/v1/count", {"q": w})["total"]))
            if i % 10 == 0:
                try:
                    client.get("/v1/search", {"q": "(" + w})
                except SearchdError as e:
                    out.append((e.code, e.status))
        return out

    with ThreadPoolExecutor(max_workers=16) as ex:
        results = list(ex.map(work, range(16)))
    for out in results:
        assert len(out) == 44
        for a, b in out:
            assert b == 400 if a == "bad_query" else b == want[a]
    assert client.connects == 16  # one kept-alive connection per thread
    # A finished thread's connection is closed and forgotten with it.
    gc.collect()
    assert len(client._conns) == 0


def test_forked_child_opens_its_own(client: Searchd) -> None:
    assert client.health()
    parent_sock = client._local.conn.sock

    def child() -> list[bool]:
        ok = client.get("/v1/count", {"q": "beta"})["total"] > 0
        fresh = client._local.conn.sock is not parent_sock and client.connects == 1
        return [ok, fresh]

    assert in_forked_child(child) == [True, True]
    # The parent's connection was not disturbed by the child.
    assert client._local.conn.sock is parent_sock and client.health()
