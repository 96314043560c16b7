"""The load of logbox-eps: syslog messages sent by worker processes, paced to a rate.

Every message is RFC 5424 and carries, in its structured data, the run id, its connection's
number and its sequence number on that connection (from 1):

    <14>1 2026-11-26T10:00:00.123456Z HOST logbox-eps - - [eps@32473 run="RUN" c="3" s="42"] ...

so that the store itself can be asked what arrived: `eps@32473.run:RUN` counts the run,
the top values of `eps@32473.c` count each connection, and those of `eps@32473.s` within one
connection show duplicates (measure.py). The payload after it is filler of the size asked for,
or the lines of a corpus in turn.

Transports: TCP with newline or octet-counted framing (RFC 6587), TLS (RFC 5425, octet
counting, a client certificate when given), UDP (one datagram per message, many per system
call: dgram.py). Each worker owns
some of the connections and sends, for every step of the schedule, its share of the step's
rate, in batches every TICK_S; it reports what it sent per connection and per step.
"""

from __future__ import annotations

import datetime as dt
import itertools
import multiprocessing as mp
import queue
import socket
import ssl
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .dgram import Batcher

SD_ID = "eps@32473"  # 32473: the private enterprise number RFC 5612 reserves for examples
TICK_S = 0.01  # a worker sends a batch this often
# A worker behind its schedule (the box, or this machine, is too slow) catches up in batches of
# at most this many ticks' messages, so that falling behind costs no memory.
CATCH_UP_TICKS = 10
APP = "logbox-eps"


class LoadError(Exception):
    """A load that cannot be sent: the message says why (no traceback for the user)."""


@dataclass(frozen=True)
class Target:
    """Where the load goes and how."""

    host: str
    port: int
    transport: str = "tcp"  # tcp, tls or udp
    framing: str = "newline"  # newline or octet (TCP); TLS always octet; UDP none
    ca: Path | None = None  # TLS: the CA that signed the server's certificate
    cert: Path | None = None  # TLS: a client certificate ...
    key: Path | None = None  # ... and its key
    server_name: str | None = None  # TLS: the name the certificate must carry (default host)
    insecure: bool = False  # TLS: do not check the server's certificate


@dataclass(frozen=True)
class Step:
    """One step of the schedule: this many messages per second in all, for seconds."""

    rate: float
    seconds: float


@dataclass
class Sent:
    """What was sent: per (step, connection) the messages, per connection the last sequence
    number (the numbers run from 1 without a gap)."""

    counts: dict[tuple[int, int], int] = field(default_factory=dict)
    last_seq: dict[int, int] = field(default_factory=dict)


