# Scenario: logbox-alertd's evaluation (logbox_core/alertd.py) against a real searchd over a real
# store that grows while it runs (`logbox ingest` between rounds), with the alerts in a real
# accounts store. The rounds are driven one by one with a clock the test sets, so windows and
# cooldowns are exact: "any" fires once per round with new matches and never for what was there
# before the alert began; "above" sums a sliding window and forgets what slid out; "below" waits
# one whole window first; grouping by host fires per host; the cooldown holds back a second
# firing per group; a restart (a new AlertD on the same state file) neither fires again nor
# misses what came meanwhile; an owner who loses the read right gets "forbidden" and no firing,
# and the alert starts afresh when the right comes back; a deleted saved search is an "error";
# a test-fire request is done and recorded with its request id; the status file says it all.
from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lbtest.cli import Logbox
from logbox_core.accounts import Accounts
from logbox_core.alertd import AlertD
from logbox_core.alerts import AlertStore, run_delivery_test
from logbox_core.searchd import Searchd as Client

PASSWORD = "correct horse battery"


class Clock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, store_cli: Path) -> Path:
    d = tmp_path_factory.mktemp("alertd") / "data"
    d.mkdir()
    Logbox(store_cli, d).ingest(b"<14>old1 app: boom before the alert\n")
    Logbox(store_cli, d, logspace="secret").ingest(b"<14>s1 app: boom secret\n")
    return d


@pytest.fixture
def env(tmp_path: Path, searchd: object) -> Iterator[tuple[Accounts, AlertStore, Client]]:
    acc = Accounts(tmp_path / "accounts")
    acc.add_user("admin", PASSWORD, "admin")
    acc.add_user("sam", PASSWORD, "searcher", ["main"])
    sd = Client(searchd.sock)  # type: ignore[attr-defined]
    yield acc, AlertStore(acc), sd
    sd.close()
    acc.close()


def send(store_cli: Path, data: Path, *lines: str, logspace: str = "main") -> None:
    Logbox(store_cli, data, logspace=logspace).ingest(
        "".join(f"<14>1 - {ln.replace(' app: ', ' app - - - ', 1)}\n" for ln in lines).encode()
    )


def daemon(tmp_path: Path, acc: Accounts, sd: Client, clock: Clock) -> AlertD:
    return AlertD(
        acc,
        sd,
        state_path=str(tmp_path / "state.json"),
        status_path=str(tmp_path / "status.json"),
        clock=clock,
    )


def alert(
    acc: Accounts, store: AlertStore, owner: str, condition: dict, *, logspace: str = "main",
    query: str = "boom", cooldown_s: int = 0,
) -> str:  # fmt: skip
    s = acc.save_search(owner, {"name": "s", "logspace": logspace, "query": query})
    a = store.create(
        owner,
        {"name": "a", "search": s.id, "condition": condition, "actions": [],
         "cooldown_s": cooldown_s},
    )  # fmt: skip
    return a.id


def fired(d: AlertD, store: AlertStore, aid: str) -> list[dict]:
    """The alert's firings so far (oldest first), once the pool has delivered them."""
    for f in list(d.pending):
        f.result(timeout=10)
    return [e for e in reversed(store.history(aid)) if e["kind"] == "firing"]


def step(d: AlertD, clock: Clock, dt: float = 1.0) -> None:
    clock.t += dt
    d.round()


def test_any_fires_per_round_with_new_matches_only(
    env: tuple[Accounts, AlertStore, Client], tmp_path: Path, store_cli: Path, data: Path
) -> None:
    acc, store, sd = env
    clock = Clock()
    aid = alert(acc, store, "sam", {"kind": "any"})
    d = daemon(tmp_path, acc, sd, clock)
    step(d, clock)
    step(d, clock)
    assert fired(d, store, aid) == [], "what was there before the alert must not fire it"
    send(store_cli, data, "h1 app: boom one", "h1 app: quiet", "h2 app: boom two")
    step(d, clock)
    f = fired(d, store, aid)
    assert len(f) == 1 and f[0]["count"] == 2 and f[0]["ok"], f
    assert len(f[0]["samples"]) == 2
    step(d, clock)
    assert len(fired(d, store, aid)) == 1
    st = json.loads((tmp_path / "status.json").read_text())
    assert st["alerts"][aid]["state"] in ("firing", "cooldown", "ok")
    d.close()


