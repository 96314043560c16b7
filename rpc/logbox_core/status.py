"""The appliance's state for GET /api/v1/status (API.md §7) and the web UI's status page:
services (syslog-ng, indexd, searchd), ingest rates, logspaces, disk use and md RAID.

Nothing here raises on a missing or garbled file: the service is "down" (or "unknown" when not
configured) and the reason goes to "problems"; "health" is "ok" only when there is no problem.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from . import alerts, archive, integrity, usage
from .accounts import rfc3339
from .searchd import Searchd, SearchdError

if TYPE_CHECKING:
    from .accounts import User

INDEXD_FRESH_S = 10.0  # an indexd status file older than this is stale (indexd is not running)
INDEXD_STALE_INTERVALS = 3  # ... or than this many of its status intervals, if that is longer
BYTES_CACHE_S = 10.0  # how long a directory's size is reused
DISK_LOW = 0.90  # a data file system fuller than this is a problem

_bytes_cache: dict[str, tuple[float, int]] = {}
_bytes_lock = threading.Lock()


# ---------------------------------------------------------------- processes and files


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists and is not a zombie."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] != b"Z"
    except (OSError, ValueError):
        return True  # no /proc: kill(0) said it exists


def _read_pidfile(path: str) -> tuple[int | None, str | None]:
    """(pid, None), or (None, why) when the file is missing or holds no pid."""
    try:
        with open(path, "rb") as f:
            text = f.read(64)
    except FileNotFoundError:
        return None, f"no pid file {path}"
    except OSError as e:
        return None, f"cannot read {path}: {e.strerror}"
    m = re.fullmatch(rb"\s*(\d{1,10})\s*", text)
    if m is None:
        return None, f"{path} holds no pid: {text[:20]!r}"
    return int(m.group(1)), None


def _tree_bytes(path: str) -> int:
    """Bytes on disk (allocated blocks) of the files under path, not following links."""
    total = 0
    stack = [path]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_blocks * 512
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
    return total


def _cached_tree_bytes(path: str) -> int:
    """_tree_bytes(path), reused for BYTES_CACHE_S seconds in this process."""
    key = os.path.abspath(path)
    now = time.monotonic()
    with _bytes_lock:
        hit = _bytes_cache.get(key)
    if hit is not None and now - hit[0] < BYTES_CACHE_S:
        return hit[1]
    n = _tree_bytes(key)
    with _bytes_lock:
        _bytes_cache[key] = (now, n)
    return n


def logspace_bytes(data_dir: str | os.PathLike[str], name: str) -> int:
    """Bytes on disk of <data_dir>/<name>/ (0 when missing; cached 10 s per process)."""
    return _cached_tree_bytes(os.path.join(os.fspath(data_dir), name))


# ---------------------------------------------------------------- md RAID

_MD_LINE = re.compile(r"^(md\w*)\s*:\s*(.*)$")
_MEMBER = re.compile(r"^(\S+)\[(\d+)\]((?:\([A-Z]\))*)$")
_COUNTS = re.compile(r"\[(\d+)/(\d+)\]\s*\[([U_]*)\]")
_PROGRESS = re.compile(r"\b(resync|recovery|check|reshape)\s*=\s*(\d+(?:\.\d+)?)%")
_PENDING = re.compile(r"\b(resync|recover|reshape)=(DELAYED|PENDING|REMOTE)\b")
_ACTIVITY = {"resync": "resyncing", "recovery": "recovering", "check": "checking"}
_ACTIVITY["reshape"] = "reshaping"
_FLAG_STATE = {"F": "faulty", "S": "spare", "J": "journal", "R": "replacement"}


def parse_mdstat(text: str) -> dict[str, dict]:
    """The arrays of a /proc/mdstat text.

    :returns: {"md0": {"level": "raid1", "disks": 2, "active": 1, "state": ..., "progress":
        0.0..1.0 or None, "members": [{"device": "sda1", "number": 0, "state": "in_sync" |
        "faulty" | "spare" | "journal" | "replacement", "write_mostly": bool}]}}; state is
        "inactive", "resyncing", "recovering", "checking", "reshaping", "degraded",
        "resync-delayed", "resync-pending" or "clean"; "read_only" is true for (read-only) and
        (auto-read-only) arrays.
    """
    arrays: dict[str, dict] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _MD_LINE.match(lines[i])
        i += 1
        if m is None:
            continue
        name, rest = m.group(1), m.group(2).split()
        body = []  # the indented lines that follow (blank ones skipped), up to the next array
        while i < len(lines) and (lines[i][:1] in (" ", "\t") or not lines[i].strip()):
            body.append(lines[i].strip())
            i += 1
        arrays[name] = _parse_array(rest, " ".join(body))
    return arrays


def _parse_array(words: list[str], body: str) -> dict:
    """One array from its first line's words (after "mdX :") and its other lines joined."""
    active = bool(words) and words[0] == "active"
    words = words[1:]
    read_only = False
    while words and words[0].startswith("("):  # (read-only), (auto-read-only)
        read_only = True
        words = words[1:]
    level = None
    if active and words and not _MEMBER.match(words[0]):
        level, words = words[0], words[1:]
    members = []
    for w in words:
        mm = _MEMBER.match(w)
        if mm is None:
            continue
        flags = re.findall(r"\(([A-Z])\)", mm.group(3))
        state = next((_FLAG_STATE[f] for f in flags if f in _FLAG_STATE), "in_sync")
        members.append(
            {
                "device": mm.group(1),
                "number": int(mm.group(2)),
                "state": state,
                "write_mostly": "W" in flags,
            }
        )
    counts = _COUNTS.search(body)
    if counts:
        disks, n_active = int(counts.group(1)), int(counts.group(2))
    else:  # raid0, linear: no [n/m]
        disks = n_active = sum(m["state"] == "in_sync" for m in members)
    progress = None
    pm = _PROGRESS.search(body)
    pending = _PENDING.search(body)
    if not active:
        state = "inactive"
    elif pm:
        state = _ACTIVITY[pm.group(1)]
        progress = min(1.0, float(pm.group(2)) / 100)
    elif n_active < disks:
        state = "degraded"
    elif pending:
        state = f"resync-{pending.group(2).lower()}"
    else:
        state = "clean"
    return {
        "level": level,
        "disks": disks,
        "active": n_active,
        "state": state,
        "progress": progress,
        "read_only": read_only,
        "members": members,
    }


