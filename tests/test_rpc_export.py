# Scenario (issue 6): export through the RPC API streams every match in constant memory. The
# store (330,000 generated RFC 5424 messages, 320,000 of them matching the exported query, some
# with bytes that are not UTF-8) is built with `logbox ingest --received header`: the ingest path
# is not what this file checks, and the real path would take minutes for that many. Real
# logbox-searchd and real gunicorn (TLS, one gthread worker, so that its memory is the export's)
# serve it. NDJSON and CSV: the rows equal the API's count and X-Logbox-Total, and the rows are
# the messages paging search returns (every id, every field); the worker's peak resident memory
# (VmHWM, reset before each export) while an export streams 250 MiB is less than 64 MiB above
# its peak while an export of a few pages (25 MiB) streams: memory does not grow with the size. A client that reads slowly does not
# hold up other requests; one that disconnects midway leaves the server serving, and the export
# is audited with the rows sent.
from __future__ import annotations

import codecs
import csv
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from lbtest.cli import Logbox
from lbtest.rpc import RpcServer
from lbtest.searchd import Searchd, searchd_binary
from lbtest.wait import wait_until

pytestmark = pytest.mark.slow

N_MATCH = int(os.environ.get("LOGBOX_RPC_EXPORT_MESSAGES", "320000"))
N_NOISE = 10_000
START = 1795132800  # 2026-11-20T00:00:00Z
SPAN = 3600
QUERY = "exporttok"
RSS_BOUND = 64 << 20
CSV_COLUMNS = (
    "id,received,timestamp,host,peer,program,pid,msgid,facility,severity,flags,sd,message".split(
        ","
    )
)
FILLER = (
    b"the quick brown fox jumps over the lazy dog while the scheduler rebalances partitions "
    b"across the cluster and the replication factor stays at three for every topic shown here"
) * 3  # ~800 bytes of NDJSON a row: 320,000 rows are ~250 MiB


def make_lines(n_match: int, n_noise: int) -> bytes:
    """n_match + n_noise newline-framed RFC 5424 lines over SPAN seconds from START, in time
    order; the matching ones hold QUERY, every 997th holds bytes that are not UTF-8."""
    total = n_match + n_noise
    noise_every = total // n_noise
    out = []
    for i in range(total):
        us = START * 1_000_000 + i * SPAN * 1_000_000 // total
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(us // 1_000_000))
        ts = f"{ts}.{us % 1_000_000:06d}Z".encode()
        word = b"noise" if i % noise_every == noise_every - 1 else QUERY.encode()
        extra = b" caf\xe9 \xff\xfe" if i % 997 == 0 else b""
        sd = b'[meta sequenceId="%d"]' % i if i % 3 == 0 else b"-"
        out.append(
            b"<%d>1 %s host-%d app%d %d ID%d %s %s item %d %s%s\n"
            % (
                8 + i % 8 + 8 * (i % 3),
                ts,
                i % 50,
                i % 7,
                i % 1000,
                i % 13,
                sd,
                word,
                i,
                FILLER,
                extra,
            )
        )
    return b"".join(out)


@dataclass
class Stack:
    rpc: RpcServer
    admin: requests.Session
    total: int
    params: dict[str, str]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path, logbox_bin: Path) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("rpcexport")
    data = root / "data"
    data.mkdir()
    lb = Logbox(logbox_bin, data, "main", timeout=900)
    src = root / "lines.log"
    src.write_bytes(make_lines(N_MATCH, N_NOISE))
    lb.check(lb.run("ingest", "--received", "header", "--sync", "none", str(src), timeout=900))
    src.unlink()
    sd = Searchd(searchd_binary(top), data, root / "searchd.sock").start()
    try:
        with RpcServer(
            root / "rpc", searchd_socket=sd.sock, data=data, workers=1, threads=8
        ) as rpc:
            admin = rpc.session(rpc.login())
            params = {"q": QUERY, "from": str(START), "to": str(START + SPAN + 1)}
            r = admin.get(f"{rpc.base}/logspaces/main/count", params=params, timeout=120)
            assert r.status_code == 200, r.text
            yield Stack(rpc, admin, r.json()["total"], params)
    finally:
        sd.stop()


def digest(obj: Any) -> bytes:
    return hashlib.sha1(json.dumps(obj, sort_keys=True).encode("utf-8", "surrogateescape")).digest()


