"""The size benchmark's three corpora (tests/bench/size.py), each written deterministically from
a seed (18 by default) up to a target size; the same arguments give the same bytes, and a
smaller target gives a prefix of a larger one:

  - synth: RFC 3164 lines `<PRI>Mmm dd hh:mm:ss host prog[pid]: msg`: 86 hosts, 24 programs
    (Zipf), a random pid on every line, messages drawn from sshd (failed / accepted, random user,
    IP, port, base64 key), nginx/haproxy access lines (random IP, ids, sizes, status), kernel
    firewall lines (two random IPs, ports, lengths), else 4-14 Zipf words with 0-3 inserted
    numbers, IPs, `size=`, `id=<hex>` or `<N>ms`; ~130 B a line. synth_lines() gives these lines
    from any start time at any rate (integrity.py's one day of --day-msgs messages).
  - lhlike: the 16 loghub samples as RFC 5424 (MSG = the original line), cycled in runs of
    20-400 consecutive lines of one system, every run of digits in the message part replaced by
    random digits of the same length, so the corpus is not a copy of itself; ~190 B a line.
  - long4k: an RFC 5424 header of a loghub line and a ~4 KB JSON-ish message: random 128-bit
    trace_id, 64-bit span_id, service, level, node-N and `events`, an array of consecutive
    digit-randomized loghub lines of one system (escaped).

These are the corpora of issue 18's measurement report (m18, its gen.py): at the same seed the
bytes are the same as its corpora's first bytes. Python's random.Random is stable across
versions for the calls used here (random, randrange, randint, choice, getrandbits,
expovariate).
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

CORPORA = ("synth", "lhlike", "long4k")
VERSION = 1  # bump when a generator's output changes (the cache under build/bench/size/ keys on it)

_DIGITS = re.compile(rb"[0-9]+")

Samples = list[tuple[str, list[bytes]]]


def _split5424(line: bytes) -> tuple[bytes, bytes]:
    """(header up to and with SD, MSG) of `<PRI>1 TS HOST APP PROCID MSGID SD MSG`."""
    parts = line.split(b" ", 7)
    return b" ".join(parts[:7]), parts[7] if len(parts) > 7 else b""


def _redraw(rnd: random.Random) -> Callable[[re.Match[bytes]], bytes]:
    def sub(m: re.Match[bytes]) -> bytes:
        n = len(m.group(0))
        return str(rnd.randrange(10**n)).zfill(n).encode()

    return sub


def lhlike(out: BinaryIO, target: int, rnd: random.Random, samples: Samples) -> None:
    pos = [0] * len(samples)
    sub = _redraw(rnd)
    n = 0
    while n < target:
        s = rnd.randrange(len(samples))
        lines = samples[s][1]
        buf = []
        for _ in range(rnd.randint(20, 400)):
            head, msg = _split5424(lines[pos[s] % len(lines)])
            pos[s] += 1
            buf.append(head + b" " + _DIGITS.sub(sub, msg) + b"\n")
        b = b"".join(buf)
        out.write(b)
        n += len(b)


_LEVELS = [b"INFO", b"INFO", b"INFO", b"WARN", b"ERROR", b"DEBUG"]


def long4k(out: BinaryIO, target: int, rnd: random.Random, samples: Samples) -> None:
    pos = [0] * len(samples)
    sub = _redraw(rnd)
    n = 0
    while n < target:
        s = rnd.randrange(len(samples))
        name, lines = samples[s]
        head, _ = _split5424(lines[pos[s] % len(lines)])
        ev = []
        size = 0
        while size < 3800:
            _, msg = _split5424(lines[pos[s] % len(lines)])
            pos[s] += 1
            m = _DIGITS.sub(sub, msg).replace(b"\\", b"\\\\").replace(b'"', b'\\"')
            ev.append(b'"' + m + b'"')
            size += len(m) + 3
        body = (
            b'{"trace_id":"%032x","span_id":"%016x","service":"%s","level":"%s","host":"node-%d","events":['
            % (
                rnd.getrandbits(128),
                rnd.getrandbits(64),
                name.lower().encode(),
                rnd.choice(_LEVELS),
                rnd.randrange(64),
            )
        )
        body += b",".join(ev) + b"]}"
        b = head + b" " + body + b"\n"
        out.write(b)
        n += len(b)


WORDS = (
    "the error connection session user request failed accepted closed timeout client server "
    "disk memory update service started stopped warning retry queue message packet denied "
    "invalid login auth token cache backend frontend worker thread process job task node "
    "cluster replica primary commit write read sync flush socket bind listen refused reset "
    "upstream downstream health check ok degraded latency slow fast high low status config "
    "reload signal kernel driver device interface link up down mount unmount volume backup "
    "restore snapshot certificate expired renewed handshake tls cipher policy rule match drop "
    "accept reject forward route table entry lookup miss hit evict insert delete select"
).split()
PROGS = [
    "sshd", "kernel", "nginx", "postfix/smtpd", "postfix/qmgr", "cron", "systemd", "dhcpd",
    "named", "haproxy", "sudo", "dockerd", "kubelet", "ntpd", "rsyslogd", "su", "auditd",
    "php-fpm", "mysqld", "redis-server", "vsftpd", "dovecot", "snmpd", "openvpn",
]  # fmt: skip
USERS = [
    "root", "admin", "ubuntu", "oracle", "test", "git", "deploy", "backup", "www-data",
    "postgres", "nagios", "jenkins",
] + [f"user{i}" for i in range(200)]  # fmt: skip
MON = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
AGENTS = [
    "Mozilla/5.0 (X11; Linux x86_64)",
    "curl/7.88.1",
    "Go-http-client/1.1",
    "python-requests/2.31",
]
PRIS = [(4 << 3) | 6, (3 << 3) | 6, (1 << 3) | 5, (10 << 3) | 4, (3 << 3) | 3, (16 << 3) | 6]


def synth_lines(
    rnd: random.Random,
    t0: float = 1_700_000_000.0,
    rate: float = 20000.0 / 3600,
    t_end: float = math.inf,
) -> Iterator[bytes]:
    """synth's lines, endless: time stamps from t0 on, Poisson at rate lines a second, never
    past t_end (a later one is held at t_end). The defaults give synth's bytes."""

    def zipf_words(k: int) -> list[str]:
        w = len(WORDS)
        return [WORDS[min(w - 1, int(w ** rnd.random()) - 1)] for _ in range(k)]

    def ip() -> str:
        return "%d.%d.%d.%d" % (
            rnd.randrange(1, 224),
            rnd.randrange(256),
            rnd.randrange(256),
            rnd.randrange(1, 255),
        )

    hosts = (
        [f"web-{i:02d}" for i in range(40)]
        + [f"db-{i:02d}" for i in range(10)]
        + [f"fw{i}.example.com" for i in range(6)]
        + [f"10.1.{i // 10}.{i % 10 + 1}" for i in range(30)]
    )
    t = t0
    while True:
        t = min(t + rnd.expovariate(rate), t_end)
        tm = time.gmtime(t)
        ts = "%s %2d %02d:%02d:%02d" % (
            MON[tm.tm_mon - 1],
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec,
        )
        prog = PROGS[min(len(PROGS) - 1, int(len(PROGS) ** rnd.random()) - 1)]
        host = rnd.choice(hosts)
        pri = rnd.choice(PRIS)
        r = rnd.random()
        if prog == "sshd" and r < 0.5:
            msg = "Failed password for %s%s from %s port %d ssh2" % (
                "invalid user " if rnd.random() < 0.3 else "",
                rnd.choice(USERS),
                ip(),
                rnd.randrange(1024, 65536),
            )
        elif prog == "sshd":
            msg = "Accepted publickey for %s from %s port %d ssh2: RSA SHA256:%s" % (
                rnd.choice(USERS),
                ip(),
                rnd.randrange(1024, 65536),
                "".join(rnd.choice(B64) for _ in range(43)),
            )
        elif prog in ("nginx", "haproxy") and r < 0.8:
            msg = '%s - - "%s /%s/%s?id=%d HTTP/1.1" %d %d "-" "%s"' % (
                ip(),
                rnd.choice(["GET", "GET", "GET", "POST", "PUT"]),
                rnd.choice(["api", "static", "img", "v1", "login"]),
                "/".join(zipf_words(rnd.randint(1, 3))),
                rnd.randrange(10**6),
                rnd.choice([200, 200, 200, 200, 304, 404, 500, 301]),
                rnd.randrange(100, 200000),
                rnd.choice(AGENTS),
            )
        elif prog == "kernel" and r < 0.6:
            msg = (
                "[%d.%06d] %s: IN=eth%d OUT= SRC=%s DST=%s LEN=%d TTL=%d ID=%d PROTO=%s SPT=%d DPT=%d"
                % (
                    rnd.randrange(10**6),
                    rnd.randrange(10**6),
                    rnd.choice(["UFW BLOCK", "iptables DROP", "nf_conntrack"]),
                    rnd.randrange(4),
                    ip(),
                    ip(),
                    rnd.randrange(40, 1500),
                    rnd.randrange(32, 255),
                    rnd.randrange(65536),
                    rnd.choice(["TCP", "UDP"]),
                    rnd.randrange(1024, 65536),
                    rnd.choice([22, 80, 443, 3306, 53, 8080]),
                )
            )
        else:
            ws = zipf_words(rnd.randint(4, 14))
            for _ in range(rnd.randint(0, 3)):
                ws.insert(
                    rnd.randrange(len(ws) + 1),
                    rnd.choice(
                        [
                            str(rnd.randrange(10 ** rnd.randint(1, 7))),
                            ip(),
                            f"size={rnd.randrange(10**7)}",
                            f"id={rnd.getrandbits(32):x}",
                            f"{rnd.randrange(5000)}ms",
                        ]
                    ),
                )
            msg = " ".join(ws)
        yield f"<{pri}>{ts} {host} {prog}[{rnd.randrange(100, 65536)}]: {msg}\n".encode()


def synth(out: BinaryIO, target: int, rnd: random.Random, samples: Samples) -> None:
    n = 0
    buf: list[bytes] = []
    for b in synth_lines(rnd):
        if n >= target:
            break
        buf.append(b)
        n += len(b)
        if len(buf) >= 10000:
            out.write(b"".join(buf))
            buf = []
    out.write(b"".join(buf))


GENERATORS = {"synth": synth, "lhlike": lhlike, "long4k": long4k}


def write(kind: str, path: Path, target_bytes: int, seed: int, samples: Samples) -> None:
    """Writes corpus kind to path: lines until at least target_bytes are written."""
    with open(path, "wb") as out:
        GENERATORS[kind](out, target_bytes, random.Random(seed), samples)
