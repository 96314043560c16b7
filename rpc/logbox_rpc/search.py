"""Searching: logspaces, search, count, histogram, top, messages, export and the live tail
(API.md §4, §5).
searchd's answers are passed on as the bytes it sent; only what the audit needs is read."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, g
from logbox_core import federation as fed
from logbox_core.constants import BUCKETS_MAX, LIMIT_MAX, QUERY_MAX, TOP_MAX
from logbox_core.export import (
    UnknownLogspace,
    audited_export,
    error_status,
    export_headers,
    start_audited,
)
from logbox_core.searchd import SearchdError
from logbox_core.tail import TailBusy, open_tail

from .auth import address, audit
from .errors import ApiError
from .params import Param, Spec, declare
from .sites import federated, members, not_federated, remote_logspaces, remote_message
from .state import accounts, searchd

bp = Blueprint("search", __name__)

LOGSPACE = Param(
    "logspace",
    "string",
    "the logspace: a local or multiple logspace, or `site:logspace` (§4.1)",
    where="path",
    pattern=fed.NAME_PATTERN,
)
Q = Param(
    "q",
    "query",
    f'the query (DESIGN.md "Query language"), at most {QUERY_MAX} bytes',
    required=True,
)
FROM = Param(
    "from",
    "time",
    "start of the time range, inclusive: RFC 3339, a date, relative (-15m), `now` or "
    "epoch seconds; default `to` - 24 h",
)
TO = Param("to", "time", "end of the time range, exclusive (same forms); default now")
TIME = Param(
    "time",
    "string",
    "which time from and to select by: received (when logbox got the message) or event (the "
    "message's own time stamp; messages without one never match; hits stay in arrival order)",
    default="received",
    enum=("received", "event"),
)
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
    TIME,
    Param("limit", "integer", "hits per page", default=100, minimum=1, maximum=LIMIT_MAX),
    ORDER,
    Param(
        "cursor",
        "string",
        "the next_cursor of the previous page (0: the first page): an id, or for a remote or "
        "multiple logspace `f` and each member's id (§4.1)",
        pattern=fed.CURSOR_PATTERN,
    ),
    Param(
        "total",
        "string",
        "1: count every match; 0: skip counting (total null)",
        default="1",
        enum=("1", "0"),
    ),
    Param(
        "highlight",
        "string",
        "1: each hit has `spans`, the [start, end) byte offsets of the message tokens the "
        "query matched",
        default="0",
        enum=("1", "0"),
    ),
)
QUERY_ERRORS = (400, 401, 403, 404, 422, 429, 500, 503, 507)
_TOTAL = re.compile(rb'"total":(null|[0-9]+)')


def searchd_params(logspace: str, args: dict[str, Any]) -> list[tuple[str, str]]:
    """The searchd query for a view's parsed args."""
    return [("logspace", logspace)] + [(k, str(v)) for k, v in args.items()]


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
@declare(
    Spec("The logspaces the caller may read", answer="Logspaces", errors=(400, 401, 429, 500, 503))
)
def logspaces(args: dict[str, Any]) -> Response:
    """GET /logspaces: searchd's list, then the sites' logspaces (site:logspace) and the
    multiple logspaces (§4.1), without those the caller may not read."""
    body = searchd().get_raw("/v1/logspaces")
    user = g.user
    extra = remote_logspaces()
    if extra is None and (user.role == "admin" or "*" in user.logspaces):
        return Response(body, mimetype="application/json")
    doc = json.loads(body)
    if extra is not None:
        doc["logspaces"] += extra[0]
        doc["warnings"] = extra[1]
    doc["logspaces"] = [ls for ls in doc["logspaces"] if user.can_read(ls["name"])]
    return Response(json.dumps(doc), mimetype="application/json")


# The query endpoints whose answer is searchd's own: GET /logspaces/{logspace}/<name> is
# searchd's /v1/<name>, passed on as it sent it and audited as <name> (forward).
FORWARDED = {
    "search": Spec(
        "Messages that match a query, one page (searchd /v1/search)",
        SEARCH_PARAMS,
        answer="SearchResult",
        errors=QUERY_ERRORS,
    ),
    "count": Spec(
        "How many messages match a query",
        (LOGSPACE, Q, FROM, TO, TIME),
        answer="Count",
        errors=QUERY_ERRORS,
    ),
    "histogram": Spec(
        "Matches per time bucket",
        (
            LOGSPACE,
            Q,
            FROM,
            TO,
            TIME,
            Param(
                "buckets",
                "integer",
                "at most this many buckets",
                default=100,
                minimum=1,
                maximum=BUCKETS_MAX,
            ),
        ),
        answer="Histogram",
        errors=QUERY_ERRORS,
    ),
    "top": Spec(
        "The most frequent values of a field among the matches",
        (
            LOGSPACE,
            Q,
            FROM,
            TO,
            TIME,
            Param(
                "field",
                "string",
                "host, peer, program, pid, msgid, facility, severity, message or an RFC 5424 "
                "SD parameter `<sd-id>.<param>`",
                required=True,
            ),
            Param("k", "integer", "how many values", default=10, minimum=1, maximum=TOP_MAX),
        ),
        answer="Top",
        errors=QUERY_ERRORS,
    ),
}


def forwarding_view(name: str) -> Callable[..., Response]:
    """The view of GET /logspaces/{logspace}/<name>: searchd's /v1/<name> (forward)."""

    def view(logspace: str, args: dict[str, Any]) -> Any:
        ms = members(logspace)
        if ms is not None:
            return federated(name, logspace, ms, args)
        return forward(name, f"/v1/{name}", logspace, args)

    view.__name__ = name
    view.__doc__ = f"GET /logspaces/{{logspace}}/{name}."
    return view


