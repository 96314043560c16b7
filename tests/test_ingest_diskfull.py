# Scenario (issue 15, defect 5): a full data file system is survived without a restart. The data
# directory (store, catalog, the collector's disk buffer, indexd's status file) is a 64 MiB tmpfs.
# Two senders write sequence-numbered messages over TCP; a filler file fills the file system to
# the last byte in the middle; later the filler is removed. Nothing is restarted. Checked: every
# sequence number the senders wrote is stored exactly once; while full, indexd's status said
# "disk full" (with the reserve and what is held back) and the status file kept being rewritten
# though its file system was full; within seconds of the space returning the hold ended by
# itself. Run twice: with the default free-space reserve (indexd holds before the disk is full)
# and with no reserve (indexd's writes meet ENOSPC itself: the message file and segment writers
# must retry, not fail for good). Root only (mount); skipped otherwise.
from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lbtest.appliance import Appliance

PER_SENDER = 40_000
SENDERS = 2
TMPFS = "64m"
PAD = "x" * 120  # ~200-byte lines: 16 MB in all, the filler takes the rest
RECOVER_S = 30  # "within seconds", generous for a loaded 2-core box


def _line(sender: int, seq: int) -> bytes:
    return f"<13>Nov 25 16:00:00 h{sender} diskfull: s={sender} n={seq:06d} {PAD}\n".encode()


def _send(
    sock: socket.socket, sender: int, full: threading.Event, errors: list[BaseException]
) -> None:
    """The first half, then (once the disk is full) the second half: it is written while the
    disk is full, into syslog-ng's buffers and the connection's."""
    try:
        with sock:
            for start in range(0, PER_SENDER, 500):
                if start == PER_SENDER // 2:
                    full.wait(120)
                batch = b"".join(
                    _line(sender, n) for n in range(start, min(start + 500, PER_SENDER))
                )
                sock.sendall(batch)
    except BaseException as e:  # (reported by the test)
        errors.append(e)


def _fill(path: Path) -> int:
    """Writes path until the file system has no byte left; returns its size."""
    size = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        chunk = 1 << 20
        while chunk:
            try:
                size += os.write(fd, b"F" * chunk)
            except OSError:
                chunk //= 2
    finally:
        os.close(fd)
    return size


def _status(app: Appliance) -> dict[str, Any]:
    return app.status()


@pytest.fixture
def data_tmpfs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting the small tmpfs that is filled needs root")
    data = tmp_path / "appliance" / "data"
    data.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS}", "tmpfs", str(data)], check=True)
    try:
        yield data
    finally:
        subprocess.run(["umount", "-l", str(data)], check=False)


@pytest.mark.parametrize("reserve", ["default", "none"])
def test_full_disk_survived(tmp_path: Path, data_tmpfs: Path, reserve: str) -> None:
    args = ["--reserve-percent", "0"] if reserve == "none" else []
    app = Appliance(
        tmp_path,
        udp=False,
        indexd_args=args,
        collector={"log_msg_size": 65536},
        buffer={"size": 8 << 20, "mem_size": 1 << 20},
        prealloc=True,
    )
    # The status file on the file system that fills up, as under `make run` (<data>/run).
    (app.data / "run").mkdir()
    app.status_file = app.data / "run" / "indexd.status.json"
    filler = app.data / "filler"
    with app:
        errors: list[BaseException] = []
        full = threading.Event()
        socks = [app.connect("tcp", timeout=120) for _ in range(SENDERS)]
        threads = [
            threading.Thread(target=_send, args=(s, i, full, errors), daemon=True)
            for i, s in enumerate(socks)
        ]
        for t in threads:
            t.start()
        app.wait_count(5000, exact=False, timeout=120)

        filled = _fill(filler)
        assert filled > 0
        full.set()
        full_seen: dict[str, Any] | None = None
        deadline = time.monotonic() + 60
        while full_seen is None and time.monotonic() < deadline:
            st = _status(app)
            if (st.get("disk") or {}).get("full") and st.get("holding"):
                full_seen = st
            time.sleep(0.1)
        # Full for a while: the status file (on the full file system) is still rewritten, and
        # with a reserve nothing is stored meanwhile (without one, a write may still fit in a
        # page a file already has).
        stored_while_full = app.count()
        written: set[str] = set()
        held_back = 0
        until = time.monotonic() + 4
        while time.monotonic() < until:
            st = _status(app)
            written.add(st.get("written") or "")
            held_back = max(held_back, (st.get("disk") or {}).get("held_back_bytes") or 0)
            time.sleep(0.2)
        written.discard("")
        if reserve == "default":
            assert app.count() == stored_while_full

        filler.unlink()
        freed = time.monotonic()
        ended_after = None
        while time.monotonic() - freed < RECOVER_S:
            st = _status(app)
            if not st.get("holding") and not (st.get("disk") or {}).get("full"):
                ended_after = time.monotonic() - freed
                break
            time.sleep(0.1)

        for t in threads:
            t.join(timeout=180)
        assert not errors, f"a sender failed: {errors!r}"
        total = SENDERS * PER_SENDER
        app.wait_count(total, exact=False, timeout=300)
        app.assert_alive()
        assert app.starts == {"indexd": 1, "syslog-ng": 1}

        seen = [bytearray(PER_SENDER) for _ in range(SENDERS)]
        for m in app.iter_messages():
            body = m["message"]
            fields = dict(f.split("=", 1) for f in body.split()[:2])
            seen[int(fields["s"])][int(fields["n"])] += 1
        for s in range(SENDERS):
            missing = [n for n in range(PER_SENDER) if seen[s][n] == 0]
            twice = [n for n in range(PER_SENDER) if seen[s][n] > 1]
            assert not missing, f"sender {s}: {len(missing)} missing, first {missing[:5]}"
            assert not twice, f"sender {s}: {len(twice)} stored twice, first {twice[:5]}"
        assert app.count() == total

        # What the status said while the disk was full, and that it said so in time.
        assert full_seen is not None, f"the status never said disk full: {st}"
        disk = full_seen["disk"]
        assert disk["full"] is True and disk["since"]
        assert disk["reserve_bytes"] == (0 if reserve == "none" else (64 << 20) * 2 // 100)
        assert disk["free_bytes"] <= disk["reserve_bytes"] or "No space" in full_seen["holding"]
        assert held_back > 0, "the status never said what waits in the FIFO"
        assert len(written) >= 3, f"the status file was not rewritten while full: {written}"
        assert ended_after is not None, (
            f"still holding {RECOVER_S} s after the space returned: {_status(app)}\n"
            f"{app.stderr_of('indexd')[-2000:]}"
        )
        assert "holding ended" in app.stderr_of("indexd")
        print(f"\n{reserve}: the hold ended {ended_after:.1f} s after the space returned")
