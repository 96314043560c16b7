"""logbox-alertd (python -m logbox_core.alertd) run by a test on an accounts store: the daemon
that delivers alerts and the admin's test messages (the apps have no network)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType

from lbtest.gunicorn import TOP, venv_python


class Alertd:
    """One alertd on accounts (searchd at searchd_socket, possibly absent: alerts then wait,
    test messages are still sent), with the delivery settings file notify."""

    def __init__(self, work: Path, accounts: Path, notify: Path, searchd_socket: Path) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.log_path = work / "alertd.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop)
        env = dict(
            os.environ,
            PYTHONPATH=str(TOP / "rpc"),
            LOGBOX_ALLOW_ROOT="1",
        )
        self.proc = subprocess.Popen(
            [
                venv_python(), "-m", "logbox_core.alertd", "--accounts", str(accounts),
                "--searchd", str(searchd_socket), "--state", str(work / "state.json"),
                "--status", str(work / "status.json"), "--delivery", str(notify),
            ],
            env=env, stdout=self._log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not (work / "status.json").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"logbox-alertd did not start:\n{self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def __enter__(self) -> Alertd:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
