"""logbox-eps's report: one document (JSON), the same figures as Markdown tables in the shape
of a performance white paper, and one self-contained HTML file with the charts drawn by
matplotlib (SVG, inline).

The HTML has one element per part, by id: `sustained`, `steps` (the table), `legend` (the
definitions), `searches` (latency under load), `services` (CPU, memory and disk I/O per
service), `machine` (the box and the load machine side by side) and `settings`."""

from __future__ import annotations

import argparse
import html
import importlib.metadata
import io
import json
import math
import os
import platform
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import resources

NOT_REPORTED = "not reported by the box"

# What the figures mean: the report's legend (JSON, Markdown and HTML) and README.md's.
DEFINITIONS = {
    "sent_eps": "messages of the step sent ÷ the step's hold seconds",
    "stored_eps": "messages of the step stored (every copy the store holds of the step's run, "
    "counted once the step was judged) ÷ the step's hold seconds",
    "lost": "per connection, sequence numbers sent that the store does not hold",
    "duplicates": "copies stored beyond the first of a sequence number on a connection",
    "catch_up_s": "seconds after the step's end until the store held all it sent (or the "
    "lag bound ran out)",
    "sustained_eps": "the highest sent EPS of a step that passed: all stored within the lag "
    "bound, nothing lost, nothing twice",
    "short": "a step whose sent EPS is below 98 % of its target: the load machine could not "
    "send what was asked (when such steps passed, the box's limit is above what was sent)",
    "search latency": "from sending a query to its whole answer, at the load machine; p50, p95, "
    "p99 by nearest rank over the step's answered queries (errors and time-outs apart)",
    "cpu_pct": "a service's CPU time (user + system) over an interval between two /status "
    "samples ÷ its seconds × 100 (100 = one core busy)",
    "rss_mib": "a service's resident memory at a sample, MiB (2^20 bytes)",
    "read_mbs, write_mbs": "a service's disk bytes read and written over an interval ÷ its "
    "seconds, MB/s (10^6 bytes)",
}


def eps_version() -> str:
    """logbox-eps's version: the installed package's, or the checkout's commit."""
    try:
        return importlib.metadata.version("logbox-client")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"checkout {commit}".strip()