def block_stack(sysdir: str) -> Iterator[str]:
    """The /sys block device directories at and under sysdir, each once, breadth first:
    itself, a partition's disk, and what each sits on (slaves/: dm-crypt, LVM, md members)."""
    seen: set[str] = set()
    todo = [sysdir]
    while todo:
        d = todo.pop(0)
        if d in seen:
            continue
        seen.add(d)
        yield d
        if os.path.isfile(os.path.join(d, "partition")):
            todo.append(os.path.dirname(d))
        try:
            slaves = sorted(os.listdir(os.path.join(d, "slaves")))
        except OSError:
            slaves = []
        todo += [os.path.realpath(os.path.join(d, "slaves", s)) for s in slaves]


def _md_device(sysdir: str) -> tuple[str, str] | None:
    """(name, sysfs directory) of the md array under a /sys block device directory: itself,
    its parent (a partition of an md device), or one found through slaves/ (LVM, dm-crypt)."""
    for d in block_stack(sysdir):
        if os.path.isdir(os.path.join(d, "md")):
            return os.path.basename(d), d
    return None


def _from_sysfs(mddir: str) -> dict:
    """An array's state from /sys/block/mdX/md/ (when /proc/mdstat does not list it)."""

    def read(name: str) -> str | None:
        try:
            with open(os.path.join(mddir, name)) as f:
                return f.read().strip()
        except OSError:
            return None

    level = read("level")
    disks = int(read("raid_disks") or 0)
    degraded = int(read("degraded") or 0)
    action = read("sync_action") or "idle"
    done = read("sync_completed") or "none"
    array_state = read("array_state") or ""
    progress = None
    m = re.fullmatch(r"(\d+) / (\d+)", done)
    if m and int(m.group(2)):
        progress = int(m.group(1)) / int(m.group(2))
    if array_state in ("inactive", "clear", ""):
        state = "inactive"
    elif action in ("resync", "recover", "check", "reshape", "repair"):
        state = {"recover": "recovering", "repair": "resyncing"}.get(action) or _ACTIVITY[action]
    elif degraded:
        state = "degraded"
    else:
        state = "clean"
    return {
        "level": level,
        "disks": disks,
        "active": disks - degraded,
        "state": state,
        "progress": progress if state not in ("clean", "degraded", "inactive") else None,
        "read_only": array_state in ("readonly", "read-auto"),
        "members": [],
    }


