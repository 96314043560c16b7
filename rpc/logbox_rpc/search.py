"""Searching: logspaces, search, count, histogram, top, messages and export (API.md §4, §5).
searchd's answers are passed on as the bytes it sent; only what the audit needs is read."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from collections.abc import Iterator
from typing import Any

from flask import Blueprint, Response, g
from logbox_core.accounts import Accounts
from logbox_core.searchd import Searchd, SearchdError

from .auth import address, audit
from .errors import ApiError
from .params import Param, Spec, declare
from .state import accounts, searchd

bp = Blueprint("search", __name__)

LOGSPACE = Param(
    "logspace",
    "string",
    "the logspace (`[a-z0-9_-]{1,64}`)",
    where="path",
    pattern="[a-z0-9_-]{1,64}",
)
Q = Param(
    "q", "query", 'the query (DESIGN.md "Query language"), at most 16384 bytes', required=True
)
FROM = Param(
    "from",
    "time",
    "start of the receive-time range, inclusive: RFC 3339, a date, relative (-15m), `now` or "
    "epoch seconds; default `to` - 24 h",
)
TO = Param("to", "time", "end of the receive-time range, exclusive (same forms); default now")
ORDER = Param(
    "order",
    "string",
    "ids descending (newest) or ascending",
    default="newest",
    enum=("newest", "oldest"),
)
SEARCH_PARAMS = (
    LOGSPACE,
    Q,
    FROM,
    TO,
    Param("limit", "integer", "hits per page", default=100, minimum=1, maximum=10000),
    ORDER,
    Param(
        "cursor", "integer", "the next_cursor of the previous page (0: the first page)", minimum=0
    ),
    Param(
        "total",
        "string",
        "1: count every match; 0: skip counting (total null)",
        default="1",
        enum=("1", "0"),
    ),
)
QUERY_ERRORS = (400, 401, 403, 404, 422, 500, 503)
EXPORT_PAGE = 10000
CSV_COLUMNS = (
    "id", "received", "timestamp", "host", "program", "pid", "msgid", "facility", "severity",
    "flags", "sd", "message",
)  # fmt: skip
_TOTAL = re.compile(rb'"total":(null|[0-9]+)')


def searchd_params(logspace: str, args: dict[str, Any]) -> list[tuple[str, str]]:
    """The searchd query for a view's parsed args."""
    return [("logspace", logspace)] + [(k, str(v)) for k, v in args.items()]


def error_status(e: SearchdError) -> int:
    """The status the API answers a searchd error with."""
    return e.status if e.status < 500 or e.status == 503 else 500


def total_of(body: bytes) -> int | None:
    """The top-level "total" of a searchd answer, without parsing the whole body."""
    m = _TOTAL.search(body)
    if m is None or m.group(1) == b"null":
        return None
    return int(m.group(1))


def forward(
    action: str, path: str, logspace: str, args: dict[str, Any], results: Any = None
) -> Response:
    """searchd's answer to path?args as it is, audited as action.

    :raises SearchdError: (audited) when searchd refuses or cannot be reached.
    """
    q = args.get("q")
    try:
        body = searchd().get_raw(path, searchd_params(logspace, args))
    except SearchdError as e:
        audit(
            action,
            logspace=logspace,
            query=q,
            status=error_status(e),
            detail=f"{e.code}: {e.message}",
        )
        raise
    audit(
        action, logspace=logspace, query=q, results=total_of(body) if results is None else results
    )
    return Response(body, mimetype="application/json")


@bp.route("/logspaces", methods=["GET"])
@declare(Spec("The logspaces the caller may read", answer="Logspaces", errors=(400, 401, 500, 503)))
def logspaces(args: dict[str, Any]) -> Response:
    """GET /logspaces: searchd's list, without those the caller may not read."""
    body = searchd().get_raw("/v1/logspaces")
    user = g.user
    if user.role == "admin" or "*" in user.logspaces:
        return Response(body, mimetype="application/json")
    doc = json.loads(body)
    doc["logspaces"] = [ls for ls in doc["logspaces"] if user.can_read(ls["name"])]
    return Response(json.dumps(doc), mimetype="application/json")


@bp.route("/logspaces/<logspace>/search", methods=["GET"])
@declare(
    Spec(
        "Messages that match a query, one page (searchd /v1/search)",
        SEARCH_PARAMS,
        answer="SearchResult",
        errors=QUERY_ERRORS,
    )
)
def search(logspace: str, args: dict[str, Any]) -> Response:
    """GET /logspaces/{logspace}/search."""
    return forward("search", "/v1/search", logspace, args)


