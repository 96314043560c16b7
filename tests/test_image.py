# The appliance image (issue 8), booted for real under qemu (TCG here, KVM where it works):
# `make image` builds it (or $LOGBOX_IMAGE names a built one); a copy boots with two blank data
# disks and a first-boot file through fw_cfg (the given admin password): readiness line, every
# logbox unit active under its own user, syslog over TCP and TLS found through the forwarded
# RPC API and the web UI, RAID1 clean, ACPI power-off. The same disks boot again with one data
# disk replaced by a blank one: every message still found, RAID degraded then rebuilding, new
# messages stored. A third copy boots under UEFI (OVMF) without a first-boot file and one data
# disk: the generated admin password is printed once on the console and signs in (the web UI
# makes it change it), and the store is on the one disk without RAID. The store is encrypted
# (LUKS2) in every boot: the recovery key and the verification key are each shown once, the raw
# data disks hold no message in plain text, no disk holds either key in clear, and the recovery
# key opens the one disk (cryptsetup on the host). The daily verify's first run is read through
# the API (GET /logspaces/main/integrity) in the first boot. The first two boot
# through BIOS (SeaBIOS): the one image has both boot paths. Build time, image sizes and time
# to readiness go to build/image/report.json and are printed at the end.
# Skips (saying why) only without qemu, OVMF or mmdebstrap, without root, or with LOGBOX_SKIP_IMAGE=1.
from __future__ import annotations

import datetime
import json
import os
import re
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from lbtest.qemu import Vm, blank_disk, have_ovmf, have_qemu, overlay

TOP = Path(__file__).resolve().parent.parent
OUT = TOP / "build" / "image"
READY_TIMEOUT = float(os.environ.get("LOGBOX_IMAGE_READY_TIMEOUT", "900"))
PASSWORD = "image-test-" + secrets.token_urlsafe(12)
READY_RX = r"^.*logbox-ready: ready: (.*)$"
# the daemons and the user each must run as (APPLIANCE.md "Users and rights")
DAEMON_USERS = {
    "logbox-indexd.service": "logbox-indexd",
    "logbox-syslog-ng.service": "logbox-collector",
    "logbox-searchd.service": "logbox-searchd",
    "logbox-alertd.service": "logbox-alertd",
    "logbox-rpc.service": "logbox-rpc",
    "logbox-webui.service": "logbox-webui",
    "logbox-nginx.service": "logbox-nginx",
}
# boot-time oneshots that have exited by readiness (run as root by design: mdadm, /etc/logbox)
ONESHOTS = {"logbox-storage.service", "logbox-firstboot.service"}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]


def _why_skip() -> str | None:
    """Why this machine cannot run the image test, or None."""
    if os.environ.get("LOGBOX_SKIP_IMAGE") == "1":
        return "LOGBOX_SKIP_IMAGE=1"
    missing = have_qemu() or have_ovmf()
    if missing:
        return f"{missing} is not installed (make deps)"
    if not os.environ.get("LOGBOX_IMAGE"):
        if shutil.which("mmdebstrap") is None:
            return "mmdebstrap is not installed (make deps)"
        if os.geteuid() != 0:
            return "building the image needs root (mmdebstrap, chroot)"
    return None


if _why_skip():
    pytest.skip(f"appliance image test: {_why_skip()}", allow_module_level=True)

STATE: dict[str, Any] = {}
REPORT: dict[str, Any] = {"accel": None, "boots": {}}


