"""Replacing a file atomically: the one way logbox's Python writes a settings or state file
that another process reads (the logspace settings, notify.json, logbox-archive's state)."""

from __future__ import annotations

import os
import tempfile


def write_atomically(
    path: str | os.PathLike[str], data: bytes, mode: int | None = None, group: str | None = None
) -> None:
    """Replaces the file at path with data: a temporary file beside it, fsync, rename, fsync of
    the directory. A reader sees the old file or the new one, never a part. mode: the new
    file's permissions (default: the old file's, else 0644). group: the new file's group when
    that group exists and the writer may give it (a member of it; else the writer's own).

    :raises OSError: the directory is missing or not writable, or the disk is full (the old
        file is then unchanged and no temporary file is left).
    """
    p = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(p))
    if mode is None:
        try:
            mode = os.stat(p).st_mode & 0o7777
        except OSError:
            mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(p) + ".", suffix=".tmp", dir=directory)
    try:
        try:
            if group is not None:
                _give_group(fd, group)
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, p)
        tmp = None
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _give_group(fd: int, group: str) -> None:
    import grp

    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        return
    try:
        os.fchown(fd, -1, gid)
    except PermissionError:
        pass
