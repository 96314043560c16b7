"""The search pages: the search form with results, histogram, top hosts and programs; one
message; export; the query help (webui/UI.md "Routes", "Page elements")."""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any
from urllib.parse import urlencode

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    get_flashed_messages,
    redirect,
    render_template,
    request,
    stream_template,
    url_for,
)
from flask_wtf.csrf import generate_csrf
from logbox_core import federation as fed
from logbox_core import times
from logbox_core.constants import FACILITIES, SEVERITIES
from logbox_core.export import (
    UnknownLogspace,
    audited_export,
    error_status,
    export_headers,
    rfc3339_us,
    start_audited,
)
from logbox_core.searchd import Searchd, SearchdError
from markupsafe import Markup, escape

from .auth import audit, can_read_required, current_user, denied, login_required
from .state import searchd, state

bp = Blueprint("search", __name__)

PRESETS = (("15m", "15 min"), ("1h", "1 h"), ("24h", "24 h"), ("7d", "7 d"), ("30d", "30 d"))
DEFAULT_PRESET = "24h"
HIST_BUCKETS = 60
# Where the search page is flushed: everything above it is sent before the top values (the
# slowest of the page's searchd calls) are waited for.
STREAM_MARK = Markup("<!-- results end -->")
TOP_K = 10
CONTEXT_US = 5 * 60 * 1_000_000  # a message's "around it" links: 5 minutes either side
MAX_LIMIT = 1000
_LOCAL_MINUTE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")
_CURSOR = re.compile(fed.CURSOR_PATTERN)  # an id; for a remote or multiple logspace, f<ids>
MAX_PREV = 1000  # cursors of the pages before this one kept in the URL (prev=)
# The result table's columns (cols=): name -> heading; a name <sd-id>.<param> is a
# structured-data field. The default is the table as it always was.
COLUMNS = {
    "time": "Received",
    "timestamp": "Event time",
    "host": "Host",
    "program": "Program",
    "severity": "Severity",
    "facility": "Facility",
    "peer": "Peer",
    "pid": "PID",
    "msgid": "Msgid",
    "message": "Message",
}
# The class of a column's cells (c-<class>; a structured-data field's is c-sd).
COLUMN_CLASS = {
    "time": "time",
    "timestamp": "ts",
    "host": "host",
    "program": "prog",
    "severity": "sev",
    "facility": "fac",
    "peer": "peer",
    "pid": "pid",
    "msgid": "msgid",
    "message": "msg",
}
DEFAULT_COLUMNS = ("time", "host", "program", "severity", "message")
# By event time (time=event) the table shows both times, the event time first.
DEFAULT_EVENT_COLUMNS = ("timestamp", "time", "host", "program", "severity", "message")
# Which time the range selects by (time=): searchd's parameter (indexer/PROTOCOL.md §2.1).
TIME_BASES = {"received": "Received time", "event": "Event time"}
MAX_COLUMNS = 20
# An SD field as a column: <sd-id>.<param>, printable ASCII without = ] " \ : , (RFC 5424
# SD-NAMEs, and the comma that separates columns in the URL).
_SD_COLUMN = re.compile(
    r'([^\x00-\x20\x7f-\U0010ffff=\]"\\:,.]{1,32})\.([^\x00-\x20\x7f-\U0010ffff=\]"\\:,]{1,32})'
)
# Reading the sd of a message: an SD-ID after "[", a parameter's ' name="'.
_SD_ID_AT = re.compile(r'[^ \]"=]+')
_SD_PARAM_AT = re.compile(r' ([^ \]"=]+)="')
# What a top value needs quoting for in a query: white space, grammar bytes, wildcards, escapes.
_NEEDS_QUOTES = re.compile(r'[\s()"\\*?]|^(AND|OR|NOT)$')
# Characters shown as \xXX / \uXXXX: C0 and C1 controls, DEL, bidi and zero-width controls,
# bytes that are not UTF-8 (\udcXX).
_ESCAPE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\udc80-\udcff]"
)


# ---------------------------------------------------------------- rendering helpers


def _escaped_char(c: str) -> str:
    """The visible form of a character that is escaped: \\xXX (a byte) or \\uXXXX."""
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:
        return f"\\x{o - 0xDC00:02x}"
    if o < 0x80:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}"


def safe_text(s: str, newlines: bool = False) -> Markup:
    """s HTML-escaped, control characters and bytes that are not UTF-8 as
    <span class="esc">\\xXX</span>; newlines: also keep a line break after each \\n."""
    out: list[str] = []
    pos = 0
    for m in _ESCAPE.finditer(s):
        out.append(str(escape(s[pos : m.start()])))
        c = m.group()
        out.append(f'<span class="esc">{_escaped_char(c)}</span>')
        if newlines and c == "\n":
            out.append("\n")
        pos = m.end()
    out.append(str(escape(s[pos:])))
    return Markup("".join(out))