@pytest.fixture(scope="module")
def image() -> Path:
    """The built image: $LOGBOX_IMAGE, else build it now (image/build.py, cached base)."""
    if os.environ.get("LOGBOX_IMAGE"):
        img = Path(os.environ["LOGBOX_IMAGE"])
        assert img.is_file(), f"LOGBOX_IMAGE={img} does not exist"
    else:
        r = subprocess.run([sys.executable, str(TOP / "image" / "build.py")], cwd=TOP)
        assert r.returncode == 0, "image/build.py failed (its output is above)"
        img = OUT / "logbox.img"
    build = img.parent / "build.json"
    if build.is_file():
        REPORT["build"] = json.loads(build.read_text())
    return img


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Disks and logs of the boots (kept under build/image/test for a look afterwards)."""
    d = OUT / "test"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


@pytest.fixture(scope="module", autouse=True)
def report(request: pytest.FixtureRequest) -> Any:
    """Writes build/image/report.json and prints it after the module's tests (on the terminal,
    past pytest's capture)."""
    yield REPORT
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "report.json").write_text(json.dumps(REPORT, indent=1) + "\n")
    b = REPORT.get("build", {})
    lines = ["", "appliance image report (build/image/report.json):"]
    if b:
        t = b.get("build_times_s", {})
        lines.append(
            f"  build: {t.get('total_s')} s (base {t.get('base_s')} s, root {t.get('root_s')} s,"
            f" disk {t.get('disk_s')} s, zstd {t.get('zstd_s')} s)"
        )
        lines.append(
            f"  image: {b['raw_bytes'] / 2**20:.0f} MiB raw ({b['raw_allocated_bytes'] / 2**20:.0f}"
            f" MiB allocated), {b['zstd_bytes'] / 2**20:.0f} MiB zstd -{b['zstd_level']}"
        )
    for name, boot in REPORT["boots"].items():
        lines.append(f"  boot {name} ({REPORT['accel']}): " + json.dumps(boot))
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    for line in lines:
        tr.write_line(line) if tr is not None else print(line, file=sys.stderr)


# --- talking to the guest -----------------------------------------------------------------


def wait_ready(vm: Vm, name: str) -> str:
    """Waits for the readiness line; records the time; returns what follows `ready:`."""
    REPORT["accel"] = vm.accel
    boot = REPORT["boots"].setdefault(name, {})
    try:
        m = vm.wait_console(READY_RX + r"|logbox-ready: not ready after .*$", READY_TIMEOUT)
    except AssertionError:
        boot["ready_s"] = None
        raise
    line = m.group(0)
    assert "not ready" not in line, f"{line}\n{vm.tail(80)}"
    boot["ready_s"] = round(time.monotonic() - vm.started, 1)
    return m.group(1)


def unit_lines(vm: Vm) -> dict[str, tuple[str, str]]:
    """`logbox-ready: unit NAME STATE user USERS` lines of the console: {name: (state, users)},
    waiting a little for all of them (they follow the readiness line)."""
    rx = re.compile(r"logbox-ready: unit (\S+) (\S+) user (\S+)")
    deadline = time.monotonic() + 30
    while True:
        units = {m[1]: (m[2], m[3]) for m in rx.finditer(vm.console())}
        if "logbox-ready.service" in units or time.monotonic() > deadline:
            return units
        time.sleep(0.5)


def check_units(vm: Vm) -> None:
    """Every logbox unit active; each daemon under its own non-root user."""
    units = unit_lines(vm)
    assert units, f"no `logbox-ready: unit` lines on the console:\n{vm.tail()}"
    bad = {u: s for u, s in units.items() if s[0] != "active"}
    assert not bad, f"logbox units not active: {bad}"
    for unit, user in DAEMON_USERS.items():
        assert unit in units, f"{unit} missing from the readiness report: {units}"
        assert units[unit][1] == user, f"{unit} runs as {units[unit][1]}, not {user}"
    ready_user = units.get("logbox-ready.service", ("", "root"))[1]
    assert ready_user not in ("root", "-"), f"logbox-ready runs as {ready_user}"
    others = set(units) - set(DAEMON_USERS) - ONESHOTS - {"logbox-ready.service"}
    for unit in others:
        assert "root" not in units[unit][1].split(","), f"{unit} runs as root"
    failed = re.findall(r"\[FAILED\] Failed to start (logbox\S*)", vm.console())
    assert not failed, f"units failed during boot: {failed}"


def syslog_line(token: str, how: str, i: int) -> str:
    """One RFC 5424 message carrying token."""
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")
    return f"<134>1 {now.replace('+00:00', 'Z')} imagetest lbtest {i} - - {token} {how} {i}"


