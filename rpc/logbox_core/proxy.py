"""The client's address behind nginx (appliance/nginxconf.py): both apps see it as
request.remote_addr, which the login lockout and the audit log use.

When the app is configured to sit behind the proxy (BEHIND_PROXY, LOGBOX_BEHIND_PROXY=1, which
gunicorn accepts only together with a unix socket that only nginx may reach), werkzeug's
ProxyFix takes the address from the last X-Forwarded-For entry and the scheme from
X-Forwarded-Proto. nginx sets both itself, replacing whatever the client sent, so the last
(and only) entry is the peer nginx saw. Without BEHIND_PROXY the headers are ignored and the
address is the TCP peer's, as before."""

from __future__ import annotations

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix


def install(app: Flask) -> None:
    """Trust one proxy's X-Forwarded-For and X-Forwarded-Proto when app.config["BEHIND_PROXY"]."""
    if app.config.get("BEHIND_PROXY"):
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=0, x_port=0)  # type: ignore[method-assign]
