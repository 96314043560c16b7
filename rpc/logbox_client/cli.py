"""logbox-remote: search, count, export and status of a logbox appliance over its RPC API.

    logbox-remote [--url URL] [--token T | --user NAME] [--ca FILE | --insecure]
                  [--logspace NAME] COMMAND ...

Commands: `search QUERY`, `count QUERY`, `export QUERY`, `status`, `logspaces`, `login`.
Exit status: 0 ok, 1 an API error (or an export that ended early or warned), 2 a usage error.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from .client import Client, Export, LogboxError

PROG = "logbox-remote"
DEFAULT_URL = "https://127.0.0.1:8444"
# liblogbox's severity names (restated: this package depends on nothing of logbox; pinned by
# tests/test_constants_pinned.py)
SEVERITIES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")
_LONE_SURROGATE = re.compile("[\udc80-\udcff]")
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f]")


class Usage(Exception):
    """A usage error found after parsing (exit 2)."""


def _connection(p: argparse.ArgumentParser, default: Any) -> None:
    """The connection options (on the program and again on each command, where they override
    only when given: default SUPPRESS)."""
    g = p.add_argument_group("connection")
    g.add_argument(
        "--url",
        default=default,
        help=f"the appliance, https://HOST:PORT (env LOGBOX_URL; default {DEFAULT_URL})",
    )
    g.add_argument("--token", default=default, help="an API or session token (env LOGBOX_TOKEN)")
    g.add_argument(
        "--user",
        default=default,
        help="log in as this user (env LOGBOX_USER); the password comes from env "
        "LOGBOX_PASSWORD, else it is asked for on the terminal",
    )
    tls = g.add_mutually_exclusive_group()
    tls.add_argument(
        "--ca", metavar="FILE", default=default, help="CA file to verify the server (env LOGBOX_CA)"
    )
    tls.add_argument(
        "--insecure", action="store_true", default=default, help="do not verify the certificate"
    )
    g.add_argument("--logspace", default=default, help="the logspace (default main)")


def _parser() -> argparse.ArgumentParser:
    """The command line: connection options before or after the command."""
    p = argparse.ArgumentParser(
        prog=PROG, description="Search a logbox appliance through its HTTPS API."
    )
    _connection(p, None)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        _connection(sp, argparse.SUPPRESS)
        return sp

    def time_range(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("query", help="the query (logbox query language)")
        sp.add_argument(
            "--from",
            dest="from_",
            metavar="TIME",
            help="start (RFC 3339, -15m, -2h, -1d, now, epoch seconds; default: to - 24 h)",
        )
        sp.add_argument("--to", metavar="TIME", help="end, exclusive (default now)")
        sp.add_argument(
            "--time",
            choices=("received", "event"),
            help="the range is of receive times (default) or of the messages' own time stamps",
        )

    sp = command("search", "print matching messages, newest first")
    time_range(sp)
    sp.add_argument("--limit", type=int, default=100, metavar="N", help="hits (default 100)")
    sp.add_argument("--order", choices=("newest", "oldest"), default="newest")
    sp.add_argument("--cursor", help="continue after this next_cursor")
    sp.add_argument("--all", action="store_true", help="every match, page after page")
    sp.add_argument("--json", action="store_true", help="NDJSON: one message object a line")
    sp.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="live tail: print new matches as they arrive until interrupted (the range, "
        "--order, --cursor and --all do not apply; --limit is the most per 200 ms)",
    )

    sp = command("count", "print how many messages match")
    time_range(sp)

    sp = command("export", "write every match as NDJSON or CSV, streamed")
    time_range(sp)
    sp.add_argument("--order", choices=("newest", "oldest"), default="newest")
    sp.add_argument("--format", choices=("ndjson", "csv"), default="ndjson")
    sp.add_argument("-o", "--output", metavar="FILE", help="write here (default stdout)")
    sp.add_argument(
        "--no-progress", action="store_true", help="no progress bar (shown only on a terminal)"
    )

    sp = command("status", "services, ingest rate, logspaces, disk, RAID")
    sp.add_argument("--json", action="store_true", help="the API's JSON answer")

    command("logspaces", "list the logspaces you may read")
    command("login", "log in (--user) and print a session token for LOGBOX_TOKEN")
    return p


def _settings(args: argparse.Namespace) -> argparse.Namespace:
    """Fills the connection options from the environment and the defaults."""
    env = os.environ
    args.url = args.url or env.get("LOGBOX_URL") or DEFAULT_URL
    args.token = args.token or env.get("LOGBOX_TOKEN") or None
    args.user = args.user or env.get("LOGBOX_USER") or None
    if args.ca is None and not args.insecure:
        args.ca = env.get("LOGBOX_CA") or None
    args.logspace = args.logspace or "main"
    return args


def _client(args: argparse.Namespace) -> tuple[Client, bool]:
    """A client with a token: the given one, else a session from --user (which the caller
    logs out at the end: the bool says so)."""
    verify: bool | str = False if args.insecure else (args.ca or True)
    if args.insecure:
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    if args.command == "login" and not args.user:
        raise Usage("login needs --user (or LOGBOX_USER)")
    if args.token and args.command != "login":
        return Client(args.url, token=args.token, verify=verify), False
    if not args.user:
        raise Usage("no credentials: give --token (LOGBOX_TOKEN) or --user (LOGBOX_USER)")
    password = os.environ.get("LOGBOX_PASSWORD")
    if password is None:
        if not sys.stdin.isatty():
            raise Usage("no password: set LOGBOX_PASSWORD or run on a terminal")
        password = getpass.getpass(f"{PROG}: password for {args.user}: ")
    c = Client(args.url, verify=verify)
    c.login(args.user, password)
    return c, args.command != "login"


def _json_line(obj: Any) -> bytes:
    """One NDJSON line: UTF-8, bytes that are not UTF-8 as \\udcXX escapes (as the API)."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.encode("utf-8") + b"\n"


