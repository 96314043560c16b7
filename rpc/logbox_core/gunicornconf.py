"""The gunicorn settings both apps' configurations share (rpc/gunicorn.conf.py,
webui/gunicorn.conf.py): gthread workers, HTTPS only with TLS 1.2 or 1.3 (logbox_core.tls), long
request lines, and LOGBOX_<APP>_BIND, _WORKERS (2), _THREADS (8), _ACCESSLOG (a path or "-"; off
by default), _LOGLEVEL (info) with LOGBOX_TLS_CERT and LOGBOX_TLS_KEY (both required).

Behind nginx (appliance/nginxconf.py, the way `make run`, the tests and the appliance run the
apps), LOGBOX_<APP>_BIND is `unix:PATH` and LOGBOX_BEHIND_PROXY=1: gunicorn serves plain HTTP on
that socket (nginx terminates TLS), leaves the socket open to all (0777: its directory is the
gate, which only the app and nginx may enter) and trusts X-Forwarded-Proto from it, and the app takes the client's address from the
X-Forwarded-For nginx sets (logbox_core.proxy). One goes with the other: a unix socket without
LOGBOX_BEHIND_PROXY=1, or LOGBOX_BEHIND_PROXY=1 on a TCP address (where anyone could set the
header), is refused."""

from __future__ import annotations

import os
import sys
from typing import Any

import gunicorn.http.message

import logbox_core.tls
from logbox_core.constants import URI_MAX

# searchd takes request targets of up to URI_MAX bytes (a q of QUERY_MAX bytes, %-encoded);
# gunicorn 20.1 caps the request line at 8190 bytes unless its module constant is raised.
REQUEST_LINE = URI_MAX + 64


def settings(
    app: str, default_bind: str, proc_name: str, *, insecure_http: bool = False
) -> dict[str, Any]:
    """gunicorn's settings for the app whose variables are LOGBOX_<app>_*, as the names a
    configuration file sets (bind, workers, certfile, ...); installs the TLS >= 1.2 wrapper.
    With insecure_http, LOGBOX_<app>_INSECURE_HTTP=1 serves plain HTTP on 127.0.0.1 only.

    Exits (sys.exit, gunicorn does not start) without a readable certificate and key.
    """
    var = f"LOGBOX_{app}"
    bind = [os.environ.get(f"{var}_BIND", default_bind)]
    behind_proxy = os.environ.get("LOGBOX_BEHIND_PROXY") == "1"
    if behind_proxy != bind[0].startswith("unix:"):
        sys.exit(
            f"{proc_name}: LOGBOX_BEHIND_PROXY=1 goes with a unix socket {var}_BIND (unix:PATH) "
            f"and only with one, not {bind[0]}"
        )
    out: dict[str, Any] = {
        "bind": bind,
        "worker_class": "gthread",
        "workers": int(os.environ.get(f"{var}_WORKERS", "2")),
        "threads": int(os.environ.get(f"{var}_THREADS", "8")),
        "accesslog": os.environ.get(f"{var}_ACCESSLOG") or None,
        "errorlog": "-",
        "loglevel": os.environ.get(f"{var}_LOGLEVEL", "info"),
        "proc_name": proc_name,
        # Exports stream for as long as they take; a stuck request is bounded by searchd's
        # deadline.
        "timeout": 120,
        "graceful_timeout": 20,
        "keepalive": 60,
        "limit_request_line": REQUEST_LINE,
    }
    gunicorn.http.message.MAX_REQUEST_LINE = REQUEST_LINE

    certfile = os.environ.get("LOGBOX_TLS_CERT") or None
    keyfile = os.environ.get("LOGBOX_TLS_KEY") or None
    if behind_proxy:
        # nginx terminates TLS. gunicorn gives the socket its own group, which nginx is not in:
        # the socket is open to all, and its directory admits only the app and nginx.
        certfile = keyfile = None
        out["umask"] = 0
        out["forwarded_allow_ips"] = "*"
    elif insecure_http and os.environ.get(f"{var}_INSECURE_HTTP") == "1":
        if any(not b.startswith("127.0.0.1:") for b in bind):
            sys.exit(f"{proc_name}: {var}_INSECURE_HTTP=1 binds 127.0.0.1 only, not {bind[0]}")
        certfile = keyfile = None
    elif not certfile or not keyfile:
        sys.exit(
            f"{proc_name}: refusing to start without LOGBOX_TLS_CERT and LOGBOX_TLS_KEY "
            "(HTTPS only)"
        )
    else:
        for path in (certfile, keyfile):
            if not os.access(path, os.R_OK):
                sys.exit(f"{proc_name}: cannot read {path}")
    out["certfile"] = certfile
    out["keyfile"] = keyfile

    # TLS 1.2 and later only (logbox_core.tls: gunicorn 20.1's socket wrapper replaced).
    logbox_core.tls.install(proc_name)
    return out
