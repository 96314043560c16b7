# Scenario: `logbox search --socket` (indexer/cli/search_socket.c: libcurl and jansson) reads
# searchd's answers exactly and refuses what it does not understand. A stand-in for searchd on a
# unix socket answers with canned bodies in the shapes of indexer/PROTOCOL.md: strings carrying
# NUL, lone surrogates (\udcXX, bytes that are not UTF-8), escaped backslashes before "u0000",
# quotes and braces; hits that --json must copy through byte for byte; warnings; errors; and
# answers that are not searchd's (not JSON, another status, a closed connection, chunked bodies).
# The CLI under ASan+UBSan runs every case.
from __future__ import annotations

import os
import socket
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from lbtest.cli import SANITIZER_ENV
from lbtest.searchd import StandIn, recv_head

RECEIVED_US = 1795132800_000001  # 2026-11-20T00:00:00.000001Z
RECEIVED = "2026-11-20T00:00:00.000001Z"


class FakeSearchd(StandIn):
    """Answers every request on a unix socket with .reply (raw HTTP bytes, or None: close at
    once) and keeps the request lines it was sent."""

    def __init__(self, path: Path) -> None:
        self.reply: bytes | None = b""
        self.requests: list[str] = []
        super().__init__(path)

    def serve(self, conn: socket.socket) -> None:
        data = recv_head(conn)
        self.requests.append(data.split(b"\r\n", 1)[0].decode())
        if self.reply is not None:
            conn.sendall(self.reply)


def http(status: int, body: bytes, chunked: bool = False) -> bytes:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nConnection: close\r\n"
    if not chunked:
        return head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    out = head.encode() + b"Transfer-Encoding: chunked\r\n\r\n"
    for i in range(0, len(body), 7):
        part = body[i : i + 7]
        out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return out + b"0\r\n\r\n"


def hit(i: int, host: str, program: str, pid: str, message: str) -> bytes:
    """A hit as lb_msg_json() writes it; the strings are JSON string contents, as sent."""
    return (
        f'{{"id":{i},"received":"{RECEIVED}","received_us":{RECEIVED_US},"timestamp":null,'
        f'"timestamp_us":null,"host":"{host}","peer":"","program":"{program}","pid":"{pid}",'
        f'"msgid":"","sd":"","facility":null,"severity":null,"flags":["rfc5424"],'
        f'"message":"{message}"}}'
    ).encode()


# host: a byte that is not UTF-8; program: a quote and braces; message: NUL, a backslash
# before "u0000" (text, not an escape), a lone byte, é escaped and raw, and the key searched for.
H1 = hit(7, "h\\udcff", 'p{\\"}', "", 'a\\u0000b\\\\u0000c \\udc80 \\u00e9\u00e9 {[\\"hits\\":[x')
H1_TEXT = f'{RECEIVED} h\\xff p{{"}}: a\\x00b\\\\u0000c \\x80 éé {{["hits":[x\n'.encode()
H2 = hit(3, "", "", "42", "}\\\\")
H2_TEXT = f"{RECEIVED} - -[42]: }}\\\\\n".encode()


def page(hits: list[bytes], total: int, next_cursor: str | None, warnings: str = "") -> bytes:
    cur = "null" if next_cursor is None else f'"{next_cursor}"'
    warn = f',"warnings":[{warnings}]' if warnings else ""
    return (
        (
            f'{{"logspace":"main","from":0,"to":100,"total":{total},"next_cursor":{cur},'
            f'"took_ms":0.5,"segments":1,"tail":0{warn},"hits":['
        ).encode()
        + b",".join(hits)
        + b"]}"
    )


@pytest.fixture(scope="module")
def fake(sockdir: Path) -> Iterator[FakeSearchd]:
    f = FakeSearchd(sockdir / "s.sock")
    yield f
    f.close()


def search(
    cli: Path, f: FakeSearchd, reply: bytes | None, *args: str, query: str = "x"
) -> subprocess.CompletedProcess[bytes]:
    f.reply = reply
    argv = [str(cli), "search", "--socket", str(f.path), "--from", "0", "--to", "100"]
    return subprocess.run(
        [*argv, *args, "--", query],
        capture_output=True,
        timeout=60,
        env={**os.environ, **SANITIZER_ENV},
    )


def test_hits_for_a_human(logbox_asan: Path, fake: FakeSearchd) -> None:
    p = search(logbox_asan, fake, http(200, page([H1, H2], 5, "3", '"w\\udcff"')))
    assert p.returncode == 0, p.stderr
    assert p.stdout == H1_TEXT + H2_TEXT
    assert p.stderr == b"logbox: warning: w\\xff\n2 of 5 matches; next page: --cursor 3\n"


