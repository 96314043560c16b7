# Scenario (issue 6): the RPC API conforms to the OpenAPI document it serves. schemathesis reads
# GET /api/v1/openapi.json from real gunicorn (TLS, verified with the harness's certificate) in
# front of real logbox-searchd over a small store built with `logbox ingest` (the ingest path is
# not what this file checks), generates up to MAX_EXAMPLES requests per operation (hypothesis,
# derandomized, no shrinking, no deadline: reproducible and bounded) and checks every answer:
# no server error (5xx), a status the document declares for the operation, a body that conforms
# to the declared schema. Every operation of the document is exercised.
#
# Destructive operations: each generated request carries a fresh admin API token, minted with a
# master token that no generated request sees, so POST /logout and DELETE /tokens/{id} only ever
# revoke a throwaway token. Requests aimed at the user "admin" (PATCH or DELETE /users/admin,
# which could disable, demote or delete the one admin all tokens belong to) are sent for the
# user "admin-shadow" instead, a second admin made for the purpose. The generated POST /login
# attempts lock 127.0.0.1 out after ten failures; 429 must then be a declared answer.
#
# hypothesis_compat() below adapts hypothesis-jsonschema (as installed, 0.23) to the installed
# hypothesis (6.170), which dropped an internal interface it uses for object schemas.
from __future__ import annotations

import os
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from lbtest.cli import Logbox
from lbtest.rpc import RpcServer
from lbtest.searchd import Searchd, searchd_binary
from schemathesis.checks import (
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

pytestmark = pytest.mark.slow

MAX_EXAMPLES = int(os.environ.get("LOGBOX_RPC_SCHEMATHESIS_EXAMPLES", "50"))
CHECKS = (not_a_server_error, status_code_conformance, response_schema_conformance)
SHADOW = "admin-shadow"


def hypothesis_compat() -> None:
    """Lets hypothesis-jsonschema 0.23 (what schemathesis 3.38 generates JSON bodies with) run
    on the installed hypothesis 6.170: it drives object schemas with the old
    `cu.many(...).more()` / `.reject()` interface, which hypothesis replaced by a context manager
    (`with many(...) as m: for _ in m:`), so every object body fails with "'many' object has no
    attribute 'more'". The shim gives hypothesis-jsonschema alone (its own `cu` name) the old
    interface on top of the new class."""
    from hypothesis.internal.conjecture import utils as cu
    from hypothesis_jsonschema import _from_schema

    if hasattr(cu.many, "more") or getattr(_from_schema.cu, "_logbox_shim", False):
        return

    class OldMany:
        def __init__(self, data: Any, min_size: int, max_size: float, average_size: float) -> None:
            self.m = cu.many(data, min_size, max_size, average_size)
            self.m.__enter__()
            self.it = iter(self.m)

        def more(self) -> bool:
            try:
                next(self.it)
                return True
            except StopIteration:
                self.m.__exit__(None)
                return False

        def reject(self, why: str | None = None) -> None:
            self.m.reject(why)

    shim = types.SimpleNamespace(**vars(cu))
    shim.many = OldMany
    shim._logbox_shim = True
    _from_schema.cu = shim


@dataclass
class Stack:
    rpc: RpcServer
    master: requests.Session  # an admin session no generated request uses
    origin: str  # https://127.0.0.1:<port>


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path, logbox_bin: Path) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("rpcschema")
    data = root / "data"
    data.mkdir()
    # received now: inside the API's default time range (the last 24 h)
    lines = [
        b"<%d>1 - host-%d app%d %d ID%d - message %d error user%d login from 10.0.0.%d\n"
        % ((i % 24) * 8 + i % 8, i % 5, i % 3, i, i % 4, i, i % 9, i % 255)
        for i in range(500)
    ]
    Logbox(logbox_bin, data, "main").ingest(b"".join(lines))
    Logbox(logbox_bin, data, "web").ingest(b"".join(lines[:20]))
    sd = Searchd(searchd_binary(top), data, root / "searchd.sock").start()
    try:
        with RpcServer(root / "rpc", searchd_socket=sd.sock, data=data) as rpc:
            master = rpc.session(rpc.login())
            r = master.post(
                f"{rpc.base}/users",
                json={
                    "name": SHADOW,
                    "password": "shadow-password-" + os.urandom(4).hex(),
                    "role": "admin",
                    "logspaces": ["*"],
                },
                timeout=30,
            )
            assert r.status_code == 201, r.text
            yield Stack(rpc, master, f"https://127.0.0.1:{rpc.port}")
    finally:
        sd.stop()


def mint(st: Stack) -> str:
    """A fresh admin API token."""
    r = st.master.post(
        f"{st.rpc.base}/tokens", json={"user": "admin", "name": "schemathesis"}, timeout=30
    )
    assert r.status_code == 201, r.text
    return r.json()["token"]


def guard(case: Any) -> None:
    """Sends requests aimed at the admin user to the shadow admin instead."""
    params = case.path_parameters or {}
    if case.method.upper() in ("PATCH", "DELETE") and "/users/" in case.path:
        for k, v in params.items():
            if v == "admin":
                params[k] = SHADOW


def runner(
    st: Stack,
    strategy: Any,
    name: str,
    ran: dict[str, int],
    first: dict[str, str],
    cafile: str,
) -> Callable[[], None]:
    """The hypothesis test of one operation: each case sent with a fresh token, then checked."""

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        guard(case)
        if case.path.endswith("/tail"):
            # a live tail runs until closed: end it after a second (a valid value, the
            # operation's own parameter)
            case.query = {**(case.query or {}), "seconds": "1"}
        ran[name] += 1
        resp = case.call(headers={"Authorization": f"Bearer {mint(st)}"}, verify=cafile, timeout=60)
        case.validate_response(resp, checks=CHECKS)

    return run


def test_api_conforms_to_its_openapi_document(stack: Stack) -> None:
    st = stack
    hypothesis_compat()
    r = st.master.get(f"{st.rpc.base}/openapi.json", timeout=30)
    assert r.status_code == 200, r.text
    raw = r.json()
    assert str(raw.get("openapi", "")).startswith("3."), raw.get("openapi")
    paths = list(raw.get("paths", {}))
    assert paths, "the document declares no paths"
    prefixed = all(p.startswith("/api/v1") for p in paths)
    schema = schemathesis.from_dict(raw, base_url=st.origin + ("" if prefixed else "/api/v1"))
    cafile = str(st.rpc.cafile)
    failures: list[str] = []
    ran: dict[str, int] = {}
    first: dict[str, str] = {}  # the first failure of each operation, as the check said it
    t0 = time.monotonic()
    for result in schema.get_all_operations():
        op = result.ok()
        name = op.verbose_name
        ran[name] = 0

        run = runner(st, op.as_strategy(), name, ran, first, cafile)
        try:
            run()
        except Exception as e:  # one operation's failure does not hide the others'
            failures.append(f"{name}: {first.get(name) or type(e).__name__ + ': ' + str(e)[:1500]}")
    took = time.monotonic() - t0
    assert not failures, f"{len(failures)} operations fail:\n\n" + "\n\n".join(failures)
    assert ran and all(n > 0 for n in ran.values()), ran
    # the admin the harness logged in with is still there and still an admin
    me = st.master.get(f"{st.rpc.base}/me", timeout=30)
    assert me.status_code == 200 and me.json()["user"]["role"] == "admin", me.text
    print(f"schemathesis: {len(ran)} operations, {sum(ran.values())} requests, {took:.1f} s")
