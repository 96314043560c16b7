"""What the tests of the apps (logbox_rpc, logbox_webui) under Flask's test client set up again
and again: a short directory for sockets, a store ingested with its RFC 5424 timestamps as the
received times, a real searchd over it (or indexd, searchd and a stand-in syslog-ng: what the
status page reads), the app's configuration for that searchd and an accounts store with the usual
users. The test files keep their fixtures as thin wrappers of these."""

from __future__ import annotations

import contextlib
import datetime as dt
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lbtest.cli import Logbox
from lbtest.indexd import HeldFifo, Indexd
from lbtest.searchd import Searchd, searchd_binary

if TYPE_CHECKING:
    from flask import Flask
    from logbox_core.accounts import Accounts

PASSWORD = "correct horse battery"

# (name, role, logspaces): the admin and a searcher of main and other
USERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("admin", "admin", ()),
    ("alice", "searcher", ("main", "other")),
)


def rfc3339(s: int) -> str:
    """s (seconds since the epoch) as an RFC 3339 UTC time to the second."""
    return dt.datetime.fromtimestamp(s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextlib.contextmanager
def sockdir(prefix: str) -> Iterator[Path]:
    """A short directory under /tmp for sockets (sun_path holds 107 bytes), removed after."""
    d = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def ingest_received(store_cli: Path, data: Path, lines: bytes) -> Logbox:
    """`logbox ingest --received header` of lines into logspace main of data (asserting
    success); the Logbox of main."""
    lb = Logbox(store_cli, data)
    lb.check(lb.run("ingest", "--received", "header", "-", input=lines))
    return lb


@contextlib.contextmanager
def running_searchd(
    top: Path, data: Path, sock: Path, args: Iterable[str] = ()
) -> Iterator[Searchd]:
    """A real logbox-searchd over data on sock; it must exit 0 on SIGTERM afterwards."""
    with Searchd(searchd_binary(top), data, sock, list(args)) as d:
        yield d


@dataclass
class Services:
    """The daemons logbox_core.status looks at, running on one store: indexd with its held FIFO,
    searchd, and a stand-in syslog-ng (a live process named in a pid file)."""

    fifo: HeldFifo
    indexd: Indexd
    searchd: Searchd
    pidfile: Path


@contextlib.contextmanager
def running_services(
    top: Path, base: Path, data: Path, sock: Path, searchd_args: Iterable[str] = ()
) -> Iterator[Services]:
    """indexd (status file base/indexd.status.json, FIFO base/indexd.fifo), searchd on sock and
    the stand-in syslog-ng (pid file base/syslog-ng.pid, the names of status_files(base)) over
    data; afterwards searchd and indexd must exit 0 on SIGTERM."""
    fifo = HeldFifo(base / "indexd.fifo")
    indexd = Indexd(
        top / "build" / "bin" / "logbox-indexd", data, base / "indexd.status.json", fifo
    )
    indexd.start()
    sd = Searchd(searchd_binary(top), data, sock, list(searchd_args)).start()
    syslogng = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    pidfile = base / "syslog-ng.pid"
    pidfile.write_text(f"{syslogng.pid}\n")
    yield Services(fifo, indexd, sd, pidfile)
    syslogng.kill()
    syslogng.wait()
    assert sd.stop() == 0, sd.log()
    assert indexd.stop() == 0, indexd.stderr()[-2000:]
    fifo.close()


def app_config(searchd: Searchd, root: Path, **extra: Any) -> dict[str, Any]:
    """A TESTING app's configuration for searchd, with its accounts store under root."""
    return {
        "SEARCHD_SOCKET": str(searchd.sock),
        "ACCOUNTS_PATH": str(root / "accounts"),
        "DATA_DIR": str(searchd.data),
        **extra,
        "TESTING": True,
    }


def status_files(root: Path) -> dict[str, str]:
    """INDEXD_STATUS, SYSLOGNG_PIDFILE, the archive's settings and state under root (absent
    unless a test writes them)."""
    return {
        "INDEXD_STATUS": str(root / "indexd.status.json"),
        "SYSLOGNG_PIDFILE": str(root / "syslog-ng.pid"),
        "ARCHIVE_SETTINGS": str(root / "archive.json"),
        "SITES_SETTINGS": str(root / "sites.json"),
        "ARCHIVE_STATE": str(root / "archive-state"),
    }


def accounts_of(app: Flask) -> Accounts:
    """The app's accounts store (one LMDB environment per process)."""
    return app.extensions["logbox"].accounts


def add_users(
    app: Flask,
    users: Iterable[tuple[str, str, tuple[str, ...]]] = USERS,
    password: str = PASSWORD,
) -> Flask:
    """Adds users (name, role, logspaces) with password to the app's accounts store; the app."""
    acc = accounts_of(app)
    for name, role, logspaces in users:
        if role == "admin":
            acc.add_user(name, password, role)
        else:
            acc.add_user(name, password, role, logspaces)
    return app