@bp.route("/logspaces/<logspace>/count", methods=["GET"])
@declare(
    Spec(
        "How many messages match a query",
        (LOGSPACE, Q, FROM, TO),
        answer="Count",
        errors=QUERY_ERRORS,
    )
)
def count(logspace: str, args: dict[str, Any]) -> Response:
    """GET /logspaces/{logspace}/count."""
    return forward("count", "/v1/count", logspace, args)


@bp.route("/logspaces/<logspace>/histogram", methods=["GET"])
@declare(
    Spec(
        "Matches per time bucket",
        (
            LOGSPACE,
            Q,
            FROM,
            TO,
            Param(
                "buckets",
                "integer",
                "at most this many buckets",
                default=100,
                minimum=1,
                maximum=10000,
            ),
        ),
        answer="Histogram",
        errors=QUERY_ERRORS,
    )
)
def histogram(logspace: str, args: dict[str, Any]) -> Response:
    """GET /logspaces/{logspace}/histogram."""
    return forward("histogram", "/v1/histogram", logspace, args)


@bp.route("/logspaces/<logspace>/top", methods=["GET"])
@declare(
    Spec(
        "The most frequent values of a field among the matches",
        (
            LOGSPACE,
            Q,
            FROM,
            TO,
            Param(
                "field",
                "string",
                "host, program, pid, msgid, facility, severity, message or an RFC 5424 SD "
                "parameter `<sd-id>.<param>`",
                required=True,
            ),
            Param("k", "integer", "how many values", default=10, minimum=1, maximum=1000),
        ),
        answer="Top",
        errors=QUERY_ERRORS,
    )
)
def top(logspace: str, args: dict[str, Any]) -> Response:
    """GET /logspaces/{logspace}/top."""
    return forward("top", "/v1/top", logspace, args)


@bp.route("/logspaces/<logspace>/messages/<id>", methods=["GET"])
@declare(
    Spec(
        "One message by id",
        (LOGSPACE, Param("id", "integer", "the message id (from 1)", where="path", minimum=1)),
        answer="Message",
        errors=(400, 401, 403, 404, 500, 503),
    )
)
def message(logspace: str, id: int, args: dict[str, Any]) -> Response:
    """GET /logspaces/{logspace}/messages/{id}."""
    try:
        body = searchd().get_raw(f"/v1/messages/{id}", [("logspace", logspace)])
    except SearchdError as e:
        audit("message", logspace=logspace, status=error_status(e), detail=f"id {id}: {e.code}")
        raise
    audit("message", logspace=logspace, results=1, detail=f"id {id}")
    return Response(body, mimetype="application/json")


# ---------------------------------------------------------------- export


def rfc3339_us(us: int) -> str:
    """µs since the epoch as RFC 3339 UTC with µs (searchd reads it back exactly)."""
    s, frac = divmod(us, 1_000_000)
    return dt.datetime.fromtimestamp(s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:06d}Z"