def sysfs_of(path: str | os.PathLike[str], sys_dev: str = "/sys/dev/block") -> str | None:
    """The /sys directory of the block device holding path's file system; None when path is
    missing or its device has none (tmpfs, overlay)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    link = os.path.join(sys_dev, f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    return os.path.realpath(link) if os.path.exists(link) else None


def raid_for_path(
    path: str | os.PathLike[str],
    *,
    proc_mdstat: str = "/proc/mdstat",
    sys_dev: str = "/sys/dev/block",
) -> dict | None:
    """The md array holding path: {"device": "md0", **its parse_mdstat entry}; None when the
    file system is not on md RAID (or path is missing)."""
    top = sysfs_of(path, sys_dev)
    if top is None:
        return None
    found = _md_device(top)
    if found is None:
        return None
    md, md_sysdir = found
    try:
        with open(proc_mdstat) as f:
            entry = parse_mdstat(f.read()).get(md)
    except OSError:
        entry = None
    if entry is None:
        entry = _from_sysfs(os.path.join(md_sysdir, "md"))
    entry["members"] = _members_from_sysfs(os.path.join(md_sysdir, "md"), entry["members"])
    return {"device": md, **entry}


def _members_from_sysfs(mddir: str, members: list[dict]) -> list[dict]:
    """The members with their state as the kernel keeps it in /sys/block/mdX/md/dev-*/: what
    /proc/mdstat cannot say, a disk being rebuilt into a slot ("rebuilding": state "spare"
    with a slot) apart from a spare that waits (no slot). /proc/mdstat's members are kept where
    sysfs has nothing; when it listed none, the members are sysfs's own."""

    def read(dev: str, name: str) -> str | None:
        try:
            with open(os.path.join(mddir, f"dev-{dev}", name)) as f:
                return f.read().strip()
        except OSError:
            return None

    if not members:
        try:
            names = sorted(e[4:] for e in os.listdir(mddir) if e.startswith("dev-"))
        except OSError:
            names = []
        members = [
            {"device": n, "number": None, "state": "in_sync", "write_mostly": False} for n in names
        ]
    out = []
    for m in members:
        flags = (read(m["device"], "state") or "").replace(",", " ").split()
        slot = read(m["device"], "slot")
        if not flags:
            out.append(m)
            continue
        if "faulty" in flags:
            state = "faulty"
        elif "journal" in flags:
            state = "journal"
        elif "replacement" in flags:
            state = "replacement"
        elif "in_sync" in flags:
            state = "in_sync"
        elif slot not in (None, "", "none"):
            state = "rebuilding"
        else:
            state = "spare"
        out.append({**m, "state": state, "write_mostly": "write_mostly" in flags})
    return out


# ---------------------------------------------------------------- the services


def _syslogng(pidfile: str | os.PathLike[str] | None, problems: list[str]) -> dict:
    if pidfile is None:
        return {"state": "unknown", "pid": None}
    pid, why = _read_pidfile(os.fspath(pidfile))
    if pid is None:
        problems.append(f"syslog-ng: {why}")
        return {"state": "down", "pid": None}
    if not pid_alive(pid):
        problems.append(f"syslog-ng: pid {pid} (from {os.fspath(pidfile)}) is not running")
        return {"state": "down", "pid": pid}
    return {"state": "running", "pid": pid, "uptime_s": usage.uptime_s(pid)}


