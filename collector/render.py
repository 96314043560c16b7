#!/usr/bin/env python3
"""The syslog-ng configuration of logbox's collector, rendered from a small TOML settings file.

syslog-ng (3.38) receives syslog over TCP (newline framing, RFC 3164 and RFC 5424 on one port),
TCP with RFC 6587 octet counting, TLS (RFC 5425) and UDP, and hands every message to
logbox-indexd as one frame (indexer/FORMAT.md §11) written to ONE pipe() destination, a FIFO
held open by the supervisor, behind a reliable disk buffer, with flow control on the log path.
See collector/README.md for the settings, the frame and what each failure can lose.

    load_settings(path)                       the settings (defaults: the dev ports)
    render(settings, data=..., run=..., fifo=...)  the syslog-ng.conf text
    syslogng_argv(conf, run)                  how to start syslog-ng on it in the foreground
    prealloc_buffer(settings, data=...)       reserve the disk buffer's whole size on disk

CLI: python3 collector/render.py [--settings FILE] --data DIR --run DIR --fifo PATH
prints the configuration; python3 collector/render.py [--settings FILE] --data DIR --prealloc
preallocates the disk buffer files syslog-ng has made (after it started).
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import ipaddress
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

MIB = 1024 * 1024

# The limits of a frame (indexer/lib/logbox.h, lb_format.h): the template cuts each field so
# that a frame is always valid and fits LB_FRAME_MAX; the message and the structured data are
# cut one byte past what the store keeps so that indexd sees they were longer.
FRAME_FIELD_MAX = 4096  # LB_FRAME_FIELD_MAX: host, program, pid, msgid
SD_CUT = 16 * 1024 + 1  # LB_SD_MAX + 1
MSG_CUT = 256 * 1024 + 1  # LB_MSG_MAX + 1

# Per-connection flow-control window (messages). syslog-ng divides a source's log-iw-size by
# its max-connections and warns (clamping to 100) when the share is smaller than that.
WINDOW_PER_CONNECTION = 100

LOGSPACE_RE = re.compile(r"[a-z0-9_-]{1,64}")
VERIFY = {
    # settings value -> syslog-ng peer-verify(); "none" does not ask for a client certificate,
    # "optional" asks and verifies one that is presented, "required" refuses a client without.
    "none": "optional-untrusted",
    "optional": "optional-trusted",
    "required": "required-trusted",
}
FACILITIES = (
    "kern user mail daemon auth syslog lpr news uucp cron authpriv ftp ntp security console "
    "solaris-cron local0 local1 local2 local3 local4 local5 local6 local7"
).split()


class SettingsError(ValueError):
    """A settings file that cannot be used; the message names the key."""


@dataclass(frozen=True)
class Route:
    """One `[[logspace]]` table: messages matching ALL given conditions go to logspace `name`.
    host, program and message are PCRE regular expressions (unanchored; host ignores case);
    facility is a list of facility names."""

    name: str
    host: str | None = None
    program: str | None = None
    facility: tuple[str, ...] = ()
    message: str | None = None


@dataclass(frozen=True)
class Settings:
    """Everything render() needs besides the directories. Ports: 0 turns a listener off.
    TLS paths of None mean <data>/tls/{server.crt,server.key,ca.crt}."""

    bind: str = "127.0.0.1"
    tcp_port: int = 5514
    octet_port: int = 5601
    tls_port: int = 6514
    udp_port: int = 5514
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    tls_verify: str = "optional"
    log_msg_size: int = 16 * MIB
    max_connections: int = 10000
    udp_rcvbuf: int = 0  # SO_RCVBUF for UDP in bytes; 0 = the kernel's default
    buffer_size: int = 1024 * MIB  # disk-buf-size of the disk buffer
    buffer_mem_size: int = 64 * MIB  # mem-buf-size (reliable) / bytes kept in memory
    reliable: bool = True
    routes: tuple[Route, ...] = field(default_factory=tuple)


# ---------------------------------------------------------------------------- settings


# The logspace syslog-ng's own messages go to, apart from what devices send.
SYSTEM_LOGSPACE = "system"


def _take(table: dict, key: str, kind: type | tuple[type, ...], where: str) -> object:
    """table[key] checked against kind (bool is not an int here), or None when absent."""
    if key not in table:
        return None
    value = table.pop(key)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise SettingsError(f"{where}{key}: expected {kinds[0].__name__}, got a boolean")
    if not isinstance(value, kinds):
        raise SettingsError(f"{where}{key}: expected {kinds[0].__name__}, got {value!r}")
    return value


def _no_rest(table: dict, where: str) -> None:
    if table:
        raise SettingsError(f"{where}unknown key(s): {', '.join(sorted(table))}")


def _int(table: dict, key: str, where: str, lo: int, hi: int) -> int | None:
    value = _take(table, key, int, where)
    if value is None:
        return None
    assert isinstance(value, int)
    if not lo <= value <= hi:
        raise SettingsError(f"{where}{key}: {value} is not in {lo}..{hi}")
    return value


def _text(value: str, what: str) -> str:
    """A value that goes into the configuration: a NUL cannot be written there."""
    if "\0" in value:
        raise SettingsError(f"{what}: contains a NUL character")
    return value


def _path(table: dict, key: str, where: str, base: Path) -> Path | None:
    value = _take(table, key, str, where)
    if value is None:
        return None
    assert isinstance(value, str)
    if not value:
        raise SettingsError(f"{where}{key}: empty path")
    return base / _text(value, f"{where}{key}")


def _route(item: object, index: int) -> Route:
    where = f"logspace[{index}]."
    if not isinstance(item, dict):
        raise SettingsError(f"logspace[{index}]: expected a table")
    t = dict(item)
    name = _take(t, "name", str, where)
    if name is None:
        raise SettingsError(f"{where}name: missing")
    assert isinstance(name, str)
    if not LOGSPACE_RE.fullmatch(name):
        raise SettingsError(f"{where}name: {name!r} is not 1..64 characters of [a-z0-9_-]")
    regexes: dict[str, str | None] = {}
    for key in ("host", "program", "message"):
        value = _take(t, key, str, where)
        if value is not None:
            assert isinstance(value, str)
            _text(value, f"{where}{key}")
            try:
                re.compile(value)
            except re.error as e:
                # syslog-ng compiles PCRE, a superset in places; Python's check catches typos.
                if not _pcre_only(value):
                    raise SettingsError(f"{where}{key}: bad regular expression: {e}") from None
        regexes[key] = value
    facility = _take(t, "facility", (list, str), where)
    facilities: tuple[str, ...] = ()
    if facility is not None:
        names = [facility] if isinstance(facility, str) else facility
        assert isinstance(names, list)
        for f in names:
            if not isinstance(f, str) or f not in FACILITIES:
                raise SettingsError(f"{where}facility: {f!r} is not one of {', '.join(FACILITIES)}")
        facilities = tuple(names)
        if not facilities:
            raise SettingsError(f"{where}facility: empty list")
    _no_rest(t, where)
    return Route(name=name, facility=facilities, **regexes)


def _pcre_only(regex: str) -> bool:
    """True for constructs PCRE has and Python's re lacks (possessive quantifiers, \\K ...):
    those are left to syslog-ng's own check."""
    return bool(re.search(r"[*+?}]\+|\\[KRhHvVX]|\(\?[|>]|\\[pP]\{|\[:\w+:\]", regex))


