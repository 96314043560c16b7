# Scenario: the store gives back exactly what it was sent and finds exactly what a brute-force
# Python oracle finds. The loghub samples (RFC 5424, ~32k messages, MSG = the original line) and
# a seeded random corpus (octet framing, every edge case: empty, multi-line, NUL, bytes >= 0x80,
# invalid UTF-8, tokens over 255 bytes, a message over 256 KiB, structured data) are ingested
# twice: into one store in a single invocation, and into another in three invocations (ids must
# continue). In both: `cat` returns every message byte-identical with its header fields and
# flags; `lookup` of ~300 sampled tokens, every token of a few messages and the edge tokens,
# ~50 prefixes, and host/program/severity/facility/sd field terms equal the oracle's id sets;
# `verify` passes and `stats` counts every message.
from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lbtest import corpus, oracle
from lbtest.cli import Logbox, ingest_summary, message_bytes
from lbtest.corpus import Expected

SEED = 20261122
N_RANDOM = 3000
N_TOKENS = 300
N_PREFIXES = 50

pytestmark = pytest.mark.slow


@dataclass
class Loaded:
    """A store loaded with the whole corpus, and what ingest said each time."""

    lb: Logbox
    summaries: list[tuple[int, int, int]]
    t_start_us: int
    t_end_us: int


@pytest.fixture(scope="module")
def loghub() -> list[Expected]:
    try:
        return corpus.loghub_corpus()
    except FileNotFoundError as e:
        pytest.fail(f"the loghub samples must be there: {e}")


@pytest.fixture(scope="module")
def randoms() -> list[Expected]:
    return corpus.random_corpus(SEED, N_RANDOM)


@pytest.fixture(scope="module")
def expected(loghub: list[Expected], randoms: list[Expected]) -> list[Expected]:
    """Every message in id order: message i (0-based) must get id i + 1."""
    return loghub + randoms


@pytest.fixture(scope="module")
def index(expected: list[Expected]) -> oracle.Index:
    return oracle.Index(e.message for e in expected)


def _now_us() -> int:
    return time.time_ns() // 1000


@pytest.fixture(scope="module", params=["one-invocation", "three-invocations"])
def loaded(
    request: pytest.FixtureRequest,
    store_cli: Path,
    tmp_path_factory: pytest.TempPathFactory,
    loghub: list[Expected],
    randoms: list[Expected],
) -> Loaded:
    data = tmp_path_factory.mktemp(request.param) / "data"
    data.mkdir()
    lb = Logbox(store_cli, data)
    t0 = _now_us()
    if request.param == "one-invocation":
        everything = corpus.octet_frames(e.raw for e in loghub + randoms)
        runs = [lb.ingest(everything, framing="octet")]
    else:
        half = len(loghub) // 2
        runs = [
            lb.ingest(corpus.line_frames(e.raw for e in loghub[:half])),
            lb.ingest(corpus.line_frames(e.raw for e in loghub[half:])),
            lb.ingest(corpus.octet_frames(e.raw for e in randoms), framing="octet"),
        ]
    return Loaded(lb, [ingest_summary(p.stderr) for p in runs], t0, _now_us())


def _fail_if(problems: Sequence[str], what: str, limit: int = 15) -> None:
    if problems:
        shown = "\n  ".join(problems[:limit])
        more = f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""
        pytest.fail(f"{len(problems)} {what}:\n  {shown}{more}", pytrace=False)


def test_ingest_assigns_consecutive_ids(loaded: Loaded, expected: list[Expected]) -> None:
    next_id = 1
    for n, first, last in loaded.summaries:
        assert (first, last) == (
            next_id,
            next_id + n - 1,
        ), f"ingest summaries {loaded.summaries}: ids must continue from {next_id}"
        next_id = last + 1
    assert next_id - 1 == len(expected), f"ingested {next_id - 1}, sent {len(expected)}"


