"""logbox-indexd's --logspaces settings file (webui/UI.md "Logspace settings") and retention, with
a real indexd: the file is applied at start, when it changes (no signal) and on SIGHUP; a bad file
keeps the settings in force and the log and the status file say why; new delimiters tokenize the
messages stored from then on (checked with `logbox lookup` and `logbox search`); retention removes
whole old days from the catalog and the disk while a searchd keeps answering, and a day directory
the catalog no longer knows (a kill between the two steps) is removed by the next pass."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lbtest.frames import frame
from lbtest.indexd import HeldFifo, Indexd, messages
from lbtest.searchd import Searchd, searchd_binary
from lbtest.wait import wait_until

DAY = 86400
DEFAULT = "&:~?![]=,;()'\"/\\|<>{}*"


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    return tmp_path / "logspaces.json"


@pytest.fixture
def make_daemon(indexd_bin: Path, tmp_path: Path, fifo: HeldFifo, settings: Path) -> Iterator[Any]:
    made: list[Indexd] = []

    def make(start: bool = True) -> Indexd:
        d = Indexd(
            indexd_bin,
            tmp_path / "data",
            tmp_path / "status.json",
            fifo=fifo,
            args=["--logspaces", str(settings)],
        )
        made.append(d)
        if start:
            d.start()
        return d

    yield make
    for d in made:
        if d.proc is not None and d.proc.poll() is None:
            d.kill()


def write_settings(path: Path, doc: Any) -> None:
    """Atomically, as the web UI does (write a temporary file, rename it over)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    os.replace(tmp, path)


def send(fifo: HeldFifo, data: bytes) -> None:
    w = fifo.writer()
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(w, view) :]
    finally:
        os.close(w)


def wait_for(cond: Any, what: str, d: Indexd, timeout: float = 10) -> Any:
    return wait_until(cond, what, timeout, interval=0.05, detail=lambda: d.stderr()[-3000:])


def log_count(d: Indexd, text: str) -> int:
    return d.stderr().count(text)


def ls_status(d: Indexd, name: str = "main") -> dict[str, Any]:
    st = d.status()
    assert st is not None
    return st["logspaces"].get(name, {})


def lookup(logbox: Path, data: Path, term: str) -> list[int]:
    p = subprocess.run(
        [str(logbox), "lookup", "--data", str(data), term], capture_output=True, timeout=60
    )
    assert p.returncode == 0, p.stderr.decode()
    return [int(x) for x in p.stdout.split()]


