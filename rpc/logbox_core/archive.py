"""logbox-archive: a logspace's closed days copied to S3-compatible object storage, verified,
and brought back on demand (indexer/ARCHIVE.md).

The store is liblogbox's: what a day holds, whether it is closed, its catalog extract and the
import of a day brought back all come from `logbox archive days|manifest|import`. This module
holds the object store's side:

- **upload** (`once`, `run`): every closed day of a logspace with a target that has no verified
  copy yet is uploaded file by file (multipart above the part size; the upload's id and each
  part's ETag are kept in <state>/<ls>/uploads/<day>.json, so a killed upload resumes where it
  was and leaves no second upload behind), then **verified**: every object is read back and
  its SHA-256 compared with the local file's. Only then the day's MANIFEST.json is written
  (and read back), and <state>/<ls>/verified/<day>.json: logbox-indexd's retention deletes a
  day of a logspace in <state> only when that file exists.
- **Object Lock**: when the bucket has it, every object is written in compliance mode, retained
  until the day's end plus the archive days (100 years for "forever").
- **archive days**: archived days older than that are deleted from the bucket (the lock, when
  there is one, would refuse an earlier delete).
- **verify**: reads every archived day back against its manifest; a day whose copy is damaged
  loses its verified file (so retention keeps it, and the next pass uploads it again).
- **restore**: downloads a day, checks every object against the manifest, and has `logbox
  archive import` put it back.

Secrets (the access key's secret) are never logged, printed or written to the status file.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logbox_core.atomicfile import write_atomically
from logbox_core.constants import logspace_name_ok, logspace_name_problem

VERSION = 1
MIB = 1 << 20
PART_MB_DEFAULT = 16
PART_MB_MIN = 5  # S3's smallest part but the last
PART_MB_MAX = 1024
READ_CHUNK = 1 * MIB
PARALLEL = 4  # parts sent, and objects read back, at once
FOREVER_YEARS = 100  # how long Object Lock keeps a day archived "forever"
MANIFEST = "MANIFEST.json"
CATALOG = "catalog.json"
PIECE = 256 * 1024  # bytes a piece of a segment, read and checked alone when searched in place
INTERVAL_DEFAULT = 60.0  # seconds between two passes of `run`
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")


class ArchiveError(Exception):
    """A failure of one step, said for a person: what, where and why (never a secret)."""


# ---------------------------------------------------------------- settings


@dataclass(frozen=True)
class Target:
    """Where a logspace's days go."""

    logspace: str
    endpoint: str  # https://host[:port]
    bucket: str
    prefix: str  # "" or a/b
    region: str
    access_key: str
    secret_key: str = field(repr=False)
    ca_file: str | None  # PEM of the CA to trust (None: the system's)
    archive_days: int  # 0: forever
    part_mb: int

    def where(self) -> str:
        """The target as a person reads it (no secret)."""
        return f"{self.endpoint}/{self.bucket}" + (f"/{self.prefix}" if self.prefix else "")

    def key(self, day: int, name: str) -> str:
        """The object name of a day's file: [prefix/]<logspace>/YYYY/MM-DD/<name>."""
        d = f"{day:08d}"
        base = f"{self.logspace}/{d[:4]}/{d[4:6]}-{d[6:]}/{name}"
        return f"{self.prefix}/{base}" if self.prefix else base

    def day_prefix(self) -> str:
        return (f"{self.prefix}/" if self.prefix else "") + f"{self.logspace}/"


def parse_settings(doc: Any) -> dict[str, Target]:
    """The targets of an archive settings document (archive.json). Raises ArchiveError."""
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise ArchiveError(f"archive settings: an object with version {VERSION} is needed")
    targets = doc.get("targets", {})
    if not isinstance(targets, dict):
        raise ArchiveError("archive settings: targets must be an object")
    out: dict[str, Target] = {}
    for ls, t in targets.items():
        where = f"archive settings: targets.{ls}"
        if (why := logspace_name_problem(ls)) is not None:
            raise ArchiveError(f"{where}: {why}")
        if not isinstance(t, dict):
            raise ArchiveError(f"{where}: must be an object")
        unknown = set(t) - {
            "endpoint",
            "bucket",
            "prefix",
            "region",
            "access_key",
            "secret_key",
            "ca_file",
            "archive_days",
            "part_mb",
        }
        if unknown:
            raise ArchiveError(f"{where}: unknown keys {sorted(unknown)}")
        endpoint = t.get("endpoint")
        if not isinstance(endpoint, str) or not re.match(r"^https://[^/\s?#]+$", endpoint):
            raise ArchiveError(f"{where}.endpoint: https://host[:port] (TLS is required)")
        bucket = t.get("bucket")
        if not isinstance(bucket, str) or not _BUCKET_RE.match(bucket):
            raise ArchiveError(f"{where}.bucket: 3 to 63 of a-z 0-9 . -")
        prefix = t.get("prefix", "")
        if not isinstance(prefix, str) or (
            prefix and (not _PREFIX_RE.match(prefix) or {".", ".."} & set(prefix.split("/")))
        ):
            raise ArchiveError(f"{where}.prefix: words of A-Z a-z 0-9 . _ - joined by /")
        region = t.get("region", "us-east-1")
        if not isinstance(region, str) or not re.match(r"^[a-z0-9-]{1,32}$", region):
            raise ArchiveError(f"{where}.region: a region name")
        ak, sk = t.get("access_key"), t.get("secret_key")
        if not isinstance(ak, str) or not ak or not isinstance(sk, str) or not sk:
            raise ArchiveError(f"{where}: access_key and secret_key are needed")
        ca = t.get("ca_file")
        if ca is not None and (not isinstance(ca, str) or not ca.startswith("/")):
            raise ArchiveError(f"{where}.ca_file: an absolute path, or null for the system CAs")
        days = t.get("archive_days", 0)
        if not isinstance(days, int) or isinstance(days, bool) or not 0 <= days <= 36500:
            raise ArchiveError(f"{where}.archive_days: 0 (forever) to 36500")
        part = t.get("part_mb", PART_MB_DEFAULT)
        if (
            not isinstance(part, int)
            or isinstance(part, bool)
            or not (PART_MB_MIN <= part <= PART_MB_MAX)
        ):
            raise ArchiveError(f"{where}.part_mb: {PART_MB_MIN} to {PART_MB_MAX}")
        out[ls] = Target(ls, endpoint, bucket, prefix, region, ak, sk, ca, days, part)
    return out