def _nil(v: Any) -> Any:
    # indexer/cli/README.md says header fields are strings; an absent one ("-") may come as "" or null.
    return None if v == "" else v


def _time_us(text: str | None) -> int | None:
    if text is None:
        return None
    when = dt.datetime.fromisoformat(text)
    return (when - corpus._EPOCH) // dt.timedelta(microseconds=1)


def _diff(rec: dict[str, Any], e: Expected) -> list[str]:
    """What differs between a cat record and the expected message."""
    out = []
    msg = message_bytes(rec.get("message"))
    if msg != e.message:
        at = next((i for i, (a, b) in enumerate(zip(msg, e.message, strict=False)) if a != b), None)
        at = at if at is not None else min(len(msg), len(e.message))
        out.append(
            f"message differs at byte {at} (got {len(msg)} bytes, want {len(e.message)}): "
            f"got {msg[max(0, at - 10) : at + 30]!r}, want {e.message[max(0, at - 10) : at + 30]!r}"
        )
    for key, want in [
        ("host", e.host),
        ("program", e.program),
        ("pid", e.pid),
        ("msgid", e.msgid),
        ("facility", e.facility),
        ("severity", e.severity),
        ("timestamp_us", e.timestamp_us),
    ]:
        if _nil(rec.get(key)) != want:
            out.append(f"{key}: got {rec.get(key)!r}, want {want!r}")
    if rec.get("peer") != "":  # logbox ingest reads a file: no sender (FORMAT.md §10.4)
        out.append(f"peer: got {rec.get('peer')!r}, want ''")
    sd = message_bytes(rec.get("sd"), "sd")
    if sd != e.sd:
        out.append(f"sd: got {sd[:100]!r}, want {e.sd[:100]!r}")
    if set(rec.get("flags") or []) != set(e.flags):
        out.append(f"flags: got {rec.get('flags')!r}, want {sorted(e.flags)!r}")
    if rec.get("timestamp") is not None and _time_us(rec["timestamp"]) != rec.get("timestamp_us"):
        out.append(f"timestamp {rec['timestamp']!r} is not timestamp_us {rec.get('timestamp_us')}")
    if _time_us(rec.get("received")) != rec.get("received_us"):
        out.append(f"received {rec.get('received')!r} is not received_us {rec.get('received_us')}")
    return out


def test_cat_returns_every_message_exactly(loaded: Loaded, expected: list[Expected]) -> None:
    recs = loaded.lb.cat()
    ids = [r.get("id") for r in recs]
    assert ids == list(range(1, len(expected) + 1)), (
        f"cat returned {len(ids)} messages with ids {ids[:3]}...{ids[-3:]}, "
        f"want ids 1..{len(expected)}"
    )
    problems = []
    last_received = loaded.t_start_us - 1_000_000
    for rec, e in zip(recs, expected, strict=True):
        problems += [f"id {rec['id']} ({e.raw[:60]!r}): {d}" for d in _diff(rec, e)]
        received = rec.get("received_us")
        if not isinstance(received, int) or not (
            last_received <= received <= loaded.t_end_us + 1_000_000
        ):
            problems.append(
                f"id {rec['id']}: received_us {received} is not monotonic non-decreasing within "
                f"the ingest run [{loaded.t_start_us}, {loaded.t_end_us}]"
            )
        else:
            last_received = received
    _fail_if(problems, "differences between cat and what was sent")


def test_cat_id_range(loaded: Loaded, expected: list[Expected]) -> None:
    a, b = 31990, 32010
    recs = loaded.lb.cat(from_id=a, to_id=b)
    assert [r["id"] for r in recs] == list(range(a, b + 1))
    for rec in recs:
        assert message_bytes(rec["message"]) == expected[rec["id"] - 1].message, rec["id"]


def _argv_ok(term: bytes) -> bool:
    # argv cannot carry NUL; a leading "-" would read as an option (indexer/cli/README.md has no "--").
    return bool(term) and b"\x00" not in term and not term.startswith(b"-")


