"""Users, roles, tokens, the login lockout and the audit log, in one LMDB environment.

Shared by the gunicorn workers of the API and of the web UI (several processes, many threads):
the environment is opened lazily, once per process (a forked child opens its own and never
touches its parent's), and every change is one synced LMDB write transaction. Records are JSON
values; the layout is in rpc/logbox_core/README.md. Passwords are argon2id hashes (argon2-cffi's
defaults); of a token only SHA-256 of its secret is stored.

Also a small admin CLI (first boot, `make run`):

    python -m logbox_core.accounts --path DIR add-user NAME --role admin [--logspace X ...]
                                   [--must-change]
    python -m logbox_core.accounts --path DIR list-users

add-user reads the password from $LOGBOX_PASSWORD, else from the first line of stdin.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import errno
import getpass
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import argon2
import lmdb

from .constants import USER_NAME_PATTERN, logspace_name_problem
from .federation import SEP, name_problem

ROLES = ("admin", "searcher")
TOKEN_KINDS = ("api", "session", "web")  # web: a web UI sign-in (webui/UI.md)
SCHEMA_VERSION = 1
MAP_SIZE = 1 << 30
DB_NAMES = (b"users", b"tokens", b"failures", b"audit", b"meta", b"searches")
# issue 21's alerts (logbox_core/alerts.py: the definitions and what they fired)
ALERT_DB_NAMES = (b"alerts", b"alert_history", b"delivery_tests")
# The audit log's actions (rpc/API.md §6): both apps' filters offer these.
AUDIT_ACTIONS = (
    "login", "login_failed", "login_locked", "logout", "search", "count", "histogram", "top",
    "message", "export", "token_create", "token_revoke", "user_create", "user_update",
    "user_delete", "denied", "logspace_settings", "audit_pruned", "integrity",
    "integrity_public_key", "password_reset", "saved_search_create", "saved_search_update",
    "saved_search_delete", "alert_create", "alert_update", "alert_delete", "alert_test", "tail",
)  # fmt: skip
# the alert delivery settings (logbox_core.deliver): a change, a test message sent
AUDIT_ACTIONS += ("delivery_settings", "delivery_test")
SEARCH_NAME_MAX = 100  # a saved search's name: printable characters
SEARCH_QUERY_MAX = 4096  # its query, bytes (searchd's own limit is QUERY_MAX, larger)
SEARCH_TIME_MAX = 64  # its from and to, as the search forms write them ("-1h", RFC 3339)
SEARCH_COLUMNS_MAX = 32  # its columns, each a field name
SEARCHES_PER_USER = 500

NAME_RE = re.compile(USER_NAME_PATTERN)
TOKEN_RE = re.compile(r"lbx_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
PASSWORD_MIN, PASSWORD_MAX = 12, 1024

LAST_USED_EVERY_US = 60_000_000  # last_used_us is written at most once a minute per token
TOKEN_KEEP_US = 30 * 86400 * 1_000_000  # expired/revoked tokens are purged after 30 days
PURGE_EVERY_S = 3600.0  # ... and the purge of tokens runs at most hourly
FAILURES_PURGE_EVERY_S = 60.0  # stale lockout records are purged at most once a minute
USER_FAILURES = 30  # failed logins against one user name within USER_WINDOW (any addresses) ...
USER_WINDOW = 300.0  # ... refuse it from addresses it has not signed in from (see README)
KNOWN_KEEP_S = 30 * 86400.0  # an address a user signed in from is "known" for 30 days
KNOWN_MAX = 16  # ... at most this many per user (the oldest is forgotten)
AUDIT_SEQ_BITS = 10  # audit id = key_time_us << 10 | n (n: entries in that µs, 0..1023)
AUDIT_PRUNE_BATCH = 20_000  # audit entries deleted per transaction when the store is full
AUDIT_PRUNE_AT = 0.75  # ... which is when the DBs' pages fill 3/4 of the map
AUDIT_CHECK_EVERY = 100  # how often (in audit writes per process) the fill is looked at

# ---------------------------------------------------------------- scheduled reports
# Their store and their audit actions (logbox_core/reports.py owns the records).
DB_NAMES += (b"reports",)
AUDIT_ACTIONS += ("report_create", "report_update", "report_delete", "report_render", "report_send")

log = logging.getLogger("logbox_core.accounts")
_NO_SPACE = (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))
_IO_ERROR, _READ_ONLY = os.strerror(errno.EIO), os.strerror(errno.EROFS)
STORE_LOW_BYTES = 1 << 20  # an EIO with less free space than this is taken for a full disk

# Environments of a parent process seen in a forked child: kept referenced, never closed or
# used (LMDB: an environment belongs to the process that opened it).
_inherited: list[lmdb.Environment] = []


def rfc3339(us: int) -> str:
    """µs since the epoch as RFC 3339 UTC with µs and "Z" (2026-11-22T18:00:00.000000Z)."""
    t = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=us)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _rfc3339_or_none(us: int | None) -> str | None:
    return None if us is None else rfc3339(us)


# ---------------------------------------------------------------- errors


class AccountsError(Exception):
    """A refused accounts operation; .code is the API's error code, .message for people."""

    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Invalid(AccountsError):
    """A malformed argument; the message starts with the member's name."""

    code = "bad_parameter"


class NotFound(AccountsError):
    """No such user or token."""

    code = "not_found"


class Conflict(AccountsError):
    """A user that exists already, or a change that would leave no enabled admin."""

    code = "conflict"


class TokenError(AccountsError):
    """A token that does not authenticate; .reason: malformed, unknown, expired, revoked, user."""

    code = "unauthorized"
    reason: str

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class StoreWriteError(AccountsError):
    """A change the store cannot write (StoreFull, StoreUnavailable); nothing was changed."""

    status = 503


class StoreFull(StoreWriteError):
    """A change that cannot be written: the file system is full (ENOSPC, EDQUOT) or the LMDB map
    is (MDB_MAP_FULL, .map_full). The API answers 507 insufficient_storage."""

    code = "insufficient_storage"
    status = 507

    def __init__(self, message: str, *, map_full: bool = False) -> None:
        super().__init__(message)
        self.map_full = map_full


class StoreUnavailable(StoreWriteError):
    """A change that cannot be written for another reason: an I/O error, a read-only file
    system. The API answers 503 unavailable."""

    code = "unavailable"


@dataclass(frozen=True)
class Lockout:
    """Why a login attempt is refused: scope "address" (too many failures from the address) or
    "user" (too many against the user name from addresses it never signed in from), and the
    seconds until it may be tried again."""

    scope: str
    seconds: float