def test_above_window_grouped_and_cooldown(
    env: tuple[Accounts, AlertStore, Client], tmp_path: Path, store_cli: Path, data: Path
) -> None:
    acc, store, sd = env
    clock = Clock()
    cond = {"kind": "above", "n": 2, "window_s": 10, "group_by": "host"}
    aid = alert(acc, store, "sam", cond, query="grp", cooldown_s=30)
    d = daemon(tmp_path, acc, sd, clock)
    step(d, clock)
    send(store_cli, data, "ga app: grp 1", "ga app: grp 2", "gb app: grp 3")
    step(d, clock)
    assert fired(d, store, aid) == []  # 2 is not above 2
    send(store_cli, data, "ga app: grp 4", "gb app: grp 5")
    step(d, clock)
    f = fired(d, store, aid)
    assert [(e["group"], e["count"]) for e in f] == [({"field": "host", "value": "ga"}, 3)], f
    # within the cooldown, ga does not fire again; gb reaches 3 and fires on its own
    send(store_cli, data, "ga app: grp 6", "gb app: grp 7")
    step(d, clock)
    f = fired(d, store, aid)
    assert [(e["group"]["value"], e["count"]) for e in f] == [("ga", 3), ("gb", 3)], f
    assert d.states[aid].state == "firing"  # gb fired
    step(d, clock)
    assert d.states[aid].state == "cooldown"  # both above, both held back
    assert len(fired(d, store, aid)) == 2
    # the window slides: 11 s later everything counted has left it
    step(d, clock, 11)
    assert d.states[aid].buckets == {}
    assert d.states[aid].state == "ok"
    # after the cooldown, ga fires again on a fresh window
    clock.t += 30
    send(store_cli, data, "ga app: grp 8", "ga app: grp 9", "ga app: grp 10")
    step(d, clock)
    f = fired(d, store, aid)
    assert [(e["group"]["value"], e["count"]) for e in f][-1] == ("ga", 3), f
    d.close()


def test_below_waits_a_whole_window(
    env: tuple[Accounts, AlertStore, Client], tmp_path: Path, store_cli: Path, data: Path
) -> None:
    acc, store, sd = env
    clock = Clock()
    aid = alert(
        acc, store, "sam", {"kind": "below", "n": 2, "window_s": 5, "group_by": None},
        query="heartbeat", cooldown_s=60,
    )  # fmt: skip
    d = daemon(tmp_path, acc, sd, clock)
    step(d, clock)
    send(store_cli, data, "hb app: heartbeat")
    step(d, clock)
    step(d, clock, 2)
    assert fired(d, store, aid) == [], "below must wait one whole window"
    send(store_cli, data, "hb app: heartbeat")
    step(d, clock, 1.5)  # 5.5 s watched, 2 heartbeats in the window: not below 2
    assert fired(d, store, aid) == []
    step(d, clock, 3)  # the first heartbeat left the window: 1 < 2
    f = fired(d, store, aid)
    assert len(f) == 1 and f[0]["count"] == 1, f
    d.close()


def test_restart_neither_refires_nor_misses(
    env: tuple[Accounts, AlertStore, Client], tmp_path: Path, store_cli: Path, data: Path
) -> None:
    acc, store, sd = env
    clock = Clock()
    aid = alert(acc, store, "sam", {"kind": "any"}, query="restartword")
    d = daemon(tmp_path, acc, sd, clock)
    step(d, clock)
    send(store_cli, data, "r app: restartword 1")
    step(d, clock)
    assert len(fired(d, store, aid)) == 1
    d.close()
    send(store_cli, data, "r app: restartword 2", "r app: restartword 3")  # while it is down
    d = daemon(tmp_path, acc, sd, clock)
    step(d, clock)
    f = fired(d, store, aid)
    assert [e["count"] for e in f] == [1, 2], f
    step(d, clock)
    assert len(fired(d, store, aid)) == 2
    d.close()


