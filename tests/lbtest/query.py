"""The query language and search of indexer/QUERY.md (§1; §2, §3) in plain Python: the oracle
the C implementation (lb_query.c, lb_eval.c, `logbox search`) is compared with.

- parse(text) -> a small tree (All, Term, Phrase, Set, And, Or, Not) or QueryError(pos, msg).
- fmt(tree) -> the canonical query text.
- msg_terms(msg) -> the term sequence of a message, as indexer/lib/lb_terms.c builds it.
- matches(tree, terms) -> the brute-force definition of a match (lb_query_match).
- Corpus: the same answers for many messages at once through per-term bit sets (each bit set
  is the union over terms, so it equals asking matches() of every message), plus the search
  results: time range, order/limit/cursor, total, histogram, top values.

Glob form (logbox.h): the bytes of a term where an unescaped `*` matches any run of bytes, an
unescaped `?` exactly one byte, and `\\` + byte means that byte. Literal `*`, `?`, `\\` are
always escaped; no other byte is.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from lbtest.oracle import (
    DEFAULT_TABLE,
    FORM_END,
    FORM_START,
    TERM_FORM,
    TOKEN_MAX,
    WHITESPACE,
    fold,
    forms,
    tokenize,
)

NS_TEXT, NS_HOST, NS_PROGRAM, NS_PID, NS_MSGID, NS_FACILITY, NS_SEVERITY, NS_SD, NS_PEER = range(
    1, 10
)
FIELD_NS = {
    "host": NS_HOST,
    "program": NS_PROGRAM,
    "pid": NS_PID,
    "msgid": NS_MSGID,
    "peer": NS_PEER,
}
NS_FIELD = {v: k for k, v in FIELD_NS.items()}
SD_NAME_MAX = 64  # lb_terms.c: an SD-ID or PARAM-NAME longer than this is cut
SD_MAX = 16 * 1024  # LB_SD_MAX: bytes of one unescaped SD value kept
QUERY_MAX = 16384
QUERY_DEPTH = 64
QUERY_NODES = 4096
SD_IDS = (b"timeQuality", b"origin", b"meta")

FACILITIES = [
    "kern",
    "user",
    "mail",
    "daemon",
    "auth",
    "syslog",
    "lpr",
    "news",
    "uucp",
    "cron",
    "authpriv",
    "ftp",
    "ntp",
    "security",
    "console",
    "solaris-cron",
    *(f"local{i}" for i in range(8)),
]
SEVERITIES = ["emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"]
SEVERITY_ALIASES = {"panic": 0, "error": 3, "warn": 4}

# ---------------------------------------------------------------- the tree


@dataclass(frozen=True)
class All:
    """`*`: every message."""


@dataclass(frozen=True)
class Term:
    """One glob pattern over the terms of namespace ns (SD: of parameter sdname)."""

    ns: int
    pat: bytes
    sdname: bytes | None = None


@dataclass(frozen=True)
class Phrase:
    """Patterns matching consecutive terms of namespace ns (SD: all of parameter sdname)."""

    ns: int
    pats: tuple[bytes, ...]
    sdname: bytes | None = None


@dataclass(frozen=True)
class Set:
    """Facility or severity (ns) is one of the values whose bit is set in mask."""

    ns: int
    mask: int


@dataclass(frozen=True)
class And:
    kids: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    kids: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    kid: Node


Node = All | Term | Phrase | Set | And | Or | Not


class QueryError(ValueError):
    """A refused query: byte offset and reason (LB_EQUERY / LB_ETOOBIG)."""

    def __init__(self, pos: int, msg: str, toobig: bool = False) -> None:
        super().__init__(f"{msg} (at byte {pos})")
        self.pos = pos
        self.msg = msg
        self.toobig = toobig


# ---------------------------------------------------------------- lexing

Char = tuple[int, bool]  # (byte, escaped)


@dataclass
class Lexeme:
    kind: str  # "(", ")", "word", "quoted"
    pos: int
    end: int = 0
    chars: list[Char] = field(default_factory=list)

    def bare(self) -> bytes | None:
        """The word's bytes when no byte of it is escaped, else None."""
        if any(esc for _, esc in self.chars):
            return None
        return bytes(b for b, _ in self.chars)

    def is_op(self, name: bytes | None = None) -> bool:
        b = self.bare() if self.kind == "word" else None
        return b in (b"AND", b"OR", b"NOT") and (name is None or b == name)


