# logbox_core.status: the appliance's state for /api/v1/status. With a real logbox-indexd (its
# status file), a real logbox-searchd and a live process as syslog-ng, every service is running
# and the logspaces, rates and disk figures are those of the store; a stale, missing or garbled
# status file, a pid file naming a dead or zombie process or holding garbage, and a stopped
# searchd each make their service "down" with a reason in "problems", never an exception.
# parse_mdstat reads /proc/mdstat texts in the kernel's exact format (drivers/md/md.c:
# md_seq_show, status_resync; raid1/raid5 status): clean, degraded [U_], resync and recovery
# with progress, check, delayed/pending, inactive, raid0; raid_for_path finds the array under a
# path through a /sys/dev/block tree (the md device itself, a partition of it, dm on top of it).

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lbtest.apps import running_services
from lbtest.cli import Logbox
from lbtest.frames import frame
from lbtest.searchd import Searchd as Daemon
from lbtest.searchd import searchd_binary
from lbtest.wait import wait_until
from logbox_core import status
from logbox_core.searchd import Searchd
from logbox_core.status import gather, logspace_bytes, parse_mdstat, pid_alive, raid_for_path

# indexd's service entry, but for its state, when its status file was not read
INDEXD_UNREAD = {
    "pid": None,
    "uptime_s": None,
    "holding": None,
    "disk_full": None,
    "held_back_bytes": None,
    "reserve_bytes": None,
    "resources": None,
}

# ---------------------------------------------------------------- real daemons


@pytest.fixture(scope="module")
def appliance(
    tmp_path_factory: pytest.TempPathFactory, store_cli: Path, top: Path, sockdir: Path
) -> Iterator[dict]:
    """A store (main: 300 messages, web: 20) with indexd, searchd and a stand-in syslog-ng (a
    live process named in a pid file) running on it."""
    base = tmp_path_factory.mktemp("core_status")
    data = base / "data"
    data.mkdir()
    Logbox(store_cli, data).ingest(b"".join(b"<14>app: hello %d\n" % i for i in range(300)))
    Logbox(store_cli, data, logspace="web").ingest(b"<14>web: get /\n" * 20)
    with running_services(top, base, data, sockdir / "st.sock", ["--threads", "1"]) as s:
        client = Searchd(s.searchd.sock, timeout=10)
        yield {
            "data": data,
            "indexd": s.indexd,
            "fifo": s.fifo,
            "searchd": s.searchd,
            "client": client,
            "pidfile": s.pidfile,
            "base": base,
        }
        client.close()


def gather_all(app: dict, **kw: object) -> dict:
    args = {
        "data_dir": app["data"],
        "indexd_status": app["indexd"].status_path,
        "syslogng_pidfile": app["pidfile"],
        "searchd": app["client"],
    }
    return gather(**{**args, **kw})


