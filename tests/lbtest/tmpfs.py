"""A small tmpfs for the full-disk suites (the collector's spool, indexd's spool and store, the
API's accounts store): mounted at a directory for one test and lazily unmounted after. Root
only; the suites skip without it."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def tmpfs(path: Path, size: str, mode: str | None = None) -> Iterator[Path]:
    """A tmpfs of size ("64m") mounted at path (made if missing), with mode ("0700") for its
    root; path, unmounted (umount -l) on the way out."""
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (f",mode={mode}" if mode else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)
