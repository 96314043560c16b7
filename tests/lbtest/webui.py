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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lbtest.gunicorn import RPC_DIR, TOP, WEBUI_DIR, GunicornServer

if TYPE_CHECKING:
    import requests
    from selenium.webdriver.remote.webdriver import WebDriver

ARTIFACTS = TOP / "tests" / "artifacts"
CHROMIUM = os.environ.get("LOGBOX_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("LOGBOX_CHROMEDRIVER", "/usr/bin/chromedriver")


class WebuiServer(GunicornServer):
    """Real gunicorn serving logbox_webui over TLS on a free 127.0.0.1 port (see the module
    docstring). Use as a context manager, or start()/stop()."""

    PREFIX = "WEBUI"
    CONF = WEBUI_DIR / "gunicorn.conf.py"
    APP = "logbox_webui:create_app()"
    PYTHONPATH = (RPC_DIR, WEBUI_DIR)
    CONFIG_NAME = "webui.py"
    LOG_NAME = "webui-gunicorn.log"
    SITE = "webui"
    STATIC = WEBUI_DIR / "logbox_webui" / "static"
    HEALTH = "/healthz"
    HEALTH_OK = (200,)

    def __init__(self, root: Path, *, logspace_settings: Path | None = None, **kw: Any) -> None:
        """Makes root/tls/https.crt + .key, root/webui-secret and root/accounts with "admin";
        kw: GunicornServer's (searchd_socket, data, indexd_status, syslogng_pidfile, workers,
        threads, env)."""
        super().__init__(root, **kw)
        self.logspace_settings = Path(logspace_settings or self.root / "logspaces.json")
        self.secret_file = self.root / "webui-secret"
        if not self.secret_file.exists():
            self.secret_file.write_text(secrets.token_hex(32) + "\n")
            self.secret_file.chmod(0o600)

    def app_environment(self) -> dict[str, str]:
        """LOGBOX_WEBUI_SECRET_FILE and LOGBOX_LOGSPACE_SETTINGS."""
        return {
            "LOGBOX_WEBUI_SECRET_FILE": str(self.secret_file),
            "LOGBOX_LOGSPACE_SETTINGS": str(self.logspace_settings),
        }

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


def save_page(driver: WebDriver, name: str) -> None:
    """Saves the browser's window as tests/artifacts/<name>.png and the page's HTML as
    <name>.html: the state the browser was in."""
    screenshot(driver, name)
    (ARTIFACTS / f"{name}.html").write_text(driver.page_source)


# ---------------------------------------------------------------- the pytest fixture

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keeps each phase's report on the test item, for `driver` to see whether the test failed.
    (A hook: tests/conftest.py imports it with the fixtures.)"""
    outcome = yield
    rep = outcome.get_result()
    item.stash.setdefault(_REPORTS, {})[rep.when] = rep


@pytest.fixture
def driver_setup() -> Callable[[WebDriver], None]:
    """What `driver` does with a fresh browser before the test gets it: nothing. A test module
    overrides this fixture to sign in, say."""
    return lambda d: None


@pytest.fixture
def driver(
    request: pytest.FixtureRequest, tmp_path: Path, driver_setup: Callable[[WebDriver], None]
) -> Iterator[WebDriver]:
    """A fresh headless Chromium for one test (downloads into tmp_path/downloads), prepared by
    driver_setup. When the test or the preparation fails, the window and the page's HTML are
    saved as tests/artifacts/<test>-failed.png/.html before the browser quits."""
    with browser(tmp_path / "downloads") as d:
        try:
            driver_setup(d)
            yield d
        except BaseException:
            _save_failed(d, request.node.name)
            raise
        rep = request.node.stash.get(_REPORTS, {}).get("call")
        if rep is not None and rep.failed:
            _save_failed(d, request.node.name)


def _save_failed(driver: WebDriver, name: str) -> None:
    # a browser that is itself broken must not hide the test's own failure
    with contextlib.suppress(Exception):
        save_page(driver, f"{name}-failed")


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
