# Scenario: the test helpers themselves (no logbox binary needed): the Python tokenizer follows
# DESIGN.md "Tokens" on its examples, the seeded random corpus is deterministic and its frames
# parse back, the loghub corpus keeps each original line as its message, and the benchmark
# corpus generator writes the requested number of valid lines.
from __future__ import annotations

import random
from pathlib import Path

import pytest
from lbtest import corpus, oracle, query
from lbtest.oracle import tokenize


@pytest.mark.parametrize("text", ["10.0.0.1", "web-01", "user_id", "bob@example.com", "a+b.c"])
def test_one_token_each(text: str) -> None:
    assert tokenize(text.encode()) == [text.encode()]


def test_delimited_words_split() -> None:
    assert tokenize(b"Connection:Error") == [b"connection", b"error"]
    assert tokenize(b"/var/log/syslog") == [b"var", b"log", b"syslog"]


def test_every_default_delimiter_and_whitespace_splits() -> None:
    for d in b"&:~?![]=,;()'\"/\\|<>{}*" + b"\t\n\v\f\r ":
        assert tokenize(b"ab" + bytes([d]) + b"cd") == [b"ab", b"cd"], bytes([d])


def test_other_bytes_stay_inside_tokens() -> None:
    for c in [0x00, 0x01, 0x1B, 0x1C, 0x1F, 0x7F, 0x80, 0xA0, 0xFF, ord("."), ord("-"), ord("_")]:
        assert tokenize(b"ab" + bytes([c]) + b"cd") == [b"ab" + bytes([c]) + b"cd"], hex(c)


def test_ascii_folding_only() -> None:
    assert tokenize(b"HeLLo WORLD") == [b"hello", b"world"]
    # UTF-8 "É" (c3 89) and Latin-1 "É" (c9) are not ASCII: kept as they are
    assert tokenize(b"CAF\xc3\x89 \xc9T\xc9") == [b"caf\xc3\x89", b"\xc9t\xc9"]


def test_high_bytes_and_nul_are_token_bytes() -> None:
    assert tokenize(b"caf\xc3\xa9 \xff\xfe \x00x\x00") == [
        b"caf\xc3\xa9",
        b"\xff\xfe",
        b"\x00x\x00",
    ]
    assert tokenize(bytes(range(0x80, 0x100))) == [bytes(range(0x80, 0x100))]


def test_long_runs_are_cut_at_255_and_the_rest_skipped() -> None:
    assert tokenize(b"a" * 255) == [b"a" * 255]
    assert tokenize(b"A" * 256) == [b"a" * 255]
    assert tokenize(b"B" * 1000 + b" next") == [b"b" * 255, b"next"]
    assert tokenize(b"x" * 254 + b"\xc3\xa9") == [b"x" * 254 + b"\xc3"]


def test_empty_and_delimiters_only() -> None:
    assert tokenize(b"") == []
    assert tokenize(b" ::: /// \t\r\n") == []


def test_custom_delimiters() -> None:
    table = oracle.delimiter_table(b".")
    assert tokenize(b"10.0.0.1 a:b", table) == [b"10", b"0", b"0", b"1", b"a:b"]
    with pytest.raises(ValueError):
        oracle.delimiter_table(b"a")


def test_brute_force_matchers() -> None:
    msgs = [b"Connection:Error", b"error here", b"errors", b"", b"ERR/or"]
    assert oracle.ids_with_token(msgs, b"ERROR") == [1, 2]
    assert oracle.ids_with_token(msgs, b"error", first_id=10) == [10, 11]
    assert oracle.ids_with_prefix(msgs, b"err") == [1, 2, 3, 5]
    assert oracle.ids_with_prefix(msgs, b"Co") == [1]


def test_index_agrees_with_brute_force() -> None:
    msgs = [e.message for e in corpus.random_corpus(3, 400) if len(e.message) < 4096]
    idx = oracle.Index(msgs)
    rng = random.Random(5)
    for tok in rng.sample(idx.terms(), 60):
        assert idx.ids(tok) == oracle.ids_with_token(msgs, tok), tok
    for p in [b"a", b"ka", b"10.", b"x", b"\xff", b"zz"]:
        assert idx.prefix_ids(p) == oracle.ids_with_prefix(msgs, p), p