def send_tcp(port: int, token: str, n: int) -> None:
    """n newline-framed messages over plain TCP."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"".join((syslog_line(token, "tcp", i) + "\n").encode() for i in range(n)))


def send_tls(port: int, token: str, n: int) -> str:
    """n octet-counted messages over TLS 1.2+ (the server certificate is the appliance's own,
    from its first-boot CA, so it is not verified here); the TLS version used."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        with ctx.wrap_socket(raw) as s:
            frames = []
            for i in range(n):
                msg = syslog_line(token, "tls", i).encode()
                frames.append(b"%d %s" % (len(msg), msg))
            s.sendall(b"".join(frames))
            version = s.version() or "?"
    return version


class Api:
    """The forwarded RPC API, signed in as admin."""

    def __init__(self, port: int, password: str) -> None:
        self.base = f"https://127.0.0.1:{port}/api/v1"
        self.s = requests.Session()
        self.s.verify = False  # the appliance's own CA; TLS 1.2+ is still what nginx speaks
        self.s.trust_env = False  # no proxy, no REQUESTS_CA_BUNDLE overriding verify
        r = self.s.post(
            self.base + "/login", json={"username": "admin", "password": password}, timeout=60
        )
        assert r.status_code == 200, f"API login: {r.status_code} {r.text}"
        self.token = r.json()["token"]
        self.s.headers["Authorization"] = "Bearer " + self.token

    def get(self, path: str, **params: str) -> dict:
        """GET path; the JSON answer (asserting 200)."""
        r = self.s.get(self.base + path, params=params, timeout=120)
        assert r.status_code == 200, f"GET {path}: {r.status_code} {r.text}"
        return r.json()

    def total(self, q: str) -> int:
        """How many messages of logspace main match q (last day); 0 while main does not exist
        yet (indexd makes it with its first message)."""
        params = {"q": q, "from": "-1d", "limit": "1"}
        r = self.s.get(self.base + "/logspaces/main/search", params=params, timeout=120)
        if r.status_code == 404 and "no logspace" in r.text:
            return 0
        assert r.status_code == 200, f"search: {r.status_code} {r.text}"
        return int(r.json()["total"])

    def wait_total(self, q: str, want: int, timeout: float = 180) -> int:
        """Polls the count of q until it is want (or timeout); the last count."""
        deadline = time.monotonic() + timeout
        while True:
            n = self.total(q)
            if n >= want or time.monotonic() > deadline:
                return n
            time.sleep(2)

    def raid(self) -> dict | None:
        """The status's raid member."""
        return self.get("/status")["raid"]

    def check_status(self, healthy: bool = True) -> dict:
        """Every service the status lists is running (as the rpc user sees them, through the
        appliance's sandboxing); when healthy, no problem is reported. The status."""
        st = self.get("/status")
        services = st["services"]
        assert set(services) == {
            "syslog-ng", "indexd", "searchd", "alertd", "rpc", "webui", "nginx"
        }  # fmt: skip
        down = {name: s for name, s in services.items() if s.get("state") != "running"}
        assert not down, f"services not running: {down}; problems: {st.get('problems')}"
        # what each uses, read from its unit's cgroup (the API cannot read the others' /proc)
        for name, svc in services.items():
            res = svc["resources"]
            assert res is not None and res["source"] == "cgroup", (name, svc)
            assert res["cpu_s"] > 0 and res["rss_bytes"] > 0 and res["processes"] >= 1, (name, res)
            assert isinstance(res["io_write_bytes"], int), (name, res)  # IOAccounting=yes
        for name in ("syslog-ng", "indexd", "searchd", "alertd"):
            assert isinstance(services[name]["pid"], int), services[name]
            assert services[name]["uptime_s"] > 0, services[name]
        if healthy:
            assert st["health"] == "ok" and not st.get("problems"), st.get("problems")
        return st

    def integrity(self, timeout: float = 780) -> dict:
        """Logspace main's integrity as the appliance's own verify found it (logbox-verify.timer:
        3 and 10 minutes after boot), polled until there is a report of main (the first run
        may come before main's first message: then the second one)."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.s.get(self.base + "/logspaces/main/integrity", timeout=120)
            if r.status_code == 200 or time.monotonic() > deadline:
                assert r.status_code == 200, f"integrity: {r.status_code} {r.text}"
                return r.json()
            assert r.status_code == 404, f"integrity: {r.status_code} {r.text}"
            time.sleep(5)


def box_ca(vm: Vm, port: int, out: Path) -> Path:
    """The appliance's CA as a second machine takes it: the last certificate of the chain the
    port sends, checked against the fingerprint first boot said on the console."""
    done = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-showcerts"],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    pems = re.findall(
        r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n", done.stdout, re.S
    )
    assert len(pems) == 2, f"the chain on {port}: {len(pems)} certificates; {done.stderr}"
    out.write_text(pems[1])
    fp = (
        subprocess.run(
            ["openssl", "x509", "-in", str(out), "-noout", "-fingerprint", "-sha256"],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .split("=", 1)[1]
    )
    said = re.findall(r"logbox-firstboot: TLS CA (\S+) \(SHA-256\)", vm.console())
    assert said == [fp], (said, fp)
    return out


def eps_run(vm: Vm, api: Api, workdir: Path) -> dict:
    """logbox-eps from this machine against the guest through its forwarded ports, as QA
    runs it from a second machine: syslog over TLS and the API, both checked against the CA
    taken from the handshake; a short ramp with a searcher. Every message it sent is stored
    once, and the report describes the box the test made. Its headline figures."""
    ca = box_ca(vm, vm.ports[8444], workdir / "box-ca.crt")
    out = workdir / "eps-report"
    done = subprocess.run(
        [sys.executable, str(TOP / "rpc" / "logbox-eps"), "--host", "127.0.0.1",
         "--transport", "tls", "--port", str(vm.ports[6514]), "--ca", str(ca),
         "--api", f"https://127.0.0.1:{vm.ports[8444]}", "--api-ca", str(ca),
         "--token", api.token, "--connections", "2", "--start", "20", "--step", "20",
         "--max", "40", "--hold", "3", "--lag", "60", "--settle", "10", "--searchers", "1",
         "--out", str(out)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    doc = json.loads((out / "report.json").read_text())
    steps = doc["steps"]
    assert [s["passed"] for s in steps] == [True, True], steps
    for s in steps:
        assert s["stored"] == s["sent"] > 0 and s["lost"] == 0 and s["duplicates"] == 0, s
        assert s["searches"]["count"] > 0 and s["searches"]["errors"] == 0, s["searches"]
        # every service of the appliance, from its cgroup
        assert set(s["services"]) == {
            "syslog-ng", "indexd", "searchd", "alertd", "rpc", "webui", "nginx"
        }  # fmt: skip
    assert api.total(f"eps@32473.run:{steps[0]['run']}") == steps[0]["stored"]
    box = doc["machine"]["box"]
    assert box["store"]["encrypted"] is True and box["raid"]["level"] == "raid1", box
    assert box["cpu"]["cores"] == vm.cpus
    page = (out / "report.html").read_text()
    assert all(f'id="{i}"' in page for i in ("sustained", "steps", "services", "machine"))
    return {"sustained_eps": doc["result"]["sustained_eps"], "steps": len(steps)}


def check_system(api: Api, vm: Vm, raid: bool) -> dict:
    """GET /system against what the test gave the guest: its CPUs, memory, disks, the
    encrypted store on RAID1 or on one disk."""
    doc = api.get("/system")
    assert doc["cpu"]["cores"] == vm.cpus, doc["cpu"]
    total = doc["memory"]["total_bytes"]
    assert 0.8 * vm.memory_mb * MiB < total <= vm.memory_mb * MiB, doc["memory"]
    names = {d["name"]: d for d in doc["disks"]}
    data = [f"vd{chr(ord('b') + i)}" for i in range(len(vm.data_disks))]
    assert set(names) == {"vda", *data}, names
    for n, path in zip(data, vm.data_disks, strict=True):
        assert names[n]["size_bytes"] == path.stat().st_size, names[n]
    st = doc["store"]
    assert st["path"] == "/var/lib/logbox" and st["filesystem"] == "ext4", st
    assert st["encrypted"] is True and st["device"] == "/dev/mapper/logbox-store", st
    assert (doc["raid"] is not None) is raid and (not raid or doc["raid"]["level"] == "raid1")
    assert doc["host"]["os"].startswith("Debian GNU/Linux 12"), doc["host"]
    assert doc["host"]["virtualization"] in ("qemu", "kvm"), doc["host"]
    assert re.fullmatch(r"[0-9a-f]{40}", doc["logbox"]["commit"] or ""), doc["logbox"]
    assert doc["settings"]["sealing"] is True and "main" in doc["settings"]["logspaces"], doc
    return doc


MiB = 1 << 20

KERNEL_LINE = re.compile(r"\[\s*\d+\.\d+\][^\n]*\n")


def shown_once(vm: Vm, what: str, rx: str) -> str:
    """The secret a boot-time program showed once on the console (`<what> (shown once): X`),
    the kernel's lines taken out first (one printed in the middle would cut it)."""
    text = KERNEL_LINE.sub("", vm.console())
    found = re.findall(re.escape(what) + r" \(shown once\): (" + rx + r")\s*$", text, re.M)
    assert len(found) == 1, f"{what}: {found}\n{vm.tail()}"
    return found[0]