def _shown(value: Any) -> str:
    """A field for the table: control characters escaped so that a row stays one line."""
    text = "" if value is None else str(value)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _severity(value: Any) -> str:
    if isinstance(value, int) and 0 <= value < len(SEVERITIES):
        return SEVERITIES[value]
    return _shown(value)


def _table(hits: Iterable[dict[str, Any]], out: IO[bytes]) -> int:
    """Writes hits as rows of received, host, program, severity, message; returns how many."""
    n = 0
    out.write(f"{'RECEIVED':<27}  {'HOST':<15} {'PROGRAM':<12} {'SEVERITY':<8} MESSAGE\n".encode())
    for h in hits:
        out.write(_row(h))
        n += 1
    return n


def _say(msg: str) -> None:
    """A line on stderr, prefixed with the program name."""
    sys.stderr.write(f"{PROG}: {msg}\n")
    sys.stderr.flush()


def _warnings(body: dict[str, Any]) -> None:
    for w in body.get("warnings") or ():
        _say(f"warning: {w}")


def _row(h: dict[str, Any]) -> bytes:
    """One table row of _table."""
    row = (
        f"{_shown(h.get('received')):<27}  {_shown(h.get('host')):<15} "
        f"{_shown(h.get('program')):<12} {_severity(h.get('severity')):<8} "
        f"{_shown(h.get('message'))}\n"
    )
    return row.encode("utf-8", "surrogateescape")


def follow(c: Client, args: argparse.Namespace, out: IO[bytes]) -> int:
    """search --follow: the live tail's messages as rows (or NDJSON) as they arrive; skipped
    matches are said on stderr. Runs until interrupted (130) or the stream ends (1)."""
    if args.limit < 1:
        raise Usage("--limit: at least 1")
    if not args.json:
        _table([], out)  # the header
        out.flush()
    with c.tail(args.query, logspace=args.logspace, limit=args.limit) as t:
        for obj in t:
            if "id" in obj:
                out.write(_json_line(obj) if args.json else _row(obj))
                out.flush()
            elif isinstance(obj.get("skipped"), int):
                _say(f"{obj['skipped']} matches skipped (more than {args.limit} at once)")
    _say("the stream ended")
    return 1


