#!/usr/bin/env python3
"""The nginx configuration in front of logbox's two gunicorn apps: one source for `make run`
(appliance/devrun.py), the tests (tests/lbtest/gunicorn.py) and the appliance (install.sh writes
/usr/lib/logbox/nginx/nginx.conf with `nginxconf.py --appliance`).

nginx terminates TLS (1.2 and 1.3, AEAD suites only) for the web UI and the RPC API and passes
each request to its app's gunicorn on a unix socket. It is what keeps slow clients away from
gunicorn's few threads: the handshake and the header must arrive within HEADER_TIMEOUT, a body
may pause at most BODY_TIMEOUT, requests and answers are buffered (a slow reader never holds a
worker, except on the export routes, which stream), and one address may have at most
CONN_PER_ADDRESS requests in progress. It sets X-Forwarded-For and X-Real-IP to the peer's
address and X-Forwarded-Proto to https, replacing whatever the client sent (the apps trust them
because only nginx can reach their sockets), adds HSTS and nosniff, says no version in Server,
serves the web UI's static files itself, and answers the errors it makes itself (a request line
over REQUEST_LINE bytes: 414; too many requests from an address, an app that is down: 503) in
the API's JSON error shape (rpc/API.md §3) or as a short page for the web UI.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

# searchd takes a query of up to 16384 bytes, %-encoded up to 3 times as long, in a request
# target of up to 64 KiB (rpc/logbox_core/gunicornconf.py REQUEST_LINE); a longer request line
# (or header line) gets 414 (400 for a header line).
REQUEST_LINE = 72 * 1024
HEADER_TIMEOUT = 10  # seconds for the TLS handshake (nginx < 1.25.3) and the whole header
BODY_TIMEOUT = 10  # seconds between two reads of a request body
SEND_TIMEOUT = 30  # seconds between two writes to a client that does not read
KEEPALIVE_TIMEOUT = 30  # seconds an idle keep-alive connection stays open
CONN_PER_ADDRESS = 64  # requests in progress at once from one client address
# Mozilla's "intermediate" TLS 1.2 suites: ECDHE with AES-GCM or ChaCha20-Poly1305 (TLS 1.3's
# suites are all AEAD and not set here).
CIPHERS = ":".join(
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "ECDHE-RSA-CHACHA20-POLY1305",
    )
)
HSTS = "max-age=31536000"
# the file types of the web UI's static directory
MIME_TYPES = {
    "text/css": "css",
    "text/javascript": "js",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/x-icon": "ico",
    "font/woff2": "woff2",
    "text/plain": "txt",
}
# The errors nginx answers itself (not the apps'): status -> (API code, message). 494 (a header
# line too long) and 497 (plain HTTP to the TLS port) are nginx's own statuses, sent as 400.
NGINX_ERRORS = {
    400: ("bad_parameter", "the request could not be parsed"),
    494: ("bad_parameter", f"a header line is longer than {REQUEST_LINE} bytes"),
    497: ("bad_parameter", "plain HTTP was sent to an HTTPS port: use https://"),
    413: ("too_large", "the request body is too large"),
    414: ("uri_too_long", f"the request line is longer than {REQUEST_LINE} bytes"),
    502: ("unavailable", "the service is not running; try again shortly"),
    503: ("unavailable", "too many requests in progress from this address, or the service is down"),
    504: ("unavailable", "the service did not answer in time"),
}
# client_max_body_size: the API takes JSON bodies of at most 64 KiB (API.md §1), the web UI
# forms of at most 1 MiB (logbox_webui MAX_CONTENT_LENGTH); nginx refuses more, the apps check
# again.
API_BODY = "64k"
WEBUI_BODY = "1m"


@dataclass
class Site:
    """One app behind nginx: where nginx listens for it and where its gunicorn listens."""

    name: str  # "rpc" or "webui"
    listen: str  # nginx's listen address: "127.0.0.1:8444", "443"
    socket: Path  # gunicorn's unix socket
    static: Path | None = None  # the web UI's static directory, served at /static/


def _errors(site: Site) -> list[str]:
    """error_page lines and their named locations: JSON for the API, a short page otherwise."""
    out = []
    for status, (code, message) in NGINX_ERRORS.items():
        sent = 400 if status in (494, 497) else status
        if site.name == "rpc":
            body = json.dumps({"error": {"code": code, "message": message}})
            ctype = "application/json"
        else:
            body = (
                "<!doctype html><html lang=en><meta charset=utf-8><title>logbox: error "
                f"{sent}</title><h1>Error {sent}</h1><p>{message[0].upper() + message[1:]}.</p>"
                "<p><a href=/>Back to logbox</a></p></html>"
            )
            ctype = "text/html"
        # a URI, not a named location: a 414 has no URI to carry into a named one
        out += [
            f"error_page {status} /_logbox/error/{status};",
            f"location = /_logbox/error/{status} {{",
            "\tinternal;",
            f"\tdefault_type {ctype};",
            "\tadd_header Cache-Control no-store always;",
            *_security_headers(),
            f"\treturn {sent} '{body}\\n';",
            "}",
        ]
    return out


def _security_headers() -> list[str]:
    """The headers every answer gets (add_header in a block replaces the outer block's, so
    each block that adds one repeats these)."""
    return [
        f'\tadd_header Strict-Transport-Security "{HSTS}" always;',
        "\tadd_header X-Content-Type-Options nosniff always;",
    ]


def _proxy(site: Site, *, stream: bool = False) -> list[str]:
    """The lines of a location that passes requests to the site's gunicorn."""
    lines = [f"\tproxy_pass http://logbox_{site.name};"]
    if stream:
        # exports and live tails stream as searchd produces them: a buffered answer would
        # arrive at the end (the apps also send X-Accel-Buffering: no on a tail)
        lines += ["\tproxy_buffering off;"]
    return lines