def settings_from_dict(doc: dict, base: Path = Path(".")) -> Settings:
    """Settings from a parsed TOML document; relative paths are relative to base."""
    d = dict(doc)
    kw: dict[str, object] = {}
    bind = _take(d, "bind", str, "")
    if bind is not None:
        assert isinstance(bind, str)
        try:
            ipaddress.ip_address(bind)
        except ValueError:
            raise SettingsError(f"bind: {bind!r} is not an IP address") from None
        kw["bind"] = bind
    for key, lo, hi in (
        ("log_msg_size", 64 * 1024, 256 * MIB),
        ("max_connections", 1, 1_000_000),
        ("udp_rcvbuf", 0, 1024 * MIB),
    ):
        value = _int(d, key, "", lo, hi)
        if value is not None:
            kw[key] = value

    ports = _take(d, "ports", dict, "")
    if ports is not None:
        assert isinstance(ports, dict)
        p = dict(ports)
        for key in ("tcp", "octet", "tls", "udp"):
            value = _int(p, key, "ports.", 0, 65535)
            if value is not None:
                kw[f"{key}_port"] = value
        _no_rest(p, "ports.")

    tls = _take(d, "tls", dict, "")
    if tls is not None:
        assert isinstance(tls, dict)
        t = dict(tls)
        for key in ("cert", "key", "ca"):
            value = _path(t, key, "tls.", base)
            if value is not None:
                kw[f"tls_{key}"] = value
        verify = _take(t, "verify", str, "tls.")
        if verify is not None:
            if verify not in VERIFY:
                raise SettingsError(
                    f"tls.verify: {verify!r} is not one of none, optional, required"
                )
            kw["tls_verify"] = verify
        _no_rest(t, "tls.")

    buf = _take(d, "buffer", dict, "")
    if buf is not None:
        assert isinstance(buf, dict)
        b = dict(buf)
        size = _int(b, "size", "buffer.", MIB, 1 << 50)
        if size is not None:
            kw["buffer_size"] = size
        mem = _int(b, "mem_size", "buffer.", 64 * 1024, 1 << 40)
        if mem is not None:
            kw["buffer_mem_size"] = mem
        reliable = _take(b, "reliable", bool, "buffer.")
        if reliable is not None:
            kw["reliable"] = reliable
        _no_rest(b, "buffer.")

    routes = _take(d, "logspace", list, "")
    if routes is not None:
        assert isinstance(routes, list)
        kw["routes"] = tuple(_route(item, i) for i, item in enumerate(routes))
    _no_rest(d, "")
    s = Settings(**kw)  # type: ignore[arg-type]
    used = [p for p in (s.tcp_port, s.octet_port, s.tls_port) if p]
    if len(used) != len(set(used)):
        raise SettingsError("ports: tcp, octet and tls must differ (0 turns one off)")
    return s


