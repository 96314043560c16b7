# The OpenAPI document of the RPC API (GET /api/v1/openapi.json) against the app itself: every
# route and method under /api/v1 is in the document and nothing else; each route's declared
# parameters are the document's; the document is valid OpenAPI 3.0.3 (schemathesis loads and
# validates it); every route but health and login requires the bearer scheme; and real answers
# of every operation (success and errors, from a real searchd over a real store) conform to the
# document's status codes, media types, headers and response schemas.

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from flask import Flask
from lbtest import apps
from lbtest.searchd import Searchd
from logbox_rpc import create_app
from logbox_rpc.openapi import document, openapi_path
from logbox_rpc.params import spec_of
from schemathesis.constants import NOT_SET

API = "/api/v1"
PASSWORD = "correct horse battery"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, store_cli: Path) -> Path:
    """A store: main (50 messages over the last hour, with SD); searchd (conftest.py) is over it."""
    data = tmp_path_factory.mktemp("oapi") / "data"
    data.mkdir()
    now = int(time.time())
    lines = b"".join(
        f"<{i % 192}>1 {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(now - 3600 + i))} "
        f'host{i % 3} app - - [ex@1 k="v{i % 2}"] hello world {i}\n'.encode()
        for i in range(50)
    )
    apps.ingest_received(store_cli, data, lines)
    return data


@pytest.fixture(scope="module")
def app(searchd: Searchd, tmp_path_factory: pytest.TempPathFactory, store_cli: Path) -> Flask:
    root = tmp_path_factory.mktemp("oapp")
    # a signing key pair of its own: GET /integrity/public-key answers its PEM
    keys = subprocess.run(
        [str(store_cli), "keys", "init", "--data", str(root / "keys")], capture_output=True
    )
    assert keys.returncode == 0, keys.stderr
    config = apps.app_config(
        searchd,
        root,
        **apps.status_files(root),
        SIGN_PUBKEY=str(root / "keys" / "indexd" / "sign.pub"),
    )
    return apps.add_users(create_app(config), apps.USERS[:1])


@pytest.fixture(scope="module")
def token(app: Flask) -> str:
    secret, _ = app.extensions["logbox"].accounts.create_token("admin", "openapi")
    return secret


@pytest.fixture(scope="module")
def doc(app: Flask, token: str) -> dict[str, Any]:
    """The document as the API serves it."""
    r = app.test_client().get(f"{API}/openapi.json", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.data[:300]
    return r.get_json()


def routes(app: Flask) -> set[tuple[str, str]]:
    """(OpenAPI path, lower-case method) of every rule under /api/v1."""
    out = set()
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith(API + "/"):
            path = re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule.rule[len(API) :])
            for m in rule.methods or ():
                if m not in ("HEAD", "OPTIONS"):
                    out.add((path, m.lower()))
    return out


def test_document_covers_exactly_the_routes(app: Flask, doc: dict[str, Any]) -> None:
    assert all(r.rule.startswith(API + "/") for r in app.url_map.iter_rules())  # no /static
    in_doc = {(p, m) for p, item in doc["paths"].items() for m in item}
    assert in_doc == routes(app)
    assert len(in_doc) == 56
    assert doc == document(app)
    assert (
        openapi_path("/logspaces/<logspace>/messages/<int:id>")
        == "/logspaces/{logspace}/messages/{id}"
    )


def test_declared_parameters_are_the_documents(app: Flask, doc: dict[str, Any]) -> None:
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith(API + "/"):
            continue
        spec = spec_of(app.view_functions[rule.endpoint])
        assert spec is not None, rule.endpoint
        path = openapi_path(rule.rule[len(API) :])
        # Every path variable of the rule is declared as a path parameter.
        assert {p.name for p in spec.params if p.where == "path"} == set(rule.arguments)
        for m in rule.methods or ():
            if m in ("HEAD", "OPTIONS"):
                continue
            op = doc["paths"][path][m.lower()]
            assert op["parameters"] == [p.openapi() for p in spec.params], (path, m)
            by_name = {p["name"]: p for p in op["parameters"]}
            for p in spec.params:
                o = by_name[p.name]
                assert o["in"] == p.where and o["required"] == (p.required or p.where == "path")
                assert o["schema"].get("default") == p.default
                assert o["schema"].get("enum") == (list(p.enum) if p.enum else None)
                assert o["schema"].get("minimum") == p.minimum
                assert o["schema"].get("maximum") == p.maximum
                assert o["description"] == p.description


def test_security_on_every_route_but_health_and_login(doc: dict[str, Any]) -> None:
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": doc["components"]["securitySchemes"]["bearer"]["description"],
    }
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if (path, method) in (("/health", "get"), ("/login", "post")):
                assert op["security"] == []
                assert "401" not in op["responses"] or path == "/login"
            else:
                assert op["security"] == [{"bearer": []}], (path, method)
                assert "401" in op["responses"], (path, method)
            for status, r in op["responses"].items():
                if int(status) >= 400:
                    assert r["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/Error"
                    }


