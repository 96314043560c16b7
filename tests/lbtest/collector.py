"""The collector in tests: a real syslog-ng on the configuration collector/render.py makes,
writing frames into a FIFO this process holds (as the supervisor does) and reads back; a strict
Python reader of the frames of indexer/FORMAT.md §11; free ports; senders for every transport;
a test PKI made with the openssl CLI. Nothing here knows indexd."""

from __future__ import annotations

import fcntl
import importlib
import os
import re
import resource
import signal
import socket
import ssl
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(TOP / "collector"))
render = importlib.import_module("render")

F_SETPIPE_SZ = 1031
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


# ------------------------------------------------------------------------------ frames

_TIME = re.compile(rb"-?[0-9]+(\.[0-9]{1,9})?")
_TZ = re.compile(rb"[+-][0-9]{2}:[0-9]{2}")
_LEN = re.compile(rb"0|[1-9][0-9]*")
_LS = re.compile(rb"[a-z0-9_-]{1,64}")
PAYLOAD = ("ls", "host", "program", "pid", "msgid", "sd", "msg")


class FrameError(ValueError):
    """Bytes that are not a frame of FORMAT.md §11."""


@dataclass
class Frame:
    """One decoded frame; payload fields are bytes, header fields text ("-" kept)."""

    rtime: str
    stime: str
    tzoff: str
    pri: str
    fmt: str
    ls: str
    host: bytes
    program: bytes
    pid: bytes
    msgid: bytes
    sd: bytes
    msg: bytes
    raw: bytes


def decode(buf: bytes) -> tuple[list[Frame], bytes]:
    """The complete frames at the head of buf and the bytes left after them. Strict: anything
    that is not a valid frame raises FrameError (the collector must never write one)."""
    frames = []
    pos = 0
    while True:
        nl = buf.find(b"\n", pos, pos + 256)
        if nl < 0:
            if len(buf) - pos >= 256:
                raise FrameError(f"header line longer than 256 bytes at {pos}: {buf[pos:pos+80]!r}")
            break
        f = buf[pos:nl].split(b" ")
        if len(f) != 13 or f[0] != b"LB1":
            raise FrameError(f"bad header at {pos}: {buf[pos:nl]!r}")
        rtime, stime, tzoff, pri, fmt = f[1:6]
        if not _TIME.fullmatch(rtime) or rtime.startswith(b"-"):
            raise FrameError(f"bad rtime {rtime!r}")
        if stime != b"-" and not _TIME.fullmatch(stime):
            raise FrameError(f"bad stime {stime!r}")
        if tzoff != b"-" and not _TZ.fullmatch(tzoff):
            raise FrameError(f"bad tzoff {tzoff!r}")
        if pri != b"-" and not (_LEN.fullmatch(pri) and int(pri) <= 191):
            raise FrameError(f"bad pri {pri!r}")
        if fmt not in (b"3", b"5", b"-"):
            raise FrameError(f"bad fmt {fmt!r}")
        if not all(_LEN.fullmatch(x) for x in f[6:]):
            raise FrameError(f"bad lengths {f[6:]!r}")
        lens = [int(x) for x in f[6:]]
        end = nl + 1 + sum(lens)
        if len(buf) < end + 1:
            break
        if buf[end : end + 1] != b"\n":
            raise FrameError(f"no LF after the payload of the frame at {pos}")
        fields = {}
        p = nl + 1
        for name, n in zip(PAYLOAD, lens, strict=True):
            fields[name] = buf[p : p + n]
            p += n
        if not _LS.fullmatch(fields["ls"]):
            raise FrameError(f"bad logspace {fields['ls']!r}")
        frames.append(
            Frame(
                rtime=rtime.decode(),
                stime=stime.decode(),
                tzoff=tzoff.decode(),
                pri=pri.decode(),
                fmt=fmt.decode(),
                ls=fields.pop("ls").decode(),
                raw=buf[pos : end + 1],
                **fields,
            )
        )
        pos = end + 1
    return frames, buf[pos:]


