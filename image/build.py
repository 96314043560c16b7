#!/usr/bin/env python3
"""Builds the logbox appliance disk image (make image): build/image/logbox.img and .img.zst.

Steps, each timed:
1. base: mmdebstrap bookworm (minbase + image/packages.txt, customize hook image/base-hook.sh)
   into a tarball cached under build/image/cache/, keyed by the package list, the mirror lines
   and the hook; a rebuild after a code change starts at step 2.
2. root: the base unpacked into build/image/root, `make install DESTDIR=<root>` from this
   checkout (the C programs built on this host: the same Debian 12), the logbox users made and
   logbox.target enabled.
3. disk: an ext4 file system filled from the root directory (mkfs.ext4 -d, label logbox-root),
   an MBR partition table (sfdisk) on a sparse raw file, and two boot paths into the same
   grub.cfg (written by hand): GRUB for BIOS (grub-mkimage core.img in the gap after the MBR,
   boot.img in the MBR) and GRUB for UEFI (an EFI system partition, MBR type 0xef, made with
   mkfs.vfat on a file and filled with mtools: /EFI/BOOT/BOOTX64.EFI, the removable-media path
   firmware boots without NVRAM entries). No loop device, no mount, no KVM.
4. zstd: the compressed copy for distribution.
Needs root (mmdebstrap's root mode, chroot, file ownership). Writes build/image/build.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
HERE = TOP / "image"
OUT = TOP / "build" / "image"
SUITE = "bookworm"
LABEL = "logbox-root"
MiB = 1024 * 1024
PART_START = MiB  # the root partition starts at 1 MiB: GRUB's core.img lives in the gap before it
ESP_SIZE = 64 * MiB  # the EFI system partition, last on the disk (FAT32 needs about 33 MiB)
# Only what image/packages.txt names and what that depends on: recommended packages would bring
# a compiler, Boost and SciPy with python3-matplotlib (through python3-fonttools).
APT_OPTS = ['APT::Install-Recommends "false"']
# GRUB's modules built into its images; the rest are loaded from /boot/grub/<platform>/
GRUB_MODULES = ["part_msdos", "ext2", "search", "search_label", "normal", "configfile", "linux",
                "echo", "serial", "terminal", "gzio"]  # fmt: skip


def log(msg: str) -> None:
    """Prints one progress line."""
    print(f"image: {msg}", flush=True)


def run(*args: str | Path, **kw: object) -> subprocess.CompletedProcess:
    """Runs a command, failing loudly with its output when it fails."""
    cmd = [str(a) for a in args]
    r = subprocess.run(cmd, **kw)  # noqa: PLW1510 (checked below)
    if r.returncode != 0:
        sys.exit(f"image: failed ({r.returncode}): {' '.join(cmd)}")
    return r


def packages() -> list[str]:
    """The Debian packages of image/packages.txt."""
    out = []
    for line in (HERE / "packages.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def _deb822_lines(text: str) -> list[str]:
    """One-line `deb URI suite components` entries of a deb822 .sources file."""
    out = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0].isspace() and key:
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled") == "no":
            continue
        comps = fields.get("components", "main")
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                out.append(f"deb {uri} {suite} {comps}")
    return out


def mirror_lines() -> list[str]:
    """The apt lines of this machine for bookworm (deb822 .sources, else sources.list): the image
    uses the mirror the build host uses, so no host name is written down anywhere."""
    lines: list[str] = []
    d = Path("/etc/apt/sources.list.d")
    for f in sorted(d.glob("*.sources")) if d.is_dir() else []:
        lines += _deb822_lines(f.read_text())
    for f in [Path("/etc/apt/sources.list"), *sorted(d.glob("*.list"))]:
        if f.is_file():
            for line in f.read_text().splitlines():
                line = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
                if len(line) >= 3 and line[0] == "deb":
                    lines.append(" ".join(line))
    lines = [x for x in lines if x.split()[2].startswith(SUITE)]
    if not lines:
        sys.exit(f"image: no apt source for {SUITE} in /etc/apt (sources.list.d/*.sources)")
    # keep main only: the image needs nothing else
    return sorted({" ".join(x.split()[:3]) + " main" for x in lines})


def base_tarball(pkgs: list[str], mirrors: list[str], times: dict[str, float]) -> Path:
    """The cached mmdebstrap tarball, built when missing."""
    hook = HERE / "base-hook.sh"
    key_src = json.dumps(
        {
            "suite": SUITE,
            "packages": sorted(pkgs),
            "mirrors": mirrors,
            "hook": hook.read_text(),
            "aptopts": APT_OPTS,
        },
        sort_keys=True,
    )
    key = hashlib.sha256(key_src.encode()).hexdigest()[:16]
    cache = OUT / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    tar = cache / f"base-{key}.tar"
    if tar.is_file():
        log(f"base: cached {tar.relative_to(TOP)}")
        times["base_s"] = 0.0
        return tar
    for old in cache.glob("base-*.tar*"):
        old.unlink()
    t0 = time.monotonic()
    log(f"base: mmdebstrap {SUITE} minbase + {len(pkgs)} packages from {', '.join(mirrors)}")
    tmp = cache / f"base-{key}.tmp.tar"
    run(
        "mmdebstrap",
        "--mode=root",
        "--variant=minbase",
        "--format=tar",
        *(f"--aptopt={o}" for o in APT_OPTS),
        "--include=" + ",".join(pkgs),
        f'--customize-hook=sh {hook} "$1"',
        SUITE,
        tmp,
        *mirrors,
    )
    tmp.rename(tar)
    times["base_s"] = round(time.monotonic() - t0, 1)
    log(f"base: {times['base_s']} s, {tar.stat().st_size // MiB} MiB")
    return tar


def make_root(tar: Path, root: Path, install: bool) -> None:
    """Unpacks the base into root and installs logbox into it."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    run("tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-xpf", tar, "-C", root)
    if install:
        log("root: make install DESTDIR=" + str(root.relative_to(TOP)))
        run("make", "--no-print-directory", "-C", TOP, "install", f"DESTDIR={root}")
    else:
        log("root: WITHOUT logbox (LOGBOX_IMAGE_NO_INSTALL=1): a bare Debian image")
    if list((root / "usr/lib/sysusers.d").glob("logbox*.conf")):
        run("chroot", root, "systemd-sysusers")
    if (root / "usr/lib/systemd/system/logbox.target").is_file():
        run("chroot", root, "systemctl", "enable", "logbox.target")
        # boot into it: the default target pulls logbox.target in through its wants
    elif install:
        sys.exit("image: make install put no /usr/lib/systemd/system/logbox.target in the root")
    # sshd: disabled by the base; when logbox's drop-in makes it conditional on
    # /etc/logbox/ssh-enabled (first boot with a key), it is enabled and stays off until then
    dropin = root / "usr/lib/systemd/system/ssh.service.d/logbox.conf"
    if dropin.is_file() and "ConditionPathExists=/etc/logbox/ssh-enabled" in dropin.read_text():
        run("chroot", root, "systemctl", "enable", "--quiet", "ssh.service")
    # what make install or sysusers may have left that is the build host's
    for p in (root / "tmp").iterdir():
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    (root / "etc/machine-id").write_text("")


