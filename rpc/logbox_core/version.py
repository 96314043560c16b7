"""logbox's version: the one place it is set (rpc/pyproject.toml's copy is pinned by
tests/test_constants_pinned.py)."""

VERSION = "0.1.0"
