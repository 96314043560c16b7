# searchd's id windows (indexer/PROTOCOL.md §2.1: after, upto, through): the real daemon over a
# store that `logbox ingest` is still writing, so that it has both published segments and a
# tail not indexed yet. The oracle is the ids themselves: every message holds its own number,
# ingest acks tell which ids are stored, and a window must give exactly the ids it names; a
# caller that passes each answer's `through` as the next `after` sees every id once.

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lbtest.cli import Logbox
from lbtest.searchd import Searchd, searchd_binary
from lbtest.wait import wait_until

INDEXED = 120  # messages ingested and indexed before the open ingest starts
TAIL = 45  # messages stored by the open ingest, in no segment until it ends


def line(i: int) -> bytes:
    host = f"h{i % 3}"
    return b"<%d>1 - %s app - - - alpha n%d %s\n" % (
        8 + i % 8,
        host.encode(),
        i,
        b"odd" if i % 2 else b"even",
    )


class OpenIngest:
    """`logbox ingest --ack` with a flush interval longer than the test: what it stores stays
    in the tail (searched by brute force) until stdin is closed."""

    def __init__(self, lb: Logbox) -> None:
        self.proc = lb.popen(
            "ingest", "--ack", "--batch", "1", "--flush-ms", "600000", "-",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    def send(self, lines: list[bytes]) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"".join(lines))
        self.proc.stdin.flush()
        last = 0
        for _ in lines:
            got = self.proc.stdout.readline()
            assert got.startswith(b"ack "), got
            last = int(got.split()[1])
        return last

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=60)
        assert rc == 0, self.proc.stderr.read().decode(errors="replace")


@pytest.fixture()
def world(
    store: Path, store_cli: Path, top: Path, sockdir: Path
) -> Iterator[tuple[Searchd, OpenIngest]]:
    lb = Logbox(store_cli, store)
    lb.ingest(b"".join(line(i) for i in range(1, INDEXED + 1)))
    ing = OpenIngest(lb)
    try:
        assert ing.send([line(i) for i in range(INDEXED + 1, INDEXED + TAIL + 1)]) == INDEXED + TAIL
        with Searchd(searchd_binary(top), store, sockdir / "win.sock", ["--threads", "2"]) as d:
            yield d, ing
    finally:
        if ing.proc.poll() is None:
            ing.close()


def get(d: Searchd, path: str, **params: Any) -> dict[str, Any]:
    r = d.get(path, {"q": "alpha", **{k: str(v) for k, v in params.items()}})
    assert r.status == 200, r.body[:500]
    return r.json


def ids(d: Searchd, **params: Any) -> tuple[list[int], dict[str, Any]]:
    body = get(d, "/v1/search", **{"limit": 10000, "order": "oldest", **params})
    return [h["id"] for h in body["hits"]], body


def test_windows_are_exact(world: tuple[Searchd, OpenIngest]) -> None:
    d, _ = world
    last = INDEXED + TAIL
    everything, body = ids(d, after=0)
    assert everything == list(range(1, last + 1))
    assert body["through"] == str(last)
    assert body["tail"] == TAIL  # the open ingest's messages were brute forced

    got, body = ids(d, after=0, upto="indexed")
    assert got == list(range(1, INDEXED + 1)) and body["through"] == str(INDEXED)
    assert body["tail"] == 0  # indexed only: no brute force

    got, body = ids(d, after=100, upto=130)
    assert got == list(range(101, 131)) and body["through"] == "130"
    got, body = ids(d, after=130, order="newest")
    assert got == list(range(last, 130, -1))

    # Nothing new: through stays where the caller was, also past the end.
    for after in (last, last + 1000):
        got, body = ids(d, after=after)
        assert got == [] and body["through"] == str(after)
    got, body = ids(d, after=INDEXED, upto="indexed")
    assert got == [] and body["through"] == str(INDEXED)

    # The other endpoints take the same window.
    assert get(d, "/v1/count", after=60)["total"] == last - 60
    assert get(d, "/v1/count", after=60, upto="indexed")["total"] == INDEXED - 60
    odd = get(d, "/v1/count", q="alpha odd", after=60, upto=100)
    assert odd["total"] == sum(1 for i in range(61, 101) if i % 2) and odd["through"] == "100"
    top = get(d, "/v1/top", field="host", after=60, upto="indexed")
    want = {f"h{k}": sum(1 for i in range(61, INDEXED + 1) if i % 3 == k) for k in range(3)}
    assert {v["value"]: v["count"] for v in top["values"]} == want
    hist = get(d, "/v1/histogram", after=10, buckets=5)
    assert sum(b["count"] for b in hist["buckets"]) == hist["total"] == last - 10


def test_through_chain_sees_every_id_once(world: tuple[Searchd, OpenIngest]) -> None:
    """A poller (the alert daemon's way): each answer's through is the next after; messages
    arrive between polls, and once the ingest ends its tail becomes indexed."""
    d, ing = world
    seen: list[int] = []
    after = 0
    nxt = INDEXED + TAIL + 1
    for _ in range(4):
        body = get(d, "/v1/search", after=after, order="oldest", limit=7, total=1)
        got = [h["id"] for h in body["hits"]]
        seen += got
        # A page cut by limit continues from its last hit, not from through.
        after = got[-1] if body["next_cursor"] else int(body["through"])
        ing.send([line(i) for i in range(nxt, nxt + 3)])
        nxt += 3
    while True:
        body = get(d, "/v1/search", after=after, order="oldest", limit=7)
        seen += [h["id"] for h in body["hits"]]
        if not body["next_cursor"]:
            after = int(body["through"])
            break
        after = body["hits"][-1]["id"]
    assert seen == list(range(1, nxt))
    assert after == nxt - 1

    # Indexed-only polling: nothing past INDEXED until the open ingest publishes its segment.
    assert get(d, "/v1/count", after=INDEXED, upto="indexed")["total"] == 0
    ing.close()
    wait_until(lambda: get(d, "/v1/count", after=INDEXED, upto="indexed")["total"] > 0, 10)
    body = get(d, "/v1/count", after=INDEXED, upto="indexed")
    assert body["total"] == nxt - 1 - INDEXED and body["through"] == str(nxt - 1)


@pytest.mark.parametrize(
    "params,msg",
    [
        ({"after": "x"}, "after: "),
        ({"after": "-1"}, "after: "),
        ({"upto": "0"}, "upto: expected an id"),
        ({"upto": "soon"}, "upto: expected an id"),
        ({"after": "18446744073709551615"}, "after: "),
    ],
)
def test_bad_windows(world: tuple[Searchd, OpenIngest], params: dict[str, str], msg: str) -> None:
    d, _ = world
    r = d.get("/v1/count", {"q": "alpha", **params})
    assert r.status == 400 and r.json["error"]["code"] == "bad_parameter"
    assert r.json["error"]["message"].startswith(msg)
    assert d.get("/v1/messages/1", {"after": "1"}).status == 400  # not a query endpoint
