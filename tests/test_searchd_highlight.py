# Scenario: searchd's highlighting (GET /v1/search?highlight=1, /v1/messages/<id>?q=) agrees
# with the evaluator. A store of seeded hostile messages (punctuation, long tokens, bytes outside
# UTF-8, NUL and escape bytes, structured data) is searched through a real logbox-searchd with
# generated queries (lbtest/querygen.py); for every hit the spans must be exactly the tokens
# and forms of tokens (a stripped token, a part of a compound token: its own bytes) that the
# plain Python oracle (lbtest/query.py, lbtest/oracle.py) says a positive text term of the
# query matches (a word, a wildcard, message:, a phrase only where it matches in place; never
# under NOT, never field or SD terms), so every span lies inside a token, and every hit
# that matches only thanks to a positive text term has at least one span. Hand-picked cases
# pin wildcards, phrases, case, escapes, non-UTF-8 bytes, and /v1/logspaces' delimiters.
from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lbtest import oracle, query, querygen
from lbtest.cli import Logbox, parse_cat, sanitizer_report
from lbtest.query import QueryError
from lbtest.searchd import Searchd, searchd_binary

SEED = 20261126
N_MESSAGES = 1200
N_QUERIES = 600
START_US = 1_794_268_800_000_000  # 2026-11-10T00:00:00Z
WHOLE = {"from": str(START_US // 1_000_000 - 86400), "to": str(START_US // 1_000_000 + 3 * 86400)}
HAND = [
    b"Failed password for ROOT from 10.0.0.1:22",
    b"user=bob usr=x USER",
    b"Error Connection refused; Connection Error occurred",
    "caf\udcc3 \x00nul \x1b[31m ok \udcff".encode("utf-8", "surrogateescape"),
    b"x a:b a\\:b star*glob",
    b"X" * 300 + b" tail",
    b"upstream connection refused. user non-existent-user from bob@example.com is down.",
]


@dataclass
class Store:
    sd: Searchd
    msgs: dict[int, query.Msg]
    vocab: querygen.Vocab


@pytest.fixture(scope="module")
def store(store_cli: Path, top: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    rng = random.Random(SEED)
    raws = querygen.hostile_messages(rng, N_MESSAGES)
    raws += [b"<13>1 TS hand app - - - " + m for m in HAND]
    times = querygen.receive_times(rng, len(raws), START_US, 1)
    raws = [querygen.stamp(r, t) for r, t in zip(raws, times, strict=True)]
    tmp = tmp_path_factory.mktemp("hl")
    data = tmp / "data"
    data.mkdir()
    lb = Logbox(store_cli, data)
    frames = querygen.corpus.octet_frames(raws)
    lb.check(lb.run("ingest", "--framing", "octet", "--received", "header", "-", input=frames))
    msgs = [query.Msg.from_json(r) for r in parse_cat(lb.check(lb.run("cat")))]
    sd = Searchd(searchd_binary(top), data, tmp / "s.sock", ["--threads", "2"]).start()
    try:
        yield Store(sd, {m.id: m for m in msgs}, querygen.Vocab.of(query.Corpus(msgs)))
    finally:
        sd.stop()
    # with LOGBOX_SEARCHD_BIN set to a sanitizer build: nothing to report
    assert not sanitizer_report(sd.log()), sd.log()[-3000:]


def token_runs(msg: bytes) -> list[tuple[int, int]]:
    """(start, end) of every run of token bytes, as the oracle tokenizer cuts the message."""
    runs, i, table = [], 0, oracle.DEFAULT_TABLE
    while i < len(msg):
        if msg[i] in table:
            i += 1
            continue
        s = i
        while i < len(msg) and msg[i] not in table:
            i += 1
        runs.append((s, i))
    return runs


def want_spans(q: query.Node, msg: bytes) -> list[tuple[int, int]]:
    """The oracle's spans: the runs whose token a positive text term matches and the bytes of
    each form of a token it matches (oracle.forms: stripped token, parts), and where a positive
    text phrase matches in place what each of its words matched; overlapping marks are one
    span."""
    runs = token_runs(msg)
    toks = oracle.tokenize(msg)
    # Per token: (bytes, flags, span) of the token, then of each of its forms.
    groups = [
        [(t, query.WHOLE, r)]
        + [
            (f, fl | oracle.TERM_FORM, (r[0] + at, r[0] + at + len(f)))
            for f, at, fl in oracle.forms(t)
        ]
        for t, r in zip(toks, runs, strict=True)
    ]
    marked: set[tuple[int, int]] = set()

    def walk(n: query.Node, neg: bool) -> None:
        if isinstance(n, query.Term) and n.ns == query.NS_TEXT and not neg:
            for g in groups:
                marked.update(sp for t, _, sp in g if query.glob_match(n.pat, t))
        elif isinstance(n, query.Phrase) and n.ns == query.NS_TEXT and not neg:
            k = len(n.pats)
            for i in range(len(groups) - k + 1):
                hit = []
                for j in range(k):
                    need = query.phrase_need(j, k)
                    sp = next(
                        (
                            sp
                            for t, fl, sp in groups[i + j]
                            if fl & need == need and query.glob_match(n.pats[j], t)
                        ),
                        None,
                    )
                    if sp is None:
                        break
                    hit.append(sp)
                else:
                    marked.update(hit)
        elif isinstance(n, query.And | query.Or):
            for kid in n.kids:
                walk(kid, neg)
        elif isinstance(n, query.Not):
            walk(n.kid, not neg)

    walk(q, False)
    out: list[tuple[int, int]] = []
    for a, b in sorted(marked, key=lambda x: (x[0], -x[1])):
        if out and a < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def without_text(n: query.Node, neg: bool = False) -> query.Node:
    """n with its positive text terms and phrases made to match nothing."""
    if isinstance(n, query.Term | query.Phrase) and n.ns == query.NS_TEXT and not neg:
        return query.Or(())
    if isinstance(n, query.And | query.Or):
        return type(n)(tuple(without_text(k, neg) for k in n.kids))
    if isinstance(n, query.Not):
        return query.Not(without_text(n.kid, not neg))
    return n


def search(s: Store, text: bytes, **extra: Any) -> dict[str, Any]:
    r = s.sd.get("/v1/search", {"q": text, **WHOLE, "limit": "10000", "highlight": "1", **extra})
    assert r.status == 200, (text, r.status, r.body[:300])
    return r.json


def spans_of(hit: dict[str, Any]) -> list[tuple[int, int]]:
    return [(a, b) for a, b in hit["spans"]]


def check_hits(s: Store, text: bytes, hits: list[dict[str, Any]]) -> list[str]:
    """The differences between searchd's spans and the oracle's for each hit."""
    q = query.parse(text)
    bare = without_text(q)
    problems = []
    for h in hits:
        m = s.msgs[h["id"]]
        assert h["message"].encode("utf-8", "surrogateescape") == m.message
        got, want = spans_of(h), want_spans(q, m.message)
        runs = token_runs(m.message)
        if not all(any(a <= x and y <= b for a, b in runs) for x, y in got):
            problems.append(f"{text!r} id {m.id}: spans {got} are not inside tokens")
        if got != want:
            problems.append(f"{text!r} id {m.id}: spans {got}, oracle {want}")
        terms = query.msg_terms(m)
        if query.matches(q, terms) and not query.matches(bare, terms) and not got:
            problems.append(f"{text!r} id {m.id}: matches by its text but has no span")
    return problems


def test_generated_queries_highlight_what_the_oracle_matches(store: Store) -> None:
    gen = querygen.QueryGen(random.Random(SEED + 1), store.vocab)
    problems: list[str] = []
    asked = with_spans = 0
    for _ in range(N_QUERIES):
        text = gen.query()
        try:
            query.parse(text)
        except QueryError:
            continue
        hits = search(store, text)["hits"]
        asked += 1
        with_spans += sum(1 for h in hits if h["spans"])
        problems += check_hits(store, text, hits)
    assert asked > N_QUERIES // 2 and with_spans > N_QUERIES, (asked, with_spans)
    assert not problems, f"{len(problems)} differences:\n  " + "\n  ".join(problems[:20])


def marked(s: Store, text: bytes, msg: bytes) -> list[bytes]:
    """The marked bytes of the hand message msg for query text."""
    hits = [h for h in search(s, text)["hits"] if s.msgs[h["id"]].message == msg]
    assert len(hits) == 1, (text, msg)
    assert not check_hits(s, text, hits)
    return [msg[a:b] for a, b in spans_of(hits[0])]


def test_hand_picked_cases(store: Store) -> None:
    s = store
    assert marked(s, b'fail* "for root"', HAND[0]) == [b"Failed", b"for", b"ROOT"]
    assert marked(s, b"u?er AND host:hand", HAND[1]) == [b"user", b"USER"]
    assert marked(s, b"Connection:Error", HAND[2]) == [b"Connection", b"Error"]
    assert marked(s, b"refused NOT (NOT occurred) NOT hand", HAND[2]) == [b"refused", b"occurred"]
    assert marked(s, b"ok", HAND[3]) == [b"ok"]  # NUL is a token byte: the token is "\x00nul"
    assert marked(s, b"caf\xc3 OR \xff", HAND[3]) == [b"caf\xc3", b"\xff"]
    assert marked(s, b"star\\*glob OR star", HAND[4]) == [b"star"]
    assert marked(s, b"x AND host:hand AND program:app", HAND[4]) == [b"x"]
    assert marked(s, b"X" * 255 + b" tail", HAND[5]) == [b"X" * 300, b"tail"]
    # A part or a stripped token marks its own bytes inside the token.
    assert marked(s, b"refused existent example down", HAND[6]) == [
        b"refused",
        b"existent",
        b"example",
        b"down",
    ]
    assert marked(s, b'"connection refused" "from bob"', HAND[6]) == [
        b"connection",
        b"refused",
        b"from",
        b"bob",
    ]
    assert marked(s, b"bob@example.com OR com", HAND[6]) == [b"bob@example.com"]
    # Without highlight=1 hits carry no spans.
    r = s.sd.get("/v1/search", {"q": b"tail", **WHOLE})
    assert r.status == 200 and "spans" not in r.json["hits"][0]


def test_message_with_q_has_spans(store: Store) -> None:
    s = store
    (mid,) = (i for i, m in s.msgs.items() if m.message == HAND[0])
    r = s.sd.get(f"/v1/messages/{mid}", {"q": b"password OR NOT root"})
    assert r.status == 200 and r.json["spans"] == [[7, 15]], r.body[:300]
    r = s.sd.get(f"/v1/messages/{mid}")
    assert r.status == 200 and "spans" not in r.json
    r = s.sd.get(f"/v1/messages/{mid}", {"q": b"(x"})
    assert r.status == 400 and r.error()["code"] == "bad_query"


def test_logspaces_have_their_delimiters(store: Store) -> None:
    r = store.sd.get("/v1/logspaces")
    assert r.status == 200
    (ls,) = r.json["logspaces"]
    assert ls["name"] == "main" and ls["delimiters"] == oracle.DEFAULT_DELIMS.decode()
    assert ls["messages"] == len(store.msgs)
