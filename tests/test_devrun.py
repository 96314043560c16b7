# Scenario: `make run`'s supervisor prepares the data directory from LOGBOX_DATA, says what it
# started, and stops cleanly (exit 0) on Ctrl-C.
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def test_devrun_starts_and_stops_on_ctrl_c(top: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = dict(os.environ, LOGBOX_DATA=str(data))
    proc = subprocess.Popen(
        [sys.executable, str(top / "appliance" / "devrun.py")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "press Ctrl-C" in line:
            break
    assert any("press Ctrl-C" in ln for ln in lines), lines
    assert any(str(data) in ln for ln in lines), lines
    assert data.is_dir()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert "all stopped" in out
