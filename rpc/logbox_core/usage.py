"""What each service uses of the machine, for GET /api/v1/status (API.md §7): cumulative CPU
seconds, resident memory and disk bytes read and written.

Two sources, the first that answers:
- the service's cgroup (cgroup v2), on the appliance: systemd puts each unit in its own
  (``/sys/fs/cgroup/system.slice/<unit>``), the API's own unit is a sibling, and cgroup files
  are readable by anyone, so this works for services of other users and counts all of a
  service's processes (syslog-ng's supervisor and worker, gunicorn's workers);
- ``/proc/<pid>`` of the service's main process (``make run``, where every daemon is the same
  user's and the cgroup is the login session's). ``/proc/<pid>/io`` is readable only by the
  process's owner: the disk figures are null where it is not.

Nothing here raises: a figure that cannot be read is null, a service whose source cannot be
found has no resources (None).
"""

from __future__ import annotations

import functools
import os
import re
import time

CGROUP_ROOT = "/sys/fs/cgroup"
# The systemd unit of each service of the status (appliance/systemd/; a test pins the names).
UNITS = {
    "syslog-ng": "logbox-syslog-ng.service",
    "indexd": "logbox-indexd.service",
    "searchd": "logbox-searchd.service",
    "alertd": "logbox-alertd.service",
    "rpc": "logbox-rpc.service",
    "webui": "logbox-webui.service",
    "nginx": "logbox-nginx.service",
}
# The services that exist only as units: their status entry is made from the cgroup alone.
UNIT_ONLY = ("rpc", "webui", "nginx")

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def read_text(path: str, limit: int = 1 << 20) -> str | None:
    """The start of a /proc, /sys or /etc file as text (UTF-8, bad bytes replaced); None
    when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def _keyed(text: str | None) -> dict[str, int]:
    """ "key value" lines (cpu.stat, memory.stat) as a dict of ints."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def own_cgroup(proc_self_cgroup: str = "/proc/self/cgroup") -> str | None:
    """This process's cgroup v2 path ("/system.slice/logbox-rpc.service"); None on cgroup v1
    or when unreadable."""
    for line in (read_text(proc_self_cgroup) or "").splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or None
    return None


@functools.cache
def _own_cgroup_once() -> str | None:
    """This process's cgroup, read once: a daemon's unit does not change while it runs."""
    return own_cgroup()


def unit_cgroup(service: str, *, root: str = CGROUP_ROOT, own: str | None = None) -> str | None:
    """The cgroup directory of service's unit when this process itself runs in a unit of the
    same slice (the appliance); None otherwise (make run, tests) or when it does not exist."""
    unit = UNITS.get(service)
    own = _own_cgroup_once() if own is None else own
    if unit is None or own is None or not own.endswith(".service"):
        return None
    d = os.path.join(root, os.path.dirname(own).lstrip("/"), unit)
    return d if os.path.isfile(os.path.join(d, "cgroup.procs")) else None


def _top_devices(sys_dev: str = "/sys/dev/block") -> set[str] | None:
    """The "major:minor" of block devices nothing is stacked on (no holders): what a service's
    reads and writes land on first. A write through LUKS on md RAID1 is charged to dm-0, md0
    and both disks; only dm-0's count is the service's own. None when /sys cannot say."""
    try:
        names = os.listdir(sys_dev)
    except OSError:
        return None
    top = set()
    for n in names:
        try:
            if not os.listdir(os.path.join(sys_dev, n, "holders")):
                top.add(n)
        except OSError:
            top.add(n)
    return top


def io_stat_bytes(text: str | None, top: set[str] | None) -> tuple[int | None, int | None]:
    """(read bytes, written bytes) of an io.stat text over the devices in top (all when None);
    (None, None) when the text is missing (the io controller is not on for the cgroup)."""
    if text is None:
        return None, None
    rd = wr = 0
    for line in text.splitlines():
        parts = line.split()
        if not parts or (top is not None and parts[0] not in top):
            continue
        kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        rd += int(kv.get("rbytes", "0")) if kv.get("rbytes", "0").isdigit() else 0
        wr += int(kv.get("wbytes", "0")) if kv.get("wbytes", "0").isdigit() else 0
    return rd, wr


