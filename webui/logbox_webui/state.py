"""Per-process singletons (the accounts store, the searchd client, the search thread pool), made
on first use: after gunicorn forks its workers, never in the master (LMDB handles and threads
must not cross a fork). The first two are logbox_core.procstate's."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from flask import current_app, g, has_app_context
from logbox_core.accounts import Accounts
from logbox_core.procstate import ProcState
from logbox_core.searchd import Searchd

POOL_THREADS = 8  # searchd calls of one search page run side by side (results, histogram, tops)


class State(ProcState):
    """The app's lazily made objects, per process."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self._pool: ThreadPoolExecutor | None = None

    def _forget(self) -> None:
        """Drops the objects made so far, the thread pool too."""
        super()._forget()
        self._pool = None

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The thread pool of this process that runs a page's searchd calls concurrently."""
        return self._once(
            "_pool", lambda: ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="searchd")
        )


def state() -> State:
    """The current app's State."""
    return current_app.extensions["logbox"]


def accounts() -> Accounts:
    """The current app's accounts store."""
    return state().accounts


def searchd() -> Searchd:
    """The current app's searchd client, asking as the signed-in user (X-Logbox-Caller:
    user:<name>, so that searchd shares its workers fairly between users); before sign-in,
    as no caller."""
    return state().searchd_for(getattr(g, "user", None) if has_app_context() else None)
