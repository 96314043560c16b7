"""The web UI in tests (contract: webui/UI.md): real gunicorn (the venv's `python -m gunicorn`,
PYTHONPATH=rpc:webui, `-c webui/gunicorn.conf.py 'logbox_webui:create_app()'`) serving
logbox_webui over TLS on a free 127.0.0.1 port, with a self-signed certificate, a secret key
file and an accounts store holding the admin "admin" with a random password; and a real
headless Chromium (Debian's chromium + chromedriver, driven by Selenium) to look at it."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from lbtest.rpc import TOP, free_port, make_certificate, venv_python

if TYPE_CHECKING:
    from logbox_core.accounts import Accounts
    from selenium.webdriver.remote.webdriver import WebDriver

RPC_DIR = TOP / "rpc"
WEBUI_DIR = TOP / "webui"
ARTIFACTS = TOP / "tests" / "artifacts"
CHROMIUM = os.environ.get("LOGBOX_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("LOGBOX_CHROMEDRIVER", "/usr/bin/chromedriver")


class _PortTaken(Exception):
    """gunicorn exited because its port was taken."""


class WebuiServer:
    """Real gunicorn serving logbox_webui over TLS on a free 127.0.0.1 port (see the module
    docstring). Use as a context manager, or start()/stop()."""

    def __init__(
        self,
        root: Path,
        *,
        searchd_socket: Path,
        data: Path,
        indexd_status: Path | None = None,
        syslogng_pidfile: Path | None = None,
        logspace_settings: Path | None = None,
        workers: int = 2,
        threads: int = 8,
        env: dict[str, str] | None = None,
    ) -> None:
        """Makes root/tls/https.crt + .key, root/webui-secret and root/accounts with "admin"."""
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.searchd_socket = Path(searchd_socket)
        self.data = Path(data)
        self.indexd_status = Path(indexd_status or self.root / "indexd.status.json")
        self.syslogng_pidfile = Path(syslogng_pidfile or self.root / "syslog-ng.pid")
        self.logspace_settings = Path(logspace_settings or self.root / "logspaces.json")
        self.workers = workers
        self.threads = threads
        self.extra_env = dict(env or {})
        self.cafile = self.root / "tls" / "https.crt"
        self.keyfile = self.root / "tls" / "https.key"
        if not self.cafile.exists():
            make_certificate(self.cafile, self.keyfile)
        self.secret_file = self.root / "webui-secret"
        if not self.secret_file.exists():
            self.secret_file.write_text(secrets.token_hex(32) + "\n")
            self.secret_file.chmod(0o600)
        self.accounts_path = self.root / "accounts"
        self.admin_password = secrets.token_urlsafe(18)
        self._accounts: Accounts | None = None
        acc = self.accounts()
        if acc.get_user("admin") is None:
            acc.add_user("admin", self.admin_password, "admin")
        else:
            acc.update_user("admin", password=self.admin_password)
        self.port = free_port()
        self.log_path = self.root / "webui-gunicorn.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Where it serves: https://127.0.0.1:<port> (no trailing slash)."""
        return f"https://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """The environment gunicorn runs with."""
        pythonpath = os.pathsep.join(
            p for p in (str(RPC_DIR), str(WEBUI_DIR), os.environ.get("PYTHONPATH", "")) if p
        )
        env = dict(
            os.environ,
            PYTHONPATH=pythonpath,
            LOGBOX_WEBUI_CONFIG=str(self.root / "webui.py"),  # absent unless a test writes it
            LOGBOX_WEBUI_SECRET_FILE=str(self.secret_file),
            LOGBOX_SEARCHD_SOCKET=str(self.searchd_socket),
            LOGBOX_ACCOUNTS=str(self.accounts_path),
            LOGBOX_DATA=str(self.data),
            LOGBOX_INDEXD_STATUS=str(self.indexd_status),
            LOGBOX_SYSLOGNG_PIDFILE=str(self.syslogng_pidfile),
            LOGBOX_LOGSPACE_SETTINGS=str(self.logspace_settings),
            LOGBOX_WEBUI_BIND=f"127.0.0.1:{self.port}",
            LOGBOX_TLS_CERT=str(self.cafile),
            LOGBOX_TLS_KEY=str(self.keyfile),
            LOGBOX_WEBUI_WORKERS=str(self.workers),
            LOGBOX_WEBUI_THREADS=str(self.threads),
        )
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = 30) -> WebuiServer:
        """Starts gunicorn and waits until GET /healthz answers 200.

        :raises AssertionError: if it exits or does not answer within timeout.
        """
        assert self.proc is None or self.proc.poll() is not None, "already running"
        for _ in range(3):  # another process may take the free port before gunicorn binds it
            try:
                return self._start(timeout)
            except _PortTaken:
                self.port = free_port()
        return self._start(timeout)

    def _start(self, timeout: float) -> WebuiServer:
        """One attempt of start().

        :raises _PortTaken: gunicorn could not bind the port.
        """
        conf = WEBUI_DIR / "gunicorn.conf.py"
        if not conf.is_file():
            raise AssertionError(f"{conf} does not exist (the web UI is not merged yet?)")
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        argv = [venv_python(), "-m", "gunicorn", "-c", str(conf), "logbox_webui:create_app()"]
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
                    if s.get(self.url + "/healthz", timeout=2).status_code == 200:
                        return self
                except requests.RequestException:
                    pass
                time.sleep(0.05)
        self.kill()
        raise AssertionError(f"gunicorn did not answer /healthz within {timeout} s:\n{self.log()}")

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
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def __enter__(self) -> WebuiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            if exc and exc[0] is None:
                self.stop()
        finally:
            if self.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)  # workers left behind, if any

    def accounts(self) -> Accounts:
        """The accounts store, for test setup and checks (one object per server for the whole
        process: LMDB allows one environment per file and process)."""
        if self._accounts is None:
            from logbox_core.accounts import Accounts

            self._accounts = Accounts(self.accounts_path)
        return self._accounts

    def session(self) -> requests.Session:
        """A requests session trusting the certificate (no proxies from the environment)."""
        s = requests.Session()
        s.trust_env = False
        s.verify = str(self.cafile)
        return s

    def login_session(
        self, username: str = "admin", password: str | None = None
    ) -> requests.Session:
        """A requests session signed in through the login form (asserting success)."""
        s = self.session()
        page = s.get(self.url + "/login", timeout=30)
        token = csrf_token(page.text)
        r = s.post(
            self.url + "/login",
            data={
                "username": username,
                "password": password or self.admin_password,
                "csrf_token": token,
            },
            headers={"Referer": self.url + "/login"},  # Flask-WTF checks it over HTTPS
            timeout=30,
            allow_redirects=False,
        )
        assert r.status_code in (302, 303), f"login {username}: {r.status_code} {r.text[:300]}"
        return s

    def log(self) -> str:
        """What gunicorn (and the app) wrote to stderr so far."""
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text("utf-8", "replace")


_CSRF = re.compile(r'name="csrf_token"[^>]*value="([^"]+)"|value="([^"]+)"[^>]*name="csrf_token"')


def csrf_token(html: str) -> str:
    """The csrf_token hidden field's value in a page."""
    m = _CSRF.search(html)
    assert m, f"no csrf_token field in the page:\n{html[:500]}"
    return m.group(1) or m.group(2)