def kernel_files(root: Path) -> tuple[str, str]:
    """The kernel and initrd under /boot (the newest, by name)."""
    ks = sorted((root / "boot").glob("vmlinuz-*"))
    if not ks:
        sys.exit("image: no kernel in /boot")
    ver = ks[-1].name.removeprefix("vmlinuz-")
    initrd = root / "boot" / f"initrd.img-{ver}"
    if not initrd.is_file():
        sys.exit(f"image: no {initrd.name} in /boot")
    return f"/boot/vmlinuz-{ver}", f"/boot/initrd.img-{ver}"


def grub_image(root: Path, platform: str, out: Path, extra: list[str]) -> Path:
    """grub-mkimage for platform (i386-pc, x86_64-efi) from the root's own GRUB modules, with
    image/grub-early.cfg (find the root by label, then /boot/grub/grub.cfg)."""
    run(
        "grub-mkimage",
        "-O",
        platform,
        "-d",
        root / "usr/lib/grub" / platform,
        "-c",
        HERE / "grub-early.cfg",
        "-p",
        "/boot/grub",
        "-o",
        out,
        *GRUB_MODULES,
        *extra,
    )
    return out


def install_grub(root: Path, work: Path) -> tuple[Path, Path]:
    """Writes /boot/grub (both platforms' modules, grub.cfg) in root; returns core.img for the
    MBR gap and BOOTX64.EFI for the EFI system partition."""
    grub = root / "boot/grub"
    if grub.exists():
        shutil.rmtree(grub)
    for platform in ("i386-pc", "x86_64-efi"):
        mods = root / "usr/lib/grub" / platform
        if not mods.is_dir():
            sys.exit(f"image: no {mods.relative_to(root)} in the root (image/packages.txt)")
        shutil.copytree(mods, grub / platform)
    kernel, initrd = kernel_files(root)
    cfg = (HERE / "grub.cfg.in").read_text().replace("@KERNEL@", kernel)
    # debugging only (root is locked): e.g. systemd.journald.forward_to_console=1
    cfg = cfg.replace(" @EXTRA@", (" " + os.environ.get("LOGBOX_IMAGE_CMDLINE", "")).rstrip())
    (grub / "grub.cfg").write_text(cfg.replace("@INITRD@", initrd))
    core = grub_image(root, "i386-pc", work / "core.img", ["biosdisk"])
    if core.stat().st_size > PART_START - 512:
        sys.exit(f"image: core.img is {core.stat().st_size} bytes: too big for the MBR gap")
    efi = grub_image(root, "x86_64-efi", work / "BOOTX64.EFI", ["part_gpt", "efi_gop"])
    return core, efi