RECOVERY_RX = r"(?:[cbdefghijklnrtuv]{8}-){7}[cbdefghijklnrtuv]{8}"


def found_in(path: Path, needles: list[bytes]) -> list[bytes]:
    """Which of needles occur in the file's bytes (read in overlapping chunks)."""
    left, seen = set(needles), []
    tail = b""
    width = max(len(n) for n in needles)
    with open(path, "rb") as f:
        while left and (chunk := f.read(16 << 20)):
            buf = tail + chunk
            for n in list(left):
                if n in buf:
                    left.discard(n)
                    seen.append(n)
            tail = buf[-width:]
    return seen


def luks_at_start(path: Path) -> bool:
    """Whether a LUKS2 header (magic LUKS\\xba\\xbe, version 2) is in the first 64 MiB of a
    raw disk: at 0 on a disk of its own, after the md superblock's data offset on a member."""
    with open(path, "rb") as f:
        head = f.read(64 << 20)
    i = head.find(b"LUKS\xba\xbe\x00\x02")
    return i >= 0 and i % 4096 == 0


def csrf_of(page: str) -> str:
    """The csrf_token of a form."""
    m = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert m, "no csrf_token in the page"
    return m.group(1)


class Web:
    """The forwarded web UI, signed in through its form (changing the password when made to)."""

    def __init__(self, port: int, password: str, new_password: str | None = None) -> None:
        self.base = f"https://127.0.0.1:{port}"
        self.s = requests.Session()
        self.s.verify = False  # the appliance's own CA; TLS 1.2+ is still what nginx speaks
        self.s.trust_env = False  # no proxy, no REQUESTS_CA_BUNDLE overriding verify
        page = self.s.get(self.base + "/login", timeout=60)
        assert page.status_code == 200, f"GET /login: {page.status_code}"
        form = {"username": "admin", "password": password, "csrf_token": csrf_of(page.text)}
        # Flask-WTF over HTTPS wants a same-origin Referer, as a browser sends
        self.s.headers["Referer"] = self.base + "/login"
        r = self.s.post(self.base + "/login", data=form, timeout=60)
        assert r.status_code == 200, f"POST /login: {r.status_code}"
        self.changed = False
        if "/password" in r.url:
            assert new_password, f"the web UI wants a new password for admin ({r.url})"
            form = {"current": password, "new": new_password, "new2": new_password}
            form["csrf_token"] = csrf_of(r.text)
            r = self.s.post(self.base + "/password", data=form, timeout=60)
            assert r.status_code == 200 and "/password" not in r.url, f"password change: {r.url}"
            self.changed = True

    def total(self, q: str) -> int:
        """The `#total` of the search page for q (last day)."""
        r = self.s.get(self.base + "/search", params={"q": q, "from": "-1d"}, timeout=120)
        assert r.status_code == 200, f"GET /search: {r.status_code}"
        m = re.search(r'id="total" data-total="(\d+)"', r.text)
        assert m, "no #total on the search page"
        return int(m.group(1))