def csv_row(m: dict[str, Any]) -> list[str]:
    """The CSV row API.md §5 gives a message object (text: bytes outside UTF-8 as \\udcXX; a
    "'" before a leading = + - @ tab or CR, control characters as JSON writes them)."""

    def s(v: Any) -> str:
        return "" if v is None else str(v)

    def t(v: str) -> str:
        v = "'" + v if v[:1] in ("=", "+", "-", "@", "\t", "\r") else v
        return "".join(
            json.dumps(c)[1:-1] if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F else c for c in v
        )

    return [
        str(m["id"]), t(s(m["received"])), t(s(m["timestamp"])), t(m["host"]), t(m["peer"]),
        t(m["program"]), t(m["pid"]), t(m["msgid"]), s(m["facility"]), s(m["severity"]),
        t("|".join(m["flags"])), t(m["sd"]), t(m["message"]),
    ]  # fmt: skip


def status_kib(pid: int, key: str) -> int:
    for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
        if ln.startswith(key + ":"):
            return int(ln.split()[1]) * 1024
    raise AssertionError(f"no {key} in /proc/{pid}/status")


class RssSampler(threading.Thread):
    """Samples VmRSS of pid every few ms until stopped; .peak is the highest seen."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = status_kib(pid, "VmRSS")
        self.stop_evt = threading.Event()

    def run(self) -> None:
        while not self.stop_evt.wait(0.005):
            self.peak = max(self.peak, status_kib(self.pid, "VmRSS"))

    def finish(self) -> int:
        self.stop_evt.set()
        self.join()
        return self.peak


def text_lines(r: requests.Response) -> Iterator[str]:
    """The body as text lines with their ends (bytes outside UTF-8 as \\udcXX), streamed."""
    dec = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    buf = ""
    for chunk in r.iter_content(1 << 20):
        buf += dec.decode(chunk)
        lines = buf.split("\n")
        buf = lines.pop()
        for ln in lines:
            yield ln + "\n"
    buf += dec.decode(b"", final=True)
    if buf:
        yield buf


def export(st: Stack, fmt: str, **extra: str) -> requests.Response:
    r = st.admin.get(
        f"{st.rpc.base}/logspaces/main/export",
        params={**st.params, "format": fmt, **extra},
        stream=True,
        timeout=300,
    )
    assert r.status_code == 200, r.text[:500]
    return r


def search_digests(st: Stack) -> dict[int, bytes]:
    """id -> digest of the message object, for every match, through paging search."""
    out: dict[int, bytes] = {}
    cursor = None
    while True:
        p = {**st.params, "limit": "10000", "order": "oldest", "total": "0"}
        if cursor is not None:
            p["cursor"] = cursor
        r = st.admin.get(f"{st.rpc.base}/logspaces/main/search", params=p, timeout=300)
        assert r.status_code == 200, r.text[:500]
        body = r.json()
        for h in body["hits"]:
            assert h["id"] not in out
            out[h["id"]] = digest(h)
        cursor = body["next_cursor"]
        if cursor is None:
            return out


# ---------------------------------------------------------------- the tests


def reset_hwm(pid: int) -> bool:
    """Resets the process's VmHWM to its current RSS (Linux >= 4.0); whether it could."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_of(pid: int, st: Stack, **extra: str) -> tuple[int, int, dict[int, bytes]]:
    """Streams an NDJSON export while sampling the worker's VmRSS: (peak RSS, bytes, id ->
    digest of each row). The peak is the kernel's VmHWM when it could be reset before (exact),
    else the highest sample (every 5 ms)."""
    exact = reset_hwm(pid)
    sampler = RssSampler(pid)
    sampler.start()
    r = export(st, "ndjson", **extra)
    rows: dict[int, bytes] = {}
    order: list[int] = []
    nbytes = 0
    try:
        assert r.headers["Content-Type"].startswith("application/x-ndjson"), r.headers
        total = int(r.headers["X-Logbox-Total"])
        for ln in r.iter_lines(chunk_size=1 << 20):
            nbytes += len(ln) + 1
            obj = json.loads(ln)
            assert "error" not in obj, obj
            rows[obj["id"]] = digest(obj)
            order.append(obj["id"])
    finally:
        r.close()
        peak = sampler.finish()
    if exact:
        peak = max(peak, status_kib(pid, "VmHWM"))
    assert len(order) == total == len(rows), (len(order), total, len(rows))
    assert order == sorted(order, reverse=True), "default order is newest first"
    return peak, nbytes, rows


