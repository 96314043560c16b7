"""logbox-alertd: evaluates the alerts (logbox_core/alerts.py) as messages arrive, and fires them
through logbox_core.deliver.

The one idea: every round (INTERVAL, 0.5 s) each alert asks searchd only for the messages that
arrived since the last id it saw, in published index segments (indexer/PROTOCOL.md id windows:
`after=<through>&upto=indexed`; indexd publishes at least every second while messages arrive):
`/v1/count` for a plain alert, `/v1/top?field=host|program` for a grouped one. When its id has
not moved for TAIL_AFTER_S, a round also looks at the not-yet-indexed tail (a lone message before
a pause waits there for the next segment; the tail is small then). No full search is ever run again. The
answers feed per-round buckets (time, count) per group, from which the sliding windows are
summed; "below N" is judged only once the alert has watched a whole window. Firing is limited by
the cooldown per (alert, group). When an alert fires, up to 5 of the new matches are fetched
(`/v1/search`) as samples and every action is delivered by a small thread pool, so a slow SMTP
relay never holds back evaluation; each firing, test-fire and failed delivery is recorded in the
alert's history.

Rights: an alert is evaluated as its owner. If the owner cannot see its saved search or read its
logspace (any more), the alert is `forbidden` and neither evaluates nor fires; when the right
comes back it starts afresh from the newest message (nothing in between is judged).

What it keeps (the state file, JSON, written before any delivery of a firing and at most every
second otherwise): per alert the definition it evaluated, the id it has seen through, its
buckets and when each group last fired. A restart therefore neither fires again for messages it
has judged nor skips the ones that came while it was down (they are one round's count). What it
shows (the status file, like indexd's: pid, uptime, per alert its state and reason, last
firing), is read by `GET /api/v1/status`.

Run: python -m logbox_core.alertd --accounts DIR --searchd SOCKET --state FILE --status FILE
[--delivery FILE (notify.json, logbox_core.deliver)] [--url BASE]   (each also from LOGBOX_* variables, see main()).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import deliver
from .accounts import Accounts, AccountsError, User, rfc3339
from .alerts import Alert, AlertStore, condition_text
from .searchd import Searchd, SearchdError

log = logging.getLogger("logbox-alertd")

INTERVAL = 0.5  # seconds between two rounds
SAVE_EVERY = 1.0  # seconds between two writes of the state and status files (unless fired)
SAMPLES = 5
SAMPLED_GROUPS = 20  # groups of one round whose events carry samples (a search each)
# indexd publishes a segment when a message arrives a second or more after the interval began:
# a last message before a pause waits in the unindexed tail. After this long without progress
# a round also searches that tail (small then, since nothing is arriving fast).
TAIL_AFTER_S = 1.5
TOP_K = 1000  # searchd's k maximum: groups counted per round
GROUPS_MAX = 1000  # groups remembered per alert (for "below")
GROUP_FORGET_S = 86400.0  # a group not seen for this long is forgotten
DELIVERY_WORKERS = 4
ASK_WORKERS = 4  # searchd requests of one round in flight at once
PROBE = "logboxalertdthroughprobe"  # a token no message holds: where a logspace's ids are now


def _now_rfc3339(t: float) -> str:
    return rfc3339(int(t * 1_000_000))


def _escape_value(v: str) -> str:
    """A field value as a quoted query string matching exactly it (QUERY.md "Fields")."""
    out = v.replace("\\", "\\\\").replace("*", "\\*").replace("?", "\\?").replace('"', '\\"')
    return f'"{out}"'


def query_of(q: str) -> str:
    """A saved search's query as searchd takes it: an empty one matches every message."""
    return q if q.strip() else "*"


@dataclass
class AlertState:
    """What alertd knows of one alert (persisted in the state file)."""

    sig: str  # the definition it was built for (a change starts afresh)
    through: str  # the last id judged
    started: float  # when it began watching (a "below" needs one whole window)
    buckets: dict[str, list[list[float]]] = field(default_factory=dict)  # group -> [[t, n]]
    seen: dict[str, float] = field(default_factory=dict)  # group -> last time it had a match
    fired: dict[str, float] = field(default_factory=dict)  # group -> last firing
    state: str = "ok"
    reason: str | None = None
    last_fired: float | None = None
    last_count: int | None = None

    def to_json(self) -> dict:
        return self.__dict__.copy()

    @classmethod
    def from_json(cls, d: dict) -> AlertState:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})  # type: ignore[arg-type]


