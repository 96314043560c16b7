"""The last integrity report (`logbox verify --json --out FILE`, indexer/cli/README.md): read
for the API's /logspaces/{logspace}/integrity, the web UI's /integrity page and /status's
problems, and the public key the day roots are signed with (sign.pub, PEM) both apps serve for
download. The appliance's daily verify writes the report; nothing here runs verify (a store of
terabytes takes minutes)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

# A report older than this is a problem: the daily verify has not run.
STALE_S = 2 * 86400 + 3600
# sign.pub: one PEM public key (an Ed25519 one is 113 bytes)
PEM_BEGIN = b"-----BEGIN PUBLIC KEY-----"
PEM_END = b"-----END PUBLIC KEY-----"
PUBKEY_MAX = 16 * 1024


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


def view(doc: dict[str, Any], name: str) -> dict[str, Any] | None:
    """Logspace name's part of the report as both apps show it (API.md §4's Integrity object:
    the report's time and how it was checked, the logspace's sealing, problems and days), or
    None when the report has no such logspace."""
    e = logspace(doc, name)
    if e is None:
        return None
    return {
        "logspace": name,
        "verified_at": doc.get("time"),
        "integrity_only": doc.get("integrity_only") is True,
        "checked_with_key": doc.get("checked_with_key") is True,
        "ok": e.get("ok") is True,
        "messages": e.get("messages"),
        "sealing": e.get("sealing"),
        "days_signed": e.get("days_signed"),
        "days_timestamped": e.get("days_timestamped"),
        "problems": e.get("problems") or [],
        "days": e.get("days") or [],
    }


def names(doc: dict[str, Any]) -> list[str]:
    """The logspaces the report holds, in its order."""
    return [
        e["logspace"]
        for e in doc["logspaces"]
        if isinstance(e, dict) and isinstance(e.get("logspace"), str)
    ]


class PublicKeyError(Exception):
    """The public key cannot be served: status 404 (no file) or 500 (not a PEM public key)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def public_key(path: str | os.PathLike[str]) -> bytes:
    """The PEM public key the day roots are signed with (`logbox keys init` writes it to
    <data>/indexd/sign.pub; the appliance copies it to SIGN_PUBKEY), as its bytes.

    :raises PublicKeyError: 404 when there is no such file, 500 when it cannot be read or is
        not one PEM public key.
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            pem = f.read(PUBKEY_MAX + 1)
    except FileNotFoundError:
        raise PublicKeyError(
            404, f"no public key at {p} (`logbox keys init` makes it; SIGN_PUBKEY)"
        ) from None
    except OSError as e:
        raise PublicKeyError(500, f"the public key {p} cannot be read: {e.strerror or e}") from e
    if (
        len(pem) > PUBKEY_MAX
        or not pem.startswith(PEM_BEGIN)
        or pem.rstrip().split(b"\n")[-1] != PEM_END
    ):
        raise PublicKeyError(500, f"{p} is not a PEM public key (expected {PEM_BEGIN.decode()})")
    return pem


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