for _name, _spec in FORWARDED.items():
    bp.add_url_rule(
        f"/logspaces/<logspace>/{_name}",
        methods=["GET"],
        view_func=declare(_spec)(forwarding_view(_name)),
    )


@bp.route("/logspaces/<logspace>/messages/<id>", methods=["GET"])
@declare(
    Spec(
        "One message by id",
        (
            LOGSPACE,
            Param("id", "integer", "the message id (from 1)", where="path", minimum=1),
            Param(
                "q",
                "query",
                "a query: the message then has `spans`, what of it the query matches (as a "
                "search's highlight=1)",
            ),
        ),
        answer="Message",
        errors=(400, 401, 403, 404, 429, 500, 503, 507),
    )
)
def message(logspace: str, id: int, args: dict[str, Any]) -> Response:
    """GET /logspaces/{logspace}/messages/{id}: a remote logspace's from its site."""
    ms = members(logspace)
    if ms is not None:
        return remote_message(logspace, ms, id, args.get("q"))
    q = [("q", args["q"])] if args.get("q") else []
    try:
        body = searchd().get_raw(f"/v1/messages/{id}", [("logspace", logspace), *q])
    except SearchdError as e:
        audit("message", logspace=logspace, status=error_status(e), detail=f"id {id}: {e.code}")
        raise
    audit("message", logspace=logspace, results=1, detail=f"id {id}")
    return Response(body, mimetype="application/json")


# ---------------------------------------------------------------- export


@bp.route("/logspaces/<logspace>/export", methods=["GET"])
@declare(
    Spec(
        "Every match, streamed (NDJSON or CSV), as of the moment the export began",
        (
            LOGSPACE,
            Q,
            FROM,
            TO,
            TIME,
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
            "application/x-ndjson": "one message object (Message) a line; after the last one, a "
            '{"warning": "..."} line per part of the store that could not be read, and '
            '{"error": {...}} when searchd failed midway',
            "text/csv": "header id,received,timestamp,host,peer,program,pid,msgid,facility,"
            "severity,flags,sd,message; a text cell starting with = + - @ tab or CR gets a leading ', "
            "control characters are escaped as in NDJSON (\\u001b); after the last row, a "
            "'# warning: ...' row per part of the store that could not be read, and "
            "'# error: <code>: <message>' when searchd failed midway",
        },
        errors=QUERY_ERRORS,
        headers={"X-Logbox-Total": "how many messages the export holds"},
    )
)
def export(logspace: str, args: dict[str, Any]) -> Response:
    """GET /logspaces/{logspace}/export: a snapshot of every match, in pages of 2,000
    (logbox_core.export), audited when the stream ends."""
    not_federated(logspace, "export")
    ex = audited_export(
        searchd(),
        accounts(),
        g.user.name,
        address(),
        logspace,
        args["q"],
        order=args["order"],
        fmt=args["format"],
        time_from=args.get("from"),
        time_to=args.get("to"),
        basis=args.get("time") or "received",
    )
    try:
        start_audited(ex, audit)
    except UnknownLogspace as e:
        raise ApiError(404, "not_found", e.message) from None
    return Response(ex, headers=export_headers(ex))


# ---------------------------------------------------------------- live tail


@bp.route("/logspaces/<logspace>/tail", methods=["GET"])
@declare(
    Spec(
        "A live tail: the new matches of a query as they become searchable, streamed "
        "(searchd /v1/tail)",
        (
            LOGSPACE,
            Q,
            Param(
                "after",
                "integer",
                "start after this id (a `through` seen before: nothing missed or repeated); "
                "default: the logspace's end, only new messages",
                minimum=0,
            ),
            Param(
                "limit",
                "integer",
                "messages sent per tick (200 ms) at most; more are skipped and said",
                default=100,
                minimum=1,
                maximum=LIMIT_MAX,
            ),
            Param(
                "seconds",
                "integer",
                "end the stream (cleanly) after this many seconds; default: never",
                minimum=1,
                maximum=86400,
            ),
        ),
        media={
            "application/x-ndjson": 'one JSON object a line until the client closes: {"through": '
            '"N", "time": µs} first and every 5 s while idle; a message object (Message) per new '
            'match, oldest first; {"skipped": K, "through": "N"} when K matches with ids <= N '
            'were not sent (too many at once, or the client read too slowly); {"error": {...}} '
            "as the last line when searchd failed"
        },
        errors=QUERY_ERRORS,
    )
)
def tail(logspace: str, args: dict[str, Any]) -> Response:
    """GET /logspaces/{logspace}/tail: searchd's stream passed on line by line, audited once
    when it starts (logbox_core.tail bounds the tails per user and per process)."""
    not_federated(logspace, "tail")
    q = args["q"]
    try:
        stream = open_tail(
            searchd(),
            g.user.name,
            logspace,
            q,
            after=args.get("after"),
            limit=args["limit"],
            seconds=args.get("seconds"),
        )
    except TailBusy as e:
        audit("tail", logspace=logspace, query=q, status=429, detail=e.message)
        raise ApiError(429, "too_many_requests", e.message, {"Retry-After": "1"}) from None
    except SearchdError as e:
        audit(
            "tail",
            logspace=logspace,
            query=q,
            status=error_status(e),
            detail=f"{e.code}: {e.message}",
        )
        raise
    try:
        audit("tail", logspace=logspace, query=q)
    except BaseException:
        stream.close()
        raise
    return Response(
        stream,
        mimetype="application/x-ndjson",
        headers={"X-Accel-Buffering": "no"},
        direct_passthrough=True,
    )