def load_machine(senders: int | None = None) -> dict[str, Any]:
    """The machine the load ran on, and the sender processes it used."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        osname = platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        osname = platform.system()
    return {
        "host": socket.gethostname(),
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_bytes": mem,
        "os": osname,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "logbox_eps": eps_version(),
        "sender_processes": senders,
    }


def document(
    a: argparse.Namespace,
    run: str,
    status: dict[str, Any],
    system: dict[str, Any],
    steps: list[dict[str, Any]],
    mix: Sequence[tuple[str, str]] = (),
    senders: int | None = None,
) -> dict[str, Any]:
    """The report's figures.

    :param system: the box's GET /system answer, or {"error": why} when it gave none.
    :param mix: the searchers' queries (class, query).
    :param senders: the sender processes the load used.
    """
    passed = [s for s in steps if s["passed"]]
    best = max(passed, key=lambda s: s["sent_eps"]) if passed else None
    failed = next((s for s in steps if not s["passed"]), None)
    for s in steps:
        s["short"] = s["sent_eps"] < SHORT * s["target_eps"]
    return {
        "tool": "logbox-eps",
        "run": run,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": {
            "host": a.host,
            "port": a.port,
            "transport": a.transport,
            "framing": "octet" if a.transport == "tls" else a.framing,
            "client_certificate": a.cert is not None,
            "connections": a.connections,
            "message_bytes": None if a.corpus else a.size,
            "corpus": str(a.corpus) if a.corpus else None,
            "hold_s": a.hold,
            "lag_bound_s": a.lag,
            "settle_s": a.settle,
            "logspace": a.logspace,
            "searchers": a.searchers,
            # how many users the searchers stand for: their tokens (one: --token's user)
            "search_users": max(1, len(set(a.search_token))) if a.searchers else 0,
            "search_mix_file": str(a.search_mix) if a.search_mix else None,
            "search_mix": [[c, q] for c, q in mix] if a.searchers else [],
        },
        "result": {
            "sustained_eps": best["sent_eps"] if best else 0.0,
            "sustained_target_eps": best["target_eps"] if best else 0.0,
            "first_failed_target_eps": failed["target_eps"] if failed else None,
            "why_failed": why(failed) if failed else None,
            "limit_note": limit_note(steps, failed, best, a.max),
            "lost": sum(s["lost"] for s in steps),
            "duplicates": sum(s["duplicates"] for s in steps),
        },
        "definitions": DEFINITIONS,
        "steps": steps,
        "box": {
            "raid": status.get("raid"),
            "disk": status.get("disk"),
            "health": status.get("health"),
        },
        "machine": {"box": system, "load": load_machine(senders)},
    }


SHORT = 0.98  # a step that sent less than this share of its target was short (the load machine)


def limit_note(
    steps: Sequence[dict[str, Any]],
    failed: dict[str, Any] | None,
    best: dict[str, Any] | None,
    most: float,
) -> str | None:
    """Why the sustained figure is not the box's limit, when it is not: no step failed, so the
    limit was never reached (None when one did: why() says what failed)."""
    if failed is not None or best is None:
        return None
    if any(s["short"] for s in steps):
        first = next(s for s in steps if s["short"])
        return (
            f"the load machine sent at most {best['sent_eps']:,.0f} EPS (from the "
            f"{first['target_eps']:,.0f} EPS step on it could not send what was asked) and the "
            "box stored all of it: the box's limit is above what this load machine sends; "
            "measure from a faster one, or from several"
        )
    return (
        f"the ramp reached --max ({most:,.0f} EPS) with nothing lost: the box's limit is above it"
    )


def why(s: dict[str, Any]) -> str:
    """Why a step failed, in words."""
    parts = []
    if s["lost"]:
        parts.append(f"{s['lost']:,} of {s['sent']:,} messages lost")
    if s["duplicates"]:
        parts.append(f"{s['duplicates']:,} stored twice")
    if s.get("behind"):
        parts.insert(0, "stored fell behind (not all stored within the lag bound)")
    return "; ".join(parts)


# ---------------------------------------------------------------- tables (Markdown and HTML)


def _num(v: Any, fmt: str = ",.1f") -> str:
    return "–" if v is None else format(v, fmt)


def _bytes(v: Any) -> str:
    if not isinstance(v, int | float):
        return "–"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if v >= size:
            return f"{v / size:.1f} {unit}"
    return f"{v:,} B"


def step_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The steps table: header and rows."""
    head = ["target EPS", "sent", "sent EPS", "stored", "stored EPS", "lost", "duplicates",
            "caught up (s)", "result"]  # fmt: skip
    rows = [
        [
            f"{s['target_eps']:,.0f}",
            f"{s['sent']:,}",
            f"{s['sent_eps']:,.0f}",
            f"{s['stored']:,}",
            f"{s['stored_eps']:,.0f}",
            f"{s['lost']:,}",
            f"{s['duplicates']:,}",
            str(s["catch_up_s"]),
            ("ok" if s["passed"] else "failed: " + why(s))
            + (" (short: the load machine sent less than asked)" if s.get("short") else ""),
        ]
        for s in doc["steps"]
    ]
    return head, rows


def search_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The searches table: per step, in all and per class."""
    head = ["target EPS", "class", "answered", "per s", "errors", "time-outs", "p50 ms",
            "p95 ms", "p99 ms"]  # fmt: skip
    rows = []
    for s in doc["steps"]:
        f = s.get("searches")
        if not f:
            continue
        for cls, g in [("all", f), *f["classes"].items()]:
            rows.append([f"{s['target_eps']:,.0f}", cls, f"{g['count']:,}", _num(g["per_s"]),
                         f"{g['errors']:,}", f"{g['timeouts']:,}", _num(g["p50_ms"]),
                         _num(g["p95_ms"]), _num(g["p99_ms"])])  # fmt: skip
    return head, rows


def service_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The services table: per step and service, mean / peak of each figure."""
    head = ["target EPS", "service", "CPU % mean / peak", "RSS MiB mean / peak",
            "read MB/s mean / peak", "write MB/s mean / peak"]  # fmt: skip
    rows = []
    for s in doc["steps"]:
        for name, f in (s.get("services") or {}).items():
            if not f["intervals"]:
                rows.append([f"{s['target_eps']:,.0f}", name, NOT_REPORTED, "", "", ""])
                continue
            rows.append([f"{s['target_eps']:,.0f}", name] + [
                f"{_num(f[k]['mean'])} / {_num(f[k]['peak'])}" for k in resources.FIGURES
            ])  # fmt: skip
    return head, rows


