"""Day roots off the box (indexer/FORMAT.md §14.7): RFC 3161 time stamps against a real TSA the
test runs, and the root as a syslog line to a remote collector. The TSA:
`openssl ts -reply` behind a small HTTP handler, with a test CA and a TSA certificate
(extendedKeyUsage timeStamping), and a second, rogue TSA the CA does not know.

logbox-indexd with --tsa-url stores a day's records, the day ends (signed), and the thread that
stamps day roots gets a token for it (root.tsr); `logbox verify --tsa-ca` says the day is
time-stamped, and a TCP listener standing for the remote collector gets one RFC 5424 line whose
structured data names the day root's hash and signature as the chain has them. Then: a token
over another hash, a token of the rogue TSA, and a reply that is not a token at all are each
named as a bad time stamp; a TSA answering garbage makes indexd keep no token and say so (log
and status), and stamping resumes once it answers again.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lbtest.chainfmt import read_chain
from lbtest.indexd import Indexd
from lbtest.spool import file_name, record, wait_spool_empty
from lbtest.wait import wait_until

T0 = 1795359974.0  # 2026-11-22 09:46 UTC
N = 3000  # records over two days


def openssl(*args: str, cwd: Path) -> None:
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    assert p.returncode == 0, (args, p.stderr)


def make_tsa(d: Path, name: str, ca: tuple[Path, Path] | None) -> Path:
    """A TSA key and certificate in d (signed by ca, else self-signed) and its openssl ts
    config; the config's path."""
    d.mkdir(parents=True, exist_ok=True)
    ext = d / "tsa.ext"
    ext.write_text("extendedKeyUsage = critical,timeStamping\nbasicConstraints = CA:FALSE\n")
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "tsa.key", cwd=d)
    if ca is None:
        openssl("req", "-new", "-x509", "-key", "tsa.key", "-subj", f"/CN={name}", "-days", "3",
                "-addext", "extendedKeyUsage=critical,timeStamping", "-out", "tsa.crt", cwd=d)  # fmt: skip
    else:
        openssl("req", "-new", "-key", "tsa.key", "-subj", f"/CN={name}", "-out", "tsa.csr", cwd=d)
        openssl("x509", "-req", "-in", "tsa.csr", "-CA", str(ca[0]), "-CAkey", str(ca[1]),
                "-CAcreateserial", "-days", "3", "-extfile", str(ext), "-out", "tsa.crt", cwd=d)  # fmt: skip
    (d / "serial").write_text("01\n")
    cfg = d / "tsa.cnf"
    cfg.write_text(
        "[ tsa ]\ndefault_tsa = t\n[ t ]\n"
        f"dir = {d}\nserial = $dir/serial\nsigner_cert = $dir/tsa.crt\n"
        "signer_key = $dir/tsa.key\nsigner_digest = sha256\ndefault_policy = 1.2.3.4.1\n"
        "digests = sha256\naccuracy = secs:1\nordering = no\ntsa_name = yes\n"
        "ess_cert_id_chain = no\ness_cert_id_alg = sha256\n"
    )
    return cfg


class Tsa:
    """An HTTP TSA on 127.0.0.1: POST a DER query, get `openssl ts -reply`'s DER reply.
    mode "garbage" answers bytes that are no reply."""

    def __init__(self, cfg: Path) -> None:
        self.cfg = cfg
        self.mode = "ok"
        self.requests = 0
        tsa = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                q = self.rfile.read(int(self.headers["Content-Length"]))
                tsa.requests += 1
                body = tsa.reply(q)
                self.send_response(200)
                self.send_header("Content-Type", "application/timestamp-reply")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/tsa"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def reply(self, query: bytes) -> bytes:
        if self.mode == "garbage":
            return b"not a time-stamp reply"
        d = self.cfg.parent
        qf = d / f"q{os.getpid()}-{time.monotonic_ns()}.tsq"
        rf = qf.with_suffix(".tsr")
        qf.write_bytes(query)
        openssl(
            "ts", "-reply", "-config", str(self.cfg), "-queryfile", str(qf), "-out", str(rf), cwd=d
        )
        return rf.read_bytes()

    def stamp_digest(self, digest: bytes) -> bytes:
        """A reply over digest, asked the way openssl ts -query does."""
        d = self.cfg.parent
        q = d / "other.tsq"
        openssl("ts", "-query", "-digest", digest.hex(), "-sha256", "-cert", "-out", str(q), cwd=d)
        return self.reply(q.read_bytes())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    d = tmp_path_factory.mktemp("tsa")
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key", cwd=d)
    openssl("req", "-new", "-x509", "-key", "ca.key", "-subj", "/CN=test TSA CA", "-days", "3",
            "-out", "ca.crt", cwd=d)  # fmt: skip
    good = Tsa(make_tsa(d / "good", "test TSA", (d / "ca.crt", d / "ca.key")))
    rogue = Tsa(make_tsa(d / "rogue", "rogue TSA", None))
    yield {"ca": d / "ca.crt", "good": good, "rogue": rogue}
    good.srv.shutdown()
    rogue.srv.shutdown()