def _read_escaped(text: bytes, i: int) -> int:
    if i + 1 >= len(text):
        raise QueryError(i, "'\\' at the end of the query")
    return text[i + 1]


def lex(text: bytes) -> list[Lexeme]:
    """The query's lexemes (QUERY.md §1 "Lexing"); raises QueryError."""
    out, err = lex_until_error(text)
    if err is not None:
        raise err
    return out


def lex_until_error(text: bytes) -> tuple[list[Lexeme], QueryError | None]:
    """The lexemes before the first lexing error, and that error (or None). The parser takes
    lexemes one by one and meets the error only when it needs the lexeme that has it, so the
    error reported is the first one from the left, whichever stage finds it."""
    out: list[Lexeme] = []
    try:
        _lex(text, out)
    except QueryError as e:
        return out, e
    return out, None


def _lex(text: bytes, out: list[Lexeme]) -> None:
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in WHITESPACE:
            i += 1
        elif c in b"()":
            out.append(Lexeme(chr(c), i, i + 1))
            i += 1
        elif c == ord('"'):
            lx = Lexeme("quoted", i)
            i += 1
            while True:
                if i >= n:
                    raise QueryError(lx.pos, "unterminated quote")
                c = text[i]
                if c == ord('"'):
                    break
                if c == ord("\\"):
                    lx.chars.append((_read_escaped(text, i), True))
                    i += 2
                else:
                    lx.chars.append((c, False))
                    i += 1
            i += 1
            lx.end = i
            out.append(lx)
        else:
            lx = Lexeme("word", i)
            while i < n and text[i] not in WHITESPACE and text[i] not in b'()"':
                if text[i] == ord("\\"):
                    lx.chars.append((_read_escaped(text, i), True))
                    i += 2
                else:
                    lx.chars.append((text[i], False))
                    i += 1
            lx.end = i
            out.append(lx)


# ---------------------------------------------------------------- terms of a query

# An element of a pattern: a literal byte (int) or a wildcard ("*" or "?").
Elem = int | str


def _elem(c: int, esc: bool) -> Elem:
    if not esc and c in b"*?":
        return chr(c)
    return fold(bytes([c]))[0]


def _cut_runs(elems: list[Elem]) -> list[Elem]:
    """A token longer than TOKEN_MAX is cut there, the rest skipped, as the tokenizer cuts a
    message's token. QUERY.md §1 says "a literal run longer than LB_TOKEN_MAX is cut there";
    with wildcards that is open: here every element (a byte or a wildcard) counts as one,
    so `y{300}*` is `y{255}` and `a*b{300}` is `a*b{253}` (what lb_query.c does too)."""
    return elems[:TOKEN_MAX]


def glob_of(elems: Sequence[Elem]) -> bytes:
    """Glob form of a pattern."""
    out = bytearray()
    for e in elems:
        if isinstance(e, str):
            out += e.encode()
        elif e in b"*?\\":
            out += b"\\" + bytes([e])
        else:
            out.append(e)
    return bytes(out)


def glob_elems(glob: bytes) -> list[Elem]:
    """The elements of a glob form."""
    out: list[Elem] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if c == ord("\\") and i + 1 < len(glob):
            out.append(glob[i + 1])
            i += 2
        else:
            out.append(chr(c) if c in b"*?" else c)
            i += 1
    return out


def split_tokens(chars: Sequence[Char], table: frozenset[int] = DEFAULT_TABLE) -> list[bytes]:
    """Text value -> token patterns in glob form: split at unescaped delimiters except the
    wildcards `*` and `?`; escaped bytes never split; literals folded; long runs cut."""
    tokens: list[list[Elem]] = []
    cur: list[Elem] | None = None
    for c, esc in chars:
        if not esc and c in table and c not in b"*?":
            cur = None
            continue
        if cur is None:
            cur = []
            tokens.append(cur)
        cur.append(_elem(c, esc))
    return [glob_of(_cut_runs(t)) for t in tokens]


def only_stars(glob: bytes) -> bool:
    return bool(glob) and set(glob) == {ord("*")}


def has_wildcard(glob: bytes) -> bool:
    return any(isinstance(e, str) for e in glob_elems(glob))


# ---------------------------------------------------------------- parsing


