"""Tamper evidence of a store logbox-indexd made (indexer/FORMAT.md §14): hash chains and
forward-secure seals, checked by `logbox verify`.

The store: sealing set up with a 1 s epoch (`logbox keys init`), 120,000 records over two days
routed to two logspaces from the spool, while indexd is SIGKILLed and restarted 25 times (tiered
and whole-day merges, recoveries, seals every second and at each clean stop). It must verify
clean with the verification key, after a reindex too; the key `keys init` showed must not be on
the box. Then each tampering, done to a copy, must be reported with its place and kind: a byte
of a block, a segment or the chain changed, a block removed, two swapped, the tail cut after
the last seal, a seal removed, a day removed, and a block edited by someone who holds the box
now and rebuilds the chain and seals it again with the key of now (sound without the
verification key, which is the limit of sealing; named with it).

The chain is read and written with the tests' own code (lbtest/chainfmt.py), from FORMAT.md §14
alone, so a second reader of the format pins the first.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import struct
import subprocess
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from lbtest.chainfmt import key_now, read_chain, rebuild
from lbtest.indexd import Indexd, kill_while
from lbtest.spool import file_name, record, wait_spool_empty
from lbtest.wait import wait_until
from logbox_core.status import gather

N = 120_000
FILES = 4
T0 = 1795359974.0  # 2026-11-22 09:46 UTC: the records span two UTC days
SPAN = 100_000.0  # seconds of receive time over the records


def run(cmd: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def verify(cli: Path, data: Path, key: str | None = None) -> subprocess.CompletedProcess[str]:
    return run([str(cli), "verify", "--data", str(data)] + (["--key", key] if key else []))


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory, top: Path) -> tuple[Path, str, Path]:
    """(data, verification key, logbox CLI) of the store described above."""
    cli = top / "build" / "bin" / "logbox"
    indexd = top / "build" / "bin" / "logbox-indexd"
    tmp = tmp_path_factory.mktemp("integrity")
    data = tmp / "data"
    spool = data / "spool"
    spool.mkdir(parents=True)
    made = run([str(cli), "keys", "init", "--data", str(data), "--interval", "1"])
    assert made.returncode == 0, made.stderr
    found = re.findall(r"^    ([0-9a-f]{64})$", made.stdout, re.M)
    assert len(found) == 1, made.stdout
    routes = tmp / "collector.toml"
    routes.write_text('[[logspace]]\nname = "odd"\nhost = "^host1$"\n')
    d = Indexd(
        indexd, data, tmp / "status.json", args=["--spool", str(spool), "--routes", str(routes)]
    )
    d.start()
    per = N // FILES
    blobs = [
        b"".join(
            record(
                b"<14>Nov 22 10:00:00 host%d app[7]: seq %07d some words to index" % (i % 2, i),
                T0 + SPAN * i / N,
            )
            for i in range(k * per, (k + 1) * per)
        )
        for k in range(FILES)
    ]

    def writer() -> None:
        for k in range(FILES):
            with open(spool / file_name(T0 + k, run="i%d" % k), "ab") as f:
                for at in range(0, len(blobs[k]), 300_000):
                    f.write(blobs[k][at : at + 300_000])
                    f.flush()
                    time.sleep(0.2)

    t = threading.Thread(target=writer)
    t.start()
    kills = kill_while(d, lambda: True, most=25, pause=0.5, restart_pause=0.1)
    t.join(timeout=300)
    assert not t.is_alive()
    assert kills == 25
    wait_spool_empty(spool, 180, lambda: d.stderr()[-2000:])
    time.sleep(2.5)  # seals of epochs with nothing new, then the stop's
    assert d.stop() == 0, d.stderr()[-3000:]
    return data, found[0], cli


def test_sealed_store_verifies_after_kills_and_reindex(
    sealed: tuple[Path, str, Path], tmp_path: Path
) -> None:
    data, key, cli = sealed
    p = verify(cli, data, key)
    assert p.returncode == 0, p.stderr[-3000:]
    for ls in ("main", "odd"):
        m = re.search(
            rf"ok: \S+/{ls}: (\d+) messages in (\d+) days, \d+ segments; 1 days signed; "
            r"sealed through epoch (\d+) .*"
            r"every seal checked with the verification key",
            p.stdout,
        )
        assert m, p.stdout
        assert int(m.group(1)) == N // 2 and int(m.group(2)) == 2 and int(m.group(3)) >= 5, p.stdout
    # Each day of each logspace has a chain that FORMAT.md's reader takes whole, with seals.
    for chain in data.glob("*/2026/*/chain"):
        recs = read_chain(chain)
        assert recs[0].kind == 1 and any(r.kind == 5 for r in recs), chain
    # Reindex rewrites every segment: the chains name the new ones; seal them; still clean.
    copy = tmp_path / "copy"
    shutil.copytree(data, copy)
    for ls in ("main", "odd"):
        r = run([str(cli), "reindex", "--data", str(copy), "--logspace", ls])
        assert r.returncode == 0, r.stderr
    assert run([str(cli), "seal", "--data", str(copy), "--force"]).returncode == 0
    p = verify(cli, copy, key)
    assert p.returncode == 0, p.stderr[-3000:]


def test_verification_key_not_on_the_box(sealed: tuple[Path, str, Path]) -> None:
    data, key, _ = sealed
    raw = bytes.fromhex(key)
    for f in data.rglob("*"):
        if f.is_file():
            b = f.read_bytes()
            assert raw not in b and key.encode() not in b and key.upper().encode() not in b, f


def _day(data: Path, ls: str, i: int) -> Path:
    return sorted(data.glob(f"{ls}/2026/*"))[i]


def _blocks(day: Path) -> list[tuple[int, int]]:
    """(offset, length) of the blocks the chain names, in order."""
    out = []
    for r in read_chain(day / "chain"):
        if r.kind == 2:
            _first, off, _count, ln = struct.unpack_from("<QQII", r.body, 0)
            out.append((off, ln))
    return out


def _flip(path: Path, at: int) -> None:
    b = bytearray(path.read_bytes())
    b[at] ^= 0x20
    path.write_bytes(bytes(b))


def t_block_byte(data: Path) -> tuple[str, str]:
    day = _day(data, "main", 0)
    off, ln = _blocks(day)[3]
    _flip(day / "messages", off + ln - 7)
    return "edited", f"block at byte {off} "


def t_block_removed(data: Path) -> tuple[str, str]:
    day = _day(data, "main", 0)
    off, ln = _blocks(day)[2]
    b = (day / "messages").read_bytes()
    (day / "messages").write_bytes(b[:off] + b[off + ln :])
    return "the blocks between were removed", f"block at byte {off}:"


def t_blocks_swapped(data: Path) -> tuple[str, str]:
    day = _day(data, "odd", 0)
    (o1, l1), (o2, l2) = _blocks(day)[1:3]
    b = (day / "messages").read_bytes()
    (day / "messages").write_bytes(b[:o1] + b[o2 : o2 + l2] + b[o1 : o1 + l1] + b[o2 + l2 :])
    return "blocks reordered", f"block at byte {o1}:"


def t_segment_byte(data: Path) -> tuple[str, str]:
    seg = sorted(_day(data, "main", 0).glob("index/*.seg"))[0]
    _flip(seg, seg.stat().st_size // 3)
    return "segment edited", seg.name


def t_chain_byte(data: Path) -> tuple[str, str]:
    day = _day(data, "odd", 1)
    _flip(day / "chain", 400)
    return "does not match its bytes (edited)", str(day.relative_to(data))


def t_seal_removed(data: Path) -> tuple[str, str]:
    day = _day(data, "main", 1)
    recs = read_chain(day / "chain")
    seals = [r for r in recs if r.kind == 5]
    gone = seals[len(seals) // 2]
    b = (day / "chain").read_bytes()
    (day / "chain").write_bytes(b[: gone.off] + b[gone.off + len(gone.raw) :])
    return "removed, added or reordered", str(day.relative_to(data))


def t_tail_cut_after_last_seal(data: Path) -> tuple[str, str]:
    day = _day(data, "main", 1)
    recs = read_chain(day / "chain")
    seals = [r for r in recs if r.kind == 5]
    keep = seals[-3]  # the tail after it, and the two newest seals, go
    (day / "chain").write_bytes((day / "chain").read_bytes()[: keep.off + len(keep.raw)])
    epoch = struct.unpack_from("<Q", keep.body, 0)[0]
    return f"truncated: the last seal is of epoch {epoch}", "/main"


def t_day_removed(data: Path) -> tuple[str, str]:
    day = _day(data, "odd", 0)
    shutil.rmtree(day)
    return "cannot open the message file", str(day.relative_to(data))


def _relink_next(data: Path, ls: str, hashes: list[bytes], key: bytes) -> None:
    """The next day's chain links a record of the day before: relinked and resealed."""
    nxt = _day(data, ls, 1)
    recs = read_chain(nxt / "chain")
    recs[0].prev = hashes[struct.unpack_from("<Q", recs[0].body, 72)[0]]
    rebuild(nxt / "chain", recs, key, ls, int(nxt.parent.name + nxt.name.replace("-", "")))


