"""The spool in tests: a strict Python reader of the spool records of indexer/FORMAT.md §13 (the
tests' copy of the record rule, written from the text, not from indexd's code) and a reader
that follows the spool files syslog-ng writes, without taking them; and writers of records and
spool files for indexd's tests and benchmarks. Nothing here knows indexd.

    "LS1" SP rtime SP listener SP peer SP length LF <length raw bytes> LF
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lbtest.wait import wait_until

MAGIC = b"LS1 "
# A header line: rtime with exactly 6 fraction digits, the listener name, the peer (an IP
# address as text, or "-"), the decimal length (no leading zero).
HEADER_RE = re.compile(
    rb"LS1 ([0-9]+\.[0-9]{6}) ([a-z0-9_-]{1,32}) (-|[0-9A-Fa-f.:]{2,45}) (0|[1-9][0-9]{0,11})\n"
)
# Longer than any header that parses (3 + 1 + 17 + 1 + 32 + 1 + 45 + 1 + 12 + 1 bytes).
HEADER_SCAN = 128
FILE_RE = re.compile(r"([0-9]{8}T[0-9]{6})\.([0-9a-z]{1,32})\.lbs")


class RecordError(ValueError):
    """Bytes that are not a record of FORMAT.md §13.1 where a record must start."""


@dataclass
class Record:
    """One spool record: the header fields as text, the message bytes as received."""

    rtime: str
    listener: str
    peer: str
    raw: bytes
    file: str = ""  # the spool file's name, when read from one
    offset: int = 0  # where the record starts in it

    @property
    def msg(self) -> bytes:
        """The message bytes (the name the frame reader used)."""
        return self.raw


def parse_one(buf: bytes, pos: int) -> tuple[Record, int] | None:
    """The record at buf[pos:] and the offset after it, or None when buf ends before the record
    does (it may still be written).

    :raises RecordError: the bytes at pos are not a record (a bad header, or no LF after the
        message)."""
    nl = buf.find(b"\n", pos, pos + HEADER_SCAN)
    if nl < 0:
        if not MAGIC.startswith(buf[pos : pos + 4]):
            raise RecordError(f"no record at {pos}: {buf[pos:pos + 40]!r}")
        if len(buf) - pos >= HEADER_SCAN:
            raise RecordError(f"header longer than {HEADER_SCAN} bytes at {pos}")
        return None
    m = HEADER_RE.fullmatch(buf, pos, nl + 1)
    if m is None:
        raise RecordError(f"bad header at {pos}: {buf[pos:nl]!r}")
    end = nl + 1 + int(m.group(4))
    if len(buf) < end + 1:
        return None
    if buf[end] != 0x0A:
        raise RecordError(f"no LF after the message of the record at {pos}")
    rec = Record(
        rtime=m.group(1).decode(),
        listener=m.group(2).decode(),
        peer=m.group(3).decode(),
        raw=buf[nl + 1 : end],
        offset=pos,
    )
    return rec, end + 1


def decode(buf: bytes) -> tuple[list[Record], bytes]:
    """The complete records at the head of buf and the bytes left after them (a record still
    being written). Strict: anything that is not a record raises RecordError."""
    out = []
    pos = 0
    while pos < len(buf):
        got = parse_one(buf, pos)
        if got is None:
            break
        rec, pos = got
        out.append(rec)
    return out, buf[pos:]


def resync(buf: bytes, pos: int) -> int | None:
    """Where reading resumes after a torn record at pos: the next "LS1 " at a line start whose
    header parses and whose message is followed by LF; None when there is none (yet)."""
    at = pos
    while True:
        at = buf.find(b"\n" + MAGIC, at)
        if at < 0:
            return None
        at += 1
        try:
            if parse_one(buf, at) is not None:
                return at
        except RecordError:
            pass


def decode_file(data: bytes) -> tuple[list[Record], int]:
    """Every record of a whole spool file that no one writes any more, and the number of torn
    records skipped (bytes that are not a whole record, up to the next record or the end)."""
    out, torn, pos = [], 0, 0
    while pos < len(data):
        try:
            got = parse_one(data, pos)
        except RecordError:
            got = None
        if got is not None:
            out.append(got[0])
            pos = got[1]
            continue
        torn += 1
        nxt = resync(data, pos)
        if nxt is None:
            break
        pos = nxt
    return out, torn


@dataclass
class SpoolReader:
    """Follows the spool files syslog-ng writes in spool (oldest name first), reading each from
    where it stopped; keeps the records, syslog-ng's own (listener "internal") apart in
    .internal. Strict: a record that does not decode fails the test. Files are not taken."""

    spool: Path
    records: list[Record] = field(default_factory=list)
    internal: list[Record] = field(default_factory=list)
    read_to: dict[str, int] = field(default_factory=dict)  # file name -> bytes decoded

    def files(self) -> list[Path]:
        """The spool files there are now, oldest name first."""
        if not self.spool.is_dir():
            return []
        return sorted(p for p in self.spool.iterdir() if FILE_RE.fullmatch(p.name))

    def poll(self) -> list[Record]:
        """Read what the files hold now; returns the new records (not syslog-ng's own)."""
        new: list[Record] = []
        for path in self.files():
            start = self.read_to.get(path.name, 0)
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read()
            recs, rest = decode(data)
            for r in recs:
                r.file, r.offset = path.name, r.offset + start
            self.read_to[path.name] = start + len(data) - len(rest)
            for r in recs:
                (self.internal if r.listener == "internal" else new).append(r)
        self.records += new
        return new

    def wait(self, n: int, timeout: float = 10.0) -> list[Record]:
        """Wait until n records (in total since the last take()) arrived; returns them all."""
        deadline = time.monotonic() + timeout
        while len(self.records) < n and time.monotonic() < deadline:
            if not self.poll():
                time.sleep(0.02)
        return list(self.records)

    def take(self, n: int, timeout: float = 10.0) -> list[Record]:
        """Exactly n records (failing on fewer), removed from the kept ones."""
        got = self.wait(n, timeout)
        assert len(got) >= n, f"{len(got)} records of {n} arrived: {got[:3]}..."
        self.records = self.records[n:]
        return got[:n]

    def quiet(self, seconds: float = 0.5) -> list[Record]:
        """Records that arrive within seconds (for checking that nothing arrives)."""
        time.sleep(seconds)
        self.poll()
        out, self.records = self.records, []
        return out


# ---------------------------------------------------------------- writing spool files
# (indexd's tests and benchmarks write the spool themselves, in the documented format)


def record(raw: bytes, rtime: float, listener: str = "tcp", peer: str = "-") -> bytes:
    """One spool record: "LS1 rtime listener peer length" LF raw LF."""
    head = b"LS1 %.6f %s %s %d\n" % (rtime, listener.encode(), peer.encode(), len(raw))
    return head + raw + b"\n"


def file_name(t: float, run: str = "t1") -> str:
    """The spool file name YYYYMMDDTHHMMSS.<run>.lbs for the UTC second of t."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(t)) + f".{run}.lbs"


def write_file(spool: Path, name: str, data: bytes) -> Path:
    """Appends data to spool/name in one go and closes it (the directory is made if missing)."""
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


def wait_spool_empty(
    spool: Path, timeout: float = 60, detail: Callable[[], str] | None = None
) -> None:
    """Until every file of the spool is gone (stored and deleted); the failure names what is
    left, then detail() (indexd's stderr, say)."""
    wait_until(
        lambda: not spool_files(spool),
        "the spool is empty",
        timeout,
        interval=0.05,
        detail=lambda: f"left in the spool: {spool_files(spool)}"
        + ("\n" + detail() if detail else ""),
    )
