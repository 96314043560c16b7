"""Exports: every match of a query, streamed as NDJSON or CSV, shared by the API
(GET /api/v1/logspaces/<l>/export) and the web UI (GET /export). No Flask.

An export is a snapshot: the first page (with the total) is asked for at start(), and every
later page searches the first page's exact time range; with order=oldest it also stops at the
logspace's next_id as of the start (messages that arrive meanwhile are left out). Pages are
searchd /v1/search pages of EXPORT_PAGE hits, written out one at a time.

Text is escaped by one rule, owned here: NDJSON is the JSON encoder's output (_JSON), and a CSV
cell gets that encoder's escape for each control character (csv_cell) after the spreadsheet
formula guard (a leading `'`). A page's searchd warnings (a damaged message or segment) are
kept and written after the last row: NDJSON `{"warning": "..."}` lines, CSV `# warning: ...`
rows; the audit entry counts them (API.md §5).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .searchd import Searchd, SearchdError

if TYPE_CHECKING:
    from .accounts import Accounts

EXPORT_PAGE = 2000  # hits a page: a page's parsed JSON is what an export holds in memory
FORMATS = ("ndjson", "csv")
CSV_COLUMNS = (
    "id", "received", "timestamp", "host", "peer", "program", "pid", "msgid", "facility",
    "severity", "flags", "sd", "message",
)  # fmt: skip
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8; header=present", "ndjson": "application/x-ndjson"}
WARNINGS_KEPT = 100  # distinct warnings an export writes out; past that it counts them
BENIGN_WARNING = "hits cut after "  # searchd cut a big page: the export follows next_cursor

# The JSON encoder of NDJSON rows, and so the owner of every escape an export writes: ASCII
# output, control characters as \n, \r, \t, \b, \f or \u00XX (PROTOCOL.md's \udcXX for bytes
# that are not UTF-8 passes through as it came).
_JSON = json.JSONEncoder(separators=(",", ":"))
# Control characters (C0, DEL, C1): in CSV they are written as _JSON writes them.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_CONTROL_ESCAPES = {chr(c): _JSON.encode(chr(c))[1:-1] for c in [*range(0x20), *range(0x7F, 0xA0)]}
# OWASP's CSV injection rule: a cell starting with one of these gets a leading "'".
FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


class UnknownLogspace(LookupError):
    """order=oldest for a logspace searchd does not list."""

    def __init__(self, logspace: str) -> None:
        self.message = f"no logspace '{logspace}'"
        super().__init__(self.message)


def error_status(e: SearchdError) -> int:
    """The status a searchd error is answered with (5xx other than 503 become 500)."""
    return e.status if e.status < 500 or e.status == 503 else 500


def rfc3339_us(us: int) -> str:
    """µs since the epoch as RFC 3339 UTC with µs (searchd reads it back exactly)."""
    s, frac = divmod(us, 1_000_000)
    return dt.datetime.fromtimestamp(s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:06d}Z"


def csv_header() -> bytes:
    """The CSV header row."""
    return (",".join(CSV_COLUMNS) + "\r\n").encode()


def escape_controls(s: str) -> str:
    """s with each control character (U+0000..U+001F, U+007F..U+009F) written as the NDJSON
    export writes it: ESC as the six characters \\u001b, a line feed as \\n."""
    if _CONTROL.search(s) is None:
        return s
    return _CONTROL.sub(lambda m: _CONTROL_ESCAPES[m.group()], s)


def csv_cell(s: str) -> str:
    """A text cell as CSV exports write it: a leading "'" when s starts with =, +, -, @, tab
    or CR (so no spreadsheet reads it as a formula), then its control characters escaped."""
    if s.startswith(FORMULA_LEADS):
        s = "'" + s
    return escape_controls(s)


def _csv_bytes(rows: list[list[Any]]) -> bytes:
    """rows as CSV (RFC 4180), bytes that are not UTF-8 as they were stored."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerows(rows)
    return buf.getvalue().encode("utf-8", "surrogateescape")


def csv_rows(hits: list[dict[str, Any]]) -> bytes:
    """hits as CSV rows: text cells through csv_cell, numbers as they are."""
    return _csv_bytes(
        [
            [
                h["id"],
                csv_cell(h["received"]),
                csv_cell(h["timestamp"] or ""),
                csv_cell(h["host"]),
                csv_cell(h["peer"]),
                csv_cell(h["program"]),
                csv_cell(h["pid"]),
                csv_cell(h["msgid"]),
                "" if h["facility"] is None else h["facility"],
                "" if h["severity"] is None else h["severity"],
                csv_cell("|".join(h["flags"])),
                csv_cell(h["sd"]),
                csv_cell(h["message"]),
            ]
            for h in hits
        ]
    )


