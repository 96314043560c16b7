# Scenario (issues 15, 16): one message whose header field is larger than the store keeps
# (host, program, pid, msgid: LB_FIELD_MAX bytes; structured data: LB_SD_MAX bytes, through a long
# SD value or a long SD name), sent on every listener (newline TCP, octet TCP, TLS, UDP), must not
# stop ingestion: the 10,000 normal messages sent after it on the same listener are all stored.
# syslog-ng hands the raw bytes on (the spool); indexd parses them with liblogbox's parser
# (FORMAT.md §7): an RFC 5424 field is kept however long and the store cuts it at its limit and
# flags the message "field_truncated"; an RFC 3164 TAG or PID over 255 bytes is no TAG, so the
# message keeps those bytes whole, with no program or pid. test_indexd_deadletter.py hands indexd frames with
# every field oversized, and t_store.c cuts each in the library.
from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lbtest.appliance import Appliance, octet
from lbtest.cli import message_bytes
from lbtest.frames import FIELD_MAX, SD_MAX

pytestmark = pytest.mark.slow

AFTER = 10_000


@pytest.fixture(scope="module")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Appliance]:
    with Appliance(tmp_path_factory.mktemp("oversized")) as app:
        yield app


def report(mark: str) -> bytes:
    # The datagram of the report, with a marker in the message (the long word, too long for a
    # TAG, is read as the host name and cut).
    return b"<13>Nov 25 16:00:00 h" + b"P" * 256 + b": x " + mark.encode()


def host(mark: str) -> bytes:
    return b"<13>1 2026-11-25T16:00:00Z h" + b"P" * 299 + b" app 42 - - x " + mark.encode()


def program(mark: str) -> bytes:
    return b"<13>Nov 25 16:00:00 web01 " + b"G" * 300 + b"[42]: x " + mark.encode()


def pid(mark: str) -> bytes:
    return b"<13>Nov 25 16:00:00 web01 sshd[" + b"7" * 300 + b"]: x " + mark.encode()


def msgid(mark: str) -> bytes:
    return b"<13>1 2026-11-25T16:00:00Z web01 app 42 " + b"M" * 300 + b" - x " + mark.encode()


def sd_value(mark: str) -> bytes:
    sd = b'[ex@32473 big="' + b"v" * 20000 + b'"]'
    return b"<13>1 2026-11-25T16:00:00Z web01 app 42 ID1 " + sd + b" x " + mark.encode()


def sd_name(mark: str) -> bytes:
    sd = b"[" + b"n" * 20000 + b'@32473 a="1"]'
    return b"<13>1 2026-11-25T16:00:00Z web01 app 42 ID1 " + sd + b" x " + mark.encode()


# field -> (message, cat key, limit, cut: the store cuts the field; else it is no field at all
# and the message holds its bytes)
FIELDS: dict[str, tuple[Callable[[str], bytes], str, int, bool]] = {
    "report": (report, "host", FIELD_MAX, True),
    "host": (host, "host", FIELD_MAX, True),
    "program": (program, "program", FIELD_MAX, False),
    "pid": (pid, "pid", FIELD_MAX, False),
    "msgid": (msgid, "msgid", FIELD_MAX, True),
    "sd_value": (sd_value, "sd", SD_MAX, True),
    "sd_name": (sd_name, "sd", SD_MAX, True),
}


def normal(mark: str, i: int) -> bytes:
    return f"<134>1 2026-11-25T16:00:01Z goodhost goodprog 1 - - after {mark} {i}".encode()


def send_all(app: Appliance, port: str, msgs: list[bytes], base: int) -> None:
    """Sends msgs on one connection of port (UDP: one datagram each, paced by the count so
    that no datagram is dropped by a full receive buffer: 100 at a time)."""
    if port == "udp":
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for k in range(0, len(msgs), 100):
                for m in msgs[k : k + 100]:
                    s.sendto(m, ("127.0.0.1", app.ports["udp"]))
                app.wait_count(base + min(k + 100, len(msgs)), timeout=60)
        return
    if port == "tcp":
        data = b"".join(m + b"\n" for m in msgs)
    else:
        data = octet(*msgs)
    if port == "tls":
        with app.connect_tls() as t:
            t.sendall(data)
            t.unwrap()
    else:
        with app.connect(port) as s:
            s.sendall(data)


def find(app: Appliance, mark: str, from_id: int) -> list[dict[str, Any]]:
    return [m for m in app.iter_messages(from_id=from_id) if mark in m["message"]]


@pytest.mark.parametrize("port", ["tcp", "octet", "tls", "udp"])
@pytest.mark.parametrize("field", list(FIELDS))
def test_oversized_field(appliance: Appliance, field: str, port: str) -> None:
    app = appliance
    make, key, limit, cut = FIELDS[field]
    mark = "m" + uuid.uuid4().hex[:16]
    big = make(mark)
    base = app.count()
    t0 = time.monotonic()
    send_all(app, port, [big] + [normal(mark, i) for i in range(AFTER)], base)
    app.wait_count(base + 1 + AFTER, timeout=180)
    st = app.status()
    assert st["holding"] is None, st
    ms = find(app, mark, base)
    (m,) = (m for m in ms if not m["message"].startswith("after "))
    assert m["message"].endswith(mark), m["message"][:200]
    got = message_bytes(m[key])
    assert len(got) <= limit, (key, len(got))
    if cut:
        assert len(got) > limit // 2, (key, len(got))
        assert "field_truncated" in m["flags"], (m["flags"], key, len(got))
        if key != "sd":
            # Cut, not replaced: the stored bytes are the start of what was sent.
            assert got in big, got[:80]
    else:
        assert got == b"" and "field_truncated" not in m["flags"], (key, got[:80], m["flags"])
        long_run = b"G" * 300 if field == "program" else b"7" * 300
        assert long_run in message_bytes(m["message"]), m["message"][:120]
    seq = sorted(int(x["message"].rsplit(" ", 1)[1]) for x in ms if x is not m)
    assert seq == list(range(AFTER)), (len(seq), seq[:5])
    for x in ms:
        if x is not m:
            assert "field_truncated" not in x["flags"], x
    print(f"{field} over {port}: {time.monotonic() - t0:.1f} s")