def t_signature_swapped(data: Path) -> tuple[str, str]:
    """The day root of main's first day gets odd's signature of the same day; the chains are
    made to agree again with the key of now."""
    day = _day(data, "main", 0)
    recs = read_chain(day / "chain")
    other = [r for r in read_chain(_day(data, "odd", 0) / "chain") if r.kind == 6]
    roots = [r for r in recs if r.kind == 6]
    assert len(roots) == 1 and len(other) == 1
    roots[0].body = roots[0].body[:16] + other[0].body[16:]
    _epoch, key = key_now(data)
    hashes = rebuild(
        day / "chain", recs, key, "main", int(day.parent.name + day.name.replace("-", ""))
    )
    _relink_next(data, "main", hashes, key)
    return "has a bad signature", str(day.relative_to(data))


def t_resealed_with_key_of_now(data: Path) -> tuple[str, str]:
    """Root now edits a message and makes everything agree again: the block's checksums, the
    chain, and every seal, made anew with the key of now."""
    day = _day(data, "main", 0)
    recs = read_chain(day / "chain")
    blk = [r for r in recs if r.kind == 2][4]
    _first, off, _count, ln = struct.unpack_from("<QQII", blk.body, 0)
    m = bytearray((day / "messages").read_bytes())
    m[off + ln - 9] ^= 0x04
    struct.pack_into("<I", m, off + 40, zlib.crc32(bytes(m[off + 52 : off + ln])))
    struct.pack_into("<I", m, off + 48, zlib.crc32(bytes(m[off : off + 48])))
    (day / "messages").write_bytes(bytes(m))
    i = recs.index(blk)
    recs[i].body = blk.body[:24] + hashlib.sha256(bytes(m[off : off + ln])).digest()
    _epoch, key = key_now(data)
    hashes = rebuild(
        day / "chain", recs, key, "main", int(day.parent.name + day.name.replace("-", ""))
    )
    _relink_next(data, "main", hashes, key)
    return "made with another epoch's key (resealed)", "of 2026-"


