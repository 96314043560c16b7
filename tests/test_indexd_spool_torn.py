"""A spool file whose writer died in the middle of a record (a torn tail) and a file with garbage
between records: logbox-indexd stores every whole record once, counts the torn tail (status
spool.torn, a log line naming the file and byte) and the malformed stretch (resynchronising at the
next record), and deletes both files once no writer holds them."""

from __future__ import annotations

from pathlib import Path

from lbtest.indexd import Indexd, messages
from lbtest.spool import file_name, record, spool_files, write_file

T0 = 1795359974.5


def test_torn_tail_and_garbage_are_counted_and_skipped(
    spool_indexd: Indexd, store_cli: Path
) -> None:
    d = spool_indexd
    data = d.data
    spool = data / "spool"
    recs = [record(b"<13>Nov 22 10:00:00 h1 app: rec %d" % i, T0 + i) for i in range(6)]
    torn = record(b"<13>Nov 22 10:00:00 h1 app: never finished", T0)[:-10]
    write_file(spool, file_name(T0, "a"), recs[0] + recs[1] + torn)
    # A killed writer's tail followed by more records (resync at the next record): the stretch
    # claims more bytes than follow it and is not a record.
    garbage = b"LS1 1795359974.500000 tcp - 9999\n<13>cut off"
    write_file(spool, file_name(T0 + 1, "b"), recs[2] + garbage + recs[3] + b"junk\n" + recs[4])
    d.start()
    write_file(spool, file_name(T0 + 2, "c"), recs[5])
    st = d.wait_status(
        lambda st: st["stored"] >= 6 and not spool_files(spool), "6 stored and the spool empty"
    )
    assert st["stored"] == 6, st
    assert not spool_files(spool)
    sp = st["spool"]
    assert sp["torn"] == 1 and sp["records"] == 6 and sp["deleted"] == 3, sp
    assert sp["malformed"] == 2 and sp["malformed_bytes"] == len(garbage) + 5, sp
    assert sp["files"] == 0 and sp["waiting_bytes"] == 0, sp
    assert d.stop() == 0
    got = [m["message"] for m in messages(store_cli, data, "main")]
    assert got == ["rec %d" % i for i in range(6)]
    err = d.stderr()
    assert f"a torn record of {len(torn)} bytes at byte {len(recs[0]) + len(recs[1])}" in err, err
    assert "malformed frame from spool " in err and file_name(T0 + 1, "b") in err, err
