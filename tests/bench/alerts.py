#!/usr/bin/env python3
"""Alert benchmark (issue 21; `make bench-alerts`; not a test: figures are reported, never a
failure).

`make run` (appliance/devrun.py on <out>/alerts/data, its own ports) takes logbox-eps's load
(rpc/logbox_eps/load.py: RFC 5424 messages of the words alpha ... lima, over TCP) at --rate
messages per second, in phases of --seconds that alternate between no alert enabled and 20
alerts enabled (--rounds of each, in the same run, so both see the same box and store):

- 8 "any" alerts on words no message holds (a dictionary miss per round),
- 6 "above" alerts on words every message holds (a count of the new messages per round),
- 3 "above" alerts per host on such a word (a top of the new messages per round),
- 2 "below" alerts on such a word,
- 1 "any" alert on the probe word, with an HTTPS webhook to a server this script runs.

While the alerts are on, a probe message (`alertprobe seq=N`) goes to the syslog port every
--probe-every seconds on its own connection; its latency is from the send to the webhook that
carries it among its samples (the alert's cooldown is 0). The ingest rate of a phase is the
messages indexd stored during it (its status file's `stored`), per second; the slowdown is the
alerts' phases against the others'. alertd's round time (its status file's `round_ms`) is
sampled too. A probe is counted once a webhook's samples (at most 5 per firing) carry it. Writes <out>/alerts.md and alerts.json.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import shutil
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "tests"))
sys.path.insert(0, str(TOP / "rpc"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (  # noqa: E402
    add_out_option,
    fmt,
    machine,
    machine_line,
    median,
    pct,
    say,
    write_report,
)

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
SEQ = re.compile(r"alertprobe seq=(\d+)")


class Webhook:
    """An HTTPS server that notes when each probe arrived in an event's samples."""

    def __init__(self, pki: Any) -> None:
        self.seen: dict[int, float] = {}
        self.posts = 0
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                t = time.monotonic()
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.posts += 1
                try:
                    for s in json.loads(body).get("samples", []):
                        for m in SEQ.finditer(s.get("message", "")):
                            outer.seen.setdefault(int(m.group(1)), t)
                except ValueError:
                    pass
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.srv.socket = pki.server_context().wrap_socket(self.srv.socket, server_side=True)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


class Prober:
    """Sends a probe every `every` seconds while on; the send times by sequence number."""

    def __init__(self, port: int, every: float) -> None:
        self.port, self.every = port, every
        self.sent: dict[int, float] = {}
        self.seq = 0
        self.on = threading.Event()
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port))
        while not self.stop.is_set():
            if self.on.is_set():
                self.seq += 1
                line = f"<14>1 - probehost probe - - - alertprobe seq={self.seq}\n".encode()
                self.sent[self.seq] = time.monotonic()
                sock.sendall(line)
            self.stop.wait(self.every)
        sock.close()


class Sampler:
    """alertd's round time (its status file's round_ms), read every 0.5 s."""

    def __init__(self, path: Path) -> None:
        self.path, self.got = path, []
        threading.Thread(target=self.run, daemon=True).start()

    def run(self) -> None:
        while True:
            try:
                self.got.append(json.loads(self.path.read_text()).get("round_ms"))
            except (OSError, ValueError):
                pass
            time.sleep(0.5)

    def take(self) -> list[float | None]:
        out, self.got = self.got, []
        return out