def _indexd(
    status_path: str | os.PathLike[str] | None, now: float, problems: list[str]
) -> tuple[dict, dict | None]:
    """indexd's service entry and its status object (None when unreadable)."""
    entry: dict[str, Any] = {
        "state": "unknown",
        "pid": None,
        "uptime_s": None,
        "holding": None,
        "disk_full": None,
        "held_back_bytes": None,
        "reserve_bytes": None,
    }
    if status_path is None:
        return entry, None
    path = os.fspath(status_path)
    entry["state"] = "down"
    # indexd rewrites the file in place when its disk is full: a read may catch it half
    # written, so a garbled file is read again a few times before it counts.
    for attempt in range(3):
        try:
            with open(path, "rb") as f:
                mtime = os.fstat(f.fileno()).st_mtime
                raw = f.read(16 << 20)
        except FileNotFoundError:
            problems.append(f"indexd: no status file {path}")
            return entry, None
        except OSError as e:
            problems.append(f"indexd: cannot read {path}: {e.strerror}")
            return entry, None
        try:
            st = json.loads(raw)
            if not isinstance(st, dict):
                raise ValueError("not a JSON object")
            break
        except ValueError as e:
            if attempt == 2:
                problems.append(f"indexd: {path} is not a status file ({e})")
                return entry, None
            time.sleep(0.01)
    pid = st.get("pid")
    pid = pid if isinstance(pid, int) and not isinstance(pid, bool) else None
    entry["pid"] = pid
    age = now - mtime
    interval = _num(st.get("interval_ms"))
    fresh = max(INDEXD_FRESH_S, INDEXD_STALE_INTERVALS * interval / 1000 if interval else 0.0)
    if age >= fresh:
        problems.append(f"indexd: status file {path} is stale ({age:.0f} s old)")
        return entry, st
    if pid is None or not pid_alive(pid):
        problems.append(f"indexd: pid {pid} (from {path}) is not running")
        return entry, st
    entry["state"] = "running"
    uptime = st.get("uptime_s")
    if isinstance(uptime, int | float) and not isinstance(uptime, bool):
        entry["uptime_s"] = round(float(uptime) + max(0.0, age), 3)
    holding = st.get("holding")
    entry["holding"] = holding if isinstance(holding, str) else None
    if entry["holding"]:
        problems.append(f"indexd: holding: {entry['holding']}")
    disk = st.get("disk") if isinstance(st.get("disk"), dict) else {}
    if isinstance(disk.get("full"), bool):
        entry["disk_full"] = disk["full"]
    entry["held_back_bytes"] = _int(disk.get("held_back_bytes"))
    entry["reserve_bytes"] = _int(disk.get("reserve_bytes"))
    if entry["disk_full"]:
        problems.append(
            f"indexd: disk full: {_int(disk.get('free_bytes'))} bytes free, reserve "
            f"{entry['reserve_bytes']} bytes; {entry['held_back_bytes']} bytes held back"
        )
    if st.get("stopping") is True:
        problems.append("indexd: stopping")
    sealing = st.get("sealing") if isinstance(st.get("sealing"), dict) else None
    if sealing is not None:
        entry["sealing"] = {
            "setup": sealing.get("setup") is True,
            "epoch": _int(sealing.get("epoch")) if sealing.get("epoch") is not None else None,
            "last_sealed": sealing.get("last_sealed")
            if isinstance(sealing.get("last_sealed"), str)
            else None,
            "error": sealing.get("error") if isinstance(sealing.get("error"), str) else None,
            "tsa_url": sealing.get("tsa_url") if isinstance(sealing.get("tsa_url"), str) else None,
            "tsa_error": sealing.get("tsa_error")
            if isinstance(sealing.get("tsa_error"), str)
            else None,
        }
        if entry["sealing"]["error"]:
            problems.append(f"indexd: sealing failed: {entry['sealing']['error']}")
        if entry["sealing"]["tsa_error"]:
            problems.append(f"indexd: time stamps failing: {entry['sealing']['tsa_error']}")
    return entry, st


