"""The collector in tests: a real syslog-ng on the configuration collector/render.py makes,
writing spool records (indexer/FORMAT.md §13) into a spool directory that a SpoolReader
(lbtest/spool.py) follows; free ports; senders for every transport; a test PKI made with the
openssl CLI. Nothing here knows indexd."""

from __future__ import annotations

import fcntl
import importlib
import re
import resource
import signal
import socket
import ssl
import subprocess
import sys
import termios
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(TOP / "collector"))
render = importlib.import_module("render")

from lbtest.proc import stop_process  # noqa: E402
from lbtest.spool import Record, RecordError, SpoolReader, decode  # noqa: E402
from lbtest.wait import wait_until  # noqa: E402

__all__ = ["Record", "RecordError", "SpoolReader", "decode"]
SYSLOG_NG = "/usr/sbin/syslog-ng"


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port nothing listens on right now (bind to port 0, read it, close)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports() -> dict[str, int]:
    """Four distinct free ports for tcp, octet, tls (stream) and udp (datagram)."""
    while True:
        out = {k: free_port() for k in ("tcp", "octet", "tls")}
        if len(set(out.values())) == 3:
            out["udp"] = free_port(socket.SOCK_DGRAM)
            return out


# ------------------------------------------------------------------------------ PKI


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(d: Path, name: str) -> tuple[Path, Path]:
    d.mkdir(parents=True, exist_ok=True)
    crt, key = d / f"{name}.crt", d / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", str(key), "-out", str(crt), "-days", "30", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    return crt, key


def make_cert(d: Path, name: str, ca: tuple[Path, Path], ext: str) -> tuple[Path, Path]:
    crt, key, csr, extf = (d / f"{name}{s}" for s in (".crt", ".key", ".csr", ".ext"))
    extf.write_text(f"basicConstraints=CA:FALSE\n{ext}\n")
    _openssl(
        "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}",
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
        "-CAcreateserial", "-days", "30", "-out", str(crt), "-extfile", str(extf),
    )  # fmt: skip
    return crt, key


@dataclass
class PKI:
    """A test CA with a server and a client certificate, and a client of another CA."""

    ca: Path
    server: tuple[Path, Path]
    client: tuple[Path, Path]
    stranger: tuple[Path, Path]

    @classmethod
    def make(cls, d: Path) -> PKI:
        ca = make_ca(d, "ca")
        other = make_ca(d, "other-ca")
        return cls(
            ca=ca[0],
            server=make_cert(
                d,
                "server",
                ca,
                "subjectAltName=DNS:localhost,IP:127.0.0.1\n" "extendedKeyUsage=serverAuth",
            ),
            client=make_cert(d, "client", ca, "extendedKeyUsage=clientAuth"),
            stranger=make_cert(d, "stranger", other, "extendedKeyUsage=clientAuth"),
        )


# ------------------------------------------------------------------------------ senders


def octet(msg: bytes) -> bytes:
    """msg framed by RFC 6587 octet counting."""
    return str(len(msg)).encode() + b" " + msg


def send_tcp(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)


def send_udp(port: int, datagram: bytes) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(datagram, ("127.0.0.1", port))


def tls_context(
    pki: PKI,
    client: tuple[Path, Path] | None = None,
    version: ssl.TLSVersion | None = None,
) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pki.ca)
    if client is not None:
        ctx.load_cert_chain(*client)
    if version is not None:
        with warnings.catch_warnings():  # TLSv1_1 is deprecated: that is what is tested
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.minimum_version = version
            ctx.maximum_version = version
        if version < ssl.TLSVersion.TLSv1_2:
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # else this client refuses it itself
    return ctx


def send_tls(port: int, ctx: ssl.SSLContext, data: bytes) -> None:
    """Connect, handshake, send data, and read until the server closes or 0.3 s pass (a
    server that rejects the client certificate says so only after the handshake in TLS 1.3:
    the read raises then)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(data)
            s.settimeout(0.3)
            try:
                s.recv(1)
            except TimeoutError:
                pass


# ------------------------------------------------------------------------------ syslog-ng


@dataclass
class Collector:
    """A real syslog-ng on a rendered configuration, writing into the spool <root>/data/spool
    (or spool=), followed by .spool (a SpoolReader). Every start renders the configuration
    again, with a fresh run token, as the appliance's unit does."""

    root: Path
    doc: dict[str, Any] = field(default_factory=dict)  # settings, as a parsed TOML document
    ports: dict[str, int] = field(default_factory=free_ports)
    spool_dir: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    tokens: list[str] = field(default_factory=list)  # the run token of every start

    def __post_init__(self) -> None:
        self.data = self.root / "data"
        self.run = self.data / "run"
        self.run.mkdir(parents=True, exist_ok=True)
        if self.spool_dir is None:
            self.spool_dir = self.data / "spool"
        self.conf = self.run / "syslog-ng.conf"
        self.stderr_path = self.run / "syslog-ng.stderr"
        doc = dict(self.doc)
        self.ports = {**self.ports, **doc.get("ports", {})}
        doc["ports"] = dict(self.ports)
        self.settings = render.settings_from_dict(doc, self.root)
        self.spool = SpoolReader(self.spool_dir)
        self.render()

    def render(self) -> str:
        """Render the configuration with a fresh run token; returns the token."""
        token = render.run_token()
        self.conf.write_text(
            render.render(
                self.settings, data=self.data, run=self.run, spool=self.spool_dir, token=token
            )
        )
        self.tokens.append(token)
        return token

    def start(self, timeout: float = 10.0) -> None:
        """Render, start syslog-ng and wait for its "starting up" record in the spool. The
        open-files limit (this process's and syslog-ng's) is raised to the hard limit first,
        for tests with thousands of connections."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        before = self.started()
        if before:
            self.render()  # never the token of an earlier start
        err = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            render.syslogng_argv(self.conf, self.run, program=SYSLOG_NG),
            stdout=err,
            stderr=err,
            start_new_session=True,
        )
        err.close()
        proc = self.proc

        def alive() -> None:
            if proc.poll() is not None:
                raise AssertionError(f"syslog-ng exited {proc.returncode}:\n{self.stderr()}")
            self.spool.poll()

        wait_until(
            lambda: self.started() > before,
            "syslog-ng logged its start-up",
            timeout,
            check=alive,
            detail=self.stderr,
        )

    def started(self) -> int:
        """How many "syslog-ng starting up" records arrived."""
        return sum(b" syslog-ng starting up" in r.raw for r in self.spool.internal)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Signal syslog-ng and wait for it (SIGKILL after 20 s)."""
        if self.proc is not None:
            stop_process(self.proc, sig, 20)
        self.proc = None

    def close(self) -> None:
        self.stop()

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    @property
    def frames(self) -> SpoolReader:
        """The old name of .spool."""
        return self.spool


