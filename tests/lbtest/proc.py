"""Stopping a process a helper started (searchd, gunicorn and nginx, syslog-ng, the appliance's
daemons): the one signal-wait-SIGKILL sequence they share. Whether a hang fails the test is
the caller's to say."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def stop_process(
    proc: subprocess.Popen[bytes],
    sig: int = signal.SIGTERM,
    timeout: float = 20,
    group: bool = False,
) -> bool:
    """Sends sig to proc (unless it has exited) and waits up to timeout s; if it hangs,
    SIGKILL (to its whole process group with group) and reap. Whether it exited by itself."""
    if proc.poll() is not None:
        return True
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
        return True
    except subprocess.TimeoutExpired:
        if group:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        proc.wait()
        return False
