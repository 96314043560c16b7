#!/usr/bin/env python3
"""End-to-end ingest benchmark (issue 16; `make bench-ingest`, run by `make bench` too; not a
test: a missed target is reported, never a failure).

The same loads, side by side in one run, round robin, each sent into:
  - logbox: syslog-ng as collector/render.py renders it -> the spool -> logbox-indexd;
  - syslog-ng file() with the default template: the front end's ceiling (syslog-ng and the
    sender alone);
  - VictoriaLogs v1.52.1 with its own syslog TCP/TLS listeners (built by the bench from the Go
    module proxy into build/peers/; a bench-only peer, never shipped).
Loads: loggen TCP 150 B with 1 and 16 connections, TLS 150 B with 16, TCP 1 KiB with 16, and
a replay of a real corpus (the loghub samples converted by loghub_to_syslog.py, repeated).
Per load and system: stored msg/s (first send -> the last message stored), lost (loggen numbers
its messages; the replay counts rows), CPU µs per stored message per process (/proc/PID/stat
utime + stime; the sender's rusage), the ratios logbox / VictoriaLogs and logbox / ceiling.
Then indexd alone on spool files (tests/bench/spool_feed.py when present) and the searchable
latency (searchd finding probe tokens at a paced 100,000 msg/s).
Prints a table; writes build/bench/ingest.json and ingest.md. See tests/bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import ingest_latency  # noqa: E402
from benchlib import (  # noqa: E402
    add_out_option,
    add_program_options,
    find_shared,
    machine,
    machine_line,
    median,
    write_report,
)
from ingest_systems import (  # noqa: E402
    OPENSSL_TLS12,
    VL_VERSION,
    FileCeiling,
    Logbox,
    Ports,
    System,
    Victoria,
    free_port,
    proc_ticks,
    say,
    tls_material,
    victoria_binary,
)

CLK_TCK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.05  # how often a system's count is polled during a load
STALL_S = 20.0  # no progress for this long: the run ends with what was stored

# Issue 16's targets (2 cores, the sender on the same cores).
TARGET_TCP16 = 200_000
TARGET_TLS = 100_000
TARGET_1K = 100_000
TARGET_ALONE = 600_000
TARGET_LATENCY_P99_MS = 1000.0

# The sender for the replay: the corpus file through sendfile() on one TCP connection, which
# costs next to no CPU (loggen -R spends ~7 µs per line reading and copying it, 10x more, on
# the same two cores as the systems measured). --replay-sender loggen uses `loggen -R -d`.
SENDFILE_PY = (
    "import socket,sys\n"
    "s=socket.create_connection((sys.argv[1],int(sys.argv[2])))\n"
    "f=open(sys.argv[3],'rb')\n"
    "s.sendfile(f)\n"
    "s.close()\n"
)

# ---------------------------------------------------------------- machine and versions


def versions(vl: Path | None) -> dict[str, str]:
    def first(argv: list[str]) -> str:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        except OSError:
            return "?"
        out = (p.stdout or p.stderr).strip().splitlines()
        return out[0] if out else "?"

    g = subprocess.run(
        ["git", "-C", str(TOP), "describe", "--always", "--dirty"], capture_output=True, text=True
    )
    return {
        "syslog-ng": first(["syslog-ng", "--version"]).replace("syslog-ng 3 ", "").strip("()"),
        "openssl": first(["openssl", "version"]),
        # (a `go install` build prints no -version)
        "victoria-logs": f"VictoriaLogs {VL_VERSION} (go install)" if vl else "-",
        "logbox": g.stdout.strip() or "?",
        "python": platform.python_version(),
    }


def system_ticks() -> tuple[int, int]:
    """(idle + iowait ticks, all ticks) over all CPUs from /proc/stat."""
    v = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return v[3] + v[4], sum(v[:8])


# ---------------------------------------------------------------- loads


@dataclass
class Load:
    key: str
    transport: str  # "tcp" or "tls"
    size: int  # loggen --size; 0 for the replay
    conns: int
    messages: int
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # system -> runs

    @property
    def replay(self) -> bool:
        return self.size == 0

    @property
    def label(self) -> str:
        if self.replay:
            return f"replay of loghub lines, TCP, {self.conns} conn"
        size = f"{self.size} B" if self.size < 1024 else f"{self.size // 1024} KiB"
        return f"loggen {self.transport.upper()} {size}, {self.conns} conn"

    def target(self) -> tuple[int, str] | None:
        """(msg/s, what) issue 16 asks of logbox on this load."""
        if self.key == "tcp-150-16":
            return TARGET_TCP16, ">= 200k msg/s, 0 lost"
        if self.transport == "tls" and self.size == 150:
            return TARGET_TLS, ">= 100k msg/s"
        if self.size == 1024:
            return TARGET_1K, ">= 100k msg/s"
        return None


def loads(args: argparse.Namespace) -> list[Load]:
    n, n1k, nr = args.messages, args.messages_1k, args.replay_lines
    out = [
        Load("tcp-150-1", "tcp", 150, 1, n),
        Load("tcp-150-16", "tcp", 150, 16, n),
        Load("tls-150-16", "tls", 150, 16, n),
        Load("tcp-1k-16", "tcp", 1024, 16, n1k),
        Load("replay", "tcp", 0, 1, nr),
    ]
    if args.quick:
        out = [ld for ld in out if ld.key in ("tcp-150-16", "tls-150-16", "replay")]
    if args.only:
        want = [w for w in args.only.split(",") if w]
        out = [ld for ld in out if any(w in ld.key for w in want)]
    return out


def replay_corpus(work: Path, lines: int) -> tuple[Path, dict[str, Any]]:
    """The loghub samples as RFC 5424 lines (loghub_to_syslog.py, MSG = the original line),
    system after system, repeated until `lines` lines; cached under work/."""
    path = work / f"replay-{lines}.log"
    meta = path.with_suffix(".json")
    if path.is_file() and meta.is_file():
        m = json.loads(meta.read_text())
        if m.get("bytes") == path.stat().st_size:
            return path, m
    from lbtest import corpus

    root = find_shared("LOGBOX_LOGHUB", "data/loghub")
    corpus.LOGHUB_TOOL = find_shared("LOGBOX_LOGHUB_TOOL", "tools/loghub_to_syslog.py")
    try:
        tool = corpus.loghub_tool()
    except FileNotFoundError as e:
        sys.exit(f"bench-ingest: {e}")
    systems = corpus.loghub_systems(root)
    if not systems:
        sys.exit(f"bench-ingest: no loghub samples under {root} (set LOGBOX_LOGHUB)")
    one = b"".join(
        raw.replace(b"\n", b" ") + b"\n"
        for s in systems
        for raw in corpus.loghub_raw(s, root, tool)
    )
    per = one.count(b"\n")
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        left = lines
        while left >= per:
            f.write(one)
            left -= per
        if left:
            f.write(b"".join(one.splitlines(keepends=True)[:left]))
    tmp.rename(path)
    m = {"lines": lines, "bytes": path.stat().st_size, "systems": systems, "sample_lines": per}
    meta.write_text(json.dumps(m))
    return path, m


# ---------------------------------------------------------------- one run


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work: Path = args.out / "ingest"
        self.work.mkdir(parents=True, exist_ok=True)
        self.tls = tls_material(self.work)
        self.ossl = self.work / "openssl-tls12.cnf"
        self.ossl.write_text(OPENSSL_TLS12)
        self.ports = Ports(free_port(), free_port(), free_port())
        self.systems: list[System] = []
        if "logbox" in args.systems:
            self.systems.append(Logbox(self.work, self.ports, self.tls, args.indexd, args.logbox))
        if "file" in args.systems:
            self.systems.append(FileCeiling(self.work, self.ports, self.tls))
        self.vl: Path | None = None
        self.vl_missing = ""
        if "victoria" in args.systems:
            try:
                self.vl = victoria_binary(args.peers)
            except RuntimeError as e:  # no Go, no network: the other systems still run
                self.vl_missing = str(e)
                say(f"VictoriaLogs left out: {e}")
        if self.vl is not None:
            self.systems.append(
                Victoria(self.work, self.ports, self.tls, self.vl, args.vl_header_time)
            )
        self.replay: tuple[Path, dict[str, Any]] | None = None
        self.tls_framed = True

    def sender(self, ld: Load, port: int) -> tuple[list[str], dict[str, str], str]:
        """(argv, environment, name) of the load's sender."""
        env = dict(os.environ)
        if ld.replay:
            assert self.replay is not None
            path = str(self.replay[0])
            if self.args.replay_sender == "loggen":
                argv = ["loggen", "-Q", "-r", "1000000000", "-I", "3600", "-R", path, "-d"]
                return [*argv, "-i", "-S", "127.0.0.1", str(port)], env, "loggen"
            return (
                [sys.executable, "-c", SENDFILE_PY, "127.0.0.1", str(port), path],
                env,
                "sendfile",
            )
        # --interval defaults to 10 s and ends a run before --number is reached; -n is per
        # connection.
        argv = ["loggen", "-Q", "-r", "1000000000", "-I", "3600", "-s", str(ld.size)]
        argv += ["-n", str(ld.messages // ld.conns), "--active-connections", str(ld.conns)]
        if ld.transport == "tls":
            # The TLS plugin alone (with --inet or --stream loggen activates two plugins and
            # sends nothing); RFC 5424 with octet counting (-P), as logbox's TLS source is
            # syslog() and VictoriaLogs detects octet counting.
            argv += ["-U", "-P"]
            env["OPENSSL_CONF"] = str(self.ossl)
        else:
            argv += ["-i", "-S"]
        return [*argv, "127.0.0.1", str(port)], env, "loggen"

    def settle(self, s: System, quiet: float = 0.5, limit: float = 5.0) -> int:
        """s.count() once it has not changed for `quiet` seconds (syslog-ng's own start
        messages), at most `limit` seconds."""
        end = time.monotonic() + limit
        n, since = s.count(), time.monotonic()
        while time.monotonic() < end:
            time.sleep(POLL_S)
            m = s.count()
            if m != n:
                n, since = m, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
        return n

    def run(self, ld: Load, s: System) -> dict[str, Any]:
        res: dict[str, Any] = {"sent": ld.messages, "load_before": os.getloadavg()[0]}
        port = s.start(ld.transport)
        try:
            base = self.settle(s)
            res["base"] = base
            want = base + ld.messages
            procs = s.procs()
            argv, env, sname = self.sender(ld, port)
            before = {k: proc_ticks(pid) for k, pid in procs.items()}
            self0, idle0 = os.times(), system_ticks()
            t0, t0_wall = time.monotonic(), time.time()
            sender = subprocess.Popen(
                argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            ru = None
            sender_s = 0.0
            got, last, t_last = 0, -1, t0
            while True:
                if ru is None:
                    pid, st, r = os.wait4(sender.pid, os.WNOHANG)
                    if pid:
                        sender.returncode = os.waitstatus_to_exitcode(st)
                        ru, sender_s = r, time.monotonic() - t0
                got = s.count()
                now = time.monotonic()
                if got >= want:
                    break
                if got != last:
                    last, t_last = got, now
                elif now - t_last > STALL_S:
                    break
                time.sleep(POLL_S)
            t1 = time.monotonic()
            after = {k: proc_ticks(pid) for k, pid in procs.items()}
            self1, idle1 = os.times(), system_ticks()
            if got >= want:
                elapsed = t1 - t0
                w = s.count_time()
                if w is not None and w > t0_wall:  # the status file's write time
                    elapsed = min(elapsed, w - t0_wall)
            else:
                elapsed = t_last - t0
            if ru is None:
                _, st, ru = os.wait4(sender.pid, 0)
                sender.returncode = os.waitstatus_to_exitcode(st)
                sender_s = time.monotonic() - t0
            out = sender.stdout.read().decode(errors="replace") if sender.stdout else ""
            bad = [ln for ln in out.splitlines() if ln.startswith("error ")]
            bad = [ln for ln in bad if "end of input file" not in ln]  # loggen -R's normal end
            if sender.returncode != 0 or bad:
                raise RuntimeError(f"{' '.join(argv)}: exit {sender.returncode}\n{out[-2000:]}")
            m = re.search(r"average rate = ([\d.]+)", out)
            if m:
                res["loggen_rate"] = float(m.group(1))
            res.update(s.stored(not ld.replay, base))
            res.update(s.stop())
            stored = res["stored"]
            secs = t1 - t0
            cpu: dict[str, float] = {k: (after[k] - before[k]) / CLK_TCK for k in procs}
            cpu[sname] = ru.ru_utime + ru.ru_stime
            cpu["bench"] = self1.user + self1.system - self0.user - self0.system
            busy = (1 - (idle1[0] - idle0[0]) / max(1, idle1[1] - idle0[1])) * (os.cpu_count() or 1)
            cpu["others"] = max(0.0, busy * secs - sum(cpu.values()))
            res.update(
                elapsed_s=round(elapsed, 3),
                sender_s=round(sender_s, 3),  # when the sender exited (all sent)
                eps=round(stored / elapsed) if elapsed > 0 else 0,
                lost=ld.messages - stored,
                cpu_s={k: round(v, 3) for k, v in cpu.items()},
                us_per_msg={k: round(v / max(1, stored) * 1e6, 3) for k, v in cpu.items()},
                server_procs=sorted(procs),
                sender=sname,
                box_busy_cores=round(busy, 2),
                load_after=os.getloadavg()[0],
            )
            return res
        finally:
            s.stop()


# ---------------------------------------------------------------- indexd alone


def indexd_alone(args: argparse.Namespace) -> dict[str, Any]:
    """indexd alone on spool files: tests/bench/spool_feed.py (the spool's feeder). Its
    contract: `spool_feed.py --json --n N --runs R` writes N records into spool files, runs
    indexd on them R times and prints, as its last stdout line, a JSON object with "msg_s" (the
    median msg/s) and "cpu_us" (indexd's CPU µs per message)."""
    feed = Path(__file__).resolve().parent / "spool_feed.py"
    n = ["--n", str(500_000 if args.quick else 2_000_000), "--runs", str(args.runs)]
    argv = [sys.executable, str(feed), "--json", *n]
    what = "indexd alone on spool files (spool_feed.py)"
    say(f"{what}: {' '.join(argv[1:])}")
    p = subprocess.run(argv, capture_output=True, text=True)
    res: dict[str, Any] = {"what": what, "argv": argv[1:], "exit": p.returncode}
    if p.returncode != 0:
        res["error"] = (p.stderr or p.stdout)[-2000:]
        return res
    lines = p.stdout.strip().splitlines()
    try:
        got = json.loads(lines[-1])
    except (IndexError, ValueError):
        res["error"] = "no JSON on the last line: " + p.stdout[-500:]
        return res
    res.update(got)
    res["msg_per_s"] = got.get("msg_per_s", got.get("msg_s"))
    res["output"] = lines[-5:]
    return res


# ---------------------------------------------------------------- report


def summary(ld: Load, name: str) -> dict[str, Any] | None:
    runs = [r for r in ld.runs.get(name, []) if "eps" in r]
    if not runs:
        return None
    procs = sorted({k for r in runs for k in r["us_per_msg"]})
    us = {p: median([r["us_per_msg"][p] for r in runs if p in r["us_per_msg"]]) for p in procs}
    servers = runs[0]["server_procs"]
    return {
        "eps": median([r["eps"] for r in runs]),
        "eps_min": min(r["eps"] for r in runs),
        "eps_max": max(r["eps"] for r in runs),
        "lost_max": max(r["lost"] for r in runs),
        "us_per_msg": us,
        "us_per_msg_servers": median(
            [sum(r["us_per_msg"][p] for p in servers if p in r["us_per_msg"]) for r in runs]
        ),
        "us_per_msg_with_sender": median(
            [sum(r["us_per_msg"][p] for p in (*servers, r["sender"])) for r in runs]
        ),
        "load_min": min(r["load_before"] for r in runs),
        "load_max": max(r["load_before"] for r in runs),
        "runs": len(runs),
        "failed": len(ld.runs.get(name, [])) - len(runs),
    }


def report(ls: list[Load], systems: list[System]) -> tuple[str, list[dict[str, Any]]]:
    names = {s.name: s.label for s in systems}
    head = (
        "| load | system | stored msg/s (median) | min–max | lost (max) | "
        "CPU µs/msg: syslog-ng / indexd / victoria-logs / sender | servers' µs/msg | "
        "logbox / VL | logbox / ceiling | load avg before | target |"
    )
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    rows = []
    for ld in ls:
        sm = {n: summary(ld, n) for n in names}
        lb, vl, fc = sm.get("logbox"), sm.get("victoria"), sm.get("file")
        ratios: dict[str, float | None] = {
            "eps_logbox_over_victoria": lb["eps"] / vl["eps"] if lb and vl and vl["eps"] else None,
            "eps_logbox_over_ceiling": lb["eps"] / fc["eps"] if lb and fc and fc["eps"] else None,
            "cpu_logbox_over_victoria": (
                lb["us_per_msg_servers"] / vl["us_per_msg_servers"]
                if lb and vl and vl["us_per_msg_servers"]
                else None
            ),
        }
        for n, label in names.items():
            s = sm[n]
            if s is None:
                fails = len(ld.runs.get(n, []))
                lines.append(f"| {ld.label} | {label} | failed ({fails} runs) | | | | | | | | |")
                continue
            u = s["us_per_msg"]
            sender = next((k for k in ("loggen", "sendfile") if k in u), "")

            def f(k: str, u: dict[str, Any] = u) -> str:
                return f"{u[k]:.2f}" if u.get(k) is not None else "—"

            target = ""
            if n == "logbox":
                t = ld.target()
                if t:
                    ok = s["eps"] >= t[0] and (s["lost_max"] == 0 or "lost" not in t[1])
                    target = f"{'ok' if ok else 'MISSED'} {t[1]}"
                cr = ratios["cpu_logbox_over_victoria"]
                if cr is not None:
                    target += ("; " if target else "") + (
                        f"{'ok' if cr <= 1 else 'MISSED'} CPU/msg <= VL's ({cr:.2f}x)"
                    )
                er = ratios["eps_logbox_over_victoria"]
                if ld.replay and er is not None:
                    target += f"; {'ok' if er >= 1 else 'MISSED'} msg/s >= 1.0x VL"
                if s["failed"]:
                    target += f" ({s['failed']} run(s) failed)"

            def r(k: str, n: str = n, ratios: dict[str, float | None] = ratios) -> str:
                v = ratios[k]
                return f"{v:.2f}" if n == "logbox" and v is not None else ""

            lines.append(
                f"| {ld.label} | {label} | {s['eps']:,.0f} | {s['eps_min']:,}–{s['eps_max']:,} | "
                f"{s['lost_max']:,} | {f('syslog-ng')} / {f('indexd')} / {f('victoria-logs')} / "
                f"{f(sender)} | {s['us_per_msg_servers']:.2f} | "
                f"{r('eps_logbox_over_victoria')} | {r('eps_logbox_over_ceiling')} | "
                f"{s['load_min']:.1f}–{s['load_max']:.1f} | {target} |"
            )
        rows.append(
            {
                "load": ld.key,
                "label": ld.label,
                "messages": ld.messages,
                "summary": sm,
                "ratios": ratios,
                "runs": ld.runs,
            }
        )
    return "\n".join(lines), rows


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    ap.add_argument("--quick", action="store_true", default=quick, help="~3 min (BENCH_QUICK=1)")
    ap.add_argument("--runs", type=int, default=None, help="runs per load and system (median)")
    ap.add_argument("--messages", type=int, default=None, help="messages per 150 B loggen run")
    ap.add_argument("--messages-1k", type=int, default=None, help="messages per 1 KiB run")
    ap.add_argument("--replay-lines", type=int, default=None, help="lines per replay run")
    ap.add_argument("--replay-sender", choices=("sendfile", "loggen"), default="sendfile")
    ap.add_argument("--only", default="", help="comma-separated substrings of load keys")
    ap.add_argument("--systems", default="logbox,file,victoria", help="which systems")
    ap.add_argument(
        "--vl-header-time",
        action="store_true",
        help="VictoriaLogs stamps by the header's time (default: on arrival, like logbox)",
    )
    ap.add_argument("--no-alone", action="store_true", help="skip indexd alone")
    ap.add_argument("--no-latency", action="store_true", help="skip the searchable latency")
    ap.add_argument("--latency-rate", type=int, default=100_000)
    ap.add_argument("--latency-seconds", type=float, default=None)
    ap.add_argument("--latency-conns", type=int, default=4)
    ap.add_argument("--latency-probes", type=float, default=20.0, help="probes per second")
    add_program_options(ap, "logbox", "indexd", "searchd")
    ap.add_argument("--peers", type=Path, default=TOP / "build" / "peers")
    add_out_option(ap)
    args = ap.parse_args(argv)
    q = args.quick
    args.runs = args.runs or (1 if q else 3)
    args.messages = args.messages or (320_000 if q else 1_600_000)
    args.messages_1k = args.messages_1k or (160_000 if q else 800_000)
    args.replay_lines = args.replay_lines or (320_000 if q else 2_000_000)
    args.latency_seconds = args.latency_seconds or (8.0 if q else 30.0)
    args.systems = [s for s in args.systems.split(",") if s]
    for n in (args.messages, args.messages_1k):
        if n % 16:
            sys.exit("bench-ingest: message counts must be multiples of 16 (16 connections)")
    for tool in ("syslog-ng", "loggen", "openssl"):
        if shutil.which(tool) is None:
            sys.exit(f"bench-ingest: {tool} not found (make deps)")
    for exe in (args.logbox, args.indexd, args.searchd):
        if not exe.is_file():
            sys.exit(f"bench-ingest: {exe} not found (make build)")

    m0 = machine()
    try:
        b = Bench(args)
    except RuntimeError as e:
        sys.exit(f"bench-ingest: {e}")
    v = versions(b.vl)
    say(machine_line(m0))
    say(f"versions: syslog-ng {v['syslog-ng']}, {v['openssl']}, {v['victoria-logs']}")
    say(f"logbox {v['logbox']}")
    ls = loads(args)
    if any(ld.replay for ld in ls):
        b.replay = replay_corpus(b.work, args.replay_lines)
        say(
            f"replay corpus: {b.replay[0]} ({b.replay[1]['lines']:,} lines, "
            f"{b.replay[1]['bytes'] / 1e6:.0f} MB), sender {args.replay_sender}"
        )
    t_start = time.monotonic()
    for r in range(args.runs):
        for ld in ls:
            for s in b.systems:
                try:
                    res = b.run(ld, s)
                except (RuntimeError, ValueError, OSError) as e:
                    say(f"  run {r + 1} {ld.label} -> {s.label}: FAILED: {str(e)[-1500:]}")
                    ld.runs.setdefault(s.name, []).append({"error": str(e)[-3000:]})
                    continue
                ld.runs.setdefault(s.name, []).append(res)
                cpu = res["us_per_msg"]
                say(
                    f"  run {r + 1}/{args.runs} {ld.label:34} -> {s.name:8} {res['eps']:>9,} msg/s"
                    f" ({res['stored']:,}/{res['sent']:,} in {res['elapsed_s']:.2f} s; µs/msg "
                    + ", ".join(f"{k} {x:.2f}" for k, x in cpu.items())
                    + f"; load {res['load_before']:.2f})"
                )
    alone: dict[str, Any] | None = None
    if not args.no_alone:
        alone = indexd_alone(args)
        eps = alone.get("msg_per_s")
        say(f"  indexd alone: {eps:,.0f} msg/s" if eps else f"  indexd alone failed: {alone}")
    latency: dict[str, Any] | None = None
    logbox = next((s for s in b.systems if isinstance(s, Logbox)), None)
    if not args.no_latency and logbox is not None:
        say(
            f"searchable latency: {args.latency_rate:,} msg/s for {args.latency_seconds:.0f} s "
            f"over {args.latency_conns} connections, {args.latency_probes:.0f} probes/s"
        )
        try:
            latency = ingest_latency.measure(
                logbox,
                args.searchd,
                args.latency_rate,
                args.latency_seconds,
                args.latency_probes,
                args.latency_conns,
            )
        except (RuntimeError, OSError, AssertionError) as e:
            latency = {"error": str(e)[-3000:]}
        say(f"  {latency}")
    took = time.monotonic() - t_start
    m1 = machine()
    text, rows = report(ls, b.systems)
    extra = []
    if alone is not None:
        eps = alone.get("msg_per_s")
        ok = "ok" if isinstance(eps, int | float) and eps >= TARGET_ALONE else "MISSED"
        extra.append(
            f"- {alone['what']}: "
            + (f"{eps:,.0f} msg/s ({ok} >= 600k)" if isinstance(eps, int | float) else "failed")
            + (f", {alone['cpu_us']:.2f} CPU µs/msg" if "cpu_us" in alone else "")
        )
    if latency is not None:
        if "p99_ms" in latency:
            ok = "ok" if latency["p99_ms"] <= TARGET_LATENCY_P99_MS else "MISSED"
            extra.append(
                f"- searchable latency (send -> searchd counts it) at {latency['sent_rate']:,} "
                f"msg/s sent (asked {latency['target_rate']:,}): p50 {latency['p50_ms']:.0f} ms, "
                f"p99 {latency['p99_ms']:.0f} ms, max {latency['max_ms']:.0f} ms over "
                f"{latency['found']} probes, {latency['not_found_in_30s']} not found "
                f"({ok} p99 <= 1 s)"
            )
        else:
            extra.append(f"- searchable latency: failed: {latency.get('error', latency)}")
    md = [
        "# End-to-end ingest benchmark (issue 16)",
        "",
        f"- machine: {m0['nproc']} CPUs ({m0['cpu']}), {m0['mem_gib']} GiB RAM, kernel "
        f"{m0['kernel']}; load average at start {m0['loadavg'][0]:.2f}, at end "
        f"{m1['loadavg'][0]:.2f} (before each run: in the JSON, `load_before`)",
        f"- versions: syslog-ng {v['syslog-ng']}, {v['openssl']}, {v['victoria-logs']}, "
        f"logbox {v['logbox']}",
        f"- command: tests/bench/ingest_e2e.py {' '.join(sys.argv[1:])}".rstrip(),
        f"- {args.runs} run(s) per load and system, round robin; {args.messages:,} messages per "
        f"150 B run, {args.messages_1k:,} per 1 KiB run, {args.replay_lines:,} replay lines "
        f"(sender: {args.replay_sender}); took {took / 60:.1f} min",
        "- stored msg/s = the load's messages stored / (first send -> all stored: indexd's "
        "status, the file's lines, VictoriaLogs' vl_rows_ingested_total); lost = sent - stored; "
        "CPU µs/msg = a process's CPU time (utime + stime) / messages stored; servers' = "
        "syslog-ng + indexd, syslog-ng alone (ceiling), or victoria-logs; ceiling = the same "
        "load into syslog-ng file() with the default template; TLS: loggen held to TLS 1.2; "
        "VictoriaLogs stamps messages "
        + ("by their header's time" if args.vl_header_time else "on arrival (as logbox)"),
        *([f"- VictoriaLogs left out: {b.vl_missing}"] if b.vl_missing else []),
        "",
        text,
        "",
        *extra,
        "",
    ]
    out = "\n".join(md)
    args.out.mkdir(parents=True, exist_ok=True)
    raw = {
        "machine": m0,
        "machine_end": m1,
        "versions": v,
        "victoria_left_out": b.vl_missing or None,
        "vl_header_time": args.vl_header_time,
        "argv": sys.argv[1:],
        "runs_per_load": args.runs,
        "quick": args.quick,
        "targets": {
            "tcp_150_16_eps": TARGET_TCP16,
            "tls_150_eps": TARGET_TLS,
            "1k_eps": TARGET_1K,
            "indexd_alone_eps": TARGET_ALONE,
            "latency_p99_ms": TARGET_LATENCY_P99_MS,
        },
        "loads": rows,
        "indexd_alone": alone,
        "searchable_latency": latency,
        "took_s": took,
    }
    write_report(args.out, "ingest", out, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
