# Scenario: `logbox search` answers exactly what the plain Python oracle (lbtest/query.py, written
# from SEARCH.md) answers. A store is built with `ingest --received header` from loghub lines and
# seeded hostile RFC 5424 messages (structured data, odd hosts/programs/pids, bytes outside
# UTF-8, punctuation, long tokens, the SSB examples), re-stamped so that receive times spread
# over five days, sorted by time; the last few hundred messages are acked and the ingest killed
# so they stay unindexed (the brute-force tail). The stored truth is read back with `cat`. Then
# thousands of seeded random queries (existing and missing terms, prefixes, leading and inner
# wildcards, `?`, phrases quoted and delimiter-joined, every field incl. SD names, severity
# ranges, facility names and numbers, AND/OR/NOT nesting, juxtaposition, `*`) with random time
# ranges, orders, limits and cursors are run through the CLI and compared with the oracle: ids,
# total, next cursor, count, histogram buckets, top values; refused queries must be refused
# at the same byte offset. The SSB examples of the issue are checked by name.
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from lbtest import query, querygen
from lbtest.cli import Logbox, has_verb, parse_cat
from lbtest.query import Corpus, QueryError

SEED = 20261122
N_QUERIES = int(os.environ.get("LOGBOX_SEARCH_QUERIES", "2500"))
LOGHUB_PER_SYSTEM = 400
N_HOSTILE = 2500
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


def _ingest_argv() -> list[str]:
    return ["--framing", "octet", "--received", "header"]


def _ingest(lb: Logbox, raws: Sequence[bytes]) -> None:
    lb.check(lb.run("ingest", *_ingest_argv(), "-", input=querygen.corpus.octet_frames(raws)))


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
    body, tail = raws[:-N_TAIL], raws[-N_TAIL:]
    half = len(body) // 2
    _ingest(lb, body[:half])
    _ingest(lb, body[half:])
    _ingest(lb, noheader[:5])  # raises the receive time to now: the tail follows at now
    tail = [*noheader[5:], *tail]
    tail = tail[: len(tail) // TAIL_BATCH * TAIL_BATCH]
    n_before = half + (len(body) - half) + 5
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


def run_search(lb: Logbox, text: bytes, frm: int, to: int, *opts: str) -> Answer:
    """Runs `logbox search --json` with opts and parses what it printed."""
    argv = ["--json", "--from", querygen.time_arg(frm), "--to", querygen.time_arg(to), *opts]
    p = lb.run("search", *argv, "--", text)
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
        return ["--top", rng.choice(fields), "--limit", str(rng.choice([1, 3, 10, 50]))]
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


def compare(stored: Stored, cases: Sequence[Case], expected: Sequence[Answer]) -> list[str]:
    """Runs the cases through the CLI (in parallel); the differences."""

    def one(i: int) -> str | None:
        case = cases[i]
        got = run_search(stored.lb, case.text, case.frm, case.to, *case.opts)
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
    hits = sum(1 for e in expected if e.ids or e.count or e.total)
    assert refused < len(cases) // 5, f"{refused} of {len(cases)} generated queries are refused"
    assert hits > len(cases) // 3, f"only {hits} of {len(cases)} queries find anything"
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