def wait_raid(api: Api, states: set[str], timeout: float) -> tuple[dict | None, list, dict | None]:
    """Polls the status until its raid's state is one of states. Returns the last raid; the
    states seen on the way, (state, first progress[, last progress]); and the first status
    sample whose array had fewer active disks than members ({"raid", "health", "problems"}),
    or None."""
    seen: list = []
    short: dict | None = None
    deadline = time.monotonic() + timeout
    while True:
        st = api.get("/status")
        raid = st["raid"]
        if short is None and raid and raid.get("active", 0) < raid.get("disks", 0):
            short = {"raid": raid, "health": st["health"], "problems": st["problems"]}
        step = (raid or {}).get("state"), (raid or {}).get("progress")
        if not seen or seen[-1][0] != step[0]:
            seen.append(step)  # each state once, with its first progress
        elif len(seen) > 1 and step[1] is not None:
            seen[-1] = (step[0], seen[-1][1], step[1])  # ... and its last
        if raid and raid.get("state") in states or time.monotonic() > deadline:
            return raid, seen, short
        time.sleep(2)


# --- the boots ----------------------------------------------------------------------------


def test_first_boot_with_two_blank_disks(image: Path, workdir: Path) -> None:
    """fw_cfg first-boot password; syslog in over TCP and TLS, found by API and web UI; RAID1
    clean; units; ACPI power-off."""
    boot = overlay(image, workdir / "a-boot.qcow2")
    disks = [blank_disk(workdir / "a-data0.raw"), blank_disk(workdir / "a-data1.raw")]
    rec = REPORT["boots"].setdefault("first", {})
    fb = f'admin_password = "{PASSWORD}"\n'
    with Vm(workdir, boot, disks, name="first", firstboot=fb) as vm:
        ready = wait_ready(vm, "first")
        rec["ready_line"] = ready
        assert "raid" in ready
        assert ready.endswith(", boot bios"), ready
        check_units(vm)
        assert "admin password (shown once)" not in vm.console(), "printed despite fw_cfg"
        # the store's secrets, each shown once on the console: the LUKS2 recovery key and the
        # verification key of the seals
        recovery = shown_once(vm, "logbox-storage: store recovery key", RECOVERY_RX)
        vkey = shown_once(vm, "logbox-keys: verification key", "[0-9a-f]{64}")
        assert "encrypted (LUKS2)" in vm.console()

        # the first web sign-in may have to change the first-boot password (logbox-firstboot
        # makes the admin with --must-change, and the API refuses it until then: 403
        # password_change_required); later boots use the password it ends with
        web = Web(vm.ports[443], PASSWORD, new_password=PASSWORD + "-web")
        rec["web_forced_change"] = web.changed
        password = PASSWORD + "-web" if web.changed else PASSWORD
        api = Api(vm.ports[8444], password)
        token = "imgA" + secrets.token_hex(6)
        send_tcp(vm.ports[514], token, 20)
        rec["tls_version"] = send_tls(vm.ports[6514], token, 30)
        assert api.wait_total(token, 50) == 50
        assert api.total(f"{token} AND tls") == 30
        assert web.total(token) == 50

        raid, seen, _ = wait_raid(api, {"clean"}, 600)
        rec["raid_states"] = seen
        assert raid is not None, "status says the store is not on RAID"
        assert raid["level"] == "raid1" and raid["state"] == "clean", raid
        assert raid["disks"] == 2 and raid["active"] == 2, raid
        api.check_status()
        rec["system"] = check_system(api, vm, raid=True)
        rec["eps"] = eps_run(vm, api, workdir)

        # the daily verify's first run (3 minutes after boot), through the API
        t0 = time.monotonic()
        report = api.integrity()
        rec["integrity_wait_s"] = round(time.monotonic() - t0, 1)
        assert report["ok"] is True and report["problems"] == [], report
        assert report["integrity_only"] is True and report["sealing"]["setup"] is True, report
        assert report["days"] and all(d["intact"] for d in report["days"]), report
        api.check_status()  # the report's problems would be the status's

        rec["poweroff_s"] = round(vm.powerdown(), 1)
    # off the box: the data disks hold the store encrypted (no message in plain text, a LUKS2
    # header on each), and no disk holds the recovery key or the verification key in clear
    for d in disks:
        assert luks_at_start(d), f"{d.name}: no LUKS2 header"
        assert found_in(d, [token.encode()]) == [], f"{d.name}: a message in plain text"
    keys = [recovery.encode(), vkey.encode(), bytes.fromhex(vkey)]
    for d in [boot, *disks]:
        assert found_in(d, keys) == [], f"{d.name}: a key in clear"
    STATE["first"] = {"boot": boot, "disks": disks, "token": token, "password": password}


