#!/usr/bin/env python3
"""The syslog-ng configuration of logbox's collector, rendered from a small TOML settings file.

syslog-ng (3.38) is pure transport: every listener (newline TCP, TCP with RFC 6587 octet
counting, TLS (RFC 5425), UDP) reads with flags(no-parse), and ONE file() destination writes
each message unparsed as one spool record (indexer/FORMAT.md §13) into per-second spool files
<spool>/YYYYMMDDTHHMMSS.<run>.lbs, with flow control on every log path. No disk buffer, no
FIFO, no parsing, no routing: logbox-indexd reads the spool, parses and routes (it reads the
[[logspace]] tables of the same settings file with --routes; they are checked here too, so
that a bad file is refused before syslog-ng starts). See collector/README.md.

    load_settings(path)                                 the settings (defaults: the dev ports)
    render(settings, data=..., run=..., spool=..., token=...)  the syslog-ng.conf text
    run_token()                                         a fresh <run> token for one start
    syslogng_argv(conf, run)                            how to start syslog-ng in the foreground

CLI: python3 collector/render.py [--settings FILE] --data DIR --run DIR [--spool DIR]
prints the configuration (spool default <data>/spool; a fresh run token each time).
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import secrets
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

# The rules render.py shares with indexd and the web UI (logspace names, facility names) are
# logbox_core's: rpc/ in a checkout, /usr/lib/logbox/python beside this file's folder on the
# appliance (appliance/install.sh).
for _d in (Path(__file__).resolve().parent.parent / d for d in ("rpc", "python")):
    if (_d / "logbox_core").is_dir() and str(_d) not in sys.path:
        sys.path.append(str(_d))
from logbox_core.constants import FACILITIES, logspace_name_problem  # noqa: E402

MIB = 1024 * 1024

# Flow-control windows (messages in syslog-ng between the socket and the spool write).
# The static window: syslog-ng divides a source's log-iw-size by its max-connections and warns
# (clamping to 100) when the share is smaller than that.
WINDOW_PER_CONNECTION = 100
# A shared pool per source that syslog-ng 3.38 hands out on top of the static windows to the
# connections that are busy (dynamic-window-size, rebalanced every second); syslog-ng warns when
# it is under 10 x max-connections. With 100 messages a connection carries only 100 messages per
# hand-off to the file writer: measured with make bench-ingest, one connection replaying loghub
# lines, 74-99k msg/s at 10.5-11.9 CPU µs per stored message with 100 alone, 143-187k at
# 7.6-8.4 µs with a pool (20,000, 100,000 and 1,000,000 alike; a static 1,000 no better). The
# pool bounds what the busy connections of a source hold together (a static 1,000 would let
# 10,000 connections hold 10 M messages when the spool cannot be written).
DYNAMIC_WINDOW_PER_CONNECTION = 10
# Messages a connection reads per wake-up (3.38's default is 10: a one-connection replay cost
# 11.9 CPU µs per message in syslog-ng with 10, 6.2 with 100); the window still bounds it.
FETCH_LIMIT = 1000
# The UDP source's window. Flow control cannot hold a UDP sender: while the window is full,
# syslog-ng stops reading and the kernel drops what overflows the receive buffer (~170 datagrams
# at its default size). 3.38's default of 100 (one writer batch) dropped datagrams from bursts of
# 100 that the kernel buffer alone would have held; the window bounds syslog-ng's memory for them.
UDP_WINDOW = 10_000

# The listeners, named as collector.toml's [ports] keys: the syslog-ng source of each is named
# so, and the record template writes ${SOURCE}, so a record's listener is exactly this name.
# syslog-ng's own messages come from the source "internal" (collector/README.md).
LISTENERS = ("tcp", "octet", "tls", "udp")
INTERNAL = "internal"
LISTENER_RE = re.compile(r"[a-z0-9_-]{1,32}")  # FORMAT.md §13.1
RUN_TOKEN_RE = re.compile(r"[0-9a-z]{1,32}")  # FORMAT.md §13.2

# The spool record of FORMAT.md §13.1, as a syslog-ng template (already escaped for the
# configuration): "LS1" SP rtime SP listener SP peer SP length LF <raw bytes> LF.
RECORD_TEMPLATE = "LS1 ${R_UNIXTIME} ${SOURCE} ${SOURCEIP:--} $(length ${MSG})\\n${MSG}\\n"
# Seconds a spool file stays open without a write before syslog-ng closes it (indexd deletes a
# taken file only once no writer has it open).
TIME_REAP = 3
# Messages the file writer collects before one write(); at most this many accepted messages
# sit in its buffer (a SIGKILL loses them: collector/README.md "What each failure can lose").
FLUSH_LINES = 100

VERIFY = {
    # settings value -> syslog-ng peer-verify(); "none" does not ask for a client certificate,
    # "optional" asks and verifies one that is presented, "required" refuses a client without.
    "none": "optional-untrusted",
    "optional": "optional-trusted",
    "required": "required-trusted",
}


class SettingsError(ValueError):
    """A settings file that cannot be used; the message names the key."""


@dataclass(frozen=True)
class Route:
    """One `[[logspace]]` table: messages matching ALL given conditions go to logspace `name`.
    host, program and message are PCRE regular expressions (unanchored; host ignores case);
    facility is a list of facility names, listener a list of listener names. logbox-indexd
    applies them (--routes); they are checked here and never rendered."""

    name: str
    host: str | None = None
    program: str | None = None
    facility: tuple[str, ...] = ()
    message: str | None = None
    listener: tuple[str, ...] = ()


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
    # Bytes of one message, and of each connection's input buffer: what syslog-ng may have read
    # and not yet written is bounded by it (collector/README.md "What each failure can lose").
    # 320 KiB: the most the store keeps of a message (LB_MSG_MAX, 256 KiB) and its header.
    log_msg_size: int = 320 * 1024
    max_connections: int = 10000
    udp_rcvbuf: int = 0  # SO_RCVBUF for UDP in bytes; 0 = the kernel's default
    spool_fsync: bool = False  # fsync(yes) on the spool files: see "Power cut"
    routes: tuple[Route, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = ()  # accepted but ignored settings, said by the CLI


BUFFER_IGNORED = (
    "buffer: ignored: the spool (<data>/spool, indexer/FORMAT.md §13) replaced syslog-ng's "
    "disk buffer; remove the [buffer] table"
)


# ---------------------------------------------------------------------------- settings


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


def _names(table: dict, key: str, allowed: tuple[str, ...], where: str) -> tuple[str, ...]:
    """table[key], one name or a non-empty list of names each in allowed; () when absent."""
    value = _take(table, key, (list, str), where)
    if value is None:
        return ()
    names = [value] if isinstance(value, str) else value
    assert isinstance(names, list)
    for n in names:
        if not isinstance(n, str) or n not in allowed:
            raise SettingsError(f"{where}{key}: {n!r} is not one of {', '.join(allowed)}")
    if not names:
        raise SettingsError(f"{where}{key}: empty list")
    return tuple(names)


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
    if (why := logspace_name_problem(name)) is not None:
        raise SettingsError(f"{where}name: {name!r}: {why}")
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
    facilities = _names(t, "facility", FACILITIES, where)
    listeners = _names(t, "listener", (*LISTENERS, INTERNAL), where)
    _no_rest(t, where)
    return Route(name=name, facility=facilities, listener=listeners, **regexes)


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

    warned: list[str] = []
    if _take(d, "buffer", dict, "") is not None:
        # The appliance's collector.toml of earlier versions has one: still start.
        warned.append(BUFFER_IGNORED)
    fsync = _take(d, "spool_fsync", bool, "")
    if fsync is not None:
        kw["spool_fsync"] = fsync

    routes = _take(d, "logspace", list, "")
    if routes is not None:
        assert isinstance(routes, list)
        kw["routes"] = tuple(_route(item, i) for i, item in enumerate(routes))
    _no_rest(d, "")
    kw["warnings"] = tuple(warned)
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


# quote(): the characters written as an escape of their own (other control characters: \xHH)
_QUOTE_ESCAPES = {"\\": "\\\\", '"': '\\"', "`": "``", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def quote(value: str) -> str:
    """value as a syslog-ng double-quoted string literal that reads back as exactly value.
    The lexer turns \\x, \\n... escapes into bytes and substitutes `name` (backticks) even
    inside strings; a doubled backtick is one literal backtick."""
    if "\0" in value:
        raise SettingsError(f"{value!r}: a NUL cannot be written into the configuration")
    out = ['"']
    for ch in value:
        if ch in _QUOTE_ESCAPES:
            out.append(_QUOTE_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def run_token() -> str:
    """A fresh <run> token (FORMAT.md §13.2) for one start of syslog-ng: the start time in hex
    (so tokens sort by start) and 32 random bits, 16 characters of [0-9a-f]."""
    return f"{int(time.time()):08x}{secrets.token_hex(4)}"


def spool_file(spool: Path, token: str) -> str:
    """The file() destination's path template: <spool>/YYYYMMDDTHHMMSS.<token>.lbs, the UTC
    second of receipt (the destination's time-zone("UTC") applies to the R_ macros)."""
    if not RUN_TOKEN_RE.fullmatch(token):
        raise SettingsError(f"run token {token!r} is not 1..32 characters of [0-9a-z]")
    if "$" in str(spool):
        raise SettingsError(f"spool: {spool}: a $ would be read as a template macro")
    return f"{spool}/${{R_YEAR}}${{R_MONTH}}${{R_DAY}}T${{R_HOUR}}${{R_MIN}}${{R_SEC}}.{token}.lbs"


def render(
    settings: Settings,
    *,
    data: Path,
    run: Path,
    spool: Path | None = None,
    token: str | None = None,
) -> str:
    """The syslog-ng.conf text for settings: data is the logbox data directory (default TLS
    files in <data>/tls), run the run directory (the persist file, pid file and control socket
    go there through syslogng_argv), spool the spool directory (default <data>/spool) and token
    this start's <run> token (default: a fresh run_token()). Render again for every start of
    syslog-ng: a restarted syslog-ng must never append to a file a killed one left torn."""
    s = settings
    del run  # the run-time files are named on syslog-ng's command line (syslogng_argv)
    spool = spool if spool is not None else data / "spool"
    token = token if token is not None else run_token()
    tls_dir = data / "tls"
    cert = s.tls_cert or tls_dir / "server.crt"
    key = s.tls_key or tls_dir / "server.key"
    ca = s.tls_ca or tls_dir / "ca.crt"
    window = s.max_connections * WINDOW_PER_CONNECTION
    ip = quote(s.bind)
    ipv6 = ":" in s.bind
    common = (
        f"ip({ip}) flags(no-parse) max-connections({s.max_connections}) "
        f"log-iw-size({window}) log-fetch-limit({FETCH_LIMIT}) so-keepalive(yes)\n        "
        f"dynamic-window-size({s.max_connections * DYNAMIC_WINDOW_PER_CONNECTION}) "
        "dynamic-window-realloc-ticks(1)" + (" ip-protocol(6)" if ipv6 else "")
    )
    sources = []
    if s.tcp_port:
        sources.append(
            ("tcp", f'network({common} port({s.tcp_port}) transport("tcp"))', "newline TCP")
        )
    if s.octet_port:
        sources.append(
            (
                "octet",
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
                "tls",
                f'syslog({common} port({s.tls_port}) transport("tls") '
                f"trim-large-messages(yes)\n        {tls})",
                "TLS (RFC 5425 octet counting), TLS 1.2+",
            )
        )
    if s.udp_port:
        rcvbuf = f" so-rcvbuf({s.udp_rcvbuf})" if s.udp_rcvbuf else ""
        sources.append(
            (
                "udp",
                f'network(ip({ip}) flags(no-parse) port({s.udp_port}) transport("udp") '
                f"log-iw-size({UDP_WINDOW}) log-fetch-limit({FETCH_LIMIT})"
                + (" ip-protocol(6)" if ipv6 else "")
                + rcvbuf
                + ")",
                "UDP, one message per datagram",
            )
        )
    if not sources:
        raise SettingsError("ports: every listener is off")

    lines = [
        "@version: 3.38",
        "# logbox collector: rendered by collector/render.py; edit the settings, not this file.",
        f"# run token {token}: a fresh one for every start (indexer/FORMAT.md §13.2)",
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
        lines.append(f"# {what}: listener {name}")
        lines.append(f"source {quote(name)} {{\n    {driver};\n}};")
    lines += [
        "# syslog-ng's own messages (start, stop, errors, refused TLS peers), without the",
        "# per-connection chatter: listener internal, written as RFC 5424 lines.",
        f"source {quote(INTERNAL)} {{\n    internal();\n}};",
        "",
        "# ONE destination: the spool, one record per message (indexer/FORMAT.md §13), the raw",
        "# bytes as received. No disk buffer: the spool is the buffer.",
        "destination d_spool {",
        f"    file({quote(spool_file(spool, token))}",
        f'        template("{RECORD_TEMPLATE}")',
        '        time-zone("UTC")',
        "        create-dirs(yes)",
        "        dir-perm(0770)",
        "        perm(0640)",
        f"        time-reap({TIME_REAP})",
        "        time-reopen(1)",
        f"        flush-lines({FLUSH_LINES})",
        f"        fsync({'yes' if s.spool_fsync else 'no'}));",
        "};",
        "",
        "log {",
        f"    source({quote(INTERNAL)});",
        '    filter { not message("^Syslog connection (accepted|closed);" type(pcre)); };',
        "    rewrite {",
        '        set("<${PRI}>1 ${ISODATE} ${HOST} syslog-ng ${PID} - - ${MSG}" value("MESSAGE"));',
        "    };",
        "    destination(d_spool);",
        "    flags(flow-control);",
        "};",
        "",
        "log {",
    ]
    lines += [f"    source({quote(name)});" for name, _, _ in sources]
    lines += ["    destination(d_spool);", "    flags(flow-control);", "};", ""]
    return "\n".join(lines)


def syslogng_argv(conf: Path, run: Path, *, program: str = "syslog-ng") -> list[str]:
    """syslog-ng in the foreground on conf, its persist file, pid file and control socket in
    run. Its own messages go to the spool (source internal), not to stderr: only errors in
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


def main(argv: list[str] | None = None) -> int:
    """CLI: print the configuration (a fresh run token each time)."""
    ap = argparse.ArgumentParser(description="Print logbox's syslog-ng configuration.")
    ap.add_argument("--settings", type=Path, help="TOML settings (default: the dev defaults)")
    ap.add_argument("--data", type=Path, required=True, help="logbox data directory")
    ap.add_argument("--run", type=Path, required=True, help="run directory")
    ap.add_argument("--spool", type=Path, help="spool directory (default <data>/spool)")
    args = ap.parse_args(argv)
    try:
        settings = load_settings(args.settings)
        text = render(
            settings,
            data=args.data.resolve(),
            run=args.run.resolve(),
            spool=args.spool.resolve() if args.spool else None,
        )
    except (SettingsError, OSError) as e:
        print(f"render: {e}", file=sys.stderr)
        return 1
    for w in settings.warnings:
        print(f"render: warning: {w}", file=sys.stderr)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
