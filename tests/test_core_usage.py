# Scenario: logbox_core.usage, the per-service figures of GET /status, read the way the kernel
# writes them. /proc is this process's and its children's, for real. The cgroup v2 files of a
# systemd unit cannot be made on this machine (its cgroups are v1, and the tests do not run
# under systemd), so their parsing is checked on directories laid out like the kernel's; the
# appliance boot in tests/test_image.py reads the real ones. Also pinned: the unit names the
# module knows are the appliance's units, and the version pyproject.toml copies.
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from logbox_core import usage
from logbox_core.version import VERSION


def test_from_proc_counts_this_process_cpu_and_memory(tmp_path: Path) -> None:
    before = usage.from_proc(os.getpid())
    assert before is not None and before["source"] == "proc" and before["processes"] == 1
    t0 = time.process_time()
    while time.process_time() - t0 < 0.3:  # 0.3 s of CPU
        pass
    block = bytearray(64 << 20)  # 64 MiB made resident
    block[::4096] = b"x" * len(block[::4096])
    after = usage.from_proc(os.getpid())
    assert after is not None
    assert 0.25 <= after["cpu_s"] - before["cpu_s"] < 5, (before, after)
    assert after["rss_bytes"] - before["rss_bytes"] > 48 << 20, (before, after)
    vmrss = re.search(r"VmRSS:\s+(\d+) kB", Path("/proc/self/status").read_text())
    assert vmrss is not None and abs(after["rss_bytes"] - int(vmrss.group(1)) * 1024) < 8 << 20
    # written bytes reach the block layer at fsync (a file system on a disk, not tmpfs)
    f = tmp_path / "written"
    with open(f, "wb") as out:
        out.write(os.urandom(4 << 20))
        out.flush()
        os.fsync(out.fileno())
    written = usage.from_proc(os.getpid())
    assert written is not None and written["io_write_bytes"] is not None
    if subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", str(tmp_path)],
                      capture_output=True, text=True).stdout.strip() != "tmpfs":  # fmt: skip
        assert written["io_write_bytes"] - after["io_write_bytes"] >= 4 << 20
    del block


def test_from_proc_and_uptime_of_a_child() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.5)
        up = usage.uptime_s(child.pid)
        assert up is not None and 0 <= up < 3, up
        got = usage.from_proc(child.pid)
        assert got is not None and got["rss_bytes"] > 1 << 20
    finally:
        child.kill()
        child.wait()
    assert usage.from_proc(child.pid) is None and usage.uptime_s(child.pid) is None
    mine = usage.uptime_s(os.getpid())
    assert mine is not None and mine >= 0.5


def _cgroup(d: Path, usage_usec: int, anon: int, mapped: int, io: str | None) -> Path:
    d.mkdir(parents=True)
    (d / "cgroup.procs").write_text("101\n102\n")
    (d / "cpu.stat").write_text(
        f"usage_usec {usage_usec}\nuser_usec {usage_usec - 1000}\nsystem_usec 1000\n"
    )
    (d / "memory.stat").write_text(
        f"anon {anon}\nfile 999999999\nkernel 4096\nfile_mapped {mapped}\nshmem 0\n"
    )
    if io is not None:
        (d / "io.stat").write_text(io)
    return d


def _blockdev(sysdev: Path, majmin: str, holders: list[str]) -> None:
    (sysdev / majmin / "holders").mkdir(parents=True)
    for h in holders:
        (sysdev / majmin / "holders" / h).touch()