def test_components_schemas(doc: dict[str, Any]) -> None:
    want = {"User", "Token", "AuditEntry", "Message", "SearchResult", "Count", "Histogram",
            "Top", "Logspaces", "Status", "Error", "Integrity"}  # fmt: skip
    assert want <= set(doc["components"]["schemas"])
    assert doc["openapi"] == "3.0.3"


def test_schemathesis_loads_and_validates(doc: dict[str, Any]) -> None:
    schema = schemathesis.from_dict(doc, validate_schema=True)
    ops = [r.ok().path + " " + r.ok().method for r in schema.get_all_operations()]
    assert len(ops) == 56


def test_openapi_needs_a_token(app: Flask) -> None:
    r = app.test_client().get(f"{API}/openapi.json")
    assert r.status_code == 401 and r.get_json()["error"]["code"] == "unauthorized"


# Real calls of every operation, checked against the document by schemathesis.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("/health", "GET", {}),
    ("/login", "POST", {"body": {"username": "admin", "password": PASSWORD}}),
    ("/login", "POST", {"body": {"username": "admin", "password": "wrong password"}}),
    ("/login", "POST", {"body": {"username": "admin"}}),
    ("/me", "GET", {}),
    ("/openapi.json", "GET", {}),
    ("/status", "GET", {}),
    ("/logspaces", "GET", {}),
    ("/logspaces/{logspace}/search", "GET", {"query": {"q": "hello", "limit": 3}}),
    ("/logspaces/{logspace}/search", "GET", {"query": {"q": "hello", "total": "0"}}),
    ("/logspaces/{logspace}/search", "GET", {"query": {"q": "(hello"}}),
    ("/logspaces/{logspace}/count", "GET", {"query": {"q": "world"}}),
    ("/logspaces/{logspace}/histogram", "GET", {"query": {"q": "*", "buckets": 5}}),
    ("/logspaces/{logspace}/top", "GET", {"query": {"q": "*", "field": "ex@1.k"}}),
    ("/logspaces/{logspace}/export", "GET", {"query": {"q": "hello"}}),
    ("/logspaces/{logspace}/export", "GET", {"query": {"q": "hello", "format": "csv"}}),
    ("/logspaces/{logspace}/messages/{id}", "GET", {"path": {"id": 3}}),
    ("/logspaces/{logspace}/messages/{id}", "GET", {"path": {"id": 999}}),
    ("/tokens", "GET", {}),
    ("/tokens", "POST", {"body": {"name": "x", "expires_in": 60}}),
    ("/users", "GET", {}),
    ("/users", "POST", {"body": {"name": "bob", "password": PASSWORD, "logspaces": ["main"]}}),
    ("/users", "POST", {"body": {"name": "bob", "password": PASSWORD}}),
    ("/users/{name}", "GET", {"path": {"name": "bob"}}),
    ("/users/{name}", "PATCH", {"path": {"name": "bob"}, "body": {"disabled": True}}),
    ("/users/{name}", "DELETE", {"path": {"name": "bob"}}),
    ("/users/{name}", "GET", {"path": {"name": "bob"}}),
    ("/audit", "GET", {"query": {"limit": 5}}),
    ("/logspaces/{logspace}/integrity", "GET", {}),
    ("/integrity/public-key", "GET", {}),
    ("/integrity/public-key", "GET", {"query": {"x": "1"}}),
    ("/logout", "POST", {}),
]


def test_real_answers_conform(app: Flask, doc: dict[str, Any], token: str) -> None:
    schema = schemathesis.from_dict(doc, app=app)
    for path, method, parts in CASES:
        op = schema[path][method]
        path_params = {"logspace": "main", **parts.get("path", {})}
        case = op.make_case(
            path_parameters={k: v for k, v in path_params.items() if "{" + k + "}" in path},
            query=parts.get("query"),
            body=parts.get("body", NOT_SET),
            headers={"Authorization": f"Bearer {token}"},
        )
        if path == "/logout":  # a token of its own
            secret, _ = app.extensions["logbox"].accounts.create_token("admin", "logout")
            case.headers = {"Authorization": f"Bearer {secret}"}
        r = case.call_wsgi()
        assert r.status_code < 500, (path, method, r.status_code, r.data[:300])
        case.validate_response(r)
    # DELETE /tokens/{id}: a token made for it.
    _, t = app.extensions["logbox"].accounts.create_token("admin", "bye")
    case = schema["/tokens/{id}"]["DELETE"].make_case(
        path_parameters={"id": t.id}, headers={"Authorization": f"Bearer {token}"}
    )
    r = case.call_wsgi()
    assert r.status_code == 200
    case.validate_response(r)
