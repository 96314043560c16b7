# logbox-eps (issue 20) against `make run` (appliance/devrun.py on a data directory with free
# ports): a short ramp whose report exists and is well formed (JSON, Markdown, HTML with its
# charts), whose counts equal what the store holds (asked independently, per connection), and
# whose limit is the step before the one where the store fell behind (indexd stopped during
# it); a loss the test causes (syslog-ng stopped while UDP is sent) is found and reported; bad
# input (unreachable API, wrong token, TLS with the wrong CA, a corpus that does not exist, bad
# arguments) gives a clear message and its exit status, never a traceback. A ramp with
# searchers times every class of the built-in query mix, and the report holds the searches,
# the services' CPU, memory and disk I/O, and the two machines; a --search-mix that cannot be
# read is a bad argument. Without a box: the search mix file's parsing, the percentiles, the
# per-service rates of /status samples and the progress line.
from __future__ import annotations

import io
import json
import os
import random
import re
import secrets
import signal
import socket
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
from logbox_core.accounts import rfc3339

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "rpc"))
from logbox_eps import measure, progress, report, resources, searchers  # noqa: E402

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
        c = d.api("admin", PASSWORD)
        yield Box(d, ports, c.create_token(name="eps")["token"])
    finally:
        d.close()


class Page(HTMLParser):
    """The ids, the SVG charts (in all and per section) and the rows of each table with an id
    of an HTML page (it must parse)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}
        self.svgs = 0
        self.section_svgs: dict[str, int] = {}
        self.rows: dict[str, int] = {}
        self._table: str | None = None
        self._section: str | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids[a["id"] or ""] = tag
        if tag == "table":
            self._table = a.get("id")
        if tag == "section":
            self._section = a.get("id")
        if tag == "svg":
            self.svgs += 1
            if self._section:
                self.section_svgs[self._section] = self.section_svgs.get(self._section, 0) + 1
        if tag == "tr" and self._table:
            self.rows[self._table] = self.rows.get(self._table, 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        if tag == "section":
            self._section = None


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
    # target, sent, sent EPS, stored, stored EPS (stored / hold), lost, duplicates
    row = r"^\| 3,000 \| [\d,]+ \| [\d,]+ \| [\d,]+ \| [\d,]+ \| 0 \| 0 \|"
    assert re.search(row, md, re.M), md
    assert all(s["stored_eps"] == s["stored"] / 2 for s in steps)
    page = Page((out / "report.html").read_text())
    assert {"sustained", "steps", "settings", "legend", "machine"} <= set(page.ids), page.ids
    assert page.svgs >= 2 and page.rows["steps"] == 1 + len(steps)
    assert "\r" not in r.stderr  # no progress line when stderr is not a terminal


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


def test_searchers_services_machine(box: Box, tmp_path: Path) -> None:
    """Two steps with two searchers: every class of the built-in mix is asked and timed in
    each step, the counts are the latencies recorded, the built-in queries find what the load
    carries; the services' CPU, memory and disk I/O and the two machines are in all three
    forms of the report."""
    out = tmp_path / "report"
    # the second searcher stands for another user (a searcher of main), with its own token
    user = f"eps{secrets.token_hex(3)}"
    box.client.call("POST", "/users", body={"name": user, "password": secrets.token_hex(12),
                    "role": "searcher", "logspaces": ["main"]})  # fmt: skip
    other = box.client.create_token(name="eps-searcher", user=user)["token"]
    t0 = time.time()
    r = box.eps("--port", str(box.ports["tcp"]), "--connections", "2", "--start", "500",
                "--step", "500", "--max", "1000", "--hold", "3", "--lag", "5", "--settle", "2",
                "--searchers", "2", "--search-token", box.token, "--search-token", other,
                "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads((out / "report.json").read_text())["settings"]["search_users"] == 2
    asked = box.client.call("GET", "/audit", params={"user": user, "limit": "1000"})["entries"]
    mine = [e for e in asked if e["logspace"] == "main" and e["status"] == 200]
    assert mine and all(e["time"] >= rfc3339(t0) for e in mine), asked[:3]
    assert "Traceback" not in r.stderr and "\r" not in r.stderr
    doc = json.loads((out / "report.json").read_text())
    steps = doc["steps"]
    assert [s["passed"] for s in steps] == [True, True], steps
    mix = doc["settings"]["search_mix"]
    classes = [c for c, _ in mix]
    assert classes == ["term", "and", "phrase", "wildcard", "field", "count", "histogram", "top"]
    for s in steps:
        f = s["searches"]
        assert f["errors"] == 0 and f["timeouts"] == 0, f["error_examples"]
        assert f["count"] == len(f["latencies"]) > 0
        assert sum(c["count"] for c in f["classes"].values()) == f["count"]
        assert set(f["classes"]) == set(classes)
        for cls, c in f["classes"].items():
            mine = sorted(x["ms"] for x in f["latencies"] if x["class"] == cls)
            assert c["count"] == len(mine) > 0, (cls, c)
            assert all(ms > 0 for ms in mine)
            want = [searchers.percentile(mine, p) for p in (50, 95, 99)]
            assert [c["p50_ms"], c["p95_ms"], c["p99_ms"]] == want and 0 < want[0] <= want[2]
        assert all(s["started"] + 0.4 <= x["t"] <= s["ended"] for x in f["latencies"])
    # the built-in queries find the load's messages (filler words, the connection field)
    since = time.time() - 3600
    for cls, q in mix:
        if cls not in ("count", "histogram", "top"):
            assert box.client.count(q, from_=since) > 0, (cls, q)
    md = (out / "report.md").read_text()
    assert "## Searches under load" in md and "| 1,000 | phrase |" in md
    page = Page((out / "report.html").read_text())
    assert {"searches", "services", "machine"} <= set(page.ids), page.ids
    assert page.section_svgs.get("searches") == 1
    # the machines: the load machine's sender processes, the box's own description
    load = doc["machine"]["load"]
    assert load["sender_processes"] == min(os.cpu_count() or 1, 2)
    assert load["python"] and load["cores"] and load["logbox_eps"]
    # the services: every one the box runs, with figures; indexd works during every step
    names = set(box.client.status()["services"])
    assert all(set(s["services"]) == names for s in steps), steps[0]["services"]
    indexd = [s["services"]["indexd"] for s in steps]
    assert all(x["intervals"] >= 2 for x in indexd), indexd
    assert all(x["cpu_pct"]["peak"] > 0 for x in indexd), indexd
    assert all(x["rss_mib"]["peak"] > 0 for x in indexd)
    assert page.section_svgs.get("services", 0) >= 2
    assert re.search(r"^\| 500 \| indexd \| [\d.]+ / [\d.]+ \|", md, re.M), md
    box_machine = doc["machine"]["box"]
    assert box_machine["cpu"]["cores"] >= 1 and box_machine["memory"]["total_bytes"] > 0
    assert box_machine["logbox"]["version"]


@pytest.mark.parametrize(
    ("args", "status", "says"),
    [
        (["--api", "https://127.0.0.1:{dead}"], 3, "unavailable"),
        (["--token", "lbx_not_a_token"], 3, "unauthorized"),
        (["--transport", "tls", "--port", "{tls}", "--ca", "{ca}"], 5, "not trusted"),
        (["--corpus", "/nonexistent/corpus.log"], 5, "No such file"),
        (["--port", "{dead}"], 5, "cannot connect"),
        (["--size", "10"], 2, "--size"),
        (["--searchers", "1", "--search-mix", "/nonexistent/mix.tsv"], 2, "No such file"),
        (["--searchers", "1", "--search-mix", "{badmix}"], 2, "expected class<TAB>query"),
        (["--search-mix", "{badmix}"], 2, "--searchers N, which is not given"),
    ],
)
def test_bad_input(box: Box, tmp_path: Path, args: list[str], status: int, says: str) -> None:
    badmix = tmp_path / "mix.tsv"
    badmix.write_text("term\talpha\nno tab here\n")
    fill = {"dead": str(free_port()), "tls": str(box.ports["tls"]), "ca": box.ca,
            "badmix": str(badmix)}  # fmt: skip
    argv = [a.format(**fill) for a in args]
    if "--port" not in argv:
        argv += ["--port", str(box.ports["tcp"])]
    r = box.eps(*argv, "--start", "100", "--max", "100", "--hold", "1", "--out",
                str(tmp_path / "r"))  # fmt: skip
    assert r.returncode == status, r.stdout + r.stderr
    assert says in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_search_mix_file(tmp_path: Path) -> None:
    """One `class<TAB>query` a line; comments and empty lines skipped; the query keeps its
    inner tabs and quotes; a file of nothing but comments is refused."""
    f = tmp_path / "mix.tsv"
    f.write_text('# a comment\n\nterm\terror\nphrase\t"connection refused"\ntop:host\t*\n')
    assert searchers.read_mix(f) == [
        ("term", "error"), ("phrase", '"connection refused"'), ("top:host", "*")
    ]  # fmt: skip
    f.write_text("# nothing\n")
    with pytest.raises(searchers.MixError, match="no queries"):
        searchers.read_mix(f)


def test_percentiles_nearest_rank() -> None:
    """p50/p95/p99 are values that were measured (nearest rank), in order, and the counts
    split into answered, errors and time-outs."""
    ms = [float(x) for x in range(1, 101)]
    assert [searchers.percentile(ms, p) for p in (50, 95, 99, 100)] == [50.0, 95.0, 99.0, 100.0]
    assert searchers.percentile([7.0], 99) == 7.0 and searchers.percentile([], 50) is None
    done = [{"t": 0, "class": "a", "ms": m} for m in ms]
    failed = [{"t": 0, "class": "a", "ms": 1, "timeout": t, "error": "e"} for t in (0, 0, 1)]
    f = searchers.figures(done, failed, 10)
    assert (f["count"], f["errors"], f["timeouts"], f["per_s"]) == (100, 2, 1, 10.0)


def test_service_rates() -> None:
    """CPU % is the CPU seconds' delta over the seconds between samples; an interval whose
    figures went down (a restart), changed source or are missing is left out; a box that
    reports nothing gives None."""

    def at(t: float, cpu: float | None, rss: int = 2**20, src: str = "proc") -> dict:
        res = (
            None
            if cpu is None
            else {
                "source": src,
                "cpu_s": cpu,
                "rss_bytes": rss,
                "io_read_bytes": None,
                "io_write_bytes": int(cpu * 1e6),
            }
        )
        return {"t": t, "services": {"indexd": res}}  # fmt: skip

    samples = [at(0, 1.0), at(1, 1.5), at(2, 2.5, 3 * 2**20), at(3, 0.1), at(4, 0.2, src="cgroup"),
               at(5, None), at(6, 1.0)]  # fmt: skip
    rows = resources.intervals(samples)["indexd"]
    assert [r["cpu_pct"] for r in rows] == [50.0, 100.0]
    assert [r["rss_mib"] for r in rows] == [1.0, 3.0]
    assert rows[0]["read_mbs"] is None and rows[1]["write_mbs"] == 1.0
    f = resources.step_figures(samples)["indexd"]
    assert f["intervals"] == 2 and f["cpu_pct"] == {"mean": 75.0, "peak": 100.0}
    assert resources.step_figures([at(0, None), at(1, None)]) is None
    # the box's own times, when given, are the interval (an answer that arrived late, here
    # at 2.9 instead of 2, does not make a spike); the arrival times when one has none
    late = [at(0, 0.0), at(1, 0.5), at(2.9, 1.0), at(3, 1.5)]
    for x, box_t in zip(late, (100.0, 101.0, 102.0, 103.0), strict=True):
        x["box_t"] = box_t
    assert [r["cpu_pct"] for r in resources.intervals(late)["indexd"]] == [50.0, 50.0, 50.0]
    late[2]["box_t"] = None
    assert [round(r["cpu_pct"]) for r in resources.intervals(late)["indexd"]] == [50, 26, 500]
    assert measure.box_time("2026-11-22T18:00:00.500000Z") == 1795370400.5
    assert measure.box_time(None) is None and measure.box_time("garbled") is None


def test_progress_line() -> None:
    """The line says the step, its rate, sent against due, stored since the step began, lag
    and searches per second."""

    class Load:
        def sent_now(self) -> int:
            return 1480

    class Sampler:
        samples = [{"stored": 100, "spool_lag_s": 0.0}, {"stored": 1300, "spool_lag_s": 0.4}]

    class Finding:
        def answered(self) -> int:
            return 30

    c = progress.Current(hold=30)
    c.begin(2, 1000.0, 100.0, Load(), Sampler(), Finding())
    text = progress.line(c, 101.5)
    assert text == ("step 3 · 1,000 EPS · sent 1,480/1,500 · stored 1,200 · lag 0.4 s · "
                    "20.0 searches/s · 2/30 s")  # fmt: skip
    # drawn in place (a carriage return each time), one newline at the end
    out = io.StringIO()
    c.start = time.time()
    bar = progress.Progress(out, c, interval=0.05).start()
    time.sleep(0.3)
    bar.stop()
    drawn = out.getvalue()
    assert drawn.count("\r") >= 2 and drawn.endswith("\n") and drawn.count("\n") == 1
    assert "step 3 · 1,000 EPS" in drawn


def test_report_of_an_older_box(tmp_path: Path) -> None:
    """A box without per-service resources and without GET /system: the report says so in
    each form, and still has every section."""
    from logbox_eps import cli, report

    a = cli.parse(["--host", "h", "--token", "t", "--hold", "2"])
    samples = [{"t": t, "eps_1s": 1.0, "stored": t, "spool_lag_s": 0.0,
                "services": {"indexd": None, "searchd": None}} for t in (0.0, 1.0, 2.0)]  # fmt: skip
    step = {"step": 0, "run": "r", "target_eps": 1000.0, "sent": 2000, "sent_eps": 1000.0,
            "stored": 2000, "stored_eps": 1000.0, "lost": 0, "lost_per_connection": {},
            "duplicates": 0, "duplicates_exact": True, "catch_up_s": 0.1, "behind": False,
            "passed": True, "started": 0.0, "ended": 2.0, "searches": None,
            "services": resources.step_figures(samples), "samples": samples}  # fmt: skip
    assert step["services"] is None
    system = cli.box_system_error("not_found", "no such route")
    doc = report.document(a, "r", {"raid": None}, system, [step], [], 2)
    report.write(tmp_path, doc)
    md = (tmp_path / "report.md").read_text()
    assert "CPU, memory and disk I/O: not reported by the box" in md
    assert "| version | not reported by the box (GET /api/v1/system: 404" in md
    page = Page((tmp_path / "report.html").read_text())
    assert {"searches", "services", "machine", "legend"} <= set(page.ids)
    assert json.loads((tmp_path / "report.json").read_text())["machine"]["box"]["error"]


def test_datagrams_in_batches() -> None:
    """dgram.Batcher: every message one datagram, in order, whatever the sizes and however
    many calls the batch takes (more than one BATCH); a closed port is an OSError."""
    from logbox_eps.dgram import BATCH, Batcher

    assert Batcher.available()
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    rx.bind(("127.0.0.1", 0))
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.connect(rx.getsockname())
    rng = random.Random(20)
    msgs = [bytes([65 + i % 26]) * rng.randint(1, 1400) + b"#%d" % i for i in range(BATCH + 300)]
    b = Batcher(tx)
    b.send(msgs[:10])
    b.send(msgs[10:])
    b.send([])
    rx.settimeout(5)
    got = [rx.recv(65536) for _ in msgs]
    assert got == msgs
    port = rx.getsockname()[1]
    rx.close()
    dead = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dead.connect(("127.0.0.1", port))
    with pytest.raises(OSError):
        for _ in range(3):  # the ICMP answer to the first makes a later one fail
            Batcher(dead).send([b"x"])
            time.sleep(0.1)


def test_limit_note() -> None:
    """The sustained figure is the highest sent EPS of a passed step; when no step failed the
    report says it is not the box's limit, and why: the load machine was short, or --max."""

    def step(target: float, sent: float, passed: bool = True) -> dict:
        return {"target_eps": target, "sent_eps": sent, "passed": passed,
                "short": sent < report.SHORT * target}  # fmt: skip

    short = [step(100, 100), step(200, 199), step(300, 250), step(400, 240)]
    best = max(short, key=lambda s: s["sent_eps"])
    assert best["target_eps"] == 300
    note = report.limit_note(short, None, best, 400)
    assert note is not None and "sent at most 250 EPS" in note and "from the 300 EPS step" in note
    full = [step(100, 100), step(200, 199)]
    assert "reached --max (200 EPS)" in (report.limit_note(full, None, full[1], 200) or "")
    failed = [step(100, 100), step(200, 150, passed=False)]
    assert report.limit_note(failed, failed[1], failed[0], 400) is None
