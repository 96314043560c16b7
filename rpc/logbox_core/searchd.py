"""The one client of logbox-searchd (indexer/PROTOCOL.md): HTTP/1.1 GETs over its unix socket.

One kept-alive connection per thread (and per process: a forked child opens its own), reused
for every request of that thread. A reused connection that searchd closed meanwhile (its 60 s
idle close, a restart) is noticed when the request is sent or its status line read, and the
request is sent once more on a new connection (GETs are idempotent). Every failure is one
exception type, SearchdError, carrying the HTTP status and error code the API answers with.

searchd shares its workers fairly between callers (indexer/PROTOCOL.md §2.2): each request may
say who asks in X-Logbox-Caller. The apps ask through as_caller("user:<name>"), a view of the
same client (same connections) that sends that header; requests without it are one caller.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import struct
import threading
import urllib.parse
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

Params = Sequence[tuple[str, str]] | Mapping[str, str]

CALLER_HEADER = "X-Logbox-Caller"
# searchd's rule for the header's value (PROTOCOL.md §2.2); a name outside it is cut to it.
CALLER_MAX = 128
_CALLER_BAD = re.compile(r"[^A-Za-z0-9_.:@-]")

# Failures that mean "the peer closed this kept-alive connection before our request reached it".
# RemoteDisconnected is a ConnectionResetError; BadStatusLine covers an empty status line.
_STALE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, http.client.BadStatusLine)


class SearchdError(Exception):
    """A request to searchd failed: the status and error code to answer with, and why."""

    status: int
    code: str
    message: str
    position: int | None
    retry_after: int | None  # seconds, from searchd's Retry-After (429, a busy 503)

    def __init__(self, status: int, code: str, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.position = position
        self.retry_after = None

    def to_json(self) -> dict:
        """The error shape of API.md §3: {"error": {"code", "message"[, "position"]}}."""
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.position is not None:
            err["position"] = self.position
        return {"error": err}

    def __repr__(self) -> str:
        return f"SearchdError({self.status}, {self.code!r}, {self.message!r}, {self.position!r})"


class _UnixConnection(http.client.HTTPConnection):
    """http.client over a unix stream socket (Host: searchd)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("searchd", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        """Opens the unix socket (raises OSError when it is missing or refuses)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self.unix_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class _Holder:
    """Lives in a thread's local data; its finalizer closes the thread's connection."""


def _reset_in_child(ref: weakref.ref[Searchd]) -> None:
    """os.fork's after_in_child hook: the child's client starts with no connection."""
    client = ref()
    if client is not None:
        client._reset(os.getpid())


def _encode(params: Params) -> str:
    """params form-urlencoded; str values may carry non-UTF-8 bytes as \\udcXX (surrogateescape)."""
    items = params.items() if isinstance(params, Mapping) else params
    return urllib.parse.urlencode(list(items), encoding="utf-8", errors="surrogateescape")


def _why(e: BaseException, path: str, timeout: float) -> str:
    """A short human reason for a connection failure."""
    if isinstance(e, FileNotFoundError):
        return f"no socket at {path} (is logbox-searchd running?)"
    if isinstance(e, ConnectionRefusedError):
        return f"connection refused on {path} (is logbox-searchd running?)"
    if isinstance(e, TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(e, _STALE):
        return "searchd closed the connection"
    if isinstance(e, http.client.HTTPException):
        return f"bad HTTP answer ({type(e).__name__}: {e})"
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def caller_name(kind: str, name: str) -> str:
    """The X-Logbox-Caller value for a caller kind ("user", "token") and name: bytes searchd does
    not accept become "_", and the whole is cut to CALLER_MAX bytes."""
    return _CALLER_BAD.sub("_", f"{kind}:{name}")[:CALLER_MAX]


def _error_from(status: int, body: bytes, retry_after: str | None = None) -> SearchdError:
    """The SearchdError for a non-200 answer: searchd's own {"error": ...} when it sent one."""
    if status == 413:
        return SearchdError(502, "internal", "searchd refused the request as too large (413)")
    try:
        err = json.loads(body)["error"]
        code, message = err["code"], err["message"]
        position = err.get("position")
        if not isinstance(code, str) or not isinstance(message, str):
            raise TypeError("code and message are not strings")
        if position is not None and not isinstance(position, int):
            raise TypeError("position is not an integer")
    except (ValueError, TypeError, KeyError) as e:
        snippet = body[:200].decode("utf-8", "replace")
        if status == 503:
            return SearchdError(503, "unavailable", f"searchd unavailable: 503 {snippet!r}")
        return SearchdError(
            502,
            "internal",
            f"searchd answered {status} without an error object ({e}): {snippet!r}",
        )
    err = SearchdError(status, code, message, position)
    if retry_after is not None and retry_after.isdigit():
        err.retry_after = int(retry_after)
    return err


def _exists(pid: int) -> bool:
    """Whether a process pid exists (also one of another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Searchd:
    """A thread-safe client of one searchd socket; cheap to share across threads."""

    def __init__(self, socket_path: str | os.PathLike[str], timeout: float = 60.0) -> None:
        self.socket_path = os.fspath(socket_path)
        self.timeout = float(timeout)
        self._local = threading.local()
        self._lock = threading.Lock()
        # Every connection, for close(); a thread's connection goes with the thread.
        self._conns: weakref.WeakSet[_UnixConnection] = weakref.WeakSet()
        self._pid = os.getpid()
        self.connects = 0  # connections opened by this process (tests, diagnostics)
        # A forked child starts afresh before any of its threads runs (the getpid() check in
        # _conn covers forks that bypass os.fork's hooks).
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _reset_in_child(ref))

    # ------------------------------------------------------------ connections

    def _conn(self) -> _UnixConnection:
        """This thread's connection (a new one in a forked child: nothing is shared)."""
        pid = os.getpid()
        if pid != self._pid:
            self._after_fork(pid)
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = _UnixConnection(self.socket_path, self.timeout)
            self._local.conn = conn
            # Closed when the thread ends (its thread-local data, with this holder, goes away).
            holder = _Holder()
            weakref.finalize(holder, conn.close)
            self._local.holder = holder
            with self._lock:
                self._conns.add(conn)
        return conn

    def _after_fork(self, pid: int) -> None:
        """Drops the parent's connections in a forked child (closing only the child's fds)."""
        with self._lock:
            if pid != self._pid:
                self._reset(pid)

    def _reset(self, pid: int) -> None:
        """Forgets (and closes this process's copy of) every connection; new lock and pid."""
        for c in list(self._conns):
            c.close()
        self._conns = weakref.WeakSet()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._pid = pid
        self.connects = 0

    def _drop(self, conn: _UnixConnection) -> None:
        """Closes conn and forgets it (this thread's next request opens a new one)."""
        conn.close()
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
        with self._lock:
            self._conns.discard(conn)

    def _exchange(
        self, conn: _UnixConnection, target: str, caller: str | None
    ) -> tuple[int, bytes, str | None]:
        """Sends GET target (as caller) and reads the whole answer on conn (opening it when
        needed): status, body and Retry-After."""
        if conn.sock is None:
            conn.connect()
            with self._lock:
                self.connects += 1
        conn.putrequest("GET", target, skip_accept_encoding=True)
        if caller is not None:
            conn.putheader(CALLER_HEADER, caller)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, r.read(), r.getheader("Retry-After")

    # ------------------------------------------------------------ requests

    def as_caller(self, caller: str) -> Searchd:
        """This client as seen by one caller: its requests carry X-Logbox-Caller: caller
        (make the value with caller_name()). Cheap; it shares this client's connections."""
        return CallerSearchd(self, caller)

    def get_raw(self, path: str, params: Params = (), caller: str | None = None) -> bytes:
        """GET path?params; the body of a 200 answer, unchanged.

        :param caller: the X-Logbox-Caller value, or None to send none.
        :raises SearchdError: searchd's error for any other status (with retry_after from a
            429's Retry-After); 503 unavailable when it cannot be reached, refuses, times out
            or breaks the connection.
        """
        target = path + "?" + _encode(params) if params else path
        conn = self._conn()
        reused = conn.sock is not None
        try:
            try:
                status, body, retry = self._exchange(conn, target, caller)
            except _STALE:
                if not reused:
                    raise
                # searchd closed the idle connection (or restarted): once more on a new one.
                self._drop(conn)
                conn = self._conn()
                status, body, retry = self._exchange(conn, target, caller)
        except (OSError, http.client.HTTPException) as e:
            self._drop(conn)
            raise SearchdError(
                503,
                "unavailable",
                f"searchd unavailable: {_why(e, self.socket_path, self.timeout)}",
            ) from e
        except BaseException:
            self._drop(conn)  # the connection's state is unknown
            raise
        if status == 200:
            return body
        raise _error_from(status, body, retry)

    def get(self, path: str, params: Params = (), caller: str | None = None) -> dict:
        """GET path?params, the JSON object of a 200 answer.

        :raises SearchdError: as get_raw; 502 internal when the 200 body is not a JSON object.
        """
        body = self.get_raw(path, params, caller)
        try:
            obj = json.loads(body)
        except ValueError as e:
            raise SearchdError(
                502, "internal", f"searchd answered 200 with a body that is not JSON ({e})"
            ) from e
        if not isinstance(obj, dict):
            raise SearchdError(502, "internal", "searchd answered 200 with JSON that is no object")
        return obj

    def stream(
        self, path: str, params: Params = (), caller: str | None = None, timeout: float = 30.0
    ) -> Stream:
        """GET path?params on a connection of its own, answered by a stream (searchd's
        /v1/tail): checks the status at once (raising searchd's error as get_raw does), then
        returns an iterator of its lines (each ending with LF). Closing the iterator (or
        dropping it) closes the connection, which ends the stream in searchd.

        :param timeout: the longest wait for a line (searchd sends one at least every 5 s).
        """
        target = path + "?" + _encode(params) if params else path
        conn = _UnixConnection(self.socket_path, timeout)
        try:
            conn.connect()
            conn.putrequest("GET", target, skip_accept_encoding=True)
            if caller is not None:
                conn.putheader(CALLER_HEADER, caller)
            conn.endheaders()
            r = conn.getresponse()
            if r.status != 200:
                body = r.read()
                raise _error_from(r.status, body, r.getheader("Retry-After"))
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise SearchdError(
                503, "unavailable", f"searchd unavailable: {_why(e, self.socket_path, timeout)}"
            ) from e
        except BaseException:
            conn.close()
            raise
        return Stream(conn, r)

    def health(self) -> bool:
        """Whether GET /health answers 200."""
        try:
            self.get_raw("/health")
        except SearchdError:
            return False
        return True

    def peer_pid(self) -> int | None:
        """The pid of the process listening on the socket (SO_PEERCRED: searchd's, as the
        kernel knows it), asked on this thread's kept-alive connection; None when it cannot
        be reached. A connection to a searchd that has since exited (its pid is gone) is
        dropped and the question asked once more on a new one."""
        for _ in range(2):
            conn = self._conn()
            try:
                if conn.sock is None:
                    conn.connect()
                    with self._lock:
                        self.connects += 1
                cred = conn.sock.getsockopt(
                    socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
                )
            except OSError:
                self._drop(conn)
                return None
            pid = struct.unpack("3i", cred)[0]
            if pid > 0 and _exists(pid):
                return pid
            self._drop(conn)
        return None

    def logspaces(self) -> list[dict]:
        """GET /v1/logspaces: [{"name", "first_id", "next_id", "messages", "delimiters"}] in
        name order."""
        obj = self.get("/v1/logspaces")
        spaces = obj.get("logspaces")
        if not isinstance(spaces, list):
            raise SearchdError(502, "internal", "searchd's /v1/logspaces answer has no list")
        return spaces

    def close(self) -> None:
        """Closes every connection of this client (a later request opens a new one)."""
        with self._lock:
            conns, self._conns = list(self._conns), weakref.WeakSet()
        for c in conns:
            c.close()
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"Searchd({self.socket_path!r}, timeout={self.timeout:g})"


class Stream:
    """The lines of a stream's answer (Searchd.stream), each ending with LF, until it ends;
    close() (idempotent; also at the end and on an error) closes its connection."""

    def __init__(self, conn: _UnixConnection, r: http.client.HTTPResponse) -> None:
        self._conn: _UnixConnection | None = conn
        self._r = r

    def __iter__(self) -> Stream:
        return self

    def __next__(self) -> bytes:
        if self._conn is None:
            raise StopIteration
        try:
            line = self._r.readline(1 << 20)
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise SearchdError(503, "unavailable", f"searchd stream broke: {_why(e, '', 0)}") from e
        if not line:
            self.close()
            raise StopIteration
        return line

    def set_timeout(self, seconds: float) -> None:
        """The longest wait for the next line from now on."""
        if self._conn is not None and self._conn.sock is not None:
            self._conn.sock.settimeout(max(seconds, 0.001))

    def close(self) -> None:
        """Closes the connection (searchd ends the stream)."""
        if self._conn is not None:
            self._r.close()
            self._conn.close()
            self._conn = None


class CallerSearchd(Searchd):
    """A Searchd as seen by one caller (Searchd.as_caller): every request says who asks; the
    connections are the underlying client's."""

    def __init__(self, client: Searchd, caller: str) -> None:
        # Not Searchd.__init__: the state (connections, lock, fork hook) is the client's.
        self.client = client
        self.caller = caller
        self.socket_path = client.socket_path
        self.timeout = client.timeout

    def get_raw(self, path: str, params: Params = (), caller: str | None = None) -> bytes:
        """The client's get_raw as this caller (or as caller when given)."""
        return self.client.get_raw(path, params, caller or self.caller)

    @property
    def connects(self) -> int:  # type: ignore[override]
        """Connections the underlying client opened."""
        return self.client.connects

    def peer_pid(self) -> int | None:
        """The underlying client's peer_pid (its connection of this thread)."""
        return self.client.peer_pid()

    def stream(
        self, path: str, params: Params = (), caller: str | None = None, timeout: float = 30.0
    ) -> Stream:
        """The client's stream as this caller (or as caller when given)."""
        return self.client.stream(path, params, caller or self.caller, timeout)

    def as_caller(self, caller: str) -> Searchd:
        """The underlying client as another caller."""
        return self.client.as_caller(caller)

    def close(self) -> None:
        """Closes the underlying client's connections."""
        self.client.close()

    def __repr__(self) -> str:
        return f"{self.client!r}.as_caller({self.caller!r})"
