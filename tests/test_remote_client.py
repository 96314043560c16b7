# logbox_client and logbox-remote against the real API: gunicorn over TLS (tests/lbtest/rpc.py)
# in front of a real logbox-searchd on a store built with `logbox ingest`. Every Client method
# is checked against the stored messages (`logbox cat`, matched by brute force); errors carry
# the API's status, code and position (bad query, 401, 403, 404), a refused connection, a
# failed TLS check and a non-API error page become LogboxError; iter_search yields every match
# once; exports (NDJSON, CSV) equal iter_search and X-Logbox-Total, byte for byte what the API
# streams. The CLI is run as a subprocess: its output, exit codes (0 ok, 1 API error, 2 usage),
# the caret under a bad query, a progress bar on a terminal (a pty) and nowhere else, and an
# export that searchd's death ends early (exit 1). Contract: rpc/API.md.

from __future__ import annotations

import csv
import fcntl
import http.server
import io
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import termios
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from lbtest.cli import Logbox, message_bytes
from lbtest.collector import free_port
from lbtest.oracle import fold, words
from lbtest.rpc import RpcServer
from lbtest.searchd import Searchd, searchd_binary
from logbox_client import Client, LogboxError

N_MAIN = 2400
PER_TS = 10
GAP_S = 60
VOCAB = ["error", "warning", "disk", "user", "login", "failed", "ok", "timeout", "kernel", "cache"]
HOSTS = ["h0", "h1", "H2", "web-3"]
PROGRAMS = ["sshd", "cron", "app"]
READER = ("reader", "reader-password-1")  # a searcher of logspace main only
CSV_COLUMNS = [
    "id", "received", "timestamp", "host", "peer", "program", "pid", "msgid", "facility",
    "severity", "flags", "sd", "message",
]  # fmt: skip
# Messages whose CSV rows need quoting: quotes, commas, line breaks, bytes that are not UTF-8.
SPECIALS = [
    b'<13>1 - hq app - - - special "quoted" words, with a comma',
    b"<13>1 - hq app - - - special line one\nline two\r\nline three",
    b"<13>1 - hq app - - - special raw \xff\xfe bytes",
    b'<13>1 - hq app - - - special ""double"" and a trailing quote"',
]


# ---------------------------------------------------------------- the store, searchd, the API


@dataclass
class Env:
    """The running pieces and what the store holds."""

    data: Path
    searchd: Searchd
    server: RpcServer
    records: list[dict[str, Any]]
    base_s: int

    @property
    def url(self) -> str:
        return self.server.base.removesuffix("/api/v1")

    def ids(self, word: str) -> list[int]:
        """Ids (ascending) of the main messages holding the text term word (a token or a form)."""
        want = fold(word.encode())
        return [r["id"] for r in self.records if want in words(message_bytes(r["message"]))]

    def client(self, token: str | None = None) -> Client:
        return Client(self.url, token=token, verify=str(self.server.cafile))

    def cli_env(self, **extra: str) -> dict[str, str]:
        """The environment of a logbox-remote run: URL, CA and the admin's password."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOGBOX_")}
        env.update(LOGBOX_URL=self.url, LOGBOX_CA=str(self.server.cafile))
        env.update(extra)
        return env


def corpus(base_s: int, n: int, seed: int) -> bytes:
    """n RFC 5424 lines, PER_TS of them a time stamp GAP_S apart from base_s (their receive
    times with --received header)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(2, 6)))
        raw = b" raw \xffx" if i % 97 == 0 else b""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base_s + i // PER_TS * GAP_S))
        out.append(
            f"<{(i % 24) * 8 + i % 8}>1 {stamp} {HOSTS[i % len(HOSTS)]} "
            f"{PROGRAMS[i % len(PROGRAMS)]} {100 + i % 7} - - {words} n{i}".encode()
            + raw
        )
    return b"\n".join(out) + b"\n"


def octet(msgs: list[bytes]) -> bytes:
    return b"".join(b"%d %s" % (len(m), m) for m in msgs)