class StoreVersionError(AccountsError):
    """The store was written by a newer logbox (an unknown schema version)."""


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class User:
    """A user, without the password hash."""

    name: str
    role: str
    logspaces: tuple[str, ...]
    disabled: bool
    created_us: int
    must_change: bool = False  # a new password is due before anything (web UI and API)

    def can_read(self, logspace: str) -> bool:
        """Whether this user may read logspace (admin: all; searcher: listed, or "*" for every
        local and multiple logspace: another box's (site:logspace) must be listed by name, so
        adding a site gives nobody its data unasked)."""
        if self.disabled:
            return False
        if self.role == "admin":
            return True
        return logspace in self.logspaces or ("*" in self.logspaces and SEP not in logspace)

    def to_json(self) -> dict:
        """API.md "User"."""
        return {
            "name": self.name,
            "role": self.role,
            "logspaces": list(self.logspaces),
            "disabled": self.disabled,
            "created": rfc3339(self.created_us),
        }

    @classmethod
    def _from(cls, rec: dict) -> User:
        return cls(
            rec["name"],
            rec["role"],
            tuple(rec["logspaces"]),
            rec["disabled"],
            rec["created_us"],
            bool(rec.get("must_change", False)),
        )


@dataclass(frozen=True)
class Token:
    """A token's public part (its secret is never stored)."""

    id: str
    user: str
    name: str
    kind: str
    created_us: int
    expires_us: int | None
    revoked_us: int | None
    last_used_us: int | None

    def to_json(self) -> dict:
        """API.md "Token"."""
        return {
            "id": self.id,
            "user": self.user,
            "name": self.name,
            "kind": self.kind,
            "created": rfc3339(self.created_us),
            "expires": _rfc3339_or_none(self.expires_us),
            "revoked": _rfc3339_or_none(self.revoked_us),
            "last_used": _rfc3339_or_none(self.last_used_us),
        }

    @classmethod
    def _from(cls, rec: dict) -> Token:
        return cls(
            rec["id"],
            rec["user"],
            rec["name"],
            rec["kind"],
            rec["created_us"],
            rec["expires_us"],
            rec["revoked_us"],
            rec["last_used_us"],
        )


@dataclass(frozen=True)
class SavedSearch:
    """A saved search (API.md "SavedSearch"): a query on a logspace with its time range and
    columns; private to its owner, or shared with everyone who may read the logspace."""

    id: str
    owner: str
    name: str
    logspace: str
    query: str
    from_: str | None
    to: str | None
    columns: tuple[str, ...]
    shared: bool
    created_us: int
    updated_us: int
    time: str = "received"  # which time from and to select by: received or event

    def to_json(self) -> dict:
        """API.md "SavedSearch"."""
        return {
            "id": self.id,
            "owner": self.owner,
            "name": self.name,
            "logspace": self.logspace,
            "query": self.query,
            "from": self.from_,
            "to": self.to,
            "time": self.time,
            "columns": list(self.columns),
            "shared": self.shared,
            "created": rfc3339(self.created_us),
            "updated": rfc3339(self.updated_us),
        }

    @classmethod
    def _from(cls, rec: dict) -> SavedSearch:
        return cls(
            rec["id"],
            rec["owner"],
            rec["name"],
            rec["logspace"],
            rec["query"],
            rec["from"],
            rec["to"],
            tuple(rec["columns"]),
            rec["shared"],
            rec["created_us"],
            rec["updated_us"],
            rec.get("time", "received"),  # (saved before event-time ranges: received)
        )

    def describe(self) -> str:
        """How the audit log names it: `saved search ID 'NAME' of OWNER`."""
        return f"saved search {self.id} {self.name!r} of {self.owner}"

    def visible_to(self, user: User) -> bool:
        """Its owner's, or shared and on a logspace user may read."""
        return self.owner == user.name or (self.shared and user.can_read(self.logspace))


@dataclass(frozen=True)
class AuditEntry:
    """One audit record. id orders entries (time_us << 10 | n) and is the paging cursor."""

    id: int
    time_us: int
    user: str | None
    address: str | None
    action: str
    logspace: str | None
    query: str | None
    results: int | None
    status: int
    detail: str | None

    def to_json(self) -> dict:
        """API.md "AuditEntry": the id as a decimal string (it exceeds 2^53, beyond what a
        JSON number keeps exactly in JavaScript)."""
        return {
            "id": str(self.id),
            "time": rfc3339(self.time_us),
            "user": self.user,
            "address": self.address,
            "action": self.action,
            "logspace": self.logspace,
            "query": self.query,
            "results": self.results,
            "status": self.status,
            "detail": self.detail,
        }


# ---------------------------------------------------------------- validation


def _check_name(name: object, member: str = "name") -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise Invalid(f"{member}: expected 1 to 64 of a-z 0-9 _ . -, got {name!r}")
    return name


def _check_password(password: object) -> str:
    if not isinstance(password, str):
        raise Invalid("password: expected a string")
    if len(password) < PASSWORD_MIN:
        raise Invalid(f"password: at least {PASSWORD_MIN} characters")
    if len(password) > PASSWORD_MAX:
        raise Invalid(f"password: at most {PASSWORD_MAX} characters")
    return password


def _check_role(role: object) -> str:
    if role not in ROLES:
        raise Invalid(f"role: expected one of {', '.join(ROLES)}, got {role!r}")
    return role  # type: ignore[return-value]


def _check_logspaces(logspaces: object) -> list[str]:
    if isinstance(logspaces, str) or not isinstance(logspaces, Sequence):
        raise Invalid('logspaces: expected a list of logspace names or "*"')
    out: list[str] = []
    for ls in logspaces:
        if ls != "*" and (why := name_problem(ls)) is not None:
            raise Invalid(f'logspaces: expected logspace names or "*", got {ls!r}: {why}')
        if ls not in out:
            out.append(ls)
    return out


def _check_token_name(name: object) -> str:
    if not isinstance(name, str) or not 1 <= len(name) <= 128 or not name.isprintable():
        raise Invalid("name: expected 1 to 128 printable characters")
    return name


_COLUMN_RE = re.compile(r"[A-Za-z0-9_.@-]{1,128}")


