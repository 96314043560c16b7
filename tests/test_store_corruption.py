# Scenario: damaged store files are reported, never crash a reader, never yield wrong data.
# A small store (480 messages of ~1 KiB in 4 ingest runs: several sealed message blocks and
# segments) is damaged, one damage per case, in a copy: each file logbox writes (the day's
# `messages`, `messages.wal` when non-empty, the first and last `index/*.seg`; not LMDB's
# data.mdb/lock.mdb) gets a byte flipped (xor 0xff) at every offset of its first 64 bytes, at
# 40 seeded random offsets and in its last 8 bytes, and separately is truncated to 0, 1, half
# and all-but-one bytes. Every command runs under the ASan+UBSan build (build/asan/logbox).
#
# The rule, for every case:
# - No command crashes: the exit code is 0 or 1 (never a signal, never a sanitizer's exit
#   code) and stderr holds no sanitizer report. A failing command says why on stderr, on a
#   line starting "logbox:".
# - `verify` exits exactly 1 and names the damaged file on a "logbox: verify: <path>: ..."
#   line. One exception: damage to `messages.wal` can be indistinguishable from the torn tail a
#   kill leaves (a truncation, or a flip in the last record), so there verify may exit 0 if
#   `cat` then exits 0 with a prefix of the correct messages (for a flip, missing at most the
#   last message).
# - `cat` exits 1, or exits 0. Every message it prints is byte-identical (all fields) to the
#   undamaged store's message of that id, whatever its exit code. Exit 0 means the whole
#   answer: equal to the undamaged store's (or the prefix allowed above for messages.wal).
# - `lookup` (a token in every message, a rare token, a prefix) exits 1, and then the ids it
#   printed are a subset of the correct ones, or exits 0 and then they are equal to the
#   correct ones (or, under the messages.wal exception, to those up to the last id cat gave).
from __future__ import annotations

import queue
import random
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lbtest.cli import Logbox, lookup_args, parse_cat, parse_ids, sanitizer_report

SEED = 99
RUNS, PER_RUN = 4, 120
HEADER_BYTES, RANDOM_OFFSETS, TAIL_BYTES = 64, 40, 8
COMMON = b"corruptcommon"
WORKERS = 2

pytestmark = pytest.mark.slow


def message(n: int) -> bytes:
    rng = random.Random(n)
    words = [b"w%d" % rng.randint(0, 5000) for _ in range(rng.randint(120, 180))]
    return b"rare%d %s %s" % (n, COMMON, b" ".join(words))


def frame(n: int) -> bytes:
    return b"<%d>1 2026-01-01T00:00:00Z host%d app %d - - %s\n" % (8 + n % 8, n % 7, n, message(n))


@dataclass(frozen=True)
class Damage:
    path: Path  # relative to the data directory
    kind: str  # "flip" or "truncate"
    offset: int  # the flipped byte, or the new length

    def __str__(self) -> str:
        return f"{self.path} {self.kind} @{self.offset}"


@dataclass
class Truth:
    """The undamaged store's answers."""

    cat: dict[int, dict[str, Any]]
    lookups: dict[tuple[bytes, bool], list[int]]


LOOKUPS = [(COMMON, False), (b"rare77", False), (b"corr", True)]


