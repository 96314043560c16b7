# Scenario: `make run`'s supervisor prepares the data directory from LOGBOX_DATA (syslog-ng
# configuration rendered from <data>/etc/collector.toml into the spool <data>/spool, dev TLS
# files), says what it started, delivers a message sent to each syslog port, restarts a daemon
# that dies within a second (syslog-ng with a fresh run token), and stops cleanly (exit 0) on
# Ctrl-C, syslog-ng first. It serves the RPC API
# over HTTPS (a self-signed <data>/tls/https.crt made once): the admin logs in with
# LOGBOX_ADMIN_PASSWORD, or else the random password printed exactly once on the first run is
# refused by the API until it is changed (403 password_change_required), and a message sent with `logger` over TCP is found through the API. It serves the web UI
# over HTTPS on its own port with the same certificate and accounts: the admin signs in through
# the login form (a generated password must be changed first), logspace settings saved on its
# admin page reach logbox-indexd (--logspaces), and the session key file is made once with mode
# 0600. It says at start that the store is not encrypted. A few seconds after indexd is up it
# runs `logbox verify --integrity --json --out` into <data>/run/integrity.json and prints what it
# found in one line; the API serves that report and the public key `logbox keys init` wrote.
from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from lbtest.collector import free_ports, octet, send_tcp, send_udp
from lbtest.devrun import DevRun
from lbtest.spool import FILE_RE, SpoolReader
from logbox_client import Client, LogboxError


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data directory whose collector listens on free ports."""
    data = tmp_path / "data"
    (data / "etc").mkdir(parents=True)
    ports = free_ports()
    (data / "etc" / "collector.toml").write_text(
        "[ports]\n" + "".join(f"{k} = {v}\n" for k, v in ports.items())
    )
    return data


@pytest.fixture
def devrun(top: Path, data: Path) -> Iterator[DevRun]:
    d = DevRun(top, data)
    yield d
    d.close()


def test_devrun_starts_and_stops_on_ctrl_c(devrun: DevRun, data: Path) -> None:
    devrun.until("press Ctrl-C")
    assert any(str(data) in ln for ln in devrun.lines), devrun.lines
    assert any(
        "the store is not encrypted (make run; the appliance encrypts it with LUKS2)" in ln
        for ln in devrun.lines
    ), devrun.lines
    assert any("started syslog-ng" in ln for ln in devrun.lines), devrun.lines
    assert data.is_dir()
    run = data / "run"
    assert (data / "spool").is_dir() and not (run / "indexd.fifo").exists()
    conf = (run / "syslog-ng.conf").read_text()
    assert f'file("{data}/spool/' in conf and "pipe(" not in conf
    for name in ("ca.crt", "server.crt", "server.key", "client.crt", "client.key"):
        assert (data / "tls" / name).is_file(), name
    assert stat.S_IMODE((data / "tls" / "server.key").stat().st_mode) == 0o600
    r = subprocess.run(
        ["openssl", "verify", "-CAfile", str(data / "tls/ca.crt"), str(data / "tls/server.crt")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    # a second make run on the same data directory refuses at once, saying who has it; the
    # first runs on untouched
    t0 = time.monotonic()
    second = subprocess.run(
        [sys.executable, str(devrun.top / "appliance/devrun.py")],
        env={**os.environ, "LOGBOX_DATA": str(data)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1 and time.monotonic() - t0 < 10, second.stdout
    assert f"{data} is in use by another make run (pid {devrun.proc.pid})" in second.stdout
    assert "started" not in second.stdout, second.stdout
    assert devrun.proc.poll() is None
    out = devrun.stop()
    assert devrun.proc.returncode == 0, out
    assert "all stopped" in out
    assert "restarting" not in out and "exited" not in out, out
    # syslog-ng stops first (it writes what it holds into the spool), then indexd
    stops = [ln.split()[-1] for ln in out.splitlines() if "logbox-run: stopped " in ln]
    assert stops[0] == "syslog-ng", out
    if "logbox-indexd" in stops:
        assert stops.index("logbox-indexd") > 0


def test_devrun_keeps_its_dev_ca_across_runs(top: Path, data: Path) -> None:
    first = DevRun(top, data)
    try:
        first.until("press Ctrl-C")
    finally:
        first.close()
    ca = (data / "tls" / "ca.crt").read_bytes()
    second = DevRun(top, data)
    try:
        second.until("press Ctrl-C")
    finally:
        second.close()
    assert (data / "tls" / "ca.crt").read_bytes() == ca
    assert not any("made a dev TLS CA" in ln for ln in second.lines)


def send_when_listening(port: int, data: bytes, timeout: float = 10) -> None:
    """send_tcp once syslog-ng listens (it starts after the supervisor says so)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return send_tcp(port, data)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def udp_bound(port: int, timeout: float = 10) -> None:
    """Waits until something has bound 127.0.0.1:port for UDP (/proc/net/udp): syslog-ng binds
    its sources one after the other, so its TCP port answering does not mean the UDP one is
    there yet, and a datagram sent before that is lost (ICMP port unreachable)."""
    want = f"0100007F:{port:04X}"
    deadline = time.monotonic() + timeout
    while True:
        with open("/proc/net/udp") as f:
            if any(line.split()[1] == want for line in f.readlines()[1:]):
                return
        assert time.monotonic() < deadline, f"nothing bound UDP 127.0.0.1:{port}"
        time.sleep(0.05)