@dataclass
class Job:
    """One alert's question to searchd in a round."""

    alert: Alert
    state: AlertState
    sig: str
    logspace: str
    query: str
    path: str  # /v1/count or /v1/top
    params: dict[str, str]


def signature(alert: Alert, logspace: str, query: str) -> str:
    """What a state is valid for: the logspace, the query and the condition."""
    return json.dumps([logspace, query, alert.condition], sort_keys=True)


class AlertD:
    """The evaluator: one round over every alert (round()), the files it keeps, the pool that
    delivers."""

    def __init__(
        self,
        accounts: Accounts,
        sd: Searchd,
        *,
        state_path: str,
        status_path: str | None,
        delivery_path: str | None = None,
        url_base: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.acc = accounts
        self.store = AlertStore(accounts)
        self.sd = sd.as_caller("alertd")
        self.state_path = state_path
        self.status_path = status_path
        self.delivery_path = delivery_path
        self.url_base = url_base.rstrip("/") if url_base else None
        self.clock = clock
        self.started = clock()
        self.box = socket.gethostname()
        self.states: dict[str, AlertState] = {}
        self.moved: dict[str, float] = {}  # alert id -> when its through last moved
        self.pool = concurrent.futures.ThreadPoolExecutor(DELIVERY_WORKERS, "alertd-deliver")
        self.ask_pool = concurrent.futures.ThreadPoolExecutor(ASK_WORKERS, "alertd-ask")
        self.round_ms = 0.0
        self.pending: set[concurrent.futures.Future[None]] = set()
        self._saved = 0.0
        self._dirty = (
            True  # written at the first round: a state directory it cannot write fails early
        )
        self._lock = threading.Lock()
        self._load_state()

    # ------------------------------------------------------------ files

    def _load_state(self) -> None:
        try:
            with open(self.state_path, "rb") as f:
                doc = json.load(f)
            self.states = {k: AlertState.from_json(v) for k, v in doc["alerts"].items()}
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError) as e:
            log.warning("state file %s unreadable (%s): starting afresh", self.state_path, e)

    @staticmethod
    def _write(path: str, doc: dict) -> None:
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def save(self, now: float, force: bool = False) -> None:
        """The state file (when changed) and the status file, at most every SAVE_EVERY."""
        if not force and now - self._saved < SAVE_EVERY:
            return
        self._saved = now
        if self._dirty or force:
            self._write(
                self.state_path, {"alerts": {k: s.to_json() for k, s in self.states.items()}}
            )
            self._dirty = False
        if self.status_path:
            self._write(self.status_path, self.status(now))

    def status(self, now: float) -> dict:
        """The status file's object (rpc/API.md §7 "alertd")."""
        return {
            "pid": os.getpid(),
            "uptime_s": round(now - self.started, 3),
            "time": _now_rfc3339(now),
            "interval_ms": int(INTERVAL * 1000),
            "round_ms": self.round_ms,
            "alerts": {
                aid: {
                    "state": s.state,
                    "reason": s.reason,
                    "last_fired": _now_rfc3339(s.last_fired) if s.last_fired else None,
                    "through": s.through,
                }
                for aid, s in self.states.items()
            },
        }

    # ------------------------------------------------------------ one round

    def round(self) -> None:
        """Every alert once: tests asked for, then the evaluation."""
        now = self.clock()
        for rid, action in self.store.take_delivery_tests():
            self.pending.add(self.pool.submit(self._delivery_test, rid, action))
        alerts = self.store.list()
        users = {u.name: u for u in self.acc.list_users()}
        live = {a.id for a in alerts}
        for aid in [k for k in self.states if k not in live]:
            del self.states[aid]
            self._dirty = True
        jobs = []
        for a in alerts:
            try:
                job = self._prepare(a, users.get(a.owner), now)
            except AccountsError as e:
                log.warning("alert %s: accounts store: %s", a.id, e)
                continue
            if job is not None:
                jobs.append(job)
        # searchd answers several at once (its own threads); the judging stays in this thread
        for job, res in zip(jobs, self.ask_pool.map(self._ask, jobs), strict=True):
            try:
                self._finish(job, res, now)
            except AccountsError as e:
                log.warning("alert %s: accounts store: %s", job.alert.id, e)
        self.round_ms = round((self.clock() - now) * 1000, 1)
        self.pending = {f for f in self.pending if not f.done()}
        self.save(now)

    def _resolve(self, a: Alert, user: User | None) -> tuple[str, str] | str:
        """(logspace, query) of the alert as its owner may see it, or why it may not run."""
        s = self.acc.get_search(a.search)
        if s is None:
            return f"its saved search {a.search} no longer exists"
        if user is None:
            return f"its owner {a.owner} no longer exists"
        if user.disabled:
            return f"its owner {a.owner} is disabled"
        if not s.visible_to(user) or not user.can_read(s.logspace):
            return f"its owner {a.owner} may not read logspace {s.logspace!r}"
        return s.logspace, query_of(s.query)

    def _prepare(self, a: Alert, user: User | None, now: float) -> Job | None:
        """What this round asks searchd for the alert (None: nothing, its state says why)."""
        where = self._resolve(a, user)
        st = self.states.get(a.id)
        if a.test_request:
            self.store.take_test(a.id, a.test_request["id"])
            self._test(a, where, now)
        if isinstance(where, str):
            missing = where.endswith("no longer exists") and "saved search" in where
            self.states[a.id] = AlertState(
                "", "0", now, state="error" if missing else "forbidden", reason=where
            )
            if st is None or st.state != self.states[a.id].state:
                log.info("alert %s: %s", a.id, where)
            self._dirty = True
            return None
        if not a.enabled:  # starts afresh when enabled again
            if st is None or st.state != "disabled":
                self.states[a.id] = AlertState("", "0", now, state="disabled")
                self._dirty = True
            return None
        logspace, query = where
        sig = signature(a, logspace, query)
        if st is None or st.sig != sig:
            try:
                through = self._through_now(logspace)
            except SearchdError as e:
                self._error(a, st, sig, now, e)
                return None
            st = self.states[a.id] = AlertState(sig, through, now)
            self._dirty = True
        group_by = a.condition.get("group_by")
        params = {"logspace": logspace, "q": query, "after": st.through, "upto": "indexed"}
        moved = self.moved.setdefault(a.id, now)
        if now - moved >= TAIL_AFTER_S:  # idle: the last messages may wait for a segment
            del params["upto"]
        if group_by:
            path, params = "/v1/top", {**params, "field": group_by, "k": str(TOP_K)}
        else:
            path = "/v1/count"
        return Job(a, st, sig, logspace, query, path, params)

    def _ask(self, job: Job) -> dict | SearchdError:
        """searchd's answer to a job (run by the evaluation pool, several at once)."""
        try:
            return self.sd.get(job.path, job.params)
        except SearchdError as e:
            return e

    def _finish(self, job: Job, res: dict | SearchdError, now: float) -> None:
        """The alert judged on its answer, fired when due."""
        a, st = job.alert, job.state
        if isinstance(res, SearchdError):
            self._error(a, st, job.sig, now, res)
            return
        if job.path == "/v1/top":
            counts = {v["value"]: int(v["count"]) for v in res.get("values", [])}
        else:
            counts = {"": int(res.get("total") or 0)}
        before, st.through = st.through, str(res.get("through", st.through))
        if st.through != before or any(counts.values()):
            self._dirty = True
            self.moved[a.id] = now
        fire = self._judge(a, st, counts, now)
        self._fire_due(a, st, fire, job.logspace, job.query, before, now)

    def _through_now(self, logspace: str) -> str:
        """The newest id in logspace's published segments (where a new alert starts)."""
        res = self.sd.get(
            "/v1/count", {"logspace": logspace, "q": PROBE, "after": "0", "upto": "indexed"}
        )
        return str(res.get("through", "0"))

    def _error(
        self, a: Alert, st: AlertState | None, sig: str, now: float, e: SearchdError
    ) -> None:
        if st is None or st.sig != sig:  # starts afresh once searchd answers
            st = self.states[a.id] = AlertState("", "0", now)
        if st.state != "error":
            log.warning("alert %s: searchd: %s", a.id, e.message)
        st.state, st.reason = "error", f"searchd: {e.message}"
        self._dirty = True

    def _judge(
        self, a: Alert, st: AlertState, counts: dict[str, int], now: float
    ) -> dict[str, int]:
        """The groups whose condition holds now, with their count."""
        c = a.condition
        if c["kind"] == "any":
            return {g: n for g, n in counts.items() if n > 0}
        w = float(c["window_s"])
        for g, n in counts.items():
            if n > 0:
                st.buckets.setdefault(g, []).append([now, n])
                st.seen[g] = now
        for g in list(st.buckets):
            st.buckets[g] = [b for b in st.buckets[g] if b[0] > now - w]
            if not st.buckets[g]:
                del st.buckets[g]
        for g in [g for g, t in st.seen.items() if t < now - max(GROUP_FORGET_S, w)]:
            del st.seen[g]
        if len(st.seen) > GROUPS_MAX:
            for g in sorted(st.seen, key=st.seen.__getitem__)[: len(st.seen) - GROUPS_MAX]:
                del st.seen[g]
        sums = {g: int(sum(b[1] for b in bs)) for g, bs in st.buckets.items()}
        if c["kind"] == "above":
            return {g: n for g, n in sums.items() if n > c["n"]}
        if now - st.started < w:
            return {}
        groups = set(st.seen) if c.get("group_by") else {""}
        return {g: sums.get(g, 0) for g in groups if sums.get(g, 0) < c["n"]}

    def _fire_due(
        self,
        a: Alert,
        st: AlertState,
        fire: dict[str, int],
        logspace: str,
        query: str,
        before: str,
        now: float,
    ) -> None:
        cooling = False
        due: list[tuple[str, int]] = []
        for g, n in sorted(fire.items()):
            last = st.fired.get(g)
            if last is not None and now - last < a.cooldown_s:
                cooling = True
                continue
            st.fired[g] = st.last_fired = now
            st.last_count = n
            due.append((g, n))
        fired = bool(due)
        if fired:
            self._dirty = True
            self.save(now, force=True)  # judged and fired: a restart does not fire again
        by = a.condition.get("group_by")
        for i, (g, n) in enumerate(due):
            group = {"field": by, "value": g} if by else None
            event = self._event(a, logspace, query, "firing", n, group, now)
            if i < SAMPLED_GROUPS:
                event["samples"] = self._samples(logspace, query, group, before, st.through)
            self._submit(a, event, None)
        for g in [g for g, t in st.fired.items() if now - t >= max(a.cooldown_s, 1)]:
            if g not in fire:
                del st.fired[g]
        recent = st.last_fired is not None and now - st.last_fired < max(a.cooldown_s, 5.0)
        if fired or (fire and not cooling):
            st.state = "firing"
        elif cooling or (fire and recent):
            st.state = "cooldown"
        else:
            st.state = "ok"
        st.reason = None

    # ------------------------------------------------------------ firing

    def _event(
        self,
        a: Alert,
        logspace: str,
        query: str,
        state: str,
        count: int,
        group: dict | None,
        now: float,
    ) -> dict:
        """The event logbox_core.deliver takes (the samples added by the caller)."""
        url = None
        if self.url_base:
            q = (
                query
                if not group
                else f"({query}) AND {group['field']}:{_escape_value(group['value'])}"
            )
            url = f"{self.url_base}/search?" + urllib.parse.urlencode(
                {"logspace": logspace, "q": q, "from": "-1h"}
            )
        return {
            "alert_id": a.id,
            "alert": a.name,
            "logspace": logspace,
            "query": query,
            "condition": condition_text(a.condition),
            "state": state,
            "count": count,
            "window_s": a.condition.get("window_s"),
            "group": group,
            "time": _now_rfc3339(now),
            "box": self.box,
            "url": url,
            "samples": [],
        }

    def _samples(
        self, logspace: str, query: str, group: dict | None, after: str | None, upto: str | None
    ) -> list[dict]:
        """Up to SAMPLES of the newest matches (of the group) in (after, upto], or of the last
        24 hours without after."""
        q = f"({query}) AND {group['field']}:{_escape_value(group['value'])}" if group else query
        params = {"logspace": logspace, "q": q, "limit": str(SAMPLES), "total": "0"}
        if after is not None:
            params |= {"after": after, "upto": upto or "indexed"}
        try:
            return list(self.sd.get("/v1/search", params).get("hits", []))[:SAMPLES]
        except SearchdError as e:
            log.warning("samples of %s: %s", logspace, e.message)
            return []

    def _test(self, a: Alert, where: tuple[str, str] | str, now: float) -> None:
        """A test-fire asked for through the API or the web UI."""
        rid, by = a.test_request["id"], a.test_request.get("by")  # type: ignore[index]
        if isinstance(where, str):
            self.store.record(
                a.id,
                {"kind": "test", "request": rid, "by": by, "count": 0, "group": None,
                 "results": [], "ok": False, "error": where},
            )  # fmt: skip
            return
        logspace, query = where
        event = self._event(a, logspace, query, "test", 0, None, now)
        event["samples"] = self._samples(logspace, query, None, None, None)
        event["count"] = len(event["samples"])
        self._submit(a, event, {"request": rid, "by": by})

    def _submit(self, a: Alert, event: dict, test: dict | None) -> None:
        self.pending.add(self.pool.submit(self._deliver, a, event, test))

    def _settings(self) -> Any:
        """The admin's delivery settings, read again for every firing (a change applies at
        once); every channel unset without a settings file."""
        if self.delivery_path:
            return deliver.load_settings(self.delivery_path)
        return deliver.Settings()

    def _deliver(self, a: Alert, event: dict, test: dict | None) -> None:
        """Every action of a, then one history entry saying how each went."""
        results: list[dict] = []
        why = None
        try:
            settings = self._settings()
        except deliver.DeliveryError as e:  # a broken settings file: every action fails
            settings, why = None, str(e)
        for act in a.actions:
            r: dict[str, Any] = {"type": act["type"]}
            t0 = time.monotonic()
            if why is not None:
                r |= {"ok": False, "error": why}
            else:
                try:
                    deliver.deliver(act, event, settings)
                    r["ok"] = True
                except Exception as e:  # DeliveryError, or anything else a channel raised
                    r |= {"ok": False, "error": str(e) or type(e).__name__}
                    log.warning("alert %s: %s delivery failed: %s", a.id, act["type"], r["error"])
            r["took_ms"] = round((time.monotonic() - t0) * 1000, 1)
            results.append(r)
        ok = all(r["ok"] for r in results)
        entry = {
            "kind": "test" if test else "firing",
            "count": event["count"],
            "group": event["group"],
            "condition": event["condition"],
            "event_time": event["time"],
            "samples": [s.get("id") for s in event["samples"]],
            "results": results,
            "ok": ok,
            "error": None
            if ok
            else "; ".join(f"{r['type']}: {r['error']}" for r in results if not r["ok"]),
            **(test or {}),
        }
        try:
            self.store.record(a.id, entry)
        except AccountsError as e:
            log.warning("alert %s: history not written: %s", a.id, e)

    def _delivery_test(self, rid: str, action: dict) -> None:
        """An admin's test message (alerts.run_delivery_test): sent, and the result written
        back for the app that waits for it."""
        try:
            result = deliver.try_delivery(action, self._settings(), self.box)
        except deliver.DeliveryError as e:  # a broken settings file
            result = {"channel": action.get("type"), "delivered": False, "error": str(e),
                      "seconds": 0.0}  # fmt: skip
        try:
            self.store.finish_delivery_test(rid, result)
        except AccountsError as e:
            log.warning("delivery test %s: result not written: %s", rid, e)

    def close(self) -> None:
        self.ask_pool.shutdown(wait=True)
        self.pool.shutdown(wait=True)
        self.save(self.clock(), force=True)


