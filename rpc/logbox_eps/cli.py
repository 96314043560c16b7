"""logbox-eps: a box's sustained events per second, measured from a second machine (README.md
"Measuring EPS").

It sends syslog to the box (load.py) in a step ramp: each step holds a rate for --hold seconds,
then the store is asked, through the API, what it holds of that step (measure.py): every
message carries the run, its connection and its sequence number. A step passes when all it sent
is stored within --lag seconds of its end, once each; of a step that fell behind, what is still
missing once the count has stopped growing for --settle seconds is lost. The ramp goes on until a step fails or
--max is reached; the limit is the last step that passed. The report (report.py) goes to --out:
report.json, report.md, report.html.

With --searchers N, N threads loop a query mix through the API during every step's hold
(searchers.py); their latencies go in the report beside the EPS. While a step is sent, a
progress line is drawn on stderr when it is a terminal (progress.py).

Exit status: 0 the run completed (its report says what it found, losses included); 2 bad
arguments (a --search-mix that cannot be read among them); 3 the API cannot be reached or refuses the token; 4 refused to start (the RAID
resyncs; --force to run anyway); 5 the load cannot be sent (connection, TLS, corpus).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from logbox_client import Client, LogboxError

from . import report, resources, searchers
from .load import HEADER_LEN, Load, LoadError, Step, Target
from .measure import Sampler, stored, wait_stored
from .progress import Current, Progress

DEFAULT_PORTS = {"tcp": 514, "tls": 6514, "udp": 514}
RESYNCING = {"resyncing", "recovering", "rebuilding", "reshaping"}


class Refused(Exception):
    """The run must not start: the message says why."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="logbox-eps",
        description="Measure a logbox box's sustained EPS: a step ramp of syslog load, "
        "counted in the store through the API.",
    )
    ap.add_argument("--host", required=True, help="the box's syslog address")
    ap.add_argument("--transport", choices=("tcp", "tls", "udp"), default="tcp")
    ap.add_argument("--port", type=int, help="syslog port (default 514, TLS 6514)")
    ap.add_argument("--framing", choices=("newline", "octet"), default="newline",
                    help="TCP framing (TLS is always octet-counted)")  # fmt: skip
    ap.add_argument("--ca", type=Path, help="TLS: the CA of the box's syslog certificate")
    ap.add_argument("--cert", type=Path, help="TLS: a client certificate (PEM)")
    ap.add_argument("--key", type=Path, help="TLS: the client certificate's key (PEM)")
    ap.add_argument("--api", help="the box's API URL (default https://HOST:8444)")
    ap.add_argument("--api-ca", help="the CA of the API's certificate (default: system CAs)")
    ap.add_argument("--token", help="an admin API token (default: $LOGBOX_TOKEN)")
    ap.add_argument("--logspace", default="main")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--size", type=int, default=300, help="message bytes (default 300)")
    ap.add_argument("--corpus", type=Path, help="send this file's lines, in turn, as payload")
    ap.add_argument("--start", type=float, default=1000.0, help="first step's EPS")
    ap.add_argument("--step", type=float, default=1000.0, help="EPS added per step")
    ap.add_argument("--max", type=float, default=1e6, help="highest EPS tried")
    ap.add_argument("--hold", type=float, default=30.0, help="seconds each step holds")
    ap.add_argument("--lag", type=float, default=10.0,
                    help="seconds after a step's end within which all must be stored")  # fmt: skip
    ap.add_argument("--settle", type=float, default=10.0,
                    help="a step that fell behind: seconds without growth before what is "
                    "still missing counts as lost")  # fmt: skip
    ap.add_argument("--out", type=Path, default=Path("logbox-eps-report"))
    ap.add_argument("--searchers", type=int, default=0,
                    help="threads that search the box during every step's hold (default 0)")  # fmt: skip
    ap.add_argument("--search-mix", type=Path,
                    help="the searchers' queries, one `class<TAB>query` a line (default: a "
                    "built-in mix over the load's words)")  # fmt: skip
    ap.add_argument("--search-token", action="append", default=[], metavar="TOKEN",
                    help="a token the searchers use, given once per user they stand for; "
                    "searcher k uses the k-th, in turn (default: --token, so all of them are "
                    "one user, whom the box runs a few requests of at a time)")  # fmt: skip
    ap.add_argument("--force", action="store_true", help="run while the RAID resyncs")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    a = ap.parse_args(argv)
    a.port = a.port or DEFAULT_PORTS[a.transport]
    a.api = a.api or f"https://{a.host}:8444"
    a.token = a.token or os.environ.get("LOGBOX_TOKEN")
    if not a.token:
        ap.error("an API token is needed: --token or $LOGBOX_TOKEN (an admin's)")
    if a.hold <= 0 or a.lag < 0 or a.start <= 0 or a.step <= 0 or a.max < a.start:
        ap.error("--start, --step, --hold > 0, --lag >= 0 and --max >= --start")
    if a.corpus is None and a.size < HEADER_LEN:
        ap.error(f"--size: at least {HEADER_LEN} bytes")
    if a.searchers < 0:
        ap.error("--searchers: 0 or more")
    a.mix = None
    if a.search_token and not a.searchers:
        ap.error("--search-token: the tokens of --searchers N, which is not given")
    if a.search_mix is not None and not a.searchers:
        ap.error("--search-mix: the queries of --searchers N, which is not given")
    if a.search_mix is not None:
        try:
            a.mix = searchers.read_mix(a.search_mix)
        except searchers.MixError as e:
            ap.error(str(e))
    return a


