# logbox_core.origin, the same-origin rule both apps apply to requests that change something: an
# Origin naming this site (scheme, host and port; default ports either way) passes, any other
# (another host, port or scheme, "null", garbage) is foreign; no Origin, and GET/HEAD/OPTIONS,
# are never refused.
from __future__ import annotations

import pytest
from logbox_core.origin import foreign_origin


@pytest.mark.parametrize(
    "origin,host",
    [
        ("https://127.0.0.1:8443", "127.0.0.1:8443"),
        ("https://LOGBOX.example", "logbox.example"),
        ("https://logbox.example", "logbox.example:443"),
        ("https://logbox.example:443", "logbox.example"),
        ("https://[::1]:8444", "[::1]:8444"),
        (None, "logbox.example"),
    ],
)
def test_same_origin_passes(origin: str | None, host: str) -> None:
    for method in ("POST", "PUT", "PATCH", "DELETE", "post"):
        assert not foreign_origin(method, origin, "https", host)


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "null",
        "http://logbox.example",  # another scheme
        "https://logbox.example:8443",  # another port
        "https://logbox.example.evil.example",
        "https://logbox.example/path",
        "logbox.example",
        "",
    ],
)
def test_foreign_origin_is_refused(origin: str) -> None:
    assert foreign_origin("POST", origin, "https", "logbox.example")
    assert not foreign_origin("GET", origin, "https", "logbox.example")
    assert not foreign_origin("OPTIONS", origin, "https", "logbox.example")
