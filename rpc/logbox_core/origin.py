"""The same-origin rule both apps apply to requests that change something (POST, PUT, PATCH,
DELETE): an `Origin` header, when a client sends one, must name this site. Browsers send it on
every cross-site POST, so a page elsewhere cannot make a signed-in browser (or one on the same
network as the API) call us; scripts send none and are let through to their token check."""

from __future__ import annotations

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_DEFAULT_PORTS = {"https": "443", "http": "80"}


def _normal(scheme: str, host: str) -> str:
    """scheme://host with the scheme's default port dropped, lower case."""
    scheme, host = scheme.lower(), host.lower()
    port = _DEFAULT_PORTS.get(scheme)
    if port is not None and host.endswith(":" + port) and not host.endswith("]"):
        host = host[: -len(port) - 1]
    return f"{scheme}://{host}"


def foreign_origin(method: str, origin: str | None, scheme: str, host: str) -> bool:
    """Whether a request must be refused: an unsafe method whose Origin is present and is not
    scheme://host (the site the request was sent to; "null" is foreign)."""
    if method.upper() not in UNSAFE_METHODS or origin is None:
        return False
    o_scheme, sep, o_host = origin.strip().partition("://")
    if not sep or "/" in o_host:
        return True
    return _normal(o_scheme, o_host) != _normal(scheme, host)
