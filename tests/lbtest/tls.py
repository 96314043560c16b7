"""TLS probes of the suites that check a server's TLS (nginx in test_proxy_tls.py, gunicorn's
own in test_rpc_tls.py): a client context that offers exactly one version, a handshake that
says what was agreed, and the same handshake with a control server that accepts everything,
which shows that a refusal came from the server under test and not from the client."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path


def client_context(
    cafile: Path, version: ssl.TLSVersion, ciphers: str | None = None
) -> ssl.SSLContext:
    """A client context that trusts cafile and offers exactly version (and ciphers, TLS 1.2
    and older)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile)
    # OpenSSL 3 offers TLS 1.0/1.1 and SHA-1 suites only at security level 0.
    ctx.set_ciphers((ciphers or "DEFAULT") + ":@SECLEVEL=0")
    ctx.minimum_version = version
    ctx.maximum_version = version
    return ctx


def handshake(port: int, ctx: ssl.SSLContext) -> tuple[str, str]:
    """(version, cipher) of a handshake with 127.0.0.1:port (raises ssl.SSLError)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            c = s.cipher()
            return s.version() or "", c[0] if c else ""


def control_handshake(cert: Path, key: Path, ctx: ssl.SSLContext) -> tuple[str, str]:
    """A handshake of ctx with a server that allows everything: the client really offers it."""
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.set_ciphers("ALL:@SECLEVEL=0")
    sctx.minimum_version = ssl.TLSVersion.TLSv1
    sctx.load_cert_chain(cert, key)
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def serve() -> None:
            conn, _ = listener.accept()
            try:
                with sctx.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                conn.close()

        t = threading.Thread(target=serve)
        t.start()
        try:
            return handshake(listener.getsockname()[1], ctx)
        finally:
            t.join()
