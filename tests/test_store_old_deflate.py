# Scenario: a store written before zstd message blocks (issue 18) still reads, and takes new
# messages. tests/fixtures/store-deflate-v1 is a store that logbox wrote with DEFLATE blocks
# (the code before the zstd commit, `logbox ingest --received header` of fixture_lines(0, 2000)):
# two sealed blocks and the rest in the WAL. On a copy, the current CLI (ASan build):
# - verifies it clean, cats every message as ingested, and finds a word through its index;
# - ingests 2,000 more lines into the same day: the day's `messages` then holds the old DEFLATE
#   blocks followed by new templates blocks (or zstd ones, the templates' fallback; read from
#   the file's block headers), and verify, cat and lookup see all 4,000 messages.
# - the catalog's format version is 1 before (cat, verify and lookup only read) and 2 after the
#   ingest (FORMAT.md §5.3): the logbox that wrote the fixture would now refuse the store rather
#   than cut the new blocks as a torn tail.
from __future__ import annotations

import shutil
import struct
from pathlib import Path

import lmdb
from lbtest.cli import Logbox

FIXTURE = Path(__file__).parent / "fixtures" / "store-deflate-v1"
DAY = Path("main") / "2024" / "03-01"
FHDR, BHDR = 24, 52  # FORMAT.md §3.1, §3.2
DEFLATE, ZSTD, COLS, TPL = 1, 2, 3, 4


def fixture_lines(first: int, n: int) -> bytes:
    """The fixture's RFC 5424 lines (first..first+n-1), all on 2024-03-01."""
    out = []
    for i in range(first, first + n):
        sec = i // 4
        ts = f"2024-03-01T10:{(sec // 60) % 60:02d}:{sec % 60:02d}.{i % 1000:03d}000Z"
        out.append(
            f"<38>1 {ts} web{i % 5} sshd {1000 + i % 97} - - Accepted password for "
            f"user{i % 23} from 10.0.{i % 256}.{(i * 7) % 256} port {1024 + (i * 131) % 60000} "
            f"ssh2 n{i}\n"
        )
    return "".join(out).encode()


def block_methods(messages: Path) -> list[int]:
    """The method byte of every block header of a messages file, in file order."""
    raw = messages.read_bytes()
    off, methods = FHDR, []
    while off + BHDR <= len(raw):
        (comp,) = struct.unpack_from("<I", raw, off + 36)
        methods.append(raw[off + 44])
        off += BHDR + comp
    assert off == len(raw), "messages does not end at a block boundary"
    return methods


def catalog_version(data: Path) -> int:
    """The version field of the catalog's meta record (FORMAT.md §5.3), read with LMDB itself."""
    env = lmdb.open(str(data / "catalog"), readonly=True, lock=False, max_dbs=16)
    try:
        meta = env.open_db(b"meta", create=False)
        with env.begin(db=meta) as txn:
            rec = txn.get(b"format")
    finally:
        env.close()
    assert rec is not None and len(rec) == 12 and rec[:4] == b"LBCT", rec
    return int(struct.unpack_from("<I", rec, 4)[0])


def check_messages(lb: Logbox, n: int) -> None:
    got = lb.cat()
    assert [m["id"] for m in got] == list(range(1, n + 1))
    want = fixture_lines(0, n).decode().splitlines()
    for m, line in zip(got, want, strict=True):
        head, msg = line.split(" - - ", 1)
        assert m["message"] == msg
        fields = head.split()
        assert (m["host"], m["program"], m["pid"]) == (fields[2], fields[3], fields[4])
        assert m["timestamp"] == m["received"] == fields[1]
        assert (m["facility"], m["severity"]) == (4, 6)
    # The index of both kinds of blocks: n7 is message 8, n3999 message 4000.
    assert lb.lookup("n7") == [8]
    if n >= 4000:
        assert lb.lookup("n3999") == [4000]


def test_old_deflate_store_reads_and_grows(store_cli_asan: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(FIXTURE, data)
    lb = Logbox(store_cli_asan, data)
    before = block_methods(data / DAY / "messages")
    assert before and set(before) == {DEFLATE}, before
    rc, err = lb.verify()
    assert rc == 0, err
    check_messages(lb, 2000)
    assert catalog_version(data) == 1

    lb.check(lb.run("ingest", "--received", "header", "-", input=fixture_lines(2000, 2000)))
    after = block_methods(data / DAY / "messages")
    assert after[: len(before)] == before
    assert TPL in after[len(before) :], after
    assert set(after[len(before) :]) <= {ZSTD, TPL}, after
    assert catalog_version(data) == 2
    rc, err = lb.verify()
    assert rc == 0, err
    check_messages(lb, 4000)