def _compare(
    lb: Logbox,
    questions: Sequence[tuple[str, bytes, dict[str, Any]]],
    want: Callable[[tuple[str, bytes, dict[str, Any]]], list[int]],
) -> list[str]:
    """Asks lookup every question (label, term, lookup kwargs) in parallel; the mismatches."""

    def one(q: tuple[str, bytes, dict[str, Any]]) -> str | None:
        label, term, kw = q
        got, w = lb.lookup(term, **kw), want(q)
        if got == w:
            return None
        missing, extra = sorted(set(w) - set(got)), sorted(set(got) - set(w))
        order = "" if got == sorted(set(got)) else " (not ascending/unique)"
        return (
            f"{label} {term[:60]!r}: got {len(got)} ids, want {len(w)}{order}; "
            f"missing {missing[:8]}, extra {extra[:8]}"
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        return [r for r in pool.map(one, questions) if r]


def _edge_tokens() -> list[bytes]:
    return [
        b"long" + b"x" * 251,
        b"y" * 255,
        b"z" * 255,
        b"w" * 255,
        b"a" * 254 + b"\xc3",
        bytes(range(0x80, 0x100)),
        b"caf\xc3\xa9",
        b"r\xe9sum\xe9",
        b"\xff\xfe",
        b"\xc0\xaf",
        b"\xed\xa0\x80",
        b"tail\x80",
        b"\xe6\x97\xa5\xe6\x9c\xac",
        b"31mred\x1b",
        b"\xef\xbb\xbfhere",
        b"10.0.0.1",
        b"bob@example.com",
        # forms (FORMAT.md §6): a stripped token, parts of compound tokens
        b"refused",
        b"existent",
        b"example",
        b"user",
        b"pid",
        b"2015-10-18",
        b"tag",
        b"connection",
        b"syslog",
        b"word0",
        b"word20000",
    ]


def test_lookup_tokens_match_oracle(
    loaded: Loaded, expected: list[Expected], index: oracle.Index
) -> None:
    rng = random.Random(SEED)
    terms = [t for t in index.terms() if _argv_ok(t)]
    sample = rng.sample(terms, N_TOKENS)
    # every token of a few messages: the edge cases and some loghub lines
    picks = [e.message for e in expected if b"Connection:Error /var" in e.message]
    picks += [
        e.message for e in expected if e.message.startswith((b"caf\xc3", b"\xff\xfe", b"high"))
    ]
    picks += [expected[i].message for i in rng.sample(range(len(expected) - N_RANDOM), 5)]
    for m in picks:
        sample += [t for t in oracle.tokenize(m) if _argv_ok(t)]
    edges = _edge_tokens()
    for t in edges:
        assert index.ids(t), f"the corpus lost its edge token {t[:40]!r}"
    sample += edges
    # the term is folded like the tokenizer folds: upper case finds the lower-case token
    sample += [b"CONNECTION", b"Syslog", b"LONG" + b"X" * 251]
    # a token nobody sent, and one only in the part of the long message that was cut away:
    # no ids, and still exit 0
    sample += [b"nosuchtokenanywhere", b"word29000"]
    assert not index.ids(b"word29000")
    questions = [("token", t, {}) for t in dict.fromkeys(sample)]
    _fail_if(_compare(loaded.lb, questions, lambda q: index.ids(q[1])), "token lookups differ")


def test_lookup_prefixes_match_oracle(loaded: Loaded, index: oracle.Index) -> None:
    rng = random.Random(SEED + 1)
    terms = [t for t in index.terms() if _argv_ok(t)]
    prefixes: dict[bytes, None] = {}
    while len(prefixes) < N_PREFIXES:
        t = rng.choice(terms)
        p = t[: rng.randint(1, 4)]
        if _argv_ok(p):
            prefixes[p] = None
    for p in [b"\xc3", b"\xff", b"long", b"10.0.", b"WORD3"]:
        prefixes[p] = None
    questions = [("prefix", p, {"prefix": True}) for p in prefixes]
    _fail_if(
        _compare(loaded.lb, questions, lambda q: index.prefix_ids(q[1])), "prefix lookups differ"
    )


def _field_index(expected: list[Expected], key: str) -> dict[bytes, list[int]]:
    out: dict[bytes, list[int]] = {}
    for i, e in enumerate(expected, start=1):
        v = getattr(e, key)
        if v is None:
            continue
        term = str(v).encode() if isinstance(v, int) else oracle.fold(v.encode())[:255]
        out.setdefault(term, []).append(i)
    return out


def _one_token(value: bytes) -> bool:
    return _argv_ok(value) and oracle.tokenize(value) == [oracle.fold(value)]


def test_lookup_fields_match_oracle(loaded: Loaded, expected: list[Expected]) -> None:
    rng = random.Random(SEED + 2)
    questions = []
    for key, field in [("host", "host"), ("program", "program"), ("pid", "pid")]:
        values = sorted(v for v in _field_index(expected, key) if _one_token(v))
        for v in rng.sample(values, min(40, len(values))):
            questions.append((key, v, {"field": field}))
    questions.append(("host", b"DB-02.EXAMPLE.COM", {"field": "host"}))  # folded
    questions.append(("program", b"SSHD", {"field": "program"}))
    for key in ["severity", "facility"]:
        for v in sorted(_field_index(expected, key)):
            questions.append((key, v, {"field": key}))
    indexes = {
        k: _field_index(expected, k) for k in ["host", "program", "pid", "severity", "facility"]
    }
    _fail_if(
        _compare(loaded.lb, questions, lambda q: indexes[q[0]].get(oracle.fold(q[1]), [])),
        "field lookups differ",
    )


def test_lookup_structured_data_matches_oracle(loaded: Loaded, expected: list[Expected]) -> None:
    # sd terms are "<sd-id>.<param>=<token of the value>"; only plain lower-case names and
    # values without escapes are asked, where indexer/cli/README.md leaves nothing open.
    sd: dict[bytes, set[int]] = {}
    for i, e in enumerate(expected, start=1):
        for sdid, name, value in corpus.sd_params(e.sd):
            if b"\\" in value or sdid != sdid.lower() or name != name.lower():
                continue
            for tok in oracle.tokenize(value):
                sd.setdefault(f"{sdid}.{name}=".encode() + tok, set()).add(i)
    asked = [t for t in sd if not t.startswith(b"meta@32473.seq=")]
    asked += [b"meta@32473.seq=17", b"meta@32473.seq=2999"]
    assert len(asked) > 5, sorted(sd)[:10]
    questions = [("sd", t, {"field": "sd"}) for t in asked if _argv_ok(t)]
    _fail_if(
        _compare(loaded.lb, questions, lambda q: sorted(sd.get(q[1], set()))), "sd lookups differ"
    )


def test_verify_passes(loaded: Loaded) -> None:
    p = loaded.lb.run("verify")
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 0, f"verify failed on a healthy store (exit {p.returncode}):\n{err}"
    assert p.stdout.startswith(b"ok"), f"verify printed no 'ok: ...' summary: {p.stdout[:200]!r}"


def test_stats_count_every_message(loaded: Loaded, expected: list[Expected]) -> None:
    s = loaded.lb.stats()
    keys = ["messages", "days", "segments", "raw_bytes", "disk_bytes", "messages_bytes"]
    keys += ["index_bytes", "catalog_bytes"]
    missing = [k for k in keys if not isinstance(s.get(k), int)]
    assert not missing, f"stats --json lacks integer keys {missing}: {s}"
    assert s["messages"] == len(expected), s
    assert s["days"] >= 1 and s["segments"] >= 1, s
    assert s["disk_bytes"] == s["messages_bytes"] + s["index_bytes"] + s["catalog_bytes"], s
