"""The three systems the end-to-end ingest benchmark (ingest_e2e.py) sends the same loads into,
each started fresh for every run and stopped after it:

  - Logbox: syslog-ng on the configuration collector/render.py renders, writing the spool, and
    logbox-indexd reading it (`--spool`, `--routes`).
  - FileCeiling: the same rendered syslog-ng with its one destination's driver replaced by a
    plain file() with the default template: syslog-ng and the sender alone, the front end's
    ceiling.
  - Victoria: VictoriaLogs v1.52.1 (built by the bench from the Go module proxy into
    build/peers, a bench-only peer) with its own syslog TCP and TLS listeners.

Each system answers count() (what it holds now, polled while a load runs), stored() (what the
load left in it, exact, after the load), procs() (the pids whose CPU is charged to it) and
stop(). Nothing here times anything; ingest_e2e.py does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import say  # noqa: E402, F401  (ingest_e2e imports it from here too)

VL_VERSION = "v1.52.1"
VL_MODULE = "github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs"
LOGGEN_PROGRAM = "prg00000"  # the program name in every loggen message
STATUS_MS = 100  # indexd's status_interval_ms (its minimum): the resolution of "all stored"


# ---------------------------------------------------------------- small helpers


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port: int, proc: subprocess.Popen, what: str, log: Path, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} at start:\n{tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what}: nothing listens on {port} after {timeout} s:\n{tail(log)}")


def stop(proc: subprocess.Popen | None, timeout: float = 60) -> int | None:
    """SIGTERM, then the exit status (SIGKILL after timeout)."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return ""


def run_text(argv: list[str], what: str) -> str:
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {p.returncode}): {p.stderr[-2000:]}")
    return p.stdout


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
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ssl(
        *("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key"),
        *("-CAcreateserial", "-days", "30", "-extfile", "ext.cnf", "-out", "server.pem"),
    )
    return ca, cert, key


# loggen's TLS client is held to TLS 1.2 (through OPENSSL_CONF) for every system: with TLS 1.3
# the server's session tickets arrive after the handshake, loggen never reads them and closes
# with them unread, the kernel answers with a RST, and VictoriaLogs drops what it had not read
# yet (about 40 % of a short run was lost that way). TLS 1.2 is what the appliance requires at
# least, so the figure is the one its oldest clients see.
OPENSSL_TLS12 = """openssl_conf = openssl_init
[openssl_init]
ssl_conf = ssl_sect
[ssl_sect]
system_default = system_default_sect
[system_default_sect]
MaxProtocol = TLSv1.2
"""


# ---------------------------------------------------------------- process CPU


def proc_ticks(pid: int) -> int:
    """utime + stime of pid (every thread, live or gone), in clock ticks; 0 once it is gone."""
    try:
        s = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    f = s[s.rindex(")") + 2 :].split()
    return int(f[11]) + int(f[12])


# ---------------------------------------------------------------- the syslog-ng side


@dataclass
class Ports:
    tcp: int
    tls: int
    http: int  # VictoriaLogs' HTTP (metrics)


def settings_toml(ports: Ports, tls: tuple[Path, Path, Path]) -> str:
    """collector.toml for the bench: loopback, the bench's TCP and TLS ports, the octet and
    UDP listeners off, the bench's certificate; everything else as the defaults."""
    ca, cert, key = tls
    return (
        'bind = "127.0.0.1"\n\n[ports]\n'
        f"tcp = {ports.tcp}\noctet = 0\ntls = {ports.tls}\nudp = 0\n\n[tls]\n"
        f'cert = "{cert}"\nkey = "{key}"\nca = "{ca}"\n'
    )


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


def with_file_destination(conf: str, out: Path) -> str:
    """conf with the driver of its (one) destination replaced by file(out) with the default
    template; sources, log paths and flags stay as rendered."""
    m = re.search(r"^destination\s+[\w-]+\s*\{", conf, re.M)
    if m is None:
        raise ValueError("no destination in the rendered configuration")
    if re.search(r"^destination\s", conf[m.end() :], re.M):
        raise ValueError("the rendered configuration has more than one destination")
    i = m.end()
    while True:  # skip white space and comment lines to the driver's name
        d = re.compile(r"\s*(#[^\n]*\n)?").match(conf, i)
        if d is None or d.end() == i:
            break
        i = d.end()
    drv = re.compile(r"([\w-]+)\s*\(").match(conf, i)
    if drv is None:
        raise ValueError("cannot find the destination's driver")
    end = balanced_end(conf, drv.end() - 1)
    return conf[:i] + f'file("{out}")' + conf[end:]