def csv_note(kind: str, text: str) -> bytes:
    """A CSV row after the last message row: "# <kind>: <text>" in the first cell (where a
    message row has its id), the other cells empty."""
    return _csv_bytes([[csv_cell(f"# {kind}: {text}")] + [""] * (len(CSV_COLUMNS) - 1)])


def ndjson_rows(hits: list[dict[str, Any]]) -> bytes:
    """hits as NDJSON lines (strings escaped as searchd does: \\udcXX for other bytes)."""
    return "".join(_JSON.encode(h) + "\n" for h in hits).encode("ascii")


def ndjson_line(obj: dict[str, Any]) -> bytes:
    """One NDJSON line (a warning or an error object)."""
    return (_JSON.encode(obj) + "\n").encode("ascii")


class Export:
    """One export: iterate it for the body's chunks (the CSV header, then each page), close()
    it when the body ends or the client goes away; on_end(export) runs once then, with rows,
    status and detail set (for the audit entry)."""

    def __init__(
        self,
        sd: Searchd,
        logspace: str,
        q: str,
        *,
        order: str = "newest",
        fmt: str = "ndjson",
        time_from: str | None = None,
        time_to: str | None = None,
        basis: str = "received",
        on_end: Callable[[Export], None] | None = None,
    ) -> None:
        if order not in ("newest", "oldest"):
            raise ValueError(f"order: expected newest or oldest, got {order!r}")
        if basis not in ("received", "event"):
            raise ValueError(f"time: expected received or event, got {basis!r}")
        if fmt not in FORMATS:
            raise ValueError(f"format: expected ndjson or csv, got {fmt!r}")
        self.sd, self.logspace, self.q, self.order, self.fmt = sd, logspace, q, order, fmt
        self.time_from, self.time_to = time_from, time_to
        self.basis = basis  # which time from and to select by (searchd's time=)
        self.on_end = on_end
        self.total: int | None = None
        self.rows = 0
        self.status = 200
        self.detail: str | None = None
        self.finished = False
        self.ended = False
        self.warnings: dict[str, None] = {}  # the first WARNINGS_KEPT distinct ones, in order
        self.more_warnings = 0  # distinct or not, past those
        self._first: dict[str, Any] = {}
        self._params: list[tuple[str, str]] = []
        self._stop_id: int | None = None
        self._gen: Iterator[bytes] | None = None

    @property
    def csv(self) -> bool:
        """Whether this export writes CSV."""
        return self.fmt == "csv"

    @property
    def media_type(self) -> str:
        """The Content-Type of the body."""
        return MEDIA_TYPES[self.fmt]

    @property
    def filename(self) -> str:
        """The download's file name."""
        return f"logbox-{self.logspace}.{self.fmt}"

    def start(self) -> Export:
        """Asks searchd for the first page (and the total): errors surface here, before any
        byte of the body.

        :raises SearchdError: searchd refused or cannot be reached.
        :raises UnknownLogspace: order=oldest and searchd does not list the logspace.
        """
        if self.order == "oldest":
            known = {ls["name"]: ls for ls in self.sd.logspaces()}
            if self.logspace not in known:
                raise UnknownLogspace(self.logspace)
            self._stop_id = known[self.logspace]["next_id"]
        params = [
            ("logspace", self.logspace),
            ("q", self.q),
            ("order", self.order),
            ("limit", str(EXPORT_PAGE)),
            ("time", self.basis),
        ]
        rng = [(k, v) for k, v in (("from", self.time_from), ("to", self.time_to)) if v is not None]
        first = self.sd.get("/v1/search", params + rng + [("total", "1")])
        # The snapshot: every later page searches the first page's range.
        params += [
            ("from", rfc3339_us(first["from"])),
            ("to", rfc3339_us(first["to"])),
            ("total", "0"),
        ]
        self._first, self._params, self.total = first, params, first["total"]
        self._gen = self._body()
        return self

    def __iter__(self) -> Export:
        return self

    def __next__(self) -> bytes:
        if self._gen is None:
            raise RuntimeError("Export.start() was not called")
        return next(self._gen)

    @property
    def warning_count(self) -> int:
        """Warnings met so far (the distinct ones kept, then every one past them)."""
        return len(self.warnings) + self.more_warnings

    def warning_summary(self) -> str | None:
        """For the audit entry: "N warnings, the first: ..." (None without any)."""
        if not self.warnings:
            return None
        n = self.warning_count
        first = next(iter(self.warnings))
        return f"{n} warning{'s' if n != 1 else ''}, the first: {first}"

    def _note_warnings(self, page: dict[str, Any]) -> None:
        """Keeps a page's searchd warnings (but the benign page cut); repeated ones (a damaged
        segment warns on every page) count once while they are among those kept."""
        for w in page.get("warnings") or ():
            if not isinstance(w, str) or w.startswith(BENIGN_WARNING) or w in self.warnings:
                continue
            if len(self.warnings) < WARNINGS_KEPT:
                self.warnings[w] = None
            else:
                self.more_warnings += 1

    def _trailer(self, error: SearchdError | None) -> Iterator[bytes]:
        """What follows the last row: each warning kept, how many more, then the error that
        cut the export short."""
        notes = list(self.warnings)
        if self.more_warnings:
            notes.append(f"{self.more_warnings} more warnings not shown")
        for w in notes:
            yield csv_note("warning", w) if self.csv else ndjson_line({"warning": w})
        if error is not None:
            if self.csv:
                yield csv_note("error", f"{error.code}: {error.message}")
            else:
                yield ndjson_line(error.to_json())

    def _body(self) -> Iterator[bytes]:
        """The chunks: the CSV header, then each page, then the trailer."""
        if self.csv:
            yield csv_header()
        page = self._first
        self._first = {}
        while True:
            self._note_warnings(page)
            hits = page["hits"]
            done = page.get("next_cursor") is None
            if self._stop_id is not None and hits and hits[-1]["id"] >= self._stop_id:
                hits = [h for h in hits if h["id"] < self._stop_id]
                done = True
            if hits:
                self.rows += len(hits)
                yield csv_rows(hits) if self.csv else ndjson_rows(hits)
            if done:
                break
            cursor = page["next_cursor"]
            try:
                page = self.sd.get("/v1/search", self._params + [("cursor", str(cursor))])
            except SearchdError as e:
                self.status = error_status(e)
                self.detail = f"cut after {self.rows} rows: {e.code}: {e.message}"
                yield from self._trailer(e)
                return
        self.finished = True
        yield from self._trailer(None)

    def close(self) -> None:
        """Ends the stream and calls on_end (once)."""
        if self._gen is not None:
            self._gen.close()  # type: ignore[attr-defined]
        if self.ended:
            return
        self.ended = True
        if not self.finished and self.status == 200:
            self.detail = f"client went away after {self.rows} rows"
        if self.on_end is not None:
            self.on_end(self)


