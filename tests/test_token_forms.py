# Scenario: a word finds a token before punctuation and a word inside a compound token
# (DESIGN.md "Tokens", FORMAT.md §6, QUERY.md §1). The Python copy of the rule
# (lbtest/oracle.py forms()) is pinned to the C owner (lb_token_forms in lb_tokenize.c): the
# hand-made cases of t_tokenize.c, then the text terms and document frequencies of a segment
# `logbox ingest` wrote for thousands of random punctuated tokens, read back with `logbox dump`.
# A store written before the rule (tests/fixtures/store-seg2.tar.gz: made by logbox at
# d457f62, segment version 2, no forms indexed) is searched as it is, and then after `logbox
# reindex` (version 3), and both answer what the oracle answers under the new rule.
from __future__ import annotations

import random
import re
import tarfile
from collections import Counter
from pathlib import Path

import pytest
from lbtest import query, querygen
from lbtest.cli import Logbox, Searcher
from lbtest.oracle import forms, words
from lbtest.query import Corpus, Msg

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "store-seg2.tar.gz"
FIXTURE_FROM, FIXTURE_TO = "2025-11-14T00:00:00Z", "2025-11-16T00:00:00Z"
FIXTURE_FROM_US, FIXTURE_TO_US = 1_763_078_400_000_000, 1_763_251_200_000_000

# The cases of t_tokenize.c t_forms: token -> "form@at/flags ..."
HAND = {
    b"refused": "",
    b"refused.": "refused@0/3",
    b'"quoted"': "quoted@1/3",
    b"(error)": "error@1/3",
    b"...": "",
    b"non-existent-user": "non@0/1 existent@4/0 user@13/2",
    b"bob@example.com": "bob@0/1 example@4/0 com@12/2",
    b"10.0.0.1": "",
    b"2015-10-18": "",
    b"2015-10-18.": "2015-10-18@0/3",
    b"404.": "404@0/3",
    b"pid-1234": "pid@0/1",
    b"v2.3": "v2@0/1",
    b"user_id": "user@0/1 id@5/2",
    b"a+b": "a@0/1 b@2/2",
    b"x//y": "x@0/1 y@3/2",
    b"(upstream).": "upstream@1/3",
    b"foo.(bar)": "foo.(bar@0/3 foo@0/1 bar@5/2",
    b"-a-a-": "a-a@1/3 a@1/1 a@3/2",
    b"appattempt_1445144423722_0020_000001": "appattempt@0/1",
    "café-au-lait".encode(): "café@0/1 au@6/0 lait@9/2",
    b"a:b": "",
    b"key=value,": "key=value@0/3",
}


def _fmt(tok: bytes) -> str:
    return " ".join(f"{f.decode()}@{at}/{fl}" for f, at, fl in forms(tok))


def test_forms_by_hand() -> None:
    for tok, want in HAND.items():
        assert _fmt(tok) == want, tok


_PUNCT = "!#$%&'*+,-./:;<=>?@[\\]^_`{|}~\""


def _random_token(rng: random.Random) -> str:
    """Letters, digits and punctuation in runs, so that strips and separators meet."""
    out = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.45:
            out.append("".join(rng.choice("abcXY") for _ in range(rng.randint(1, 3))))
        elif r < 0.7:
            out.append(str(rng.randint(0, 99)))
        else:
            out.append("".join(rng.choice(_PUNCT) for _ in range(rng.randint(1, 2))))
    return "".join(out)


_TERM = re.compile(rb'^text:"((?:[^"\\]|\\x[0-9a-f]{2}|\\0)*)" df=(\d+) ids=')


def _unescape(b: bytes) -> bytes:
    return re.sub(
        rb"\\x([0-9a-f]{2})|\\0", lambda m: bytes([int(m.group(1), 16)]) if m.group(1) else b"\0", b
    )


