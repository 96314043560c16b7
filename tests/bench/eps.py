#!/usr/bin/env python3
"""logbox-eps benchmark (issue 20; `make bench-eps`, run by `make bench` too; not a test: a
figure is reported, never a failure).

1. The sender beside loggen: how fast logbox-eps's load (rpc/logbox_eps/load.py, its own
   processes) and syslog-ng's loggen each send 300-byte messages over 2 connections, by TCP
   (newline framing), TLS (octet counting; loggen held to TLS 1.2, see ingest_systems.py) and
   UDP, into a sink on this machine that reads and throws away (eps_sink.c: C, a thread per
   connection, TLS through OpenSSL; for UDP it counts the datagrams it got). Each sender is asked for more than it
   can send for --seconds, rounds alternating; the figure is what each says it sent per
   second (loggen's "average rate"), median of the rounds, and for UDP what reached the sink.
   The sink shares the two cores with the sender, as a box under test would not: the figures
   are each sender's rate here, side by side, not a network's.
2. A sample report: `make run` (appliance/devrun.py on <out>/eps/data, its own ports) measured
   by logbox-eps from this same machine: a step ramp with searchers; report.html, .json and
   .md copied to <out>/eps/.
3. The headline figures beside SSB's published 100,000 EPS (its largest appliance) and what
   VictoriaLogs stored in the ingest benchmark (<out>/ingest.json, when `make bench-ingest`
   has run).
Writes <out>/eps.md and eps.json. See tests/bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "tests"))
sys.path.insert(0, str(TOP / "rpc"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import add_out_option, machine, machine_line, median, say, write_report  # noqa: E402
from ingest_systems import OPENSSL_TLS12, tls_material  # noqa: E402
from logbox_eps.load import Load, Step, Target  # noqa: E402

SIZE = 300
CONNS = 2
SSB_EPS = 100_000  # SSB's published figure for its largest appliance
LOGGEN_RATE = re.compile(r"average rate = ([\d.]+) msg/sec")


# ---------------------------------------------------------------- the sink


def build_sink(work: Path) -> Path:
    """tests/bench/eps_sink.c built into work (again when the source is newer)."""
    src = Path(__file__).resolve().parent / "eps_sink.c"
    exe = work / "eps_sink"
    if not exe.is_file() or exe.stat().st_mtime < src.stat().st_mtime:
        done = subprocess.run(
            ["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(src),
             "-lssl", "-lcrypto", "-lpthread"],
            capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            sys.exit(f"bench-eps: building {src.name} failed: {done.stderr}")
    return exe


class Sink:
    """eps_sink for one transport: reads and throws away; close() says what it received."""

    def __init__(self, exe: Path, transport: str, cert: Path, key: Path) -> None:
        argv = [str(exe), transport] + ([str(cert), str(key)] if transport == "tls" else [])
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def close(self) -> int:
        """Stops it (after half a second for what is in flight); bytes or datagrams got."""
        time.sleep(0.5)
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        m = re.search(r"received (\d+)", out)
        return int(m.group(1)) if m else 0


# ---------------------------------------------------------------- the senders


def eps_sender(transport: str, port: int, ca: Path, seconds: float) -> float:
    """logbox-eps's load asked for 5 M msg/s for seconds: what it sent per second."""
    t = Target("127.0.0.1", port, transport, "octet" if transport == "tls" else "newline", ca)
    load = Load(t, f"bench{int(time.time())}", CONNS, SIZE)
    start = time.time() + 0.5
    sent = load.run_steps([Step(5_000_000, seconds)], start=start)
    return sum(sent.counts.values()) / seconds


def loggen_sender(transport: str, port: int, seconds: float, ossl: Path) -> float:
    """loggen as fast as it goes for seconds: its own average rate."""
    env = dict(os.environ)
    argv = ["loggen", "-r", "1000000000", "-I", str(int(seconds)), "-s", str(SIZE)]
    argv += ["--active-connections", str(CONNS)]
    if transport == "tls":
        argv += ["-U", "-P"]
        env["OPENSSL_CONF"] = str(ossl)
    elif transport == "udp":
        argv += ["-i", "-D"]
    else:
        argv += ["-i", "-S"]
    done = subprocess.run(
        [*argv, "127.0.0.1", str(port)], env=env, capture_output=True, text=True, timeout=120
    )
    m = LOGGEN_RATE.findall(done.stdout + done.stderr)
    if not m:
        raise RuntimeError(f"loggen said no rate: {(done.stdout + done.stderr)[-500:]}")
    return float(m[-1])


