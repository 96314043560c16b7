# Scenario (issue 5): hostile input on syslog-ng's ports. Garbage bytes, a 10 MB line, an
# octet-counted frame with a wrong length, 5,000 idle connections, a plain-TCP client on the TLS
# port: logbox keeps serving other clients (a good message sent meanwhile is stored), stores every
# valid message, produces no malformed frame on the hand-off, and stores the 10 MB line once,
# truncated to LB_MSG_MAX bytes and flagged "truncated".
from __future__ import annotations

import random
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lbtest.appliance import MSG_MAX, Appliance, marker, octet, raise_nofile
from lbtest.cli import message_bytes

pytestmark = pytest.mark.slow


@pytest.fixture
def appliance(tmp_path: Path) -> Iterator[Appliance]:
    with Appliance(tmp_path) as app:
        yield app


def good(mark: str, text: str = "good") -> bytes:
    return f"<134>1 2026-11-22T12:00:00Z goodhost goodprog 1 - - {text} {mark}".encode()


def marked(app: Appliance, mark: str) -> list[dict[str, Any]]:
    return [m for m in app.messages() if mark in m["message"]]


def serves_others(app: Appliance) -> None:
    """A good message on a fresh connection is stored; both daemons run; no malformed frame."""
    mark = marker()
    app.send(good(mark, "meanwhile") + b"\n")
    (m,) = app.wait_marked(mark)
    assert (m["host"], m["program"], m["severity"]) == ("goodhost", "goodprog", 6), m
    app.assert_alive()
    assert app.status()["malformed"] == 0, app.status()


def closed_by_server(s: socket.socket, timeout: float = 10) -> bool:
    """Whether the peer closed s (EOF or reset) within timeout."""
    s.settimeout(timeout)
    try:
        while True:
            if s.recv(65536) == b"":
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def send_hostile(s: socket.socket, data: bytes) -> None:
    """sendall, where the server may hang up on us half-way (it is allowed to)."""
    try:
        s.sendall(data)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        pass


def test_garbage_bytes(appliance: Appliance) -> None:
    app = appliance
    rng = random.Random(5)
    # Newline port: valid lines between random bytes (NUL, LF, 0x80-0xff...) are stored intact.
    marks, data = [], b""
    for _ in range(50):
        data += rng.randbytes(rng.randint(1, 20000))
        mark = marker()
        marks.append(mark)
        data += b"\n" + good(mark, "amid garbage") + b"\n"
    with app.connect("tcp") as s:
        s.sendall(data)
    # UDP: garbage datagrams and one good one.
    udp_mark = marker()
    for _ in range(20):
        app.send(rng.randbytes(rng.randint(1, 1400)), "udp")
    app.send(good(udp_mark, "udp"), "udp")
    # TLS (octet counting): a valid frame, then random bytes after it.
    tls_mark = marker()
    with app.connect_tls() as s:
        s.sendall(octet(good(tls_mark, "tls before garbage")))
        send_hostile(s, b"x" + rng.randbytes(200000))
        closed_by_server(s, timeout=2)
    # Octet port: valid frames, then garbage (syslog-ng gives up on the connection).
    oct_marks = [marker() for _ in range(3)]
    with app.connect("octet") as s:
        for mark in oct_marks:
            msg = good(mark, "octet before garbage")
            s.sendall(b"%d %s" % (len(msg), msg))
        send_hostile(s, b"x" + rng.randbytes(100000))
    for mark in marks + [udp_mark, tls_mark] + oct_marks:
        (m,) = app.wait_marked(mark)
        assert m["message"].startswith(("amid garbage", "udp", "tls before", "octet before")), m
        assert (m["host"], m["program"], m["pid"]) == ("goodhost", "goodprog", "1"), m
    serves_others(app)