def audited_export(
    sd: Searchd,
    acc: Accounts,
    user: str,
    address: str,
    logspace: str,
    q: str,
    **kw: Any,
) -> Export:
    """An Export (kw: order, fmt, time_from, time_to, basis) whose end writes its "export" audit
    entry to acc for user at address: the rows, the status, the detail or else the format."""

    def audit_end(ex: Export) -> None:
        """The export's audit entry, when its stream ends."""
        acc.audit(
            "export",
            user=user,
            address=address,
            logspace=logspace,
            query=q,
            results=ex.rows,
            status=ex.status,
            detail="; ".join(filter(None, [ex.detail or f"format {ex.fmt}", ex.warning_summary()])),
        )

    return Export(sd, logspace, q, on_end=audit_end, **kw)


def start_audited(ex: Export, audit: Callable[..., object]) -> Export:
    """ex.start(); when it cannot start, the app's audit("export", logspace=, query=, status=,
    detail=) is called first and the error raised after it.

    :raises SearchdError: searchd refused or cannot be reached.
    :raises UnknownLogspace: order=oldest and searchd does not list the logspace.
    """
    try:
        return ex.start()
    except SearchdError as e:
        audit(
            "export",
            logspace=ex.logspace,
            query=ex.q,
            status=error_status(e),
            detail=f"{e.code}: {e.message}",
        )
        raise
    except UnknownLogspace as e:
        audit("export", logspace=ex.logspace, query=ex.q, status=404, detail=e.message)
        raise


def export_headers(ex: Export) -> dict[str, str]:
    """The HTTP headers of a started export's response: Content-Type, X-Logbox-Total and
    Content-Disposition (a download named after the logspace)."""
    return {
        "Content-Type": ex.media_type,
        "X-Logbox-Total": str(ex.total),
        "Content-Disposition": f'attachment; filename="{ex.filename}"',
    }