def check_saved_search(body: object, *, partial: bool = False) -> dict:
    """The members of a saved search's JSON body, checked: name, logspace, query, from, to,
    time, columns, shared (all but name, logspace and query optional; with partial, all optional).

    :raises Invalid: an unknown or malformed member.
    """
    if not isinstance(body, dict):
        raise Invalid("expected a JSON object")
    known = {"name", "logspace", "query", "from", "to", "time", "columns", "shared"}
    extra = sorted(set(body) - known)
    if extra:
        raise Invalid(f"{extra[0]}: unknown member")
    out: dict = {}
    need = () if partial else ("name", "logspace", "query")
    for k in need:
        if k not in body:
            raise Invalid(f"{k}: required")
    if "name" in body:
        n = body["name"]
        if not isinstance(n, str) or not 1 <= len(n) <= SEARCH_NAME_MAX or not n.isprintable():
            raise Invalid(f"name: expected 1 to {SEARCH_NAME_MAX} printable characters")
        out["name"] = n
    if "logspace" in body:
        ls = body["logspace"]
        if (why := logspace_name_problem(ls)) is not None:
            raise Invalid(f"logspace: {why}: {ls!r}")
        out["logspace"] = ls
    if "query" in body:
        q = body["query"]
        if not isinstance(q, str) or len(q.encode("utf-8", "surrogatepass")) > SEARCH_QUERY_MAX:
            raise Invalid(f"query: expected a string of at most {SEARCH_QUERY_MAX} bytes")
        out["query"] = q
    for k in ("from", "to"):
        if k in body:
            v = body[k]
            if v is not None and (
                not isinstance(v, str) or not 1 <= len(v) <= SEARCH_TIME_MAX or not v.isprintable()
            ):
                raise Invalid(f"{k}: expected null or a time as search takes it (-1h, RFC 3339)")
            out[k] = v
    if "time" in body:
        if body["time"] not in ("received", "event"):
            raise Invalid("time: expected received or event")
        out["time"] = body["time"]
    if "columns" in body:
        cols = body["columns"]
        if (
            not isinstance(cols, list)
            or len(cols) > SEARCH_COLUMNS_MAX
            or not all(isinstance(c, str) and _COLUMN_RE.fullmatch(c) for c in cols)
        ):
            raise Invalid(f"columns: expected at most {SEARCH_COLUMNS_MAX} field names")
        out["columns"] = list(dict.fromkeys(cols))
    if "shared" in body:
        if not isinstance(body["shared"], bool):
            raise Invalid("shared: expected true or false")
        out["shared"] = body["shared"]
    return out


def _dumps(rec: dict) -> bytes:
    return json.dumps(rec, separators=(",", ":")).encode()


def _audit_key(time_us: int, n: int) -> bytes:
    return time_us.to_bytes(8, "big") + n.to_bytes(8, "big")


def _audit_id(key: bytes) -> int:
    return int.from_bytes(key[:8], "big") << AUDIT_SEQ_BITS | int.from_bytes(key[8:], "big")


def _key_of_id(audit_id: int) -> bytes:
    return _audit_key(audit_id >> AUDIT_SEQ_BITS, audit_id & ((1 << AUDIT_SEQ_BITS) - 1))


# ---------------------------------------------------------------- the store


def _reset_in_child(ref: weakref.ref[Accounts]) -> None:
    """os.fork's after_in_child hook."""
    acc = ref()
    if acc is not None:
        acc._reset_in_child()


