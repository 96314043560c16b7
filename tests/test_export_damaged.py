# Scenario (issue 15, item 7): an export that meets damaged messages says so. A store of 600
# messages (~1 KiB each, so several sealed message blocks, indexed) is damaged on disk: one
# byte of the first block's payload is flipped (xor 0xff), the way tests/test_store_corruption.py
# damages files, so every message of that block fails its checksum. Real logbox-searchd and real
# gunicorn (API and web UI) then serve it to a searcher of main. Every export (API and web UI,
# NDJSON and CSV) still announces X-Logbox-Total 600 and holds the other messages; after its last
# row it says why the rows fall short: one `{"warning": "message <id> skipped: ..."}` line
# (NDJSON) or `# warning: message <id> skipped: ...` row (CSV) for each message of the block,
# and nothing else differs. Each export's audit entry (API and web UI) counts the warnings and
# names the first. logbox_client reads the warnings apart from the rows, and logbox-remote
# export says so on stderr and exits 1.
from __future__ import annotations

import csv
import io
import json
import re
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from lbtest.cli import Logbox
from lbtest.gunicorn import RPC_DIR
from lbtest.proxied import over_searchd
from lbtest.rpc import RpcServer
from lbtest.wait import wait_until
from lbtest.webui import WebuiServer
from logbox_client import Client

pytestmark = pytest.mark.slow

N = 600
READER, PASSWORD = "reader", "damaged-store-reader-pw"
FILE_HEADER, BLOCK_HEADER = 24, 52  # indexer/FORMAT.md §3.1, §3.2
WARNING = re.compile(r"message (\d+) skipped: .+")


def frames() -> bytes:
    return b"".join(
        b"<13>1 2026-11-20T00:00:00Z host%d app - - - damagetok n%d %s\n"
        % (i % 5, i, b" ".join(b"w%d" % ((i * 7919 + k) % 100003) for k in range(140)))
        for i in range(N)
    )


@dataclass
class Stack:
    rpc: RpcServer
    web: WebuiServer
    api: requests.Session  # the reader's
    admin: requests.Session
    params: dict[str, str]
    lost: set[int]  # the ids of the damaged block


def damage_first_block(data: Path) -> set[int]:
    """Flips a byte in the middle of the first block's payload of main's (only) messages
    file; the ids of that block."""
    (path,) = (p for p in data.glob("main/*/*/messages") if p.stat().st_size > FILE_HEADER)
    raw = path.read_bytes()
    head = raw[FILE_HEADER : FILE_HEADER + BLOCK_HEADER]
    assert head[:4] == b"LBK1", head
    count, first_id = struct.unpack_from("<IQ", head, 4)
    (comp_len,) = struct.unpack_from("<I", head, 36)
    assert len(raw) > FILE_HEADER + BLOCK_HEADER + comp_len, "the first block is the last one"
    off = FILE_HEADER + BLOCK_HEADER + comp_len // 2
    with open(path, "r+b") as f:
        f.seek(off)
        f.write(bytes([raw[off] ^ 0xFF]))
    return set(range(first_id, first_id + count))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path, logbox_bin: Path) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("damaged")
    data = root / "data"
    data.mkdir()
    lb = Logbox(logbox_bin, data, "main")
    lb.check(lb.run("ingest", "-", input=frames()))
    lost = damage_first_block(data)
    assert 0 < len(lost) < N // 2, lost
    now = int(time.time())
    params = {"q": "damagetok", "from": str(now - 3600), "to": str(now + 3600)}
    with over_searchd(top, root, data) as (rpc, web):
        for server in (rpc, web):
            server.accounts().add_user(READER, PASSWORD, "searcher", ["main"])
        yield Stack(
            rpc,
            web,
            rpc.session(rpc.login(READER, PASSWORD)),
            rpc.session(rpc.login()),
            params,
            lost,
        )


def check_warned(st: Stack, ids: list[int], warnings: list[str]) -> None:
    """The rows are every message but the damaged block's, and the warnings name each of
    those once."""
    assert len(ids) == len(set(ids)) == N - len(st.lost), (len(ids), len(st.lost))
    assert set(ids) == set(range(1, N + 1)) - st.lost
    named = []
    for w in warnings:
        m = WARNING.fullmatch(w)
        assert m, w
        named.append(int(m.group(1)))
    assert sorted(named) == sorted(st.lost), warnings[:5]


