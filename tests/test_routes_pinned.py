# Scenario: the names a [[logspace]] table may use are the same on both sides of collector.toml.
# indexd routes with them (indexer/indexd/routes.c: the listener names; the facility names are
# liblogbox's, lb_query.c), collector/render.py checks the same file and names the listeners
# (the keys of [ports]). A name added or renamed on one side fails here, not at a reload.
from __future__ import annotations

import dataclasses
from pathlib import Path

from lbtest.appliance import render_module
from lbtest.csource import array as c_names


def test_facility_names(top: Path) -> None:
    c = c_names(top / "indexer" / "lib" / "lb_query.c", "facilities")
    assert c == list(render_module().FACILITIES)


def test_listener_names(top: Path) -> None:
    c = c_names(top / "indexer" / "indexd" / "routes.c", "listeners")
    fields = dataclasses.fields(render_module().Settings)
    ports = [f.name.removesuffix("_port") for f in fields if f.name.endswith("_port")]
    assert sorted(c) == sorted([*ports, render_module().INTERNAL])
