# Scenario: `logbox verify --data DIR` without `--logspace` checks every logspace of the
# catalog, and its exit status covers them all (issue 15, defect 6: it used to check `main`
# alone and say "ok" over a damaged file in another logspace). Three logspaces are stored with
# the real CLI (ASan build), a message block of one that is not `main` is damaged, and then:
# - plain `verify` exits 1 and names the damaged file, and still reports the sound logspaces;
# - `verify --logspace main` still checks only main (exit 0);
# - `verify --logspace <damaged>` exits 1;
# - an undamaged copy verifies clean with one "ok:" line per logspace.
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from lbtest.cli import SANITIZER_ENV, Logbox, sanitizer_report

LOGSPACES = ("main", "firewall", "zz-last")


def lines(ls: str, n: int) -> bytes:
    return b"".join(
        b"<13>1 2026-01-01T00:00:00Z host%d app %d - - %s message %d with some words %s\n"
        % (i % 5, i, ls.encode(), i, b"x" * (200 + i % 50))
        for i in range(n)
    )


def verify(binary: Path, data: Path, *args: str) -> tuple[int, str, str]:
    p = subprocess.run(
        [str(binary), "verify", "--data", str(data), *args],
        capture_output=True,
        timeout=120,
        env={**os.environ, **SANITIZER_ENV},
    )
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    assert not sanitizer_report(err), err
    return p.returncode, out, err


def test_verify_covers_every_logspace(store_cli_asan: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    for ls in LOGSPACES:
        Logbox(store_cli_asan, data, ls).ingest(lines(ls, 600))

    rc, out, err = verify(store_cli_asan, data)
    assert rc == 0, err
    for ls in LOGSPACES:
        assert f"ok: {data}/{ls}: 600 messages" in out, out

    damaged = tmp_path / "damaged"
    shutil.copytree(data, damaged)
    victim = sorted((damaged / "firewall").rglob("messages"))
    assert victim, "no sealed message file in logspace firewall"
    raw = bytearray(victim[0].read_bytes())
    assert len(raw) > 200
    raw[len(raw) // 2] ^= 0xFF
    victim[0].write_bytes(bytes(raw))

    rc, out, err = verify(store_cli_asan, damaged)
    assert rc == 1, (out, err)
    assert f"logbox: verify: {victim[0]}" in err or str(victim[0].relative_to(damaged)) in err, err
    assert "problem" in err
    # The sound logspaces, before and after the damaged one, are still checked and reported.
    assert f"ok: {damaged}/main:" in out and f"ok: {damaged}/zz-last:" in out, out
    assert f"ok: {damaged}/firewall:" not in out

    rc, out, err = verify(store_cli_asan, damaged, "--logspace", "main")
    assert rc == 0 and f"ok: {damaged}/main:" in out, (out, err)
    rc, out, err = verify(store_cli_asan, damaged, "--logspace", "firewall")
    assert rc == 1, (out, err)
