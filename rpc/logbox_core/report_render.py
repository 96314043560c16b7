"""A built report drawn (rpc/API.md §6.4): its charts as PNG (matplotlib, Agg, no pyplot and no
display), its HTML page and its email.

The one HTML template serves both: in the email each chart is a `cid:` reference to an inline
image part (multipart/related beside a plain-text alternative); in the downloadable page it is a
`data:image/png;base64` URI, so the file stands alone. Every value from the store (saved search
names and queries, hosts, programs, alert names, report names) is hostile: the template escapes
everything (Jinja2 with autoescape), text is made printable (bytes that are not UTF-8, control
characters) before, and charts carry no value from the store, only counts, times and severity
names.
"""

from __future__ import annotations

import base64
import datetime as dt
import email.utils
import hashlib
import io
import socket
from email.message import EmailMessage
from typing import Any

from jinja2 import Environment

from .report_build import ReportData, Section

CHART_DPI = 100
TEXT_MAX = 200  # characters of a value shown (hosts, programs, queries are cut there)

TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{ title }}</title>
<style>
body { font-family: sans-serif; color: #222; max-width: 960px; margin: 1em auto; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #666; }
img { max-width: 100%; }
</style></head>
<body id="report">
<h1>{{ title }}</h1>
<p class="muted">Logspace <b>{{ report.logspace }}</b>, {{ period.kind }} period {{ period.id }}:
{{ frm }} to {{ to }} (UTC). Owner {{ report.owner }}. Built {{ built }} on {{ box }}.</p>
{% for s in sections %}
<section class="report-section" id="section-{{ loop.index }}">
<h2>{{ s.title }}</h2>
{% if s.query is none %}<p class="muted">{% for w in s.warnings %}{{ w }} {% endfor %}</p>
{% else %}
<p>Query <code>{{ s.query }}</code>: <b class="total">{{ s.total }}</b> messages.</p>
{% for w in s.warnings %}<p class="muted">warning: {{ w }}</p>{% endfor %}
<img src="{{ s.charts.histogram }}" alt="messages over the period" width="{{ s.w }}">
<h3>By severity</h3>
<img src="{{ s.charts.severity }}" alt="messages by severity" width="{{ s.w }}">
<table class="severities"><tr>{% for k in s.severities %}<th>{{ k }}</th>{% endfor %}</tr>
<tr>{% for v in s.severities.values() %}<td class="n">{{ v }}</td>{% endfor %}</tr></table>
<div style="display:flex;gap:2em;flex-wrap:wrap">
<table class="hosts"><tr><th>Top hosts</th><th>messages</th></tr>
{% for v, n in s.hosts %}<tr><td>{{ v }}</td><td class="n">{{ n }}</td></tr>
{% else %}<tr><td colspan="2" class="muted">none</td></tr>{% endfor %}</table>
<table class="programs"><tr><th>Top programs</th><th>messages</th></tr>
{% for v, n in s.programs %}<tr><td>{{ v }}</td><td class="n">{{ n }}</td></tr>
{% else %}<tr><td colspan="2" class="muted">none</td></tr>{% endfor %}</table>
</div>
{% endif %}
</section>
{% endfor %}
<section id="alerts"><h2>Alerts</h2>
{% if alerts is none %}<p class="muted">No alerts defined.</p>
{% elif not alerts %}<p>{{ defined }} alert(s) defined on this logspace; none fired.</p>
{% else %}<table class="alerts"><tr><th>Alert</th><th>fired</th></tr>
{% for k, v in alerts.items() %}<tr><td>{{ k }}</td><td class="n">{{ v }}</td></tr>{% endfor %}
</table>{% endif %}
</section>
</body></html>
"""

_env = Environment(autoescape=True)
_template = _env.from_string(TEMPLATE)


def printable(s: object) -> str:
    """s as printable text: bytes that are not UTF-8 (\\udcXX) and control characters as
    U+FFFD, cut to TEXT_MAX characters."""
    t = str(s).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    t = "".join(c if c.isprintable() else "\ufffd" for c in t)
    return t if len(t) <= TEXT_MAX else t[: TEXT_MAX - 1] + "\u2026"


# ---------------------------------------------------------------- charts


def _figure(width: float = 8.0, height: float = 2.6) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=CHART_DPI)


def _png(fig: Any) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def histogram_png(s: Section) -> bytes:
    """The messages per bucket over the period as bars (times in UTC)."""
    import matplotlib.dates as mdates

    fig = _figure()
    ax = fig.add_subplot()
    xs = [dt.datetime.fromtimestamp(t / 1e6, dt.UTC) for t, _ in s.histogram]
    width = dt.timedelta(microseconds=max(s.step_us, 1)) * 0.9
    ax.bar(xs, [n for _, n in s.histogram], width=width, align="edge", color="#3b6ea5")
    ax.set_ylabel("messages")
    ax.set_title(f"Messages per {_step_name(s.step_us)} (UTC)", fontsize=10)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator()))
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def severity_png(s: Section) -> bytes:
    """The messages per severity (emerg .. debug) as bars."""
    colors = ["#7b0000", "#a30000", "#cc2200", "#e05000", "#e0a000", "#5a8f29", "#3b6ea5", "#888"]
    fig = _figure(8.0, 2.4)
    ax = fig.add_subplot()
    names = list(s.severities)
    ax.bar(names, list(s.severities.values()), color=colors[: len(names)])
    ax.set_ylabel("messages")
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def _step_name(step_us: int) -> str:
    return {3600: "hour", 21600: "6 hours", 86400: "day"}.get(step_us // 1_000_000, "bucket")


def charts(data: ReportData) -> list[dict[str, bytes]]:
    """Per section, its charts as PNG ({} for a section without numbers)."""
    return [
        {} if s.query is None else {"histogram": histogram_png(s), "severity": severity_png(s)}
        for s in data.sections
    ]


# ---------------------------------------------------------------- HTML and email


def _title(data: ReportData) -> str:
    return f"{data.report.name}: {data.report.logspace}, {data.period.kind} report {data.period.id}"


def html(data: ReportData, sources: list[dict[str, str]], box: str | None = None) -> str:
    """The report's page, each chart's src taken from sources (per section, like charts())."""

    def iso(us: int) -> str:
        return dt.datetime.fromtimestamp(us / 1e6, dt.UTC).strftime("%Y-%m-%d %H:%M")

    secs = []
    for s, src in zip(data.sections, sources, strict=True):
        secs.append(
            {
                "title": printable(s.title),
                "query": None if s.query is None else printable(s.query),
                "total": s.total,
                "severities": s.severities,
                "hosts": [(printable(v), n) for v, n in s.hosts],
                "programs": [(printable(v), n) for v, n in s.programs],
                "warnings": [printable(w) for w in s.warnings],
                "charts": src,
                "w": 640,
            }
        )
    alerts = None if data.alerts is None else {printable(k): v for k, v in data.alerts.items()}
    r = data.report
    return _template.render(
        title=printable(_title(data)),
        report={"logspace": r.logspace, "owner": r.owner},
        period={"kind": data.period.kind, "id": data.period.id},
        frm=iso(data.period.start_us),
        to=iso(data.period.end_us),
        built=iso(data.built_us),
        box=printable(box or socket.gethostname()),
        sections=secs,
        alerts=alerts,
        defined=data.alerts_defined,
    )


def page(data: ReportData, box: str | None = None) -> str:
    """The downloadable page: charts as data: URIs, nothing loaded from elsewhere."""
    sources = [
        {k: "data:image/png;base64," + base64.b64encode(v).decode() for k, v in c.items()}
        for c in charts(data)
    ]
    return html(data, sources, box)


def text(data: ReportData) -> str:
    """The plain-text alternative of the email: the totals."""
    lines = [printable(_title(data)), ""]
    for s in data.sections:
        if s.query is None:
            lines.append(f"{printable(s.title)}: no longer available")
            continue
        sev = ", ".join(f"{k} {v}" for k, v in s.severities.items() if v)
        lines.append(f"{printable(s.title)}: {s.total} messages ({sev or 'none'})")
    if data.alerts is None:
        lines.append("No alerts defined.")
    else:
        fired = ", ".join(f"{printable(k)} {v}" for k, v in data.alerts.items())
        lines.append(f"Alerts fired: {fired or 'none'}")
    return "\n".join(lines) + "\n"


def sender_of(relay: Any, box: str) -> str:
    """The From address: the relay's when it has one, else logbox@<box>."""
    for attr in ("sender", "mail_from", "from_addr", "from_"):
        v = getattr(relay, attr, None)
        if isinstance(v, str) and v:
            return v
    return f"logbox@{box}"


def email_message(data: ReportData, relay: Any = None, box: str | None = None) -> EmailMessage:
    """The report as an email to its recipients: text/plain and text/html alternatives, the
    HTML's charts inline (image/png parts of a multipart/related, referenced by cid:)."""
    box = box or socket.gethostname()
    r = data.report
    msg = EmailMessage()
    msg["Subject"] = printable(f"[logbox] {_title(data)}")
    msg["From"] = sender_of(relay, box)
    msg["To"] = ", ".join(r.recipients)
    msg["Date"] = email.utils.formatdate(localtime=False)
    msg["Message-ID"] = email.utils.make_msgid("report", domain=box)
    msg.set_content(text(data))
    pngs = charts(data)
    tag = hashlib.sha256(f"{r.id}{data.period.id}{data.built_us}".encode()).hexdigest()[:16]
    cids = [{k: f"{k}-{i}-{tag}@logbox" for k in c} for i, c in enumerate(pngs)]
    sources = [{k: f"cid:{v}" for k, v in c.items()} for c in cids]
    msg.add_alternative(html(data, sources, box), subtype="html")
    part = msg.get_payload()[1]
    for c, ids in zip(pngs, cids, strict=True):
        for k, png in c.items():
            part.add_related(
                png, "image", "png", cid=f"<{ids[k]}>", disposition="inline", filename=f"{k}.png"
            )
    return msg
