"""Client, Export and LogboxError: the logbox RPC API (rpc/API.md) as Python calls.

One method per API call. Every failure is a LogboxError: a non-2xx answer carries the API's
`{"error": {...}}` (or, when the body is not the API's, e.g. a proxy's page, a message saying
so); no answer at all (refused, TLS, time-out, a broken stream) is status 0, code
`unavailable`. Query texts may be `str` (bytes that are not UTF-8 as `\\udcXX`, the way the API
returns them) or `bytes`.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import re
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any, Self

import requests

API_PREFIX = "/api/v1"
CHUNK = 64 * 1024  # bytes read at a time from an export stream
_TAIL = 64 * 1024  # of an export's record, what is kept to tell a warning or error from a row
_SEVERAL = re.compile(r"\s+")
_TAG = re.compile(r"<[^>]*>")

# A code for a non-2xx answer whose body is not the API's error (a proxy in the way): the API's
# own table (logbox_rpc/errors.py STATUS_CODES, restated since this package depends on nothing
# of logbox; tests/test_error_codes_pinned.py keeps the two equal) and a gateway's 502 and 504.
_STATUS_CODES = {
    400: "bad_parameter",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "too_broad",
    429: "locked_out",
    500: "internal",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
    507: "insufficient_storage",
}

Time = str | int | float | dt.datetime


class LogboxError(Exception):
    """A failed call: HTTP status (0: no answer), the API's error code and message, and for
    `bad_query` the byte offset in the query (`position`)."""

    def __init__(self, status: int, code: str, message: str, position: int | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.position = position

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles with its four members (multiprocessing, logging handlers)."""
        return (type(self), (self.status, self.code, self.message, self.position))


def _why(exc: BaseException, timeout: float) -> str:
    """The innermost reason of a requests/urllib3 failure, without the pool's boilerplate."""
    if isinstance(exc, requests.Timeout):
        return f"no answer within {timeout:g} s"
    tls = isinstance(exc, requests.exceptions.SSLError)
    e: BaseException = exc
    for _ in range(8):
        nxt = getattr(e, "reason", None)
        if not isinstance(nxt, BaseException) and e.args and isinstance(e.args[0], BaseException):
            nxt = e.args[0]
        if not isinstance(nxt, BaseException) or nxt is e:
            break
        e = nxt
    text = str(e) or type(e).__name__
    # "<urllib3.connection.HTTPSConnection object at 0x...>: " (urllib3 1), "HTTPSConnection(
    # host='h', port=1): " (urllib3 2), then "Failed to establish a new connection: [Errno 111] "
    text = re.sub(r"^(<[^>]*>|\w+\(host=[^)]*\)): ", "", text)
    text = re.sub(r"^Failed to establish a new connection: ", "", text)
    text = re.sub(r"^\[Errno -?\d+\] ", "", text)
    text = re.sub(r" \(_ssl\.c:\d+\)", "", text)
    return f"TLS: {text}" if tls else text


def _time(value: Time) -> str:
    """A from/to value as the API takes it (datetimes and floats as RFC 3339, naive = UTC)."""
    if isinstance(value, bool):
        raise TypeError("a time cannot be a bool")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        value = dt.datetime.fromtimestamp(value, dt.UTC)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return str(value)


def _query(q: str | bytes) -> bytes:
    """q as the bytes to send (surrogate escapes back to the bytes they stand for)."""
    return q if isinstance(q, bytes) else q.encode("utf-8", "surrogateescape")


def _range(
    q: str | bytes, from_: Time | None, to: Time | None, time: str | None = None
) -> dict[str, Any]:
    """The q, from and to parameters (from/to only when given), and the time basis (`received`
    or `event`: API.md §5, searchd's `time`) when given."""
    params: dict[str, Any] = {"q": _query(q)}
    if from_ is not None:
        params["from"] = _time(from_)
    if to is not None:
        params["to"] = _time(to)
    if time is not None:
        params["time"] = time
    return params


def _quote(segment: str | int) -> str:
    """One path segment, percent-encoded."""
    return urllib.parse.quote(str(segment), safe="")


