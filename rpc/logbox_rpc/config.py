"""The app's configuration: defaults, then a Python file, then LOGBOX_* variables, then a mapping
(API.md §8)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "SEARCHD_SOCKET": "/run/logbox/searchd.sock",
    "ACCOUNTS_PATH": "/var/lib/logbox-accounts",
    "DATA_DIR": "/var/lib/logbox",
    "INDEXD_STATUS": "/run/logbox/indexd.status.json",
    "SYSLOGNG_PIDFILE": "/run/logbox/syslog-ng.pid",
    "SESSION_TTL": 43200,
    "SEARCHD_TIMEOUT": 60,
}

# key -> (environment variable, type)
ENVIRONMENT: dict[str, tuple[str, type]] = {
    "SEARCHD_SOCKET": ("LOGBOX_SEARCHD_SOCKET", str),
    "ACCOUNTS_PATH": ("LOGBOX_ACCOUNTS", str),
    "DATA_DIR": ("LOGBOX_DATA", str),
    "INDEXD_STATUS": ("LOGBOX_INDEXD_STATUS", str),
    "SYSLOGNG_PIDFILE": ("LOGBOX_SYSLOGNG_PIDFILE", str),
    "SESSION_TTL": ("LOGBOX_SESSION_TTL", int),
    "SEARCHD_TIMEOUT": ("LOGBOX_SEARCHD_TIMEOUT", float),
}

CONFIG_FILE_VARIABLE = "LOGBOX_RPC_CONFIG"
DEFAULT_CONFIG_FILE = "/etc/logbox/rpc.py"


class ConfigError(Exception):
    """A configuration value that cannot be used (the app refuses to start)."""


def load(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The layered configuration as a dict of upper-case keys.

    :raises ConfigError: for a config file that does not run or an environment value of the
        wrong type.
    """
    out = dict(DEFAULTS)
    path = Path(os.environ.get(CONFIG_FILE_VARIABLE, DEFAULT_CONFIG_FILE))
    if path.is_file():
        ns: dict[str, Any] = {"__file__": str(path)}
        try:
            exec(compile(path.read_bytes(), str(path), "exec"), ns)  # noqa: S102
        except Exception as e:
            raise ConfigError(f"{path}: {type(e).__name__}: {e}") from e
        out.update({k: v for k, v in ns.items() if k.isupper()})
    for key, (var, typ) in ENVIRONMENT.items():
        raw = os.environ.get(var)
        if raw is None or raw == "":
            continue
        try:
            out[key] = typ(raw)
        except ValueError:
            raise ConfigError(f"{var}: expected {typ.__name__}, got {raw!r}") from None
    if config:
        out.update(config)
    for key in ("SESSION_TTL", "SEARCHD_TIMEOUT"):
        if not isinstance(out[key], int | float) or out[key] <= 0:
            raise ConfigError(f"{key}: expected a positive number, got {out[key]!r}")
    return out
