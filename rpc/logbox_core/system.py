"""The machine logbox runs on, for GET /api/v1/system (API.md §7): what a performance report
states beside its figures (CPU, memory, disks, RAID, kernel, logbox version, the settings that
change the figures).

Read from /proc, /sys, /etc/os-release and indexd's status file; nothing here raises: what
cannot be read is null.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from functools import lru_cache
from typing import Any

from .accounts import rfc3339
from .status import block_stack, raid_for_path, sysfs_of
from .usage import read_text
from .version import VERSION

# Block devices that are not disks of the machine (loops, RAM disks, zram, md and dm stacks:
# RAID and encryption are stated under "raid" and "store").
_NOT_DISKS = re.compile(r"^(loop|ram|zram|md|dm-|sr|fd|nbd)")


def _int(text: str | None) -> int | None:
    t = (text or "").strip()
    return int(t) if t.isdigit() else None


def cpu(cpuinfo: str | None = None) -> dict[str, Any]:
    """model, cores (the logical CPUs this process may run on), threads_per_core, mhz."""
    text = read_text("/proc/cpuinfo") if cpuinfo is None else cpuinfo
    fields: dict[str, str] = {}
    for line in (text or "").splitlines():
        k, sep, v = line.partition(":")
        if sep and k.strip() not in fields:
            fields[k.strip()] = v.strip()
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    siblings, physical = _int(fields.get("siblings")), _int(fields.get("cpu cores"))
    try:
        mhz: float | None = float(fields["cpu MHz"])
    except (KeyError, ValueError):
        mhz = None
    return {
        "model": fields.get("model name") or fields.get("Model") or platform.processor() or None,
        "cores": cores,
        "threads_per_core": siblings // physical if siblings and physical else None,
        "mhz": mhz,
    }


def memory(meminfo: str | None = None) -> dict[str, int | None]:
    """total_bytes, available_bytes, swap_total_bytes from /proc/meminfo."""
    text = read_text("/proc/meminfo") if meminfo is None else meminfo
    kb = {}
    for line in (text or "").splitlines():
        m = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if m:
            kb[m.group(1)] = int(m.group(2)) * 1024
    return {
        "total_bytes": kb.get("MemTotal"),
        "available_bytes": kb.get("MemAvailable"),
        "swap_total_bytes": kb.get("SwapTotal"),
    }


def disks(sys_block: str = "/sys/block") -> list[dict[str, Any]]:
    """The machine's disks: name, size_bytes, model, rotational (sorted by name)."""
    try:
        names = sorted(os.listdir(sys_block))
    except OSError:
        return []
    out = []
    for n in names:
        if _NOT_DISKS.match(n):
            continue
        d = os.path.join(sys_block, n)
        sectors = _int(read_text(os.path.join(d, "size")))
        rot = _int(read_text(os.path.join(d, "queue", "rotational")))
        model = (read_text(os.path.join(d, "device", "model")) or "").strip() or None
        out.append(
            {
                "name": n,
                "size_bytes": sectors * 512 if sectors is not None else None,
                "model": model,
                "rotational": bool(rot) if rot is not None else None,
            }
        )
    return out


def _mount_of(path: str, mounts: str | None = None) -> tuple[str | None, str | None]:
    """(device, file system type) of the mount holding path, from /proc/self/mounts."""
    text = read_text("/proc/self/mounts") if mounts is None else mounts
    real = os.path.realpath(path)
    best: tuple[int, str | None, str | None] = (-1, None, None)
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        mnt = parts[1].replace("\\040", " ")
        inside = real == mnt or real.startswith(mnt.rstrip("/") + "/")
        if inside and len(mnt) > best[0]:
            best = (len(mnt), parts[0], parts[2])
    return best[1], best[2]


def _encrypted(path: str, sys_dev: str = "/sys/dev/block") -> bool | None:
    """Whether the file system holding path sits on dm-crypt (a "CRYPT-" dm uuid anywhere
    down its stack); None when /sys cannot say."""
    top = sysfs_of(path, sys_dev)
    if top is None:
        return None
    return any(
        (read_text(os.path.join(d, "dm", "uuid")) or "").startswith("CRYPT-")
        for d in block_stack(top)
    )