def _alertd(path: str, now: float, problems: list[str]) -> dict:
    """alertd's service entry (logbox_core.alerts.read_status), shown once its status file
    exists (alertd ran on this box; the appliance's unit cgroup says so too, UNIT_ONLY); a
    problem when alertd no longer keeps it up."""
    entry, _ = alerts.read_status(path, now)
    if entry["state"] == "down":
        problems.append(f"alertd: not running (its status file {path} is not kept up)")
    return entry


# indexd this far behind the spool (the receive time of the last stored message) is a problem.
SPOOL_LAG_PROBLEM_S = 60.0


def _spool(st: dict, problems: list[str]) -> dict[str, Any] | None:
    """What waits in the spool for indexd (indexer/indexd/README.md "Status"), without its
    path: files, waiting_bytes, oldest_waiting, lag_s, torn, malformed."""
    sp = st.get("spool")
    if not isinstance(sp, dict):
        return None
    out = {
        "files": _int(sp.get("files")),
        "waiting_bytes": _int(sp.get("waiting_bytes")),
        "oldest_waiting": sp.get("oldest_waiting")
        if isinstance(sp.get("oldest_waiting"), str)
        else None,
        "lag_s": _num(sp.get("lag_s")),
        "torn": _int(sp.get("torn")),
        "malformed": _int(sp.get("malformed")),
    }
    lag = out["lag_s"]
    if lag is not None and lag > SPOOL_LAG_PROBLEM_S and (out["waiting_bytes"] or 0) > 0:
        problems.append(
            f"indexd: {lag:.0f} s behind the spool ({out['waiting_bytes']} bytes in "
            f"{out['files']} files waiting)"
        )
    return out


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _deadletter(st: dict) -> dict[str, Any] | None:
    """indexd's dead-letter summary without its path: records, last_reason, last_at."""
    dl = st.get("deadletter")
    if not isinstance(dl, dict):
        return None
    last = dl.get("last_reason")
    at = dl.get("last_at")
    return {
        "records": _int(dl.get("records")),
        "last_reason": last if isinstance(last, str) else None,
        "last_at": at if isinstance(at, str) else None,
    }


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _logspaces(
    data_dir: str, indexd_st: dict | None, searchd_spaces: list[dict] | None
) -> list[dict]:
    """Every logspace known to indexd's status or to searchd, by name."""
    from_indexd = indexd_st.get("logspaces") if indexd_st else None
    from_indexd = from_indexd if isinstance(from_indexd, dict) else {}
    from_searchd = {s.get("name"): s for s in searchd_spaces or [] if isinstance(s, dict)}
    names = sorted(
        n for n in set(from_indexd) | set(from_searchd) if isinstance(n, str) and n != ""
    )
    out = []
    for name in names:
        ix = from_indexd.get(name) if isinstance(from_indexd.get(name), dict) else {}
        sd = from_searchd.get(name, {})
        next_ids = [x for x in (_int(ix.get("next_id")), _int(sd.get("next_id"))) if x is not None]
        next_id = max(next_ids) if next_ids else None
        indexed_id = _int(ix.get("indexed_id"))
        lag = (
            max(0, next_id - indexed_id) if next_id is not None and indexed_id is not None else None
        )
        last = ix.get("last_received")
        out.append(
            {
                "name": name,
                "next_id": next_id,
                "indexed_id": indexed_id,
                "index_lag": lag,
                "last_received": last if isinstance(last, str) else None,
                "bytes": logspace_bytes(data_dir, name),
            }
        )
    return out


ARCHIVE_KEYS = (
    "target",
    "object_lock",
    "archive_days",
    "days_local",
    "days_archived",
    "days_verified",
    "bytes_archived",
    "pending",
    "last_upload",
    "failures",
    "ok",
    "error",
    "pass",
)


def _archive(state_dir: str, spaces: list[dict], problems: list[str]) -> None:
    """Each archived logspace's "archive" entry from logbox-archive's status file
    (logbox_core.archive.read_status), and a problem for each whose last pass failed."""
    by_name = {ls["name"]: ls for ls in spaces}
    for name, st in sorted(archive.read_status(state_dir).items()):
        if name in by_name:
            by_name[name]["archive"] = {k: st.get(k) for k in ARCHIVE_KEYS}
        if st.get("ok") is False:
            err = st.get("error") if isinstance(st.get("error"), dict) else {}
            problems.append(f"archive: {name}: {err.get('message', 'failed')} (local days kept)")


