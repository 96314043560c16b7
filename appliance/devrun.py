#!/usr/bin/env python3
"""Run the logbox appliance locally, in the foreground, the way systemd runs it on the box.

`make run` calls this after building. It prepares the data directory (``LOGBOX_DATA``, default
``./var``), starts every service, restarts a service that dies within
a second (printing the restart), and stops everything cleanly on Ctrl-C or SIGTERM. It holds
``<data>/.make-run.lock`` (flock) while it runs: a second one on the same data directory
refuses at once, naming the pid that has it.

syslog-ng hands every message to logbox-indexd through the spool (indexer/FORMAT.md §13),
``<data>/spool``: syslog-ng runs on the configuration collector/render.py makes from
``<data>/etc/collector.toml`` (the dev defaults when absent), rendered again with a fresh run
token before every start, with a dev TLS CA and server certificate made on the first run under
``<data>/tls/``; logbox-indexd reads the spool (``--spool``) and routes with the
``[[logspace]]`` tables of that same file (``--routes``, when it exists). On Ctrl-C syslog-ng
is stopped first (SIGTERM, and its exit awaited: it writes what it holds into the spool), then
the others.

The RPC API (rpc/API.md) runs under gunicorn as ``logbox-rpc`` on
``https://127.0.0.1:${LOGBOX_RPC_PORT:-8444}/api/v1``, after searchd, with a self-signed
certificate made on the first run (``<data>/tls/https.crt``, ``https.key``) and its accounts
store in ``<data>/accounts/``. When that store has no admin, the user ``admin`` is created with
the password in ``LOGBOX_ADMIN_PASSWORD``, else with a random one printed once (and then flagged
must_change, so that the web UI makes the admin choose a new one at the first sign-in).

logbox-alertd (logbox_core/alertd.py) evaluates the alerts of that accounts store against
searchd, keeps its state in ``<data>/run/alertd.state.json``, writes its status to
``<data>/run/alertd.status.json`` (both apps read it) and delivers with the settings in
``<data>/etc/notify.json``.

The web UI (webui/UI.md) runs under gunicorn as ``logbox-webui`` on
``https://127.0.0.1:${LOGBOX_WEBUI_PORT:-8443}``, after the RPC API, with the same certificate
and accounts store, its session signing key in ``<data>/etc/webui-secret`` (32 random bytes in
hex, made once, mode 0600) and the logspace settings it writes in ``<data>/etc/logspaces.json``
(given to logbox-indexd with ``--logspaces``).

As on the appliance, both apps' gunicorns listen on unix sockets (``<data>/run/nginx/rpc.sock``,
``webui.sock``, in a directory only this user may enter, with ``LOGBOX_BEHIND_PROXY=1``) behind
nginx (``logbox-nginx``, started last), which terminates TLS on both ports with the
configuration appliance/nginxconf.py renders into ``<data>/run/nginx/nginx.conf`` (its pid and
temporary files in that directory too, its log on this terminal) and serves the web UI's static
files itself.

Both apps read the integrity report (``LOGBOX_INTEGRITY_REPORT``) from
``<data>/run/integrity.json`` and serve the public key day roots are signed with
(``LOGBOX_SIGN_PUBKEY``) from ``<data>/indexd/sign.pub`` itself, where the appliance serves its
copy in /etc/logbox. As the appliance's daily timer does, the supervisor runs ``logbox verify
--integrity --json --out`` on the store into that report a few seconds after indexd is up, then
every 24 hours, in the background, and prints one line of what it found. ``run`` is one of the
data directory's own folders (LB_RESERVED_NAMES), so the report never sits where a logspace
could. The store is not encrypted here (the appliance keeps it on LUKS2); the supervisor says so
at start. Likewise it runs ``python -m logbox_core.reports run-due`` every minute (the
appliance's timer: every 15 minutes), which emails each scheduled report once per period through
the SMTP relay of the delivery settings ``<data>/etc/notify.json``.

A service whose program is missing (``make build`` makes the C ones, ``make deps`` installs
syslog-ng and nginx) is named and left out rather than pretended.
"""

from __future__ import annotations

import fcntl
import importlib
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
BIN = TOP / "build" / "bin"
RESTART_DELAY = 0.5  # seconds between a death and the restart: "within a second"
VERIFY_AFTER = 5.0  # seconds after indexd is up that the first verify runs
VERIFY_WAIT_INDEXD = 60.0  # ... or after this long when indexd's status file does not appear
VERIFY_EVERY = 86400.0  # and then every 24 hours, as the appliance's timer
REPORTS_EVERY = 60.0  # seconds between two `logbox_core.reports run-due` (the appliance: 15 min)
SYSLOGNG_STOP = 30  # seconds syslog-ng gets to write what it holds into the spool at a stop

RPC = TOP / "rpc"  # logbox_core, logbox_rpc: run from the checkout (PYTHONPATH)
DEFAULT_RPC_PORT = 8444
WEBUI = TOP / "webui"  # logbox_webui, run from the checkout too
DEFAULT_WEBUI_PORT = 8443