class _Parser:
    def __init__(self, text: bytes, table: frozenset[int]) -> None:
        self.text = text
        self.table = table
        self.lx, self.lex_err = lex_until_error(text)
        self.i = 0
        self.depth = 0
        self.nodes = 0

    def peek(self) -> Lexeme | None:
        if self.i < len(self.lx):
            return self.lx[self.i]
        if self.lex_err is not None:
            raise self.lex_err
        return None

    def take(self) -> Lexeme:
        lx = self.lx[self.i]
        self.i += 1
        return lx

    def node(self, n: Node, pos: int) -> Node:
        """n, counted against QUERY_NODES. QUERY.md §1 leaves open in which order nodes count
        (and so where "too many" points): here a term when it is read, NOT after its operand,
        AND/OR when their second operand starts; the error points at that node's token."""
        self.count(pos)
        return n

    def count(self, pos: int) -> None:
        self.nodes += 1
        if self.nodes > QUERY_NODES:
            raise QueryError(pos, "too many terms in the query", toobig=True)

    def starts_unary(self, lx: Lexeme | None) -> bool:
        return lx is not None and lx.kind != ")" and not lx.is_op(b"OR") and not lx.is_op(b"AND")

    def need_operand(self, op: Lexeme) -> None:
        if not self.starts_unary(self.peek()):
            name = bytes(b for b, _ in op.chars).decode()
            nxt = self.peek()
            raise QueryError(nxt.pos if nxt else len(self.text), f"expected a term after '{name}'")

    def parse(self) -> Node:
        if not self.lx and self.lex_err is None:
            raise QueryError(0, "empty query")
        q = self.or_()
        lx = self.peek()
        if lx is not None:
            raise QueryError(lx.pos, "unbalanced ')'" if lx.kind == ")" else "unexpected")
        return q

    def or_(self) -> Node:
        kids = [self.and_()]
        while (lx := self.peek()) is not None and lx.is_op(b"OR"):
            self.take()
            self.need_operand(lx)
            if len(kids) == 1:
                self.count(self.peek_pos())
            kids.append(self.and_())
        return flatten(Or, kids) if len(kids) > 1 else kids[0]

    def and_(self) -> Node:
        kids = [self.unary()]
        while True:
            lx = self.peek()
            if lx is not None and lx.is_op(b"AND"):
                self.take()
                self.need_operand(lx)
            elif not self.starts_unary(lx):
                break
            if len(kids) == 1:
                self.count(self.peek_pos())
            kids.append(self.unary())
        return flatten(And, kids) if len(kids) > 1 else kids[0]

    def peek_pos(self) -> int:
        lx = self.peek()
        return lx.pos if lx is not None else len(self.text)

    def unary(self) -> Node:
        lx = self.peek()
        if lx is None:
            raise QueryError(len(self.text), "expected a term at the end")
        if lx.kind == ")":
            raise QueryError(lx.pos, "unbalanced ')'")
        if lx.is_op(b"AND") or lx.is_op(b"OR"):
            raise QueryError(lx.pos, f"expected a term before '{lx.bare().decode()}'")
        self.take()
        if lx.is_op(b"NOT"):
            self.need_operand(lx)
            self.enter(lx.pos)
            kid = self.unary()
            self.depth -= 1
            return self.node(Not(kid), lx.pos)
        if lx.kind == "(":
            self.enter(lx.pos)
            if self.peek() is not None and self.peek().kind == ")":
                raise QueryError(self.peek().pos, "expected a term after '('")
            q = self.or_()
            close = self.peek()
            if close is None or close.kind != ")":
                where = close.pos if close is not None else len(self.text)
                raise QueryError(where, f"expected ')' to close '(' at {lx.pos}")
            self.take()
            self.depth -= 1
            return q
        return self.term(lx)

    def enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > QUERY_DEPTH:
            raise QueryError(pos, "the query nests too deep")

    def glued_quote(self, word: Lexeme) -> Lexeme | None:
        """The quoted string right after word (no space between), taken. Looks at the next
        lexeme only when a quote follows the word directly, as lb_query.c does: a lexing error
        further on must not win over the word's own error."""
        if word.end >= len(self.text) or self.text[word.end] != ord('"'):
            return None
        lx = self.peek()
        if lx is not None and lx.kind == "quoted" and lx.pos == word.end:
            return self.take()
        return None

    def term(self, lx: Lexeme) -> Node:
        if lx.kind == "quoted":
            return self.node(text_node(split_tokens(lx.chars, self.table), lx.pos, NS_TEXT), lx.pos)
        chars = lx.chars
        rng = severity_range(chars)
        if rng is not None:
            op, value = rng
            if not value and (q := self.glued_quote(lx)) is not None:
                value = q.chars
            return self.node(Set(NS_SEVERITY, severity_mask(op, value, lx.pos)), lx.pos)
        colon = next((k for k, (c, esc) in enumerate(chars) if c == ord(":") and not esc), None)
        name = bytes(c for c, _ in chars[:colon]) if colon else b""
        escaped_name = colon is not None and any(esc for _, esc in chars[:colon])
        kind = None if escaped_name or colon is None else field_kind(name)
        if kind is None:
            return self.node(text_node(split_tokens(chars, self.table), lx.pos, NS_TEXT), lx.pos)
        assert colon is not None
        value = chars[colon + 1 :]
        if not value and (q := self.glued_quote(lx)) is not None:
            value = q.chars
        if not value:
            raise QueryError(lx.pos, f"expected a value after '{name.decode('latin-1')}:'")
        return self.node(field_node(kind, name, value, lx.pos, self.table), lx.pos)


