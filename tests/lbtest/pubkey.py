"""The public key download both apps serve (GET /integrity/public-key): one check of it."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path


def check_public_key_download(
    mimetype: str, headers: Mapping[str, str], body: bytes, pub: Path, tmp: Path
) -> None:
    """The answer is the PEM file pub as the attachment logbox-sign.pub, and openssl reads it
    as a public key."""
    assert mimetype == "application/x-pem-file"
    assert headers["Content-Disposition"] == "attachment; filename=logbox-sign.pub"
    assert body == pub.read_bytes()
    got = tmp / "logbox-sign.pub"
    got.write_bytes(body)
    ok = subprocess.run(
        ["openssl", "pkey", "-pubin", "-in", str(got), "-noout"], capture_output=True
    )
    assert ok.returncode == 0, ok.stderr
