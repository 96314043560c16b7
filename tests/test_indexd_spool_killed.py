"""Exactly once from the spool across SIGKILL: 300,000 sequence-numbered records are written into
several spool files (two files growing at once, like syslog-ng's neighbouring seconds, written in
chunks cut at any byte) while logbox-indexd is SIGKILLed and restarted at random moments, at
least 6 times; records are routed by host to three logspaces (--routes), so a batch touches
several; every number is stored exactly once in its logspace, every 997th record (a receive time
the store cannot hold) is in the dead-letter file exactly once, and every spool file is
deleted."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import threading
import time
from pathlib import Path

from lbtest.indexd import Indexd, kill_while, messages
from lbtest.spool import file_name, record, wait_spool_empty

FILES = 6
# LB_SPOOL_KILL_RECORDS makes a longer run (a multiple of 6).
N = int(os.environ.get("LB_SPOOL_KILL_RECORDS", "300000")) // FILES * FILES
T0 = 1795359974.0
BAD_RTIME = 300_000_000_000.0  # past 9999-12-31: LB_ERRC_MESSAGE, quarantined


LOGSPACES = ("main", "even", "odd")  # host0, host1, host2 (i % 3): main by default


def bad(i: int) -> bool:
    return i % 997 == 0


def test_spool_exactly_once_across_sigkill(
    indexd_bin: Path, tmp_path: Path, store_cli: Path
) -> None:
    data = tmp_path / "data"
    spool = data / "spool"
    spool.mkdir(parents=True)
    routes = tmp_path / "collector.toml"
    routes.write_text(
        '[[logspace]]\nname = "even"\nhost = "^host1$"\n\n'
        '[[logspace]]\nname = "odd"\nhost = "^host2$"\n'
    )
    d = Indexd(
        indexd_bin,
        data,
        tmp_path / "status.json",
        args=["--spool", str(spool), "--routes", str(routes)],
    )
    d.start()
    per = N // FILES
    blobs = [
        b"".join(
            record(
                b"<14>Nov 22 10:00:00 host%d app[7]: seq %07d padding-padding-padding" % (i % 3, i),
                BAD_RTIME if bad(i) else T0 + k + i / per,
                peer="10.1.0.%d" % k,
            )
            for i in range(k * per, (k + 1) * per)
        )
        for k in range(FILES)
    ]

    def writer() -> None:
        rnd = random.Random(7)
        # Files k and k+1 are open and growing together; chunks end at any byte.
        for k in range(0, FILES, 2):
            fs = [open(spool / file_name(T0 + k + j, run="r%d" % k), "ab") for j in (0, 1)]
            pos = [0, 0]
            while pos[0] < len(blobs[k]) or pos[1] < len(blobs[k + 1]):
                for j in (0, 1):
                    b = blobs[k + j]
                    n = rnd.randint(1, 200_000)
                    fs[j].write(b[pos[j] : pos[j] + n])
                    fs[j].flush()
                    pos[j] = min(len(b), pos[j] + n)
                time.sleep(0.01)
            for f in fs:
                f.close()

    t = threading.Thread(target=writer)
    t.start()
    kills = kill_while(d, t.is_alive, most=200, pause=0.5, restart_pause=0.1)
    t.join(timeout=300)
    assert not t.is_alive()
    assert kills >= 5
    wait_spool_empty(spool, 180, lambda: d.stderr()[-2000:])
    assert d.stop() == 0, d.stderr()[-3000:]
    seen: dict[int, int] = {}
    for ls in LOGSPACES:
        for m in messages(store_cli, data, ls):
            seq = int(m["message"][4:11])
            assert LOGSPACES[seq % 3] == ls, (seq, ls)
            seen[seq] = seen.get(seq, 0) + 1
    p = subprocess.run(
        [str(store_cli), "deadletter", "--data", str(data)], capture_output=True, timeout=120
    )
    assert p.returncode == 0, p.stderr.decode()
    aside: dict[int, int] = {}
    for line in p.stdout.decode().splitlines():
        r = json.loads(line)
        assert r["input"].startswith("spool file "), r
        seq = int(re.search(r"seq (\d{7})", r["frame"]).group(1))  # type: ignore[union-attr]
        aside[seq] = aside.get(seq, 0) + 1
    assert {k: v for k, v in aside.items() if v > 1} == {}, "quarantined twice"
    assert sorted(aside) == [i for i in range(N) if bad(i)]
    dup = {k: v for k, v in seen.items() if v > 1}
    missing = [i for i in range(N) if i not in seen and not bad(i)]
    replays = d.stderr().count("finished the batch a previous indexd left")
    assert not dup, f"{len(dup)} stored twice, e.g. {list(dup)[:10]} ({replays} replays)"
    assert not missing, f"{len(missing)} missing, e.g. {missing[:10]} ({replays} replays)"
    err = d.stderr()
    assert "torn record" not in err and "malformed frame" not in err, err[-3000:]