def test_everything_running(appliance: dict) -> None:
    indexd = appliance["indexd"]
    w = appliance["fifo"].writer()
    try:
        os.write(w, b"".join(frame(f"fed {i}", ls="web") for i in range(5)))
    finally:
        os.close(w)
    st = indexd.wait_stored(5)
    time.sleep(1.2)  # the next status interval
    st = indexd.status()
    t0 = time.time()
    got = gather_all(appliance)
    assert got["problems"] == [] and got["health"] == "ok"
    svc = got["services"]
    for name in ("syslog-ng", "indexd", "searchd"):  # what /proc says of each (make run's way)
        res = svc[name].pop("resources")
        assert res["source"] == "proc" and res["cpu_s"] >= 0 and res["rss_bytes"] > 1 << 20, res
    assert 0 <= svc["syslog-ng"].pop("uptime_s") < 300
    assert 0 <= svc["searchd"].pop("uptime_s") < 300
    assert got["services"] == {
        "syslog-ng": {"state": "running", "pid": int(appliance["pidfile"].read_text())},
        "indexd": {
            "state": "running",
            "pid": indexd.proc.pid,
            "uptime_s": got["services"]["indexd"]["uptime_s"],
            "holding": None,
            "disk_full": False,
            "held_back_bytes": 0,
            "reserve_bytes": got["services"]["indexd"]["reserve_bytes"],
            # no `logbox keys init` in this data directory
            "sealing": {
                "setup": False,
                "epoch": None,
                "last_sealed": None,
                "error": None,
                "tsa_url": None,
                "tsa_error": None,
            },
        },
        "searchd": {"state": "running", "pid": appliance["searchd"].proc.pid},
    }
    assert 0 < got["services"]["indexd"]["uptime_s"] < 300
    assert got["stored"] == st["stored"] == 5 and got["malformed"] == 0
    assert got["quarantined"] == 0 and got["deadletter"]["records"] == 0
    # indexd reads its spool too (<data>/spool): nothing waits there, nothing was torn
    sp = got["spool"]
    assert sp is not None and set(sp) == {
        "files",
        "waiting_bytes",
        "oldest_waiting",
        "lag_s",
        "torn",
        "malformed",
    }
    assert sp["waiting_bytes"] == 0 and sp["torn"] == 0 and sp["malformed"] == 0, sp
    assert set(got["eps"]) == {"1s", "60s"} and got["eps"]["60s"] > 0
    assert abs(time.mktime(time.strptime(got["time"][:19], "%Y-%m-%dT%H:%M:%S")) - t0) < 86400
    assert got["time"].endswith("Z") and len(got["time"]) == 27
    spaces = {s["name"]: s for s in got["logspaces"]}
    assert sorted(spaces) == ["main", "web"]
    web, main = spaces["web"], spaces["main"]
    assert web["next_id"] == 26 and main["next_id"] == 301
    assert web["indexed_id"] == st["logspaces"]["web"]["indexed_id"]
    assert web["index_lag"] == 26 - web["indexed_id"]
    assert web["last_received"] == st["logspaces"]["web"]["last_received"]
    assert main["bytes"] > 0 and web["bytes"] > 0
    disk = got["disk"]
    assert disk["path"] == str(appliance["data"])
    assert 0 < disk["free_bytes"] <= disk["total_bytes"] and disk["used_bytes"] > 0
    assert disk["store_bytes"] >= main["bytes"] + web["bytes"]
    assert got["raid"] is None  # not on md RAID here
    json.dumps(got)  # JSON all the way


def test_indexd_stale_missing_garbage(appliance: dict, tmp_path: Path) -> None:
    real = appliance["indexd"].status_path
    got = gather_all(appliance, now=time.time() + 11)
    assert got["services"]["indexd"]["state"] == "down"
    assert got["health"] == "degraded"
    assert any("stale" in p for p in got["problems"])
    assert got["stored"] is None and got["eps"] == {"1s": None, "60s": None}
    # The stale file's logspaces and searchd's still give the list.
    assert [s["name"] for s in got["logspaces"]] == ["main", "web"]

    missing = gather_all(appliance, indexd_status=tmp_path / "none.json")
    assert missing["services"]["indexd"]["state"] == "down"
    assert missing["problems"] == [f"indexd: no status file {tmp_path / 'none.json'}"]
    assert [s["name"] for s in missing["logspaces"]] == ["main", "web"]  # from searchd
    assert missing["logspaces"][0]["indexed_id"] is None

    for text in (b"{not json", b"[1, 2]", b"", b"\xff\xfe"):
        bad = tmp_path / "bad.json"
        bad.write_bytes(text)
        got = gather_all(appliance, indexd_status=bad)
        assert got["services"]["indexd"] == {"state": "down", **INDEXD_UNREAD}
        assert any("is not a status file" in p for p in got["problems"]), got["problems"]

    # A fresh file naming a dead pid; one saying indexd is holding.
    st = json.loads(real.read_text())
    dead = subprocess.Popen(["true"])
    dead.wait()
    f = tmp_path / "dead.json"
    f.write_text(json.dumps({**st, "pid": dead.pid}))
    got = gather_all(appliance, indexd_status=f)
    assert got["services"]["indexd"]["state"] == "down"
    assert got["services"]["indexd"]["pid"] == dead.pid
    assert f"indexd: pid {dead.pid} (from {f}) is not running" in got["problems"]
    f.write_text(json.dumps({**st, "holding": "main: No space left on device"}))
    got = gather_all(appliance, indexd_status=f)
    assert got["services"]["indexd"]["state"] == "running"
    assert got["services"]["indexd"]["holding"] == "main: No space left on device"
    assert got["problems"] == ["indexd: holding: main: No space left on device"]
    assert got["health"] == "degraded"
    # Disk full: said, with the reserve and what is held back.
    disk = {**st["disk"], "full": True, "free_bytes": 0, "held_back_bytes": 4096}
    f.write_text(json.dumps({**st, "holding": "disk full: ...", "disk": disk}))
    got = gather_all(appliance, indexd_status=f)
    ix = got["services"]["indexd"]
    assert ix["disk_full"] is True and ix["held_back_bytes"] == 4096
    assert ix["reserve_bytes"] == st["disk"]["reserve_bytes"] > 0
    assert got["problems"][-1] == (
        f"indexd: disk full: 0 bytes free, reserve {ix['reserve_bytes']} bytes; "
        "4096 bytes held back"
    )
    # Stale is judged by indexd's own interval when that is longer than 10 s: a file 20 s old
    # is fresh at a 10 s interval and stale at a 1 s one.
    f.write_text(json.dumps({**st, "interval_ms": 10000}))
    assert (
        gather_all(appliance, indexd_status=f, now=time.time() + 20)["services"]["indexd"]["state"]
        == "running"
    )
    f.write_text(json.dumps({**st, "interval_ms": 1000}))
    got = gather_all(appliance, indexd_status=f, now=time.time() + 20)
    assert got["services"]["indexd"]["state"] == "down"
    assert any("is stale" in p for p in got["problems"])


