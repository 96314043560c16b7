"""logbox-eps's report: one document (JSON), the same figures as a Markdown table in the shape
of a performance white paper, and one self-contained HTML file with the charts drawn by
matplotlib (SVG, inline)."""

from __future__ import annotations

import argparse
import html
import io
import json
import os
import platform
import socket
import time
from pathlib import Path
from typing import Any


def load_machine() -> dict[str, Any]:
    """The machine the load ran on."""
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
    return {
        "host": socket.gethostname(),
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_bytes": mem,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def document(
    a: argparse.Namespace, run: str, status: dict[str, Any], steps: list[dict[str, Any]]
) -> dict[str, Any]:
    """The report's figures."""
    passed = [s for s in steps if s["passed"]]
    best = max(passed, key=lambda s: s["target_eps"]) if passed else None
    failed = next((s for s in steps if not s["passed"]), None)
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
        },
        "result": {
            "sustained_eps": best["sent_eps"] if best else 0.0,
            "sustained_target_eps": best["target_eps"] if best else 0.0,
            "first_failed_target_eps": failed["target_eps"] if failed else None,
            "why_failed": why(failed) if failed else None,
            "lost": sum(s["lost"] for s in steps),
            "duplicates": sum(s["duplicates"] for s in steps),
        },
        "steps": steps,
        "box": {
            "raid": status.get("raid"),
            "disk": status.get("disk"),
            "health": status.get("health"),
        },
        "load_machine": load_machine(),
    }


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


def markdown(doc: dict[str, Any]) -> str:
    """The white paper's table: one row per step."""
    st = doc["settings"]
    r = doc["result"]
    m = doc["load_machine"]
    size = f"{st['message_bytes']} B" if st["message_bytes"] else f"corpus {st['corpus']}"
    out = [
        f"# logbox-eps run {doc['run']} ({doc['time']})",
        "",
        f"Sustained: **{r['sustained_eps']:,.0f} EPS** with no loss "
        f"({st['transport']}, {st['connections']} connections, {size}, "
        f"each step {st['hold_s']:g} s, stored within {st['lag_bound_s']:g} s).",
        "",
        "| target EPS | sent | sent EPS | stored | lost | duplicates | caught up (s) | result |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in doc["steps"]:
        out.append(
            f"| {s['target_eps']:,.0f} | {s['sent']:,} | {s['sent_eps']:,.0f} | {s['stored']:,} "
            f"| {s['lost']:,} | {s['duplicates']:,} | {s['catch_up_s']} "
            f"| {'ok' if s['passed'] else 'failed: ' + why(s)} |"
        )
    out += [
        "",
        f"Load machine: {m['host']}, {m['cpu']}, {m['cores']} cores, "
        f"{m['memory_bytes'] / 2**30:.1f} GiB, kernel {m['kernel']}.",
        "",
    ]
    return "\n".join(out)


def charts(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(title, inline SVG) of each chart; none when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("svg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    out = []
    samples = [x for s in doc["steps"] for x in s["samples"]]
    if samples:
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
        out.append(("Sent and stored EPS over time", svg(fig, plt)))
        fig, ax = plt.subplots(figsize=(8, 3.2))
        ax.plot([x["t"] - t0 for x in samples], [x["spool_lag_s"] or 0 for x in samples],
                label="spool lag (s)")  # fmt: skip
        ax.set_xlabel("s")
        ax.set_ylabel("lag (s)")
        ax.legend()
        out.append(("Lag", svg(fig, plt)))
    return out


def svg(fig: Any, plt: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def html_page(doc: dict[str, Any]) -> str:
    """One self-contained page: the table, the charts, the settings and machines."""
    md_rows = []
    for s in doc["steps"]:
        md_rows.append(
            "<tr>"
            + "".join(
                f"<td>{html.escape(str(v))}</td>"
                for v in (
                    f"{s['target_eps']:,.0f}",
                    f"{s['sent']:,}",
                    f"{s['stored']:,}",
                    f"{s['lost']:,}",
                    f"{s['duplicates']:,}",
                    s["catch_up_s"],
                    "ok" if s["passed"] else "failed: " + why(s),
                )
            )
            + "</tr>"
        )
    figs = "".join(f"<h2>{html.escape(t)}</h2><div class='chart'>{s}</div>" for t, s in charts(doc))
    r = doc["result"]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>logbox-eps {html.escape(doc['run'])}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}
table{{border-collapse:collapse}}td,th{{border:1px solid #999;padding:.2em .5em}}</style>
</head><body>
<h1>logbox-eps run {html.escape(doc['run'])}</h1>
<p id="sustained">Sustained: <b>{r['sustained_eps']:,.0f} EPS</b> with no loss.</p>
<table id="steps"><tr><th>target EPS</th><th>sent</th><th>stored</th><th>lost</th>
<th>duplicates</th><th>caught up (s)</th><th>result</th></tr>
{''.join(md_rows)}</table>
{figs}
<h2>Settings and machines</h2>
<pre id="settings">{html.escape(json.dumps({k: doc[k] for k in ('settings', 'box', 'load_machine')}, indent=1))}</pre>
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