def _snippet(body: bytes, html: bool = False, limit: int = 200) -> str:
    """The start of a body for a message: decoded, tags dropped (html), whitespace collapsed,
    cut."""
    text = body[: limit * 8].decode("utf-8", "replace")
    if html:
        text = _TAG.sub(" ", text)
    text = _SEVERAL.sub(" ", text).strip()
    return text[:limit] + ("..." if len(text) > limit else "") if text else "(empty body)"


class _Closing:
    """`with` for Client and Export: the block's end calls close()."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Releases what the object holds (each class says what)."""
        raise NotImplementedError


class Client(_Closing):
    """The logbox RPC API at `url` ("https://host:port"; the /api/v1 prefix is added).

    :param token: a session or API token (`login` sets one).
    :param verify: a CA file (the appliance's self-signed `https.crt`), True for the system
        CAs, False to skip verification.
    :param timeout: seconds to wait for a connection and for each read.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        verify: bool | str = True,
        timeout: float = 60.0,
    ) -> None:
        base = url.rstrip("/")
        if not base.endswith(API_PREFIX):
            base += API_PREFIX
        self.url = url.rstrip("/")
        self.base = base
        self.token = token
        self.timeout = timeout
        self.verify = verify
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "logbox-client/1"

    def close(self) -> None:
        """Closes the connections (the token stays valid: see logout)."""
        self.session.close()

    # ------------------------------------------------------------ plumbing

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        stream: bool = False,
    ) -> requests.Response:
        """One call to base + path; returns the 2xx response.

        :raises LogboxError: for any other status, or when no answer came.
        """
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            r = self.session.request(
                method,
                self.base + path,
                params=params,
                json=body,
                headers=headers,
                timeout=self.timeout,
                stream=stream,
                # Per request: a session's verify loses to REQUESTS_CA_BUNDLE (requests #3829).
                verify=self.verify,
            )
        except requests.RequestException as e:
            raise LogboxError(0, "unavailable", f"{self.url}: {_why(e, self.timeout)}") from e
        if 200 <= r.status_code < 300:
            return r
        try:
            raise self._error(r, path)
        finally:
            r.close()

    def _error(self, r: requests.Response, path: str) -> LogboxError:
        """The LogboxError of a non-2xx answer."""
        try:
            body = r.content
        except requests.RequestException as e:
            body = f"(body unreadable: {_why(e, self.timeout)})".encode()
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict) and isinstance(err.get("code"), str):
            pos = err.get("position")
            return LogboxError(
                r.status_code,
                err["code"],
                str(err.get("message", "")),
                pos if isinstance(pos, int) and not isinstance(pos, bool) else None,
            )
        ctype = r.headers.get("Content-Type", "no content type")
        return LogboxError(
            r.status_code,
            _STATUS_CODES.get(r.status_code, "http_error"),
            f"{self.base}{path}: HTTP {r.status_code} {r.reason or ''}".rstrip()
            + f", not an answer of the logbox API ({ctype}): {_snippet(body, 'html' in ctype)}",
        )

    def call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> dict[str, Any]:
        """One call whose answer is a JSON object; returns it.

        :raises LogboxError: on failure, or (code `bad_response`) when the answer is not one.
        """
        r = self.request(method, path, params=params, body=body)
        try:
            doc = json.loads(r.content)
        except ValueError as e:
            raise LogboxError(
                r.status_code,
                "bad_response",
                f"{self.base}{path}: the answer is not JSON: {_snippet(r.content)}",
            ) from e
        if not isinstance(doc, dict):
            raise LogboxError(
                r.status_code, "bad_response", f"{self.base}{path}: the answer is not an object"
            )
        return doc

    @staticmethod
    def _member(doc: dict[str, Any], name: str) -> Any:
        """doc[name], or a LogboxError (bad_response) when the API left it out."""
        if name not in doc:
            raise LogboxError(200, "bad_response", f"the answer has no {name!r}: {doc!r:.200}")
        return doc[name]

    # ------------------------------------------------------------ authentication

    def login(self, username: str, password: str) -> str:
        """Logs in (POST /login); stores and returns the session token."""
        doc = self.call("POST", "/login", body={"username": username, "password": password})
        token = self._member(doc, "token")
        self.token = str(token)
        return self.token

    def logout(self) -> None:
        """Revokes the token in use (POST /logout) and forgets it; nothing when there is none
        or it is no longer valid (401)."""
        if not self.token:
            return
        try:
            self.call("POST", "/logout")
        except LogboxError as e:
            if e.status != 401:
                raise
        self.token = None

    def me(self) -> dict[str, Any]:
        """The caller: {"user": User, "token": Token} (GET /me)."""
        return self.call("GET", "/me")

    # ------------------------------------------------------------ search

    def logspaces(self) -> list[dict[str, Any]]:
        """The logspaces the caller may read: [{"name", "first_id", "next_id", "messages"}]."""
        return list(self._member(self.call("GET", "/logspaces"), "logspaces"))

    def _ls(self, logspace: str, what: str) -> str:
        return f"/logspaces/{_quote(logspace)}/{what}"

    def search(
        self,
        q: str | bytes,
        *,
        logspace: str = "main",
        from_: Time | None = None,
        to: Time | None = None,
        time: str | None = None,
        limit: int = 100,
        order: str = "newest",
        cursor: str | int | None = None,
        total: bool = True,
    ) -> dict[str, Any]:
        """One page of hits: searchd's answer (hits, total, next_cursor, from, to, ...).

        :param cursor: the `next_cursor` of the previous page.
        :param total: False skips counting every match (`total` is then null).
        """
        params = _range(q, from_, to, time)
        params["limit"] = str(limit)
        params["order"] = order
        if cursor is not None:
            params["cursor"] = str(cursor)
        if not total:
            params["total"] = "0"
        return self.call("GET", self._ls(logspace, "search"), params=params)

    def iter_search(
        self,
        q: str | bytes,
        *,
        logspace: str = "main",
        from_: Time | None = None,
        to: Time | None = None,
        time: str | None = None,
        order: str = "newest",
        page: int = 1000,
    ) -> Iterator[dict[str, Any]]:
        """Every hit, page after page through next_cursor, each once.

        The time range is fixed by the first page (a relative `from`/`to` such as "-1h" or
        "now" does not move while the pages are fetched), so the hits are those of one range.
        """
        cursor: str | None = None
        while True:
            body = self.search(
                q,
                logspace=logspace,
                from_=from_,
                to=to,
                time=time,
                limit=page,
                order=order,
                cursor=cursor,
                total=False,
            )
            yield from self._member(body, "hits")
            nxt = body.get("next_cursor")
            if nxt is None:
                return
            if nxt == cursor:
                raise LogboxError(200, "bad_response", f"next_cursor {nxt!r} did not move")
            cursor = str(nxt)
            lo, hi = body.get("from"), body.get("to")
            if isinstance(lo, int) and isinstance(hi, int):
                # searchd covers whole seconds: from rounded down, to up.
                from_, to = lo // 1_000_000, math.ceil(hi / 1_000_000)

    def count(
        self,
        q: str | bytes,
        *,
        logspace: str = "main",
        from_: Time | None = None,
        to: Time | None = None,
        time: str | None = None,
    ) -> int:
        """How many messages match."""
        doc = self.call("GET", self._ls(logspace, "count"), params=_range(q, from_, to, time))
        return int(self._member(doc, "total"))

    def histogram(
        self,
        q: str | bytes,
        *,
        logspace: str = "main",
        from_: Time | None = None,
        to: Time | None = None,
        time: str | None = None,
        buckets: int = 100,
    ) -> dict[str, Any]:
        """Matches over time: {"step_us", "buckets": [{"from", "count"}], "total", ...}."""
        params = _range(q, from_, to, time)
        params["buckets"] = str(buckets)
        return self.call("GET", self._ls(logspace, "histogram"), params=params)

    def top(
        self,
        q: str | bytes,
        field: str,
        *,
        logspace: str = "main",
        from_: Time | None = None,
        to: Time | None = None,
        time: str | None = None,
        k: int = 10,
    ) -> list[dict[str, Any]]:
        """The k most frequent values of field among the matches: [{"value", "count"}]."""
        params = _range(q, from_, to, time)
        params["field"] = field
        params["k"] = str(k)
        doc = self.call("GET", self._ls(logspace, "top"), params=params)
        return list(self._member(doc, "values"))

    def message(self, id: int, *, logspace: str = "main") -> dict[str, Any]:
        """One message object by id."""
        return self.call("GET", self._ls(logspace, f"messages/{_quote(id)}"))

    def export(
        self,
        q: str | bytes,
        *,
        logspace: str = "main",
        from_: Time | None = None,
        to: Time | None = None,
        time: str | None = None,
        order: str = "newest",
        format: str = "ndjson",
    ) -> Export:
        """Every match, streamed (see Export); an error before the first byte raises here."""
        params = _range(q, from_, to, time)
        params["order"] = order
        params["format"] = format
        path = self._ls(logspace, "export")
        return Export(self, self.request("GET", path, params=params, stream=True), format)

    def tail(
        self,
        q: str | bytes,
        *,
        logspace: str = "main",
        after: int | None = None,
        limit: int = 100,
    ) -> Tail:
        """A live tail (GET .../tail): the new matches as they become searchable, until
        closed (see Tail); an error before the stream starts raises here."""
        params: dict[str, Any] = {"q": _query(q), "limit": limit}
        if after is not None:
            params["after"] = after
        path = self._ls(logspace, "tail")
        return Tail(self, self.request("GET", path, params=params, stream=True))

    # ------------------------------------------------------------ status, tokens

    def status(self) -> dict[str, Any]:
        """Services, ingest rates, logspaces, disk and RAID (GET /status)."""
        return self.call("GET", "/status")

    def system(self) -> dict[str, Any]:
        """The machine the box runs on (admin; GET /system): logbox's version, the host, CPU,
        memory, disks, the store's file system, RAID and the settings that bear on its
        performance.

        :raises LogboxError: `not_found` (404) from a box older than this call.
        """
        return self.call("GET", "/system")

    def health(self) -> dict[str, Any]:
        """{"status": "ok"} when the API reaches searchd (GET /health, no token needed).

        :raises LogboxError: `unavailable` (503) otherwise.
        """
        return self.call("GET", "/health")

    def tokens(self, user: str | None = None) -> list[dict[str, Any]]:
        """The tokens (admin), without their secrets; only user's when given."""
        params = {"user": user} if user is not None else None
        return list(self._member(self.call("GET", "/tokens", params=params), "tokens"))

    def create_token(
        self,
        name: str,
        *,
        user: str | None = None,
        expires_in: int | None = None,
        never_expires: bool = False,
    ) -> dict[str, Any]:
        """A new API token (admin): the Token object plus "token", the secret, shown only now.

        :param user: whose token (default: the caller).
        :param expires_in: lifetime in seconds (default: the API's, 90 days).
        :param never_expires: a token without expiry (expires_in must then be None).
        """
        body: dict[str, Any] = {"name": name}
        if user is not None:
            body["user"] = user
        if never_expires:
            if expires_in is not None:
                raise ValueError("expires_in and never_expires exclude each other")
            body["expires_in"] = None
        elif expires_in is not None:
            body["expires_in"] = expires_in
        return self.call("POST", "/tokens", body=body)

    # ------------------------------------------------------------ saved searches

    def searches(self) -> list[dict[str, Any]]:
        """The saved searches the caller may see (theirs, and those shared on logspaces they
        may read): SavedSearch objects (API.md §6.1)."""
        return list(self._member(self.call("GET", "/searches"), "searches"))

    def save_search(
        self,
        name: str,
        q: str,
        *,
        logspace: str = "main",
        from_: str | None = None,
        to: str | None = None,
        columns: Sequence[str] = (),
        shared: bool = False,
    ) -> dict[str, Any]:
        """Saves a search; the SavedSearch. `bad_query` when the box cannot parse q."""
        body = {"name": name, "logspace": logspace, "query": q, "from": from_, "to": to,
                "columns": list(columns), "shared": shared}  # fmt: skip
        return self.call("POST", "/searches", body=body)

    def update_search(self, id: str, **members: Any) -> dict[str, Any]:
        """Changes members of a saved search (name, logspace, query, from, to, columns,
        shared); the SavedSearch."""
        return self.call("PATCH", f"/searches/{_quote(id)}", body=members)

    def delete_search(self, id: str) -> dict[str, Any]:
        """Deletes a saved search; what it was."""
        return self.call("DELETE", f"/searches/{_quote(id)}")

    # ------------------------------------------------------------ scheduled reports

    def reports(self) -> list[dict[str, Any]]:
        """The caller's reports (an admin: every one): Report objects (API.md §6.4)."""
        return list(self._member(self.call("GET", "/reports"), "reports"))

    def create_report(
        self,
        name: str,
        *,
        logspace: str = "main",
        period: str = "daily",
        searches: Sequence[str] = (),
        recipients: Sequence[str] = (),
        enabled: bool = True,
    ) -> dict[str, Any]:
        """Makes a report (period daily, weekly or monthly; searches: saved search ids, none
        for every message); the Report."""
        body = {"name": name, "logspace": logspace, "period": period, "searches": list(searches),
                "recipients": list(recipients), "enabled": enabled}  # fmt: skip
        return self.call("POST", "/reports", body=body)

    def report(self, id: str) -> dict[str, Any]:
        """One report."""
        return self.call("GET", f"/reports/{_quote(id)}")

    def update_report(self, id: str, **members: Any) -> dict[str, Any]:
        """Changes members of a report (name, logspace, period, searches, recipients,
        enabled); the Report."""
        return self.call("PATCH", f"/reports/{_quote(id)}", body=members)

    def delete_report(self, id: str) -> dict[str, Any]:
        """Deletes a report; what it was."""
        return self.call("DELETE", f"/reports/{_quote(id)}")

    def render_report(self, id: str, period: str = "last") -> bytes:
        """One period of a report as its HTML page (charts inline): `last`, `current` or a
        period id (2026-11-26, 2026-W48, 2026-11)."""
        params = {"period": period, "format": "html"}
        return self.request("GET", f"/reports/{_quote(id)}/render", params=params).content

    def report_data(self, id: str, period: str = "last") -> dict[str, Any]:
        """One period of a report as its numbers (ReportData)."""
        params = {"period": period, "format": "json"}
        return self.call("GET", f"/reports/{_quote(id)}/render", params=params)

    def send_report(self, id: str, period: str = "last") -> dict[str, Any]:
        """Emails one period of a report to its recipients now: {"report", "period", "to"}."""
        return self.call("POST", f"/reports/{_quote(id)}/send", params={"period": period})

    # ------------------------------------------------------------ alerts

    def alerts(self) -> list[dict[str, Any]]:
        """The caller's alerts (an admin's: all) with their states (API.md §6.3)."""
        return list(self._member(self.call("GET", "/alerts"), "alerts"))

    def alert(self, id: str) -> dict[str, Any]:
        """One alert."""
        return self.call("GET", f"/alerts/{_quote(id)}")

    def create_alert(
        self,
        name: str,
        search: str,
        condition: dict[str, Any],
        actions: list[dict[str, Any]],
        **members: Any,
    ) -> dict[str, Any]:
        """A new alert on the saved search `search` (cooldown_s, enabled as members)."""
        body = {"name": name, "search": search, "condition": condition, "actions": actions}
        return self.call("POST", "/alerts", body=body | members)

    def update_alert(self, id: str, **members: Any) -> dict[str, Any]:
        """Changes an alert's members."""
        return self.call("PATCH", f"/alerts/{_quote(id)}", body=members)

    def delete_alert(self, id: str) -> dict[str, Any]:
        """Deletes an alert and its history; what it was."""
        return self.call("DELETE", f"/alerts/{_quote(id)}")

    def test_alert(self, id: str) -> dict[str, Any]:
        """Asks for a test-fire: {"alert", "request"}; the outcome comes in its history."""
        return self.call("POST", f"/alerts/{_quote(id)}/test")

    def alert_history(
        self, id: str, *, limit: int = 100, before: str | None = None
    ) -> dict[str, Any]:
        """An alert's history, newest first: {"alert", "entries", "next_before"}."""
        params: dict[str, Any] = {"limit": limit}
        if before is not None:
            params["before"] = before
        return self.call("GET", f"/alerts/{_quote(id)}/history", params=params)

    def revoke_token(self, id: str) -> dict[str, Any]:
        """Revokes a token by its public id (admin); returns the Token with `revoked`."""
        return self.call("DELETE", f"/tokens/{_quote(id)}")