def stored(data: Path) -> int:
    for _ in range(5):
        try:
            return int(json.loads((data / "run/indexd.status.json").read_text())["stored"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.05)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=100_000, help="messages per second sent")
    ap.add_argument("--seconds", type=float, default=20, help="each phase")
    ap.add_argument("--rounds", type=int, default=2, help="phases of each kind")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--probe-every", type=float, default=1.0)
    add_out_option(ap)
    a = ap.parse_args()
    out = Path(a.out)
    work = out / "alerts"
    from lbtest.collector import free_ports
    from lbtest.devrun import DevRun
    from lbtest.receivers import ReceiverPKI
    from logbox_client import Client
    from logbox_eps.load import Load, Step, Target

    if work.exists():
        shutil.rmtree(work)
    data = work / "data"
    (data / "etc").mkdir(parents=True)
    ports = free_ports()
    (data / "etc/collector.toml").write_text(
        "[ports]\n" + "".join(f"{k} = {v}\n" for k, v in ports.items())
    )
    pki = ReceiverPKI.make(work)
    hook = Webhook(pki)
    password = "bench-alerts-" + os.urandom(6).hex()
    d = DevRun(TOP, data, extra={"LOGBOX_ADMIN_PASSWORD": password})
    phases: list[dict[str, Any]] = []
    prober = None
    try:
        d.until("press Ctrl-C", 180)
        c = Client(f"https://127.0.0.1:{d.rpc_port}", verify=str(data / "tls/https.crt"))
        deadline = time.monotonic() + 60
        while True:
            try:
                c.login("admin", password)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        with socket.create_connection(("127.0.0.1", ports["tcp"])) as s:
            s.sendall(b"<14>1 - warm app - - - warming up\n")
        while "main" not in [x["name"] for x in c.logspaces()]:
            time.sleep(0.2)
        specs: list[tuple[str, dict[str, Any], list[dict[str, Any]]]] = []
        specs += [(f"zulu{i}", {"kind": "any"}, []) for i in range(8)]
        specs += [
            (w, {"kind": "above", "n": 10**12, "window_s": 60, "group_by": None}, [])
            for w in WORDS[:6]
        ]
        specs += [
            (w, {"kind": "above", "n": 10**12, "window_s": 60, "group_by": "host"}, [])
            for w in WORDS[6:9]
        ]
        specs += [
            (w, {"kind": "below", "n": 1, "window_s": 60, "group_by": None}, [])
            for w in WORDS[9:11]
        ]
        webhook = {"type": "webhook", "url": f"https://127.0.0.1:{hook.port}/bench",
                   "ca": pki.ca.read_text()}  # fmt: skip
        specs.append(("alertprobe", {"kind": "any"}, [webhook]))
        ids = []
        for i, (q, cond, acts) in enumerate(specs):
            s = c.save_search(f"bench {i}", q)
            al = c.create_alert(f"bench {i}", s["id"], cond, acts, cooldown_s=0, enabled=False)
            ids.append(al["id"])
        say(f"{len(ids)} alerts made; {a.rounds} rounds of {a.seconds:.0f} s phases at "
            f"{a.rate:,.0f} msg/s")  # fmt: skip
        prober = Prober(ports["tcp"], a.probe_every)
        sampler = Sampler(data / "run/alertd.status.json")
        load = Load(Target("127.0.0.1", ports["tcp"]), run="alerts", connections=a.connections,
                    size=300)  # fmt: skip
        for r in range(a.rounds):
            for on in (False, True):
                for aid in ids:
                    c.update_alert(aid, enabled=on)
                time.sleep(2)  # alertd sees the change, the store settles
                first = prober.seq + 1
                if on:
                    prober.on.set()
                sampler.take()
                s0, t0 = stored(data), time.monotonic()
                sent = load.run_steps([Step(a.rate, a.seconds)], start=time.time() + 0.5)
                s1, t1 = stored(data), time.monotonic()
                prober.on.clear()
                n_sent = sum(sent.counts.values())
                phase = {
                    "alerts": len(ids) if on else 0,
                    "sent": n_sent,
                    "sent_eps": n_sent / (t1 - t0 - 0.5),
                    "stored_eps": (s1 - s0) / (t1 - t0),
                }
                if on:
                    rounds_ms = [r for r in sampler.take() if r is not None]
                    deadline = time.monotonic() + 15  # the last probes' webhooks
                    while time.monotonic() < deadline and any(
                        i not in hook.seen for i in range(first, prober.seq + 1)
                    ):
                        time.sleep(0.2)
                    lat = [
                        hook.seen[i] - prober.sent[i]
                        for i in range(first, prober.seq + 1)
                        if i in hook.seen
                    ]
                    phase |= {
                        "probes": prober.seq - first + 1,
                        "probes_alerted": len(lat),
                        "latency_p50_s": pct(lat, 50) if lat else None,
                        "latency_p99_s": pct(lat, 99) if lat else None,
                        "latency_max_s": max(lat) if lat else None,
                        "alertd_round_ms_p50": pct(rounds_ms, 50) if rounds_ms else None,
                        "alertd_round_ms_max": max(rounds_ms) if rounds_ms else None,
                    }
                phases.append(phase)
                say(f"  round {r + 1}, {'20 alerts' if on else 'no alert'}: {phase}")
        states = {x["id"]: x["status"]["state"] for x in c.alerts()}
    finally:
        if prober is not None:
            prober.stop.set()
        d.close()
        hook.close()
    none = [p["stored_eps"] for p in phases if not p["alerts"]]
    some = [p["stored_eps"] for p in phases if p["alerts"]]
    lat = [p for p in phases if p["alerts"] and p.get("latency_p50_s") is not None]
    doc = {
        "machine": machine(),
        "rate": a.rate,
        "seconds": a.seconds,
        "rounds": a.rounds,
        "phases": phases,
        "stored_eps_no_alerts": median(none),
        "stored_eps_20_alerts": median(some),
        "slowdown_pct": (100 * (1 - median(some) / median(none)))
        if none and median(none)
        else None,
        "latency_p50_s": median([p["latency_p50_s"] for p in lat]) if lat else None,
        "latency_p99_s": max(p["latency_p99_s"] for p in lat) if lat else None,
        "round_ms_p50": median([p["alertd_round_ms_p50"] for p in lat if p["alertd_round_ms_p50"]]),
        "round_ms_max": max((p["alertd_round_ms_max"] or 0 for p in lat), default=None),
        "alert_states_at_end": states,
    }
    rows = "\n".join(
        f"| {i + 1} | {p['alerts']} | {p['sent_eps']:,.0f} | {p['stored_eps']:,.0f} | "
        + (
            f"{p['probes_alerted']}/{p['probes']} | {p['latency_p50_s']:.2f} | "
            f"{p['latency_p99_s']:.2f} |"
            if p["alerts"] and p.get("latency_p50_s") is not None
            else "| | |"
        )
        for i, p in enumerate(phases)
    )
    slow = doc["slowdown_pct"]
    text = f"""# Alerts at {a.rate:,.0f} msg/s

{machine_line(doc["machine"])}

| phase | alerts | sent msg/s | stored msg/s | probes alerted | latency p50 (s) | p99 (s) |
| --- | --- | --- | --- | --- | --- | --- |
{rows}

Stored per second: {doc["stored_eps_no_alerts"] or 0:,.0f} without alerts, {doc["stored_eps_20_alerts"] or 0:,.0f} with 20
(median of the phases): {f"{slow:.1f} % slower" if slow is not None else "n/a"} (target: at most 5 %).
Alert latency, send to webhook: p50 {fmt(doc["latency_p50_s"])} s, p99 {fmt(doc["latency_p99_s"])} s
(target: at most 5 s). alertd's round (20 alerts): p50 {fmt(doc["round_ms_p50"], ",.0f")} ms,
max {fmt(doc["round_ms_max"], ",.0f")} ms.
"""
    write_report(out, "alerts", text, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