def _server(site: Site, cert: Path, key: Path) -> list[str]:
    """One server block."""
    body = API_BODY if site.name == "rpc" else WEBUI_BODY
    lines = [
        "server {",
        f"\tlisten {site.listen} ssl;",
        f"\tssl_certificate {cert};",
        f"\tssl_certificate_key {key};",
        f"\tclient_max_body_size {body};",
        *_security_headers(),
    ]
    lines += ["\t" + x for x in _errors(site)]
    if site.name == "rpc":
        lines += [
            "\tlocation / {",
            *["\t" + x for x in _proxy(site)],
            "\t}",
            "\tlocation ~ ^/api/v1/logspaces/[^/]+/(export|tail)$ {",
            *["\t" + x for x in _proxy(site, stream=True)],
            "\t}",
        ]
    else:
        lines += [
            "\tlocation / {",
            *["\t" + x for x in _proxy(site)],
            "\t}",
            "\tlocation = /export {",
            *["\t" + x for x in _proxy(site, stream=True)],
            "\t}",
            "\tlocation = /tail/stream {",
            *["\t" + x for x in _proxy(site, stream=True)],
            "\t}",
        ]
        if site.static is not None:
            lines += [
                "\tlocation /static/ {",
                f"\t\talias {site.static}/;",
                "\t}",
            ]
    lines.append("}")
    return lines


