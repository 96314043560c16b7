"""The live tail view (webui/UI.md "Live tail"): the page, and the server-sent events stream its
script (static/js/tail.js) reads, which is searchd's /v1/tail passed on one event a line.

The one idea: the browser holds an EventSource on /tail/stream; each line of searchd's stream
(a message, a skipped notice, a heartbeat) becomes one event whose id is the last id covered,
so a reconnecting EventSource (Last-Event-ID) resumes exactly where it left off. The rights
are those of search, the stream is audited once when it starts, and logbox_core.tail bounds
how many tails a user and the process hold.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, Response, abort, current_app, render_template, request, url_for
from logbox_core.export import error_status
from logbox_core.searchd import SearchdError
from logbox_core.tail import TailBusy, TailStream, open_tail

from .auth import audit, can_read_required, current_user
from .search import members, readable_logspaces
from .state import searchd

bp = Blueprint("tail", __name__)

PER_TICK = 100  # messages searchd sends per 200 ms at most; more are skipped (and counted)
_ID = re.compile(r"[0-9]{1,20}")


def _url(endpoint: str, **params: Any) -> str:
    """A URL of endpoint with params (None and "" left out); str values may carry \\udcXX
    bytes (a query that is not UTF-8)."""
    pairs = [
        (k, v.encode("utf-8", "surrogateescape") if isinstance(v, str) else str(v))
        for k, v in params.items()
        if v is not None and v != ""
    ]
    return url_for(endpoint) + ("?" + urlencode(pairs) if pairs else "")


@bp.app_template_global()
def tail_link(q: str, logspace: str) -> str:
    """The live view of q in logspace (the search page's "Live tail" link)."""
    return _url("tail.tail_page", q=q, logspace=logspace)


@bp.route("/tail")
@can_read_required
def tail_page() -> Any:
    """GET /tail?q=&logspace=: the live view of q's new matches."""
    q = request.args.get("q", "")
    logspace = request.args.get("logspace") or "main"
    stream = _url("tail.tail_stream", q=q or "*", logspace=logspace)
    return render_template(
        "search/tail.html",
        q=q,
        logspace=logspace,
        logspaces=readable_logspaces(),
        stream_url=stream,
        search_url=_url("search.search", q=q, logspace=logspace),
        max_rows=current_app.config["TAIL_MAX_ROWS"],
        per_tick=PER_TICK,
    )


def _events(stream: TailStream) -> Iterator[bytes]:
    """The stream's lines as server-sent events: `id: <last id covered>` and `data: <line>`."""
    yield b"retry: 3000\n\n"
    last: str | None = None
    for line in stream:
        line = line.rstrip(b"\n")
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            if isinstance(obj.get("id"), int):
                last = str(obj["id"])
            elif isinstance(obj.get("through"), str):
                last = obj["through"]
        head = f"id: {last}\n".encode() if last is not None else b""
        yield head + b"data: " + line + b"\n\n"


@bp.route("/tail/stream")
@can_read_required
def tail_stream() -> Any:
    """GET /tail/stream?q=&logspace=[&after=]: text/event-stream of searchd's tail; a
    reconnecting EventSource's Last-Event-ID is the after."""
    user = current_user()
    assert user is not None
    q = request.args.get("q", "")
    logspace = request.args.get("logspace") or "main"
    if not q.strip():
        abort(400, description="q: a query is needed (* for every message)")
    if members(logspace) is not None:
        abort(400, description="the live tail follows local logspaces only: tail the member "
              "on its own box")  # fmt: skip
    after_raw = request.headers.get("Last-Event-ID") or request.args.get("after")
    after = None
    if after_raw:
        if not _ID.fullmatch(after_raw):
            abort(400, description=f"after: expected a message id, got {after_raw[:40]!r}")
        after = int(after_raw)
    try:
        stream = open_tail(searchd(), user.name, logspace, q, after=after, limit=PER_TICK)
    except TailBusy as e:
        audit("tail", logspace=logspace, query=q, status=429, detail=f"web: {e.message}")
        abort(429, description=e.message)
    except SearchdError as e:
        audit(
            "tail",
            logspace=logspace,
            query=q,
            status=error_status(e),
            detail=f"web: {e.code}: {e.message}",
        )
        if e.status < 500:
            abort(e.status, description=e.message)
        raise
    try:
        audit("tail", logspace=logspace, query=q, detail="web")
    except BaseException:
        stream.close()
        raise
    r = Response(_events(stream), mimetype="text/event-stream", direct_passthrough=True)
    r.call_on_close(stream.close)
    r.headers["X-Accel-Buffering"] = "no"
    return r