def indexd_reads_spool(top: Path) -> bool:
    """Whether the built logbox-indexd reads the spool (--spool): make run passes it then."""
    indexd = top / "build" / "bin" / "logbox-indexd"
    if not indexd.exists():
        return False
    p = subprocess.run([str(indexd), "--help"], capture_output=True, text=True)
    return "--spool" in p.stdout + p.stderr


class Received:
    """The messages make run stored (through `logbox cat` once logbox-indexd reads the spool),
    else the records in the spool (read here, as indexd would; the message is the raw bytes,
    so what is compared is the end of them)."""

    def __init__(self, top: Path, data: Path) -> None:
        self.data = data
        self.cli = top / "build" / "bin" / "logbox"
        self.indexd = indexd_reads_spool(top)
        self.reader = SpoolReader(data / "spool")
        self.seen: set[bytes] = set()

    def poll(self) -> None:
        if not self.indexd:
            self.reader.poll()
            for r in self.reader.records:
                self.seen.add(r.raw)
                self.seen.add(r.raw.rsplit(b" - - - ", 1)[-1].rsplit(b": ", 1)[-1])
            return
        out = subprocess.run(
            [str(self.cli), "cat", "--data", str(self.data)], capture_output=True, text=True
        ).stdout
        for line in out.splitlines():
            msg = json.loads(line).get("message") or ""
            self.seen.add(msg.encode("utf-8", "surrogateescape"))

    def wait(self, msgs: set[bytes], timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while not msgs <= self.seen and time.monotonic() < deadline:
            time.sleep(0.1)
            self.poll()
        assert msgs <= self.seen, (msgs - self.seen, self.seen)

    def close(self) -> None:
        pass


def kill_and_see_restart(devrun: DevRun, name: str, pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    line = devrun.until("restarted")
    assert f"{name} exited with -9" in line
    assert time.monotonic() - t0 < 2.0


def test_devrun_delivers_messages_and_restarts_dead_daemons(
    devrun: DevRun, data: Path, top: Path
) -> None:
    devrun.until("press Ctrl-C")
    ports = dict(
        line.split(" = ") for line in (data / "etc/collector.toml").read_text().splitlines()[1:]
    )
    got = Received(top, data)
    try:
        send_when_listening(int(ports["tcp"]), b"<13>Nov 22 10:00:00 h p: via tcp\n")
        send_tcp(int(ports["octet"]), octet(b"<13>1 - h p - - - via octet"))
        udp_bound(int(ports["udp"]))
        send_udp(int(ports["udp"]), b"<13>1 - h p - - - via udp")
        got.wait({b"via octet", b"via tcp", b"via udp"})

        tokens = {FILE_RE.fullmatch(p.name)[2] for p in got.reader.files()}  # type: ignore[index]
        kill_and_see_restart(devrun, "syslog-ng", int((data / "run/syslog-ng.pid").read_text()))
        send_when_listening(int(ports["tcp"]), b"<13>Nov 22 10:00:00 h p: after restart\n")
        got.wait({b"after restart"})
        if not got.indexd:  # the files are still there: the restarted syslog-ng has a new token
            again = {FILE_RE.fullmatch(p.name)[2] for p in got.reader.files()}  # type: ignore[index]
            assert len(tokens) == 1 and len(again - tokens) == 1, (tokens, again)

        if got.indexd:
            status = json.loads((data / "run" / "indexd.status.json").read_text())
            kill_and_see_restart(devrun, "logbox-indexd", int(status["pid"]))
            send_tcp(int(ports["tcp"]), b"<13>Nov 22 10:00:00 h p: after indexd restart\n")
            got.wait({b"after indexd restart"})
    finally:
        got.close()
    out = devrun.stop()
    assert devrun.proc.returncode == 0 and "all stopped" in out


def test_devrun_refuses_bad_collector_settings(top: Path, data: Path) -> None:
    (data / "etc" / "collector.toml").write_text('[[logspace]]\nname = "Not Valid"\n')
    d = DevRun(top, data)
    out, _ = d.proc.communicate(timeout=30)
    assert d.proc.returncode == 1
    assert "collector:" in out and "name" in out


# ---------------------------------------------------------------- the RPC API


SHOWN_ONCE = re.compile(r"^logbox: admin password \(shown once\): (\S+)$", re.M)


def check_usage_and_system(d: DevRun, c: Client, data: Path) -> None:
    """GET /status's per-service figures (from /proc under make run) and GET /system, against
    what the processes and this machine say themselves."""
    started = {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"started (logbox-\S+|syslog-ng) \(pid (\d+)\)", "".join(d.lines))
    }
    svc = c.status()["services"]
    assert svc["searchd"]["pid"] == started["logbox-searchd"], (svc, started)
    assert svc["indexd"]["pid"] == started["logbox-indexd"], (svc, started)
    assert svc["syslog-ng"]["pid"] == int((data / "run/syslog-ng.pid").read_text())
    for name in ("syslog-ng", "indexd", "searchd"):
        res = svc[name]["resources"]
        pid = svc[name]["pid"]
        fields = (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1]).split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        assert res["source"] == "proc" and 0 <= cpu - res["cpu_s"] < 5, (name, res, cpu)
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        rss = pages * os.sysconf("SC_PAGE_SIZE")
        assert 0.5 * rss < res["rss_bytes"] < 2 * rss, (name, res, rss)
        assert isinstance(res["io_write_bytes"], int), res  # the same user: /proc/<pid>/io
        assert 0 <= svc[name]["uptime_s"] < time.time() - d.started + 2, svc[name]
    assert not {"rpc", "webui", "nginx"} & set(svc)  # units only: not under make run
    sysdoc = c.call("GET", "/system")
    u = os.uname()
    assert (
        sysdoc["host"]["kernel"] == f"{u.sysname} {u.release}"
        and sysdoc["host"]["arch"] == u.machine
    )
    assert sysdoc["cpu"]["cores"] == len(os.sched_getaffinity(0))
    assert sysdoc["memory"]["total_bytes"] == os.sysconf("SC_PHYS_PAGES") * os.sysconf(
        "SC_PAGE_SIZE"
    )
    head = subprocess.run(
        ["git", "-C", str(d.top), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert sysdoc["logbox"]["commit"] == (head or None)
    fstype = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "--target", str(data)], capture_output=True, text=True
    ).stdout.strip()
    assert sysdoc["store"]["filesystem"] == fstype and sysdoc["store"]["encrypted"] is False
    assert {x["name"] for x in sysdoc["disks"]} <= set(os.listdir("/sys/block"))
    assert "main" in sysdoc["settings"]["logspaces"] and "spool" in sysdoc["settings"]["inputs"]
    assert sysdoc["settings"]["indexd_max_memory_mb"] > 0