def render(
    sites: list[Site],
    *,
    cert: Path,
    key: Path,
    run: Path,
    user: str | None = None,
    workers: int | str = 1,
    access_log: str | None = None,
) -> str:
    """nginx.conf for sites: pid file and temporary files in run, nginx's own directory (it
    must exist; nginx makes the temporary directories in it), TLS with cert and key, the worker processes as user (only when nginx starts
    as root), access_log a path or None (off)."""
    out = [
        "# made by appliance/nginxconf.py: do not edit, render again",
        "daemon off;",
        f"worker_processes {workers};",
        f"pid {run / 'nginx.pid'};",
        "error_log stderr warn;",
    ]
    if user is not None:
        out.append(f"user {user};")
    out += [
        "events {",
        "\tworker_connections 4096;",
        "}",
        "http {",
        "\tserver_tokens off;",
        "\ttypes {",
        *[f"\t\t{t} {ext};" for t, ext in MIME_TYPES.items()],
        "\t}",
        "\tdefault_type application/octet-stream;",
        f"\taccess_log {access_log or 'off'};",
        "\tsendfile on;",
    ]
    for what in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        out.append(f"\t{what}_temp_path {run / (what + '_temp')};")
    out += [
        # slow clients: the handshake and the header, a body, a reader, an idle connection
        f"\tclient_header_timeout {HEADER_TIMEOUT}s;",
        f"\tclient_body_timeout {BODY_TIMEOUT}s;",
        f"\tsend_timeout {SEND_TIMEOUT}s;",
        f"\tkeepalive_timeout {KEEPALIVE_TIMEOUT}s;",
        "\treset_timedout_connection on;",
        "\tclient_header_buffer_size 1k;",
        f"\tlarge_client_header_buffers 4 {REQUEST_LINE};",
        "\tlimit_conn_zone $binary_remote_addr zone=per_address:1m;",
        f"\tlimit_conn per_address {CONN_PER_ADDRESS};",
        "\tlimit_conn_log_level warn;",
        # TLS
        "\tssl_protocols TLSv1.2 TLSv1.3;",
        f"\tssl_ciphers {CIPHERS};",
        "\tssl_prefer_server_ciphers off;",
        "\tssl_session_cache shared:logbox_tls:1m;",
        "\tssl_session_timeout 1h;",
        "\tssl_session_tickets off;",
        # to the apps: buffered both ways, the client's address set here and nowhere else
        "\tproxy_http_version 1.1;",
        "\tproxy_buffering on;",
        "\tproxy_request_buffering on;",
        "\tproxy_connect_timeout 5s;",
        # an export may wait on searchd up to its deadline between two lines
        "\tproxy_read_timeout 300s;",
        "\tproxy_send_timeout 60s;",
        '\tproxy_set_header Connection "";',
        "\tproxy_set_header Host $http_host;",
        "\tproxy_set_header X-Forwarded-For $remote_addr;",
        "\tproxy_set_header X-Real-IP $remote_addr;",
        "\tproxy_set_header X-Forwarded-Proto https;",
    ]
    # the other forwarding headers gunicorn or werkzeug know are removed, never passed on
    for h in (
        "Forwarded",
        "X-Forwarded-Host",
        "X-Forwarded-Port",
        "X-Forwarded-Prefix",
        "X-Forwarded-Protocol",
        "X-Forwarded-Ssl",
        "X-Url-Scheme",
    ):
        out.append(f'\tproxy_set_header {h} "";')
    # the apps' own copies of the headers added here
    out += [
        "\tproxy_hide_header Strict-Transport-Security;",
        "\tproxy_hide_header X-Content-Type-Options;",
    ]
    for site in sites:
        out += [
            f"\tupstream logbox_{site.name} {{",
            f"\t\tserver unix:{site.socket} max_fails=0;",
            "\t\tkeepalive 16;",
            # shorter than gunicorn's keepalive (60 s): nginx never reuses one gunicorn closes
            "\t\tkeepalive_timeout 30s;",
            "\t}",
        ]
    for site in sites:
        out += ["\t" + x for x in _server(site, cert, key)]
    out.append("}")
    return "\n".join(out) + "\n"


def appliance() -> str:
    """The appliance's nginx.conf (appliance/APPLIANCE.md): the web UI on 443, the API on 8444,
    the gunicorn sockets in /run/logbox-webui and /run/logbox-rpc, nginx's own files in
    /run/logbox-nginx, the server certificate of /etc/logbox/tls."""
    return render(
        [
            Site(
                "webui",
                "443",
                Path("/run/logbox-webui/webui.sock"),
                static=Path("/usr/lib/logbox/python/logbox_webui/static"),
            ),
            Site("rpc", "8444", Path("/run/logbox-rpc/rpc.sock")),
        ],
        cert=Path("/etc/logbox/tls/server.crt"),
        key=Path("/etc/logbox/tls/server.key"),
        run=Path("/run/logbox-nginx"),
        workers="auto",
    )


def main() -> int:
    """`nginxconf.py --appliance`: print the appliance's nginx.conf."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--appliance", action="store_true", required=True)
    p.parse_args()
    sys.stdout.write(appliance())
    return 0


if __name__ == "__main__":
    sys.exit(main())
