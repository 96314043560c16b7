"""Real receivers for the delivery tests (logbox_core.deliver): an SMTP server (aiosmtpd, with
STARTTLS and AUTH), a syslog listener (UDP, TCP, TLS), an HTTPS server (http.server + ssl) and
net-snmp's snmptrapd, each on a free 127.0.0.1 port, each keeping what it received. The test PKI
comes from lbtest.collector (openssl CLI)."""

from __future__ import annotations

import http.server
import re
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbtest.collector import free_port, make_ca, make_cert
from lbtest.proc import stop_process
from lbtest.wait import wait_until


@dataclass
class ReceiverPKI:
    """A test CA with a server certificate for 127.0.0.1/localhost, and another CA."""

    ca: Path
    other_ca: Path
    server: tuple[Path, Path]

    @classmethod
    def make(cls, d: Path) -> ReceiverPKI:
        ca = make_ca(d, "ca")
        other = make_ca(d, "other-ca")
        server = make_cert(
            d,
            "server",
            ca,
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth",
        )
        return cls(ca=ca[0], other_ca=other[0], server=server)

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(self.server[0]), str(self.server[1]))
        return ctx


# ---------------------------------------------------------------- SMTP


@dataclass
class Mail:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes
    tls: bool
    login: str | None


class _Handler:
    def __init__(self, box: list[Mail]) -> None:
        self.box = box

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        login = session.auth_data.login.decode() if session.authenticated else None
        self.box.append(
            Mail(
                envelope.mail_from,
                list(envelope.rcpt_tos),
                envelope.original_content or envelope.content,
                # STARTTLS, or TLS from the start (implicit)
                server.transport.get_extra_info("ssl_object") is not None,
                login,
            )
        )
        return "250 OK"


@contextmanager
def smtp_server(
    pki: ReceiverPKI | None,
    user: str | None = None,
    password: str | None = None,
    implicit: bool = False,
) -> Iterator[tuple[int, list[Mail]]]:
    """An aiosmtpd server: with pki, STARTTLS offered and required before MAIL (implicit: TLS
    from the start instead, as on port 465); with user, AUTH PLAIN/LOGIN required (after
    TLS). Yields (port, the mails received)."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    box: list[Mail] = []

    def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
        ok = (
            isinstance(data, LoginPassword)
            and data.login.decode() == user
            and data.password.decode() == password
        )
        return AuthResult(success=ok, handled=False, auth_data=data)

    kw: dict[str, Any] = {}
    if pki is not None and implicit:
        kw.update(ssl_context=pki.server_context())
    elif pki is not None:
        kw.update(tls_context=pki.server_context(), require_starttls=True)
    if user is not None:
        # aiosmtpd counts only STARTTLS as TLS; implicit TLS is TLS from the first byte
        kw.update(authenticator=authenticator, auth_required=True, auth_require_tls=not implicit)
    port = free_port()
    c = Controller(_Handler(box), hostname="127.0.0.1", port=port, **kw)
    c.start()
    try:
        yield port, box
    finally:
        c.stop()


# ---------------------------------------------------------------- syslog


@dataclass
class SyslogReceiver:
    """Frames received over UDP (datagrams), TCP and TLS (octet-counted) on three ports."""

    udp: int = 0
    tcp: int = 0
    tls: int = 0
    frames: list[tuple[str, bytes]] = field(default_factory=list)
    socks: list[socket.socket] = field(default_factory=list)

    def wait(self, n: int = 1) -> list[tuple[str, bytes]]:
        wait_until(lambda: len(self.frames) >= n, "syslog frames arrived", 5)
        return self.frames


def _read_octet_counted(conn: socket.socket, kind: str, out: list[tuple[str, bytes]]) -> None:
    buf = b""
    conn.settimeout(5)
    try:
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            buf += chunk
            while (m := re.match(rb"^(\d+) ", buf)) and len(buf) >= m.end() + int(m[1]):
                n = int(m[1])
                out.append((kind, buf[m.end() : m.end() + n]))
                buf = buf[m.end() + n :]
    except (OSError, ssl.SSLError):
        pass
    finally:
        conn.close()


@contextmanager
def syslog_receiver(pki: ReceiverPKI) -> Iterator[SyslogReceiver]:
    r = SyslogReceiver()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 0))
    t = socket.create_server(("127.0.0.1", 0))
    s = socket.create_server(("127.0.0.1", 0))
    r.udp, r.tcp, r.tls = (x.getsockname()[1] for x in (u, t, s))
    r.socks = [u, t, s]
    ctx = pki.server_context()

    def udp() -> None:
        while True:
            try:
                data, _ = u.recvfrom(65536)
            except OSError:
                return
            r.frames.append(("udp", data))

    def accept(sock: socket.socket, kind: str) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            if kind == "tls":
                try:
                    conn.settimeout(5)
                    conn = ctx.wrap_socket(conn, server_side=True)
                except (OSError, ssl.SSLError):
                    conn.close()
                    continue
            threading.Thread(
                target=_read_octet_counted, args=(conn, kind, r.frames), daemon=True
            ).start()

    for target, args in ((udp, ()), (accept, (t, "tcp")), (accept, (s, "tls"))):
        threading.Thread(target=target, args=args, daemon=True).start()
    try:
        yield r
    finally:
        for x in r.socks:
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            x.close()


# ---------------------------------------------------------------- HTTPS


@dataclass
class Posted:
    path: str
    headers: dict[str, str]
    body: bytes


@contextmanager
def https_server(pki: ReceiverPKI, status: int = 200) -> Iterator[tuple[int, list[Posted]]]:
    """An HTTPS server (the test CA's certificate) answering status to every POST."""
    got: list[Posted] = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            n = int(self.headers.get("Content-Length", "0"))
            got.append(Posted(self.path, dict(self.headers.items()), self.rfile.read(n)))
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *a: Any) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.socket = pki.server_context().wrap_socket(srv.socket, server_side=True)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield srv.server_address[1], got
    finally:
        srv.shutdown()
        srv.server_close()


# ---------------------------------------------------------------- snmptrapd


@dataclass
class TrapReceiver:
    port: int
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float = 5) -> str:
        wait_until(lambda: needle in self.text(), f"snmptrapd logged {needle!r}", timeout)
        return self.text()


@contextmanager
def snmptrapd(
    d: Path, community: str, v3: tuple[str, str, str, str] | None = None
) -> Iterator[TrapReceiver]:
    """net-snmp's snmptrapd on a free UDP port, in the foreground, logging to a file (-Lf),
    numeric OIDs (-On), accepting traps with community (and, with v3 = (engine id, user,
    auth passphrase, priv passphrase), SNMPv3 authPriv traps of that user)."""
    d.mkdir(parents=True, exist_ok=True)
    conf = d / "snmptrapd.conf"
    lines = [f"authCommunity log {community}"]
    if v3 is not None:
        engine, user, auth, priv = v3
        lines += [f"createUser -e {engine} {user} SHA {auth} AES {priv}", f"authUser log {user}"]
    conf.write_text("\n".join(lines) + "\n")
    log = d / "traps.log"
    log.write_text("")
    port = free_port(socket.SOCK_DGRAM)
    p = subprocess.Popen(
        ["/usr/sbin/snmptrapd", "-f", "-C", "-c", str(conf), "-On", "-m", "", "-M", str(d),
         "-Lf", str(log), "--persistentDir=" + str(d / "persist"), f"udp:127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: "NET-SNMP version" in log.read_text(), "snmptrapd started", 5)
        yield TrapReceiver(port, log)
    finally:
        stop_process(p)
