# Scenario: `render.py --prealloc` reserves a disk buffer file's whole size on its file system
# (collector/README.md "Full disk"), and leaves the file as it is, with ENOSPC and the figures,
# when that would leave less than 10 % of the file system free: a buffer bigger than its disk
# (the appliance's 10 GiB buffer on the image's 2 GiB root) must not fill it, which ext4's
# fallocate would do by keeping what it got before failing. On a real 32 MiB tmpfs (root only).
from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from lbtest.collector import render

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def free(path: Path) -> int:
    v = os.statvfs(path)
    return v.f_bavail * v.f_frsize


def test_prealloc_reserves_or_refuses(fs: Path) -> None:
    buf = fs / render.BUFFER_DIR / "syslog-ng-00000.rqf"
    buf.parent.mkdir(parents=True)
    buf.write_bytes(b"\0" * 4096)
    base = render.load_settings(None)

    before = free(fs)
    too_big = replace(base, buffer_size=64 << 20)
    with pytest.raises(OSError) as e:
        render.prealloc_buffer(too_big, data=fs)
    assert e.value.errno == errno.ENOSPC and "not preallocated" in str(e.value)
    assert free(fs) == before, "a refused reservation took space"

    fits = replace(base, buffer_size=8 << 20, log_msg_size=64 << 10)
    assert render.prealloc_buffer(fits, data=fs) == [buf]
    assert os.stat(buf).st_blocks * 512 >= render.prealloc_size(fits)
    assert buf.stat().st_size == 4096, "the file's size stays syslog-ng's"
    assert before - free(fs) >= render.prealloc_size(fits) - 4096