def syslogng_argv(conf: Path, run: Path) -> list[str]:
    return [
        *("syslog-ng", "-F", "-f", str(conf), "-R", str(run / "syslog-ng.persist")),
        *("-p", str(run / "syslog-ng.pid"), "-c", str(run / "syslog-ng.ctl")),
    ]


class System:
    """What every system offers the bench."""

    name = ""
    label = ""

    def start(self, port_of: str) -> int:
        """Starts fresh; returns the port for the listener named port_of ("tcp" or "tls")."""
        raise NotImplementedError

    def procs(self) -> dict[str, int]:
        raise NotImplementedError

    def count(self) -> int:
        raise NotImplementedError

    def count_time(self) -> float | None:
        """time.time() when the figure count() returned last was true (None: when polled)."""
        return None

    def stored(self, loggen: bool, base: int) -> dict[str, int]:
        """After a load: {"stored": the load's messages in the system, ...}."""
        raise NotImplementedError

    def stop(self) -> dict[str, Any]:
        raise NotImplementedError


class Syslogng:
    """The rendered configuration and a syslog-ng started on it, under work/r/."""

    def __init__(self, work: Path, ports: Ports, tls: tuple[Path, Path, Path]) -> None:
        self.work, self.ports, self.tls = work, ports, tls
        self.r = work / "r"
        self.data, self.run, self.out = self.r / "data", self.r / "run", self.r / "out"
        self.settings = work / "collector.toml"
        self.settings.write_text(settings_toml(ports, tls))
        self.proc: subprocess.Popen | None = None

    def fresh(self) -> None:
        shutil.rmtree(self.r, ignore_errors=True)
        self.data.mkdir(parents=True)
        self.run.mkdir(parents=True)

    def render(self) -> str:
        argv = [sys.executable, str(TOP / "collector" / "render.py")]
        argv += ["--settings", str(self.settings), "--data", str(self.data), "--run", str(self.run)]
        argv += ["--spool", str(self.data / "spool")]
        return run_text(argv, "collector/render.py")

    def start(self, conf: str, port: int) -> None:
        cf = self.run / "syslog-ng.conf"
        cf.write_text(conf)
        log = self.run / "syslog-ng.stderr"
        with open(log, "wb") as err:
            self.proc = subprocess.Popen(syslogng_argv(cf, self.run), stdout=err, stderr=err)
        try:
            wait_port(port, self.proc, "syslog-ng", log)
        except RuntimeError:
            stop(self.proc)
            raise

    def stop(self) -> int | None:
        rc = stop(self.proc)
        self.proc = None
        return rc


