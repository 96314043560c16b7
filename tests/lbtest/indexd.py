"""Running logbox-indexd in tests and benchmarks: a FIFO held open the way the supervisor holds it
(O_RDWR, 1 MiB pipe) and passed as fd 3 with LISTEN_FDS/LISTEN_PID, or --fifo/--listen; start,
SIGKILL, SIGTERM, restart; the --status JSON; the stored messages through the `logbox` CLI.
Nothing here knows the store's files."""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import socket
import subprocess
import termios
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lbtest.wait import wait_until

F_SETPIPE_SZ = 1031
PIPE_SIZE = 1 << 20

# Every indexd started here, in order, so that one a failing test left running is killed
# (started_mark, reap_since).
_STARTED: list[subprocess.Popen[bytes]] = []


class HeldFifo:
    """A FIFO created at path and held open O_RDWR (the supervisor's end), with a 1 MiB pipe.
    writer() opens a separate blocking write end for a feeder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.fcntl(self.fd, F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:
            pass

    def pending(self) -> int:
        """Bytes in the pipe not yet consumed (FIONREAD)."""
        buf = fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0")
        return int.from_bytes(buf, "little")

    def writer(self) -> int:
        """A new blocking write end (the caller closes it)."""
        return os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Indexd:
    """One logbox-indexd on data directory data. fifo: a HeldFifo passed as fd 3 (kill-safe);
    args: further options (--listen, --config, ...)."""

    def __init__(
        self,
        binary: Path,
        data: Path,
        status: Path,
        fifo: HeldFifo | None = None,
        args: Sequence[str] = (),
        stderr_path: Path | None = None,
    ) -> None:
        self.binary = binary
        self.data = data
        self.status_path = status
        self.fifo = fifo
        self.args = list(args)
        self.stderr_path = stderr_path or data.parent / "indexd.stderr"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, wait: bool = True) -> None:
        """Starts indexd; with wait, until its status file names its pid (it is ready)."""
        argv = [str(self.binary), "--data", str(self.data), "--status", str(self.status_path)]
        argv += self.args
        if os.geteuid() == 0:
            argv.append("--allow-root")
        env = dict(os.environ)
        env.pop("LISTEN_FDS", None)
        env.pop("LISTEN_PID", None)
        preexec = None
        if self.fifo is not None:
            fd = self.fifo.fd
            env["LISTEN_FDS"] = "1"
            argv = ["sh", "-c", 'LISTEN_PID=$$ exec "$@"', "sh"] + argv

            def preexec() -> None:
                if fd != 3:
                    os.dup2(fd, 3)
                os.set_inheritable(3, True)  # (dup2(3, 3) would keep close-on-exec)

        err = open(self.stderr_path, "ab")
        try:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                preexec_fn=preexec,
                # Python's own fds are close-on-exec; fd 3 (dup2'ed) is not.
                close_fds=False,
            )
        finally:
            err.close()
        _STARTED.append(self.proc)
        self.starts += 1
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = 30) -> None:
        """Until the status file was written by this process."""
        proc = self.proc
        assert proc is not None

        def ours() -> bool:
            st = self.status(missing_ok=True)
            return st is not None and st.get("pid") == proc.pid

        def alive() -> None:
            if proc.poll() is not None:
                raise AssertionError(
                    f"indexd exited {proc.returncode} at start:\n{self.stderr()[-3000:]}"
                )

        wait_until(
            ours,
            "indexd wrote its status file",
            timeout,
            interval=0.01,
            check=alive,
            detail=lambda: self.stderr()[-3000:],
        )

    def status(self, missing_ok: bool = False) -> dict[str, Any] | None:
        """The --status JSON (None when missing and missing_ok)."""
        try:
            return json.loads(self.status_path.read_text())
        except FileNotFoundError:
            if missing_ok:
                return None
            raise

    def wait_status(
        self,
        pred: Callable[[dict[str, Any]], bool],
        what: str,
        timeout: float = 60,
        alive: bool = False,
    ) -> dict[str, Any]:
        """Until the status file satisfies pred; returns that status. The failure shows the
        status last read and the tail of stderr; with alive, indexd exiting fails at once."""
        seen: list[dict[str, Any] | None] = [None]

        def matches() -> dict[str, Any] | None:
            seen[0] = st = self.status(missing_ok=True)
            return st if st is not None and pred(st) else None

        def running() -> None:
            assert self.proc is not None and self.proc.poll() is None, self.stderr()[-3000:]

        return wait_until(
            matches,
            what,
            timeout,
            interval=0.05,
            check=running if alive else None,
            detail=lambda: f"status: {seen[0]}\n{self.stderr()[-3000:]}",
        )

    def wait_stored(self, n: int, timeout: float = 60) -> dict[str, Any]:
        """Until the status says at least n stored (by this process); returns the status."""
        return self.wait_status(lambda st: st["stored"] >= n, f"indexd stored {n}", timeout)

    def wait_logged(self, text: str, what: str, timeout: float = 10) -> None:
        """Until stderr holds text (a reload's log line, say); the failure shows stderr's tail."""
        wait_until(
            lambda: text in self.stderr(),
            what,
            timeout,
            interval=0.05,
            detail=lambda: self.stderr()[-3000:],
        )

    def kill(self) -> None:
        """SIGKILL and reap."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM; returns the exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""


def started_mark() -> int:
    """A mark for reap_since: how many indexds have been started so far."""
    return len(_STARTED)


def reap_since(mark: int) -> int:
    """SIGKILLs and reaps every indexd started after mark that still runs (a test that failed
    before stopping it); how many there were. Those started before (a module's fixture) stay."""
    left = 0
    while len(_STARTED) > mark:
        proc = _STARTED.pop()
        if proc.poll() is None:
            left += 1
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
    return left


def messages(logbox: Path, data: Path, logspace: str = "main") -> list[dict[str, Any]]:
    """Every message of a logspace, via `logbox cat --data D --logspace L` (NDJSON)."""
    p = subprocess.run(
        [str(logbox), "cat", "--data", str(data), "--logspace", logspace],
        capture_output=True,
        timeout=600,
    )
    if p.returncode != 0:
        raise AssertionError(f"logbox cat failed ({p.returncode}): {p.stderr.decode()[-2000:]}")
    return [json.loads(line) for line in p.stdout.decode("utf-8").splitlines() if line]


def raw(s: str) -> bytes:
    """The bytes of a JSON string from `logbox cat` (non-UTF-8 bytes come as \\udcXX)."""
    return s.encode("utf-8", "surrogateescape")


def write_fifo(fifo: HeldFifo, data: bytes) -> None:
    """Writes data into the held FIFO through a writer of its own, 1 MiB at a time."""
    w = fifo.writer()
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(w, view[: 1 << 20]) :]
    finally:
        os.close(w)


def send_socket(path: Path, data: bytes) -> None:
    """Sends data to indexd's --listen socket at path on one connection, then closes it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(path))
        s.sendall(data)


def kill_while(
    d: Indexd, busy: Callable[[], bool], *, most: int, pause: float, restart_pause: float
) -> int:
    """SIGKILLs d and starts it again at random moments (up to pause s apart, restarted after up
    to restart_pause s): at least 6 times, then while busy() and fewer than most. The kills."""
    rnd = random.Random()
    kills = 0
    while kills < 6 or (busy() and kills < most):
        time.sleep(rnd.uniform(0.02, pause))
        d.kill()
        kills += 1
        time.sleep(rnd.uniform(0, restart_pause))
        d.start()
    return kills
