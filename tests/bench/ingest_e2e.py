#!/usr/bin/env python3
"""End-to-end ingest benchmark (issue 5; run by `make bench` after run.py, or `make
bench-ingest`; not a test: a missed target is reported, never a failure).

Sustained stored messages/s, loggen -> syslog-ng -> FIFO -> logbox-indexd, every token indexed:
stored / elapsed, elapsed = from starting loggen (a fixed message count, --number) to the
moment indexd's status JSON says the store holds them all (then, after indexd stopped, loggen's
messages are counted in the store by program name, `logbox search --count`, apart from
syslog-ng's own: stored must equal sent). Plain TCP and TLS, 150 B and 1 KiB
messages, 1 and 16 connections. In the same run, interleaved:
  - ceiling: the same loggen load into syslog-ng with the same sources and parsing, writing a
    plain file() with the default template (completion: the file holds every line);
  - the hand-off alone: the same syslog-ng with file() and the frame template (what the
    template costs) and indexd fed only with those captured frames through its FIFO, as fast
    as it takes them (indexd's own rate);
  - indexd without the reliable disk buffer in syslog-ng (what reliable(yes) costs).
Each configuration runs --runs times (round robin over the configurations); medians, the
ratio to the ceiling, the CPU each process used (from /proc/<pid>/task/*/stat and loggen's
rusage), the machine and versions are printed as a table and written to
build/bench/ingest-e2e.json and ingest-e2e.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import inspect
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP))

TARGET_EPS = 150_000
TARGET_RATIO = 0.80
F_SETPIPE_SZ = 1031
PIPE_SIZE = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.02
STALL_S = 15.0
LOGGEN_PROGRAM = "prg00000"  # the program name in every loggen message  # no progress for this long: the run ends with what was stored

# ---------------------------------------------------------------- machine and versions


def machine() -> dict[str, Any]:
    model = "?"
    mem = 0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "kernel": platform.release(),
        "mem_gib": round(mem / 2**30, 1),
        "loadavg": os.getloadavg(),
    }


def versions() -> dict[str, str]:
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
        "syslog-ng": first(["syslog-ng", "--version"]).replace("syslog-ng 3 ", "").strip("()")
        or "?",
        "openssl": first(["openssl", "version"]),
        "logbox": g.stdout.strip() or "?",
        "python": platform.python_version(),
    }


def say(msg: str) -> None:
    print(msg, flush=True)


# ---------------------------------------------------------------- CPU accounting


def proc_ticks(pid: int) -> dict[str, int]:
    """CPU ticks (user + system) per thread of pid, keyed "tid:comm"; {} once it is gone."""
    out: dict[str, int] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            s = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        comm = s[s.index("(") + 1 : s.rindex(")")]
        f = s[s.rindex(")") + 2 :].split()
        out[f"{tid}:{comm}"] = int(f[11]) + int(f[12])
    return out


def system_idle() -> tuple[int, int]:
    """(idle + iowait ticks, all ticks) over all CPUs from /proc/stat."""
    f = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    v = [int(x) for x in f]
    return v[3] + v[4], sum(v[:8])


def cpu_use(before: dict[str, int], after: dict[str, int], secs: float) -> dict[str, Any]:
    """Cores used by the process (sum of its threads) and by its busiest thread."""
    per = {k: after[k] - before.get(k, 0) for k in after}
    tot = sum(per.values()) / CLK_TCK / secs if secs > 0 else 0.0
    if per:
        k, v = max(per.items(), key=lambda kv: kv[1])
        top = v / CLK_TCK / secs if secs > 0 else 0.0
        name = k.split(":", 1)[1]
    else:
        top, name = 0.0, ""
    busiest = sorted(per.values(), reverse=True)[:4]
    return {
        "cores": round(tot, 3),
        "top_thread": round(top, 3),
        "top_thread_name": name,
        "threads": len(per),
        "busiest_threads": [round(t / CLK_TCK / secs, 3) for t in busiest] if secs > 0 else [],
    }


# ---------------------------------------------------------------- helpers


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 15) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {timeout} s")


def stop(proc: subprocess.Popen | None, timeout: float = 30) -> int | None:
    if proc is None or proc.poll() is not None:
        return None if proc is None else proc.returncode
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return ""


def tls_material(work: Path) -> tuple[Path, Path, Path]:
    """A throw-away CA and a server certificate for 127.0.0.1 (openssl CLI), made once."""
    d = work / "tls"
    ca, cert, key = d / "ca.pem", d / "server.pem", d / "server.key"
    if cert.is_file() and key.is_file() and ca.is_file():
        return ca, cert, key
    d.mkdir(parents=True, exist_ok=True)

    def ssl(*a: str) -> None:
        p = subprocess.run(["openssl", *a], capture_output=True, cwd=d)
        if p.returncode != 0:
            sys.exit(f"bench-ingest: openssl {a[0]} failed: {p.stderr.decode()[-1000:]}")

    ssl(
        *("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30"),
        *("-subj", "/CN=bench CA", "-keyout", "ca.key", "-out", "ca.pem"),
    )
    ssl(
        *("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1"),
        *("-keyout", "server.key", "-out", "server.csr"),
    )
    ext = d / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ssl(
        *("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key"),
        *("-CAcreateserial", "-days", "30", "-extfile", "ext.cnf", "-out", "server.pem"),
    )
    return ca, cert, key


# ---------------------------------------------------------------- the syslog-ng configuration

# The hand-off frame template of INGEST.md, used only while collector/render.py is absent.
MSG_CUT = "$(substr ${MSG} 0 262145)"
FRAME_TEMPLATE = (
    "LB1 ${R_UNIXTIME} ${S_UNIXTIME} ${S_TZOFFSET} ${PRI} ${.lb.fmt} $(length ${.lb.ls:-main}) "
    "$(length ${HOST}) $(length ${PROGRAM}) $(length ${PID}) $(length ${MSGID}) "
    f"$(length ${{SDATA}}) $(length {MSG_CUT})\\n"
    f"${{.lb.ls:-main}}${{HOST}}${{PROGRAM}}${{PID}}${{MSGID}}${{SDATA}}{MSG_CUT}\\n"
)
PARSE = (
    "if { filter { message('^<[0-9]{1,3}>1 ' type(pcre)); }; "
    "parser { syslog-parser(flags(syslog-protocol)); }; "
    'rewrite { set("5" value(".lb.fmt")); }; } '
    'else { parser { syslog-parser(); }; rewrite { set("3" value(".lb.fmt")); }; };'
)


@dataclass
class Paths:
    data: Path  # indexd's data dir; syslog-ng's disk buffer under data/collector/buffer
    run: Path  # FIFO, persist, pid, control socket
    out: Path  # the file() destination


def fallback_config(tcp: int, tls: int, tls_files: tuple[Path, Path, Path], p: Paths) -> str:
    """A configuration shaped as INGEST.md describes (for when collector/render.py is absent)."""
    ca, cert, key = tls_files
    buf = p.data / "collector" / "buffer"
    return f"""@version: 3.38
