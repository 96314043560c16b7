"""The web UI's configuration: defaults, then a Python file (LOGBOX_WEBUI_CONFIG), then LOGBOX_*
variables, then a mapping (webui/UI.md "Sessions and security")."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from logbox_core.appconfig import COMMON_DEFAULTS, COMMON_ENVIRONMENT, ConfigError, load_layers

__all__ = ["DEFAULTS", "ENVIRONMENT", "ConfigError", "load"]

DEFAULTS: dict[str, Any] = {
    **COMMON_DEFAULTS,  # SESSION_TTL: absolute lifetime of a sign-in, seconds
    "LOGSPACE_SETTINGS": "/etc/logbox/logspaces.json",
    "SECRET_FILE": "/etc/logbox/webui.secret",
    "SESSION_IDLE": 1800,  # a sign-in ends after this long without a request, seconds
    "PAGE_SIZE": 50,  # results per search page
    "TAIL_MAX_ROWS": 1000,  # rows the live tail view keeps (older ones removed and counted)
    "TESTING": False,
}

# key -> (environment variable, type)
ENVIRONMENT: dict[str, tuple[str, type]] = {
    **COMMON_ENVIRONMENT,
    "LOGSPACE_SETTINGS": ("LOGBOX_LOGSPACE_SETTINGS", str),
    "SECRET_FILE": ("LOGBOX_WEBUI_SECRET_FILE", str),
    "SESSION_IDLE": ("LOGBOX_SESSION_IDLE", int),
    "TAIL_MAX_ROWS": ("LOGBOX_TAIL_MAX_ROWS", int),
}

CONFIG_FILE_VARIABLE = "LOGBOX_WEBUI_CONFIG"
DEFAULT_CONFIG_FILE = "/etc/logbox/webui.py"


def load(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The layered configuration as a dict of upper-case keys, SECRET_KEY included.

    SECRET_KEY comes from the config layers or else from SECRET_FILE; without one the app
    refuses to start unless TESTING (then a random key is made).

    :raises ConfigError: a config file that does not run, an environment value of the wrong
        type, a bad number, or no secret key.
    """
    out = load_layers(
        DEFAULTS,
        ENVIRONMENT,
        CONFIG_FILE_VARIABLE,
        DEFAULT_CONFIG_FILE,
        config,
        ("SESSION_TTL", "SESSION_IDLE", "SEARCHD_TIMEOUT", "PAGE_SIZE", "ACCOUNTS_MAP_SIZE"),
    )
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