def search_ids(logbox: Path, data: Path, q: str) -> list[int]:
    p = subprocess.run(
        [
            str(logbox),
            "search",
            "--data",
            str(data),
            "--from",
            "-30d",
            "--to",
            "+1d",
            "--order",
            "oldest",
            "--json",
            q,
        ],
        capture_output=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr.decode()
    return [json.loads(line)["id"] for line in p.stdout.decode().splitlines() if line.strip()]


def test_applied_at_start_reported_and_logged(make_daemon: Any, settings: Path) -> None:
    write_settings(
        settings,
        {
            "version": 1,
            "logspaces": {
                "main": {"retention_days": 30, "delimiters": DEFAULT + "."},
                "audit": {"retention_days": 365},
            },
        },
    )
    d = make_daemon()
    st = d.status()
    assert st["settings"]["file"] == str(settings)
    assert st["settings"]["applied"] is not None and st["settings"]["applied"].endswith("Z")
    assert st["settings"]["error"] is None
    # Both logspaces exist now (created by the settings), with what the file said.
    assert ls_status(d, "main")["retention_days"] == 30
    assert ls_status(d, "main")["delimiters"] == DEFAULT + "."
    assert ls_status(d, "audit")["retention_days"] == 365
    assert ls_status(d, "audit")["delimiters"] == DEFAULT
    esc = DEFAULT.replace("\\", "\\\\").replace('"', '\\"') + "."
    assert (
        f'settings: applied {settings}: main retention 30 d, delimiters "{esc}"' in d.stderr()
        or f"settings: applied {settings}: audit retention 365 d; main retention 30 d, "
        f'delimiters "{esc}"'
        in d.stderr()
    ), d.stderr()
    assert d.stop() == 0


def test_no_file_and_no_option(
    make_daemon: Any, settings: Path, indexd_bin: Path, tmp_path: Path, fifo: HeldFifo
) -> None:
    d = make_daemon()  # the file does not exist: no settings, not an error
    st = d.status()
    assert st["settings"] == {"file": str(settings), "applied": None, "error": None}
    assert "no such file: no settings to apply" in d.stderr()
    # It appears later: applied without a signal.
    write_settings(settings, {"version": 1, "logspaces": {"main": {"retention_days": 7}}})
    wait_for(lambda: ls_status(d).get("retention_days") == 7, "retention 7", d)
    assert d.stop() == 0
    d2 = Indexd(indexd_bin, tmp_path / "data", tmp_path / "status.json", fifo=fifo)
    d2.start()
    try:
        assert d2.status()["settings"] == {"file": None, "applied": None, "error": None}
        assert ls_status(d2)["retention_days"] == 7  # (kept in the catalog)
    finally:
        assert d2.stop() == 0


def test_change_without_signal_and_sighup(make_daemon: Any, settings: Path) -> None:
    write_settings(settings, {"version": 1, "logspaces": {"main": {"retention_days": 30}}})
    d = make_daemon()
    applied0 = d.status()["settings"]["applied"]
    # Replaced (new inode): seen within the 2 s poll.
    write_settings(settings, {"version": 1, "logspaces": {"main": {"retention_days": 10}}})
    wait_for(lambda: ls_status(d).get("retention_days") == 10, "retention 10", d, 6)
    assert d.status()["settings"]["applied"] != applied0
    # Rewritten in place (same inode, new size and mtime).
    settings.write_text(json.dumps({"version": 1, "logspaces": {"main": {"retention_days": 5}}}))
    wait_for(lambda: ls_status(d).get("retention_days") == 5, "retention 5", d, 6)
    # Unchanged: not read again by the poll ...
    n = log_count(d, "settings: applied")
    time.sleep(2.5)
    assert log_count(d, "settings: applied") == n
    # ... but on SIGHUP.
    d.signal(signal.SIGHUP)
    wait_for(lambda: log_count(d, "settings: applied") == n + 1, "applied on SIGHUP", d)
    assert d.stop() == 0


BAD = [
    (b"{not json", "not JSON"),
    (b"", "not JSON"),
    (b"[1, 2]", "expected a JSON object"),
    (b'{"version": 2, "logspaces": {}}', "version: expected 1"),
    (b'{"logspaces": {}}', "no version"),
    (b'{"version": 1, "logspaces": {}, "extra": 1}', "unknown member 'extra'"),
    (b'{"version": 1, "logspaces": []}', "logspaces: expected an object"),
    (b'{"version": 1, "logspaces": {"Main": {}}}', "logspace 'Main': logspace name not"),
    (b'{"version": 1, "logspaces": {"catalog": {}}}', "reserved logspace name"),
    (b'{"version": 1, "logspaces": {"' + b"a" * 65 + b'": {}}}', "length not 1..64"),
    (b'{"version": 1, "logspaces": {"main": 3}}', "logspaces.main: expected an object"),
    (b'{"version": 1, "logspaces": {"main": {"retention": 3}}}', "unknown member 'retention'"),
    (b'{"version": 1, "logspaces": {"main": {"retention_days": -1}}}', "0..36500"),
    (b'{"version": 1, "logspaces": {"main": {"retention_days": 36501}}}', "0..36500"),
    (b'{"version": 1, "logspaces": {"main": {"retention_days": "3"}}}', "0..36500"),
    (b'{"version": 1, "logspaces": {"main": {"retention_days": 1.5}}}', "0..36500"),
    (b'{"version": 1, "logspaces": {"main": {"delimiters": ".a"}}}', "letter or digit"),
    (b'{"version": 1, "logspaces": {"main": {"delimiters": ".7"}}}', "letter or digit"),
    (b'{"version": 1, "logspaces": {"main": {"delimiters": ". "}}}', "holds a space"),
    (b'{"version": 1, "logspaces": {"main": {"delimiters": ".\\t"}}}', "control byte"),
    (b'{"version": 1, "logspaces": {"main": {"delimiters": ".\\u007f"}}}', "control byte"),
    (
        b'{"version": 1, "logspaces": {"main": {"delimiters": "' + b"." * 64 + b'"}}}',
        "longer than 63 bytes",
    ),
    (b'{"version": 1, "logspaces": {"main": {"delimiters": 5}}}', "expected a string"),
    (b'{"version": 1, "version": 1}', "not JSON"),  # duplicate member
]


def test_bad_files_change_nothing(make_daemon: Any, settings: Path) -> None:
    good = {"version": 1, "logspaces": {"main": {"retention_days": 30, "delimiters": ".;"}}}
    write_settings(settings, good)
    d = make_daemon()
    for content, why in BAD:
        n = log_count(d, "keeping the settings in force")
        # One bad entry after a good one: nothing of the file applies (not even "other").
        write_settings(settings, content)
        d.signal(signal.SIGHUP)
        wait_for(lambda n=n: log_count(d, "keeping the settings in force") > n, f"refused {why}", d)
        line = d.stderr().splitlines()[-1]
        assert why in line and str(settings) in line, (content, line)
        # the status file is rewritten after the log line: wait for it
        wait_for(
            lambda why=why: why in (d.status()["settings"]["error"] or ""),
            f"status names {why}",
            d,
        )
        assert ls_status(d)["retention_days"] == 30
        assert ls_status(d)["delimiters"] == ".;"
    write_settings(
        settings,
        b'{"version": 1, "logspaces": {"other": {"retention_days": 1}, "main": {"bad": 1}}}',
    )
    d.signal(signal.SIGHUP)
    wait_for(lambda: "unknown member 'bad'" in d.stderr(), "refused", d)
    assert "other" not in d.status()["logspaces"]
    # A good file again clears the error.
    write_settings(settings, good)
    d.signal(signal.SIGHUP)
    wait_for(lambda: d.status()["settings"]["error"] is None, "error cleared", d)
    assert d.proc.poll() is None
    assert d.stop() == 0


def test_garbage_files(make_daemon: Any, settings: Path) -> None:
    """Random bytes and mangled JSON: always refused or applied, never a crash."""
    rng = random.Random(7)
    base = json.dumps(
        {"version": 1, "logspaces": {"main": {"retention_days": 30, "delimiters": DEFAULT}}}
    ).encode()
    write_settings(settings, base)
    d = make_daemon()
    for i in range(60):
        if i % 3 == 0:
            blob = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
        else:
            b = bytearray(base)
            for _ in range(rng.randrange(1, 6)):
                pos = rng.randrange(len(b))
                op = rng.randrange(3)
                if op == 0:
                    b[pos] = rng.randrange(256)
                elif op == 1:
                    del b[pos]
                else:
                    b.insert(pos, rng.choice(b'{}[]",:\\0123456789abz-_ \x00\xff'))
            blob = bytes(b)
        n = log_count(d, "settings: ")
        write_settings(settings, blob)
        d.signal(signal.SIGHUP)
        wait_for(lambda n=n: log_count(d, "settings: ") > n, "a settings line", d)
        assert d.proc.poll() is None
    assert d.status()["pid"] == d.proc.pid
    assert d.stop() == 0


def test_new_delimiters_apply_to_messages_stored_afterwards(
    make_daemon: Any, settings: Path, fifo: HeldFifo, store_cli: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    write_settings(settings, {"version": 1, "logspaces": {"main": {"delimiters": DEFAULT}}})
    d = make_daemon()
    send(fifo, frame("user alpha#beta%example logged in"))
    d.wait_stored(1)
    write_settings(settings, {"version": 1, "logspaces": {"main": {"delimiters": DEFAULT + "#%"}}})
    wait_for(lambda: ls_status(d).get("delimiters") == DEFAULT + "#%", "new delimiters", d, 6)
    assert "tokenized with the new delimiters" in d.stderr()
    send(fifo, frame("user gamma#delta%example logged in"))
    d.wait_stored(2)
    time.sleep(0.3)
    for run in ("running", "stopped"):
        # id 1 keeps its tokens; id 2 was cut at '#' and '%' (not '.' and '@', which make parts
        # of a compound token that a word finds either way: FORMAT.md §6)
        assert lookup(store_cli, data, "alpha#beta%example") == [1], run
        assert lookup(store_cli, data, "alpha") == [], run
        assert lookup(store_cli, data, "gamma#delta%example") == [], run
        assert lookup(store_cli, data, "gamma") == [2], run
        assert lookup(store_cli, data, "delta") == [2], run
        assert lookup(store_cli, data, "example") == [2], run
        assert search_ids(store_cli, data, "delta") == [2], run
        assert search_ids(store_cli, data, "logged") == [1, 2], run
        if run == "running":
            assert d.stop() == 0
    # The next start writes with the catalog's delimiters.
    d2 = make_daemon()
    send(fifo, frame("user eps#zeta logged in"))
    d2.wait_stored(1)
    time.sleep(0.3)
    assert lookup(store_cli, data, "zeta") == [3]
    assert d2.stop() == 0


def day_dir(data: Path, t: float, ls: str = "main") -> Path:
    g = time.gmtime(t)
    return data / ls / f"{g.tm_year:04d}" / f"{g.tm_mon:02d}-{g.tm_mday:02d}"


def test_retention_removes_old_days(
    make_daemon: Any, settings: Path, fifo: HeldFifo, store_cli: Path, tmp_path: Path, top: Path
) -> None:
    data = tmp_path / "data"
    now = time.time()
    write_settings(settings, {"version": 1, "logspaces": {"main": {"retention_days": 0}}})
    d = make_daemon()
    ages = [10, 5, 0]
    batch = b""
    for age in ages:
        for i in range(5):
            batch += frame(f"word{age} message {i} of day {age}", rtime=now - age * DAY + i)
    send(fifo, batch)
    d.wait_stored(15)
    for age in ages:
        assert day_dir(data, now - age * DAY).is_dir()
    sd = Searchd(searchd_binary(top), data, tmp_path / "searchd.sock").start()
    try:

        def logspaces() -> dict[str, Any]:
            r = sd.get("/v1/logspaces")
            assert r.status == 200
            return {x["name"]: x for x in r.json["logspaces"]}["main"]

        def total(q: str) -> int:
            r = sd.get("/v1/search", {"q": q, "from": "-30d", "to": "+1d", "logspace": "main"})
            assert r.status == 200, r.json
            return r.json["total"]

        wait_for(lambda: logspaces()["next_id"] == 16, "searchd sees 15", d)
        assert logspaces()["first_id"] == 1 and logspaces()["messages"] == 15
        assert total("word10") == 5 and total("message") == 15

        write_settings(settings, {"version": 1, "logspaces": {"main": {"retention_days": 3}}})
        wait_for(lambda: log_count(d, "retention: main: removed") == 2, "two days removed", d, 8)
        log = d.stderr()
        for age in (10, 5):
            g = time.gmtime(now - age * DAY)
            assert (
                f"retention: main: removed {g.tm_year:04d}/{g.tm_mon:02d}-{g.tm_mday:02d} "
                f"(5 messages, " in log
            ), log
            assert not day_dir(data, now - age * DAY).exists()
        assert day_dir(data, now).is_dir()
        # searchd: the same process, its cached handles
        assert logspaces()["first_id"] == 11
        assert logspaces()["messages"] == 5
        assert logspaces()["next_id"] == 16
        assert total("word10") == 0 and total("word5") == 0
        assert total("word0") == 5 and total("message") == 5
        assert sd.get("/v1/messages/1", {"logspace": "main"}).status == 404
        assert sd.get("/v1/messages/11", {"logspace": "main"}).status == 200
        # the store through the CLI
        assert [m["id"] for m in messages(store_cli, data)] == list(range(11, 16))
        assert lookup(store_cli, data, "word10") == []
        assert lookup(store_cli, data, "message") == list(range(11, 16))
        v = subprocess.run([str(store_cli), "verify", "--data", str(data)], capture_output=True)
        assert v.returncode == 0, v.stdout.decode() + v.stderr.decode()
        # New messages still go on from 16.
        send(fifo, frame("after retention", rtime=now + 10))
        d.wait_stored(16)
        wait_for(lambda: logspaces()["next_id"] == 17, "searchd sees 16", d)
        assert total("after") == 1
    finally:
        sd.stop()
    assert d.stop() == 0
    v = subprocess.run([str(store_cli), "verify", "--data", str(data)], capture_output=True)
    assert v.returncode == 0, v.stdout.decode() + v.stderr.decode()


def test_retention_removes_orphan_day_directories(
    make_daemon: Any, settings: Path, fifo: HeldFifo, store_cli: Path, tmp_path: Path
) -> None:
    """A kill between the catalog's delete and the files' removal leaves the day's directory:
    a day the catalog does not know, older than the window. The next pass removes it; a
    directory inside the window is left alone."""
    data = tmp_path / "data"
    now = time.time()
    write_settings(settings, {"version": 1, "logspaces": {"main": {"retention_days": 3}}})
    d = make_daemon()
    send(fifo, frame("today", rtime=now))
    d.wait_stored(1)
    assert d.stop() == 0
    old = day_dir(data, now - 20 * DAY)
    (old / "index").mkdir(parents=True)
    (old / "messages").write_bytes(b"x" * 1000)
    (old / "index" / "0000000000000001-0000000000000005.seg").write_bytes(b"y" * 24)
    recent = day_dir(data, now - 1 * DAY)
    recent.mkdir(parents=True, exist_ok=True)
    d2 = make_daemon()  # a pass at start
    wait_for(lambda: not old.exists(), "orphan removed", d2)
    assert "left by an interrupted removal (1024 bytes)" in d2.stderr()
    assert recent.is_dir()
    assert day_dir(data, now).is_dir()
    assert [m["message"] for m in messages(store_cli, data)] == ["today"]
    assert d2.stop() == 0


def test_retention_keeps_days_not_archived_and_restored_days(
    indexd_bin: Path, settings: Path, fifo: HeldFifo, store_cli: Path, tmp_path: Path
) -> None:
    """A logspace that logbox-archive archives (its directory in --archive-state) loses a day
    only once the day's archived copy is verified (verified/YYYYMMDD.json), in day order; a
    logspace without that directory is not held. A day with <day>/restored (`logbox archive
    import`) stays until `logbox archive release`."""
    data, state = tmp_path / "data", tmp_path / "archive"
    now = time.time()
    ages = [10, 8, 6, 0]
    spaces = {"main": {"retention_days": 3}, "other": {"retention_days": 3}}
    write_settings(settings, {"version": 1, "logspaces": spaces})
    d = Indexd(
        indexd_bin,
        data,
        tmp_path / "status.json",
        fifo=fifo,
        args=["--logspaces", str(settings), "--archive-state", str(state)],
    )
    (state / "main" / "verified").mkdir(parents=True)
    ymd = {age: time.strftime("%Y%m%d", time.gmtime(now - age * DAY)) for age in ages}
    (state / "main" / "verified" / f"{ymd[10]}.json").write_text("{}")
    d.start()
    try:
        batch = b""
        for ls in ("main", "other"):
            for age in ages:
                batch += frame(f"day {age}", rtime=now - age * DAY, ls=ls)
        send(fifo, batch)
        d.wait_stored(8)
        # The pass at start ran before the messages came: SIGHUP runs another.
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: log_count(d, "retention: other: removed") == 3, "other's 3 days", d)
        wait_for(lambda: log_count(d, "retention: main: removed") == 1, "main's day 10", d)
        assert f"keeping {ymd[8][:4]}/{ymd[8][4:6]}-{ymd[8][6:]} and the days after" in d.stderr()
        for age in (8, 6, 0):
            assert day_dir(data, now - age * DAY, "main").is_dir()
        assert not day_dir(data, now - 10 * DAY, "main").exists()

        # Day 8 restored (its marker), day 6 verified: day 6 goes, day 8 stays.
        (day_dir(data, now - 8 * DAY, "main") / "restored").write_bytes(b"")
        (state / "main" / "verified" / f"{ymd[6]}.json").write_text("{}")
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: log_count(d, "retention: main: removed") == 2, "main's day 6", d)
        assert day_dir(data, now - 8 * DAY, "main").is_dir()
        assert not day_dir(data, now - 6 * DAY, "main").exists()

        # Released (and verified): the next pass removes it.
        r = subprocess.run(
            [str(store_cli), "archive", "release", "--data", str(data), "--day", ymd[8]],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr
        r = subprocess.run(
            [str(store_cli), "archive", "release", "--data", str(data), "--day", ymd[8]],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 1 and "not a restored day" in r.stderr
        d.proc.send_signal(signal.SIGHUP)
        time.sleep(1)
        assert day_dir(data, now - 8 * DAY, "main").is_dir()  # not verified yet
        (state / "main" / "verified" / f"{ymd[8]}.json").write_text("{}")
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: log_count(d, "retention: main: removed") == 3, "main's day 8", d)
        assert day_dir(data, now, "main").is_dir()
    finally:
        assert d.stop() == 0
