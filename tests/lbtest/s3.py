"""A real S3-compatible object store for the archive's tests and benchmarks: SeaweedFS's
`weed server -s3` (built by tests/seaweedfs.sh into build/peers/weed), on loopback ports of its
own, with HTTPS from a test CA and one identity whose keys the tests pass to logbox-archive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbtest.collector import free_port, make_ca, make_cert

ACCESS_KEY = "LOGBOXTESTACCESSKEY1"
SECRET_KEY = "logbox-test-secret-key-0123456789abcdef"


def weed_binary(top: Path) -> Path:
    p = top / "build" / "peers" / "weed"
    if not p.is_file():
        r = subprocess.run(["sh", str(top / "tests" / "seaweedfs.sh")], capture_output=True)
        if r.returncode != 0:
            raise RuntimeError(f"tests/seaweedfs.sh: {r.stderr.decode()[-2000:]}")
    return p


@dataclass
class Weed:
    """One `weed server` (master, volume, filer and S3 gateway) in directory d."""

    binary: Path
    d: Path
    ports: dict[str, int] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    ca: Path | None = None

    @property
    def endpoint(self) -> str:
        return f"https://localhost:{self.ports['https']}"

    def start(self, timeout: float = 60) -> Weed:
        self.d.mkdir(parents=True, exist_ok=True)
        if self.ca is None:
            ca = make_ca(self.d / "pki", "s3-ca")
            crt, key = make_cert(
                self.d / "pki",
                "s3",
                ca,
                "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth",
            )
            self.ca, self.crt, self.key = ca[0], crt, key
        if not self.ports:
            names = ("master", "volume", "filer", "s3", "https")
            while True:
                ports = {n: free_port() for n in names}
                grpc = {f"{n}.grpc": free_port() for n in ("master", "volume", "filer", "s3")}
                if len(set(ports.values()) | set(grpc.values())) == len(ports) + len(grpc):
                    break
            self.ports = ports | grpc
        conf = self.d / "s3.json"
        conf.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "logbox",
                            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                }
            )
        )
        p = self.ports
        (self.d / "data").mkdir(exist_ok=True)
        argv = [
            str(self.binary),
            "server",
            f"-dir={self.d / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master.grpc']}",
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume.grpc']}",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer.grpc']}",
            "-master.volumeSizeLimitMB=256",
            "-volume.max=64",
            "-s3",
            f"-s3.port={p['s3']}",
            f"-s3.port.grpc={p['s3.grpc']}",
            f"-s3.port.https={p['https']}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.cert.file={self.crt}",
            f"-s3.key.file={self.key}",
            f"-s3.config={conf}",
            "-s3.autoCreateBucket=false",
        ]
        log = open(self.d / "weed.log", "ab")
        self.proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.d, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited {self.proc.returncode}: {self.log()[-3000:]}")
            try:
                self.client().list_buckets()
                # The volume server registers a moment after the S3 gateway answers.
                self._probe()
                return self
            except Exception as e:  # not up yet
                last = e
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"weed did not come up in {timeout} s: {last}\n{self.log()[-3000:]}")

    def _probe(self) -> None:
        s3 = self.client()
        b = "logbox-probe"
        try:
            s3.create_bucket(Bucket=b)
        except Exception as e:
            if "BucketAlreadyOwnedByYou" not in str(e) and "BucketAlreadyExists" not in str(e):
                raise
        s3.put_object(Bucket=b, Key="probe", Body=b"x")
        s3.delete_object(Bucket=b, Key="probe")

    def log(self) -> str:
        try:
            return (self.d / "weed.log").read_text(errors="replace")
        except OSError:
            return ""

    def client(self) -> Any:
        import boto3
        import botocore.config

        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            verify=str(self.ca),
            config=botocore.config.Config(
                s3={"addressing_style": "path"}, retries={"max_attempts": 1}, connect_timeout=3
            ),
        )

    def bucket(self, name: str, lock: bool = False) -> str:
        kw: dict[str, Any] = {"ObjectLockEnabledForBucket": True} if lock else {}
        self.client().create_bucket(Bucket=name, **kw)
        return name

    def target(self, bucket: str, **kw: Any) -> dict[str, Any]:
        """An archive target (archive.json) for a bucket of this server."""
        return {
            "endpoint": self.endpoint,
            "bucket": bucket,
            "access_key": ACCESS_KEY,
            "secret_key": SECRET_KEY,
            "ca_file": str(self.ca),
            **kw,
        }

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.proc = None

    def keys(self, bucket: str, prefix: str = "") -> dict[str, int]:
        s3, out, kw = self.client(), {}, {}
        while True:
            r = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, **kw)
            for o in r.get("Contents", []):
                out[o["Key"]] = int(o["Size"])
            if not r.get("IsTruncated"):
                return out
            kw = {"ContinuationToken": r["NextContinuationToken"]}