class Accounts:
    """The accounts store at a directory (created 0700 when missing); thread- and fork-safe."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lockout_failures: int = 10,
        lockout_window: float = 60,
        lockout_seconds: float = 300,
        user_failures: int = USER_FAILURES,
        user_window: float = USER_WINDOW,
        clock: Callable[[], float] = time.time,
        hasher: argon2.PasswordHasher | None = None,
        map_size: int = MAP_SIZE,
    ) -> None:
        self.path = os.fspath(path)
        self.lockout_failures = lockout_failures
        self.lockout_window = lockout_window
        self.lockout_seconds = lockout_seconds
        self.user_failures = user_failures
        self.user_window = user_window
        self.clock = clock
        self.hasher = hasher or argon2.PasswordHasher()
        self.map_size = map_size
        self._last_used_failed = False
        self._audit_writes = 0
        self._lock = threading.Lock()
        self._env: lmdb.Environment | None = None
        self._dbs: dict[bytes, Any] = {}
        self._pid = 0
        self._dummy_hash: str | None = None
        self._purged = {"tokens": 0.0, "failures": 0.0}
        # A forked child forgets the parent's environment before any of its threads runs
        # (the getpid() check in _open covers forks that bypass os.fork's hooks).
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _reset_in_child(ref))

    def _reset_in_child(self) -> None:
        """In a forked child: the parent's environment is kept (never used, never closed)."""
        self._lock = threading.Lock()
        if self._env is not None and self._pid != os.getpid():
            _inherited.append(self._env)
            self._env, self._dbs, self._pid = None, {}, 0

    # ------------------------------------------------------------ environment

    def _open(self) -> tuple[lmdb.Environment, dict[bytes, Any]]:
        """This process's environment and DB handles (opened on first use, again after fork)."""
        env, pid = self._env, os.getpid()
        if env is not None and self._pid == pid:
            return env, self._dbs
        with self._lock:
            if self._env is not None and self._pid == pid:
                return self._env, self._dbs
            if self._env is not None:  # opened by the parent before a fork: not ours
                _inherited.append(self._env)
                self._env = None
            os.makedirs(self.path, mode=0o700, exist_ok=True)
            env = lmdb.open(
                self.path,
                max_dbs=len(DB_NAMES) + len(ALERT_DB_NAMES) + 4,
                map_size=self.map_size,
                subdir=True,
                mode=0o600,
                max_readers=1024,
                # One fsync a commit instead of two (the meta page is flushed by the next commit):
                # integrity is kept; a machine crash may undo the last commit, e.g. one audit
                # entry. Halves what the audit entry of every search costs.
                metasync=False,
            )
            try:
                dbs = {name: env.open_db(name) for name in (*DB_NAMES, *ALERT_DB_NAMES)}
                self._check_schema(env, dbs[b"meta"])
            except BaseException:
                env.close()
                raise
            self._env, self._dbs, self._pid = env, dbs, pid
            self._purged = {"tokens": 0.0, "failures": 0.0}
            return env, dbs

    def _check_schema(self, env: lmdb.Environment, meta: Any) -> None:
        """Writes the schema version into a new store; refuses a newer one."""
        with env.begin(db=meta, write=True) as txn:
            raw = txn.get(b"schema")
            if raw is None:
                txn.put(b"schema", _dumps({"version": SCHEMA_VERSION}))
                return
        try:
            version = json.loads(raw)["version"]
        except (ValueError, KeyError, TypeError):
            raise StoreVersionError(
                f"accounts store {self.path}: unreadable schema record {raw[:60]!r}"
            ) from None
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise StoreVersionError(
                f"accounts store {self.path} has schema version {version!r}; this logbox "
                f"knows versions up to {SCHEMA_VERSION} (written by a newer logbox?)"
            )

    @contextlib.contextmanager
    def _txn(self, db: bytes, write: bool = False) -> Iterator[lmdb.Transaction]:
        """A transaction on db, committed when the block ends without an exception.

        :raises StoreFull: a write that cannot be committed for want of space.
        """
        env, dbs = self._open()
        try:
            with env.begin(db=dbs[db], write=write) as txn:
                yield txn
        except lmdb.MapFullError as e:
            raise StoreFull(
                f"the accounts store is full (its {self.map_size} byte map)", map_full=True
            ) from e
        except lmdb.Error as e:
            if not write:
                raise
            if any(m in str(e) for m in _NO_SPACE) or (
                _IO_ERROR in str(e) and self._free_bytes() < STORE_LOW_BYTES
            ):  # LMDB turns a short write (a file system filling up) into EIO
                raise StoreFull(f"no space left for the accounts store {self.path}") from e
            if any(m in str(e) for m in (_IO_ERROR, _READ_ONLY)):
                raise StoreUnavailable(
                    f"the accounts store {self.path} cannot be written: {e}"
                ) from e
            raise

    def _free_bytes(self) -> int:
        """Bytes available to us on the store's file system."""
        try:
            st = os.statvfs(self.path)
        except OSError:
            return 0
        return st.f_bavail * st.f_frsize

    def _db(self, name: bytes) -> Any:
        return self._open()[1][name]

    def _now_us(self) -> int:
        return int(self.clock() * 1_000_000)

    def close(self) -> None:
        """Closes this process's environment (a later call opens it again)."""
        with self._lock:
            if self._env is not None and self._pid == os.getpid():
                self._env.close()
            elif self._env is not None:
                _inherited.append(self._env)
            self._env, self._dbs, self._pid = None, {}, 0

    # ------------------------------------------------------------ users

    @staticmethod
    def _user_rec(txn: lmdb.Transaction, users: Any, name: str) -> dict | None:
        raw = txn.get(name.encode(), db=users)
        return None if raw is None else json.loads(raw)

    @staticmethod
    def _other_enabled_admin(txn: lmdb.Transaction, users: Any, name: str) -> bool:
        """Whether an enabled admin other than name exists."""
        for k, v in txn.cursor(db=users):
            if k.decode() != name:
                rec = json.loads(v)
                if rec["role"] == "admin" and not rec["disabled"]:
                    return True
        return False

    def add_user(
        self,
        name: str,
        password: str,
        role: str,
        logspaces: Sequence[str] = ("*",),
        must_change: bool = False,
    ) -> User:
        """Creates a user (must_change: the web UI forces a new password at the next sign-in).

        :raises Invalid: a malformed name, password, role or logspaces.
        :raises Conflict: the user exists.
        """
        _check_name(name)
        _check_password(password)
        _check_role(role)
        spaces = _check_logspaces(logspaces)
        if not isinstance(must_change, bool):
            raise Invalid("must_change: expected true or false")
        pw_hash = self.hasher.hash(password)
        users = self._db(b"users")
        with self._txn(b"users", write=True) as txn:
            if txn.get(name.encode()) is not None:
                raise Conflict(f"user '{name}' exists already")
            rec = {
                "name": name,
                "role": role,
                "logspaces": spaces,
                "disabled": False,
                "created_us": self._now_us(),
                "hash": pw_hash,
            }
            if must_change:  # stored only when set (absent: false)
                rec["must_change"] = True
            txn.put(name.encode(), _dumps(rec), db=users)
        return User._from(rec)

    def get_user(self, name: str) -> User | None:
        """The user called name, or None."""
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            return None
        with self._txn(b"users") as txn:
            rec = self._user_rec(txn, self._db(b"users"), name)
        return None if rec is None else User._from(rec)

    def list_users(self) -> list[User]:
        """Every user, by name."""
        with self._txn(b"users") as txn:
            return [User._from(json.loads(v)) for _, v in txn.cursor()]

    def update_user(
        self,
        name: str,
        *,
        password: str | None = None,
        role: str | None = None,
        logspaces: Sequence[str] | None = None,
        disabled: bool | None = None,
        must_change: bool | None = None,
        keep_token: str | None = None,
    ) -> User:
        """Changes the given members of a user.

        A new password clears must_change unless must_change=True is given with it, and ends
        the user's sign-ins: their "web" and "session" tokens are revoked ("api" tokens stay).

        :raises Invalid: a malformed member.
        :raises NotFound: no such user.
        :raises Conflict: it would leave no enabled admin.
        """
        return self._update_user(
            name,
            password=password,
            role=role,
            logspaces=logspaces,
            disabled=disabled,
            must_change=must_change,
            keep_token=keep_token,
        )[0]

    def change_password(
        self, name: str, password: str, *, must_change: bool = False, keep_token: str | None = None
    ) -> tuple[User, int]:
        """Sets a new password, ends the user's sign-ins but keep_token's (update_user): (the
        User, how many web and session tokens were revoked)."""
        return self._update_user(
            name, password=password, must_change=must_change, keep_token=keep_token
        )

    def _update_user(
        self,
        name: str,
        *,
        password: str | None = None,
        role: str | None = None,
        logspaces: Sequence[str] | None = None,
        disabled: bool | None = None,
        must_change: bool | None = None,
        keep_token: str | None = None,
    ) -> tuple[User, int]:
        """update_user, and the number of tokens a new password revoked."""
        if password is not None:
            _check_password(password)
        if role is not None:
            _check_role(role)
        spaces = _check_logspaces(logspaces) if logspaces is not None else None
        if disabled is not None and not isinstance(disabled, bool):
            raise Invalid("disabled: expected true or false")
        if must_change is not None and not isinstance(must_change, bool):
            raise Invalid("must_change: expected true or false")
        pw_hash = self.hasher.hash(password) if password is not None else None
        users, tokens = self._db(b"users"), self._db(b"tokens")
        ended = 0
        with self._txn(b"users", write=True) as txn:
            rec = self._user_rec(txn, users, name) if NAME_RE.fullmatch(str(name)) else None
            if rec is None:
                raise NotFound(f"no user '{name}'")
            was_admin = rec["role"] == "admin" and not rec["disabled"]
            if role is not None:
                rec["role"] = role
            if spaces is not None:
                rec["logspaces"] = spaces
            if disabled is not None:
                rec["disabled"] = disabled
            if pw_hash is not None:
                rec["hash"] = pw_hash
                if not must_change:
                    must_change = False  # a new password clears the flag unless set with it
            if must_change is not None:
                if must_change:
                    rec["must_change"] = True
                else:
                    rec.pop("must_change", None)
            is_admin = rec["role"] == "admin" and not rec["disabled"]
            if was_admin and not is_admin and not self._other_enabled_admin(txn, users, name):
                raise Conflict(f"'{name}' is the last enabled admin")
            txn.put(name.encode(), _dumps(rec))
            if pw_hash is not None:
                ended = self._end_sign_ins(txn, tokens, name, keep_token)
        return User._from(rec), ended

    def _end_sign_ins(self, txn: lmdb.Transaction, tokens: Any, name: str, keep: str | None) -> int:
        """Revokes name's live "web" and "session" tokens but keep; how many."""
        now = self._now_us()
        ended = []
        for k, v in txn.cursor(db=tokens):
            t = json.loads(v)
            if (
                t["user"] == name
                and t["kind"] in ("web", "session")
                and t["revoked_us"] is None
                and t["id"] != keep
            ):
                t["revoked_us"] = now
                ended.append((k, t))
        for k, t in ended:
            txn.put(k, _dumps(t), db=tokens)
        return len(ended)

    def reset_password(self, name: str, password: str, *, by: str = "console") -> User:
        """A lost password replaced on the box itself (the admin CLI, not the API): the new
        password must be changed at the next web sign-in (the API refuses it until then), the
        user is enabled again, the lockout against the user's name is lifted, their web and
        session sign-ins end, and an audit entry "password_reset" (address `by`) says so.

        :raises Invalid: a password the rules refuse.
        :raises NotFound: no such user.
        """
        user, ended = self._update_user(name, password=password, must_change=True, disabled=False)
        _, ukey = self._lock_keys(by, name)
        with self._txn(b"failures", write=True) as txn:
            if ukey is not None and txn.get(ukey) is not None:
                rec = self._lock_rec(txn, ukey)
                rec["times"], rec["blocked_until"] = [], None
                self._lock_put(txn, ukey, rec)
        self.audit(
            "password_reset",
            user=None,
            address=by,
            detail=f"user {name}: password reset on the box ({ended} sign-ins ended; to be "
            "changed at the next sign-in)",
        )
        return user

    # ------------------------------------------------------------ saved searches

    def save_search(self, owner: str, members: dict) -> SavedSearch:
        """A new saved search of owner from check_saved_search's members.

        :raises NotFound: no such user.
        :raises Conflict: owner has SEARCHES_PER_USER already.
        """
        now = self._now_us()
        users, searches = self._db(b"users"), self._db(b"searches")
        with self._txn(b"searches", write=True) as txn:
            if self._user_rec(txn, users, owner) is None:
                raise NotFound(f"no user '{owner}'")
            mine = sum(1 for _, v in txn.cursor(db=searches) if json.loads(v)["owner"] == owner)
            if mine >= SEARCHES_PER_USER:
                raise Conflict(f"'{owner}' has {SEARCHES_PER_USER} saved searches already")
            while True:
                sid = secrets.token_hex(6)
                if txn.get(sid.encode(), db=searches) is None:
                    break
            rec = {
                "id": sid,
                "owner": owner,
                "name": members["name"],
                "logspace": members["logspace"],
                "query": members["query"],
                "from": members.get("from"),
                "to": members.get("to"),
                "time": members.get("time", "received"),
                "columns": members.get("columns", []),
                "shared": members.get("shared", False),
                "created_us": now,
                "updated_us": now,
            }
            txn.put(sid.encode(), _dumps(rec), db=searches)
        return SavedSearch._from(rec)

    def get_search(self, sid: str) -> SavedSearch | None:
        """The saved search with that id, or None."""
        if not isinstance(sid, str) or not re.fullmatch(r"[0-9a-f]{12}", sid):
            return None
        with self._txn(b"searches") as txn:
            raw = txn.get(sid.encode())
        return SavedSearch._from(json.loads(raw)) if raw else None

    def list_searches(self) -> list[SavedSearch]:
        """Every saved search, by name then id (the caller keeps what a user may see)."""
        with self._txn(b"searches") as txn:
            out = [SavedSearch._from(json.loads(v)) for _, v in txn.cursor()]
        return sorted(out, key=lambda x: (x.name.casefold(), x.id))

    def update_search(self, sid: str, members: dict) -> SavedSearch:
        """Changes the given members (check_saved_search(partial=True)).

        :raises NotFound: no such saved search.
        """
        with self._txn(b"searches", write=True) as txn:
            raw = txn.get(sid.encode()) if re.fullmatch(r"[0-9a-f]{12}", str(sid)) else None
            if raw is None:
                raise NotFound(f"no saved search '{sid}'")
            rec = json.loads(raw)
            rec.update(members)
            rec["updated_us"] = max(self._now_us(), rec["created_us"])
            txn.put(sid.encode(), _dumps(rec))
        return SavedSearch._from(rec)

    def delete_search(self, sid: str) -> SavedSearch:
        """Deletes a saved search; what it was.

        :raises NotFound: no such saved search.
        """
        with self._txn(b"searches", write=True) as txn:
            raw = txn.get(sid.encode()) if re.fullmatch(r"[0-9a-f]{12}", str(sid)) else None
            if raw is None:
                raise NotFound(f"no saved search '{sid}'")
            txn.delete(sid.encode())
        return SavedSearch._from(json.loads(raw))

    def delete_user(self, name: str) -> None:
        """Deletes a user, revokes their tokens and deletes their saved searches and alerts.

        :raises NotFound: no such user.
        :raises Conflict: the user is the last enabled admin.
        """
        users, tokens = self._db(b"users"), self._db(b"tokens")
        now = self._now_us()
        with self._txn(b"users", write=True) as txn:
            rec = self._user_rec(txn, users, name) if NAME_RE.fullmatch(str(name)) else None
            if rec is None:
                raise NotFound(f"no user '{name}'")
            if (
                rec["role"] == "admin"
                and not rec["disabled"]
                and not self._other_enabled_admin(txn, users, name)
            ):
                raise Conflict(f"'{name}' is the last enabled admin")
            txn.delete(name.encode(), db=users)
            for k, v in txn.cursor(db=tokens):
                t = json.loads(v)
                if t["user"] == name and t["revoked_us"] is None:
                    t["revoked_us"] = now
                    txn.put(k, _dumps(t), db=tokens)
            searches = self._db(b"searches")
            gone = [k for k, v in txn.cursor(db=searches) if json.loads(v)["owner"] == name]
            for k in gone:
                txn.delete(k, db=searches)
            alerts = self._db(b"alerts")  # their alerts too (logbox_core/alerts.py)
            gone = [k for k, v in txn.cursor(db=alerts) if json.loads(v)["owner"] == name]
            for k in gone:
                txn.delete(k, db=alerts)

    def has_admin(self) -> bool:
        """Whether an enabled admin exists."""
        with self._txn(b"users") as txn:
            return self._other_enabled_admin(txn, self._db(b"users"), "")

    def _dummy(self) -> str:
        if self._dummy_hash is None:
            self._dummy_hash = self.hasher.hash(secrets.token_urlsafe(16))
        return self._dummy_hash

    def check_password(self, name: str, password: str) -> User | None:
        """The user when name and password match an enabled user, else None.

        An unknown user costs an argon2 verify too (against a dummy hash): no timing oracle.
        A hash made with older parameters is replaced by one with the current ones.
        """
        if not isinstance(password, str) or len(password) > PASSWORD_MAX:
            return None
        rec = None
        if isinstance(name, str) and NAME_RE.fullmatch(name):
            with self._txn(b"users") as txn:
                rec = self._user_rec(txn, self._db(b"users"), name)
        try:
            self.hasher.verify(rec["hash"] if rec else self._dummy(), password)
        except argon2.exceptions.VerificationError:
            return None
        except argon2.exceptions.InvalidHash:
            return None
        if rec is None or rec["disabled"]:
            return None
        if self.hasher.check_needs_rehash(rec["hash"]):
            new_hash = self.hasher.hash(password)
            with self._txn(b"users", write=True) as txn:
                cur = self._user_rec(txn, self._db(b"users"), name)
                if cur is not None and cur["hash"] == rec["hash"]:
                    cur["hash"] = new_hash
                    txn.put(name.encode(), _dumps(cur))
        return User._from(rec)

    # ------------------------------------------------------------ lockout
    #
    # The "failures" DB holds one record per client address (key "a:" + address) and one per
    # user name (key "u:" + name, for valid names, existing or not, so that a refusal tells
    # nothing about which names exist). An attempt is counted before its password is checked
    # (login_attempt), so that parallel attempts cannot slip past the limits and an attempt
    # that cannot be counted (a full disk) is refused before argon2 runs; a success takes the
    # attempts of that user from that address back (login_succeeded). The rule is in
    # rpc/API.md §2 and rpc/logbox_core/README.md.

    @staticmethod
    def _lock_keys(address: str, user: str) -> tuple[bytes, bytes | None]:
        akey = b"a:" + address.encode("utf-8", "surrogateescape")[:400]
        ukey = ("u:" + user).encode() if isinstance(user, str) and NAME_RE.fullmatch(user) else None
        return akey, ukey

    @staticmethod
    def _lock_rec(txn: lmdb.Transaction, key: bytes | None) -> dict:
        raw = txn.get(key) if key is not None else None
        rec = json.loads(raw) if raw else {}
        return {
            "times": rec.get("times", []),  # [[t, user or address], ..]: attempts not taken back
            "blocked_until": rec.get("blocked_until"),
            "known": rec.get("known", {}),  # users only: address -> last sign-in (s)
        }

    def _lock_state(self, arec: dict, urec: dict, address: str, now: float) -> Lockout | None:
        """The lockout an attempt from address meets, given the records (windows applied)."""
        until = arec["blocked_until"]
        if until is not None and until > now:
            return Lockout("address", until - now)
        times = arec["times"]
        if len(times) >= self.lockout_failures:  # attempts in flight fill the window
            return Lockout("address", max(1.0, times[0][0] + self.lockout_window - now))
        known = urec["known"].get(address)
        if known is not None and known > now - KNOWN_KEEP_S:
            return None
        utimes = urec["times"]
        if len(utimes) >= self.user_failures:
            return Lockout(
                "user", max(1.0, utimes[-self.user_failures][0] + self.user_window - now)
            )
        return None

    def _window(self, arec: dict, urec: dict, now: float) -> None:
        arec["times"] = [x for x in arec["times"] if x[0] > now - self.lockout_window]
        urec["times"] = [x for x in urec["times"] if x[0] > now - self.user_window]

    def _lock_put(self, txn: lmdb.Transaction, key: bytes | None, rec: dict) -> None:
        if key is None:
            return
        if not rec["known"]:
            rec = {"times": rec["times"], "blocked_until": rec["blocked_until"]}
        txn.put(key, _dumps(rec))

    def login_blocked(self, address: str, user: str = "") -> Lockout | None:
        """The lockout a login attempt from address as user would meet now, or None."""
        akey, ukey = self._lock_keys(address, user)
        now = self.clock()
        with self._txn(b"failures") as txn:
            arec, urec = self._lock_rec(txn, akey), self._lock_rec(txn, ukey)
        self._window(arec, urec, now)
        return self._lock_state(arec, urec, address, now)

    def login_attempt(self, address: str, user: str) -> Lockout | None:
        """Counts a login attempt from address as user, before its password is checked; or,
        when the lockout refuses it, counts nothing and says why.

        :raises StoreFull: the attempt cannot be counted (refuse it).
        """
        akey, ukey = self._lock_keys(address, user)
        now = self.clock()
        with self._txn(b"failures", write=True) as txn:
            arec, urec = self._lock_rec(txn, akey), self._lock_rec(txn, ukey)
            self._window(arec, urec, now)
            lock = self._lock_state(arec, urec, address, now)
            if lock is not None:
                return lock
            arec["times"].append([now, user if ukey is not None else None])
            urec["times"].append([now, address])
            self._lock_put(txn, akey, arec)
            self._lock_put(txn, ukey, urec)
            if now - self._purged["failures"] >= FAILURES_PURGE_EVERY_S:
                self._purged["failures"] = now
                self._purge_failures(txn, now, keep=(akey, ukey))
        return None

    def login_failed(self, address: str, user: str) -> float:
        """After a wrong password (its attempt already counted): when the address has reached
        lockout_failures within lockout_window, blocks it for lockout_seconds.

        :returns: the seconds of the block this failure starts, else 0.0.
        """
        akey, _ = self._lock_keys(address, user)
        now = self.clock()
        with self._txn(b"failures", write=True) as txn:
            arec = self._lock_rec(txn, akey)
            arec["times"] = [x for x in arec["times"] if x[0] > now - self.lockout_window]
            until = arec["blocked_until"]
            if (until is None or until <= now) and len(arec["times"]) >= self.lockout_failures:
                arec = {"times": [], "blocked_until": now + self.lockout_seconds, "known": {}}
                self._lock_put(txn, akey, arec)
                return float(self.lockout_seconds)
        return 0.0

    def login_succeeded(self, address: str, user: str) -> None:
        """After a right password: takes back user's attempts from address (in both records;
        the address's attempts for other names stay) and remembers address as known for user.
        """
        akey, ukey = self._lock_keys(address, user)
        now = self.clock()
        with self._txn(b"failures", write=True) as txn:
            arec, urec = self._lock_rec(txn, akey), self._lock_rec(txn, ukey)
            self._window(arec, urec, now)
            arec["times"] = [x for x in arec["times"] if x[1] != user]
            urec["times"] = [x for x in urec["times"] if x[1] != address]
            known = {a: t for a, t in urec["known"].items() if t > now - KNOWN_KEEP_S}
            known[address] = now
            urec["known"] = dict(sorted(known.items(), key=lambda kv: kv[1])[-KNOWN_MAX:])
            self._lock_put(txn, akey, arec)
            self._lock_put(txn, ukey, urec)

    def _purge_failures(
        self, txn: lmdb.Transaction, now: float, keep: tuple[bytes | None, ...]
    ) -> None:
        """Deletes records with nothing in their window, no block and no known address (so the
        DB stays small), and records of the old per-address layout."""
        stale = []
        for k, v in txn.cursor():
            if k in keep:
                continue
            rec = json.loads(v)
            until = rec.get("blocked_until")
            window = self.user_window if k.startswith(b"u:") else self.lockout_window
            times = rec.get("times", [])
            known = [t for t in rec.get("known", {}).values() if t > now - KNOWN_KEEP_S]
            if not k.startswith((b"a:", b"u:")) or (
                (until is None or until <= now)
                and all(x[0] <= now - window for x in times)
                and not known
            ):
                stale.append(k)
        for k in stale:
            txn.delete(k)

    # ------------------------------------------------------------ tokens

    def create_token(
        self, user: str, name: str, *, kind: str = "api", ttl: float | None = None
    ) -> tuple[str, Token]:
        """A new token for user: (the token string, shown once; its Token).

        :param ttl: seconds until it expires, None for never.
        :raises Invalid: a malformed name, kind or ttl.
        :raises NotFound: no such user.
        """
        _check_token_name(name)
        if kind not in TOKEN_KINDS:
            raise Invalid(f"kind: expected one of {', '.join(TOKEN_KINDS)}, got {kind!r}")
        if ttl is not None and (
            isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < 1e11
        ):
            raise Invalid("expires_in: expected a positive number of seconds or null")
        secret = secrets.token_urlsafe(32)
        users, tokens = self._db(b"users"), self._db(b"tokens")
        now = self._now_us()
        with self._txn(b"tokens", write=True) as txn:
            if not NAME_RE.fullmatch(str(user)) or txn.get(user.encode(), db=users) is None:
                raise NotFound(f"no user '{user}'")
            while True:
                tid = secrets.token_hex(6)
                if txn.get(tid.encode(), db=tokens) is None:
                    break
            rec = {
                "id": tid,
                "user": user,
                "name": name,
                "kind": kind,
                "created_us": now,
                "expires_us": None if ttl is None else now + int(ttl * 1_000_000),
                "revoked_us": None,
                "last_used_us": None,
                "sha256": hashlib.sha256(secret.encode()).hexdigest(),
            }
            txn.put(tid.encode(), _dumps(rec), db=tokens)
            if now / 1e6 - self._purged["tokens"] >= PURGE_EVERY_S:
                self._purged["tokens"] = now / 1e6
                self._purge_tokens(txn, tokens, now)
        return f"lbx_{tid}_{secret}", Token._from(rec)

    @staticmethod
    def _purge_tokens(txn: lmdb.Transaction, tokens: Any, now: int) -> None:
        """Deletes tokens that expired or were revoked more than 30 days ago."""
        dead = []
        for k, v in txn.cursor(db=tokens):
            t = json.loads(v)
            ended = min(x for x in (t["expires_us"], t["revoked_us"], 1 << 62) if x is not None)
            if ended < now - TOKEN_KEEP_US:
                dead.append(k)
        for k in dead:
            txn.delete(k, db=tokens)

    def verify_token(self, token: str) -> tuple[Token, User]:
        """The Token and its User for a bearer token string.

        :raises TokenError: .reason malformed, unknown, expired, revoked, or user (the user
            was deleted or disabled).
        """
        m = TOKEN_RE.fullmatch(token) if isinstance(token, str) else None
        if m is None:
            raise TokenError("malformed", "malformed token")
        tid, secret = m.group(1), m.group(2)
        tokens, users = self._db(b"tokens"), self._db(b"users")
        with self._txn(b"tokens") as txn:
            raw = txn.get(tid.encode(), db=tokens)
            rec = json.loads(raw) if raw is not None else None
            digest = hashlib.sha256(secret.encode()).hexdigest()
            if rec is None or not hmac.compare_digest(digest, rec["sha256"]):
                raise TokenError("unknown", "unknown token")
            urec = self._user_rec(txn, users, rec["user"])
        now = self._now_us()
        if rec["revoked_us"] is not None:
            raise TokenError("revoked", "token revoked")
        if rec["expires_us"] is not None and rec["expires_us"] <= now:
            raise TokenError("expired", "token expired")
        if urec is None or urec["disabled"]:
            raise TokenError("user", "the token's user is deleted or disabled")
        last = rec["last_used_us"]
        if last is None or now - last >= LAST_USED_EVERY_US:
            rec = self._touch_token(tid, now, rec)
        return Token._from(rec), User._from(urec)

    def _touch_token(self, tid: str, now: int, rec: dict) -> dict:
        """Writes now as the token's last_used_us, best effort: when the store has no space the
        token still authenticates (logged once per process until a write works again)."""
        try:
            with self._txn(b"tokens", write=True) as txn:
                raw = txn.get(tid.encode())
                if raw is not None:
                    cur = json.loads(raw)
                    if (
                        cur["last_used_us"] is None
                        or now - cur["last_used_us"] >= LAST_USED_EVERY_US
                    ):
                        cur["last_used_us"] = now
                        txn.put(tid.encode(), _dumps(cur))
                    rec = cur
        except StoreWriteError as e:
            if not self._last_used_failed:
                log.warning("token last_used not written (%s); tokens keep working", e.message)
            self._last_used_failed = True
            return rec
        if self._last_used_failed:
            log.warning("token last_used written again")
        self._last_used_failed = False
        return rec

    def get_token(self, id: str) -> Token | None:
        """The token with this id, or None."""
        if not isinstance(id, str) or not re.fullmatch(r"[0-9a-f]{12}", id):
            return None
        with self._txn(b"tokens") as txn:
            raw = txn.get(id.encode())
        return None if raw is None else Token._from(json.loads(raw))

    def list_tokens(self, user: str | None = None) -> list[Token]:
        """Every token (or user's), newest first."""
        with self._txn(b"tokens") as txn:
            out = [Token._from(json.loads(v)) for _, v in txn.cursor()]
        if user is not None:
            out = [t for t in out if t.user == user]
        out.sort(key=lambda t: (t.created_us, t.id), reverse=True)
        return out

    def revoke_token(self, id: str) -> Token:
        """Revokes a token (revoking it again keeps the first time).

        :raises NotFound: no such token.
        """
        if not isinstance(id, str) or not re.fullmatch(r"[0-9a-f]{12}", id):
            raise NotFound(f"no token '{id}'")
        with self._txn(b"tokens", write=True) as txn:
            raw = txn.get(id.encode())
            if raw is None:
                raise NotFound(f"no token '{id}'")
            rec = json.loads(raw)
            if rec["revoked_us"] is None:
                rec["revoked_us"] = self._now_us()
                txn.put(id.encode(), _dumps(rec))
        return Token._from(rec)

    # ------------------------------------------------------------ audit

    def audit(
        self,
        action: str,
        *,
        user: str | None,
        address: str | None,
        logspace: str | None = None,
        query: str | None = None,
        results: int | None = None,
        status: int = 200,
        detail: str | None = None,
    ) -> AuditEntry:
        """Appends an audit entry (committed when this returns).

        Its time is the clock's, or the previous entry's when the clock went back, so that ids
        increase with the key order. When the store is 3/4 full (of 1 GiB), the oldest quarter of
        the audit log is deleted first, and an "audit_pruned" entry says so.
        """
        rec = {
            "user": user,
            "address": address,
            "action": action,
            "logspace": logspace,
            "query": query,
            "results": results,
            "status": status,
            "detail": detail,
        }
        self._audit_writes += 1
        if self._audit_writes % AUDIT_CHECK_EVERY == 0:
            self._prune_audit_when_full()
        try:
            return self._audit_put(rec)
        except StoreFull as e:
            if not e.map_full:
                raise  # the file system is full: pruning would not give it space
            try:
                self._prune_audit()
            except StoreFull:
                pass  # too full even to delete: the error below says so
            return self._audit_put(rec)

    def _audit_put(self, rec: dict) -> AuditEntry:
        """Appends rec under the next audit key."""
        value = _dumps(rec)
        with self._txn(b"audit", write=True) as txn:
            cur = txn.cursor()
            t, n = self._now_us(), 0
            if cur.last():
                last_t = int.from_bytes(cur.key()[:8], "big")
                last_n = int.from_bytes(cur.key()[8:], "big")
                if last_t >= t:
                    t, n = last_t, last_n + 1
                    if n >> AUDIT_SEQ_BITS:
                        t, n = t + 1, 0
            key = _audit_key(t, n)
            txn.put(key, value, append=True)
        return AuditEntry(id=_audit_id(key), time_us=t, **rec)

    def _used_bytes(self) -> int:
        """Bytes of the map in use by the DBs' pages (free pages not counted)."""
        env, dbs = self._open()
        pages = 0
        with env.begin() as txn:
            for st in [env.stat()] + [txn.stat(db) for db in dbs.values()]:
                pages += st["branch_pages"] + st["leaf_pages"] + st["overflow_pages"]
            psize = env.stat()["psize"]
        return pages * psize

    def _prune_audit_when_full(self) -> None:
        """Prunes the audit log when the DBs fill more than 3/4 of the map."""
        if self._used_bytes() > self.map_size * AUDIT_PRUNE_AT:
            self._prune_audit()

    def _prune_audit(self) -> None:
        """Deletes the oldest quarter of the audit log (in batches) and records that it did."""
        with self._txn(b"audit") as txn:
            goal = max(1, txn.stat(self._db(b"audit"))["entries"] // 4)
        removed, last_key = 0, b""
        while removed < goal:
            with self._txn(b"audit", write=True) as txn:
                cur = txn.cursor()
                batch = 0
                while removed < goal and batch < AUDIT_PRUNE_BATCH and cur.first():
                    last_key = cur.key()
                    cur.delete()
                    removed += 1
                    batch += 1
                if batch == 0:
                    break
        self._audit_put(
            {
                "user": None,
                "address": None,
                "action": "audit_pruned",
                "logspace": None,
                "query": None,
                "results": removed,
                "status": 200,
                "detail": f"the accounts store was filling up: the {removed} oldest audit entries "
                f"(up to {rfc3339(int.from_bytes(last_key[:8], 'big'))}) were deleted",
            }
        )

    def audit_entries(
        self,
        *,
        from_us: int | None = None,
        to_us: int | None = None,
        user: str | None = None,
        action: str | None = None,
        limit: int = 100,
        cursor: int | None = None,
    ) -> tuple[list[AuditEntry], int | None]:
        """Audit entries in [from_us, to_us) matching user and action, newest first.

        :param cursor: the next_cursor of the previous page (entries with smaller ids follow).
        :returns: (at most limit entries, next_cursor or None when there are no more).
        """
        if limit < 1:
            raise Invalid("limit: expected a positive integer")
        end = None  # the first key not wanted (exclusive upper bound)
        if to_us is not None:
            end = _audit_key(max(0, to_us), 0)
        if cursor is not None:
            ck = _key_of_id(max(0, cursor))
            end = ck if end is None or ck < end else end
        start = _audit_key(max(0, from_us), 0) if from_us is not None else None
        out: list[AuditEntry] = []
        more = False
        with self._txn(b"audit") as txn:
            for key, value in self._backwards(txn.cursor(), end):
                if start is not None and key < start:
                    break
                rec = json.loads(value)
                if (user is not None and rec["user"] != user) or (
                    action is not None and rec["action"] != action
                ):
                    continue
                if len(out) == limit:
                    more = True
                    break
                out.append(
                    AuditEntry(id=_audit_id(key), time_us=int.from_bytes(key[:8], "big"), **rec)
                )
        return out, (out[-1].id if more else None)

    @staticmethod
    def _backwards(cur: lmdb.Cursor, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs below end (all when None), largest key first."""
        if end is None:
            if not cur.last():
                return
        elif cur.set_range(end):
            if not cur.prev():
                return
        elif not cur.last():
            return
        yield from cur.iterprev()


# ---------------------------------------------------------------- CLI


def _read_password() -> str:
    """The new user's password: $LOGBOX_PASSWORD, else asked on a terminal, else stdin's line."""
    pw = os.environ.get("LOGBOX_PASSWORD")
    if pw is None and sys.stdin.isatty():
        pw = getpass.getpass("password: ")
    if pw is None:
        pw = sys.stdin.readline().rstrip("\r\n")
    return pw


def main(argv: Sequence[str] | None = None) -> int:
    """The admin CLI: add-user, list-users, reset-password. Exit 0, 1 on a refused change, 2 on
    usage."""
    p = argparse.ArgumentParser(prog="python -m logbox_core.accounts", description=__doc__)
    p.add_argument("--path", default=os.environ.get("LOGBOX_ACCOUNTS"), help="the store")
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("add-user", help="add a user (password: $LOGBOX_PASSWORD or stdin)")
    a.add_argument("name")
    a.add_argument("--role", required=True, choices=ROLES)
    a.add_argument("--logspace", action="append", help='may repeat; default "*"')
    a.add_argument(
        "--must-change",
        action="store_true",
        help="the web UI makes the user set a new password at the first sign-in (the API "
        "refuses the user until then)",
    )
    sub.add_parser("list-users", help="one JSON User per line")
    r = sub.add_parser(
        "reset-password",
        help="a lost password: a new one, shown once (or --password-stdin), to be changed at "
        "the next sign-in; the user enabled again and unlocked; audited",
    )
    r.add_argument("name")
    r.add_argument(
        "--password-stdin",
        action="store_true",
        help="the new password from $LOGBOX_PASSWORD or stdin instead of a generated one",
    )
    args = p.parse_args(argv)
    if not args.path:
        p.error("--path (or $LOGBOX_ACCOUNTS) is required")
    acc = Accounts(args.path)
    try:
        if args.cmd == "add-user":
            u = acc.add_user(
                args.name,
                _read_password(),
                args.role,
                args.logspace or ("*",),
                must_change=args.must_change,
            )
            print(json.dumps(u.to_json()))
        elif args.cmd == "reset-password":
            given = args.password_stdin
            password = _read_password() if given else secrets.token_urlsafe(15)
            u = acc.reset_password(args.name, password)
            print(
                f"user {u.name}: password reset; it must be changed at the next web sign-in"
                + ("" if given else f"\nnew password (shown once): {password}")
            )
        else:
            for u in acc.list_users():
                print(json.dumps(u.to_json()))
    except AccountsError as e:
        print(f"accounts: {e.message}", file=sys.stderr)
        return 1
    finally:
        acc.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
