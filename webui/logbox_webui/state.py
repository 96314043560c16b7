"""Per-process singletons (the accounts store, the searchd client, the search thread pool), made
on first use: after gunicorn forks its workers, never in the master (LMDB handles and threads
must not cross a fork)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from flask import current_app
from logbox_core.accounts import Accounts
from logbox_core.searchd import Searchd

_lock = threading.Lock()

POOL_THREADS = 8  # searchd calls of one search page run side by side (results, histogram, tops)


class State:
    """The app's lazily made objects, per process."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self._pid = os.getpid()
        self._accounts: Accounts | None = None
        self._searchd: Searchd | None = None
        self._pool: ThreadPoolExecutor | None = None

    def _check_fork(self) -> None:
        """Forgets objects made by another process (a fork after first use)."""
        if self._pid != os.getpid():
            self._accounts = None
            self._searchd = None
            self._pool = None
            self._pid = os.getpid()

    @property
    def accounts(self) -> Accounts:
        """The accounts store of this process."""
        self._check_fork()
        if self._accounts is None:
            with _lock:
                if self._accounts is None:
                    self._accounts = Accounts(self.config["ACCOUNTS_PATH"])
        return self._accounts

    @property
    def searchd(self) -> Searchd:
        """The searchd client of this process."""
        self._check_fork()
        if self._searchd is None:
            with _lock:
                if self._searchd is None:
                    self._searchd = Searchd(
                        self.config["SEARCHD_SOCKET"], timeout=float(self.config["SEARCHD_TIMEOUT"])
                    )
        return self._searchd

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The thread pool of this process that runs a page's searchd calls concurrently."""
        self._check_fork()
        if self._pool is None:
            with _lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="searchd")
        return self._pool


def state() -> State:
    """The current app's State."""
    return current_app.extensions["logbox"]


def accounts() -> Accounts:
    """The current app's accounts store."""
    return state().accounts


def searchd() -> Searchd:
    """The current app's searchd client."""
    return state().searchd