class Collector:
    """A TCP listener on 127.0.0.1 that keeps every line it receives."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.lines: list[str] = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                data = b""
                while chunk := c.recv(65536):
                    data += chunk
            self.lines += data.decode().splitlines()


def verify(cli: Path, data: Path, ca: Path | None) -> subprocess.CompletedProcess[str]:
    extra = ["--tsa-ca", str(ca)] if ca else []
    return subprocess.run([str(cli), "verify", "--data", str(data), *extra], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_day_roots_time_stamped(top: Path, tmp_path: Path, pki: dict) -> None:
    cli = top / "build" / "bin" / "logbox"
    good: Tsa = pki["good"]
    data = tmp_path / "data"
    spool = data / "spool"
    spool.mkdir(parents=True)
    p = subprocess.run(
        [str(cli), "keys", "init", "--data", str(data), "--interval", "1"], capture_output=True
    )
    assert p.returncode == 0, p.stderr
    good.mode = "garbage"  # first the TSA answers garbage: no token is kept
    col = Collector()
    d = Indexd(top / "build" / "bin" / "logbox-indexd", data, tmp_path / "status.json",
               args=["--spool", str(spool), "--tsa-url", good.url, "--root-syslog", col.addr])  # fmt: skip
    d.start()
    try:
        recs = b"".join(
            record(b"<14>Nov 22 10:00:00 host app: seq %05d" % i, T0 + 86400.0 * i / N)
            for i in range(N)
        )
        (spool / file_name(T0, run="t")).write_bytes(recs)
        wait_spool_empty(spool, 60, lambda: d.stderr()[-2000:])
        day0 = sorted(data.glob("main/2026/*"))[0]
        wait_until(
            lambda: any(r.kind == 6 for r in read_chain(day0 / "chain")), "day 1 is signed", 60
        )
        d.wait_logged(
            "not an RFC 3161 time-stamp reply", "indexd says the TSA answered no token", 90
        )
        st = wait_until(
            lambda: (d.status(missing_ok=True) or {}).get("sealing", {}).get("tsa_error"),
            "the status says the time stamps fail",
            30,
        )
        assert "not an RFC 3161 time-stamp reply" in st and good.url in st, st
        assert not (day0 / "root.tsr").exists()
        good.mode = "ok"
        wait_until(lambda: (day0 / "root.tsr").exists(), "day 1 is time-stamped", 90)
        assert "time stamps work again" in d.stderr()
    finally:
        assert d.stop() == 0, d.stderr()[-2000:]
    p = verify(cli, data, pki["ca"])
    assert p.returncode == 0, p.stderr
    assert "; 1 days signed; 1 days time-stamped;" in p.stdout, p.stdout
    root = [r for r in read_chain(day0 / "chain") if r.kind == 6][-1]
    # The remote collector got the day root: its hash and signature as the chain has them.
    sent = [ln for ln in col.lines if " dayroot [dayroot@32473 " in ln]
    assert len(sent) == 1, col.lines
    m = re.match(r'<85>1 \S+ \S+ logbox-indexd - dayroot \[dayroot@32473 logspace="main" '
                 r'day="(\d{4}-\d\d-\d\d)" seq="(\d+)" first_id="1" count="(\d+)" '
                 r'root="([0-9a-f]{64})" sig="([0-9a-f]{128})"\] day root of main ', sent[0])  # fmt: skip
    assert m, sent[0]
    assert m.group(1) == day0.parent.name + "-" + day0.name and int(m.group(2)) == root.seq
    assert m.group(4) == root.hash.hex() and m.group(5) == root.body[16:80].hex(), sent[0]
    assert (day0 / "root.sent").read_text().strip() == sent[0]
    tsr = day0 / "root.tsr"
    token = tsr.read_bytes()

    def bad(body: bytes, ca: Path | None, what: str) -> None:
        tsr.write_bytes(body)
        q = verify(cli, data, ca)
        assert q.returncode == 1 and "bad timestamp" in q.stderr and str(tsr) in q.stderr, (
            what,
            q.stderr,
        )

    bad(good.stamp_digest(hashlib.sha256(b"another day").digest()), pki["ca"], "another hash")
    bad(good.stamp_digest(hashlib.sha256(b"another day").digest()), None, "another hash, no CA")
    bad(pki["rogue"].stamp_digest(root.hash), pki["ca"], "the rogue TSA")
    bad(b"\x30\x03\x02\x01\x00", pki["ca"], "not a token")
    # the rogue TSA's token over the right hash passes without a CA to check it against
    tsr.write_bytes(pki["rogue"].stamp_digest(root.hash))
    assert verify(cli, data, None).returncode == 0
    tsr.write_bytes(token)
    assert verify(cli, data, pki["ca"]).returncode == 0