def flatten(kind: type[And] | type[Or], kids: Iterable[Node]) -> Node:
    """AND/OR of the same kind flattened into one."""
    out: list[Node] = []
    for k in kids:
        out.extend(k.kids if isinstance(k, kind) else [k])
    return kind(tuple(out))


def text_node(tokens: list[bytes], pos: int, ns: int, sdname: bytes | None = None) -> Node:
    """Text tokens -> ALL / TERM / PHRASE."""
    if not tokens:
        raise QueryError(pos, "nothing to search for")
    if len(tokens) == 1:
        if ns == NS_TEXT and only_stars(tokens[0]):
            return All()
        return Term(ns, tokens[0], sdname)
    return Phrase(ns, tuple(tokens), sdname)


def field_kind(name: bytes) -> str | None:
    """ "host", ..., "peer", "message", "facility", "severity", "sd" or None (a text word)."""
    low = name.lower()
    if low in (
        b"host", b"program", b"pid", b"msgid", b"peer", b"message", b"facility", b"severity",
    ):  # fmt: skip
        return low.decode()
    return "sd" if is_sd_name(name) else None


def is_sd_name(name: bytes) -> bool:
    """`<sd-id>.<param>`: sd-id holds `@` or is an IANA one; param not empty."""
    sdid, dot, param = name.partition(b".")
    return bool(dot) and bool(param) and bool(sdid) and (b"@" in sdid or sdid in SD_IDS)


def field_node(kind: str, name: bytes, value: list[Char], pos: int, table: frozenset[int]) -> Node:
    if kind in FIELD_NS:
        return Term(FIELD_NS[kind], glob_of(_cut_runs([_elem(c, e) for c, e in value])))
    if kind == "message":
        return text_node(split_tokens(value, table), pos, NS_TEXT)
    if kind == "sd":
        return text_node(split_tokens(value, table), pos, NS_SD, name)
    word = bytes(c for c, _ in value).lower()
    if kind == "facility":
        v = _lookup(word, FACILITIES, {}, 23)
        if v is None:
            raise QueryError(pos, f"unknown facility '{word.decode('latin-1')}'")
        return Set(NS_FACILITY, 1 << v)
    v = _lookup(word, SEVERITIES, SEVERITY_ALIASES, 7)
    if v is None:
        raise QueryError(pos, f"unknown severity '{word.decode('latin-1')}'")
    return Set(NS_SEVERITY, 1 << v)


def _lookup(word: bytes, names: list[str], aliases: dict[str, int], top: int) -> int | None:
    if re.fullmatch(rb"[0-9]+", word):
        return int(word) if int(word) <= top else None
    s = word.decode("latin-1")
    if s in names:
        return names.index(s)
    return aliases.get(s)


def severity_range(chars: list[Char]) -> tuple[str, list[Char]] | None:
    """(operator, value) for a word `severity<=x`, `<x`, `>=x`, `>x`; else None."""
    head = bytes(c for c, _ in chars[:8]).lower()
    if head != b"severity" or any(e for _, e in chars[:8]) or len(chars) < 9:
        return None
    c, esc = chars[8]
    if esc or c not in b"<>":
        return None
    if len(chars) > 9 and chars[9] == (ord("="), False):
        return chr(c) + "=", chars[10:]
    return chr(c), chars[9:]


def severity_mask(op: str, value: list[Char], pos: int) -> int:
    word = bytes(c for c, _ in value).lower()
    if not word:
        raise QueryError(pos, f"expected a value after 'severity{op}'")
    v = _lookup(word, SEVERITIES, SEVERITY_ALIASES, 7)
    if v is None:
        raise QueryError(pos, f"unknown severity '{word.decode('latin-1')}'")
    lo, hi = {"<=": (0, v), "<": (0, v - 1), ">=": (v, 7), ">": (v + 1, 7)}[op]
    if lo > hi:
        raise QueryError(pos, f"no severity is 'severity{op}{word.decode()}'")
    return sum(1 << s for s in range(lo, hi + 1))


