# searchd's event-time ranges (indexer/PROTOCOL.md §2.1 "Event time", `time=event`): the real
# daemon over a store with published segments and a tail that is not indexed yet, whose messages
# carry their own time stamps from skewed clocks (none, hours apart, other offsets, 2099). The
# oracle is `logbox cat`: each message's timestamp_us, its second rounded down, in [from, to).
# /v1/count, /v1/search (ids, in arrival order), /v1/histogram and /v1/top must agree with it.
# Segments written before event-time terms say so in warnings until `logbox reindex`.

from __future__ import annotations

import subprocess
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lbtest.cli import Logbox
from lbtest.searchd import Searchd, searchd_binary

E0 = 1748736000  # 2025-06-01T00:00:00Z
N = 240  # messages ingested and indexed
TAIL = 60  # messages stored by an open ingest: not indexed yet
US = 1_000_000


def stamp(i: int) -> str:
    """Message i's own time stamp as its device wrote it (RFC 5424), or "-" for none."""
    k = i % 10
    if k == 0:
        return "-"
    if k == 1:
        return f"2099-01-01T00:00:{i % 60:02d}Z"  # a clock far ahead
    if k == 2:
        s = E0 + (i * 97) % 7200 + 7200  # the same instants written at +02:00
        h, m, sec = (s % 86400) // 3600, (s % 3600) // 60, s % 60
        return f"2025-06-01T{h:02d}:{m:02d}:{sec:02d}.5+02:00"
    s = E0 + (i * 613) % 7200
    h, m, sec = (s % 86400) // 3600, (s % 3600) // 60, s % 60
    return f"2025-06-01T{h:02d}:{m:02d}:{sec:02d}.{i % 1000:03d}Z"


def line(i: int) -> bytes:
    return b"<13>1 %s h%d app - - - alpha n%d %s\n" % (
        stamp(i).encode(),
        i % 3,
        i,
        b"odd" if i % 2 else b"even",
    )


class OpenIngest:
    """`logbox ingest --ack` with a flush interval longer than the test: what it stores stays
    in the tail (searched by brute force)."""

    def __init__(self, lb: Logbox) -> None:
        self.proc = lb.popen(
            "ingest", "--ack", "--batch", "1", "--flush-ms", "600000", "-",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    def send(self, lines: list[bytes]) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"".join(lines))
        self.proc.stdin.flush()
        for _ in lines:
            got = self.proc.stdout.readline()
            assert got.startswith(b"ack "), got

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def seconds(msgs: list[dict[str, Any]]) -> dict[int, int | None]:
    """id → event second (rounded down), None without a time stamp."""
    return {m["id"]: None if m["timestamp_us"] is None else m["timestamp_us"] // US for m in msgs}


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, store_cli: Path, top: Path, sockdir: Path
) -> Iterator[tuple[Searchd, dict[int, int | None], dict[int, bytes]]]:
    store = tmp_path_factory.mktemp("evt") / "data"
    store.mkdir()
    lb = Logbox(store_cli, store)
    lb.ingest(b"".join(line(i) for i in range(1, N + 1)))
    ing = OpenIngest(lb)
    try:
        ing.send([line(i) for i in range(N + 1, N + TAIL + 1)])
        msgs = lb.cat()
        assert len(msgs) == N + TAIL
        texts = {m["id"]: m["message"].encode() for m in msgs}
        with Searchd(searchd_binary(top), store, sockdir / "evt.sock", ["--threads", "2"]) as d:
            yield d, seconds(msgs), texts
    finally:
        if ing.proc.poll() is None:
            ing.close()


def get(d: Searchd, path: str, **params: Any) -> dict[str, Any]:
    r = d.get(path, {k: str(v) for k, v in params.items()})
    assert r.status == 200, r.body[:500]
    return r.json


def want_ids(
    sec: dict[int, int | None], texts: dict[int, bytes], a: int, b: int, word: bytes | None
) -> list[int]:
    return sorted(
        i
        for i, s in sec.items()
        if s is not None and a <= s < b and (word is None or word in texts[i].split())
    )


RANGES = [
    (E0, E0 + 3600),
    (E0 + 1800, E0 + 1801),  # one second
    (E0 + 1234, E0 + 6000),
    (E0 - 86400, E0 + 86400),
    (4070908800, 4070908800 + 60),  # 2099-01-01: the clock far ahead
    (E0 + 7200, E0 + 9000),  # nothing
]


