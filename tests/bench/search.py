#!/usr/bin/env python3
"""Search benchmark (issue 4; run by `make bench` after the ingest bench, or `make bench-search`;
not a test, it never fails on a missed target).

Builds, once, and caches under build/bench/search-<VERSION>-<N>-<seed>/:
  - corpus.log: N (default 20 M) time-sorted RFC 5424 lines made from the loghub samples by
    tests/bench/gencorpus.c (each sample line repeated with a host out of ~3,200, a pid per
    stream, 30 % of its digit runs redrawn, time stamps over 7 days with a day/night rhythm);
  - store/: `logbox ingest --received header --sync none` of that file (receive time = the
    line's own time stamp), built on tmpfs when there is room and moved here;
  - chdb/: the same lines in chDB (ts, host, msg; tokenbf_v1 index on lower(msg)), loaded by
    tests/bench/peer_chdb.py in build/bench/venv-peer (tests/bench/requirements-bench.txt);
  - store-old-<version>-<hash>/ (--baseline DIR): the same ingest by an older build's logbox;
  - vl-<VL_VERSION>-<load>/data/: the same lines in VictoriaLogs (tests/bench/peer_victoria.py).
Then, on the warm cache, times every query class x {newest 100, count, 100-bucket histogram,
top-10 hosts} over the whole time range through logbox-searchd (HTTP over its unix socket,
one persistent connection; with --baseline the old searchd beside it, interleaved), ripgrep
over corpus.log, chDB and VictoriaLogs (LogsQL over HTTP), and prints markdown tables
(tests/bench/search_report.py: issue 18's verdicts among them), also written to
build/bench/search-results.md (and the raw numbers to search-results.json).
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import math
import os
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(TOP / "tests"))

import peer_victoria  # noqa: E402
from benchlib import (  # noqa: E402
    KeepAlive,
    add_out_option,
    add_program_options,
    find_shared,
    machine,
    machine_line,
    pct,
    say,
    write_report,
)
from ingest_systems import VL_VERSION, victoria_binary  # noqa: E402
from lbtest import corpus  # noqa: E402
from search_report import (  # noqa: E402
    BUCKETS,
    NOISE,
    OP_TITLE,
    OPS,
    counts_table,
    fmt_ms,
    issue_table,
    table,
)

VERSION = "v1"  # bump when the corpus or the store build change
PEER_VERSION = "chdb-3"  # bump when the peer's table changes (rebuilds chdb/ alone)
START = 1793491200  # 2026-11-01T00:00:00Z
SPAN = 7 * 86400
HOSTS_PER_SYSTEM = 200
# The tokenizer's default delimiters (LB_DEFAULT_DELIMS plus whitespace) as a regex class, so
# the baselines' token boundaries are those of logbox (a Rust regex / RE2 class).
D = r"""[\s&:~?!\[\]=,;()'"/\\|<>{}*]"""
ND = r"""[^\s&:~?!\[\]=,;()'"/\\|<>{}*]"""
B = f"(?:^|{D})"
E = f"(?:{D}|$)"


def sql_str(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def has(tok: str) -> str:
    return f"hasToken(lower(msg), {sql_str(tok)})"


def rx(pattern: str) -> str:
    return f"match(lower(msg), {sql_str(pattern)})"


@dataclass
class QClass:
    """One query class: the logbox query, the ripgrep pipeline stages (each a list of rg
    arguments; "-v" first inverts the stage), the chDB WHERE condition."""

    name: str
    q: str
    rg: list[list[str]]
    ch: str
    note: str = ""
    counts: dict[str, Any] = field(default_factory=dict)


def classes(host: str) -> list[QClass]:
    def tok(t: str) -> list[str]:
        return ["-i", f"{B}{t}{E}"]

    return [
        QClass("rare token", "trampoline", [tok("trampoline")], has("trampoline")),
        QClass("common token", "info", [tok("info")], has("info")),
        QClass(
            "AND of two",
            "failed AND password",
            [tok("failed"), tok("password")],
            f"{has('failed')} AND {has('password')}",
        ),
        QClass(
            "OR of four",
            "error OR failed OR timeout OR denied",
            [["-i", f"{B}(?:error|failed|timeout|denied){E}"]],
            " OR ".join(has(t) for t in ("error", "failed", "timeout", "denied")),
        ),
        QClass(
            "NOT",
            "error NOT kernel",
            [tok("error"), ["-v", *tok("kernel")]],
            f"{has('error')} AND NOT {has('kernel')}",
        ),
        QClass("prefix appl*", "appl*", [["-i", f"{B}appl"]], rx(f"{B}appl")),
        QClass("leading *pple", "*pple", [["-i", f"pple{E}"]], rx(f"pple{E}")),
        QClass("infix *ppl*", "*ppl*", [["-i", "ppl"]], "position(lower(msg), 'ppl') > 0"),
        QClass(
            "one-char wildcard pass?ord",
            "pass?ord",
            [["-i", f"{B}pass{ND}ord{E}"]],
            rx(f"{B}pass{ND}ord{E}"),
            note="user?ame has no match in loghub: the same shape on a word that occurs",
        ),
        QClass("all *", "*", [["^"]], "1"),
        QClass(
            'phrase "failed password"',
            '"failed password"',
            [["-i", f"{B}failed{D}+password{E}"]],
            f"{has('failed')} AND {has('password')} AND {rx(f'{B}failed{D}+password{E}')}",
        ),
        QClass(
            f"field host:{host}", f"host:{host}", [[f"^<\\d+>1 \\S+ {host} "]], f"host = '{host}'"
        ),
    ]


# ---------------------------------------------------------------- running


def run_ok(argv: list[str], what: str, **kw: Any) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, **kw)
    if p.returncode != 0:
        sys.stderr.write(
            f"bench-search: {what} failed (exit {p.returncode}):\n"
            f"{p.stderr.decode(errors='replace')[-3000:]}\n"
        )
        sys.exit(1)
    return p


# ---------------------------------------------------------------- building (cached)


def cached(
    out: Path,
    meta: Path,
    current: Callable[[dict[str, Any]], bool],
    build: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """The description (JSON in meta) of a built file or directory out: the cached one when out
    exists and current(description) holds (built_s 0), else out removed, built again by
    build() and its description written to meta (built_s: the seconds that took)."""
    if out.exists() and meta.is_file():
        m = json.loads(meta.read_text())
        if current(m):
            m["built_s"] = 0.0
            return m
    shutil.rmtree(out, ignore_errors=True)
    t = time.monotonic()
    m = build()
    meta.write_text(json.dumps(m, indent=2) + "\n")
    m["built_s"] = time.monotonic() - t
    return m


def build_corpus(work: Path, n: int, seed: int) -> dict[str, Any]:
    path = work / "corpus.log"
    return cached(
        path,
        work / "corpus.json",
        lambda m: m.get("lines") == n and m.get("bytes") == path.stat().st_size,
        lambda: make_corpus(work, path, n, seed),
    )


def make_corpus(work: Path, path: Path, n: int, seed: int) -> dict[str, Any]:
    gen = work / "gencorpus"
    run_ok(["cc", "-O2", "-o", str(gen), str(HERE / "gencorpus.c"), "-lm"], "compiling gencorpus.c")
    root = find_shared("LOGBOX_LOGHUB", "data/loghub")
    corpus.LOGHUB_TOOL = find_shared("LOGBOX_LOGHUB_TOOL", "tools/loghub_to_syslog.py")
    tool = corpus.loghub_tool()
    tpl = work / "templates.txt"
    ntpl = 0
    with open(tpl, "wb") as f:
        for s in corpus.loghub_systems(root):
            for raw in corpus.loghub_raw(s, root, tool):
                parts = raw.split(b" ", 7)
                if len(parts) != 8 or parts[6] != b"-" or b"\x1f" in raw or b"\n" in raw:
                    continue
                pri = parts[0][1 : parts[0].index(b">")]
                f.write(b"\x1f".join([s.encode(), pri, parts[3], parts[4], parts[5], parts[7]]))
                f.write(b"\n")
                ntpl += 1
    if ntpl == 0:
        sys.exit(f"bench-search: no loghub samples under {root} (set LOGBOX_LOGHUB)")
    tmp = work / "corpus.tmp"
    p = run_ok(
        [
            str(gen),
            str(tpl),
            str(n),
            str(seed),
            str(START),
            str(SPAN),
            str(HOSTS_PER_SYSTEM),
            str(tmp),
        ],
        "gencorpus",
    )
    lines, size = (int(x) for x in p.stdout.split())
    tmp.rename(path)
    return {
        "version": VERSION,
        "lines": lines,
        "bytes": size,
        "seed": seed,
        "templates": ntpl,
        "start": START,
        "span_s": SPAN,
        "hosts_per_system": HOSTS_PER_SYSTEM,
    }


def build_store(
    work: Path, logbox: Path, path: Path, n: int, name: str = "store", key: str | None = None
) -> dict[str, Any]:
    """work/<name>/, ingested by logbox; key (the old binary's, for a baseline store) must
    match the cached one's."""
    store = work / name
    return cached(
        store,
        work / f"{name}.json",
        lambda m: m.get("messages") == n and m.get("key") == key,
        lambda: dict(make_store(store, logbox, path, n), key=key),
    )


def binary_key(exe: Path) -> str:
    """What keys a store built by another logbox: its --version and the hash of the binary."""
    v = subprocess.run([str(exe), "--version"], capture_output=True, text=True).stdout.strip()
    h = hashlib.sha256(exe.read_bytes()).hexdigest()[:12]
    return f"{v.replace(' ', '-') or 'logbox'}-{h}"


def build_victoria(work: Path, exe: Path, path: Path, n: int) -> dict[str, Any]:
    """work/vl-<version>-<load>/data: the corpus in VictoriaLogs (peer_victoria.load)."""
    d = work / f"vl-{VL_VERSION}-{peer_victoria.VL_LOAD}"
    d.mkdir(exist_ok=True)
    return cached(
        d / "data",
        d / "data.json",
        lambda m: m.get("rows") == n,
        lambda: peer_victoria.load(exe, d / "data", path, n),
    )


def make_store(store: Path, logbox: Path, path: Path, n: int) -> dict[str, Any]:
    t = time.monotonic()
    # The import commits the catalog's time map once per second of log time (604,800 times
    # for a week), each commit durable: on tmpfs that costs microseconds, on a disk minutes.
    shm = Path("/dev/shm")
    tmp = store
    if shm.is_dir() and shutil.disk_usage(shm).free > path.stat().st_size // 2:
        tmp = shm / f"logbox-bench-store-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        p = run_ok(
            [str(logbox), "ingest", "--data", str(tmp), "--received", "header", "--sync", "none"]
            + [str(path)],
            "logbox ingest",
        )
        ingest_s = time.monotonic() - t
        if tmp != store:
            shutil.copytree(tmp, store, symlinks=True)
    finally:
        if tmp != store:
            shutil.rmtree(tmp, ignore_errors=True)
    st = run_ok([str(logbox), "stats", "--data", str(store), "--json"], "logbox stats")
    stats = json.loads(st.stdout)
    if stats.get("messages") != n:
        sys.exit(f"bench-search: store holds {stats.get('messages')} messages, {n} sent")
    return {
        "version": VERSION,
        "messages": n,
        "stats": stats,
        "ingest_s": ingest_s,
        "ingest_summary": p.stderr.decode(errors="replace").strip(),
    }


def peer_python(out: Path) -> Path:
    venv = out / "venv-peer"
    py = venv / "bin" / "python"
    req = HERE / "requirements-bench.txt"
    stamp = venv / ".requirements.stamp"
    if py.is_file() and stamp.is_file() and stamp.read_bytes() == req.read_bytes():
        return py
    say(f"  installing the peer into {venv} ({req.name}) ...")
    base = "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else sys.executable
    if not py.is_file():
        run_ok([base, "-m", "venv", str(venv)], "python -m venv")
    run_ok(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(req)],
        "pip install -r requirements-bench.txt",
    )
    shutil.copyfile(req, stamp)
    return py