def parse(text: bytes | str, table: frozenset[int] = DEFAULT_TABLE) -> Node:
    """The tree of a query; raises QueryError."""
    if isinstance(text, str):
        text = text.encode("utf-8", "surrogateescape")
    if len(text) > QUERY_MAX:
        raise QueryError(QUERY_MAX, "the query is too long", toobig=True)
    return _Parser(text, table).parse()


# ---------------------------------------------------------------- canonical form


def _escape(glob: bytes, table: frozenset[int]) -> bytes:
    out = bytearray()
    for e in glob_elems(glob):
        if isinstance(e, str):
            out += e.encode()
        elif e < 0x20 or e == 0x7F or e in table or e in b'()"\\:*?' or e in WHITESPACE:
            out += b"\\" + bytes([e])
        else:
            out.append(e)
    return bytes(out)


def fmt(q: Node, table: frozenset[int] = DEFAULT_TABLE) -> bytes:
    """The canonical text of a tree (QUERY.md §1 "Canonical form")."""
    if isinstance(q, All):
        return b"*"
    if isinstance(q, Term):
        pat = _escape(q.pat, table)
        if q.ns == NS_TEXT:
            return pat
        if q.ns == NS_SD:
            assert q.sdname is not None
            return q.sdname + b":" + pat
        return NS_FIELD[q.ns].encode() + b":" + pat
    if isinstance(q, Phrase):
        body = b'"' + b" ".join(_escape(p, table) for p in q.pats) + b'"'
        return body if q.ns == NS_TEXT else (q.sdname or b"") + b":" + body
    if isinstance(q, Set):
        return _fmt_set(q).encode()
    if isinstance(q, Not):
        return b"NOT " + _fmt_kid(q.kid, q, table)
    sep = b" AND " if isinstance(q, And) else b" OR "
    return sep.join(_fmt_kid(k, q, table) for k in q.kids)


def _fmt_kid(kid: Node, parent: Node, table: frozenset[int]) -> bytes:
    paren = isinstance(kid, Or) and isinstance(parent, And | Not)
    paren = paren or (isinstance(kid, And) and isinstance(parent, Not))
    s = fmt(kid, table)
    return b"(" + s + b")" if paren else s


def _fmt_set(q: Set) -> str:
    bits = [v for v in range(24) if q.mask >> v & 1]
    if q.ns == NS_FACILITY:
        return f"facility:{FACILITIES[bits[0]]}"
    if len(bits) == 1:
        return f"severity:{SEVERITIES[bits[0]]}"
    if bits[0] == 0:
        return f"severity<={SEVERITIES[bits[-1]]}"
    return f"severity>={SEVERITIES[bits[0]]}"


# ---------------------------------------------------------------- messages and their terms


@dataclass(frozen=True)
class Msg:
    """One stored message as `logbox cat` gives it (byte strings via surrogateescape)."""

    id: int
    received_us: int
    host: bytes
    program: bytes
    pid: bytes
    msgid: bytes
    facility: int | None
    severity: int | None
    sd: bytes
    message: bytes
    peer: bytes = b""

    @classmethod
    def from_json(cls, rec: dict[str, Any]) -> Msg:
        def b(key: str) -> bytes:
            v = rec.get(key)
            return v.encode("utf-8", "surrogateescape") if v else b""

        return cls(
            id=rec["id"],
            received_us=rec["received_us"],
            host=b("host"),
            program=b("program"),
            pid=b("pid"),
            msgid=b("msgid"),
            facility=rec.get("facility"),
            severity=rec.get("severity"),
            sd=b("sd"),
            message=b("message"),
            peer=b("peer"),
        )


# (namespace, bytes, flags); SD bytes are sdname 0x00 token. flags: TERM_FORM for a form of
# the text token before it, with FORM_START / FORM_END as lb_token_forms gives them; every
# other term FORM_START | FORM_END.
TermT = tuple[int, bytes, int]
WHOLE = FORM_START | FORM_END


