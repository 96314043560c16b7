# logbox_core.highlight: the segments of a message join back to it exactly, and a segment is
# marked exactly when it is a token (as the oracle tokenizer, tests/lbtest/oracle.py, cuts the
# message) that matches a positive text word of the query; field terms and words under NOT are
# never marked; phrases mark their tokens; wildcards, escapes and the logspace's delimiters are
# honoured; bytes that are not UTF-8 (\udcXX) come back unchanged.

from __future__ import annotations

import fnmatch

from hypothesis import given, settings
from hypothesis import strategies as st
from lbtest import oracle
from logbox_core.highlight import highlight, query_terms

ALPHABET = b"abcAB \t:/=-.x\x00\x1b\xc3\xa9\xff*?"


def _b(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def _runs(msg: bytes, table: frozenset[int]) -> list[tuple[int, int]]:
    """(start, end) of every run of token bytes, by the oracle's definition."""
    runs, i = [], 0
    while i < len(msg):
        if msg[i] in table:
            i += 1
            continue
        s = i
        while i < len(msg) and msg[i] not in table:
            i += 1
        runs.append((s, i))
    return runs


def check(msg: bytes, words: list[bytes], delims: bytes = oracle.DEFAULT_DELIMS) -> None:
    """highlight(msg) against the oracle: exact join, marks exactly on matching tokens."""
    table = oracle.delimiter_table(delims)
    segs = highlight(msg.decode("utf-8", "surrogateescape"), words, delims)
    assert b"".join(_b(t) for t, _ in segs) == msg
    marked, pos = set(), 0
    for text, on in segs:
        n = len(_b(text))
        if on:
            marked.add((pos, pos + n))
        pos += n
    want = set()
    for s, e in _runs(msg, table):
        tok = oracle.fold(msg[s : min(e, s + oracle.TOKEN_MAX)])
        if any(fnmatch.fnmatchcase(tok.decode("latin-1"), w.decode("latin-1")) for w in words):
            want.add((s, e))
    # Marks of neighbouring tokens never touch (a delimiter separates them), so the marked
    # segments are exactly the matching runs.
    assert marked == want


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60).map(lambda b: bytes(ALPHABET[c % len(ALPHABET)] for c in b)))
def test_tokens_of_the_message_marked_as_the_oracle_cuts_them(msg: bytes) -> None:
    toks = oracle.tokenize(msg)
    words = sorted({t for t in toks[::2] if b"*" not in t and b"?" not in t and b"[" not in t})
    check(msg, words)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60).map(lambda b: bytes(ALPHABET[c % len(ALPHABET)] for c in b)))
def test_wildcard_words(msg: bytes) -> None:
    toks = [t for t in oracle.tokenize(msg) if len(t) >= 2 and b"[" not in t]
    words = sorted({t[:1] + b"*" for t in toks[::3]} | {b"?" + t[1:] for t in toks[1::3]})
    check(msg, words)
    check(msg, [b"*" + t[-1:] for t in toks[:2]])


@settings(max_examples=200, deadline=None)
@given(
    st.binary(max_size=60).map(lambda b: bytes(ALPHABET[c % len(ALPHABET)] for c in b)),
    st.sampled_from([b"&:~?![]=,;()'\"/\\|<>{}*", b":", b"=/", b""]),
)
def test_other_delimiters(msg: bytes, delims: bytes) -> None:
    table = oracle.delimiter_table(delims)
    toks = [t for t in oracle.tokenize(msg, table) if not set(t) & set(b"*?[]\\")]
    check(msg, sorted(set(toks[:3])), delims)


def test_query_terms_positive_text_words_only() -> None:
    q = 'failed AND "connection error" AND host:web1 AND NOT (root OR admin) AND program:sshd'
    assert query_terms(q) == [b"failed", b"connection", b"error"]
    assert query_terms("severity<=err NOT x facility:auth message:Zed meta.sequenceId:4") == [
        b"zed"
    ]
    assert query_terms("NOT NOT twice") == [b"twice"]
    assert query_terms("user?ame OR fail* OR a\\*b") == [b"user?ame", b"fail*", b"a\\*b"]
    assert query_terms("*") == []
    assert query_terms("Connection:Error /var/log") == [b"connection", b"error", b"var", b"log"]
    assert query_terms('host:"a b" c') == [b"c"]


def test_highlight_wildcards_phrase_and_case() -> None:
    segs = highlight("Failed password for ROOT from 10.0.0.1:22", query_terms('fail* "for root"'))
    assert [t for t, on in segs if on] == ["Failed", "for", "ROOT"]
    segs = highlight("user=bob usr=x", query_terms("u?er"))
    assert [t for t, on in segs if on] == ["user"]
    assert highlight("", ["x"]) == []
    assert highlight("abc", []) == [("abc", False)]


def test_non_utf8_and_control_bytes_round_trip() -> None:
    msg = "caf\udcc3 \x00nul \x1b[31m ok \udcff"
    segs = highlight(msg, query_terms("ok nul"))
    assert "".join(t for t, _ in segs) == msg
    assert [t for t, on in segs if on] == ["ok"]  # NUL is a token byte: the token is "\x00nul"


def test_escaped_delimiter_never_splits_a_query_token() -> None:
    assert query_terms("a\\:b") == [b"a:b"]
    assert [t for t, on in highlight("x a:b", ["a:b"], b"") if on] == ["a:b"]
