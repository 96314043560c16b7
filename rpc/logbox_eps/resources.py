"""What each of the box's services used while a step ran: CPU %, resident memory and disk I/O,
from the `resources` the box reports per service in every /status sample (API.md §7; measure.py
keeps them).

The box gives cumulative figures (CPU seconds, bytes read and written) and the resident memory
now; a rate is the difference of two consecutive samples over the seconds between them (the
box's own times of the two answers, `box_t`, when it gives them). An
interval is left out when either end has no figures, their source changed (cgroup or proc), or
a figure went down (the service restarted). A box that reports none (older than this tool) gives
None: the report says "not reported by the box".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MB = 1e6  # disk rates are in MB/s (10^6 bytes), memory in MiB (2^20 bytes)
MIB = 2**20
FIGURES = ("cpu_pct", "rss_mib", "read_mbs", "write_mbs")


def intervals(samples: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per service, the rates of each interval between two samples: {"t" (its end), "cpu_pct"
    (100 = one core), "rss_mib" (at its end), "read_mbs", "write_mbs" (None when the box does
    not count the service's I/O)}."""
    out: dict[str, list[dict[str, Any]]] = {}
    for a, b in zip(samples, samples[1:], strict=False):
        # the box's times when both have one (when it read the figures), else the arrivals
        ta, tb = a.get("box_t"), b.get("box_t")
        dt = tb - ta if ta is not None and tb is not None else b["t"] - a["t"]
        if dt <= 0:
            continue
        for name, rb in (b.get("services") or {}).items():
            ra = (a.get("services") or {}).get(name)
            if not ra or not rb or ra.get("source") != rb.get("source"):
                continue
            cpu = _delta(ra, rb, "cpu_s")
            if cpu is None:
                continue
            rd, wr = _delta(ra, rb, "io_read_bytes"), _delta(ra, rb, "io_write_bytes")
            rss = rb.get("rss_bytes")
            out.setdefault(name, []).append(
                {
                    "t": b["t"],
                    "cpu_pct": cpu / dt * 100,
                    "rss_mib": rss / MIB if isinstance(rss, int | float) else None,
                    "read_mbs": rd / dt / MB if rd is not None else None,
                    "write_mbs": wr / dt / MB if wr is not None else None,
                }
            )
    return out


def _delta(a: dict[str, Any], b: dict[str, Any], key: str) -> float | None:
    """b[key] - a[key]; None when either is missing or it went down."""
    x, y = a.get(key), b.get(key)
    if not isinstance(x, int | float) or not isinstance(y, int | float) or y < x:
        return None
    return float(y - x)


def reported(samples: Sequence[dict[str, Any]]) -> bool:
    """Whether any sample holds any service's resources."""
    return any(r for x in samples for r in (x.get("services") or {}).values())


def step_figures(samples: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Per service, the mean and the peak of each figure over a step's intervals ({"mean",
    "peak"}, both None when there was none), and how many intervals they cover; None when the
    box reported no resources at all."""
    if not reported(samples):
        return None
    names = dict.fromkeys(n for x in samples for n in (x.get("services") or {}))
    per = intervals(samples)
    out: dict[str, Any] = {}
    for name in names:
        rows = per.get(name, [])
        fig: dict[str, Any] = {"intervals": len(rows)}
        for f in FIGURES:
            vals = [r[f] for r in rows if r[f] is not None]
            fig[f] = {
                "mean": round(sum(vals) / len(vals), 3) if vals else None,
                "peak": round(max(vals), 3) if vals else None,
            }
        out[name] = fig
    return out