def cmd_search(c: Client, args: argparse.Namespace, out: IO[bytes]) -> int:
    """search: one page (or every page with --all) as a table or NDJSON; --follow tails."""
    if args.follow:
        return follow(c, args, out)
    kw: dict[str, Any] = {
        "logspace": args.logspace,
        "from_": args.from_,
        "to": args.to,
        "time": args.time,
    }
    if args.all:
        hits: Iterator[dict[str, Any]] = c.iter_search(args.query, order=args.order, **kw)
        page = None
    else:
        page = c.search(args.query, limit=args.limit, order=args.order, cursor=args.cursor, **kw)
        hits = iter(page.get("hits") or [])
    if args.json:
        n = 0
        for h in hits:
            out.write(_json_line(h))
            n += 1
    else:
        n = _table(hits, out)
    out.flush()
    if page is None:
        _say(f"{n} matches")
        return 0
    _warnings(page)
    more = page.get("next_cursor")
    tail = f"; next page: --cursor {more}" if more is not None else ""
    _say(f"{n} of {page.get('total')} matches{tail}")
    return 0


def cmd_count(c: Client, args: argparse.Namespace, out: IO[bytes]) -> int:
    """count: the number of matches."""
    n = c.count(args.query, logspace=args.logspace, from_=args.from_, to=args.to, time=args.time)
    out.write(f"{n}\n".encode())
    return 0


def _progress(total: int | None, show: bool) -> tuple[Callable[[int], object] | None, Any]:
    """A tqdm bar on stderr (when show) and its update function."""
    if not show:
        return None, None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="msg", unit_scale=True, file=sys.stderr, desc="export")
    return bar.update, bar


def cmd_export(c: Client, args: argparse.Namespace, out: IO[bytes]) -> int:
    """export: the API's stream written as it is; rows checked against X-Logbox-Total."""
    exp: Export = c.export(
        args.query,
        logspace=args.logspace,
        from_=args.from_,
        to=args.to,
        time=args.time,
        order=args.order,
        format=args.format,
    )
    show = not args.no_progress and sys.stderr.isatty()
    update, bar = _progress(exp.total, show)
    target = open(args.output, "wb") if args.output else None  # noqa: SIM115
    failure: LogboxError | None = None
    try:
        try:
            exp.write_to(target or out, progress=update)
        except LogboxError as e:
            failure = e
        finally:
            if bar is not None:
                bar.close()
            (target or out).flush()
    finally:
        exp.close()
        if target is not None:
            target.close()
    where = f" in {args.output}" if args.output else ""
    got = f"{exp.rows} of {exp.total}" if exp.total is not None else f"{exp.rows}"
    if failure is not None:
        _say(f"{failure.code}: {failure.message}")
        _say(f"export ended early: {got} messages{where}")
        return 1
    for w in exp.warnings:
        _say(f"warning: {w}")
    if exp.warnings:
        _say(f"export incomplete (damaged store): {got} messages{where}")
        return 1
    if not exp.complete:
        _say(f"export ended early: {got} messages{where}")
        return 1
    return 0


def _bytes_h(n: Any) -> str:
    """A byte count for people (KiB, MiB, ...)."""
    if not isinstance(n, int | float):
        return "?"
    x = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if x < 1024 or unit == "TiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{n} B"