def test_rights_lost_forbidden_and_back(
    env: tuple[Accounts, AlertStore, Client], tmp_path: Path, store_cli: Path, data: Path
) -> None:
    acc, store, sd = env
    clock = Clock()
    acc.update_user("sam", logspaces=["main", "secret"])
    aid = alert(acc, store, "sam", {"kind": "any"}, logspace="secret", query="boom")
    d = daemon(tmp_path, acc, sd, clock)
    step(d, clock)
    acc.update_user("sam", logspaces=["main"])
    send(store_cli, data, "s2 app: boom while forbidden", logspace="secret")
    step(d, clock)
    assert d.states[aid].state == "forbidden"
    assert "may not read logspace 'secret'" in (d.states[aid].reason or "")
    assert fired(d, store, aid) == []
    st = json.loads((tmp_path / "status.json").read_text())
    assert st["alerts"][aid]["state"] == "forbidden"
    acc.update_user("sam", logspaces=["main", "secret"])
    step(d, clock)
    assert d.states[aid].state == "ok"
    assert fired(d, store, aid) == [], "what came while forbidden is not judged"
    send(store_cli, data, "s3 app: boom again", logspace="secret")
    step(d, clock)
    assert len(fired(d, store, aid)) == 1
    # its saved search deleted: an error that says so
    acc.delete_search(store.get(aid).search)  # type: ignore[union-attr]
    step(d, clock)
    assert d.states[aid].state == "error" and "no longer exists" in (d.states[aid].reason or "")
    d.close()


def test_test_fire_recorded(
    env: tuple[Accounts, AlertStore, Client], tmp_path: Path, store_cli: Path, data: Path
) -> None:
    acc, store, sd = env
    clock = Clock()
    aid = alert(acc, store, "sam", {"kind": "any"})
    rid = store.request_test(aid, "sam")
    d = daemon(tmp_path, acc, sd, clock)
    step(d, clock)
    for f in list(d.pending):
        f.result(timeout=10)
    tests = [e for e in store.history(aid) if e["kind"] == "test"]
    assert len(tests) == 1 and tests[0]["request"] == rid and tests[0]["by"] == "sam", tests
    assert tests[0]["count"] >= 1  # samples of the last day's matches
    assert store.get(aid).test_request is None  # type: ignore[union-attr]
    step(d, clock)
    assert len([e for e in store.history(aid) if e["kind"] == "test"]) == 1
    d.close()


def test_delivery_test_sent_by_alertd_once(
    env: tuple[Accounts, AlertStore, Client], tmp_path: Path
) -> None:
    """An admin's test message (the apps have no network): the app's request is sent by the
    next round, once, and its result handed back; without alertd the app hears so in time."""
    acc, store, sd = env
    clock = Clock()
    # alertd does not run (no status file): said at once, nothing asked
    down = run_delivery_test(store, {"type": "syslog"}, "admin", str(tmp_path / "none.json"))
    assert down["delivered"] is False and "is not running" in down["error"]
    # nobody takes it: the waiting app gets a failure that says why, and the request goes
    lone = run_delivery_test(store, {"type": "syslog"}, "admin", None, wait_s=0.3)
    assert lone["delivered"] is False and "logbox-alertd did not send" in lone["error"]
    assert store.take_delivery_tests() == []
    d = daemon(tmp_path, acc, sd, clock)
    step(d, clock, 0.5)  # its status file: it runs
    got: list[dict] = []
    t = threading.Thread(
        target=lambda: got.append(
            run_delivery_test(store, {"type": "syslog"}, "admin", str(tmp_path / "status.json"))
        )
    )
    t.start()
    deadline = time.monotonic() + 10
    while t.is_alive() and time.monotonic() < deadline:
        step(d, clock, 0.5)
        for f in list(d.pending):
            f.result(timeout=10)
        time.sleep(0.05)
    t.join(timeout=10)
    # no delivery settings here: the syslog channel is not configured, and alertd says so
    assert len(got) == 1 and got[0]["channel"] == "syslog" and got[0]["delivered"] is False
    assert "syslog" in got[0]["error"] and "logbox-alertd" not in got[0]["error"]
    assert store.take_delivery_tests() == []  # taken once, and the result collected
    d.close()