def main(argv: Sequence[str] | None = None) -> int:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="logbox-alertd", description=__doc__.split("\n")[0])
    p.add_argument("--accounts", default=env("LOGBOX_ACCOUNTS", "/var/lib/logbox-accounts"))
    p.add_argument("--searchd", default=env("LOGBOX_SEARCHD_SOCKET", "/run/logbox/searchd.sock"))
    p.add_argument(
        "--state", default=env("LOGBOX_ALERTD_STATE", "/var/lib/logbox-alertd/state.json")
    )
    p.add_argument(
        "--status", default=env("LOGBOX_ALERTD_STATUS", "/run/logbox/alertd.status.json")
    )
    p.add_argument(
        "--delivery", default=env("LOGBOX_DELIVERY_SETTINGS", "/etc/logbox/settings/notify.json")
    )
    p.add_argument("--url", default=env("LOGBOX_ALERTD_URL"), help="the web UI's base URL")
    p.add_argument("--interval", type=float, default=INTERVAL)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="logbox-alertd: %(message)s", stream=sys.stderr)
    if os.geteuid() == 0 and not env("LOGBOX_ALLOW_ROOT"):
        log.error("refusing to run as root")
        return 1
    d = AlertD(
        Accounts(args.accounts),
        Searchd(args.searchd, timeout=10),
        state_path=args.state,
        status_path=args.status,
        delivery_path=args.delivery,
        url_base=args.url,
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info("evaluating alerts every %.1f s (state %s)", args.interval, args.state)
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            d.round()
        except Exception:
            log.exception("round failed")
        stop.wait(max(0.0, args.interval - (time.monotonic() - t0)))
    d.close()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
