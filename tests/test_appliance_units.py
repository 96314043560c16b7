# The appliance's installation (appliance/APPLIANCE.md): `make install DESTDIR=<tmp>` lays out
# the programs, Python packages, units, sysusers.d and tmpfiles.d as the contract says;
# `systemd-analyze verify --root` finds nothing to say about any unit; `systemd-analyze security
# --offline` rates every logbox service at most 2.0; every service runs as its own user (root
# only for logbox-storage and logbox-firstboot, whose units say why), has the hardening of the
# contract and may write only the paths of its row of the users table; systemd-sysusers and
# systemd-tmpfiles really make the users, groups and directories in the tree.
# logbox-firstboot, run on the tree (LOGBOX_ROOT), makes the TLS files, secret, settings and the
# admin with the right modes and owners, shows a generated password once (console only), uses
# a given one without printing it, and does nothing the second time. logbox-storage's decisions
# are checked on lsblk outputs of every case (blank disks, array members, a missing member
# replaced by a blank disk, one disk, none, the boot disk, foreign disks), and its whole loop runs
# on fake disk tools. The appliance runs without systemd: every daemon from its unit's command
# line and environment, under its unit's user, groups and capabilities (setpriv), on a tree laid
# out as at boot; a syslog message reaches searchd through syslog-ng, the spool, indexd and the
# store, and logbox-ready, as its unit, prints the readiness line. The syslog-ng unit's
# ExecStartPre renders a configuration syslog-ng accepts; nft accepts the firewall with and
# without SSH; the Vagrantfile validates.

from __future__ import annotations

import configparser
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parent.parent
SYSTEMD_DIR = "usr/lib/systemd/system"
SERVICES = (
    "logbox-storage.service",
    "logbox-firstboot.service",
    "logbox-reset-admin.service",
    "logbox-keys.service",
    "logbox-verify.service",
    "logbox-indexd.service",
    "logbox-syslog-ng.service",
    "logbox-searchd.service",
    "logbox-alertd.service",
    "logbox-archive.service",
    "logbox-rpc.service",
    "logbox-webui.service",
    "logbox-nginx.service",
    "logbox-ready.service",
    "logbox-reports.service",
)
TIMERS = ("logbox-verify.timer", "logbox-reports.timer")
UNITS = (*SERVICES, *TIMERS, "logbox.target")
# started by their timer, not by the target
TIMED = {"logbox-verify.service", "logbox-reports.service"}
ROOT_SERVICES = {
    "logbox-storage.service",
    "logbox-firstboot.service",
    "logbox-reset-admin.service",
}
# The users table of APPLIANCE.md: user -> (the unit, its groups, what it may write). The
# daemons that put a file in /run/logbox (status, socket, pid) may write it too.
USERS = {
    "logbox-collector": (
        "logbox-syslog-ng.service",
        {"logbox-spool", "logbox-status", "logbox-tls"},
        {"/var/lib/logbox-collector", "/run/logbox", "/var/lib/logbox/spool"},
    ),
    "logbox-indexd": (
        "logbox-indexd.service",
        {"logbox-store", "logbox-spool", "logbox-status"},
        {"/var/lib/logbox", "/run/logbox"},
    ),
    "logbox-searchd": (
        "logbox-searchd.service",
        {"logbox-store", "logbox-search", "logbox-status", "logbox-archive"},
        # an LMDB reader's slot in the catalog's lock.mdb; nothing else of the store; the
        # cache of archived days' pieces
        {"/var/lib/logbox/catalog", "/run/logbox", "/var/cache/logbox-searchd"},
    ),
    # searchd's socket, the accounts store (alerts, their history) and the delivery settings
    # (group logbox-accounts), its status file; its state
    "logbox-alertd": (
        "logbox-alertd.service",
        {"logbox-search", "logbox-accounts", "logbox-status"},
        {"/var/lib/logbox-accounts", "/run/logbox", "/var/lib/logbox-alertd"},
    ),
    # the archive: reads the store (an LMDB reader's slot in the catalog); its state
    "logbox-archive": (
        "logbox-archive.service",
        {"logbox-store", "logbox-status"},
        {"/var/lib/logbox/catalog", "/var/lib/logbox-archive"},
    ),
    # the apps: their gunicorn socket's directory too
    "logbox-rpc": (
        "logbox-rpc.service",
        {
            "logbox-search",
            "logbox-accounts",
            "logbox-status",
            "logbox-settings",
            "logbox-tls",
            "logbox-archive",
        },
        {"/var/lib/logbox-accounts", "/etc/logbox/settings", "/run/logbox-rpc"},
    ),
    "logbox-webui": (
        "logbox-webui.service",
        {
            "logbox-search",
            "logbox-accounts",
            "logbox-status",
            "logbox-settings",
            "logbox-tls",
            "logbox-archive",
        },
        {"/var/lib/logbox-accounts", "/etc/logbox/settings", "/run/logbox-webui"},
    ),
    # the scheduled reports (its timer): the accounts store (reports, their state, the audit log)
    "logbox-reports": (
        "logbox-reports.service",
        {"logbox-search", "logbox-accounts"},
        {"/var/lib/logbox-accounts"},
    ),
    # nginx in front of both: the server key; its pid and temporary files
    "logbox-nginx": (
        "logbox-nginx.service",
        {"logbox-tls"},
        {"/run/logbox-nginx"},
    ),
}
WRITABLE = {unit: paths for unit, _, paths in USERS.values()} | {
    # the store's key file in /etc/logbox/luks (made with the encrypted volume)
    "logbox-storage.service": {"/run/logbox", "/run/mdadm", "/run/cryptsetup", "/etc/logbox/luks"},
    # as the store's owner: the sealing keys in the store, the verification key on /run
    "logbox-keys.service": {"/var/lib/logbox", "/run/logbox-keys"},
    # as the store's owner, reading it: its report, and an LMDB reader's slot in the catalog
    "logbox-verify.service": {"/var/lib/logbox/catalog", "/var/lib/logbox-verify"},
    "logbox-firstboot.service": {"/etc/logbox", "/var/lib/logbox-accounts"},
    "logbox-reset-admin.service": {"/var/lib/logbox-accounts"},
    "logbox-ready.service": set(),
}
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "ProtectClock": "yes",
    "ProtectHostname": "yes",
    "RestrictNamespaces": "yes",
    "RestrictRealtime": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "yes",
    "SystemCallArchitectures": "native",
    "UMask": "0027",
}
# What the sandbox of a unit is allowed to differ in, and why (also said in the unit).
EXCEPTIONS = {
    # block devices, device-mapper, mdadm's /sys files; cryptsetup's wait for udev (a System V
    # semaphore udev releases: the host's IPC namespace)
    "logbox-storage.service": {
        "PrivateDevices": "no",
        "ProtectKernelTunables": "no",
        "PrivateIPC": "no",
    },
    # /dev/console only (DevicePolicy=closed): the generated password goes there, not the journal
    "logbox-firstboot.service": {"PrivateDevices": "no"},
    # the same, for a password reset chosen at the boot menu
    "logbox-reset-admin.service": {"PrivateDevices": "no"},
    # the same, for the verification key (its last step, as root)
    "logbox-keys.service": {"PrivateDevices": "no"},
    # its pid file is read by the status of rpc and webui (other users); the state directory
    # is 0750 and the control socket owner-only (connecting needs write permission)
    "logbox-syslog-ng.service": {"UMask": "0022"},
}
HOST_TOOLS = (
    "/usr/bin/python3",
    "/usr/sbin/syslog-ng",
    "/usr/sbin/nginx",
    "/bin/sh",
    "/bin/chgrp",
    "/usr/bin/systemd-tmpfiles",
)


def need(tool: str) -> str:
    """The path of a host tool the test cannot do without (fails, never skips)."""
    path = shutil.which(tool) or (tool if os.path.exists(tool) else None)
    if path is None:
        pytest.fail(f"{tool} is not installed (make deps)")
    return path


def load_script(name: str) -> types.ModuleType:
    """An appliance/libexec program (no .py suffix) as a module, for its pure functions."""
    path = TOP / "appliance" / "libexec" / name
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = mod  # dataclasses look their module up there
    loader.exec_module(mod)
    return mod


def unit_file(root: Path, unit: str) -> dict[str, list[str]]:
    """A unit's settings: name -> every value given (in order), sections merged. root is an
    installed tree, or a directory holding the unit itself (appliance/)."""
    out: dict[str, list[str]] = {}
    path = root / SYSTEMD_DIR / unit
    if not path.exists():
        path = root / "systemd" / unit
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#;[":
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def last(settings: dict[str, list[str]], key: str) -> str | None:
    """The value in force of a single-valued setting."""
    values = settings.get(key)
    return values[-1] if values else None


def unit_comments(root: Path, unit: str) -> str:
    """The comment lines of a unit file, joined."""
    lines = (root / SYSTEMD_DIR / unit).read_text().splitlines()
    return " ".join(x.lstrip("# ") for x in lines if x.startswith("#"))