def test_ndjson_export_in_bounded_memory(stack: Stack) -> None:
    st = stack
    assert st.total == N_MATCH
    (pid,) = st.rpc.worker_pids()
    rss_fresh = status_kib(pid, "VmRSS")
    # A few pages first (~30,000 rows): what the export machinery needs for one page (the
    # searchd answer, its parsed hits, the chunk written) is allocated then; a streaming export
    # of all 320,000 rows must not need much more than that, whatever its size.
    few, few_bytes, _ = peak_rss_of(pid, st, to=str(START + SPAN // 10))
    rss0 = status_kib(pid, "VmRSS")
    peak, nbytes, rows = peak_rss_of(pid, st)
    say = (
        f"worker RSS {rss_fresh >> 20} MiB fresh; peak {few >> 20} MiB exporting "
        f"{few_bytes >> 20} MiB; then {rss0 >> 20} MiB, peak {peak >> 20} MiB exporting "
        f"{nbytes >> 20} MiB"
    )
    print(say)
    assert len(rows) == st.total
    assert nbytes > 3 * RSS_BOUND, f"only {nbytes} bytes exported: the bound proves little"
    # what the whole export needs beyond what a few pages needed
    assert peak - few < RSS_BOUND, f"worker RSS grew {(peak - few) >> 20} MiB more: {say}"
    # and, absolutely, a worker streaming 250 MiB stays within the bound of what it was fresh
    assert peak - rss_fresh < RSS_BOUND, f"worker RSS grew {(peak - rss_fresh) >> 20} MiB: {say}"
    # the rows are what paging search returns
    assert rows == search_digests(st)


def test_csv_export_equals_ndjson(stack: Stack) -> None:
    st = stack
    want: dict[int, bytes] = {}
    r = export(st, "ndjson", order="oldest")
    for ln in r.iter_lines(chunk_size=1 << 20):
        m = json.loads(ln)
        want[m["id"]] = digest(csv_row(m))
    assert len(want) == st.total
    r = export(st, "csv", order="oldest")
    assert r.headers["Content-Type"].startswith("text/csv"), r.headers
    assert int(r.headers["X-Logbox-Total"]) == st.total
    rows = csv.reader(text_lines(r))
    assert next(rows) == CSV_COLUMNS
    n = 0
    last = 0
    for row in rows:
        n += 1
        i = int(row[0])
        assert i > last, (i, last)
        last = i
        got = digest(row)
        if want.get(i) != got:
            raise AssertionError(f"CSV row {n} (id {i}) differs from the NDJSON object: {row}")
    assert n == st.total


def test_slow_reader_and_disconnect(stack: Stack) -> None:
    st = stack
    base = st.rpc.base
    pids = st.rpc.worker_pids()
    slow = st.rpc.new_searcher(st.admin, "slowreader", ["*"])
    r = slow.get(f"{base}/logspaces/main/export", params=st.params, stream=True, timeout=60)
    assert r.status_code == 200, r.text[:500]
    got = 0
    chunks = r.iter_content(64 << 10)
    t_end = time.monotonic() + 3
    while time.monotonic() < t_end:
        got += len(next(chunks))
        # meanwhile other requests are answered promptly
        t = time.monotonic()
        q = st.admin.get(f"{base}/logspaces/main/count", params=st.params, timeout=30)
        assert q.status_code == 200 and q.json()["total"] == st.total
        assert time.monotonic() - t < 5
        time.sleep(0.3)
    r.close()  # disconnect midway
    assert got < 50 << 20
    # the server goes on serving
    for _ in range(3):
        h = requests.get(f"{base}/health", verify=str(st.rpc.cafile), timeout=30)
        assert h.status_code == 200, h.text
        q = st.admin.get(
            f"{base}/logspaces/main/search", params={**st.params, "limit": "5"}, timeout=30
        )
        assert q.status_code == 200 and len(q.json()["hits"]) == 5
    assert st.rpc.worker_pids() == pids, "a worker died or was replaced"

    # and the broken export is audited, with the rows it sent
    def audited() -> list[dict]:
        a = st.admin.get(
            f"{base}/audit", params={"user": "slowreader", "action": "export"}, timeout=30
        )
        assert a.status_code == 200, a.text
        return a.json()["entries"]

    entries = wait_until(audited, "the broken export is audited", 60, interval=0.5)
    assert len(entries) == 1, entries
    (e,) = entries
    assert e["user"] == "slowreader" and e["logspace"] == "main" and e["query"] == QUERY, e
    assert e["results"] is not None and 0 < e["results"] < st.total, e