def test_random_corpus_is_deterministic() -> None:
    a = corpus.random_corpus(11, 500)
    assert a == corpus.random_corpus(11, 500)
    assert [e.raw for e in a] != [e.raw for e in corpus.random_corpus(12, 500)]


def test_random_corpus_frames_parse_back() -> None:
    msgs = corpus.random_corpus(11, 500)
    data = corpus.octet_frames(e.raw for e in msgs)
    assert corpus.parse_octet_frames(data) == [e.raw for e in msgs]
    for e in msgs:
        assert corpus.parse_5424(e.raw) == e


def test_random_corpus_holds_every_edge_case() -> None:
    msgs = corpus.random_corpus(11, 500)
    stored = [e.message for e in msgs]
    for edge in corpus.edge_messages():
        want = edge[: corpus.MSG_MAX]
        assert want in stored, edge[:40]
    big = [e for e in msgs if len(e.raw) > corpus.MSG_MAX]
    assert {len(e.message) for e in big} == {corpus.MSG_MAX}
    assert [("truncated" in e.flags) for e in big].count(True) == 1
    assert any(b"\n" in e.message for e in msgs) and any(b"\x00" in e.message for e in msgs)
    assert any(e.sd for e in msgs) and any(e.host is None for e in msgs)
    assert any(e.timestamp_us is None for e in msgs)
    assert not any(e.message.endswith((b"\n", b"\r")) for e in msgs)
    # one message has no MSG at all, one an empty MSG after the SP
    empties = [e.raw for e in msgs if e.message == b""]
    assert any(r.endswith(b" ") for r in empties) and any(not r.endswith(b" ") for r in empties)


def test_parse_5424_fields() -> None:
    e = corpus.parse_5424(
        b"<165>1 2003-10-11T22:14:15.003-07:00 mymachine.example.com evntslog - ID47 "
        b'[exampleSDID@32473 iut="3" eventSource="App\\]"] \xef\xbb\xbfAn application event'
    )
    assert (e.facility, e.severity, e.host, e.program, e.pid, e.msgid) == (
        20,
        5,
        "mymachine.example.com",
        "evntslog",
        None,
        "ID47",
    )
    assert e.timestamp_us == 1065935655003000
    assert e.sd == b'[exampleSDID@32473 iut="3" eventSource="App\\]"]'
    assert e.message == b"\xef\xbb\xbfAn application event"
    assert corpus.sd_params(e.sd) == [
        ("exampleSDID@32473", "iut", b"3"),
        ("exampleSDID@32473", "eventSource", b"App\\]"),
    ]
    assert corpus.parse_5424(b"<0>1 - - - - - -").message == b""


def _need_loghub() -> None:
    if not corpus.loghub_systems() or not corpus.LOGHUB_TOOL.is_file():
        pytest.fail(f"loghub samples or converter missing ({corpus.LOGHUB_DIR})")


def test_loghub_message_is_the_original_line() -> None:
    _need_loghub()
    tool = corpus.loghub_tool()
    for system in corpus.loghub_systems():
        lines = corpus.loghub_lines(system)
        raws = corpus.loghub_raw(system, tool=tool)
        assert len(raws) == len(lines) > 1000, system
        for line, raw in zip(lines, raws, strict=True):
            assert corpus.parse_5424(raw).message == line, (system, raw[:100])


def test_big_corpus_writes_the_requested_count(tmp_path: Path) -> None:
    _need_loghub()
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    n = 25_000
    size = corpus.big_corpus(n, a, seed=4, chunk=7000)
    assert a.stat().st_size == size
    lines = list(corpus.iter_lines(a))
    assert len(lines) == n
    for raw in lines[::50]:
        corpus.parse_5424(raw)
    corpus.big_corpus(n, b, seed=4, chunk=7000)
    assert a.read_bytes() == b.read_bytes()
    # digit runs vary: far more distinct lines than source lines would give
    assert len(set(lines)) > 0.8 * n


# -------------------------------------------------------------- lbtest.query (QUERY.md §1 to §3)