sys.path.insert(0, str(TOP / "collector"))
collector = importlib.import_module("render")
sys.path.insert(0, str(TOP / "appliance"))
nginxconf = importlib.import_module("nginxconf")
NGINX = os.environ.get("LOGBOX_NGINX", "/usr/sbin/nginx")


@dataclass
class Api:
    """What prepare_rpc() made for the RPC API: its certificate, key and accounts store."""

    cert: Path
    key: Path
    accounts: Path
    port: int

    @property
    def url(self) -> str:
        """Where it serves."""
        return f"https://127.0.0.1:{self.port}/api/v1"


@dataclass
class Webui:
    """What prepare_webui() made for the web UI: its port, secret key file and settings file
    (certificate, key and accounts store are the API's)."""

    api: Api
    port: int
    secret: Path
    logspaces: Path

    @property
    def url(self) -> str:
        """Where it serves."""
        return f"https://127.0.0.1:{self.port}"


@dataclass
class Service:
    """One supervised daemon: how to start it and what it serves."""

    name: str
    argv: list[str]
    serves: str
    needs: Path  # the program that must exist for the service to run
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    env: dict[str, str] = field(default_factory=dict)
    fds: dict[int, int] = field(default_factory=dict)  # fd in the child -> fd here
    prestart: Callable[[], None] | None = None  # run before every start (syslog-ng: render)


@dataclass
class Collector:
    """What prepare() made for syslog-ng and the hand-off."""

    conf: Path
    spool: Path
    settings: collector.Settings
    data: Path
    serves: str
    nofile: int  # RLIMIT_NOFILE syslog-ng needs: every connection of every TCP listener

    def render(self) -> None:
        """syslog-ng.conf again, with a fresh run token (indexer/FORMAT.md §13.2): a restarted
        syslog-ng never appends to a spool file the one before left torn."""
        write_conf(
            self.conf,
            collector.render(
                self.settings, data=self.data, run=run_dir(self.data), spool=self.spool
            ),
        )


def write_conf(conf: Path, text: str) -> None:
    """text into conf, replaced at once."""
    tmp = conf.with_suffix(".conf.tmp")
    tmp.write_text(text)
    tmp.replace(conf)


def run_dir(data: Path) -> Path:
    """Where sockets and run-time files live: <data>/run."""
    return data / "run"


def settings_path(data: Path) -> Path:
    """The collector settings file make run uses when it exists."""
    return data / "etc" / "collector.toml"


def logspaces_path(data: Path) -> Path:
    """The logspace settings file the web UI writes and indexd reads: <data>/etc/logspaces.json."""
    return data / "etc" / "logspaces.json"


def delivery_path(data: Path) -> Path:
    """The alert delivery settings both apps write (logbox_core.deliver): <data>/etc/notify.json."""
    return data / "etc" / "notify.json"


def sites_settings(data: Path) -> Path:
    """The sites and multiple logspaces the API writes (logbox_core.federation):
    <data>/etc/sites.json."""
    return data / "etc" / "sites.json"


def archive_settings(data: Path) -> Path:
    """The archive targets both apps write (logbox_core.archive): <data>/etc/archive.json."""
    return data / "etc" / "archive.json"


def archive_state(data: Path) -> Path:
    """logbox-archive's state (what is verified; indexd's retention reads it): <data>/run/archive."""
    return run_dir(data) / "archive"


def integrity_report(data: Path) -> Path:
    """Where verify writes its report and the apps read it: <data>/run/integrity.json."""
    return run_dir(data) / "integrity.json"


def sign_pubkey(data: Path) -> Path:
    """The public key day roots are signed with (`logbox keys init`): <data>/indexd/sign.pub."""
    return data / "indexd" / "sign.pub"


def alertd_state(data: Path) -> Path:
    """What logbox-alertd keeps across restarts (the appliance: /var/lib/logbox-alertd)."""
    return run_dir(data) / "alertd.state.json"


def nginx_dir(data: Path) -> Path:
    """nginx's configuration, pid and temporary files: <data>/run/nginx."""
    return run_dir(data) / "nginx"


def app_socket(data: Path, app: str) -> Path:
    """Where an app's gunicorn listens for nginx: <data>/run/nginx/<app>.sock (a directory
    only this user may enter: nothing but nginx reaches the apps)."""
    return nginx_dir(data) / f"{app}.sock"


