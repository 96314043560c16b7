"""gunicorn configuration of the logbox RPC API (rpc/API.md §8):

    gunicorn -c rpc/gunicorn.conf.py 'logbox_rpc:create_app()'

HTTPS only, TLS 1.2 or 1.3: gunicorn 20.1 has no hook for an SSLContext, so the function it
wraps accepted sockets with is replaced here by one that uses a context with
minimum_version = TLSv1_2, made once per worker process. Environment: LOGBOX_RPC_BIND
(127.0.0.1:8444), LOGBOX_TLS_CERT, LOGBOX_TLS_KEY (both required), LOGBOX_RPC_WORKERS (2),
LOGBOX_RPC_THREADS (8), LOGBOX_RPC_ACCESSLOG (a path or "-"; off by default).
LOGBOX_RPC_INSECURE_HTTP=1 serves plain HTTP, on a 127.0.0.1 address only (tests, benchmarks)."""

import json
import os
import ssl
import sys
import threading
from typing import Any

import gunicorn.http.message
import gunicorn.sock
import gunicorn.util
import gunicorn.workers.gthread

bind = [os.environ.get("LOGBOX_RPC_BIND", "127.0.0.1:8444")]
worker_class = "gthread"
workers = int(os.environ.get("LOGBOX_RPC_WORKERS", "2"))
threads = int(os.environ.get("LOGBOX_RPC_THREADS", "8"))
accesslog = os.environ.get("LOGBOX_RPC_ACCESSLOG") or None
errorlog = "-"
loglevel = os.environ.get("LOGBOX_RPC_LOGLEVEL", "info")
proc_name = "logbox-rpc"
# Exports stream for as long as they take; a stuck request is bounded by searchd's deadline.
timeout = 120
graceful_timeout = 20
keepalive = 60
# searchd takes request targets of up to 64 KiB (a q of 16384 bytes, %-encoded); gunicorn 20.1
# caps the request line at 8190 bytes unless its module constant is raised.
gunicorn.http.message.MAX_REQUEST_LINE = 65536 + 64
limit_request_line = 65536 + 64

_insecure = os.environ.get("LOGBOX_RPC_INSECURE_HTTP") == "1"
certfile = os.environ.get("LOGBOX_TLS_CERT") or None
keyfile = os.environ.get("LOGBOX_TLS_KEY") or None

if _insecure:
    if any(not b.startswith("127.0.0.1:") for b in bind):
        sys.exit(f"logbox-rpc: LOGBOX_RPC_INSECURE_HTTP=1 binds 127.0.0.1 only, not {bind[0]}")
    certfile = keyfile = None
elif not certfile or not keyfile:
    sys.exit(
        "logbox-rpc: refusing to start without LOGBOX_TLS_CERT and LOGBOX_TLS_KEY (HTTPS only)"
    )
else:
    for _path in (certfile, keyfile):
        if not os.access(_path, os.R_OK):
            sys.exit(f"logbox-rpc: cannot read {_path}")

_contexts: dict[int, ssl.SSLContext] = {}
_contexts_lock = threading.Lock()


def _context(opts: dict[str, Any]) -> ssl.SSLContext:
    """This worker's server context (made on first use): TLS 1.2 and 1.3, gunicorn's cert/key."""
    pid = os.getpid()
    ctx = _contexts.get(pid)
    if ctx is None:
        with _contexts_lock:
            ctx = _contexts.get(pid)
            if ctx is None:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                ctx.load_cert_chain(opts["certfile"], opts["keyfile"])
                if opts.get("ciphers"):
                    ctx.set_ciphers(opts["ciphers"])
                ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
                _contexts.clear()
                _contexts[pid] = ctx
                print(
                    f"logbox-rpc: worker {pid}: TLS context made (TLS 1.2 and later)",
                    file=sys.stderr,
                    flush=True,
                )
    return ctx


def ssl_wrap_socket(sock: Any, conf: Any = None, **opts: Any) -> ssl.SSLSocket:
    """Wraps an accepted socket with the TLS >= 1.2 context (replaces gunicorn's wrapper)."""
    if conf is not None:  # gunicorn >= 20.1.x upstream: ssl_wrap_socket(sock, conf)
        opts = dict(conf.ssl_options)
    return _context(opts).wrap_socket(
        sock,
        server_side=True,
        do_handshake_on_connect=opts.get("do_handshake_on_connect", False),
        suppress_ragged_eofs=opts.get("suppress_ragged_eofs", True),
    )


class _SslShim:
    """Stands for the ssl module inside gunicorn's gthread worker: wrap_socket is ours, every
    other name (SSLError, SSL_ERROR_EOF, ...) is the real module's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(ssl, name)

    @staticmethod
    def wrap_socket(sock: Any, server_side: bool = True, **opts: Any) -> ssl.SSLSocket:
        """ssl.wrap_socket(sock, server_side=True, **cfg.ssl_options) as gthread calls it."""
        return ssl_wrap_socket(sock, **opts)


# Debian's gunicorn 20.1 calls ssl.wrap_socket through the gthread module's `ssl` name; later
# releases call gunicorn.sock.ssl_wrap_socket. Replace whichever this gunicorn uses.
gunicorn.workers.gthread.ssl = _SslShim()
if hasattr(gunicorn.sock, "ssl_wrap_socket"):
    gunicorn.sock.ssl_wrap_socket = ssl_wrap_socket
    if hasattr(gunicorn.workers.gthread, "sock"):
        gunicorn.workers.gthread.sock.ssl_wrap_socket = ssl_wrap_socket


def write_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's answer to a request it cannot parse (or a crash outside the app), in the API's
    JSON error shape instead of an HTML page (replaces gunicorn.util.write_error)."""
    code = {400: "bad_parameter", 403: "forbidden"}.get(status_int, "internal")
    message = mesg if status_int < 500 and mesg else "internal error (logged)"
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nCache-Control: no-store\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    gunicorn.util.write_nonblock(sock, head.encode("latin-1") + body)


gunicorn.util.write_error = write_error
