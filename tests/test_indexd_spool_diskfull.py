"""The spool fills the data file system to the last byte while logbox-indexd is stopped (as
syslog-ng does while indexd is behind): started again, indexd gives up its reserve file
(<data>/indexd/reserve), stores every record from the spool, deletes the stored files and takes
the reserve back; the status said so. Root only (mounts a 64 MiB tmpfs); skipped otherwise."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from lbtest.indexd import Indexd, messages
from lbtest.spool import file_name, record, wait_spool_empty
from lbtest.tmpfs import tmpfs

T0 = 1795359974.0
PAD = b"x" * 120


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting the small tmpfs that is filled needs root")
    with tmpfs(tmp_path / "fs", "64m") as mnt:
        yield mnt


def test_spool_fills_the_disk_and_indexd_still_stores(
    indexd_bin: Path, small_fs: Path, tmp_path: Path, store_cli: Path
) -> None:
    data = small_fs / "data"
    spool = data / "spool"
    d = Indexd(
        indexd_bin,
        data,
        tmp_path / "status.json",
        args=["--reserve-mb", "4", "--reserve-percent", "10"],
        stderr_path=tmp_path / "indexd.stderr",
    )
    d.start()
    st = d.status()
    assert st is not None and st["disk"]["reserve_held_bytes"] == 4 << 20, st["disk"]
    assert d.stop() == 0
    # Fill: 1 MiB spool files until the file system refuses a byte more.
    n = k = 0
    full = False
    while not full:
        blob = b"".join(
            record(b"<13>Nov 22 10:00:00 h app: n %07d %s" % (i, PAD), T0 + i / 1e4)
            for i in range(n, n + 6000)
        )
        with open(spool / file_name(T0 + k, "fill"), "ab") as f:
            try:
                f.write(blob)
                f.flush()
                n += 6000
            except OSError as e:
                assert e.errno == errno.ENOSPC
                full = True
            try:
                f.close()
            except OSError:
                pass
        k += 1
    # The last file ends torn where the disk ran out.
    assert os.statvfs(small_fs).f_bavail < 2
    d.start()
    wait_spool_empty(spool, 180, lambda: d.stderr()[-3000:])
    st = d.wait_status(
        lambda st: st["disk"]["reserve_held_bytes"] == 4 << 20, "indexd took the reserve back", 30
    )
    assert st["spool"]["torn"] <= 1, st["spool"]
    assert d.stop() == 0, d.stderr()[-3000:]
    err = d.stderr()
    assert "gave up the reserve" in err and "took the reserve" in err, err[-3000:]
    got = [int(m["message"][2:9]) for m in messages(store_cli, data, "main")]
    assert got[:n] == list(range(n)), (len(got), n)