class FifoReader:
    """Reads frames from the held FIFO (non-blocking) and keeps them; syslog-ng's own messages
    (program "syslog-ng": start, stop, errors) are kept apart in .internal."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.rest = b""
        self.frames: list[Frame] = []
        self.internal: list[Frame] = []

    def poll(self) -> list[Frame]:
        """Read what is in the pipe now; returns the new frames."""
        while True:
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.rest += chunk
        new, self.rest = decode(self.rest)
        ours = [f for f in new if f.program == b"syslog-ng"]
        new = [f for f in new if f.program != b"syslog-ng"]
        self.internal += ours
        self.frames += new
        return new

    def wait(self, n: int, timeout: float = 10.0) -> list[Frame]:
        """Wait until n frames (in total since the last take()) arrived; returns them all."""
        deadline = time.monotonic() + timeout
        while len(self.frames) < n and time.monotonic() < deadline:
            if not self.poll():
                time.sleep(0.02)
        return list(self.frames)

    def take(self, n: int, timeout: float = 10.0) -> list[Frame]:
        """Exactly n frames (failing on fewer), removed from the kept ones."""
        got = self.wait(n, timeout)
        assert len(got) >= n, f"{len(got)} frames of {n} arrived: {got[:3]}..."
        self.frames = self.frames[n:]
        return got[:n]

    def quiet(self, seconds: float = 0.5) -> list[Frame]:
        """Frames that arrive within seconds (for checking that nothing arrives)."""
        time.sleep(seconds)
        self.poll()
        out, self.frames = self.frames, []
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
    """A real syslog-ng on a rendered configuration, writing into a FIFO held here."""

    root: Path
    doc: dict[str, Any] = field(default_factory=dict)  # settings, as a parsed TOML document
    ports: dict[str, int] = field(default_factory=free_ports)
    proc: subprocess.Popen[bytes] | None = None
    fd: int = -1
    reader: FifoReader | None = None

    def __post_init__(self) -> None:
        self.data = self.root / "data"
        self.run = self.data / "run"
        self.run.mkdir(parents=True, exist_ok=True)
        (self.data / "collector" / "buffer").mkdir(parents=True, exist_ok=True)
        self.fifo = self.run / "indexd.fifo"
        self.conf = self.run / "syslog-ng.conf"
        self.stderr_path = self.run / "syslog-ng.stderr"
        doc = dict(self.doc)
        self.ports = {**self.ports, **doc.get("ports", {})}
        doc["ports"] = dict(self.ports)
        self.settings = render.settings_from_dict(doc, self.root)
        self.conf.write_text(
            render.render(self.settings, data=self.data, run=self.run, fifo=self.fifo)
        )

    def hold(self) -> None:
        if self.fd < 0:
            if not self.fifo.exists():
                os.mkfifo(self.fifo, 0o600)
            self.fd = os.open(self.fifo, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
            fcntl.fcntl(self.fd, F_SETPIPE_SZ, 1 << 20)
            self.reader = FifoReader(self.fd)

    def start(self, timeout: float = 10.0) -> None:
        """Start syslog-ng and wait for its "starting up" message in the FIFO. The open-files
        limit (this process's and syslog-ng's) is raised to the hard limit first, for tests with
        thousands of connections."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        self.hold()
        before = self.started()
        err = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            render.syslogng_argv(self.conf, self.run, program=SYSLOG_NG),
            stdout=err,
            stderr=err,
            start_new_session=True,
        )
        err.close()
        deadline = time.monotonic() + timeout
        while self.started() <= before:
            if self.proc.poll() is not None:
                raise RuntimeError(f"syslog-ng exited {self.proc.returncode}:\n{self.stderr()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"syslog-ng did not start:\n{self.stderr()}")
            self.frames.poll()
            time.sleep(0.02)

    def started(self) -> int:
        """How many "syslog-ng starting up" messages arrived."""
        return sum(f.msg.startswith(b"syslog-ng starting up") for f in self.frames.internal)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Signal syslog-ng and wait for it (SIGKILL after 20 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def close(self) -> None:
        self.stop()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    @property
    def frames(self) -> FifoReader:
        assert self.reader is not None
        return self.reader