def build_peer(work: Path, py: Path, path: Path, n: int) -> dict[str, Any]:
    db = work / "chdb"
    return cached(
        db,
        work / "chdb.json",
        lambda m: m.get("rows") == n and m.get("peer_version") == PEER_VERSION,
        lambda: load_peer(db, py, path, n),
    )


def load_peer(db: Path, py: Path, path: Path, n: int) -> dict[str, Any]:
    p = run_ok([str(py), str(HERE / "peer_chdb.py"), "load", str(db), str(path)], "chdb load")
    m = json.loads(p.stdout.decode().strip().splitlines()[-1])
    if m.get("rows") != n:
        sys.exit(f"bench-search: chdb holds {m.get('rows')} rows, {n} in the corpus")
    m["peer_version"] = PEER_VERSION
    return m


# ---------------------------------------------------------------- statistics


def summary(times: list[float]) -> dict[str, Any]:
    return {
        "p50_ms": 1000 * statistics.median(times),
        "p95_ms": 1000 * pct(times, 95),
        "p25_ms": 1000 * pct(times, 25),
        "p75_ms": 1000 * pct(times, 75),
        "runs": len(times),
        "times_ms": [round(1000 * t, 3) for t in times],
    }


# ---------------------------------------------------------------- logbox (searchd)


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float = 120) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Searchd:
    def __init__(self, binary: Path, store: Path, sock: Path, threads: int | None) -> None:
        self.sock = sock
        sock.unlink(missing_ok=True)
        argv = [str(binary), "--data", str(store), "--socket", str(sock)]
        if threads:
            argv += ["--threads", str(threads)]
        if os.geteuid() == 0:
            argv.append("--allow-root")
        self.log = open(sock.with_suffix(".log"), "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        self.http = KeepAlive(lambda: UnixHTTP(str(sock)))
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                sys.exit(
                    f"bench-search: {binary} exited ({self.proc.returncode}); see {self.log.name}"
                )
            if sock.exists():
                try:
                    st, _ = self.get("/health")
                    if st == 200:
                        break
                except OSError:
                    pass
            if time.monotonic() > deadline:
                self.stop()
                sys.exit(f"bench-search: {binary} did not answer /health in 60 s")
            time.sleep(0.1)

    def get(self, url: str) -> tuple[int, bytes]:
        """GET url on the persistent connection (reopened when the server closed it)."""
        return self.http.get(url)

    @property
    def reconnects(self) -> int:
        """How many connections were made."""
        return self.http.connects

    def stop(self) -> None:
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def lb_url(op: str, q: str, t0: int, t1: int) -> str:
    p = {"q": q, "from": str(t0), "to": str(t1)}
    if op == "newest":
        path = "/v1/search"
        p.update(limit="100", total="0")
    elif op == "count":
        path = "/v1/count"
    elif op == "hist":
        path = "/v1/histogram"
        p.update(buckets=str(BUCKETS))
    else:
        path = "/v1/top"
        p.update(field="host", k="10")
    return path + "?" + urllib.parse.urlencode(p, quote_via=urllib.parse.quote)


def lb_result(op: str, body: dict[str, Any]) -> Any:
    if op == "newest":
        return len(body.get("hits", []))
    if op == "count":
        return body.get("total")
    if op == "hist":
        return sum(b["count"] for b in body.get("buckets", []))
    return [(v["value"], v["count"]) for v in body.get("values", [])][:3]


def time_interleaved(
    sds: dict[str, Searchd], qc: QClass, op: str, repeats: int, t0: int, t1: int
) -> dict[str, dict]:
    """The same query on several searchd (the new binary and the old one): one untimed run on
    each, then `repeats` rounds, each timing every server once, the order reversed every other
    round (old, new, new, old, ...) so that drift and whatever one run leaves warm for the next
    hit both alike."""
    url = lb_url(op, qc.q, t0, t1)
    out: dict[str, dict] = {}
    times: dict[str, list[float]] = {k: [] for k in sds}
    body: dict[str, bytes] = {}
    for k, sd in sds.items():
        status, b = sd.get(url)
        if status != 200:
            out[k] = {"error": f"{status} {b[:300].decode(errors='replace')}"}
    names = [k for k in sds if k not in out]
    for i in range(repeats):
        for k in names if i % 2 == 0 else names[::-1]:
            t = time.perf_counter()
            status, body[k] = sds[k].get(url)
            times[k].append(time.perf_counter() - t)
            if status != 200:
                out[k] = {"error": f"{status} {body[k][:300].decode(errors='replace')}"}
        names = [k for k in names if k not in out]
    for k in names:
        res = json.loads(body[k])
        out[k] = summary(times[k])
        out[k]["result"] = lb_result(op, res)
        out[k]["server_took_ms"] = res.get("took_ms")
    return out


# ---------------------------------------------------------------- ripgrep


def rg_pipeline(qc: QClass, op: str, path: Path) -> str:
    stages = []
    for i, st in enumerate(qc.rg):
        args = list(st)
        inv = args[:1] == ["-v"]
        if inv:
            args = args[1:]
        last = i == len(qc.rg) - 1
        argv = ["rg", "--no-filename", "--no-line-number", "--color=never"]
        if inv:
            argv.append("-v")
        if last and op == "count":
            argv.append("-c")
        argv += args[:-1] + ["-e", args[-1]]
        if i == 0:
            argv.append(str(path))
        stages.append(shlex.join(argv))
    if op == "newest":
        stages.append("tail -n 100")
    elif op == "hist":
        stages.append("mawk '{print substr($2, 1, 16)}'")
        stages.append("uniq -c")
    elif op == "top":
        stages.append("mawk '{c[$3]++} END {for (h in c) print c[h], h}'")
        stages.append("sort -k1,1nr -k2,2")
        stages.append("head -n 10")
    return " | ".join(stages)


def rg_post(op: str, out: bytes, t0: int, step: int) -> Any:
    text = out.decode(errors="replace")
    if op == "newest":
        return len(text.splitlines())
    if op == "count":
        return int(text.strip() or 0)
    if op == "hist":
        # minute counts -> 100 buckets of `step` seconds (a minute is put where it starts)
        hist = [0] * BUCKETS
        for line in text.splitlines():
            c, minute = line.split()
            y, mo, d = int(minute[0:4]), int(minute[5:7]), int(minute[8:10])
            hh, mm = int(minute[11:13]), int(minute[14:16])
            sec = int(time.mktime((y, mo, d, hh, mm, 0, 0, 0, 0))) - time.timezone
            k = (sec - t0) // step
            if 0 <= k < BUCKETS:
                hist[k] += int(c)
        return sum(hist)
    return [(ln.split()[1], int(ln.split()[0])) for ln in text.splitlines()][:3]


def time_rg(qc: QClass, op: str, path: Path, repeats: int, t0: int, step: int) -> dict:
    cmd = rg_pipeline(qc, op, path)
    env = dict(os.environ, LC_ALL="C")
    times = []
    res: Any = None
    for _ in range(repeats):
        t = time.perf_counter()
        p = subprocess.run(["sh", "-c", cmd], capture_output=True, env=env)
        res = rg_post(op, p.stdout, t0, step)
        times.append(time.perf_counter() - t)
        if p.returncode not in (0, 1):
            return {"error": p.stderr.decode(errors="replace")[:300], "cmd": cmd}
    out = summary(times)
    out["result"] = res
    out["cmd"] = cmd
    return out


# ---------------------------------------------------------------- chDB


def ch_sql(qc: QClass, op: str, t0: int, t1: int, step: int) -> str:
    where = (
        f"ts >= toDateTime64({t0}, 6, 'UTC') AND ts < toDateTime64({t1}, 6, 'UTC') AND ({qc.ch})"
    )
    if op == "newest":
        return f"SELECT ts, host, msg FROM logs WHERE {where} ORDER BY ts DESC LIMIT 100"
    if op == "count":
        return f"SELECT count() FROM logs WHERE {where}"
    if op == "hist":
        return (
            f"SELECT intDiv(toUnixTimestamp64Micro(ts) - {t0 * 1000000}, {step * 1000000}) AS b, "
            f"count() FROM logs WHERE {where} GROUP BY b ORDER BY b"
        )
    return (
        f"SELECT host, count() AS c FROM logs WHERE {where} GROUP BY host "
        "ORDER BY c DESC, host LIMIT 10"
    )


def ch_post(op: str, text: str) -> Any:
    lines = [ln for ln in text.splitlines() if ln]
    if op == "newest":
        return len(lines)
    if op == "count":
        return int(lines[0]) if lines else 0
    if op == "hist":
        return sum(int(ln.split("\t")[1]) for ln in lines)
    return [(ln.split("\t")[0], int(ln.split("\t")[1])) for ln in lines][:3]


def time_peer(
    py: Path, db: Path, cls: list[QClass], repeats: int, t0: int, t1: int, step: int
) -> dict[tuple[str, str], dict]:
    jobs = []
    keys = []
    for qc in cls:
        for op in OPS:
            jobs.append({"sql": ch_sql(qc, op, t0, t1, step), "repeats": repeats, "warmup": 1})
            keys.append((qc.name, op))
    errlog = open(db.parent / "chdb-run.log", "wb")  # noqa: SIM115
    p = subprocess.Popen(
        [str(py), str(HERE / "peer_chdb.py"), "run", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
    )
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(json.dumps(jobs).encode())
    p.stdin.close()
    out: dict[tuple[str, str], dict] = {}
    for i, key in enumerate(keys):
        line = p.stdout.readline()
        if not line:
            out[key] = {"error": "no result"}
            continue
        r = json.loads(line)
        if "error" in r:
            out[key] = {"error": r["error"], "sql": jobs[i]["sql"]}
        else:
            s = summary(r["times"])
            s["result"] = ch_post(key[1], r["result"])
            if key[1] == "newest":
                s["result"] = r.get("rows", s["result"])
            s["sql"] = jobs[i]["sql"]
            out[key] = s
        res = out[key]
        say(
            f"  {key[0]:28} {OP_TITLE[key[1]]:14} {fmt_ms(res):>22}  {res.get('result', res.get('error'))}"
        )
    if p.wait() != 0:
        say(f"  chdb exited {p.returncode}: see {errlog.name}")
    errlog.close()
    return out


# ---------------------------------------------------------------- report


def time_each(
    into: dict[tuple[str, str], dict], cls: list[QClass], timer: Callable[[QClass, str], dict]
) -> None:
    """timer(query class, op) for every class and op, into[(class name, op)], each said as it
    comes (a system's column of the table)."""
    for qc in cls:
        for op in OPS:
            r = into[(qc.name, op)] = timer(qc, op)
            say(
                f"  {qc.name:28} {OP_TITLE[op]:14} {fmt_ms(r):>22}  {r.get('result', r.get('error'))}"
            )


def versions(logbox: Path, py: Path | None) -> dict[str, str]:
    v = {}
    rg = subprocess.run(["rg", "--version"], capture_output=True, text=True)
    v["ripgrep"] = rg.stdout.splitlines()[0] if rg.stdout else "?"
    g = subprocess.run(
        ["git", "-C", str(TOP), "describe", "--always", "--dirty"], capture_output=True, text=True
    )
    v["logbox"] = g.stdout.strip() or "?"
    if py is not None:
        c = subprocess.run(
            [str(py), "-c", "import chdb; print(chdb.__version__, chdb.engine_version)"],
            capture_output=True,
            text=True,
        )
        v["chdb"] = c.stdout.strip() or c.stderr.strip()[-200:]
    v["python"] = platform.python_version()
    return v


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=20_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=15, help="timed logbox runs per query")
    ap.add_argument(
        "--baseline-repeats", type=int, default=5, help="timed rg / chdb runs per query"
    )
    ap.add_argument("--threads", type=int, default=None, help="searchd --threads")
    ap.add_argument("--no-peer", action="store_true", help="skip chdb")
    ap.add_argument("--no-rg", action="store_true", help="skip ripgrep")
    ap.add_argument("--no-victoria", action="store_true", help="skip VictoriaLogs")
    ap.add_argument(
        "--vl-repeats",
        type=int,
        default=None,
        help="timed VictoriaLogs runs per query " "(default: --baseline-repeats)",
    )
    ap.add_argument(
        "--vl-timeout",
        type=float,
        default=30,
        help="VictoriaLogs' per-query timeout, s (a query past it is not run again)",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a folder with an older build's logbox and logbox-searchd: timed beside the new",
    )
    ap.add_argument("--peers", type=Path, default=TOP / "build" / "peers")
    ap.add_argument("--build-only", action="store_true", help="build the cache and stop")
    ap.add_argument("--only", default="", help="comma-separated class names to run")
    add_program_options(ap, "logbox", "searchd")
    add_out_option(ap)
    args = ap.parse_args(argv)

    if not args.logbox.is_file():
        sys.exit(f"bench-search: {args.logbox} not found (make build)")
    work = args.out / f"search-{VERSION}-{args.messages}-{args.seed}"
    work.mkdir(parents=True, exist_ok=True)
    m = machine()
    say(machine_line(m))
    t_build = time.monotonic()
    say(f"corpus: {args.messages:,} lines (loghub-based, seed {args.seed}) in {work}")
    cm = build_corpus(work, args.messages, args.seed)
    path = work / "corpus.log"
    say(
        f"  {cm['bytes'] / 1e9:.2f} GB, {cm['templates']:,} sample lines"
        + (f", built in {cm['built_s']:.1f} s" if cm["built_s"] else ", cached")
    )
    say("store: logbox ingest --received header --sync none ...")
    sm = build_store(work, args.logbox, path, args.messages)
    st = sm["stats"]
    say(
        f"  {st.get('messages', 0):,} messages, {st.get('days')} days, {st.get('segments')} "
        f"segments, {st.get('disk_bytes', 0) / 1e6:,.0f} MB on disk"
        + (
            f", built in {sm['built_s']:.1f} s (ingest {sm['ingest_s']:.1f} s)"
            if sm["built_s"]
            else ", cached"
        )
    )
    om: dict[str, Any] = {}
    old_store = None
    if args.baseline is not None:
        base = args.baseline.resolve()
        if not (base / "logbox").is_file() or not (base / "logbox-searchd").is_file():
            sys.exit(f"bench-search: no logbox and logbox-searchd in {base}")
        key = binary_key(base / "logbox")
        old_store = f"store-old-{key}"
        say(f"baseline store: {base / 'logbox'} ingest into {old_store}/ ...")
        om = build_store(work, base / "logbox", path, args.messages, old_store, key)
        ost = om["stats"]
        say(
            f"  {ost.get('disk_bytes', 0) / 1e6:,.0f} MB on disk in {ost.get('segments')} segments"
            + (f", built in {om['built_s']:.1f} s" if om["built_s"] else ", cached")
        )
    vm: dict[str, Any] = {}
    vl_exe = None
    vl_missing = ""
    if not args.no_victoria:
        try:
            vl_exe = victoria_binary(args.peers.resolve())
        except RuntimeError as e:
            vl_missing = str(e).splitlines()[0]
            say(f"VictoriaLogs left out: {vl_missing}")
    if vl_exe is not None:
        say(f"peer: VictoriaLogs {VL_VERSION} (syslog TCP, header time, stream field hostname) ...")
        vm = build_victoria(work, vl_exe, path, args.messages)
        say(
            f"  {vm['rows']:,} rows, {vm['bytes'] / 1e6:,.0f} MB"
            + (
                f", built in {vm['built_s']:.1f} s (ingest {vm['ingest_s']:.1f} s)"
                if vm["built_s"]
                else ", cached"
            )
        )
    py = None
    pm: dict[str, Any] = {}
    if not args.no_peer:
        say("peer: chDB table with a tokenbf_v1 index ...")
        py = peer_python(args.out)
        pm = build_peer(work, py, path, args.messages)
        say(
            f"  {pm['rows']:,} rows, parts/bytes {pm.get('parts')}"
            + (f", built in {pm['built_s']:.1f} s" if pm["built_s"] else ", cached")
        )
    build_s = time.monotonic() - t_build
    if any(x.get("built_s") for x in (cm, sm, pm, om, vm)):
        say(f"first-time build took {build_s:.1f} s")
    if args.build_only:
        return 0

    host = f"openssh-{0:03d}"
    cls = classes(host)
    if args.only:
        want = {s.strip() for s in args.only.split(",")}
        cls = [c for c in cls if c.name in want or c.q in want]
    t0, t1 = START, START + SPAN
    step = max(1, math.ceil((t1 - t0) / BUCKETS))
    engines = (
        ["logbox"]
        + (["old"] if old_store else [])
        + ([] if args.no_rg else ["rg"])
        + ([] if args.no_peer else ["chdb"])
        + (["vl"] if vm else [])
    )
    res: dict[str, dict] = {"logbox": {}, "old": {}, "rg": {}, "chdb": {}, "vl": {}}

    say("warming the page cache (corpus, stores, VictoriaLogs' data) ...")
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=False)
    warm = [work / "store"] + ([work / old_store] if old_store else [])
    if vm:
        warm.append(work / f"vl-{VL_VERSION}-{peer_victoria.VL_LOAD}" / "data")
    for d in warm:
        subprocess.run(
            ["sh", "-c", f"find {shlex.quote(str(d))} -type f -exec cat {{}} + >/dev/null"],
            check=False,
        )

    conn_note = "no searchd"
    if args.searchd.is_file():
        sds: dict[str, Searchd] = {}
        try:
            sds["logbox"] = Searchd(
                args.searchd, work / "store", work / "searchd.sock", args.threads
            )
            if old_store:
                old_sd = args.baseline.resolve() / "logbox-searchd"
                sds["old"] = Searchd(
                    old_sd, work / old_store, work / "searchd-old.sock", args.threads
                )
            say(
                f"logbox: {args.searchd} on a unix socket"
                + (f", beside {sds['old'].proc.args[0]} interleaved" if old_store else "")
                + f", {args.repeats} runs per query ..."
            )
            for qc in cls:
                for op in OPS:
                    r = time_interleaved(sds, qc, op, args.repeats, t0, t1)
                    for k, v in r.items():
                        res[k][(qc.name, op)] = v
                    say(
                        f"  {qc.name:28} {OP_TITLE[op]:14} {fmt_ms(r['logbox']):>22}  "
                        + (f"old {fmt_ms(r['old']):>20}  " if "old" in r else "")
                        + str(r["logbox"].get("result", r["logbox"].get("error")))
                    )
            n_conn = max(sd.reconnects for sd in sds.values())
            conn_note = (
                "one persistent HTTP/1.1 connection per server"
                if n_conn <= 1
                else f"HTTP/1.1, the server closed the connection ({n_conn} connects)"
            )
        finally:
            for sd in sds.values():
                sd.stop()
    else:
        say(f"logbox: {args.searchd} not found: no logbox column")

    vl_reps = args.vl_repeats or args.baseline_repeats
    if vm and vl_exe is not None:
        say(f"VictoriaLogs {VL_VERSION} over HTTP (LogsQL), {vl_reps} runs per query ...")
        vl, _ = peer_victoria.start(
            vl_exe, work / f"vl-{VL_VERSION}-{peer_victoria.VL_LOAD}" / "data"
        )
        bust = [0]
        spellings = peer_victoria.Spellings(work / "templates.txt")

        def vl_timer(qc: QClass, op: str) -> dict:
            lq = peer_victoria.logsql(qc.name, host, spellings)
            if lq is None:
                return {"error": "no LogsQL for this class"}
            r = peer_victoria.time_query(vl, op, lq, vl_reps, t0, t1, step, bust, args.vl_timeout)
            if "error" in r:
                return r
            out = summary(r["times"])
            out.update(result=r["result"], logsql=lq)
            return out

        try:
            time_each(res["vl"], cls, vl_timer)
        finally:
            vl.stop()

    if not args.no_rg:
        say(f"ripgrep over {path.name}, {args.baseline_repeats} runs per query ...")
        time_each(
            res["rg"], cls, lambda qc, op: time_rg(qc, op, path, args.baseline_repeats, t0, step)
        )
    if py is not None:
        say(f"chDB, {args.baseline_repeats} runs per query ...")
        res["chdb"] = time_peer(py, work / "chdb", cls, args.baseline_repeats, t0, t1, step)

    v = versions(args.logbox, py)
    if old_store:
        v["old"] = f"{args.baseline.resolve()} ({old_store[len('store-old-') :]})"
    m2 = machine()
    itable, tally = issue_table(cls, res, engines)
    md = [
        "# Search benchmark (issues 4 and 18)",
        "",
        f"- machine: {m['nproc']} CPUs ({m['cpu']}), {m['mem_gib']} GiB RAM, kernel {m['kernel']}; "
        f"load average at start {m['loadavg'][0]:.2f}, at end {m2['loadavg'][0]:.2f}",
        f"- versions: logbox {v['logbox']}, {v['ripgrep']}, chdb {v.get('chdb', '—')}, "
        f"Python {v['python']}"
        + (f", VictoriaLogs {VL_VERSION}" if vm else "")
        + (f"; old binary {v['old']}" if old_store else ""),
        f"- corpus: {cm['lines']:,} lines, {cm['bytes'] / 1e9:.2f} GB ({cm['templates']:,} loghub "
        f"sample lines, seed {cm['seed']}), 7 days from 2026-11-01; store {st.get('disk_bytes', 0) / 1e6:,.0f} MB "
        f"in {st.get('segments')} segments; {work}",
        f"- whole time range, warm cache; times are client-side wall times in ms, p50 / p95 "
        f"(nearest rank) of {args.repeats} logbox runs ({conn_note})"
        + (
            f" and {args.baseline_repeats} rg / chdb runs"
            if not (args.no_rg and args.no_peer)
            else ""
        )
        + ", each after one untimed run (not for rg: the file is cached)",
        *(
            []
            if args.no_rg and args.no_peer
            else [
                "- rg: one pipeline per query over the raw file (`rg | tail -n 100`, `rg -c`, "
                "`rg | mawk | uniq -c` by minute, `rg | mawk | sort | head`); chdb: one SQL "
                "query in-process (chdb.session), max_threads = 2"
            ]
        ),
        *(
            [
                f"- old: the baseline binary's searchd on its own store of the same corpus, "
                f"{args.repeats} runs interleaved with the new (old, new, new, old, ...); "
                f"new/old = new p50 / old p50; no slower = new/old <= {NOISE:.2f}, or "
                '"pass (noise)" when above but new p25 <= old p75'
            ]
            if old_store
            else []
        ),
        *(
            [
                f"- vl: VictoriaLogs {VL_VERSION}, LogsQL over HTTP (one keep-alive connection), "
                f"{vl_reps} runs after one untimed run, each request a different text (the "
                "range's end moved by 1 ns) so no query-text cache is hit; its per-query "
                f'timeout {args.vl_timeout:g} s ("> N": stopped there, run once)'
            ]
            if vm
            else []
        ),
        *([f"- VictoriaLogs left out: {vl_missing}"] if vl_missing else []),
        "- peer ratio = peer p50 / logbox p50 (higher: logbox faster); target = issue 4's p50 "
        "target where it sets one, and faster than every peer everywhere",
        "",
        table(cls, res, engines),
        "",
        *(
            [
                "Issue 18's speed verdicts (new = this build; old = the baseline build):",
                "",
                itable,
                "",
                "; ".join(
                    (
                        [f"no slower than old: {tally['old_pass']} pass, {tally['old_fail']} FAIL"]
                        if old_store
                        else []
                    )
                    + (
                        [
                            f"faster than VictoriaLogs: {tally['vl_pass']} pass, "
                            f"{tally['vl_fail']} FAIL"
                        ]
                        if vm
                        else []
                    )
                ),
                "",
            ]
            if old_store or vm
            else []
        ),
        "Matches per engine (the engines tokenize differently; see tests/bench/README.md):",
        "",
        counts_table(cls, res, engines),
        "",
    ]
    notes = [f"- {qc.name}: {qc.note}" for qc in cls if qc.note]
    if notes:
        md += ["Notes:", "", *notes, ""]
    text = "\n".join(md)
    raw = {
        "machine": m,
        "versions": v,
        "corpus": cm,
        "store": sm,
        "peer": pm,
        "old_store": om,
        "victoria": vm,
        "connection": conn_note,
        "results": {e: {f"{k[0]}|{k[1]}": r for k, r in res[e].items()} for e in res},
    }
    write_report(args.out, "search-results", text, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