def prepare_nginx(data: Path, api: Api | None, webui: Webui | None) -> Path | None:
    """nginx.conf for the apps there are (appliance/nginxconf.py), in <data>/run/nginx; None when
    there is no app to put behind it."""
    sites = []
    if webui is not None:
        sites.append(
            nginxconf.Site(
                "webui",
                f"127.0.0.1:{webui.port}",
                app_socket(data, "webui"),
                static=WEBUI / "logbox_webui" / "static",
            )
        )
    if api is not None:
        sites.append(nginxconf.Site("rpc", f"127.0.0.1:{api.port}", app_socket(data, "rpc")))
    if not sites:
        return None
    tls = api if api is not None else webui.api  # type: ignore[union-attr]
    cert, key = tls.cert, tls.key
    d = nginx_dir(data)
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    conf = d / "nginx.conf"
    text = nginxconf.render(
        sites, cert=cert, key=key, run=d, user="root" if os.geteuid() == 0 else None
    )
    tmp = conf.with_suffix(".conf.tmp")
    tmp.write_text(text)
    tmp.replace(conf)
    return conf


def services(
    data: Path,
    col: Collector | None = None,
    api: Api | None = None,
    webui: Webui | None = None,
    nginx: Path | None = None,
) -> list[Service]:
    """The appliance's daemons, in start order, for a data directory."""
    root = ["--allow-root"] if os.geteuid() == 0 else []
    run = run_dir(data)
    searchd_sock = run / "searchd.sock"
    out: list[Service] = []
    if col is not None:
        indexd = BIN / "logbox-indexd"
        status = run / "indexd.status.json"
        routes = settings_path(data)
        spool = ["--spool", str(col.spool)]
        if routes.exists():
            spool += ["--routes", str(routes)]
        out.append(
            Service(
                name="logbox-indexd",
                argv=[
                    str(indexd),
                    "--data",
                    str(data),
                    "--status",
                    str(status),
                    *root,
                    "--logspaces",
                    str(logspaces_path(data)),
                    "--archive-state",
                    str(archive_state(data)),
                    *spool,
                ],
                serves=(
                    f"the spool {col.spool}"
                    + (f", routes from {routes}" if "--routes" in spool else "")
                    + f", status in {status}"
                ),
                needs=indexd,
            )
        )
        sng = shutil.which("syslog-ng") or "/usr/sbin/syslog-ng"
        out.append(
            Service(
                name="syslog-ng",
                argv=collector.syslogng_argv(col.conf, run, program=sng),
                serves=col.serves,
                needs=Path(sng),
                prestart=col.render,
            )
        )
    out.append(
        Service(
            name="logbox-searchd",
            argv=[
                str(BIN / "logbox-searchd"),
                "--data",
                str(data),
                "--socket",
                str(searchd_sock),
                # archived days read in place (indexer/ARCHIVE.md §7)
                "--archive-settings",
                str(archive_settings(data)),
                "--archive-state",
                str(archive_state(data)),
                "--archive-cache",
                str(data / "cache" / "archive"),
                *root,
            ],
            serves=f"search on unix socket {searchd_sock}",
            needs=BIN / "logbox-searchd",
        )
    )
    if api is not None:
        conf = RPC / "gunicorn.conf.py"
        pythonpath = os.pathsep.join(p for p in (str(RPC), os.environ.get("PYTHONPATH")) if p)
        out.append(
            Service(
                name="logbox-rpc",
                argv=[sys.executable, "-m", "gunicorn", "-c", str(conf), "logbox_rpc:create_app()"],
                serves=(
                    f"the RPC API on {app_socket(data, 'rpc')}, at {api.url} through "
                    f"logbox-nginx (certificate {api.cert})"
                ),
                needs=conf,
                env={
                    "PYTHONPATH": pythonpath,
                    "LOGBOX_RPC_BIND": f"unix:{app_socket(data, 'rpc')}",
                    "LOGBOX_BEHIND_PROXY": "1",
                    "LOGBOX_TLS_CERT": str(api.cert),
                    "LOGBOX_TLS_KEY": str(api.key),
                    "LOGBOX_SEARCHD_SOCKET": str(searchd_sock),
                    "LOGBOX_ACCOUNTS": str(api.accounts),
                    "LOGBOX_DATA": str(data),
                    "LOGBOX_INDEXD_STATUS": str(run / "indexd.status.json"),
                    "LOGBOX_SYSLOGNG_PIDFILE": str(run / "syslog-ng.pid"),
                    "LOGBOX_INTEGRITY_REPORT": str(integrity_report(data)),
                    "LOGBOX_SIGN_PUBKEY": str(sign_pubkey(data)),
                    "LOGBOX_ALERTD_STATUS": str(run / "alertd.status.json"),
                    "LOGBOX_DELIVERY_SETTINGS": str(delivery_path(data)),
                    "LOGBOX_ARCHIVE_STATE": str(archive_state(data)),
                    "LOGBOX_ARCHIVE_SETTINGS": str(archive_settings(data)),
                    "LOGBOX_SITES_SETTINGS": str(sites_settings(data)),
                },
            )
        )
    if api is not None:
        pythonpath = os.pathsep.join(p for p in (str(RPC), os.environ.get("PYTHONPATH")) if p)
        alertd = RPC / "logbox_core" / "alertd.py"
        out.append(
            Service(
                name="logbox-alertd",
                argv=[sys.executable, "-m", "logbox_core.alertd"],
                serves=(
                    f"alerts of {api.accounts}, state in {alertd_state(data)}, status in "
                    f"{run / 'alertd.status.json'}, delivery settings {delivery_path(data)}"
                ),
                needs=alertd,
                env={
                    "PYTHONPATH": pythonpath,
                    "LOGBOX_ACCOUNTS": str(api.accounts),
                    "LOGBOX_SEARCHD_SOCKET": str(searchd_sock),
                    "LOGBOX_ALERTD_STATE": str(alertd_state(data)),
                    "LOGBOX_ALERTD_STATUS": str(run / "alertd.status.json"),
                    "LOGBOX_DELIVERY_SETTINGS": str(delivery_path(data)),
                    "LOGBOX_ALERTD_URL": webui.url if webui is not None else "",
                    **({"LOGBOX_ALLOW_ROOT": "1"} if root else {}),
                },
            )
        )
    if col is not None:
        pythonpath = os.pathsep.join(p for p in (str(RPC), os.environ.get("PYTHONPATH")) if p)
        out.append(
            Service(
                name="logbox-archive",
                argv=[sys.executable, "-m", "logbox_core.archive", "run", "--interval", "10"],
                serves=(
                    f"closed days to the targets in {archive_settings(data)}, state in "
                    f"{archive_state(data)}"
                ),
                needs=RPC / "logbox_core" / "archive.py",
                env={
                    "PYTHONPATH": pythonpath,
                    "LOGBOX_DATA": str(data),
                    "LOGBOX_BIN": str(BIN / "logbox"),
                    "LOGBOX_ARCHIVE_SETTINGS": str(archive_settings(data)),
                    "LOGBOX_ARCHIVE_STATE": str(archive_state(data)),
                },
            )
        )
    if webui is not None:
        conf = WEBUI / "gunicorn.conf.py"
        pythonpath = os.pathsep.join(
            p for p in (str(RPC), str(WEBUI), os.environ.get("PYTHONPATH")) if p
        )
        out.append(
            Service(
                name="logbox-webui",
                argv=[
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "-c",
                    str(conf),
                    "logbox_webui:create_app()",
                ],  # fmt: skip
                serves=(
                    f"the web UI on {app_socket(data, 'webui')}, at {webui.url} through "
                    f"logbox-nginx (certificate {webui.api.cert})"
                ),
                needs=conf,
                env={
                    "PYTHONPATH": pythonpath,
                    "LOGBOX_WEBUI_BIND": f"unix:{app_socket(data, 'webui')}",
                    "LOGBOX_BEHIND_PROXY": "1",
                    "LOGBOX_TLS_CERT": str(webui.api.cert),
                    "LOGBOX_TLS_KEY": str(webui.api.key),
                    "LOGBOX_WEBUI_SECRET_FILE": str(webui.secret),
                    "LOGBOX_ACCOUNTS": str(webui.api.accounts),
                    "LOGBOX_SEARCHD_SOCKET": str(searchd_sock),
                    "LOGBOX_DATA": str(data),
                    "LOGBOX_INDEXD_STATUS": str(run / "indexd.status.json"),
                    "LOGBOX_SYSLOGNG_PIDFILE": str(run / "syslog-ng.pid"),
                    "LOGBOX_LOGSPACE_SETTINGS": str(webui.logspaces),
                    "LOGBOX_INTEGRITY_REPORT": str(integrity_report(data)),
                    "LOGBOX_SIGN_PUBKEY": str(sign_pubkey(data)),
                    "LOGBOX_ALERTD_STATUS": str(run / "alertd.status.json"),
                    "LOGBOX_DELIVERY_SETTINGS": str(delivery_path(data)),
                    "LOGBOX_ARCHIVE_STATE": str(archive_state(data)),
                    "LOGBOX_ARCHIVE_SETTINGS": str(archive_settings(data)),
                    "LOGBOX_SITES_SETTINGS": str(sites_settings(data)),
                },
            )
        )
    if nginx is not None:
        ports = [f"{w.url} (web UI)" for w in (webui,) if w is not None]
        ports += [f"{a.url} (API)" for a in (api,) if a is not None]
        out.append(
            Service(
                name="logbox-nginx",
                argv=[NGINX, "-p", str(nginx.parent), "-e", "stderr", "-c", str(nginx)],
                serves=f"TLS on {' and '.join(ports)} in front of gunicorn's sockets",
                needs=Path(NGINX),
            )
        )
    return out


