"""The RPC API in tests: real gunicorn (the venv's `python -m gunicorn`, PYTHONPATH=rpc,
`-c rpc/gunicorn.conf.py 'logbox_rpc:create_app()'`) serving logbox_rpc over TLS on a free
127.0.0.1 port, with a self-signed certificate made by the openssl CLI and an accounts store
(LMDB) holding an admin user "admin" with a random password. Contract: rpc/API.md."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import requests

if TYPE_CHECKING:
    from logbox_core.accounts import Accounts

TOP = Path(__file__).resolve().parents[2]
RPC_DIR = TOP / "rpc"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certificate(crt: Path, key: Path) -> None:
    """A self-signed certificate (P-256, SAN IP:127.0.0.1 and DNS:localhost) with its key."""
    crt.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "7", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    key.chmod(0o600)


def venv_python() -> str:
    """The project venv's python (the one with gunicorn and flask), else this one."""
    p = TOP / ".venv" / "bin" / "python"
    return str(p) if p.exists() else sys.executable


class _PortTaken(Exception):
    """gunicorn exited because its port was taken."""


class RpcServer:
    """Real gunicorn (python -m gunicorn from the venv, PYTHONPATH=rpc, -c rpc/gunicorn.conf.py
    'logbox_rpc:create_app()') serving logbox_rpc over TLS on a free 127.0.0.1 port."""

    def __init__(
        self,
        root: Path,
        *,
        searchd_socket: Path,
        data: Path,
        indexd_status: Path | None = None,
        syslogng_pidfile: Path | None = None,
        workers: int = 2,
        threads: int = 8,
        env: dict[str, str] | None = None,
    ) -> None:
        """Makes root/tls/https.crt + .key and root/accounts with the user "admin"."""
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.searchd_socket = Path(searchd_socket)
        self.data = Path(data)
        self.indexd_status = indexd_status or self.root / "indexd.status.json"
        self.syslogng_pidfile = syslogng_pidfile or self.root / "syslog-ng.pid"
        self.workers = workers
        self.threads = threads
        self.extra_env = dict(env or {})
        self.cafile = self.root / "tls" / "https.crt"
        self.keyfile = self.root / "tls" / "https.key"
        if not self.cafile.exists():
            make_certificate(self.cafile, self.keyfile)
        self.accounts_path = self.root / "accounts"
        self.admin_password = secrets.token_urlsafe(18)
        self._accounts: Accounts | None = None
        acc = self.accounts()
        if acc.get_user("admin") is None:
            acc.add_user("admin", self.admin_password, "admin")
        else:
            acc.update_user("admin", password=self.admin_password)
        self.port = free_port()
        self.base = f"https://127.0.0.1:{self.port}/api/v1"
        self.log_path = self.root / "gunicorn.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def environment(self) -> dict[str, str]:
        """The environment gunicorn runs with."""
        pythonpath = os.pathsep.join(
            p for p in (str(RPC_DIR), os.environ.get("PYTHONPATH", "")) if p
        )
        env = dict(
            os.environ,
            PYTHONPATH=pythonpath,
            LOGBOX_RPC_CONFIG=str(self.root / "rpc.py"),  # absent unless a test writes it
            LOGBOX_SEARCHD_SOCKET=str(self.searchd_socket),
            LOGBOX_ACCOUNTS=str(self.accounts_path),
            LOGBOX_DATA=str(self.data),
            LOGBOX_INDEXD_STATUS=str(self.indexd_status),
            LOGBOX_SYSLOGNG_PIDFILE=str(self.syslogng_pidfile),
            LOGBOX_RPC_BIND=f"127.0.0.1:{self.port}",
            LOGBOX_TLS_CERT=str(self.cafile),
            LOGBOX_TLS_KEY=str(self.keyfile),
            LOGBOX_RPC_WORKERS=str(self.workers),
            LOGBOX_RPC_THREADS=str(self.threads),
        )
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = 30) -> RpcServer:
        """Starts gunicorn and waits until GET /api/v1/health answers (200 or 503).

        :raises AssertionError: if it exits or does not answer within timeout.
        """
        assert self.proc is None or self.proc.poll() is not None, "already running"
        for _ in range(3):  # another process may take the free port before gunicorn binds it
            try:
                return self._start(timeout)
            except _PortTaken:
                self.port = free_port()
                self.base = f"https://127.0.0.1:{self.port}/api/v1"
        return self._start(timeout)

    def _start(self, timeout: float) -> RpcServer:
        """One attempt of start().

        :raises _PortTaken: gunicorn could not bind the port.
        """
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        argv = [venv_python(), "-m", "gunicorn", "-c", str(RPC_DIR / "gunicorn.conf.py"),
                "logbox_rpc:create_app()"]  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self.environment(),
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        with self.session() as s:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    if "Connection in use" in self.log()[log_start:]:
                        raise _PortTaken()
                    raise AssertionError(
                        f"gunicorn exited with {self.proc.returncode} at start:\n{self.log()}"
                    )
                try:
                    if s.get(self.base + "/health", timeout=2).status_code in (200, 503):
                        return self
                except requests.RequestException:
                    pass
                time.sleep(0.05)
        self.kill()
        raise AssertionError(f"gunicorn did not answer /health within {timeout} s:\n{self.log()}")

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM to the master, then its exit status (SIGKILL to the group if it hangs, which
        fails the caller)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"gunicorn did not exit on SIGTERM:\n{self.log()}") from None
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL to gunicorn's process group (the master and its workers)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def __enter__(self) -> RpcServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            if exc and exc[0] is None:
                self.stop()
        finally:
            if self.proc is not None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)  # workers left behind, if any
                except ProcessLookupError:
                    pass

    def accounts(self) -> Accounts:
        """The accounts store, for test setup and checks (one object per server for the whole
        process: LMDB allows one environment per file and process; it stays usable after stop)."""
        if self._accounts is None:
            from logbox_core.accounts import Accounts

            self._accounts = Accounts(self.accounts_path)
        return self._accounts

    def session(self, token: str | None = None) -> requests.Session:
        """A requests session trusting the certificate, with Authorization: Bearer token."""
        s = requests.Session()
        # requests < 2.32 lets REQUESTS_CA_BUNDLE override Session.verify; proxies from the
        # environment must not see 127.0.0.1 either.
        s.trust_env = False
        s.verify = str(self.cafile)
        if token:
            s.headers["Authorization"] = f"Bearer {token}"
        return s

    def login(self, username: str = "admin", password: str | None = None) -> str:
        """POST /login; the session token (asserting success)."""
        with self.session() as s:
            r = s.post(
                self.base + "/login",
                json={"username": username, "password": password or self.admin_password},
                timeout=30,
            )
        assert r.status_code == 200, f"login {username}: {r.status_code} {r.text[:300]}"
        return r.json()["token"]

    def log(self) -> str:
        """What gunicorn (and the app) wrote to stderr so far."""
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text("utf-8", "replace")

    def worker_pids(self) -> list[int]:
        """The pids of gunicorn's worker processes (the master's children)."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        master = self.proc.pid
        pids = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[1]) == master:
                pids.append(int(d.name))
        return sorted(pids)
