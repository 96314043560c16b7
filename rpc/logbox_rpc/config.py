"""The app's configuration: defaults, then a Python file, then LOGBOX_* variables, then a mapping
(API.md §8; the layering is logbox_core.appconfig's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logbox_core.appconfig import COMMON_DEFAULTS, COMMON_ENVIRONMENT, ConfigError, load_layers

__all__ = ["DEFAULTS", "ENVIRONMENT", "ConfigError", "load"]

DEFAULTS: dict[str, Any] = dict(COMMON_DEFAULTS)

# key -> (environment variable, type)
ENVIRONMENT: dict[str, tuple[str, type]] = dict(COMMON_ENVIRONMENT)

CONFIG_FILE_VARIABLE = "LOGBOX_RPC_CONFIG"
DEFAULT_CONFIG_FILE = "/etc/logbox/rpc.py"


def load(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The layered configuration as a dict of upper-case keys.

    :raises ConfigError: for a config file that does not run or an environment value of the
        wrong type.
    """
    return load_layers(
        DEFAULTS,
        ENVIRONMENT,
        CONFIG_FILE_VARIABLE,
        DEFAULT_CONFIG_FILE,
        config,
        ("SESSION_TTL", "SEARCHD_TIMEOUT", "ACCOUNTS_MAP_SIZE"),
    )
