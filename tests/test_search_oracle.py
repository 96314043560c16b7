# Scenario: `logbox search` answers exactly what the plain Python oracle (lbtest/query.py, written
# from QUERY.md) answers. A store is built with `ingest --received header` from loghub lines and
# seeded hostile RFC 5424 messages (structured data, odd hosts/programs/pids, bytes outside
# UTF-8, punctuation, long tokens, the SSB examples), re-stamped so that receive times spread
# over five days, sorted by time; the last few hundred messages are acked and the ingest killed
# so they stay unindexed (the brute-force tail). The stored truth is read back with `cat`. Then
# thousands of seeded random queries (existing and missing terms, prefixes, leading and inner
# wildcards, `?`, phrases quoted and delimiter-joined, every field incl. SD names, severity
# ranges, facility names and numbers, AND/OR/NOT nesting, juxtaposition, `*`) with random time
# ranges, orders, limits and cursors are run through the CLI and compared with the oracle: ids,
# total, next cursor, count, histogram buckets, top values; refused queries must be refused
# at the same byte offset. The SSB examples of the issue are checked by name. Through
# logbox-searchd (when built): the canonical query it echoes is the oracle's and parses back to
# the same tree, `search --socket` answers alike, and --max-terms refuses broad wildcards.
from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lbtest import query, querygen
from lbtest.cli import SANITIZER_ENV, Logbox, has_verb, parse_cat
from lbtest.query import Corpus, QueryError

SEED = int(os.environ.get("LOGBOX_SEARCH_SEED", "20261122"))
N_QUERIES = int(os.environ.get("LOGBOX_SEARCH_QUERIES", "2500"))
LOGHUB_PER_SYSTEM = int(os.environ.get("LOGBOX_SEARCH_LOGHUB", "400"))
N_HOSTILE = int(os.environ.get("LOGBOX_SEARCH_HOSTILE", "2500"))
N_INGESTS = 6  # invocations for the part received at its own time stamps (five days)
N_TODAY = 1500  # then received now ...
N_TODAY_INGESTS = 20  # ... in this many invocations: segments of one day, merged 8 at a time
N_TAIL = 400  # acked, then the ingest is killed: never indexed
TAIL_BATCH = 50
START_US = 1_794_268_800_000_000  # 2026-11-10T00:00:00Z
DAYS = 5
WORKERS = 3

pytestmark = pytest.mark.slow


@dataclass
class Stored:
    lb: Logbox
    corpus: Corpus
    lo_us: int  # first and last receive time
    hi_us: int
    tail_killed: bool


def _ingest_argv(received: str = "header") -> list[str]:
    return ["--framing", "octet", "--received", received]


def _ingest(lb: Logbox, raws: Sequence[bytes], received: str = "header") -> None:
    frames = querygen.corpus.octet_frames(raws)
    lb.check(lb.run("ingest", *_ingest_argv(received), "-", input=frames))


