"""logbox-eps's searchers: threads that, while a step's load is sent, loop a query mix through
the API (logbox_client) and time every answer, so that the report can put search latency under
load beside the EPS.

A mix is a list of (class, query). The class says what is asked and names the figures:
`count`, `histogram` and `top` (or `top:FIELD`) are those calls, any other class is one page of
a search (100 hits, with the total). The built-in mix (builtin_mix) uses words the load itself
carries, so that no query comes back empty; `--search-mix FILE` gives one of the user's
(read_mix). Threads, not processes: a searcher spends its time waiting for the box, and the
sender processes are apart (load.py).

Every query is recorded with its start, class and latency, or its error: an answer that is an
error (a bad query, too broad, too many requests) and no answer within the time-out are
counted apart, neither stops the run.
"""

from __future__ import annotations

import collections
import itertools
import math
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import requests
from logbox_client import Client, LogboxError

from .load import HEADER_LEN, SD_ID, corpus_lines, filler

SEARCH_FROM = "-1h"  # every query's range: the last hour, up to now
TIMEOUT_S = 30.0  # a query without an answer by then counts as a time-out
PAGE = 100  # hits in a search's page
BUCKETS = 60  # a histogram's buckets
TOP_K = 10  # a top query's values
TOP_FIELD = f"{SD_ID}.c"  # what `top` ranks unless the class names a field (`top:host`)
PERCENTILES = (50, 95, 99)
_WORD = re.compile(rb"[A-Za-z]{3,}")


class MixError(Exception):
    """A --search-mix file that cannot be used: the message says why."""


def payload_words(size: int, corpus: Path | None) -> tuple[list[str], tuple[str, str] | None]:
    """The words the load's messages carry, most frequent first, and two that stand side by
    side in them (for a phrase; None when there are none): the filler's, or the corpus'
    (its first 10,000 lines, words of three letters or more)."""
    lines = corpus_lines(corpus, 10_000) if corpus else [filler(size - HEADER_LEN)]
    freq: collections.Counter[str] = collections.Counter()
    pairs: collections.Counter[tuple[str, str]] = collections.Counter()
    for ln in lines:
        toks = ln.split()
        for tok in toks:
            if _WORD.fullmatch(tok):
                freq[tok.decode().lower()] += 1
        for a, b in itertools.pairwise(toks):
            if _WORD.fullmatch(a) and _WORD.fullmatch(b):
                pairs[(a.decode().lower(), b.decode().lower())] += 1
    words = [w for w, _ in freq.most_common()]
    return words, (pairs.most_common(1)[0][0] if pairs else None)


def builtin_mix(words: Sequence[str], pair: tuple[str, str] | None) -> list[tuple[str, str]]:
    """A typical mix over the load's words: one word, two with AND, a phrase, a prefix
    wildcard, a structured-data field, a count, a histogram and a top. Without words (a
    message that is all header) the text queries ask the field instead, so none is empty."""
    field = f"{SD_ID}.c:1"
    if not words:
        return [(c, field) for c in ("term", "and", "phrase", "wildcard", "field", "count",
                                     "histogram", "top")]  # fmt: skip
    w1 = words[0]
    w2 = words[1] if len(words) > 1 else w1
    w3 = words[2] if len(words) > 2 else w2
    return [
        ("term", w1),
        ("and", f"{w1} AND {w2}"),
        ("phrase", f'"{pair[0]} {pair[1]}"' if pair else w1),
        ("wildcard", f"{w3[:3]}*"),
        ("field", f"{field} AND {w2}"),
        ("count", w2),
        ("histogram", w3),
        ("top", w1),
    ]


