# nginx in front of both apps (appliance/nginxconf.py, as make run and the appliance run it), seen
# by a client: TLS 1.2 and 1.3 with AEAD suites are accepted; TLS 1.0 and 1.1 and the CBC suites
# (SHA-1 and SHA-2) are refused, though the client offers them (a control server shows it could
# speak them); every answer, the apps', nginx's static files and nginx's own errors alike, has
# HSTS and nosniff and a Server header without a version; a 100 KB query gets 414 in the API's
# JSON error shape and a short page from the web UI, not a closed connection; the web UI's static
# files come from nginx (not gunicorn); plain HTTP to a TLS port is not served.

from __future__ import annotations

import json
import os
import signal
import ssl
from collections.abc import Iterator

import pytest
import requests
from lbtest.proxied import both_apps
from lbtest.rpc import RpcServer
from lbtest.tls import client_context, control_handshake, handshake
from lbtest.webui import WebuiServer

# the client offers TLS 1.0 and 1.1 on purpose
pytestmark = pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")

CBC_SUITES = (
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-ECDSA-AES128-SHA256",
    "ECDHE-ECDSA-AES256-SHA384",
)


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RpcServer, WebuiServer]]:
    with both_apps(tmp_path_factory.mktemp("proxy-tls")) as pair:
        yield pair


def test_tls_versions_and_suites(apps: tuple[RpcServer, WebuiServer]) -> None:
    for srv in apps:
        ca, key = srv.cafile, srv.keyfile
        for version, name in (
            (ssl.TLSVersion.TLSv1_3, "TLSv1.3"),
            (ssl.TLSVersion.TLSv1_2, "TLSv1.2"),
        ):
            got, cipher = handshake(srv.port, client_context(ca, version))
            assert got == name
            assert "GCM" in cipher or "CHACHA20" in cipher, cipher
        for version in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1):
            ctx = client_context(ca, version)
            assert control_handshake(ca, key, ctx)[0].startswith("TLSv1")
            with pytest.raises(ssl.SSLError):
                handshake(srv.port, ctx)
        for suite in CBC_SUITES:
            ctx = client_context(ca, ssl.TLSVersion.TLSv1_2, suite)
            assert control_handshake(ca, key, ctx) == ("TLSv1.2", suite)
            with pytest.raises(ssl.SSLError):
                handshake(srv.port, ctx)
        # still serving
        assert handshake(srv.port, client_context(ca, ssl.TLSVersion.TLSv1_2))[0] == "TLSv1.2"


def assert_headers(r: requests.Response) -> None:
    """HSTS, nosniff, and a Server header that names no version (nor gunicorn)."""
    where = f"{r.request.method} {r.url[:80]}: {r.status_code}"
    assert r.headers.get("Strict-Transport-Security", "").startswith("max-age="), where
    assert r.headers.get("X-Content-Type-Options") == "nosniff", where
    server = r.headers.get("Server", "")
    assert not any(ch.isdigit() for ch in server) and "gunicorn" not in server, (where, server)


def test_headers_static_and_414(apps: tuple[RpcServer, WebuiServer]) -> None:
    rpc, web = apps
    big = "x" * 100_000  # a 100 KB query
    with rpc.session() as s:
        token = rpc.login()
        for r in (
            s.get(rpc.base + "/health", timeout=30),
            s.get(rpc.base + "/me", headers={"Authorization": f"Bearer {token}"}, timeout=30),
            s.get(rpc.base + "/me", timeout=30),  # 401
            s.get(rpc.base + "/no-such-route", timeout=30),
        ):
            assert_headers(r)
            assert r.headers["Content-Type"].startswith("application/json")
        r = s.get(
            rpc.base + "/logspaces/main/search",
            params={"q": big},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert r.status_code == 414, r.text[:300]
        assert r.headers["Content-Type"] == "application/json"
        assert_headers(r)
        err = r.json()["error"]
        assert err["code"] == "uri_too_long" and "request line" in err["message"]
        # the longest query searchd takes still passes (16384 bytes, 48 KiB %-encoded)
        r = s.get(
            rpc.base + "/logspaces/main/count",
            params={"q": "\xe9" * 8191 + "x"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert r.status_code != 414 and r.headers["Content-Type"] == "application/json"
    with web.session() as s:
        for path in ("/login", "/healthz", "/no-such-page"):
            assert_headers(s.get(web.url + path, timeout=30))
        r = s.get(web.url + "/", params={"q": big}, timeout=30)
        assert r.status_code == 414
        assert r.headers["Content-Type"].startswith("text/html")
        assert "request line is longer" in r.text
        assert_headers(r)
        # static files: from nginx (gunicorn stopped answering, they still come)
        static = web.STATIC
        assert static is not None
        want = (static / "css" / "logbox.css").read_bytes()
        r = s.get(web.url + "/static/css/logbox.css", timeout=30)
        assert r.status_code == 200 and r.content == want
        assert r.headers["Content-Type"].startswith("text/css")
        assert_headers(r)
        assert s.get(web.url + "/static/no-such-file.css", timeout=30).status_code == 404
        assert s.get(web.url + "/_logbox/error/414", timeout=30).status_code == 404
        assert web.proc is not None
        os.killpg(web.proc.pid, signal.SIGSTOP)  # gunicorn and its workers answer nothing now
        try:
            r = s.get(web.url + "/static/js/logbox.js", timeout=10)
            assert r.status_code == 200
            assert r.content == (static / "js" / "logbox.js").read_bytes()
        finally:
            os.killpg(web.proc.pid, signal.SIGCONT)


def test_plain_http_not_served(apps: tuple[RpcServer, WebuiServer]) -> None:
    s = requests.Session()
    s.trust_env = False
    rpc, web = apps
    r = s.get(f"http://127.0.0.1:{rpc.port}/api/v1/health", timeout=10)
    assert r.status_code == 400 and json.loads(r.text)["error"]["code"] == "bad_parameter"
    r = s.get(f"http://127.0.0.1:{web.port}/healthz", timeout=10)
    assert r.status_code == 400 and "ok" not in r.text
