"""Fixtures shared by the cross-folder suites."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from lbtest.apps import running_searchd
from lbtest.apps import sockdir as short_sockdir
from lbtest.cli import has_verb
from lbtest.indexd import HeldFifo, Indexd, reap_since, started_mark
from lbtest.searchd import Searchd

# the browser tests' `driver` (a screenshot and the page's HTML when a test fails) and the hook it
# reads the outcome from
from lbtest.webui import driver, driver_setup, pytest_runtest_makereport  # noqa: F401

TOP = Path(__file__).resolve().parent.parent
# The Python packages of rpc/ (logbox_core, logbox_rpc, logbox_client) and webui/ are imported
# from the checkout, as gunicorn runs them (PYTHONPATH).
for _d in (TOP / "rpc", TOP / "webui"):
    if str(_d) not in sys.path:
        sys.path.insert(0, str(_d))
STORE_VERBS = ("ingest", "cat", "lookup", "verify", "stats")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: takes more than a few seconds (deselect: -m 'not slow')"
    )


@pytest.fixture(autouse=True)
def _no_indexd_left() -> Iterator[None]:
    """A test that fails before stopping its indexd would leave it running into the next tests
    (holding its store and its CPU); it is killed here. Module fixtures start theirs before this
    runs, so theirs live on."""
    mark = started_mark()
    yield
    reap_since(mark)


@pytest.fixture(scope="session")
def top() -> Path:
    """The repository's top directory."""
    return TOP


@pytest.fixture(scope="session")
def bin_dir(top: Path) -> Path:
    """Where `make build` puts the programs."""
    return top / "build" / "bin"


def _need(binary: Path, verbs: tuple[str, ...]) -> Path:
    """binary, failing the test (never skipping it) when it is not built or lacks a verb."""
    if not binary.is_file():
        pytest.fail(f"{binary} is not built (make build)")
    missing = [v for v in verbs if not has_verb(binary, v)]
    if missing:
        pytest.fail(f"{binary} has no `{' '.join(missing)}` verb")
    return binary


@pytest.fixture(scope="session")
def logbox_bin(top: Path) -> Path:
    """The logbox CLI for functional tests: $LOGBOX_BIN, else the release build, else the ASan
    build. Fails when none is built."""
    if os.environ.get("LOGBOX_BIN"):
        return _need(Path(os.environ["LOGBOX_BIN"]), ())
    for p in (top / "build" / "bin" / "logbox", top / "build" / "asan" / "logbox"):
        if p.is_file():
            return p
    pytest.fail("no logbox binary under build/ (make build)")


@pytest.fixture(scope="session")
def logbox_asan(top: Path) -> Path:
    """The ASan+UBSan build of the CLI ($LOGBOX_ASAN_BIN, else build/asan/logbox)."""
    return _need(Path(os.environ.get("LOGBOX_ASAN_BIN", top / "build" / "asan" / "logbox")), ())


@pytest.fixture(scope="session")
def store_cli(logbox_bin: Path) -> Path:
    """logbox_bin with the store verbs (indexer/cli/README.md)."""
    return _need(logbox_bin, STORE_VERBS)


@pytest.fixture(scope="session")
def store_cli_asan(logbox_asan: Path) -> Path:
    """logbox_asan with the store verbs."""
    return _need(logbox_asan, STORE_VERBS)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """An empty data directory for one test's store."""
    data = tmp_path / "data"
    data.mkdir()
    return data


@pytest.fixture(scope="session")
def indexd_bin(top: Path) -> Path:
    """$LOGBOX_INDEXD_BIN (e.g. a sanitizer build), else build/bin/logbox-indexd."""
    p = Path(os.environ.get("LOGBOX_INDEXD_BIN", top / "build" / "bin" / "logbox-indexd"))
    if not p.is_file():
        pytest.fail(f"{p} is not built (make build)")
    return p


@pytest.fixture(scope="module")
def sockdir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A short directory under /tmp for one test module's sockets (sun_path holds 107 bytes),
    named after the module, removed after it."""
    with short_sockdir(request.module.__name__.removeprefix("test_") + "-") as d:
        yield d


@pytest.fixture(scope="module")
def searchd(data: Path, top: Path, sockdir: Path) -> Iterator[Searchd]:
    """A real logbox-searchd (2 threads) over the module's own `data` store, on sockdir/sd.sock;
    it must exit 0 on SIGTERM afterwards. A module without a `data` fixture defines its own."""
    with running_searchd(top, data, sockdir / "sd.sock", ["--threads", "2"]) as d:
        yield d


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[HeldFifo]:
    """A FIFO held open the way the supervisor holds it (lbtest/indexd.py), closed at the end."""
    f = HeldFifo(tmp_path / "indexd.fifo")
    yield f
    f.close()


@pytest.fixture
def indexd(indexd_bin: Path, tmp_path: Path, fifo: HeldFifo) -> Iterator[Indexd]:
    """indexd on tmp_path/data with the held FIFO as fd 3 and a --listen socket
    (tmp_path/indexd.sock), started; killed at the end if still running."""
    d = Indexd(
        indexd_bin,
        tmp_path / "data",
        tmp_path / "status.json",
        fifo=fifo,
        args=["--listen", str(tmp_path / "indexd.sock")],
    )
    d.start()
    yield d
    if d.proc is not None and d.proc.poll() is None:
        d.kill()


@pytest.fixture
def spool_indexd(indexd_bin: Path, tmp_path: Path) -> Iterator[Indexd]:
    """indexd on tmp_path/data reading its spool, tmp_path/data/spool (made, empty), with the
    status file tmp_path/status.json; not started (a test may write spool files first), killed
    at the end if still running."""
    (tmp_path / "data" / "spool").mkdir(parents=True)
    d = Indexd(indexd_bin, tmp_path / "data", tmp_path / "status.json")
    yield d
    if d.proc is not None and d.proc.poll() is None:
        d.kill()