def test_syslogng_pidfile(appliance: dict, tmp_path: Path) -> None:
    pf = tmp_path / "s.pid"
    got = gather_all(appliance, syslogng_pidfile=pf)
    assert got["services"]["syslog-ng"] == {"state": "down", "pid": None, "resources": None}
    assert got["problems"] == [f"syslog-ng: no pid file {pf}"]
    for text in ("", "abc\n", "12 13\n", "-5", "\x00"):
        pf.write_text(text)
        got = gather_all(appliance, syslogng_pidfile=pf)
        assert got["services"]["syslog-ng"] == {"state": "down", "pid": None, "resources": None}
        assert "holds no pid" in got["problems"][0]
    dead = subprocess.Popen(["true"])
    dead.wait()
    pf.write_text(f"{dead.pid}\n")
    got = gather_all(appliance, syslogng_pidfile=pf)
    assert got["services"]["syslog-ng"] == {"state": "down", "pid": dead.pid, "resources": None}
    assert got["health"] == "degraded"
    # A zombie (exited, not yet reaped) is not running either.
    zombie = subprocess.Popen(["true"])
    wait_until(
        lambda: Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z",
        "the child is a zombie",
        10,
        interval=0.01,
    )
    assert not pid_alive(zombie.pid)
    zombie.wait()
    assert pid_alive(os.getpid()) and pid_alive(1)  # pid 1: another user's is fine too
    assert not pid_alive(0) and not pid_alive(-1)


def test_not_configured_is_unknown(appliance: dict) -> None:
    got = gather(
        data_dir=appliance["data"], indexd_status=None, syslogng_pidfile=None, searchd=None
    )
    assert got["services"] == {
        "syslog-ng": {"state": "unknown", "pid": None, "resources": None},
        "indexd": {"state": "unknown", **INDEXD_UNREAD},
        "searchd": {"state": "unknown", "resources": None},
    }
    assert got["problems"] == [] and got["health"] == "ok"
    assert got["logspaces"] == [] and got["stored"] is None


def test_searchd_down_and_data_missing(appliance: dict, tmp_path: Path, top: Path) -> None:
    gone = Searchd(tmp_path / "no.sock", timeout=1)
    got = gather_all(appliance, searchd=gone, data_dir=tmp_path / "nodata")
    assert got["services"]["searchd"] == {"state": "down", "resources": None}
    assert any(p.startswith("searchd: searchd unavailable: no socket") for p in got["problems"])
    assert got["disk"]["total_bytes"] is None
    assert any(p.startswith("disk: cannot stat data directory") for p in got["problems"])
    # searchd up without a store yet: /health answers, the logspaces do not.
    empty = tmp_path / "empty"
    empty.mkdir()
    d = Daemon(searchd_binary(top), empty, Path(appliance["searchd"].sock).with_name("e.sock"))
    d.start()
    try:
        c = Searchd(d.sock, timeout=5)
        got = gather_all(appliance, searchd=c)
        sd = got["services"]["searchd"]
        assert sd["state"] == "running" and sd["pid"] == d.proc.pid, sd
        assert sd["resources"]["source"] == "proc", sd
        assert any(p.startswith("searchd: logspaces: ") for p in got["problems"])
        c.close()
    finally:
        d.stop()


