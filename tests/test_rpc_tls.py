# The RPC API under real gunicorn (tests/lbtest/rpc.py: rpc/gunicorn.conf.py, gthread workers)
# serving TLS itself, without nginx in front (proxy=False: gunicorn's own TLS, which still guards
# an app bound to a TCP address; behind nginx, test_proxy_tls.py), in front of a real searchd:
# HTTPS answers; TLS 1.2 and 1.3 are accepted and TLS 1.1 is refused by the server (a control server shows that the client could speak 1.1);
# plain HTTP to the port gets no answer; gunicorn refuses to start without a certificate; the
# workers use the context of gunicorn.conf.py; an export streams over several pages and a
# client that goes away mid-export still leaves its audit entry.

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from lbtest import apps
from lbtest.rpc import RpcServer
from lbtest.searchd import Searchd
from lbtest.tls import client_context, control_handshake, handshake
from lbtest.wait import wait_until

N = 25_000  # three export pages


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, store_cli: Path) -> Path:
    """A store: main (N messages over the last ~3 h); searchd (conftest.py) is over it."""
    data = tmp_path_factory.mktemp("tls") / "data"
    data.mkdir()
    base = int(time.time()) - 3 * 3600
    lines = b"".join(
        f"<14>1 {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(base + i // 10))} h{i % 4} "
        f"app - - - padding padding padding padding padding padding message {i}\n".encode()
        for i in range(N)
    )
    apps.ingest_received(store_cli, data, lines)
    return data


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, searchd: Searchd) -> Iterator[RpcServer]:
    root = tmp_path_factory.mktemp("rpc")
    with RpcServer(root, searchd_socket=searchd.sock, data=searchd.data, proxy=False) as srv:
        yield srv
    assert "Traceback" not in srv.log(), srv.log()


