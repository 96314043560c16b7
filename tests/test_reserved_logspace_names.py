# Scenario: a logspace named after a folder of the data directory (`catalog`, `spool`, ... the
# reserved names of indexer/lib/lb_format.h) is refused by the collector's renderer (a
# [[logspace]] table), by the web UI's logspace settings (set and load) and by the accounts
# store (a user's logspaces), as logbox-indexd refuses it, while a name that merely starts like
# one is taken everywhere. All of them ask logbox_core.constants, which is pinned to the C rule.
from __future__ import annotations

import json
from pathlib import Path

import argon2
import pytest
from lbtest.appliance import render_module
from logbox_core import constants
from logbox_core.accounts import Accounts, Invalid
from logbox_webui import settings as ls_settings

FAST = argon2.PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)  # tests only
RESERVED = constants.RESERVED_LOGSPACES


def test_the_reserved_names_are_the_data_directory_folders() -> None:
    assert {"catalog", "indexd", "spool"} <= set(RESERVED)


@pytest.mark.parametrize("name", RESERVED)
def test_collector_refuses(tmp_path: Path, name: str) -> None:
    render = render_module()
    toml = tmp_path / "collector.toml"
    toml.write_text(f'[[logspace]]\nname = "{name}"\nhost = "^web"\n')
    with pytest.raises(render.SettingsError, match="reserved logspace name"):
        render.load_settings(toml)
    toml.write_text(f'[[logspace]]\nname = "{name}-2"\nhost = "^web"\n')
    assert render.load_settings(toml).routes[0].name == f"{name}-2"


@pytest.mark.parametrize("name", RESERVED)
def test_webui_settings_refuse(tmp_path: Path, name: str) -> None:
    path = tmp_path / "logspaces.json"
    ls_settings.set_logspace(path, "main", 3, ":")
    before = path.read_bytes()
    with pytest.raises(ls_settings.SettingsError, match="reserved logspace name"):
        ls_settings.set_logspace(path, name, 3, ":")
    assert path.read_bytes() == before
    # a file that names one (written by hand) is refused whole, as indexd refuses it
    path.write_text(json.dumps({"version": 1, "logspaces": {name: {"retention_days": 1}}}))
    with pytest.raises(ls_settings.SettingsError, match="reserved logspace name"):
        ls_settings.load(path)
    ls_settings.set_logspace(tmp_path / "other.json", name + "s", 3, ":")


def test_accounts_refuse(tmp_path: Path) -> None:
    acc = Accounts(tmp_path / "accounts", hasher=FAST)
    for name in RESERVED:
        with pytest.raises(Invalid, match="reserved logspace name"):
            acc.add_user("bob", "correct horse battery", "searcher", [name])
    user = acc.add_user("bob", "correct horse battery", "searcher", ["catalogs", "main"])
    assert list(user.logspaces) == ["catalogs", "main"]