def status_text(s: dict[str, Any]) -> str:
    """The status answer as a few lines for people."""
    lines = [f"health: {s.get('health', '?')}  ({s.get('time', '')})"]
    for p in s.get("problems") or ():
        lines.append(f"  problem: {p}")
    services = []
    for name, svc in (s.get("services") or {}).items():
        svc = svc or {}
        extra = []
        if svc.get("pid") is not None:
            extra.append(f"pid {svc['pid']}")
        if isinstance(svc.get("uptime_s"), int | float):
            extra.append(f"up {svc['uptime_s']:.0f} s")
        if svc.get("holding"):
            extra.append(f"holding {svc['holding']}")
        if svc.get("disk_full"):
            extra.append(f"disk full, {svc.get('held_back_bytes')} bytes held back")
        services.append(
            f"{name} {svc.get('state', '?')}" + (f" ({', '.join(extra)})" if extra else "")
        )
    lines.append("services: " + ("; ".join(services) or "none"))
    eps = s.get("eps") or {}
    rates = ", ".join(f"{v:.1f}/s over {k}" for k, v in eps.items() if isinstance(v, int | float))
    lines.append(
        f"ingest: {rates or 'no rate'}; stored {s.get('stored', '?')}, "
        f"malformed {s.get('malformed', '?')}"
    )
    for ls in s.get("logspaces") or ():
        lines.append(
            f"logspace {ls.get('name')}: next id {ls.get('next_id')}, index lag "
            f"{ls.get('index_lag')}, last received {ls.get('last_received') or 'never'}, "
            f"{_bytes_h(ls.get('bytes'))}"
        )
    d = s.get("disk")
    if isinstance(d, dict):
        lines.append(
            f"disk{' ' + d['path'] if d.get('path') else ''}: {_bytes_h(d.get('used_bytes'))} used of "
            f"{_bytes_h(d.get('total_bytes'))}, {_bytes_h(d.get('free_bytes'))} free; store "
            f"{_bytes_h(d.get('store_bytes'))}"
        )
    r = s.get("raid")
    if isinstance(r, dict):
        prog = r.get("progress")
        pct = f", {prog * 100:.1f}%" if isinstance(prog, int | float) else ""
        lines.append(
            f"raid {r.get('device')} {r.get('level')}: {r.get('state')}, "
            f"{r.get('active')}/{r.get('disks')} disks active{pct}"
        )
    else:
        lines.append("raid: none")
    return "\n".join(lines) + "\n"


def cmd_status(c: Client, args: argparse.Namespace, out: IO[bytes]) -> int:
    """status: a summary, or the JSON answer."""
    s = c.status()
    out.write(_json_line(s) if args.json else status_text(s).encode("utf-8", "surrogateescape"))
    return 0


def cmd_logspaces(c: Client, args: argparse.Namespace, out: IO[bytes]) -> int:
    """logspaces: name and message count of each."""
    for ls in c.logspaces():
        out.write(
            f"{ls.get('name')}\t{ls.get('messages')} messages, ids from {ls.get('first_id')}, "
            f"next id {ls.get('next_id')}\n".encode()
        )
    return 0


def cmd_login(c: Client, args: argparse.Namespace, out: IO[bytes]) -> int:
    """login: the session token."""
    out.write(f"{c.token}\n".encode())
    return 0


COMMANDS = {
    "search": cmd_search,
    "count": cmd_count,
    "export": cmd_export,
    "status": cmd_status,
    "logspaces": cmd_logspaces,
    "login": cmd_login,
}


def _report(e: LogboxError, args: argparse.Namespace | None) -> None:
    """`logbox-remote: <code>: <message>`, and for bad_query the query with a caret."""
    _say(f"{e.code}: {e.message}")
    query = getattr(args, "query", None)
    if e.code == "bad_query" and e.position is not None and isinstance(query, str):
        raw = query.encode("utf-8", "surrogateescape")
        shown = _shown(query)
        col = len(_shown(raw[: e.position].decode("utf-8", "replace")))
        sys.stderr.write(f"  {shown}\n  {' ' * col}^\n")


def _glue_times(argv: list[str]) -> list[str]:
    """`--from -1h` as `--from=-1h`: argparse takes a value starting with "-" for an option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return out + argv[i:]
        if a in ("--from", "--to") and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    """Runs logbox-remote; returns the exit status."""
    parser = _parser()
    try:
        args = _settings(parser.parse_args(_glue_times(sys.argv[1:] if argv is None else argv)))
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else 2
    out = sys.stdout.buffer
    client: Client | None = None
    logout = False
    try:
        client, logout = _client(args)
        return COMMANDS[args.command](client, args, out)
    except Usage as e:
        _say(str(e))
        return 2
    except LogboxError as e:
        _report(e, args)
        return 1
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            # The reader went away (| head): stop quietly.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        _say(f"{e.filename or ''}{': ' if e.filename else ''}{e.strerror or e}")
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        if client is not None:
            if logout:
                try:
                    client.logout()
                except LogboxError:
                    pass
            client.close()


if __name__ == "__main__":
    sys.exit(main())