T, P = query.Term, query.Phrase


def _msg(message: bytes, i: int = 1, received: int = 0, **kw: object) -> query.Msg:
    base: dict[str, object] = dict(host=b"", program=b"", pid=b"", msgid=b"", sd=b"")
    base.update(facility=1, severity=5)
    base.update(kw)
    return query.Msg(id=i, received_us=received, message=message, **base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("username", T(1, b"username")),
        ("UserName", T(1, b"username")),
        ("user?ame", T(1, b"user?ame")),
        ("system*", T(1, b"system*")),
        ("*tool", T(1, b"*tool")),
        ("*", query.All()),
        ("***", query.All()),
        ("message:*", query.All()),
        ("and", T(1, b"and")),
        ("\\AND", T(1, b"and")),
        ("a\\:b", T(1, b"a:b")),
        ("a\\*b", T(1, b"a\\*b")),
        ("a\\ b", T(1, b"a b")),
        ("Connection:Error", P(1, (b"connection", b"error"))),
        ('"connection error"', P(1, (b"connection", b"error"))),
        ('"con* e?ror"', P(1, (b"con*", b"e?ror"))),
        ("/var/log/syslog", P(1, (b"var", b"log", b"syslog"))),
        ("foo:bar", P(1, (b"foo", b"bar"))),
        ("message:Connection:Error", P(1, (b"connection", b"error"))),
        ("host:Web-01", T(2, b"web-01")),
        ("HOST:web*", T(2, b"web*")),
        ("host:*", T(2, b"*")),
        ("host:fe80::1", T(2, b"fe80::1")),
        ('host:"a b"', T(2, b"a b")),
        ("host:a\\*", T(2, b"a\\*")),
        ("program:postfix/smtpd", T(3, b"postfix/smtpd")),
        ("pid:42", T(4, b"42")),
        ("msgid:ID47", T(5, b"id47")),
        ("facility:local0", query.Set(6, 1 << 16)),
        ("facility:23", query.Set(6, 1 << 23)),
        ("facility:solaris-cron", query.Set(6, 1 << 15)),
        ("severity:err", query.Set(7, 1 << 3)),
        ("severity:warn", query.Set(7, 1 << 4)),
        ("severity:panic", query.Set(7, 1 << 0)),
        ("severity<=warning", query.Set(7, 0b00011111)),
        ("severity<warning", query.Set(7, 0b00001111)),
        ("severity>=err", query.Set(7, 0b11111000)),
        ("severity>err", query.Set(7, 0b11110000)),
        ("meta.seq:17", T(8, b"17", b"meta.seq")),
        ("ex@32473.Quote:A", T(8, b"a", b"ex@32473.Quote")),
        ('origin.ip:"10.0.0.1 x"', P(8, (b"10.0.0.1", b"x"), b"origin.ip")),
        ("Meta.seq:17", P(1, (b"meta.seq", b"17"))),  # SD ids are case-sensitive
        ("meta.:x", P(1, (b"meta.", b"x"))),
    ],
)
def test_query_parse(text: str, tree: query.Node) -> None:
    assert query.parse(text) == tree
    assert query.parse(query.fmt(tree)) == tree


def test_query_operators() -> None:
    a, b, c = T(1, b"a"), T(1, b"b"), T(1, b"c")
    assert query.parse("a b") == query.And((a, b))
    assert query.parse("a AND (b AND c)") == query.And((a, b, c))
    assert query.parse("(a OR b) OR c") == query.Or((a, b, c))
    assert query.parse("a b OR c") == query.Or((query.And((a, b)), c))
    assert query.parse("a OR b c") == query.Or((a, query.And((b, c))))
    assert query.parse("NOT a b") == query.And((query.Not(a), b))
    assert query.parse("NOT NOT a") == query.Not(query.Not(a))
    assert query.parse("((a))") == a
    assert query.parse("a AND NOT (b OR c)") == query.And((a, query.Not(query.Or((b, c)))))


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("Connection Error", b"connection AND error"),
        ("a (b OR c)", b"a AND (b OR c)"),
        ("NOT (a b)", b"NOT (a AND b)"),
        ("NOT (a OR b)", b"NOT (a OR b)"),
        ("a b OR c", b"a AND b OR c"),
        ("severity>err", b"severity>=warning"),
        ("severity<warning", b"severity<=err"),
        ("severity:3", b"severity:err"),
        ("facility:4", b"facility:auth"),
        ('host:"a b"', b"host:a\\ b"),
        ('"a\\:b c"', b'"a\\:b c"'),
        ("x\\(y", b"x\\(y"),
    ],
)
def test_query_canonical(text: str, canonical: bytes) -> None:
    assert query.fmt(query.parse(text)) == canonical


