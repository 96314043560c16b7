#!/usr/bin/env python3
"""Run the logbox appliance locally, in the foreground, the way systemd runs it on the box.

`make run` calls this after building. It prepares the data directory (``LOGBOX_DATA``, default
``./var``), starts every service whose program exists so far, restarts a service that dies within
a second (printing the restart), and stops everything cleanly on Ctrl-C or SIGTERM.

Services are added to ``services()`` as they come to exist; a service whose program is not
built yet is listed as "not built yet" rather than pretended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
BIN = TOP / "build" / "bin"
RESTART_DELAY = 0.5  # seconds between a death and the restart: "within a second"


@dataclass
class Service:
    """One supervised daemon: how to start it and what it serves."""

    name: str
    argv: list[str]
    serves: str
    needs: Path  # the program that must exist for the service to run
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    env: dict[str, str] = field(default_factory=dict)


def run_dir(data: Path) -> Path:
    """Where sockets live: <data>/run."""
    return data / "run"


def services(data: Path) -> list[Service]:
    """The appliance's daemons, in start order, for a data directory."""
    # Filled in as the daemons come to exist (collector, indexd, searchd, webui, rpc).
    root = ["--allow-root"] if os.geteuid() == 0 else []
    searchd_sock = run_dir(data) / "searchd.sock"
    return [
        Service(
            name="logbox-searchd",
            argv=[
                str(BIN / "logbox-searchd"),
                "--data",
                str(data),
                "--socket",
                str(searchd_sock),
                *root,
            ],
            serves=f"search on unix socket {searchd_sock}",
            needs=BIN / "logbox-searchd",
        ),
    ]


def prepare(data: Path) -> None:
    """Create the data directory, its run directory and the default logspace `main`."""
    data.mkdir(parents=True, exist_ok=True)
    run_dir(data).mkdir(exist_ok=True)
    cli = BIN / "logbox"
    if cli.exists() and not (data / "catalog").exists():
        # Ingesting nothing creates the catalog and the logspace, as indexd will.
        subprocess.run(
            [str(cli), "ingest", "--data", str(data), os.devnull],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def log(msg: str) -> None:
    """Print one supervisor line, flushed so it interleaves with the daemons' output."""
    print(f"logbox-run: {msg}", flush=True)


def start(svc: Service) -> None:
    """Start svc in its own process group so a Ctrl-C reaches only the supervisor first."""
    env = dict(os.environ)
    env.update(svc.env)
    svc.proc = subprocess.Popen(svc.argv, env=env, start_new_session=True)


def stop_all(running: list[Service]) -> None:
    """SIGTERM every service (last started first), then SIGKILL what is left after 10 s."""
    for svc in reversed(running):
        if svc.proc is not None and svc.proc.poll() is None:
            svc.proc.terminate()
    deadline = time.monotonic() + 10
    for svc in reversed(running):
        if svc.proc is None:
            continue
        try:
            svc.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log(f"{svc.name} did not stop in 10 s: killing it")
            svc.proc.kill()
            svc.proc.wait()
        log(f"stopped {svc.name}")


def main() -> int:
    """Start, supervise and stop the local appliance."""
    data = Path(os.environ.get("LOGBOX_DATA", TOP / "var")).resolve()
    prepare(data)
    log(f"data directory {data}")

    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        del signum, frame
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    running: list[Service] = []
    for svc in services(data):
        if not svc.needs.exists():
            log(f"{svc.name}: not built yet ({svc.needs})")
            continue
        start(svc)
        running.append(svc)
        log(f"started {svc.name} (pid {svc.proc.pid if svc.proc else '?'}): {svc.serves}")
    if not running:
        log("no daemon exists yet; the CLI is at build/bin/logbox")
    log("press Ctrl-C to stop")

    while not stopping:
        time.sleep(0.2)
        for svc in running:
            if svc.proc is None or svc.proc.poll() is None:
                continue
            code = svc.proc.returncode
            time.sleep(RESTART_DELAY)
            if stopping:
                break
            svc.restarts += 1
            start(svc)
            log(f"{svc.name} exited with {code}; restarted (restart #{svc.restarts})")
    stop_all(running)
    log("all stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
