"""Content-based alerts (rpc/API.md §6.3): their definitions and what they fired, in the accounts
store's DBs `alerts` and `alert_history`. logbox-alertd (logbox_core/alertd.py) evaluates them;
the API and the web UI define them and read their history.

An alert is a saved search (its logspace and query) plus a condition: any new match, or the
number of matches in a sliding window above or below N, optionally per host or program. Its
actions go through logbox_core.deliver. An alert is its owner's: the owner must be able to see
the saved search and read its logspace, when it is made and at every evaluation (alertd).

A test-fire is asked for by writing `test_request` into the alert's record; alertd, the only
process allowed on the network, does it on its next round (≤ 0.5 s) and records it in the
history with the request's id. History keys are the alert id (12 hex digits) + 8 bytes
big-endian µs time + 2 bytes big-endian n; at most HISTORY_PER_ALERT entries per alert are kept.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

from .accounts import Accounts, Conflict, Invalid, NotFound, rfc3339

ALERT_NAME_MAX = 100
ALERTS_PER_USER = 100
ACTIONS_MAX = 8
EMAIL_TO_MAX = 10
WINDOW_MAX_S = 7 * 86400
COOLDOWN_MAX_S = 7 * 86400
N_MAX = 1 << 40
HISTORY_PER_ALERT = 10_000
HISTORY_PRUNE_EVERY = 100  # history writes per process between two prunes of one alert
DELIVERY_TEST_WAIT_S = 20.0  # an admin's test message: how long the app waits for alertd
DELIVERY_TEST_KEEP_S = 3600  # requests and results older than this are removed
ACTION_TYPES = ("email", "syslog", "webhook", "snmp")
CONDITION_KINDS = ("any", "above", "below")
GROUP_FIELDS = ("host", "program")
ID_RE = re.compile(r"[0-9a-f]{12}")
_EMAIL_RE = re.compile(r"[^@\s<>,;\"]{1,64}@[A-Za-z0-9.-]{1,253}")
# what alertd says of an alert ("pending": not evaluated yet; "unknown": alertd does not run)
STATES = ("ok", "firing", "cooldown", "error", "forbidden", "disabled")
MEMBERS = ("name", "search", "condition", "actions", "cooldown_s", "enabled")


@dataclass(frozen=True)
class Alert:
    """An alert (API.md "Alert")."""

    id: str
    owner: str
    name: str
    search: str  # the saved search's id
    condition: dict
    actions: tuple[dict, ...]
    cooldown_s: int
    enabled: bool
    created_us: int
    updated_us: int
    test_request: dict | None = None  # {"id", "by", "time_us"}: a test-fire alertd has not done

    def to_json(self) -> dict:
        """API.md "Alert"."""
        return {
            "id": self.id,
            "owner": self.owner,
            "name": self.name,
            "search": self.search,
            "condition": dict(self.condition),
            "actions": [dict(a) for a in self.actions],
            "cooldown_s": self.cooldown_s,
            "enabled": self.enabled,
            "created": rfc3339(self.created_us),
            "updated": rfc3339(self.updated_us),
        }

    @classmethod
    def _from(cls, rec: dict) -> Alert:
        return cls(
            rec["id"],
            rec["owner"],
            rec["name"],
            rec["search"],
            rec["condition"],
            tuple(rec["actions"]),
            rec["cooldown_s"],
            rec["enabled"],
            rec["created_us"],
            rec["updated_us"],
            rec.get("test_request"),
        )

    def describe(self) -> str:
        """How the audit log names it: `alert ID 'NAME' of OWNER`."""
        return f"alert {self.id} {self.name!r} of {self.owner}"

    def condition_text(self) -> str:
        """The condition in words ("any match", "more than 5 in 60 s per host")."""
        return condition_text(self.condition)


def condition_text(c: dict) -> str:
    """A condition in words."""
    if c["kind"] == "any":
        return "any match"
    more = "more than" if c["kind"] == "above" else "fewer than"
    per = f" per {c['group_by']}" if c.get("group_by") else ""
    return f"{more} {c['n']} in {c['window_s']} s{per}"


# ---------------------------------------------------------------- validation


def _int(body: dict, key: str, lo: int, hi: int) -> int:
    v = body[key]
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise Invalid(f"{key}: expected an integer {lo}..{hi}")
    return v


def check_condition(c: object) -> dict:
    """{"kind": "any"} or {"kind": "above"|"below", "n", "window_s", "group_by"}.

    :raises Invalid: anything else.
    """
    if not isinstance(c, dict) or c.get("kind") not in CONDITION_KINDS:
        raise Invalid(
            f"condition: expected an object with kind one of {', '.join(CONDITION_KINDS)}"
        )
    if c["kind"] == "any":
        if set(c) - {"kind"}:
            raise Invalid("condition: kind any takes no other member")
        return {"kind": "any"}
    extra = sorted(set(c) - {"kind", "n", "window_s", "group_by"})
    if extra:
        raise Invalid(f"condition: {extra[0]}: unknown member")
    for k in ("n", "window_s"):
        if k not in c:
            raise Invalid(f"condition: {k}: required")
    try:
        n = _int(c, "n", 0 if c["kind"] == "above" else 1, N_MAX)
        w = _int(c, "window_s", 1, WINDOW_MAX_S)
    except Invalid as e:
        raise Invalid(f"condition: {e}") from None
    g = c.get("group_by")
    if g is not None and g not in GROUP_FIELDS:
        raise Invalid(f"condition: group_by: expected null, {' or '.join(GROUP_FIELDS)}")
    return {"kind": c["kind"], "n": n, "window_s": w, "group_by": g}


def check_action(a: object) -> dict:
    """One action (logbox_core.deliver's): email (to), syslog, webhook (url, ca), snmp.

    :raises Invalid: a malformed one.
    """
    if not isinstance(a, dict) or a.get("type") not in ACTION_TYPES:
        raise Invalid(f"actions: each needs type one of {', '.join(ACTION_TYPES)}")
    t = a["type"]
    allowed = {"email": {"to"}, "webhook": {"url", "ca"}}.get(t, set()) | {"type"}
    extra = sorted(set(a) - allowed)
    if extra:
        raise Invalid(f"actions: {t}: {extra[0]}: unknown member")
    if t == "email":
        to = a.get("to")
        if (
            not isinstance(to, list)
            or not 1 <= len(to) <= EMAIL_TO_MAX
            or not all(isinstance(x, str) and _EMAIL_RE.fullmatch(x) for x in to)
        ):
            raise Invalid(f"actions: email: to: expected 1 to {EMAIL_TO_MAX} addresses")
        return {"type": "email", "to": list(to)}
    if t == "webhook":
        url = a.get("url")
        u = urllib.parse.urlsplit(url) if isinstance(url, str) and len(url) <= 2048 else None
        if u is None or u.scheme != "https" or not u.hostname or not url.isprintable():
            raise Invalid("actions: webhook: url: expected an https:// URL")
        ca = a.get("ca")
        if ca is not None and (
            not isinstance(ca, str) or len(ca) > 65536 or "-----BEGIN CERTIFICATE-----" not in ca
        ):
            raise Invalid("actions: webhook: ca: expected null or PEM certificates")
        return {"type": "webhook", "url": url, "ca": ca}
    return {"type": t}


def check_alert(body: object, *, partial: bool = False) -> dict:
    """The members of an alert's JSON body, checked: name, search (a saved search's id),
    condition, actions, cooldown_s, enabled (name, search, condition and actions required
    unless partial).

    :raises Invalid: an unknown or malformed member.
    """
    if not isinstance(body, dict):
        raise Invalid("expected a JSON object")
    extra = sorted(set(body) - set(MEMBERS))
    if extra:
        raise Invalid(f"{extra[0]}: unknown member")
    if not partial:
        for k in ("name", "search", "condition", "actions"):
            if k not in body:
                raise Invalid(f"{k}: required")
    out: dict = {}
    if "name" in body:
        n = body["name"]
        if not isinstance(n, str) or not 1 <= len(n) <= ALERT_NAME_MAX or not n.isprintable():
            raise Invalid(f"name: expected 1 to {ALERT_NAME_MAX} printable characters")
        out["name"] = n
    if "search" in body:
        if not isinstance(body["search"], str) or not ID_RE.fullmatch(body["search"]):
            raise Invalid("search: expected a saved search's id (12 hex digits)")
        out["search"] = body["search"]
    if "condition" in body:
        out["condition"] = check_condition(body["condition"])
    if "actions" in body:
        acts = body["actions"]
        if not isinstance(acts, list) or len(acts) > ACTIONS_MAX:
            raise Invalid(f"actions: expected a list of at most {ACTIONS_MAX}")
        out["actions"] = [check_action(a) for a in acts]
    if "cooldown_s" in body:
        out["cooldown_s"] = _int(body, "cooldown_s", 0, COOLDOWN_MAX_S)
    if "enabled" in body:
        if not isinstance(body["enabled"], bool):
            raise Invalid("enabled: expected true or false")
        out["enabled"] = body["enabled"]
    return out


# ---------------------------------------------------------------- the store


def _dumps(rec: dict) -> bytes:
    return json.dumps(rec, separators=(",", ":")).encode()


def _history_key(aid: str, time_us: int, n: int) -> bytes:
    return aid.encode() + time_us.to_bytes(8, "big") + n.to_bytes(2, "big")


class AlertStore:
    """The alerts of an accounts store (its DBs `alerts` and `alert_history`)."""

    def __init__(self, accounts: Accounts) -> None:
        self.acc = accounts
        self._history_writes = 0

    def create(self, owner: str, members: dict) -> Alert:
        """A new alert of owner from check_alert's members.

        :raises NotFound: no such user.
        :raises Conflict: owner has ALERTS_PER_USER already.
        """
        acc = self.acc
        now = acc._now_us()
        users, alerts = acc._db(b"users"), acc._db(b"alerts")
        with acc._txn(b"alerts", write=True) as txn:
            if acc._user_rec(txn, users, owner) is None:
                raise NotFound(f"no user '{owner}'")
            mine = sum(1 for _, v in txn.cursor(db=alerts) if json.loads(v)["owner"] == owner)
            if mine >= ALERTS_PER_USER:
                raise Conflict(f"'{owner}' has {ALERTS_PER_USER} alerts already")
            while True:
                aid = secrets.token_hex(6)
                if txn.get(aid.encode(), db=alerts) is None:
                    break
            rec = {
                "id": aid,
                "owner": owner,
                "name": members["name"],
                "search": members["search"],
                "condition": members["condition"],
                "actions": members["actions"],
                "cooldown_s": members.get("cooldown_s", 300),
                "enabled": members.get("enabled", True),
                "created_us": now,
                "updated_us": now,
            }
            txn.put(aid.encode(), _dumps(rec), db=alerts)
        return Alert._from(rec)

    def get(self, aid: str) -> Alert | None:
        """The alert with that id, or None."""
        if not isinstance(aid, str) or not ID_RE.fullmatch(aid):
            return None
        with self.acc._txn(b"alerts") as txn:
            raw = txn.get(aid.encode())
        return Alert._from(json.loads(raw)) if raw else None

    def list(self) -> list[Alert]:
        """Every alert, by name then id (the caller keeps what a user may see)."""
        with self.acc._txn(b"alerts") as txn:
            out = [Alert._from(json.loads(v)) for _, v in txn.cursor()]
        return sorted(out, key=lambda a: (a.name.casefold(), a.id))

    def _change(self, aid: str, change: Any) -> tuple[dict, dict]:
        with self.acc._txn(b"alerts", write=True) as txn:
            raw = txn.get(aid.encode()) if ID_RE.fullmatch(str(aid)) else None
            if raw is None:
                raise NotFound(f"no alert '{aid}'")
            old = json.loads(raw)
            rec = change(dict(old))
            txn.put(aid.encode(), _dumps(rec))
        return old, rec

    def update(self, aid: str, members: dict) -> Alert:
        """Changes the given members (check_alert(partial=True)).

        :raises NotFound: no such alert.
        """

        def change(rec: dict) -> dict:
            rec.update(members)
            rec["updated_us"] = max(self.acc._now_us(), rec["created_us"])
            return rec

        return Alert._from(self._change(aid, change)[1])

    def request_test(self, aid: str, by: str) -> str:
        """Asks alertd to test-fire the alert; the request's id (its history entry has it).

        :raises NotFound: no such alert.
        """
        rid = secrets.token_hex(6)

        def change(rec: dict) -> dict:
            rec["test_request"] = {"id": rid, "by": by, "time_us": self.acc._now_us()}
            return rec

        self._change(aid, change)
        return rid

    def take_test(self, aid: str, rid: str) -> None:
        """alertd: the test-fire rid is being done (the request is removed unless replaced)."""

        def change(rec: dict) -> dict:
            if (rec.get("test_request") or {}).get("id") == rid:
                rec.pop("test_request")
            return rec

        try:
            self._change(aid, change)
        except NotFound:
            pass

    # -------------------------------------------------------- an admin's test messages

    def request_delivery_test(self, action: dict, by: str) -> str:
        """Asks logbox-alertd to send the test message of action (deliver.try_delivery): the
        apps themselves have no network. The request's id; old ones are removed."""
        rid = secrets.token_hex(6)
        now = self.acc._now_us()
        db = self.acc._db(b"delivery_tests")
        with self.acc._txn(b"delivery_tests", write=True) as txn:
            for key, value in list(txn.cursor(db=db)):
                if now - json.loads(value)["time_us"] > DELIVERY_TEST_KEEP_S * 1_000_000:
                    txn.delete(key, db=db)
            rec = {"action": action, "by": by, "time_us": now, "taken": False, "result": None}
            txn.put(rid.encode(), json.dumps(rec).encode(), db=db)
        return rid

    def take_delivery_tests(self) -> list[tuple[str, dict]]:
        """logbox-alertd: the test messages asked for and not taken yet, (id, action) each, now
        marked taken (each is sent once)."""
        db = self.acc._db(b"delivery_tests")
        out: list[tuple[str, dict]] = []
        with self.acc._txn(b"delivery_tests", write=True) as txn:
            for key, value in list(txn.cursor(db=db)):
                rec = json.loads(value)
                if rec["taken"]:
                    continue
                rec["taken"] = True
                txn.put(key, json.dumps(rec).encode(), db=db)
                out.append((key.decode(), rec["action"]))
        return out

    def finish_delivery_test(self, rid: str, result: dict) -> None:
        """logbox-alertd: how the test message rid went (try_delivery's answer)."""
        db = self.acc._db(b"delivery_tests")
        with self.acc._txn(b"delivery_tests", write=True) as txn:
            raw = txn.get(rid.encode(), db=db)
            if raw is None:  # the app gave up waiting and removed it
                return
            rec = json.loads(raw)
            rec["result"] = result
            txn.put(rid.encode(), json.dumps(rec).encode(), db=db)

    def delivery_test_result(self, rid: str, *, remove: bool = False) -> dict | None:
        """The result of the test message rid, None while there is none (removed when asked)."""
        db = self.acc._db(b"delivery_tests")
        with self.acc._txn(b"delivery_tests", write=remove) as txn:
            raw = txn.get(rid.encode(), db=db)
            result = json.loads(raw)["result"] if raw is not None else None
            if remove and raw is not None:
                txn.delete(rid.encode(), db=db)
        return result

    def delete(self, aid: str) -> Alert:
        """Deletes an alert and its history; what it was.

        :raises NotFound: no such alert.
        """
        hist = self.acc._db(b"alert_history")
        with self.acc._txn(b"alerts", write=True) as txn:
            raw = txn.get(aid.encode()) if ID_RE.fullmatch(str(aid)) else None
            if raw is None:
                raise NotFound(f"no alert '{aid}'")
            txn.delete(aid.encode())
            cur = txn.cursor(db=hist)
            if cur.set_range(aid.encode()):
                while cur.key().startswith(aid.encode()):
                    if not cur.delete():
                        break
        return Alert._from(json.loads(raw))

    # ------------------------------------------------------------ history

    def record(self, aid: str, entry: dict) -> dict:
        """Appends a history entry of alert aid (alertd); entry gains "id" and "time"."""
        with self.acc._txn(b"alert_history", write=True) as txn:
            cur = txn.cursor()
            t, n = self.acc._now_us(), 0
            last = _last_of(cur, aid)  # a clock gone back: after the last one
            if last is not None:
                lt, ln = int.from_bytes(last[12:20], "big"), int.from_bytes(last[20:22], "big")
                if lt >= t:
                    t, n = lt, ln + 1
                    if n >> 16:
                        t, n = t + 1, 0
            rec = {**entry, "id": f"{t:016x}{n:04x}", "time": rfc3339(t)}
            txn.put(_history_key(aid, t, n), _dumps(rec))
        self._history_writes += 1
        if self._history_writes % HISTORY_PRUNE_EVERY == 0:
            self.prune(aid)
        return rec

    def prune(self, aid: str, keep: int = HISTORY_PER_ALERT) -> int:
        """Deletes all but the newest keep entries of alert aid; how many went."""
        with self.acc._txn(b"alert_history", write=True) as txn:
            cur = txn.cursor()
            keys = []
            if cur.set_range(aid.encode()):
                while cur.key().startswith(aid.encode()):
                    keys.append(cur.key())
                    if not cur.next():
                        break
            for k in keys[: max(0, len(keys) - keep)]:
                txn.delete(k)
        return max(0, len(keys) - keep)

    def history(self, aid: str, limit: int = 100, before: str | None = None) -> list[dict]:
        """Alert aid's history entries, newest first, at most limit, older than the entry id
        before (the paging cursor) when given."""
        out: list[dict] = []
        with self.acc._txn(b"alert_history") as txn:
            cur = txn.cursor()
            end = _history_key(aid, (1 << 64) - 1, 0xFFFF)
            if before is not None and re.fullmatch(r"[0-9a-f]{20}", before):
                end = aid.encode() + bytes.fromhex(before)
            if cur.set_range(end):
                ok = cur.prev()
            else:
                ok = cur.last()
            while ok and cur.key().startswith(aid.encode()) and len(out) < limit:
                if cur.key() < end:
                    out.append(json.loads(cur.value()))
                ok = cur.prev()
        return out


