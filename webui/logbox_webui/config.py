"""The web UI's configuration: defaults, then a Python file (LOGBOX_WEBUI_CONFIG), then LOGBOX_*
variables, then a mapping (webui/UI.md "Sessions and security")."""

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
    "LOGSPACE_SETTINGS": "/etc/logbox/logspaces.json",
    "SECRET_FILE": "/etc/logbox/webui.secret",
    "SESSION_TTL": 43200,  # absolute lifetime of a sign-in, seconds
    "SESSION_IDLE": 1800,  # a sign-in ends after this long without a request, seconds
    "SEARCHD_TIMEOUT": 60,
    "PAGE_SIZE": 50,  # results per search page
    "TESTING": False,
}

# key -> (environment variable, type)
ENVIRONMENT: dict[str, tuple[str, type]] = {
    "SEARCHD_SOCKET": ("LOGBOX_SEARCHD_SOCKET", str),
    "ACCOUNTS_PATH": ("LOGBOX_ACCOUNTS", str),
    "DATA_DIR": ("LOGBOX_DATA", str),
    "INDEXD_STATUS": ("LOGBOX_INDEXD_STATUS", str),
    "SYSLOGNG_PIDFILE": ("LOGBOX_SYSLOGNG_PIDFILE", str),
    "LOGSPACE_SETTINGS": ("LOGBOX_LOGSPACE_SETTINGS", str),
    "SECRET_FILE": ("LOGBOX_WEBUI_SECRET_FILE", str),
    "SESSION_TTL": ("LOGBOX_SESSION_TTL", int),
    "SESSION_IDLE": ("LOGBOX_SESSION_IDLE", int),
    "SEARCHD_TIMEOUT": ("LOGBOX_SEARCHD_TIMEOUT", float),
}

CONFIG_FILE_VARIABLE = "LOGBOX_WEBUI_CONFIG"
DEFAULT_CONFIG_FILE = "/etc/logbox/webui.py"


class ConfigError(Exception):
    """A configuration value that cannot be used (the app refuses to start)."""


def load(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The layered configuration as a dict of upper-case keys, SECRET_KEY included.

    SECRET_KEY comes from the config layers or else from SECRET_FILE; without one the app
    refuses to start unless TESTING (then a random key is made).

    :raises ConfigError: a config file that does not run, an environment value of the wrong
        type, a bad number, or no secret key.
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
    for key in ("SESSION_TTL", "SESSION_IDLE", "SEARCHD_TIMEOUT", "PAGE_SIZE"):
        if not isinstance(out[key], int | float) or out[key] <= 0:
            raise ConfigError(f"{key}: expected a positive number, got {out[key]!r}")
    if not out.get("SECRET_KEY"):
        out["SECRET_KEY"] = _secret(out)
    return out


def _secret(cfg: dict[str, Any]) -> bytes:
    """The session signing key from SECRET_FILE (random when TESTING and there is none).

    :raises ConfigError: no readable, non-empty secret file outside TESTING.
    """
    path = Path(str(cfg["SECRET_FILE"]))
    try:
        key = path.read_bytes().strip()
    except OSError as e:
        key = b""
        why = f"{path}: {e.strerror or e}"
    else:
        why = f"{path} is empty"
    if len(key) >= 16:
        return key
    if len(key) > 0:
        why = f"{path}: a secret of at least 16 bytes is needed"
    if cfg.get("TESTING"):
        return os.urandom(32)
    raise ConfigError(
        f"no SECRET_KEY: {why} (set LOGBOX_WEBUI_SECRET_FILE to a file of random bytes)"
    )