def load_settings(path: Path | None) -> Settings:
    """The settings in the TOML file at path (relative paths in it are relative to the file's
    folder), or the defaults (dev ports on 127.0.0.1) when path is None."""
    if path is None:
        return Settings()
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise SettingsError(f"{path}: {e}") from None
    try:
        return settings_from_dict(doc, Path(path).resolve().parent)
    except SettingsError as e:
        raise SettingsError(f"{path}: {e}") from None


# ---------------------------------------------------------------------------- rendering


def quote(value: str) -> str:
    """value as a syslog-ng double-quoted string literal that reads back as exactly value.
    The lexer turns \\x, \\n... escapes into bytes and substitutes `name` (backticks) even
    inside strings; a doubled backtick is one literal backtick."""
    if "\0" in value:
        raise SettingsError(f"{value!r}: a NUL cannot be written into the configuration")
    out = ['"']
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "`":
            out.append("``")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _cut(macro: str, n: int) -> str:
    return f"$(substr {macro} 0 {n})"


def frame_template() -> str:
    """The frame of indexer/FORMAT.md §11 as a syslog-ng template (the text between the
    quotes of template(...), already escaped for the configuration).

    .lb.h carries "stime tzoff pri fmt", set by the parsing junction; .lb.ls the logspace."""
    ls = "${.lb.ls:-main}"
    payload = [
        ls,
        _cut("${HOST}", FRAME_FIELD_MAX),
        _cut("${PROGRAM}", FRAME_FIELD_MAX),
        _cut("${PID}", FRAME_FIELD_MAX),
        _cut("${MSGID}", FRAME_FIELD_MAX),
        _cut("${SDATA}", SD_CUT),
        _cut("${MSG}", MSG_CUT),
    ]
    lengths = " ".join(f"$(length {p})" for p in payload)
    return "LB1 ${R_UNIXTIME} ${.lb.h} " + lengths + "\\n" + "".join(payload) + "\\n"


# A PRI of 0..191 with nothing else allowed: syslog-ng itself accepts <999>.
PRI_RE = "<(?:[0-9]|[1-9][0-9]|1[0-8][0-9]|19[01])>"