@pytest.mark.parametrize("port", ["tcp", "octet"])
def test_10mb_line_stored_once_truncated(appliance: Appliance, port: str) -> None:
    app = appliance
    mark = marker()
    body = f"BIG {mark} ".encode() + bytes(rng_text(10 * 1024 * 1024))
    msg = good(mark, "")[: -len(mark) - 1] + body  # header + " " + body
    after = marker()
    with app.connect(port) as s:
        if port == "tcp":
            s.sendall(msg + b"\n" + good(after, "after the big one") + b"\n")
        else:
            nxt = good(after, "after the big one")
            s.sendall(b"%d %s%d %s" % (len(msg), msg, len(nxt), nxt))
    (m,) = app.wait_marked(mark, timeout=60)
    got = message_bytes(m["message"])
    assert len(got) == MSG_MAX, len(got)
    assert got == body[:MSG_MAX]
    assert "truncated" in m["flags"], m["flags"]
    (a,) = app.wait_marked(after)
    assert "truncated" not in a["flags"]
    # Nothing else came of the line: not split into several messages.
    app.settle(quiet=1.0)
    assert app.count() == 2
    assert app.status()["truncated"] >= 1
    serves_others(app)


def rng_text(n: int) -> bytes:
    """n bytes of printable text (no LF, NUL), not all alike."""
    chunk = bytes(random.Random(7).choices(range(0x21, 0x7F), k=65536))
    return (chunk * (n // len(chunk) + 1))[:n]


def test_octet_wrong_length(appliance: Appliance) -> None:
    app = appliance
    before, long_, short, after = marker(), marker(), marker(), marker()
    with app.connect("octet") as s:
        a = good(before, "before")
        s.sendall(b"%d %s" % (len(a), a))
        # A count larger than the frame: the frame swallows what follows on the connection.
        b = good(long_, "announced too long")
        send_hostile(s, b"%d %s" % (len(b) + 40, b))
        c = good(short, "announced too short")
        send_hostile(s, b"%d %s" % (len(c) - 30, c))
        d = good(after, "after")
        send_hostile(s, b"%d %s" % (len(d), d))
        closed_by_server(s, timeout=2)
    (m,) = app.wait_marked(before)
    assert message_bytes(m["message"]) == b"before " + before.encode()
    # What the wrong counts made of the rest is the client's doing; it must not be stored twice
    # nor break the hand-off.
    app.settle(quiet=1.0)
    for mark in (long_, short, after):
        assert len(marked(app, mark)) <= 1
    # Too short at the end of a connection: a count bigger than what ever comes.
    with app.connect("octet") as s:
        e = good(marker(), "never complete")
        s.sendall(b"%d %s" % (len(e) + 1000, e))
    serves_others(app)


def test_5000_idle_connections(appliance: Appliance) -> None:
    app = appliance
    assert raise_nofile(20000) >= 5200, "cannot raise RLIMIT_NOFILE for 5,000 connections"
    conns: list[socket.socket] = []
    try:
        for _ in range(5000):
            conns.append(app.connect("tcp", timeout=30))
        time.sleep(1.0)
        serves_others(app)
        # syslog-ng kept them all: none closed by the server.
        for s in conns:
            s.setblocking(False)
        closed = 0
        for s in conns:
            try:
                if s.recv(1) == b"":
                    closed += 1
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        assert closed == 0, f"syslog-ng closed {closed} of 5000 idle connections"
        # The first and the last idle connection still deliver.
        marks = [marker(), marker()]
        for s, mark in zip((conns[0], conns[-1]), marks, strict=True):
            s.setblocking(True)
            s.sendall(good(mark, "from an idle connection") + b"\n")
        for mark in marks:
            app.wait_marked(mark)
    finally:
        for s in conns:
            s.close()
    serves_others(app)


def test_plain_tcp_on_tls_port(appliance: Appliance) -> None:
    app = appliance
    plain = marker()
    with app.connect("tls") as s:
        send_hostile(s, octet(good(plain, "plain text on the TLS port")))
        assert closed_by_server(s), "syslog-ng kept a plain-text connection on the TLS port"
    # A silent plain client holds no one up either.
    with app.connect("tls"):
        ok = marker()
        with app.connect_tls() as t:
            t.sendall(octet(good(ok, "tls meanwhile")))
        app.wait_marked(ok)
    serves_others(app)
    assert marked(app, plain) == []
