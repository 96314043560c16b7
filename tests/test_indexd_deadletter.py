# Scenario (issue 15, item 1): no per-message error holds indexd's inputs. Frames with every
# header field at the largest a frame allows (4,096-byte host, program, pid, msgid; 65,536 bytes of
# SD, by a long value or a long name) are stored cut and flagged "field_truncated" from the FIFO and
# from a --listen socket. A frame that can never be stored (a receive time after year 9999) is
# quarantined: it lands in <data>/indexd/deadletter with the reason, is counted in the status file,
# is listed by `logbox deadletter`, and the frames after it are stored; indexd never holds. Across
# SIGKILLs at random moments every good frame is stored once and every bad one is in the
# dead-letter file once.
from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from lbtest.frames import FIELD_MAX, SD_MAX, frame
from lbtest.indexd import HeldFifo, Indexd, kill_while, messages, raw, send_socket, write_fifo
from logbox_core.status import gather

T0 = 1795359974.984039
BAD_RTIME = "253402300800"  # 10000-01-01T00:00:00Z: past LB_RECEIVED_MAX


def deadletter(cli: Path, data: Path) -> list[dict[str, Any]]:
    p = subprocess.run(
        [str(cli), "deadletter", "--data", str(data)], capture_output=True, timeout=120
    )
    assert p.returncode == 0, p.stderr.decode()
    return [json.loads(line) for line in p.stdout.decode().splitlines() if line]


def oversized(tag: str, rtime: float) -> list[bytes]:
    big = 4096
    return [
        frame(f"{tag} host", host=b"h" * big, rtime=rtime),
        frame(f"{tag} program", program=b"p" * big, rtime=rtime),
        frame(f"{tag} pid", pid=b"1" * big, rtime=rtime),
        frame(f"{tag} msgid", msgid=b"m" * big, rtime=rtime),
        frame(f"{tag} sdvalue", sd=b'[a@1 v="' + b"v" * 65000 + b'"]', rtime=rtime),
        frame(f"{tag} sdname", sd=b"[" + b"n" * 65000 + b' a="1"]', rtime=rtime),
        frame(f"{tag} sdtwo", sd=b'[a@1 x="1"][b@1 v="' + b"v" * 20000 + b'"]', rtime=rtime),
    ]


def test_oversized_fields_cut_and_flagged(
    indexd: Indexd, fifo: HeldFifo, tmp_path: Path, store_cli: Path
) -> None:
    d = indexd
    write_fifo(fifo, b"".join(oversized("fifo", T0)) + frame("fifo after", rtime=T0))
    send_socket(tmp_path / "indexd.sock", b"".join(oversized("sock", T0 + 1)) + frame("sock after"))
    st = d.wait_stored(16)
    assert st["holding"] is None and st["quarantined"] == 0, st
    ms = {m["message"]: m for m in messages(store_cli, d.data)}
    assert len(ms) == 16
    for tag in ("fifo", "sock"):
        for key in ("host", "program", "pid", "msgid"):
            m = ms[f"{tag} {key}"]
            assert len(raw(m[key])) == FIELD_MAX, (tag, key, len(raw(m[key])))
            assert "field_truncated" in m["flags"], m["flags"]
        for key in ("sdvalue", "sdname"):
            m = ms[f"{tag} {key}"]
            assert len(raw(m["sd"])) == SD_MAX and "field_truncated" in m["flags"], key
        # Whole SD elements are kept when they fit: the second one is dropped, not split.
        m = ms[f"{tag} sdtwo"]
        assert m["sd"] == '[a@1 x="1"]' and "field_truncated" in m["flags"], m["sd"][:40]
        assert "field_truncated" not in ms[f"{tag} after"]["flags"]


