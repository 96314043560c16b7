"""The status dashboard (GET /status, any signed-in user): services, rates, the messages stored
per minute over the last hour, and per logspace the messages, bytes, index lag, days kept and
retention; disk and md RAID. Logspaces are those the user may read. Never raises on a missing
status file or a searchd that is down: the service shows as down."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, current_app, render_template
from logbox_core import status as core_status
from logbox_core.searchd import Searchd, SearchdError

from . import alerts
from . import settings as ls_settings
from .auth import current_user, login_required
from .state import searchd

bp = Blueprint("status", __name__)

CHART_MINUTES = 60  # the EPS chart: one bar per minute over the last hour
CHART_W, CHART_H = 720, 200  # the SVG's size
CHART_LEFT, CHART_BOTTOM, CHART_TOP = 64, 24, 12  # room for the axis labels
DAY_DIR = re.compile(r"[0-9]{2}-[0-9]{2}")
YEAR_DIR = re.compile(r"[0-9]{4}")


# ---------------------------------------------------------------- formatting


def human_bytes(n: int | None) -> str:
    """1536 → "1.5 KiB"; None → "–"."""
    if n is None:
        return "–"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # not reached


def human_rate(v: float | None) -> str:
    """An events-per-second figure with one decimal, or "–"."""
    return "–" if v is None else f"{v:,.1f}"


def human_duration(seconds: float | None) -> str:
    """812.4 → "13 min 32 s"; None → "–"."""
    if seconds is None:
        return "–"
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d} d {h} h"
    if h:
        return f"{h} h {m} min"
    if m:
        return f"{m} min {s} s"
    return f"{s} s"


def minute_label(t: int) -> str:
    """Epoch seconds as HH:MM UTC."""
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%H:%M")


# ---------------------------------------------------------------- the EPS chart


@dataclass
class Chart:
    """Messages stored per minute over [start, end) (epoch seconds), summed over logspaces."""

    start: int
    end: int
    counts: list[int]
    errors: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Messages in the chart."""
        return sum(self.counts)

    @property
    def max(self) -> int:
        """The largest bucket."""
        return max(self.counts, default=0)

    def bars(self) -> list[dict[str, Any]]:
        """Each bucket's rectangle in SVG coordinates, with its time and count."""
        plot_w = CHART_W - CHART_LEFT
        plot_h = CHART_H - CHART_BOTTOM - CHART_TOP
        step = plot_w / len(self.counts)
        top = self.max or 1
        out = []
        for i, n in enumerate(self.counts):
            h = round(plot_h * n / top, 1)
            t = self.start + 60 * i
            out.append(
                {
                    "x": round(CHART_LEFT + i * step + 0.5, 1),
                    "y": round(CHART_TOP + plot_h - h, 1),
                    "w": round(max(1.0, step - 1), 1),
                    "h": h,
                    "count": n,
                    "from": t,
                    "label": f"{minute_label(t)}–{minute_label(t + 60)} UTC: {n} messages "
                    f"({n / 60:.1f}/s)",
                }
            )
        return out

    def x_ticks(self) -> list[dict[str, Any]]:
        """Time labels every 15 minutes along the x axis."""
        plot_w = CHART_W - CHART_LEFT
        out = []
        for i in range(0, len(self.counts) + 1, 15):
            out.append(
                {
                    "x": round(CHART_LEFT + plot_w * i / len(self.counts), 1),
                    "label": minute_label(self.start + 60 * i),
                }
            )
        return out


