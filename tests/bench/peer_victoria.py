"""VictoriaLogs as a peer of the search benchmark (tests/bench/search.py, issue 18).

The corpus is loaded once into a VictoriaLogs data directory cached under the bench's work
directory (vl-<VL_VERSION>-<VL_LOAD>/), through its syslog TCP listener: the line's own RFC 5424
time stamp is kept as _time (so the time ranges are those of the other engines), the host is
the stream field (hostname), the MSG part is _msg. Then a flush and a merge. The queries are
LogsQL over HTTP (/select/logsql/query and /select/logsql/hits), one persistent connection.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchlib import KeepAlive, du
from ingest_systems import VL_VERSION, free_port, vl_metric, wait_port

VL_LOAD = "load-1"  # bump when the way the corpus is loaded changes (reloads the data dir)

# logbox's default delimiters as an RE2 class (search.py's D, written for a LogsQL string)
_D = r"""[\s&:~?!\[\]=,;()'"/\\|<>{}*]"""
_ND = r"""[^\s&:~?!\[\]=,;()'"/\\|<>{}*]"""


def q(s: str) -> str:
    """A LogsQL quoted string (Go-style escapes)."""
    return json.dumps(s)


def rx(pattern: str) -> str:
    return f"~{q('(?i)' + pattern)}"


class Spellings:
    """The case spellings of a word (or a prefix, or a two-word phrase) in the corpus' MSG
    parts, found in the sample lines the corpus is made of (gencorpus only redraws digits):
    VictoriaLogs' word, phrase and prefix filters are case-sensitive and use its bloom filters,
    i(...) is case-insensitive but reads every block (50-100x slower on a rare word), so a
    case-insensitive word is sent as the OR of the spellings that occur."""

    W = "A-Za-z0-9_"  # what VictoriaLogs' words are made of (ASCII here)

    def __init__(self, templates: Path) -> None:
        lines = templates.read_bytes().decode(errors="replace").splitlines()
        self.text = "\n".join(ln.rsplit("\x1f", 1)[-1] for ln in lines)

    def find(self, pattern: str) -> list[str]:
        w = self.W
        return sorted(set(re.findall(f"(?i)(?<![{w}]){pattern}", self.text)))

    def word(self, word: str) -> str:
        return one_of(self.find(f"{re.escape(word)}(?![{self.W}])") or [word])

    def prefix(self, p: str) -> str:
        return one_of([f"{x}*" for x in self.find(re.escape(p)) or [p]])

    def phrase(self, a: str, b: str) -> str:
        found = self.find(f"{re.escape(a)}[^{self.W}]+{re.escape(b)}(?![{self.W}])")
        v = sorted({" ".join(re.split(f"[^{self.W}]+", x)) for x in found}) or [f"{a} {b}"]
        return one_of([q(x) for x in v])


def one_of(v: list[str]) -> str:
    return v[0] if len(v) == 1 else "(" + " or ".join(v) + ")"


def logsql(name: str, host: str, sp: Spellings) -> str | None:
    """The LogsQL of a search.py class (by name); see tests/bench/README.md for where its
    semantics differ from logbox's."""
    w = sp.word
    return {
        "rare token": w("trampoline"),
        "common token": w("info"),
        "AND of two": f"{w('failed')} {w('password')}",
        "OR of four": "("
        + " or ".join(w(x) for x in ("error", "failed", "timeout", "denied"))
        + ")",
        "NOT": f"{w('error')} -{w('kernel')}",
        "prefix appl*": sp.prefix("appl"),
        "leading *pple": rx(f"pple(?:{_D}|$)"),
        "infix *ppl*": rx("ppl"),
        "one-char wildcard pass?ord": rx(f"(?:^|{_D})pass{_ND}ord(?:{_D}|$)"),
        "all *": "*",
        'phrase "failed password"': sp.phrase("failed", "password"),
    }.get(name, f"_stream:{{hostname={q(host)}}}" if name.startswith("field host:") else None)


def rfc3339(t: int, ns: int = 0) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{ns:09d}Z"


def vl_request(
    op: str, query: str, t0: int, t1: int, step: int, bust: int, timeout: float = 0
) -> str:
    """The URL of one operation. The time range is [t0, t1]; t1 is moved by `bust` ns (no
    message is stamped in that nanosecond) so no two requests are the same text: whatever
    VictoriaLogs may cache by query text is missed, its block and bloom-filter caches are not."""
    p = {"start": rfc3339(t0), "end": rfc3339(t1, bust)}
    if timeout:
        p["timeout"] = f"{timeout:g}s"
    if op == "newest":
        path = "/select/logsql/query"
        p["query"] = f"{query} | sort by (_time desc) | limit 100"
    elif op == "count":
        path = "/select/logsql/query"
        p["query"] = f"{query} | stats count() n"
    elif op == "hist":
        path = "/select/logsql/hits"
        p.update(query=query, step=f"{step}s", offset=f"{t0 % step}s")
    else:
        path = "/select/logsql/query"
        p["query"] = f"{query} | top 10 by (hostname)"
    return path + "?" + urllib.parse.urlencode(p, quote_via=urllib.parse.quote)


def vl_result(op: str, body: bytes) -> Any:
    if op == "hist":
        hits = json.loads(body).get("hits", [])
        return sum(int(h.get("total", sum(h.get("values", [])))) for h in hits)
    rows = [json.loads(ln) for ln in body.splitlines() if ln.strip()]
    if op == "newest":
        return len(rows)
    if op == "count":
        return int(rows[0]["n"]) if rows else 0
    return [(r.get("hostname", ""), int(r.get("hits", 0))) for r in rows][:3]


# ---------------------------------------------------------------- the server


@dataclass
class VL:
    proc: subprocess.Popen
    url: str
    port: int
    log: Path

    def __post_init__(self) -> None:
        self.http = KeepAlive(lambda: http.client.HTTPConnection("127.0.0.1", self.port, 600))

    def get(self, path: str) -> tuple[int, bytes]:
        """GET path; a response cut short (VictoriaLogs ends a streamed answer that way when
        the query times out) is status 599 and the connection is made again."""
        try:
            return self.http.get(path)
        except http.client.HTTPException as e:
            self.http.close()
            self.http.conn = None
            return 599, f"{type(e).__name__}".encode()

    def stop(self) -> None:
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start(exe: Path, data: Path, syslog: bool = False) -> tuple[VL, int]:
    """victoria-logs on data (with a syslog TCP listener when syslog): (server, tcp port)."""
    hport = free_port()
    tport = free_port() if syslog else 0
    argv = [
        str(exe),
        f"-storageDataPath={data}",
        f"-httpListenAddr=127.0.0.1:{hport}",
        "-retentionPeriod=100y",
        "-futureRetention=100y",
        "-loggerLevel=WARN",
    ]
    if syslog:
        argv += [
            f"-syslog.listenAddr.tcp=127.0.0.1:{tport}",
            '-syslog.streamFields.tcp=["hostname"]',
        ]
    log = data.parent / "victoria-logs.stderr"
    with open(log, "ab") as err:
        proc = subprocess.Popen(argv, stdout=err, stderr=err)
    vl = VL(proc, f"http://127.0.0.1:{hport}", hport, log)
    try:
        wait_port(hport, proc, "victoria-logs", log)
        if syslog:
            wait_port(tport, proc, "victoria-logs", log)
    except RuntimeError:
        vl.stop()
        raise
    return vl, tport


def _metric(vl: VL, name: str) -> int:
    st, body = vl.get("/metrics")
    return vl_metric(body.decode(), name) if st == 200 else 0


def load(exe: Path, data: Path, corpus: Path, lines: int) -> dict[str, Any]:
    """The corpus into a fresh data dir: sent on one TCP connection, waited for, flushed,
    merged (force_merge, then until the size stands still)."""
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    vl, tport = start(exe, data, syslog=True)
    try:
        t = time.monotonic()
        with open(corpus, "rb") as f, socket.create_connection(("127.0.0.1", tport)) as s:
            while b := f.read(1 << 20):
                s.sendall(b)
        rows, last, last_t = 0, -1, time.monotonic()
        while rows < lines:
            rows = _metric(vl, "vl_rows_ingested_total")
            if rows != last:
                last, last_t = rows, time.monotonic()
            elif time.monotonic() - last_t > 30:
                break
            time.sleep(0.5)
        ingest_s = time.monotonic() - t
        dropped = _metric(vl, "vl_rows_dropped_total") + _metric(
            vl, "vl_too_long_lines_skipped_total"
        )
        vl.get("/internal/force_flush")
        time.sleep(3)
        t = time.monotonic()
        vl.get("/internal/force_merge")
        size, still = -1, 0
        while still < 3 and time.monotonic() - t < 600:
            time.sleep(2)
            n = du(data)
            still = still + 1 if n == size else 0
            size = n
        merge_s = time.monotonic() - t
        st, body = vl.get("/select/logsql/query?query=" + urllib.parse.quote("* | stats count() n"))
        stored = int(json.loads(body.splitlines()[0])["n"]) if st == 200 else -1
    finally:
        vl.stop()
    if stored != lines:
        raise RuntimeError(f"VictoriaLogs holds {stored:,} rows of {lines:,} (dropped {dropped})")
    return {
        "vl_version": VL_VERSION,
        "vl_load": VL_LOAD,
        "rows": stored,
        "dropped": dropped,
        "ingest_s": ingest_s,
        "merge_s": merge_s,
        "bytes": size,
    }


def time_query(
    vl: VL,
    op: str,
    query: str,
    repeats: int,
    t0: int,
    t1: int,
    step: int,
    bust: list[int],
    timeout: float = 0,
) -> dict[str, Any]:
    """One untimed run, then `repeats` timed ones, each a new request text (vl_request). A
    query VictoriaLogs stops at `timeout` seconds (its `timeout` argument) is not run again:
    {"error": ..., "timeout": timeout}."""
    times = []
    body = b""
    for i in range(repeats + 1):
        bust[0] += 1
        url = vl_request(op, query, t0, t1, step, bust[0] % 1_000_000_000, timeout)
        t = time.perf_counter()
        st, body = vl.get(url)
        dt = time.perf_counter() - t
        if st != 200 and timeout and dt >= 0.9 * timeout:
            return {"error": f"timed out (> {timeout:g} s)", "timeout": timeout, "logsql": query}
        if st != 200:
            return {"error": f"{st} {body[:300].decode(errors='replace')}", "logsql": query}
        if i:
            times.append(dt)
    return {"times": times, "result": vl_result(op, body), "logsql": query}
