"""Spool files grow while logbox-indexd is stopped (SIGTERM: it exits 0 with its position written):
a writer keeps appending to a file indexd had taken and partly read, and new files appear; when
indexd starts again it catches up by itself, every record stored exactly once, in file order."""

from __future__ import annotations

from pathlib import Path

from lbtest.indexd import Indexd, messages
from lbtest.spool import file_name, record, wait_spool_empty, write_file

T0 = 1795359974.0


def recs(a: int, b: int) -> bytes:
    return b"".join(
        record(b"<13>Nov 22 10:00:00 h app: n %06d" % i, T0 + i / 1e4) for i in range(a, b)
    )


def test_spool_grows_while_indexd_is_down(spool_indexd: Indexd, store_cli: Path) -> None:
    d = spool_indexd
    data = d.data
    spool = data / "spool"
    d.start()
    live = open(spool / file_name(T0, "x"), "ab", buffering=0)
    live.write(recs(0, 10_000))
    d.wait_stored(10_000)
    assert d.stop() == 0, d.stderr()[-2000:]
    live.write(recs(10_000, 30_000))  # into the taken inode, while indexd is down
    live.close()
    write_file(spool, file_name(T0 + 1, "x"), recs(30_000, 60_000))
    write_file(spool, file_name(T0 + 2, "y"), recs(60_000, 80_000))
    d.start()
    wait_spool_empty(spool, 120)
    assert d.stop() == 0, d.stderr()[-2000:]
    got = [int(m["message"][2:]) for m in messages(store_cli, data, "main")]
    assert got == list(range(80_000))