def test_unstorable_frame_is_quarantined(
    indexd: Indexd, fifo: HeldFifo, tmp_path: Path, store_cli: Path
) -> None:
    d = indexd
    bad_fifo = frame("bad from the fifo", ls="second", rtime=BAD_RTIME)
    bad_sock = frame("bad from the socket", rtime=BAD_RTIME)
    write_fifo(fifo, frame("fifo 1", rtime=T0) + bad_fifo + frame("fifo 2", rtime=T0))
    send_socket(tmp_path / "indexd.sock", frame("sock 1") + bad_sock + frame("sock 2"))
    st = d.wait_status(
        lambda s: s["stored"] >= 4 and s["quarantined"] >= 2,
        "4 stored and 2 quarantined",
        alive=True,
    )
    assert st["stored"] == 4 and st["quarantined"] == 2 and st["holding"] is None, st
    assert st["deadletter"]["records"] == 2, st["deadletter"]
    assert "receive time out of range" in st["deadletter"]["last_reason"], st["deadletter"]
    assert {i["kind"]: i["quarantined"] for i in st["inputs"]} == {
        "fifo": 1,
        "listen": 1,
        "spool": 0,
    }
    assert sorted(m["message"] for m in messages(store_cli, d.data)) == [
        "fifo 1",
        "fifo 2",
        "sock 1",
        "sock 2",
    ]
    recs = deadletter(store_cli, d.data)
    assert len(recs) == 2, recs
    by = {raw(r["frame"]): r for r in recs}
    assert set(by) == {bad_fifo, bad_sock}
    assert by[bad_fifo]["logspace"] == "second" and by[bad_fifo]["batch"] > 0
    assert by[bad_sock]["logspace"] == "main" and by[bad_sock]["batch"] == 0
    for r in recs:
        assert r["code"] == -31010 and "out of range" in r["reason"], r
        assert r["received_us"] == 253402300800 * 1_000_000
    assert "quarantined a frame" in d.stderr()
    # /api/v1/status passes it on (logbox_core.status, without the file's path).
    api = gather(data_dir=d.data, indexd_status=d.status_path, syslogng_pidfile=None, searchd=None)
    assert api["quarantined"] == 2, api
    assert api["deadletter"]["records"] == 2 and "file" not in api["deadletter"]
    assert "out of range" in api["deadletter"]["last_reason"]
    # A restart keeps the file and shows what it holds; nothing is set aside again.
    assert d.stop() == 0
    d.start()
    st = d.wait_status(lambda s: s["deadletter"]["records"] == 2, "2 dead letters", alive=True)
    assert st["quarantined"] == 0 and st["holding"] is None
    assert len(deadletter(store_cli, d.data)) == 2


def test_quarantine_exactly_once_across_sigkill(
    indexd_bin: Path, tmp_path: Path, fifo: HeldFifo, store_cli: Path
) -> None:
    # 60,000 sequence-numbered frames for two logspaces, every 61st unstorable, written as fast
    # as the pipe takes them while indexd is killed at random moments and restarted.
    n = 60_000
    lss = ("main", "second")

    def bad(i: int) -> bool:
        return i % 61 == 7

    blob = b"".join(
        frame(
            f"seq {i:07d} " + "x" * (i % 89),
            ls=lss[i % 3 % 2],
            rtime=BAD_RTIME if bad(i) else T0 + i / 1e4,
        )
        for i in range(n)
    )
    d = Indexd(indexd_bin, tmp_path / "data", tmp_path / "status.json", fifo=fifo)
    d.start()
    t = threading.Thread(target=write_fifo, args=(fifo, blob), daemon=True)
    t.start()
    kills = kill_while(d, t.is_alive, most=200, pause=0.3, restart_pause=0.05)
    t.join(timeout=300)
    assert not t.is_alive()
    deadline = time.monotonic() + 120
    while fifo.pending() > 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fifo.pending() == 0
    st = d.status()
    assert st is not None and st["holding"] is None, st
    assert d.stop() == 0, d.stderr()[-3000:]
    seen: dict[int, int] = {}
    for ls in lss:
        for m in messages(store_cli, d.data, ls):
            seq = int(m["message"][4:11])
            seen[seq] = seen.get(seq, 0) + 1
    aside: dict[int, int] = {}
    for r in deadletter(store_cli, d.data):
        seq = int(raw(r["frame"]).split(b"\n", 1)[1][len(r["logspace"]) + 4 :][:7])
        aside[seq] = aside.get(seq, 0) + 1
    good = [i for i in range(n) if not bad(i)]
    bads = [i for i in range(n) if bad(i)]
    assert {k: v for k, v in seen.items() if v > 1} == {}, "stored twice"
    assert [i for i in good if i not in seen] == [], "good frames lost"
    assert [i for i in seen if bad(i)] == [], "an unstorable frame was stored"
    assert {k: v for k, v in aside.items() if v > 1} == {}, "quarantined twice"
    assert sorted(aside) == bads, f"{len(set(bads) - set(aside))} unstorable frames lost"
    err = d.stderr()
    done, marked = err.count("finished the batch a previous"), err.count("quarantined already")
    print(f"{kills} kills, {done} batches finished, {marked} with frames quarantined already")