@pytest.fixture(scope="module")
def env(
    tmp_path_factory: pytest.TempPathFactory, store_cli: Path, top: Path, sockdir: Path
) -> Iterator[Env]:
    """Logspace main (N_MAIN messages over the last ~4 h, then SPECIALS), other (20); searchd
    and the API over it; the user READER."""
    root = tmp_path_factory.mktemp("remote")
    data = root / "data"
    data.mkdir()
    base_s = int(time.time()) - 4 * 3600
    main = Logbox(store_cli, data)
    main.check(main.run("ingest", "--received", "header", "-", input=corpus(base_s, N_MAIN, 3)))
    main.ingest(octet(SPECIALS), framing="octet")
    Logbox(store_cli, data, logspace="other").ingest(
        b"".join(b"<14>hello other %d\n" % i for i in range(20))
    )
    records = main.cat()
    assert len(records) == N_MAIN + len(SPECIALS)
    sd = Searchd(searchd_binary(top), data, sockdir / "s.sock", ["--threads", "2"]).start()
    server = RpcServer(root / "rpc", searchd_socket=sd.sock, data=data)
    try:
        server.start()
        with server.session(server.login()) as s:
            r = s.post(
                server.base + "/users",
                json={
                    "name": READER[0],
                    "password": READER[1],
                    "role": "searcher",
                    "logspaces": ["main"],
                },
                timeout=30,
            )
            assert r.status_code == 201, r.text
        yield Env(data, sd, server, records, base_s)
    finally:
        server.stop()
        sd.stop()


@pytest.fixture
def admin(env: Env) -> Iterator[Client]:
    c = env.client()
    c.login("admin", env.server.admin_password)
    yield c
    c.logout()
    c.close()


@pytest.fixture
def reader(env: Env) -> Iterator[Client]:
    c = env.client()
    c.login(*READER)
    yield c
    c.close()


def raw_export(env: Env, token: str, **params: str) -> requests.Response:
    """The export body as the API sends it, fetched with plain requests."""
    with env.server.session(token) as s:
        r = s.get(env.server.base + "/logspaces/main/export", params=params, timeout=60)
    assert r.status_code == 200, r.text[:300]
    return r


# ---------------------------------------------------------------- the library


def test_health_and_status(env: Env, admin: Client) -> None:
    assert env.client().health() == {"status": "ok"}
    s = admin.status()
    assert s["services"]["searchd"]["state"] == "running"
    assert {ls["name"] for ls in s["logspaces"]} >= {"main", "other"}
    assert "health" in s and "disk" in s


def test_login_me_logout(env: Env) -> None:
    c = env.client()
    token = c.login("admin", env.server.admin_password)
    assert token.startswith("lbx_") and c.token == token
    assert c.me()["user"]["name"] == "admin"
    other = env.client(token)
    assert [ls["name"] for ls in other.logspaces()]
    c.logout()
    assert c.token is None
    with pytest.raises(LogboxError) as e:
        other.logspaces()
    assert (e.value.status, e.value.code) == (401, "unauthorized")
    other.logout()  # a token that is no longer valid is simply forgotten
    assert other.token is None


def test_wrong_password_is_401(env: Env) -> None:
    with pytest.raises(LogboxError) as e:
        env.client().login("admin", "not-the-password")
    assert (e.value.status, e.value.code) == (401, "unauthorized")
    assert e.value.position is None and e.value.message


def test_logspaces(env: Env, admin: Client, reader: Client) -> None:
    by_name = {ls["name"]: ls for ls in admin.logspaces()}
    assert by_name["main"]["messages"] == len(env.records)
    assert by_name["other"]["messages"] == 20
    assert [ls["name"] for ls in reader.logspaces()] == ["main"]