def test_logspace_bytes(tmp_path: Path) -> None:
    d = tmp_path / "data"
    (d / "main" / "2026").mkdir(parents=True)
    (d / "main" / "a").write_bytes(b"x" * 10000)
    (d / "main" / "2026" / "b").write_bytes(b"y" * 5000)
    (d / "main" / "link").symlink_to("/usr")  # not followed
    want = sum(
        os.lstat(os.path.join(r, n)).st_blocks * 512
        for r, ds, fs in os.walk(d / "main")
        for n in ds + fs
    )
    assert logspace_bytes(d, "main") == want >= 15000
    (d / "main" / "c").write_bytes(b"z" * 100000)
    assert logspace_bytes(d, "main") == want  # cached for 10 s
    status._bytes_cache.clear()
    assert logspace_bytes(d, "main") >= want + 100000
    assert logspace_bytes(d, "nope") == 0


# ---------------------------------------------------------------- md RAID

PERSONALITIES = (
    "Personalities : [raid1] [linear] [multipath] [raid0] [raid6] [raid5] [raid4] [raid10] \n"
)

CLEAN = (
    PERSONALITIES
    + "md0 : active raid1 sdb1[1] sda1[0]\n"
    + "      976630464 blocks super 1.2 [2/2] [UU]\n"
    + "      bitmap: 0/8 pages [0KB], 65536KB chunk\n"
    + "\n"
    + "unused devices: <none>\n"
)
DEGRADED = (
    PERSONALITIES
    + "md0 : active raid1 sda1[0] sdb1[1](F)\n"
    + "      976630464 blocks super 1.2 [2/1] [U_]\n"
    + "      bitmap: 2/8 pages [8KB], 65536KB chunk\n"
    + "\n"
    + "unused devices: <none>\n"
)
RESYNC = (
    PERSONALITIES
    + "md0 : active raid1 sdb1[1] sda1[0]\n"
    + "      976630464 blocks super 1.2 [2/2] [UU]\n"
    + "      [====>................]  resync = 21.4% (209154944/976630464) finish=62.3min"
    + " speed=205286K/sec\n"
    + "      bitmap: 6/8 pages [24KB], 65536KB chunk\n"
    + "\n"
    + "unused devices: <none>\n"
)
RECOVERY = (
    PERSONALITIES
    + "md0 : active raid1 sdc1[2] sda1[0]\n"
    + "      976630464 blocks super 1.2 [2/1] [U_]\n"
    + "      [>....................]  recovery =  0.3% (3245568/976630464) finish=94.9min"
    + " speed=170819K/sec\n"
    + "      \n"
    + "unused devices: <none>\n"
)
MIXED = (
    "Personalities : [raid1] [raid6] [raid5] [raid4] [raid0] \n"
    + "md1 : active raid5 sdd1[3] sdc1[1] sdb1[0]\n"
    + "      2095104 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]\n"
    + "      \tresync=DELAYED\n"
    + "      \n"
    + "md2 : active (auto-read-only) raid1 sde1[0] sdf1[1]\n"
    + "      1047552 blocks super 1.2 [2/2] [UU]\n"
    + "      \tresync=PENDING\n"
    + "      \n"
    + "md127 : inactive sdg[0](S)\n"
    + "      1953382488 blocks super external:imsm\n"
    + "       \n"
    + "md3 : active raid0 sdh1[1] sdi1[0]\n"
    + "      2093056 blocks super 1.2 512k chunks\n"
    + "      \n"
    + "md4 : active raid1 sdk1[2](S) sdj1[1](W) sdl1[0]\n"
    + "      1047552 blocks super 1.2 [2/2] [UU]\n"
    + "      [=================>...]  check = 88.0% (921600/1047552) finish=0.1min"
    + " speed=204800K/sec\n"
    + "      \n"
    + "unused devices: <none>\n"
)


def member(device: str, number: int, state: str = "in_sync", wm: bool = False) -> dict:
    return {"device": device, "number": number, "state": state, "write_mostly": wm}