def tls_context(t: Target) -> ssl.SSLContext:
    """The client TLS context of t: TLS 1.2 or later, the server checked against t.ca."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if t.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        try:
            if t.ca is not None:
                ctx.load_verify_locations(cafile=str(t.ca))
            else:
                ctx.load_default_certs()
        except (OSError, ssl.SSLError) as e:
            raise LoadError(f"--ca {t.ca}: {e}") from None
    if t.cert is not None:
        try:
            ctx.load_cert_chain(str(t.cert), str(t.key) if t.key else None)
        except (OSError, ssl.SSLError) as e:
            raise LoadError(f"--cert {t.cert}: {e}") from None
    return ctx


def connect(t: Target, timeout: float = 10.0) -> socket.socket:
    """One connection to t (UDP: a connected datagram socket). LoadError saying why not."""
    kind = socket.SOCK_DGRAM if t.transport == "udp" else socket.SOCK_STREAM
    try:
        infos = socket.getaddrinfo(t.host, t.port, type=kind)
    except socket.gaierror as e:
        raise LoadError(f"{t.host}: cannot resolve: {e.strerror}") from None
    last: Exception | None = None
    for family, stype, proto, _, addr in infos:
        s = socket.socket(family, stype, proto)
        s.settimeout(timeout)
        try:
            s.connect(addr)
        except OSError as e:
            s.close()
            last = e
            continue
        if t.transport != "tls":
            return s
        try:
            return tls_context(t).wrap_socket(s, server_hostname=t.server_name or t.host)
        except ssl.SSLCertVerificationError as e:
            s.close()
            raise LoadError(
                f"{t.host}:{t.port}: the server's certificate is not trusted ({e.verify_message});"
                " give the CA that signed it with --ca"
            ) from None
        except (ssl.SSLError, OSError) as e:
            s.close()
            raise LoadError(f"{t.host}:{t.port}: TLS handshake failed: {e}") from None
    why = last.strerror if isinstance(last, OSError) and last.strerror else str(last)
    raise LoadError(f"{t.host}:{t.port} ({t.transport}): cannot connect: {why}")


def filler(size: int) -> bytes:
    """Payload bytes so that a message is about size bytes long (words, so that they are
    tokens like a log's)."""
    words = itertools.cycle(
        b"alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
    )
    out = bytearray()
    while len(out) < size:
        out += next(words) + b" "
    return bytes(out[:size]).rstrip()


def corpus_lines(path: Path, limit: int = 1_000_000) -> list[bytes]:
    """The lines of a corpus file (its first limit), without line ends; LoadError when it
    cannot be read or holds none."""
    try:
        with open(path, "rb") as f:
            lines = [ln.rstrip(b"\r\n") for ln in itertools.islice(f, limit)]
    except OSError as e:
        raise LoadError(f"--corpus {path}: {e.strerror}") from None
    lines = [ln for ln in lines if ln]
    if not lines:
        raise LoadError(f"--corpus {path}: no lines")
    return lines


HEADER_LEN = 110  # about what header() adds to the payload: --size counts it


def header(run: str, host: str, conn: int, seq: int, now: str) -> bytes:
    """A message's RFC 5424 header and structured data (then a space and the payload)."""
    return (f'<14>1 {now} {host} {APP} - - [{SD_ID} run="{run}" c="{conn}" s="{seq}"] ').encode()


def stamp(t: float) -> str:
    """RFC 3339 UTC with microseconds, of a time.time()."""
    d = dt.datetime.fromtimestamp(t, dt.UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def frame(t: Target, msg: bytes) -> bytes:
    """msg as it goes on the wire of t."""
    if t.transport == "udp":
        return msg
    if t.transport == "tls" or t.framing == "octet":
        return b"%d %s" % (len(msg), msg)
    return msg + b"\n"


def batch(
    t: Target, run: str, host: str, conn: int, first: int, n: int, payloads: Iterator[bytes]
) -> list[bytes]:
    """n framed messages of connection conn, sequence numbers first.., stamped now."""
    now = stamp(time.time())
    return [frame(t, header(run, host, conn, first + i, now) + next(payloads)) for i in range(n)]


def worker(
    t: Target,
    run: str,
    host: str,
    conns: Sequence[int],
    steps: Sequence[Step],
    share: float,
    start: float,
    payload: bytes | None,
    corpus: list[bytes] | None,
    out: mp.Queue,
    progress: Any,
    slot: int,
) -> None:
    """One worker process: opens its connections, then for each step sends share of the
    step's rate, spread over its connections, paced every TICK_S from start (time.time()).
    Adds what it sends to progress[slot] as it goes (a shared array: the progress line), and
    puts (Sent, the error that stopped it or None) on out at the end."""
    sent = Sent()
    error: str | None = None
    socks: list[socket.socket] = []
    payloads: Iterator[bytes] = (
        itertools.cycle(corpus) if corpus else itertools.repeat(payload or b"")
    )
    try:
        socks = [connect(t) for _ in conns]
        # UDP: many datagrams per system call where the kernel has sendmmsg
        batchers = (
            [Batcher(s) for s in socks] if t.transport == "udp" and Batcher.available() else None
        )
        seq = dict.fromkeys(conns, 0)
        t0 = start
        for k, step in enumerate(steps):
            rate = step.rate * share / max(1, len(conns))  # per connection
            end = t0 + step.seconds
            done = dict.fromkeys(conns, 0)
            while True:
                now = time.time()
                if now >= end:
                    break
                if now < t0:
                    time.sleep(min(TICK_S, t0 - now))
                    continue
                due = int(rate * (now - t0))
                most = max(1, int(rate * TICK_S * CATCH_UP_TICKS))
                for i, c in enumerate(conns):
                    n = min(due - done[c], most)
                    if n <= 0:
                        continue
                    msgs = batch(t, run, host, c, seq[c] + 1, n, payloads)
                    if batchers is not None:
                        batchers[i].send(msgs)
                    elif t.transport == "udp":
                        for m in msgs:
                            socks[i].send(m)
                    else:
                        socks[i].sendall(b"".join(msgs))
                    seq[c] += n
                    done[c] += n
                    progress[slot] += n
                if min(due - done[c] for c in conns) <= 0:  # on schedule: wait for the next tick
                    time.sleep(max(0.0, min(TICK_S, end - time.time())))
            for c in conns:
                sent.counts[(k, c)] = done[c]
            t0 = end
        sent.last_seq = seq
    except LoadError as e:
        error = str(e)
    except OSError as e:
        error = f"{t.host}:{t.port} ({t.transport}): sending failed: {e.strerror or e}"
    finally:
        for s in socks:
            try:
                if isinstance(s, ssl.SSLSocket):
                    s.unwrap()
            except (OSError, ssl.SSLError):
                pass
            s.close()
    out.put((sent, error))


@dataclass
class Load:
    """A load: target, run id, connections, message size or corpus, the schedule."""

    target: Target
    run: str
    connections: int = 1
    size: int = 256
    corpus: Path | None = None
    host: str = socket.gethostname() or "logbox-eps"
    workers: int = 0  # 0: one per CPU, at most one per connection
    _progress: Any = field(default=None, init=False, repr=False)  # run_steps' shared counts

    def check(self) -> None:
        """LoadError for settings that cannot work."""
        if self.target.transport not in ("tcp", "tls", "udp"):
            raise LoadError(f"--transport {self.target.transport}: tcp, tls or udp")
        if self.target.framing not in ("newline", "octet"):
            raise LoadError(f"--framing {self.target.framing}: newline or octet")
        if not 1 <= self.connections <= 10000:
            raise LoadError(f"--connections {self.connections}: 1 to 10000")
        if not HEADER_LEN <= self.size <= 65000:
            raise LoadError(f"--size {self.size}: {HEADER_LEN} to 65000 bytes")

    def processes(self) -> int:
        """How many sender processes run_steps starts: workers, or one per CPU, never more than
        one per connection."""
        n = self.workers or mp.cpu_count()
        return max(1, min(n, self.connections))

    def sent_now(self) -> int:
        """The messages sent so far by the schedule that runs (0 before it starts)."""
        return sum(self._progress) if self._progress is not None else 0

    def run_steps(self, steps: Sequence[Step], start: float | None = None) -> Sent:
        """Sends the schedule (starting at start, default 1 s from now); what was sent, all
        workers merged. LoadError when a worker could not send (the first error)."""
        self.check()
        corpus = corpus_lines(self.corpus) if self.corpus else None
        payload = None if corpus else filler(self.size - HEADER_LEN)
        n = self.processes()
        groups = [list(range(i + 1, self.connections + 1, n)) for i in range(n)]
        ctx = mp.get_context("fork")
        out: mp.Queue = ctx.Queue()
        # one slot per worker, written only by it: no lock needed to add, a sum may lag a batch
        self._progress = ctx.RawArray("q", n)
        start = time.time() + 1.0 if start is None else start
        procs = [
            ctx.Process(
                target=worker,
                args=(
                    self.target,
                    self.run,
                    self.host,
                    g,
                    steps,
                    len(g) / self.connections,
                    start,
                    payload,
                    corpus,
                    out,
                    self._progress,
                    i,
                ),
                daemon=True,
            )  # fmt: skip
            for i, g in enumerate(groups)
        ]
        for p in procs:
            p.start()
        total = Sent()
        errors = []
        budget = max(0.0, start - time.time()) + sum(st.seconds for st in steps) + 60
        for _ in procs:
            try:
                s, error = out.get(timeout=budget)
            except queue.Empty:
                for p in procs:
                    p.kill()
                raise LoadError("a sender process ended without saying what it sent") from None
            total.counts.update(s.counts)
            total.last_seq.update(s.last_seq)
            if error:
                errors.append(error)
        for p in procs:
            p.join(10)
        if errors:
            raise LoadError(errors[0])
        return total