def senders(work: Path, seconds: float, rounds: int) -> dict[str, Any]:
    """Part 1: per transport and sender, the rate of each round, the median; UDP: received."""
    ca, cert, key = tls_material(work)
    exe = build_sink(work)
    ossl = work / "openssl-tls12.cnf"
    ossl.write_text(OPENSSL_TLS12)
    have_loggen = shutil.which("loggen") is not None
    out: dict[str, Any] = {}
    for transport in ("tcp", "tls", "udp"):
        rec: dict[str, Any] = {"logbox-eps": [], "loggen": [], "received": {}}
        for r in range(rounds):
            order = ["logbox-eps", "loggen"] if r % 2 == 0 else ["loggen", "logbox-eps"]
            for who in order:
                if who == "loggen" and not have_loggen:
                    continue
                sink = Sink(exe, transport, cert, key)
                try:
                    if who == "loggen":
                        rate = loggen_sender(transport, sink.port, seconds, ossl)
                    else:
                        rate = eps_sender(transport, sink.port, ca, seconds)
                finally:
                    got = sink.close()
                rec[who].append(round(rate))
                if transport == "udp":
                    rec["received"].setdefault(who, []).append(round(got / seconds))
                say(f"  {transport} {who}: {rate:,.0f} msg/s")
        rec["median"] = {w: median(rec[w]) for w in ("logbox-eps", "loggen") if rec[w]}
        m = rec["median"]
        rec["ratio"] = (
            round(m["logbox-eps"] / m["loggen"], 2)
            if m.get("loggen") and "logbox-eps" in m
            else None
        )
        out[transport] = rec
    return out


# ---------------------------------------------------------------- the sample report


def sample_report(work: Path, a: argparse.Namespace) -> dict[str, Any]:
    """Part 2: logbox-eps against `make run` on this machine; its report's headline."""
    from lbtest.collector import free_ports
    from lbtest.devrun import DevRun

    data = work / "data"
    if data.exists():
        shutil.rmtree(data)
    (data / "etc").mkdir(parents=True)
    ports = free_ports()
    (data / "etc/collector.toml").write_text(
        "[ports]\n" + "".join(f"{k} = {v}\n" for k, v in ports.items())
    )
    password = "bench-eps-" + os.urandom(6).hex()
    d = DevRun(TOP, data, extra={"LOGBOX_ADMIN_PASSWORD": password})
    report = work / "report"
    try:
        d.until("press Ctrl-C", 180)
        api = f"https://127.0.0.1:{d.rpc_port}"
        c = d.api("admin", password)
        token = c.create_token(name="bench-eps")["token"]
        argv = [
            sys.executable, str(TOP / "rpc/logbox-eps"), "--host", "127.0.0.1",
            "--port", str(ports["tcp"]), "--api", api, "--api-ca", str(data / "tls/https.crt"),
            "--token", token, "--connections", str(a.connections), "--start", str(a.start),
            "--step", str(a.step), "--max", str(a.max), "--hold", str(a.hold), "--lag", "5",
            "--settle", "5", "--searchers", str(a.searchers), "--out", str(report), "--quiet",
        ]  # fmt: skip
        say("  " + " ".join(argv[1:]).replace(token, "TOKEN"))
        done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"logbox-eps: {done.returncode}: {done.stderr[-2000:]}")
    finally:
        d.close()
    doc = json.loads((report / "report.json").read_text())
    steps = doc["steps"]
    passed = [s for s in steps if s["passed"]]
    last = max(passed, key=lambda s: s["sent_eps"]) if passed else None  # the sustained step
    searches = last.get("searches") if last else None
    return {
        "argv": argv[1:],
        "report_dir": str(report),
        "sustained_eps": doc["result"]["sustained_eps"],
        "sustained_target_eps": doc["result"]["sustained_target_eps"],
        "why_failed": doc["result"].get("why_failed"),
        "limit_note": doc["result"].get("limit_note"),
        "steps": [
            {
                k: s.get(k)
                for k in ("target_eps", "sent_eps", "stored_eps", "lost", "duplicates", "passed")
            }  # fmt: skip
            for s in steps
        ],
        "search_p50_ms": searches.get("p50_ms") if searches else None,
        "search_p99_ms": searches.get("p99_ms") if searches else None,
        "services_at_limit": {
            n: {"cpu_pct": v["cpu_pct"]["mean"], "rss_mib": v["rss_mib"]["peak"]}
            for n, v in (last or {}).get("services", {}).items()
            if v.get("cpu_pct") and v.get("rss_mib")
        },
    }


def victoria(out: Path) -> dict[str, Any] | None:
    """Part 3: what the ingest benchmark measured, when it ran (<out>/ingest.json)."""
    f = out / "ingest.json"
    if not f.is_file():
        return None
    try:
        doc = json.loads(f.read_text())
    except ValueError:
        return None
    return {"file": str(f), "written": time.ctime(f.stat().st_mtime), "ingest": doc}


