"""logbox-indexd as a real process: frames over the held FIFO (fd 3, LISTEN_FDS) and over --listen
sockets land in the logspace they name, byte for byte; malformed frames are counted, logged and
skipped; long messages are cut once and flagged; SIGTERM, SIGHUP, the lock file, holding on a
store that cannot be written; and the FIFO's exactly-once protocol across repeated SIGKILLs.
Everything stored is checked through `logbox cat` (NDJSON), never by reading the store's files."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from lbtest.frames import FRAME_MAX, MSG_MAX, frame
from lbtest.indexd import HeldFifo, Indexd, kill_while, messages, raw, send_socket, write_fifo
from lbtest.wait import wait_until

T0 = 1795359974.984039


def stop_ok(d: Indexd) -> None:
    rc = d.stop()
    assert rc == 0, d.stderr()[-3000:]


def test_frames_land_in_their_logspace_byte_identical(
    indexd: Indexd, fifo: HeldFifo, tmp_path: Path, store_cli: Path
) -> None:
    odd = b"line1\nline2\x00nul \xff\xfe not utf-8 \xc3\xa9 ok"
    sd = b'[x@1 a="\n\x00\xff"]'
    via_fifo = [
        frame(b"plain one", ls="main", host="web1", program="sshd", pid="42", rtime=T0),
        frame(
            odd,
            ls="secure",
            host=b"h\xffost",
            sd=sd,
            msgid="ID47",
            rtime=T0 + 1,
            pri=165,
            fmt="5",
            stime=1065903255.003,
            tzoff="+02:00",
        ),
        frame(b"", ls="main", rtime=T0 + 2),
    ]
    via_sock = [
        frame(b"from the socket\n", ls="secure", host="db", rtime=T0 + 3, pri=13, fmt="3"),
        frame(b"to main \x00", ls="main", rtime=T0 + 4),
    ]
    write_fifo(fifo, b"".join(via_fifo))
    send_socket(tmp_path / "indexd.sock", b"".join(via_sock))
    indexd.wait_stored(5, timeout=20)
    stop_ok(indexd)

    main = messages(store_cli, indexd.data, "main")
    sec = messages(store_cli, indexd.data, "secure")
    assert sorted(raw(m["message"]) for m in main) == sorted([b"plain one", b"", b"to main \x00"])
    assert sorted(raw(m["message"]) for m in sec) == sorted([odd, b"from the socket\n"])
    m = next(m for m in sec if raw(m["message"]) == odd)
    assert raw(m["host"]) == b"h\xffost"
    assert raw(m["sd"]) == sd
    assert m["msgid"] == "ID47"
    assert m["facility"] == 20 and m["severity"] == 5
    assert m["timestamp_us"] == 1065903255003000
    assert m["received_us"] == round((T0 + 1) * 1e6)
    assert "rfc5424" in m["flags"]
    p = next(m for m in main if raw(m["message"]) == b"plain one")
    assert (p["host"], p["program"], p["pid"]) == ("web1", "sshd", "42")
    assert p["facility"] is None and p["timestamp"] is None


def test_malformed_frames_counted_logged_and_skipped(
    indexd: Indexd, fifo: HeldFifo, tmp_path: Path, store_cli: Path
) -> None:
    good = [frame(f"good {i}", rtime=T0 + i) for i in range(4)]
    wrong_len = frame(b"twelve bytes", rtime=T0).replace(b" 12\n", b" 10\n")
    bad_ls = frame(b"bad logspace", ls="Main", rtime=T0)
    bad_ls2 = frame(b"reserved logspace", ls="catalog", rtime=T0)
    stream = (
        good[0]
        + b"\x00garbage \xff bytes\n"
        + good[1]
        + wrong_len
        + good[2]
        + bad_ls
        + bad_ls2
        + good[3]
    )
    write_fifo(fifo, stream)
    send_socket(tmp_path / "indexd.sock", stream)
    indexd.wait_stored(8, timeout=20)
    time.sleep(1.2)  # one more status write
    st = indexd.status()
    assert st["malformed"] == 8, st
    fifo_in = next(i for i in st["inputs"] if i["kind"] == "fifo")
    sock_in = next(i for i in st["inputs"] if i["kind"] == "listen")
    assert fifo_in["malformed"] == 4 and sock_in["malformed"] == 4
    stop_ok(indexd)
    err = indexd.stderr()
    assert err.count("malformed frame from") == 8, err
    assert "no frame magic" in err and "bad logspace name" in err
    assert "reserved logspace name" in err and "peer pid" in err
    got = sorted(raw(m["message"]) for m in messages(store_cli, indexd.data, "main"))
    assert got == sorted([f"good {i}".encode() for i in range(4)] * 2)


def test_partial_frame_waits_for_the_rest(indexd: Indexd, fifo: HeldFifo, store_cli: Path) -> None:
    f = frame(b"split across writes", host="h", rtime=T0)
    w = fifo.writer()
    try:
        os.write(w, f[:10])
        time.sleep(0.5)
        os.write(w, f[10:30])
        time.sleep(0.5)
        assert indexd.status()["stored"] == 0
        assert fifo.pending() == 30  # nothing consumed before it is stored
        os.write(w, f[30:])
    finally:
        os.close(w)
    indexd.wait_stored(1, timeout=10)
    time.sleep(0.3)
    assert fifo.pending() == 0
    stop_ok(indexd)
    assert [m["message"] for m in messages(store_cli, indexd.data)] == ["split across writes"]


def test_malformed_log_is_rate_limited(indexd: Indexd, tmp_path: Path) -> None:
    junk = b"".join(b"LB1 x%d\n" % i for i in range(300)) + frame(b"after", rtime=T0)
    send_socket(tmp_path / "indexd.sock", junk)
    indexd.wait_stored(1, timeout=20)
    time.sleep(1.5)
    st = indexd.status()
    assert st["malformed"] == 300
    stop_ok(indexd)
    err = indexd.stderr()
    assert err.count("malformed frame from") <= 20
    assert "more malformed frames not logged" in err


@pytest.mark.parametrize("via", ["fifo", "socket"])
def test_long_messages_cut_once_and_flagged(
    indexd: Indexd, fifo: HeldFifo, tmp_path: Path, store_cli: Path, via: str
) -> None:
    # One just over LB_MSG_MAX (what the collector's template sends: decoded whole), one far
    # over LB_FRAME_MAX (streamed), each followed by a normal frame.
    just = bytes(random.Random(1).randrange(256) for _ in range(MSG_MAX + 1))
    huge = b"x" * (3 * FRAME_MAX) + b"END"
    data = (
        frame(just, rtime=T0)
        + frame(b"next 1", rtime=T0 + 1)
        + frame(huge, rtime=T0 + 2)
        + frame(b"next 2", rtime=T0 + 3)
    )
    if via == "fifo":
        threading.Thread(target=write_fifo, args=(fifo, data), daemon=True).start()
    else:
        send_socket(tmp_path / "indexd.sock", data)
    indexd.wait_stored(4, timeout=30)
    stop_ok(indexd)
    ms = messages(store_cli, indexd.data, "main")
    assert len(ms) == 4
    assert raw(ms[0]["message"]) == just[:MSG_MAX] and "truncated" in ms[0]["flags"]
    assert raw(ms[1]["message"]) == b"next 1" and "truncated" not in ms[1]["flags"]
    assert raw(ms[2]["message"]) == huge[:MSG_MAX] and "truncated" in ms[2]["flags"]
    assert raw(ms[3]["message"]) == b"next 2"
    st = indexd.status()
    assert st["truncated"] == 2


def test_sigterm_exits_0_with_everything_stored(
    indexd: Indexd, fifo: HeldFifo, tmp_path: Path, store_cli: Path
) -> None:
    n = 20000
    write_fifo(fifo, b"".join(frame(f"msg {i}", rtime=T0 + i / 1000) for i in range(n)))
    indexd.wait_stored(n, timeout=60)
    stop_ok(indexd)
    assert "stopped: 20000 stored" in indexd.stderr()
    ms = messages(store_cli, indexd.data, "main")
    assert [m["message"] for m in ms] == [f"msg {i}" for i in range(n)]
    st = subprocess.run(
        [str(store_cli), "stats", "--data", str(indexd.data), "--json"],
        capture_output=True,
        text=True,
    )
    assert st.returncode == 0, st.stderr


def test_sigterm_while_writing_then_restart(
    indexd: Indexd, fifo: HeldFifo, store_cli: Path
) -> None:
    # SIGTERM in the middle of a stream: exit 0; what indexd did not take stays in the FIFO
    # and the next indexd stores it, every frame once.
    n = 200_000
    blob = b"".join(frame(f"m{i}", rtime=T0 + i / 1e5) for i in range(n))
    t = threading.Thread(target=write_fifo, args=(fifo, blob), daemon=True)
    t.start()
    for _ in range(3):
        time.sleep(0.15)
        stop_ok(indexd)
        indexd.start()
    t.join(timeout=120)
    wait_until(lambda: fifo.pending() == 0, "the FIFO is drained", 60, interval=0.05)
    stop_ok(indexd)
    assert indexd.stderr().count("stopped: ") == 4
    assert [m["message"] for m in messages(store_cli, indexd.data, "main")] == [
        f"m{i}" for i in range(n)
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch users")
def test_user_drops_privileges(indexd_bin: Path) -> None:
    # (pytest's tmp_path sits in a directory only root may enter)
    work = Path(tempfile.mkdtemp(prefix="indexd-user-"))
    work.chmod(0o755)
    os.chown(work, 65534, -1)
    p = subprocess.Popen(
        [
            str(indexd_bin),
            "--data",
            str(work / "data"),
            "--listen",
            str(work / "s.sock"),
            "--user",
            "nobody",
            "--status",
            str(work / "st.json"),
        ],
        stderr=subprocess.PIPE,
    )
    try:
        wait_until((work / "st.json").exists, "indexd wrote st.json", 10, interval=0.05)
        assert os.stat(f"/proc/{p.pid}").st_uid == 65534
        assert (work / "s.sock").stat().st_uid == 65534
        assert (work / "s.sock").stat().st_mode & 0o777 == 0o660
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    assert p.returncode == 0, err
    assert b"running as nobody" in err


def test_sighup_reloads_config(indexd_bin: Path, tmp_path: Path) -> None:
    conf = tmp_path / "indexd.conf"
    conf.write_text("# settings\nmax_memory_mb = 256\nstatus_interval_ms = 500\n")
    d = Indexd(
        indexd_bin,
        tmp_path / "data",
        tmp_path / "status.json",
        args=["--listen", str(tmp_path / "s.sock"), "--config", str(conf)],
    )
    d.start()
    try:
        conf.write_text("max_memory_mb = 64\nlog_level = debug\n")
        d.signal(signal.SIGHUP)
        d.wait_logged("SIGHUP: reloaded", "indexd reloaded")
        assert "max_memory_mb = 64, log_level = debug" in d.stderr()
        conf.write_text("max_memory_mb = 32\nno_such_key = 1\n")
        d.signal(signal.SIGHUP)
        d.wait_logged("keeping the settings", "indexd kept its settings")
        assert "unknown key 'no_such_key'" in d.stderr()
        assert d.proc is not None and d.proc.poll() is None
    finally:
        stop_ok(d)


def test_lock_file_and_root_refusal(indexd: Indexd, indexd_bin: Path, tmp_path: Path) -> None:
    p = subprocess.run(
        [
            str(indexd_bin),
            "--data",
            str(indexd.data),
            "--listen",
            str(tmp_path / "b.sock"),
            "--allow-root",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 1
    assert "another logbox-indexd" in p.stderr
    if os.geteuid() == 0:
        p = subprocess.run(
            [str(indexd_bin), "--data", str(tmp_path / "x"), "--listen", str(tmp_path / "c.sock")],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert p.returncode == 1 and "refusing to run as root" in p.stderr
    stop_ok(indexd)


def test_status_file(indexd: Indexd, fifo: HeldFifo) -> None:
    write_fifo(fifo, frame(b"one", rtime=T0) + frame(b"two", ls="other", rtime=T0 + 1))
    indexd.wait_stored(2, timeout=20)
    st = indexd.status()
    for k in (
        "pid",
        "started",
        "uptime_s",
        "received",
        "stored",
        "malformed",
        "truncated",
        "eps_1s",
        "eps_60s",
        "holding",
        "inputs",
        "logspaces",
        "memory_bytes",
        "spool",
    ):
        assert k in st, k
    assert st["holding"] is None
    assert st["logspaces"]["main"]["next_id"] == 2
    assert st["logspaces"]["main"]["open"] is True
    assert st["logspaces"]["other"]["last_received"].startswith("2026-11-22T")
    assert {i["kind"] for i in st["inputs"]} == {"fifo", "listen", "spool"}
    stop_ok(indexd)


def test_holds_on_a_locked_logspace_without_dropping(
    indexd: Indexd, fifo: HeldFifo, store_cli: Path
) -> None:
    # `logbox ingest` holds logspace "busy"'s writer lock while its stdin is open: indexd cannot
    # open that store, holds (stops reading), and stores everything once the lock is free.
    ing = subprocess.Popen(
        [str(store_cli), "ingest", "--data", str(indexd.data), "--logspace", "busy"],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        time.sleep(0.5)
        write_fifo(
            fifo,
            frame(b"first", rtime=T0)
            + frame(b"blocked", ls="busy", rtime=T0 + 1)
            + frame(b"after", rtime=T0 + 2),
        )
        st = indexd.wait_status(lambda st: st["holding"], "indexd holds a logspace", 10)
        assert st["holding"] and "busy" in st["holding"], st
        assert st["stored"] == 1
    finally:
        assert ing.stdin is not None
        ing.stdin.close()
        ing.wait(timeout=30)
    indexd.wait_stored(3, timeout=20)
    assert "holding ended" in indexd.stderr()
    assert indexd.stderr().count("holding: ") == 1  # logged once, not once per retry
    stop_ok(indexd)
    assert [m["message"] for m in messages(store_cli, indexd.data, "busy")] == ["blocked"]
    assert [m["message"] for m in messages(store_cli, indexd.data, "main")] == ["first", "after"]


@pytest.mark.slow
def test_fifo_exactly_once_across_sigkill(
    indexd_bin: Path, tmp_path: Path, fifo: HeldFifo, store_cli: Path
) -> None:
    # 300,000 sequence-numbered frames for three logspaces, encoded up front and written as
    # fast as the pipe takes them, so indexd is busy storing when it is killed; SIGKILL at
    # random moments (at least 6 times, until the writer is done) and restart each time.
    # LB_INDEXD_KILL_FRAMES=3000000 makes a longer stress run.
    n = int(os.environ.get("LB_INDEXD_KILL_FRAMES", "300000"))
    lss = ("main", "second", "third")
    blob = b"".join(
        frame(f"seq {i:07d} " + "x" * (i % 97), ls=lss[i % 7 % 3], rtime=T0 + i / 1e4)
        for i in range(n)
    )
    d = Indexd(indexd_bin, tmp_path / "data", tmp_path / "status.json", fifo=fifo)
    d.start()

    def writer() -> None:
        write_fifo(fifo, blob)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    kills = kill_while(d, t.is_alive, most=400, pause=0.4, restart_pause=0.1)
    t.join(timeout=300)
    assert not t.is_alive()
    # Everything is stored once the FIFO is empty (indexd consumes bytes only after storing).
    wait_until(lambda: fifo.pending() == 0, "the FIFO is drained", 120, interval=0.1)
    stop_ok(d)
    seen: dict[int, int] = {}
    for ls in lss:
        for m in messages(store_cli, d.data, ls):
            seq = int(m["message"][4:11])
            assert lss[seq % 7 % 3] == ls
            seen[seq] = seen.get(seq, 0) + 1
    dup = {k: v for k, v in seen.items() if v > 1}
    missing = [i for i in range(n) if i not in seen]
    replays = d.stderr().count("finished the batch a previous indexd left")
    assert not dup, f"{len(dup)} stored twice, e.g. {list(dup)[:10]} ({replays} replays)"
    assert not missing, f"{len(missing)} missing, e.g. {missing[:10]} ({replays} replays)"
    assert d.starts == kills + 1


def test_systemd_notify_ready_watchdog_status(indexd_bin: Path, tmp_path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.settimeout(10)
    env_keep = dict(os.environ)
    os.environ.update({"NOTIFY_SOCKET": str(tmp_path / "notify"), "WATCHDOG_USEC": "400000"})
    try:
        d = Indexd(
            indexd_bin,
            tmp_path / "data",
            tmp_path / "status.json",
            args=["--listen", str(tmp_path / "s.sock")],
        )
        d.start()
    finally:
        os.environ.clear()
        os.environ.update(env_keep)
    got: list[str] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got.append(sock.recv(4096).decode())
        text = "\n".join(got)
        if "READY=1" in text and "WATCHDOG=1" in text and "STATUS=stored" in text:
            break
    text = "\n".join(got)
    assert "READY=1" in text and "WATCHDOG=1" in text, text
    assert "STATUS=stored 0, 0 msg/s, malformed 0" in text, text
    stop_ok(d)
    sock.close()


def test_max_memory_flushes_a_segment_early(
    indexd_bin: Path, tmp_path: Path, fifo: HeldFifo, store_cli: Path
) -> None:
    # The logspace is made with a 10-minute interval: only --max-memory 1 can make indexd
    # flush its index to a segment within the test.
    data = tmp_path / "data"
    subprocess.run(
        [str(store_cli), "ingest", "--data", str(data), "--flush-ms", "600000"],
        input=b"",
        check=True,
        capture_output=True,
    )
    d = Indexd(indexd_bin, data, tmp_path / "status.json", fifo=fifo, args=["--max-memory", "1"])
    d.start()
    n = 40000
    write_fifo(
        fifo,
        b"".join(frame(f"word{i} other{i * 7} x{i % 13}", rtime=T0 + i / 1e4) for i in range(n)),
    )
    d.wait_stored(n, timeout=30)
    d.wait_status(lambda st: st["logspaces"]["main"]["indexed_id"] > 1, "main is indexed", 10)
    stop_ok(d)
    assert len(messages(store_cli, d.data, "main")) == n


def test_a_lone_message_is_indexed_without_another(indexd: Indexd, fifo: HeldFifo) -> None:
    # A logspace publishes a segment at least every flush_ms (1 s by default) also when no
    # message follows: the last one before a quiet spell does not wait in the brute-forced
    # tail for the next (the tick's lb_store_flush_due).
    for n in (1, 2):
        write_fifo(fifo, frame(f"lone{n}".encode(), rtime=T0 + n))
        indexd.wait_stored(n, timeout=20)
        indexd.wait_status(
            lambda st, n=n: st["logspaces"]["main"]["indexed_id"] == n + 1,
            f"message {n} indexed while nothing else arrives",
            10,
        )
    stop_ok(indexd)