def eps_chart(client: Searchd, names: list[str], now: float) -> Chart:
    """The messages stored per minute over the hour up to the end of the current minute, in
    the logspaces names (searchd's histogram of q=* per logspace, summed)."""
    end = (int(now) // 60 + 1) * 60
    start = end - CHART_MINUTES * 60
    counts = [0] * CHART_MINUTES
    errors = []
    for name in names:
        try:
            h = client.get(
                "/v1/histogram",
                {
                    "logspace": name,
                    "q": "*",
                    "from": str(start),
                    "to": str(end),
                    "buckets": str(CHART_MINUTES),
                },
            )
        except SearchdError as e:
            errors.append(f"{name}: {e.message}")
            continue
        for b in h.get("buckets") or []:
            try:
                i = (int(b["from"]) - start * 1_000_000) // 60_000_000
                n = int(b["count"])
            except (KeyError, TypeError, ValueError):
                continue
            if 0 <= i < CHART_MINUTES:
                counts[i] += n
    return Chart(start, end, counts, errors)


# ---------------------------------------------------------------- days kept


def _received_day(client: Searchd, name: str, msg_id: int) -> dt.date | None:
    """The UTC day message msg_id of logspace name was received, or None."""
    try:
        m = client.get(f"/v1/messages/{msg_id}", {"logspace": name})
        us = int(m["received_us"])
    except (SearchdError, KeyError, TypeError, ValueError):
        return None
    return (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=us)).date()


def _day_dirs(data_dir: str, name: str) -> list[dt.date]:
    """The days that have a directory <data_dir>/<name>/YYYY/MM-DD, sorted."""
    days = []
    base = os.path.join(data_dir, name)
    try:
        years = [y for y in os.listdir(base) if YEAR_DIR.fullmatch(y)]
    except OSError:
        return []
    for y in years:
        try:
            entries = os.listdir(os.path.join(base, y))
        except OSError:
            continue
        for e in entries:
            if DAY_DIR.fullmatch(e):
                try:
                    days.append(dt.date(int(y), int(e[:2]), int(e[3:])))
                except ValueError:
                    continue
    return sorted(days)


def days_kept(
    client: Searchd | None, data_dir: str, name: str, first_id: int | None, next_id: int | None
) -> dict[str, Any]:
    """{"first", "last": ISO days or None, "days": whole days from the first to the last day
    holding messages (both counted), or None}: from the first and last message's receive time
    (searchd), else from the store's day directories."""
    first = last = None
    if client is not None and first_id is not None and next_id is not None:
        if next_id > first_id:
            first = _received_day(client, name, first_id)
            last = _received_day(client, name, next_id - 1)
        else:
            return {"first": None, "last": None, "days": 0}
    if first is None or last is None:
        dirs = _day_dirs(data_dir, name)
        if dirs:
            first, last = dirs[0], dirs[-1]
    if first is None or last is None:
        return {"first": None, "last": None, "days": None}
    return {"first": first.isoformat(), "last": last.isoformat(), "days": (last - first).days + 1}


# ---------------------------------------------------------------- indexd's applied settings


def indexd_settings(path: str | None) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """From indexd's status file: per logspace the applied {"retention_days", "delimiters"}
    (those it reports), and its top-level "settings" object ({"file", "applied", "error"}) or
    None. Empty when the file is missing, garbled or reports none."""
    if not path:
        return {}, None
    try:
        with open(path, "rb") as f:
            st = json.loads(f.read(16 << 20))
    except (OSError, ValueError):
        return {}, None
    if not isinstance(st, dict):
        return {}, None
    out: dict[str, dict[str, Any]] = {}
    spaces = st.get("logspaces")
    if isinstance(spaces, dict):
        for name, ix in spaces.items():
            if not isinstance(name, str) or not isinstance(ix, dict):
                continue
            entry: dict[str, Any] = {}
            r = ix.get("retention_days")
            if isinstance(r, int) and not isinstance(r, bool):
                entry["retention_days"] = r
            d = ix.get("delimiters")
            if isinstance(d, str):
                entry["delimiters"] = d
            out[name] = entry
    top = st.get("settings")
    return out, top if isinstance(top, dict) else None


def desired_settings() -> tuple[dict[str, ls_settings.LogspaceSettings], str | None]:
    """The settings file's logspaces, and the reason when it cannot be read (then {})."""
    path = current_app.config.get("LOGSPACE_SETTINGS")
    if not path:
        return {}, None
    try:
        return ls_settings.load(path), None
    except ls_settings.SettingsError as e:
        return {}, str(e)


# ---------------------------------------------------------------- the page