def test_second_boot_with_one_disk_replaced(workdir: Path) -> None:
    """The same boot disk and one data disk, the other replaced by a blank one: the messages
    are all there, the array is degraded then rebuilding, new messages are stored."""
    if "first" not in STATE:
        pytest.skip("the first boot did not complete")
    first = STATE["first"]
    disks = [first["disks"][0], blank_disk(workdir / "b-data1.raw")]
    rec = REPORT["boots"].setdefault("second", {})
    # the blank disk's writes are throttled (8 MiB/s) so the rebuild of the 1 GiB mirror lasts
    # past readiness (unthrottled it is over in seconds under TCG, before the API answers)
    with Vm(workdir, first["boot"], disks, name="second", write_bps={1: 8 << 20}) as vm:
        ready = wait_ready(vm, "second")
        rec["ready_line"] = ready
        assert ready.endswith(", boot bios"), ready
        check_units(vm)
        console = vm.console()
        assert "logbox-firstboot: admin password" not in console
        # the store is the same: opened with its key file, no new keys, no secret shown again
        assert "(shown once)" not in console, vm.tail()
        assert "encrypted (LUKS2)" in console
        # degraded first: the array started with one of its two disks, then the blank one added
        assert re.search(r"md/raid1:md\d+: active with 1 out of 2 mirrors", console), vm.tail()
        assert re.search(r"logbox-storage: mdadm /dev/md\S+ --add /dev/vdc", console), vm.tail()
        api = Api(vm.ports[8444], first["password"])
        old = first["token"]
        assert api.total(old) == 50
        # new messages while the mirror rebuilds
        token = "imgB" + secrets.token_hex(6)
        send_tcp(vm.ports[514], token, 10)
        send_tls(vm.ports[6514], token, 10)

        raid, seen, short = wait_raid(api, {"clean"}, 300)
        rec["raid_states"] = seen
        states = [s[0] for s in seen]
        assert raid is not None and raid["level"] == "raid1", raid
        rebuilding = {"resyncing", "recovering", "rebuilding"}
        assert states[0] in {"degraded"} | rebuilding, f"states seen: {seen}"
        # degraded first: one of two mirrors active, and the status's health says so, why
        assert short is not None, f"the status never showed a disk missing: {seen}"
        rec["degraded_status"] = short
        assert short["raid"]["active"] == 1 and short["raid"]["disks"] == 2, short
        assert short["health"] == "degraded", short
        members = {m["device"]: m["state"] for m in short["raid"]["members"]}
        if short["raid"]["state"] in rebuilding:  # the blank disk (vdc) is the one rebuilt
            assert members == {"vdb": "in_sync", "vdc": "rebuilding"}, short
        else:
            assert members.get("vdb") == "in_sync", short
        assert any(p.startswith("raid: ") and "1 of 2 disks active" in p
                   for p in short["problems"]), short  # fmt: skip
        progress = [p for s in seen if s[0] in rebuilding for p in s[1:]]
        assert progress and all(p is not None and 0.0 <= p <= 1.0 for p in progress), seen
        assert raid["state"] == "clean" and raid["active"] == 2, f"not clean again: {seen}"
        api.check_status()

        assert api.wait_total(token, 20) == 20
        assert api.total(old) == 50
        assert Web(vm.ports[443], first["password"]).total(f"{old} OR {token}") == 70
        rec["poweroff_s"] = round(vm.powerdown(), 1)
    for d in disks:  # the blank disk that replaced one was added under the encryption
        assert found_in(d, [token.encode(), old.encode()]) == [], f"{d.name}: plain text"