def test_search_pages_orders_and_ranges(env: Env, admin: Client) -> None:
    want = env.ids("error")
    assert len(want) > 200
    first = admin.search("error", limit=50)
    assert first["total"] == len(want)
    assert [h["id"] for h in first["hits"]] == want[::-1][:50]
    second = admin.search("error", limit=50, cursor=first["next_cursor"])
    assert [h["id"] for h in second["hits"]] == want[::-1][50:100]
    oldest = admin.search("error", limit=10, order="oldest")
    assert [h["id"] for h in oldest["hits"]] == want[:10]
    lo, hi = env.base_s + 3600, env.base_s + 7200
    ranged = admin.search("error", from_=lo, to=hi, limit=10000, order="oldest")
    in_range = {r["id"] for r in env.records if lo * 10**6 <= r["received_us"] < hi * 10**6}
    assert [h["id"] for h in ranged["hits"]] == [i for i in want if i in in_range]
    assert admin.search("error", limit=1, total=False)["total"] is None


def test_search_takes_bytes_that_are_not_utf8(env: Env, admin: Client) -> None:
    hits = admin.search("special raw \udcff\udcfe bytes", limit=10)["hits"]
    assert [message_bytes(h["message"]) for h in hits] == [b"special raw \xff\xfe bytes"]
    assert admin.count(b"special raw \xff\xfe bytes") == 1


def test_iter_search_yields_every_match_once(env: Env, admin: Client) -> None:
    want = env.ids("error")
    got = [h["id"] for h in admin.iter_search("error", page=90)]
    assert got == want[::-1]
    got = [h["id"] for h in admin.iter_search("error", order="oldest", page=1000)]
    assert got == want
    every = [h["id"] for h in admin.iter_search("*", from_="-1d", to="now", page=700)]
    assert every == [r["id"] for r in env.records][::-1]


def test_count_histogram_top(env: Env, admin: Client) -> None:
    want = env.ids("failed")
    assert admin.count("failed") == len(want)
    h = admin.histogram("failed", from_=env.base_s, to=env.base_s + 5 * 3600, buckets=10)
    assert h["total"] == len(want) == sum(b["count"] for b in h["buckets"])
    assert len(h["buckets"]) <= 10 and h["step_us"] > 0
    by_id = {r["id"]: r for r in env.records}
    hosts = Counter(by_id[i]["host"].lower() for i in want)
    expect = sorted(hosts.items(), key=lambda kv: (-kv[1], kv[0].encode()))[:3]
    assert [(v["value"], v["count"]) for v in admin.top("failed", "host", k=3)] == expect


def test_message(env: Env, admin: Client) -> None:
    for rec in (env.records[0], env.records[97], env.records[-1]):
        assert admin.message(rec["id"]) == rec
    assert admin.message(3, logspace="other")["message"] == "hello other 2"


def test_export_ndjson_equals_iter_search(env: Env, admin: Client) -> None:
    with admin.export("error", order="oldest") as exp:
        assert exp.total == len(env.ids("error"))
        records = list(exp)
    assert records == list(admin.iter_search("error", order="oldest"))
    assert exp.rows == exp.total and exp.complete


def test_export_write_to_is_the_body_byte_for_byte(env: Env, admin: Client) -> None:
    assert admin.token is not None
    for fmt in ("ndjson", "csv"):
        raw = raw_export(env, admin.token, q="*", format=fmt)
        buf = io.BytesIO()
        steps: list[int] = []
        exp = admin.export("*", format=fmt)
        rows = exp.write_to(buf, progress=steps.append)
        assert buf.getvalue() == raw.content, fmt
        assert rows == exp.total == len(env.records) == sum(steps), fmt
        assert int(raw.headers["X-Logbox-Total"]) == rows


def csv_text(v: str) -> str:
    """A text cell as API.md §5 writes it: "'" before a leading = + - @ tab or CR, control
    characters as JSON writes them."""
    v = "'" + v if v[:1] in ("=", "+", "-", "@", "\t", "\r") else v
    return "".join(json.dumps(c)[1:-1] if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F else c for c in v)