def _ingest_and_kill(lb: Logbox, raws: Sequence[bytes], last_id: int) -> bool:
    """Feeds raws to an ingest with --ack, waits for the ack of last_id and kills it (so the
    messages are durable but not indexed). Returns whether the kill happened; if the ack never
    comes, lets the ingest end normally."""
    p = lb.popen(
        "ingest",
        *_ingest_argv(),
        "--ack",
        "--sync",
        "batch",
        "--batch",
        str(TAIL_BATCH),
        "--flush-ms",
        "3600000",
        "-",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert p.stdin is not None and p.stdout is not None
    acked = threading.Event()

    def read_acks() -> None:
        assert p.stdout is not None
        for line in p.stdout:
            parts = line.split()
            if parts[:1] == [b"ack"] and int(parts[1]) >= last_id:
                acked.set()

    t = threading.Thread(target=read_acks, daemon=True)
    t.start()
    p.stdin.write(querygen.corpus.octet_frames(raws))
    p.stdin.flush()
    killed = acked.wait(20)
    if killed:
        p.send_signal(signal.SIGKILL)
    else:
        p.stdin.close()
    p.wait(60)
    t.join(10)
    return killed


@pytest.fixture(scope="module")
def search_cli(store_cli: Path) -> Path:
    if not has_verb(store_cli, "search"):
        pytest.fail(f"{store_cli} has no `search` verb")
    return store_cli


@pytest.fixture(scope="module")
def stored(search_cli: Path, tmp_path_factory: pytest.TempPathFactory) -> Stored:
    rng = random.Random(SEED)
    try:
        raws = querygen.loghub_messages(LOGHUB_PER_SYSTEM)
    except FileNotFoundError as e:
        pytest.fail(f"the loghub samples must be there: {e}")
    raws += querygen.hostile_messages(rng, N_HOSTILE)
    rng.shuffle(raws)
    times = querygen.receive_times(rng, len(raws), START_US, DAYS)
    raws = [querygen.stamp(r, t) for r, t in zip(raws, times, strict=True)]
    # lines without a header (no time stamp: received "now", after everything else)
    noheader = [b"plain line %d without a header Connection:Error" % i for i in range(10)]
    data = tmp_path_factory.mktemp("search") / "data"
    data.mkdir()
    lb = Logbox(search_cli, data)
    body, today, tail = raws[: -N_TODAY - N_TAIL], raws[-N_TODAY - N_TAIL : -N_TAIL], raws[-N_TAIL:]
    step = -(-len(body) // N_INGESTS)
    for k in range(0, len(body), step):
        _ingest(lb, body[k : k + step])
    # received now, in many small ingests: today's day holds several segments, not merged yet
    _ingest(lb, noheader[:5])
    step = -(-len(today) // N_TODAY_INGESTS)
    for k in range(0, len(today), step):
        _ingest(lb, today[k : k + step], received="now")
    tail = [*noheader[5:], *tail]
    tail = tail[: len(tail) // TAIL_BATCH * TAIL_BATCH]
    n_before = len(body) + 5 + len(today)
    killed = _ingest_and_kill(lb, tail, n_before + len(tail))
    recs = parse_cat(lb.check(lb.run("cat")))
    assert len(recs) == n_before + len(tail), f"cat gave {len(recs)} messages"
    msgs = [query.Msg.from_json(r) for r in recs]
    received = [m.received_us for m in msgs]
    assert received == sorted(received), "receive times go backwards"
    return Stored(lb, Corpus(msgs), received[0], received[-1], killed)


# ---------------------------------------------------------------- driving the CLI


@dataclass
class Answer:
    """What one `logbox search` run said."""

    refused: tuple[int, str] | None = None  # (pos, message) of "bad query"
    ids: list[int] = field(default_factory=list)
    total: int | None = None
    next_cursor: int = 0
    count: int | None = None
    hist: list[tuple[int, int]] = field(default_factory=list)
    top: list[tuple[bytes, int]] = field(default_factory=list)


_BAD = re.compile(rb"logbox: bad query at (\d+): ([^\n]*)")
_SUMMARY = re.compile(rb"(\d+) of (\d+) matches(?:; next page: --cursor (\d+))?")


def run_search(
    lb: Logbox, text: bytes, frm: int, to: int, *opts: str, sock: Path | None = None
) -> Answer:
    """Runs `logbox search --json` with opts (in process, or through searchd at sock) and
    parses what it printed."""
    argv = ["--json", "--from", querygen.time_arg(frm), "--to", querygen.time_arg(to), *opts]
    if sock is None:
        p = lb.run("search", *argv, "--", text)
    else:
        full = [str(lb.binary), "search", "--socket", str(sock), *argv, "--", text]
        env = dict(os.environ, **SANITIZER_ENV)
        p = subprocess.run(full, capture_output=True, timeout=lb.timeout, env=env)
    if p.returncode == 2 and (m := _BAD.search(p.stderr)):
        return Answer(refused=(int(m.group(1)), m.group(2).decode("utf-8", "replace")))
    lb.check(p)
    lines = [json.loads(ln) for ln in p.stdout.decode("utf-8").splitlines()]
    a = Answer()
    if "--count" in opts:
        a.count = int(p.stdout)
    elif "--histogram" in opts:
        a.hist = [(o["from_us"], o["count"]) for o in lines]
    elif "--top" in opts:
        a.top = [(o["value"].encode("utf-8", "surrogateescape"), o["count"]) for o in lines]
    else:
        a.ids = [o["id"] for o in lines]
        m = _SUMMARY.search(p.stderr)
        assert m, f"no 'N of TOTAL matches' on stderr: {p.stderr[-300:]!r}"
        a.total = int(m.group(2))
        a.next_cursor = int(m.group(3) or 0)
    return a


# ---------------------------------------------------------------- the oracle's answers


@dataclass
class Case:
    text: bytes
    frm: int
    to: int
    opts: list[str]

    def show(self) -> str:
        return (
            f"query {self.text!r} from {querygen.time_arg(self.frm)} "
            f"to {querygen.time_arg(self.to)} {' '.join(self.opts)}"
        )


TOP_FIELDS = {
    "host": query.NS_HOST,
    "program": query.NS_PROGRAM,
    "pid": query.NS_PID,
    "msgid": query.NS_MSGID,
    "peer": query.NS_PEER,
    "facility": query.NS_FACILITY,
    "severity": query.NS_SEVERITY,
    "message": query.NS_TEXT,
}


def _value_name(ns: int, v: bytes) -> bytes:
    if ns == query.NS_FACILITY:
        return query.FACILITIES[v[0]].encode()
    if ns == query.NS_SEVERITY:
        return query.SEVERITIES[v[0]].encode()
    return v


def expect(c: Corpus, case: Case) -> Answer:
    """The oracle's answer to a case."""
    try:
        q = query.parse(case.text)
    except QueryError as e:
        return Answer(refused=(e.pos, e.msg))
    sel = c.eval(q) & c.in_range(case.frm, case.to)
    ids = [c.msgs[i].id for i in query.bits(sel)]
    opts = case.opts
    if "--count" in opts:
        return Answer(count=len(ids))
    if "--histogram" in opts:
        n = int(opts[opts.index("--histogram") + 1])
        rec = [c.msgs[i].received_us for i in query.bits(sel)]
        lo, step, counts = query.histogram(rec, case.frm, case.to, n)
        return Answer(hist=[(lo + k * step, x) for k, x in enumerate(counts)])
    if "--top" in opts:
        f = opts[opts.index("--top") + 1]
        k = int(opts[opts.index("--limit") + 1])
        ns = TOP_FIELDS.get(f, query.NS_SD)
        sdname = f.encode() if ns == query.NS_SD else None
        return Answer(
            top=[(_value_name(ns, v), n) for v, n in query.corpus_top(c, sel, ns, k, sdname)]
        )
    limit = int(opts[opts.index("--limit") + 1])
    order = opts[opts.index("--order") + 1]
    cursor = int(opts[opts.index("--cursor") + 1]) if "--cursor" in opts else 0
    r = query.page(ids, order, limit, cursor)
    return Answer(ids=r.ids, total=r.total, next_cursor=r.next_cursor)


def cross_check(c: Corpus, text: bytes, rng: random.Random, n: int = 20) -> str | None:
    """The oracle's fast evaluation agrees with its brute-force definition on n messages."""
    try:
        q = query.parse(text)
    except QueryError:
        return None
    got = c.eval(q)
    for i in rng.sample(range(len(c.msgs)), min(n, len(c.msgs))):
        if bool(got >> i & 1) != query.matches(q, c.terms[i]):
            return f"oracle self-check: {text!r} on id {c.msgs[i].id}"
    return None


def _opts_for(rng: random.Random, k: int, c: Corpus, fields: list[str]) -> list[str]:
    if k % 5 == 1:
        return ["--count"]
    if k % 5 == 2:
        return ["--histogram", str(rng.choice([1, 2, 7, 24, 100, 10000]))]
    if k % 5 == 3:
        return ["--top", rng.choice(fields), "--limit", str(rng.choice([1, 3, 10, 50, 1000]))]
    opts = ["--limit", str(rng.choice([1, 5, 20, 100, 10000])), "--order"]
    opts.append(rng.choice(["newest", "oldest"]))
    if rng.random() < 0.3:
        opts += ["--cursor", str(rng.choice(c.msgs).id)]
    return opts


def _diff(case: Case, want: Answer, got: Answer) -> str | None:
    if want.refused or got.refused:
        if (want.refused is None) != (got.refused is None):
            return f"{case.show()}: oracle {want.refused or 'accepts'}, logbox {got.refused or 'accepts'}"
        assert want.refused and got.refused
        if want.refused[0] != got.refused[0]:
            return f"{case.show()}: refused at {got.refused}, oracle at {want.refused}"
        return None
    if want == got:
        return None
    if want.ids != got.ids:
        miss = sorted(set(want.ids) - set(got.ids))[:8]
        extra = sorted(set(got.ids) - set(want.ids))[:8]
        return (
            f"{case.show()}: ids differ: got {len(got.ids)} {got.ids[:6]}, want {len(want.ids)} "
            f"{want.ids[:6]}; missing {miss}, extra {extra}"
        )
    for what in ("total", "next_cursor", "count"):
        if getattr(want, what) != getattr(got, what):
            return f"{case.show()}: {what} {getattr(got, what)}, want {getattr(want, what)}"
    if want.hist != got.hist:
        return f"{case.show()}: histogram {got.hist[:6]} ({len(got.hist)} buckets), want {want.hist[:6]} ({len(want.hist)})"
    return f"{case.show()}: top {got.top[:6]}, want {want.top[:6]}"


def compare(
    stored: Stored,
    cases: Sequence[Case],
    expected: Sequence[Answer],
    sock: Path | None = None,
) -> list[str]:
    """Runs the cases through the CLI (in parallel); the differences."""

    def one(i: int) -> str | None:
        case = cases[i]
        got = run_search(stored.lb, case.text, case.frm, case.to, *case.opts, sock=sock)
        return _diff(case, expected[i], got)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return [d for d in pool.map(one, range(len(cases))) if d]


def _fail_if(problems: Sequence[str], what: str, limit: int = 20) -> None:
    if problems:
        out = Path(os.environ.get("LOGBOX_SEARCH_DIFFS", "/tmp/search_oracle_diffs.txt"))
        out.write_text("\n".join(problems) + "\n")
        shown = "\n  ".join(problems[:limit])
        more = (
            f"\n  ... and {len(problems) - limit} more (all in {out})"
            if len(problems) > limit
            else ""
        )
        pytest.fail(f"{len(problems)} {what}:\n  {shown}{more}", pytrace=False)


# ---------------------------------------------------------------- tests


def test_store_holds_what_the_generators_made(stored: Stored) -> None:
    c = stored.corpus
    assert stored.hi_us - stored.lo_us > 3 * querygen.DAY_US
    ssb = {m.message for m in c.msgs} & set(querygen.SSB_MESSAGES)
    assert ssb == set(querygen.SSB_MESSAGES)
    assert any(m.sd for m in c.msgs) and any(b"\xff" in m.message for m in c.msgs)
    assert stored.tail_killed, "the ingest of the tail was never acked: no unindexed tail"
    stats = stored.lb.stats()
    print(f"store: {stats}")
    assert stats["segments"] > 2 * stats["days"], f"few segments: {stats}"


def _whole(stored: Stored) -> tuple[int, int]:
    return stored.lo_us - querygen.DAY_US, stored.hi_us + querygen.DAY_US


def test_ssb_examples(stored: Stored) -> None:
    c = stored.corpus
    frm, to = _whole(stored)

    def ids_of(text: str) -> set[bytes]:
        return {m.message for m in c.matching(query.parse(text), frm, to)}

    # the oracle itself: what the examples must find
    assert b"user username logged in" in ids_of("username")
    assert b"usermame is a typo of username" in ids_of("user?ame")
    assert b"systemd-logind started a session" in ids_of("system*")
    assert b"mytool and systool ran" in ids_of("*tool")
    assert b"user closed the session" not in ids_of("user AND NOT close*")
    assert b"user opened the session" in ids_of("user AND NOT close*")
    servers = ids_of("server1 OR server32 OR server50 OR server3")
    assert {
        b"server1 is down",
        b"server32 is up",
        b"server50 answers",
        b"server3 is slow",
    } <= servers
    assert not {b"server33 must not match", b"server5 must not match either"} & servers
    both = ids_of("Connection Error")
    assert b"Error:Connection reset by peer" in both and b"Error Connection refused" in both
    phrase = ids_of("Connection:Error")
    assert b"Connection Error occurred on eth0" in phrase
    assert b"Error Connection refused" not in phrase
    assert phrase == ids_of('"connection error"')
    # and logbox agrees with it
    cases = []
    for text in querygen.SSB_QUERIES:
        for opts in (
            ["--limit", "10000", "--order", "oldest"],
            ["--count"],
            ["--top", "host", "--limit", "20"],
        ):
            cases.append(Case(text.encode(), frm, to, opts))
    _fail_if(compare(stored, cases, [expect(c, k) for k in cases]), "SSB example answers differ")


def _random_cases(stored: Stored, n: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    c = stored.corpus
    gen = querygen.QueryGen(rng, querygen.Vocab.of(c))
    fields = [*TOP_FIELDS, *sorted(n.decode() for n in gen.v.sd)[:6]]
    out = []
    for k in range(n):
        frm, to = querygen.time_range(rng, stored.lo_us, stored.hi_us, c.msgs)
        out.append(Case(gen.query(), frm, to, _opts_for(rng, k, c, fields)))
    return out


def test_random_queries_match_oracle(stored: Stored) -> None:
    t0 = time.monotonic()
    cases = _random_cases(stored, N_QUERIES, SEED)
    rng = random.Random(SEED + 1)
    expected = [expect(stored.corpus, k) for k in cases]
    selfcheck = [cross_check(stored.corpus, k.text, rng) for k in cases[: N_QUERIES // 4]]
    assert not [s for s in selfcheck if s], [s for s in selfcheck if s][:5]
    refused = sum(1 for e in expected if e.refused)
    hits = sum(1 for e in expected if e.ids or e.count or e.total or e.top or any(e.hist))
    assert refused < len(cases) // 5, f"{refused} of {len(cases)} generated queries are refused"
    assert hits > len(cases) // 4, f"only {hits} of {len(cases)} queries find anything"
    t1 = time.monotonic()
    problems = compare(stored, cases, expected)
    print(f"{len(cases)} queries: oracle {t1 - t0:.1f} s, logbox {time.monotonic() - t1:.1f} s")
    _fail_if(problems, f"of {len(cases)} random queries differ from the oracle")


BAD_QUERIES = [
    b"",
    b"(user",
    b"user)",
    b"user AND",
    b"user OR OR x",
    b"NOT",
    b"a (b OR) c",
    b'"unterminated',
    b"trailing\\",
    b"severity:loud",
    b"severity<emerg",
    b"severity>debug",
    b"facility:24",
    b"facility:nosuch",
    b"host:",
    b'Foo:bar host: "9*766*',  # the field error (byte 8) comes before the lexing error
    b"meta.seq:",
    b"::: ///",
    b'""',
    b"()",
    b"x AND OR y",
]


def test_bad_queries_are_refused_at_the_same_place(stored: Stored) -> None:
    frm, to = _whole(stored)
    cases = [Case(t, frm, to, ["--count"]) for t in BAD_QUERIES]
    expected = [expect(stored.corpus, k) for k in cases]
    for case, e in zip(cases, expected, strict=True):
        assert e.refused, f"the oracle accepts {case.text!r}"
    _fail_if(compare(stored, cases, expected), "bad queries handled differently")


def test_query_limits_alike(stored: Stored) -> None:
    frm, to = _whole(stored)
    cases = [Case(t, frm, to, ["--count"]) for t in LIMIT_QUERIES]
    expected = [expect(stored.corpus, k) for k in cases]
    want = [False, True] * 3 + [False, False, True, False, True, False, False, False, True]
    assert [bool(e.refused) for e in expected] == want
    _fail_if(compare(stored, cases, expected), "queries at the limits handled differently")
    _fail_if(compare(stored, cases, expected), "bad queries handled differently")


def test_paging_with_cursor_visits_every_match_once(stored: Stored) -> None:
    frm, to = _whole(stored)
    for text, order in [
        (b"user OR error", "newest"),
        (b"*", "oldest"),
        (b"severity<=err", "newest"),
    ]:
        want = expect(stored.corpus, Case(text, frm, to, ["--count"])).count
        seen: list[int] = []
        cursor = 0
        while True:
            opts = ["--limit", "997", "--order", order] + (
                ["--cursor", str(cursor)] if cursor else []
            )
            a = run_search(stored.lb, text, frm, to, *opts)
            seen += a.ids
            if not a.next_cursor:
                break
            cursor = a.next_cursor
        assert len(seen) == want and len(set(seen)) == want, (text, len(seen), want)
        assert seen == sorted(seen, reverse=order == "newest"), text


# Hand-picked queries at the corners of QUERY.md §1 that random generation rarely hits.
EDGE_QUERIES = [
    b"X" * 300,  # cut at 255 like the message's token
    b"x" * 255,
    b"y" * 300 + b"*",
    b'"*"',
    b'"a*"',
    b"message:*",
    b"message:Connection:Error",
    b"*:*",
    b"Connection\\:Error",  # escaped: one token with a ':' in it, nothing has it
    b"star\\*glob",
    b"star*glob",
    b'"star glob"',
    b"q?mark",
    b"q\\?mark",
    b"\\AND",
    b"and OR or OR not",
    b"host:star\\*host",
    b"host:star*host",
    b"host:q\\?host",
    b"host:back\\\\slash",
    b"host:paren\\(host\\)",
    b"HOST:WEB-0?",
    b"host:" + b"h" * 255,
    b"host:" + b"h" * 256,
    b"host:" + b"h" * 300,
    b"host:*",
    b"NOT host:*",
    b"program:app:worker",
    b"program:postfix/smtpd",
    b"program:POSTFIX*",
    b"pid:007",
    b"pid:7",
    b"pid:\\[9\\]",
    b"msgid:AND",
    b"msgid:x:y",
    b"facility:solaris-cron",
    b"facility:0 OR facility:23",
    b"severity:panic OR severity:warn",
    b"severity<=0",
    b"severity>=7",
    b"severity>alert NOT severity>=info",
    b"ex@32473.dup:q",
    b'ex@32473.dup:"q r"',  # two params of one name are consecutive terms
    b'ex@32473.dup:"s t"',  # and the next element's param is another name
    b"ex@32473.quote:b",
    b'ex@32473.quote:"c\\\\d"',
    b"ex@32473.quote:*e",
    b"ex@32473.utf8:caf\xc3\xa9",
    b"ex@32473.utf8:CAF\xc3\xa9",
    b"Mixed@1.Key:value",
    b"Mixed@1.key:value",
    b"mixed@1.Key:value",
    b"long@2.v:" + b"l" * 300,
    b"long@2.v:l*",
    b"timeQuality.tzKnown:1",
    b"timequality.tzKnown:1",
    b"bad@1.x:1",
    b"meta.sequenceId:1*",
    b"origin.ip:10.0.*",
    b"caf\xc3\xa9",
    b"\xff\xfe",
    b"na\xefve",
    b"*\xa9",
    b"tab\\\there",
    b'"tab here"',
    b"user_id",
    b"user",
    b"user*",
    b"*user*",
    b"u*r",
    b"??",
    b"?",
    b"-dash",
    b"--opt",
    b"NOT NOT user",
    b"NOT (user OR error) AND *",
    b"(((user)))",
    b"user (error OR connection) NOT closed",
    b"/var/log/syslog",
    b'"var log"',
    b'"log var"',
    b"plain",
    b"line 5",
    b'"header connection error"',
    b"header:Connection",
    b"caf?",
    b"caf??",
    b"ex@32473.du:*",
    b"ex@32473.d:*",
    b"ex@32473.d*:x",
    b"nul*",
    b"*byte",
    b"severity:ERR",
    b"SEVERITY<=Warning",
    b"severity:03",
    b'severity<"err"',
    b'facility:"kern"',
    b'host:"web-01"x',
    b'"a"b',
    b"ho\\st:x",
    b"meta\\.x:y",
    b"@.x:y",
    b"x@y.:z",
    b"origin.:z",
    b"origin.ip.x:1",
    b"host:a\\ b",
    b"host:a=b",
    b"\x01x",
    b'"a\x1bb c"',
    b"host:*\\**",
    b"MESSAGE:x",
    b'program:"app:worker"',
    b"(a OR b) (c OR d)",
    b"NOT (NOT a)",
    # leading wildcards: '*lit' and '*lit*' may take a fast path, the rest the glob matcher
    b"*TOOL",
    b"*tool*",
    b"**tool",
    b"*tool**",
    b"*r\\*glob",
    b"*\\*glob*",
    b"*?ool",
    b"*too?",
    b"*t?ol*",
    b"*\xc3\xa9",
    b"*\xa9*",
    b"*ver3",
    b"*ver3*",
    b"*ion OR *ror",
    b"NOT *e*",
    b"host:*01",
    b"host:*-0*",
    b"host:*\\*host",
    b"program:*D",
    b"ex@32473.utf8:*\xa9*",
    b"ex@32473.dup:*s",
    b'"*tion *ror"',
    b"*tion:*ror",
]

# The limits of QUERY.md §1: nesting, nodes and bytes, each side of the line.
LIMIT_QUERIES = [
    b"(" * 64 + b"user" + b")" * 64,
    b"(" * 65 + b"user" + b")" * 65,
    b"NOT " * 64 + b"user",
    b"NOT " * 65 + b"user",
    b"(NOT " * 32 + b"user" + b")" * 32,
    b"(NOT " * 33 + b"user" + b")" * 33,
    b" ".join([b"user"] * 3000),
    b" ".join([b"u"] * 4095),
    b" ".join([b"u"] * 4096),
    b" ".join([b"NOT u"] * 2047),
    b" ".join([b"NOT u"] * 2048),
    b" OR ".join([b"user error"] * 1000),
    b":".join([b"user"] * 3000),
    b"user " + b"x" * 16379,
    b"user " + b"x" * 16380,
]


def test_edge_queries_match_oracle(stored: Stored) -> None:
    frm, to = _whole(stored)
    rng = random.Random(SEED + 2)
    cases = []
    for text in EDGE_QUERIES:
        cases.append(Case(text, frm, to, ["--limit", "10000", "--order", "oldest"]))
        cases.append(
            Case(
                text,
                *querygen.time_range(rng, stored.lo_us, stored.hi_us, stored.corpus.msgs),
                ["--count"],
            )
        )
        cases.append(Case(text, frm, to, ["--top", "message", "--limit", "5"]))
    expected = [expect(stored.corpus, k) for k in cases]
    for case in cases:
        assert cross_check(stored.corpus, case.text, rng, 200) is None
    _fail_if(compare(stored, cases, expected), "edge queries differ from the oracle")


# ---------------------------------------------------------------- canonical form via searchd


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=30)
        self.path = str(path)

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.path)
        self.sock = s


@contextlib.contextmanager
def _searchd(stored: Stored, where: Path, *extra: str) -> Iterator[Path]:
    """A logbox-searchd on the store, listening at where/s.sock, stopped afterwards."""
    binary = stored.lb.binary.parent / "logbox-searchd"
    if not binary.is_file():
        pytest.skip(f"{binary} is not built: the canonical form is not exposed")
    sock, log = where / "s.sock", where / "searchd.log"
    argv = [str(binary), "--data", str(stored.lb.data), "--socket", str(sock), "--allow-root"]
    with open(log, "wb") as err:
        p = subprocess.Popen([*argv, *extra], stdout=subprocess.DEVNULL, stderr=err)
    try:
        for _ in range(200):
            if sock.exists() or p.poll() is not None:
                break
            time.sleep(0.05)
        assert sock.exists(), f"searchd did not start: {log.read_text(errors='replace')}"
        yield sock
    finally:
        p.terminate()
        p.wait(10)


@pytest.fixture(scope="module")
def searchd(stored: Stored, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with _searchd(stored, tmp_path_factory.mktemp("searchd")) as sock:
        yield sock


def searchd_get(
    sock: Path, what: str, text: bytes, frm: int, to: int, **params: str
) -> tuple[int, dict[str, Any]]:
    """GET /v1/<what>: (status, JSON body)."""
    args = [("q", text), ("from", querygen.time_arg(frm).encode())]
    args += [("to", querygen.time_arg(to).encode())]
    args += [(k, v.encode()) for k, v in params.items()]
    qs = "&".join(f"{k}={urllib.parse.quote_from_bytes(v)}" for k, v in args)
    conn = _UnixHTTP(sock)
    try:
        conn.request("GET", f"/v1/{what}?{qs}")
        r = conn.getresponse()
        return r.status, json.loads(r.read().decode("utf-8"))
    finally:
        conn.close()


def searchd_count(sock: Path, text: bytes, frm: int, to: int) -> tuple[int, dict[str, Any]]:
    """GET /v1/count: (status, JSON body)."""
    return searchd_get(sock, "count", text, frm, to)


def test_canonical_form_round_trips(stored: Stored, searchd: Path) -> None:
    """searchd echoes lb_query_fmt's canonical query: it must be the oracle's canonical text,
    parse back to the same tree, and count the same matches."""
    frm, to = _whole(stored)
    # argv cannot carry a NUL byte, a URL can
    texts = [*EDGE_QUERIES, b"nul\x00byte", b"NUL\x00*", b'"nul\x00byte"', b"\x00", b"a\\\x00b"]
    texts += [c.text for c in _random_cases(stored, 600, SEED + 3)]
    texts += [q.encode() for q in querygen.SSB_QUERIES]

    def one(text: bytes) -> str | None:
        try:
            q = query.parse(text)
        except QueryError as e:
            status, body = searchd_count(searchd, text, frm, to)
            pos = body.get("error", {}).get("position")
            if status != 400 or pos != e.pos:
                return f"{text!r}: searchd {status} {body}, oracle refuses at {e.pos}"
            return None
        want = query.fmt(q)
        status, body = searchd_count(searchd, text, frm, to)
        if status != 200:
            return f"{text!r}: searchd {status} {body}, oracle accepts it as {want!r}"
        canon = body["query"].encode("utf-8", "surrogateescape")
        problems = []
        if canon != want:
            problems.append(f"canonical {canon!r}, oracle {want!r}")
        try:
            if query.parse(canon) != q:
                problems.append(f"canonical {canon!r} parses to {query.parse(canon)}, not {q}")
        except QueryError as e:
            problems.append(f"canonical {canon!r} does not parse: {e}")
        n = len(stored.corpus.matching(q, frm, to))
        if body.get("total") != n:
            problems.append(f"total {body.get('total')}, oracle {n}")
        return f"{text!r}: " + "; ".join(problems) if problems else None

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        problems = [p for p in pool.map(one, texts) if p]
    _fail_if(problems, "canonical forms differ")
    status, body = searchd_count(searchd, b"*", frm, to)
    assert (
        status == 200 and body.get("tail", 0) >= N_TAIL // 2
    ), f"the killed ingest's messages should be searched unindexed: {body}"


def _mutate(rng: random.Random, text: bytes) -> bytes:
    """text with a few bytes of the query syntax inserted, deleted or swapped in."""
    b = bytearray(text)
    for _ in range(rng.randint(1, 3)):
        i = rng.randint(0, len(b))
        r = rng.random()
        if r < 0.5:
            b[i:i] = rng.choice([b"(", b")", b'"', b"\\", b" AND ", b" OR ", b"NOT ", b":", b"*"])
        elif r < 0.8 and i < len(b):
            del b[i]
        else:
            b[i:i] = rng.choice([b" severity<", b" host:", b" facility:", b" ", b"\t", b"?"])
    out = bytes(b)
    return out if not out.endswith(b"\\") or rng.random() < 0.5 else out + b"x"


def test_mutated_queries_refused_or_answered_alike(stored: Stored) -> None:
    rng = random.Random(SEED + 4)
    cases = _random_cases(stored, N_QUERIES // 3, SEED + 5)
    for c in cases:
        c.text = _mutate(rng, c.text)
        c.opts = ["--count"]
    expected = [expect(stored.corpus, k) for k in cases]
    refused = sum(1 for e in expected if e.refused)
    assert len(cases) // 10 < refused < len(cases) * 9 // 10, refused
    _fail_if(compare(stored, cases, expected), "mutated queries handled differently")


def test_random_queries_through_searchd_match_oracle(stored: Stored, searchd: Path) -> None:
    """`logbox search --socket` (searchd's /v1 answers) agrees with the oracle too."""
    cases = _random_cases(stored, N_QUERIES // 8, SEED + 6)
    expected = [expect(stored.corpus, k) for k in cases]
    _fail_if(compare(stored, cases, expected, searchd), "answers through searchd differ")


MAX_TERMS = 200


def test_wildcards_past_max_terms_are_too_broad(stored: Stored, tmp_path: Path) -> None:
    """searchd --max-terms: a wildcard matching far more distinct terms than the limit is
    refused (422 too_broad); one matching far fewer is answered exactly."""
    c = stored.corpus
    frm, to = _whole(stored)
    narrow, broad = [], []
    for pat in [b"s*", b"*e*", b"?*", b"1*", b"*0", b"server*", b"user*", b"a?", b"zz*", b"ka*"]:
        n = sum(1 for t in c.vocab[query.NS_TEXT] if query.glob_match(pat, t))
        if n > 5 * MAX_TERMS:
            broad.append(pat)
        elif n <= MAX_TERMS // 20:
            narrow.append(pat)
    hosts = sum(1 for t in c.vocab[query.NS_HOST] if query.glob_match(b"*", t))
    (broad if hosts > 5 * MAX_TERMS else narrow).append(b"host:*")
    assert len(broad) >= 2 and len(narrow) >= 2, (broad, narrow)
    with _searchd(stored, tmp_path, "--max-terms", str(MAX_TERMS)) as sock:
        for pat in broad:
            status, body = searchd_count(sock, pat, frm, to)
            assert status == 422 and body["error"]["code"] == "too_broad", (pat, status, body)
        for pat in narrow:
            status, body = searchd_count(sock, pat, frm, to)
            want = len(c.matching(query.parse(pat), frm, to))
            assert status == 200 and body["total"] == want, (pat, status, body, want)


HITS_ALONE = [b"*", b"NOT user", b"NOT *e*", b"* NOT severity:info", b"NOT (user OR error)"]


def test_hits_alone_through_searchd_match_oracle(stored: Stored, searchd: Path) -> None:
    """GET /v1/search with total=0 (hits alone: lb_eval may stop early, e.g. for ALL and NOT)
    gives the oracle's page and next cursor."""
    rng = random.Random(SEED + 7)
    c = stored.corpus
    cases = [k for k in _random_cases(stored, N_QUERIES // 4, SEED + 8) if "--order" in k.opts]
    for _ in range(150):
        frm, to = querygen.time_range(rng, stored.lo_us, stored.hi_us, c.msgs)
        opts = ["--limit", str(rng.choice([1, 7, 100, 1000])), "--order"]
        opts.append(rng.choice(["newest", "oldest"]))
        if rng.random() < 0.4:
            opts += ["--cursor", str(rng.choice(c.msgs).id)]
        cases.append(Case(rng.choice(HITS_ALONE), frm, to, opts))

    def one(case: Case) -> str | None:
        want = expect(c, case)
        o = dict(zip(case.opts[::2], case.opts[1::2], strict=True))
        params = {"limit": o["--limit"], "order": o["--order"], "total": "0"}
        if "--cursor" in o:
            params["cursor"] = o["--cursor"]
        status, body = searchd_get(searchd, "search", case.text, case.frm, case.to, **params)
        if want.refused:
            return None if status == 400 else f"{case.show()}: {status} {body}, oracle refuses"
        if status != 200:
            return f"{case.show()} total=0: {status} {body}"
        ids = [h["id"] for h in body["hits"]]
        nxt = int(body["next_cursor"] or 0)
        if ids != want.ids or nxt != want.next_cursor:
            return (
                f"{case.show()} total=0: ids {ids[:6]} ({len(ids)}) next {nxt}, "
                f"want {want.ids[:6]} ({len(want.ids)}) next {want.next_cursor}"
            )
        return None

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        problems = [p for p in pool.map(one, cases) if p]
    _fail_if(problems, "hits-alone answers through searchd differ")