@pytest.mark.parametrize(
    ("text", "pos"),
    [
        ("", 0),
        ("   ", 0),
        ("(a", 2),
        ("(a (b c)", 8),
        ("a)", 1),
        ("a AND", 5),
        ("a OR OR b", 5),
        ("NOT", 3),
        ('a "bc', 2),
        ("abc\\", 3),
        ("severity:foo", 0),
        ("facility:24", 0),
        ("host:", 0),
        ("x ::: y", 2),
        ("severity<emerg", 0),
        ("severity>debug", 0),
        ("()", 1),
        ('""', 0),
        # the first error from the left wins
        ('a) "open', 1),
        ('"" "open', 0),
        ('facility:x "open', 0),
        ('a "open', 2),
        ("(a b\\", 4),
    ],
)
def test_query_errors(text: str, pos: int) -> None:
    with pytest.raises(query.QueryError) as e:
        query.parse(text)
    assert e.value.pos == pos, e.value


def test_glob_match_by_hand() -> None:
    cases = [
        (b"user?ame", b"username", True),
        (b"user?ame", b"userame", False),
        (b"*tool", b"systool", True),
        (b"*tool", b"tools", False),
        (b"a*b*c", b"abc", True),
        (b"a*b*c", b"axxbyyc", True),
        (b"a*b*c", b"acb", False),
        (b"*", b"", True),
        (b"?", b"", False),
        (b"a\\*", b"a*", True),
        (b"a\\*", b"ab", False),
        (b"[ab]", b"[ab]", True),
        (b"[ab]", b"a", False),
        (b"?\xff", b"\x00\xff", True),
        (b"a\\\\b", b"a\\b", True),
    ]
    for glob, s, want in cases:
        assert query.glob_match(glob, s) is want, (glob, s)
        assert query.glob_match_slow(glob, s) is want, (glob, s)


def test_msg_terms_follow_lb_terms_c() -> None:
    m = _msg(
        b"Hello World. bob@Example.com",
        host=b"Web-01",
        program=b"sshd",
        pid=b"",
        msgid=b"ID" * 200,
        facility=4,
        severity=3,
        sd=b'[ex@1 a="x \\"Y\\" z" a="q"][meta seq="1"]bad[x y="z"]',
    )
    w, f = query.WHOLE, query.TERM_FORM
    assert query.msg_terms(m) == [
        (1, b"hello", w),
        (1, b"world.", w),
        (1, b"world", w | f),
        (1, b"bob@example.com", w),
        (1, b"bob", 1 | f),
        (1, b"example", f),
        (1, b"com", 2 | f),
        (2, b"web-01", w),
        (3, b"sshd", w),
        (5, (b"id" * 200)[:255], w),
        (6, b"\x04", w),
        (7, b"\x03", w),
        (8, b"ex@1.a\x00x", w),
        (8, b"ex@1.a\x00y", w),
        (8, b"ex@1.a\x00z", w),
        (8, b"ex@1.a\x00q", w),
        (8, b"meta.seq\x001", w),
    ]
    assert query.sd_terms(b'[a b="1" c="2"') == [(8, b"a.b\x001", w), (8, b"a.c\x002", w)]
    assert query.sd_terms(b'[a b=1 c="2"]') == []
    assert query.sd_terms(b'[a b="open') == []
    assert query.sd_terms(b"[" + b"i" * 70 + b' p="v"]') == [(8, b"i" * 64 + b".p\x00v", w)]
    # SD values are tokens only: no forms.
    assert query.sd_terms(b'[a b="x-y."]') == [(8, b"a.b\x00x-y.", w)]