def msg_terms(m: Msg, table: frozenset[int] = DEFAULT_TABLE) -> list[TermT]:
    """lb_msg_terms2: text tokens in order, each followed by its forms, host, program, pid,
    msgid, peer (whole value, folded, cut at TOKEN_MAX, only when non-empty), facility,
    severity (one byte each, when known), then the structured-data terms."""
    out = text_terms(m.message, table)
    fields = (
        (NS_HOST, m.host), (NS_PROGRAM, m.program), (NS_PID, m.pid), (NS_MSGID, m.msgid),
        (NS_PEER, m.peer),
    )  # fmt: skip
    for ns, v in fields:
        if v:
            out.append((ns, fold(v[:TOKEN_MAX]), WHOLE))
    if m.facility is not None:
        out.append((NS_FACILITY, bytes([m.facility]), WHOLE))
    if m.severity is not None:
        out.append((NS_SEVERITY, bytes([m.severity]), WHOLE))
    return out + sd_terms(m.sd, table)


def text_terms(text: bytes, table: frozenset[int] = DEFAULT_TABLE) -> list[TermT]:
    """The text terms of a message: each token, then its forms."""
    out: list[TermT] = []
    for t in tokenize(text, table):
        out.append((NS_TEXT, t, WHOLE))
        out += [(NS_TEXT, f, fl | TERM_FORM) for f, _, fl in forms(t)]
    return out


def _sd_name(sd: bytes, i: int, stop: bytes) -> tuple[int, bytes]:
    """Name bytes from i up to a byte of stop (or NUL: lb_terms.c uses strchr); cut at 64."""
    start = i
    while i < len(sd) and sd[i] not in stop and sd[i] != 0:
        i += 1
    return i, sd[start : min(i, start + SD_NAME_MAX)]


def sd_terms(sd: bytes, table: frozenset[int] = DEFAULT_TABLE) -> list[TermT]:
    """The SD terms of `[id name="value" ...]...`; malformed text ends the walk quietly."""
    out: list[TermT] = []
    i, n = 0, len(sd)
    while i < n and sd[i] == ord("["):
        i, sdid = _sd_name(sd, i + 1, b" ]")
        while i < n and sd[i] == ord(" "):
            i, pname = _sd_name(sd, i + 1, b"= ]")
            if i + 1 >= n or sd[i] != ord("=") or sd[i + 1] != ord('"'):
                return out
            i += 2
            val = bytearray()
            while i < n and sd[i] != ord('"'):
                if sd[i] == ord("\\") and i + 1 < n and sd[i + 1] in b'"\\]':
                    i += 1
                if len(val) < SD_MAX:
                    val.append(sd[i])
                i += 1
            if i >= n:
                return out
            i += 1
            head = sdid + b"." + pname + b"\x00"
            out += [(NS_SD, head + t, WHOLE) for t in tokenize(bytes(val), table)]
        if i >= n or sd[i] != ord("]"):
            return out
        i += 1
    return out


# ---------------------------------------------------------------- glob matching


@lru_cache(maxsize=65536)
def glob_regex(glob: bytes) -> re.Pattern[bytes]:
    """A compiled regular expression equal to the glob (whole string, any bytes)."""
    parts = []
    for e in glob_elems(glob):
        if e == "*":
            parts.append(b".*")
        elif e == "?":
            parts.append(b".")
        else:
            assert isinstance(e, int)
            parts.append(re.escape(bytes([e])))
    return re.compile(b"".join(parts), re.DOTALL)


def glob_match(glob: bytes, s: bytes) -> bool:
    """Whether s matches glob (glob form)."""
    return glob_regex(glob).fullmatch(s) is not None


def glob_match_slow(glob: bytes, s: bytes) -> bool:
    """The same by dynamic programming, to check glob_match against."""
    elems = glob_elems(glob)
    ok = [True] + [False] * len(s)  # ok[j]: elems so far match s[:j]
    for e in elems:
        new = [False] * (len(s) + 1)
        for j in range(len(s) + 1):
            if e == "*":
                new[j] = ok[j] or (j > 0 and new[j - 1])
            elif j > 0 and ok[j - 1] and (e == "?" or e == s[j - 1]):
                new[j] = True
        ok = new
    return ok[len(s)]


# ---------------------------------------------------------------- brute-force match


def _term_ok(t: TermT, ns: int, pat: bytes, sdname: bytes | None) -> bool:
    if t[0] != ns:
        return False
    if ns != NS_SD:
        return glob_match(pat, t[1])
    assert sdname is not None
    head = sdname + b"\x00"
    return t[1].startswith(head) and glob_match(pat, t[1][len(head) :])