def _disk(data_dir: str, problems: list[str]) -> dict:
    disk: dict[str, Any] = {
        "path": data_dir,
        "total_bytes": None,
        "used_bytes": None,
        "free_bytes": None,
        "store_bytes": None,
    }
    try:
        vfs = os.statvfs(data_dir)
    except OSError as e:
        problems.append(f"disk: cannot stat data directory {data_dir}: {e.strerror}")
        return disk
    total = vfs.f_blocks * vfs.f_frsize
    disk["total_bytes"] = total
    disk["used_bytes"] = (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize
    disk["free_bytes"] = vfs.f_bavail * vfs.f_frsize
    disk["store_bytes"] = _cached_tree_bytes(data_dir)
    if total and disk["used_bytes"] > DISK_LOW * total:
        problems.append(
            f"disk: {data_dir} is {100 * disk['used_bytes'] / total:.0f}% full "
            f"({disk['free_bytes'] >> 20} MiB free)"
        )
    return disk


def gather(
    *,
    data_dir: str | os.PathLike[str],
    indexd_status: str | os.PathLike[str] | None,
    syslogng_pidfile: str | os.PathLike[str] | None,
    searchd: Searchd | None,
    now: float | None = None,
    integrity_report: str | os.PathLike[str] | None = None,
    alertd_status: str | os.PathLike[str] | None = None,
    archive_state: str | os.PathLike[str] | None = None,
) -> dict:
    """The status object of API.md §7 for every logspace (the caller filters by rights),
    plus "problems": why health is not "ok" (with integrity_report, also what the last verify
    report says: logbox_core.integrity). Never raises on missing or garbled files."""
    now = time.time() if now is None else now
    data = os.fspath(data_dir)
    problems: list[str] = []
    syslogng = _syslogng(syslogng_pidfile, problems)
    indexd, st = _indexd(indexd_status, now, problems)
    spaces = None
    if searchd is None:
        searchd_entry: dict[str, Any] = {"state": "unknown"}
    else:
        try:
            spaces = searchd.logspaces()
            searchd_entry = {"state": "running"}
        except SearchdError as e:
            # /health may still answer (e.g. no catalog yet: 503 on the store only).
            if searchd.health():
                searchd_entry = {"state": "running"}
                problems.append(f"searchd: logspaces: {e.message}")
            else:
                searchd_entry = {"state": "down"}
                problems.append(f"searchd: {e.message}")
    if searchd_entry["state"] == "running" and searchd is not None:
        pid = searchd.peer_pid()
        searchd_entry["pid"] = pid
        searchd_entry["uptime_s"] = usage.uptime_s(pid) if pid else None
    services: dict[str, dict] = {"syslog-ng": syslogng, "indexd": indexd, "searchd": searchd_entry}
    if alertd_status is not None and os.path.exists(alertd_status):
        services["alertd"] = _alertd(os.fspath(alertd_status), now, problems)
    for name, svc in services.items():
        up = svc["state"] == "running"
        svc["resources"] = usage.of_service(name, svc.get("pid")) if up else None
    for name in usage.UNIT_ONLY:  # on the appliance: the API's, the web UI's and nginx's units
        unit = usage.of_unit(name)
        if unit is not None:
            services[name] = {
                "state": "running" if unit[0] else "down",
                "pid": None,
                "resources": unit[1],
            }
    if alertd_status is not None and "alertd" not in services:  # its unit before its first file
        unit = usage.of_unit("alertd")
        if unit is not None:
            services["alertd"] = {"state": "running" if unit[0] else "down", "pid": None,
                                  "uptime_s": None, "resources": unit[1]}  # fmt: skip
    running = indexd["state"] == "running"
    raid = raid_for_path(data)
    if raid is not None and raid["state"] != "clean":
        progress = f" ({100 * raid['progress']:.1f}%)" if raid["progress"] is not None else ""
        problems.append(
            f"raid: {raid['device']} ({raid['level']}) is {raid['state']}{progress}, "
            f"{raid['active']} of {raid['disks']} disks active"
        )
    disk = _disk(data, problems)
    spool = _spool(st, problems) if running and st else None
    if integrity_report is not None:
        problems.extend(integrity.problems(integrity_report, now))
    spaces_out = _logspaces(data, st, spaces)
    if archive_state is not None:
        _archive(os.fspath(archive_state), spaces_out, problems)
    return {
        "time": rfc3339(int(now * 1_000_000)),
        "health": "ok" if not problems else "degraded",
        "services": services,
        "eps": {
            "1s": _num(st.get("eps_1s")) if running and st else None,
            "60s": _num(st.get("eps_60s")) if running and st else None,
        },
        "stored": _int(st.get("stored")) if running and st else None,
        "malformed": _int(st.get("malformed")) if running and st else None,
        "quarantined": _int(st.get("quarantined")) if running and st else None,
        "deadletter": _deadletter(st) if running and st else None,
        "spool": spool,
        "logspaces": spaces_out,
        "disk": disk,
        "raid": raid,
        "problems": problems,
    }


# ---------------------------------------------------------------- what a user may see

HIDDEN = "see the status as an admin"  # a non-admin's stand-in for a problem or a hold's reason


def _service_value(key: str, value: object) -> object:
    """A service entry's member as a non-admin sees it: the state as it is, no pid, and any
    other text (a hold's reason, which may name a logspace or a path) replaced by HIDDEN."""
    if key in ("pid", "resources"):  # what a process uses is the admin's to see
        return None
    if key != "state" and isinstance(value, str) and value:
        return HIDDEN
    if isinstance(value, dict):  # sealing: its texts (an error, a URL) hidden the same way
        return {k: _service_value(k, v) for k, v in value.items()}
    return value


def for_user(doc: dict, user: User) -> dict:
    """gather()'s object as user may see it (API.md §7). An admin sees all of it. Anyone
    else sees only the logspaces they may read, and no pid, path, device name or hold reason
    (in a service entry every text but the state is hidden; in disk every text).
    The figures summed over every logspace (eps, stored, malformed, quarantined, the
    dead-letter records, the spool, the store's bytes) are
    left null unless the user may read every logspace, disk numbers stay but the path goes,
    RAID keeps its state without member or device names, the dead-letter file's last reason is
    hidden, and each problem is cut to the part
    it concerns ("indexd: see the status as an admin")."""
    if user.role == "admin":
        return doc
    out = dict(doc)
    spaces = doc.get("logspaces") or []
    out["logspaces"] = [
        {**ls, "archive": {**ls["archive"], "target": None, "error": None}}
        if isinstance(ls.get("archive"), dict)
        else ls
        for ls in spaces
        if user.can_read(ls["name"])
    ]
    every = len(out["logspaces"]) == len(spaces)
    out["services"] = {
        name: {k: _service_value(k, v) for k, v in svc.items()}
        for name, svc in doc.get("services", {}).items()
    }
    if not every:
        out["eps"] = {k: None for k in doc.get("eps") or {}}
        out["stored"] = out["malformed"] = None
        if "quarantined" in doc:
            out["quarantined"] = None
        if doc.get("spool") is not None:
            out["spool"] = None
    dl = doc.get("deadletter")
    if isinstance(dl, dict):  # its reason names a logspace and what went wrong
        out["deadletter"] = {
            "records": dl.get("records") if every else None,
            "last_reason": HIDDEN if dl.get("last_reason") is not None else None,
            "last_at": dl.get("last_at"),
        }
    disk = doc.get("disk")
    if isinstance(disk, dict):  # numbers and flags only: a string may be a path
        out["disk"] = {k: v if isinstance(v, int | float | bool) else None for k, v in disk.items()}
        if not every:
            out["disk"]["store_bytes"] = None
    raid = doc.get("raid")
    if isinstance(raid, dict):
        out["raid"] = {**raid, "device": None, "members": []}
    problems = doc.get("problems") or []
    out["problems"] = list(dict.fromkeys(f"{p.split(':', 1)[0]}: {HIDDEN}" for p in problems))
    return out
