"""A plain Python tokenizer implementing DESIGN.md "Tokens" (FORMAT.md §6) on bytes, and
brute-force matchers over a list of messages. It is the ground truth the store is checked
against, so it is written for obviousness, not speed.

- A token is a maximal run of bytes that are not delimiters: ASCII whitespace 09-0d and 20,
  plus the delimiter set (default ``& : ~ ? ! [ ] = , ; ( ) ' " / \\ | < > { } *``).
- ASCII A-Z fold to a-z; every other byte (NUL, controls, bytes >= 0x80) is kept as it is.
- A token longer than TOKEN_MAX bytes is cut there; the rest of the run is skipped.
- A token's forms (lb_token_forms in indexer/lib/lb_tokenize.c) are findable too: the token
  without its leading and trailing ASCII punctuation, and the parts of that at . - _ @ / +
  (each stripped the same way; empty and all-digit parts left out) when there are two or more.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence

TOKEN_MAX = 255
WHITESPACE = b"\t\n\v\f\r "
DEFAULT_DELIMS = b"&:~?![]=,;()'\"/\\|<>{}*"

_FOLD = bytes(c + 32 if 0x41 <= c <= 0x5A else c for c in range(256))


def delimiter_table(delims: bytes = DEFAULT_DELIMS) -> frozenset[int]:
    """The set of byte values that end a token: whitespace plus delims.

    :raises ValueError: if delims holds an ASCII letter or digit (not allowed as a delimiter).
    """
    for c in delims:
        if chr(c).isascii() and chr(c).isalnum():
            raise ValueError(f"delimiter {chr(c)!r} is a letter or digit")
    return frozenset(WHITESPACE + delims)


DEFAULT_TABLE = delimiter_table()


def fold(data: bytes) -> bytes:
    """ASCII lower case; other bytes unchanged."""
    return data.translate(_FOLD)


def tokenize(msg: bytes, table: frozenset[int] = DEFAULT_TABLE) -> list[bytes]:
    """The tokens of msg in order: folded, each at most TOKEN_MAX bytes."""
    tokens = []
    i, n = 0, len(msg)
    while i < n:
        while i < n and msg[i] in table:
            i += 1
        if i == n:
            break
        start = i
        while i < n and msg[i] not in table:
            i += 1
        tokens.append(fold(msg[start : min(i, start + TOKEN_MAX)]))
    return tokens


PUNCT = frozenset(b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")  # lb_form_punct: ASCII punctuation
FORM_SEPS = frozenset(b".-_@/+")  # LB_FORM_SEPS
FORM_START, FORM_END, TERM_FORM = 1, 2, 4  # LB_FORM_START, LB_FORM_END, LB_TERM_FORM


def _strip(tok: bytes, a: int, b: int) -> tuple[int, int]:
    while a < b and tok[a] in PUNCT:
        a += 1
    while b > a and tok[b - 1] in PUNCT:
        b -= 1
    return a, b


def forms(tok: bytes) -> list[tuple[bytes, int, int]]:
    """lb_token_forms: (form, offset in tok, flags) for the stripped form (when it differs
    from tok and is not empty) and then each part, left to right, when there are two parts or
    more. FORM_START: the form begins the stripped token; FORM_END: it ends it."""
    a, b = _strip(tok, 0, len(tok))
    if a == b:
        return []
    out = []
    if b - a != len(tok):
        out.append((tok[a:b], a, FORM_START | FORM_END))
    cuts = [i for i in range(a, b) if tok[i] in FORM_SEPS]
    if not cuts:
        return out
    for s, e in zip([a] + [c + 1 for c in cuts], cuts + [b], strict=True):
        ps, pe = _strip(tok, s, e)
        part = tok[ps:pe]
        if part and not part.isdigit():
            out.append((part, ps, (FORM_START if s == a else 0) | (FORM_END if e == b else 0)))
    return out


def words(msg: bytes, table: frozenset[int] = DEFAULT_TABLE) -> list[bytes]:
    """The text terms of msg in order: each token, then its forms."""
    out = []
    for t in tokenize(msg, table):
        out.append(t)
        out += [f for f, _, _ in forms(t)]
    return out


def token_set(msg: bytes, table: frozenset[int] = DEFAULT_TABLE) -> set[bytes]:
    """The distinct text terms of msg: what a one-word query finds (tokens and their forms)."""
    return set(words(msg, table))


def ids_with_token(
    messages: Sequence[bytes], tok: bytes, first_id: int = 1, table: frozenset[int] = DEFAULT_TABLE
) -> list[int]:
    """Ids (messages[i] has id first_id + i) of the messages with text term tok (folded here): a
    token or a form of one."""
    want = fold(tok)
    return [first_id + i for i, m in enumerate(messages) if want in token_set(m, table)]


def ids_with_prefix(
    messages: Sequence[bytes],
    prefix: bytes,
    first_id: int = 1,
    table: frozenset[int] = DEFAULT_TABLE,
) -> list[int]:
    """Ids of the messages with at least one text term (a token or a form) starting with
    prefix (folded here)."""
    want = fold(prefix)
    return [
        first_id + i
        for i, m in enumerate(messages)
        if any(t.startswith(want) for t in words(m, table))
    ]


class Index:
    """An inverted index built by brute force: token -> sorted ids. Same answers as
    ids_with_token / ids_with_prefix, fast enough to ask hundreds of questions of 35k messages.
    """

    def __init__(
        self, messages: Iterable[bytes], first_id: int = 1, table: frozenset[int] = DEFAULT_TABLE
    ) -> None:
        postings: dict[bytes, list[int]] = {}
        for i, m in enumerate(messages):
            for t in token_set(m, table):
                postings.setdefault(t, []).append(first_id + i)
        self.postings = postings
        self._sorted = sorted(postings)

    def ids(self, tok: bytes) -> list[int]:
        """Ids of the messages containing tok (folded here)."""
        return list(self.postings.get(fold(tok), []))

    def prefix_ids(self, prefix: bytes) -> list[int]:
        """Ids of the messages with a token starting with prefix (folded here)."""
        want = fold(prefix)
        out: set[int] = set()
        for t in self.terms_with_prefix(want):
            out.update(self.postings[t])
        return sorted(out)

    def terms_with_prefix(self, prefix: bytes) -> Iterator[bytes]:
        """Every indexed token starting with prefix (already folded), in byte order."""
        i = bisect.bisect_left(self._sorted, prefix)
        while i < len(self._sorted) and self._sorted[i].startswith(prefix):
            yield self._sorted[i]
            i += 1

    def terms(self) -> list[bytes]:
        """Every indexed token, in byte order."""
        return list(self._sorted)
