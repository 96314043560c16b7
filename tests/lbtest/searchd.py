"""Talking to logbox-searchd in tests (protocol: indexer/PROTOCOL.md): an http.client connection
over a unix socket, and a handle on a running daemon that starts the real binary, waits for its
socket to answer and stops it. Nothing here knows the store's files."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbtest.proc import stop_process
from lbtest.wait import wait_until


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a unix stream socket (the Host header says "searchd")."""

    def __init__(self, path: str | os.PathLike[str], timeout: float = 30) -> None:
        super().__init__("searchd", timeout=timeout)
        self.unix_path = os.fspath(path)

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


@dataclass
class Reply:
    """One answer: status, headers (lower-case names) and body; .json parses the body."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        """The body as JSON (bytes outside UTF-8 arrive as \\udcXX escapes)."""
        try:
            return json.loads(self.body.decode("utf-8"))
        except ValueError as e:
            raise AssertionError(
                f"searchd answered {self.status} with non-JSON: {self.body[:300]!r}"
            ) from e

    def error(self) -> dict[str, Any]:
        """The "error" object of an error answer (asserting the envelope's shape)."""
        err = self.json.get("error")
        assert isinstance(err, dict) and {"code", "message"} <= err.keys(), self.body[:300]
        return err


def query_string(params: Mapping[str, str | bytes | int] | Sequence[tuple[str, Any]]) -> str:
    """params url-encoded (form style; bytes values are sent as they are)."""
    items = params.items() if isinstance(params, Mapping) else params
    return urllib.parse.urlencode([(k, v if isinstance(v, bytes) else str(v)) for k, v in items])


def request(
    sock: str | os.PathLike[str],
    path: str,
    params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
    method: str = "GET",
    timeout: float = 30,
) -> Reply:
    """One request on a fresh connection."""
    target = path + ("?" + query_string(params) if params else "")
    c = UnixHTTPConnection(sock, timeout=timeout)
    try:
        c.request(method, target)
        r = c.getresponse()
        return Reply(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        c.close()


@dataclass
class Searchd:
    """A running logbox-searchd. stderr goes to a file so that a test can read the log."""

    binary: Path
    data: Path
    sock: Path
    args: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None  # added to the test's environment
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    def start(self, timeout: float = 10) -> Searchd:
        """Starts the daemon and waits until GET /health answers.

        :raises AssertionError: if it exits or does not answer within timeout.
        """
        self.log_path = self.sock.with_suffix(".log")
        argv = [str(self.binary), "--data", str(self.data), "--socket", str(self.sock)]
        argv += self.args
        if os.geteuid() == 0 and "--user" not in self.args:
            argv.append("--allow-root")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=dict(os.environ, **(self.env or {})),
            )
        proc = self.proc

        def alive() -> None:
            if proc.poll() is not None:
                raise AssertionError(
                    f"searchd exited with {proc.returncode} at start:\n{self.log()}"
                )

        wait_until(
            lambda: self.get("/health", timeout=1).status == 200,
            "searchd answers /health",
            timeout,
            check=alive,
            detail=self.log,
            ignore=(OSError,),
        )
        return self

    def __enter__(self) -> Searchd:
        """`with Searchd(...) as d:` starts it unless it runs, and stops it after; it must
        exit 0 on SIGTERM then (unless the block raised)."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        rc = self.stop()
        if exc_type is None:
            assert rc == 0, self.log()

    def get(self, path: str, params: Any = None, timeout: float = 30) -> Reply:
        """GET path?params."""
        return request(self.sock, path, params, timeout=timeout)

    def request(self, method: str, path: str, params: Any = None) -> Reply:
        """Any method."""
        return request(self.sock, path, params, method=method)

    def healthy(self) -> bool:
        """Whether the process runs and /health answers {"status":"ok"}."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        r = self.get("/health", timeout=5)
        return r.status == 200 and r.json == {"status": "ok"}

    def log(self) -> str:
        """What the daemon wrote to stderr so far."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text("utf-8", "replace")

    def signal(self, sig: int) -> None:
        """Sends sig to the daemon."""
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM, then the exit status (SIGKILL if it hangs, which fails the caller)."""
        if self.proc is None:
            return 0
        if not stop_process(self.proc, timeout=timeout):
            raise AssertionError(f"searchd did not exit on SIGTERM:\n{self.log()}")
        return self.proc.returncode


class StandIn:
    """A stand-in for searchd on a unix socket, for answers the real one never gives: a thread
    accepts connections one after the other and hands each to serve(), which a subclass
    defines. A subclass sets its own fields before calling this __init__ (it starts the
    thread)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def serve(self, conn: socket.socket) -> None:
        """Talks to one connection (closed after)."""
        raise NotImplementedError

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.serve(conn)

    def close(self) -> None:
        """Stops listening and removes the socket."""
        self.sock.close()
        self.path.unlink(missing_ok=True)


def recv_head(conn: socket.socket, buf: bytes = b"") -> bytes:
    """buf and what conn sends after it, until it holds a request head's end (CR LF CR LF) or
    the peer stops sending."""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def searchd_binary(top: Path) -> Path:
    """$LOGBOX_SEARCHD_BIN, else build/bin/logbox-searchd (asserting that it is built)."""
    p = Path(os.environ.get("LOGBOX_SEARCHD_BIN", top / "build" / "bin" / "logbox-searchd"))
    assert p.is_file(), f"{p} is not built (make build)"
    return p
