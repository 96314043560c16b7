"""gunicorn configuration of the logbox RPC API (rpc/API.md §8):

    gunicorn -c rpc/gunicorn.conf.py 'logbox_rpc:create_app()'

HTTPS only, TLS 1.2 or 1.3: gunicorn 20.1 has no hook for an SSLContext, so the function it
wraps accepted sockets with is replaced (logbox_core.tls) by one that uses a context with
minimum_version = TLSv1_2, made once per worker process. Environment: LOGBOX_RPC_BIND
(127.0.0.1:8444), LOGBOX_TLS_CERT, LOGBOX_TLS_KEY (both required), LOGBOX_RPC_WORKERS (2),
LOGBOX_RPC_THREADS (8), LOGBOX_RPC_ACCESSLOG (a path or "-"; off by default).
LOGBOX_RPC_INSECURE_HTTP=1 serves plain HTTP, on a 127.0.0.1 address only (tests, benchmarks)."""

import json
import os
import sys
from typing import Any

import gunicorn.http.message
import gunicorn.util
import logbox_core.tls

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

# TLS 1.2 and later only (logbox_core.tls: gunicorn 20.1's socket wrapper replaced).
logbox_core.tls.install("logbox-rpc")


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