class Logbox(System):
    """syslog-ng as rendered, and logbox-indexd reading the spool."""

    name = "logbox"

    def __init__(
        self,
        work: Path,
        ports: Ports,
        tls: tuple[Path, Path, Path],
        indexd: Path,
        logbox: Path,
    ) -> None:
        self.sng = Syslogng(work, ports, tls)
        self.indexd_bin, self.logbox = indexd, logbox
        self.label = "logbox (syslog-ng -> spool -> indexd)"
        self.indexd: subprocess.Popen | None = None
        self.written = 0.0
        self.sng_pid = 0

    def start(self, port_of: str) -> int:
        s = self.sng
        s.fresh()
        conf = s.render()
        self.start_indexd()
        port = s.ports.tcp if port_of == "tcp" else s.ports.tls
        try:
            s.start(conf, port)
        except RuntimeError:
            self.stop()
            raise
        assert s.proc is not None
        self.sng_pid = s.proc.pid
        return port

    def start_indexd(self) -> None:
        s = self.sng
        status = s.run / "indexd.status.json"
        (s.run / "indexd.conf").write_text(f"status_interval_ms = {STATUS_MS}\n")
        argv = [str(self.indexd_bin), "--data", str(s.data), "--status", str(status)]
        argv += ["--config", str(s.run / "indexd.conf")]
        if os.geteuid() == 0:
            argv.append("--allow-root")
        argv += ["--spool", str(s.data / "spool"), "--routes", str(s.settings)]
        log = s.run / "indexd.stderr"
        with open(log, "wb") as err:
            self.indexd = subprocess.Popen(argv, stdout=err, stderr=err)
        end = time.monotonic() + 30
        while not status.is_file():
            if self.indexd.poll() is not None or time.monotonic() > end:
                self.stop()
                raise RuntimeError(f"indexd did not start:\n{tail(log)}")
            time.sleep(0.02)

    def procs(self) -> dict[str, int]:
        out = {}
        if self.sng.proc is not None:
            out["syslog-ng"] = self.sng.proc.pid
        if self.indexd is not None:
            out["indexd"] = self.indexd.pid
        return out

    def count(self) -> int:
        try:
            with open(self.sng.run / "indexd.status.json", "rb") as f:
                self.written = os.fstat(f.fileno()).st_mtime
                return int(json.loads(f.read()).get("stored", 0))
        except (OSError, ValueError):
            return 0

    def count_time(self) -> float | None:
        return self.written

    def stored(self, loggen: bool, base: int) -> dict[str, int]:
        """Stops both daemons first (indexd has stored everything syslog-ng handed over)."""
        self.stop()
        d = str(self.sng.data)
        st = json.loads(run_text([str(self.logbox), "stats", "--data", d, "--json"], "stats"))
        out = {"stored_all": int(st.get("messages", 0))}
        if loggen:
            c = run_text(
                [str(self.logbox), "search", "--data", d, "--count", f"program:{LOGGEN_PROGRAM}"],
                "logbox search --count",
            )
            out["stored"] = int(c.split()[0].replace(",", ""))
        else:
            # The replay's messages are main's, apart from syslog-ng's own (its program and
            # pid: the corpus holds lines of other syslog-ngs), which issue 5's configuration
            # sends to the logspace system and the spool's to main unless a route says else.
            st = json.loads(
                run_text(
                    [str(self.logbox), "stats", "--data", d, "--logspace", "main", "--json"],
                    "stats --logspace main",
                )
            )
            own = run_text(
                [str(self.logbox), "search", "--data", d, "--count"]
                + [f"program:syslog-ng AND pid:{self.sng_pid}"],
                "logbox search --count",
            )
            out["stored"] = int(st.get("messages", 0)) - int(own.split()[0].replace(",", ""))
        return out

    def stop(self) -> dict[str, Any]:
        res: dict[str, Any] = {}
        rc = self.sng.stop()  # syslog-ng first: it flushes into the spool
        if rc not in (0, None):
            res["syslog-ng_exit"] = rc
        rc = stop(self.indexd)
        self.indexd = None
        if rc not in (0, None):
            res["indexd_exit"] = rc
        return res


class FileCeiling(System):
    """The same rendered syslog-ng writing a plain file() with the default template."""

    name = "file"
    label = "syslog-ng -> file() (ceiling)"

    def __init__(self, work: Path, ports: Ports, tls: tuple[Path, Path, Path]) -> None:
        self.sng = Syslogng(work, ports, tls)
        self.pos = 0
        self.lines = 0
        self.pid = 0

    def start(self, port_of: str) -> int:
        s = self.sng
        s.fresh()
        conf = with_file_destination(s.render(), s.out)
        port = s.ports.tcp if port_of == "tcp" else s.ports.tls
        self.pos = self.lines = 0
        s.start(conf, port)
        assert s.proc is not None
        self.pid = s.proc.pid
        return port

    def procs(self) -> dict[str, int]:
        return {"syslog-ng": self.sng.proc.pid} if self.sng.proc is not None else {}

    def count(self) -> int:
        try:
            with open(self.sng.out, "rb") as f:
                f.seek(self.pos)
                while chunk := f.read(1 << 22):
                    self.lines += chunk.count(b"\n")
                    self.pos += len(chunk)
        except OSError:
            pass
        return self.lines

    def stored(self, loggen: bool, base: int) -> dict[str, int]:
        self.stop()
        n = self.count()
        out = {"stored_all": n}
        # loggen's lines by their program; the replay's: every line but syslog-ng's own (its
        # pid: the corpus holds lines of other syslog-ngs).
        needle = LOGGEN_PROGRAM.encode() if loggen else f" syslog-ng[{self.pid}]: ".encode()
        k = 0
        try:
            with open(self.sng.out, "rb") as f:
                for line in f:
                    k += needle in line
        except OSError:
            pass
        out["stored"] = k if loggen else n - k
        return out

    def stop(self) -> dict[str, Any]:
        rc = self.sng.stop()
        return {"syslog-ng_exit": rc} if rc not in (0, None) else {}


# ---------------------------------------------------------------- VictoriaLogs


