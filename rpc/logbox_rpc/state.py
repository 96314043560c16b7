"""Per-process singletons (the accounts store, the searchd client), made on first use: after
gunicorn forks its workers, never in the master (LMDB handles must not cross a fork). The
objects and the accessors that find them in the current app are logbox_core.procstate's."""

from __future__ import annotations

from logbox_core.procstate import ProcState, accounts, searchd, state

__all__ = ["State", "accounts", "searchd", "state"]


class State(ProcState):
    """The app's lazily made objects, per process."""
