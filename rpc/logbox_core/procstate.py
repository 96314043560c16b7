"""Per-process singletons of an app (the accounts store, the searchd client), made on first use:
after gunicorn forks its workers, never in the master (LMDB handles must not cross a fork).
logbox_rpc.state and logbox_webui.state build on ProcState; each app's create_app keeps its
instance in app.extensions["logbox"], where the view accessors at the end of this file find it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from flask import current_app, g, has_app_context

from logbox_core.accounts import MAP_SIZE, Accounts, User
from logbox_core.searchd import Searchd, caller_name

_lock = threading.Lock()

T = TypeVar("T")


class ProcState:
    """An app's lazily made objects, per process (config: ACCOUNTS_PATH, SEARCHD_SOCKET,
    SEARCHD_TIMEOUT)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self._pid = os.getpid()
        self._accounts: Accounts | None = None
        self._searchd: Searchd | None = None

    def _forget(self) -> None:
        """Drops the objects made so far (a subclass drops its own too)."""
        self._accounts = None
        self._searchd = None

    def _check_fork(self) -> None:
        """Forgets objects made by another process (a fork after first use)."""
        if self._pid != os.getpid():
            self._forget()
            self._pid = os.getpid()

    def _once(self, attr: str, make: Callable[[], T]) -> T:
        """self.<attr>, made by make() under the lock the first time in this process."""
        self._check_fork()
        if getattr(self, attr) is None:
            with _lock:
                if getattr(self, attr) is None:
                    setattr(self, attr, make())
        return getattr(self, attr)

    @property
    def accounts(self) -> Accounts:
        """The accounts store of this process."""
        return self._once(
            "_accounts",
            lambda: Accounts(
                self.config["ACCOUNTS_PATH"],
                map_size=int(self.config.get("ACCOUNTS_MAP_SIZE", MAP_SIZE)),
            ),
        )

    @property
    def searchd(self) -> Searchd:
        """The searchd client of this process."""
        return self._once(
            "_searchd",
            lambda: Searchd(
                self.config["SEARCHD_SOCKET"], timeout=float(self.config["SEARCHD_TIMEOUT"])
            ),
        )

    def searchd_for(self, user: User | None) -> Searchd:
        """The searchd client asking as user (X-Logbox-Caller: user:<name>, so that searchd
        shares its workers fairly between users); as no caller when user is None."""
        client = self.searchd
        return client if user is None else client.as_caller(caller_name("user", user.name))


# ---------------------------------------------------------------- the current app's objects
# The one copy of the accessors both apps' views use (logbox_rpc.state, logbox_webui.state).


def state() -> ProcState:
    """The current app's ProcState (its app.extensions["logbox"])."""
    return current_app.extensions["logbox"]


def accounts() -> Accounts:
    """The current app's accounts store."""
    return state().accounts


def searchd() -> Searchd:
    """The current app's searchd client, asking as the signed-in user (X-Logbox-Caller:
    user:<name>, so that searchd shares its workers fairly between users); before sign-in,
    as no caller."""
    return state().searchd_for(getattr(g, "user", None) if has_app_context() else None)
