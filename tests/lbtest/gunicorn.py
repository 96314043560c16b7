"""A logbox Flask app in tests under real gunicorn (the venv's `python -m gunicorn`) behind real
nginx, as `make run` and the appliance run it: nginx (Debian's, with the configuration of
appliance/nginxconf.py) terminates TLS on a free 127.0.0.1 port and passes the requests to
gunicorn on a unix socket (LOGBOX_BEHIND_PROXY=1). With proxy=False gunicorn serves TLS on the
port itself, as it did before nginx (tests of gunicorn's own TLS). A self-signed certificate
made by the openssl CLI and an accounts store (LMDB) holding an admin user "admin" with a random
password. The base of RpcServer (lbtest/rpc.py) and WebuiServer (lbtest/webui.py), which say
which app, conf and health route."""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

import requests
from requests.adapters import HTTPAdapter

from lbtest.proc import stop_process
from lbtest.wait import wait_until

if TYPE_CHECKING:
    from logbox_core.accounts import Accounts

TOP = Path(__file__).resolve().parents[2]
RPC_DIR = TOP / "rpc"
WEBUI_DIR = TOP / "webui"
NGINX = os.environ.get("LOGBOX_NGINX", "/usr/sbin/nginx")
sys.path.insert(0, str(TOP / "appliance"))
import nginxconf  # noqa: E402


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


class SourceAddressAdapter(HTTPAdapter):
    """A requests adapter whose connections leave from one local address."""

    def __init__(self, source: str) -> None:
        self.source = source
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (self.source, 0)
        super().init_poolmanager(*args, **kwargs)


class _PortTaken(Exception):
    """gunicorn or nginx exited because its port was taken."""


