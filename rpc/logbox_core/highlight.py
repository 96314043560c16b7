"""Which tokens of a message a query matched, for highlighting (the web UI's <mark>s).

query_terms() reads a query (searchd's canonical "query", or what a user typed: FORMAT.md §10.1)
and returns the token patterns of its positive text words: words, wildcards and the tokens of
phrases, not those under NOT and not field terms (host:, program:, severity ranges, ...; but
message: terms are text). highlight() cuts a message into segments, flagging the tokens that
match one of those patterns; the tokens are cut exactly as the store cuts them (FORMAT.md §6:
ASCII white space plus the logspace's delimiters, ASCII letters folded, bytes >= 0x80 token
bytes, a token cut at 255 bytes). Strings carry bytes as searchd sends them: bytes that are not
UTF-8 as \\udcXX (surrogateescape), and come back the same way in the segments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from . import constants

DEFAULT_DELIMITERS = constants.DEFAULT_DELIMITERS.encode()
WHITESPACE = b"\t\n\v\f\r "
TOKEN_MAX = 255
FIELDS = frozenset(
    {b"host", b"peer", b"program", b"pid", b"msgid", b"message", b"facility", b"severity"}
)
SD_IDS = frozenset({b"timeQuality", b"origin", b"meta"})
OPERATORS = frozenset({b"AND", b"OR", b"NOT"})

_FOLD = bytes(c + 32 if 0x41 <= c <= 0x5A else c for c in range(256))

# A query character: its byte and whether it was escaped by "\".
Char = tuple[int, bool]


def _bytes(s: str | bytes) -> bytes:
    """s as bytes (a str holding \\udcXX escapes gives back those bytes)."""
    return s if isinstance(s, bytes) else s.encode("utf-8", "surrogateescape")


def delimiter_table(delimiters: str | bytes = DEFAULT_DELIMITERS) -> frozenset[int]:
    """The byte values that end a token: ASCII white space plus delimiters."""
    return frozenset(WHITESPACE + _bytes(delimiters))


@dataclass
class _Lexeme:
    """A lexer token: "(", ")", "op" (AND/OR/NOT), "word" or "quoted"."""

    kind: str
    chars: list[Char]
    op: bytes = b""


def _lex(q: bytes) -> list[_Lexeme]:
    """The query's lexemes (FORMAT.md §10.1 "Lexing"); an unterminated quote or a trailing "\\"
    ends where the text ends (highlighting never fails)."""
    out: list[_Lexeme] = []
    i, n = 0, len(q)
    while i < n:
        c = q[i]
        if c in WHITESPACE:
            i += 1
        elif c in b"()":
            out.append(_Lexeme(chr(c), []))
            i += 1
        elif c == 0x22:  # "
            i += 1
            chars: list[Char] = []
            while i < n and q[i] != 0x22:
                if q[i] == 0x5C and i + 1 < n:
                    chars.append((q[i + 1], True))
                    i += 2
                else:
                    chars.append((q[i], False))
                    i += 1
            i += 1
            out.append(_Lexeme("quoted", chars))
        else:
            chars = []
            while i < n and q[i] not in WHITESPACE and q[i] not in b'()"':
                if q[i] == 0x5C and i + 1 < n:
                    chars.append((q[i + 1], True))
                    i += 2
                else:
                    chars.append((q[i], False))
                    i += 1
            raw = bytes(b for b, _ in chars)
            if raw in OPERATORS and not any(e for _, e in chars):
                out.append(_Lexeme("op", chars, raw))
            else:
                out.append(_Lexeme("word", chars))
    return out


def _is_field(name: bytes) -> bool:
    """Whether name (the bytes before a word's first unescaped ":") names a field."""
    if name.lower() in FIELDS:
        return True
    sd_id, dot, param = name.rpartition(b".")
    return bool(dot and param and sd_id and (b"@" in sd_id or sd_id in SD_IDS))


class _Parser:
    """Recursive descent over the lexemes, collecting the positive text words."""

    def __init__(self, lexemes: list[_Lexeme]) -> None:
        self.lx = lexemes
        self.i = 0
        self.words: list[list[Char]] = []

    def peek(self) -> _Lexeme | None:
        return self.lx[self.i] if self.i < len(self.lx) else None

    def parse_or(self, negated: bool) -> None:
        self.parse_and(negated)
        while (t := self.peek()) is not None and t.kind == "op" and t.op == b"OR":
            self.i += 1
            self.parse_and(negated)

    def parse_and(self, negated: bool) -> None:
        self.parse_unary(negated)
        while (t := self.peek()) is not None and t.kind != ")":
            if t.kind == "op" and t.op == b"OR":
                return
            if t.kind == "op" and t.op == b"AND":
                self.i += 1
            self.parse_unary(negated)

    def parse_unary(self, negated: bool) -> None:
        t = self.peek()
        if t is None:
            return
        self.i += 1
        if t.kind == "op" and t.op == b"NOT":
            self.parse_unary(not negated)
        elif t.kind == "(":
            self.parse_or(negated)
            if (c := self.peek()) is not None and c.kind == ")":
                self.i += 1
        elif t.kind in (")", "op"):
            return  # stray: a query that does not parse highlights what it can
        elif t.kind == "quoted":
            if not negated:
                self.words.append(t.chars)
        else:
            self.term(t, negated)

    def term(self, t: _Lexeme, negated: bool) -> None:
        """A bare word: a text word, a message: term (text), or another field (skipped)."""
        chars = t.chars
        colon = next((k for k, (b, e) in enumerate(chars) if b == 0x3A and not e), None)
        value = chars
        if colon is not None:
            name = bytes(b for b, _ in chars[:colon])
            if _is_field(name):
                value = chars[colon + 1 :]
                if not value and (nxt := self.peek()) is not None and nxt.kind == "quoted":
                    self.i += 1  # host:"a b": the quoted value belongs to the field
                    value = nxt.chars
                if name.lower() != b"message":
                    return
        elif bytes(b for b, _ in chars[:9]).lower() in (b"severity<", b"severity>") and not any(
            e for _, e in chars[:9]
        ):
            return  # severity<=err and the like
        if not negated:
            self.words.append(value)


def _tokens_of_word(chars: Sequence[Char], table: frozenset[int]) -> list[bytes]:
    """A query word cut into token patterns (glob form: folded bytes, unescaped * and ? as
    wildcards, \\ before a literal *, ? or \\): like message text, except that unescaped * and ?
    are wildcards inside a token and an escaped byte never splits one."""
    out: list[bytes] = []
    cur: list[Char] = []
    for b, esc in [*chars, (0x20, False)]:
        wild = not esc and b in (0x2A, 0x3F)
        if not esc and not wild and b in table:
            if cur:
                out.append(_glob(cur[:TOKEN_MAX]))
                cur = []
        else:
            cur.append((b, esc))
    return out


def _glob(chars: Sequence[Char]) -> bytes:
    """The glob form of a token's characters."""
    out = bytearray()
    for b, esc in chars:
        if esc and b in (0x2A, 0x3F, 0x5C):
            out += b"\\"
        out.append(_FOLD[b])
    return bytes(out)


def query_terms(query: str | bytes, delimiters: str | bytes = DEFAULT_DELIMITERS) -> list[bytes]:
    """The token patterns (glob form, folded) of the query's positive text words, phrases'
    tokens included, in query order without repeats; a pattern made only of "*" (ALL) is left
    out."""
    table = delimiter_table(delimiters)
    p = _Parser(_lex(_bytes(query)))
    while p.peek() is not None:  # a stray ")" does not end the reading
        p.parse_or(False)
        if p.peek() is not None:
            p.i += 1
    out: list[bytes] = []
    for w in p.words:
        for pat in _tokens_of_word(w, table):
            if pat.strip(b"*") and pat not in out:
                out.append(pat)
    return out


def _compile(pattern: bytes) -> re.Pattern[bytes]:
    """A glob (unescaped * any run, ? one byte, \\ escapes) as a full-match byte regex."""
    rx = bytearray()
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == 0x5C and i + 1 < len(pattern):
            rx += re.escape(pattern[i + 1 : i + 2])
            i += 2
            continue
        if c == 0x2A:
            rx += b".*"
        elif c == 0x3F:
            rx += b"."
        else:
            rx += re.escape(bytes([c]))
        i += 1
    return re.compile(bytes(rx), re.DOTALL)


class Matcher:
    """Token patterns compiled once, for many messages."""

    def __init__(self, terms: Iterable[bytes | str]) -> None:
        self.patterns = [_bytes(t) for t in terms]
        self.exact = {p for p in self.patterns if not re.search(rb"[*?\\]", p)}
        self.globs = [_compile(p) for p in self.patterns if p not in self.exact]

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def matches(self, token: bytes) -> bool:
        """Whether a (folded, cut) token matches one of the patterns."""
        return token in self.exact or any(g.fullmatch(token) for g in self.globs)


def highlight(
    message: str | bytes,
    terms: Iterable[bytes | str] | Matcher,
    delimiters: str | bytes = DEFAULT_DELIMITERS,
) -> list[tuple[str, bool]]:
    """message cut into (text, matched) segments whose texts join back to message; a run of
    token bytes is matched when its token (folded, cut at 255 bytes) matches one of terms.
    Neighbouring segments never have the same flag."""
    m = terms if isinstance(terms, Matcher) else Matcher(terms)
    data = _bytes(message)
    if not m or not data:
        return [(_text(data), False)] if data else []
    table = delimiter_table(delimiters)
    marks: list[tuple[int, int]] = []
    i, n = 0, len(data)
    while i < n:
        while i < n and data[i] in table:
            i += 1
        start = i
        while i < n and data[i] not in table:
            i += 1
        if i > start and m.matches(data[start : min(i, start + TOKEN_MAX)].translate(_FOLD)):
            if marks and marks[-1][1] == start:
                marks[-1] = (marks[-1][0], i)
            else:
                marks.append((start, i))
    out: list[tuple[str, bool]] = []
    pos = 0
    for a, b in marks:
        if a > pos:
            out.append((_text(data[pos:a]), False))
        out.append((_text(data[a:b]), True))
        pos = b
    if pos < n:
        out.append((_text(data[pos:]), False))
    return out


def _text(b: bytes) -> str:
    """Bytes back as a str (\\udcXX for bytes that are not UTF-8)."""
    return b.decode("utf-8", "surrogateescape")