def test_parse_mdstat_raid1() -> None:
    assert parse_mdstat(CLEAN) == {
        "md0": {
            "level": "raid1",
            "disks": 2,
            "active": 2,
            "state": "clean",
            "progress": None,
            "read_only": False,
            "members": [member("sdb1", 1), member("sda1", 0)],
        }
    }
    md0 = parse_mdstat(DEGRADED)["md0"]
    assert (md0["state"], md0["disks"], md0["active"], md0["progress"]) == ("degraded", 2, 1, None)
    assert md0["members"] == [member("sda1", 0), member("sdb1", 1, "faulty")]
    md0 = parse_mdstat(RESYNC)["md0"]
    assert (md0["state"], md0["active"], md0["progress"]) == ("resyncing", 2, 0.214)
    md0 = parse_mdstat(RECOVERY)["md0"]
    assert (md0["state"], md0["active"], md0["progress"]) == ("recovering", 1, 0.003)
    assert md0["members"] == [member("sdc1", 2), member("sda1", 0)]


def test_parse_mdstat_mixed() -> None:
    got = parse_mdstat(MIXED)
    assert sorted(got) == ["md1", "md127", "md2", "md3", "md4"]
    assert {k: v["state"] for k, v in got.items()} == {
        "md1": "degraded",
        "md2": "resync-pending",
        "md127": "inactive",
        "md3": "clean",
        "md4": "checking",
    }
    assert (got["md1"]["level"], got["md1"]["disks"], got["md1"]["active"]) == ("raid5", 3, 2)
    assert got["md2"]["read_only"] and not got["md1"]["read_only"]
    assert got["md127"]["level"] is None
    assert got["md127"]["members"] == [member("sdg", 0, "spare")]
    assert (got["md3"]["level"], got["md3"]["disks"], got["md3"]["active"]) == ("raid0", 2, 2)
    assert got["md4"]["progress"] == 0.88
    assert got["md4"]["members"] == [
        member("sdk1", 2, "spare"),
        member("sdj1", 1, wm=True),
        member("sdl1", 0),
    ]
    assert (
        parse_mdstat("") == {} and parse_mdstat("Personalities : \nunused devices: <none>\n") == {}
    )
    assert parse_mdstat("garbage\n\x00md :\n") == {}


def sys_tree(tmp_path: Path, target: str) -> tuple[Path, Path]:
    """A /sys/dev/block with tmp_path's device number linking to sys/devices/<target>; returns
    (sys_dev, devices dir)."""
    st = os.stat(tmp_path)
    devices = tmp_path / "sys" / "devices" / "virtual" / "block"
    (devices / "md0" / "md").mkdir(parents=True)
    (devices / "md0" / "md0p1").mkdir()
    (devices / "md0" / "md0p1" / "partition").write_text("1\n")
    (devices / "dm-0" / "slaves").mkdir(parents=True)
    (devices / "dm-0" / "slaves" / "md0").symlink_to(devices / "md0")
    (devices / "sda").mkdir()
    sys_dev = tmp_path / "sys" / "dev" / "block"
    sys_dev.mkdir(parents=True)
    (sys_dev / f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}").symlink_to(devices / target)
    return sys_dev, devices


@pytest.mark.parametrize("target", ["md0", "md0/md0p1", "dm-0"])
def test_raid_for_path(tmp_path: Path, target: str) -> None:
    sys_dev, _ = sys_tree(tmp_path, target)
    mdstat = tmp_path / "mdstat"
    mdstat.write_text(DEGRADED)
    got = raid_for_path(tmp_path, proc_mdstat=str(mdstat), sys_dev=str(sys_dev))
    assert got == {"device": "md0", **parse_mdstat(DEGRADED)["md0"]}


def test_raid_for_path_not_md(tmp_path: Path) -> None:
    sys_dev, _ = sys_tree(tmp_path, "sda")
    assert raid_for_path(tmp_path, proc_mdstat="/nonexistent", sys_dev=str(sys_dev)) is None
    assert raid_for_path(tmp_path / "missing") is None
    assert raid_for_path(tmp_path, sys_dev=str(tmp_path / "nosys")) is None
    if not os.path.exists("/proc/mdstat"):
        assert raid_for_path("/") is None