def machine_rows(doc: dict[str, Any]) -> list[list[str]]:
    """The machine table: what, the box, the load machine."""
    m = doc["machine"]
    b, ld = m["box"] or {}, m["load"]
    if "error" in b or not b:
        say = b.get("error") or NOT_REPORTED
        box = {k: "" for k in ("logbox", "host", "os", "cpu", "memory", "disks", "store", "raid",
                              "settings")}  # fmt: skip
        box["logbox"] = say
    else:
        lb, h, c, mem = b.get("logbox") or {}, b.get("host") or {}, b.get("cpu") or {}, \
            b.get("memory") or {}  # fmt: skip
        st, cfg = b.get("store") or {}, b.get("settings") or {}
        threads = c.get("threads_per_core")
        mhz = c.get("mhz")
        box = {
            "logbox": f"{lb.get('version', '?')}"
            + (f" ({lb['commit']})" if lb.get("commit") else ""),
            "host": h.get("hostname", "?") + _virt(h.get("virtualization")),
            "os": f"{h.get('os', '?')}, kernel {h.get('kernel', '?')}, {h.get('arch', '?')}",
            "cpu": f"{c.get('model') or '?'}, {c.get('cores', '?')} cores"
            + (f", {threads} threads per core" if threads else "")
            + (f", {mhz:,.0f} MHz" if mhz else ""),
            "memory": f"{_bytes(mem.get('total_bytes'))} ({_bytes(mem.get('available_bytes'))} "
            f"available), swap {_bytes(mem.get('swap_total_bytes'))}",
            "disks": "; ".join(
                f"{d.get('name')} {_bytes(d.get('size_bytes'))}"
                + {True: " rotational", False: " SSD", None: ""}[d.get("rotational")]
                + (f" ({d['model']})" if d.get("model") else "")
                for d in b.get("disks") or []
            )
            or "–",
            "store": f"{st.get('path', '?')} on {st.get('device') or '?'}, "
            f"{st.get('filesystem') or '?'}"
            + {True: ", encrypted", False: ", not encrypted", None: ""}[st.get("encrypted")]
            + f", {_bytes(st.get('free_bytes'))} free of {_bytes(st.get('total_bytes'))}",
            "raid": _raid(b.get("raid")),
            "settings": _settings(cfg),
        }
    senders = ld.get("sender_processes")
    searchers = doc["settings"].get("searchers")
    load = {
        "logbox": f"logbox-eps {ld.get('logbox_eps')}",
        "host": ld.get("host", ""),
        "os": f"{ld.get('os') or '?'}, kernel {ld.get('kernel')}, Python {ld.get('python')}",
        "cpu": f"{ld.get('cpu') or '?'}, {ld.get('cores')} CPUs",
        "memory": _bytes(ld.get("memory_bytes")),
        "disks": "",
        "store": "",
        "raid": "",
        "settings": f"{senders if senders is not None else '?'} sender processes, "
        f"{searchers or 0} searcher threads"
        + (f" as {doc['settings'].get('search_users', 1)} users" if searchers else ""),
    }
    names = {"logbox": "version", "host": "host", "os": "system", "cpu": "CPU",
             "memory": "memory", "disks": "disks", "store": "store", "raid": "RAID",
             "settings": "settings"}  # fmt: skip
    return [[names[k], box[k], load[k]] for k in names]


def _virt(v: str | None) -> str:
    """systemd-detect-virt's answer, as the host row says it."""
    if v is None:
        return ""
    return ", bare metal" if v == "none" else f", virtual machine or container ({v})"


def _raid(r: dict[str, Any] | None) -> str:
    if not r:
        return "none"
    prog = r.get("progress")
    return (f"{r.get('device')} {r.get('level')} {r.get('state')}, {r.get('active')}/"
            f"{r.get('disks')} active" + (f", {100 * prog:.1f} %" if prog is not None else ""))  # fmt: skip