@pytest.mark.parametrize(("a", "b"), RANGES)
@pytest.mark.parametrize(("q", "word"), [("*", None), ("alpha odd", b"odd"), ("n7*", None)])
def test_event_time_matches_oracle(
    world: tuple[Searchd, dict[int, int | None], dict[int, bytes]],
    a: int,
    b: int,
    q: str,
    word: bytes | None,
) -> None:
    d, sec, texts = world
    want = want_ids(sec, texts, a, b, word)
    if q == "n7*":
        want = [i for i in want if any(t.startswith(b"n7") for t in texts[i].split())]
    p = {"q": q, "from": a, "to": b, "time": "event"}
    count = get(d, "/v1/count", **p)
    assert count["total"] == len(want)
    assert count["time"] == "event" and count["warnings"] == []
    body = get(d, "/v1/search", **p, limit=10000, order="oldest")
    assert [h["id"] for h in body["hits"]] == want  # arrival (id) order
    assert body["tail"] > 0 and body["segments"] > 0  # the index and the tail both answered
    for h in body["hits"]:
        assert a * US <= h["timestamp_us"] < (b + 1) * US
    newest = get(d, "/v1/search", **p, limit=5)
    assert [h["id"] for h in newest["hits"]] == want[::-1][:5]
    hist = get(d, "/v1/histogram", **p, buckets=7)
    assert hist["total"] == len(want)
    step = hist["step_us"] // US
    for bk in hist["buckets"]:
        lo = bk["from"] // US
        assert bk["count"] == sum(1 for i in want if lo <= sec[i] < lo + step)  # type: ignore[operator]
    top = get(d, "/v1/top", **p, field="host", k=5)
    hosts: dict[str, int] = {}
    for i in want:
        hosts[f"h{i % 3}"] = hosts.get(f"h{i % 3}", 0) + 1
    assert {v["value"]: v["count"] for v in top["values"]} == hosts


def test_received_time_is_unchanged(
    world: tuple[Searchd, dict[int, int | None], dict[int, bytes]],
) -> None:
    """By receive time (the default) the same range of 2025 holds nothing: the store got every
    message now; the last day holds them all."""
    d, sec, _ = world
    old = get(d, "/v1/count", q="*", **{"from": E0, "to": E0 + 3600})
    assert old["total"] == 0 and old["time"] == "received"
    assert get(d, "/v1/count", q="*", time="received")["total"] == len(sec)
    assert get(d, "/v1/count", q="*", time="event", **{"from": 0, "to": "+100000d"})[
        "total"
    ] == sum(1 for s in sec.values() if s is not None)


def test_bad_time_parameter(world: tuple[Searchd, dict[int, int | None], dict[int, bytes]]) -> None:
    d, _, _ = world
    r = d.get("/v1/count", {"q": "*", "time": "sent"})
    assert r.status == 400
    assert r.json["error"]["code"] == "bad_parameter"
    assert r.json["error"]["message"].startswith("time: expected received or event")


def clear_evtime_flag(seg: Path) -> None:
    """Makes a segment look written before event-time terms (FORMAT.md §4.2 flags)."""
    b = bytearray(seg.read_bytes())
    assert int.from_bytes(b[12:16], "little") == 1
    b[12:16] = (0).to_bytes(4, "little")
    b[124:128] = zlib.crc32(bytes(b[:124])).to_bytes(4, "little")
    seg.write_bytes(bytes(b))


def test_old_segments_warn_until_reindex(
    store: Path, store_cli: Path, top: Path, sockdir: Path
) -> None:
    lb = Logbox(store_cli, store)
    lb.ingest(b"".join(line(i) for i in range(1, 101)))
    sec = seconds(lb.cat())
    want = sum(1 for s in sec.values() if s is not None and E0 <= s < E0 + 7200)
    segs = sorted(store.glob("main/*/*/index/*.seg"))
    assert segs
    for s in segs:
        clear_evtime_flag(s)
    p = {"q": "*", "from": E0, "to": E0 + 7200, "time": "event"}
    with Searchd(searchd_binary(top), store, sockdir / "old.sock") as d:
        body = get(d, "/v1/count", **p)
        assert body["total"] < want
        assert len(body["warnings"]) == 1
        assert "indexed before event-time terms" in body["warnings"][0]
        assert "run logbox reindex" in body["warnings"][0]
        # By receive time nothing is missing.
        assert get(d, "/v1/count", q="*")["total"] == 100
    lb.check(lb.run("reindex"))
    with Searchd(searchd_binary(top), store, sockdir / "new.sock") as d:
        body = get(d, "/v1/count", **p)
        assert body["total"] == want and body["warnings"] == []


def test_cli_time_event(
    world: tuple[Searchd, dict[int, int | None], dict[int, bytes]], store_cli: Path
) -> None:
    """`logbox search --time event` in process (--data) and through searchd (--socket) count
    what searchd counts."""
    d, sec, texts = world
    a, b = E0 + 1234, E0 + 6000
    want = len(want_ids(sec, texts, a, b, None))
    for where in (["--data", str(d.data)], ["--socket", str(d.sock)]):
        p = subprocess.run(
            [str(store_cli), "search", *where, "--time", "event", "--count",
             "--from", str(a), "--to", str(b), "*"],
            capture_output=True, timeout=60,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
        assert int(p.stdout) == want
