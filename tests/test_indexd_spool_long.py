"""A spool record longer than indexd's 4 MiB batch (syslog-ng's log_msg_size may be 16 MiB) is
stored once, its message cut at LB_MSG_MAX and flagged truncated, between whole records before
and after it; one whose file ends before its length (torn) is skipped, and the record after it
in the same file is found."""

from __future__ import annotations

from pathlib import Path

from lbtest.frames import MSG_MAX
from lbtest.indexd import Indexd, messages
from lbtest.spool import file_name, record, wait_spool_empty, write_file

T0 = 1795359974.0


def test_record_longer_than_a_batch(spool_indexd: Indexd, store_cli: Path) -> None:
    d = spool_indexd
    data = d.data
    spool = data / "spool"
    big = b"<13>Nov 22 10:00:00 h app: " + bytes(range(256)) * (5 * 4096)  # 5 MiB
    write_file(
        spool,
        file_name(T0, "a"),
        record(b"<13>Nov 22 10:00:00 h app: before", T0)
        + record(big, T0 + 0.5)
        + record(b"<13>Nov 22 10:00:00 h app: after", T0 + 1),
    )
    # A long record cut short, then a whole one: the rest is not a record.
    write_file(
        spool,
        file_name(T0 + 1, "b"),
        record(big, T0 + 2)[: 2 << 20] + record(b"<13>Nov 22 10:00:00 h app: last", T0 + 3),
    )
    d.start()
    wait_spool_empty(spool, 60, lambda: d.stderr()[-2000:])
    assert d.stop() == 0, d.stderr()[-2000:]
    got = messages(store_cli, data, "main")
    assert [len(m["message"].encode("utf-8", "surrogateescape")) for m in got[1:2]] == [MSG_MAX]
    assert [m["message"] for m in (got[0], got[2], got[3])] == ["before", "after", "last"]
    assert len(got) == 4 and "truncated" in got[1]["flags"], [m["flags"] for m in got]
    assert "a record of %d bytes at byte" % len(record(big, T0 + 0.5)) in d.stderr()