def test_export_csv_rows_are_the_messages(env: Env, admin: Client) -> None:
    assert admin.token is not None
    body = raw_export(env, admin.token, q="*", format="csv", order="oldest").content
    header = next(csv.reader(io.StringIO(body.decode("utf-8", "surrogateescape"), newline="")))
    assert header == CSV_COLUMNS
    exp = admin.export("*", format="csv", order="oldest")
    rows = list(exp)
    assert exp.rows == exp.total == len(rows) == len(env.records)
    for row, rec in zip(rows, env.records, strict=True):
        assert row["id"] == str(rec["id"])
        assert (row["host"], row["program"], row["message"]) == (
            rec["host"],
            rec["program"],
            csv_text(rec["message"]),
        )
    assert rows[-2]["message"] == "special raw \udcff\udcfe bytes"
    # API.md §5: control characters in CSV cells come as the NDJSON export writes them
    assert rows[-3]["message"] == "special line one\\nline two\\r\\nline three"
    lines = list(admin.export("special", format="csv").lines())
    assert len(lines) == 1 + len(SPECIALS)  # the header, then one item per row


def test_tokens(env: Env, admin: Client) -> None:
    made = admin.create_token("nightly-script", expires_in=3600)
    secret, tid = made["token"], made["id"]
    assert secret.startswith(f"lbx_{tid}_") and made["kind"] == "api"
    assert made["user"] == "admin" and made["expires"] is not None
    script = env.client(secret)
    assert script.count("error") == len(env.ids("error"))
    listed = {t["id"]: t for t in admin.tokens()}
    assert tid in listed and secret not in json.dumps(listed)
    assert [t["id"] for t in admin.tokens(user="admin") if t["id"] == tid] == [tid]
    forever = admin.create_token("forever", never_expires=True)
    assert forever["expires"] is None
    revoked = admin.revoke_token(tid)
    assert revoked["id"] == tid and revoked["revoked"] is not None
    with pytest.raises(LogboxError) as e:
        script.count("error")
    assert e.value.status == 401
    admin.revoke_token(forever["id"])
    # A token of the reader acts with the reader's rights.
    theirs = admin.create_token("reader-script", user=READER[0])
    c = env.client(theirs["token"])
    assert c.count("error") == len(env.ids("error"))
    with pytest.raises(LogboxError) as e:
        c.count("hello", logspace="other")
    assert (e.value.status, e.value.code) == (403, "forbidden")
    admin.revoke_token(theirs["id"])


def test_bad_query_has_its_position(admin: Client) -> None:
    with pytest.raises(LogboxError) as e:
        admin.search("(disk OR user")
    assert (e.value.status, e.value.code) == (400, "bad_query")
    assert e.value.position == 13 and "')'" in e.value.message
    assert str(e.value) == f"bad_query: {e.value.message}"
    with pytest.raises(LogboxError) as e:
        admin.search("x", limit=0)
    assert (e.value.status, e.value.code) == (400, "bad_parameter")
    assert e.value.message.startswith("limit")


def test_401_403_404(env: Env, admin: Client, reader: Client) -> None:
    for c in (env.client(), env.client("lbx_000000000000_" + "A" * 43), env.client("junk")):
        with pytest.raises(LogboxError) as e:
            c.logspaces()
        assert (e.value.status, e.value.code) == (401, "unauthorized")
    for call in (
        lambda: reader.search("hello", logspace="other"),
        lambda: reader.search("hello", logspace="no-such-space"),
        lambda: reader.tokens(),
        lambda: reader.create_token("mine"),
    ):
        with pytest.raises(LogboxError) as e:
            call()
        assert (e.value.status, e.value.code) == (403, "forbidden")
    for call in (
        lambda: admin.message(10**9),
        lambda: admin.search("x", logspace="nope"),
        lambda: admin.export("x", logspace="nope"),
        lambda: admin.revoke_token("000000000000"),
    ):
        with pytest.raises(LogboxError) as e:
            call()
        assert (e.value.status, e.value.code) == (404, "not_found")


