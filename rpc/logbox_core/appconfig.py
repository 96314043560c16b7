"""The apps' configuration layering: defaults, then a Python file, then LOGBOX_* variables, then
a mapping (API.md §8, webui/UI.md "Sessions and security"). Each app (logbox_rpc.config,
logbox_webui.config) adds its own keys to COMMON_DEFAULTS and COMMON_ENVIRONMENT."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# the keys both apps have
COMMON_DEFAULTS: dict[str, Any] = {
    "SEARCHD_SOCKET": "/run/logbox/searchd.sock",
    "ACCOUNTS_PATH": "/var/lib/logbox-accounts",
    "DATA_DIR": "/var/lib/logbox",
    "INDEXD_STATUS": "/run/logbox/indexd.status.json",
    "SYSLOGNG_PIDFILE": "/run/logbox/syslog-ng.pid",
    # logbox-alertd's status file (logbox_core.alertd; the alerts' states)
    "ALERTD_STATUS": "/run/logbox/alertd.status.json",
    # logbox-archive's state (its status.json: each archived logspace's days and last upload)
    "ARCHIVE_STATE": "/var/lib/logbox-archive",
    # the archive targets (logbox_core.archive; secrets: 0640 group logbox-archive)
    "ARCHIVE_SETTINGS": "/etc/logbox/settings/archive.json",
    # the sites and multiple logspaces (logbox_core.federation; tokens: 0640, written by the API)
    "SITES_SETTINGS": "/etc/logbox/settings/sites.json",
    # the daily `logbox verify --json --out` (logbox_core.integrity)
    "INTEGRITY_REPORT": "/var/lib/logbox-verify/integrity.json",
    # the public key day roots are signed with (<data>/indexd/sign.pub, copied at first boot)
    "SIGN_PUBKEY": "/etc/logbox/sign.pub",
    # what `make install` wrote of the build ({"commit": ...}; logbox_core.system)
    "BUILD_INFO": "/usr/lib/logbox/build.json",
    "SESSION_TTL": 43200,
    "SEARCHD_TIMEOUT": 60,
    "ACCOUNTS_MAP_SIZE": 1 << 30,  # bytes: the LMDB map of the accounts store
    # behind nginx on a unix socket: the client's address is X-Forwarded-For's (logbox_core.proxy)
    "BEHIND_PROXY": 0,
    # the alert delivery settings (logbox_core.deliver; secrets: 0640, written by both apps)
    "DELIVERY_SETTINGS": "/etc/logbox/settings/notify.json",
}

# key -> (environment variable, type)
COMMON_ENVIRONMENT: dict[str, tuple[str, type]] = {
    "SEARCHD_SOCKET": ("LOGBOX_SEARCHD_SOCKET", str),
    "ACCOUNTS_PATH": ("LOGBOX_ACCOUNTS", str),
    "DATA_DIR": ("LOGBOX_DATA", str),
    "INDEXD_STATUS": ("LOGBOX_INDEXD_STATUS", str),
    "SYSLOGNG_PIDFILE": ("LOGBOX_SYSLOGNG_PIDFILE", str),
    "ALERTD_STATUS": ("LOGBOX_ALERTD_STATUS", str),
    "ARCHIVE_STATE": ("LOGBOX_ARCHIVE_STATE", str),
    "ARCHIVE_SETTINGS": ("LOGBOX_ARCHIVE_SETTINGS", str),
    "SITES_SETTINGS": ("LOGBOX_SITES_SETTINGS", str),
    "INTEGRITY_REPORT": ("LOGBOX_INTEGRITY_REPORT", str),
    "SIGN_PUBKEY": ("LOGBOX_SIGN_PUBKEY", str),
    "BUILD_INFO": ("LOGBOX_BUILD_INFO", str),
    "SESSION_TTL": ("LOGBOX_SESSION_TTL", int),
    "SEARCHD_TIMEOUT": ("LOGBOX_SEARCHD_TIMEOUT", float),
    "ACCOUNTS_MAP_SIZE": ("LOGBOX_ACCOUNTS_MAP_SIZE", int),
    "BEHIND_PROXY": ("LOGBOX_BEHIND_PROXY", int),
    "DELIVERY_SETTINGS": ("LOGBOX_DELIVERY_SETTINGS", str),
}


class ConfigError(Exception):
    """A configuration value that cannot be used (the app refuses to start)."""


def load_layers(
    defaults: Mapping[str, Any],
    environment: Mapping[str, tuple[str, type]],
    config_file_variable: str,
    default_config_file: str,
    config: Mapping[str, Any] | None,
    positive: Iterable[str],
) -> dict[str, Any]:
    """The layered configuration as a dict of upper-case keys: defaults, then the Python file
    named by $config_file_variable (else default_config_file; skipped when absent), then the
    environment variables, then config; the keys in positive must be positive numbers.

    :raises ConfigError: for a config file that does not run, an environment value of the
        wrong type or a key of positive that is not a positive number.
    """
    out = dict(defaults)
    path = Path(os.environ.get(config_file_variable, default_config_file))
    if path.is_file():
        ns: dict[str, Any] = {"__file__": str(path)}
        try:
            exec(compile(path.read_bytes(), str(path), "exec"), ns)  # noqa: S102
        except Exception as e:
            raise ConfigError(f"{path}: {type(e).__name__}: {e}") from e
        out.update({k: v for k, v in ns.items() if k.isupper()})
    for key, (var, typ) in environment.items():
        raw = os.environ.get(var)
        if raw is None or raw == "":
            continue
        try:
            out[key] = typ(raw)
        except ValueError:
            raise ConfigError(f"{var}: expected {typ.__name__}, got {raw!r}") from None
    if config:
        out.update(config)
    for key in positive:
        if not isinstance(out[key], int | float) or out[key] <= 0:
            raise ConfigError(f"{key}: expected a positive number, got {out[key]!r}")
    return out
