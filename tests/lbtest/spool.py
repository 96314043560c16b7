"""The spool syslog-ng writes and indexd reads (indexer/FORMAT.md §13), written by tests and
benchmarks: one record, a file of records under the documented name, and the names indexd gives
the files it takes. Nothing here knows indexd's state file."""

from __future__ import annotations

import os
import time
from pathlib import Path


def record(raw: bytes, rtime: float, listener: str = "tcp", peer: str = "-") -> bytes:
    """One spool record: "LS1 rtime listener peer length" LF raw LF."""
    return (
        b"LS1 %.6f %s %s %d\n" % (rtime, listener.encode(), peer.encode(), len(raw)) + raw + b"\n"
    )


def file_name(t: float, run: str = "t1") -> str:
    """<spool>/YYYYMMDDTHHMMSS.<run>.lbs for the UTC second of t."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(t)) + f".{run}.lbs"


def write_file(spool: Path, name: str, data: bytes) -> Path:
    """Writes (appends) data to spool/name in one go and closes it."""
    spool.mkdir(parents=True, exist_ok=True)
    p = spool / name
    with open(p, "ab") as f:
        f.write(data)
    return p


def spool_files(spool: Path) -> list[str]:
    """The names in the spool directory (taken or not), sorted."""
    try:
        return sorted(os.listdir(spool))
    except FileNotFoundError:
        return []