def test_https_answers(server: RpcServer) -> None:
    token = server.login()
    with server.session(token) as s:
        r = s.get(server.base + "/logspaces/main/count", params={"q": "padding"}, timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["total"] == N
        r = s.get(server.base + "/me", timeout=30)
        assert r.json()["user"]["name"] == "admin"
    assert len(server.worker_pids()) == 2
    assert "TLS context made (TLS 1.2 and later)" in server.log()


@pytest.mark.parametrize(
    "version,name", [(ssl.TLSVersion.TLSv1_3, "TLSv1.3"), (ssl.TLSVersion.TLSv1_2, "TLSv1.2")]
)
def test_tls_12_and_13_accepted(server: RpcServer, version: ssl.TLSVersion, name: str) -> None:
    assert handshake(server.port, client_context(server.cafile, version))[0] == name


def test_tls_11_refused_by_the_server(server: RpcServer) -> None:
    ctx = client_context(server.cafile, ssl.TLSVersion.TLSv1_1)
    # Control: a server that allows TLS 1.1 completes the handshake with this very client.
    key = server.cafile.with_suffix(".key")
    assert control_handshake(server.cafile, key, ctx)[0] == "TLSv1.1"
    with pytest.raises(ssl.SSLError) as e:
        handshake(server.port, ctx)
    assert "PROTOCOL_VERSION" in str(e.value).upper() or "UNSUPPORTED" in str(e.value).upper()
    # The server goes on serving.
    assert handshake(server.port, client_context(server.cafile, ssl.TLSVersion.TLSv1_2))[0]


def test_plain_http_refused(server: RpcServer) -> None:
    s = requests.Session()
    s.trust_env = False
    with pytest.raises(requests.ConnectionError):
        s.get(f"http://127.0.0.1:{server.port}/api/v1/health", timeout=10)
    with server.session() as ok:
        assert ok.get(server.base + "/health", timeout=10).json() == {"status": "ok"}


def test_refuses_to_start_without_certificate(tmp_path: Path, searchd: Searchd) -> None:
    srv = RpcServer(
        tmp_path,
        searchd_socket=searchd.sock,
        data=searchd.data,
        env={"LOGBOX_TLS_CERT": "", "LOGBOX_TLS_KEY": ""},
        proxy=False,
    )
    with pytest.raises(AssertionError, match="exited"):
        srv.start(timeout=20)
    assert "refusing to start without LOGBOX_TLS_CERT" in srv.log()
    assert srv.stop() != 0


def last_export(server: RpcServer, pred: Callable[[Any], bool], timeout: float = 30) -> Any:
    """The newest export audit entry once pred holds for it (the entry is written when the
    stream ends, just after the last byte)."""
    acc = server.accounts()
    seen: list[Any] = []

    def newest() -> Any:
        seen[:] = acc.audit_entries(action="export", limit=1)[0]
        return seen[0] if seen and pred(seen[0]) else None

    return wait_until(
        newest,
        "the export is audited",
        timeout,
        interval=0.1,
        detail=lambda: f"no such export entry: {seen}\n{server.log()}",
    )


def test_export_streams_and_is_audited(server: RpcServer) -> None:
    token = server.login()
    with server.session(token) as s:
        r = s.get(
            server.base + "/logspaces/main/export",
            params={"q": "padding", "order": "oldest"},
            stream=True,
            timeout=60,
        )
        assert r.status_code == 200
        assert r.headers["Content-Type"] == "application/x-ndjson"
        assert int(r.headers["X-Logbox-Total"]) == N
        lines = sum(chunk.count(b"\n") for chunk in r.iter_content(65536))
        assert lines == N
    first = last_export(server, lambda e: e.results == N)
    assert first.status == 200 and first.user == "admin" and first.query == "padding"

    # A client that reads a little and goes away: the stream ends, its entry is written.
    ctx = client_context(server.cafile, ssl.TLSVersion.TLSv1_3)
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(
                b"GET /api/v1/logspaces/main/export?q=padding&format=csv HTTP/1.1\r\n"
                b"Host: 127.0.0.1\r\nAuthorization: Bearer " + token.encode() + b"\r\n\r\n"
            )
            got = b""
            while b"id,received," not in got:
                got += tls.recv(4096)
            assert got.startswith(b"HTTP/1.1 200 ")
            tls.shutdown(socket.SHUT_RDWR)  # gone, without a TLS close_notify
    cut = last_export(server, lambda e: e.id != first.id)
    assert "went away" in (cut.detail or ""), cut
    assert cut.results < N
    # The workers are still there and answer.
    with server.session(token) as s:
        assert s.get(server.base + "/me", timeout=10).status_code == 200


def raw_request(server: RpcServer, request: bytes) -> bytes:
    """request sent as it is over TLS; everything the server answers until it closes."""
    ctx = client_context(server.cafile, ssl.TLSVersion.TLSv1_3)
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(request)
            out = b""
            while chunk := tls.recv(65536):
                out += chunk
            return out


def test_long_queries_and_unparsable_requests(server: RpcServer) -> None:
    token = server.login()
    with server.session(token) as s:
        # A q of 16384 bytes that %-encodes to 48 KiB: past gunicorn's usual 8 KiB line limit.
        q = "\xe9" * 8191 + "x"
        assert len(q.encode()) == 16383
        r = s.get(server.base + "/logspaces/main/count", params={"q": q}, timeout=30)
        assert r.status_code == 200, r.text[:300]
        assert r.json()["total"] == 0
    # What gunicorn itself refuses is JSON too, never an HTML page.
    for request in (
        b"GET /api/v1/health?" + b"a" * 70000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"NOT A REQUEST LINE\r\n\r\n",
        b"GET /api/v1/health HTTP/1.1\r\nBad Header\r\n\r\n",
    ):
        answer = raw_request(server, request)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 "), answer[:300]
        assert b"Content-Type: application/json" in head
        assert json.loads(body)["error"]["code"] == "bad_parameter"