def phrase_need(k: int, n: int) -> int:
    """The flags a term needs to stand for word k of an n-word phrase: the first word may end
    a token (its stripped form or last part), the last may start one, the others are whole
    tokens or stripped forms."""
    if n == 1:
        return 0
    return (FORM_START if k > 0 else 0) | (FORM_END if k + 1 < n else 0)


def _groups(terms: Sequence[TermT]) -> list[list[TermT]]:
    """The terms grouped per token: each term that is not a form, with the forms after it."""
    out: list[list[TermT]] = []
    for t in terms:
        if t[2] & TERM_FORM and out:
            out[-1].append(t)
        else:
            out.append([t])
    return out


def matches(q: Node, terms: Sequence[TermT]) -> bool:
    """lb_query_match: whether a message with this term sequence matches q."""
    if isinstance(q, All):
        return True
    if isinstance(q, Term):
        return any(_term_ok(t, q.ns, q.pat, q.sdname) for t in terms)
    if isinstance(q, Phrase):
        groups = _groups(terms)
        k = len(q.pats)
        return any(
            all(
                any(
                    t[2] & phrase_need(j, k) == phrase_need(j, k)
                    and _term_ok(t, q.ns, q.pats[j], q.sdname)
                    for t in groups[i + j]
                )
                for j in range(k)
            )
            for i in range(len(groups) - k + 1)
        )
    if isinstance(q, Set):
        byte = [t[1][0] for t in terms if t[0] == q.ns]
        return bool(byte) and bool(q.mask >> byte[0] & 1)
    if isinstance(q, And):
        return all(matches(k, terms) for k in q.kids)
    if isinstance(q, Or):
        return any(matches(k, terms) for k in q.kids)
    return not matches(q.kid, terms)


# ---------------------------------------------------------------- search over a corpus


def bits(x: int) -> list[int]:
    """The positions of the set bits of x, ascending."""
    s = bin(x)[:1:-1]
    out = []
    i = s.find("1")
    while i >= 0:
        out.append(i)
        i = s.find("1", i + 1)
    return out


@dataclass
class Result:
    ids: list[int]
    next_cursor: int
    total: int


class Corpus:
    """Messages (in id order) with the terms of each and bit sets per term (bit i = the i-th
    message), so that a query is answered for all messages at once."""

    def __init__(self, msgs: Sequence[Msg], table: frozenset[int] = DEFAULT_TABLE) -> None:
        self.msgs = list(msgs)
        self.table = table
        self.terms = [msg_terms(m, table) for m in self.msgs]
        self.received = [m.received_us for m in self.msgs]
        self.in_order = self.received == sorted(self.received)
        self.universe = (1 << len(self.msgs)) - 1
        self.postings: dict[tuple[int, bytes], int] = {}
        for i, ts in enumerate(self.terms):
            for t in {(t[0], t[1]) for t in ts}:
                self.postings[t] = self.postings.get(t, 0) | (1 << i)
        self.vocab: dict[int, list[bytes]] = {}
        for ns, b in self.postings:
            self.vocab.setdefault(ns, []).append(b)
        for v in self.vocab.values():
            v.sort()
        self._cache: dict[tuple[int, bytes, bytes | None], int] = {}

    def term_bits(self, ns: int, pat: bytes, sdname: bytes | None = None) -> int:
        """Messages holding a term of ns (and sdname) that pat matches."""
        key = (ns, pat, sdname)
        if key not in self._cache:
            self._cache[key] = self._term_bits(ns, pat, sdname)
        return self._cache[key]

    def _term_bits(self, ns: int, pat: bytes, sdname: bytes | None) -> int:
        head = b"" if sdname is None else sdname + b"\x00"
        elems = glob_elems(pat)
        lit = next((k for k, e in enumerate(elems) if isinstance(e, str)), len(elems))
        prefix = head + bytes(e for e in elems[:lit] if isinstance(e, int))
        if lit == len(elems):
            return self.postings.get((ns, prefix), 0)
        vocab = self.vocab.get(ns, [])
        out = 0
        j = bisect.bisect_left(vocab, prefix)
        rx = glob_regex(pat)
        while j < len(vocab) and vocab[j].startswith(prefix):
            if rx.fullmatch(vocab[j], len(head)):
                out |= self.postings[(ns, vocab[j])]
            j += 1
        return out

    def eval(self, q: Node) -> int:
        """The bit set of the messages matching q."""
        if isinstance(q, All):
            return self.universe
        if isinstance(q, Term):
            return self.term_bits(q.ns, q.pat, q.sdname)
        if isinstance(q, Phrase):
            cand = self.universe
            for p in q.pats:
                cand &= self.term_bits(q.ns, p, q.sdname)
            out = 0
            for i in bits(cand):
                if matches(q, self.terms[i]):
                    out |= 1 << i
            return out
        if isinstance(q, Set):
            out = 0
            for v in range(24):
                if q.mask >> v & 1:
                    out |= self.postings.get((q.ns, bytes([v])), 0)
            return out
        if isinstance(q, And):
            out = self.universe
            for k in q.kids:
                out &= self.eval(k)
            return out
        if isinstance(q, Or):
            out = 0
            for k in q.kids:
                out |= self.eval(k)
            return out
        return self.universe & ~self.eval(q.kid)

    def in_range(self, from_us: int, to_us: int) -> int:
        """Bit set of the messages received in [floor_s(from), ceil_s(to))."""
        lo, hi = floor_s(from_us), ceil_s(to_us)
        if not self.in_order:
            return sum(1 << i for i, r in enumerate(self.received) if lo <= r < hi)
        a = bisect.bisect_left(self.received, lo)
        b = max(a, bisect.bisect_left(self.received, hi))
        return ((1 << b) - 1) ^ ((1 << a) - 1)

    def matching(self, q: Node, from_us: int, to_us: int) -> list[Msg]:
        """The matching messages in the time range, in id order."""
        return [self.msgs[i] for i in bits(self.eval(q) & self.in_range(from_us, to_us))]


