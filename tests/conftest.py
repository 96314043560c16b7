"""Fixtures shared by the cross-folder suites."""

from __future__ import annotations

from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def top() -> Path:
    """The repository's top directory."""
    return TOP


@pytest.fixture(scope="session")
def bin_dir(top: Path) -> Path:
    """Where `make build` puts the programs."""
    return top / "build" / "bin"