def prepare(data: Path) -> None:
    """Create the data directory, its run directory and the default logspace `main`."""
    data.mkdir(parents=True, exist_ok=True)
    run_dir(data).mkdir(exist_ok=True)
    cli = BIN / "logbox"
    if cli.exists() and not (data / "catalog").exists():
        # Ingesting nothing creates the catalog and the logspace, as indexd will.
        subprocess.run(
            [str(cli), "ingest", "--data", str(data), os.devnull],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    if cli.exists() and not (data / "indexd" / "seal").exists():
        # Forward-secure seals (indexer/FORMAT.md §14.5): the verification key is shown here,
        # once, and is not kept in the data directory.
        made = subprocess.run(
            [str(cli), "keys", "init", "--data", str(data)], capture_output=True, text=True
        )
        if made.returncode != 0:
            raise RuntimeError(f"logbox keys init: {made.stderr.strip()}")
        log(f"set up sealing in {data / 'indexd' / 'seal'}")
        print(made.stdout, end="", flush=True)


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def dev_tls(tls: Path) -> bool:
    """On the first run, a dev CA (ca.crt, ca.key) and a server certificate signed by it
    (server.crt, server.key: localhost, 127.0.0.1, this host's name) and a client certificate
    (client.crt, client.key) under tls. Returns True when it made them."""
    if (tls / "server.crt").exists():
        return False
    tls.mkdir(parents=True, exist_ok=True)
    os.chmod(tls, 0o700)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    _openssl(
        "req", "-x509", *ec, "-keyout", str(tls / "ca.key"), "-out", str(tls / "ca.crt"),
        "-days", "3650", "-subj", "/CN=logbox dev CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    names = ["DNS:localhost", "IP:127.0.0.1", "IP:::1"]
    host = socket.gethostname()
    if host and host != "localhost":
        names.append(f"DNS:{host}")
    for who, cn, ext in (
        ("server", "localhost", f"subjectAltName={','.join(names)}\nextendedKeyUsage=serverAuth"),
        ("client", "logbox dev client", "extendedKeyUsage=clientAuth"),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            csr, extfile = Path(tmp) / "csr", Path(tmp) / "ext"
            extfile.write_text(f"basicConstraints=CA:FALSE\n{ext}\n")
            _openssl(
                "req", "-new", *ec, "-keyout", str(tls / f"{who}.key"), "-out", str(csr),
                "-subj", f"/CN={cn}",
            )  # fmt: skip
            _openssl(
                "x509", "-req", "-in", str(csr), "-CA", str(tls / "ca.crt"),
                "-CAkey", str(tls / "ca.key"), "-CAcreateserial", "-days", "825",
                "-out", str(tls / f"{who}.crt"), "-extfile", str(extfile),
            )  # fmt: skip
    for key in tls.glob("*.key"):
        os.chmod(key, 0o600)
    return True


def https_tls(tls: Path) -> tuple[Path, Path, bool]:
    """The RPC API's certificate and key (tls/https.crt, https.key): self-signed, P-256, for
    IP:127.0.0.1 and DNS:localhost, 825 days, made when neither exists and never replaced.
    Returns (cert, key, whether it made them).

    :raises OSError: when only one of the two exists.
    """
    crt, key = tls / "https.crt", tls / "https.key"
    if crt.exists() and key.exists():
        return crt, key, False
    if crt.exists() or key.exists():
        have, missing = (crt, key) if crt.exists() else (key, crt)
        raise OSError(f"{have} exists but {missing} does not: restore it, or remove both")
    tls.mkdir(parents=True, exist_ok=True)
    os.chmod(tls, 0o700)
    with tempfile.TemporaryDirectory(dir=tls) as tmp:
        t_crt, t_key = Path(tmp) / "https.crt", Path(tmp) / "https.key"
        _openssl(
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", str(t_key), "-out", str(t_crt), "-days", "825", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-addext", "basicConstraints=critical,CA:FALSE",
            "-addext", "keyUsage=critical,digitalSignature",
            "-addext", "extendedKeyUsage=serverAuth",
        )  # fmt: skip
        os.chmod(t_key, 0o600)
        os.chmod(t_crt, 0o644)
        t_key.replace(key)
        t_crt.replace(crt)
    return crt, key, True


def ensure_admin(path: Path) -> None:
    """Creates the user admin in the accounts store at path when it has no enabled admin: with
    the password in LOGBOX_ADMIN_PASSWORD (not printed), else a random one printed once and
    flagged must_change so that the web UI asks for a new one at the first sign-in.

    :raises logbox_core.accounts.AccountsError: the store or the password is refused.
    """
    if str(RPC) not in sys.path:
        sys.path.insert(0, str(RPC))
    from logbox_core.accounts import Accounts  # the checkout's, as gunicorn runs it

    acc = Accounts(path)
    try:
        if acc.has_admin():
            return
        given = os.environ.get("LOGBOX_ADMIN_PASSWORD")
        password = given if given else secrets.token_urlsafe(18)
        try:
            acc.add_user("admin", password, "admin", must_change=not given)
        except Exception as e:
            why = getattr(e, "message", None) or e
            src = " with the password in LOGBOX_ADMIN_PASSWORD" if given else ""
            raise RuntimeError(f"cannot create the user admin{src}: {why}") from e
    finally:
        acc.close()
    if given:
        log(f"created the user admin in {path} with the password in LOGBOX_ADMIN_PASSWORD")
    else:
        log(f"created the user admin in {path}")
        print(f"logbox: admin password (shown once): {password}", flush=True)


def prepare_rpc(data: Path) -> Api:
    """The RPC API's certificate and accounts store (with an admin)."""
    crt, key, made = https_tls(data / "tls")
    if made:
        log(f"made a self-signed certificate for the RPC API: {crt} (curl --cacert {crt})")
    accounts = data / "accounts"  # a reserved name (LB_RESERVED_NAMES): no logspace is called so
    ensure_admin(accounts)
    port = int(os.environ.get("LOGBOX_RPC_PORT") or DEFAULT_RPC_PORT)
    return Api(cert=crt, key=key, accounts=accounts, port=port)


def webui_secret(path: Path) -> bool:
    """The web UI's session signing key: 32 random bytes in hex in path (mode 0600), made when
    it does not exist and never replaced. Returns True when it made it."""
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    os.chmod(tmp, 0o600)
    tmp.replace(path)
    return True


def prepare_webui(data: Path, api: Api) -> Webui:
    """The web UI's secret key file and its port (with the RPC API's certificate and accounts
    store)."""
    secret = data / "etc" / "webui-secret"
    if webui_secret(secret):
        log(f"made the web UI's session key {secret}")
    port = int(os.environ.get("LOGBOX_WEBUI_PORT") or DEFAULT_WEBUI_PORT)
    return Webui(api=api, port=port, secret=secret, logspaces=logspaces_path(data))


def prepare_collector(data: Path) -> Collector | None:
    """Render syslog-ng.conf from the settings, make the dev TLS files and the spool; None (and
    a line saying why) when syslog-ng is not installed."""
    run = run_dir(data)
    path = settings_path(data)
    settings = collector.load_settings(path if path.exists() else None)
    for w in settings.warnings:
        log(f"collector: {w}")
    spool = data / "spool"
    conf = run / "syslog-ng.conf"
    text = collector.render(settings, data=data, run=run, spool=spool)
    spool.mkdir(mode=0o770, exist_ok=True)
    own = (settings.tls_cert, settings.tls_key, settings.tls_ca)
    if settings.tls_port and None in own and dev_tls(data / "tls"):
        log(f"made a dev TLS CA and server certificate in {data / 'tls'}")
    write_conf(conf, text)
    sng = shutil.which("syslog-ng")
    if sng is None:
        log("syslog-ng: not installed (make deps installs syslog-ng-core)")
        return None
    check = subprocess.run([sng, "--syntax-only", "-f", str(conf)], capture_output=True, text=True)
    if check.returncode != 0:
        raise collector.SettingsError(f"syslog-ng refuses {conf}:\n{check.stderr.strip()}")
    s = settings
    listen = [
        f"{what} {s.bind}:{port}"
        for what, port in (
            ("tcp", s.tcp_port),
            ("tcp octet-counted", s.octet_port),
            ("tls", s.tls_port),
            ("udp", s.udp_port),
        )
        if port
    ]
    return Collector(
        conf=conf,
        spool=spool,
        settings=settings,
        data=data,
        serves="syslog on " + ", ".join(listen) + f" into the spool {spool}",
        nofile=3 * s.max_connections + 1024,
    )


@dataclass
class Verifier:
    """`logbox verify --integrity --json --out <data>/run/integrity.json` in the background:
    first VERIFY_AFTER seconds after indexd is up (its status file exists; or VERIFY_WAIT_INDEXD
    after the start when it does not appear), then every VERIFY_EVERY seconds; one line of what
    it found each time. poll() is called from the supervisor's loop (it has one thread)."""

    data: Path
    started: float  # time.monotonic() at the start
    wall: float = field(default_factory=time.time)  # time.time() at the start
    proc: subprocess.Popen[bytes] | None = None
    began: float = 0.0  # when proc started
    next_at: float | None = None  # when the next run is due (None: waiting for indexd)
    errors: Path | None = None  # proc's stderr
    before: int = -1  # the report's mtime (ns) before proc started; -1: none

    @property
    def report(self) -> Path:
        """The report's path."""
        return integrity_report(self.data)

    def poll(self, now: float) -> None:
        """Start a run that is due, or report one that ended."""
        if self.proc is not None:
            if self.proc.poll() is not None:
                self._done(now)
            return
        if self.next_at is None:
            indexd_up = _mtime(run_dir(self.data) / "indexd.status.json") >= self.wall * 1e9
            if indexd_up or now - self.started >= VERIFY_WAIT_INDEXD:
                self.next_at = now + VERIFY_AFTER
            return
        if now >= self.next_at:
            self._start(now)

    def _start(self, now: float) -> None:
        cli = BIN / "logbox"
        self.next_at = now + VERIFY_EVERY
        if not cli.exists():
            log(f"verify: {cli} does not exist (make build); next try in 24 h")
            return
        self.errors = run_dir(self.data) / "integrity.stderr"
        self.before = _mtime(self.report)
        with open(self.errors, "wb") as err:
            self.proc = subprocess.Popen(
                [str(cli), "verify", "--data", str(self.data), "--integrity", "--json"]
                + ["--out", str(self.report)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,  # a Ctrl-C reaches the supervisor, which stops it
            )
        self.began = now

    def _done(self, now: float) -> None:
        assert self.proc is not None
        code = self.proc.returncode
        self.proc = None
        took = now - self.began
        fresh = _mtime(self.report) != self.before
        log(f"verify: {summary(self.report, code, fresh, self.errors, took)}; next in 24 h")

    def stop(self) -> None:
        """End a run in progress (its report is written only when it completes)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            log("verify: stopped before it ended")
        self.proc = None


@dataclass
class Reporter:
    """`python -m logbox_core.reports run-due` in the background every REPORTS_EVERY seconds,
    as the appliance's logbox-reports.timer: each scheduled report is emailed once per period
    through the relay of the delivery settings (<data>/etc/notify.json). What it says (a report
    sent or not) is passed on to this terminal; a run that finds nothing due says nothing."""

    data: Path
    next_at: float = 0.0
    proc: subprocess.Popen[bytes] | None = None
    errors: Path | None = None

    def poll(self, now: float) -> None:
        """Start a run that is due, or pass on what an ended one said."""
        if self.proc is not None:
            if self.proc.poll() is None:
                return
            self.proc = None
            if self.errors is not None:
                for line in self.errors.read_text(errors="replace").splitlines():
                    log(f"reports: {line.removeprefix('logbox-reports: ')}")
            return
        if now < self.next_at or not (self.data / "accounts" / "data.mdb").exists():
            return
        self.next_at = now + REPORTS_EVERY
        self.errors = run_dir(self.data) / "reports.stderr"
        pythonpath = os.pathsep.join(p for p in (str(RPC), os.environ.get("PYTHONPATH")) if p)
        with open(self.errors, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "logbox_core.reports"]
                + ["--accounts", str(self.data / "accounts")]
                + ["--searchd", str(run_dir(self.data) / "searchd.sock")]
                + ["--delivery", str(delivery_path(self.data)), "run-due"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, "PYTHONPATH": pythonpath},
                start_new_session=True,
            )

    def stop(self) -> None:
        """End a run in progress (a report it was sending is sent again by the next run)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def _mtime(path: Path) -> int:
    """path's mtime in ns; -1 when it does not exist."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


def summary(report: Path, code: int, fresh: bool, errors: Path | None, took: float) -> str:
    """One line of what a verify run found: its report (fresh: written by this run) read by
    logbox_core.integrity (the reader the apps use), or why there is none."""
    if str(RPC) not in sys.path:
        sys.path.insert(0, str(RPC))
    from logbox_core import integrity  # the checkout's, as gunicorn runs it

    doc = integrity.load(report) if code in (0, 1) and fresh else None
    if doc is None:
        why = ""
        if errors is not None:
            try:
                why = errors.read_text(errors="replace").strip().splitlines()[-1]
            except (OSError, IndexError):
                pass
        return f"failed (exit {code}){': ' + why if why else ''}"
    parts = []
    for name in integrity.names(doc):
        v = integrity.view(doc, name)
        assert v is not None
        n = len(v["problems"])
        parts.append(
            f"{name} {v['messages']} messages in {len(v['days'])} days"
            + (f", {n} problems" if n else ", intact")
        )
    head = "ok" if doc.get("ok") is True else f"{doc.get('problems')} problems found"
    return f"{head} in {took:.1f} s ({'; '.join(parts) or 'no logspace'}), report {report}"


def log(msg: str) -> None:
    """Print one supervisor line, flushed so it interleaves with the daemons' output."""
    print(f"logbox-run: {msg}", flush=True)


def raise_nofile(want: int) -> int:
    """Raise this process's RLIMIT_NOFILE (inherited by the daemons) to want, or as far as the
    hard limit allows when it may not be raised; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= want:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
        return want
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard


def _child_setup(svc: Service) -> Callable[[], None] | None:
    """What runs in the child between fork and exec: fds moved to the numbers it expects."""
    if not svc.fds:
        return None
    fds = dict(svc.fds)

    def setup() -> None:
        for child, parent in fds.items():
            os.dup2(parent, child)  # the copy is inheritable (no FD_CLOEXEC)

    return setup


def start(svc: Service) -> None:
    """Start svc in its own process group so a Ctrl-C reaches only the supervisor first."""
    if svc.prestart is not None:
        svc.prestart()
    env = dict(os.environ)
    env.update(svc.env)
    svc.proc = subprocess.Popen(
        svc.argv,
        env=env,
        start_new_session=True,
        pass_fds=tuple(svc.fds),
        preexec_fn=_child_setup(svc),  # the supervisor has a single thread
    )


def end_group(pgid: int) -> None:
    """SIGKILL what is left of a dead service's process group (gunicorn's workers, which would
    hold the port until they notice their master is gone)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop_one(svc: Service, timeout: float) -> None:
    """SIGTERM svc and wait for it; SIGKILL after timeout seconds."""
    if svc.proc is None:
        return
    if svc.proc.poll() is None:
        svc.proc.terminate()
    try:
        svc.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        log(f"{svc.name} did not stop in {timeout:.0f} s: killing it")
        svc.proc.kill()
        svc.proc.wait()
    log(f"stopped {svc.name}")


def stop_all(running: list[Service]) -> None:
    """Stop syslog-ng first and wait for it (it writes what it holds into the spool, and
    nothing new arrives), then SIGTERM every other service (last started first) and SIGKILL
    what is left after 10 s."""
    for svc in running:
        if svc.name == "syslog-ng":
            stop_one(svc, SYSLOGNG_STOP)
    running = [svc for svc in running if svc.name != "syslog-ng"]
    for svc in reversed(running):
        if svc.proc is not None and svc.proc.poll() is None:
            svc.proc.terminate()
    deadline = time.monotonic() + 10
    for svc in reversed(running):
        if svc.proc is None:
            continue
        try:
            svc.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log(f"{svc.name} did not stop in 10 s: killing it")
            svc.proc.kill()
            svc.proc.wait()
        log(f"stopped {svc.name}")


LOCK_NAME = ".make-run.lock"  # in the data directory: held by the make run that uses it


def lock_data(data: Path) -> int | str:
    """Takes the data directory for this process (flock on <data>/.make-run.lock, which holds
    our pid): the lock's fd, kept open while we run; or why not (another make run has it)."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        return (
            f"{data} is in use by another make run (pid {holder}): stop it (Ctrl-C in its "
            "terminal), or give this one another directory (LOGBOX_DATA=...)"
        )
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def main() -> int:
    """Start, supervise and stop the local appliance."""
    data = Path(os.environ.get("LOGBOX_DATA", TOP / "var")).resolve()
    try:
        held = lock_data(data)
    except OSError as e:
        log(f"data directory {data}: {e}")
        return 1
    if isinstance(held, str):
        log(held)
        return 1
    try:
        prepare(data)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        log(f"preparing {data}: {e}")
        return 1
    log(f"data directory {data}")
    log("the store is not encrypted (make run; the appliance encrypts it with LUKS2)")
    try:
        col = prepare_collector(data)
    except (collector.SettingsError, OSError, subprocess.CalledProcessError) as e:
        log(f"collector: {e}")
        return 1

    try:
        api = prepare_rpc(data)
    except subprocess.CalledProcessError as e:
        log(f"logbox-rpc: {' '.join(e.cmd)}: {(e.stderr or b'').decode(errors='replace')}")
        return 1
    except Exception as e:  # any other refusal: the files, LMDB, the admin password
        log(f"logbox-rpc: {getattr(e, 'message', None) or e}")
        return 1
    try:
        webui = prepare_webui(data, api)
    except OSError as e:
        log(f"logbox-webui: {e}")
        return 1
    nginx = prepare_nginx(data, api, webui)
    if nginx is not None and not Path(NGINX).exists():
        log(f"logbox-nginx: not installed ({NGINX}; make deps installs nginx-light)")

    if col is not None:
        got = raise_nofile(col.nofile)
        if got < col.nofile:
            log(
                f"open files limited to {got}: syslog-ng takes fewer than max_connections on "
                f"every TCP listener at once (all of them need {col.nofile})"
            )

    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        del signum, frame
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    running: list[Service] = []
    for svc in services(data, col, api, webui, nginx):
        if not svc.needs.exists():
            log(f"{svc.name}: {svc.needs} does not exist")
            if svc.name == "logbox-indexd" and col is not None:
                log(f"messages wait in the spool {col.spool} until it runs")
            continue
        start(svc)
        running.append(svc)
        log(f"started {svc.name} (pid {svc.proc.pid if svc.proc else '?'}): {svc.serves}")
    if not running:
        log("no daemon could start (make build); the CLI is at build/bin/logbox")
    log("press Ctrl-C to stop")
    verifier = Verifier(data, time.monotonic())
    reporter = Reporter(data, time.monotonic() + VERIFY_AFTER)

    while not stopping:
        time.sleep(0.2)
        verifier.poll(time.monotonic())
        reporter.poll(time.monotonic())
        for svc in running:
            if svc.proc is None or svc.proc.poll() is None:
                continue
            code = svc.proc.returncode
            end_group(svc.proc.pid)
            time.sleep(RESTART_DELAY)
            if stopping:
                break
            svc.restarts += 1
            start(svc)
            log(f"{svc.name} exited with {code}; restarted (restart #{svc.restarts})")
    verifier.stop()
    reporter.stop()
    stop_all(running)
    log("all stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