def test_json_hits_are_copied_through(logbox_asan: Path, fake: FakeSearchd) -> None:
    for chunked in (False, True):
        p = search(logbox_asan, fake, http(200, page([H1, H2], 2, None), chunked), "--json")
        assert p.returncode == 0, p.stderr
        assert p.stdout == H1 + b"\n" + H2 + b"\n"
        assert p.stderr == b"2 of 2 matches\n"
    p = search(logbox_asan, fake, http(200, page([], 0, None)), "--json")
    assert (p.returncode, p.stdout, p.stderr) == (0, b"", b"0 of 0 matches\n")


def test_request(logbox_asan: Path, fake: FakeSearchd) -> None:
    query = 'a "b c"&=é+%'
    p = search(logbox_asan, fake, http(200, page([], 0, None)), "--limit", "9", query=query)
    assert p.returncode == 0, p.stderr
    method, target, version = fake.requests[-1].split(" ")
    assert (method, version) == ("GET", "HTTP/1.1")
    path, _, qs = target.partition("?")
    assert path == "/v1/search"
    assert urllib.parse.parse_qs(qs, keep_blank_values=True) == {
        "logspace": ["main"],
        "q": [query],
        "from": ["0"],
        "to": ["100"],
        "limit": ["9"],
        "order": ["newest"],
    }


def test_top_values_and_buckets(logbox_asan: Path, fake: FakeSearchd) -> None:
    body = b'{"values":[{"value":"x\\u0000\\udcfe\\u0000y","count":4},{"value":"","count":1}]}'
    p = search(logbox_asan, fake, http(200, body), "--top", "host")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"4 x\\x00\\xfe\\x00y\n1 \n"
    body = b'{"buckets":[{"from":0,"count":2},{"from":50000000,"count":0}]}'
    p = search(logbox_asan, fake, http(200, body), "--histogram", "2")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"1970-01-01T00:00:00.000000Z 2\n1970-01-01T00:00:50.000000Z 0\n"


def test_errors(logbox_asan: Path, fake: FakeSearchd) -> None:
    bad = b'{"error":{"code":"bad_query","message":"expected a term","position":2}}'
    p = search(logbox_asan, fake, http(400, bad), query="a (")
    assert p.returncode == 2 and p.stderr.startswith(b"logbox: bad query at 2: expected a term")
    broad = b'{"error":{"code":"too_broad","message":"too many terms \\udcff"}}'
    p = search(logbox_asan, fake, http(422, broad))
    assert (p.returncode, p.stderr) == (1, b"logbox: query too broad: too many terms \xff\n")
    down = b'{"error":{"code":"unavailable","message":"no catalog"}}'
    p = search(logbox_asan, fake, http(503, down))
    assert p.returncode == 1 and b"searchd unavailable at " in p.stderr
    p = search(logbox_asan, fake, http(502, b"<html>bad gateway</html>"))
    assert p.returncode == 1 and p.stderr.endswith(b": HTTP status 502\n"), p.stderr


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"total":1,"next_cursor":null,"hits":[{"id":1',  # cut short
        b'{"total":1,"next_cursor":null}',  # no hits
        b'{"total":"many","next_cursor":null,"hits":[]}',
        b'{"total":1,"next_cursor":null,"hits":[{"message":"\\udc41"}]}',  # not a byte of ours
        b'{"total":1,"next_cursor":null,"hits":[{"message":"\\ud800"}]}',
    ],
)
def test_answers_not_understood(logbox_asan: Path, fake: FakeSearchd, body: bytes) -> None:
    p = search(logbox_asan, fake, http(200, body))
    assert p.returncode == 1 and p.stdout == b"", p.stderr
    assert p.stderr.endswith(b": an answer logbox does not understand\n"), p.stderr


def test_no_answer(logbox_asan: Path, fake: FakeSearchd, tmp_path: Path) -> None:
    p = search(logbox_asan, fake, None)
    assert p.returncode == 1 and p.stderr.startswith(b"logbox: searchd at "), p.stderr
    p = subprocess.run(
        [str(logbox_asan), "search", "--socket", str(tmp_path / "none.sock"), "x"],
        capture_output=True,
        timeout=60,
    )
    assert p.returncode == 1 and p.stderr.startswith(b"logbox: searchd unavailable at ")
