"""Polling until a condition holds: the one loop every suite and helper waits with.

Owns the deadline, the pause between tries and the failure message; what is awaited, what
counts as a failure before the deadline (a daemon that died) and what the message shows
beside the timeout (a log's tail, the last value seen) are the caller's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    cond: Callable[[], T],
    what: str,
    timeout: float = 30,
    *,
    interval: float = 0.02,
    check: Callable[[], object] | None = None,
    detail: Callable[[], str] | None = None,
    ignore: tuple[type[Exception], ...] = (),
) -> T:
    """Calls cond() every interval seconds until it returns something true; returns that.

    :param what: the awaited state, as it reads after "waiting until" ("searchd answers
        /health"): the failure message is "timed out after N s waiting until <what>".
    :param check: called after every false try; raises to fail early (a process exited).
    :param detail: called once at the timeout; its text follows the message on new lines
        (a log's tail, the value last seen).
    :param ignore: exceptions cond() may raise that count as "not yet" (a refused
        connection); the last one is named in the message and chained to the error.
    :raises AssertionError: at the timeout.
    """
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            got = cond()
            if got:
                return got
        except ignore as e:
            last = e
        if check is not None:
            check()
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout} s waiting until {what}"
            if last is not None:
                msg += f" (last: {last!r})"
            if detail is not None:
                msg += "\n" + detail()
            raise AssertionError(msg) from last
        time.sleep(interval)
