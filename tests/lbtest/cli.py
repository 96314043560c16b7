"""Thin wrappers around the `logbox` CLI verbs (contract: indexer/cli/README.md). Each returns parsed output and
raises CliError, which carries the command, exit code and stderr, when a verb fails where the
caller expected success. Nothing here knows the store's files."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The sanitizer builds report with exit codes no verb uses, so that "exit 1" always means logbox
# decided to fail. Leak checking stays on: an error path that leaks is a bug too.
SANITIZER_ENV = {
    "ASAN_OPTIONS": "exitcode=86:abort_on_error=0:detect_leaks=1",
    "UBSAN_OPTIONS": "exitcode=87:print_stacktrace=1:halt_on_error=1",
}
SANITIZER_MARKS = (
    "AddressSanitizer",
    "LeakSanitizer",
    "UndefinedBehaviorSanitizer",
    "runtime error:",
)

Arg = str | bytes | os.PathLike[str]


class CliError(AssertionError):
    """A logbox verb failed (or printed something unparsable) where success was expected."""

    def __init__(self, argv: Sequence[Arg], rc: int, stderr: str, what: str = "failed") -> None:
        self.argv = [os.fsdecode(a) for a in argv]
        self.rc = rc
        self.stderr = stderr
        shown = " ".join(a if len(a) < 80 else a[:77] + "..." for a in self.argv)
        super().__init__(f"`{shown}` {what} (exit {rc}):\n{stderr[-4000:]}")


def sanitizer_report(stderr: str) -> bool:
    """Whether stderr holds an ASan/UBSan/LSan report."""
    return any(mark in stderr for mark in SANITIZER_MARKS)


def has_verb(binary: Path, verb: str) -> bool:
    """Whether `binary` implements `verb`.

    A binary without the verb answers `logbox VERB --help` with exit 2 and a usage text that
    does not name the verb, and its `logbox --help` does not name it either. Anything else
    (help text, a usage naming the verb, even a crash) counts as "implemented", so that a
    broken verb fails its tests instead of skipping them.
    """
    for argv in ([str(binary), verb, "--help"], [str(binary), "--help"]):
        p = subprocess.run(argv, capture_output=True, timeout=30, env=_env(binary))
        out = (p.stdout + p.stderr).decode("utf-8", "replace")
        if re.search(rf"\b{re.escape(verb)}\b", out) or (len(argv) == 3 and p.returncode != 2):
            return True
    return False


def _env(binary: Path) -> dict[str, str]:
    return dict(os.environ, **SANITIZER_ENV)


def message_bytes(value: str | None, what: str = "message") -> bytes:
    """A cat string back to its bytes (indexer/cli/README.md: invalid UTF-8 bytes come as \\udcXX escapes)."""
    if value is None:
        return b""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as e:
        raise AssertionError(
            f"cat {what} holds {value[e.start : e.end]!r}, which is neither UTF-8 text "
            f"nor a \\udc80-\\udcff byte escape: {value[:120]!r}"
        ) from e


class Logbox:
    """One store (data directory + logspace) driven through one `logbox` binary."""

    def __init__(
        self, binary: Path, data: Path, logspace: str = "main", timeout: float = 300
    ) -> None:
        self.binary = Path(binary)
        self.data = Path(data)
        self.logspace = logspace
        self.timeout = timeout

    def argv(self, verb: str, *args: Arg) -> list[Arg]:
        """The command line of a verb on this store."""
        return [
            str(self.binary),
            verb,
            "--data",
            str(self.data),
            "--logspace",
            self.logspace,
            *args,
        ]

    def run(
        self, verb: str, *args: Arg, input: bytes | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Runs a verb; never raises on its exit code."""
        return subprocess.run(
            self.argv(verb, *args),
            input=input,
            capture_output=True,
            timeout=timeout or self.timeout,
            env=_env(self.binary),
        )

    def popen(self, verb: str, *args: Arg, **kw: Any) -> subprocess.Popen[bytes]:
        """Starts a verb; the caller owns the process."""
        return subprocess.Popen(self.argv(verb, *args), env=_env(self.binary), **kw)

    def check(self, p: subprocess.CompletedProcess[bytes]) -> subprocess.CompletedProcess[bytes]:
        """Raises CliError unless p exited 0 without a sanitizer report."""
        err = p.stderr.decode("utf-8", "replace")
        if p.returncode != 0 or sanitizer_report(err):
            raise CliError(p.args, p.returncode, err)
        return p

    def ingest(
        self,
        source: bytes | Path,
        framing: str = "line",
        sync: str | None = None,
        batch: int | None = None,
        ack: bool = False,
    ) -> subprocess.CompletedProcess[bytes]:
        """Ingests bytes (through stdin) or a file; raises CliError unless it succeeds."""
        args: list[Arg] = ["--framing", framing]
        if sync:
            args += ["--sync", sync]
        if batch:
            args += ["--batch", str(batch)]
        if ack:
            args.append("--ack")
        if isinstance(source, bytes):
            return self.check(self.run("ingest", *args, "-", input=source))
        return self.check(self.run("ingest", *args, str(source)))

    def cat(self, from_id: int | None = None, to_id: int | None = None) -> list[dict[str, Any]]:
        """Every message (or those in [from_id, to_id]) as cat's JSON objects, in id order."""
        return parse_cat(self.check(self.run("cat", *_range(from_id, to_id))))

    def lookup(
        self, term: str | bytes, prefix: bool = False, field: str | None = None
    ) -> list[int]:
        """Ids of the messages holding term; raises CliError unless lookup succeeds."""
        return parse_ids(self.check(self.run("lookup", *lookup_args(term, prefix, field))))

    def verify(self) -> tuple[int, str]:
        """(exit code, stderr) of verify."""
        p = self.run("verify")
        return p.returncode, p.stderr.decode("utf-8", "replace")

    def stats(self) -> dict[str, Any]:
        """`stats --json` as a dict."""
        p = self.check(self.run("stats", "--json"))
        try:
            return json.loads(p.stdout)
        except ValueError as e:
            raise CliError(
                p.args, p.returncode, p.stdout.decode(errors="replace"), "printed bad JSON"
            ) from e