# ---------------------------------------------------------------- the browser


@contextlib.contextmanager
def browser(download_dir: Path | None = None) -> Iterator[WebDriver]:
    """Headless Chromium (Debian's) under chromedriver, 1280x800, accepting the test's
    self-signed certificate, browser console logs kept (driver.get_log("browser")), downloads
    into download_dir when given. Quit on the way out."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1280,800", "--disable-gpu", "--no-first-run",
                "--disable-extensions", "--disable-background-networking",
                "--password-store=basic", "--lang=en-US"):  # fmt: skip
        opts.add_argument(arg)
    opts.accept_insecure_certs = True
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    prefs: dict[str, Any] = {"credentials_enable_service": False}
    if download_dir is not None:
        download_dir.mkdir(parents=True, exist_ok=True)
        prefs.update(
            {
                "download.default_directory": str(download_dir),
                "download.prompt_for_download": False,
                "safebrowsing.enabled": False,
            }
        )
    opts.add_experimental_option("prefs", prefs)
    service = Service(CHROMEDRIVER)
    driver = webdriver.Chrome(service=service, options=opts)
    try:
        driver.set_page_load_timeout(60)
        driver.set_window_size(1280, 800)
        yield driver
    finally:
        driver.quit()


def login(driver: WebDriver, url: str, user: str, password: str) -> None:
    """Signs in through the login form at url/login (types the fields, submits) and waits
    until the browser left the login page."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url + "/login")
    form = driver.find_element(By.ID, "login")
    form.find_element(By.NAME, "username").send_keys(user)
    form.find_element(By.NAME, "password").send_keys(password)
    driver.find_element(By.ID, "login-submit").click()
    WebDriverWait(driver, 30).until(lambda d: "/login" not in d.current_url)


def screenshot(driver: WebDriver, name: str) -> Path:
    """Saves a PNG of the browser's window as tests/artifacts/<name>.png; returns its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / (name if name.endswith(".png") else name + ".png")
    driver.save_screenshot(str(path))
    return path


def cookies_session(driver: WebDriver, server: WebuiServer) -> requests.Session:
    """A requests session that carries the browser's cookies for the server (to download what
    a link points to, as the browser would)."""
    s = server.session()
    for c in driver.get_cookies():
        s.cookies.set(
            c["name"], c["value"], domain=c.get("domain", "127.0.0.1"), path=c.get("path", "/")
        )
    s.headers["User-Agent"] = driver.execute_script("return navigator.userAgent")
    return s