def _parse_junction() -> str:
    """RFC 5424, else RFC 3164, else no header at all (the whole line is the message, host is
    the sender's address). A line that looks like RFC 5424 but does not parse falls to 3164.
    An RFC 5424 NILVALUE time stamp stays "none" (syslog-ng would give the receive time)."""
    return f"""    if {{
        filter {{ message('^{PRI_RE}1 - ' type(pcre)); }};
        parser {{ syslog-parser(flags(syslog-protocol) drop-invalid(yes)); }};
        rewrite {{ set("- - ${{PRI}} 5" value(".lb.h")); }};
    }} elif {{
        filter {{ message('^{PRI_RE}1 ' type(pcre)); }};
        parser {{ syslog-parser(flags(syslog-protocol) drop-invalid(yes)); }};
        rewrite {{ set("${{S_UNIXTIME}} ${{S_TZOFFSET}} ${{PRI}} 5" value(".lb.h")); }};
    }} elif {{
        filter {{ message('^{PRI_RE}' type(pcre)); }};
        parser {{ syslog-parser(drop-invalid(yes)); }};
        rewrite {{ set("${{S_UNIXTIME}} ${{S_TZOFFSET}} ${{PRI}} 3" value(".lb.h")); }};
    }} else {{
        rewrite {{ set("- - - -" value(".lb.h")); }};
    }};
"""


def _route_filter(r: Route) -> str:
    parts = []
    if r.host is not None:
        parts.append(f"host({quote(r.host)} type(pcre) flags(ignore-case))")
    if r.program is not None:
        parts.append(f"program({quote(r.program)} type(pcre))")
    if r.facility:
        parts.append(f"facility({', '.join(r.facility)})")
    if r.message is not None:
        parts.append(f"message({quote(r.message)} type(pcre))")
    return " and ".join(parts)


def _routing(routes: tuple[Route, ...]) -> str:
    """First matching route wins; no match leaves .lb.ls unset, which the template reads as
    main. A route with no condition matches everything."""
    out = []
    for i, r in enumerate(routes):
        cond = _route_filter(r)
        body = []
        if cond:
            body.append(f"        filter {{ {cond}; }};")
        body.append(f'        rewrite {{ set("{r.name}" value(".lb.ls")); }};')
        kw = "if" if i == 0 else "elif"
        out.append(f"    {kw} {{  # logspace {r.name}\n" + "\n".join(body) + "\n    }")
        if not cond:
            break
    if not out:
        return ""
    return " ".join(out) + ";\n"