def check_box(api: Client, force: bool) -> dict[str, Any]:
    """The box's status; Refused while its RAID resyncs (unless force)."""
    st = api.status()
    raid = st.get("raid") or {}
    if raid.get("state") in RESYNCING and not force:
        pct = raid.get("progress")
        at = f" ({100 * pct:.1f} %)" if isinstance(pct, int | float) else ""
        raise Refused(
            f"the box's RAID ({raid.get('device')}) is {raid['state']}{at}: figures taken now "
            "would not be the box's; wait until it is clean, or --force"
        )
    return st


def ramp(
    a: argparse.Namespace, api: Client, run: str, mix: list[tuple[str, str]], now: Current
) -> list[dict[str, Any]]:
    """The steps, each sent, counted and judged; stops after the first that fails. now is kept
    up to date for the progress line."""
    target = Target(a.host, a.port, a.transport, a.framing, a.ca, a.cert, a.key)
    steps: list[dict[str, Any]] = []
    rate, k = a.start, 0
    while rate <= a.max:
        step_run = f"{run}s{k}"
        load = Load(target, step_run, a.connections, a.size, a.corpus)
        sampler = Sampler(api).start()
        t0 = time.time()
        start = t0 + 0.5
        finding = None
        if a.searchers:
            finding = searchers.Searchers(
                api, a.searchers, mix, a.logspace, start, tokens=a.search_token
            ).start()
        now.begin(k, rate, start, load, sampler, finding)
        try:
            sent = load.run_steps([Step(rate, a.hold)], start=start)
        finally:
            if finding is not None:
                finding.stop()
            sampler.stop()
        t1 = time.time()
        now.phase = "counting"
        n_sent = sum(sent.counts.values())
        n, took = wait_stored(api, step_run, n_sent, a.logspace, t0, a.lag)
        behind = n < n_sent
        if behind:
            # late or lost: what is not stored once the count has not grown for --settle s
            wait_stored(api, step_run, n_sent, a.logspace, t0, 3600, a.settle)
        got = stored(api, step_run, a.connections, a.logspace, t0)
        per_sent = {c: sent.last_seq.get(c, 0) for c in range(1, a.connections + 1)}
        lost = {c: max(0, per_sent[c] - (got.per_conn.get(c, 0) - got.duplicates.get(c, 0)))
                for c in per_sent}  # fmt: skip
        dups = sum(got.duplicates.values())
        passed = not behind and sum(lost.values()) == 0 and dups == 0
        steps.append(
            {
                "step": k,
                "run": step_run,
                "target_eps": rate,
                "sent": n_sent,
                "sent_eps": n_sent / a.hold,
                "stored": got.total,
                "stored_eps": got.total / a.hold,
                "lost": sum(lost.values()),
                "lost_per_connection": {str(c): v for c, v in lost.items() if v},
                "duplicates": dups,
                "duplicates_exact": got.duplicates_exact,
                "catch_up_s": round(took, 2),
                "behind": behind,
                "passed": passed,
                "started": t0,
                "ended": t1,
                "searches": (
                    searchers.step_figures(finding, mix, a.hold) if finding is not None else None
                ),
                "services": resources.step_figures(sampler.samples),
                "samples": sampler.samples,
                "sample_errors": sampler.errors[:5],
            }
        )
        if not passed:
            break
        rate += a.step
        k += 1
    return steps


def box_system(api: Client) -> dict[str, Any]:
    """The box's machine (GET /system), or {"error": why} when it does not say (an older box
    answers 404)."""
    try:
        return api.system()
    except LogboxError as e:
        return box_system_error(e.code, e.message)


def box_system_error(code: str, message: str) -> dict[str, Any]:
    """What the report holds for the box's machine when GET /system failed with code."""
    if code == "not_found":
        return {"error": "not reported by the box (GET /api/v1/system: 404, an older box)"}
    return {"error": f"GET /api/v1/system: {code}: {message}"}


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    run = "e" + secrets.token_hex(5)
    api = Client(a.api, token=a.token, verify=a.api_ca or True, timeout=60)
    now = Current(hold=a.hold)
    bar = None
    try:
        status = check_box(api, a.force)
        system = box_system(api)
        mix = a.mix
        if a.searchers and mix is None:
            mix = searchers.builtin_mix(*searchers.payload_words(a.size, a.corpus))
        if not a.quiet and sys.stderr.isatty():
            bar = Progress(sys.stderr, now).start()
        steps = ramp(a, api, run, mix or [], now)
    except LogboxError as e:
        print(f"logbox-eps: {a.api}: {e.code}: {e.message}", file=sys.stderr)
        return 3
    except Refused as e:
        print(f"logbox-eps: refused: {e}", file=sys.stderr)
        return 4
    except LoadError as e:
        print(f"logbox-eps: {e}", file=sys.stderr)
        return 5
    finally:
        if bar is not None:
            bar.stop()
    senders = Load(Target(a.host, a.port), run, a.connections).processes()
    doc = report.document(a, run, status, system, steps, mix or [], senders)
    paths = report.write(a.out, doc)
    limit = doc["result"]["sustained_eps"]
    print(f"logbox-eps: run {run}: sustained {limit:,.0f} EPS with no loss"
          if limit else f"logbox-eps: run {run}: no step passed")  # fmt: skip
    for p in paths:
        print(f"logbox-eps: wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