def test_devrun_serves_the_api_with_the_given_admin_password(top: Path, data: Path) -> None:
    password = "given-admin-password-42"
    d = DevRun(top, data, extra={"LOGBOX_ADMIN_PASSWORD": password})
    try:
        d.until("press Ctrl-C")
        assert any(
            "started logbox-rpc" in ln and f"https://127.0.0.1:{d.rpc_port}/api/v1" in ln
            for ln in d.lines
        ), d.lines
        c = d.api()
        assert c.login("admin", password).startswith("lbx_")
        assert "main" in [ls["name"] for ls in c.logspaces()]
        # The integrity report of the first verify, through the API, and the signing key.
        line = d.until("logbox-run: verify: ", timeout=90)
        report = data / "run" / "integrity.json"
        assert "verify: ok in " in line and f"report {report}" in line, line
        doc = json.loads(report.read_text())
        assert doc["ok"] is True and doc["integrity_only"] is True, doc
        assert "main" in [e["logspace"] for e in doc["logspaces"]], doc
        got = c.call("GET", "/logspaces/main/integrity")
        assert got["verified_at"] == doc["time"] and got["ok"] is True, got
        pem = c.request("GET", "/integrity/public-key").content
        assert pem == (data / "indexd" / "sign.pub").read_bytes()
        assert pem.startswith(b"-----BEGIN PUBLIC KEY-----")
        check_usage_and_system(d, c, data)
    finally:
        out = "".join(d.lines) + d.stop()
    assert d.proc.returncode == 0 and "stopped logbox-rpc" in out, out
    assert password not in out and not SHOWN_ONCE.search(out), out
    tls = data / "tls"
    assert stat.S_IMODE((tls / "https.key").stat().st_mode) == 0o600
    text = subprocess.run(
        ["openssl", "x509", "-in", str(tls / "https.crt"), "-noout", "-text"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "IP Address:127.0.0.1" in text and "DNS:localhost" in text
    assert "prime256v1" in text or "P-256" in text
    start, end = re.findall(r"Not (?:Before|After) *: (.+)", text)
    days = (
        time.mktime(time.strptime(end, "%b %d %H:%M:%S %Y GMT"))
        - time.mktime(time.strptime(start, "%b %d %H:%M:%S %Y GMT"))
    ) / 86400
    assert round(days) == 825


def test_devrun_prints_a_generated_admin_password_once(top: Path, data: Path) -> None:
    first = DevRun(top, data)
    try:
        first.until("press Ctrl-C")
        c = first.api()
    finally:
        out = "".join(first.lines) + first.stop()
    shown = SHOWN_ONCE.findall(out)
    assert len(shown) == 1, out
    password = shown[0]
    assert out.count(password) == 1 and len(password) >= 20
    cert = (data / "tls" / "https.crt").read_bytes()

    second = DevRun(top, data)
    try:
        second.until("press Ctrl-C")
        c = second.api()
        # the generated password works, but must be changed before the API accepts it
        with pytest.raises(LogboxError) as e:
            c.login("admin", password)
        assert (e.value.status, e.value.code) == (403, "password_change_required"), e.value
        with pytest.raises(LogboxError) as e:
            Client(c.url, verify=c.verify).login("admin", "not-the-password")
        assert e.value.status == 401
    finally:
        out = "".join(second.lines) + second.stop()
    assert not SHOWN_ONCE.search(out) and "admin password" not in out, out
    assert (data / "tls" / "https.crt").read_bytes() == cert


def test_devrun_api_finds_a_message_sent_by_logger(top: Path, data: Path) -> None:
    password = "given-admin-password-42"
    d = DevRun(top, data, extra={"LOGBOX_ADMIN_PASSWORD": password})
    try:
        d.until("press Ctrl-C")
        ports = dict(
            ln.split(" = ") for ln in (data / "etc/collector.toml").read_text().splitlines()[1:]
        )
        c = d.api()
        c.login("admin", password)
        word = f"devrun{os.getpid()}x{time.time_ns()}"
        deadline = time.monotonic() + 20
        sent = False
        while not sent:
            r = subprocess.run(
                ["logger", "--tcp", "--server", "127.0.0.1", "--port", ports["tcp"], "-t",
                 "probe", f"hello {word} over TCP"],
                capture_output=True,
                text=True,
            )  # fmt: skip
            sent = r.returncode == 0
            if not sent:
                assert time.monotonic() < deadline, r.stderr
                time.sleep(0.2)
        if not indexd_reads_spool(top):
            # make run starts no indexd that could store it: it waits in the spool
            spool = SpoolReader(data / "spool")
            while not any(word.encode() in r.raw for r in spool.records):
                assert time.monotonic() < deadline, d.lines
                spool.poll()
                time.sleep(0.2)
            return
        hits: list[dict] = []
        while not hits and time.monotonic() < deadline:
            hits = c.search(word)["hits"]
            time.sleep(0.2)
        assert len(hits) == 1, d.lines
        assert hits[0]["message"] == f"hello {word} over TCP" and hits[0]["program"] == "probe"
        assert c.count(word) == 1
        # gunicorn's master killed: restarted within a second, serving again (same token).
        pid = int(re.findall(r"started logbox-rpc \(pid (\d+)\)", "".join(d.lines))[0])
        kill_and_see_restart(d, "logbox-rpc", pid)
        t0 = time.monotonic()
        d.api(timeout=10)
        assert c.count(word) == 1
        assert time.monotonic() - t0 < 5
    finally:
        d.stop()


def test_devrun_refuses_a_short_admin_password(top: Path, data: Path) -> None:
    d = DevRun(top, data, extra={"LOGBOX_ADMIN_PASSWORD": "tiny-pw"})
    out, _ = d.proc.communicate(timeout=60)
    assert d.proc.returncode == 1, out
    assert (
        "logbox-rpc: cannot create the user admin with the password in LOGBOX_ADMIN_PASSWORD" in out
    )
    assert "tiny-pw" not in out and "started" not in out


# ---------------------------------------------------------------- the web UI


def webui(devrun: DevRun, timeout: float = 30) -> requests.Session:
    """A requests session for the web UI devrun serves (trusting its certificate), once
    GET /healthz answers 200 over HTTPS."""
    s = requests.Session()
    s.trust_env = False
    s.verify = str(devrun.data / "tls" / "https.crt")
    deadline = time.monotonic() + timeout
    while True:
        try:
            r = s.get(f"https://127.0.0.1:{devrun.webui_port}/healthz", timeout=5)
            if r.status_code == 200:
                return s
        except requests.RequestException as e:
            r = e  # type: ignore[assignment]
        if time.monotonic() > deadline:
            pytest.fail(f"the web UI did not answer within {timeout} s: {r}: {devrun.lines}")
        time.sleep(0.1)


def web_login(s: requests.Session, base: str, user: str, password: str) -> requests.Response:
    """POST /login with the form's csrf_token; the answer (redirects not followed)."""
    page = s.get(base + "/login", timeout=10)
    assert page.status_code == 200, page.text[:300]
    m = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page.text) or re.search(
        r'value="([^"]+)"[^>]*name="csrf_token"', page.text
    )
    assert m, page.text[:500]
    return s.post(
        base + "/login",
        data={"username": user, "password": password, "csrf_token": m.group(1)},
        headers={"Referer": base + "/login"},  # Flask-WTF checks it over HTTPS
        timeout=10,
        allow_redirects=False,
    )


def test_devrun_serves_the_web_ui(top: Path, data: Path) -> None:
    password = "given-admin-password-42"
    d = DevRun(top, data, extra={"LOGBOX_ADMIN_PASSWORD": password})
    try:
        d.until("press Ctrl-C")
        base = f"https://127.0.0.1:{d.webui_port}"
        assert any("started logbox-webui" in ln and base in ln for ln in d.lines), d.lines
        s = webui(d)
        assert s.get(base + "/healthz", timeout=10).text.strip() == "ok"
        r = s.get(base + "/search", timeout=10, allow_redirects=False)
        assert r.status_code in (302, 303) and "/login" in r.headers["Location"], r.status_code
        assert "default-src 'none'" in r.headers.get("Content-Security-Policy", "")
        bad = web_login(s, base, "admin", "not-the-password")
        assert bad.status_code not in (302, 303), bad.status_code
        r = web_login(s, base, "admin", password)
        assert r.status_code in (302, 303), (r.status_code, r.text[:300])
        assert "/password" not in r.headers["Location"]  # a given password need not change
        page = s.get(base + "/search", timeout=10)
        assert page.status_code == 200 and 'id="search-form"' in page.text, page.text[:300]
        cookie = next(c for c in s.cookies if c.name == "logbox_session")
        assert cookie.secure
        # Logspace settings saved in the web UI reach make run's indexd (--logspaces).
        status_file = data / "run" / "indexd.status.json"
        indexd = top / "build" / "bin" / "logbox-indexd"
        helptext = subprocess.run([str(indexd), "--help"], capture_output=True, text=True)
        if "--logspaces" not in helptext.stdout + helptext.stderr:
            return  # indexd without the option: make run does not pass it
        if not indexd_reads_spool(top):
            return  # an indexd without --spool: make run does not start it
        page = s.get(base + "/admin/logspaces", timeout=10)
        m = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page.text)
        assert page.status_code == 200 and m, page.text[:300]
        r = s.post(
            base + "/admin/logspaces/main",
            data={"csrf_token": m.group(1), "retention_days": "9", "delimiters": ",;"},
            headers={"Referer": base + "/admin/logspaces"},
            timeout=10,
            allow_redirects=False,
        )
        assert r.status_code == 303, (r.status_code, r.text[:500])
        written = json.loads((data / "etc" / "logspaces.json").read_text())
        assert written["logspaces"]["main"]["retention_days"] == 9, written
        deadline = time.monotonic() + 15
        while True:
            st = json.loads(status_file.read_text())
            main = st.get("logspaces", {}).get("main")
            if main and main.get("retention_days") == 9:
                break
            assert time.monotonic() < deadline, st
            time.sleep(0.2)
        assert st["settings"]["file"] == str(data / "etc" / "logspaces.json"), st["settings"]
        assert st["settings"]["error"] is None, st["settings"]
    finally:
        out = "".join(d.lines) + d.stop()
    assert d.proc.returncode == 0 and "stopped logbox-webui" in out, out
    secret = data / "etc" / "webui-secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert re.fullmatch(r"[0-9a-f]{64}\n?", secret.read_text())
    key = secret.read_bytes()
    again = DevRun(top, data, extra={"LOGBOX_ADMIN_PASSWORD": password})
    try:
        again.until("press Ctrl-C")
    finally:
        again.close()
    assert secret.read_bytes() == key  # made once