def test_matches_by_hand() -> None:
    def hit(q: str, m: query.Msg) -> bool:
        return query.matches(query.parse(q), query.msg_terms(m))

    ce, ec = _msg(b"Connection Error here"), _msg(b"Error Connection here")
    colon = _msg(b"Error:Connection")
    assert hit("Connection:Error", ce) and not hit("Connection:Error", ec)
    assert hit('"connection error"', ce) and not hit('"connection error"', colon)
    assert hit("Connection Error", colon) and hit("Connection Error", ec)
    assert hit('"connection here"', ec) and not hit('"here connection"', ec)
    # a phrase never runs from the text into the header terms
    assert not hit('"here web"', _msg(b"x here", host=b"web"))
    assert hit("host:web", _msg(b"x", host=b"WEB")) and not hit("web", _msg(b"x", host=b"web"))
    assert not hit("host:*", _msg(b"x")) and hit("host:*", _msg(b"x", host=b"h"))
    assert hit("*", _msg(b"")) and not hit("message:x*", _msg(b""))
    assert hit("NOT user", _msg(b"root")) and not hit("NOT user", _msg(b"user"))
    assert hit("user AND NOT close*", _msg(b"user opened"))
    assert not hit("user AND NOT close*", _msg(b"user closed"))
    assert hit("severity<=err", _msg(b"x", severity=2))
    assert not hit("severity<=err", _msg(b"x", severity=None))
    assert not hit("NOT severity:err", _msg(b"x", severity=3))
    assert hit("facility:local7", _msg(b"x", facility=23))
    sd = _msg(b"x", sd=b'[ex@1 a="p q" a="r"][ex@1 b="s"]')
    assert hit("ex@1.a:p", sd) and hit('ex@1.a:"q r"', sd) and not hit('ex@1.a:"r s"', sd)
    assert hit("ex@1.b:s", sd) and not hit("ex@1.b:p", sd) and hit("ex@1.a:*", sd)


def _corpus() -> query.Corpus:
    msgs = [
        _msg(b"Connection Error", 1, 1_000_000, host=b"a", severity=3),
        _msg(b"Error:Connection", 2, 1_500_000, host=b"b", severity=4),
        _msg(b"user opened session", 3, 2_000_000, host=b"a", severity=6),
        _msg(b"user closed session", 4, 3_999_999, host=b"c", facility=4),
        _msg(b"systemd started", 5, 4_000_000, host=b"a", sd=b'[m@1 k="v w"]'),
    ]
    return query.Corpus(msgs)


def test_corpus_eval_equals_brute_force() -> None:
    c = _corpus()
    for text in [
        "connection",
        "Connection:Error",
        "Connection Error",
        "user AND NOT close*",
        "NOT user",
        "*ion",
        "s?ssion OR host:c",
        '"user *" NOT opened',
        "m@1.k:w",
        "severity<=warning",
        "*",
        "host:*",
    ]:
        q = query.parse(text)
        want = [i for i, ts in enumerate(c.terms) if query.matches(q, ts)]
        assert query.bits(c.eval(q)) == want, text


