"""Live tail for the apps (rpc/API.md §5.1, webui/UI.md "Live tail"): a stream of searchd's
GET /v1/tail (indexer/PROTOCOL.md §4.9) held by one app thread, and the bound on how many
such threads a user and a process may hold.

The one idea: a tail holds a gunicorn thread (gthread workers, LOGBOX_*_THREADS, 8 by default)
for as long as it runs, so a process lets at most PER_PROCESS of them run, and one user at most
PER_USER; beyond that a new tail is refused with 429 (searchd bounds them too: 4 per caller,
64 in all). A TailStream gives its slot back when it is closed (the WSGI server closes the
answer's iterable when the client went away or the stream ended) or collected.
"""

from __future__ import annotations

import json
import threading
import time

from logbox_core.searchd import Searchd, SearchdError, Stream

PER_USER = 2  # tails of one user in one app process
PER_PROCESS = 4  # tails in one app process (of its 8 threads by default)
LINE_TIMEOUT_S = 30.0  # searchd sends a line at least every 5 s


class TailBusy(Exception):
    """Too many tails open (429): message says which bound."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


_lock = threading.Lock()
_per_user: dict[str, int] = {}
_total = 0


def _acquire(user: str) -> None:
    global _total
    with _lock:
        if _per_user.get(user, 0) >= PER_USER:
            raise TailBusy(f"{user} has {PER_USER} live tails open here already: close one first")
        if _total >= PER_PROCESS:
            raise TailBusy(f"{PER_PROCESS} live tails are open already: retry later")
        _per_user[user] = _per_user.get(user, 0) + 1
        _total += 1


def _release(user: str) -> None:
    global _total
    with _lock:
        n = _per_user.get(user, 0) - 1
        if n > 0:
            _per_user[user] = n
        else:
            _per_user.pop(user, None)
        _total -= 1


def open_count() -> int:
    """Tails open in this process (tests, diagnostics)."""
    with _lock:
        return _total


class TailStream:
    """searchd's NDJSON lines of one tail; iterate it, then close it (idempotent). With
    seconds, it ends (cleanly) that long after it started. When searchd's stream breaks, the
    last line is {"error": {...}}."""

    def __init__(self, lines: Stream, user: str, seconds: int | None = None) -> None:
        self._lines = lines
        self._user: str | None = user
        self._end = time.monotonic() + seconds if seconds is not None else None

    def __iter__(self) -> TailStream:
        return self

    def __next__(self) -> bytes:
        if self._user is None:
            raise StopIteration
        if self._end is not None:
            left = self._end - time.monotonic()
            if left <= 0:
                self.close()
                raise StopIteration
            self._lines.set_timeout(min(left, LINE_TIMEOUT_S))
        try:
            return next(self._lines)
        except StopIteration:
            self.close()
            raise
        except SearchdError as e:
            self.close()
            if self._end is not None and time.monotonic() >= self._end:
                raise StopIteration from None
            return json.dumps(e.to_json()).encode() + b"\n"

    def close(self) -> None:
        """Ends the stream in searchd and gives the slot back."""
        if self._user is None:
            return
        user, self._user = self._user, None
        try:
            self._lines.close()
        finally:
            _release(user)

    def __del__(self) -> None:
        self.close()


def open_tail(
    client: Searchd,
    user: str,
    logspace: str,
    q: str,
    after: int | None = None,
    limit: int = 100,
    seconds: int | None = None,
) -> TailStream:
    """A started tail of q in logspace for user (rights are the caller's to check).

    :raises TailBusy: user or this process has too many tails open.
    :raises SearchdError: searchd refused (bad query, no logspace, its own limits: 429/503).
    """
    _acquire(user)
    params = [("logspace", logspace), ("q", q), ("limit", str(limit))]
    if after is not None:
        params.append(("after", str(after)))
    try:
        lines = client.stream("/v1/tail", params, timeout=LINE_TIMEOUT_S)
    except BaseException:
        _release(user)
        raise
    return TailStream(lines, user, seconds)


__all__ = ["PER_PROCESS", "PER_USER", "SearchdError", "TailBusy", "TailStream", "open_tail"]
