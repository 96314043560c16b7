# logbox-eps (issue 20) against `make run` (appliance/devrun.py on a data directory with free
# ports): a short ramp whose report exists and is well formed (JSON, Markdown, HTML with its
# charts), whose counts equal what the store holds (asked independently, per connection), and
# whose limit is the step before the one where the store fell behind (indexd stopped during
# it); a loss the test causes (syslog-ng stopped while UDP is sent) is found and reported; bad
# input (unreachable API, wrong token, TLS with the wrong CA, a corpus that does not exist, bad
# arguments) gives a clear message and its exit status, never a traceback.
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from lbtest.collector import free_port, free_ports
from lbtest.devrun import DevRun
from logbox_client import Client

TOP = Path(__file__).resolve().parent.parent
EPS = [sys.executable, str(TOP / "rpc" / "logbox-eps")]
PASSWORD = "eps-test-" + "k" * 16


class Box:
    """`make run` on a data directory, with an admin token."""

    def __init__(self, devrun: DevRun, ports: dict[str, int], token: str) -> None:
        self.devrun = devrun
        self.ports = ports
        self.token = token
        self.api = f"https://127.0.0.1:{devrun.rpc_port}"
        self.ca = str(devrun.data / "tls" / "https.crt")
        self.client = Client(self.api, token=token, verify=self.ca)

    def eps(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """logbox-eps against this box; its exit status and output."""
        argv = [*EPS, "--host", "127.0.0.1", "--api", self.api, "--api-ca", self.ca,
                "--token", self.token, "--quiet", *args]  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)

    def pid(self, name: str) -> int:
        """The pid of one of make run's daemons (indexd, syslog-ng) from the status."""
        st = Client(self.api, token=self.token, verify=self.ca).status()
        return int(st["services"][name]["pid"])


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    data = tmp_path_factory.mktemp("eps") / "data"
    (data / "etc").mkdir(parents=True)
    ports = free_ports()
    (data / "etc" / "collector.toml").write_text(
        "[ports]\n" + "".join(f"{k} = {v}\n" for k, v in ports.items())
    )
    d = DevRun(TOP, data, extra={"LOGBOX_ADMIN_PASSWORD": PASSWORD})
    try:
        d.until("logbox-nginx", 120)
        c = Client(f"https://127.0.0.1:{d.rpc_port}", verify=str(data / "tls" / "https.crt"))
        deadline = time.monotonic() + 60
        while True:
            try:
                c.login("admin", PASSWORD)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield Box(d, ports, c.create_token(name="eps")["token"])
    finally:
        d.close()


