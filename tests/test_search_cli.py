"""`logbox search` end to end (contract: indexer/cli/README.md): one store of seeded RFC 5424
messages with every edge case, imported with --received header so that receive times are the
messages' own, spread 20 s apart over 17 hours. Every answer is checked against the corpus
(brute force in Python) or against another answer the contract says must agree with it; the
same invocations through logbox-searchd must print the same bytes as in process."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from lbtest.cli import Logbox, Searcher, message_bytes, parse_bad_query, parse_summary
from lbtest.corpus import Expected, octet_frames, parse_5424, random_corpus
from lbtest.oracle import fold, words
from lbtest.searchd import Searchd, searchd_binary

BASE = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
BASE_US = int(BASE.timestamp()) * 1_000_000
STEP_US = 20_000_000
N = 3000
# Covers the whole corpus (epoch seconds).
ALL = {"from_": BASE_US // 1_000_000 - 3600, "to": BASE_US // 1_000_000 + 3 * 86400}


def rfc3339(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1e6, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def retimed(corpus: list[Expected]) -> list[Expected]:
    """The corpus with time stamps BASE + i * 20 s (+ a fraction), strictly increasing."""
    out = []
    for i, e in enumerate(corpus):
        pri, _, rest = e.raw.split(b" ", 2)
        when = BASE_US + i * STEP_US + (i * 7919) % 1_000_000
        out.append(parse_5424(pri + b" " + rfc3339(when).encode() + b" " + rest))
    return out


@pytest.fixture(scope="module")
def corpus() -> list[Expected]:
    return retimed(random_corpus(20261122, N))


@pytest.fixture(scope="module")
def lb(store_cli: Path, tmp_path_factory: pytest.TempPathFactory, corpus: list[Expected]) -> Logbox:
    lb = Logbox(store_cli, tmp_path_factory.mktemp("search") / "data")
    frames = octet_frames(e.raw for e in corpus)
    lb.check(lb.run("ingest", "--framing", "octet", "--received", "header", "-", input=frames))
    return lb


@pytest.fixture(scope="module")
def s(lb: Logbox) -> Searcher:
    """Search in process (--data)."""
    return Searcher(lb)


@pytest.fixture(scope="module")
def sd(lb: Logbox, top: Path, sockdir: Path) -> Iterator[Searcher]:
    """Search through a logbox-searchd on the same store (--socket)."""
    with Searchd(searchd_binary(top), lb.data, sockdir / "cli.sock") as d:
        yield Searcher(lb, d.sock)


def ids(hits: list[dict]) -> list[int]:
    return [h["id"] for h in hits]


def by_id(corpus: list[Expected], i: int) -> Expected:
    return corpus[i - 1]  # ids are 1, 2, 3, ... in input order


def floor_s(us: int) -> int:
    return us // 1_000_000 * 1_000_000


def ceil_s(us: int) -> int:
    return -(-us // 1_000_000) * 1_000_000


def oracle(corpus: list[Expected], token: bytes | None, lo: int, hi: int) -> list[int]:
    """Ids (ascending) received in [floor_s(lo), ceil_s(hi)) holding text term token (a token or
    a form of one; None: all)."""
    lo, hi = floor_s(lo), ceil_s(hi)
    return [
        i
        for i, e in enumerate(corpus, start=1)
        if lo <= e.timestamp_us < hi and (token is None or token in words(e.message))
    ]


@pytest.fixture(scope="module")
def tokens(corpus: list[Expected]) -> list[bytes]:
    """Text tokens of ordinary words found in 20..400 messages."""
    df: Counter[bytes] = Counter()
    for e in corpus:
        df.update(set(words(e.message)))
    good = [t for t, n in df.items() if 20 <= n <= 400 and re.fullmatch(rb"[a-z]{4,12}", t)]
    assert len(good) >= 4, "the corpus has too few mid-frequency words"
    return sorted(good)[:4]


# ---------------------------------------------------------------- hits, counts, order, paging


def test_star_finds_every_message_with_its_bytes(s: Searcher, corpus: list[Expected]) -> None:
    pg = s.page("*", limit=10000, order="oldest", **ALL)
    assert pg.total == N
    assert ids(pg.hits) == list(range(1, N + 1))
    assert pg.next_cursor is None
    for h in pg.hits:
        e = by_id(corpus, h["id"])
        assert h["received_us"] == e.timestamp_us
        assert message_bytes(h["message"]) == e.message
        assert h["host"] == (e.host or "")


def test_count_equals_json_lines_and_brute_force(
    s: Searcher, corpus: list[Expected], tokens: list[bytes]
) -> None:
    for tok in tokens:
        q = tok.decode()
        want = oracle(corpus, tok, ALL["from_"] * 10**6, ALL["to"] * 10**6)
        pg = s.page(q, limit=10000, **ALL)
        assert s.count(q, **ALL) == len(pg.hits) == pg.total == len(want), q
        assert sorted(ids(pg.hits)) == want, q
    for q in ("host:web*", "severity<=err", "NOT program:sshd", f"{tokens[0].decode()} OR *"):
        pg = s.page(q, limit=10000, **ALL)
        assert s.count(q, **ALL) == len(pg.hits) == pg.total, q


def test_oldest_is_newest_reversed(s: Searcher, tokens: list[bytes]) -> None:
    for q in ("*", tokens[1].decode(), "facility:local0 OR severity:info"):
        newest = ids(s.page(q, limit=10000, **ALL).hits)
        oldest = ids(s.page(q, limit=10000, order="oldest", **ALL).hits)
        assert newest == sorted(newest, reverse=True)
        assert oldest == newest[::-1]


@pytest.mark.parametrize("order", ["newest", "oldest"])
def test_paging_yields_every_match_once(s: Searcher, tokens: list[bytes], order: str) -> None:
    for q in ("*", tokens[2].decode()):
        full = ids(s.page(q, limit=10000, order=order, **ALL).hits)
        got: list[int] = []
        cursor = None
        pages = 0
        while True:
            pg = s.page(q, limit=97, order=order, cursor=cursor, **ALL)
            assert pg.total == len(full)
            assert len(pg.hits) <= 97
            got += ids(pg.hits)
            pages += 1
            if pg.next_cursor is None:
                break
            assert pg.next_cursor == got[-1]
            cursor = pg.next_cursor
        assert got == full, q
        assert len(set(got)) == len(got)
        assert pages == max(1, -(-len(full) // 97))


def test_human_lines(s: Searcher, corpus: list[Expected]) -> None:
    p = s.check("*", limit=50, **ALL)
    n, total, cursor = parse_summary(p.stderr)
    assert (n, total, cursor) == (50, N, N - 49)
    lines = p.stdout.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 51
    for i, line in zip(range(N, N - 50, -1), lines, strict=False):
        e = by_id(corpus, i)
        head = f"{rfc3339(e.timestamp_us)} {e.host or '-'} {e.program or '-'}"
        head += f"[{e.pid}]: " if e.pid else ": "
        assert line.startswith(head.encode()), (line, head)
        assert b"\x00" not in line and b"\n" not in line


# ---------------------------------------------------------------- histogram, top


@pytest.mark.parametrize("buckets", [1, 7, 100, 10000])
def test_histogram_sums_to_count(s: Searcher, tokens: list[bytes], buckets: int) -> None:
    for q in ("*", tokens[3].decode()):
        rows = s.histogram(q, buckets, **ALL)
        total = s.count(q, **ALL)
        assert sum(r["count"] for r in rows) == total
        assert 1 <= len(rows) <= buckets
        froms = [r["from_us"] for r in rows]
        assert froms[0] == ALL["from_"] * 10**6
        steps = {b - a for a, b in zip(froms, froms[1:], strict=False)}
        assert len(steps) <= 1 and all(st % 1_000_000 == 0 and st > 0 for st in steps)
        assert all(r["from"] == rfc3339(r["from_us"]) for r in rows)
        human = s.check(q, histogram=buckets, **ALL).stdout.decode().splitlines()
        assert human == [f"{r['from']} {r['count']}" for r in rows]


def test_histogram_buckets_hold_their_messages(s: Searcher, corpus: list[Expected]) -> None:
    lo, hi = BASE_US, BASE_US + 3600 * 10**6
    rows = s.histogram("*", 12, from_=lo // 10**6, to=hi // 10**6)
    assert len(rows) == 12
    for r in rows:
        a, b = r["from_us"], r["from_us"] + 300 * 10**6
        assert r["count"] == sum(1 for e in corpus if a <= e.timestamp_us < b)


def test_top_host_counts_the_hits(s: Searcher, tokens: list[bytes]) -> None:
    for q in ("*", tokens[0].decode()):
        hits = s.page(q, limit=10000, **ALL).hits
        want = Counter(fold(h["host"].encode()) for h in hits if h["host"])
        got = s.top(q, "host", limit=1000, **ALL)
        assert dict(got) == dict(want)
        assert got == sorted(got, key=lambda vc: (-vc[1], vc[0]))
        assert s.top(q, "host", **ALL) == got[:10]
        assert s.top(q, "host", limit=2, **ALL) == got[:2]
        human = s.check(q, top="host", **ALL).stdout.decode().splitlines()
        assert human == [f"{c} {v.decode()}" for v, c in got[:10]]


def test_top_severity_and_facility_are_names(s: Searcher, corpus: list[Expected]) -> None:
    names = ["emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"]
    got = dict(s.top("*", "severity", **ALL))
    assert got == {names[k].encode(): v for k, v in Counter(e.severity for e in corpus).items()}
    facilities = [b"kern", b"user", b"mail", b"daemon", b"auth", b"syslog", b"lpr", b"news"]
    facilities += [b"uucp", b"cron", b"authpriv", b"ftp", b"ntp", b"security", b"console"]
    facilities += [b"solaris-cron"] + [b"local%d" % i for i in range(8)]
    got = dict(s.top("*", "facility", limit=30, **ALL))
    assert got == {facilities[k]: v for k, v in Counter(e.facility for e in corpus).items()}


def test_top_sd_field(s: Searcher, corpus: list[Expected]) -> None:
    got = dict(s.top("*", "meta@32473.app", **ALL))
    want = Counter(re.search(rb'app="(\w+)"', e.sd).group(1) for e in corpus if b"meta@" in e.sd)
    assert got == dict(want)


# ---------------------------------------------------------------- times


def test_rfc3339_ranges(s: Searcher, corpus: list[Expected]) -> None:
    lo = BASE_US + 1000 * STEP_US + 500_000  # rounded down to a second by the search
    hi = BASE_US + 1500 * STEP_US + 250_000  # rounded up
    want = oracle(corpus, None, lo, hi)
    assert len(want) == 501
    for a, b in (
        (rfc3339(lo), rfc3339(hi)),
        (
            dt.datetime.fromtimestamp(lo / 1e6, dt.timezone(dt.timedelta(hours=2))).isoformat(),
            dt.datetime.fromtimestamp(hi / 1e6, dt.timezone(-dt.timedelta(minutes=90))).isoformat(),
        ),
        (str(lo // 10**6), str(ceil_s(hi) // 10**6)),
    ):
        assert sorted(ids(s.all("*", from_=a, to=b))) == want, (a, b)
        assert s.count("*", from_=a, to=b) == len(want)
    half = s.count("*", from_="2026-11-20", to="2026-11-20T12:00:00Z")
    assert half == sum(1 for e in corpus if e.timestamp_us < BASE_US + 43200 * 10**6)


def test_relative_times_and_the_default_range(store_cli: Path, tmp_path: Path) -> None:
    lb = Logbox(store_cli, tmp_path / "data")
    lb.ingest(b"".join(b"<13>1 - h app - - - fresh %d\n" % i for i in range(25)))
    s = Searcher(lb)
    assert s.count("fresh") == 25  # default: the last 24 hours
    assert s.count("fresh", from_="-5m") == 25
    assert s.count("fresh", from_="-1d", to="now") == 25
    assert s.count("fresh", from_="-1w", to="-1h") == 0
    assert s.count("fresh", to="-2d") == 0
    assert s.count("fresh", from_="+1h", to="+2h") == 0
    assert len(s.page("fresh").hits) == 25


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "query",
    ["(a b", "a b)", "AND", "foo AND", "OR bar", "NOT", "", "  ", '"open', "x\\", "severity:loud"],
)
def test_bad_queries(s: Searcher, query: str) -> None:
    p = s.run(query, **ALL)
    assert p.returncode == 2, p.stderr
    pos, msg, shown, caret = parse_bad_query(p.stderr)
    assert 0 <= pos <= len(query)
    assert shown == query and caret == pos
    assert p.stdout == b""


def test_huge_query(s: Searcher) -> None:
    q = "word " * 20000  # 100 KB
    p = s.run(q, **ALL)
    assert p.returncode == 2, p.stderr
    pos, msg, shown, caret = parse_bad_query(p.stderr)
    assert len(shown) < 200  # a window of the query, not all of it
    assert p.stdout == b""


@pytest.mark.parametrize(
    "kw, what",
    [
        ({"top": "colour"}, "unknown field"),
        ({"top": "nodot@1"}, "unknown field"),
        ({"from_": "-1h", "to": "-2h"}, "inverted"),
        ({"from_": "yesterday"}, "not a time"),
        ({"to": "2026-13-45"}, "not a time"),
    ],
)
def test_bad_options(s: Searcher, kw: dict, what: str) -> None:
    p = s.run("error", **kw)
    assert p.returncode == 1
    assert p.stderr.startswith(b"logbox: ") and what in p.stderr.decode()
    assert p.stdout == b""


def test_usage_errors(s: Searcher, lb: Logbox) -> None:
    base = [str(lb.binary), "search"]
    for argv in (
        [*base, "--data", str(lb.data)],  # no query
        [*base, "x"],  # neither --data nor --socket
        [*base, "--data", str(lb.data), "--socket", "/nonexistent", "x"],
        [*base, "--data", str(lb.data), "--count", "--top", "host", "x"],
        [*base, "--data", str(lb.data), "--order", "sideways", "x"],
        [*base, "--data", str(lb.data), "--limit", "0", "x"],
        [*base, "--data", str(lb.data), "--limit", "10001", "x"],
        [*base, "--data", str(lb.data), "--histogram", "0", "x"],
    ):
        r = subprocess.run(argv, capture_output=True, timeout=60)
        assert r.returncode == 2, (argv, r.stderr)


def test_missing_logspace_and_searchd(lb: Logbox, tmp_path: Path) -> None:
    p = Searcher(Logbox(lb.binary, lb.data, "nosuch")).run("x")
    assert p.returncode == 1 and b"nosuch" in p.stderr
    p = Searcher(lb, tmp_path / "no.sock").run("x")
    assert p.returncode == 1 and b"searchd unavailable" in p.stderr


# ---------------------------------------------------------------- bytes


def test_nul_and_non_utf8_bytes_round_trip(s: Searcher, corpus: list[Expected]) -> None:
    cases = {
        "nul*": b"nul\x00byte token\x00\x00end \x00",
        "surrogate": b"\xff\xfe bad \xc3 lone \xc0\xaf overlong \xed\xa0\x80 surrogate tail\x80",
        '"high" bytes': b"high " + bytes(range(0x80, 0x100)) + b" bytes",
        "ansi controls": b"ansi \x1b[31mred\x1b[0m \x01\x02 controls",
    }
    for q, msg in cases.items():
        want = [i for i, e in enumerate(corpus, start=1) if e.message == msg]
        assert len(want) == 1
        pg = s.page(q, limit=10000, **ALL)
        mine = [h for h in pg.hits if h["id"] == want[0]]
        assert mine, (q, ids(pg.hits))
        assert message_bytes(mine[0]["message"]) == msg
        human = s.check(q, limit=10000, **ALL).stdout
        assert human.count(b"\n") == len(pg.hits)
        assert all(b < 0x80 and (b >= 0x20 or b == 0x0A) for b in human if b < 0x80)


# ---------------------------------------------------------------- through searchd


SAME = [
    ("*", {}),
    ("*", {"limit": 10000}),
    ("*", {"order": "oldest", "limit": 33}),
    ("*", {"cursor": 1500, "limit": 20}),
    ("*", {"json": True, "limit": 500}),
    ("*", {"json": True, "order": "oldest", "cursor": 77, "limit": 100}),
    ("nul* OR surrogate OR high", {"json": True}),
    ("nul* OR surrogate OR high", {}),
    ("host:web* AND NOT severity>=warning", {"json": True, "limit": 10000}),
    ("*", {"count": True}),
    ("connection:error", {"count": True}),
    ("*", {"histogram": 50}),
    ("*", {"histogram": 17, "json": True}),
    ("*", {"top": "host"}),
    ("*", {"top": "program", "json": True, "limit": 1000}),
    ("*", {"top": "severity"}),
    ("*", {"top": "message", "limit": 50}),
    ("*", {"top": "meta@32473.app", "json": True}),
    ("(unbalanced", {}),
    ("a AND", {"json": True}),
    ("word " * 20000, {}),
    ("*", {"top": "colour"}),
]


@pytest.mark.parametrize("query, kw", SAME, ids=[f"{i}" for i in range(len(SAME))])
def test_socket_prints_what_data_prints(s: Searcher, sd: Searcher, query: str, kw: dict) -> None:
    a = s.run(query, **ALL, **kw)
    b = sd.run(query, **ALL, **kw)
    assert (b.returncode, b.stdout, b.stderr) == (a.returncode, a.stdout, a.stderr)


def test_too_broad_through_searchd(
    lb: Logbox, top: Path, sockdir: Path, tokens: list[bytes]
) -> None:
    with Searchd(searchd_binary(top), lb.data, sockdir / "broad.sock", ["--max-terms", "3"]) as d:
        s = Searcher(lb, d.sock)
        p = s.run("*a*", **ALL)
        assert p.returncode == 1 and p.stderr.startswith(b"logbox: query too broad"), p.stderr
        assert p.stdout == b""
        assert s.count(tokens[0].decode(), **ALL) > 0  # one term: not too broad