TAMPERS: list[Callable[[Path], tuple[str, str]]] = [
    t_block_byte,
    t_block_removed,
    t_blocks_swapped,
    t_segment_byte,
    t_chain_byte,
    t_seal_removed,
    t_tail_cut_after_last_seal,
    t_day_removed,
    t_signature_swapped,
    t_resealed_with_key_of_now,
]


@pytest.mark.parametrize("tamper", TAMPERS, ids=[t.__name__[2:] for t in TAMPERS])
def test_tampering_is_named(
    sealed: tuple[Path, str, Path], tmp_path: Path, tamper: Callable[[Path], tuple[str, str]]
) -> None:
    data, key, cli = sealed
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    what, where = tamper(copy)
    p = verify(cli, copy, key)
    assert p.returncode == 1, (p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if what in ln]
    assert lines, f"no line says {what!r}:\n{p.stderr[-4000:]}"
    assert any(where in ln for ln in lines), f"none at {where!r}:\n{p.stderr[-4000:]}"
    if tamper is t_resealed_with_key_of_now:
        # Without the verification key the rebuilt chain and its seals are sound (what is
        # left is the edited payload's own decoding): only the key tells the seals are forged.
        q = verify(cli, copy)
        said = q.stderr.replace(str(copy), "DATA")
        assert "seal" not in said and "SHA-256" not in said and "chain" not in said, said[-3000:]


def test_sealing_in_the_status(top: Path, tmp_path: Path) -> None:
    """indexd says in its status how far it has sealed; a seal run that fails (the key file
    damaged) is a problem of /api/v1/status's gather(), and sealing resumes once it is whole."""
    cli = top / "build" / "bin" / "logbox"
    data = tmp_path / "data"
    assert run([str(cli), "keys", "init", "--data", str(data), "--interval", "1"]).returncode == 0
    status = tmp_path / "status.json"
    d = Indexd(top / "build" / "bin" / "logbox-indexd", data, status)
    d.start()
    try:
        got = wait_until(
            lambda: (s := d.status(missing_ok=True))
            and (s.get("sealing") or {}).get("epoch", 0) >= 3
            and s,
            "indexd has sealed twice",
            30,
        )
        seal = got["sealing"]
        assert seal["setup"] is True and seal["error"] is None and seal["last_sealed"], seal
        key = data / "indexd" / "seal"
        good = key.read_bytes()
        key.write_bytes(b"\0" * len(good))
        wait_until(
            lambda: ((d.status(missing_ok=True) or {}).get("sealing") or {}).get("error"),
            "indexd says sealing fails",
            30,
        )
        g = gather(data_dir=data, indexd_status=status, syslogng_pidfile=None, searchd=None)
        assert any(p.startswith("indexd: sealing failed: ") for p in g["problems"]), g["problems"]
        assert g["services"]["indexd"]["sealing"]["setup"] is True
        key.write_bytes(good)
        wait_until(
            lambda: ((d.status(missing_ok=True) or {}).get("sealing") or {}).get("error") is None,
            "indexd seals again",
            30,
        )
    finally:
        d.stop()