def _settings(cfg: dict[str, Any]) -> str:
    ls = cfg.get("logspaces") or {}
    spaces = ", ".join(
        f"{n} ({v.get('retention_days')} days)" if (v or {}).get("retention_days")
        else f"{n} (kept)" for n, v in ls.items()
    )  # fmt: skip
    mem = cfg.get("indexd_max_memory_mb")
    return "; ".join([
        f"logspaces {spaces or '–'}",
        {True: "sealing on", False: "sealing off", None: "sealing ?"}[cfg.get("sealing")],
        f"inputs {', '.join(cfg.get('inputs') or []) or '–'}",
        f"routes {cfg.get('routes') if cfg.get('routes') is not None else '?'}",
        f"indexd max memory {mem if mem is not None else '?'} MB",
    ])  # fmt: skip


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    cell = lambda v: str(v).replace("|", "\\|")  # noqa: E731
    return [
        "| " + " | ".join(head) + " |",
        "| " + " | ".join("---" for _ in head) + " |",
        *("| " + " | ".join(cell(v) for v in r) + " |" for r in rows),
    ]


def markdown(doc: dict[str, Any]) -> str:
    """The white paper's tables: the steps, the searches, the services, the machines."""
    st = doc["settings"]
    r = doc["result"]
    size = f"{st['message_bytes']} B" if st["message_bytes"] else f"corpus {st['corpus']}"
    out = [
        f"# logbox-eps run {doc['run']} ({doc['time']})",
        "",
        f"Sustained: **{r['sustained_eps']:,.0f} EPS** with no loss "
        f"({st['transport']}, {st['connections']} connections, {size}, "
        f"each step {st['hold_s']:g} s, stored within {st['lag_bound_s']:g} s"
        + (f", {st['searchers']} searchers" if st["searchers"] else "")
        + ")."
        + (f" Not the box's limit: {r['limit_note']}." if r.get("limit_note") else ""),
        "",
        *_md_table(*step_rows(doc)),
        "",
        "## Searches under load",
        "",
    ]
    head, rows = search_rows(doc)
    out += _md_table(head, rows) if rows else ["No searchers ran (`--searchers 0`)."]
    out += ["", "## Services", ""]
    head, rows = service_rows(doc)
    out += _md_table(head, rows) if rows else [f"CPU, memory and disk I/O: {NOT_REPORTED}."]
    out += ["", "## Machines", ""]
    out += _md_table(["", "box", "load machine"], machine_rows(doc))
    out += ["", "## Definitions", ""]
    out += [f"- **{k}**: {v}" for k, v in doc["definitions"].items()]
    out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------- charts