def test_search_semantics_by_hand() -> None:
    c = _corpus()
    q = query.parse("*")
    # [floor(1.2 s), ceil(3.5 s)) = [1 s, 4 s): ids 2, 3, 4 (1 is at 1.0 s: in; 5 at 4.0 s: out)
    got = [m.id for m in c.matching(q, 1_200_000, 3_500_000)]
    assert got == [1, 2, 3, 4]
    assert [m.id for m in c.matching(q, 1_000_001, 4_000_000)] == [1, 2, 3, 4]
    assert [m.id for m in c.matching(q, 2_000_000, 2_000_000)] == []
    ids = [1, 2, 3, 4, 5]
    assert query.page(ids, "newest", 2) == query.Result([5, 4], 4, 5)
    assert query.page(ids, "newest", 2, cursor=4) == query.Result([3, 2], 2, 5)
    assert query.page(ids, "newest", 2, cursor=2) == query.Result([1], 0, 5)
    assert query.page(ids, "oldest", 5) == query.Result([1, 2, 3, 4, 5], 0, 5)
    assert query.page(ids, "oldest", 4, cursor=1) == query.Result([2, 3, 4, 5], 0, 5)
    # 3 s over 2 buckets: step 1.5 s -> 2 s; buckets [1, 3) [3, 4)
    assert query.hist_step(1_000_000, 4_000_000, 2) == 2_000_000
    received = [m.received_us for m in c.matching(q, 1_000_000, 4_000_000)]
    assert query.histogram(received, 1_000_000, 4_000_000, 2) == (1_000_000, 2_000_000, [3, 1])
    assert query.histogram([], 0, 10_000_000, 3) == (0, 4_000_000, [0, 0, 0])
    assert query.histogram([], 0, 10_000_000, 100) == (0, 1_000_000, [0] * 10)
    assert query.hist_step(0, 1, 5) == 1_000_000
    top = query.top_values(c.msgs, query.NS_HOST, 2)
    assert top == [(b"a", 3), (b"b", 1)]
    top = query.top_values(c.msgs[:2], query.NS_TEXT, 5)
    assert top == [(b"connection", 2), (b"error", 2)]
    assert query.top_values(c.msgs, query.NS_SD, 5, b"m@1.k") == [(b"v", 1), (b"w", 1)]


def test_in_range_sorted_and_unsorted_agree() -> None:
    times = [0, 999_999, 1_000_000, 1_000_000, 2_500_000, 3_000_000, 7_000_001]
    fwd = query.Corpus([_msg(b"x", i, t) for i, t in enumerate(times, start=1)])
    rev = query.Corpus([_msg(b"x", i, t) for i, t in enumerate(reversed(times), start=1)])
    assert fwd.in_order and not rev.in_order
    for a, b in [(0, 0), (1, 1_000_000), (999_999, 2_500_001), (3_000_000, 9_000_000)]:
        want = [i for i, t in enumerate(times) if a // 10**6 * 10**6 <= t < -(-b // 10**6) * 10**6]
        assert query.bits(fwd.in_range(a, b)) == want, (a, b)
        got = sorted(len(times) - 1 - i for i in query.bits(rev.in_range(a, b)))
        assert got == want, (a, b)


def test_long_query_tokens_are_cut_at_255() -> None:
    assert query.parse(b"Y" * 300) == T(1, b"y" * 255)
    assert query.parse(b"y" * 300 + b"*") == T(1, b"y" * 255)
    assert query.parse(b"a*" + b"b" * 300) == T(1, b"a*" + b"b" * 253)
    assert query.parse(b"x\\*" + b"b" * 300) == T(1, b"x\\*" + b"b" * 253)
    assert query.parse(b"host:" + b"H" * 300) == T(2, b"h" * 255)


def test_matches_forms_by_hand() -> None:
    """The cases of t_query.c t_match_forms."""

    def hit(q: str, m: query.Msg) -> bool:
        return query.matches(query.parse(q), query.msg_terms(m))

    a = _msg(b"upstream connection refused. backend is down.")
    b = _msg(b"user non-existent-user from bob@example.com at 10.0.0.1")
    c = _msg(b"day 2015-10-18 pid-1234 code 404.")
    d = _msg(b"for user bob@example.com ok")
    yes = [
        ("refused", a), ("down", a), ("refused.", a), ("existent", b), ("non", b),
        ("example", b), ("exist*", b), ("*ample", b), ("10.0.0.1", b), ("10.0.0.*", b),
        ("pid", c), ("404", c), ("2015-*", c), ('"connection refused"', a),
        ('"refused backend"', a), ('"is down"', a), ('"user non"', b), ('"user from"', b),
        ('"user bob"', d), ('"com ok"', d), ('"user non-existent-user from"', b),
    ]  # fmt: skip
    no = [
        ("refused..", a), ("10.0.0", b), ("0", b), ("existen", b), ("example.com", b),
        ("2015", c), ("1234", c), ('"user example"', d), ('"example ok"', d),
        ('"non existent"', b), ('"existent from"', b), ('"user existent"', b),
        ("message:2015", c),
    ]  # fmt: skip
    for q, m in yes:
        assert hit(q, m), q
    for q, m in no:
        assert not hit(q, m), q
