"""gunicorn configuration of the logbox RPC API (rpc/API.md §8):

    gunicorn -c rpc/gunicorn.conf.py 'logbox_rpc:create_app()'

HTTPS only, TLS 1.2 or 1.3: gunicorn 20.1 has no hook for an SSLContext, so the function it
wraps accepted sockets with is replaced (logbox_core.tls) by one that uses a context with
minimum_version = TLSv1_2, made once per worker process. The settings both apps share are
logbox_core.gunicornconf's; this file adds the API's JSON error page. Environment:
LOGBOX_RPC_BIND (127.0.0.1:8444), LOGBOX_TLS_CERT, LOGBOX_TLS_KEY (both required), LOGBOX_RPC_WORKERS (2),
LOGBOX_RPC_THREADS (8), LOGBOX_RPC_ACCESSLOG (a path or "-"; off by default).
LOGBOX_RPC_INSECURE_HTTP=1 serves plain HTTP, on a 127.0.0.1 address only (tests, benchmarks)."""

import json
from typing import Any

import gunicorn.util
import logbox_core.gunicornconf

# bind, worker_class, workers, threads, accesslog, errorlog, loglevel, proc_name, timeout,
# graceful_timeout, keepalive, limit_request_line, certfile, keyfile (logbox_core.gunicornconf)
globals().update(
    logbox_core.gunicornconf.settings("RPC", "127.0.0.1:8444", "logbox-rpc", insecure_http=True)
)


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