def victoria_binary(peers: Path) -> Path:
    """build/peers/victoria-logs at VL_VERSION, built with `go install` from the Go module
    proxy when missing or of another version (about a minute on 2 cores)."""
    exe = peers / "victoria-logs"
    stamp = peers / "victoria-logs.version"
    if exe.is_file() and stamp.is_file() and stamp.read_text().strip() == VL_VERSION:
        return exe
    if shutil.which("go") is None:
        raise RuntimeError("go not found: cannot build the VictoriaLogs peer")
    peers.mkdir(parents=True, exist_ok=True)
    say(f"building VictoriaLogs {VL_VERSION} into {peers} (go install, ~1 min)")
    env = dict(os.environ, GOBIN=str(peers), GOFLAGS="-mod=mod")
    p = subprocess.run(
        ["go", "install", f"{VL_MODULE}@{VL_VERSION}"], env=env, capture_output=True, text=True
    )
    if p.returncode != 0 or not exe.is_file():
        raise RuntimeError(f"go install {VL_MODULE}@{VL_VERSION} failed:\n{p.stderr[-3000:]}")
    stamp.write_text(VL_VERSION + "\n")
    return exe


def vl_metric(text: str, name: str) -> int:
    """The sum of every series of metric name in a /metrics text."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


class Victoria(System):
    """victoria-logs with a syslog TCP listener and a TLS one, stream fields hostname and
    app_name, storage under work/r/vl, fresh every run."""

    name = "victoria"
    label = f"VictoriaLogs {VL_VERSION}"

    def __init__(
        self, work: Path, ports: Ports, tls: tuple[Path, Path, Path], exe: Path, header_time: bool
    ) -> None:
        self.work, self.ports, self.tls, self.exe = work, ports, tls, exe
        self.header_time = header_time
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{ports.http}/metrics"

    def argv(self) -> list[str]:
        _, cert, key = self.tls
        streams = '["hostname","app_name"]'
        return [
            str(self.exe),
            f"-storageDataPath={self.work / 'r' / 'vl'}",
            f"-httpListenAddr=127.0.0.1:{self.ports.http}",
            f"-syslog.listenAddr.tcp=127.0.0.1:{self.ports.tcp},127.0.0.1:{self.ports.tls}",
            f"-syslog.streamFields.tcp={streams}",
            f"-syslog.streamFields.tcp={streams}",
            "-syslog.tls=false,true",
            f"-syslog.tlsCertFile=,{cert}",
            f"-syslog.tlsKeyFile=,{key}",
            "-syslog.tlsMinVersion=TLS12",
            # Time stamps on arrival (as logbox files a message by its receive time) unless
            # --vl-header-time: the loghub lines are dated 2005-2017, and VictoriaLogs, which
            # partitions by day, then spends 4x the CPU per line (tests/bench/README.md).
            *([] if self.header_time else ["-syslog.useLocalTimestamp.tcp=true,true"]),
            "-retentionPeriod=100y",
            "-loggerLevel=WARN",
        ]

    def start(self, port_of: str) -> int:
        shutil.rmtree(self.work / "r", ignore_errors=True)
        (self.work / "r").mkdir(parents=True)
        log = self.work / "r" / "victoria-logs.stderr"
        with open(log, "wb") as err:
            self.proc = subprocess.Popen(self.argv(), stdout=err, stderr=err)
        port = self.ports.tcp if port_of == "tcp" else self.ports.tls
        try:
            wait_port(self.ports.http, self.proc, "victoria-logs", log)
            wait_port(port, self.proc, "victoria-logs", log)
        except RuntimeError:
            self.stop()
            raise
        return port

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url, timeout=10) as r:
            return r.read().decode()

    def procs(self) -> dict[str, int]:
        return {"victoria-logs": self.proc.pid} if self.proc is not None else {}

    def count(self) -> int:
        try:
            return vl_metric(self.metrics(), "vl_rows_ingested_total")
        except OSError:
            return 0

    def stored(self, loggen: bool, base: int) -> dict[str, int]:
        m = self.metrics()
        ingested = vl_metric(m, "vl_rows_ingested_total")
        return {
            "stored": ingested - base,
            "stored_all": ingested,
            "storage_rows": vl_metric(m, "vl_storage_rows"),
            "dropped": vl_metric(m, "vl_rows_dropped_total")
            + vl_metric(m, "vl_too_long_lines_skipped_total"),
        }

    def stop(self) -> dict[str, Any]:
        rc = stop(self.proc)
        self.proc = None
        return {"victoria-logs_exit": rc} if rc not in (0, None) else {}
