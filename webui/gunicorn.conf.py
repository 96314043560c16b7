"""gunicorn configuration of the logbox web UI (webui/UI.md):

    gunicorn -c webui/gunicorn.conf.py 'logbox_webui:create_app()'

with webui/ and rpc/ (logbox_core) on PYTHONPATH (added here when missing). HTTPS only, TLS 1.2
or 1.3 (logbox_core.tls); the settings are logbox_core.gunicornconf's. Environment:
LOGBOX_WEBUI_BIND (127.0.0.1:8443), LOGBOX_TLS_CERT, LOGBOX_TLS_KEY (both required), LOGBOX_WEBUI_WORKERS (2), LOGBOX_WEBUI_THREADS (8),
LOGBOX_WEBUI_ACCESSLOG (a path or "-"; off by default), LOGBOX_WEBUI_LOGLEVEL (info)."""

import sys
from pathlib import Path

_here = Path(__file__).resolve().parent
for _p in (_here, _here.parent / "rpc"):
    if (_p / "logbox_webui").is_dir() or (_p / "logbox_core").is_dir():
        if str(_p) not in sys.path:
            sys.path.insert(0, str(_p))

import logbox_core.gunicornconf  # noqa: E402

# bind, worker_class, workers, threads, accesslog, errorlog, loglevel, proc_name, timeout,
# graceful_timeout, keepalive, limit_request_line, certfile, keyfile (logbox_core.gunicornconf)
globals().update(logbox_core.gunicornconf.settings("WEBUI", "127.0.0.1:8443", "logbox-webui"))
