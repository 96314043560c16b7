"""The ingest path under test: real syslog-ng writing the spool (indexer/FORMAT.md §13), real
logbox-indexd reading it, parsing and routing.

Appliance(tmp_path, routes=[...], tls_verify="optional") picks free ports, makes a test CA with a
server certificate and a client certificate (plus a client certificate from a second CA the
server does not trust) with the openssl CLI, writes the collector settings (whose [[logspace]]
tables are indexd's routes) and renders the syslog-ng configuration with collector/render.py,
starts logbox-indexd (--spool <data>/spool --routes <run>/collector.toml) and then
`syslog-ng -F`. Use it as a context manager: every process it started is killed on the way out,
whatever the test did. Stored messages are read through the `logbox` CLI only.

Binaries: $LOGBOX_BIN (else build/bin/logbox), $LOGBOX_INDEXD_BIN (else build/bin/logbox-indexd),
$LOGBOX_SYSLOG_NG (else syslog-ng on PATH); the renderer is collector/render.py (or
$LOGBOX_RENDER).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import resource
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from lbtest.proc import stop_process
from lbtest.wait import wait_until

TOP = Path(__file__).resolve().parents[2]
NOFILE = 20000  # RLIMIT_NOFILE for syslog-ng (5,000 idle connections and more)
MSG_MAX = 262144  # LB_MSG_MAX
# How the CLI says that a logspace (or the whole store) does not exist yet: nothing stored.
_NO_LOGSPACE = re.compile(
    r"no (such )?logspace|does not exist|not found|no catalog|No such file or directory", re.I
)


def _bin(env: str, default: Path | str) -> str:
    return os.environ.get(env) or str(default)


LOGBOX = _bin("LOGBOX_BIN", TOP / "build" / "bin" / "logbox")
INDEXD = _bin("LOGBOX_INDEXD_BIN", TOP / "build" / "bin" / "logbox-indexd")
SYSLOG_NG = _bin("LOGBOX_SYSLOG_NG", shutil.which("syslog-ng") or "/usr/sbin/syslog-ng")
RENDER = Path(_bin("LOGBOX_RENDER", TOP / "collector" / "render.py"))


def octet(*messages: bytes) -> bytes:
    """RFC 6587 octet-counted frames ("LEN SP MSG"), as the octet and TLS ports (RFC 5425) take."""
    return b"".join(b"%d %s" % (len(m), m) for m in messages)


def raise_nofile(n: int = NOFILE) -> int:
    """Raises this process's RLIMIT_NOFILE soft limit to n (and the hard limit when root);
    returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < n:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
            return n
        except (ValueError, OSError):
            n = hard
    if soft == resource.RLIM_INFINITY or soft >= n:
        return soft
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
    return n


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port on 127.0.0.1 that is free for both TCP and UDP right now."""
    while True:
        with socket.socket(socket.AF_INET, kind) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        other = socket.SOCK_DGRAM if kind == socket.SOCK_STREAM else socket.SOCK_STREAM
        try:
            with socket.socket(socket.AF_INET, other) as s:
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return port


# ---------------------------------------------------------------- certificates


@dataclass(frozen=True)
class Certs:
    """PEM files: the test CA, the server's certificate (CN and SAN localhost/127.0.0.1), a
    client certificate from the same CA, and one from a second CA the server does not trust."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_ca: Path
    rogue_cert: Path
    rogue_key: Path


def _openssl(*args: str | Path, cwd: Path) -> None:
    p = subprocess.run(["openssl", *map(str, args)], cwd=cwd, capture_output=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"openssl {' '.join(map(str, args))}: {p.stderr.decode()}")


def _ca(d: Path, name: str) -> tuple[Path, Path]:
    crt, key = d / f"{name}.pem", d / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", key, "-out", crt, "-days", "3", "-subj", f"/CN=logbox test {name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=d,
    )  # fmt: skip
    return crt, key


def _leaf(d: Path, name: str, ca: tuple[Path, Path], usage: str) -> tuple[Path, Path]:
    crt, key, csr, ext = (d / f"{name}{s}" for s in (".pem", ".key", ".csr", ".ext"))
    ext.write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyAgreement\n"
        f"extendedKeyUsage={usage}\n"
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
    )
    _openssl(
        "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", key, "-out", csr, "-subj", f"/CN={'localhost' if usage == 'serverAuth' else name}",
        cwd=d,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
        "-out", crt, "-days", "3", "-extfile", ext,
        cwd=d,
    )  # fmt: skip
    return crt, key