def _searchd_spaces(client: Searchd) -> tuple[dict[str, dict], str | None]:
    """searchd's /v1/logspaces by name, and the error when it does not answer."""
    try:
        spaces = client.logspaces()
    except SearchdError as e:
        return {}, e.message
    return {
        s["name"]: s for s in spaces if isinstance(s, dict) and isinstance(s.get("name"), str)
    }, None


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@bp.route("/status", methods=["GET"])
@login_required
def dashboard() -> Any:
    """GET /status: the dashboard (what the user may see: core_status.for_user)."""
    user = current_user()
    assert user is not None
    c = current_app.config
    client = searchd()
    now = time.time()
    doc = core_status.gather(
        data_dir=c["DATA_DIR"],
        indexd_status=c.get("INDEXD_STATUS"),
        syslogng_pidfile=c.get("SYSLOGNG_PIDFILE"),
        searchd=client,
        now=now,
        integrity_report=c.get("INTEGRITY_REPORT"),
        alertd_status=c.get("ALERTD_STATUS"),
        archive_state=c.get("ARCHIVE_STATE"),
    )
    doc = core_status.for_user(doc, user)
    up = doc["services"]["searchd"]["state"] == "running"
    from_searchd, searchd_error = _searchd_spaces(client) if up else ({}, None)
    applied, _ = indexd_settings(c.get("INDEXD_STATUS"))
    desired, settings_error = desired_settings()
    rows = []
    for ls in doc["logspaces"]:
        name = ls["name"]
        if not user.can_read(name):
            continue
        sd = from_searchd.get(name, {})
        first_id, next_id = _int(sd.get("first_id")), _int(sd.get("next_id"))
        want = desired.get(name)
        rows.append(
            {
                **ls,
                "messages": _int(sd.get("messages")),
                "bytes_h": human_bytes(ls["bytes"]),
                "kept": days_kept(client if up else None, c["DATA_DIR"], name, first_id, next_id),
                "retention_desired": want.retention_days if want else None,
                "retention_applied": applied.get(name, {}).get("retention_days"),
            }
        )
        if isinstance(ls.get("archive"), dict):
            rows[-1]["archive"] = {
                **ls["archive"],
                "bytes_archived_h": human_bytes(ls["archive"].get("bytes_archived")),
            }
    names = [r["name"] for r in rows if r["name"] in from_searchd]
    if up:
        chart = eps_chart(client, names, now)
    else:
        end = (int(now) // 60 + 1) * 60
        chart = Chart(end - CHART_MINUTES * 60, end, [0] * CHART_MINUTES, ["searchd is down"])
    services = []
    for n, svc in doc["services"].items():  # syslog-ng, indexd, searchd (the appliance: more)
        res = svc.get("resources") or {}  # an admin's only
        cpu = res.get("cpu_s")
        services.append(
            {
                "name": n,
                **svc,
                "uptime_h": human_duration(svc.get("uptime_s")),
                "cpu_h": "–"
                if cpu is None
                else f"{cpu:.1f} s"
                if cpu < 60
                else human_duration(cpu),
                "memory_h": human_bytes(res.get("rss_bytes")),
            }
        )
    disk = doc["disk"]
    disk_h = {
        k: human_bytes(disk.get(k))
        for k in ("total_bytes", "used_bytes", "free_bytes", "store_bytes")
    }
    used_fraction = (
        disk["used_bytes"] / disk["total_bytes"]
        if disk.get("total_bytes") and disk.get("used_bytes") is not None
        else None
    )
    problems = list(doc["problems"])
    if user.role == "admin" and searchd_error:
        problems.append(f"searchd: logspaces: {searchd_error}")
    if user.role == "admin" and settings_error:
        problems.append(f"logspace settings: {settings_error}")
    return render_template(
        "status/dashboard.html",
        doc=doc,
        health=doc["health"],
        services=services,
        eps_1s=human_rate(doc["eps"]["1s"]),
        eps_60s=human_rate(doc["eps"]["60s"]),
        rows=rows,
        chart=chart,
        chart_w=CHART_W,
        chart_h=CHART_H,
        chart_left=CHART_LEFT,
        chart_top=CHART_TOP,
        chart_bottom=CHART_H - CHART_BOTTOM,
        disk=disk,
        disk_h=disk_h,
        used_fraction=used_fraction,
        raid=doc["raid"],
        problems=problems,
        alerts=alerts.rows()[0],
    )