@bp.app_template_filter("safe_text")
def safe_text_filter(s: str | None) -> Markup:
    """Jinja filter: safe_text(s)."""
    return safe_text(s or "")


def marked_text(segments: Iterable[tuple[str, bool]], newlines: bool = False) -> Markup:
    """Highlight segments as safe_text, the matched ones in <mark>."""
    return Markup(
        "".join(
            f"<mark>{safe_text(t, newlines)}</mark>" if on else str(safe_text(t, newlines))
            for t, on in segments
        )
    )


def span_segments(message: str, spans: Iterable[Sequence[int]]) -> list[tuple[str, bool]]:
    """message cut into (text, marked) segments at searchd's spans ([start, end) byte offsets,
    in order); the texts join back to message, bytes outside UTF-8 stay \\udcXX."""
    data = message.encode("utf-8", "surrogateescape")
    out: list[tuple[str, bool]] = []
    pos = 0
    for a, b in spans:
        if a > pos:
            out.append((data[pos:a].decode("utf-8", "surrogateescape"), False))
        out.append((data[a:b].decode("utf-8", "surrogateescape"), True))
        pos = b
    if pos < len(data):
        out.append((data[pos:].decode("utf-8", "surrogateescape"), False))
    return out


def severity_name(n: int | None) -> str:
    """A severity number's name ("" when unknown)."""
    return SEVERITIES[n] if n is not None and 0 <= n < len(SEVERITIES) else ""


def facility_name(n: int | None) -> str:
    """A facility number's name ("" when unknown)."""
    return FACILITIES[n] if n is not None and 0 <= n < len(FACILITIES) else ""


def short_time(rfc: str | None) -> str:
    """An RFC 3339 µs time as "YYYY-MM-DD HH:MM:SS.mmm" (UTC)."""
    if not rfc:
        return ""
    return rfc.replace("T", " ")[:23]


def sd_params(sd: str) -> dict[str, list[str]]:
    """RFC 5424 structured data as "<sd-id>.<param>" -> its values in order (a parameter may
    repeat); what does not parse ends the reading (the stored text is shown on the message
    page as it came)."""
    out: dict[str, list[str]] = {}
    pos, n = 0, len(sd)
    while pos < n and sd[pos] == "[":
        m = _SD_ID_AT.match(sd, pos + 1)
        if m is None:
            break
        sd_id, pos = m.group(), m.end()
        while pos < n and sd[pos] == " ":
            m = _SD_PARAM_AT.match(sd, pos)
            if m is None:
                return out
            pos = m.end()
            value: list[str] = []
            while pos < n and sd[pos] != '"':
                if sd[pos] == "\\" and pos + 1 < n and sd[pos + 1] in '"\\]':
                    pos += 1
                value.append(sd[pos])
                pos += 1
            if pos >= n:
                return out
            out.setdefault(f"{sd_id}.{m.group(1)}", []).append("".join(value))
            pos += 1
        if pos >= n or sd[pos] != "]":
            break
        pos += 1
    return out


def raw_line(msg: dict[str, Any]) -> str:
    """The syslog line a message object was parsed from, rebuilt from its fields (logbox keeps
    the fields and the body, not the line): RFC 5424 or RFC 3164 as its flags say, else the
    priority and the body."""
    pri = ""
    if msg["facility"] is not None and msg["severity"] is not None:
        pri = f"<{msg['facility'] * 8 + msg['severity']}>"
    flags = msg["flags"]
    if "rfc5424" in flags:
        head = [
            msg["timestamp"] or "-",
            msg["host"] or "-",
            msg["program"] or "-",
            msg["pid"] or "-",
            msg["msgid"] or "-",
            msg["sd"] or "-",
        ]
        line = f"{pri}1 " + " ".join(head)
        return f"{line} {msg['message']}" if msg["message"] else line
    if "rfc3164" in flags:
        ts = ""
        if msg["timestamp_us"] is not None and msg["timestamp"]:
            t = dt.datetime.fromisoformat(msg["timestamp"].replace("Z", "+00:00"))
            ts = f"{t:%b} {t.day:2d} {t:%H:%M:%S} "
        tag = msg["program"] + (f"[{msg['pid']}]" if msg["pid"] else "")
        host = f"{msg['host']} " if msg["host"] else ""
        return f"{pri}{ts}{host}{tag + ': ' if tag else ''}{msg['message']}"
    return f"{pri}{msg['message']}"