def csv_rows(hits: list[dict[str, Any]]) -> bytes:
    """hits as CSV rows (RFC 4180), bytes that are not UTF-8 as they were stored."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    for h in hits:
        w.writerow(
            [
                h["id"],
                h["received"],
                h["timestamp"] or "",
                h["host"],
                h["program"],
                h["pid"],
                h["msgid"],
                "" if h["facility"] is None else h["facility"],
                "" if h["severity"] is None else h["severity"],
                "|".join(h["flags"]),
                h["sd"],
                h["message"],
            ]
        )
    return buf.getvalue().encode("utf-8", "surrogateescape")


def ndjson_rows(hits: list[dict[str, Any]]) -> bytes:
    """hits as NDJSON lines (strings escaped as searchd does: \\udcXX for other bytes)."""
    return "".join(json.dumps(h, separators=(",", ":")) + "\n" for h in hits).encode("ascii")


class ExportStream:
    """The body of an export: page after page from searchd, written out one at a time, and the
    audit entry when it ends (also when the client goes away: the server calls close())."""

    def __init__(
        self,
        sd: Searchd,
        acc: Accounts,
        user: str,
        addr: str,
        logspace: str,
        args: dict[str, Any],
        first: dict[str, Any],
        params: list[tuple[str, str]],
        stop_id: int | None,
    ) -> None:
        self.sd, self.acc, self.user, self.addr = sd, acc, user, addr
        self.logspace, self.args = logspace, args
        self.first, self.params, self.stop_id = first, params, stop_id
        self.rows = 0
        self.status = 200
        self.detail: str | None = None
        self.finished = False
        self.audited = False
        self.csv = args["format"] == "csv"
        self._gen = self._body()

    def __iter__(self) -> ExportStream:
        return self

    def __next__(self) -> bytes:
        return next(self._gen)

    def _body(self) -> Iterator[bytes]:
        """The chunks: the CSV header, then each page."""
        if self.csv:
            yield (",".join(CSV_COLUMNS) + "\r\n").encode()
        page = self.first
        self.first = {}
        while True:
            hits = page["hits"]
            done = page.get("next_cursor") is None
            if self.stop_id is not None and hits and hits[-1]["id"] >= self.stop_id:
                hits = [h for h in hits if h["id"] < self.stop_id]
                done = True
            if hits:
                self.rows += len(hits)
                yield csv_rows(hits) if self.csv else ndjson_rows(hits)
            if done:
                break
            cursor = page["next_cursor"]
            try:
                page = self.sd.get("/v1/search", self.params + [("cursor", str(cursor))])
            except SearchdError as e:
                self.status = error_status(e)
                self.detail = f"cut after {self.rows} rows: {e.code}: {e.message}"
                if not self.csv:
                    yield (json.dumps(e.to_json(), separators=(",", ":")) + "\n").encode("ascii")
                return
        self.finished = True

    def close(self) -> None:
        """Ends the stream and writes its audit entry (once)."""
        self._gen.close()
        if self.audited:
            return
        self.audited = True
        if not self.finished and self.status == 200:
            self.detail = f"client went away after {self.rows} rows"
        self.acc.audit(
            "export",
            user=self.user,
            address=self.addr,
            logspace=self.logspace,
            query=self.args["q"],
            results=self.rows,
            status=self.status,
            detail=self.detail or f"format {self.args['format']}",
        )


@bp.route("/logspaces/<logspace>/export", methods=["GET"])
@declare(
    Spec(
        "Every match, streamed (NDJSON or CSV), as of the moment the export began",
        (
            LOGSPACE,
            Q,
            FROM,
            TO,
            ORDER,
            Param(
                "format",
                "string",
                "ndjson: one message object a line; csv: RFC 4180 with a header row",
                default="ndjson",
                enum=("ndjson", "csv"),
            ),
        ),
        media={
            "application/x-ndjson": "one message object (Message) a line",
            "text/csv": "header id,received,timestamp,host,program,pid,msgid,facility,severity,flags,sd,message",
        },
        errors=QUERY_ERRORS,
        headers={"X-Logbox-Total": "how many messages the export holds"},
    )
)
def export(logspace: str, args: dict[str, Any]) -> Response:
    """GET /logspaces/{logspace}/export: a snapshot of every match, in pages of 10,000."""
    sd, acc = searchd(), accounts()
    q = args["q"]
    stop_id = None
    try:
        if args["order"] == "oldest":
            known = {ls["name"]: ls for ls in sd.logspaces()}
            if logspace not in known:
                raise ApiError(404, "not_found", f"no logspace '{logspace}'")
            stop_id = known[logspace]["next_id"]
        params = [
            ("logspace", logspace),
            ("q", q),
            ("order", args["order"]),
            ("limit", str(EXPORT_PAGE)),
        ]
        first = sd.get(
            "/v1/search",
            params + [(k, args[k]) for k in ("from", "to") if k in args] + [("total", "1")],
        )
    except SearchdError as e:
        audit(
            "export",
            logspace=logspace,
            query=q,
            status=error_status(e),
            detail=f"{e.code}: {e.message}",
        )
        raise
    except ApiError as e:
        audit("export", logspace=logspace, query=q, status=e.status, detail=e.message)
        raise
    # The snapshot: every later page searches the first page's range.
    params += [("from", rfc3339_us(first["from"])), ("to", rfc3339_us(first["to"])), ("total", "0")]
    stream = ExportStream(sd, acc, g.user.name, address(), logspace, args, first, params, stop_id)
    csv_format = args["format"] == "csv"
    r = Response(stream, mimetype="text/csv" if csv_format else "application/x-ndjson")
    if csv_format:
        r.headers["Content-Type"] = "text/csv; charset=utf-8; header=present"
    r.headers["X-Logbox-Total"] = str(first["total"])
    r.headers["Content-Disposition"] = (
        f'attachment; filename="logbox-{logspace}.{"csv" if csv_format else "ndjson"}"'
    )
    return r