class _Rows:
    """Counts the message rows of an export body as its chunks pass, and reads what may follow
    the last one (API.md §5): warnings (a damaged store) and the error that cut the export
    short. NDJSON: a line is a row unless it is `{"warning": ...}` or `{"error": ...}`; CSV: a
    record after the header (a line break inside quotes is no record end) is a row unless its
    first cell starts with `#` (`# warning: ...`, `# error: code: message`)."""

    def __init__(self, fmt: str) -> None:
        self.csv = fmt == "csv"
        self.rows = 0
        self.header = self.csv  # the CSV header row is not a message
        self.quoted = False
        self.head = bytearray()  # the start of the record being read (at most _TAIL bytes)
        self.warnings: list[str] = []
        self.failure: LogboxError | None = None

    def feed(self, chunk: bytes) -> int:
        """Takes the next chunk; returns how many rows it completed."""
        n = 0
        pos, size = 0, len(chunk)
        while pos < size:
            nl = chunk.find(b"\n", pos)
            end = size if nl < 0 else nl + 1
            if self.csv and chunk.count(b'"', pos, end) % 2:
                self.quoted = not self.quoted
            if len(self.head) < _TAIL:
                self.head += chunk[pos : min(end, pos + _TAIL - len(self.head))]
            pos = end
            if nl >= 0 and not self.quoted:
                n += self.record(bytes(self.head))
                self.head.clear()
        self.rows += n
        return n

    def finish(self) -> None:
        """At the body's end: a last record without its line end."""
        if self.head:
            self.rows += self.record(bytes(self.head))
            self.head.clear()

    def record(self, rec: bytes) -> int:
        """1 when a whole record is a message row; 0 for the CSV header, a warning (kept in
        warnings) or an error (kept in failure)."""
        if self.header:
            self.header = False
            return 0
        if self.csv:
            if not rec.startswith((b"#", b'"#')):
                return 1
            cell = next(csv.reader([rec.decode("utf-8", "surrogateescape")]), [""])[0]
            kind, _, text = cell[2:].partition(": ")
            code, _, message = text.partition(": ")
        else:
            if not rec.startswith((b'{"warning"', b'{"error"')):
                return 1
            try:
                obj = json.loads(rec)
                kind = next(iter(obj))
                text = str(obj["warning"]) if kind == "warning" else ""
                code = str(obj["error"]["code"]) if kind == "error" else ""
                message = str(obj["error"].get("message", "")) if kind == "error" else ""
            except (ValueError, KeyError, TypeError, AttributeError, StopIteration):
                return 1
        if kind == "warning":
            self.warnings.append(text)
        elif kind == "error":
            self.failure = LogboxError(0, code, message)
        else:
            return 1
        return 0