def rfc3339_s(us: int, up: bool = False) -> str:
    """µs as RFC 3339 UTC in whole seconds (up: rounded up); searchd rounds a range's from down
    and its to up to a second, so this names the same range."""
    sec = -(-us // 1_000_000) if up else us // 1_000_000
    return dt.datetime.fromtimestamp(sec, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def tick_format(span_us: int) -> str:
    """How detailed a histogram's time labels are for its span: "hms", "hm" or "mdhm" (the
    browser's script formats them again in its own zone the same way)."""
    if span_us <= 2 * 86400 * 1_000_000:
        return "hm" if span_us > 600 * 1_000_000 else "hms"
    return "mdhm"


def us_label(us: int, span_us: int) -> str:
    """A histogram axis label for µs, as detailed as the span needs (UTC)."""
    t = dt.datetime.fromtimestamp(us / 1e6, dt.UTC)
    fmt = {"hm": "%H:%M", "hms": "%H:%M:%S", "mdhm": "%m-%d %H:%M"}[tick_format(span_us)]
    return t.strftime(fmt)


def search_url(**params: Any) -> str:
    """A /search URL with params (None and "" left out); str values may carry \\udcXX bytes."""
    pairs = [
        (k, v.encode("utf-8", "surrogateescape") if isinstance(v, str) else str(v))
        for k, v in params.items()
        if v is not None and v != ""
    ]
    return url_for("search.search") + ("?" + urlencode(pairs) if pairs else "")


def message_url(logspace: str, id: int, q: str) -> str:
    """A message's URL; q (for its highlights) may carry \\udcXX bytes."""
    base = url_for("search.message", logspace=logspace, id=id)
    return base + "?" + urlencode([("q", q.encode("utf-8", "surrogateescape"))]) if q else base


def export_url(**params: Any) -> str:
    """An /export URL with params (as search_url)."""
    pairs = [
        (k, v.encode("utf-8", "surrogateescape") if isinstance(v, str) else str(v))
        for k, v in params.items()
        if v is not None and v != ""
    ]
    return url_for("search.export") + "?" + urlencode(pairs)


def field_term(field: str, value: str) -> str:
    """field:value as query text, the value quoted (and escaped) when it needs it."""
    if _NEEDS_QUOTES.search(value) or value == "":
        inner = re.sub(r'(["\\*?])', r"\\\1", value)
        return f'{field}:"{inner}"'
    return f"{field}:{value}"


def add_term(q: str, term: str) -> str:
    """q AND term (q in parentheses when it has an OR)."""
    q = q.strip()
    if not q or q == "*":
        return term
    if re.search(r"(^|\s|\))OR(\s|\(|$)", q):
        q = f"({q})"
    return f"{q} {term}"


def normalize_time(v: str | None) -> str | None:
    """A from/to value as searchd takes it: a datetime-local "YYYY-MM-DDTHH:MM" gets ":00"
    (UTC); everything else is passed on as given (searchd judges it)."""
    if v is None:
        return None
    v = v.strip()
    if not v:
        return None
    if _LOCAL_MINUTE.fullmatch(v):
        return v + ":00"
    return v


# ---------------------------------------------------------------- logspaces


def saved_links() -> list[dict[str, Any]]:
    """The saved searches the user may see, each with the URL that runs it (saved.py)."""
    from .saved import run_url, visible  # (saved.py imports this module)

    return [
        {"id": s.id, "name": s.name, "logspace": s.logspace, "shared": s.shared,
         "owner": s.owner, "href": run_url(s)}
        for s in visible()
    ]  # fmt: skip


def readable_logspaces() -> list[dict[str, Any]]:
    """searchd's logspaces the current user may read.

    :raises SearchdError: searchd refuses or is down.
    """
    user = current_user()
    assert user is not None
    local = [ls for ls in searchd().logspaces() if user.can_read(ls["name"])]
    try:
        settings = fed.load_settings(current_app.config["SITES_SETTINGS"])
    except fed.FederationError:
        return local
    if not settings.sites and not settings.multiple:
        return local
    return local + fed.listing(settings, user.can_read, fresh=False)[0]


def members(logspace: str) -> list[fed.Member] | None:
    """The members a query on logspace reaches (None: a local logspace), each one the user may
    read (403 otherwise); 404 for a remote logspace of no site."""
    user = current_user()
    assert user is not None
    try:
        ms = fed.resolve(current_app.config["SITES_SETTINGS"], logspace)
    except fed.FederationError as e:
        abort(404, description=f"logspace {logspace!r}: {e}")
    if (no := fed.unreadable(ms, user.can_read)) is not None:
        denied(f"{user.name} may not read logspace {no!r} of {logspace!r}", logspace)
    return ms


def searcher(logspace: str) -> Any:
    """What the page's queries go to: searchd, or for a remote or multiple logspace its
    members, merged (logbox_core.federation)."""
    ms = members(logspace)
    return searchd() if ms is None else fed.Federated(searchd(), ms, logspace)


# ---------------------------------------------------------------- views


@bp.route("/")
@login_required
def index() -> Any:
    """GET /: the search page."""
    return redirect(url_for("search.search"))


class Form:
    """The search parameters of the URL, checked."""

    def __init__(self, args: Any, logspaces: list[dict[str, Any]]) -> None:
        self.q: str = args.get("q", "")
        self.raw_from: str = args.get("from", "")
        self.raw_to: str = args.get("to", "")
        if not self.raw_from and not self.raw_to:
            self.raw_from = f"-{DEFAULT_PRESET}"
        self.time_from = normalize_time(self.raw_from)
        self.time_to = normalize_time(self.raw_to)
        names = [ls["name"] for ls in logspaces]
        self.logspace: str = args.get("logspace") or (
            "main" if "main" in names or not names else names[0]
        )
        self.order: str = args.get("order") or "newest"
        self.cursor: str = args.get("cursor") or ""
        self.limit_raw: str = args.get("limit") or ""
        self.tz: str = args.get("tz") or ""
        self.basis: str = args.get("time") or "received"
        self.errors: list[str] = []
        if self.basis not in TIME_BASES:
            self.errors.append(f"time: expected received or event, got {self.basis!r}")
            self.basis = "received"
        if self.order not in ("newest", "oldest"):
            self.errors.append(f"order: expected newest or oldest, got {self.order!r}")
            self.order = "newest"
        if self.cursor and not _CURSOR.fullmatch(self.cursor):
            self.errors.append(f"cursor: expected a cursor of a page, got {self.cursor!r}")
            self.cursor = ""
        # The cursors of the pages between the first and this one, oldest page first.
        self.prev: list[str] = [c for c in (args.get("prev") or "").split(",") if c]
        if len(self.prev) > MAX_PREV or not all(_CURSOR.fullmatch(c) for c in self.prev):
            self.errors.append(f"prev: expected up to {MAX_PREV} message ids, comma-separated")
            self.prev = []
        if self.tz not in ("", "utc"):
            self.errors.append(f"tz: expected utc or nothing (the browser's zone), got {self.tz!r}")
            self.tz = ""
        self.limit = int(current_app.config["PAGE_SIZE"])
        if self.limit_raw:
            if self.limit_raw.isdigit() and 1 <= int(self.limit_raw) <= MAX_LIMIT:
                self.limit = int(self.limit_raw)
            else:
                self.errors.append(f"limit: expected 1..{MAX_LIMIT}, got {self.limit_raw!r}")
        self.columns = self._columns(args.getlist("cols"))
        self.preset = next(
            (p for p, _ in PRESETS if self.raw_from == f"-{p}" and not self.raw_to), None
        )

    def _columns(self, values: list[str]) -> list[str]:
        """cols= (repeated, or comma-separated) as column names; the default when empty."""
        cols: list[str] = []
        for v in values:
            for c in re.split(r"[,\s]+", v):
                if not c or c in cols:
                    continue
                if c not in COLUMNS and not _SD_COLUMN.fullmatch(c):
                    self.errors.append(
                        f"cols: unknown column {c!r} (one of {', '.join(COLUMNS)}, "
                        "or a structured-data field <sd-id>.<param>)"
                    )
                    continue
                cols.append(c)
        if len(cols) > MAX_COLUMNS:
            self.errors.append(f"cols: at most {MAX_COLUMNS} columns")
            cols = cols[:MAX_COLUMNS]
        return cols or list(self.default_columns)

    @property
    def default_columns(self) -> tuple[str, ...]:
        """The columns without cols=: both times by event time."""
        return DEFAULT_EVENT_COLUMNS if self.basis == "event" else DEFAULT_COLUMNS

    @property
    def has_query(self) -> bool:
        """Whether a query was typed (without one the page shows the newest messages)."""
        return bool(self.q.strip())

    @property
    def query(self) -> str:
        """What searchd is asked: the query, or * (every message) when there is none."""
        return self.q if self.has_query else "*"

    @property
    def cols_param(self) -> str | None:
        """cols= for links: None for the default columns."""
        return None if self.columns == list(self.default_columns) else ",".join(self.columns)

    @property
    def sd_columns(self) -> list[str]:
        """The structured-data fields among the columns."""
        return [c for c in self.columns if c not in COLUMNS]

    def url(self, **over: Any) -> str:
        """This search's URL with some parameters replaced (paging ones dropped unless given)."""
        p: dict[str, Any] = {
            "q": self.q,
            "from": self.raw_from,
            "to": self.raw_to,
            "logspace": self.logspace,
            "order": None if self.order == "newest" else self.order,
            "limit": self.limit_raw or None,
            "tz": self.tz or None,
            "time": None if self.basis == "received" else self.basis,
            "cols": self.cols_param,
        }
        p.update(over)
        return search_url(**p)


def resolve_time(v: str | None, now_us: int) -> str | None:
    """now and relative times (-15m, +1d) as absolute µs times against now_us, so that the
    page's several searchd calls cover the very same range; other forms as given."""
    if v is None:
        return None
    if v == "now":
        return rfc3339_us(now_us)
    m = times.RELATIVE.fullmatch(v)
    if m is None:
        return v
    delta = int(m.group(2)) * times.UNIT_S[m.group(3)] * 1_000_000
    return rfc3339_us(now_us + delta if m.group(1) == "+" else now_us - delta)


def _range_params(form: Form) -> list[tuple[str, str]]:
    """from/to for searchd, both absolute when they were relative (to: now when not given)."""
    now_us = time.time_ns() // 1000
    t_from = resolve_time(form.time_from, now_us)
    t_to = resolve_time(form.time_to, now_us) or rfc3339_us(now_us)
    return ([("from", t_from)] if t_from is not None else []) + [("to", t_to)]


def _run_all(sd: Searchd | fed.Federated, form: Form) -> dict[str, Future]:
    """The page's searchd calls (search, histogram, top hosts, top programs), side by side."""
    pool = state().pool
    base = [
        ("logspace", form.logspace),
        ("q", form.query),
        *_range_params(form),
        ("time", form.basis),
    ]
    search_params = [*base, ("limit", str(form.limit)), ("order", form.order), ("highlight", "1")]
    if form.cursor:
        search_params.append(("cursor", form.cursor))
    return {
        "search": pool.submit(sd.get, "/v1/search", search_params),
        "histogram": pool.submit(sd.get, "/v1/histogram", [*base, ("buckets", str(HIST_BUCKETS))]),
        "hosts": pool.submit(sd.get, "/v1/top", [*base, ("field", "host"), ("k", str(TOP_K))]),
        "programs": pool.submit(
            sd.get, "/v1/top", [*base, ("field", "program"), ("k", str(TOP_K))]
        ),
    }


def _archive(*answers: dict[str, Any]) -> dict[str, Any] | None:
    """The archived days the answers read (searchd's "archive", indexer/ARCHIVE.md §7), and
    the time reading them took, or None when they read none."""
    days: set[str] = set()
    ms = 0.0
    for a in answers:
        if isinstance(a.get("archive"), dict):
            days.update(a["archive"]["days"])
            ms += float(a["archive"]["ms"])
    return {"days": sorted(days), "ms": round(ms, 1)} if days else None


def _first_answers(futures: dict[str, Future]) -> dict[str, Any]:
    """The search's and the histogram's answers (the page's top part); the search's own error
    first when something failed.

    :raises SearchdError: the first failure.
    """
    out: dict[str, Any] = {}
    first: SearchdError | None = None
    for name in ("search", "histogram"):
        try:
            out[name] = futures[name].result()
        except SearchdError as e:
            first = first or e
    if first is not None:
        raise first
    return out


def _histogram(doc: dict[str, Any], form: Form) -> dict[str, Any]:
    """The histogram's bars: geometry for the SVG and the zoom links."""
    buckets = doc["buckets"]
    step = doc["step_us"]
    end = doc["to"]
    top = max((b["count"] for b in buckets), default=0)
    axis = axis_ticks(top)
    width, height = 1200, 120
    n = max(len(buckets), 1)
    bw = width / n
    bars = []
    for k, b in enumerate(buckets):
        b_from = b["from"]
        b_to = min(b_from + step, end) if k == len(buckets) - 1 else b_from + step
        h = max(b["count"] / axis[-1] * (height - 4), 2.0 if b["count"] else 0.0)
        f, t = rfc3339_s(b_from), rfc3339_s(b_to, up=True)
        bars.append(
            {
                "x": round(k * bw, 2),
                "w": round(max(bw - 1, 1), 2),
                "y": round(height - h, 2),
                "h": round(h, 2),
                "count": b["count"],
                "from": f,
                "to": t,
                "href": form.url(**{"from": f, "to": t, "cursor": None}),
                "label": f"{short_time(f)[:19]} – {short_time(t)[:19]} UTC: {b['count']}",
                "from_us": b_from,
            }
        )
    span = doc["to"] - doc["from"]
    ticks = []
    if buckets:
        for k in range(0, len(buckets), max(1, len(buckets) // 6)):
            us = buckets[k]["from"]
            ticks.append({"x": round(k * bw, 2), "label": us_label(us, span), "us": us})
    y_ticks = [
        {"value": v, "y": round(height - v / axis[-1] * (height - 4), 2), "label": count_label(v)}
        for v in axis
    ]
    return {
        "bars": bars,
        "width": width,
        "height": height,
        "max": top,
        "axis_max": axis[-1],
        "y_ticks": y_ticks,
        "ticks": ticks,
        "tick_format": tick_format(span),
    }


def axis_ticks(top: int) -> list[int]:
    """The count axis of a histogram whose tallest bar is top: 0 and up to 4 more ticks a
    round step apart (1, 2 or 5 times a power of ten), the last one >= top (>= 1)."""
    power = 1
    while True:
        for step in (power, 2 * power, 5 * power):
            n = -(-max(top, 1) // step)
            if n <= 4:
                return [i * step for i in range(n + 1)]
        power *= 10


def count_label(n: int) -> str:
    """A count as an axis label: 950, 12k, 1.5M."""
    if n < 10_000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:g}k"
    return f"{n / 1_000_000:g}M"


def _tops(future: Future, field: str, form: Form) -> dict[str, Any]:
    """A top list (waiting for its searchd answer): rows of value, count and the link that adds
    field:value to the query, or the error that kept it from being made."""
    try:
        doc = future.result()
    except SearchdError as e:
        return {"rows": [], "max": 0, "error": f"{e.code}: {e.message}"}
    rows = []
    # a merged answer's own (a member missing, an order that may be inexact); searchd's are the
    # search's, shown above
    warnings = (doc.get("warnings") or []) if "members" in doc else []
    for v in doc["values"]:
        href = None
        if v["value"] != "":
            href = form.url(q=add_term(form.q, field_term(field, v["value"])), cursor=None)
        rows.append({"value": v["value"], "count": v["count"], "href": href})
    return {
        "rows": rows,
        "max": rows[0]["count"] if rows else 0,
        "error": None,
        "warning": "; ".join(warnings) if warnings else None,
    }


def _query_error(q: str, e: SearchdError) -> dict[str, Any]:
    """The parts of a bad query message: text before, at and after the error's byte position."""
    pos = e.position
    if pos is None:
        return {"message": e.message, "before": q, "at": "", "after": "", "position": None}
    qb = q.encode("utf-8", "surrogateescape")
    pos = max(0, min(pos, len(qb)))
    before = qb[:pos].decode("utf-8", "surrogateescape")
    rest = qb[pos:].decode("utf-8", "surrogateescape")
    return {
        "message": e.message,
        "before": before,
        "at": rest[:1] or " ",
        "after": rest[1:],
        "position": e.position,
    }


@bp.route("/search")
@login_required
def search() -> Any:
    """GET /search: the form; with q, the results, histogram, count and top values."""
    user = current_user()
    assert user is not None
    logspaces = readable_logspaces()
    form = Form(request.args, logspaces)
    if not user.can_read(form.logspace):
        denied(f"{user.name} may not read logspace {form.logspace!r}", form.logspace)
    ctx: dict[str, Any] = {
        "form": form,
        "logspaces": logspaces,
        "saved": saved_links(),
        "presets": PRESETS,
        "columns": COLUMNS,
        "column_class": COLUMN_CLASS,
        "time_bases": TIME_BASES,
        "result": None,
        "query_error": None,
        "param_error": None,
    }
    if form.errors:
        ctx["param_error"] = "; ".join(form.errors)
        return render_template("search/search.html", **ctx), 400
    t0 = time.monotonic()
    try:
        futures = _run_all(searcher(form.logspace), form)
        answers = _first_answers(futures)
    except SearchdError as e:
        status = error_status(e)
        audit(
            "search",
            logspace=form.logspace,
            query=form.query,
            status=status,
            detail=f"{e.code}: {e.message}",
        )
        if e.code == "bad_query":
            ctx["query_error"] = _query_error(form.q, e)
        elif e.code in ("bad_parameter", "too_broad"):
            ctx["param_error"] = e.message
        elif e.status == 429:  # this user's searches fill their queue in searchd
            wait = e.retry_after or 1
            ctx["param_error"] = f"{e.message} (try again in {wait} s)"
            page = render_template("search/search.html", **ctx)
            return page, status, {"Retry-After": str(wait)}
        else:
            raise
        return render_template("search/search.html", **ctx), status
    res = answers["search"]
    audit("search", logspace=form.logspace, query=form.query, results=res["total"], detail="web")
    hits = []
    for h in res["hits"]:
        hits.append(
            {
                **h,
                "time": short_time(h["received"]),
                "event_utc": None if h["timestamp_us"] is None else rfc3339_us(h["timestamp_us"]),
                "event_time": ""
                if h["timestamp_us"] is None
                else short_time(rfc3339_us(h["timestamp_us"])),
                "severity_name": severity_name(h["severity"]),
                "facility_name": facility_name(h["facility"]),
                "sd_values": _sd_values(h["sd"], form.sd_columns),
                "text": marked_text(span_segments(h["message"], h["spans"])),
                "href": message_url(h.get("logspace", form.logspace), h["id"], form.q),
            }
        )
    pinned = {"from": rfc3339_s(res["from"]), "to": rfc3339_s(res["to"], up=True)}
    basis = {"time": form.basis} if form.basis != "received" else {}
    ctx["result"] = {
        "total": res["total"],
        "query": res["query"],
        "hits": hits,
        "took_ms": round((time.monotonic() - t0) * 1000, 1),
        "warnings": list(dict.fromkeys(res["warnings"] + answers["histogram"]["warnings"])),
        "archive": _archive(res, answers["histogram"]),
        "range": pinned,
        "range_us": {
            "from": res["from"] // 1_000_000 * 1_000_000,
            "to": -(-res["to"] // 1_000_000) * 1_000_000,
        },
        # The same page in the other zone: UTC <-> the browser's.
        "tz_url": form.url(
            tz=None if form.tz else "utc",
            cursor=form.cursor or None,
            prev=",".join(form.prev) or None,
            **pinned,
        ),
        **_paging(form, res["next_cursor"], pinned),
        "order_url": form.url(order="newest" if form.order == "oldest" else "oldest", cursor=None),
        "histogram": _histogram(answers["histogram"], form),
        # Called by the template after the results went out (see STREAM_MARK).
        "tops": {
            "hosts": lambda: _tops(futures["hosts"], "host", form),
            "programs": lambda: _tops(futures["programs"], "program", form),
        },
        "export_csv": export_url(
            q=form.query, logspace=form.logspace, order=form.order, format="csv", **basis, **pinned
        ),
        "export_ndjson": export_url(
            q=form.query,
            logspace=form.logspace,
            order=form.order,
            format="ndjson",
            **basis,
            **pinned,
        ),
    }
    ctx["stream_mark"] = STREAM_MARK
    # Flashes are taken from the session now, and the form's CSRF token (saving the search) is
    # put in it: the session is saved before the streamed body is made.
    get_flashed_messages()
    generate_csrf()
    return Response(_chunks(stream_template("search/search.html", **ctx)), mimetype="text/html")


def _sd_values(sd: str, fields: list[str]) -> dict[str, str]:
    """The values of the structured-data fields shown as columns ("" when absent; a
    parameter that repeats: its values joined by ", ")."""
    if not fields:
        return {}
    params = sd_params(sd)
    return {f: ", ".join(params.get(f, [])) for f in fields}


def _paging(form: Form, next_cursor: str | None, pinned: dict[str, str]) -> dict[str, Any]:
    """The paging links: first (not on the first page), previous (the cursor before this
    page's, from prev=), next (this page's cursor pushed onto prev=), all on the pinned range.
    Page n's URL holds the cursors of pages 2..n-1 in prev=, so "Previous page" is exactly the
    page before."""
    on_first = not form.cursor
    prev_url = first_url = next_url = None
    if not on_first:
        first_url = form.url(**pinned)
        before = form.prev[:-1]
        prev_url = form.url(
            cursor=form.prev[-1] if form.prev else None, prev=",".join(before) or None, **pinned
        )
    if next_cursor:
        stack = [*form.prev, form.cursor] if form.cursor else []
        next_url = form.url(cursor=next_cursor, prev=",".join(stack) or None, **pinned)
    return {
        "page": 1 if on_first else len(form.prev) + 2,
        "first_url": first_url,
        "prev_url": prev_url,
        "next_url": next_url,
    }


def _chunks(pieces: Iterator[str]) -> Iterator[str]:
    """The rendered page in two writes: up to STREAM_MARK (form, count, histogram, results) as
    soon as it is made, then the rest (the top values, which take searchd longest)."""
    buf: list[str] = []
    for p in pieces:
        buf.append(p)
        if p == STREAM_MARK:
            yield "".join(buf)
            buf = []
    if buf:
        yield "".join(buf)


@bp.route("/messages/<logspace>/<int:id>")
@can_read_required
def message(logspace: str, id: int) -> Any:
    """GET /messages/<logspace>/<id>: every field, the text and the raw bytes."""
    q = request.args.get("q", "")
    try:
        msg = _message(logspace, id, q)
    except SearchdError as e:
        audit("message", logspace=logspace, status=error_status(e), detail=f"id {id}: {e.code}")
        if e.status == 404:
            abort(404, description=e.message)
        raise
    audit("message", logspace=logspace, results=1, detail=f"id {id}")
    raw = msg["message"].encode("utf-8", "surrogateescape")
    line = raw_line(msg)
    segments = span_segments(msg["message"], msg.get("spans", []))
    around = {
        "from": rfc3339_s(msg["received_us"] - CONTEXT_US),
        "to": rfc3339_s(msg["received_us"] + CONTEXT_US, up=True),
        "logspace": logspace,
    }
    context = {"all": search_url(q="*", **around)}
    if msg["host"]:
        context["host"] = search_url(q=field_term("host", msg["host"]), **around)
    return render_template(
        "search/message.html",
        context=context,
        logspace=logspace,
        msg=msg,
        text=marked_text(segments, newlines=True),
        raw_lines=hexdump(raw),
        raw_len=len(raw),
        raw_line=line,
        severity=severity_name(msg["severity"]),
        facility=facility_name(msg["facility"]),
        back=request.referrer if _same_site(request.referrer) else None,
    )


def _message(logspace: str, id: int, q: str) -> dict[str, Any]:
    """searchd's message object; with q, its spans for q (none when q does not parse).

    :raises SearchdError: searchd refuses or is down.
    """
    ms = members(logspace)
    if ms is not None:
        try:
            return fed.remote_message(ms, logspace, id, q if q.strip() else None)
        except SearchdError as e:
            if e.code != "bad_query":
                raise
            return fed.remote_message(ms, logspace, id)
    params = [("logspace", logspace)]
    if q.strip():
        try:
            return searchd().get(f"/v1/messages/{id}", [*params, ("q", q)])
        except SearchdError as e:
            if e.code != "bad_query":
                raise
    return searchd().get(f"/v1/messages/{id}", params)


def _same_site(url: str | None) -> bool:
    """Whether url is a page of this site (for a "back" link)."""
    return bool(url) and str(url).startswith(request.host_url)


def hexdump(raw: bytes) -> list[dict[str, Any]]:
    """raw as rows of 16 bytes: offset, hex and the bytes as text (printable ASCII, else ".")."""
    rows = []
    for off in range(0, len(raw), 16):
        chunk = raw[off : off + 16]
        rows.append(
            {
                "offset": f"{off:08x}",
                "hex": " ".join(f"{b:02x}" for b in chunk),
                "text": "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk),
            }
        )
    return rows


@bp.route("/export")
@can_read_required
def export() -> Any:
    """GET /export: every match as CSV or NDJSON, streamed (a snapshot), audited when it ends."""
    user = current_user()
    assert user is not None
    args = request.args
    logspace = args.get("logspace") or "main"
    q = args.get("q", "")
    order = args.get("order") or "newest"
    fmt = args.get("format") or "csv"
    basis = args.get("time") or "received"
    if basis not in TIME_BASES:
        abort(400, description=f"time: expected received or event, got {basis!r}")
    if not q.strip():
        abort(400, description="q: a query is needed (* for every message)")
    if order not in ("newest", "oldest"):
        abort(400, description=f"order: expected newest or oldest, got {order!r}")
    if fmt not in ("csv", "ndjson"):
        abort(400, description=f"format: expected csv or ndjson, got {fmt!r}")
    if members(logspace) is not None:
        abort(400, description="export is served for local logspaces only: export from the "
              "member's own box")  # fmt: skip
    ex = audited_export(
        searchd(),
        state().accounts,
        user.name,
        request.remote_addr or "unknown",
        logspace,
        q,
        order=order,
        fmt=fmt,
        time_from=normalize_time(args.get("from")),
        time_to=normalize_time(args.get("to")),
        basis=basis,
    )
    try:
        start_audited(ex, audit)
    except SearchdError as e:
        if e.status < 500:
            abort(e.status, description=e.message)
        raise
    except UnknownLogspace as e:
        abort(404, description=e.message)
    return Response(ex, headers=export_headers(ex))


@bp.route("/help/query")
@login_required
def help_query() -> Any:
    """GET /help/query: the query syntax."""
    return render_template("help/query.html")
