"""The last integrity report (`logbox verify --json --out FILE`, indexer/cli/README.md): read
for the API's /logspaces/{logspace}/integrity and for /status's problems. The appliance's daily
verify writes it; nothing here runs verify (a store of terabytes takes minutes)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

# A report older than this is a problem: the daily verify has not run.
STALE_S = 2 * 86400 + 3600


def load(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The report at path; None when there is none, or it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("logspaces"), list):
        return None
    return doc


def logspace(doc: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The report's entry for logspace name, or None."""
    for e in doc["logspaces"]:
        if isinstance(e, dict) and e.get("logspace") == name:
            return e
    return None


def problems(path: str | os.PathLike[str], now: float | None = None) -> list[str]:
    """What /status says of the report: its problems, or that it is stale."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return []  # no report (yet): the verify timer is not set up here
    doc = load(path)
    if doc is None:
        return [f"integrity: {os.fspath(path)} is not a verify report"]
    out = []
    now = time.time() if now is None else now
    if now - mtime > STALE_S:
        out.append(
            f"integrity: the last verify ran {(now - mtime) / 3600:.0f} h ago ({doc.get('time')})"
        )
    n = doc.get("problems")
    if doc.get("ok") is not True:
        bad = [
            e.get("logspace") for e in doc["logspaces"] if isinstance(e, dict) and not e.get("ok")
        ]
        out.append(
            f"integrity: verify found {n} problems ({', '.join(map(str, bad))}) at {doc.get('time')}"
        )
    return out