def test_no_answer_is_unavailable(env: Env) -> None:
    url = f"https://127.0.0.1:{free_port()}"
    with pytest.raises(LogboxError) as e:
        Client(url, timeout=5).health()
    assert (e.value.status, e.value.code) == (0, "unavailable")
    assert e.value.message.startswith(f"{url}: ") and "refused" in e.value.message
    # The self-signed certificate is refused unless its file is given (or verify=False).
    with pytest.raises(LogboxError) as e:
        Client(env.url).health()
    assert (e.value.status, e.value.code) == (0, "unavailable")
    assert "TLS" in e.value.message and "certificate" in e.value.message
    assert Client(env.url, verify=False).health() == {"status": "ok"}


class _Proxy(http.server.BaseHTTPRequestHandler):
    """A proxy's error page: 502 with HTML."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = b"<html><body><h1>502 Bad Gateway</h1>\n<p>upstream down</p></body></html>"
        self.send_response(502)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def test_an_error_page_that_is_not_the_apis() -> None:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        with pytest.raises(LogboxError) as e:
            Client(f"http://127.0.0.1:{srv.server_port}").search("x")
    finally:
        srv.shutdown()
        srv.server_close()
    assert (e.value.status, e.value.code) == (502, "unavailable")
    assert "not an answer of the logbox API (text/html)" in e.value.message
    assert "502 Bad Gateway upstream down" in e.value.message


# ---------------------------------------------------------------- logbox-remote


def remote(
    top: Path, env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    """rpc/logbox-remote run as a script would."""
    return subprocess.run(
        [sys.executable, str(top / "rpc" / "logbox-remote"), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
    )


def test_cli_search_table_and_json(env: Env, admin: Client, top: Path) -> None:
    e = env.cli_env(LOGBOX_TOKEN=admin.token or "")
    want = env.ids("error")
    p = remote(top, e, "search", "error")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.decode("utf-8", "surrogateescape").splitlines()
    assert lines[0].split() == ["RECEIVED", "HOST", "PROGRAM", "SEVERITY", "MESSAGE"]
    assert len(lines) == 101
    newest = env.records[want[-1] - 1]
    assert lines[1].split()[:3] == [newest["received"], newest["host"], newest["program"]]
    assert lines[1].endswith(newest["message"])
    page = admin.search("error", limit=100)
    assert p.stderr.decode() == (
        f"logbox-remote: 100 of {len(want)} matches; next page: --cursor {page['next_cursor']}\n"
    )
    p = remote(top, e, "search", "--json", "--limit", "20", "--order", "oldest", "error")
    assert p.returncode == 0, p.stderr
    assert [json.loads(x) for x in p.stdout.splitlines()] == admin.search(
        "error", limit=20, order="oldest"
    )["hits"]
    # --all, connection options after the command, raw bytes kept as \udcXX escapes.
    p = remote(top, e, "search", "--all", "--json", "raw", "--logspace", "main")
    assert p.returncode == 0, p.stderr
    got = [json.loads(x) for x in p.stdout.splitlines()]
    assert got == list(admin.iter_search("raw")) and len(got) > 10
    assert b"\\udcff" in p.stdout
    assert p.stderr.decode() == f"logbox-remote: {len(got)} matches\n"
    # Relative times as separate arguments ("--from -3h", not taken for an option).
    t0 = time.time()
    p = remote(top, e, "count", "--from", "-3h", "--to", "now", "error")
    t1 = time.time()
    assert p.returncode == 0, p.stderr

    def since(t: float) -> int:
        lo = int(t - 3 * 3600) * 10**6  # searchd rounds from down to a second
        by_id = {r["id"]: r for r in env.records}
        return len([i for i in want if by_id[i]["received_us"] >= lo])

    assert since(t1) <= int(p.stdout) <= since(t0) and since(t0) > 0


def test_cli_count_with_a_password(env: Env, admin: Client, top: Path) -> None:
    e = env.cli_env(LOGBOX_USER="admin", LOGBOX_PASSWORD=env.server.admin_password)
    p = remote(top, e, "count", "failed")
    assert (p.returncode, p.stdout, p.stderr) == (0, f"{len(env.ids('failed'))}\n".encode(), b"")
    p = remote(top, e, "--user", READER[0], "count", "failed")  # the admin's password
    assert p.returncode == 1 and p.stderr.startswith(b"logbox-remote: unauthorized: ")
    before = {t["id"] for t in admin.tokens(user=READER[0])}
    p = remote(top, env.cli_env(LOGBOX_PASSWORD=READER[1]), "--user", READER[0], "count", "x")
    assert p.returncode == 0, p.stderr
    p = remote(top, env.cli_env(LOGBOX_PASSWORD=READER[1], LOGBOX_USER=READER[0]), "count", "x")
    assert p.returncode == 0, p.stderr
    # The sessions logbox-remote opened for --user are revoked when it is done.
    new = [t for t in admin.tokens(user=READER[0]) if t["id"] not in before]
    assert all(t["revoked"] for t in new), new


def test_cli_export_writes_what_the_api_streams(
    env: Env, admin: Client, top: Path, tmp_path: Path
) -> None:
    assert admin.token is not None
    e = env.cli_env(LOGBOX_TOKEN=admin.token)
    for fmt in ("ndjson", "csv"):
        raw = raw_export(env, admin.token, q="*", format=fmt, order="oldest").content
        out = tmp_path / f"all.{fmt}"
        p = remote(top, e, "export", "*", "--order", "oldest", "--format", fmt, "-o", str(out))
        assert (p.returncode, p.stderr) == (0, b""), p.stderr
        assert out.read_bytes() == raw
        p = remote(top, e, "export", "--format", fmt, "--order", "oldest", "*")
        assert (p.returncode, p.stderr) == (0, b"")
        assert p.stdout == raw


def test_cli_status(env: Env, admin: Client, top: Path) -> None:
    e = env.cli_env(LOGBOX_TOKEN=admin.token or "")
    p = remote(top, e, "status")
    assert p.returncode == 0, p.stderr
    text = p.stdout.decode()
    assert text.startswith("health: ")
    assert "searchd running" in text and "logspace main: next id" in text
    p = remote(top, e, "status", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["services"]["searchd"]["state"] == "running"


def test_cli_errors_and_exit_codes(env: Env, admin: Client, top: Path) -> None:
    e = env.cli_env(LOGBOX_TOKEN=admin.token or "")
    p = remote(top, e, "search", "program:sshd (disk OR")
    assert p.returncode == 1
    err = p.stderr.decode().splitlines()
    assert err[0].startswith("logbox-remote: bad_query: ")
    assert err[1] == "  program:sshd (disk OR"
    pos = admin_position(admin, "program:sshd (disk OR")
    assert err[2] == "  " + " " * pos + "^"
    p = remote(top, env.cli_env(LOGBOX_TOKEN="lbx_000000000000_" + "A" * 43), "count", "x")
    assert p.returncode == 1 and p.stderr.startswith(b"logbox-remote: unauthorized: ")
    p = remote(top, e, "count", "x", "--logspace", "nope")
    assert p.returncode == 1 and p.stderr.startswith(b"logbox-remote: not_found: ")
    p = remote(top, e, "--url", f"https://127.0.0.1:{free_port()}", "count", "x")
    assert p.returncode == 1 and p.stderr.startswith(b"logbox-remote: unavailable: https://")
    # Without the CA the certificate is refused; --insecure skips the check.
    no_ca = {k: v for k, v in e.items() if k != "LOGBOX_CA"}
    p = remote(top, no_ca, "count", "x")
    assert p.returncode == 1 and b"certificate" in p.stderr
    p = remote(top, no_ca, "--insecure", "count", "error")
    assert (p.returncode, p.stderr) == (0, b"")
    # Usage: exit 2.
    for args in ([], ["search"], ["frobnicate"], ["search", "x", "--limit", "many"]):
        p = remote(top, e, *args)
        assert p.returncode == 2, (args, p.stderr)
    p = remote(top, env.cli_env(), "count", "x")
    assert p.returncode == 2 and b"no credentials" in p.stderr
    p = remote(top, env.cli_env(LOGBOX_USER="admin"), "count", "x")  # no terminal to ask on
    assert p.returncode == 2 and b"LOGBOX_PASSWORD" in p.stderr
    assert remote(top, e, "--help").returncode == 0


def admin_position(admin: Client, q: str) -> int:
    """The position the API gives for a bad query."""
    with pytest.raises(LogboxError) as e:
        admin.search(q)
    assert e.value.position is not None
    return e.value.position


def on_pty(argv: list[str], env: dict[str, str], timeout: float = 120) -> tuple[int, bytes]:
    """Runs argv with stderr on a pseudo-terminal (100 columns); its exit code and what it
    wrote there."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        p = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave
        )
    finally:
        os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(timeout=30), out


