"""gunicorn configuration of the logbox web UI (webui/UI.md):

    gunicorn -c webui/gunicorn.conf.py 'logbox_webui:create_app()'

with webui/ and rpc/ (logbox_core) on PYTHONPATH (added here when missing). HTTPS only, TLS 1.2
or 1.3 (logbox_core.tls). Environment: LOGBOX_WEBUI_BIND (127.0.0.1:8443), LOGBOX_TLS_CERT,
LOGBOX_TLS_KEY (both required), LOGBOX_WEBUI_WORKERS (2), LOGBOX_WEBUI_THREADS (8),
LOGBOX_WEBUI_ACCESSLOG (a path or "-"; off by default), LOGBOX_WEBUI_LOGLEVEL (info)."""

import os
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent
for _p in (_here, _here.parent / "rpc"):
    if (_p / "logbox_webui").is_dir() or (_p / "logbox_core").is_dir():
        if str(_p) not in sys.path:
            sys.path.insert(0, str(_p))

import gunicorn.http.message  # noqa: E402
import logbox_core.tls  # noqa: E402

bind = [os.environ.get("LOGBOX_WEBUI_BIND", "127.0.0.1:8443")]
worker_class = "gthread"
workers = int(os.environ.get("LOGBOX_WEBUI_WORKERS", "2"))
threads = int(os.environ.get("LOGBOX_WEBUI_THREADS", "8"))
accesslog = os.environ.get("LOGBOX_WEBUI_ACCESSLOG") or None
errorlog = "-"
loglevel = os.environ.get("LOGBOX_WEBUI_LOGLEVEL", "info")
proc_name = "logbox-webui"
# Exports stream for as long as they take; a stuck request is bounded by searchd's deadline.
timeout = 120
graceful_timeout = 20
keepalive = 60
# Search URLs carry the query (up to 16384 bytes, %-encoded) in the request line.
gunicorn.http.message.MAX_REQUEST_LINE = 65536 + 64
limit_request_line = 65536 + 64

certfile = os.environ.get("LOGBOX_TLS_CERT") or None
keyfile = os.environ.get("LOGBOX_TLS_KEY") or None
if not certfile or not keyfile:
    sys.exit(
        "logbox-webui: refusing to start without LOGBOX_TLS_CERT and LOGBOX_TLS_KEY (HTTPS only)"
    )
for _path in (certfile, keyfile):
    if not os.access(_path, os.R_OK):
        sys.exit(f"logbox-webui: cannot read {_path}")

# TLS 1.2 and later only (logbox_core.tls: gunicorn 20.1's socket wrapper replaced).
logbox_core.tls.install("logbox-webui")