# ---------------------------------------------------------------- the report


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [
        "# logbox-eps benchmark",
        "",
        f"{m['nproc']} CPUs, {m['cpu']}, {m['mem_gib']} GiB, kernel {m['kernel']}",
        "",
        f"## The sender beside loggen ({SIZE}-byte messages, {CONNS} connections, "
        f"{doc['seconds']:g} s, median of {doc['rounds']})",
        "",
        "| transport | logbox-eps msg/s | loggen msg/s | ratio | UDP received/s (eps, loggen) |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for t, rec in doc["senders"].items():
        med = rec["median"]
        recv = rec.get("received") or {}
        rx = ", ".join(f"{median(v):,.0f}" for v in recv.values()) if recv else ""
        lines.append(
            f"| {t} | {med.get('logbox-eps', 0):,.0f} | "
            f"{med['loggen']:,.0f} | {rec['ratio']}" if "loggen" in med else
            f"| {t} | {med.get('logbox-eps', 0):,.0f} | – | –"
        )  # fmt: skip
        lines[-1] += f" | {rx} |"
    s = doc.get("sample")
    if s:
        lines += [
            "",
            "## A sample run against `make run` on this machine",
            "",
            "`logbox-eps "
            + " ".join("TOKEN" if a.startswith("lbx_") else a for a in s["argv"][1:])
            + "`",
            "",
            f"Sustained: **{s['sustained_eps']:,.0f} EPS** (step {s['sustained_target_eps']:,.0f});"
            f" {('the next step failed: ' + s['why_failed']) if s['why_failed'] else ''}"
            f"{('not the box limit: ' + s['limit_note']) if s.get('limit_note') else ''}."
            " Search p50/p99 at that step: "
            f"{s['search_p50_ms']} / {s['search_p99_ms']} ms.",
            "",
            "| target | sent EPS | stored EPS | lost | duplicates | passed |",
            "| ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for st in s["steps"]:
            lines.append(
                f"| {st['target_eps']:,.0f} | {st['sent_eps']:,.0f} | {st['stored_eps']:,.0f} | "
                f"{st['lost']} | {st['duplicates']} | {st['passed']} |"
            )
        lines += ["", f"Beside: SSB's largest appliance, {SSB_EPS:,} EPS (published)."]
    v = doc.get("victoria")
    if not v:
        lines += ["", "VictoriaLogs: run `make bench-ingest` (then this again) for its figures."]
        return "\n".join(lines) + "\n"
    lines += [
        "",
        f"## Beside VictoriaLogs (the ingest benchmark, {v['file']}, {v['written']})",
        "",
        "Stored msg/s, first send to last message stored, loggen as the sender, the same "
        "machine:",
        "",
        "| load | logbox | VictoriaLogs | logbox / VictoriaLogs | CPU µs/msg logbox, VictoriaLogs |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for ld in v["ingest"].get("loads", []):
        sm = ld.get("summary") or {}
        lb, vl = sm.get("logbox") or {}, sm.get("victoria") or {}
        if not lb.get("eps") or not vl.get("eps"):
            continue
        lines.append(
            f"| {ld['label']} | {lb['eps']:,.0f} | {vl['eps']:,.0f} | "
            f"{lb['eps'] / vl['eps']:.2f} | {lb.get('us_per_msg_servers')}, "
            f"{vl.get('us_per_msg_servers')} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_out_option(ap)
    ap.add_argument("--seconds", type=float, default=5.0, help="each sender run (part 1)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-sample", action="store_true", help="part 1 only")
    ap.add_argument("--report-only", action="store_true",
                    help="write eps.md again from eps.json and ingest.json, measuring nothing")  # fmt: skip
    ap.add_argument("--start", type=float, default=50000)
    ap.add_argument("--step", type=float, default=50000)
    ap.add_argument("--max", type=float, default=500000)
    ap.add_argument("--hold", type=float, default=20)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--searchers", type=int, default=2)
    a = ap.parse_args()
    work = a.out / "eps"
    work.mkdir(parents=True, exist_ok=True)
    if a.report_only:
        doc = json.loads((a.out / "eps.json").read_text())
        doc["victoria"] = victoria(a.out)
        write_report(a.out, "eps", markdown(doc), doc)
        return 0
    m = machine()
    say(machine_line(m))
    say("bench-eps: the sender beside loggen")
    doc: dict[str, Any] = {
        "machine": m,
        "seconds": a.seconds,
        "rounds": a.rounds,
        "senders": senders(work, a.seconds, a.rounds),
    }
    if not a.no_sample:
        say("bench-eps: a sample report against make run")
        doc["sample"] = sample_report(work, a)
    doc["victoria"] = victoria(a.out)
    write_report(a.out, "eps", markdown(doc), doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
