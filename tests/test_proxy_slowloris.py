# Slowloris on both apps behind nginx (issue 15, defect 2): for 60 s an attacker process
# (lbtest/slowloris.py, loopback only) holds 500 connections open to the web UI and 500 to the
# API (a third idle TCP, a third slow TLS handshakes, a third TLS connections dribbling a header
# line every 10 s, each replaced as soon as the server closes it), while a normal client makes a
# new TLS connection and one request every half second, alternating the apps. Every request of
# the normal client succeeds within 1 s, and nginx ends the slow connections of every kind
# (its header and handshake timeouts), so the attacker must keep opening new ones.
#
# Bare gunicorn (gthread, 2 workers x 8 threads, no timeouts) fails this: run it with
# LOGBOX_SLOWLORIS_BARE=1 (the harness's proxy=False) to see the normal client's requests time
# out and no slow connection ever closed.

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import requests
from lbtest.gunicorn import TOP, venv_python
from lbtest.proxied import both_apps

DURATION = 60.0  # seconds of attack
CONNECTIONS = 500  # held open to each app
BOUND = 1.0  # seconds: the slowest a normal request may be
EVERY = 0.5  # seconds between two normal requests
BARE = os.environ.get("LOGBOX_SLOWLORIS_BARE") == "1"


def test_slowloris_does_not_stop_normal_requests(tmp_path: Path) -> None:
    with both_apps(tmp_path, proxy=not BARE) as (rpc, web):
        token = rpc.login()
        # (app, path, headers): an authenticated API call and a rendered page
        normal = [
            (rpc, rpc.base + "/me", {"Authorization": f"Bearer {token}"}),
            (web, web.url + "/login", {}),
        ]
        attacker = subprocess.Popen(
            [venv_python(), "-m", "lbtest.slowloris", "--connections", str(CONNECTIONS),
             "--duration", str(DURATION), "--port", str(rpc.port), "--port", str(web.port)],
            cwd=TOP / "tests",
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        results: list[tuple[str, float, int | str]] = []
        try:
            time.sleep(5)  # the attacker's connections are open
            end = time.monotonic() + DURATION - 10
            i = 0
            while time.monotonic() < end:
                srv, url, headers = normal[i % 2]
                i += 1
                t0 = time.monotonic()
                with srv.session() as s:  # a new connection: a new handshake each time
                    try:
                        status: int | str = s.get(url, headers=headers, timeout=10).status_code
                    except requests.RequestException as e:
                        status = type(e).__name__
                results.append((url, time.monotonic() - t0, status))
                time.sleep(max(0.0, EVERY - (time.monotonic() - t0)))
            out, _ = attacker.communicate(timeout=DURATION + 60)
        finally:
            if attacker.poll() is None:
                attacker.kill()
                attacker.wait()
        report = json.loads(out.strip().splitlines()[-1])
        print(f"\nslowloris report: {json.dumps(report)}")
        slowest = max(r[1] for r in results)
        print(f"normal requests: {len(results)}, slowest {slowest:.3f} s")

        bad = [r for r in results if r[2] != 200 or r[1] > BOUND]
        assert (
            not bad
        ), f"{len(bad)} of {len(results)} normal requests failed or were slow: {bad[:10]}"
        assert len(results) >= (DURATION - 10) / (EVERY + BOUND)
        for port in (rpc.port, web.port):
            for kind, t in report[str(port)].items():
                # the attack held its connections open, and nginx ended the slow ones
                assert t["mean_open"] >= CONNECTIONS // 3 * 0.8, (port, kind, t)
                assert t["closed_by_server"] > 0, (port, kind, t)
        # nginx and gunicorn went on running
        assert rpc.nginx is not None and rpc.nginx.poll() is None
        assert web.nginx is not None and web.nginx.poll() is None