# ------------------------------------------------------------------------------ stops


@dataclass
class StopResult:
    """What stop_under_load() saw. read: complete lines syslog-ng had read from the sockets
    when it was frozen; written: records in the spool then; stored: records at the end; lost:
    lines it had read that are not in the spool; gap_free: each connection's records are its
    lines 0..k-1 in order."""

    read: int
    written: int
    stored: int
    lost: int
    gap_free: bool

    @property
    def in_flight(self) -> int:
        """Lines read but not yet in the spool when syslog-ng was frozen."""
        return self.read - self.written


def _whole_lines(lines: list[bytes], nbytes: int) -> int:
    """How many whole lines the first nbytes of their concatenation hold."""
    n = 0
    for line in lines:
        if nbytes < len(line):
            break
        nbytes -= len(line)
        n += 1
    return n


def stop_under_load(
    c: Collector, sig: int, *, conns: int = 4, n: int = 200_000, after: int = 2000
) -> StopResult:
    """conns connections to the tcp listener send n numbered 150-byte lines each as fast as
    they can; once after records per connection are in the spool, syslog-ng is frozen
    (SIGSTOP) and what it has READ from each connection is measured: bytes sent, minus what is
    still in the sender's socket (SIOCOUTQ) and in syslog-ng's socket (/proc/net/tcp
    rx_queue). Then sig is sent and syslog-ng continued (the signal is handled first); the
    spool is read once it has exited."""
    socks = [socket.create_connection(("127.0.0.1", c.ports["tcp"])) for _ in range(conns)]
    for s in socks:
        s.setblocking(False)
    lines = [
        [b"<13>1 - h load - - - c%d %07d %s\n" % (k, i, b"x" * 110) for i in range(n)]
        for k in range(conns)
    ]
    bufs = [b"".join(ls) for ls in lines]
    sent = [0] * conns
    stop = threading.Event()

    def pump() -> None:
        while not stop.is_set():
            busy = False
            for k, s in enumerate(socks):
                if sent[k] < len(bufs[k]):
                    try:
                        sent[k] += s.send(bufs[k][sent[k] : sent[k] + 65536])
                        busy = True
                    except BlockingIOError:
                        pass
            if not busy:
                time.sleep(0.001)

    assert c.proc is not None
    c.spool.poll()
    base = len(c.spool.records)
    t = threading.Thread(target=pump)
    t.start()
    try:
        c.spool.wait(base + conns * after, timeout=60)
        c.proc.send_signal(signal.SIGSTOP)
        stop.set()
        t.join()
        time.sleep(0.5)  # what is on its way over loopback lands in syslog-ng's socket
        port_of = {s.getsockname()[1]: k for k, s in enumerate(socks)}
        rxq = [0] * conns
        with open("/proc/net/tcp") as f:
            for row in f.readlines()[1:]:
                cols = row.split()
                local, remote = (int(x.split(":")[1], 16) for x in cols[1:3])
                if local == c.ports["tcp"] and remote in port_of:
                    rxq[port_of[remote]] = int(cols[4].split(":")[1], 16)
        outq = [
            int.from_bytes(fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0" * 4), "little")
            for s in socks
        ]
        read = [_whole_lines(lines[k], sent[k] - outq[k] - rxq[k]) for k in range(conns)]
        c.spool.poll()
        written = len(c.spool.records) - base
        c.proc.send_signal(sig)
        c.proc.send_signal(signal.SIGCONT)
        c.stop(sig)
    finally:
        for s in socks:
            s.close()
    c.spool.poll()
    seqs: dict[int, list[int]] = {k: [] for k in range(conns)}
    for r in c.spool.records[base:]:
        m = re.match(rb"<13>1 - h load - - - c([0-9]+) ([0-9]{7}) ", r.raw)
        if m:
            seqs[int(m[1])].append(int(m[2]))
    return StopResult(
        read=sum(read),
        written=written,
        stored=sum(len(v) for v in seqs.values()),
        lost=sum(max(0, read[k] - len(seqs[k])) for k in range(conns)),
        gap_free=all(seqs[k] == list(range(len(seqs[k]))) for k in range(conns)),
    )
