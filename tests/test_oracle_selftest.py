# Scenario: the test helpers themselves (no logbox binary needed): the Python tokenizer follows
# DESIGN.md "Tokens" on its examples, the seeded random corpus is deterministic and its frames
# parse back, the loghub corpus keeps each original line as its message, and the benchmark
# corpus generator writes the requested number of valid lines.
from __future__ import annotations

import random
from pathlib import Path

import pytest
from lbtest import corpus, oracle
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
