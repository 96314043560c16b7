# Scenario (issue 15, defect 5's API part): the API's accounts store runs out of space, through
# real gunicorn in front of real logbox-searchd. (1) The store's directory is a small tmpfs filled
# to the last byte: authenticated calls that only read (me, logspaces, status, users, tokens,
# audit) answer 200 with tokens whose last_used is due (written best effort, logged once); a
# write that cannot be made (a user, a token, a login, the audit entry a search must leave)
# answers 507 insufficient_storage as JSON, never 500; a refusal (a bad token) stays a 401. Once
# space is freed, everything works again without a restart, last_used included. (2) The LMDB map
# is full (LOGBOX_ACCOUNTS_MAP_SIZE small): a token that does not fit is a 507 JSON, reads keep
# answering 200, a search answers 200 (its audit entry made room by pruning) or 507, and after a
# restart with a larger map everything works. Needs root (mount -t tmpfs): skipped otherwise, saying so.
from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from lbtest.cli import Logbox
from lbtest.rpc import RpcServer
from lbtest.searchd import Searchd, searchd_binary
from lbtest.tmpfs import tmpfs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
]

MESSAGES = b"<14>1 - host app 1 - - hello store full\n<11>1 - host app 2 - - hello again\n"


@pytest.fixture(scope="module")
def searchd(
    tmp_path_factory: pytest.TempPathFactory, top: Path, logbox_bin: Path
) -> Iterator[Searchd]:
    root = tmp_path_factory.mktemp("storefull")
    data = root / "data"
    data.mkdir()
    Logbox(logbox_bin, data, "main").ingest(MESSAGES)
    sd = Searchd(searchd_binary(top), data, root / "searchd.sock").start()
    try:
        yield sd
    finally:
        sd.stop()


def fill(fs: Path) -> Path:
    """A file that takes every byte left on fs."""
    filler = fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    assert os.statvfs(fs).f_bavail == 0
    return filler


def new_token(s: requests.Session, base: str) -> requests.Response:
    """POST /tokens (a write without argon2: cheap to repeat)."""
    return s.post(base + "/tokens", json={"name": f"t{secrets.token_hex(40)}"}, timeout=60)


def new_user(s: requests.Session, base: str) -> requests.Response:
    name = f"u{secrets.token_hex(6)}"
    return s.post(
        base + "/users",
        json={"name": name, "password": f"pw-{secrets.token_hex(8)}", "logspaces": ["*"]},
        timeout=60,
    )


def assert_507(r: requests.Response) -> None:
    assert r.status_code == 507, (r.status_code, r.text[:300])
    assert r.headers["Content-Type"].startswith("application/json")
    err = r.json()["error"]
    assert err["code"] == "insufficient_storage" and "space" in err["message"], err


READS = ("/me", "/logspaces", "/status", "/users", "/tokens", "/audit?limit=5")


def test_file_system_full(searchd: Searchd, tmp_path: Path) -> None:
    root = tmp_path / "rpc"
    with (
        tmpfs(root / "accounts", "4m", "0700") as fs,
        RpcServer(root, searchd_socket=searchd.sock, data=searchd.data) as rpc,
    ):
        admin = rpc.login()
        s = rpc.session(admin)
        # tokens not used yet: their first use writes last_used
        fresh = [s.post(rpc.base + "/tokens", json={"name": f"t{i}"}, timeout=60).json()["token"]
                 for i in range(6)]  # fmt: skip
        filler = fill(fs)
        # writes get a 507 once the store's own free pages are used up (never a 500)
        for _ in range(500):
            r = new_token(s, rpc.base)
            if r.status_code != 201:
                break
        assert_507(r)
        for _ in range(50):  # a search must leave its audit entry: 507 when it cannot
            r = s.get(rpc.base + "/logspaces/main/search", params={"q": "hello"}, timeout=60)
            if r.status_code != 200:
                break
        assert_507(r)
        for i, path in enumerate(READS):
            with rpc.session(fresh[i]) as t:
                r = t.get(rpc.base + path, timeout=60)
            assert r.status_code == 200, (path, r.status_code, r.text[:300])
        assert_507(new_user(s, rpc.base))
        assert_507(s.post(rpc.base + "/tokens", json={"name": "more"}, timeout=60))
        assert_507(s.get(rpc.base + "/logspaces/main/count", params={"q": "x"}, timeout=60))
        with rpc.session() as anon:
            assert_507(anon.post(rpc.base + "/login",
                                 json={"username": "admin", "password": rpc.admin_password},
                                 timeout=60))  # fmt: skip
            r = anon.get(rpc.base + "/me", headers={"Authorization": "Bearer lbx_x"}, timeout=60)
            assert r.status_code == 401, r.text
        log = rpc.log()
        assert "Traceback" not in log and " 500 " not in log, log[-3000:]
        assert log.count("token last_used not written") <= rpc.workers, log[-3000:]
        # space comes back: everything works, no restart
        filler.unlink()
        assert new_user(s, rpc.base).status_code == 201
        r = s.get(rpc.base + "/logspaces/main/search", params={"q": "hello"}, timeout=60)
        assert r.status_code == 200 and r.json()["total"] == 2, r.text[:300]
        assert rpc.login() != admin
        for tok in fresh:
            with rpc.session(tok) as t:
                assert t.get(rpc.base + "/me", timeout=60).status_code == 200
        listed = s.get(rpc.base + "/tokens", timeout=60).json()["tokens"]
        ids = {tok.split("_")[1] for tok in fresh}
        assert all(t["last_used"] is not None for t in listed if t["id"] in ids), listed
        rpc.accounts().close()


def test_map_full(searchd: Searchd, tmp_path: Path) -> None:
    root = tmp_path / "rpc"
    size = str(160 << 10)
    with RpcServer(root, searchd_socket=searchd.sock, data=searchd.data,
                   env={"LOGBOX_ACCOUNTS_MAP_SIZE": size}) as rpc:  # fmt: skip
        admin = rpc.login()
        s = rpc.session(admin)
        fresh = s.post(rpc.base + "/tokens", json={"name": "fresh"}, timeout=60).json()["token"]
        for _ in range(2000):
            r = new_token(s, rpc.base)
            if r.status_code != 201:
                break
        assert_507(r)
        assert "map" in r.json()["error"]["message"], r.text
        with rpc.session(fresh) as t:
            for path in READS:
                r = t.get(rpc.base + path, timeout=60)
                assert r.status_code == 200, (path, r.status_code, r.text[:300])
        # a search must leave its audit entry: the oldest entries are pruned to make room
        # when that is possible, else 507 (this map is full of tokens)
        r = s.get(rpc.base + "/logspaces/main/search", params={"q": "hello"}, timeout=60)
        assert r.status_code == 200 or r.json()["error"]["code"] == "insufficient_storage", r.text
        # a larger map (a restart with a new LOGBOX_ACCOUNTS_MAP_SIZE) and all works again
        rpc.stop()
        rpc.extra_env["LOGBOX_ACCOUNTS_MAP_SIZE"] = str(1 << 30)
        rpc.start()
        assert new_token(s, rpc.base).status_code == 201
        r = s.get(rpc.base + "/logspaces/main/search", params={"q": "hello"}, timeout=60)
        assert r.status_code == 200, r.text[:300]
        assert "Traceback" not in rpc.log(), rpc.log()[-3000:]
        rpc.accounts().close()
