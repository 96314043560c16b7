"""What the bench scripts share: the options naming the programs and the output folder, the
machine description, the statistics (median, nearest-rank percentile), a keep-alive HTTP
client, and writing the report pair (<name>.md and <name>.json) under build/bench/.

Each script keeps what is its own: its loads, its baselines, its tables and its targets.
Not a test helper (tests/lbtest is): nothing here starts a daemon.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import platform
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
OUT = TOP / "build" / "bench"


def say(msg: str) -> None:
    """Prints one line, flushed (a bench runs for minutes: its progress shows as it goes)."""
    print(msg, flush=True)


# ---------------------------------------------------------------- options


def add_program_options(ap: argparse.ArgumentParser, *names: str) -> None:
    """--logbox, --indexd, --searchd (those named): the built programs, defaulting to
    $LOGBOX_BIN, $LOGBOX_INDEXD_BIN, $LOGBOX_SEARCHD_BIN, else build/bin/."""
    for name in names:
        env, binary = _PROGRAMS[name]
        ap.add_argument(
            f"--{name}", type=Path, default=Path(os.environ.get(env, TOP / "build/bin" / binary))
        )


_PROGRAMS = {
    "logbox": ("LOGBOX_BIN", "logbox"),
    "indexd": ("LOGBOX_INDEXD_BIN", "logbox-indexd"),
    "searchd": ("LOGBOX_SEARCHD_BIN", "logbox-searchd"),
}


def add_out_option(ap: argparse.ArgumentParser) -> None:
    """--out: where the reports (and the cached corpora and stores) go; build/bench."""
    ap.add_argument("--out", type=Path, default=OUT)


def find_shared(env: str, rel: str) -> Path:
    """$env, else the first shared/<rel> beside the repository or one of its parents (a
    worktree sits deeper than the main checkout)."""
    if os.environ.get(env):
        return Path(os.environ[env])
    for p in [TOP, *TOP.parents]:
        if (p / "shared" / rel).exists():
            return p / "shared" / rel
    return TOP.parent / "shared" / rel


# ---------------------------------------------------------------- the machine


def cpu_model() -> str:
    """The first "model name" of /proc/cpuinfo ("?" when there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def mem_bytes() -> int:
    """MemTotal of /proc/meminfo in bytes (0 when unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def machine() -> dict[str, Any]:
    """nproc, CPU model, kernel, memory (GiB) and the load average, as the reports give them."""
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "kernel": platform.release(),
        "mem_gib": round(mem_bytes() / 2**30, 1),
        "loadavg": os.getloadavg(),
    }


def machine_line(m: Mapping[str, Any]) -> str:
    """The first line each bench prints: "machine: 2 CPUs, <model>, 7.8 GiB, kernel ..."."""
    return (
        f"machine: {m['nproc']} CPUs, {m['cpu']}, {m['mem_gib']} GiB, kernel {m['kernel']}, "
        f"load {m['loadavg'][0]:.2f}"
    )


# ---------------------------------------------------------------- messages

WORDS = (
    "session opened closed for user root from port ssh2 accepted publickey error warning "
    "kernel usb device connected disconnected eth0 link up down timeout retry backend"
).split()


def word_messages(size: int = 150, distinct: int = 4096) -> list[str]:
    """distinct messages (seed 1) of exactly size characters, made of WORDS and numbers: the
    feed benches' bodies."""
    rnd = random.Random(1)
    msgs = []
    for _ in range(distinct):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < size:
            words.append(rnd.choice(WORDS) if rnd.random() < 0.7 else str(rnd.randrange(10**6)))
        msgs.append(" ".join(words)[:size])
    return msgs


# ---------------------------------------------------------------- statistics


def du(path: Path) -> int:
    """The apparent size of every file under path (files vanishing meanwhile, as a merge
    removes them, count 0)."""
    n = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                n += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return n


def median(v: Sequence[float]) -> float | None:
    """The median, None for no values."""
    return statistics.median(v) if v else None


def pct(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile p (0-100] of values (not empty)."""
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def fmt(x: float | None, spec: str = ",.2f") -> str:
    """x formatted by spec, "—" for None (a figure that was not measured)."""
    return "—" if x is None else format(x, spec)


# ---------------------------------------------------------------- HTTP


class KeepAlive:
    """One keep-alive HTTP connection, made by connect() when needed: GET reopens it once when
    the server closed it. connects counts the connections made."""

    def __init__(
        self,
        connect: Callable[[], http.client.HTTPConnection],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.connect = connect
        self.headers = dict(headers or {})
        self.conn: http.client.HTTPConnection | None = None
        self.connects = 0

    def get(self, url: str) -> tuple[int, bytes]:
        """GET url: the status and the body."""
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = self.connect()
                self.connects += 1
            try:
                self.conn.request("GET", url, headers=self.headers)
                r = self.conn.getresponse()
                body = r.read()
                if r.will_close:
                    self.conn.close()
                    self.conn = None
                return r.status, body
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


# ---------------------------------------------------------------- the report


def write_report(
    out: Path, name: str, text: str, raw: Any, indent: int = 2, default: Any = None
) -> None:
    """Writes out/<name>.md (text) and out/<name>.json (raw), then prints the text and where
    both went."""
    (out / f"{name}.md").write_text(text)
    (out / f"{name}.json").write_text(json.dumps(raw, indent=indent, default=default) + "\n")
    say("")
    say(text)
    say(f"wrote {out / f'{name}.md'} and {name}.json")