def _raise_nofile() -> None:
    """preexec_fn of nginx: as many open files as the hard limit allows, up to 16384 (every
    connection of a slowloris test is one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 16384 if hard == resource.RLIM_INFINITY else min(hard, 16384)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class GunicornServer:
    """Real gunicorn serving one logbox app behind real nginx (TLS) on a free 127.0.0.1 port
    (see the module docstring). Subclasses set the class attributes below and add their own
    environment (app_environment())."""

    PREFIX: ClassVar[str]  # LOGBOX_<PREFIX>_CONFIG/_BIND/_WORKERS/_THREADS
    CONF: ClassVar[Path]  # the gunicorn.conf.py
    APP: ClassVar[str]  # the WSGI app, e.g. "logbox_rpc:create_app()"
    PYTHONPATH: ClassVar[tuple[Path, ...]]  # where the app's packages are
    CONFIG_NAME: ClassVar[str]  # root/<this> is the app's config file (absent unless written)
    LOG_NAME: ClassVar[str]  # root/<this> takes gunicorn's stdout and stderr
    SITE: ClassVar[str]  # the site's name in nginxconf ("rpc", "webui")
    STATIC: ClassVar[Path | None] = None  # the static directory nginx serves at /static/
    HEALTH: ClassVar[str]  # the path start() polls
    HEALTH_OK: ClassVar[tuple[int, ...]]  # the statuses that count as up

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
        proxy: bool | None = None,
    ) -> None:
        """Makes root/tls/https.crt + .key and root/accounts with the user "admin"; proxy:
        nginx in front (the default, unless LOGBOX_TEST_PROXY=0), else gunicorn's own TLS on
        the port."""
        self.root = Path(root)
        self.proxy = proxy if proxy is not None else os.environ.get("LOGBOX_TEST_PROXY") != "0"
        self.root.mkdir(parents=True, exist_ok=True)
        self.searchd_socket = Path(searchd_socket)
        self.data = Path(data)
        self.indexd_status = Path(indexd_status or self.root / "indexd.status.json")
        self.syslogng_pidfile = Path(syslogng_pidfile or self.root / "syslog-ng.pid")
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
        self.log_path = self.root / self.LOG_NAME
        self.proc: subprocess.Popen[bytes] | None = None
        # nginx: its process, directory (configuration, pid, temporary files) and log; the
        # gunicorn socket in a short directory of its own (a unix socket path has 107 bytes)
        self.nginx: subprocess.Popen[bytes] | None = None
        self.nginx_dir = self.root / f"nginx-{self.SITE}"
        self.nginx_log_path = self.root / f"nginx-{self.SITE}.log"
        self.socket_dir = Path(tempfile.mkdtemp(prefix="lb-gu-"))
        self.socket = self.socket_dir / f"{self.SITE}.sock"
        weakref.finalize(self, shutil.rmtree, self.socket_dir, ignore_errors=True)

    @property
    def url(self) -> str:
        """Where it serves: https://127.0.0.1:<port> (no trailing slash)."""
        return f"https://127.0.0.1:{self.port}"

    def app_environment(self) -> dict[str, str]:
        """The app's own LOGBOX_* variables beyond the common ones (none here)."""
        return {}

    def environment(self) -> dict[str, str]:
        """The environment gunicorn runs with."""
        pythonpath = os.pathsep.join(
            p for p in (*map(str, self.PYTHONPATH), os.environ.get("PYTHONPATH", "")) if p
        )
        p = f"LOGBOX_{self.PREFIX}"
        env = dict(
            os.environ,
            PYTHONPATH=pythonpath,
            LOGBOX_SEARCHD_SOCKET=str(self.searchd_socket),
            LOGBOX_ACCOUNTS=str(self.accounts_path),
            LOGBOX_DATA=str(self.data),
            LOGBOX_INDEXD_STATUS=str(self.indexd_status),
            LOGBOX_SYSLOGNG_PIDFILE=str(self.syslogng_pidfile),
            LOGBOX_TLS_CERT=str(self.cafile),
            LOGBOX_TLS_KEY=str(self.keyfile),
            LOGBOX_DELIVERY_SETTINGS=str(self.root / "notify.json"),
            LOGBOX_ARCHIVE_SETTINGS=str(self.root / "archive.json"),
            LOGBOX_SITES_SETTINGS=str(self.root / "sites.json"),
            LOGBOX_ARCHIVE_STATE=str(self.root / "archive-state"),
        )
        env[f"{p}_CONFIG"] = str(self.root / self.CONFIG_NAME)
        if self.proxy:
            env[f"{p}_BIND"] = f"unix:{self.socket}"
            env["LOGBOX_BEHIND_PROXY"] = "1"
        else:
            env[f"{p}_BIND"] = f"127.0.0.1:{self.port}"
            env.pop("LOGBOX_BEHIND_PROXY", None)
        env[f"{p}_WORKERS"] = str(self.workers)
        env[f"{p}_THREADS"] = str(self.threads)
        env.update(self.app_environment())
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = 30) -> Self:
        """Starts gunicorn and waits until GET HEALTH answers one of HEALTH_OK.

        :raises AssertionError: if it exits or does not answer within timeout.
        """
        assert self.proc is None or self.proc.poll() is not None, "already running"
        for _ in range(3):  # another process may take the free port before gunicorn binds it
            try:
                return self._start(timeout)
            except _PortTaken:
                self.port = free_port()
        return self._start(timeout)

    def _start(self, timeout: float) -> Self:
        """One attempt of start().

        :raises _PortTaken: gunicorn could not bind the port.
        """
        if not self.CONF.is_file():
            raise AssertionError(f"{self.CONF} does not exist")
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        argv = [venv_python(), "-m", "gunicorn", "-c", str(self.CONF), self.APP]
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
        proc = self.proc
        nginx_start = self._nginx_log_size()
        if self.proxy and (self.nginx is None or self.nginx.poll() is not None):
            self._start_nginx()

        def alive() -> None:
            if proc.poll() is not None:
                if "Connection in use" in self.log()[log_start:]:
                    raise _PortTaken()
                raise AssertionError(
                    f"gunicorn exited with {proc.returncode} at start:\n{self.log()}"
                )
            if self.nginx is not None and self.nginx.poll() is not None:
                text = self.nginx_log()[nginx_start:]
                self.nginx = None
                self.kill()
                if "Address already in use" in text:
                    raise _PortTaken()
                raise AssertionError(f"nginx exited at start:\n{text}")

        with self.session() as s:

            def healthy() -> bool:
                # an exit first: a port taken by another server must not answer for ours
                alive()
                if self.proxy and not self.socket.exists():
                    return False
                return s.get(self.url + self.HEALTH, timeout=2).status_code in self.HEALTH_OK

            try:
                wait_until(
                    healthy,
                    f"gunicorn answers {self.HEALTH}",
                    timeout,
                    interval=0.05,
                    detail=self.log,
                    ignore=(requests.RequestException,),
                )
            except AssertionError:
                if proc.poll() is None:  # timed out: neither daemon exited
                    self.kill()
                raise
        return self

    def _nginx_log_size(self) -> int:
        return self.nginx_log_path.stat().st_size if self.nginx_log_path.exists() else 0

    def nginx_conf(self) -> str:
        """nginx.conf for this server (appliance/nginxconf.py's, on 127.0.0.1:port)."""
        return nginxconf.render(
            [nginxconf.Site(self.SITE, f"127.0.0.1:{self.port}", self.socket, self.STATIC)],
            cert=self.cafile,
            key=self.keyfile,
            run=self.nginx_dir,
            user="root" if os.geteuid() == 0 else None,
        )

    def _start_nginx(self) -> None:
        """Starts nginx on the port (gunicorn's socket need not exist yet: until it does, nginx
        answers 502)."""
        self.nginx_dir.mkdir(exist_ok=True)
        conf = self.nginx_dir / "nginx.conf"
        conf.write_text(self.nginx_conf())
        with open(self.nginx_log_path, "ab") as log:
            self.nginx = subprocess.Popen(
                [NGINX, "-p", str(self.nginx_dir), "-e", "stderr", "-c", str(conf)],
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=_raise_nofile,
            )

    def stop_nginx(self, timeout: float = 20) -> None:
        """SIGQUIT (graceful) to nginx and wait for it (SIGKILL if it hangs)."""
        if self.nginx is None:
            return
        stop_process(self.nginx, signal.SIGQUIT, timeout, group=True)
        self.nginx = None

    def nginx_log(self) -> str:
        """What nginx wrote to stderr so far."""
        if not self.nginx_log_path.exists():
            return ""
        return self.nginx_log_path.read_text("utf-8", "replace")

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM to the master, then its exit status (SIGKILL to the group if it hangs, which
        fails the caller); nginx stops too."""
        self.stop_nginx(timeout)
        if self.proc is None:
            return 0
        if not stop_process(self.proc, timeout=timeout, group=True):
            raise AssertionError(f"gunicorn did not exit on SIGTERM:\n{self.log()}")
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL to gunicorn's process group (the master and its workers) and to nginx's."""
        if self.nginx is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.nginx.pid, signal.SIGKILL)
            self.nginx.wait()
            self.nginx = None
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            if exc and exc[0] is None:
                self.stop()
        finally:
            for p in (self.proc, self.nginx):
                if p is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(p.pid, signal.SIGKILL)  # workers left behind, if any

    def accounts(self) -> Accounts:
        """The accounts store, for test setup and checks (one object per server for the whole
        process: LMDB allows one environment per file and process; it stays usable after stop)."""
        if self._accounts is None:
            from logbox_core.accounts import Accounts

            self._accounts = Accounts(self.accounts_path)
        return self._accounts

    def session(self, source: str | None = None) -> requests.Session:
        """A requests session trusting the certificate (no proxies from the environment);
        source: the client's address (another 127.x.y.z: every 127/8 address is this host's)."""
        s = requests.Session()
        # requests < 2.32 lets REQUESTS_CA_BUNDLE override Session.verify; proxies from the
        # environment must not see 127.0.0.1 either.
        s.trust_env = False
        s.verify = str(self.cafile)
        if source is not None:
            s.mount("https://", SourceAddressAdapter(source))
            s.mount("http://", SourceAddressAdapter(source))
        return s

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
