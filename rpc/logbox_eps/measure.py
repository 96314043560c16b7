"""What the box stored of a run, read through its API (rpc/API.md): counts by run, by
connection, and the duplicates on a connection, from the structured data every message of the
load carries (load.py). Nothing here trusts what was sent: the store is asked."""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from logbox_client import Client, LogboxError

from .load import SD_ID

TOP_K = 1000  # the API's top limit (k 1..1000)


def run_query(run: str) -> str:
    """The query of every stored message of run."""
    return f"{SD_ID}.run:{run}"


@dataclass
class Stored:
    """What the store holds of one run: in all, per connection, and the extra copies."""

    total: int
    per_conn: dict[int, int]
    duplicates: dict[int, int] = field(default_factory=dict)  # connection -> extra copies
    duplicates_exact: bool = True  # False: more duplicated numbers than one top page shows


def stored(api: Client, run: str, conns: int, logspace: str, since: float) -> Stored:
    """Counts the run in the store: per connection (top values of the connection number, or a
    count each past TOP_K connections), and on each connection the sequence numbers stored
    more than once (the top value of s: a count above 1 means duplicates, then a page of them)."""
    q = run_query(run)
    frm = since - 3600
    total = api.count(q, logspace=logspace, from_=frm)
    per: dict[int, int] = {}
    if conns <= TOP_K:
        for v in api.top(q, f"{SD_ID}.c", logspace=logspace, from_=frm, k=TOP_K):
            per[int(v["value"])] = int(v["count"])
    else:
        for c in range(1, conns + 1):
            per[c] = api.count(f"{q} AND {SD_ID}.c:{c}", logspace=logspace, from_=frm)
    out = Stored(total, per)
    # One top query per connection, and no cheaper exact way: the API counts matches and
    # ranks a field's values, but does not count distinct values, so a connection's duplicates
    # (its count less its distinct sequence numbers) need its own top of s. One top of s over
    # the whole run would not do: every connection numbers from 1, so each number is there
    # once per connection, and a duplicate on one and a loss of the same number on another
    # cancel out. Nor do the counts: count = sent - lost + duplicates, so a loss hides a
    # duplicate. A connection with nothing stored is skipped (it has no duplicates).
    for c in per:
        if not per[c]:
            continue
        top = api.top(f"{q} AND {SD_ID}.c:{c}", f"{SD_ID}.s", logspace=logspace, from_=frm, k=1)
        if not top or int(top[0]["count"]) <= 1:
            continue  # no sequence number twice on this connection
        dup = api.top(f"{q} AND {SD_ID}.c:{c}", f"{SD_ID}.s", logspace=logspace, from_=frm, k=TOP_K)
        extra = [int(v["count"]) - 1 for v in dup if int(v["count"]) > 1]
        out.duplicates[c] = sum(extra)
        if len(extra) == len(dup) == TOP_K:
            out.duplicates_exact = False
    return out


def wait_stored(
    api: Client,
    run: str,
    want: int,
    logspace: str,
    since: float,
    limit_s: float,
    stall_s: float | None = None,
) -> tuple[int, float]:
    """Polls the run's count until it reaches want, limit_s have passed, or (stall_s) it has
    not grown for stall_s; (the last count, the seconds it took)."""
    t0 = time.monotonic()
    last, last_change = -1, t0
    while True:
        n = api.count(run_query(run), logspace=logspace, from_=since - 3600)
        now = time.monotonic()
        if n != last:
            last, last_change = n, now
        if n >= want or now - t0 >= limit_s:
            return n, now - t0
        if stall_s is not None and now - last_change >= stall_s:
            return n, now - t0
        time.sleep(0.25)


class Sampler:
    """/status every interval seconds in a thread, while a load runs: the box's own EPS, the
    spool lag, the index lag and each service's resources, with the time of each sample."""

    def __init__(self, api: Client, interval: float = 1.0) -> None:
        self.api = api
        self.interval = interval
        self.samples: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            t = time.time()
            try:
                st = self.api.status()
                self.samples.append(sample(t, st))
            except LogboxError as e:
                self.errors.append(f"{e.code}: {e.message}")
            self._stop.wait(max(0.0, self.interval - (time.time() - t)))


def sample(t: float, st: dict[str, Any]) -> dict[str, Any]:
    """The figures of one /status answer that a run's report plots."""
    spool = st.get("spool") or {}
    eps = st.get("eps") or {}
    lag = max((ls.get("index_lag") or 0 for ls in st.get("logspaces") or []), default=0)
    return {
        "t": t,
        "box_t": box_time(st.get("time")),
        "eps_1s": eps.get("1s"),
        "stored": st.get("stored"),
        "spool_lag_s": spool.get("lag_s"),
        "waiting_bytes": spool.get("waiting_bytes"),
        "index_lag": lag,
        "health": st.get("health"),
        "services": {
            name: svc.get("resources") if isinstance(svc, dict) else None
            for name, svc in (st.get("services") or {}).items()
        },
    }


def box_time(text: object) -> float | None:
    """The box's own time of a /status answer ("time", RFC 3339 UTC) as seconds since the
    epoch; None when it has none. The services' figures are read when the box answers, so
    their rates are taken over the box's times, not over when the answers arrived here (an
    answer delayed by a busy box would make a rate spike)."""
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