options {{ flush-lines(0); log-msg-size(16777216); frac-digits(6); stats-freq(0);
  keep-hostname(yes); chain-hostnames(no); use-dns(no); dns-cache(no); }};
source s_tcp {{ network(ip("127.0.0.1") port({tcp}) transport(tcp) flags(no-parse)
  max-connections(10000) log-msg-size(16777216)); }};
source s_tls {{ network(ip("127.0.0.1") port({tls}) transport(tls) flags(no-parse)
  max-connections(10000) log-msg-size(16777216)
  tls(key-file("{key}") cert-file("{cert}") ca-file("{ca}") peer-verify(optional-untrusted)
      ssl-options(no-sslv2, no-sslv3, no-tlsv1, no-tlsv11))); }};
destination d_indexd {{ pipe("{p.run / "indexd.fifo"}" template("{FRAME_TEMPLATE}")
  disk-buffer(reliable(yes) dir("{buf}") disk-buf-size(1073741824))); }};
log {{ source(s_tcp); source(s_tls); {PARSE} destination(d_indexd); flags(flow-control); }};
"""


def balanced_end(text: str, open_at: int) -> int:
    """The index just past the ')' closing the '(' at open_at (quoted strings skipped)."""
    depth, i, q = 0, open_at, ""
    while i < len(text):
        c = text[i]
        if q:
            if c == "\\":
                i += 1
            elif c == q:
                q = ""
        elif c in "\"'":
            q = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced parentheses in the configuration")


def call_span(text: str, name: str, start: int = 0) -> tuple[int, int] | None:
    """(start, end) of the first `name(...)` call at or after start, or None."""
    m = re.compile(rf"(?<![\w-]){re.escape(name)}\s*\(").search(text, start)
    if m is None:
        return None
    return m.start(), balanced_end(text, m.end() - 1)


def variant(base: str, kind: str, p: Paths) -> str:
    """The rendered configuration with its pipe() destination replaced:
    "indexd"         as rendered (reliable disk buffer);
    "indexd-nobuf"   the same pipe() without its disk-buffer() option;
    "file"           file(out) with the default template (the front end's ceiling);
    "frames"         file(out) with the frame template (the template's cost; frames for indexd).
    Sources, parsing and flags stay as rendered."""
    span = call_span(base, "pipe")
    if span is None:
        raise ValueError("no pipe() destination in the rendered configuration")
    a, b = span
    pipe = base[a:b]
    if kind == "indexd":
        return base
    if kind == "indexd-nonrel":
        d = call_span(pipe, "disk-buffer") or call_span(pipe, "disk_buffer")
        if d is None:
            return base
        db = re.sub(r"reliable\s*\(\s*(yes|true|1)\s*\)", "reliable(no)", pipe[d[0] : d[1]])
        return base[:a] + pipe[: d[0]] + db + pipe[d[1] :] + base[b:]
    if kind == "indexd-nobuf":
        d = call_span(pipe, "disk-buffer") or call_span(pipe, "disk_buffer")
        if d is None:
            return base
        return base[:a] + pipe[: d[0]] + pipe[d[1] :] + base[b:]
    if kind == "file":
        return base[:a] + f'file("{p.out}")' + base[b:]
    if kind == "frames":
        t = call_span(pipe, "template")
        if t is None:
            raise ValueError("the pipe() destination has no template()")
        return base[:a] + f'file("{p.out}" {pipe[t[0] : t[1]]})' + base[b:]
    raise ValueError(kind)


# ---------------------------------------------------------------- the configurations measured


@dataclass
class Case:
    kind: str  # "indexd", "indexd-nobuf", "file", "frames" (through syslog-ng), "direct"
    transport: str  # "tcp", "tls" (loggen -> syslog-ng), "fifo" (frames -> indexd)
    size: int  # loggen --size
    conns: int  # loggen --active-connections
    messages: int  # total sent
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.transport}/{self.size}/{self.conns}"

    @property
    def label(self) -> str:
        what = {
            "indexd": "syslog-ng -> indexd",
            "indexd-nobuf": "syslog-ng -> indexd, no disk buffer",
            "indexd-nonrel": "syslog-ng -> indexd, disk buffer reliable(no)",
            "file": "syslog-ng -> file() (ceiling)",
            "frames": "syslog-ng -> file(), frame template",
            "direct": "frames -> indexd FIFO (indexd alone)",
        }[self.kind]
        size = f"{self.size} B" if self.size < 1024 else f"{self.size // 1024} KiB"
        if self.kind == "direct":
            return f"{what}, {size}"
        return f"{what}, {self.transport.upper()}, {size}, {self.conns} conn"


def cases(n150: int, n1k: int, quick: bool) -> list[Case]:
    out: list[Case] = []
    for size, n in ((150, n150), (1024, n1k)):
        for transport in ("tcp", "tls"):
            for conns in (1, 16):
                if quick and (transport == "tls" or size == 1024):
                    continue
                out.append(Case("indexd", transport, size, conns, n))
                out.append(Case("file", transport, size, conns, n))
        if quick and size == 1024:
            continue
        for conns in (1, 16):
            if size == 150:
                out.append(Case("indexd-nobuf", "tcp", size, conns, n))
                if conns == 16:
                    out.append(Case("indexd-nonrel", "tcp", size, conns, n))
        out.append(Case("frames", "tcp", size, 16, n))
        out.append(Case("direct", "fifo", size, 1, n))
    return out


# ---------------------------------------------------------------- running one configuration


class Counter:
    """Counts what has arrived: indexd's status JSON ("stored"), or the lines of a file."""

    def __init__(self, kind: str, path: Path, lines_per_msg: int = 1) -> None:
        self.kind, self.path, self.per = kind, path, lines_per_msg
        self.pos = 0
        self.lines = 0
        self.written = 0.0  # status: when the file read last was written (time.time())

    def count(self) -> int:
        if self.kind == "status":
            try:
                with open(self.path, "rb") as f:
                    self.written = os.fstat(f.fileno()).st_mtime
                    st = json.loads(f.read())
            except (OSError, ValueError):
                return 0
            return int(st.get("stored", 0))
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                while chunk := f.read(1 << 22):
                    self.lines += chunk.count(b"\n")
                    self.pos += len(chunk)
        except OSError:
            pass
        return self.lines // self.per


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work: Path = args.out / "ingest"
        self.logbox: Path = args.logbox
        self.indexd: Path = args.indexd
        self.root = os.geteuid() == 0
        shutil.rmtree(self.work / "r", ignore_errors=True)
        self.work.mkdir(parents=True, exist_ok=True)
        self.tls = tls_material(self.work)
        self.tcp_port, self.tls_port = free_port(), free_port()
        self.p = Paths(self.work / "r" / "data", self.work / "r" / "run", self.work / "r" / "out")
        self.base, self.base_nonrel, self.renderer = self.render()
        self.frames: dict[int, tuple[Path, int]] = {}  # size -> (captured frames, count)
        self.framecheck = build_framecheck(args.out)
        self.tls_framed = bool(re.search(r"syslog\s*\([^;]*transport\s*\(\s*\"?tls", self.base))

    def render(self) -> tuple[str, str | None, str]:
        """(configuration, the same with reliable = false or None, where it comes from)."""
        try:
            from collector import render  # type: ignore[import-not-found]
        except ImportError:
            return (
                fallback_config(self.tcp_port, self.tls_port, self.tls, self.p),
                None,
                "bench fallback (collector/render.py absent)",
            )
        ca, cert, key = self.tls
        try:
            s = render_settings(
                render.load_settings(None), self.tcp_port, self.tls_port, ca, cert, key
            )
            kw: dict[str, Any] = {"data": self.p.data, "run": self.p.run}
            if "fifo" in inspect.signature(render.render).parameters:
                kw["fifo"] = self.p.run / "indexd.fifo"
            conf = render.render(s, **kw)
            nonrel = None
            if getattr(s, "reliable", None) is True:
                nonrel = render.render(dataclasses.replace(s, reliable=False), **kw)
            return conf, nonrel, "collector/render.py"
        except Exception as e:  # an API the bench does not know yet: say so, go on
            return (
                fallback_config(self.tcp_port, self.tls_port, self.tls, self.p),
                None,
                f"bench fallback (collector/render.py failed: {type(e).__name__}: {e})",
            )

    def config(self, kind: str) -> str:
        if kind == "indexd-nonrel" and self.base_nonrel is not None:
            conf = self.base_nonrel
        else:
            conf = variant(self.base, kind, self.p)
        extra = self.args.pipe_options
        if extra and kind.startswith("indexd"):
            a, b = call_span(conf, "pipe") or (0, 0)
            conf = conf[: b - 1] + f" {extra})" + conf[b:]
        return conf

    def fresh(self) -> None:
        shutil.rmtree(self.work / "r", ignore_errors=True)
        for d in (self.p.data, self.p.run):
            d.mkdir(parents=True)
        (self.p.data / "collector" / "buffer").mkdir(parents=True)

    # -- daemons

    def start_indexd(self) -> tuple[subprocess.Popen, int, Path]:
        fifo = self.p.run / "indexd.fifo"
        os.mkfifo(fifo, 0o600)
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        os.set_blocking(fd, True)
        try:
            fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:
            pass
        status = self.p.run / "indexd.status.json"
        conf = self.p.run / "indexd.conf"
        conf.write_text(f"status_interval_ms = {self.args.status_ms}\n")
        move = "" if fd == 3 else f"exec 3<&{fd} {fd}<&-; "  # the FIFO becomes fd 3
        argv = [
            "sh",
            "-c",
            f'{move}LISTEN_FDS=1 LISTEN_PID=$$; export LISTEN_FDS LISTEN_PID; exec "$@"',
            "sh",
            str(self.indexd),
            *("--data", str(self.p.data), "--status", str(status), "--config", str(conf)),
        ]
        if self.root:
            argv.append("--allow-root")
        err = open(self.p.run / "indexd.stderr", "wb")
        proc = subprocess.Popen(argv, stdout=err, stderr=err, pass_fds=(fd,))
        err.close()
        end = time.monotonic() + 15
        while not status.is_file():
            if proc.poll() is not None or time.monotonic() > end:
                os.close(fd)
                stop(proc)
                raise RuntimeError(f"indexd did not start:\n{tail(self.p.run / 'indexd.stderr')}")
            time.sleep(0.02)
        return proc, fd, status

    def start_syslogng(self, conf: str, port: int) -> subprocess.Popen:
        cf = self.p.run / "syslog-ng.conf"
        cf.write_text(conf)
        r = self.p.run
        argv = ["syslog-ng", "-F", "-f", str(cf), "-R", str(r / "syslog-ng.persist")]
        argv += ["-p", str(r / "syslog-ng.pid"), "-c", str(r / "syslog-ng.ctl")]
        err = open(r / "syslog-ng.stderr", "wb")
        proc = subprocess.Popen(argv, stdout=err, stderr=err)
        err.close()
        try:
            wait_port(port, proc)
        except RuntimeError as e:
            stop(proc)
            raise RuntimeError(f"syslog-ng: {e}\n{tail(r / 'syslog-ng.stderr')}") from e
        return proc

    def loggen_argv(self, c: Case, port: int) -> list[str]:
        # --interval defaults to 10 s and ends the run before --number is reached.
        argv = ["loggen", "-Q", "-r", "1000000000", "-I", "3600", "-s", str(c.size)]
        argv += ["-n", str(c.messages // c.conns), "--active-connections", str(c.conns)]
        if c.transport == "tls":
            # The TLS plugin alone: with --inet or --stream loggen activates two plugins and
            # sends nothing.
            argv.append("-U")
            if self.tls_framed:
                argv.append("-P")
        else:
            argv += ["-i", "-S"]
        return [*argv, "127.0.0.1", str(port)]

    # -- one run

    def run(self, c: Case) -> dict[str, Any]:
        self.fresh()
        indexd = sng = None
        fd = -1
        procs: dict[str, int] = {}
        res: dict[str, Any] = {"sent": c.messages}
        try:
            if c.kind.startswith("indexd") or c.kind == "direct":
                indexd, fd, status = self.start_indexd()
                procs["indexd"] = indexd.pid
                counter = Counter("status", status)
            elif c.kind == "file":
                counter = Counter("lines", self.p.out)
            else:
                counter = Counter("lines", self.p.out, 2)
            if c.kind != "direct":
                port = self.tcp_port if c.transport == "tcp" else self.tls_port
                sng = self.start_syslogng(self.config(c.kind), port)
                procs["syslog-ng"] = sng.pid
                argv = self.loggen_argv(c, port)
                sender_name = "loggen"
                stdin = None
            else:
                path, n = self.frames[c.size]
                res["sent"] = n * self.args.direct_repeat
                argv = ["cat", *[str(path)] * self.args.direct_repeat]
                sender_name = "cat"
                stdin = None
            # syslog-ng stores its own messages too (source internal()): what arrived before
            # loggen starts is the base; loggen's messages are counted by program at the end.
            base = settle(counter) if c.kind != "direct" else 0
            res["base"] = base
            want = base + res["sent"]
            before = {k: proc_ticks(pid) for k, pid in procs.items()}
            self0 = os.times()
            idle0 = system_idle()
            t0 = time.monotonic()
            t0_wall = time.time()
            if c.kind == "direct":
                w = os.open(self.p.run / "indexd.fifo", os.O_WRONLY)
                sender = subprocess.Popen(argv, stdin=stdin, stdout=w, stderr=subprocess.PIPE)
                os.close(w)
            else:
                sender = subprocess.Popen(
                    argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
                )
            sender_ru = None
            sender_done = 0.0
            got, last, t_last = 0, -1, t0
            while True:
                if sender_ru is None:
                    pid, st, ru = os.wait4(sender.pid, os.WNOHANG)
                    if pid:
                        sender.returncode = os.waitstatus_to_exitcode(st)
                        sender_ru, sender_done = ru, time.monotonic() - t0
                got = counter.count()
                now = time.monotonic()
                if got >= want:
                    break
                if got != last:
                    last, t_last = got, now
                elif now - t_last > (STALL_S if sender_ru is None else STALL_S / 3):
                    break
                time.sleep(POLL_S)
            t1 = time.monotonic()
            after = {k: proc_ticks(pid) for k, pid in procs.items()}
            idle1 = system_idle()
            self1 = os.times()
            elapsed = (t_last if got < want else t1) - t0
            if got >= want and counter.kind == "status" and counter.written > t0_wall:
                # the status file's write time, not when it was polled (resolution: the
                # status interval)
                elapsed = min(elapsed, counter.written - t0_wall)
            if sender_ru is None:
                _, st, sender_ru = os.wait4(sender.pid, 0)
                sender.returncode = os.waitstatus_to_exitcode(st)
                sender_done = time.monotonic() - t0
            out = sender.stdout.read().decode(errors="replace") if sender.stdout else ""
            if sender.returncode != 0 or re.search(r"^error ", out, re.M):
                raise RuntimeError(f"{' '.join(argv)}: exit {sender.returncode}\n{out[-2000:]}")
            cpu = {k: cpu_use(before[k], after[k], t1 - t0) for k in procs}
            cpu[sender_name] = {
                "cores": round((sender_ru.ru_utime + sender_ru.ru_stime) / (t1 - t0), 3)
            }
            busy = 1 - (idle1[0] - idle0[0]) / max(1, idle1[1] - idle0[1])
            mine = (self1.user + self1.system - self0.user - self0.system) / (t1 - t0)
            ours = sum(v["cores"] for v in cpu.values()) + mine
            cpu["bench"] = {"cores": round(mine, 3)}
            cpu["others"] = {"cores": round(max(0.0, busy * (os.cpu_count() or 1) - ours), 3)}
            for v in cpu.values():  # CPU µs per message counted
                v["us_per_msg"] = round(v["cores"] * (t1 - t0) / max(1, got) * 1e6, 3)
            res.update(
                elapsed_s=round(elapsed, 4),
                sender_s=round(sender_done, 4),
                seen=got,
                cpu=cpu,
                system_busy=round(busy, 3),
            )
            m = re.search(r"average rate = ([\d.]+)", out)
            if m:
                res["loggen_rate"] = float(m.group(1))
            stop(sng)
            sng = None
            if indexd is not None:
                rc = stop(indexd)
                indexd = None
                if rc not in (0, None):
                    res["indexd_exit"] = rc
                res["stored_all"] = self.stored()
                res["stored"] = self.stored_loggen() if c.kind != "direct" else res["stored_all"]
            else:
                res["stored_all"] = got
                res["stored"] = count_in_file(self.p.out, LOGGEN_PROGRAM.encode())
            res["eps"] = round(res["stored"] / elapsed) if elapsed > 0 else 0
            res["lost"] = res["sent"] - res["stored"]
            if c.kind == "frames":
                chk = check_frames(self.framecheck, self.p.out)
                res["framecheck"] = chk
                if chk.get("malformed"):
                    raise RuntimeError(f"syslog-ng wrote malformed frames: {chk}")
                if c.size not in self.frames and res["lost"] == 0:
                    keep = self.work / f"frames-{c.size}.bin"
                    shutil.move(self.p.out, keep)
                    # indexd stores the logspace main's frames where it is counted; syslog-ng's own
                    # (logspace system) are in the file too.
                    self.frames[c.size] = (keep, chk.get("main_frames", got))
            return res
        finally:
            stop(sng)
            stop(indexd)
            if fd >= 0:
                os.close(fd)

    def stored(self) -> int:
        p = subprocess.run(
            [str(self.logbox), "stats", "--data", str(self.p.data), "--json"],
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            raise RuntimeError(f"logbox stats failed: {p.stderr[-2000:]}")
        return int(json.loads(p.stdout).get("messages", 0))

    def stored_loggen(self) -> int:
        """loggen's messages in the store (its program name), not syslog-ng's own."""
        p = subprocess.run(
            [str(self.logbox), "search", "--data", str(self.p.data), "--count"]
            + [f"program:{LOGGEN_PROGRAM}"],
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            raise RuntimeError(f"logbox search --count failed: {p.stderr[-2000:]}")
        return int(p.stdout.split()[0].replace(",", ""))


def settle(counter: Counter, quiet: float = 0.3, limit: float = 3.0) -> int:
    """The count once it has not changed for `quiet` seconds (at most `limit` seconds)."""
    end = time.monotonic() + limit
    n, since = counter.count(), time.monotonic()
    while time.monotonic() < end:
        time.sleep(POLL_S)
        m = counter.count()
        if m != n:
            n, since = m, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return n


def count_in_file(path: Path, needle: bytes) -> int:
    """Lines of path holding needle."""
    n = 0
    try:
        with open(path, "rb") as f:
            for line in f:
                n += needle in line
    except OSError:
        pass
    return n


def build_framecheck(out: Path) -> Path | None:
    """tests/bench/framecheck.c linked with build/liblogbox.a (None if that fails)."""
    lib = TOP / "build" / "liblogbox.a"
    exe = out / "framecheck"
    src = TOP / "tests" / "bench" / "framecheck.c"
    if not lib.is_file():
        return None
    out.mkdir(parents=True, exist_ok=True)
    argv = ["cc", "-O2", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror"]
    argv += ["-I", str(TOP / "indexer" / "lib"), "-o", str(exe), str(src), str(lib)]
    argv += ["-llmdb", "-lisal", "-lz", "-ljansson", "-levent", "-lsystemd", "-lm", "-lpthread"]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        say(f"framecheck.c did not build (frames not checked):\n{p.stderr[-1500:]}")
        return None
    return exe


def check_frames(exe: Path | None, path: Path) -> dict[str, Any]:
    """framecheck's verdict on a file of frames ({} without framecheck)."""
    if exe is None:
        return {}
    p = subprocess.run([str(exe), str(path)], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"framecheck {path}: {p.stderr[-1000:]}")
    return json.loads(p.stdout)


def render_settings(s: Any, tcp: int, tls: int, ca: Path, cert: Path, key: Path) -> Any:
    """collector/render.py's settings for the bench: loopback, the TCP and TLS ports picked,
    the other inputs off, the bench's certificate; everything else as rendered by default."""
    return dataclasses.replace(
        s,
        bind="127.0.0.1",
        tcp_port=tcp,
        octet_port=0,
        tls_port=tls,
        udp_port=0,
        tls_cert=cert,
        tls_key=key,
        tls_ca=ca,
    )


# ---------------------------------------------------------------- report


def med(c: Case, k: str = "eps") -> float:
    v = [r[k] for r in c.runs if k in r]
    return statistics.median(v) if v else 0.0


def med_cpu(c: Case, proc: str, k: str = "cores") -> float | None:
    v = [r["cpu"][proc][k] for r in c.runs if proc in r.get("cpu", {}) and k in r["cpu"][proc]]
    return statistics.median(v) if v else None


def ceiling_of(c: Case, by: dict[str, Case]) -> Case | None:
    if c.kind.startswith("indexd"):
        return by.get(f"file/{c.transport}/{c.size}/{c.conns}")
    if c.kind == "frames":
        return by.get(f"file/tcp/{c.size}/{c.conns}")
    return None


def table(cs: list[Case]) -> tuple[str, list[dict[str, Any]]]:
    by = {c.key: c for c in cs}
    lines = [
        "| configuration | stored msg/s (median) | min–max | lost (max) | / ceiling | "
        "CPU µs/msg syslog-ng / indexd / sender | CPU-bound msg/s on idle CPUs | "
        "syslog-ng cores (2 busiest threads) | "
        "indexd cores (busiest thread) | others' cores | box busy | target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    rows = []
    for c in cs:
        if not c.runs:
            continue
        eps = med(c)
        vals = [r["eps"] for r in c.runs if "eps" in r]
        lost = max((r.get("lost", 0) for r in c.runs), default=0)
        errs = [r["error"] for r in c.runs if "error" in r]
        ceil = ceiling_of(c, by)
        ratio = eps / med(ceil) if ceil is not None and med(ceil) else None

        def cores(proc: str, threads: int, c: Case = c) -> str:
            t = med_cpu(c, proc)
            if t is None:
                return "—"
            top = [
                statistics.median(
                    r["cpu"][proc]["busiest_threads"][i]
                    for r in c.runs
                    if len(r.get("cpu", {}).get(proc, {}).get("busiest_threads", [])) > i
                )
                for i in range(threads)
                if any(
                    len(r.get("cpu", {}).get(proc, {}).get("busiest_threads", [])) > i
                    for r in c.runs
                )
            ]
            return f"{t:.2f} (" + ", ".join(f"{x:.2f}" for x in top) + ")"

        def us(proc: str, c: Case = c) -> str:
            t = med_cpu(c, proc, "us_per_msg")
            return "—" if t is None else f"{t:.1f}"

        sender = "cat" if c.kind == "direct" else "loggen"
        # What the box would do if our processes had every CPU and parallelised perfectly.
        cost = sum(med_cpu(c, k, "us_per_msg") or 0.0 for k in ("syslog-ng", "indexd", sender))
        bound = (os.cpu_count() or 1) * 1e6 / cost if cost else None
        busy = (
            statistics.median(r["system_busy"] for r in c.runs if "system_busy" in r) if vals else 0
        )
        target = ""
        if c.kind == "indexd":
            ok = eps >= TARGET_EPS and lost == 0 and not errs
            ok_r = ratio is not None and ratio >= TARGET_RATIO
            target = (
                f"{'ok' if ok else 'MISSED'} >= {TARGET_EPS // 1000}k, 0 lost; "
                f"{'ok' if ok_r else 'MISSED'} >= {TARGET_RATIO:.0%}"
            )
        if errs:
            target += f" ({len(errs)} run(s) failed)"
        lines.append(
            f"| {c.label} | {eps:,.0f} | "
            + (f"{min(vals):,.0f}–{max(vals):,.0f}" if vals else "—")
            + f" | {lost:,} | "
            + (f"{ratio:.2f}" if ratio is not None else "—")
            + f" | {us('syslog-ng')} / {us('indexd')} / {us(sender)}"
            + (f" | {bound:,.0f}" if bound else " | —")
            + f" | {cores('syslog-ng', 2)} | {cores('indexd', 1)}"
            + f" | {med_cpu(c, 'others') or 0:.2f} | {busy:.0%} | {target} |"
        )
        rows.append(
            {
                "key": c.key,
                "label": c.label,
                "messages": c.messages,
                "median_eps": eps,
                "ratio_to_ceiling": ratio,
                "cpu_bound_eps": bound,
                "max_lost": lost,
                "runs": c.runs,
            }
        )
    return "\n".join(lines), rows


def ladder(cs: list[Case]) -> str:
    """Where the CPU per message goes (TCP, 150 B, 16 connections): each step of the pipeline
    added to syslog-ng's cost, and indexd fed by syslog-ng vs alone."""
    by = {c.key: c for c in cs}
    # (key, what, the step it is compared with, that step's name)
    nobuf = "indexd-nobuf/tcp/150/16"
    steps = [
        ("file/tcp/150/16", "syslog-ng -> file(), default template", "", ""),
        ("frames/tcp/150/16", "file() with the frame template", "file/tcp/150/16", "default"),
        (nobuf, "pipe() to indexd's FIFO, no disk buffer", "frames/tcp/150/16", "file()"),
        ("indexd-nonrel/tcp/150/16", "+ disk buffer reliable(no)", nobuf, "no buffer"),
        ("indexd/tcp/150/16", "+ disk buffer reliable(yes), as rendered", nobuf, "no buffer"),
    ]
    out = []
    seen: dict[str, float] = {}
    for key, what, base, name in steps:
        c = by.get(key)
        v = med_cpu(c, "syslog-ng", "us_per_msg") if c else None
        if v is None:
            continue
        seen[key] = v
        delta = f" ({v - seen[base]:+.1f} over {name})" if base in seen else ""
        out.append(f"  - {what}: {v:.1f} µs{delta}")
    if not out:
        return ""
    text = ["syslog-ng CPU µs per message, TCP, 150 B, 16 connections (medians):", *out]
    fed = by.get("indexd/tcp/150/16")
    alone = by.get("direct/fifo/150/1")
    a = med_cpu(fed, "indexd", "us_per_msg") if fed else None
    b = med_cpu(alone, "indexd", "us_per_msg") if alone else None
    if a is not None and b is not None:
        text.append(
            f"indexd CPU µs per message: {a:.1f} fed by syslog-ng (TCP, 150 B, 16 connections), "
            f"{b:.1f} alone on the same frames at full speed"
        )
    return "\n".join(text)


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per configuration (median)")
    ap.add_argument("--messages", type=int, default=640_000, help="messages per 150 B run")
    ap.add_argument("--messages-1k", type=int, default=320_000, help="messages per 1 KiB run")
    ap.add_argument("--quick", action="store_true", help="TCP and 150 B only")
    ap.add_argument("--only", default="", help="comma-separated substrings of configuration keys")
    ap.add_argument(
        "--direct-repeat", type=int, default=3, help="indexd alone: the captured frames N times"
    )
    ap.add_argument(
        "--pipe-options",
        default="",
        help="an experiment: options added to the pipe() destination, e.g. 'flush-lines(100)'",
    )
    ap.add_argument("--status-ms", type=int, default=100, help="indexd status_interval_ms")
    ap.add_argument(
        "--logbox", type=Path, default=Path(os.environ.get("LOGBOX_BIN", TOP / "build/bin/logbox"))
    )
    ap.add_argument(
        "--indexd",
        type=Path,
        default=Path(os.environ.get("LOGBOX_INDEXD_BIN", TOP / "build/bin/logbox-indexd")),
    )
    ap.add_argument("--out", type=Path, default=TOP / "build" / "bench")
    args = ap.parse_args(argv)
    for n in (args.messages, args.messages_1k):
        if n % 16:
            sys.exit("bench-ingest: message counts must be multiples of 16 (16 connections)")
    for tool in ("syslog-ng", "loggen", "openssl"):
        if shutil.which(tool) is None:
            sys.exit(f"bench-ingest: {tool} not found (make deps)")
    if not args.logbox.is_file():
        sys.exit(f"bench-ingest: {args.logbox} not found (make build)")

    m = machine()
    v = versions()
    say(
        f"machine: {m['nproc']} CPUs, {m['cpu']}, {m['mem_gib']} GiB, kernel {m['kernel']}, "
        f"load {m['loadavg'][0]:.2f}"
    )
    say(f"versions: syslog-ng {v['syslog-ng']}, {v['openssl']}, logbox {v['logbox']}")
    b = Bench(args)
    say(
        f"syslog-ng configuration: {b.renderer}; TLS framing: {'octet (-P)' if b.tls_framed else 'newline'}"
    )
    cs = cases(args.messages, args.messages_1k, args.quick)
    if args.only:
        want = [w for w in args.only.split(",") if w]
        cs = [c for c in cs if any(w in c.key for w in want)]
    if not args.indexd.is_file():
        say(f"{args.indexd} not found (make build): no indexd rows")
        cs = [c for c in cs if c.kind in ("file", "frames")]
    t_start = time.monotonic()
    for r in range(args.runs):
        for c in cs:
            if c.kind == "direct" and c.size not in b.frames:
                continue
            try:
                res = b.run(c)
            except (RuntimeError, ValueError, OSError) as e:
                res = {"error": str(e)[-3000:]}
                say(f"  run {r + 1} {c.label}: FAILED: {e}")
                c.runs.append(res)
                continue
            c.runs.append(res)
            cpu = res["cpu"]
            say(
                f"  run {r + 1}/{args.runs} {c.label:58} {res['eps']:>9,} msg/s "
                f"({res['stored']:,}/{res['sent']:,} in {res['elapsed_s']:.2f} s; "
                + ", ".join(f"{k} {v['cores']:.2f}" for k, v in cpu.items())
                + f"; box {res['system_busy']:.0%})"
            )
    took = time.monotonic() - t_start
    m2 = machine()
    text, rows = table(cs)
    md = [
        "# End-to-end ingest benchmark (issue 5)",
        "",
        f"- machine: {m['nproc']} CPUs ({m['cpu']}), {m['mem_gib']} GiB RAM, kernel "
        f"{m['kernel']}; load average at start {m['loadavg'][0]:.2f}, at end {m2['loadavg'][0]:.2f}",
        f"- versions: syslog-ng {v['syslog-ng']}, {v['openssl']}, logbox {v['logbox']}; "
        f"syslog-ng configuration: {b.renderer}",
        f"- {args.runs} runs per configuration, interleaved (round robin); {args.messages:,} "
        f"messages per 150 B run, {args.messages_1k:,} per 1 KiB run (loggen --number, split over "
        "the connections; RFC 3164 lines"
        + (", RFC 5424 octet-framed over TLS" if b.tls_framed else "")
        + f"); took {took / 60:.1f} min",
        "- stored msg/s = messages stored / (first send -> indexd's status says all stored); "
        "ceiling = the same load into file() with the default template; CPU µs/msg = a "
        "process's CPU time over the messages stored (sender = loggen, or cat for indexd "
        "alone); cores = CPU seconds per second of the run (2 = both CPUs), busiest threads in "
        "brackets; others = CPU used by other processes on the box; box busy = all CPUs; "
        "CPU-bound msg/s = nproc x 10^6 / (syslog-ng + indexd + sender µs/msg): the rate if "
        "nothing else ran and the work spread over every CPU (a projection, not a measure)",
        "",
        text,
        "",
        ladder(cs),
        "",
    ]
    out = "\n".join(md)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ingest-e2e.md").write_text(out)
    raw = {
        "machine": m,
        "machine_end": m2,
        "versions": v,
        "renderer": b.renderer,
        "tls_framed": b.tls_framed,
        "runs_per_config": args.runs,
        "targets": {"eps": TARGET_EPS, "ratio_to_file": TARGET_RATIO, "lost": 0},
        "configs": rows,
        "took_s": took,
    }
    (args.out / "ingest-e2e.json").write_text(json.dumps(raw, indent=2) + "\n")
    say("")
    say(out)
    say(f"wrote {args.out / 'ingest-e2e.md'} and ingest-e2e.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
