"""The logspace settings file (webui/UI.md "Logspace settings"): the desired delimiters and
retention days per logspace, read and validated here, written atomically (a temporary file in
the same directory, fsync, rename, fsync of the directory). logbox-indexd applies it.

    {"version": 1, "logspaces": {"main": {"retention_days": 30, "delimiters": "&:~?"}}}

No Flask here: the admin pages and the dashboard call these functions with the file's path.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
from dataclasses import dataclass
from typing import Any

# indexd's rules for this file (liblogbox's and indexd's, stated for Python once).
from logbox_core import atomicfile
from logbox_core.constants import (
    DELIMITERS_MAX,
    RESERVED_LOGSPACES,
    RETENTION_MAX,
    logspace_name_problem,
)

RESERVED = ", ".join(RESERVED_LOGSPACES)
VERSION = 1
MAX_FILE_BYTES = 1 << 20

# One writer at a time: a lock in this process, and flock on the file's directory across the
# gunicorn workers (so that two changes of different logspaces cannot lose one).
_write_lock = threading.Lock()


class SettingsError(Exception):
    """A settings value or file that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class LogspaceSettings:
    """One logspace's desired settings; None: not set (indexd keeps its current value)."""

    retention_days: int | None
    delimiters: str | None

    def to_json(self) -> dict[str, Any]:
        """The file's object for this logspace (members that are set)."""
        out: dict[str, Any] = {}
        if self.retention_days is not None:
            out["retention_days"] = self.retention_days
        if self.delimiters is not None:
            out["delimiters"] = self.delimiters
        return out


def check_logspace(name: object) -> str:
    """name when it may name a logspace (lb_logspace_name_ok(): reserved names are refused).

    :raises SettingsError: otherwise.
    """
    if (why := logspace_name_problem(name)) is not None:
        raise SettingsError(f"logspace: {name!r}: {why} (1 to 64 of a-z 0-9 _ -, not {RESERVED})")
    return name


def check_retention(value: object) -> int:
    """retention_days as an int 0..36500 (a decimal string is accepted, as from a form).

    :raises SettingsError: anything else.
    """
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(r"[0-9]{1,6}", text):
            raise SettingsError(
                f"retention_days: expected a whole number of days 0..{RETENTION_MAX}, "
                f"got {value!r}"
            )
        value = int(text)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= RETENTION_MAX:
        raise SettingsError(
            f"retention_days: expected a whole number of days 0..{RETENTION_MAX} "
            f"(0: keep forever), got {value!r}"
        )
    return value


def check_delimiters(value: object) -> str:
    """delimiters when it is at most 63 bytes of printable ASCII, none a letter, a digit or a
    space (white space always delimits).

    :raises SettingsError: anything else, naming the first bad character.
    """
    if not isinstance(value, str):
        raise SettingsError("delimiters: expected a string")
    for i, ch in enumerate(value):
        if not ("!" <= ch <= "~") or ch.isalnum():
            what = "a space" if ch == " " else repr(ch)
            raise SettingsError(
                f"delimiters: character {i + 1} is {what}; expected printable ASCII that is "
                "not a letter, a digit or a space"
            )
    if len(value) > DELIMITERS_MAX:
        raise SettingsError(f"delimiters: at most {DELIMITERS_MAX} characters, got {len(value)}")
    return value


def _logspace_from_json(name: str, obj: object) -> LogspaceSettings:
    """One logspace's object of the file, checked."""
    if not isinstance(obj, dict):
        raise SettingsError(f"logspaces.{name}: expected an object")
    unknown = sorted(set(obj) - {"retention_days", "delimiters"})
    if unknown:
        raise SettingsError(f"logspaces.{name}: unknown member {unknown[0]!r}")
    try:
        if isinstance(obj.get("retention_days"), str):
            raise SettingsError("retention_days: expected a number, got a string")
        retention = check_retention(obj["retention_days"]) if "retention_days" in obj else None
        delims = check_delimiters(obj["delimiters"]) if "delimiters" in obj else None
    except SettingsError as e:
        raise SettingsError(f"logspaces.{name}.{e}") from None
    return LogspaceSettings(retention, delims)


def parse(raw: bytes) -> dict[str, LogspaceSettings]:
    """The logspaces of a settings file's bytes.

    :raises SettingsError: not JSON, another version, or a bad member.
    """
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise SettingsError(f"not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise SettingsError("not a JSON object")
    if doc.get("version") != VERSION:
        raise SettingsError(f"version: expected {VERSION}, got {doc.get('version')!r}")
    spaces = doc.get("logspaces", {})
    if not isinstance(spaces, dict):
        raise SettingsError("logspaces: expected an object")
    out = {}
    for name, obj in spaces.items():
        check_logspace(name)
        out[name] = _logspace_from_json(name, obj)
    return out


def load(path: str | os.PathLike[str]) -> dict[str, LogspaceSettings]:
    """The settings of the file at path; {} when it does not exist.

    :raises SettingsError: the file cannot be read or is not a valid settings file (the message
        names the file).
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise SettingsError(f"{p}: cannot read: {e.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise SettingsError(f"{p}: larger than {MAX_FILE_BYTES} bytes")
    try:
        return parse(raw)
    except SettingsError as e:
        raise SettingsError(f"{p}: {e}") from None


def dumps(spaces: dict[str, LogspaceSettings]) -> bytes:
    """The file's bytes for these settings (logspaces by name, one line per logspace)."""
    body = ",\n".join(
        f"    {json.dumps(n)}: {json.dumps(spaces[n].to_json(), sort_keys=True)}"
        for n in sorted(spaces)
    )
    text = '{\n  "version": 1,\n  "logspaces": {\n' + body + ("\n" if body else "") + "  }\n}\n"
    return text.encode("ascii")


def write_atomically(path: str | os.PathLike[str], data: bytes, mode: int | None = None) -> None:
    """logbox_core.atomicfile.write_atomically, with its failure as a SettingsError."""
    try:
        atomicfile.write_atomically(path, data, mode)
    except OSError as e:
        raise SettingsError(f"{os.fspath(path)}: cannot write: {e.strerror or e}") from None


def set_logspace(
    path: str | os.PathLike[str], name: str, retention_days: object, delimiters: object
) -> LogspaceSettings:
    """Checks the values and writes them for logspace name into the file at path (the other
    logspaces kept as they are); the file is unchanged when anything is refused.

    :raises SettingsError: a bad name or value, an unreadable or invalid existing file, or a
        failed write.
    """
    check_logspace(name)
    new = LogspaceSettings(check_retention(retention_days), check_delimiters(delimiters))
    p = os.fspath(path)
    with _write_lock:
        try:
            dfd = os.open(os.path.dirname(os.path.abspath(p)), os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:
            raise SettingsError(f"{p}: cannot open its directory: {e.strerror}") from None
        try:
            fcntl.flock(dfd, fcntl.LOCK_EX)
            spaces = load(p)
            spaces[name] = new
            write_atomically(p, dumps(spaces))
        finally:
            os.close(dfd)  # releases the flock
    return new