def _range(from_id: int | None, to_id: int | None) -> list[Arg]:
    args: list[Arg] = []
    if from_id is not None:
        args += ["--from-id", str(from_id)]
    if to_id is not None:
        args += ["--to-id", str(to_id)]
    return args


def lookup_args(term: str | bytes, prefix: bool = False, field: str | None = None) -> list[Arg]:
    """The arguments of `lookup` after the store options."""
    args: list[Arg] = []
    if prefix:
        args.append("--prefix")
    if field:
        args += ["--field", field]
    if isinstance(term, bytes) and b"\x00" in term:
        raise ValueError("a command-line argument cannot hold a NUL byte")
    args.append(term)
    return args


def parse_cat(p: subprocess.CompletedProcess[bytes]) -> list[dict[str, Any]]:
    """cat's NDJSON output as a list of objects.

    :raises CliError: if the output is not UTF-8 NDJSON (indexer/cli/README.md: bytes outside UTF-8 are
        escaped, so the output itself is always valid UTF-8).
    """
    out = []
    for n, line in enumerate(p.stdout.splitlines(), start=1):
        try:
            out.append(json.loads(line.decode("utf-8")))
        except ValueError as e:
            raise CliError(
                p.args, p.returncode, f"cat line {n}: {e}: {line[:200]!r}", "printed bad NDJSON"
            ) from e
    return out


def parse_ids(p: subprocess.CompletedProcess[bytes]) -> list[int]:
    """lookup's output (one id a line) as ints."""
    try:
        return [int(x) for x in p.stdout.split()]
    except ValueError as e:
        raise CliError(
            p.args, p.returncode, p.stdout[:400].decode(errors="replace"), "printed a non-id"
        ) from e


_SUMMARY = re.compile(r"ingested (\d+) messages \(ids (\d+)-(\d+)\)")


def ingest_summary(stderr: bytes | str) -> tuple[int, int, int]:
    """(count, first id, last id) from ingest's final "logbox: ingested N messages (ids A-B)
    in ..." line.

    :raises AssertionError: if stderr has no such line.
    """
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    found = _SUMMARY.findall(text)
    assert found, f"ingest printed no 'ingested N messages (ids A-B)' summary:\n{text[-2000:]}"
    n, a, b = found[-1]
    return int(n), int(a), int(b)


# ---------------------------------------------------------------- search (indexer/cli/README.md)

_SEARCH_SUMMARY = re.compile(r"^(\d+) of (\d+) matches(?:; next page: --cursor (\d+))?$", re.M)
_BAD_QUERY = re.compile(r"^logbox: bad query at (\d+): (.+)\n  (.*)\n  ( *)\^$", re.M)


@dataclass
class SearchPage:
    """One page of `search --json`: the hits as objects, the raw lines, the summary."""

    hits: list[dict[str, Any]]
    lines: list[bytes]
    total: int
    next_cursor: int | None