def test_raid_members_from_sysfs(tmp_path: Path) -> None:
    # /proc/mdstat shows a disk being rebuilt like one in sync (sdc1[2], no flag); the kernel's
    # dev-*/state and slot tell them apart, and a waiting spare (no slot) from both.
    sys_dev, devices = sys_tree(tmp_path, "md0")
    md = devices / "md0" / "md"
    for dev, state, slot in [
        ("sdc1", "spare", "1"),
        ("sda1", "in_sync", "0"),
        ("sdd1", "spare", "none"),
        ("sde1", "faulty,write_error", "none"),
        ("sdf1", "in_sync,write_mostly", "2"),
    ]:
        (md / f"dev-{dev}").mkdir()
        (md / f"dev-{dev}" / "state").write_text(state + "\n")
        (md / f"dev-{dev}" / "slot").write_text(slot + "\n")
    mdstat = tmp_path / "mdstat"
    mdstat.write_text(RECOVERY)
    got = raid_for_path(tmp_path, proc_mdstat=str(mdstat), sys_dev=str(sys_dev))
    assert got is not None and got["state"] == "recovering" and got["active"] == 1
    assert got["members"] == [member("sdc1", 2, "rebuilding"), member("sda1", 0)]
    # a member sysfs does not know keeps /proc/mdstat's word
    (md / "dev-sdc1" / "state").unlink()
    got = raid_for_path(tmp_path, proc_mdstat=str(mdstat), sys_dev=str(sys_dev))
    assert got is not None and got["members"] == [member("sdc1", 2), member("sda1", 0)]
    # /proc/mdstat without the array: the members are sysfs's own, by name
    for name, value in {"level": "raid1", "raid_disks": "3", "degraded": "1",
                        "sync_action": "idle", "array_state": "clean"}.items():  # fmt: skip
        (md / name).write_text(value + "\n")
    mdstat.write_text(PERSONALITIES + "unused devices: <none>\n")
    got = raid_for_path(tmp_path, proc_mdstat=str(mdstat), sys_dev=str(sys_dev))
    assert got is not None and got["state"] == "degraded"
    assert got["members"] == [
        {"device": "sda1", "number": None, "state": "in_sync", "write_mostly": False},
        {"device": "sdc1", "number": None, "state": "in_sync", "write_mostly": False},
        {"device": "sdd1", "number": None, "state": "spare", "write_mostly": False},
        {"device": "sde1", "number": None, "state": "faulty", "write_mostly": False},
        {"device": "sdf1", "number": None, "state": "in_sync", "write_mostly": True},
    ]


def test_raid_from_sysfs(tmp_path: Path) -> None:
    # /proc/mdstat without the array: /sys/block/md0/md/ answers.
    sys_dev, devices = sys_tree(tmp_path, "md0")
    md = devices / "md0" / "md"
    for name, value in {
        "level": "raid1",
        "raid_disks": "2",
        "degraded": "1",
        "sync_action": "recover",
        "sync_completed": "1000 / 4000",
        "array_state": "clean",
    }.items():
        (md / name).write_text(value + "\n")
    mdstat = tmp_path / "mdstat"
    mdstat.write_text(PERSONALITIES + "unused devices: <none>\n")
    got = raid_for_path(tmp_path, proc_mdstat=str(mdstat), sys_dev=str(sys_dev))
    assert got == {
        "device": "md0",
        "level": "raid1",
        "disks": 2,
        "active": 1,
        "state": "recovering",
        "progress": 0.25,
        "read_only": False,
        "members": [],
    }
    (md / "sync_action").write_text("idle\n")
    (md / "sync_completed").write_text("none\n")
    got = raid_for_path(tmp_path, proc_mdstat=str(tmp_path / "none"), sys_dev=str(sys_dev))
    assert (got["state"], got["progress"]) == ("degraded", None)


def test_gather_reports_raid(
    appliance: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sys_dev, _ = sys_tree(tmp_path, "md0")
    mdstat = tmp_path / "mdstat"
    mdstat.write_text(RECOVERY)
    real = status.raid_for_path
    monkeypatch.setattr(
        status,
        "raid_for_path",
        lambda p: real(tmp_path, proc_mdstat=str(mdstat), sys_dev=str(sys_dev)),
    )
    got = gather_all(appliance)
    assert got["raid"]["device"] == "md0" and got["raid"]["state"] == "recovering"
    assert got["health"] == "degraded"
    assert "raid: md0 (raid1) is recovering (0.3%), 1 of 2 disks active" in got["problems"]
