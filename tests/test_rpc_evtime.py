# The API's `time` parameter (rpc/API.md §2, indexer/PROTOCOL.md §2.1 "Event time"): real
# gunicorn and real logbox-searchd over a store that `logbox ingest` wrote, whose messages carry
# their own time stamps from skewed clocks (none, hours apart, 2099). search, count, histogram and
# top (and export) with time=event agree with an oracle made from `logbox cat` (timestamp_us rounded down to
# the second, in [from, to)); the default stays receive time; a bad value is 400; a searcher
# without the read right on a logspace gets 403 there with time=event as without it.

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from lbtest.cli import Logbox
from lbtest.rpc import RpcServer, search_pages
from lbtest.searchd import Searchd, searchd_binary
from logbox_client import Client

E0 = 1748736000  # 2025-06-01T00:00:00Z
N = 200
US = 1_000_000


def stamp(i: int) -> str:
    if i % 7 == 0:
        return "-"
    if i % 7 == 1:
        return "2099-01-01T00:00:00Z"
    s = E0 + (i * 331) % 7200
    h, m, sec = s % 86400 // 3600, s % 3600 // 60, s % 60
    return f"2025-06-01T{h:02d}:{m:02d}:{sec:02d}.25Z"


def line(i: int) -> bytes:
    return b"<13>1 %s web%d app - - - evt n%d %s\n" % (
        stamp(i).encode(),
        i % 2,
        i,
        b"odd" if i % 2 else b"even",
    )


@dataclass
class Stack:
    rpc: RpcServer
    admin: requests.Session
    sec: dict[int, int | None]  # id -> event second of main's messages


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path, store_cli: Path) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("rpcevt")
    data = root / "data"
    data.mkdir()
    lb = Logbox(store_cli, data)
    lb.ingest(b"".join(line(i) for i in range(1, N + 1)))
    Logbox(store_cli, data, "other").ingest(b"".join(line(i) for i in range(1, 11)))
    sec = {
        m["id"]: None if m["timestamp_us"] is None else m["timestamp_us"] // US for m in lb.cat()
    }
    with Searchd(searchd_binary(top), data, root / "sd.sock") as sd:
        with RpcServer(root / "rpc", searchd_socket=sd.sock, data=data) as rpc:
            yield Stack(rpc, rpc.session(rpc.login()), sec)


def ok(r: requests.Response) -> dict[str, Any]:
    assert r.status_code == 200, f"{r.url}: {r.status_code} {r.text[:500]}"
    return r.json()


