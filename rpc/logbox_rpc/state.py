"""Per-process singletons (the accounts store, the searchd client), made on first use: after
gunicorn forks its workers, never in the master (LMDB handles must not cross a fork). The
objects are logbox_core.procstate's; this module finds them in the current app."""

from __future__ import annotations

from flask import current_app, g, has_app_context
from logbox_core.accounts import Accounts
from logbox_core.procstate import ProcState
from logbox_core.searchd import Searchd


class State(ProcState):
    """The app's lazily made objects, per process."""


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
