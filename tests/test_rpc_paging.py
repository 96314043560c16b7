# Scenario (issue 6): paging with the cursor through the RPC API stays consistent while messages
# keep arriving. A live writer sends through the real ingest path (syslog-ng -> FIFO ->
# logbox-indexd) the whole time; a query that matches part of its messages (and none of the
# noise beside them) is paged through real gunicorn (TLS) and real searchd, in both orders,
# with small pages and a pause between them so that arrivals interleave. Checked against the
# store read back with `logbox cat` once the writer stopped: every message that matched when
# paging began appears exactly once, no id twice, ids strictly monotonic, and no matching id is
# skipped below the newest one the paging reached.
from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from lbtest.appliance import Appliance
from lbtest.rpc import RpcServer, search_pages
from lbtest.searchd import Searchd, searchd_binary

pytestmark = pytest.mark.slow

PREFILL = 3000  # messages stored before paging begins
RATE = 800  # messages per second from the writer while paging
LIMIT = 97
QUERY = "pagetok NOT skipme"


def line(seq: int) -> bytes:
    """The writer's seq-th message: 2 of 3 match QUERY, the rest are skipme or noise."""
    kind = seq % 6
    ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if kind in (0, 1, 3, 4):
        text = f"pagetok seq={seq} value {seq * 7919 % 1000}"
    elif kind == 2:
        text = f"pagetok skipme seq={seq}"
    else:
        text = f"noise seq={seq} nothing to see"
    return f"<14>1 {ts} pagehost pager {seq % 97} - - {text}\n".encode()


def matches(m: dict[str, Any]) -> bool:
    """QUERY evaluated on a stored message (the writer's words are space-delimited)."""
    words = m["message"].split()
    return "pagetok" in words and "skipme" not in words


class Writer(threading.Thread):
    """Sends line(seq) over one TCP connection to syslog-ng at about RATE a second."""

    def __init__(self, app: Appliance, start_seq: int) -> None:
        super().__init__(daemon=True)
        self.app = app
        self.seq = start_seq
        self.stop_evt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.app.connect("tcp") as s:
                batch = max(1, RATE // 50)
                while not self.stop_evt.is_set():
                    s.sendall(b"".join(line(self.seq + i) for i in range(batch)))
                    self.seq += batch
                    time.sleep(0.02)
        except BaseException as e:  # reported by the test
            self.error = e

    def finish(self) -> int:
        """Stops the writer; returns how many messages it sent in all (with the prefill)."""
        self.stop_evt.set()
        self.join(30)
        assert self.error is None, f"writer failed: {self.error!r}"
        return self.seq


@dataclass
class Live:
    app: Appliance
    rpc: RpcServer
    session: requests.Session
    time_from: str
    time_to: str


@pytest.fixture
def live(tmp_path: Path, top: Path) -> Iterator[Live]:
    with Appliance(tmp_path) as app:
        t0 = int(time.time()) - 2
        app.send(b"".join(line(i) for i in range(PREFILL)), "tcp")
        app.wait_count(PREFILL, timeout=60)
        sd = Searchd(searchd_binary(top), app.data, tmp_path / "searchd.sock").start()
        try:
            with RpcServer(tmp_path / "rpc", searchd_socket=sd.sock, data=app.data) as rpc:
                s = rpc.session(rpc.login())
                yield Live(app, rpc, s, str(t0), str(t0 + 3600))
        finally:
            sd.stop()


def page_through(lv: Live, order: str) -> tuple[list[int], int, int]:
    """Ids of every hit of QUERY, page by page (a pause between pages); also the total of the
    first page and how many pages it took."""
    ids: list[int] = []
    first_total = -1
    pages = 0
    params = {"q": QUERY, "from": lv.time_from, "to": lv.time_to, "order": order, "limit": LIMIT}
    url = f"{lv.rpc.base}/logspaces/main/search"
    for body in search_pages(lv.session, url, params, most=10_000):
        pages += 1
        if first_total < 0:
            first_total = body["total"]
        ids += [h["id"] for h in body["hits"]]
        cursor = body["next_cursor"]
        if cursor is not None:
            assert int(cursor) == ids[-1], (cursor, ids[-5:])
            time.sleep(0.03)
    return ids, first_total, pages


@pytest.mark.parametrize("order", ["newest", "oldest"])
def test_paging_while_messages_arrive(live: Live, order: str) -> None:
    lv = live
    writer = Writer(lv.app, PREFILL)
    writer.start()
    try:
        # the writer is running: wait until its messages are being stored
        lv.app.wait_count(PREFILL + RATE // 2, timeout=30, exact=False)
        stored_before = lv.app.count()
        ids, first_total, pages = page_through(lv, order)
        stored_after = lv.app.count()
    finally:
        sent = writer.finish()
    lv.app.wait_count(sent, timeout=60)
    assert stored_after > stored_before, "nothing arrived while paging: the test proves nothing"
    assert pages > 10, pages

    truth = [m["id"] for m in lv.app.iter_messages() if matches(m)]
    at_start = [i for i in truth if i <= stored_before]
    dup = len(ids) - len(set(ids))
    assert dup == 0, f"{dup} ids returned twice"
    step = -1 if order == "newest" else 1
    bad = [(a, b) for a, b in itertools.pairwise(ids) if (b - a) * step <= 0]
    assert not bad, f"ids not strictly {'de' if step < 0 else 'in'}creasing: {bad[:5]}"
    missing = sorted(set(at_start) - set(ids))
    assert (
        not missing
    ), f"{len(missing)} messages matching when paging began are missing: {missing[:10]}"
    # no gap: below the newest id the paging reached, every match is there
    top_id = max(ids)
    assert set(ids) == {i for i in truth if i <= top_id}
    assert first_total >= len(at_start), (first_total, len(at_start))
    assert set(ids) <= set(truth)
