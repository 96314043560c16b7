"""A spool file still open for writing (the test holds it like syslog-ng between writes) is read as
it grows, taken under its new name, and not deleted until its writer closes it; a partial record
at its end is waited for, not counted as torn, while the writer may still finish it."""

from __future__ import annotations

import time
from pathlib import Path

from lbtest.indexd import Indexd, messages
from lbtest.spool import file_name, record, spool_files
from lbtest.wait import wait_until

T0 = 1795359974.25


def test_open_file_is_tailed_and_kept_until_closed(spool_indexd: Indexd, store_cli: Path) -> None:
    d = spool_indexd
    data = d.data
    spool = data / "spool"
    d.start()
    name = file_name(T0, "w1")
    f = open(spool / name, "ab", buffering=0)
    try:
        f.write(record(b"<13>Nov 22 10:00:00 h app: one", T0))
        wait_until(lambda: d.status()["stored"] == 1, "1 is stored", 60, interval=0.05)  # type: ignore[index]
        taken = spool_files(spool)
        assert len(taken) == 1 and taken[0].startswith(name + ".") and taken[0].endswith(".taken")
        # Half a record, then the rest a while later: stored once, whole.
        r = record(b"<13>Nov 22 10:00:01 h app: two", T0 + 1)
        f.write(r[:20])
        time.sleep(1.5)
        st = d.status()
        assert st is not None and st["stored"] == 1
        # What waits is the half record, in the spool's status and in what the disk status
        # calls held back (the spool's backlog, not its inotify events).
        assert st["spool"]["waiting_bytes"] == 20, st["spool"]
        assert st["disk"]["held_back_bytes"] == 20, st["disk"]
        f.write(r[20:])
        wait_until(lambda: d.status()["stored"] == 2, "2 are stored", 60, interval=0.05)  # type: ignore[index]
        time.sleep(1.5)
        assert spool_files(spool) == taken, "deleted while its writer holds it"
        assert d.status()["spool"]["torn"] == 0  # type: ignore[index]
    finally:
        f.close()
    wait_until(lambda: not spool_files(spool), "deleted after close", 60, interval=0.05)
    wait_until(lambda: d.status()["spool"]["deleted"] == 1, "counted deleted", 60, interval=0.05)  # type: ignore[index]
    st = d.status()
    assert st is not None and st["spool"]["deleted"] == 1 and st["spool"]["torn"] == 0, st
    assert d.stop() == 0
    assert [m["message"] for m in messages(store_cli, data, "main")] == ["one", "two"]
