"""The archive of closed days to S3-compatible object storage (indexer/ARCHIVE.md), against a
real SeaweedFS (`weed server -s3` over HTTPS from a test CA, lbtest/s3.py), the real
`logbox archive` (the ASan build: its days, manifest, import and release verbs, and the
hand-over of the others to logbox-archive) and a real logbox-indexd's retention:

- the object store down holds uploads and no local day is deleted; up again, every closed day
  is uploaded and verified, and only then retention deletes them; a second pass sends nothing;
- a restored day answers every query (hits, counts, histograms, top values) exactly as the
  same day did before it left (an oracle: a copy of the store taken first), and retention keeps
  it until it is released;
- an upload killed midway resumes with the parts already sent, and leaves neither a second
  object nor an upload behind;
- an object damaged in the bucket is found by verify and not trusted: its day loses its
  verified mark (so retention keeps the local copy), a restore refuses it, the next pass
  uploads it again;
- Object Lock: every object is kept in compliance mode until the day's end plus the archive
  days, and even the box's own credentials cannot delete a version before then.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lbtest.indexd import HeldFifo, Indexd
from lbtest.s3 import Weed, weed_binary
from lbtest.wait import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "rpc"))
from logbox_core import archive as arch  # noqa: E402

DAY = 86400
WORDS = [f"w{i}" for i in range(60)]
HOSTS = [f"host{i}" for i in range(5)]


@pytest.fixture(scope="module")
def weed(top: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Weed]:
    w = Weed(weed_binary(top), tmp_path_factory.mktemp("weed")).start()
    try:
        yield w
    finally:
        w.stop()


def ymd(t: float) -> int:
    return int(time.strftime("%Y%m%d", time.gmtime(t)))


def day_start(day: int) -> float:
    return dt.datetime.strptime(str(day), "%Y%m%d").replace(tzinfo=dt.UTC).timestamp()


def iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def make_store(
    logbox: Path, data: Path, ages: list[int], per_day: int, seed: int = 1, extra: int = 0
) -> list[int]:
    """A store with per_day messages on each day ages[i] days ago (received = header time,
    spread over the day), each with a few random words; extra random bytes per message make
    the files large. Returns the days (YYYYMMDD) in order."""
    rnd = random.Random(seed)
    now = time.time()
    lines = []
    days = []
    for age in ages:
        day = ymd(now - age * DAY)
        days.append(day)
        base = day_start(day)
        step = (DAY - 60) / per_day
        for i in range(per_day):
            t = base + i * step
            words = " ".join(rnd.choice(WORDS) for _ in range(4))
            pad = base64.b64encode(rnd.randbytes(extra * 3 // 4)).decode() if extra else ""
            lines.append(
                f"<{rnd.choice((11, 13, 14, 30))}>1 {iso(t)} {rnd.choice(HOSTS)} app "
                f"{rnd.randint(1, 999)} - - msg {i} {words} {pad}\n"
            )
    src = data.parent / f"in-{seed}.log"
    src.write_text("".join(lines))
    r = subprocess.run(
        [str(logbox), "ingest", "--data", str(data), "--received", "header", str(src)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    src.unlink()
    return days


def empty_store(logbox: Path, data: Path) -> None:
    r = subprocess.run(
        [str(logbox), "ingest", "--data", str(data), "-"], input="", capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr


class Archive:
    """`logbox archive VERB` (the C CLI; the object store's verbs through logbox-archive)."""

    def __init__(self, logbox: Path, data: Path, tmp: Path, targets: dict[str, Any]) -> None:
        self.logbox, self.data, self.tmp = logbox, data, tmp
        tmp.mkdir(parents=True, exist_ok=True)
        self.settings = tmp / "archive.json"
        self.state = tmp / "archive-state"
        self.set_targets(targets)
        tool = tmp / "logbox-archive"
        top = Path(__file__).resolve().parent.parent
        tool.write_text(
            f'#!/bin/sh\nPYTHONPATH={top / "rpc"} exec {sys.executable} -m logbox_core.archive "$@"\n'
        )
        tool.chmod(0o755)
        self.env = dict(
            os.environ,
            LOGBOX_ARCHIVE_TOOL=str(tool),
            LOGBOX_ARCHIVE_SETTINGS=str(self.settings),
            LOGBOX_ARCHIVE_STATE=str(self.state),
            LOGBOX_DATA=str(data),
            LOGBOX_BIN=str(logbox),
        )

    def set_targets(self, targets: dict[str, Any]) -> None:
        self.settings.write_text(json.dumps({"version": 1, "targets": targets}))

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(self.logbox), "archive", *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def run(self, *args: str, ok: bool | None = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            [str(self.logbox), "archive", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if ok is True:
            assert r.returncode == 0, r.stdout + r.stderr
        elif ok is False:
            assert r.returncode != 0, r.stdout + r.stderr
        return r

    def days(self) -> list[dict[str, Any]]:
        r = self.run("days", "--data", str(self.data))
        return list(json.loads(r.stdout)["days"])

    def status(self, ls: str = "main") -> dict[str, Any]:
        return dict(json.loads((self.state / "status.json").read_text())["logspaces"][ls])

    def verified(self, ls: str = "main") -> set[int]:
        return {int(p.stem) for p in (self.state / ls / "verified").glob("*.json")}


# ---------------------------------------------------------------- queries: the oracle


def answers(logbox: Path, data: Path, day: int, rnd: random.Random) -> list[Any]:
    """What `logbox search` answers over one day for a fixed list of queries: hits, counts,
    histograms and top values."""
    frm, to = iso(day_start(day)), iso(day_start(day) + DAY)
    queries = ["*", "msg"]
    for _ in range(6):
        a, b = rnd.sample(WORDS, 2)
        queries += [
            a,
            f"{a} {b}",
            f"{a} OR {b}",
            f"{a} NOT {b}",
            f'"{a} {b}"',
            f"host:{rnd.choice(HOSTS)} {a}",
        ]
    out: list[Any] = []
    base = [str(logbox), "search", "--data", str(data), "--from", frm, "--to", to, "--json"]
    for q in queries:
        for extra in (
            ["--limit", "50", "--order", "oldest"],
            ["--limit", "50"],
            ["--count"],
            ["--histogram", "24"],
            ["--top", "host"],
        ):
            r = subprocess.run(base + extra + [q], capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, (q, extra, r.stderr)
            out.append((q, extra, r.stdout))
    return out


# ---------------------------------------------------------------- the tests


def test_store_down_holds_then_archive_delete_restore_equals_local(
    weed: Weed,
    store_cli_asan: Path,
    store_cli: Path,
    indexd_bin: Path,
    fifo: HeldFifo,
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    days = make_store(store_cli, data, [10, 9, 8, 0], 3000)
    oracle = tmp_path / "oracle"
    shutil.copytree(data, oracle)
    bucket = weed.bucket("hold")
    a = Archive(store_cli_asan, data, tmp_path, {"main": weed.target(bucket, prefix="box1")})
    closed = [d["day"] for d in a.days() if d["closed"]]
    assert closed == days[:3], a.days()

    # The object store down: the pass fails and says so, nothing is verified, and retention
    # (3 days) keeps every day.
    weed.stop()
    r = a.run("once", ok=False)
    st = a.status()
    assert st["ok"] is False and st["failures"] == 1 and "error" in st, st
    assert weed.target(bucket)["secret_key"] not in r.stderr + json.dumps(st)
    assert a.verified() == set()
    settings = tmp_path / "logspaces.json"
    settings.write_text(json.dumps({"version": 1, "logspaces": {"main": {"retention_days": 3}}}))
    d = Indexd(
        indexd_bin,
        data,
        tmp_path / "status.json",
        fifo=fifo,
        args=["--logspaces", str(settings), "--archive-state", str(a.state)],
    )
    d.start()
    try:
        wait_until(
            lambda: "not in its archive yet" in d.stderr(), "retention holds", 10, interval=0.1
        )
        assert [x["day"] for x in a.days()] == days

        # Up again: every closed day goes, is read back, verified; then retention deletes them.
        weed.start()
        a.run("once")
        st = a.status()
        assert st["ok"] is True and st["days_archived"] == 3 and st["pending"] == 0, st
        assert a.verified() == set(days[:3])
        keys = weed.keys(bucket)
        for day in days[:3]:
            s = f"{day:08d}"
            pre = f"box1/main/{s[:4]}/{s[4:6]}-{s[6:]}/"
            names = {k[len(pre) :] for k in keys if k.startswith(pre)}
            assert {"MANIFEST.json", "catalog.json", "messages", "chain"} <= names, names
            assert any(n.startswith("index/") and n.endswith(".seg") for n in names)
        assert weed.client().list_multipart_uploads(Bucket=bucket).get("Uploads") is None
        # A second pass sends nothing and changes nothing.
        before = (st["last_upload"], keys)
        a.run("once")
        assert (a.status()["last_upload"], weed.keys(bucket)) == before
        a.run("verify")

        d.proc.send_signal(signal.SIGHUP)
        wait_until(
            lambda: d.stderr().count("retention: main: removed") == 3,
            "the three archived days removed",
            15,
            interval=0.1,
        )
        assert [x["day"] for x in a.days()] == days[3:]

        # Restored while indexd runs: the day answers as it did before it left.
        rnd = random.Random(7)
        want = answers(store_cli, oracle, days[1], random.Random(7))
        r = a.run("restore", "--logspace", "main", "--day", f"{days[1]:08d}")
        assert "restored" in r.stdout, r.stdout
        assert answers(store_cli, data, days[1], rnd) == want
        assert [x["day"] for x in a.days()] == [days[1], days[3]]
        # Retention keeps a restored day; after release, it may go again.
        d.proc.send_signal(signal.SIGHUP)
        time.sleep(1.5)
        assert [x["day"] for x in a.days()] == [days[1], days[3]]
        a.run("release", "--data", str(data), "--day", f"{days[1]:08d}")
        d.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: d.stderr().count("retention: main: removed") == 4, "released day", 15)
        # Restoring a day that is on local disk is refused.
        r = a.run("restore", "--day", f"{days[3]:08d}", ok=False)
        assert "not in the archive" in r.stderr or "local disk" in r.stderr, r.stderr
    finally:
        assert d.stop() == 0


def test_killed_upload_resumes_without_duplicates(
    weed: Weed, store_cli_asan: Path, store_cli: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    # ~30 MB of nearly random text in one day: 6 parts of 5 MiB for its message file.
    days = make_store(store_cli, data, [3, 0], 160_000, seed=3, extra=260)
    bucket = weed.bucket("resume")
    a = Archive(store_cli_asan, data, tmp_path, {"main": weed.target(bucket, part_mb=5)})
    m = json.loads(a.run("manifest", "--data", str(data), "--day", f"{days[0]:08d}").stdout)
    size = {f["name"]: f["size"] for f in m["files"]}["messages"]
    assert size > 4 * 5 * arch.MIB, size
    s = f"{days[0]:08d}"
    key = f"main/{s[:4]}/{s[4:6]}-{s[6:]}/messages"
    upload_state = a.state / "main" / "uploads" / f"{s}.json"

    # Killed once two parts of the message file are recorded.
    p = a.popen("once")

    def parts() -> int:
        try:
            doc = json.loads(upload_state.read_text())
        except (OSError, ValueError):
            return 0
        return len(doc.get("files", {}).get("messages", {}).get("parts", {}))

    wait_until(lambda: parts() >= 2 or p.poll() is not None, "two parts sent", 120, interval=0.005)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    got = parts()
    nparts = -(-size // (5 * arch.MIB))
    assert 2 <= got < nparts, (got, nparts)
    s3 = weed.client()
    uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u["Key"] for u in uploads] == [key]
    assert key not in weed.keys(bucket)
    upload_id = uploads[0]["UploadId"]
    assert json.loads(upload_state.read_text())["files"]["messages"]["upload_id"] == upload_id

    # Resumed: the parts already there are not sent again; one object, no upload left.
    a.run("once")
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads") is None
    rec = json.loads((a.state / "main" / "verified" / f"{s}.json").read_text())
    assert rec["sent"] <= rec["bytes"] - got * 5 * arch.MIB + 1, rec
    h = s3.head_object(Bucket=bucket, Key=key)
    assert h["ContentLength"] == size and h["ETag"].strip('"').endswith(f"-{nparts}")
    assert not upload_state.exists()
    versions = s3.list_object_versions(Bucket=bucket, Prefix=key).get("Versions", [])
    assert len([v for v in versions if v["Key"] == key]) <= 1, versions
    assert "ok" in a.run("verify").stdout

    # Killed again before anything was recorded (the upload id not written down yet is the
    # case a crash leaves): a stray upload of the key is aborted, not left behind.
    stray = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    (a.state / "main" / "verified" / f"{s}.json").unlink()
    a.run("once")
    left = s3.list_multipart_uploads(Bucket=bucket).get("Uploads") or []
    assert stray not in [u["UploadId"] for u in left] and left == []


def test_damaged_object_is_found_and_not_trusted(
    weed: Weed, store_cli_asan: Path, store_cli: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    days = make_store(store_cli, data, [5, 4, 0], 2000, seed=5)
    bucket = weed.bucket("damage")
    a = Archive(store_cli_asan, data, tmp_path, {"main": weed.target(bucket)})
    a.run("once")
    assert a.verified() == set(days[:2])
    s3 = weed.client()
    s = f"{days[0]:08d}"
    pre = f"main/{s[:4]}/{s[4:6]}-{s[6:]}/"
    seg = next(k for k in weed.keys(bucket, pre) if k.endswith(".seg"))
    body = bytearray(s3.get_object(Bucket=bucket, Key=seg)["Body"].read())
    body[len(body) // 2] ^= 0x40
    # Even with the metadata claiming the old checksum: verify reads the bytes.
    meta = s3.head_object(Bucket=bucket, Key=seg)["Metadata"]
    s3.put_object(Bucket=bucket, Key=seg, Body=bytes(body), Metadata=meta)

    r = a.run("verify", ok=False)
    assert f"main {s[:4]}-{s[4:6]}-{s[6:]}: DAMAGED: {seg}" in r.stdout, r.stdout
    other = f"{days[1]:08d}"
    assert f"main {other[:4]}-{other[4:6]}-{other[6:]}: ok" in r.stdout
    assert a.verified() == {days[1]}  # retention now keeps the damaged day's local copy

    # A restore (here into an empty store) refuses the damaged object and leaves nothing.
    fresh = tmp_path / "fresh"
    empty_store(store_cli, fresh)
    b = Archive(store_cli_asan, fresh, tmp_path / "b", {"main": weed.target(bucket)})
    r = b.run("restore", "--day", s, ok=False)
    assert "damaged in the archive" in r.stderr and seg in r.stderr, r.stderr
    assert b.days() == []
    assert not any(p.name.startswith(".restore") for p in (fresh / "main").iterdir())

    # The next pass uploads the day again (its local copy is there), and the restore works.
    a.run("once")
    assert a.verified() == set(days[:2])
    assert "DAMAGED" not in a.run("verify").stdout
    b.run("restore", "--day", s)
    assert [x["day"] for x in b.days()] == [days[0]]
    rnd = random.Random(3)
    assert answers(store_cli, fresh, days[0], rnd) == answers(
        store_cli, data, days[0], random.Random(3)
    )
    v = subprocess.run(
        [str(store_cli_asan), "verify", "--data", str(fresh)], capture_output=True, text=True
    )
    assert v.returncode == 0, v.stdout + v.stderr


def test_object_lock_compliance(
    weed: Weed, store_cli_asan: Path, store_cli: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    days = make_store(store_cli, data, [2, 0], 500, seed=9)
    bucket = weed.bucket("worm", lock=True)
    a = Archive(store_cli_asan, data, tmp_path, {"main": weed.target(bucket, archive_days=30)})
    a.run("once")
    assert a.status()["object_lock"] is True
    s3 = weed.client()
    until = dt.datetime.strptime(str(days[0]), "%Y%m%d").replace(tzinfo=dt.UTC) + dt.timedelta(
        days=31
    )
    keys = weed.keys(bucket)
    assert keys
    for k in keys:
        h = s3.head_object(Bucket=bucket, Key=k)
        assert h.get("ObjectLockMode") == "COMPLIANCE", (k, h)
        assert abs((h["ObjectLockRetainUntilDate"] - until).total_seconds()) < 2, h
    k = next(iter(keys))
    v = s3.list_object_versions(Bucket=bucket, Prefix=k)["Versions"][0]["VersionId"]
    with pytest.raises(Exception) as e:
        s3.delete_object(Bucket=bucket, Key=k, VersionId=v)
    assert "AccessDenied" in str(e.value) or "locked" in str(e.value).lower(), e.value
    assert s3.get_object(Bucket=bucket, Key=k, VersionId=v)["Body"].read()


def test_archive_days_expire_only_days_not_on_local_disk(
    weed: Weed, store_cli_asan: Path, store_cli: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    days = make_store(store_cli, data, [40, 20, 0], 300, seed=11)
    bucket = weed.bucket("expire")
    a = Archive(store_cli_asan, data, tmp_path, {"main": weed.target(bucket)})
    a.run("once")
    assert a.status()["days_archived"] == 2
    # 30 archive days: day 40 is past them, but it is still on local disk: kept.
    a.set_targets({"main": weed.target(bucket, archive_days=30)})
    a.run("once")
    assert a.status()["days_archived"] == 2
    # In a store without it (as after local retention), the pass deletes it from the bucket.
    other = tmp_path / "other"
    empty_store(store_cli, other)
    b = Archive(
        store_cli_asan, other, tmp_path / "b", {"main": weed.target(bucket, archive_days=30)}
    )
    # Its verified file, as the box that archived it keeps it: searches read the day in place
    # (ARCHIVE.md §7) until it expires, then the file goes before the objects.
    s = f"{days[0]:08d}"
    (b.state / "main" / "verified").mkdir(parents=True)
    shutil.copy(a.state / "main" / "verified" / f"{s}.json", b.state / "main" / "verified")
    b.run("once")
    assert not any(k.startswith(f"main/{s[:4]}/{s[4:6]}-{s[6:]}/") for k in weed.keys(bucket))
    assert b.status()["days_archived"] == 1
    assert b.verified() == set(), "an expired day's verified file stays"
    # No target any more: the logspace's state goes, and with it retention's wait.
    assert (a.state / "main" / "verified").is_dir()
    a.set_targets({})
    a.run("once")
    assert not (a.state / "main").exists()


def test_settings_are_checked_and_secrets_stay_out(tmp_path: Path) -> None:
    good = {
        "endpoint": "https://s3.example:9000",
        "bucket": "logs",
        "access_key": "AK",
        "secret_key": "very-secret",
    }
    t = arch.parse_settings({"version": 1, "targets": {"main": good}})["main"]
    assert "very-secret" not in repr(t) and t.where() == "https://s3.example:9000/logs"
    assert t.key(20261120, "messages") == "main/2026/11-20/messages"
    bad = [
        {"endpoint": "http://s3.example:9000"},  # TLS is required
        {"bucket": "A_B"},
        {"prefix": "/x"},
        {"prefix": "a/../b"},
        {"secret_key": ""},
        {"archive_days": -1},
        {"part_mb": 4},
        {"ca_file": "relative.pem"},
        {"colour": "red"},
    ]
    for change in bad:
        with pytest.raises(arch.ArchiveError):
            arch.parse_settings({"version": 1, "targets": {"main": {**good, **change}}})
    with pytest.raises(arch.ArchiveError):
        arch.parse_settings({"version": 1, "targets": {"Main!": good}})
    p = tmp_path / "archive.json"
    p.write_text("{not json")
    with pytest.raises(arch.ArchiveError) as e:
        arch.load_settings(p)
    assert "not JSON" in str(e.value)
    assert arch.load_settings(tmp_path / "missing.json") == {}


def test_tombstone_after_archive_is_archived_too(
    weed: Weed,
    store_cli_asan: Path,
    store_cli: Path,
    indexd_bin: Path,
    fifo: HeldFifo,
    tmp_path: Path,
) -> None:
    """Retention removes day D-1 after day D was archived, and leaves its tombstone in D's
    chain: the next pass archives D's chain again, so that D, removed and restored later
    without D-1, still verifies (its chain says where D-1 went)."""
    data = tmp_path / "data"
    days = make_store(store_cli, data, [6, 5, 0], 500, seed=13)
    bucket = weed.bucket("tomb")
    a = Archive(store_cli_asan, data, tmp_path, {"main": weed.target(bucket)})
    a.run("once")
    assert a.verified() == set(days[:2])
    first = json.loads((a.state / "main" / "verified" / f"{days[1]:08d}.json").read_text())
    settings = tmp_path / "logspaces.json"

    def retention(n: int) -> None:
        settings.write_text(
            json.dumps({"version": 1, "logspaces": {"main": {"retention_days": n}}})
        )

    retention(5)  # day 6 goes, its tombstone into day 5's chain
    d = Indexd(
        indexd_bin,
        data,
        tmp_path / "status.json",
        fifo=fifo,
        args=["--logspaces", str(settings), "--archive-state", str(a.state)],
    )
    d.start()
    try:
        wait_until(lambda: d.stderr().count("retention: main: removed") == 1, "day 6 removed", 15)
        a.run("once")
        again = json.loads((a.state / "main" / "verified" / f"{days[1]:08d}.json").read_text())
        assert again["files"]["chain"][0] > first["files"]["chain"][0], (first, again)
        s = f"{days[1]:08d}"
        chain = (
            weed.client()
            .get_object(Bucket=bucket, Key=f"main/{s[:4]}/{s[4:6]}-{s[6:]}/chain")["Body"]
            .read()
        )
        assert len(chain) == again["files"]["chain"][0]
        retention(4)  # now day 5
        d.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: d.stderr().count("retention: main: removed") == 2, "day 5 removed", 15)
        a.run("restore", "--day", s)
    finally:
        assert d.stop() == 0
    v = subprocess.run(
        [str(store_cli_asan), "verify", "--data", str(data)], capture_output=True, text=True
    )
    assert v.returncode == 0, v.stdout + v.stderr


def test_restored_day_without_the_day_before_says_so(
    weed: Weed, store_cli_asan: Path, store_cli: Path, tmp_path: Path
) -> None:
    """A day restored where the day before is neither on local disk nor left a tombstone in
    its chain: verify says it was restored and what to do, and still counts it."""
    data = tmp_path / "data"
    days = make_store(store_cli, data, [6, 5, 0], 300, seed=17)
    bucket = weed.bucket("notomb")
    a = Archive(store_cli_asan, data, tmp_path, {"main": weed.target(bucket)})
    a.run("once")
    fresh = tmp_path / "fresh"
    empty_store(store_cli, fresh)
    b = Archive(store_cli_asan, fresh, tmp_path / "b", {"main": weed.target(bucket)})
    b.run("restore", "--day", f"{days[1]:08d}")
    v = subprocess.run(
        [str(store_cli_asan), "verify", "--data", str(fresh)], capture_output=True, text=True
    )
    assert v.returncode == 1
    assert "restored from the archive, and the day before it" in v.stderr + v.stdout, v.stderr