def test_cli_export_progress_bar_only_on_a_terminal(
    env: Env, admin: Client, top: Path, tmp_path: Path
) -> None:
    e = env.cli_env(LOGBOX_TOKEN=admin.token or "")
    argv = [sys.executable, str(top / "rpc" / "logbox-remote"), "export", "*", "-o"]
    rc, shown = on_pty([*argv, str(tmp_path / "a.ndjson")], e)
    assert rc == 0, shown
    text = shown.decode("utf-8", "replace")
    total = len(env.records)
    assert "export" in text and "100%" in text and "msg" in text, text
    assert f"{total / 1000:.2f}k/{total / 1000:.2f}k" in text, text
    assert len((tmp_path / "a.ndjson").read_bytes().splitlines()) == total
    rc, shown = on_pty([*argv, str(tmp_path / "b.ndjson"), "--no-progress"], e)
    assert (rc, shown) == (0, b"")
    p = remote(top, e, "export", "*", "-o", str(tmp_path / "c.ndjson"))  # stderr a pipe
    assert (p.returncode, p.stderr) == (0, b"")


# ---------------------------------------------------------------- an export cut short

N_BIG = 21_000  # three of the API's 10,000-hit pages
BIG_TEXT = "x" * 1500  # ~15 MB a page: more than the sockets and the pipe hold