def load_settings(path: str | os.PathLike[str]) -> dict[str, Target]:
    """The targets in the file at path; none when it does not exist. Raises ArchiveError."""
    try:
        with open(path, "rb") as f:
            raw = f.read(1 << 20)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise ArchiveError(f"{os.fspath(path)}: {e.strerror}") from None
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise ArchiveError(f"{os.fspath(path)}: not JSON: {e}") from None
    return parse_settings(doc)


SETTINGS_GROUP = "logbox-archive"  # the archive.json file's group: logbox-archive reads it
TARGET_KEYS = ("endpoint", "bucket", "prefix", "region", "access_key", "ca_file", "archive_days",
               "part_mb")  # fmt: skip


def target_json(t: Target) -> dict[str, Any]:
    """A target as the API answers it: every setting but the secret, which is secret_key_set."""
    return {
        "endpoint": t.endpoint,
        "bucket": t.bucket,
        "prefix": t.prefix,
        "region": t.region,
        "access_key": t.access_key,
        "secret_key_set": bool(t.secret_key),
        "ca_file": t.ca_file,
        "archive_days": t.archive_days,
        "part_mb": t.part_mb,
    }


def _raw(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read(1 << 20))
    except FileNotFoundError:
        return {"version": VERSION, "targets": {}}
    except (OSError, ValueError) as e:
        raise ArchiveError(f"{path}: cannot be read: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("targets"), dict):
        raise ArchiveError(f"{path}: not archive settings")
    return doc


_write_lock = threading.Lock()


def write_target(
    path: str | os.PathLike[str], ls: str, body: dict[str, Any] | None
) -> Target | None:
    """Sets (body) or removes (None) the target of logspace ls in the settings file at path:
    a body without secret_key keeps the one set. Checked whole before anything is written;
    written atomically, mode 0640, group logbox-archive. Raises ArchiveError."""
    p = os.fspath(path)
    with _write_lock:
        doc = _raw(p)
        targets = dict(doc["targets"])
        if body is None:
            if ls not in targets:
                raise ArchiveError(f"{ls}: no archive target")
            del targets[ls]
        else:
            old = targets.get(ls) if isinstance(targets.get(ls), dict) else {}
            new = {k: v for k, v in body.items()}
            if "secret_key" not in new and old.get("secret_key"):
                new["secret_key"] = old["secret_key"]
            targets[ls] = new
        out = {"version": VERSION, "targets": targets}
        parsed = parse_settings(out)
        try:
            write_atomically(p, _dumps(out), 0o640, SETTINGS_GROUP)
        except OSError as e:
            raise ArchiveError(f"{p}: cannot write: {e.strerror or e}") from None
    return parsed.get(ls)


def read_status(state_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Each archived logspace's last pass, from <state_dir>/status.json (§6 of ARCHIVE.md): {}
    before the first pass, or when the file cannot be read. What the apps and the status show."""
    try:
        with open(os.path.join(state_dir, "status.json"), "rb") as f:
            doc = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return {}
    per = doc.get("logspaces") if isinstance(doc, dict) else None
    if not isinstance(per, dict):
        return {}
    return {ls: st for ls, st in per.items() if isinstance(st, dict)}


# ---------------------------------------------------------------- the object store


def client(t: Target) -> Any:
    """A boto3 S3 client for the target: TLS verified (system CAs or ca_file), SigV4, path-style
    names, bounded timeouts and retries."""
    import boto3
    import botocore.config

    cfg = botocore.config.Config(
        signature_version="s3v4",
        s3={"addressing_style": "path"},
        connect_timeout=10,
        read_timeout=60,
        retries={"max_attempts": 3, "mode": "standard"},
    )
    return boto3.session.Session().client(
        "s3",
        endpoint_url=t.endpoint,
        region_name=t.region,
        aws_access_key_id=t.access_key,
        aws_secret_access_key=t.secret_key,
        verify=t.ca_file if t.ca_file else True,
        config=cfg,
    )


def _why(e: BaseException) -> str:
    """A failure of the object store said in one line, with no secret (botocore's messages
    name the operation, the code and the endpoint; never the credentials)."""
    try:
        from botocore.exceptions import ClientError
    except ImportError:  # pragma: no cover
        ClientError = ()  # type: ignore[assignment]  # noqa: N806
    if isinstance(e, ClientError):
        err = e.response.get("Error", {})
        return f"{err.get('Code', '?')}: {err.get('Message', '')}".strip()
    return f"{type(e).__name__}: {e}"


def _code(e: BaseException) -> str:
    r = getattr(e, "response", None)
    return str(r.get("Error", {}).get("Code", "")) if isinstance(r, dict) else ""


def object_lock(s3: Any, bucket: str) -> bool:
    """Whether the bucket has Object Lock on."""
    try:
        c = s3.get_object_lock_configuration(Bucket=bucket)
    except Exception as e:
        if _code(e) in (
            "ObjectLockConfigurationNotFoundError",
            "ObjectLockConfigurationNotFound",
            "NoSuchObjectLockConfiguration",
            "NotImplemented",
        ):
            return False
        raise
    return c.get("ObjectLockConfiguration", {}).get("ObjectLockEnabled") == "Enabled"


def _lock_args(t: Target, day: int, locked: bool) -> dict[str, Any]:
    if not locked:
        return {}
    end = dt.datetime.strptime(f"{day:08d}", "%Y%m%d").replace(tzinfo=dt.UTC) + dt.timedelta(days=1)
    until = end + dt.timedelta(days=t.archive_days if t.archive_days else FOREVER_YEARS * 366)
    # (a day already past its archive days, as an old import: a lock date must be to come)
    until = max(until, dt.datetime.now(dt.UTC) + dt.timedelta(days=1))
    return {"ObjectLockMode": "COMPLIANCE", "ObjectLockRetainUntilDate": until}


def _md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()


def sha256_pieces(path: Path, piece: int) -> list[str]:
    """The hex SHA-256 of each piece of the file (the last one may be short)."""
    out = []
    with path.open("rb") as f:
        while b := f.read(piece):
            out.append(hashlib.sha256(b).hexdigest())
    return out


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(READ_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def sha256_object(s3: Any, bucket: str, key: str) -> tuple[str, int]:
    """The SHA-256 and size of an object's bytes, read back whole."""
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    h, n = hashlib.sha256(), 0
    try:
        while chunk := body.read(READ_CHUNK):
            h.update(chunk)
            n += len(chunk)
    finally:
        body.close()
    return h.hexdigest(), n


# ---------------------------------------------------------------- the store (logbox archive)


@dataclass
class Store:
    """`logbox archive days|manifest|import` on one data directory."""

    data: Path
    logbox: str = "logbox"

    def _run(self, *args: str) -> str:
        p = subprocess.run(
            [self.logbox, "archive", *args, "--data", str(self.data)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if p.returncode != 0:
            raise ArchiveError(p.stderr.strip().removeprefix("logbox: ") or f"exit {p.returncode}")
        return p.stdout

    def days(self, ls: str) -> list[dict[str, Any]]:
        return list(json.loads(self._run("days", "--logspace", ls))["days"])

    def manifest(self, ls: str, day: int) -> dict[str, Any]:
        return dict(json.loads(self._run("manifest", "--logspace", ls, "--day", f"{day:08d}")))

    def import_day(self, ls: str, staged: Path) -> str:
        return self._run("import", "--logspace", ls, "--dir", str(staged)).strip()


# ---------------------------------------------------------------- the state directory


class State:
    """<state>/<ls>/{verified,uploads}/ and <state>/status.json (ARCHIVE.md "State")."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def ls_dir(self, ls: str) -> Path:
        """<state>/<ls>/ with verified/ and uploads/: made readable by all (logbox-indexd's
        retention reads verified/; no secret is kept here), whatever the umask."""
        d = self.root / ls
        for sub in (self.root, d, d / "verified", d / "uploads"):
            if not sub.is_dir():
                sub.mkdir(parents=True, exist_ok=True)
                os.chmod(sub, 0o755)
        return d

    def verified_path(self, ls: str, day: int) -> Path:
        return self.root / ls / "verified" / f"{day:08d}.json"

    def verified(self, ls: str) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        d = self.root / ls / "verified"
        if not d.is_dir():
            return out
        for p in d.glob("*.json"):
            try:
                out[int(p.stem)] = json.loads(p.read_bytes())
            except (ValueError, OSError):
                continue
        return out

    def set_verified(self, ls: str, day: int, doc: dict[str, Any]) -> None:
        self.ls_dir(ls)
        write_atomically(self.verified_path(ls, day), _dumps(doc), 0o644)

    def unset_verified(self, ls: str, day: int) -> None:
        try:
            self.verified_path(ls, day).unlink()
        except FileNotFoundError:
            pass

    def upload_path(self, ls: str, day: int) -> Path:
        return self.ls_dir(ls) / "uploads" / f"{day:08d}.json"

    def upload(self, ls: str, day: int) -> dict[str, Any]:
        try:
            doc = json.loads(self.upload_path(ls, day).read_bytes())
            return doc if isinstance(doc, dict) else {}
        except (OSError, ValueError):
            return {}

    def set_upload(self, ls: str, day: int, doc: dict[str, Any]) -> None:
        write_atomically(self.upload_path(ls, day), _dumps(doc), 0o600)

    def clear_upload(self, ls: str, day: int) -> None:
        try:
            self.upload_path(ls, day).unlink()
        except FileNotFoundError:
            pass

    def status(self) -> dict[str, Any]:
        try:
            doc = json.loads((self.root / "status.json").read_bytes())
            return doc if isinstance(doc, dict) else {}
        except (OSError, ValueError):
            return {}

    def set_status(self, doc: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_atomically(self.root / "status.json", _dumps(doc), 0o644)


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_day(s: str) -> int:
    """YYYYMMDD or YYYY-MM-DD → the day as a number. Raises ArchiveError."""
    t = s.replace("-", "")
    try:
        dt.datetime.strptime(t, "%Y%m%d")
    except ValueError:
        raise ArchiveError(f"{s}: a day is YYYY-MM-DD") from None
    return int(t)


# ---------------------------------------------------------------- upload


Log = Callable[[str], None]


def _upload_file(
    s3: Any,
    t: Target,
    day: int,
    name: str,
    path: Path,
    sha: str,
    size: int,
    locked: bool,
    state: State,
    progress: dict[str, Any],
    force: bool = False,
) -> int:
    """Puts one file of the day at its object name unless an object there already says it has
    its SHA-256 and size (unless force: it was read back and does not). Returns the bytes
    sent."""
    key = t.key(day, name)
    try:
        h = s3.head_object(Bucket=t.bucket, Key=key)
        if (
            not force
            and h.get("ContentLength") == size
            and h.get("Metadata", {}).get("sha256") == sha
        ):
            return 0
    except Exception as e:
        if _code(e) not in ("404", "NoSuchKey", "NotFound"):
            raise
    part = t.part_mb * MIB
    meta = {"sha256": sha}
    lock = _lock_args(t, day, locked)
    if size <= part:
        data = path.read_bytes()
        if len(data) != size or hashlib.sha256(data).hexdigest() != sha:
            raise ArchiveError(f"{path}: changed while archived")
        s3.put_object(
            Bucket=t.bucket, Key=key, Body=data, ContentMD5=_md5_b64(data), Metadata=meta, **lock
        )
        return size
    files = progress.setdefault("files", {})
    mine = files.get(name)
    if mine is not None and (mine.get("sha256") != sha or mine.get("size") != size):
        mine = None  # a different file: its parts are no use
    # Uploads of this key that are not ours (a crash before we wrote the id down) are aborted:
    # the object is never there twice, and no upload is left to fill the bucket.
    uploads = s3.list_multipart_uploads(Bucket=t.bucket, Prefix=key).get("Uploads", [])
    for u in uploads:
        if u.get("Key") == key and (mine is None or u.get("UploadId") != mine.get("upload_id")):
            s3.abort_multipart_upload(Bucket=t.bucket, Key=key, UploadId=u["UploadId"])
    live = mine is not None and any(
        u.get("UploadId") == mine.get("upload_id") and u.get("Key") == key for u in uploads
    )
    done: dict[int, str] = {}
    if mine is not None and live:
        # The parts the store has, checked against ours (an ETag is the part's MD5).
        listed: dict[int, tuple[str, int]] = {}
        kw: dict[str, Any] = {}
        while True:
            r = s3.list_parts(Bucket=t.bucket, Key=key, UploadId=mine["upload_id"], **kw)
            for p in r.get("Parts", []):
                listed[int(p["PartNumber"])] = (str(p["ETag"]), int(p["Size"]))
            if not r.get("IsTruncated"):
                break
            kw = {"PartNumberMarker": r["NextPartNumberMarker"]}
        for n, etag in mine.get("parts", {}).items():
            got = listed.get(int(n))
            if got is not None and got[0] == etag:
                done[int(n)] = etag
    else:
        r = s3.create_multipart_upload(Bucket=t.bucket, Key=key, Metadata=meta, **lock)
        mine = {"upload_id": r["UploadId"], "sha256": sha, "size": size, "parts": {}}
        files[name] = mine
        state.set_upload(t.logspace, day, progress)
    mine["parts"] = {str(n): e for n, e in done.items()}
    nparts = (size + part - 1) // part
    lock = threading.Lock()

    def send(n: int) -> int:
        with open(path, "rb") as f:
            f.seek((n - 1) * part)
            data = f.read(part)
        md5 = hashlib.md5(data, usedforsecurity=False)
        r = s3.upload_part(
            Bucket=t.bucket,
            Key=key,
            UploadId=mine["upload_id"],
            PartNumber=n,
            Body=data,
            ContentMD5=base64.b64encode(md5.digest()).decode(),
        )
        etag = str(r["ETag"])
        if etag.strip('"') != md5.hexdigest():
            raise ArchiveError(f"{key}: part {n}: the store's ETag is not the part's MD5")
        # Written down as each part lands (in any order): a killed run resumes from here.
        with lock:
            done[n] = etag
            mine["parts"][str(n)] = etag
            state.set_upload(t.logspace, day, progress)
        return len(data)

    todo = [n for n in range(1, nparts + 1) if n not in done]
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        sent = sum(pool.map(send, todo))
    s3.complete_multipart_upload(
        Bucket=t.bucket,
        Key=key,
        UploadId=mine["upload_id"],
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": done[n]} for n in sorted(done)]},
    )
    files.pop(name, None)
    state.set_upload(t.logspace, day, progress)
    return sent


def archive_day(
    s3: Any, t: Target, store: Store, state: State, day: int, locked: bool, log: Log
) -> dict[str, Any]:
    """Uploads one closed day, verifies every object read back, then writes its manifest and
    the verified file. Returns the verified record. Raises ArchiveError (or botocore's)."""
    started = time.monotonic()
    m = store.manifest(t.logspace, day)
    if not m.get("closed"):
        raise ArchiveError(f"{t.logspace} {m.get('date')}: not closed: {m.get('open')}")
    ddir = Path(m["dir"])
    catalog = json.dumps(
        {k: v for k, v in m.items() if k not in ("files", "dir")}, separators=(",", ":")
    ).encode()
    entries: list[dict[str, Any]] = []
    for f in m["files"]:
        p = ddir / f["name"]
        e: dict[str, Any] = {"name": f["name"], "size": int(f["size"]), "sha256": sha256_file(p)}
        if f["name"].endswith(".seg"):
            # Searched in place, a segment is read in pieces, each checked by its SHA-256.
            e["piece"] = PIECE
            e["pieces"] = sha256_pieces(p, PIECE)
        entries.append(e)
        if p.stat().st_size != int(f["size"]):
            raise ArchiveError(f"{p}: changed while archived")
    entries.append(
        {"name": CATALOG, "size": len(catalog), "sha256": hashlib.sha256(catalog).hexdigest()}
    )
    progress = state.upload(t.logspace, day)

    def put(e: dict[str, Any], force: bool) -> int:
        if e["name"] == CATALOG:
            s3.put_object(
                Bucket=t.bucket,
                Key=t.key(day, CATALOG),
                Body=catalog,
                ContentMD5=_md5_b64(catalog),
                Metadata={"sha256": e["sha256"]},
                **_lock_args(t, day, locked),
            )
            return len(catalog)
        p = ddir / e["name"]
        return _upload_file(
            s3, t, day, e["name"], p, e["sha256"], e["size"], locked, state, progress, force
        )

    sent = sum(put(e, False) for e in entries)
    # Read back: an object is trusted only when its bytes are the local file's. One that is
    # not (damaged in the store, or replaced behind the box's back) is sent again, once.
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        back = list(pool.map(lambda e: sha256_object(s3, t.bucket, t.key(day, e["name"])), entries))
    for e, (got, n) in zip(entries, back, strict=True):
        if got == e["sha256"] and n == e["size"]:
            continue
        log(f"{t.key(day, e['name'])}: read back damaged: sending it again")
        sent += put(e, True)
        got, n = sha256_object(s3, t.bucket, t.key(day, e["name"]))
        if got != e["sha256"] or n != e["size"]:
            raise ArchiveError(
                f"{t.key(day, e['name'])}: read back {n} bytes with SHA-256 {got[:16]}…, "
                f"not the {e['size']} bytes {e['sha256'][:16]}… sent: not trusted"
            )
    manifest = {
        "format": VERSION,
        "logspace": t.logspace,
        "day": day,
        "date": m["date"],
        "archived": _now(),
        "messages": int(m["dayref"]["next_id"]) - int(m["dayref"]["first_id"]),
        "files": entries,
    }
    body = _dumps(manifest)
    mkey = t.key(day, MANIFEST)
    s3.put_object(
        Bucket=t.bucket,
        Key=mkey,
        Body=body,
        ContentMD5=_md5_b64(body),
        Metadata={"sha256": hashlib.sha256(body).hexdigest()},
        **_lock_args(t, day, locked),
    )
    if s3.get_object(Bucket=t.bucket, Key=mkey)["Body"].read() != body:
        raise ArchiveError(f"{mkey}: read back, not what was written: not trusted")
    rec = {
        "day": day,
        "date": m["date"],
        "target": t.where(),
        "manifest_sha256": hashlib.sha256(body).hexdigest(),
        "objects": len(entries) + 1,
        "bytes": sum(e["size"] for e in entries) + len(body),
        "messages": manifest["messages"],
        "files": {e["name"]: [e["size"], e["sha256"]] for e in entries if e["name"] != CATALOG},
        # What searching the day in place needs (ARCHIVE.md §7): its ids and times, where its
        # catalog records are, and the pieces of its segments.
        "dayref": m["dayref"],
        "catalog": [len(catalog), hashlib.sha256(catalog).hexdigest()],
        "pieces": {
            e["name"]: {"size": e["piece"], "sha256": e["pieces"]} for e in entries if "pieces" in e
        },
        "verified": _now(),
        "sent": sent + len(body),
        "seconds": round(time.monotonic() - started, 3),
        "object_lock": locked,
    }
    state.set_verified(t.logspace, day, rec)
    state.clear_upload(t.logspace, day)
    # Uploads of the day's names left by a crash of another run: none may stay behind.
    pre = t.key(day, "")
    for u in s3.list_multipart_uploads(Bucket=t.bucket, Prefix=pre).get("Uploads", []):
        s3.abort_multipart_upload(Bucket=t.bucket, Key=u["Key"], UploadId=u["UploadId"])
    log(
        f"{t.logspace} {m['date']}: archived and verified, {rec['objects']} objects, "
        f"{rec['bytes']} bytes ({rec['sent']} sent) in {rec['seconds']} s to {t.where()}"
    )
    return rec


def _local_changed(store: Store, t: Target, day: int, rec: dict[str, Any]) -> bool:
    """Whether a verified day still on local disk has grown since (its chain: a seal, or the
    tombstone of the day before; a time stamp): it is then archived again."""
    files = rec.get("files")
    if not isinstance(files, dict):
        return False
    try:
        m = store.manifest(t.logspace, day)
    except ArchiveError:
        return False
    if not m.get("closed"):
        return False
    now = {f["name"]: int(f["size"]) for f in m["files"]}
    return now != {n: int(v[0]) for n, v in files.items()}


# ---------------------------------------------------------------- a pass


def _list_archived(s3: Any, t: Target) -> tuple[dict[int, int], int, int]:
    """The days with a manifest in the bucket (day → their bytes), all bytes, all objects."""
    days: dict[int, int] = {}
    per: dict[int, int] = {}
    total = objects = 0
    kw: dict[str, Any] = {}
    pre = t.day_prefix()
    while True:
        r = s3.list_objects_v2(Bucket=t.bucket, Prefix=pre, **kw)
        for o in r.get("Contents", []):
            rest = o["Key"][len(pre) :].split("/")
            total += int(o["Size"])
            objects += 1
            if len(rest) >= 3 and len(rest[0]) == 4 and len(rest[1]) == 5:
                try:
                    d = int(rest[0] + rest[1].replace("-", ""))
                except ValueError:
                    continue
                per[d] = per.get(d, 0) + int(o["Size"])
                if rest[-1] == MANIFEST and len(rest) == 3:
                    days[d] = 0
        if not r.get("IsTruncated"):
            break
        kw = {"ContinuationToken": r["NextContinuationToken"]}
    return {d: per.get(d, 0) for d in days}, total, objects


def _expire(
    s3: Any,
    t: Target,
    archived: dict[int, int],
    local: set[int],
    versioned: bool,
    log: Log,
    state: State,
) -> int:
    """Deletes archived days older than archive_days that are not on local disk (every version,
    in a versioned bucket: Object Lock keeps versions, and lets them go past the lock). Returns
    how many. Each day's verified file goes first: searches stop reading the day in place
    before its objects go (ARCHIVE.md §7)."""
    if t.archive_days == 0:
        return 0
    gone = 0
    cutoff = int((dt.datetime.now(dt.UTC) - dt.timedelta(days=t.archive_days)).strftime("%Y%m%d"))
    for day in sorted(archived):
        if day >= cutoff or day in local:
            continue
        d = f"{day:08d}"
        pre = t.day_prefix() + f"{d[:4]}/{d[4:6]}-{d[6:]}/"
        state.unset_verified(t.logspace, day)
        items: list[tuple[str, str | None]]
        if versioned:
            r = s3.list_object_versions(Bucket=t.bucket, Prefix=pre)
            items = [
                (o["Key"], o["VersionId"])
                for o in r.get("Versions", []) + r.get("DeleteMarkers", [])
            ]
        else:
            r = s3.list_objects_v2(Bucket=t.bucket, Prefix=pre)
            items = [(o["Key"], None) for o in r.get("Contents", [])]
        # The manifest last: a day without one is not archived, whatever else is left.
        items.sort(key=lambda kv: kv[0].endswith("/" + MANIFEST))
        for k, v in items:
            if v is None:
                s3.delete_object(Bucket=t.bucket, Key=k)
            else:
                s3.delete_object(Bucket=t.bucket, Key=k, VersionId=v)
        log(f"{t.logspace} {d[:4]}-{d[4:6]}-{d[6:]}: past {t.archive_days} archive days: deleted")
        gone += 1
    return gone


def run_pass(
    targets: dict[str, Target],
    store: Store,
    state: State,
    log: Log,
    only: str | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> int:
    """One pass over every target: uploads, archive days, and the status file. Returns the
    number of failures."""
    status = state.status()
    spaces: dict[str, Any] = status.get("logspaces", {}) if isinstance(status, dict) else {}
    failures = 0
    for ls, t in sorted(targets.items()):
        if only is not None and ls != only:
            continue
        # The hold first: from here on retention deletes only what is verified.
        state.ls_dir(ls)
        st = spaces.setdefault(ls, {"failures": 0})
        st.update({"target": t.where(), "archive_days": t.archive_days})
        st["pass"] = _now()
        try:
            s3 = client(t)
            days = store.days(ls)
            verified = state.verified(ls)
            local = {int(d["day"]) for d in days}
            st["days_local"] = len(days)
            st["object_lock"] = locked = object_lock(s3, t.bucket)
            pending = []
            for d in days:
                day = int(d["day"])
                if not d.get("closed"):
                    continue
                rec = verified.get(day)
                if rec is not None and not _local_changed(store, t, day, rec):
                    continue
                pending.append(day)
            st["pending"] = len(pending)
            for day in pending:
                if stop():
                    break
                rec = archive_day(s3, t, store, state, day, locked, log)
                st["last_upload"] = {
                    k: rec[k] for k in ("date", "verified", "bytes", "sent", "seconds")
                }
                st["pending"] -= 1
            archived, total, objects = _list_archived(s3, t)
            if _expire(s3, t, archived, local, locked, log, state):
                archived, total, objects = _list_archived(s3, t)
            st.update(
                {
                    "days_archived": len(archived),
                    "bytes_archived": total,
                    "objects": objects,
                    "days_verified": len(state.verified(ls)),
                    "ok": True,
                }
            )
            st.pop("error", None)
        except Exception as e:  # one logspace's failure is recorded; the others go on
            failures += 1
            st["failures"] = int(st.get("failures", 0)) + 1
            st["ok"] = False
            st["error"] = {"time": _now(), "message": _why(e)}
            log(f"{ls}: {t.where()}: {_why(e)} (local days are kept)")
        spaces[ls] = st
    for ls in list(spaces):
        if ls not in targets:
            del spaces[ls]
    # A logspace no longer archived: retention stops waiting for its archive.
    if only is None and state.root.is_dir():
        for d in state.root.iterdir():
            if d.is_dir() and logspace_name_ok(d.name) and d.name not in targets:
                shutil.rmtree(d, ignore_errors=True)
                log(f"{d.name}: no archive target any more: retention no longer waits for it")
    state.set_status({"version": VERSION, "updated": _now(), "logspaces": spaces})
    return failures


# ---------------------------------------------------------------- verify and restore


def _get_manifest(s3: Any, t: Target, day: int) -> dict[str, Any]:
    try:
        body = s3.get_object(Bucket=t.bucket, Key=t.key(day, MANIFEST))["Body"].read()
    except Exception as e:
        if _code(e) in ("NoSuchKey", "404", "NotFound"):
            raise ArchiveError(
                f"{t.logspace} {day:08d}: not in the archive ({t.where()})"
            ) from None
        raise
    try:
        m = json.loads(body)
    except ValueError:
        raise ArchiveError(f"{t.key(day, MANIFEST)}: damaged (not JSON)") from None
    if not isinstance(m, dict) or m.get("format") != VERSION or m.get("day") != day:
        raise ArchiveError(f"{t.key(day, MANIFEST)}: damaged or of another day")
    return m


def verify_day(s3: Any, t: Target, day: int) -> list[str]:
    """Reads an archived day back against its manifest: the problems (none: sound)."""
    m = _get_manifest(s3, t, day)
    bad = []
    for e in m["files"]:
        try:
            got, n = sha256_object(s3, t.bucket, t.key(day, e["name"]))
        except Exception as ex:
            bad.append(f"{t.key(day, e['name'])}: {_why(ex)}")
            continue
        if got != e["sha256"] or n != e["size"]:
            bad.append(
                f"{t.key(day, e['name'])}: {n} bytes with SHA-256 {got[:16]}…, the manifest "
                f"says {e['size']} bytes {e['sha256'][:16]}…"
            )
    return bad


def restore_day(s3: Any, t: Target, store: Store, day: int, log: Log) -> str:
    """Downloads an archived day into <data>/<ls>/.restore-<day>/, checks every object against
    the manifest, and has `logbox archive import` put it in place."""
    m = _get_manifest(s3, t, day)
    if any(int(d["day"]) == day for d in store.days(t.logspace)):
        raise ArchiveError(f"{t.logspace} {m['date']}: the day is on local disk already")
    staged = store.data / t.logspace / f".restore-{day:08d}"
    shutil.rmtree(staged, ignore_errors=True)
    try:
        (staged / "index").mkdir(parents=True)
        for e in m["files"]:
            name = str(e["name"])
            if name.startswith("/") or ".." in name.split("/"):
                raise ArchiveError(f"{t.key(day, MANIFEST)}: a bad file name {name!r}")
            dest = staged / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            body = s3.get_object(Bucket=t.bucket, Key=t.key(day, name))["Body"]
            h, n = hashlib.sha256(), 0
            with open(dest, "wb") as f:
                while chunk := body.read(READ_CHUNK):
                    h.update(chunk)
                    n += len(chunk)
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            if h.hexdigest() != e["sha256"] or n != e["size"]:
                raise ArchiveError(
                    f"{t.key(day, name)}: damaged in the archive ({n} bytes, SHA-256 "
                    f"{h.hexdigest()[:16]}…; the manifest says {e['size']} bytes "
                    f"{e['sha256'][:16]}…): not restored"
                )
        out = store.import_day(t.logspace, staged)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    log(out)
    return out


# ---------------------------------------------------------------- command line


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="logbox-archive",
        description="Closed days of the store to S3-compatible object storage (ARCHIVE.md).",
    )
    ap.add_argument(
        "--settings", default=_env("LOGBOX_ARCHIVE_SETTINGS", "/etc/logbox/settings/archive.json")
    )
    ap.add_argument("--state", default=_env("LOGBOX_ARCHIVE_STATE", "/var/lib/logbox-archive"))
    ap.add_argument("--data", default=_env("LOGBOX_DATA", "/var/lib/logbox"))
    ap.add_argument("--logbox", default=_env("LOGBOX_BIN", "logbox"))
    sub = ap.add_subparsers(dest="verb", required=True)
    r = sub.add_parser("run", help="a pass every --interval seconds until SIGTERM")
    r.add_argument("--interval", type=float, default=INTERVAL_DEFAULT)
    o = sub.add_parser("once", help="one pass; exit 1 when a logspace failed")
    o.add_argument("--logspace")
    v = sub.add_parser("verify", help="read archived days back against their manifests")
    v.add_argument("--logspace")
    v.add_argument("--day")
    s = sub.add_parser("restore", help="bring an archived day back to local disk")
    s.add_argument("--logspace", default="main")
    s.add_argument("--day", required=True)
    sub.add_parser("status", help="the last pass's status (JSON)")
    ls = sub.add_parser("list", help="the archived days of a logspace")
    ls.add_argument("--logspace", default="main")
    return ap


def _log(msg: str) -> None:
    print(f"logbox-archive: {msg}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    state = State(Path(args.state))
    store = Store(Path(args.data), args.logbox)
    try:
        if args.verb == "status":
            print(json.dumps(state.status(), indent=1, sort_keys=True))
            return 0
        targets = load_settings(args.settings)
        if args.verb == "once":
            return 1 if run_pass(targets, store, state, _log, only=args.logspace) else 0
        if args.verb == "run":
            return _run(targets_path=args.settings, store=store, state=state, every=args.interval)
        if args.verb in ("restore", "list", "verify") and args.logspace is not None:
            if args.logspace not in targets:
                raise ArchiveError(f"{args.logspace}: no archive target ({args.settings})")
        if args.verb == "restore":
            t = targets[args.logspace]
            restore_day(client(t), t, store, parse_day(args.day), lambda m: print(m))
            return 0
        if args.verb == "list":
            t = targets[args.logspace]
            archived, total, objects = _list_archived(client(t), t)
            for d in sorted(archived):
                print(f"{d // 10000:04d}-{d // 100 % 100:02d}-{d % 100:02d} {archived[d]}")
            print(f"{len(archived)} days, {objects} objects, {total} bytes in {t.where()}")
            return 0
        return _verify(targets, state, args.logspace, args.day)
    except ArchiveError as e:
        _log(str(e))
        return 1
    except Exception as e:
        _log(_why(e))
        return 1


def _verify(targets: dict[str, Target], state: State, only: str | None, day: str | None) -> int:
    bad_days = 0
    for ls, t in sorted(targets.items()):
        if only is not None and ls != only:
            continue
        s3 = client(t)
        days = [parse_day(day)] if day else sorted(_list_archived(s3, t)[0])
        for d in days:
            problems = verify_day(s3, t, d)
            name = f"{d // 10000:04d}-{d // 100 % 100:02d}-{d % 100:02d}"
            if problems:
                bad_days += 1
                # Not trusted: retention keeps the local copy, and the next pass uploads it.
                state.unset_verified(ls, d)
                for p in problems:
                    print(f"{ls} {name}: DAMAGED: {p}")
            else:
                print(f"{ls} {name}: ok")
    return 1 if bad_days else 0


def _run(targets_path: str, store: Store, state: State, every: float) -> int:
    stopping = False

    def on_term(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    _log(f"archiving the days of {store.data} (settings {targets_path}, state {state.root})")
    while not stopping:
        try:
            targets = load_settings(targets_path)
            run_pass(targets, store, state, _log, stop=lambda: stopping)
        except ArchiveError as e:
            _log(str(e))
        deadline = time.monotonic() + every
        while not stopping and time.monotonic() < deadline:
            time.sleep(min(0.5, every))
    return 0


if __name__ == "__main__":
    sys.exit(main())