def db(root: Path, kind: str) -> dict[str, list[str]]:
    """<root>/etc/passwd or group as name -> fields."""
    out = {}
    for line in (root / "etc" / kind).read_text().splitlines():
        parts = line.split(":")
        out[parts[0]] = parts
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root file system with logbox installed by `make install`, the users and directories
    made by systemd-sysusers and systemd-tmpfiles, plus what systemd-analyze needs from the
    host: the programs the units run and the host's own units (sysinit.target, ...)."""
    r = tmp_path_factory.mktemp("root")
    done = subprocess.run(
        ["make", "--no-print-directory", "install", f"DESTDIR={r}"],
        cwd=TOP,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for tool in HOST_TOOLS:
        src = Path(os.path.realpath(need(tool)))
        dst = r / tool.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    units = r / SYSTEMD_DIR
    for src in Path("/usr/lib/systemd/system").iterdir():
        if not (units / src.name).exists() and (src.is_file() or src.is_symlink()):
            shutil.copy2(src, units / src.name, follow_symlinks=False)
    for cmd in (
        ["systemd-sysusers", f"--root={r}"],
        ["systemd-tmpfiles", f"--root={r}", "--create"],
    ):
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, f"{cmd}: {done.stderr}"
    return r


# ---------------------------------------------------------------- layout


def test_layout(root: Path) -> None:
    lib = root / "usr/lib/logbox"
    for p in ("logbox", "logbox-indexd", "logbox-searchd"):
        prog = lib / "bin" / p
        assert prog.is_file() and os.access(prog, os.X_OK), prog
        assert (
            prog.read_bytes() == (TOP / "build/bin" / p).read_bytes()
        ), f"{p}: not the release build"
    assert os.readlink(root / "usr/bin/logbox") == "../lib/logbox/bin/logbox"
    assert (root / "usr/bin/logbox").resolve() == (lib / "bin/logbox").resolve()
    for pkg in ("logbox_core", "logbox_rpc", "logbox_webui", "logbox_client", "logbox_eps"):
        assert (lib / "python" / pkg / "__init__.py").is_file(), pkg
    assert (lib / "python/logbox_webui/templates").is_dir()
    assert not list((lib / "python").rglob("*.pyc")) or all(
        p.parent.name == "__pycache__" for p in (lib / "python").rglob("*.pyc")
    )
    assert (lib / "collector/render.py").read_bytes() == (TOP / "collector/render.py").read_bytes()
    assert (lib / "gunicorn/rpc.conf.py").read_bytes() == (
        TOP / "rpc/gunicorn.conf.py"
    ).read_bytes()
    assert (lib / "gunicorn/webui.conf.py").read_bytes() == (
        TOP / "webui/gunicorn.conf.py"
    ).read_bytes()
    for p in ("logbox-firstboot", "logbox-storage", "logbox-ready"):
        assert os.access(lib / "libexec" / p, os.X_OK), p
    for unit in UNITS:
        assert (root / SYSTEMD_DIR / unit).is_file(), unit
    wants = root / SYSTEMD_DIR / "multi-user.target.wants/logbox.target"
    assert os.readlink(wants) == "../logbox.target"
    assert (root / "usr/lib/sysusers.d/logbox.conf").is_file()
    assert (root / "usr/lib/tmpfiles.d/logbox.conf").is_file()
    assert (root / "etc/nftables.conf").is_file()
    # the installed packages import from their PYTHONPATH alone (the units' environment)
    env = {"PYTHONPATH": str(lib / "python"), "PATH": "/usr/bin:/bin"}
    code = (
        "import logbox_rpc, logbox_webui, logbox_client, logbox_eps.cli, logbox_core.accounts;"
        " print('ok')"
    )
    done = subprocess.run(
        ["/usr/bin/python3", "-c", code], env=env, capture_output=True, text=True, cwd="/"
    )
    assert done.stdout.strip() == "ok", done.stderr
    # the client commands: shell wrappers running the packages' main() from /usr/lib/logbox
    for cmd, pkg in (("logbox-eps", "logbox_eps"), ("logbox-remote", "logbox_client")):
        text = (root / "usr/bin" / cmd).read_text()
        assert os.access(root / "usr/bin" / cmd, os.X_OK), cmd
        assert "PYTHONPATH=/usr/lib/logbox/python" in text and f"from {pkg}.cli import main" in text
    acc = (root / "usr/bin/logbox-accounts").read_text()
    assert os.access(root / "usr/bin/logbox-accounts", os.X_OK)
    assert "exec runuser -u logbox-rpc -- env PYTHONPATH=/usr/lib/logbox/python" in acc
    assert "LOGBOX_ACCOUNTS=/var/lib/logbox-accounts" in acc and "-m logbox_core.accounts" in acc
    assert 'if [ "$(id -u)" != 0 ]; then' in acc  # anyone else: refused, saying so
    done = subprocess.run(  # what the wrapper runs, with the installed tree's packages
        ["/usr/bin/python3", "-m", "logbox_eps.cli", "--help"],
        env=env,
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert done.returncode == 0 and "logbox-eps" in done.stdout, done.stderr
    # what GET /api/v1/system says of the build
    head = subprocess.run(
        ["git", "-C", str(TOP), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert json.loads((lib / "build.json").read_text()) == {"commit": head or None}


def test_target_wants_every_unit(root: Path) -> None:
    target = unit_file(root, "logbox.target")
    wanted = " ".join(target["Wants"]).split()
    assert set(wanted) == set(SERVICES) - TIMED | set(TIMERS)
    for timer in TIMERS:
        t = unit_file(root, timer)
        assert last(t, "PartOf") == "logbox.target", timer
        service = timer.replace(".timer", ".service")
        assert service in TIMED and last(t, "Unit") in (None, service), timer
    assert last(target, "WantedBy") == "multi-user.target"


# ---------------------------------------------------------------- systemd-analyze


def test_verify_clean(root: Path) -> None:
    done = subprocess.run(
        ["systemd-analyze", "verify", f"--root={root}", *UNITS],
        cwd=root / SYSTEMD_DIR,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), (
        done.stdout + done.stderr
    )


@pytest.mark.parametrize("unit", SERVICES)
def test_security_exposure(root: Path, unit: str) -> None:
    done = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", f"--root={root}", unit],
        cwd=root / SYSTEMD_DIR,
        capture_output=True,
        text=True,
    )
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", done.stdout)
    assert m is not None, done.stdout[-2000:] + done.stderr
    assert float(m.group(1)) <= 2.0, f"{unit}: exposure {m.group(1)}"


# ---------------------------------------------------------------- users and rights


@pytest.mark.parametrize("unit", SERVICES)
def test_user_and_hardening(root: Path, unit: str) -> None:
    s = unit_file(root, unit)
    user = last(s, "User")
    if unit in ROOT_SERVICES:
        assert user == "root", f"{unit}: User=root expected (it says why)"
        assert "Root, because" in unit_comments(root, unit), f"{unit}: no reason given for root"
    else:
        assert user and user != "root", f"{unit}: no User= or root"
    if unit == "logbox-ready.service":
        assert last(s, "DynamicUser") == "yes"
    want = HARDENING | EXCEPTIONS.get(unit, {})
    for key, value in want.items():
        assert last(s, key) == value, f"{unit}: {key}={last(s, key)}, expected {value}"
    assert s["SystemCallFilter"][0] == "@system-service", unit
    caps = set((last(s, "CapabilityBoundingSet") or "").split())
    if unit not in ROOT_SERVICES:
        # only syslog-ng (514, 601) and nginx (443) listen on a port below 1024; indexd takes
        # read leases on the spool files syslog-ng owns
        low = unit in ("logbox-syslog-ng.service", "logbox-nginx.service")
        want_caps = {"CAP_NET_BIND_SERVICE"} if low else set()
        if unit == "logbox-indexd.service":
            want_caps = {"CAP_LEASE"}
        assert caps == want_caps, f"{unit}: {caps}"
        assert set((last(s, "AmbientCapabilities") or "").split()) == caps
    families = set((last(s, "RestrictAddressFamilies") or "").split())
    assert "AF_UNIX" in families and families <= {"AF_UNIX", "AF_INET", "AF_INET6"}, unit
    for key in ("StateDirectory", "RuntimeDirectory", "LogsDirectory", "CacheDirectory"):
        assert key not in s, f"{unit}: {key}= would add a writable path"
    writable = {p.lstrip("-") for v in s.get("ReadWritePaths", []) for p in v.split()}
    assert writable == WRITABLE[unit], f"{unit}: writes {writable}"


@pytest.mark.parametrize("user", sorted(USERS))
def test_user_runs_its_unit_with_its_groups(root: Path, user: str) -> None:
    unit, groups, _ = USERS[user]
    s = unit_file(root, unit)
    assert last(s, "User") == user
    in_unit = {last(s, "Group")} | set(" ".join(s.get("SupplementaryGroups", [])).split())
    assert in_unit - {user} == groups, unit  # its own group too where it needs it
    members = {g for g, f in db(root, "group").items() if user in f[3].split(",")}
    assert members == groups, f"{user}: sysusers.d gives {members}"
    passwd = db(root, "passwd")[user]
    assert int(passwd[2]) != 0 and passwd[6] == "/usr/sbin/nologin"


def test_daemons_types(root: Path) -> None:
    for unit in ("logbox-indexd.service", "logbox-searchd.service"):
        s = unit_file(root, unit)
        assert last(s, "Type") == "notify" and last(s, "WatchdogSec") == "30", unit
    sng = unit_file(root, "logbox-syslog-ng.service")
    assert last(sng, "LimitNOFILE") == "65536"
    # syslog-ng is After= indexd, so it stops first (into the spool), and indexd never After=
    # syslog-ng (that would stop indexd first)
    assert "logbox-indexd.service" in " ".join(sng["After"]).split()
    idx = unit_file(root, "logbox-indexd.service")
    assert "logbox-syslog-ng.service" not in " ".join(idx.get("After", [])).split()
    start = (last(idx, "ExecStart") or "").split()
    assert start[start.index("--spool") + 1] == "/var/lib/logbox/spool"
    assert start[start.index("--routes") + 1] == "/etc/logbox/collector.toml"
    assert not list((root / SYSTEMD_DIR).glob("logbox*.socket"))
    assert last(unit_file(root, "logbox-ready.service"), "Type") == "simple"
    for unit in ("logbox-rpc.service", "logbox-webui.service"):
        env = dict(v.split("=", 1) for v in unit_file(root, unit)["Environment"])
        assert env["PYTHONPATH"] == "/usr/lib/logbox/python"
        assert env["LOGBOX_TLS_CERT"].startswith("/etc/logbox/tls/")
    # the apps on unix sockets behind nginx, which listens on 443 and 8444
    web = dict(v.split("=", 1) for v in unit_file(root, "logbox-webui.service")["Environment"])
    assert web["LOGBOX_WEBUI_BIND"] == "unix:/run/logbox-webui/webui.sock"
    api = dict(v.split("=", 1) for v in unit_file(root, "logbox-rpc.service")["Environment"])
    assert api["LOGBOX_RPC_BIND"] == "unix:/run/logbox-rpc/rpc.sock"
    assert web["LOGBOX_BEHIND_PROXY"] == api["LOGBOX_BEHIND_PROXY"] == "1"
    # the apps reach IP only for the sites of remote logspaces (the admin's delivery test is
    # sent by logbox-alertd)
    for unit in ("logbox-rpc.service", "logbox-webui.service"):
        families = last(unit_file(root, unit), "RestrictAddressFamilies")
        assert families == "AF_UNIX AF_INET AF_INET6", unit
        env = dict(v.split("=", 1) for v in unit_file(root, unit)["Environment"])
        assert env["LOGBOX_DELIVERY_SETTINGS"] == "/etc/logbox/settings/notify.json"
    conf = (root / "usr/lib/logbox/nginx/nginx.conf").read_text()
    assert re.search(r"^\s*listen 443 ssl;", conf, re.M) and re.search(
        r"^\s*listen 8444 ssl;", conf, re.M
    )
    assert "server unix:/run/logbox-webui/webui.sock" in conf
    assert "server unix:/run/logbox-rpc/rpc.sock" in conf
    nginx = unit_file(root, "logbox-nginx.service")
    assert "-c /usr/lib/logbox/nginx/nginx.conf" in (last(nginx, "ExecStart") or "")


def test_tmpfiles_made_the_directories(root: Path) -> None:
    users = {"root": ["root", "x", "0"], **db(root, "passwd")}
    groups = {"root": ["root", "x", "0"], **db(root, "group")}

    def owner(path: str) -> tuple[str, str, int]:
        st = (root / path.lstrip("/")).stat()
        u = next(n for n, f in users.items() if int(f[2]) == st.st_uid)
        g = next(n for n, f in groups.items() if int(f[2]) == st.st_gid)
        return u, g, stat.S_IMODE(st.st_mode)

    assert owner("/run/logbox") == ("root", "logbox-status", 0o1775)
    # others may traverse the store (syslog-ng, to the spool), not read it
    assert owner("/var/lib/logbox") == ("logbox-indexd", "logbox-store", 0o751)
    assert owner("/var/lib/logbox/spool") == ("logbox-collector", "logbox-spool", 0o2770)
    assert owner("/var/lib/logbox-collector") == ("logbox-collector", "logbox-collector", 0o750)
    assert owner("/var/lib/logbox-accounts") == ("logbox-rpc", "logbox-accounts", 0o770)
    assert owner("/etc/logbox/settings") == ("root", "logbox-settings", 0o775)
    assert owner("/var/lib/logbox-alertd") == ("logbox-alertd", "logbox-alertd", 0o700)
    # searchd's cache of archived pieces (indexer/ARCHIVE.md §7): its own
    assert owner("/var/cache/logbox-searchd") == ("logbox-searchd", "logbox-search", 0o700)
    # the apps' sockets: only the app and nginx's group may enter
    assert owner("/run/logbox-rpc") == ("logbox-rpc", "logbox-nginx", 0o750)
    assert owner("/run/logbox-webui") == ("logbox-webui", "logbox-nginx", 0o750)
    assert owner("/run/logbox-nginx") == ("logbox-nginx", "logbox-nginx", 0o750)


def test_firewall_ports() -> None:
    text = (TOP / "appliance/nftables.conf").read_text()
    assert "policy drop" in text
    assert re.search(r"tcp dport \{ 514, 601, 6514 \} accept", text)
    assert re.search(r"udp dport 514 accept", text)
    assert re.search(r"tcp dport 443 accept", text) and re.search(r"tcp dport 8444 accept", text)
    assert not re.search(r"^\s*tcp dport 22\b", text, re.M), "SSH must be off by default"
    assert 'include "/etc/logbox/firewall.d/*.nft"' in text
    drop_in = (TOP / "appliance/systemd/nftables.service.d/logbox.conf").read_text()
    assert "/etc/logbox/ssh-enabled" in drop_in and "tcp dport 22 accept" in drop_in


def test_firewall_opens_ssh_only_when_enabled(tmp_path: Path) -> None:
    # the nftables.service drop-in's ExecStartPre (paths moved into tmp_path) writes the SSH
    # rule exactly when ssh-enabled exists; nft accepts the configuration either way
    drop_in = unit_file(TOP / "appliance", "nftables.service.d/logbox.conf")
    [pre] = drop_in["ExecStartPre"]
    argv = pre.split(" ", 2)
    assert argv[:2] == ["/bin/sh", "-c"]
    script = argv[2].strip("'").replace("/etc/logbox", str(tmp_path / "etc"))
    conf = tmp_path / "nftables.conf"
    conf.write_text(
        (TOP / "appliance/nftables.conf").read_text().replace("/etc/logbox", str(tmp_path / "etc"))
    )
    rule = tmp_path / "etc/firewall.d/ssh.nft"
    nft = shutil.which("nft")
    for enabled in (False, True, False):
        if enabled:
            (tmp_path / "etc/ssh-enabled").write_text("")
        else:
            (tmp_path / "etc/ssh-enabled").unlink(missing_ok=True)
        done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert rule.exists() == enabled
        if enabled:
            assert rule.read_text() == "add rule inet logbox input tcp dport 22 accept\n"
        if nft is None or os.geteuid() != 0:
            continue  # nft checks against the kernel: root only
        done = subprocess.run([nft, "-c", "-f", str(conf)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def run_libexec(
    root: Path, name: str, env: dict[str, str], timeout: float = 60, args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """Runs the installed tool usr/lib/logbox/libexec/<name> of root with Debian's python3 and
    env; its exit status and text output."""
    return subprocess.run(
        ["/usr/bin/python3", str(root / "usr/lib/logbox/libexec" / name), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# ---------------------------------------------------------------- logbox-firstboot


def firstboot(root: Path, tree: Path) -> subprocess.CompletedProcess:
    """Run the installed logbox-firstboot on tree (a copy of root's /etc and /var)."""
    env = dict(os.environ, LOGBOX_ROOT=str(tree), LOGBOX_PYTHON=str(root / "usr/lib/logbox/python"))
    env.pop("LOGBOX_PASSWORD", None)
    return run_libexec(root, "logbox-firstboot", env, timeout=120)


@pytest.fixture
def tree(root: Path, tmp_path: Path) -> Path:
    """A fresh tree for logbox-firstboot: root's users, directories and installed files."""
    t = tmp_path / "t"
    for d in ("etc", "var", "usr/lib/logbox/collector"):
        shutil.copytree(root / d, t / d, symlinks=True)
    (t / "dev").mkdir()
    (t / "dev/console").write_text("")
    return t


def check_password(root: Path, tree: Path, password: str) -> bool:
    """Whether admin's password in the tree's accounts store is password."""
    code = (
        "import sys; from logbox_core.accounts import Accounts; a = Accounts(sys.argv[1]); "
        "u = a.check_password('admin', sys.argv[2]); "
        "print(u.role if u else 'no', bool(u and u.must_change))"
    )
    done = subprocess.run(
        ["/usr/bin/python3", "-c", code, str(tree / "var/lib/logbox-accounts"), password],
        env=dict(os.environ, PYTHONPATH=str(root / "usr/lib/logbox/python")),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split() == ["admin", "True"]


def mode_owner(tree: Path, path: str) -> tuple[int, int, int]:
    st = (tree / path.lstrip("/")).lstat()
    return stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid


def test_firstboot_generates_and_shows_password_once(root: Path, tree: Path) -> None:
    users, groups = db(tree, "passwd"), db(tree, "group")
    gid = {n: int(f[2]) for n, f in groups.items()}
    done = firstboot(root, tree)
    assert done.returncode == 0, done.stdout + done.stderr
    console = (tree / "dev/console").read_text()
    m = re.fullmatch(r"logbox-firstboot: admin password \(shown once\): (\S+)\n", console)
    assert m is not None, console
    password = m.group(1)
    assert password not in done.stdout + done.stderr, "the password reached the journal"
    assert check_password(root, tree, password)

    assert mode_owner(tree, "/etc/logbox/tls") == (0o750, 0, gid["logbox-tls"])
    assert mode_owner(tree, "/etc/logbox/tls/ca.key") == (0o600, 0, 0)
    assert mode_owner(tree, "/etc/logbox/tls/server.key") == (0o640, 0, gid["logbox-tls"])
    assert mode_owner(tree, "/etc/logbox/tls/server.crt")[0] == 0o644
    assert mode_owner(tree, "/etc/logbox/webui-secret") == (0o640, 0, gid["logbox-webui"])
    assert len((tree / "etc/logbox/webui-secret").read_text().strip()) >= 32
    assert mode_owner(tree, "/etc/logbox/collector.toml")[0] == 0o644
    assert os.readlink(tree / "etc/logbox/logspaces.json") == "settings/logspaces.json"
    spaces = json.loads((tree / "etc/logbox/logspaces.json").read_text())
    assert spaces == {"version": 1, "logspaces": {}}
    rpc = int(users["logbox-rpc"][2])
    assert mode_owner(tree, "/var/lib/logbox-accounts") == (0o770, rpc, gid["logbox-accounts"])
    for f in ("data.mdb", "lock.mdb"):
        assert mode_owner(tree, f"/var/lib/logbox-accounts/{f}") == (
            0o660,
            rpc,
            gid["logbox-accounts"],
        )
    assert (tree / "etc/logbox/firstboot.done").exists()
    assert not (tree / "etc/logbox/ssh-enabled").exists()

    # the certificate: signed by the CA, for the host name and the loopback addresses
    tls = tree / "etc/logbox/tls"
    v = subprocess.run(
        ["openssl", "verify", "-CAfile", str(tls / "ca.crt"), str(tls / "server.crt")],
        capture_output=True,
        text=True,
    )
    assert v.returncode == 0, v.stdout + v.stderr
    text = subprocess.run(
        ["openssl", "x509", "-in", str(tls / "server.crt"), "-noout", "-ext", "subjectAltName"],
        capture_output=True,
        text=True,
    ).stdout
    assert f"DNS:{socket.gethostname()}" in text and "IP Address:127.0.0.1" in text
    # ... followed by the CA (the chain a second machine takes the CA from), whose fingerprint
    # first boot said
    pems = re.findall(
        r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n",
        (tls / "server.crt").read_text(),
        re.S,
    )
    assert len(pems) == 2 and pems[1] == (tls / "ca.crt").read_text()
    fp = (
        subprocess.run(
            ["openssl", "x509", "-in", str(tls / "ca.crt"), "-noout", "-fingerprint", "-sha256"],
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .split("=", 1)[1]
    )
    assert f"logbox-firstboot: TLS CA {fp} (SHA-256)" in done.stdout, done.stdout

    # the collector settings render for syslog-ng with the appliance's ports and TLS files
    col = (tree / "etc/logbox/collector.toml").read_text()
    assert 'cert = "/etc/logbox/tls/server.crt"' in col and "tcp = 514" in col

    # a second run does nothing
    before = {p: p.stat().st_mtime_ns for p in tree.rglob("*") if not p.is_symlink()}
    (tree / "dev/console").write_text("")
    again = firstboot(root, tree)
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout
    assert (tree / "dev/console").read_text() == ""
    after = {p: p.stat().st_mtime_ns for p in tree.rglob("*") if not p.is_symlink()}
    assert after == {**before, tree / "dev/console": after[tree / "dev/console"]}


def test_reset_admin_from_the_boot_menu(root: Path, tree: Path) -> None:
    """logbox-reset-admin.service (the boot menu's entry, kernel parameter logbox.reset_admin):
    a new admin password on the console only, to be changed at the next sign-in, the old one
    gone, the store still logbox-rpc's, and a password_reset entry in the audit log."""
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read(root / SYSTEMD_DIR / "logbox-reset-admin.service")
    assert unit["Unit"]["ConditionKernelCommandLine"] == "logbox.reset_admin"
    argv = unit["Service"]["ExecStart"].split()
    assert argv[0] == "/usr/lib/logbox/libexec/logbox-firstboot"
    grub = (TOP / "image/grub.cfg.in").read_text()
    assert re.search(
        r'menuentry "logbox: reset the admin password".*?logbox\.reset_admin', grub, re.S
    )

    env = dict(os.environ, LOGBOX_ROOT=str(tree), LOGBOX_PYTHON=str(root / "usr/lib/logbox/python"))
    env.pop("LOGBOX_PASSWORD", None)
    # before first boot made the store: nothing to reset, not an error
    early = run_libexec(root, "logbox-firstboot", env, args=tuple(argv[1:]))
    assert early.returncode == 0 and "first boot makes the admin" in early.stdout, early
    assert firstboot(root, tree).returncode == 0
    old = re.search(r"\(shown once\): (\S+)", (tree / "dev/console").read_text())
    assert old is not None
    (tree / "dev/console").write_text("")
    done = run_libexec(root, "logbox-firstboot", env, args=tuple(argv[1:]))
    assert done.returncode == 0, done.stdout + done.stderr
    console = (tree / "dev/console").read_text()
    m = re.fullmatch(
        r"logbox-firstboot: admin password \(reset at the boot menu, shown once\): (\S+)\n",
        console,
    )
    assert m is not None, console
    new = m.group(1)
    assert new != old.group(1) and new not in done.stdout + done.stderr
    assert check_password(root, tree, new) and not check_password(root, tree, old.group(1))
    users, groups = db(tree, "passwd"), db(tree, "group")
    owner = (int(users["logbox-rpc"][2]), int(groups["logbox-accounts"][2]))
    for f in ("data.mdb", "lock.mdb"):
        assert mode_owner(tree, f"/var/lib/logbox-accounts/{f}") == (0o660, *owner)
    code = (
        "import sys, json; from logbox_core.accounts import Accounts; a = Accounts(sys.argv[1]); "
        "print(json.dumps([[e.action, e.address] for e in a.audit_entries()[0]]))"
    )
    audit = subprocess.run(
        ["/usr/bin/python3", "-c", code, str(tree / "var/lib/logbox-accounts")],
        env=dict(os.environ, PYTHONPATH=str(root / "usr/lib/logbox/python")),
        capture_output=True,
        text=True,
    )
    assert audit.returncode == 0, audit.stderr
    assert ["password_reset", "console"] in json.loads(audit.stdout), audit.stdout


def test_keys_made_once_shown_once_kept_off_disk(root: Path, tree: Path) -> None:
    """logbox-keys.service's two steps as its unit gives them (paths moved into the tree):
    `logbox keys init` makes the store's keys and the verification key's file on /run; then
    `logbox-firstboot --keys-shown` (root) shows the key once on the console, gives the file to
    root (0400) and copies the public key to /etc/logbox. The key is nowhere in the store or
    /etc, as hex or as bytes, and it checks the store's seals."""
    unit = unit_file(root, "logbox-keys.service")
    assert last(unit, "StandardOutput") == "null"  # keys init's stdout (the key) never logged
    assert last(unit, "ConditionPathExists") == "!/var/lib/logbox/indexd/keys-shown"
    store, run = tree / "var/lib/logbox", tree / "run/logbox-keys"
    store.mkdir(parents=True, exist_ok=True)
    run.mkdir(parents=True)

    def moved(cmd: str) -> list[str]:
        cmd = cmd.replace("/var/lib/logbox", str(store)).replace("/run/logbox-keys", str(run))
        return cmd.split()

    init = moved(last(unit, "ExecStart") or "")
    assert init[0] == "/usr/lib/logbox/bin/logbox"
    done = subprocess.run([str(root / init[0].lstrip("/")), *init[1:]], capture_output=True)
    assert done.returncode == 0, done.stderr
    post = (last(unit, "ExecStartPost") or "").split()
    assert post[0] == "+/usr/lib/logbox/libexec/logbox-firstboot", post
    env = dict(os.environ, LOGBOX_ROOT=str(tree), LOGBOX_PYTHON=str(root / "usr/lib/logbox/python"))
    shown = run_libexec(root, "logbox-firstboot", env, args=tuple(post[1:]))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    console = (tree / "dev/console").read_text()
    keys = re.findall(r"logbox-keys: verification key \(shown once\): ([0-9a-f]{64})\n", console)
    assert len(keys) == 1, console
    key = keys[0]
    assert key not in shown.stdout + shown.stderr, "the key reached the journal"
    # not asked for by the first-boot configuration: the file on /run is gone too
    assert not (run / "verification-key").exists()
    assert (store / "indexd/keys-shown").exists()
    pub = tree / "etc/logbox/sign.pub"
    assert pub.read_bytes() == (store / "indexd/sign.pub").read_bytes()
    assert mode_owner(tree, "/etc/logbox/sign.pub")[0] == 0o644
    for base in (store, tree / "etc"):
        for f in base.rglob("*"):
            if f.is_file() and not f.is_symlink():
                data = f.read_bytes()
                assert key.encode() not in data and bytes.fromhex(key) not in data, f
    # the key checks a seal made with the store's key file
    cli = str(root / "usr/lib/logbox/bin/logbox")
    lines = b"".join(b"<14>Nov 26 10:00:%02d host app: message %d\n" % (i, i) for i in range(20))
    done = subprocess.run([cli, "ingest", "--data", str(store)], input=lines, capture_output=True)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([cli, "seal", "--data", str(store), "--force"], capture_output=True)
    assert done.returncode == 0, done.stderr
    ok = subprocess.run([cli, "verify", "--data", str(store), "--key", key], capture_output=True)
    bad = subprocess.run(
        [cli, "verify", "--data", str(store), "--key", "ab" * 32], capture_output=True
    )
    assert ok.returncode == 0 and bad.returncode == 1, (ok.stderr, bad.stderr)
    # a second run of the unit's first step refuses: keys are made once per store
    again = subprocess.run([str(root / init[0].lstrip("/")), *init[1:]], capture_output=True)
    assert again.returncode == 1 and b"set up already" in again.stderr
    # a new store, and the first-boot configuration asked for the file (verification_key_file
    # = true: firstboot's marker): it stays on /run, root's, 0400
    shutil.rmtree(store)
    store.mkdir()
    (tree / "etc/logbox/verification-key-file").write_text("")
    (tree / "dev/console").write_text("")
    done = subprocess.run([str(root / init[0].lstrip("/")), *init[1:]], capture_output=True)
    assert done.returncode == 0, done.stderr
    shown = run_libexec(root, "logbox-firstboot", env, args=tuple(post[1:]))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    [key2] = re.findall(
        r"verification key \(shown once\): ([0-9a-f]{64})", (tree / "dev/console").read_text()
    )
    assert mode_owner(tree, "/run/logbox-keys/verification-key") == (0o400, 0, 0)
    assert (run / "verification-key").read_text().strip() == key2 != key


def test_firstboot_uses_a_given_password_and_key(root: Path, tree: Path) -> None:
    password = "a-given-Passw0rd-for-admin"
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkeyforthetest test@example"
    conf = tree / "etc/logbox/firstboot.toml"
    conf.write_text(f'admin_password = "{password}"\nssh_authorized_key = "{key}"\n')
    done = firstboot(root, tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert password not in done.stdout + done.stderr
    assert (tree / "dev/console").read_text() == ""
    assert check_password(root, tree, password)
    assert not conf.exists(), "firstboot.toml held a password: removed once used"
    assert (tree / "etc/logbox/ssh-enabled").exists()
    assert (tree / "etc/logbox/ssh/authorized_keys.root").read_text() == key + "\n"
    assert mode_owner(tree, "/etc/logbox/ssh/authorized_keys.root") == (0o644, 0, 0)


def test_firstboot_reads_fw_cfg_first(root: Path, tree: Path) -> None:
    raw = tree / "sys/firmware/qemu_fw_cfg/by_name/opt/logbox/firstboot/raw"
    raw.parent.mkdir(parents=True)
    raw.write_text('admin_password = "from-fw-cfg-Passw0rd"\n')
    (tree / "etc/logbox/firstboot.toml").write_text('admin_password = "from-the-file-Passw0rd"\n')
    done = firstboot(root, tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert check_password(root, tree, "from-fw-cfg-Passw0rd")
    assert not check_password(root, tree, "from-the-file-Passw0rd")


def test_firstboot_refuses_a_bad_configuration(root: Path, tree: Path) -> None:
    (tree / "etc/logbox/firstboot.toml").write_text("admin_password = 12\n")
    done = firstboot(root, tree)
    assert done.returncode != 0
    assert "admin_password: expected a non-empty string" in done.stderr
    assert not (tree / "etc/logbox/firstboot.done").exists()
    (tree / "etc/logbox/firstboot.toml").write_text('admin_password = "short"\n')
    done = firstboot(root, tree)
    assert done.returncode != 0 and "cannot add admin" in done.stderr
    assert "short" not in done.stdout + done.stderr.replace("short\n", "")  # not echoed back
    assert not (tree / "etc/logbox/firstboot.done").exists()
    (tree / "etc/logbox/firstboot.toml").write_text('verification_key_file = "yes"\n')
    done = firstboot(root, tree)
    assert done.returncode != 0
    assert "verification_key_file: expected true or false" in done.stderr
    # given as it should be: firstboot leaves the marker logbox-keys.service looks for
    (tree / "etc/logbox/firstboot.toml").write_text("verification_key_file = true\n")
    done = firstboot(root, tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tree / "etc/logbox/verification-key-file").exists()


# ---------------------------------------------------------------- logbox-storage


@pytest.fixture(scope="module")
def storage() -> types.ModuleType:
    os.environ.setdefault("LOGBOX_PYTHON", str(TOP / "rpc"))
    return load_script("logbox-storage")


def disk(name: str, fstype: str | None = None, label: str | None = None, **kw: object) -> dict:
    d = {
        "name": name,
        "path": f"/dev/{name}",
        "type": "disk",
        "fstype": fstype,
        "label": label,
        "pttype": None,
        "ro": False,
        "mountpoints": [None],
    }
    d.update(kw)
    return d


BOOT = disk(
    "vda",
    pttype="dos",
    children=[
        {
            "name": "vda1",
            "path": "/dev/vda1",
            "type": "part",
            "fstype": "ext4",
            "label": "root",
            "mountpoints": ["/"],
        },
    ],
)
CDROM = {"name": "sr0", "path": "/dev/sr0", "type": "rom", "fstype": None, "mountpoints": [None]}


def vol(fstype: str | None = "ext4", mounted: bool = False) -> dict:
    """The open LUKS2 volume (lsblk's crypt child of the array or the disk)."""
    return {
        "name": "logbox-store",
        "path": "/dev/mapper/logbox-store",
        "type": "crypt",
        "fstype": fstype,
        "label": "logbox-store" if fstype else None,
        "mountpoints": ["/var/lib/logbox" if mounted else None],
    }


def md(
    name: str = "md127",
    fstype: str | None = "crypto_LUKS",
    mounted: bool = False,
    opened: dict | None = None,
) -> dict:
    """logbox's array: encrypted (crypto_LUKS; opened: its volume, mounted: the volume's
    mounted), or ext4 from before encryption (mounted: itself), or blank (None)."""
    if fstype == "crypto_LUKS" and mounted and opened is None:
        opened = vol(mounted=True)
    return {
        "name": name,
        "path": f"/dev/{name}",
        "type": "raid1",
        "fstype": fstype,
        "label": "logbox-store" if fstype else None,
        "mountpoints": ["/var/lib/logbox" if mounted and fstype == "ext4" else None],
        "children": [opened] if opened else [],
    }


def member(name: str, array: dict | None = None) -> dict:
    return disk(name, "linux_raid_member", "logbox:logbox", children=[array] if array else [])


MDSTAT_CLEAN = """Personalities : [raid1]
md127 : active raid1 vdc[1] vdb[0]
      10476544 blocks super 1.2 [2/2] [UU]

unused devices: <none>
"""
MDSTAT_DEGRADED = """Personalities : [raid1]
md127 : active raid1 vdb[0]
      10476544 blocks super 1.2 [2/1] [U_]

unused devices: <none>
"""
MDSTAT_INACTIVE = """Personalities : [raid1]
md127 : inactive vdb[0](S)
      10476544 blocks super 1.2

unused devices: <none>
"""
MDSTAT_RECOVERING = """Personalities : [raid1]
md127 : active raid1 vdc[2] vdb[0]
      10476544 blocks super 1.2 [2/1] [U_]
      [=>...................]  recovery =  7.5% (786432/10476544) finish=1.2min speed=131072K/sec

unused devices: <none>
"""


def plan(
    storage: types.ModuleType, devices: list[dict], mdstat: str = "", have_key: bool = True
) -> object:
    return storage.plan(
        {"blockdevices": devices}, storage.parse_mdstat(mdstat), "991:990", have_key
    )


def test_storage_two_blank_disks_make_an_array(storage: types.ModuleType) -> None:
    p = plan(storage, [BOOT, disk("vdb"), disk("vdc"), CDROM])
    assert p.mode == "raid1" and p.device == "/dev/md/logbox"
    [step] = p.steps
    assert step[:3] == ["mdadm", "--create", "/dev/md/logbox"]
    assert "--level=1" in step and "--metadata=1.2" in step and "--raid-devices=2" in step
    assert step[-2:] == ["/dev/vdb", "/dev/vdc"]
    # then: the array is blank: it becomes the encrypted volume
    p = plan(
        storage,
        [BOOT, member("vdb", md(fstype=None)), member("vdc", md(fstype=None))],
        MDSTAT_CLEAN,
    )
    assert p.steps == [["luks-format", "/dev/md127"]]
    # then: open it with the key file
    p = plan(storage, [BOOT, member("vdb", md()), member("vdc", md())], MDSTAT_CLEAN)
    assert p.steps == [["luks-open", "/dev/md127", "key"]]
    # then: the open volume has no file system yet
    a = md(opened=vol(None))
    p = plan(storage, [BOOT, member("vdb", a), member("vdc", a)], MDSTAT_CLEAN)
    assert p.steps == [
        [
            "mkfs.ext4", "-q", "-L", "logbox-store", "-E", "root_owner=991:990",
            "/dev/mapper/logbox-store",
        ]
    ]  # fmt: skip
    # then: mount it
    a = md(opened=vol())
    p = plan(storage, [BOOT, member("vdb", a), member("vdc", a)], MDSTAT_CLEAN)
    [step] = p.steps
    assert step[0] == "systemd-mount" and step[-2:] == [
        "/dev/mapper/logbox-store",
        "/var/lib/logbox",
    ]
    assert "--options=nodev,nosuid,noexec" in step
    # then: nothing left to do (idempotent)
    p = plan(
        storage,
        [BOOT, member("vdb", md(mounted=True)), member("vdc", md(mounted=True))],
        MDSTAT_CLEAN,
    )
    assert p.mode == "raid1" and p.steps == [] and p.device == "/dev/md127"
    assert p.message == "RAID1 of vdb, vdc; encrypted (LUKS2)"
    assert storage.raid_state(storage.parse_mdstat(MDSTAT_CLEAN)["md127"]) == "clean"


def test_storage_encrypted_without_its_key_file(storage: types.ModuleType) -> None:
    # the key file is gone (root file system restored, say): nothing is done, the store is
    # not mounted, and the message says how to unlock it with the recovery key
    p = plan(storage, [BOOT, member("vdb", md()), member("vdc", md())], MDSTAT_CLEAN, False)
    assert p.stuck and p.steps == []
    assert "/etc/logbox/luks/store.key is missing" in p.message and "recovery key" in p.message
    assert "systemctl restart logbox.target" in p.message
    p = plan(storage, [BOOT, disk("vdb", "crypto_LUKS", "logbox-store")], have_key=False)
    assert p.stuck and p.mode == "single" and "cryptsetup open /dev/vdb" in p.message
    # opened by hand with the recovery key: mounted as usual, with or without the key file
    d = disk("vdb", "crypto_LUKS", "logbox-store", children=[vol()])
    p = plan(storage, [BOOT, d], have_key=False)
    assert not p.stuck and p.steps[0][0] == "systemd-mount"


def test_storage_tpm2_and_key_file(storage: types.ModuleType) -> None:
    # a LUKS2 store with a TPM2 token: the key file first when there is one (the admin's way
    # back after the TPM2 stopped opening it), then the TPM2
    doc = {"blockdevices": [BOOT, disk("vdb", "crypto_LUKS", "logbox-store")]}
    sealed = {"/dev/vdb": storage.Luks(tpm2=True, slots=2)}
    p = storage.plan(doc, {}, "0:0", True, sealed)
    assert p.steps == [["luks-open", "/dev/vdb", "key,tpm2"]]
    p = storage.plan(doc, {}, "0:0", False, sealed)
    assert p.steps == [["luks-open", "/dev/vdb", "tpm2"]]
    opened = disk("vdb", "crypto_LUKS", "logbox-store", children=[vol(mounted=True)])
    p = storage.plan({"blockdevices": [BOOT, opened]}, {}, "0:0", False, sealed)
    assert p.steps == [] and "its key sealed to the TPM2" in p.message
    # a format cut short before its recovery key: the key file's slot alone
    opened = disk("vdb", "crypto_LUKS", "logbox-store", children=[vol()])
    p = storage.plan({"blockdevices": [BOOT, opened]}, {}, "0:0", True,
                     {"/dev/vdb": storage.Luks(tpm2=False, slots=1)})  # fmt: skip
    assert p.steps == [["luks-recovery", "/dev/vdb"]]


def test_storage_store_from_before_encryption(storage: types.ModuleType) -> None:
    # ext4 straight on the array or the disk (made before encryption): mounted as it is
    a = md(fstype="ext4")
    p = plan(storage, [BOOT, member("vdb", a), member("vdc", a)], MDSTAT_CLEAN)
    [step] = p.steps
    assert step[0] == "systemd-mount" and step[-2:] == ["/dev/md127", "/var/lib/logbox"]
    a = md(fstype="ext4", mounted=True)
    p = plan(storage, [BOOT, member("vdb", a), member("vdc", a)], MDSTAT_CLEAN)
    assert p.steps == [] and "not encrypted" in p.message
    # an array holding something else is never mounted nor formatted
    a = md(fstype="xfs")
    p = plan(storage, [BOOT, member("vdb", a), member("vdc", a)], MDSTAT_CLEAN)
    assert p.stuck and p.steps == [] and "not a logbox store" in p.message


def test_storage_members_are_assembled(storage: types.ModuleType) -> None:
    p = plan(storage, [BOOT, member("vdb"), member("vdc")])
    assert p.steps == [["mdadm", "--assemble", "--run", "/dev/md/logbox", "/dev/vdb", "/dev/vdc"]]
    assert p.mode == "raid1"


def test_storage_degraded_array_started_and_blank_added(storage: types.ModuleType) -> None:
    # udev left the half array inactive: start it
    p = plan(storage, [BOOT, member("vdb"), disk("vdc")], MDSTAT_INACTIVE)
    assert p.steps == [["mdadm", "--run", "/dev/md127"]]
    # not assembled at all: assemble (--run starts it degraded)
    p = plan(storage, [BOOT, member("vdb"), disk("vdc")])
    assert p.steps == [["mdadm", "--assemble", "--run", "/dev/md/logbox", "/dev/vdb"]]
    # running degraded with a blank disk beside it: add the blank one
    p = plan(storage, [BOOT, member("vdb", md(mounted=True)), disk("vdc")], MDSTAT_DEGRADED)
    assert p.steps == [["mdadm", "/dev/md127", "--add", "/dev/vdc"]]
    # resyncing onto it: nothing more to do
    p = plan(
        storage,
        [BOOT, member("vdb", md(mounted=True)), member("vdc", md(mounted=True))],
        MDSTAT_RECOVERING,
    )
    assert p.steps == []
    assert storage.raid_state(storage.parse_mdstat(MDSTAT_RECOVERING)["md127"]) == "recovering 7.5%"
    # degraded, no disk to add: mounted as it is
    p = plan(storage, [BOOT, member("vdb", md(mounted=True))], MDSTAT_DEGRADED)
    assert p.steps == [] and p.mode == "raid1"
    assert storage.raid_state(storage.parse_mdstat(MDSTAT_DEGRADED)["md127"]) == "degraded"


def test_storage_one_disk(storage: types.ModuleType) -> None:
    p = plan(storage, [BOOT, disk("vdb")])
    assert p.mode == "single" and p.steps == [["luks-format", "/dev/vdb"]]
    p = plan(storage, [BOOT, disk("vdb", "crypto_LUKS", "logbox-store")])
    assert p.mode == "single" and p.steps == [["luks-open", "/dev/vdb", "key"]]
    d = disk("vdb", "crypto_LUKS", "logbox-store", children=[vol(None)])
    p = plan(storage, [BOOT, d])
    assert p.steps[0][0] == "mkfs.ext4" and p.steps[0][-1] == "/dev/mapper/logbox-store"
    d = disk("vdb", "crypto_LUKS", "logbox-store", children=[vol()])
    p = plan(storage, [BOOT, d])
    assert p.steps[0][0] == "systemd-mount" and p.steps[0][-2] == "/dev/mapper/logbox-store"
    mounted = disk("vdb", "crypto_LUKS", "logbox-store", children=[vol(mounted=True)])
    p = plan(storage, [BOOT, mounted])
    assert p.steps == [] and "without RAID" in p.message and "encrypted (LUKS2)" in p.message
    # from before encryption: ext4 on the disk
    p = plan(storage, [BOOT, disk("vdb", "ext4", "logbox-store")])
    assert p.mode == "single" and p.steps[0][0] == "systemd-mount" and p.steps[0][-2] == "/dev/vdb"
    p = plan(storage, [BOOT, disk("vdb", "ext4", "logbox-store", mountpoints=["/var/lib/logbox"])])
    assert p.steps == [] and "without RAID" in p.message and "not encrypted" in p.message
    # a store disk and a new blank disk: stays single (no migration), says so
    p = plan(storage, [BOOT, mounted, disk("vdc")])
    assert p.mode == "single" and p.steps == [] and "vdc" in p.message


def test_storage_none_and_foreign(storage: types.ModuleType) -> None:
    p = plan(storage, [BOOT, CDROM])
    assert p.mode == "root" and p.steps == [] and p.device is None
    assert "root file system" in p.message
    # disks holding something else are never touched, and the boot disk is never a data disk
    other = disk("vdb", "xfs", "data")
    parted = disk(
        "vdc", pttype="gpt", children=[{"name": "vdc1", "type": "part", "mountpoints": [None]}]
    )
    alien = member("vdd")
    alien["label"] = "otherhost:backup"
    p = plan(storage, [BOOT, other, parted, alien])
    assert p.mode == "root" and p.steps == [] and "vdb" in p.message and "vdc" in p.message
    # boot disk on sda (with swap on a partition), data disks on nvme
    sda = disk("sda", pttype="gpt", children=[
        {"name": "sda1", "type": "part", "mountpoints": ["/boot"]},
        {"name": "sda2", "type": "part", "mountpoints": ["[SWAP]"]},
    ])  # fmt: skip
    p = plan(storage, [sda, disk("nvme0n1"), disk("nvme1n1")])
    assert p.steps[0][-2:] == ["/dev/nvme0n1", "/dev/nvme1n1"]
    assert [d.name for d in storage.data_disks({"blockdevices": [sda, disk("sdb", ro=True)]})] == []


def test_storage_lsblk_output_parses(storage: types.ModuleType) -> None:
    # the real lsblk of this host, with the columns the program asks for
    done = subprocess.run(storage.LSBLK, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"lsblk cannot run here: {done.stderr.strip()}")
    doc = json.loads(done.stdout)
    p = storage.plan(doc, {}, "0:0")
    assert p.mode in ("raid1", "single", "root")


# ---------------------------------------------------------------- logbox-ready


@pytest.fixture(scope="module")
def ready() -> types.ModuleType:
    return load_script("logbox-ready")


def test_ready_line(ready: types.ModuleType) -> None:
    line = ready.ready_line(
        "10.0.2.15", {"mode": "raid1", "device": "/dev/md127", "state": "clean"}, "uefi"
    )
    assert line == (
        "logbox-ready: ready: syslog 514/tcp 514/udp 601/tcp 6514/tls, web https://10.0.2.15/, "
        "api https://10.0.2.15:8444/api/v1, raid clean (/dev/md127), boot uefi"
    )
    assert ready.raid({"mode": "root"}) == "none (root file system)"
    assert ready.raid({"mode": "single", "device": "/dev/vdb"}) == "none (single disk /dev/vdb)"
    fib = (
        "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 10.0.2.0\n        /24 link UNICAST\n"
        "     |-- 10.0.2.15\n        /32 host LOCAL\nLocal:\n     |-- 127.0.0.1\n"
        "        /32 host LOCAL\n     |-- 10.0.2.15\n        /32 host LOCAL\n"
    )
    assert ready.parse_fib_trie(fib) == ["10.0.2.15", "127.0.0.1"]


def test_ready_firmware(ready: types.ModuleType, tmp_path: Path) -> None:
    """uefi exactly when the kernel has /sys/firmware/efi."""
    assert ready.firmware(str(tmp_path)) == "bios"
    (tmp_path / "efi").mkdir()
    assert ready.firmware(str(tmp_path)) == "uefi"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def creds(root: Path, unit: str) -> list[str]:
    """setpriv options giving a process the credentials systemd gives the unit's processes:
    User='s uid, Group='s gid (else the user's), the groups getgrouplist() finds for the user
    with that gid, plus SupplementaryGroups=; no capabilities but AmbientCapabilities=. A
    DynamicUser= gets an unused uid and gid."""
    s = unit_file(root, unit)
    users, groups = db(root, "passwd"), db(root, "group")
    user = last(s, "User")
    assert user is not None
    if last(s, "DynamicUser") == "yes":
        uid = gid = 61999
    else:
        uid = int(users[user][2])
        gid = int(groups[last(s, "Group")][2]) if last(s, "Group") else int(users[user][3])
    more = {int(f[2]) for f in groups.values() if user in f[3].split(",")}
    more |= {int(groups[g][2]) for g in " ".join(s.get("SupplementaryGroups", [])).split()}
    more.add(gid)
    caps = [c.lower().removeprefix("cap_") for c in (last(s, "AmbientCapabilities") or "").split()]
    plus = ",".join(f"+{c}" for c in caps)
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={gid}",
        f"--groups={','.join(map(str, sorted(more)))}",
        f"--inh-caps=-all{',' + plus if plus else ''}",
        *([f"--ambient-caps={plus}"] if plus else []),
        f"--bounding-set=-all{',' + plus if plus else ''}",
    ]


def remap(text: str, base: Path) -> str:
    """The appliance's paths (/etc/logbox..., /run/logbox, /var/lib/logbox..., /var/cache/logbox...,
    /usr/lib/logbox) in a unit's command line or environment moved under base."""
    return re.sub(
        r"(?<![\w/])(/(?:etc|run|var/lib|var/cache|usr/lib)/logbox[\w-]*)",
        lambda m: f"{base}{m.group(1)}",
        text,
    )


def unit_argv(root: Path, unit: str, key: str, base: Path) -> list[str]:
    """A unit's ExecStart= (or another Exec key) as argv under base, its user's credentials first.
    Lines run as root ("+") are left out (see privileged_lines)."""
    [line] = [v for v in unit_file(root, unit)[key] if not v.startswith("+")]
    cmd = remap(line, base)
    if cmd.startswith("/bin/sh -c "):
        return [*creds(root, unit), "/bin/sh", "-c", cmd.removeprefix("/bin/sh -c ").strip("'")]
    return [*creds(root, unit), *cmd.split()]


def privileged_lines(root: Path, unit: str, key: str) -> list[str]:
    """A unit's Exec lines that run as root ("+"), without the prefix."""
    return [v[1:] for v in unit_file(root, unit).get(key, []) if v.startswith("+")]


def unit_env(root: Path, unit: str, base: Path) -> dict[str, str]:
    """A unit's Environment= under base."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    for v in unit_file(root, unit).get("Environment", []):
        key, _, value = v.partition("=")
        env[key] = remap(value, base)
    return env


@dataclass
class Appliance:
    """What appliance_run started: the tree, its run dir, the ports, a way to send syslog."""

    base: Path
    run: Path
    web: int
    api: int
    syslog_tcp: int


@pytest.fixture
def appliance_run(root: Path) -> Iterator[Appliance]:
    """The appliance without systemd: a tree laid out as at boot (sysusers, tmpfiles, first
    boot, the spool made again over the mounted store), then indexd, syslog-ng, searchd, the web
    UI and the API from their units' command lines and environment, each under the user,
    groups and capabilities of its unit: what they read and write is reached through the rights
    of APPLIANCE.md's users table only; logbox-alertd too. syslog-ng listens on free ports instead of 514/601/6514
    and nginx on free ports instead of 443/8444, in front of the apps' unix sockets."""
    base = Path(tempfile.mkdtemp(prefix="lbapp", dir="/tmp"))  # short (sun_path), traversable
    base.chmod(0o755)
    shutil.copytree(root / "usr/lib/logbox", base / "usr/lib/logbox", symlinks=True)
    for d in ("etc", "usr/lib/sysusers.d", "usr/lib/tmpfiles.d"):
        shutil.copytree(root / d, base / d, symlinks=True, dirs_exist_ok=True)
    for cmd in (
        ["systemd-sysusers", f"--root={base}"],
        ["systemd-tmpfiles", f"--root={base}", "--create"],
    ):
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, f"{cmd}: {done.stderr}"
    (base / "dev").mkdir()
    (base / "dev/console").write_text("")
    assert firstboot(root, base).returncode == 0
    run, etc = base / "run/logbox", base / "etc/logbox"
    groups = db(base, "group")
    ports = {k: free_port() for k in ("web", "api", "tcp", "octet", "tls", "udp")}
    col = etc / "collector.toml"
    text = remap(col.read_text(), base)
    for k in ("tcp", "octet", "tls", "udp"):
        text = re.sub(rf"^{k} = \d+", f"{k} = {ports[k]}", text, flags=re.M)
    col.write_text(text.replace('bind = "0.0.0.0"', 'bind = "127.0.0.1"'))

    # logbox-storage mounts a fresh file system over /var/lib/logbox (0750, no spool in it);
    # syslog-ng's unit makes the spool there again (its "+" ExecStartPre, the tmpfiles lines)
    store = base / "var/lib/logbox"
    shutil.rmtree(store / "spool")
    store.chmod(0o750)
    [tmpfiles] = privileged_lines(root, "logbox-syslog-ng.service", "ExecStartPre")
    argv = tmpfiles.split()
    assert argv[:3] == ["/usr/bin/systemd-tmpfiles", "--create", "--prefix=/var/lib/logbox"]
    conf = str(base) + argv[3]  # a file named on the command line is not looked up in --root
    done = subprocess.run(
        [*argv[:2], f"--root={base}", argv[2], conf], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    st = (store / "spool").stat()
    assert stat.S_IMODE(st.st_mode) == 0o2770 and stat.S_IMODE(store.stat().st_mode) == 0o751
    assert st.st_gid == int(groups["logbox-spool"][2])

    procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(name: str, argv: list[str], env: dict[str, str] | None = None, **kw: object) -> None:
        log = (base / f"{name}.log").open("wb")
        procs[name] = subprocess.Popen(argv, env=env, cwd="/", stdout=log, stderr=log, **kw)  # type: ignore[call-overload]

    def wait_for(name: str, path: Path) -> None:
        deadline = time.monotonic() + 30
        while not path.exists():
            assert procs[name].poll() is None, (base / f"{name}.log").read_text()
            assert time.monotonic() < deadline, f"{name}: no {path}"
            time.sleep(0.05)

    try:
        # indexd, on the spool (needs the spool reader: indexd --spool)
        argv = unit_argv(root, "logbox-indexd.service", "ExecStart", base)
        exe = next(a for a in argv if a.endswith("/logbox-indexd"))
        helped = subprocess.run([exe, "--help"], capture_output=True, text=True)
        assert "--spool" in helped.stdout + helped.stderr, "logbox-indexd has no --spool yet"
        start("indexd", argv, env={"PATH": "/usr/bin:/bin"})
        wait_for("indexd", run / "indexd.status.json")
        # syslog-ng: the unit's ExecStartPre, then ExecStart, as logbox-collector
        pre = subprocess.run(
            unit_argv(root, "logbox-syslog-ng.service", "ExecStartPre", base),
            capture_output=True,
            text=True,
        )
        assert pre.returncode == 0, pre.stderr
        start("syslog-ng", unit_argv(root, "logbox-syslog-ng.service", "ExecStart", base))
        wait_for("syslog-ng", run / "syslog-ng.pid")
        # searchd, then its ExecStartPost (the group name numeric: the host has no such group)
        start("searchd", unit_argv(root, "logbox-searchd.service", "ExecStart", base))
        wait_for("searchd", run / "searchd.sock")
        post = unit_argv(root, "logbox-searchd.service", "ExecStartPost", base)
        post[post.index("logbox-search")] = groups["logbox-search"][2]
        subprocess.run(post, check=True)
        for app in ("webui", "rpc"):
            unit = f"logbox-{app}.service"
            env = unit_env(root, unit, base)
            env[f"LOGBOX_{app.upper()}_WORKERS"] = "1"
            env[f"LOGBOX_{app.upper()}_CONFIG"] = str(base / "none.py")
            start(app, unit_argv(root, unit, "ExecStart", base), env=env)
            wait_for(app, Path(env[f"LOGBOX_{app.upper()}_BIND"].removeprefix("unix:")))
        # logbox-alertd: the accounts store (alerts), searchd, its state and status files
        env = unit_env(root, "logbox-alertd.service", base)
        start("alertd", unit_argv(root, "logbox-alertd.service", "ExecStart", base), env=env)
        wait_for("alertd", run / "alertd.status.json")
        # nginx, on the installed configuration with its paths under base and free ports
        conf = base / "usr/lib/logbox/nginx/nginx.conf"
        text = remap(conf.read_text(), base)
        text = re.sub(r"listen 443 ssl;", f"listen 127.0.0.1:{ports['web']} ssl;", text)
        text = re.sub(r"listen 8444 ssl;", f"listen 127.0.0.1:{ports['api']} ssl;", text)
        conf.write_text(text)
        argv = unit_argv(root, "logbox-nginx.service", "ExecStart", base)
        argv[argv.index("/usr/sbin/nginx")] = need("nginx")
        start("nginx", argv)
        wait_for("nginx", base / "run/logbox-nginx/nginx.pid")
        yield Appliance(base, run, ports["web"], ports["api"], ports["tcp"])
    finally:
        for name in ("nginx", "alertd", "rpc", "webui", "searchd", "syslog-ng", "indexd"):
            if name in procs:
                procs[name].terminate()
                procs[name].wait(timeout=30)
        for name in procs:
            print(f"--- {name}\n{(base / f'{name}.log').read_text(errors='replace')[-3000:]}")
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_appliance_under_its_users(
    ready: types.ModuleType, appliance_run: Appliance, root: Path
) -> None:
    a = appliance_run
    (a.run / "storage.json").write_text(
        json.dumps({"mode": "root", "device": None, "state": "root", "message": "no data disk"})
    )
    # a message through syslog-ng, the spool, indexd, the store, to searchd
    with socket.create_connection(("127.0.0.1", a.syslog_tcp)) as s:
        s.sendall(b"<13>1 2026-11-22T10:00:00Z host1 app 1 - - through the appliance\n")
    deadline = time.monotonic() + 30
    while True:
        conn = ready.UnixHTTPConnection(str(a.run / "searchd.sock"), 5)
        conn.request("GET", "/v1/logspaces")
        body = conn.getresponse().read()
        conn.close()
        spaces = json.loads(body).get("logspaces", []) if body.startswith(b"{") else []
        if any(x["name"] == "main" and x["messages"] >= 1 for x in spaces):
            break
        assert time.monotonic() < deadline, f"the message did not reach the store: {body!r}"
        time.sleep(0.5)
    # logbox-alertd runs as its user: its status file is kept up, its state file made
    st = json.loads((a.run / "alertd.status.json").read_text())
    assert isinstance(st["pid"], int) and st["alerts"] == {}, st
    assert (a.base / "var/lib/logbox-alertd/state.json").is_file()
    # logbox-ready under its unit's credentials: everything answers
    env = dict(
        LOGBOX_READY_RUN=str(a.run),
        LOGBOX_READY_WEB=f"127.0.0.1:{a.web}",
        LOGBOX_READY_API=f"127.0.0.1:{a.api}",
        LOGBOX_READY_TIMEOUT="60",
        PATH="/usr/bin:/bin",
    )
    done = subprocess.run(
        unit_argv(root, "logbox-ready.service", "ExecStart", a.base),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(
        r"logbox-ready: ready: syslog 514/tcp 514/udp 601/tcp 6514/tls, web https://[0-9.]+/, "
        r"api https://[0-9.]+:8444/api/v1, raid none \(root file system\), boot (bios|uefi)",
        lines[0],
    ), lines[0]
    assert [line.split()[2] for line in lines[1:]] == list(ready.UNITS)
    assert all(re.fullmatch(r"logbox-ready: unit \S+ \S+ user \S+", x) for x in lines[1:])


def test_ready_says_what_is_missing(root: Path, tmp_path: Path) -> None:
    env = dict(
        os.environ,
        LOGBOX_READY_RUN=str(tmp_path),
        LOGBOX_READY_WEB=f"127.0.0.1:{free_port()}",
        LOGBOX_READY_API=f"127.0.0.1:{free_port()}",
        LOGBOX_READY_TIMEOUT="0",
    )
    done = run_libexec(root, "logbox-ready", env)
    assert done.returncode == 1
    first = done.stdout.splitlines()[0]
    assert first.startswith("logbox-ready: not ready after 0 s: indexd: ")
    for what in ("searchd: /health", "web UI: https://", "API: https://"):
        assert what in first, first


# ---------------------------------------------------------------- the other files


def test_vagrantfile_validates(tmp_path: Path) -> None:
    vagrant = shutil.which("vagrant")
    if vagrant is None:
        pytest.skip("vagrant is not installed (make deps installs it)")
    done = subprocess.run(
        [vagrant, "validate", "--ignore-provider"],
        cwd=TOP,
        capture_output=True,
        text=True,
        timeout=300,
        # its state directory (.vagrant) out of the checkout
        env=dict(os.environ, VAGRANT_CHECKPOINT_DISABLE="1", VAGRANT_DOTFILE_PATH=str(tmp_path)),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = (TOP / "Vagrantfile").read_text()
    assert "make deps build" in text and "make image" in text


def test_units_parse_as_ini() -> None:
    # every unit file is plain key=value in sections (no stray text)
    for path in sorted((TOP / "appliance/systemd").glob("logbox*")):
        cp = configparser.ConfigParser(strict=False, interpolation=None)
        cp.optionxform = str  # type: ignore[assignment,method-assign]
        cp.read_string(re.sub(r"^(\w+)=", r"\1 =", path.read_text(), flags=re.M))
        assert cp.sections(), path


def test_syslog_ng_configuration_renders(root: Path, tree: Path, tmp_path: Path) -> None:
    # the unit's own ExecStartPre (paths moved into the test's tree) renders the first-boot
    # collector.toml into a configuration syslog-ng accepts, and ExecStart's options exist
    need("/usr/sbin/syslog-ng")
    assert firstboot(root, tree).returncode == 0
    s = unit_file(root, "logbox-syslog-ng.service")
    moves = {
        "/usr/lib/logbox": str(root / "usr/lib/logbox"),
        "/etc/logbox": str(tree / "etc/logbox"),
        "/run/logbox": str(tmp_path / "run"),
        "/var/lib/logbox-collector": str(tmp_path / "collector"),
    }
    (tmp_path / "run").mkdir()
    (tmp_path / "collector").mkdir()
    col = tree / "etc/logbox/collector.toml"  # its TLS files, in the tree too
    col.write_text(col.read_text().replace('"/etc/logbox/', f'"{tree}/etc/logbox/'))

    def move(cmd: str) -> str:
        for a, b in moves.items():
            cmd = cmd.replace(a, b)
        return cmd

    [pre] = [v for v in s["ExecStartPre"] if not v.startswith("+")]
    argv = pre.split(" ", 2)
    assert argv[:2] == ["/bin/sh", "-c"]
    done = subprocess.run(
        ["/bin/sh", "-c", move(argv[2].strip("'"))], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    conf = (tmp_path / "run/syslog-ng.conf").read_text()
    for port in ("port(514)", "port(601)", "port(6514)"):
        assert port in conf
    assert str(tree / "etc/logbox/tls/server.key") in conf
    assert 'file("/var/lib/logbox/spool/${R_YEAR}' in conf
    assert "fifo" not in conf and "disk-buffer" not in conf
    start = last(s, "ExecStart")
    assert start is not None
    args = start.split()
    assert args[:3] == ["/usr/sbin/syslog-ng", "-F", "--no-caps"]
    assert args[args.index("-R") + 1] == "/var/lib/logbox-collector/syslog-ng.persist"
    assert args[args.index("-p") + 1] == "/run/logbox/syslog-ng.pid"
    assert args[args.index("-c") + 1] == "/run/logbox/syslog-ng.ctl"
    helped = subprocess.run(["/usr/sbin/syslog-ng", "--help-all"], capture_output=True, text=True)
    assert "--no-caps" in helped.stdout + helped.stderr


# logbox-storage's main() against fake disk tools: lsblk, mdadm, mkfs.ext4, systemd-mount and
# udevadm on PATH are one script that keeps the disks' state in a JSON file and changes it as
# the real tools would, so the whole loop (plan, step, look again, mount, status) runs.
FAKE_TOOLS = r"""#!/usr/bin/python3
import json, os, sys
state_path = os.environ["FAKE_STATE"]
st = json.load(open(state_path))
tool, args = os.path.basename(sys.argv[0]), sys.argv[1:]
st["calls"].append([tool, *args])
st.setdefault("slots", ["key file", "recovery"])  # a volume's key slots (luksFormat: anew)
devs = st["devices"]

def fail(msg):  # a tool that fails: its call is kept
    json.dump(st, open(state_path, "w"))
    sys.exit(msg)

def walk(ds):
    for d in ds:
        yield d
        yield from walk(d.get("children") or [])

def find(path):
    for d in walk(devs):
        if d["path"] == path or path == "/dev/md/logbox" and d["type"] == "raid1":
            return d
    sys.exit(f"{tool}: {path}: no such device")

# each member disk holds its own copy of the array's entry: after a change to the array or
# to the volume on it (path), every copy is made the same
def sync(path):
    for a in walk(devs):
        if a["type"] == "raid1" and (a["path"] == path or any(
                c["path"] == path for c in a.get("children") or [])):
            for b in walk(devs):
                if b["type"] == "raid1" and b is not a:
                    b.clear()
                    b.update(json.loads(json.dumps(a)))
            return

def mdstat(n, members, extra=""):
    st["mdstat"] = (
        "Personalities : [raid1]\nmd127 : active raid1 "
        + " ".join(f"{m}[{i}]" for i, m in enumerate(members))
        + f"\n      1047552 blocks super 1.2 [{n}/{len(members)}] [{'U' * len(members)}{'_' * (n - len(members))}]\n"
        + extra + "\nunused devices: <none>\n"
    )

def array(fs):
    return {"name": "md127", "path": "/dev/md127", "type": "raid1", "fstype": fs,
            "label": "logbox-store" if fs else None, "mountpoints": [None], "children": []}

def volume():
    return {"name": "logbox-store", "path": "/dev/mapper/logbox-store", "type": "crypt",
            "fstype": st.get("volume_fs"), "label": "logbox-store" if st.get("volume_fs") else None,
            "mountpoints": [None]}

if tool == "lsblk":
    print(json.dumps({"blockdevices": devs}))
elif tool == "mdadm" and args[0] == "--create":
    disks = [a for a in args if a.startswith("/dev/vd")]
    for d in devs:
        if d["path"] in disks:
            d.update(fstype="linux_raid_member", label="any:logbox", children=[array(None)])
    mdstat(len(disks), [os.path.basename(d) for d in disks])
elif tool == "mdadm" and args[0] == "--assemble":
    disks = [a for a in args[3:]]
    for d in devs:
        if d["path"] in disks:
            d["children"] = [array(st["array_fs"])]
    mdstat(st["array_disks"], [os.path.basename(d) for d in disks])
elif tool == "mdadm" and args[1] == "--add":
    d = find(args[2])
    d.update(fstype="linux_raid_member", label="any:logbox", children=[array(st["array_fs"])])
    members = [x["name"] for x in devs if x.get("fstype") == "linux_raid_member"]
    mdstat(2, members[:1], "      [>....................]  recovery =  0.5% (1/2) finish=1min\n")
    st["mdstat"] = st["mdstat"].replace("[2/1] [U_]", "[2/1] [U_]").replace(
        "raid1 " + members[0] + "[0]", "raid1 " + " ".join(f"{m}[{i}]" for i, m in enumerate(members)))
elif tool == "mkfs.ext4" and os.environ.get("FAKE_UDEV_BLIND"):
    pass  # made, but lsblk does not show it (udev has not looked)
elif tool == "mkfs.ext4":
    d = find(args[-1])
    d.update(fstype="ext4", label=args[args.index("-L") + 1])
    st["volume_fs" if d["type"] == "crypt" else "array_fs"] = "ext4"
    sync(d["path"])
elif tool == "cryptsetup" and args[0] == "luksFormat":
    key = args[args.index("--key-file") + 1]
    assert key in ("/etc/logbox/luks/store.key", "/run/logbox/store.key.new"), args
    assert os.path.exists(os.environ["LOGBOX_ROOT"] + key), key
    d = find(args[-1])
    d.update(fstype="crypto_LUKS", label=args[args.index("--label") + 1])
    st["array_fs"] = "crypto_LUKS"
    st["slots"] = ["key file"]
    sync(d["path"])
elif tool == "cryptsetup" and args[0] == "luksAddKey":
    assert args[-1] == "-", args
    st["slots"].append(sys.stdin.read())
elif tool == "cryptsetup" and args[0] == "open":
    if "key file" not in st["slots"]:
        fail("No key available with this passphrase.")
    d = find(args[-2])
    assert d["fstype"] == "crypto_LUKS" and args[-1] == "logbox-store", (d, args)
    d["children"] = [volume()]
    sync(d["path"])
elif tool == "cryptsetup" and args[0] == "luksDump":
    print("LUKS header information\nKeyslots:\n"
          + "".join(f"  {i}: luks2\n\tKey: 512 bits\n" for i in range(len(st["slots"])))
          + "Tokens:\n" + ("  0: systemd-tpm2\n" if st.get("tpm2") else ""))
elif tool == "cryptsetup" and args[0] == "luksRemoveKey":
    assert args[-1] == "/run/logbox/store.key.new", args
    st["slots"].remove("key file")
elif tool == "systemd-cryptenroll" and st.get("tpm2_refuses"):
    fail("ERROR: Failed to seal to TPM2")
elif tool == "systemd-cryptenroll":
    assert "--unlock-key-file=/run/logbox/store.key.new" in args and "--tpm2-device=auto" in args
    st["tpm2"] = True
    st["slots"].append("tpm2")
elif tool == "systemd-cryptsetup" and st.get("tpm2_refuses"):
    fail("Failed to unseal secret using TPM2: State not recoverable")
elif tool == "systemd-cryptsetup" and args[0] == "attach":
    assert args[1] == "logbox-store" and "tpm2-device=auto" in args[-1] and st["tpm2"], args
    d = find(args[2])
    d["children"] = [volume()]
    sync(d["path"])
elif tool == "systemd-mount":
    d = find(args[-2])
    d["mountpoints"] = [args[-1]]
    sync(d["path"])
elif tool == "udevadm":
    pass
else:
    sys.exit(f"fake {tool}: unexpected {args}")
json.dump(st, open(state_path, "w"))
os.makedirs(os.path.join(os.environ["LOGBOX_ROOT"], "proc"), exist_ok=True)
open(os.path.join(os.environ["LOGBOX_ROOT"], "proc/mdstat"), "w").write(st.get("mdstat", ""))
"""


@pytest.fixture
def fake_disks(root: Path, tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """(state file, environment) for running the installed logbox-storage on fake tools."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "fake.py"
    fake.write_text(FAKE_TOOLS)
    fake.chmod(0o755)
    tools = ("lsblk", "mdadm", "mkfs.ext4", "systemd-mount", "udevadm", "cryptsetup")
    for tool in (*tools, "systemd-cryptenroll", "systemd-cryptsetup"):
        (bin_dir / tool).symlink_to(fake)
    t = tmp_path / "t"
    shutil.copytree(root / "etc", t / "etc", symlinks=True)
    (t / "run/logbox").mkdir(parents=True)
    (t / "var/lib/logbox").mkdir(parents=True)
    (t / "proc").mkdir()
    (t / "proc/mdstat").write_text("")
    state = tmp_path / "state.json"
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:/usr/bin:/bin",
        FAKE_STATE=str(state),
        LOGBOX_ROOT=str(t),
        LOGBOX_PYTHON=str(root / "usr/lib/logbox/python"),
        LOGBOX_SYSTEMD_CRYPTSETUP=str(bin_dir / "systemd-cryptsetup"),
    )
    yield state, env


def run_storage(
    root: Path, state: Path, env: dict[str, str], devices: list[dict], rc: int = 0, **kw: object
) -> tuple[dict, list, str]:
    """Run logbox-storage on the fake disks; (storage.json, the tool calls, its output)."""
    if devices:
        state.write_text(json.dumps({"devices": devices, "calls": [], "mdstat": "", **kw}))
    else:
        st = json.loads(state.read_text())
        st["calls"] = []
        state.write_text(json.dumps(st))
    done = run_libexec(root, "logbox-storage", env)
    assert done.returncode == rc, done.stdout + done.stderr
    status = json.loads((Path(env["LOGBOX_ROOT"]) / "run/logbox/storage.json").read_text())
    calls = [
        c
        for c in json.loads(state.read_text())["calls"]
        if c[0] not in ("lsblk", "udevadm") and c[:2] != ["cryptsetup", "luksDump"]
    ]
    return status, calls, done.stdout


def test_storage_first_boot_then_again(root: Path, fake_disks: tuple[Path, dict[str, str]]) -> None:
    state, env = fake_disks
    t = Path(env["LOGBOX_ROOT"])
    (t / "dev").mkdir()
    (t / "dev/console").write_text("")
    status, calls, out = run_storage(root, state, env, [BOOT, disk("vdb"), disk("vdc")])
    assert [c[:2] for c in calls] == [
        ["mdadm", "--create"],
        ["cryptsetup", "luksFormat"],
        ["cryptsetup", "luksAddKey"],
        ["cryptsetup", "open"],
        ["mkfs.ext4", "-q"],
        ["systemd-mount", "--no-ask-password"],
    ]
    assert calls[1][-1] == calls[2][-2] == calls[3][-2] == "/dev/md127"
    assert "--type" in calls[1] and calls[1][calls[1].index("--type") + 1] == "luks2"
    assert calls[4][-1] == calls[5][-2] == "/dev/mapper/logbox-store"
    assert status == {
        "mode": "raid1",
        "device": "/dev/md127",
        "state": "clean",
        "message": "RAID1 of vdb, vdc; encrypted (LUKS2)",
    }
    # the key file: 256 random bits as hex, root's only; the recovery key: in the second key
    # slot, shown once on the console and nowhere else (not in the output, i.e. the journal)
    key = t / "etc/logbox/luks/store.key"
    assert re.fullmatch(r"[0-9a-f]{64}", key.read_text())
    assert stat.S_IMODE(key.stat().st_mode) == 0o400 and key.stat().st_uid == 0
    shown = re.findall(r"store recovery key \(shown once\): (\S+)", (t / "dev/console").read_text())
    slots = json.loads(state.read_text())["slots"]
    assert len(shown) == 1 and slots == ["key file", shown[0]]
    assert re.fullmatch(r"([cbdefghijklnrtuv]{8}-){7}[cbdefghijklnrtuv]{8}", shown[0])
    assert shown[0] not in out and key.read_text() not in out
    store = t / "var/lib/logbox"
    st = store.stat()
    uid = int(db(t, "passwd")["logbox-indexd"][2])
    gid = int(db(t, "group")["logbox-store"][2])
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, gid, 0o751)
    mkfs = calls[4]
    assert f"root_owner={uid}:{gid}" in mkfs
    # the next boot: everything is there; nothing is done but the status
    status, calls, _ = run_storage(root, state, env, [])
    assert calls == [] and status["mode"] == "raid1" and status["state"] == "clean"


def test_storage_replaced_disk_resyncs(root: Path, fake_disks: tuple[Path, dict[str, str]]) -> None:
    state, env = fake_disks
    (Path(env["LOGBOX_ROOT"]) / "etc/logbox/luks/store.key").write_text("00" * 32)
    status, calls, _ = run_storage(
        root,
        state,
        env,
        [BOOT, member("vdb"), disk("vdc")],
        slots=["key file", "recovery"],
        array_fs="crypto_LUKS",
        volume_fs="ext4",
        array_disks=2,
    )
    assert [c[:2] for c in calls] == [
        ["mdadm", "--assemble"],
        ["cryptsetup", "open"],
        ["mdadm", "/dev/md127"],
        ["systemd-mount", "--no-ask-password"],
    ]
    assert calls[2] == ["mdadm", "/dev/md127", "--add", "/dev/vdc"]
    assert status["mode"] == "raid1" and status["state"].startswith("recovering")
    # an array from before encryption: assembled and mounted as it is
    status, calls, _ = run_storage(
        root, state, env, [BOOT, member("vdb"), member("vdc")], array_fs="ext4", array_disks=2
    )
    assert [c[:2] for c in calls] == [
        ["mdadm", "--assemble"],
        ["systemd-mount", "--no-ask-password"],
    ]
    assert calls[1][-2] == "/dev/md127" and "not encrypted" in status["message"]


def test_storage_single_and_root(root: Path, fake_disks: tuple[Path, dict[str, str]]) -> None:
    state, env = fake_disks
    status, calls, _ = run_storage(root, state, env, [BOOT, disk("vdb")])
    assert [c[:2] for c in calls] == [
        ["cryptsetup", "luksFormat"],
        ["cryptsetup", "luksAddKey"],
        ["cryptsetup", "open"],
        ["mkfs.ext4", "-q"],
        ["systemd-mount", "--no-ask-password"],
    ]
    assert status["mode"] == "single" and status["device"] == "/dev/vdb"
    assert "without RAID" in status["message"] and "encrypted (LUKS2)" in status["message"]
    # the key file gone: the store is not mounted, and the unit fails saying why
    (Path(env["LOGBOX_ROOT"]) / "etc/logbox/luks/store.key").unlink()
    status, calls, out = run_storage(
        root, state, env, [BOOT, disk("vdb", "crypto_LUKS", "logbox-store")], rc=1
    )
    assert calls == [] and status["state"] == "failed"
    assert "store.key is missing" in status["message"] and "recovery key" in out
    status, calls, _ = run_storage(root, state, env, [BOOT])
    assert calls == []
    assert status == {
        "mode": "root",
        "device": None,
        "state": "root",
        "message": "no data disk: the store is on the root file system, without RAID",
    }


def test_storage_key_sealed_to_a_tpm2(root: Path, fake_disks: tuple[Path, dict[str, str]]) -> None:
    # a TPM2: the key is sealed to it, the key file's slot and the file removed; the next boot
    # opens the store with the TPM2 (systemd-cryptsetup), with no key file
    state, env = fake_disks
    t = Path(env["LOGBOX_ROOT"])
    (t / "dev").mkdir()
    (t / "dev/console").write_text("")
    (t / "dev/tpmrm0").write_text("")
    status, calls, _ = run_storage(root, state, env, [BOOT, disk("vdb")])
    assert [c[:2] for c in calls] == [
        ["cryptsetup", "luksFormat"],
        ["cryptsetup", "luksAddKey"],
        ["systemd-cryptenroll", "--unlock-key-file=/run/logbox/store.key.new"],
        ["cryptsetup", "luksRemoveKey"],
        ["systemd-cryptsetup", "attach"],
        ["mkfs.ext4", "-q"],
        ["systemd-mount", "--no-ask-password"],
    ], calls
    assert calls[2][-1] == calls[3][2] == calls[4][3] == "/dev/vdb"
    assert "--tpm2-pcrs=7" in calls[2]
    # its first key was on /run only, and is gone; no key file
    assert not (t / "etc/logbox/luks/store.key").exists()
    assert not (t / "run/logbox/store.key.new").exists()
    shown = re.findall(r"recovery key \(shown once\): (\S+)", (t / "dev/console").read_text())
    assert json.loads(state.read_text())["slots"] == [shown[0], "tpm2"]
    assert "its key sealed to the TPM2" in status["message"], status
    # the next boot: the volume is closed, the TPM2 opens it
    st = json.loads(state.read_text())
    st["devices"][1]["children"] = []
    st["devices"][1]["mountpoints"] = [None]
    state.write_text(json.dumps(st))
    status, calls, _ = run_storage(root, state, env, [])
    assert [c[:2] for c in calls] == [
        ["systemd-cryptsetup", "attach"],
        ["systemd-mount", "--no-ask-password"],
    ]
    assert status["state"] == "single" and "sealed to the TPM2" in status["message"]


def test_storage_ways_back(root: Path, fake_disks: tuple[Path, dict[str, str]]) -> None:
    state, env = fake_disks
    t = Path(env["LOGBOX_ROOT"])
    (t / "dev").mkdir()
    (t / "dev/console").write_text("")
    key = t / "etc/logbox/luks/store.key"
    luks = disk("vdb", "crypto_LUKS", "logbox-store")
    # a key file whose slot is gone, and a TPM2 token: the TPM2 opens it after the key file
    key.write_text("00" * 32)
    status, calls, _ = run_storage(root, state, env, [BOOT, luks], slots=["rk", "tpm2"],
                                   tpm2=True, volume_fs="ext4")  # fmt: skip
    assert [c[:2] for c in calls] == [
        ["cryptsetup", "open"], ["systemd-cryptsetup", "attach"], ["systemd-mount", "--no-ask-password"]
    ]  # fmt: skip
    assert status["state"] == "single"
    # nothing opens it (the TPM2 refuses: PCR 7 changed, say): not mounted, and the message
    # says how to open it with the recovery key and seal it to this TPM2 again
    status, calls, out = run_storage(root, state, env, [BOOT, luks], slots=["rk", "tpm2"],
                                     tpm2=True, tpm2_refuses=True, rc=1)  # fmt: skip
    assert status["state"] == "failed" and "cannot open the encrypted store" in status["message"]
    assert "restart logbox.target" in status["message"]
    assert "systemd-cryptenroll --wipe-slot=tpm2" in status["message"]
    # a format cut short before the recovery key (the key file's slot alone): it is made and
    # shown, then the volume is used as usual
    status, calls, _ = run_storage(root, state, env, [BOOT, luks], slots=["key file"])
    assert [c[:2] for c in calls] == [
        ["cryptsetup", "open"], ["cryptsetup", "luksAddKey"], ["mkfs.ext4", "-q"],
        ["systemd-mount", "--no-ask-password"],
    ]  # fmt: skip
    assert "store recovery key (shown once)" in (t / "dev/console").read_text()
    # a TPM2 that cannot seal: the first key becomes the key file (the store still opens)
    key.unlink()
    (t / "dev/tpmrm0").write_text("")
    status, calls, out = run_storage(root, state, env, [BOOT, disk("vdb")], tpm2_refuses=True)
    assert [c[0] for c in calls][:3] == ["cryptsetup", "cryptsetup", "systemd-cryptenroll"]
    assert "not sealed to the TPM2" in out and re.fullmatch(r"[0-9a-f]{64}", key.read_text())
    assert not (t / "run/logbox/store.key.new").exists()
    assert status["state"] == "single" and "encrypted (LUKS2)" in status["message"]


def test_storage_never_repeats_a_step(root: Path, fake_disks: tuple[Path, dict[str, str]]) -> None:
    # mkfs done but not seen (udev late): udev is asked to look again once, then it stops
    # with the reason rather than make the file system a second time
    state, env = fake_disks
    env["FAKE_UDEV_BLIND"] = "1"
    (Path(env["LOGBOX_ROOT"]) / "etc/logbox/luks/store.key").write_text("00" * 32)
    opened = disk("vdb", "crypto_LUKS", "logbox-store", children=[vol(None)])
    status, calls, out = run_storage(root, state, env, [BOOT, opened], rc=1)
    assert [c[0] for c in calls] == ["mkfs.ext4"]
    udev = [
        c for c in json.loads(state.read_text())["calls"] if c[0] == "udevadm" and c[1] == "trigger"
    ]
    assert len(udev) == 1
    assert (
        status["state"] == "failed" and "do not show the effect of: mkfs.ext4" in status["message"]
    )