def make_certs(d: Path) -> Certs:
    """Creates the test PKI under d (openssl CLI)."""
    d.mkdir(parents=True, exist_ok=True)
    ca = _ca(d, "ca")
    rogue = _ca(d, "rogue-ca")
    server = _leaf(d, "server", ca, "serverAuth")
    client = _leaf(d, "client", ca, "clientAuth")
    rclient = _leaf(d, "rogue-client", rogue, "clientAuth")
    return Certs(ca[0], *server, *client, rogue[0], *rclient)


# ---------------------------------------------------------------- collector/render.py


def render_module() -> ModuleType:
    """collector/render.py, imported."""
    if not RENDER.is_file():
        raise AssertionError(f"{RENDER} does not exist")
    spec = importlib.util.spec_from_file_location("logbox_collector_render", RENDER)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str | Path):
        return json.dumps(str(v))  # a JSON string is a TOML basic string
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML for {v!r}")


def settings_toml(
    ports: dict[str, int],
    certs: Certs,
    tls_verify: str,
    routes: Sequence[dict[str, Any]],
    extra: dict[str, Any] | None = None,
) -> str:
    """The collector settings file (collector/README.md) for a test appliance."""
    top = {"bind": "127.0.0.1", "log_msg_size": 16777216, "max_connections": 10000}
    lines = [f"{k} = {_toml_value(v)}" for k, v in {**top, **(extra or {})}.items()]
    lines.append("[ports]")
    lines += [f"{k} = {v}" for k, v in ports.items()]
    lines.append("[tls]")
    lines += [
        f"cert = {_toml_value(certs.server_cert)}",
        f"key = {_toml_value(certs.server_key)}",
        f"ca = {_toml_value(certs.ca)}",
        f"verify = {_toml_value(tls_verify)}",
    ]
    for r in routes:
        lines.append("[[logspace]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in r.items()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the appliance


def marker() -> str:
    """A word no other message holds: "m" and 16 hex digits, for wait_marked."""
    return "m" + uuid.uuid4().hex[:16]


class Appliance:
    """syslog-ng -> spool -> logbox-indexd -> store, in tmp_path. See the module docstring."""

    def __init__(
        self,
        tmp_path: Path,
        routes: Sequence[dict[str, Any]] = (),
        tls_verify: str = "optional",
        udp: bool = True,
        indexd_args: Sequence[str] = (),
        collector: dict[str, Any] | None = None,
    ) -> None:
        self.root = Path(tmp_path) / "appliance"
        self.data = self.root / "data"
        self.run = self.root / "run"
        self.logs = self.root / "logs"
        for d in (self.data, self.run, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        self.routes = list(routes)
        self.tls_verify = tls_verify
        self.indexd_args = list(indexd_args)
        self.collector = dict(collector or {})  # collector settings: top-level keys
        self.ports = {
            "tcp": free_port(),
            "octet": free_port(),
            "tls": free_port(),
            "udp": free_port(socket.SOCK_DGRAM) if udp else 0,
        }
        self.certs = make_certs(self.root / "tls")
        self.spool = self.data / "spool"
        self.routes_file = self.run / "collector.toml"
        self.status_file = self.run / "indexd.status.json"
        self.conf = self.run / "syslog-ng.conf"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.starts = {"indexd": 0, "syslog-ng": 0}
        self._render()

    # -- setup

    def _settings(self, routes: Sequence[dict[str, Any]]) -> str:
        return settings_toml(self.ports, self.certs, self.tls_verify, routes, self.collector)

    def _render(self) -> None:
        """syslog-ng's configuration from the settings file, as make run and the appliance's
        unit render it before every start (each start gets a run token of its own: the spool
        files it writes are its own, FORMAT.md §13.2)."""
        mod = render_module()
        if not self.routes_file.exists():
            self.routes_file.write_text(self._settings(self.routes))
        settings = mod.load_settings(self.routes_file)
        text = mod.render(settings, data=self.data, run=self.run, spool=self.spool)
        self.conf.write_text(text)
        p = subprocess.run(
            [SYSLOG_NG, "--syntax-only", "-f", str(self.conf)], capture_output=True, timeout=60
        )
        if p.returncode != 0:
            raise AssertionError(
                f"syslog-ng rejects the rendered config {self.conf}:\n{p.stderr.decode()}"
            )

    def write_routes(self, routes: Sequence[dict[str, Any]]) -> Path:
        """Replaces the settings file indexd routes by (atomically: write, rename) with one
        holding these [[logspace]] tables; indexd reads it on hup_indexd(). Returns its path."""
        tmp = self.routes_file.with_suffix(".tmp")
        tmp.write_text(self._settings(routes))
        tmp.replace(self.routes_file)
        return self.routes_file

    def __enter__(self) -> Appliance:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, timeout: float = 30) -> None:
        """Starts indexd, waits for its status file, starts syslog-ng, waits until its TCP ports
        accept."""
        self.start_indexd(timeout)
        self.start_syslogng(timeout)

    # -- indexd

    def _log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def _spawn(self, name: str, argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        old = self.procs.get(name)
        if old is not None and old.poll() is None:
            raise AssertionError(f"{name} is already running (pid {old.pid})")
        self.starts[name] += 1
        with open(self._log(name), "ab") as log:
            log.write(f"---- harness: start #{self.starts[name]} {time.time():.6f}\n".encode())
            log.flush()
            p = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                **kw,
            )
        self.procs[name] = p
        return p

    def indexd_argv(self) -> list[str]:
        """indexd's command line (without the sh wrapper)."""
        argv = [INDEXD, "--data", str(self.data), "--status", str(self.status_file)]
        argv += ["--spool", str(self.spool), "--routes", str(self.routes_file)]
        if os.geteuid() == 0:
            argv.append("--allow-root")
        return argv + self.indexd_args

    def start_indexd(self, timeout: float = 30) -> None:
        """Starts indexd and waits for a fresh status file."""
        if not Path(INDEXD).is_file():
            raise AssertionError(f"{INDEXD} is not built (make build)")
        self.status_file.unlink(missing_ok=True)
        p = self._spawn("indexd", self.indexd_argv())

        def alive() -> None:
            if p.poll() is not None:
                raise AssertionError(
                    f"indexd exited with {p.returncode} at start:\n{self.stderr_of('indexd')}"
                )

        wait_until(
            self.status_file.exists,
            "indexd wrote its status file",
            timeout,
            interval=0.01,
            check=alive,
            detail=lambda: self.stderr_of("indexd"),
        )

    def hup_indexd(self) -> None:
        """SIGHUP to indexd: it reads --config and --routes again."""
        p = self.procs["indexd"]
        assert p.poll() is None, "indexd is not running"
        p.send_signal(signal.SIGHUP)

    def kill_indexd(self, sig: int = signal.SIGKILL) -> int:
        """Sends sig to indexd and waits for it to exit; returns its exit status."""
        return self._stop("indexd", sig)

    def _stop(self, name: str, sig: int, timeout: float = 30) -> int:
        p = self.procs.get(name)
        if p is None:
            return 0
        if not stop_process(p, sig, timeout, group=True):
            raise AssertionError(
                f"{name} did not exit within {timeout} s of signal {sig}:\n"
                f"{self.stderr_of(name)[-3000:]}"
            )
        return p.returncode

    # -- syslog-ng

    def syslogng_argv(self) -> list[str]:
        """syslog-ng's command line, as the collector gives it to make run, plus --no-caps for
        containers."""
        argv = render_module().syslogng_argv(self.conf, self.run, program=SYSLOG_NG)
        return [*argv[:2], "--no-caps", *argv[2:]]

    def start_syslogng(self, timeout: float = 30) -> None:
        """Starts syslog-ng (RLIMIT_NOFILE raised) and waits until its TCP ports accept."""

        def limits() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))

        self._render()
        p = self._spawn("syslog-ng", self.syslogng_argv(), preexec_fn=limits)

        def alive() -> None:
            if p.poll() is not None:
                raise AssertionError(
                    f"syslog-ng exited with {p.returncode} at start:\n{self.stderr_of('syslog-ng')}"
                )

        waiting = [(name, self.ports[name]) for name in ("tcp", "octet", "tls") if self.ports[name]]

        def accepting() -> bool:
            while waiting:
                socket.create_connection(("127.0.0.1", waiting[0][1]), timeout=1).close()
                del waiting[0]
            return True

        wait_until(
            accepting,
            "syslog-ng's ports accept",
            timeout,
            check=alive,
            detail=lambda: (
                f"syslog-ng's {waiting[0][0]} port {waiting[0][1]} does not accept:\n"
                f"{self.stderr_of('syslog-ng')}"
            ),
            ignore=(OSError,),
        )

    def stop_syslogng(self, sig: int = signal.SIGTERM) -> int:
        """Stops syslog-ng (SIGTERM by default) and waits for it; returns its exit status."""
        return self._stop("syslog-ng", sig)

    def restart_syslogng(self) -> None:
        """SIGTERM, wait, start again."""
        self.stop_syslogng()
        self.start_syslogng()

    # -- teardown

    def stop(self) -> dict[str, int]:
        """Stops syslog-ng (it writes what it took into the spool), then indexd (SIGTERM, so
        that it closes its stores); returns their exit statuses."""
        return {"syslog-ng": self.stop_syslogng(), "indexd": self.kill_indexd(signal.SIGTERM)}

    def close(self) -> None:
        """Kills every process still running (process group, SIGKILL)."""
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()

    def alive(self, name: str) -> bool:
        """Whether the named daemon runs."""
        p = self.procs.get(name)
        return p is not None and p.poll() is None

    def assert_alive(self) -> None:
        """Both daemons still run."""
        self.assert_alive_named("indexd", "syslog-ng")

    def assert_alive_named(self, *names: str) -> None:
        """The named daemons still run."""
        for name in names:
            p = self.procs.get(name)
            assert (
                p is not None and p.poll() is None
            ), f"{name} died (exit {p.returncode if p else None}):\n{self.stderr_of(name)[-3000:]}"

    # -- what the daemons say

    def stderr_of(self, name: str) -> str:
        """What the named daemon ("indexd" or "syslog-ng") wrote so far."""
        path = self._log(name)
        return path.read_text("utf-8", "replace") if path.exists() else ""

    def status(self) -> dict[str, Any]:
        """indexd's status file (it is replaced atomically; retried while it is absent)."""
        for _ in range(100):
            try:
                return json.loads(self.status_file.read_text())
            except (FileNotFoundError, ValueError):
                time.sleep(0.02)
        raise AssertionError(f"no readable status file {self.status_file}")

    # -- the store, through the CLI

    def cli(self, verb: str, *args: str, logspace: str = "main") -> list[str]:
        """A `logbox` command line on this appliance's data directory."""
        return [LOGBOX, verb, "--data", str(self.data), "--logspace", logspace, *args]

    def count(self, logspace: str = "main") -> int:
        """`logbox stats --json`'s messages; 0 while the logspace does not exist."""
        p = subprocess.run(self.cli("stats", "--json", logspace=logspace), capture_output=True)
        if p.returncode != 0:
            err = p.stderr.decode("utf-8", "replace")
            if _NO_LOGSPACE.search(err):
                return 0
            raise AssertionError(f"logbox stats failed ({p.returncode}): {err}")
        return int(json.loads(p.stdout)["messages"])

    def wait_count(
        self, n: int, logspace: str = "main", timeout: float = 60, exact: bool = True
    ) -> int:
        """Waits until logspace holds at least n messages; returns the count. With exact, fails
        when it holds more. Fails early when a daemon died."""
        seen = [-1]

        def counted() -> int | None:
            seen[0] = self.count(logspace)
            return seen[0] if seen[0] >= n else None

        got = wait_until(
            counted,
            f"{logspace} holds {n} messages",
            timeout,
            interval=0.05,
            check=self.assert_alive,
            detail=lambda: (
                f"{logspace} holds {seen[0]} messages, expected {n}\n"
                f"indexd:\n{self.stderr_of('indexd')[-2000:]}\n"
                f"syslog-ng:\n{self.stderr_of('syslog-ng')[-2000:]}"
            ),
        )
        if exact:
            assert got == n, f"{logspace} holds {got} messages, expected exactly {n}"
        return got

    def wait_marked(
        self, mark: str, n: int = 1, logspace: str = "main", timeout: float = 30
    ) -> list[dict[str, Any]]:
        """The messages of logspace holding mark once there are n of them (fails on more).
        Fails early when a daemon died."""
        seen: list[list[dict[str, Any]]] = [[]]

        def marked() -> bool:
            seen[0] = [m for m in self.messages(logspace) if mark in m["message"]]
            return len(seen[0]) >= n

        wait_until(
            marked,
            f"{n} messages with {mark} are in {logspace}",
            timeout,
            interval=0.1,
            check=self.assert_alive,
            detail=lambda: f"{len(seen[0])} there: {seen[0]}",
        )
        got = seen[0]
        assert len(got) == n, f"{len(got)} messages with {mark} in {logspace}, expected {n}: {got}"
        return got

    def settle(self, logspace: str = "main", quiet: float = 1.0, timeout: float = 60) -> int:
        """Waits until the count of logspace stopped changing for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        last, since = self.count(logspace), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.1)
            now = self.count(logspace)
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return now
        raise AssertionError(f"{logspace} still growing after {timeout} s ({last})")

    def iter_lines(self, logspace: str = "main", from_id: int | None = None) -> Iterator[bytes]:
        """`logbox cat` output streamed line by line (raw NDJSON bytes)."""
        args = ["--from-id", str(from_id)] if from_id is not None else []
        p = subprocess.Popen(
            self.cli("cat", *args, logspace=logspace),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=1 << 20,
        )
        assert p.stdout is not None and p.stderr is not None
        try:
            yield from p.stdout
        finally:
            p.stdout.close()
            err = p.stderr.read()
            p.stderr.close()
            rc = p.wait()
        if rc != 0 and not _NO_LOGSPACE.search(err.decode("utf-8", "replace")):
            raise AssertionError(f"logbox cat failed ({rc}): {err.decode('utf-8', 'replace')}")

    def iter_messages(
        self, logspace: str = "main", from_id: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """`logbox cat` as parsed objects, streamed."""
        for line in self.iter_lines(logspace, from_id):
            yield json.loads(line)

    def messages(self, logspace: str = "main") -> list[dict[str, Any]]:
        """Every message of logspace (cat's objects, in id order)."""
        return list(self.iter_messages(logspace))

    # -- clients

    def tls_context(
        self,
        cert: str | None = "client",
        minimum: ssl.TLSVersion | None = None,
        maximum: ssl.TLSVersion | None = None,
    ) -> ssl.SSLContext:
        """A client context that trusts the test CA; cert: "client", "rogue" or None."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(self.certs.ca)
        if cert == "client":
            ctx.load_cert_chain(self.certs.client_cert, self.certs.client_key)
        elif cert == "rogue":
            ctx.load_cert_chain(self.certs.rogue_cert, self.certs.rogue_key)
        if minimum is not None or maximum is not None:
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer old versions
        if minimum is not None:
            ctx.minimum_version = minimum
        if maximum is not None:
            ctx.maximum_version = maximum
        return ctx

    def connect(self, port: str = "tcp", timeout: float = 30) -> socket.socket:
        """A TCP connection to one of syslog-ng's ports ("tcp", "octet", "tls": no handshake)."""
        return socket.create_connection(("127.0.0.1", self.ports[port]), timeout=timeout)

    def connect_tls(self, ctx: ssl.SSLContext | None = None, timeout: float = 30) -> ssl.SSLSocket:
        """A TLS connection (handshake done) to the TLS port."""
        ctx = ctx or self.tls_context()
        raw = self.connect("tls", timeout)
        try:
            return ctx.wrap_socket(raw, server_hostname="localhost")
        except BaseException:
            raw.close()
            raise

    def send(self, data: bytes, port: str = "tcp") -> None:
        """Sends data as it is (framed by the caller: newline on "tcp", octet counting on
        "octet" and "tls", one message per datagram on "udp") on a fresh connection."""
        if port == "udp":
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(data, ("127.0.0.1", self.ports["udp"]))
            return
        if port == "tls":
            with self.connect_tls() as s:
                s.sendall(data)
                try:
                    s.unwrap()  # close_notify, so that the server reads to the end
                except (ssl.SSLError, OSError):
                    pass
            return
        with self.connect(port) as s:
            s.sendall(data)