class Page(HTMLParser):
    """The ids, the SVG charts and the table rows of an HTML page (it must parse)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}
        self.svgs = 0
        self.rows = 0
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids[a["id"] or ""] = tag
        self.svgs += tag == "svg"
        self.rows += tag == "tr"


def stored_per_connection(box: Box, run: str) -> dict[int, int]:
    """The store's count of each connection of a step's run, one count query each (not the
    tool's top values): the oracle."""
    out = {}
    for c in range(1, 9):
        n = box.client.count(f"eps@32473.run:{run} AND eps@32473.c:{c}", from_=time.time() - 7200)
        if n:
            out[c] = n
    return out


def test_ramp_report_counts_and_limit(box: Box, tmp_path: Path) -> None:
    """Three steps; indexd is stopped (SIGSTOP) during the third, so the store falls behind
    there: the limit is the second step's, and every count is the store's."""
    out = tmp_path / "report"
    indexd = box.pid("indexd")
    before = box.client.status().get("stored") or 0
    first_two = 1500 * 2 + 3000 * 2  # the first two steps' messages (2 s each)

    def stop_indexd_in_the_third() -> None:
        """Once the store holds the first two steps, the third is about to be sent."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if (box.client.status().get("stored") or 0) - before >= first_two - 30:
                os.kill(indexd, signal.SIGSTOP)
                return
            time.sleep(0.1)

    stopper = threading.Thread(target=stop_indexd_in_the_third, daemon=True)
    stopper.start()
    try:
        r = box.eps("--port", str(box.ports["tcp"]), "--connections", "3", "--start", "1500",
                    "--step", "1500", "--max", "4500", "--hold", "2", "--lag", "4", "--settle", "2",
                    "--out", str(out))  # fmt: skip
    finally:
        os.kill(indexd, signal.SIGCONT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    doc = json.loads((out / "report.json").read_text())
    steps = doc["steps"]
    assert [s["passed"] for s in steps] == [True, True, False], steps
    assert doc["result"]["sustained_target_eps"] == 3000
    assert steps[2]["behind"] and "fell behind" in doc["result"]["why_failed"]
    # every count is what the store holds, per connection (asked here, another way)
    time.sleep(1)
    for s in steps[:2]:
        per = stored_per_connection(box, s["run"])
        assert sum(per.values()) == s["stored"] == s["sent"], (s, per)
        assert s["lost"] == 0 and s["duplicates"] == 0
    md = (out / "report.md").read_text()
    assert re.search(r"^\| 3,000 \| [\d,]+ \| [\d,]+ \| [\d,]+ \| 0 \| 0 \|", md, re.M), md
    page = Page((out / "report.html").read_text())
    assert {"sustained", "steps", "settings"} <= set(page.ids), page.ids
    assert page.svgs >= 2 and page.rows == 1 + len(steps)


def test_udp_loss_is_found(box: Box, tmp_path: Path) -> None:
    """syslog-ng stopped (SIGSTOP) while a step of UDP is sent: its socket buffer fills, the
    kernel drops datagrams, and the report says how many were lost, per connection."""
    sng = box.pid("syslog-ng")
    os.kill(sng, signal.SIGSTOP)
    # going on once the step is sent (it starts 0.5 s after the tool, holds 2 s): what its
    # socket buffer kept is then stored, the rest was dropped
    resume = threading.Timer(4.0, os.kill, (sng, signal.SIGCONT))
    resume.start()
    try:
        r = box.eps("--transport", "udp", "--port", str(box.ports["udp"]), "--connections", "2",
                    "--size", "1200", "--start", "20000", "--max", "20000", "--hold", "2",
                    "--lag", "1", "--settle", "3", "--out", str(tmp_path / "r"))  # fmt: skip
    finally:
        resume.cancel()
        os.kill(sng, signal.SIGCONT)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    [step] = doc["steps"]
    assert not step["passed"] and step["lost"] > 0, step
    assert sum(step["lost_per_connection"].values()) == step["lost"]
    time.sleep(2)
    # what the store holds, asked here, is what was sent less what the report calls lost
    held = box.client.count(f"eps@32473.run:{step['run']}", from_=time.time() - 7200)
    assert held == step["sent"] - step["lost"], (held, step)


@pytest.mark.parametrize(
    ("args", "status", "says"),
    [
        (["--api", "https://127.0.0.1:{dead}"], 3, "unavailable"),
        (["--token", "lbx_not_a_token"], 3, "unauthorized"),
        (["--transport", "tls", "--port", "{tls}", "--ca", "{ca}"], 5, "not trusted"),
        (["--corpus", "/nonexistent/corpus.log"], 5, "No such file"),
        (["--port", "{dead}"], 5, "cannot connect"),
        (["--size", "10"], 2, "--size"),
    ],
)
def test_bad_input(box: Box, tmp_path: Path, args: list[str], status: int, says: str) -> None:
    fill = {"dead": str(free_port()), "tls": str(box.ports["tls"]), "ca": box.ca}
    argv = [a.format(**fill) for a in args]
    if "--port" not in argv:
        argv += ["--port", str(box.ports["tcp"])]
    r = box.eps(*argv, "--start", "100", "--max", "100", "--hold", "1", "--out",
                str(tmp_path / "r"))  # fmt: skip
    assert r.returncode == status, r.stdout + r.stderr
    assert says in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