def store(data_dir: str) -> dict[str, Any]:
    """The data directory's file system: path, filesystem, device, encrypted, sizes."""
    device, fstype = _mount_of(data_dir)
    total = free = None
    try:
        vfs = os.statvfs(data_dir)
        total, free = vfs.f_blocks * vfs.f_frsize, vfs.f_bavail * vfs.f_frsize
    except OSError:
        pass
    return {
        "path": data_dir,
        "filesystem": fstype,
        "device": device,
        "encrypted": _encrypted(data_dir),
        "total_bytes": total,
        "free_bytes": free,
    }


def _os_release() -> str | None:
    text = read_text("/etc/os-release") or read_text("/usr/lib/os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return m.group(1) if m else None


def _boot_time() -> str | None:
    m = re.search(r"^btime\s+(\d+)", read_text("/proc/stat") or "", re.M)
    return rfc3339(int(m.group(1)) * 1_000_000) if m else None


@lru_cache(maxsize=1)
def _virtualization() -> str | None:
    """systemd-detect-virt's answer ("kvm", "qemu", "none"); None when it cannot run."""
    try:
        r = subprocess.run(
            ["systemd-detect-virt"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() or None


@lru_cache(maxsize=4)
def commit(build_info: str | None) -> str | None:
    """The source commit the installed files were built from: the install's build.json
    ({"commit": ...}), else (a checkout: make run) git's HEAD; None when neither says."""
    if build_info:
        try:
            doc = json.loads(read_text(build_info) or "null")
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("commit"), str):
            return doc["commit"]
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.isdir(os.path.join(top, ".git")):
        return None
    try:
        r = subprocess.run(
            ["git", "-C", top, "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() or None if r.returncode == 0 else None


def settings(indexd_status: str | None) -> dict[str, Any]:
    """The settings that change a performance figure, from indexd's status file: each
    logspace's retention, whether chains are sealed, the inputs, the routing rules."""
    st: Any = None
    if indexd_status:
        try:
            st = json.loads(read_text(indexd_status, 16 << 20) or "null")
        except ValueError:
            st = None
    st = st if isinstance(st, dict) else {}
    spaces = st.get("logspaces") if isinstance(st.get("logspaces"), dict) else {}
    sealing = st.get("sealing") if isinstance(st.get("sealing"), dict) else None
    routes = st.get("routes") if isinstance(st.get("routes"), dict) else None
    inputs = st.get("inputs") if isinstance(st.get("inputs"), list) else []
    return {
        "logspaces": {
            n: {"retention_days": v.get("retention_days")}
            for n, v in sorted(spaces.items())
            if isinstance(v, dict)
        },
        "sealing": sealing.get("setup") is True if sealing is not None else None,
        "inputs": sorted({i["kind"] for i in inputs if isinstance(i, dict) and "kind" in i}),
        "routes": routes.get("rules") if routes is not None else None,
        "indexd_max_memory_mb": st.get("max_memory_mb")
        if isinstance(st.get("max_memory_mb"), int)
        else None,
    }


def gather(
    *, data_dir: str, indexd_status: str | None = None, build_info: str | None = None
) -> dict[str, Any]:
    """The object of GET /api/v1/system (API.md §7)."""
    u = os.uname()
    return {
        "logbox": {"version": VERSION, "commit": commit(build_info)},
        "host": {
            "hostname": u.nodename,
            "kernel": f"{u.sysname} {u.release}",
            "os": _os_release(),
            "arch": u.machine,
            "boot_time": _boot_time(),
            "virtualization": _virtualization(),
        },
        "cpu": cpu(),
        "memory": memory(),
        "disks": disks(),
        "store": store(data_dir),
        "raid": raid_for_path(data_dir),
        "settings": settings(indexd_status),
    }