class Export(_Closing):
    """A streaming export (GET .../export), read once, in constant memory.

    `total` is X-Logbox-Total (None when absent), `rows` the messages read so far. Read it with
    `write_to` (the body byte for byte), `lines()` (raw lines) or by iterating (parsed
    records: NDJSON objects; CSV rows as dicts of strings keyed by the header). The response
    is closed when the body ends, on an error, and by `close()`. A stream that the API ended
    early with an error line (NDJSON `{"error": ...}`, CSV `# error: ...`) raises that error
    (status 0) once the rows before it are consumed; a stream that breaks raises
    `unavailable`. `warnings` holds the stream's warnings (a damaged store: messages that could
    not be read); `lines()` and iteration leave them out, `write_to` writes them as they came.
    Compare `rows` with `total` to see a stream that was cut without a word.
    """

    def __init__(self, client: Client, response: requests.Response, fmt: str) -> None:
        self.client = client
        self.response = response
        self.format = fmt
        self.content_type = response.headers.get("Content-Type", "")
        raw = response.headers.get("X-Logbox-Total")
        self.total: int | None = int(raw) if raw is not None and raw.strip().isdigit() else None
        self.rows = 0
        self.warnings: list[str] = []
        self._started = False

    def close(self) -> None:
        """Closes the response (a partly read export is abandoned)."""
        self.response.close()

    @property
    def complete(self) -> bool:
        """Whether as many rows as X-Logbox-Total promised were read."""
        return self.total is None or self.rows == self.total

    def chunks(self) -> Iterator[bytes]:
        """The body as it arrives, byte for byte (once).

        :raises LogboxError: `unavailable` when the connection breaks.
        """
        if self._started:
            raise RuntimeError("an export can be read only once")
        self._started = True
        try:
            yield from self.response.iter_content(CHUNK)
        except requests.RequestException as e:
            why = _why(e, self.client.timeout)
            raise LogboxError(
                0, "unavailable", f"{self.client.url}: the export stream broke: {why}"
            ) from e
        finally:
            self.response.close()

    def write_to(self, out: IO[bytes], progress: Callable[[int], object] | None = None) -> int:
        """Writes the body to out exactly as the API streams it; returns the rows written.

        :param progress: called with the number of rows each chunk completed.
        :raises LogboxError: the API's error line (after writing everything, that line too),
            or `unavailable` when the stream broke.
        """
        counter = _Rows(self.format)
        try:
            for chunk in self.chunks():
                out.write(chunk)
                n = counter.feed(chunk)
                self.rows = counter.rows
                if n and progress is not None:
                    progress(n)
        finally:
            counter.finish()
            self.rows, self.warnings = counter.rows, counter.warnings
        if counter.failure is not None:
            raise counter.failure
        return self.rows

    def lines(self) -> Iterator[bytes]:
        """The body's lines without their line ends (CSV: the header first; a row whose
        quoted message holds line breaks is one item); warnings go to `warnings`.

        :raises LogboxError: the API's error line instead of yielding it.
        """
        counter = _Rows(self.format)
        row: list[bytes] = []  # the physical lines of a CSV row whose quotes are still open
        quotes = 0
        pending = b""

        def item(whole: bytes) -> bytes | None:
            """The record whole as an item to yield, or None (a warning; an error raises)."""
            if counter.header:
                counter.record(whole)
                return whole
            if counter.record(whole):
                self.rows += 1
                return whole
            self.warnings = counter.warnings
            if counter.failure is not None:
                raise counter.failure
            return None

        for chunk in self.chunks():
            *done, pending = (pending + chunk).split(b"\n")
            for line in done:
                row.append(line)
                quotes += line.count(b'"')
                if self.format == "csv" and quotes % 2:
                    continue  # a line break inside a quoted field
                whole = b"\n".join(row)
                row, quotes = [], 0
                if self.format == "csv" and whole.endswith(b"\r"):
                    whole = whole[:-1]
                if (out := item(whole)) is not None:
                    yield out
        if pending and (out := item(pending)) is not None:  # a last line without its line end
            yield out

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """The records: NDJSON objects, or CSV rows as {column: str} (bytes outside UTF-8 as
        \\udcXX)."""
        header: list[str] | None = None
        for line in self.lines():
            if self.format != "csv":
                yield json.loads(line)
                continue
            row = next(csv.reader([line.decode("utf-8", "surrogateescape")]), [])
            if header is None:
                header = row
            else:
                yield dict(zip(header, row, strict=False))


