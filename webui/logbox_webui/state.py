"""Per-process singletons (the accounts store, the searchd client, the search thread pool), made
on first use: after gunicorn forks its workers, never in the master (LMDB handles and threads
must not cross a fork). The first two, and the accessors that find them in the current app, are
logbox_core.procstate's; state() here gives this app's State, with its pool."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from logbox_core import procstate
from logbox_core.procstate import ProcState, accounts, searchd

__all__ = ["State", "accounts", "searchd", "state"]

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
    return cast(State, procstate.state())