@pytest.fixture(scope="module")
def big(
    tmp_path_factory: pytest.TempPathFactory, store_cli: Path, top: Path, sockdir: Path
) -> Iterator[tuple[Searchd, RpcServer]]:
    """Its own store (N_BIG long messages), searchd and API: a test stops this searchd."""
    root = tmp_path_factory.mktemp("big")
    data = root / "data"
    data.mkdir()
    lines = b"".join(b"<14>big %d %s\n" % (i, BIG_TEXT.encode()) for i in range(N_BIG))
    Logbox(store_cli, data).ingest(lines)
    sd = Searchd(searchd_binary(top), data, sockdir / "big.sock", ["--threads", "2"]).start()
    server = RpcServer(root / "rpc", searchd_socket=sd.sock, data=data)
    try:
        server.start()
        yield sd, server
    finally:
        server.stop()
        sd.stop()


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["ndjson", "csv"])
def test_cli_export_that_ends_early_fails(
    big: tuple[Searchd, RpcServer], top: Path, fmt: str
) -> None:
    sd, server = big
    if not sd.healthy():
        sd.start()
    e = {k: v for k, v in os.environ.items() if not k.startswith("LOGBOX_")}
    e.update(
        LOGBOX_URL=server.base.removesuffix("/api/v1"),
        LOGBOX_CA=str(server.cafile),
        LOGBOX_TOKEN=server.login(),
    )
    p = subprocess.Popen(
        [sys.executable, str(top / "rpc" / "logbox-remote"), "export", "big", "--format", fmt],
        env=e,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout is not None
    # the export runs, then waits for this pipe to be read. os.read, not p.stdout.read: the
    # buffered reader may read ahead, and communicate() below reads the fd past its buffer.
    head = b""
    while len(head) < 65536 and (got := os.read(p.stdout.fileno(), 65536 - len(head))):
        head += got
    assert sd.stop() == 0, sd.log()
    try:
        rest, err = p.communicate(timeout=120)
    finally:
        sd.start()
    body = head + rest
    stderr = err.decode()
    assert p.returncode == 1, stderr
    assert "export ended early: " in stderr and f" of {N_BIG} messages" in stderr, stderr
    if fmt == "ndjson":
        lines = body.splitlines()
        assert 0 < len(lines) - 1 < N_BIG
        assert json.loads(lines[-1])["error"]["code"] == "unavailable"
        assert f"ended early: {len(lines) - 1} of {N_BIG} messages" in stderr, stderr
        assert "logbox-remote: unavailable: " in stderr
    else:
        assert body.startswith(b"id,received,") and body.count(b"\n") - 1 < N_BIG


# ---------------------------------------------------------------- pip install ./rpc


def test_pip_install_gives_the_client_package_and_command(top: Path, tmp_path: Path) -> None:
    src = tmp_path / "rpc"
    shutil.copytree(top / "rpc", src, ignore=shutil.ignore_patterns("__pycache__", "build"))
    prefix = tmp_path / "prefix"
    p = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "--prefix", str(prefix), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    site = next(prefix.glob("lib/python3*/site-packages"))
    assert sorted(x.name for x in site.iterdir() if not x.name.endswith(".dist-info")) == [
        "logbox_client",
        "logbox_eps",
    ]
    meta = next(site.glob("logbox_client-*.dist-info"))
    requires = [ln for ln in (meta / "METADATA").read_text().splitlines() if "Requires-Dist" in ln]
    assert sorted(r.split()[1] for r in requires) == ["matplotlib", "requests", "tqdm"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGBOX_")}
    env["PYTHONPATH"] = str(site)
    p = subprocess.run(
        [str(prefix / "bin" / "logbox-remote"), "--url", f"https://127.0.0.1:{free_port()}",
         "--token", "x", "count", "x"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert p.returncode == 1 and p.stderr.startswith("logbox-remote: unavailable: "), p.stderr
    # and logbox-eps, the EPS measurement (an API that does not answer: exit 3, no traceback)
    p = subprocess.run(
        [str(prefix / "bin" / "logbox-eps"), "--host", "127.0.0.1", "--api",
         f"https://127.0.0.1:{free_port()}", "--token", "x", "--quiet"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert p.returncode == 3 and "unavailable" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    assert (
        str(site)
        in subprocess.run(
            [sys.executable, "-c", "import logbox_client; print(logbox_client.__file__)"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
        ).stdout
    )


def test_saved_searches(env: Env, admin: Client, reader: Client) -> None:
    """Saved through the client, found again, run: its query counts what the same query
    counts; shared with a reader of the logspace, private otherwise; bad queries refused."""
    s = admin.save_search("failures", "failed", from_=str(env.base_s), columns=["host"])
    assert s["owner"] == "admin" and s["columns"] == ["host"] and not s["shared"]
    assert [x["id"] for x in admin.searches()] == [s["id"]]
    got = next(x for x in admin.searches() if x["id"] == s["id"])
    assert admin.count(got["query"], from_=int(got["from"])) == len(env.ids("failed"))
    assert s["id"] not in [x["id"] for x in reader.searches()]
    admin.update_search(s["id"], shared=True)
    assert s["id"] in [x["id"] for x in reader.searches()]
    with pytest.raises(LogboxError) as e:
        reader.delete_search(s["id"])
    assert e.value.code == "forbidden"
    with pytest.raises(LogboxError) as e:
        admin.save_search("broken", "(a OR")
    assert e.value.code == "bad_query"
    assert admin.delete_search(s["id"])["name"] == "failures"
    assert admin.searches() == []
