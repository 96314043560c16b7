"""The times the apps take (searchd's forms, PROTOCOL.md §2.1): RFC 3339, a date, a date and
time with a space, relative to now (-15m, +1d), `now`, or epoch seconds; as µs since the epoch.
The one Python reader of them (the API's audit and federation, the web UI's audit filter and
federation); searchd reads its own in C."""

from __future__ import annotations

import datetime as dt
import re
import time

RELATIVE = re.compile(r"([+-])([0-9]{1,9})([smhdw])")
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?"
    r"(\.[0-9]{1,9})?(Z|z|[+-][0-9]{2}:[0-9]{2})?)?"
)
FORMS = "RFC 3339 (2026-11-22T18:00:00Z, 2026-11-22 18:00), a relative time (-15m), now or epoch seconds"


def parse_time(raw: str, now: float | None = None) -> int:
    """raw as µs since the epoch (no offset: UTC).

    :raises ValueError: not one of the forms, or not a valid date (the message says which).
    """
    t = raw.strip()
    now = time.time() if now is None else now
    if t == "now":
        return int(now * 1_000_000)
    if re.fullmatch(r"[0-9]{1,12}", t):
        return int(t) * 1_000_000
    m = RELATIVE.fullmatch(t)
    if m:
        secs = int(m.group(2)) * UNIT_S[m.group(3)]
        return int((now + (secs if m.group(1) == "+" else -secs)) * 1_000_000)
    m = _RFC3339.fullmatch(t)
    if m is None:
        raise ValueError(f"expected {FORMS}, got {t[:60]!r}")
    y, mo, d, hh, mi, ss, frac, off = m.groups()
    try:
        tz = dt.UTC
        if off and off not in ("Z", "z"):
            sign = 1 if off[0] == "+" else -1
            tz = dt.timezone(sign * dt.timedelta(hours=int(off[1:3]), minutes=int(off[4:6])))
        when = dt.datetime(
            int(y), int(mo), int(d), int(hh or 0), int(mi or 0), int(ss or 0), tzinfo=tz
        )
    except ValueError:
        raise ValueError(f"not a valid time: {t[:60]!r}") from None
    us = int(frac[1:7].ljust(6, "0")) if frac else 0
    return int(when.timestamp()) * 1_000_000 + us
