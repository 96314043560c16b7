# logbox_core.accounts on real LMDB files: users (validation, roles, rights, the last-admin
# rule), passwords (argon2id stored, never the password; rehash; no timing oracle for unknown
# users), the login lockout under a clock the test controls, tokens (format, expiry, revocation,
# deleted and disabled users, last_used written at most once a minute), the audit log (paging
# newest first with a cursor yields every entry once, with filters; two forked processes writing
# at once lose nothing), a forked child opening its own environment, the schema version check,
# and the admin CLI.

from __future__ import annotations

import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import argon2
import lmdb
import pytest
from lbtest.forked import in_forked_child
from logbox_core import accounts as acm
from logbox_core.accounts import (
    Accounts,
    AuditEntry,
    Conflict,
    Invalid,
    Lockout,
    NotFound,
    StoreVersionError,
    Token,
    TokenError,
    User,
)

FAST = argon2.PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)  # tests only
PW = "correct horse battery"
T0 = 1_795_000_000.0  # 2026-11-18T11:06:40Z


class Clock:
    """A clock the test moves."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def acc(tmp_path: Path, clock: Clock) -> Iterator[Accounts]:
    a = Accounts(tmp_path / "accounts", clock=clock, hasher=FAST)
    yield a
    a.close()


def data_file(acc: Accounts) -> bytes:
    """The bytes of the LMDB data file."""
    return Path(acc.path, "data.mdb").read_bytes()


# ---------------------------------------------------------------- users


def test_users_crud(acc: Accounts, clock: Clock) -> None:
    assert acc.list_users() == [] and not acc.has_admin()
    root = acc.add_user("root", PW, "admin")
    assert root == User("root", "admin", ("*",), False, int(T0 * 1e6))
    clock.t += 1
    bob = acc.add_user("bob.s-1_", PW, "searcher", ["web", "fw", "web"])
    assert bob.logspaces == ("web", "fw")  # duplicates dropped, order kept
    assert acc.get_user("bob.s-1_") == bob and acc.get_user("nobody") is None
    assert acc.get_user("BAD NAME") is None
    assert [u.name for u in acc.list_users()] == ["bob.s-1_", "root"]
    assert acc.has_admin()

    u = acc.update_user("bob.s-1_", role="admin", logspaces=["*"], disabled=True)
    assert (u.role, u.logspaces, u.disabled, u.created_us) == (
        "admin",
        ("*",),
        True,
        bob.created_us,
    )
    assert acc.get_user("bob.s-1_") == u
    u = acc.update_user("bob.s-1_", disabled=False, role="searcher", logspaces=[])
    assert (u.role, u.logspaces, u.disabled) == ("searcher", (), False)
    assert acc.update_user("bob.s-1_") == u  # nothing to change

    acc.delete_user("bob.s-1_")
    assert acc.get_user("bob.s-1_") is None
    with pytest.raises(NotFound) as ei:
        acc.delete_user("bob.s-1_")
    assert ei.value.code == "not_found" and "bob.s-1_" in ei.value.message
    with pytest.raises(NotFound):
        acc.update_user("nobody", role="admin")
    with pytest.raises(Conflict) as ei:
        acc.add_user("root", PW, "searcher")
    assert ei.value.code == "conflict"


@pytest.mark.parametrize(
    "kwargs,member",
    [
        ({"name": ""}, "name"),
        ({"name": "Root"}, "name"),
        ({"name": "a" * 65}, "name"),
        ({"name": "a b"}, "name"),
        ({"name": "é"}, "name"),
        ({"password": "short"}, "password: at least 12 characters"),
        ({"password": "x" * 1025}, "password: at most 1024"),
        ({"password": None}, "password"),
        ({"role": "root"}, "role"),
        ({"logspaces": "main"}, "logspaces"),
        ({"logspaces": ["Main"]}, "logspaces"),
        ({"logspaces": ["a" * 65]}, "logspaces"),
        ({"logspaces": ["a.b"]}, "logspaces"),
        ({"logspaces": [1]}, "logspaces"),
    ],
)
def test_add_user_invalid(acc: Accounts, kwargs: dict, member: str) -> None:
    args = {"name": "alice", "password": PW, "role": "searcher", "logspaces": ["*"], **kwargs}
    with pytest.raises(Invalid) as ei:
        acc.add_user(**args)
    assert ei.value.code == "bad_parameter"
    assert ei.value.message.startswith(member), ei.value.message
    assert acc.list_users() == []


def test_update_user_invalid(acc: Accounts) -> None:
    acc.add_user("alice", PW, "searcher")
    for kw, member in [
        ({"password": "short"}, "password"),
        ({"role": "x"}, "role"),
        ({"logspaces": ["*", "X"]}, "logspaces"),
        ({"disabled": "yes"}, "disabled"),
    ]:
        with pytest.raises(Invalid) as ei:
            acc.update_user("alice", **kw)
        assert ei.value.message.startswith(member + ":")
    assert acc.get_user("alice") == User("alice", "searcher", ("*",), False, int(T0 * 1e6))


def test_can_read_and_json() -> None:
    admin = User("a", "admin", (), False, 1_795_000_000_123_456)
    assert admin.can_read("main") and admin.can_read("anything")
    s = User("s", "searcher", ("web", "fw"), False, 0)
    assert s.can_read("web") and s.can_read("fw") and not s.can_read("main")
    assert User("s", "searcher", ("*",), False, 0).can_read("main")
    assert not User("s", "searcher", (), False, 0).can_read("main")
    assert not User("a", "admin", ("*",), True, 0).can_read("main")
    assert not User("s", "searcher", ("*",), True, 0).can_read("main")
    assert admin.to_json() == {
        "name": "a",
        "role": "admin",
        "logspaces": [],
        "disabled": False,
        "created": "2026-11-18T11:06:40.123456Z",
    }
    assert s.to_json()["created"] == "1970-01-01T00:00:00.000000Z"


def test_last_admin_rule(acc: Accounts) -> None:
    acc.add_user("root", PW, "admin")
    acc.add_user("s", PW, "searcher")
    for change in ({"role": "searcher"}, {"disabled": True}):
        with pytest.raises(Conflict) as ei:
            acc.update_user("root", **change)
        assert "last enabled admin" in ei.value.message
    with pytest.raises(Conflict):
        acc.delete_user("root")
    assert acc.get_user("root").role == "admin" and not acc.get_user("root").disabled
    # A disabled admin does not count as the other admin.
    acc.add_user("root2", PW, "admin")
    acc.update_user("root2", disabled=True)
    with pytest.raises(Conflict):
        acc.delete_user("root")
    # An enabled second admin does.
    acc.update_user("root2", disabled=False)
    acc.update_user("root", role="searcher")
    with pytest.raises(Conflict):
        acc.update_user("root2", disabled=True)
    acc.update_user("root", role="admin")
    acc.delete_user("root2")
    assert acc.has_admin() and [u.name for u in acc.list_users()] == ["root", "s"]
    acc.delete_user("s")  # searchers go freely


# ---------------------------------------------------------------- passwords


def test_argon2id_stored_never_the_password(tmp_path: Path) -> None:
    acc = Accounts(tmp_path / "a")  # argon2-cffi's defaults
    try:
        secret_pw = "Tr0ub4dor&3-unique-" + os.urandom(4).hex()
        acc.add_user("root", secret_pw, "admin")
        token, _ = acc.create_token("root", "ci")
        secret = token.split("_", 2)[2]
        with acc._txn(b"users") as txn:
            rec = json.loads(txn.get(b"root"))
        assert re.fullmatch(r"\$argon2id\$v=19\$m=102400,t=2,p=8\$[^$]+\$[^$]+", rec["hash"])
        assert set(rec) == {"name", "role", "logspaces", "disabled", "created_us", "hash"}
        raw = data_file(acc)
        assert secret_pw.encode() not in raw and secret.encode() not in raw
        assert rec["hash"].encode() in raw  # the file is the one written to
        assert acc.check_password("root", secret_pw).name == "root"
        assert acc.check_password("root", secret_pw + "x") is None
    finally:
        acc.close()


def test_check_password(acc: Accounts) -> None:
    acc.add_user("alice", PW, "searcher")
    assert acc.check_password("alice", PW) == acc.get_user("alice")
    assert acc.check_password("alice", PW.upper()) is None
    assert acc.check_password("nobody", PW) is None
    assert acc.check_password("Bad Name", PW) is None
    assert acc.check_password("alice", "x" * 2000) is None
    acc.update_user("alice", disabled=True)
    assert acc.check_password("alice", PW) is None
    acc.update_user("alice", disabled=False, password="a new password!")
    assert acc.check_password("alice", PW) is None
    assert acc.check_password("alice", "a new password!") is not None


def test_unknown_user_costs_a_verify(tmp_path: Path) -> None:
    acc = Accounts(tmp_path / "a")  # real argon2 cost (~0.1 s a verify)
    try:
        acc.add_user("alice", PW, "searcher")
        acc.check_password("nobody", PW)  # makes the dummy hash once

        def took(name: str) -> float:
            t = time.perf_counter()
            assert acc.check_password(name, "wrong password!") is None
            return time.perf_counter() - t

        known = min(took("alice") for _ in range(2))
        unknown = min(took("nobody") for _ in range(2))
        assert unknown > 0.5 * known and known > 0.5 * unknown, (known, unknown)
    finally:
        acc.close()


def test_rehash_on_login(tmp_path: Path) -> None:
    path = tmp_path / "a"
    old = Accounts(path, hasher=FAST)
    old.add_user("alice", PW, "searcher")
    old.close()
    new = Accounts(path, hasher=argon2.PasswordHasher(time_cost=2, memory_cost=128, parallelism=1))
    try:
        with new._txn(b"users") as txn:
            before = json.loads(txn.get(b"alice"))["hash"]
        assert "m=64,t=1,p=1" in before
        assert new.check_password("alice", PW) is not None
        with new._txn(b"users") as txn:
            after = json.loads(txn.get(b"alice"))["hash"]
        assert "m=128,t=2,p=1" in after
        assert new.check_password("alice", PW) is not None
    finally:
        new.close()


# ---------------------------------------------------------------- lockout


def fail(acc: Accounts, address: str, user: str = "mallory") -> float:
    """One failed login: counted, refused by the password, maybe starting a block; the block
    it starts (0.0), or -1.0 when the lockout refused the attempt before its password."""
    if acc.login_attempt(address, user) is not None:
        return -1.0
    return acc.login_failed(address, user)


def blocked(acc: Accounts, address: str, user: str = "mallory") -> float:
    lock = acc.login_blocked(address, user)
    return 0.0 if lock is None else lock.seconds


def test_lockout(acc: Accounts, clock: Clock) -> None:
    a = "192.0.2.1"
    for _ in range(9):
        assert fail(acc, a) == 0.0
        clock.t += 1
    assert blocked(acc, a) == 0.0
    assert fail(acc, a) == 300.0  # the 10th within 60 s
    assert acc.login_blocked(a, "alice") == Lockout("address", 300.0)  # every name
    assert blocked(acc, "192.0.2.2") == 0.0  # per address
    clock.t += 100
    assert blocked(acc, a) == 200.0
    assert fail(acc, a) == -1.0  # inside the block: refused, and the block does not grow
    assert blocked(acc, a) == 200.0
    clock.t += 200
    assert blocked(acc, a) == 0.0
    # After the block, counting starts again; a success takes back only its user's attempts.
    for _ in range(9):
        assert fail(acc, a) == 0.0
    assert acc.login_attempt(a, "alice") is None
    acc.login_succeeded(a, "alice")
    assert fail(acc, a) == 300.0  # mallory's 10th: alice's success did not clear it


def test_success_takes_back_only_its_own_attempts(acc: Accounts, clock: Clock) -> None:
    a = "192.0.2.3"
    for _ in range(5):
        assert fail(acc, a, "alice") == 0.0
    for _ in range(4):
        assert fail(acc, a, "bob") == 0.0
    assert acc.login_attempt(a, "alice") is None
    acc.login_succeeded(a, "alice")  # alice's 5 failures (and this attempt) are taken back
    for _ in range(5):
        assert fail(acc, a, "bob") == 0.0  # bob: 9
    assert fail(acc, a, "bob") == 300.0


def test_attempts_in_flight_count(acc: Accounts, clock: Clock) -> None:
    a = "192.0.2.4"
    for _ in range(10):  # ten attempts whose passwords are still being checked
        assert acc.login_attempt(a, "x") is None
    lock = acc.login_attempt(a, "x")
    assert lock is not None and lock.scope == "address" and 0 < lock.seconds <= 60
    assert acc.login_failed(a, "x") == 300.0


def test_lockout_window_slides(acc: Accounts, clock: Clock) -> None:
    a = "2001:db8::1"
    start = clock.t
    for i in range(9):  # at 0, 7, 14, ..., 56 s
        clock.t = start + 7 * i
        assert fail(acc, a) == 0.0
    clock.t = start + 60.5  # the first failure left the window: 9 within it
    assert fail(acc, a) == 0.0
    clock.t = start + 61  # 7..61: 10 within 60 s
    assert fail(acc, a) == 300.0
    assert blocked(acc, a) == 300.0


def test_user_name_lockout_spares_known_addresses(acc: Accounts, clock: Clock) -> None:
    acc.add_user("alice", PW, "searcher")
    assert acc.login_attempt("198.51.100.1", "alice") is None
    acc.login_succeeded("198.51.100.1", "alice")  # alice's usual address
    for i in range(30):  # 30 failures from 10 addresses: none reaches its own limit
        assert fail(acc, f"203.0.113.{i % 10}", "alice") == 0.0
        clock.t += 1
    lock = acc.login_attempt("203.0.113.99", "alice")
    assert lock is not None and lock.scope == "user", lock
    assert 260 < lock.seconds <= 300  # until the oldest failure leaves the 300 s window
    assert acc.login_attempt("198.51.100.1", "alice") is None  # known: not refused
    acc.login_succeeded("198.51.100.1", "alice")
    assert acc.login_attempt("203.0.113.99", "bob") is None  # other names: not refused
    assert acc.login_attempt("203.0.113.98", "nobody") is None
    clock.t += 300
    assert acc.login_attempt("203.0.113.99", "alice") is None  # the window passed
    # a name no user can have is counted per address only
    for _ in range(40):
        acc.login_attempt(f"192.0.2.{clock.t % 200:.0f}", "Not A Name!")
        clock.t += 7
    assert acc.login_attempt("192.0.2.250", "Not A Name!") is None


def test_lockout_settings_and_purge(tmp_path: Path, clock: Clock) -> None:
    acc = Accounts(
        tmp_path / "a", clock=clock, lockout_failures=3, lockout_window=10, lockout_seconds=30
    )
    try:
        with acc._txn(b"failures", write=True) as txn:
            txn.put(b"10.9.9.9", b'{"times": [], "blocked_until": null}')  # the old layout
        for i in range(50):
            fail(acc, f"10.0.0.{i}", f"u{i}")
        assert fail(acc, "x") == 0.0 and fail(acc, "x") == 0.0
        assert fail(acc, "x") == 30.0
        clock.t += 300 + 31  # the windows passed: the next attempt purges dead records
        fail(acc, "y", "zed")
        with acc._txn(b"failures") as txn:
            assert sorted(k for k, _ in txn.cursor()) == [b"a:y", b"u:zed"]
    finally:
        acc.close()


# ---------------------------------------------------------------- tokens


def test_token_round_trip(acc: Accounts, clock: Clock) -> None:
    acc.add_user("alice", PW, "searcher", ["web"])
    token, t = acc.create_token("alice", "ci job ☃", ttl=3600)
    m = re.fullmatch(r"lbx_([0-9a-f]{12})_([A-Za-z0-9_-]{43})", token)
    assert m and m.group(1) == t.id
    now = int(T0 * 1e6)
    assert t == Token(t.id, "alice", "ci job ☃", "api", now, now + 3_600_000_000, None, None)
    assert acc.get_token(t.id) == t and acc.get_token("0" * 12) is None
    assert acc.get_token("nonsense") is None
    assert t.to_json() == {
        "id": t.id,
        "user": "alice",
        "name": "ci job ☃",
        "kind": "api",
        "created": "2026-11-18T11:06:40.000000Z",
        "expires": "2026-11-18T12:06:40.000000Z",
        "revoked": None,
        "last_used": None,
    }
    tok, user = acc.verify_token(token)
    assert user == acc.get_user("alice") and tok.last_used_us == now
    # last_used is written at most once a minute.
    clock.t += 59
    assert acc.verify_token(token)[0].last_used_us == now
    assert acc.get_token(t.id).last_used_us == now
    clock.t += 1
    assert acc.verify_token(token)[0].last_used_us == now + 60_000_000
    assert acc.get_token(t.id).last_used_us == now + 60_000_000
    assert acc.get_token(t.id).to_json()["last_used"] == "2026-11-18T11:07:40.000000Z"


def reason(acc: Accounts, token: str) -> str:
    with pytest.raises(TokenError) as ei:
        acc.verify_token(token)
    return ei.value.reason


def test_token_refusals(acc: Accounts, clock: Clock) -> None:
    acc.add_user("root", PW, "admin")
    acc.add_user("alice", PW, "searcher")
    token, t = acc.create_token("alice", "x", ttl=10)
    for bad in ["", "lbx_", token[:-1], token + "A", token.replace("lbx_", "lbz_"), "Bearer x"]:
        assert reason(acc, bad) == "malformed"
    assert reason(acc, None) == "malformed"  # type: ignore[arg-type]
    other = token[:17] + ("A" if token[17] != "A" else "B") + token[18:]
    assert reason(acc, other) == "unknown"  # the right id, a wrong secret
    assert reason(acc, "lbx_000000000000_" + token[17:]) == "unknown"
    clock.t += 9.999
    acc.verify_token(token)
    clock.t += 0.001
    assert reason(acc, token) == "expired"

    never, t2 = acc.create_token("alice", "forever", ttl=None)
    assert t2.expires_us is None
    clock.t += 10 * 365 * 86400
    acc.verify_token(never)
    acc.update_user("alice", disabled=True)
    assert reason(acc, never) == "user"
    acc.update_user("alice", disabled=False)
    acc.verify_token(never)

    clock.t += 1
    r1 = acc.revoke_token(t2.id)
    assert r1.revoked_us == int(clock.t * 1e6)
    clock.t += 1
    assert acc.revoke_token(t2.id).revoked_us == r1.revoked_us  # the first time stays
    assert reason(acc, never) == "revoked"
    with pytest.raises(NotFound):
        acc.revoke_token("0" * 12)
    with pytest.raises(NotFound):
        acc.revoke_token("../x")

    # Deleting a user revokes their tokens; a new user of the same name does not revive them.
    tok3, t3 = acc.create_token("alice", "y")
    acc.delete_user("alice")
    assert reason(acc, tok3) == "revoked"
    assert acc.get_token(t3.id).revoked_us == int(clock.t * 1e6)
    acc.add_user("alice", PW, "searcher")
    assert reason(acc, tok3) == "revoked"
    e = TokenError("user", "m")
    assert e.code == "unauthorized" and e.message == "m"


def test_token_create_invalid(acc: Accounts) -> None:
    acc.add_user("alice", PW, "searcher")
    with pytest.raises(NotFound):
        acc.create_token("bob", "x")
    for kw, member in [
        ({"name": ""}, "name:"),
        ({"name": "x" * 129}, "name:"),
        ({"name": "a\nb"}, "name:"),
        ({"kind": "root"}, "kind:"),
        ({"ttl": 0}, "expires_in:"),
        ({"ttl": -5}, "expires_in:"),
        ({"ttl": True}, "expires_in:"),
        ({"ttl": "60"}, "expires_in:"),
    ]:
        args = {"name": "n", **kw}
        with pytest.raises(Invalid) as ei:
            acc.create_token("alice", **args)
        assert ei.value.message.startswith(member), ei.value.message
    assert acc.list_tokens() == []
    _, t = acc.create_token("alice", "x" * 128, kind="session", ttl=0.5)
    assert t.kind == "session" and t.expires_us == t.created_us + 500_000


def test_list_tokens_newest_first(acc: Accounts, clock: Clock) -> None:
    acc.add_user("a", PW, "admin")
    acc.add_user("b", PW, "searcher")
    made = []
    for i in range(6):
        clock.t += 1
        made.append(acc.create_token("ab"[i % 2], f"t{i}")[1])
    assert acc.list_tokens() == made[::-1]
    assert acc.list_tokens("b") == [made[5], made[3], made[1]]
    assert acc.list_tokens("nobody") == []


def test_old_tokens_purged(acc: Accounts, clock: Clock) -> None:
    acc.add_user("a", PW, "admin")
    _, old = acc.create_token("a", "old", ttl=60)
    _, rev = acc.create_token("a", "revoked")
    acc.revoke_token(rev.id)
    _, keep = acc.create_token("a", "keep")
    clock.t += 31 * 86400
    _, new = acc.create_token("a", "new")
    assert {t.id for t in acc.list_tokens()} == {keep.id, new.id}


# ---------------------------------------------------------------- audit


def test_audit_entry(acc: Accounts, clock: Clock) -> None:
    e = acc.audit(
        "search",
        user="alice",
        address="192.0.2.7",
        logspace="main",
        query="failed \udcff",
        results=3,
        detail=None,
    )
    assert e == AuditEntry(
        e.id, int(T0 * 1e6), "alice", "192.0.2.7", "search", "main", "failed \udcff", 3, 200, None
    )
    assert e.id == int(T0 * 1e6) << 10
    assert e.to_json() == {
        "id": str(e.id),  # a decimal string: beyond 2^53
        "time": "2026-11-18T11:06:40.000000Z",
        "user": "alice",
        "address": "192.0.2.7",
        "action": "search",
        "logspace": "main",
        "query": "failed \udcff",
        "results": 3,
        "status": 200,
        "detail": None,
    }
    e2 = acc.audit("denied", user=None, address=None, status=401, detail="no token")
    assert e2.id == e.id + 1 and e2.time_us == e.time_us  # the same µs: the sequence counts
    assert acc.audit_entries() == ([e2, e], None)
    # A clock that goes back does not make ids go back.
    clock.t -= 10
    e3 = acc.audit("login", user="x", address="a")
    assert e3.id == e2.id + 1 and e3.time_us == e2.time_us


def test_audit_paging(acc: Accounts, clock: Clock) -> None:
    users, actions = ["alice", "bob", None], ["search", "login", "export", "denied"]
    made = []
    for i in range(203):
        if i % 3 == 0:
            clock.t += 0.5  # then two more in the same µs
        made.append(
            acc.audit(actions[i % 4], user=users[i % 3], address=f"10.0.0.{i % 7}", results=i)
        )
    ids = [e.id for e in made]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    newest_first = made[::-1]

    def pages(limit: int, **filters: object) -> list[AuditEntry]:
        out, cursor, n = [], None, 0
        while True:
            page, cursor = acc.audit_entries(limit=limit, cursor=cursor, **filters)
            assert len(page) <= limit
            out += page
            n += 1
            if cursor is None:
                return out
            assert page and cursor == page[-1].id
            assert n < 1000

    for limit in (1, 7, 100, 203, 1000):
        assert pages(limit) == newest_first
    assert pages(10, user="alice") == [e for e in newest_first if e.user == "alice"]
    assert pages(10, action="export") == [e for e in newest_first if e.action == "export"]
    assert pages(3, user="bob", action="login") == [
        e for e in newest_first if e.user == "bob" and e.action == "login"
    ]
    assert pages(5, user="nobody") == []
    lo, hi = made[50].time_us, made[120].time_us
    assert pages(9, from_us=lo, to_us=hi) == [e for e in newest_first if lo <= e.time_us < hi]
    assert pages(9, from_us=lo) == [e for e in newest_first if e.time_us >= lo]
    assert pages(9, to_us=hi) == [e for e in newest_first if e.time_us < hi]
    # An exact multiple of the limit ends without an empty page.
    page, cur = acc.audit_entries(limit=203)
    assert len(page) == 203 and cur is None
    page, cur = acc.audit_entries(limit=202)
    assert cur == made[1].id
    assert acc.audit_entries(limit=202, cursor=cur) == ([made[0]], None)
    assert acc.audit_entries(cursor=made[0].id) == ([], None)
    with pytest.raises(Invalid):
        acc.audit_entries(limit=0)


def _audit_writer(path: str, tag: str, n: int, go: multiprocessing.synchronize.Event) -> None:
    acc = Accounts(path, hasher=FAST)
    go.wait()
    for i in range(n):
        acc.audit("search", user=tag, address=None, results=i)
    acc.close()


def test_two_processes_audit_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "a")
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    n = 400
    procs = [ctx.Process(target=_audit_writer, args=(path, f"p{k}", n, go)) for k in range(2)]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    acc = Accounts(path)
    entries, cur = acc.audit_entries(limit=10_000)
    acc.close()
    assert cur is None and len(entries) == 2 * n
    for tag in ("p0", "p1"):
        assert sorted(e.results for e in entries if e.user == tag) == list(range(n))
        mine = [e.results for e in entries if e.user == tag]
        assert mine == sorted(mine, reverse=True)  # each writer's order kept
    ids = [e.id for e in entries]
    assert ids == sorted(set(ids), reverse=True)
    users = [e.user for e in entries]
    assert any(a != b for a, b in zip(users, users[1:], strict=False))  # they did interleave


def test_forked_child_opens_its_own_env(acc: Accounts) -> None:
    acc.add_user("root", PW, "admin")
    parent_env = acc._env
    assert parent_env is not None

    def child() -> list[bool]:
        token, _ = acc.create_token("root", "child")
        ok = acc.verify_token(token)[1].name == "root"
        acc.audit("login", user="root", address="child")
        fresh = acc._env is not parent_env and parent_env in acm._inherited
        return [ok, fresh, acc._pid == os.getpid()]

    assert in_forked_child(child) == [True, True, True]
    # The parent's environment still works and sees the child's writes.
    assert acc._env is parent_env
    assert [t.name for t in acc.list_tokens()] == ["child"]
    assert acc.audit_entries()[0][0].address == "child"


def test_threads_share_one_env(acc: Accounts) -> None:
    from concurrent.futures import ThreadPoolExecutor

    acc.add_user("root", PW, "admin")
    token, _ = acc.create_token("root", "t")

    def work(i: int) -> int:
        acc.verify_token(token)
        return acc.audit("search", user="root", address=str(i)).id

    with ThreadPoolExecutor(max_workers=16) as ex:
        ids = list(ex.map(work, range(400)))
    assert len(set(ids)) == 400
    assert len(acc.audit_entries(limit=1000)[0]) == 400


# ---------------------------------------------------------------- the store


def test_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "a"
    acc = Accounts(path)
    assert acc.list_users() == []  # opens (creates) the store
    acc.close()
    env = lmdb.open(str(path), max_dbs=8)
    meta = env.open_db(b"meta")
    with env.begin(db=meta) as txn:
        assert json.loads(txn.get(b"schema")) == {"version": 1}
    with env.begin(db=meta, write=True) as txn:
        txn.put(b"schema", b'{"version": 2}')
    env.close()
    acc = Accounts(path)
    with pytest.raises(StoreVersionError) as ei:
        acc.list_users()
    assert "schema version 2" in ei.value.message and "newer logbox" in ei.value.message
    assert oct(path.stat().st_mode & 0o777) == "0o700"


def test_close_and_reopen(tmp_path: Path) -> None:
    acc = Accounts(tmp_path / "a", hasher=FAST)
    acc.add_user("root", PW, "admin")
    acc.close()
    acc.close()
    assert acc.get_user("root").role == "admin"  # opened again
    acc.close()


# ---------------------------------------------------------------- CLI


def cli(
    top: Path, *args: str, stdin: str = "", env: dict | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logbox_core.accounts", *args],
        input=stdin.encode(),
        capture_output=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(top / "rpc"), **(env or {})},
    )


def test_cli(top: Path, tmp_path: Path) -> None:
    d = str(tmp_path / "acc")
    p = cli(top, "--path", d, "add-user", "root", "--role", "admin", env={"LOGBOX_PASSWORD": PW})
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["name"] == "root"
    p = cli(
        top,
        "--path",
        d,
        "add-user",
        "bob",
        "--role",
        "searcher",
        "--logspace",
        "web",
        "--logspace",
        "fw",
        stdin="another password\n",
    )
    assert p.returncode == 0, p.stderr
    p = cli(top, "list-users", env={"LOGBOX_ACCOUNTS": d})
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert [(r["name"], r["role"], r["logspaces"]) for r in rows] == [
        ("bob", "searcher", ["web", "fw"]),
        ("root", "admin", ["*"]),
    ]
    acc = Accounts(d)
    try:
        assert acc.check_password("bob", "another password") is not None
    finally:
        acc.close()
    p = cli(top, "--path", d, "add-user", "root", "--role", "admin", stdin=PW + "\n")
    assert p.returncode == 1 and b"exists already" in p.stderr
    p = cli(top, "--path", d, "add-user", "eve", "--role", "admin", stdin="short\n")
    assert p.returncode == 1 and b"password: at least 12 characters" in p.stderr
    p = cli(top, "--path", d, "add-user", "eve", "--role", "boss", stdin=PW)
    assert p.returncode == 2
    p = cli(top, "--path", d, "add-user", "first", "--role", "admin", "--must-change", stdin=PW)
    assert p.returncode == 0, p.stderr
    acc = Accounts(d)
    try:
        assert acc.get_user("first").must_change and not acc.get_user("root").must_change
    finally:
        acc.close()


def test_reset_password(acc: Accounts, clock: Clock) -> None:
    """A lost password replaced on the box: the new one works and must be changed, the user
    is enabled and the lockout on the name lifted, web and session sign-ins end (API tokens
    stay), the old password fails, and the audit log says so."""
    acc.add_user("root", PW, "admin")
    acc.add_user("alice", PW, "admin")
    web, _ = acc.create_token("alice", "browser", kind="web")
    api, _ = acc.create_token("alice", "script", kind="api")
    acc.update_user("alice", disabled=True)
    for i in range(30):  # the name locked from addresses it never signed in from
        fail(acc, f"203.0.113.{i % 10}", "alice")
    lock = acc.login_attempt("203.0.113.99", "alice")
    assert lock is not None and lock.scope == "user"
    u = acc.reset_password("alice", "a brand new password")
    assert u.must_change and not u.disabled and u.role == "admin"
    assert acc.check_password("alice", PW) is None
    assert acc.check_password("alice", "a brand new password") is not None
    assert acc.login_attempt("203.0.113.99", "alice") is None
    with pytest.raises(TokenError):
        acc.verify_token(web)
    assert acc.verify_token(api)[1].name == "alice"
    (e,), _ = acc.audit_entries(action="password_reset")
    assert (e.user, e.address) == (None, "console")
    assert e.detail is not None and e.detail.startswith("user alice: password reset on the box")
    with pytest.raises(NotFound):
        acc.reset_password("nobody", "a brand new password")
    with pytest.raises(Invalid):
        acc.reset_password("alice", "short")
    assert acc.audit_entries(action="password_reset")[0] == [e]  # refusals leave no entry


def test_cli_reset_password(top: Path, tmp_path: Path) -> None:
    d = str(tmp_path / "acc")
    assert cli(top, "--path", d, "add-user", "admin", "--role", "admin", stdin=PW).returncode == 0
    p = cli(top, "--path", d, "reset-password", "admin")
    assert p.returncode == 0, p.stderr
    m = re.search(rb"^new password \(shown once\): (\S+)$", p.stdout, re.M)
    assert m is not None, p.stdout
    acc = Accounts(d)
    try:
        u = acc.check_password("admin", m.group(1).decode())
        assert u is not None and u.must_change
    finally:
        acc.close()
    p = cli(
        top, "--path", d, "reset-password", "admin", "--password-stdin", stdin="mine for now 1\n"
    )
    assert p.returncode == 0 and b"shown once" not in p.stdout, p.stdout
    p = cli(top, "--path", d, "reset-password", "admin", "--password-stdin", stdin="short\n")
    assert p.returncode == 1 and b"password: at least 12 characters" in p.stderr
    p = cli(top, "--path", d, "reset-password", "nobody")
    assert p.returncode == 1 and b"no user 'nobody'" in p.stderr


def test_full_store_prunes_oldest_audit(tmp_path: Path, clock: Clock) -> None:
    acc = Accounts(tmp_path / "a", clock=clock, hasher=FAST)
    acc.map_size = 1 << 20  # a small store fills quickly
    try:
        acc.add_user("root", PW, "admin")
        made = []
        for i in range(20_000):
            clock.t += 0.001
            made.append(acc.audit("search", user="root", address=None, query="q" * 100, results=i))
            if i % 100 == 0 and acc.audit_entries(action="audit_pruned", limit=1)[0]:
                break
        entries, _ = acc.audit_entries(limit=100_000)
        pruned = [e for e in entries if e.action == "audit_pruned"]
        assert pruned, "the store should have filled up"
        # The newest entries are all there, the oldest gone, and the log goes on.
        kept = [e.results for e in entries if e.action == "search"]
        assert kept == list(range(len(made) - 1, len(made) - 1 - len(kept), -1))
        assert kept[-1] > 0 and f"the {pruned[0].results} oldest" in pruned[0].detail
        assert len(kept) + pruned[0].results == len(made)
        assert acc.audit("login", user="root", address=None).id > pruned[0].id
        assert acc.get_user("root") is not None
    finally:
        acc.close()


def test_must_change_flag(acc: Accounts) -> None:
    u = acc.add_user("first", PW, "admin", must_change=True)
    assert u.must_change is True and acc.get_user("first").must_change is True
    assert "must_change" not in u.to_json()  # not part of API.md's User
    assert acc.add_user("other", PW, "searcher").must_change is False
    # A new password clears it, unless it is set again with it.
    assert acc.update_user("first", password=PW + "!").must_change is False
    assert acc.update_user("first", must_change=True).must_change is True
    assert acc.update_user("first", role="admin").must_change is True
    assert acc.update_user("first", password=PW, must_change=True).must_change is True
    assert acc.update_user("first", must_change=False).must_change is False
    with pytest.raises(Invalid, match="^must_change"):
        acc.update_user("first", must_change="yes")  # type: ignore[arg-type]
    with pytest.raises(Invalid, match="^must_change"):
        acc.add_user("third", PW, "admin", must_change=1)  # type: ignore[arg-type]
    # Stored only while set; a record without it (older stores) reads as False.
    acc.update_user("first", must_change=True)
    users = acc._db(b"users")
    with acc._txn(b"users") as txn:
        assert json.loads(txn.get(b"first", db=users))["must_change"] is True
        assert "must_change" not in json.loads(txn.get(b"other", db=users))


def test_web_token_kind(acc: Accounts) -> None:
    acc.add_user("w", PW, "searcher")
    secret, tok = acc.create_token("w", "web session", kind="web", ttl=60)
    assert tok.kind == "web" and tok.to_json()["kind"] == "web"
    t, u = acc.verify_token(secret)
    assert (t.id, t.kind, u.name) == (tok.id, "web", "w")
    with pytest.raises(Invalid, match="^kind"):
        acc.create_token("w", "x", kind="browser")