def search_args(
    *,
    from_: str | int | None = None,
    to: str | int | None = None,
    limit: int | None = None,
    order: str | None = None,
    cursor: int | None = None,
    count: bool = False,
    histogram: int | None = None,
    top: str | None = None,
    json: bool = False,
) -> list[Arg]:
    """The options of `search` (before the query)."""
    args: list[Arg] = []
    for name, value in (
        ("--from", from_),
        ("--to", to),
        ("--limit", limit),
        ("--order", order),
        ("--cursor", cursor),
        ("--histogram", histogram),
        ("--top", top),
    ):
        if value is not None:
            args += [name, str(value)]
    if count:
        args.append("--count")
    if json:
        args.append("--json")
    return args


def parse_summary(stderr: bytes | str) -> tuple[int, int, int | None]:
    """(hits printed, total, next cursor or None) from search's "N of TOTAL matches" line.

    :raises AssertionError: if stderr has no such line.
    """
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    found = _SEARCH_SUMMARY.findall(text)
    assert found, f"search printed no 'N of TOTAL matches' summary:\n{text[-2000:]}"
    n, total, cursor = found[-1]
    return int(n), int(total), int(cursor) if cursor else None


def parse_bad_query(stderr: bytes | str) -> tuple[int, str, str, int]:
    """(position, message, the query line shown, caret column in that line) of a bad query.

    :raises AssertionError: if stderr does not report a bad query in the documented shape.
    """
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    m = _BAD_QUERY.search(text)
    assert m, f"no 'logbox: bad query at <pos>: <message>' with a caret:\n{text[-2000:]}"
    return int(m.group(1)), m.group(2), m.group(3), len(m.group(4))


class Searcher:
    """`logbox search` on one logspace, either in process (--data) or through a searchd
    (--socket). Every method takes search_args() keywords."""

    def __init__(self, lb: Logbox, socket: Path | None = None) -> None:
        self.lb = lb
        self.socket = socket

    def argv(self, query: str | bytes, **kw: Any) -> list[Arg]:
        where: list[Arg] = (
            ["--socket", str(self.socket)] if self.socket else ["--data", str(self.lb.data)]
        )
        return [
            str(self.lb.binary),
            "search",
            *where,
            "--logspace",
            self.lb.logspace,
            *search_args(**kw),
            "--",
            query,
        ]

    def run(self, query: str | bytes, **kw: Any) -> subprocess.CompletedProcess[bytes]:
        """Runs a search; never raises on its exit code."""
        return subprocess.run(
            self.argv(query, **kw),
            capture_output=True,
            timeout=self.lb.timeout,
            env=_env(self.lb.binary),
        )

    def check(self, query: str | bytes, **kw: Any) -> subprocess.CompletedProcess[bytes]:
        """Runs a search; raises CliError unless it succeeds."""
        return self.lb.check(self.run(query, **kw))

    def page(self, query: str | bytes, **kw: Any) -> SearchPage:
        """One page of hits (--json)."""
        p = self.check(query, json=True, **kw)
        hits = parse_cat(p)
        n, total, cursor = parse_summary(p.stderr)
        if n != len(hits):
            raise CliError(p.args, p.returncode, p.stderr.decode(), f"said {n} hits, printed")
        return SearchPage(hits, p.stdout.splitlines(), total, cursor)

    def all(self, query: str | bytes, limit: int = 1000, **kw: Any) -> list[dict[str, Any]]:
        """Every hit, page after page through the cursors."""
        hits: list[dict[str, Any]] = []
        cursor = None
        while True:
            pg = self.page(query, limit=limit, cursor=cursor, **kw)
            hits += pg.hits
            if pg.next_cursor is None:
                return hits
            cursor = pg.next_cursor

    def count(self, query: str | bytes, **kw: Any) -> int:
        """--count."""
        p = self.check(query, count=True, **kw)
        try:
            return int(p.stdout)
        except ValueError as e:
            raise CliError(p.args, p.returncode, repr(p.stdout[:200]), "printed no count") from e

    def histogram(self, query: str | bytes, buckets: int, **kw: Any) -> list[dict[str, Any]]:
        """--histogram N --json: [{"from", "from_us", "count"}]."""
        return parse_cat(self.check(query, histogram=buckets, json=True, **kw))

    def top(self, query: str | bytes, field: str, **kw: Any) -> list[tuple[bytes, int]]:
        """--top FIELD --json: [(value bytes, count)]."""
        rows = parse_cat(self.check(query, top=field, json=True, **kw))
        return [(message_bytes(r["value"], "top value"), r["count"]) for r in rows]
