"""HTTPS for gunicorn 20.1 with TLS 1.2 and later only, shared by rpc/gunicorn.conf.py and
webui/gunicorn.conf.py.

gunicorn 20.1 has no hook for an SSLContext, so install() replaces the function it wraps
accepted sockets with by one that uses a context with minimum_version = TLSv1_2, made once per
worker process from gunicorn's certfile/keyfile/ciphers options.
"""

from __future__ import annotations

import os
import ssl
import sys
import threading
from typing import Any

_contexts: dict[int, ssl.SSLContext] = {}
_contexts_lock = threading.Lock()
_label = "logbox"


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
                    f"{_label}: worker {pid}: TLS context made (TLS 1.2 and later)",
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


def install(label: str = "logbox") -> None:
    """Makes this gunicorn wrap accepted sockets with the TLS >= 1.2 context (label: log name)."""
    global _label
    import gunicorn.sock
    import gunicorn.workers.gthread

    _label = label
    # Debian's gunicorn 20.1 calls ssl.wrap_socket through the gthread module's `ssl` name;
    # later releases call gunicorn.sock.ssl_wrap_socket. Replace whichever this gunicorn uses.
    gunicorn.workers.gthread.ssl = _SslShim()
    if hasattr(gunicorn.sock, "ssl_wrap_socket"):
        gunicorn.sock.ssl_wrap_socket = ssl_wrap_socket
        if hasattr(gunicorn.workers.gthread, "sock"):
            gunicorn.workers.gthread.sock.ssl_wrap_socket = ssl_wrap_socket