def test_forms_pinned_to_lb_token_forms(store_cli: Path, tmp_path: Path) -> None:
    rng = random.Random(18)
    # Messages of a few random tokens each; `ingest` cuts them with the default delimiters,
    # so what reaches lb_token_forms is the runs between those.
    msgs = [" ".join(_random_token(rng) for _ in range(rng.randint(1, 4))) for _ in range(3000)]
    lb = Logbox(store_cli, tmp_path / "data")
    lb.ingest(("\n".join(msgs) + "\n").encode())
    segs = sorted((tmp_path / "data").rglob("*.seg"))
    assert segs, "ingest wrote no segment"
    got: Counter[bytes] = Counter()
    for seg in segs:
        out = lb.check(lb.run("dump", str(seg))).stdout.splitlines()
        assert re.search(rb"version 3$", out[1]), out[1]
        for line in out[2:]:
            m = _TERM.match(line)
            if m:
                got[_unescape(m.group(1))] += int(m.group(2))
    want: Counter[bytes] = Counter()
    for m in msgs:
        want.update(set(words(m.encode())))
    assert got == want
    # Every case kind happened: stripped forms, parts, all-digit parts left out.
    assert sum(1 for m in msgs for t in m.split() if forms(t.lower().encode())) > 1000


def _fixture(tmp_path: Path, store_cli: Path) -> Logbox:
    with tarfile.open(FIXTURE) as tf:
        tf.extractall(tmp_path)  # (our own fixture)
    return Logbox(store_cli, tmp_path / "store")


def _versions(lb: Logbox) -> set[int]:
    out = set()
    for seg in lb.data.rglob("*.seg"):
        line = lb.check(lb.run("dump", str(seg))).stdout.splitlines()[1]
        m = re.search(rb"version (\d+)$", line)
        assert m, line
        out.add(int(m.group(1)))
    return out


def _check_against_oracle(lb: Logbox, c: Corpus, queries: list[bytes]) -> int:
    s = Searcher(lb)
    found = 0
    for q in queries:
        want = [c.msgs[i].id for i in query.bits(c.eval(query.parse(q)))]
        hits = s.all(q, from_=FIXTURE_FROM, to=FIXTURE_TO, order="oldest")
        assert [h["id"] for h in hits] == want, q
        found += bool(want)
    return found


def test_store_without_forms_read_then_reindexed(store_cli: Path, tmp_path: Path) -> None:
    lb = _fixture(tmp_path, store_cli)
    assert _versions(lb) == {2}
    c = Corpus([Msg.from_json(r) for r in lb.cat()])
    assert len(c.msgs) == 304
    assert all(FIXTURE_FROM_US <= m.received_us < FIXTURE_TO_US for m in c.msgs)
    named = [
        b"refused",
        b"down",
        b"existent",
        b"example",
        b"quoted",
        b"exist*",
        b"*ample",
        b"10.0.0.1",
        b"10.0.0.*",
        b"2015",
        b'"connection refused"',
        b'"user non"',
        b'"non existent"',
        b"refused.",
    ]
    gen = querygen.QueryGen(random.Random(7), querygen.Vocab.of(c))
    queries = named + [gen.word() for _ in range(60)] + [gen.phrase() for _ in range(40)]
    # Old segment: the evaluator matches the forms of its tokens at query time.
    found = _check_against_oracle(lb, c, queries)
    assert found > 60
    for q, n in ((b"refused", 2), (b"existent", 1), (b"2015", 0), (b'"connection refused"', 2)):
        assert len(query.bits(c.eval(query.parse(q)))) == n, q
    lb.check(lb.run("reindex"))
    assert _versions(lb) == {3}
    assert lb.verify()[0] == 0
    assert _check_against_oracle(lb, c, queries) == found


@pytest.mark.parametrize(
    "text,q,spans",
    [
        (b"connection refused. is down.", b"refused down", [(11, 18), (23, 27)]),
        (b"user non-existent-user x", b"existent", [(9, 17)]),
        (b"from bob@example.com", b"example OR bob", [(5, 8), (9, 16)]),
    ],
)
def test_python_spans_rule(text: bytes, q: bytes, spans: list[tuple[int, int]]) -> None:
    """The offsets forms() gives are where lb_query_spans marks a part (t_spans.c)."""
    got = []
    pats = [t.pat for t in _terms(query.parse(q))]
    pos = 0
    for tok in text.split(b" "):
        for f, at, _ in forms(tok):
            if f in pats:
                got.append((pos + at, pos + at + len(f)))
        pos += len(tok) + 1
    assert got == spans


def _terms(q: query.Node) -> list[query.Term]:
    if isinstance(q, query.Term):
        return [q]
    if isinstance(q, query.And | query.Or):
        return [t for k in q.kids for t in _terms(k)]
    return []