@pytest.fixture(scope="module")
def pristine(store_cli_asan: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("pristine") / "data"
    data.mkdir()
    lb = Logbox(store_cli_asan, data)
    for r in range(RUNS):
        lb.ingest(b"".join(frame(n) for n in range(r * PER_RUN + 1, (r + 1) * PER_RUN + 1)))
    rc, err = lb.verify()
    assert rc == 0, f"verify fails on the undamaged store:\n{err}"
    return data


@pytest.fixture(scope="module")
def truth(store_cli_asan: Path, pristine: Path) -> Truth:
    lb = Logbox(store_cli_asan, pristine)
    cat = {r["id"]: r for r in lb.cat()}
    assert sorted(cat) == list(range(1, RUNS * PER_RUN + 1))
    lookups = {(t, p): lb.lookup(t, prefix=p) for t, p in LOOKUPS}
    assert lookups[(COMMON, False)] == list(range(1, RUNS * PER_RUN + 1))
    assert lookups[(b"rare77", False)] == [77]
    return Truth(cat, lookups)


def _targets(data: Path) -> list[Path]:
    files = sorted(p for p in data.rglob("*") if p.is_file())
    msgs = [p for p in files if p.name == "messages" and p.stat().st_size > 0]
    wals = [p for p in files if p.name == "messages.wal" and p.stat().st_size > 0]
    segs = [p for p in files if p.suffix == ".seg"]
    return [p.relative_to(data) for p in msgs + wals + segs[:1] + segs[1:][-1:]]


def _damages(data: Path) -> Iterator[Damage]:
    rng = random.Random(SEED)
    for rel in _targets(data):
        size = (data / rel).stat().st_size
        offsets = set(range(min(HEADER_BYTES, size)))
        offsets |= set(rng.sample(range(size), min(RANDOM_OFFSETS, size)))
        offsets |= set(range(max(0, size - TAIL_BYTES), size))
        for off in sorted(offsets):
            yield Damage(rel, "flip", off)
        for length in sorted({0, 1, size // 2, size - 1}):
            yield Damage(rel, "truncate", length)


def test_store_has_every_kind_of_file(pristine: Path) -> None:
    targets = _targets(pristine)
    names = [t.name for t in targets]
    assert "messages" in names, f"no sealed message block was written: {targets}"
    assert any(n.endswith(".seg") for n in names), f"no segment file was written: {targets}"


def _apply(d: Damage, copy: Path) -> None:
    path = copy / d.path
    if d.kind == "flip":
        with open(path, "r+b") as f:
            f.seek(d.offset)
            b = f.read(1)
            f.seek(d.offset)
            f.write(bytes([b[0] ^ 0xFF]))
    else:
        with open(path, "r+b") as f:
            f.truncate(d.offset)


def _problems(d: Damage, lb: Logbox, truth: Truth) -> list[str]:
    """Runs verify, cat and the lookups on the damaged store lb; what breaks the rule."""
    out: list[str] = []
    runs = {"verify": lb.run("verify"), "cat": lb.run("cat")}
    for t, p in LOOKUPS:
        runs[f"lookup {t.decode()}"] = lb.run("lookup", *lookup_args(t, prefix=p))
    for name, r in runs.items():
        err = r.stderr.decode("utf-8", "replace")
        if r.returncode not in (0, 1) or sanitizer_report(err):
            out.append(f"{name} crashed (exit {r.returncode}): {err[-1500:]}")
        elif r.returncode == 1 and not any(ln.startswith("logbox:") for ln in err.splitlines()):
            out.append(f"{name} exit 1 without a 'logbox:' message: {err[-300:]!r}")
    if out:
        return out

    wal = d.path.name == "messages.wal"
    # cat: every printed message correct; exit 0 = the whole answer (or the allowed prefix)
    try:
        got = parse_cat(runs["cat"])
    except AssertionError as e:
        return [f"cat printed garbage: {e}"]
    for rec in got:
        want = truth.cat.get(rec.get("id"))
        if rec != want:
            out.append(
                f"cat returned a wrong message: got {str(rec)[:200]}, want {str(want)[:200]}"
            )
            break
    ids = [r.get("id") for r in got]
    full = sorted(truth.cat)
    prefix_ok = wal and ids == full[: len(ids)]
    if d.kind == "flip":
        prefix_ok = prefix_ok and len(ids) >= len(full) - 1
    if runs["cat"].returncode == 0 and ids != full and not prefix_ok:
        out.append(f"cat exit 0 but returned {len(ids)} of {len(full)} messages")
    # verify: exit 1 naming the file, or the messages.wal exception
    v = runs["verify"]
    verr = v.stderr.decode("utf-8", "replace")
    if v.returncode == 0:
        if not (prefix_ok and runs["cat"].returncode == 0):
            out.append(f"verify exit 0 on a damaged store (cat returned {len(ids)} messages)")
    else:
        named = f"{d.path.parent.name}/{d.path.name}:"
        lines = [ln for ln in verr.splitlines() if ln.startswith("logbox: verify: ")]
        if not any(named in ln for ln in lines):
            out.append(
                f"verify does not name ...{named} on a 'logbox: verify:' line: {verr[-500:]!r}"
            )
    # lookups: subset on error, equal on success
    limit = (ids[-1] if ids else 0) if runs["cat"].returncode == 0 and prefix_ok else None
    for t, p in LOOKUPS:
        r = runs[f"lookup {t.decode()}"]
        try:
            got_ids = parse_ids(r)
        except AssertionError as e:
            out.append(str(e))
            continue
        want = truth.lookups[(t, p)]
        cut = want if limit is None else [i for i in want if i <= limit]
        if r.returncode == 0 and got_ids not in (want, cut):
            out.append(f"lookup {t!r} exit 0 with {len(got_ids)} ids, want {len(want)}")
        elif r.returncode == 1 and not set(got_ids) <= set(want):
            out.append(
                f"lookup {t!r} printed ids that are wrong: {sorted(set(got_ids) - set(want))[:8]}"
            )
    return out


def test_damage_is_reported_never_wrong(
    store_cli_asan: Path, pristine: Path, truth: Truth, tmp_path: Path
) -> None:
    damages = list(_damages(pristine))
    assert damages
    # one copy of the store per worker; each case damages one file and puts it back after
    copies: queue.Queue[Path] = queue.Queue()
    for w in range(WORKERS):
        copy = tmp_path / f"copy{w}"
        shutil.copytree(pristine, copy)
        copies.put(copy)

    def case(d: Damage) -> list[str]:
        copy = copies.get()
        try:
            _apply(d, copy)
            return [
                f"{d}: {p}" for p in _problems(d, Logbox(store_cli_asan, copy, timeout=60), truth)
            ]
        finally:
            shutil.copy2(pristine / d.path, copy / d.path)
            copies.put(copy)

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        problems = [p for ps in pool.map(case, damages) for p in ps]
    if problems:
        shown = "\n  ".join(problems[:25])
        pytest.fail(
            f"{len(problems)} rule breaks in {len(damages)} damage cases:\n  {shown}", pytrace=False
        )