def render(settings: Settings, *, data: Path, run: Path, fifo: Path) -> str:
    """The syslog-ng.conf text for settings: data is the logbox data directory (disk buffer in
    <data>/collector/buffer, default TLS files in <data>/tls), run the run directory (the
    persist file, pid file and control socket go there through syslogng_argv), fifo the
    FIFO the supervisor holds for logbox-indexd."""
    s = settings
    del run  # the run-time files are named on syslog-ng's command line (syslogng_argv)
    tls_dir = data / "tls"
    cert = s.tls_cert or tls_dir / "server.crt"
    key = s.tls_key or tls_dir / "server.key"
    ca = s.tls_ca or tls_dir / "ca.crt"
    window = s.max_connections * WINDOW_PER_CONNECTION
    ip = quote(s.bind)
    ipv6 = ":" in s.bind
    common = (
        f"ip({ip}) flags(no-parse) max-connections({s.max_connections}) "
        f"log-iw-size({window}) so-keepalive(yes)" + (" ip-protocol(6)" if ipv6 else "")
    )
    sources = []
    if s.tcp_port:
        sources.append(
            ("s_tcp", f'network({common} port({s.tcp_port}) transport("tcp"))', "newline TCP")
        )
    if s.octet_port:
        sources.append(
            (
                "s_octet",
                f'syslog({common} port({s.octet_port}) transport("tcp") '
                "trim-large-messages(yes))",
                "TCP, RFC 6587 octet counting",
            )
        )
    if s.tls_port:
        tls = (
            f"tls(key-file({quote(str(key))}) cert-file({quote(str(cert))}) "
            f"ca-file({quote(str(ca))}) peer-verify({VERIFY[s.tls_verify]}) "
            "ssl-options(no-sslv2, no-sslv3, no-tlsv1, no-tlsv11))"
        )
        sources.append(
            (
                "s_tls",
                f'syslog({common} port({s.tls_port}) transport("tls") '
                f"trim-large-messages(yes)\n        {tls})",
                "TLS (RFC 5425 octet counting), TLS 1.2+",
            )
        )
    if s.udp_port:
        rcvbuf = f" so-rcvbuf({s.udp_rcvbuf})" if s.udp_rcvbuf else ""
        sources.append(
            (
                "s_udp",
                f'network(ip({ip}) flags(no-parse) port({s.udp_port}) transport("udp")'
                + (" ip-protocol(6)" if ipv6 else "")
                + rcvbuf
                + ")",
                "UDP, one message per datagram",
            )
        )
    if not sources:
        raise SettingsError("ports: every listener is off")

    buffer_dir = data / BUFFER_DIR
    # truncate-size-ratio(1): the buffer file never gives back its blocks, so that what
    # prealloc_buffer() reserved stays reserved (collector/README.md "Full disk").
    if s.reliable:
        dbuf = (
            f"reliable(yes) dir({quote(str(buffer_dir))}) disk-buf-size({s.buffer_size}) "
            f"mem-buf-size({s.buffer_mem_size}) truncate-size-ratio(1)"
        )
    else:
        dbuf = (
            f"reliable(no) dir({quote(str(buffer_dir))}) disk-buf-size({s.buffer_size}) "
            f"mem-buf-length({max(10000, s.buffer_mem_size // 1024)}) truncate-size-ratio(1)"
        )

    lines = [
        "@version: 3.38",
        "# logbox collector: rendered by collector/render.py; edit the settings, not this file.",
        "",
        "options {",
        "    keep-hostname(yes);",
        "    chain-hostnames(no);",
        "    use-dns(no);",
        "    dns-cache(no);",
        "    use-fqdn(no);",
        "    keep-timestamp(yes);",
        "    frac-digits(6);",
        f"    log-msg-size({s.log_msg_size});",
        "    stats-freq(0);",
        "    mark-freq(0);",
        "};",
        "",
    ]
    for name, driver, what in sources:
        lines.append(f"# {what}")
        lines.append(f"source {name} {{\n    {driver};\n}};")
    lines += [
        "# syslog-ng's own messages (start, stop, errors, refused TLS peers), without the",
        "# per-connection chatter, in the logspace system (never routed, never in main).",
        "# Storing them also makes syslog-ng open the FIFO at start,",
        "# which is what replays a disk buffer left by the previous run.",
        "source s_internal {\n    internal();\n};",
    ]
    lines += [
        "",
        "# ONE destination: the FIFO logbox-indexd reads, one frame per message (FORMAT.md §11).",
        "destination d_indexd {",
        f"    pipe({quote(str(fifo))}",
        f'        template("{frame_template()}")',
        "        time-reopen(1)",
        f"        disk-buffer({dbuf}));",
        "};",
        "",
        "log {",
        "    source(s_internal);",
        '    filter { not message("^Syslog connection (accepted|closed);" type(pcre)); };',
        '    rewrite { set("${S_UNIXTIME} ${S_TZOFFSET} ${PRI} 5" value(".lb.h")); };',
        f'    rewrite {{ set("{SYSTEM_LOGSPACE}" value(".lb.ls")); }};',
        "    destination(d_indexd);",
        "    flags(flow-control);",
        "};",
        "",
        "log {",
    ]
    lines += [f"    source({name});" for name, _, _ in sources]
    lines.append(_parse_junction() + _routing(s.routes) + "    destination(d_indexd);")
    lines += ["    flags(flow-control);", "};", ""]
    return "\n".join(lines)


def syslogng_argv(conf: Path, run: Path, *, program: str = "syslog-ng") -> list[str]:
    """syslog-ng in the foreground on conf, its persist file, pid file and control socket in
    run. Its own messages go to the store (source s_internal), not to stderr: only errors in
    the configuration, before it runs, are printed."""
    return [
        program,
        "-F",
        "-f",
        str(conf),
        "-R",
        str(run / "syslog-ng.persist"),
        "-p",
        str(run / "syslog-ng.pid"),
        "-c",
        str(run / "syslog-ng.ctl"),
    ]