def charts(doc: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """(title, inline SVG) of each chart, by the section it belongs to (`eps`, `searches`,
    `services`); none when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("svg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    out: dict[str, list[tuple[str, str]]] = {"eps": [], "searches": [], "services": []}
    samples = [x for s in doc["steps"] for x in s["samples"]]
    if not samples:
        return out
    t0 = samples[0]["t"]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.plot([x["t"] - t0 for x in samples], [x["eps_1s"] or 0 for x in samples],
            label="stored EPS (the box's own)")  # fmt: skip
    for s in doc["steps"]:
        ax.hlines(s["target_eps"], s["started"] - t0, s["ended"] - t0, colors="tab:orange",
                  label="sent EPS" if s["step"] == 0 else None)  # fmt: skip
    ax.set_xlabel("s")
    ax.set_ylabel("EPS")
    ax.legend()
    out["eps"].append(("Sent and stored EPS over time", svg(fig, plt)))
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.plot([x["t"] - t0 for x in samples], [x["spool_lag_s"] or 0 for x in samples],
            label="spool lag (s)")  # fmt: skip
    ax.set_xlabel("s")
    ax.set_ylabel("lag (s)")
    ax.legend()
    out["eps"].append(("Lag", svg(fig, plt)))
    lat = [x for s in doc["steps"] for x in ((s.get("searches") or {}).get("latencies") or [])]
    if lat:
        fig, ax = plt.subplots(figsize=(8, 3.2))
        for cls in dict.fromkeys(x["class"] for x in lat):
            pts = [x for x in lat if x["class"] == cls]
            ax.plot([x["t"] - t0 for x in pts], [x["ms"] for x in pts], ".", label=cls,
                    markersize=3)  # fmt: skip
        ax.set_yscale("log")
        ax.set_xlabel("s")
        ax.set_ylabel("latency (ms)")
        ax.legend(fontsize="small", ncol=4)
        out["searches"].append(("Search latency under load", svg(fig, plt)))
    series = service_series(doc)
    for key, title, unit in (
        ("cpu_pct", "CPU per service", "CPU % (100 = one core)"),
        ("rss_mib", "Memory per service", "resident MiB"),
        ("io_mbs", "Disk I/O per service (read + write)", "MB/s"),
    ):
        lines = {n: v for n, v in series.items() if any(not math.isnan(y) for y in v[key])}
        if not lines:
            continue
        fig, ax = plt.subplots(figsize=(8, 3.2))
        for name, v in lines.items():
            ax.plot([t - t0 for t in v["t"]], v[key], label=name)
        ax.set_xlabel("s")
        ax.set_ylabel(unit)
        ax.legend(fontsize="small", ncol=3)
        out["services"].append((title, svg(fig, plt)))
    return out


def service_series(doc: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """Per service, the time series of its intervals over every step, a gap (NaN) between
    steps: {"t", "cpu_pct", "rss_mib", "io_mbs"}."""
    out: dict[str, dict[str, list[float]]] = {}
    nan = float("nan")
    for s in doc["steps"]:
        for name, rows in resources.intervals(s["samples"]).items():
            v = out.setdefault(name, {"t": [], "cpu_pct": [], "rss_mib": [], "io_mbs": []})
            if v["t"]:
                for k in v:
                    v[k].append(nan if k != "t" else rows[0]["t"])
            for r in rows:
                io = [x for x in (r["read_mbs"], r["write_mbs"]) if x is not None]
                v["t"].append(r["t"])
                v["cpu_pct"].append(r["cpu_pct"])
                v["rss_mib"].append(nan if r["rss_mib"] is None else r["rss_mib"])
                v["io_mbs"].append(sum(io) if io else nan)
    return out


def svg(fig: Any, plt: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


# ---------------------------------------------------------------- HTML


def _html_table(head: list[str], rows: list[list[str]], id: str = "") -> str:
    attr = f' id="{id}"' if id else ""
    return (
        f"<table{attr}><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>\n"
        + "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r) + "</tr>\n"
                  for r in rows)
        + "</table>"
    )  # fmt: skip


def _figs(figs: list[tuple[str, str]]) -> str:
    return "".join(f"<h3>{html.escape(t)}</h3><div class='chart'>{s}</div>" for t, s in figs)


def html_page(doc: dict[str, Any]) -> str:
    """One self-contained page: the tables, the charts, the definitions, the machines and
    the settings."""
    figs = charts(doc)
    r = doc["result"]
    head, rows = search_rows(doc)
    searches = (_figs(figs.get("searches", [])) + _html_table(head, rows) if rows
                else "<p>No searchers ran (<code>--searchers 0</code>).</p>")  # fmt: skip
    head, rows = service_rows(doc)
    services = (_figs(figs.get("services", [])) + _html_table(head, rows) if rows
                else f"<p>CPU, memory and disk I/O: {NOT_REPORTED}.</p>")  # fmt: skip
    legend = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>"
                     for k, v in doc["definitions"].items())  # fmt: skip
    settings = json.dumps({k: doc[k] for k in ("settings", "box")}, indent=1)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>logbox-eps {html.escape(doc['run'])}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}
table{{border-collapse:collapse}}td,th{{border:1px solid #999;padding:.2em .5em}}
dt{{font-weight:bold}}</style>
</head><body>
<h1>logbox-eps run {html.escape(doc['run'])}</h1>
<p id="sustained">Sustained: <b>{r['sustained_eps']:,.0f} EPS</b> with no loss.{
    f" Not the box's limit: {html.escape(r['limit_note'])}." if r.get("limit_note") else ""}</p>
{_html_table(*step_rows(doc), id="steps")}
{_figs(figs.get("eps", []))}
<section id="searches"><h2>Searches under load</h2>{searches}</section>
<section id="services"><h2>Services: CPU, memory, disk I/O</h2>{services}</section>
<section id="machine"><h2>Machines</h2>{_html_table(["", "box", "load machine"], machine_rows(doc))}
</section>
<h2>Definitions</h2><dl id="legend">{legend}</dl>
<h2>Settings</h2>
<pre id="settings">{html.escape(settings)}</pre>
</body></html>
"""


def write(out: Path, doc: dict[str, Any]) -> list[Path]:
    """report.json, report.md and report.html in out (made if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "report.json", out / "report.md", out / "report.html"]
    paths[0].write_text(json.dumps(doc, indent=1) + "\n")
    paths[1].write_text(markdown(doc))
    paths[2].write_text(html_page(doc))
    return paths
