"""`make run`'s supervisor (appliance/devrun.py) started by a test on a data directory, its output
read line by line, stopped with Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from logbox_client import Client, LogboxError

from lbtest.collector import free_port


class DevRun:
    """appliance/devrun.py on a data directory, its output read line by line."""

    def __init__(self, top: Path, data: Path, extra: dict[str, str] | None = None) -> None:
        """Starts it with extra in its environment; the RPC API on a free port, and no
        LOGBOX_ADMIN_PASSWORD unless extra has one."""
        self.top = top
        self.data = data
        self.started = time.time()
        self.rpc_port = free_port()
        self.webui_port = free_port()
        env = dict(
            os.environ,
            LOGBOX_DATA=str(data),
            LOGBOX_RPC_PORT=str(self.rpc_port),
            LOGBOX_WEBUI_PORT=str(self.webui_port),
        )
        env.pop("LOGBOX_ADMIN_PASSWORD", None)
        env.update(extra or {})
        self.proc = subprocess.Popen(
            [sys.executable, str(top / "appliance" / "devrun.py")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []

    def until(self, text: str, timeout: float = 30) -> str:
        """Read lines until one holds text; returns it."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if text in line:
                return line
        pytest.fail(f"no line with {text!r}: {self.lines}")

    def api(
        self, user: str | None = None, password: str | None = None, timeout: float = 60
    ) -> Client:
        """A client of the API it serves, once GET /health answers (the daemons start in the
        background); signed in as user with password when given."""
        c = Client(
            f"https://127.0.0.1:{self.rpc_port}",
            verify=str(self.data / "tls" / "https.crt"),
            timeout=10,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                c.health()
                break
            except LogboxError as e:
                if time.monotonic() > deadline:
                    pytest.fail(f"the API did not answer within {timeout} s: {e}: {self.lines}")
                time.sleep(0.1)
        if user is not None:
            c.login(user, password or "")
        return c

    def stop(self, timeout: float = 30) -> str:
        """Ctrl-C (SIGINT), and its whole output once it has exited."""
        self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=timeout)
        return out

    def close(self) -> None:
        """Stop it (and so its daemons) if a test left it running; SIGKILL would orphan them."""
        if self.proc.poll() is None:
            try:
                self.stop()
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