def read_mix(path: Path) -> list[tuple[str, str]]:
    """The mix of a file: one `class<TAB>query` a line; empty lines and lines starting with #
    are skipped.

    :raises MixError: the file cannot be read, a line is not of that shape, or none is.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as e:
        raise MixError(f"--search-mix {path}: {e.strerror or e}") from None
    mix = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cls, tab, q = line.partition("\t")
        if not tab or not cls.strip() or not q.strip():
            raise MixError(f"--search-mix {path}:{n}: expected class<TAB>query, not {line!r:.60}")
        mix.append((cls.strip(), q.strip()))
    if not mix:
        raise MixError(f"--search-mix {path}: no queries")
    return mix


def ask(c: Client, cls: str, q: str, logspace: str) -> None:
    """One query of the mix, as its class says."""
    if cls == "count":
        c.count(q, logspace=logspace, from_=SEARCH_FROM)
    elif cls == "histogram":
        c.histogram(q, logspace=logspace, from_=SEARCH_FROM, buckets=BUCKETS)
    elif cls == "top" or cls.startswith("top:"):
        field = cls[4:] or TOP_FIELD
        c.top(q, field, logspace=logspace, from_=SEARCH_FROM, k=TOP_K)
    else:
        c.search(q, logspace=logspace, from_=SEARCH_FROM, limit=PAGE)


class Searchers:
    """n threads, each with its own API connection, looping the mix from start (time.time())
    until stop(); `done` holds every query answered, `failed` every error and time-out.
    Thread k uses tokens[k % len(tokens)] (api's token when there are none): the box runs
    only a few requests of one user at a time (searchd's --max-per-caller), so n searchers
    standing for n users need n users' tokens."""

    def __init__(self, api: Client, n: int, mix: Sequence[tuple[str, str]], logspace: str,
                 start: float, tokens: Sequence[str] = ()) -> None:  # fmt: skip
        self.api = api
        self.tokens = list(tokens) or [api.token]
        self.mix = list(mix)
        self.logspace = logspace
        self.start_at = start
        self.done: list[dict[str, Any]] = []  # {"t", "class", "ms"}
        self.failed: list[dict[str, Any]] = []  # {"t", "class", "ms", "error", "timeout"}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(i,), daemon=True)
                         for i in range(n)]  # fmt: skip

    def start(self) -> Searchers:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        """Ends the loops; a query under way is waited for (at most its time-out)."""
        self._stop.set()
        for t in self._threads:
            t.join(TIMEOUT_S + 5)

    def answered(self) -> int:
        return len(self.done)

    def _loop(self, i: int) -> None:
        token = self.tokens[i % len(self.tokens)]
        c = Client(self.api.url, token=token, verify=self.api.verify, timeout=TIMEOUT_S)
        # each thread starts elsewhere in the mix, so that n threads do not ask in step
        queries = itertools.islice(itertools.cycle(self.mix), i % len(self.mix), None)
        if self._stop.wait(max(0.0, self.start_at - time.time())):
            return
        try:
            for cls, q in queries:
                if self._stop.is_set():
                    return
                t, m0 = time.time(), time.monotonic()
                try:
                    ask(c, cls, q, self.logspace)
                except LogboxError as e:
                    ms = (time.monotonic() - m0) * 1000
                    timeout = isinstance(e.__cause__, requests.Timeout)
                    self.failed.append({"t": t, "class": cls, "ms": ms, "timeout": timeout,
                                        "error": f"{e.code}: {e.message}"})  # fmt: skip
                    if e.status == 0 and not timeout:
                        self._stop.wait(0.5)  # the box does not answer: do not spin
                    continue
                self.done.append({"t": t, "class": cls, "ms": (time.monotonic() - m0) * 1000})
        finally:
            c.close()


def percentile(sorted_ms: Sequence[float], p: float) -> float | None:
    """The p-th percentile by nearest rank (the smallest value that at least p % of them do
    not exceed); None of nothing."""
    if not sorted_ms:
        return None
    return sorted_ms[max(0, math.ceil(p / 100 * len(sorted_ms)) - 1)]


def figures(done: Sequence[dict[str, Any]], failed: Sequence[dict[str, Any]],
            seconds: float) -> dict[str, Any]:  # fmt: skip
    """count (answered), errors, timeouts, per_s and p50/p95/p99_ms of some queries."""
    ms = sorted(x["ms"] for x in done)
    out: dict[str, Any] = {
        "count": len(done),
        "errors": sum(not x["timeout"] for x in failed),
        "timeouts": sum(x["timeout"] for x in failed),
        "per_s": len(done) / seconds if seconds > 0 else 0.0,
    }
    for p in PERCENTILES:
        v = percentile(ms, p)
        out[f"p{p}_ms"] = round(v, 2) if v is not None else None
    return out


def step_figures(s: Searchers, mix: Sequence[tuple[str, str]], seconds: float) -> dict[str, Any]:
    """A step's search figures: in all and per class (every class of the mix, asked or not),
    the error messages (the first of each kind), and every latency (`latencies`: one per
    answered query, so `count` is their number)."""
    out = figures(s.done, s.failed, seconds)
    out["classes"] = {
        cls: figures(
            [x for x in s.done if x["class"] == cls],
            [x for x in s.failed if x["class"] == cls],
            seconds,
        )
        for cls in dict.fromkeys(c for c, _ in mix)
    }
    out["error_examples"] = list(dict.fromkeys(x["error"] for x in s.failed))[:5]
    out["latencies"] = [{"t": x["t"], "class": x["class"], "ms": round(x["ms"], 2)}
                        for x in s.done]  # fmt: skip
    return out