def ndjson(st: Stack, body: bytes) -> None:
    lines = [json.loads(ln) for ln in body.splitlines()]
    rows = [ln for ln in lines if "id" in ln]
    tail = lines[len(rows) :]
    assert lines[: len(rows)] == rows, "the warnings follow the last row"
    assert all(set(t) == {"warning"} for t in tail), tail[:3]
    check_warned(st, [r["id"] for r in rows], [t["warning"] for t in tail])


def csv_body(st: Stack, body: bytes) -> None:
    recs = list(csv.reader(io.StringIO(body.decode("utf-8", "surrogateescape"), newline="")))
    assert recs[0][0] == "id"
    rows = [r for r in recs[1:] if r[0].isdigit()]
    tail = recs[1 + len(rows) :]
    assert recs[1 : 1 + len(rows)] == rows, "the warnings follow the last row"
    assert all(len(t) == len(recs[0]) and t[0].startswith("# warning: ") for t in tail), tail[:3]
    assert all(t[1:] == [""] * (len(t) - 1) for t in tail)
    check_warned(st, [int(r[0]) for r in rows], [t[0].removeprefix("# warning: ") for t in tail])


CHECK = {"ndjson": ndjson, "csv": csv_body}


@pytest.mark.parametrize("fmt", ["ndjson", "csv"])
def test_api_export_warns(stack: Stack, fmt: str) -> None:
    st = stack
    r = st.api.get(
        f"{st.rpc.base}/logspaces/main/export",
        params={**st.params, "format": fmt},
        timeout=120,
    )
    assert r.status_code == 200, r.text[:300]
    assert r.headers["X-Logbox-Total"] == str(N)
    CHECK[fmt](st, r.content)
    entry = audit_entry(st, fmt)
    assert entry["status"] == 200 and entry["results"] == N - len(st.lost), entry
    assert f"{len(st.lost)} warnings, the first: message " in entry["detail"], entry


def audit_entry(st: Stack, fmt: str) -> dict:
    """The reader's newest export entry in the API's audit log (it is written when the stream
    ends: waited for)."""
    seen: list[Any] = [None]

    def entries() -> list[dict]:
        a = st.admin.get(
            f"{st.rpc.base}/audit", params={"user": READER, "action": "export"}, timeout=30
        )
        assert a.status_code == 200, a.text
        seen[0] = a.json()
        return [e for e in seen[0]["entries"] if f"format {fmt}" in (e["detail"] or "")]

    return wait_until(
        entries, f"the {fmt} export is audited", 60, interval=0.2, detail=lambda: str(seen[0])
    )[0]


@pytest.mark.parametrize("fmt", ["csv", "ndjson"])
def test_webui_export_warns(stack: Stack, fmt: str) -> None:
    st = stack
    s = st.web.login_session(READER, PASSWORD)
    r = s.get(st.web.url + "/export", params={**st.params, "format": fmt}, timeout=120)
    assert r.status_code == 200, r.text[:300]
    assert r.headers["X-Logbox-Total"] == str(N)
    CHECK[fmt](st, r.content)

    def entries() -> list[Any]:
        got, _ = st.web.accounts().audit_entries(user=READER, action="export")
        return [e for e in got if f"format {fmt}" in (e.detail or "")]

    e = wait_until(entries, f"the {fmt} export is audited", 60, interval=0.2)[0]
    assert e.status == 200 and e.results == N - len(st.lost), e
    assert f"{len(st.lost)} warnings, the first: message " in (e.detail or ""), e


def test_client_and_remote_cli(stack: Stack, tmp_path: Path) -> None:
    st = stack
    token = st.rpc.login(READER, PASSWORD)
    client = Client(st.rpc.url, token=token, verify=str(st.rpc.cafile))
    exp = client.export(st.params["q"], from_=st.params["from"], to=st.params["to"])
    ids = [m["id"] for m in exp]
    check_warned(st, ids, exp.warnings)
    assert exp.rows == len(ids)
    p = subprocess.run(
        [sys.executable, str(RPC_DIR / "logbox-remote"), "--url", st.rpc.url, "--ca",
         str(st.rpc.cafile), "export", st.params["q"], "--from", st.params["from"], "--to",
         st.params["to"], "--format", "csv", "-o", str(tmp_path / "out.csv"), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"LOGBOX_TOKEN": token, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    assert p.stderr.count("warning: message ") == len(st.lost), p.stderr[-2000:]
    assert f"export incomplete (damaged store): {N - len(st.lost)} of {N} messages" in p.stderr
    csv_body(st, (tmp_path / "out.csv").read_bytes())