def test_cgroup_of_a_sibling_unit(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    # LUKS (dm-0, 254:0) on md0 (9:0) on sda and sdb (8:0, 8:16): only dm-0 has no holder
    sysdev = tmp_path / "dev-block"
    _blockdev(sysdev, "254:0", [])
    _blockdev(sysdev, "9:0", ["dm-0"])
    _blockdev(sysdev, "8:0", ["md0"])
    _blockdev(sysdev, "8:16", ["md0"])
    io = (
        "254:0 rbytes=4096 wbytes=1000000 rios=1 wios=10 dbytes=0 dios=0\n"
        "9:0 rbytes=4096 wbytes=1000000 rios=1 wios=10 dbytes=0 dios=0\n"
        "8:0 rbytes=4096 wbytes=1000000 rios=1 wios=10 dbytes=0 dios=0\n"
        "8:16 rbytes=0 wbytes=1000000 rios=0 wios=10 dbytes=0 dios=0\n"
    )
    d = _cgroup(root / "system.slice/logbox-indexd.service", 2_500_000, 7 << 20, 3 << 20, io)
    own = "/system.slice/logbox-rpc.service"
    assert usage.unit_cgroup("indexd", root=str(root), own=own) == str(d)
    assert usage.unit_cgroup("searchd", root=str(root), own=own) is None  # no such cgroup
    assert usage.unit_cgroup("indexd", root=str(root), own="/user.slice/session-1.scope") is None
    assert usage.unit_cgroup("nosuch", root=str(root), own=own) is None
    got = usage.from_cgroup(str(d), sys_dev=str(sysdev))
    assert got == {
        "source": "cgroup",
        "cpu_s": 2.5,
        "rss_bytes": (7 << 20) + (3 << 20),
        "io_read_bytes": 4096,
        "io_write_bytes": 1000000,
        "processes": 2,
    }
    # without the io controller (no io.stat) the disk figures are null, the rest stays
    d2 = _cgroup(root / "system.slice/logbox-searchd.service", 1000, 1 << 20, 0, None)
    got2 = usage.from_cgroup(str(d2), sys_dev=str(sysdev))
    assert got2 is not None and got2["io_read_bytes"] is None and got2["cpu_s"] == 0.001
    (d2 / "cpu.stat").write_text("garbled\n")
    assert usage.from_cgroup(str(d2), sys_dev=str(sysdev)) is None
    # A unit-only service (the API, the web UI, nginx): running with figures, down, or no unit.
    up = usage.of_unit("indexd", root=str(root), own=own)
    assert up is not None and up[0] and up[1] is not None and up[1]["processes"] == 2
    (d / "cgroup.procs").write_text("")
    assert usage.of_unit("indexd", root=str(root), own=own) == (False, None)
    assert usage.of_unit("searchd", root=str(root), own=own) == (True, None)  # cpu.stat garbled
    assert usage.of_unit("webui", root=str(root), own=own) is None


def test_io_stat_sums_only_the_top_devices() -> None:
    text = "8:0 rbytes=10 wbytes=20 rios=1\n8:16 rbytes=1 wbytes=2\n253:0 rbytes=x wbytes=5\n"
    assert usage.io_stat_bytes(text, None) == (11, 27)
    assert usage.io_stat_bytes(text, {"8:16"}) == (1, 2)
    assert usage.io_stat_bytes(text, {"253:0"}) == (0, 5)
    assert usage.io_stat_bytes("", None) == (0, 0)
    assert usage.io_stat_bytes(None, None) == (None, None)


def test_own_cgroup(tmp_path: Path) -> None:
    f = tmp_path / "cgroup"
    f.write_text("0::/system.slice/logbox-rpc.service\n")
    assert usage.own_cgroup(str(f)) == "/system.slice/logbox-rpc.service"
    f.write_text("12:memory:/x\n1:cpu:/\n")  # cgroup v1 only
    assert usage.own_cgroup(str(f)) is None
    assert usage.own_cgroup(str(tmp_path / "missing")) is None


def test_unit_names_are_the_appliance_units(top: Path) -> None:
    units = {p.name for p in (top / "appliance/systemd").glob("*.service")}
    assert set(usage.UNITS.values()) <= units
    assert set(usage.UNIT_ONLY) <= set(usage.UNITS)
    for unit in usage.UNITS.values():  # disk bytes need the io controller on for the unit
        text = (top / "appliance/systemd" / unit).read_text()
        assert re.search(r"^IOAccounting=yes$", text, re.M), unit


def test_version_copy(top: Path) -> None:
    text = (top / "rpc/pyproject.toml").read_text()
    m = re.search(r'^version = "([^"]+)"', text, re.M)
    assert m is not None and m.group(1) == VERSION