def _last_of(cur: Any, aid: str) -> bytes | None:
    """The last history key of aid (cur positioned anywhere)."""
    nxt = (int(aid, 16) + 1).to_bytes(6, "big").hex() if aid != "f" * 12 else None
    if nxt is not None and cur.set_range(nxt.encode()):
        ok = cur.prev()
    else:
        ok = cur.last()
    if ok and cur.key().startswith(aid.encode()):
        return bytes(cur.key())
    return None


# ---------------------------------------------------------------- states (alertd's status file)

STATUS_FRESH_S = 10.0  # alertd's status file older than this: alertd is not running


def read_status(path: str | None, now: float) -> tuple[dict, dict[str, dict]]:
    """alertd's service entry ({"state": "running"|"down"|"unknown", "pid", "uptime_s"}) and
    its per-alert states (id -> {"state", "reason", "last_fired"}) from its status file; every
    alert "unknown" when alertd does not run. Never raises."""
    entry: dict[str, Any] = {"state": "unknown", "pid": None, "uptime_s": None}
    if not path:
        return entry, {}
    entry["state"] = "down"
    try:
        with open(path, "rb") as f:
            age = now - os.fstat(f.fileno()).st_mtime
            doc = json.loads(f.read(64 << 20))
        if not isinstance(doc, dict):
            return entry, {}
    except (OSError, ValueError):
        return entry, {}
    pid = doc.get("pid")
    if age > STATUS_FRESH_S or not isinstance(pid, int) or not _alive(pid):
        return entry, {}
    up = doc.get("uptime_s")
    entry = {
        "state": "running",
        "pid": pid,
        "uptime_s": round(float(up) + max(0.0, age), 3) if isinstance(up, int | float) else None,
    }
    alerts = doc.get("alerts") if isinstance(doc.get("alerts"), dict) else {}
    return entry, {
        k: {
            "state": v.get("state") if v.get("state") in STATES else "unknown",
            "reason": v.get("reason") if isinstance(v.get("reason"), str) else None,
            "last_fired": v.get("last_fired") if isinstance(v.get("last_fired"), str) else None,
        }
        for k, v in alerts.items()
        if isinstance(v, dict)
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


UNKNOWN = {"state": "unknown", "reason": "logbox-alertd is not running", "last_fired": None}


def state_of(a: Alert, states: dict[str, dict], running: bool) -> dict:
    """What GET /alerts and /status say of an alert's state."""
    if not running:
        return dict(UNKNOWN)
    return states.get(a.id) or {
        "state": "pending",
        "reason": "not evaluated yet",
        "last_fired": None,
    }


def run_delivery_test(
    store: AlertStore,
    action: dict,
    by: str,
    alertd_status: str | None,
    wait_s: float = DELIVERY_TEST_WAIT_S,
) -> dict[str, Any]:
    """An admin's test message over one channel, sent by logbox-alertd (the daemon that
    delivers; the apps run without network): deliver.try_delivery's answer, or a failure
    saying why not: alertd does not run (its status file, alertd_status, says so; None: not
    looked at), or has not sent it within wait_s (the request is withdrawn)."""
    if (
        alertd_status is not None
        and read_status(alertd_status, time.time())[0]["state"] != "running"
    ):
        return {
            "channel": action.get("type"),
            "delivered": False,
            "error": "logbox-alertd, which sends the test messages, is not running",
            "seconds": 0.0,
        }
    rid = store.request_delivery_test(action, by)
    deadline = time.monotonic() + wait_s
    while True:
        done = time.monotonic() >= deadline
        result = store.delivery_test_result(rid, remove=done)
        if result is not None:
            if not done:
                store.delivery_test_result(rid, remove=True)
            return result
        if done:
            break
        time.sleep(0.1)
    return {
        "channel": action.get("type"),
        "delivered": False,
        "error": f"logbox-alertd did not send the test message within {wait_s:.0f} s "
        "(is it running?)",
        "seconds": round(wait_s, 3),
    }