def from_cgroup(d: str, sys_dev: str = "/sys/dev/block") -> dict | None:
    """A cgroup's figures: cpu.stat usage_usec; memory.stat anon + file_mapped (what its
    processes have resident, without the page cache it merely caused); io.stat on the top
    devices. None when cpu.stat cannot be read."""
    cpu = _keyed(read_text(os.path.join(d, "cpu.stat")))
    if "usage_usec" not in cpu:
        return None
    mem = _keyed(read_text(os.path.join(d, "memory.stat"), 1 << 20))
    rss = mem["anon"] + mem.get("file_mapped", 0) if "anon" in mem else None
    procs = read_text(os.path.join(d, "cgroup.procs"))
    rd, wr = io_stat_bytes(read_text(os.path.join(d, "io.stat"), 1 << 20), _top_devices(sys_dev))
    return {
        "source": "cgroup",
        "cpu_s": round(cpu["usage_usec"] / 1e6, 3),
        "rss_bytes": rss,
        "io_read_bytes": rd,
        "io_write_bytes": wr,
        "processes": len(procs.split()) if procs is not None else None,
    }


_STAT_TAIL = re.compile(r"\)\s+(.*)$", re.S)


def from_proc(pid: int, proc: str = "/proc") -> dict | None:
    """A process's figures from /proc/<pid>: stat (utime + stime), statm (resident pages),
    io (read_bytes, write_bytes: null when not readable). None when it does not exist."""
    stat = read_text(f"{proc}/{pid}/stat")
    m = _STAT_TAIL.search(stat or "")
    if m is None:
        return None
    fields = m.group(1).split()  # fields from the state (3rd) on
    try:
        cpu = (int(fields[11]) + int(fields[12])) / _CLK_TCK
    except (IndexError, ValueError):
        return None
    statm = (read_text(f"{proc}/{pid}/statm") or "").split()
    rss = int(statm[1]) * _PAGE if len(statm) > 1 and statm[1].isdigit() else None
    io = _keyed((read_text(f"{proc}/{pid}/io") or "").replace(":", " "))
    return {
        "source": "proc",
        "cpu_s": round(cpu, 3),
        "rss_bytes": rss,
        "io_read_bytes": io.get("read_bytes"),
        "io_write_bytes": io.get("write_bytes"),
        "processes": 1,
    }


def of_service(service: str, pid: int | None) -> dict | None:
    """The service's figures: its unit's cgroup when there is one, else its main process's."""
    d = unit_cgroup(service)
    if d is not None:
        got = from_cgroup(d)
        if got is not None:
            return got
    return from_proc(pid) if pid else None


def of_unit(
    service: str, *, root: str = CGROUP_ROOT, own: str | None = None
) -> tuple[bool, dict | None] | None:
    """Whether the service's unit cgroup holds a process, and its figures when it does (one
    look at the cgroup); None when there is no unit cgroup here (make run, tests)."""
    d = unit_cgroup(service, root=root, own=own)
    if d is None:
        return None
    got = from_cgroup(d)
    if got is not None:
        return bool(got["processes"]), got if got["processes"] else None
    procs = read_text(os.path.join(d, "cgroup.procs"))
    return bool(procs and procs.split()), None


def uptime_s(pid: int, proc: str = "/proc") -> float | None:
    """Seconds since the process started (/proc/<pid>/stat's start time after /proc/stat's
    btime); None when either cannot be read."""
    m = _STAT_TAIL.search(read_text(f"{proc}/{pid}/stat") or "")
    btime = re.search(r"^btime\s+(\d+)", read_text(f"{proc}/stat") or "", re.M)
    if m is None or btime is None:
        return None
    try:
        start = int(btime.group(1)) + int(m.group(1).split()[19]) / _CLK_TCK
    except (IndexError, ValueError):
        return None
    return round(max(0.0, time.time() - start), 3)
