"""A plain Python tokenizer implementing DESIGN.md "Tokens" (FORMAT.md §6) on bytes, and
brute-force matchers over a list of messages. It is the ground truth the store is checked
against, so it is written for obviousness, not speed.

- A token is a maximal run of bytes that are not delimiters: ASCII whitespace 09-0d and 20,
  plus the delimiter set (default ``& : ~ ? ! [ ] = , ; ( ) ' " / \\ | < > { } *``).
- ASCII A-Z fold to a-z; every other byte (NUL, controls, bytes >= 0x80) is kept as it is.
- A token longer than TOKEN_MAX bytes is cut there; the rest of the run is skipped.
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


def token_set(msg: bytes, table: frozenset[int] = DEFAULT_TABLE) -> set[bytes]:
    """The distinct tokens of msg."""
    return set(tokenize(msg, table))


def ids_with_token(
    messages: Sequence[bytes], tok: bytes, first_id: int = 1, table: frozenset[int] = DEFAULT_TABLE
) -> list[int]:
    """Ids (messages[i] has id first_id + i) of the messages containing token tok (folded here)."""
    want = fold(tok)
    return [first_id + i for i, m in enumerate(messages) if want in token_set(m, table)]


def ids_with_prefix(
    messages: Sequence[bytes],
    prefix: bytes,
    first_id: int = 1,
    table: frozenset[int] = DEFAULT_TABLE,
) -> list[int]:
    """Ids of the messages with at least one token starting with prefix (folded here)."""
    want = fold(prefix)
    return [
        first_id + i
        for i, m in enumerate(messages)
        if any(t.startswith(want) for t in tokenize(m, table))
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