def floor_s(us: int) -> int:
    return us // 1_000_000 * 1_000_000


def ceil_s(us: int) -> int:
    return -(-us // 1_000_000) * 1_000_000


def page(ids: Sequence[int], order: str, limit: int, cursor: int = 0) -> Result:
    """Hits of one page: ids (ascending) in order, after cursor, at most limit."""
    seq = sorted(ids, reverse=order == "newest")
    if cursor:
        seq = [i for i in seq if (i < cursor if order == "newest" else i > cursor)]
    hits = seq[:limit]
    nxt = hits[-1] if len(seq) > limit else 0
    return Result(hits, nxt, len(ids))


def hist_step(from_us: int, to_us: int, nbuckets: int) -> int:
    """max(1 s, ceil((to - from) / nbuckets) rounded up to whole seconds) on the rounded range."""
    span = ceil_s(to_us) - floor_s(from_us)
    return max(1_000_000, ceil_s(-(-span // nbuckets)))


def histogram(
    received: Iterable[int], from_us: int, to_us: int, nbuckets: int
) -> tuple[int, int, list[int]]:
    """(hist_from, step, counts): bucket k = [from + k*step, from + (k+1)*step) cut at to."""
    lo, hi = floor_s(from_us), ceil_s(to_us)
    step = hist_step(from_us, to_us, nbuckets)
    n = -(-(hi - lo) // step)
    counts = [0] * n
    for r in received:
        assert lo <= r < hi
        counts[(r - lo) // step] += 1
    return lo, step, counts


def top_values(
    msgs: Iterable[Msg],
    ns: int,
    k: int,
    sdname: bytes | None = None,
    table: frozenset[int] = DEFAULT_TABLE,
) -> list[tuple[bytes, int]]:
    """Top k (value, count) of a field over msgs: each message counts once per distinct value;
    count descending, then value bytes ascending."""
    return top_of_terms((msg_terms(m, table) for m in msgs), ns, k, sdname)


def top_of_terms(
    term_lists: Iterable[Iterable[TermT]], ns: int, k: int, sdname: bytes | None = None
) -> list[tuple[bytes, int]]:
    """Top k (value, count) of a field over messages given by their terms, the rule of
    top_values and corpus_top: each message counts once per distinct value; count descending,
    then value bytes ascending."""
    head = None if sdname is None else sdname + b"\x00"
    counts: dict[bytes, int] = {}
    for terms in term_lists:
        vals = set()
        for t in terms:
            if t[0] != ns:
                continue
            if head is None:
                vals.add(t[1])
            elif t[1].startswith(head):
                vals.add(t[1][len(head) :])
        for v in vals:
            counts[v] = counts.get(v, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def corpus_top(
    c: Corpus, sel: int, ns: int, k: int, sdname: bytes | None = None
) -> list[tuple[bytes, int]]:
    """top_values over the messages of bit set sel, from the corpus's cached terms."""
    return top_of_terms((c.terms[i] for i in bits(sel)), ns, k, sdname)