def make_esp(efi: Path, out: Path) -> Path:
    """The EFI system partition as a file: FAT32 (label LOGBOX-EFI) holding
    /EFI/BOOT/BOOTX64.EFI. mkfs.vfat on a file and mtools: no mount."""
    out.unlink(missing_ok=True)
    run("mkfs.vfat", "-F", "32", "-n", "LOGBOX-EFI", "-C", out, str(ESP_SIZE // 1024),
        stdout=subprocess.DEVNULL)  # fmt: skip
    env = {**os.environ, "MTOOLS_SKIP_CHECK": "1"}
    run("mmd", "-i", out, "::/EFI", "::/EFI/BOOT", env=env)
    run("mcopy", "-i", out, efi, "::/EFI/BOOT/BOOTX64.EFI", env=env)
    return out


def make_disk(root: Path, img: Path, size: int, core: Path, esp: Path, work: Path) -> None:
    """The raw disk: MBR + GRUB for BIOS, one bootable ext4 partition filled from root, the EFI
    system partition last. Sparse."""
    root_size = size - PART_START - ESP_SIZE
    part = work / "root.ext4"
    part.unlink(missing_ok=True)
    with open(part, "wb") as f:
        f.truncate(root_size)
    run("mkfs.ext4", "-q", "-F", "-L", LABEL, "-d", root, "-E", "lazy_itable_init=1", part)
    img.unlink(missing_ok=True)
    with open(img, "wb") as f:
        f.truncate(size)
    esp_start = PART_START + root_size
    table = (
        "label: dos\n"
        f"start={PART_START // 512}, size={root_size // 512}, type=83, bootable\n"
        f"start={esp_start // 512}, size={ESP_SIZE // 512}, type=ef\n"
    )
    run("sfdisk", "--quiet", "--no-reread", "--no-tell-kernel", img, input=table.encode())
    boot = root / "usr/lib/grub/i386-pc/boot.img"
    with open(img, "r+b") as f:
        f.write(boot.read_bytes()[:440])  # the boot code; the partition table stays
        f.seek(512)
        f.write(core.read_bytes())
    for src, start in ((part, PART_START), (esp, esp_start)):
        run(
            "dd",
            f"if={src}",
            f"of={img}",
            "bs=1M",
            f"seek={start // MiB}",
            "conv=notrunc,sparse",
            "status=none",
        )
    part.unlink()
    esp.unlink()


def main() -> None:
    """Builds the image; prints and records times and sizes."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=2048, help="disk size in MiB (default 2048)")
    ap.add_argument("--zstd-level", type=int, default=int(os.environ.get("LOGBOX_ZSTD", "12")))
    ap.add_argument("--keep-root", action="store_true", help="keep build/image/root")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("image: make image needs root (mmdebstrap --mode=root, chroot, file owners)")
    for tool in ("mmdebstrap", "sfdisk", "mkfs.ext4", "grub-mkimage", "mkfs.vfat", "mcopy", "zstd"):
        if shutil.which(tool) is None:
            sys.exit(f"image: {tool} is missing (make deps)")
    install = os.environ.get("LOGBOX_IMAGE_NO_INSTALL") != "1"
    t_start = time.monotonic()
    times: dict[str, float] = {}
    OUT.mkdir(parents=True, exist_ok=True)
    work = OUT / "work"
    work.mkdir(exist_ok=True)
    tar = base_tarball(packages(), mirror_lines(), times)

    t0 = time.monotonic()
    root = OUT / "root"
    make_root(tar, root, install)
    times["root_s"] = round(time.monotonic() - t0, 1)
    log(f"root: {times['root_s']} s")

    t0 = time.monotonic()
    img = OUT / "logbox.img"
    core, efi = install_grub(root, work)
    make_disk(root, img, a.size * MiB, core, make_esp(efi, work / "esp.vfat"), work)
    times["disk_s"] = round(time.monotonic() - t0, 1)
    log(f"disk: {times['disk_s']} s")
    if not a.keep_root:
        shutil.rmtree(root)

    t0 = time.monotonic()
    zst = OUT / "logbox.img.zst"
    run("zstd", "-q", "-f", "-T0", f"-{a.zstd_level}", img, "-o", zst)
    times["zstd_s"] = round(time.monotonic() - t0, 1)
    times["total_s"] = round(time.monotonic() - t_start, 1)
    used = img.stat().st_blocks * 512
    report = {
        "image": str(img.relative_to(TOP)),
        "raw_bytes": img.stat().st_size,
        "raw_allocated_bytes": used,
        "zstd_bytes": zst.stat().st_size,
        "zstd_level": a.zstd_level,
        "firmware": ["bios", "uefi"],
        "logbox_installed": install,
        "build_times_s": times,
    }
    (OUT / "build.json").write_text(json.dumps(report, indent=1) + "\n")
    log(
        f"{img.relative_to(TOP)}: {img.stat().st_size / MiB:.0f} MiB raw "
        f"({used / MiB:.0f} MiB allocated), {zst.relative_to(TOP)}: "
        f"{zst.stat().st_size / MiB:.0f} MiB (zstd -{a.zstd_level})"
    )
    log("times: " + ", ".join(f"{k} {v}" for k, v in times.items()))


if __name__ == "__main__":
    main()