class Tail(_Closing):
    """A live tail (GET .../tail), read as it arrives: iterating it gives the stream's JSON
    objects (rpc/API.md §5.1) until it is closed or the API ends it: message objects (with
    "id"), {"skipped": K, "through": "N"} notices and {"through": "N", "time": µs} heartbeats.
    `through` is the last id covered so far (pass it as after to resume), `skipped` the sum of
    the skipped counts. An {"error": ...} line raises it (status 0); a broken stream raises
    `unavailable`.
    """

    def __init__(self, client: Client, response: requests.Response) -> None:
        self.client = client
        self.response = response
        self.through: int | None = None
        self.skipped = 0

    def close(self) -> None:
        """Closes the response: the stream ends."""
        self.response.close()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            for line in self.response.iter_lines(chunk_size=1 << 16):
                if not line:
                    continue
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    continue
                if isinstance(obj.get("error"), dict):
                    err = obj["error"]
                    raise LogboxError(0, str(err.get("code")), str(err.get("message", "")))
                if "id" in obj and isinstance(obj["id"], int):
                    self.through = max(self.through or 0, obj["id"])
                elif isinstance(obj.get("through"), str) and obj["through"].isdigit():
                    self.through = max(self.through or 0, int(obj["through"]))
                if isinstance(obj.get("skipped"), int):
                    self.skipped += obj["skipped"]
                yield obj
        except requests.RequestException as e:
            why = _why(e, self.client.timeout)
            raise LogboxError(
                0, "unavailable", f"{self.client.url}: the tail stream broke: {why}"
            ) from e
        finally:
            self.response.close()