def test_devrun_web_ui_asks_for_a_new_generated_admin_password(top: Path, data: Path) -> None:
    d = DevRun(top, data)
    try:
        d.until("press Ctrl-C")
        out = "".join(d.lines)
        (password,) = SHOWN_ONCE.findall(out)
        base = f"https://127.0.0.1:{d.webui_port}"
        s = webui(d)
        r = web_login(s, base, "admin", password)
        assert r.status_code in (302, 303), (r.status_code, r.text[:300])
        assert "/password" in r.headers["Location"], r.headers["Location"]
        r = s.get(base + "/search", timeout=10, allow_redirects=False)
        assert r.status_code in (302, 303) and "/password" in r.headers["Location"]
        # The new password ends the constraint; the old one no longer signs in.
        page = s.get(base + "/password", timeout=10)
        m = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page.text)
        assert m, page.text[:300]
        new = "a-new-admin-password-1234"
        r = s.post(
            base + "/password",
            data={"csrf_token": m.group(1), "current": password, "new": new, "new2": new},
            headers={"Referer": base + "/password"},
            timeout=10,
            allow_redirects=False,
        )
        assert r.status_code in (302, 303), (r.status_code, r.text[:500])
        r = s.get(base + "/search", timeout=10, allow_redirects=False)
        assert r.status_code == 200, r.status_code
        fresh = requests.Session()
        fresh.trust_env, fresh.verify = False, s.verify
        assert web_login(fresh, base, "admin", password).status_code not in (302, 303)
        r = web_login(fresh, base, "admin", new)
        assert r.status_code in (302, 303) and "/password" not in r.headers["Location"]
    finally:
        d.stop()