def test_uefi_generated_password_and_one_disk(image: Path, workdir: Path) -> None:
    """UEFI boot; no first-boot file: the admin password is generated and printed once; it
    signs in to the API and (after the forced change) to the web UI; one data disk: no RAID."""
    boot = overlay(image, workdir / "c-boot.qcow2")
    disks = [blank_disk(workdir / "c-data0.raw")]
    rec = REPORT["boots"].setdefault("generated", {})
    tpm = workdir / "c-tpm"
    with Vm(workdir, boot, disks, name="generated", firmware="uefi", tpm=tpm) as vm:
        ready = wait_ready(vm, "generated")
        rec["ready_line"] = ready
        # UEFI: OVMF started GRUB from the EFI system partition, and the kernel knows it
        assert ready.endswith(", boot uefi"), ready
        assert re.search(r"efi: EFI v\S+ by EDK II", vm.console()), vm.tail()
        check_units(vm)
        shown = re.findall(r"logbox-firstboot: admin password \(shown once\): (\S+)", vm.console())
        assert len(shown) == 1, f"admin password lines: {shown}"
        password = shown[0]
        with requests.Session() as s:  # the API refuses the generated password until changed
            s.verify, s.trust_env = False, False
            r = s.post(
                f"https://127.0.0.1:{vm.ports[8444]}/api/v1/login",
                json={"username": "admin", "password": password},
                timeout=60,
            )
        assert r.status_code == 403, f"API login: {r.status_code} {r.text}"
        assert r.json()["error"]["code"] == "password_change_required", r.text
        web = Web(vm.ports[443], password, new_password=PASSWORD + "-new")
        assert web.changed, "the generated password was not to be changed at the first sign-in"
        api = Api(vm.ports[8444], PASSWORD + "-new")
        assert api.raid() is None
        token = "imgC" + secrets.token_hex(6)
        send_tcp(vm.ports[514], token, 5)
        assert api.wait_total(token, 5) == 5
        assert web.total(token) == 5
        api.check_status()
        check_system(api, vm, raid=False)
        recovery = shown_once(vm, "logbox-storage: store recovery key", RECOVERY_RX)
        vkey = shown_once(vm, "logbox-keys: verification key", "[0-9a-f]{64}")
        # a TPM2: the store's key is sealed to it, and no key file is made
        assert "its key sealed to the TPM2" in vm.console(), vm.tail()
        assert "its key is sealed to the TPM2 (PCR 7); no key file" in vm.console()
        rec["poweroff_s"] = round(vm.powerdown(), 1)
    STATE["generated"] = {"boot": boot, "disks": disks, "tpm": tpm, "token": token}
    # the one disk is a LUKS2 volume of its own, which the recovery key opens (and a wrong key
    # does not); nothing in plain text on it, no key in clear on either disk
    [data] = disks
    assert luks_at_start(data)
    assert found_in(data, [token.encode()]) == []
    for d in (boot, data):
        assert found_in(d, [recovery.encode(), vkey.encode(), bytes.fromhex(vkey)]) == [], d
    for key, rc in ((recovery, 0), (recovery[::-1], 2)):
        done = subprocess.run(
            ["cryptsetup", "open", "--test-passphrase", "--key-file", "-", str(data)],
            input=key.encode(),
            capture_output=True,
        )
        assert done.returncode == rc, (key == recovery, done.stderr)
    dump = subprocess.run(["cryptsetup", "luksDump", str(data)], capture_output=True, text=True)
    assert dump.returncode == 0 and "systemd-tpm2" in dump.stdout, dump.stdout + dump.stderr
    # two key slots: the recovery key and the TPM2's (the key file's was removed)
    assert len(re.findall(r"^\s+\d+: luks2$", dump.stdout, re.M)) == 2, dump.stdout


def test_uefi_second_boot_opens_the_store_with_the_tpm2(workdir: Path) -> None:
    """The same disks and the same TPM2: systemd-cryptsetup opens the store with the key
    sealed to the TPM2 (there is no key file), and the messages are all there."""
    if "generated" not in STATE:
        pytest.skip("the UEFI boot did not complete")
    gen = STATE["generated"]
    rec = REPORT["boots"].setdefault("generated-again", {})
    with Vm(workdir, gen["boot"], gen["disks"], name="generated-again", firmware="uefi",
            tpm=gen["tpm"]) as vm:  # fmt: skip
        rec["ready_line"] = wait_ready(vm, "generated-again")
        check_units(vm)
        console = vm.console()
        assert re.search(
            r"logbox-storage: /lib/systemd/systemd-cryptsetup attach logbox-store", console
        )
        assert "(shown once)" not in console, vm.tail()
        api = Api(vm.ports[8444], PASSWORD + "-new")
        assert api.total(gen["token"]) == 5
        api.check_status()
        rec["poweroff_s"] = round(vm.powerdown(), 1)