@pytest.mark.parametrize(
    ("a", "b"), [(E0, E0 + 3600), (E0 + 100, E0 + 7200), (4070908800, 4070908801)]
)
def test_event_time_through_the_api(stack: Stack, a: int, b: int) -> None:
    st = stack
    base = f"{st.rpc.base}/logspaces/main"
    want = sorted(i for i, s in st.sec.items() if s is not None and a <= s < b)
    odd = [i for i in want if i % 2]
    p = {"from": str(a), "to": str(b), "time": "event"}
    count = ok(st.admin.get(base + "/count", params={"q": "evt", **p}, timeout=30))
    assert count["total"] == len(want) and count["time"] == "event"
    hits = [
        h["id"]
        for body in search_pages(
            st.admin, base + "/search", {"q": "odd", **p, "order": "oldest", "limit": 17}
        )
        for h in body["hits"]
    ]
    assert hits == odd
    hist = ok(st.admin.get(base + "/histogram", params={"q": "*", **p, "buckets": 6}, timeout=30))
    step = hist["step_us"] // US
    assert [bk["count"] for bk in hist["buckets"]] == [
        sum(1 for i in want if bk["from"] // US <= st.sec[i] < bk["from"] // US + step)  # type: ignore[operator]
        for bk in hist["buckets"]
    ]
    top = ok(
        st.admin.get(base + "/top", params={"q": "*", **p, "field": "host", "k": 3}, timeout=30)
    )
    assert {v["value"]: v["count"] for v in top["values"]} == {
        h: n for h, n in (("web0", len(want) - len(odd)), ("web1", len(odd))) if n > 0
    }


def test_export_by_event_time(stack: Stack) -> None:
    st = stack
    want = sorted(i for i, s in st.sec.items() if s is not None and E0 <= s < E0 + 7200)
    r = st.admin.get(
        f"{st.rpc.base}/logspaces/main/export",
        params={
            "q": "*",
            "from": str(E0),
            "to": str(E0 + 7200),
            "time": "event",
            "order": "oldest",
        },
        timeout=60,
    )
    assert r.status_code == 200, r.text[:300]
    got = [json.loads(ln)["id"] for ln in r.text.splitlines() if ln]
    assert got == want and r.headers["X-Logbox-Total"] == str(len(want))


def test_received_is_the_default_and_bad_values_are_refused(stack: Stack) -> None:
    st = stack
    base = f"{st.rpc.base}/logspaces/main"
    r = ok(st.admin.get(base + "/count", params={"q": "*"}, timeout=30))
    assert r["total"] == N and r["time"] == "received"
    r = ok(
        st.admin.get(
            base + "/count", params={"q": "*", "from": str(E0), "to": str(E0 + 7200)}, timeout=30
        )
    )
    assert r["total"] == 0  # received now, not in 2025
    bad = st.admin.get(base + "/count", params={"q": "*", "time": "sent"}, timeout=30)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_parameter"


def test_saved_search_keeps_event_time(stack: Stack) -> None:
    st = stack
    body = {"name": "2025 clocks", "logspace": "main", "query": "evt", "from": str(E0),
            "to": str(E0 + 7200), "time": "event"}  # fmt: skip
    r = st.admin.post(f"{st.rpc.base}/searches", json=body, timeout=30)
    assert r.status_code == 201, r.text
    saved = r.json()
    assert saved["time"] == "event"
    assert (
        st.admin.get(f"{st.rpc.base}/searches/{saved['id']}", timeout=30).json()["time"] == "event"
    )
    r = st.admin.patch(
        f"{st.rpc.base}/searches/{saved['id']}", json={"time": "received"}, timeout=30
    )
    assert r.status_code == 200 and r.json()["time"] == "received"
    r = st.admin.patch(f"{st.rpc.base}/searches/{saved['id']}", json={"time": "sent"}, timeout=30)
    assert r.status_code == 400
    assert st.admin.delete(f"{st.rpc.base}/searches/{saved['id']}", timeout=30).status_code == 200


def test_rights_hold_by_event_time(stack: Stack) -> None:
    st = stack
    s = st.rpc.new_searcher(st.admin, "evtsearcher", ["main"])
    p = {"q": "*", "from": str(E0), "to": str(E0 + 7200), "time": "event"}
    assert ok(s.get(f"{st.rpc.base}/logspaces/main/count", params=p, timeout=30))["total"] > 0
    for what in ("search", "count", "histogram", "top"):
        extra = {"field": "host"} if what == "top" else {}
        r = s.get(f"{st.rpc.base}/logspaces/other/{what}", params={**p, **extra}, timeout=30)
        assert r.status_code == 403, (what, r.status_code, r.text[:200])


def test_event_time_through_the_client_and_logbox_remote(stack: Stack, top: Path) -> None:
    """logbox_client's time= and logbox-remote's --time event ask the same as the API."""
    st = stack
    a, b = E0 + 100, E0 + 3700
    want = sorted(i for i, s in st.sec.items() if s is not None and a <= s < b)
    token = st.rpc.login()
    c = Client(st.rpc.url, token=token, verify=str(st.rpc.cafile))
    assert c.count("evt", from_=a, to=b, time="event") == len(want)
    got = sorted(h["id"] for h in c.iter_search("evt", from_=a, to=b, time="event", page=7))
    assert got == want
    assert c.count("evt", from_=a, to=b) != len(want)  # receive times: another answer
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGBOX_")}
    env.update(LOGBOX_URL=st.rpc.url, LOGBOX_CA=str(st.rpc.cafile), LOGBOX_TOKEN=token)
    argv = [sys.executable, str(top / "rpc/logbox-remote"), "count", "--time", "event",
            "--from", str(a), "--to", str(b), "evt"]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == str(len(want)), done.stderr
    bad = subprocess.run([*argv[:3], "--time", "sent", *argv[5:]], env=env, capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "--time" in bad.stderr