# ---------------------------------------------------------------------------- full disk

# Where render() puts the disk buffer, under the data directory it is given.
BUFFER_DIR = Path("collector") / "buffer"
QDISK_HEADER = 4096  # QDISK_RESERVED_SPACE: the buffer file's header
FALLOC_FL_KEEP_SIZE = 1  # <linux/falloc.h>
PREALLOC_KEEP = 0.10  # share of the buffer's file system that preallocation leaves free


def prealloc_size(settings: Settings) -> int:
    """Bytes a disk buffer file may come to: its header, disk-buf-size, and the one record
    syslog-ng may write past that size before it wraps (at most log-msg-size plus framing)."""
    return QDISK_HEADER + settings.buffer_size + settings.log_msg_size + 64 * 1024


def prealloc_buffer(settings: Settings, *, data: Path) -> list[Path]:
    """Reserves on disk the whole size every disk buffer file under <data>/collector/buffer
    may reach (fallocate with FALLOC_FL_KEEP_SIZE: the blocks are allocated, the file's size
    and content stay as syslog-ng made them). syslog-ng 3.38 has no prealloc() option, and a
    buffer file that must grow on a full file system fails its write ("Short write while
    writing disk buffer"), drops the message and suspends the sender's connection for good.
    Run after syslog-ng has started (it makes the file at start). Returns the files done.

    A file is left as it is when reserving its space would leave less than PREALLOC_KEEP of
    the file system free (a disk buffer bigger than its disk would otherwise fill it: ext4's
    fallocate keeps what it got before an ENOSPC); that is an OSError(ENOSPC) too.

    :raises OSError: when the space cannot be reserved (ENOSPC: the disk is already full).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    fallocate = libc.fallocate
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    size = prealloc_size(settings)
    done = []
    directory = data / BUFFER_DIR
    for path in sorted(directory.glob("syslog-ng-*.*qf")) if directory.is_dir() else []:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            vfs = os.fstatvfs(fd)
            free = vfs.f_bavail * vfs.f_frsize
            keep = int(vfs.f_blocks * vfs.f_frsize * PREALLOC_KEEP)
            need = max(0, size - os.fstat(fd).st_blocks * 512)
            if need > free - keep:
                raise OSError(
                    errno.ENOSPC,
                    f"not preallocated: {need} more bytes needed, {free} free, and "
                    f"{keep} ({PREALLOC_KEEP:.0%} of the file system) must stay free",
                    str(path),
                )
            if fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, size) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"fallocate {size} bytes: {os.strerror(err)}", str(path))
        finally:
            os.close(fd)
        done.append(path)
    return done


def main(argv: list[str] | None = None) -> int:
    """CLI: print the configuration, or (--prealloc) reserve the disk buffer's space."""
    ap = argparse.ArgumentParser(description="Print logbox's syslog-ng configuration.")
    ap.add_argument("--settings", type=Path, help="TOML settings (default: the dev defaults)")
    ap.add_argument("--data", type=Path, required=True, help="logbox data directory")
    ap.add_argument("--run", type=Path, help="run directory")
    ap.add_argument("--fifo", type=Path, help="the FIFO logbox-indexd reads")
    ap.add_argument(
        "--prealloc",
        action="store_true",
        help="reserve the disk buffer files' whole size on disk (after syslog-ng started)",
    )
    args = ap.parse_args(argv)
    if args.prealloc:
        try:
            files = prealloc_buffer(load_settings(args.settings), data=args.data.resolve())
        except (SettingsError, OSError) as e:
            print(f"render: {e}", file=sys.stderr)
            return 1
        for path in files:
            print(f"render: preallocated {path}", file=sys.stderr)
        return 0
    if args.run is None or args.fifo is None:
        ap.error("--run and --fifo are needed to print the configuration")
    try:
        settings = load_settings(args.settings)
        text = render(
            settings, data=args.data.resolve(), run=args.run.resolve(), fifo=args.fifo.resolve()
        )
    except (SettingsError, OSError) as e:
        print(f"render: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
