"""Remote and multiple logspaces (rpc/API.md §4.1): other logbox boxes ("sites") whose logspaces
this box searches as `site:logspace`, and multiple logspaces that search several logspaces, local
and remote, at once.

A site is another box's public API: its URL, an API token of a user there (whose rights on that
box bound what this box sees) and the CA its certificate is checked against. The settings file
(sites.json, 0640: it holds tokens) is written by the API's admins and read on every request.

A query over several members is sent to each of them at once, each with the site's deadline, and
the answers are merged exactly:
- count: the totals summed;
- histogram: every member gets the same absolute range and bucket count, so the buckets line up,
  and their counts are summed;
- search: the pages are merged by (received time, member, id), newest or oldest first; the
  cursor is each member's own cursor (the id where its part of the merged page ended), so paging
  gives every match once, as one merged stream would;
- top: each member lists its first TOP_MAX values (over-fetch: as cheap for it as k), then is
  asked the exact counts of the candidates it did not list (one top of the field over the
  messages holding one of them: `(q) AND (field:v1 OR ...)`); the answer is exact when the k-th value's count is above what any value not known exactly can have, else a
  warning says the order may be inexact.
A member that fails or misses the deadline is named in `warnings` and the others answer.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import hashlib
import json
import os
import re
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import atomicfile
from .constants import (
    FACILITIES,
    LOGSPACE_PATTERN,
    QUERY_MAX,
    SEVERITIES,
    TOP_MAX,
    logspace_name_problem,
)
from .export import rfc3339_us
from .times import parse_time

VERSION = 1
SITE_NAME_PATTERN = "[a-z0-9_-]{1,32}"
SITE_RE = re.compile(SITE_NAME_PATTERN)
SEP = ":"
# a logspace as a path names it: a local or multiple logspace, or site:logspace
NAME_PATTERN = f"(?:{SITE_NAME_PATTERN}{SEP})?{LOGSPACE_PATTERN}"
MEMBERS_MAX = 10  # members of a multiple logspace (its cursor holds one id each)
DEADLINE_DEFAULT_MS = 10_000
DEADLINE_MAX_MS = 120_000
CURSOR_PREFIX = "f"
CURSOR_PATTERN = rf"(?:[0-9]{{1,20}}|{CURSOR_PREFIX}(?:[0-9]{{1,20}}|x)(?:\.(?:[0-9]{{1,20}}|x)){{0,{MEMBERS_MAX - 1}}})"
ASKS_MAX = 12  # top: at most this many requests for the counts of candidates per answer
CHUNK = 200  # top: values counted by one such request at most
# top: facility and severity names of equal counts are ordered by their number (PROTOCOL.md §4.4)
RANK = {n: i for i, n in enumerate(SEVERITIES)} | {n: i for i, n in enumerate(FACILITIES)}
# fields whose values a field:value query counts exactly as /top counts them
EXACT_FIELDS = ("host", "peer", "program", "pid", "msgid", "facility", "severity")


class FederationError(Exception):
    """Settings that cannot be used (the message says which and why)."""


@dataclass(frozen=True)
class Site:
    """Another logbox box."""

    name: str
    url: str  # https://host[:port]
    token: str = field(repr=False)
    ca: str | None  # PEM of the CA its certificate must chain to (None: the system's)
    deadline_ms: int

    def ca_file(self) -> str | bool:
        """A file holding the CA for requests' verify (True: the system's CAs)."""
        if self.ca is None:
            return True
        return _ca_file(self.ca)


@dataclass(frozen=True)
class Sites:
    """The settings: the sites and the multiple logspaces."""

    sites: Mapping[str, Site]
    multiple: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class Member:
    """One logspace a query reaches: local (site None) or on a site."""

    name: str  # as this box names it: "main", "a:main"
    site: Site | None
    logspace: str  # as its own box names it


# ---------------------------------------------------------------- names


def site_name_problem(name: object) -> str | None:
    """Why name may not name a site; None when it may."""
    if not isinstance(name, str) or not SITE_RE.fullmatch(name):
        return f"site name not {SITE_NAME_PATTERN}"
    return None


def split_remote(name: str) -> tuple[str, str] | None:
    """(site, logspace) of a remote logspace's name "site:logspace"; None for any other name."""
    site, sep, ls = name.partition(SEP)
    if not sep or site_name_problem(site) or logspace_name_problem(ls):
        return None
    return site, ls


def name_problem(name: object) -> str | None:
    """Why name may not name a logspace in a user's rights or a multiple logspace's members:
    a local logspace's rule, or site:logspace. None when it may."""
    if isinstance(name, str) and SEP in name:
        return None if split_remote(name) else f"remote logspace not {SITE_NAME_PATTERN}:<logspace>"
    return logspace_name_problem(name)


# ---------------------------------------------------------------- settings


_CA_FILES: dict[str, str] = {}
_CA_LOCK = threading.Lock()


def _ca_file(pem: str) -> str:
    """A private file holding pem (one per distinct PEM and process)."""
    key = hashlib.sha256(pem.encode()).hexdigest()
    with _CA_LOCK:
        path = _CA_FILES.get(key)
        if path is None or not os.path.exists(path):
            fd, path = tempfile.mkstemp(prefix="logbox-site-ca-", suffix=".pem")
            with os.fdopen(fd, "w") as f:
                f.write(pem)
            _CA_FILES[key] = path
        return path


def _site(name: str, raw: object) -> Site:
    if not isinstance(raw, dict):
        raise FederationError(f"site {name}: expected an object")
    unknown = set(raw) - {"url", "token", "ca", "deadline_ms"}
    if unknown:
        raise FederationError(f"site {name}: {sorted(unknown)[0]}: unknown member")
    url = raw.get("url")
    if not isinstance(url, str) or not re.fullmatch(
        r"https://[A-Za-z0-9.\-\[\]:]+(:[0-9]{1,5})?/?", url
    ):
        raise FederationError(f"site {name}: url: expected https://host[:port], got {url!r}")
    token = raw.get("token")
    if not isinstance(token, str) or not token or len(token) > 512 or not token.isprintable():
        raise FederationError(f"site {name}: token: expected the API token of a user on that box")
    ca = raw.get("ca")
    if ca is not None and (
        not isinstance(ca, str) or "-----BEGIN CERTIFICATE-----" not in ca or len(ca) > 65536
    ):
        raise FederationError(f"site {name}: ca: expected a PEM certificate or null")
    deadline = raw.get("deadline_ms", DEADLINE_DEFAULT_MS)
    if (
        isinstance(deadline, bool)
        or not isinstance(deadline, int)
        or not (100 <= deadline <= DEADLINE_MAX_MS)
    ):
        raise FederationError(f"site {name}: deadline_ms: expected 100..{DEADLINE_MAX_MS}")
    return Site(name, url.rstrip("/"), token, ca, deadline)


def parse_settings(doc: object) -> Sites:
    """The settings of a sites.json document. Raises FederationError."""
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise FederationError(f"expected a sites document of version {VERSION}")
    sites_raw = doc.get("sites", {})
    multi_raw = doc.get("multiple", {})
    if not isinstance(sites_raw, dict) or not isinstance(multi_raw, dict):
        raise FederationError("sites and multiple: expected objects")
    sites: dict[str, Site] = {}
    for name, raw in sites_raw.items():
        if (why := site_name_problem(name)) is not None:
            raise FederationError(f"site {name!r}: {why}")
        sites[name] = _site(name, raw)
    multiple: dict[str, tuple[str, ...]] = {}
    for name, members in multi_raw.items():
        if (why := logspace_name_problem(name)) is not None:
            raise FederationError(f"multiple logspace {name!r}: {why}")
        if (
            not isinstance(members, list)
            or not 1 <= len(members) <= MEMBERS_MAX
            or len(set(members)) != len(members)
        ):
            raise FederationError(
                f"multiple logspace {name}: members: expected 1..{MEMBERS_MAX} distinct logspaces"
            )
        for m in members:
            if (why := name_problem(m)) is not None:
                raise FederationError(f"multiple logspace {name}: member {m!r}: {why}")
            remote = split_remote(m)
            if remote is not None and remote[0] not in sites:
                raise FederationError(
                    f"multiple logspace {name}: member {m}: no site {remote[0]!r}"
                )
            if m in multi_raw:
                raise FederationError(
                    f"multiple logspace {name}: member {m} is a multiple logspace"
                )
        multiple[name] = tuple(members)
    return Sites(sites, multiple)


EMPTY = Sites({}, {})


def _raw(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read(1 << 20))
    except FileNotFoundError:
        return {"version": VERSION, "sites": {}, "multiple": {}}
    except (OSError, ValueError) as e:
        raise FederationError(f"{path}: cannot be read: {e}") from None
    if not isinstance(doc, dict):
        raise FederationError(f"{path}: not a sites document")
    return doc


def load_settings(path: str | os.PathLike[str]) -> Sites:
    """The settings in the file at path; none when it does not exist. Raises FederationError."""
    p = os.fspath(path)
    doc = _raw(p)
    try:
        return parse_settings(doc)
    except FederationError as e:
        raise FederationError(f"{p}: {e}") from None


_write_lock = threading.Lock()


def change_settings(
    path: str | os.PathLike[str], change: Callable[[dict[str, Any]], None]
) -> Sites:
    """Applies change to the document at path, checks the result whole and writes it atomically
    (0640: it holds tokens), under a lock shared by the processes that write it. Raises
    FederationError (the file is then unchanged)."""
    p = os.fspath(path)
    with _write_lock:
        try:
            lock_fd = os.open(p + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
        except OSError as e:
            raise FederationError(f"{p}: cannot write: {e.strerror or e}") from None
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            doc = _raw(p)
            doc = {
                "version": VERSION,
                "sites": dict(doc.get("sites") or {}),
                "multiple": dict(doc.get("multiple") or {}),
            }
            change(doc)
            parsed = parse_settings(doc)
            try:
                atomicfile.write_atomically(
                    p, json.dumps(doc, indent=2, sort_keys=True).encode() + b"\n", 0o640
                )
            except OSError as e:
                raise FederationError(f"{p}: cannot write: {e.strerror or e}") from None
            return parsed
        finally:
            os.close(lock_fd)


SITE_KEYS = ("url", "token", "ca", "deadline_ms")


def write_site(path: str | os.PathLike[str], name: str, body: Mapping[str, Any] | None) -> Sites:
    """Sets (body: SITE_KEYS; without token, the stored one is kept; a ca of null or "" is
    the system's CAs) or removes (None) the site name. Raises FederationError (nothing
    written): a bad setting, no such site, or a site a multiple logspace still uses."""
    if (why := site_name_problem(name)) is not None:
        raise FederationError(f"site {name!r}: {why}")

    def change(doc: dict[str, Any]) -> None:
        if body is None:
            if name not in doc["sites"]:
                raise FederationError(f"no site {name!r}")
            for multi, ms in sorted(doc["multiple"].items()):
                used = [m for m in ms if isinstance(m, str) and m.startswith(name + SEP)]
                if used:
                    raise FederationError(
                        f"site {name}: multiple logspace {multi} has {used[0]}: change it first"
                    )
            del doc["sites"][name]
            return
        old = doc["sites"].get(name) if isinstance(doc["sites"].get(name), dict) else {}
        new = dict(body)
        if not new.get("token") and old.get("token"):
            # the stored token goes only to the URL it was given for
            if str(new.get("url", "")).rstrip("/") != str(old.get("url", "")).rstrip("/"):
                raise FederationError(f"site {name}: token: required with a new url")
            new["token"] = old["token"]
        if not new.get("ca"):
            new.pop("ca", None)
        doc["sites"][name] = new

    return change_settings(path, change)


def write_multiple(
    path: str | os.PathLike[str],
    name: str,
    members: object,
    local: Iterable[str] | None = None,
) -> Sites:
    """Sets (members: a list of local logspaces, each in local, and site:logspace names) or
    removes (None) the multiple logspace name. Raises FederationError (nothing written)."""
    if (why := logspace_name_problem(name)) is not None:
        raise FederationError(f"multiple logspace {name!r}: {why}")
    if members is not None:
        names = set(local or ())
        if name in names:
            raise FederationError(f"name: {name!r} is a local logspace")
        for m in members if isinstance(members, list) else ():
            if isinstance(m, str) and split_remote(m) is None and m not in names:
                raise FederationError(f"members: no local logspace {m!r}")

    def change(doc: dict[str, Any]) -> None:
        if members is None:
            if name not in doc["multiple"]:
                raise FederationError(f"no multiple logspace {name!r}")
            del doc["multiple"][name]
        else:
            doc["multiple"][name] = members

    return change_settings(path, change)


def site_json(s: Site) -> dict[str, Any]:
    """A site as the API answers it: no token, only token_set."""
    return {"url": s.url, "token_set": bool(s.token), "ca": s.ca, "deadline_ms": s.deadline_ms}


# ---------------------------------------------------------------- members


def members_of(settings: Sites, name: str) -> list[Member] | None:
    """The members a query on name reaches; None for a plain local logspace.

    :raises FederationError: a remote logspace of a site that is not set."""
    remote = split_remote(name)
    if remote is not None:
        site = settings.sites.get(remote[0])
        if site is None:
            raise FederationError(f"no site {remote[0]!r}")
        return [Member(name, site, remote[1])]
    names = settings.multiple.get(name)
    if names is None:
        return None
    out: list[Member] = []
    for m in names:
        r = split_remote(m)
        if r is None:
            out.append(Member(m, None, m))
        else:
            out.append(Member(m, settings.sites[r[0]], r[1]))
    return out


class MemberError(Exception):
    """A member's request failed: the status, code and message it gave (or 0/unavailable)."""

    def __init__(self, status: int, code: str, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.position = position


# A member's request: (member, what, params) -> its answer. what: search, count, histogram, top.
Call = Callable[[Member, str, list[tuple[str, str]]], dict[str, Any]]


_CLIENTS: dict[tuple[str, str, str | None, int], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(site: Site) -> Any:
    """The process's client of site: one kept-alive HTTPS connection pool per site (and per
    setting: a changed token or CA gets a new one), so a query does not pay a TLS handshake."""
    from logbox_client import Client  # requests: only where sites are set

    key = (site.url, site.token, site.ca, site.deadline_ms)
    with _CLIENTS_LOCK:
        c = _CLIENTS.get(key)
        # a CA file gone (a tmp cleaner) makes a new one
        if c is None or c.pid != os.getpid() or (site.ca and not os.path.exists(c.verify)):
            for old in [k for k in _CLIENTS if k[0] == site.url]:
                _CLIENTS.pop(old)
            c = Client(site.url, token=site.token, verify=site.ca_file(),
                       timeout=site.deadline_ms / 1000)  # fmt: skip
            c.pid = os.getpid()
            c.session.max_redirects = 0  # a redirect is an error: never follow one elsewhere
            _CLIENTS[key] = c
        return c


def remote_get(site: Site, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
    """GET /api/v1<path> on site, with its token, CA and deadline; parameter values may carry
    non-UTF-8 bytes as \\udcXX (sent as those bytes).

    :raises MemberError: the site's error; 0 unavailable when it did not answer or the answer
        was not one."""
    from logbox_client import LogboxError

    raw = {k: v.encode("utf-8", "surrogateescape") for k, v in (params or {}).items()}
    try:
        return _client(site).call("GET", path, params=raw)
    except LogboxError as e:
        raise MemberError(e.status, e.code, e.message, e.position) from None
    except Exception as e:  # noqa: BLE001 — a CA file that cannot be read, a bad redirect, ...
        raise MemberError(0, "unavailable", f"{type(e).__name__}: {e}") from None


def remote_call(m: Member, what: str, params: list[tuple[str, str]]) -> dict[str, Any]:
    """GET /api/v1/logspaces/<logspace>/<what> on m's site."""
    assert m.site is not None
    return remote_get(m.site, f"/logspaces/{urllib.parse.quote(m.logspace, safe='')}/{what}",
                      dict(params))  # fmt: skip


def site_logspaces(sites: Mapping[str, Site], warnings: list[str]) -> list[dict[str, Any]]:
    """Every site's readable logspaces (its GET /logspaces, at once, each by its deadline) named
    site:logspace; a site that fails is a warning."""

    def one(m: Member, what: str, params: list[tuple[str, str]]) -> dict[str, Any]:
        assert m.site is not None
        return remote_get(m.site, "/logspaces")

    ms = [Member(f"site {n}", s, "") for n, s in sorted(sites.items())]
    docs = fan_out(one, ms, "logspaces", [], warnings)
    out = []
    for m in ms:
        assert m.site is not None
        for ls in (docs.get(m.name) or {}).get("logspaces") or ():
            # the site's own remote and multiple logspaces are not offered on: only its local ones
            if (
                isinstance(ls, dict)
                and "members" not in ls
                and "site" not in ls
                and split_remote(f"{m.site.name}{SEP}{ls.get('name')}")
            ):
                out.append(dict(ls, name=f"{m.site.name}{SEP}{ls['name']}", site=m.site.name))
    return out


def fan_out(
    call: Call,
    members: Iterable[Member],
    what: str,
    params: Callable[[Member], list[tuple[str, str]] | None] | list[tuple[str, str]],
    warnings: list[str],
    failed: dict[str, MemberError] | None = None,
    own: bool = False,
) -> dict[str, dict[str, Any]]:
    """call for every member at once (params: the same for all, or per member; None skips
    one); the answers of those that answered in time, by member name. A failure or a missed
    deadline adds a warning naming the member (and its error to failed).

    :raises MemberError: a member refused the request as bad (400): it is bad for all; unless
        own (a request this module made, not the caller's: then a warning too)."""
    ms = list(members)
    jobs: dict[str, tuple[Member, list[tuple[str, str]]]] = {}
    for m in ms:
        p = params(m) if callable(params) else params
        if p is not None:
            jobs[m.name] = (m, p)
    if not jobs:
        return {}
    deadline = max((m.site.deadline_ms / 1000 if m.site else 60.0) for m, _ in jobs.values())
    out: dict[str, dict[str, Any]] = {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(jobs))
    try:
        futs = {pool.submit(call, m, what, p): name for name, (m, p) in jobs.items()}
        done, pending = concurrent.futures.wait(futs, timeout=deadline + 1)
        bad: MemberError | None = None
        for f in done:
            name = futs[f]
            try:
                out[name] = f.result()
            except MemberError as e:
                if e.status == 400 and not own:
                    bad = bad or e
                warnings.append(f"{name}: {e.code}: {e.message}")
                if failed is not None:
                    failed[name] = e
            except Exception as e:  # noqa: BLE001 — any failure of one member is a warning
                warnings.append(f"{name}: {type(e).__name__}: {e}")
                if failed is not None:
                    failed[name] = MemberError(0, "unavailable", f"{type(e).__name__}: {e}")
        for f in pending:
            warnings.append(f"{futs[f]}: no answer within {deadline:g} s")
            if failed is not None:
                failed[futs[f]] = MemberError(0, "unavailable", f"no answer within {deadline:g} s")
        if bad is not None:
            raise bad
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return out


def _common(
    docs: Mapping[str, dict[str, Any]], logspace: str, from_us: int, to_us: int, basis: str
) -> dict[str, Any]:
    query = next((d.get("query") for d in docs.values() if "query" in d), None)
    return {"logspace": logspace, "query": query, "from": from_us, "to": to_us, "time": basis}


def _member_warnings(docs: Mapping[str, dict[str, Any]], warnings: list[str]) -> None:
    for name, d in sorted(docs.items()):
        for w in d.get("warnings") or ():
            warnings.append(f"{name}: {w}")


def _members_json(
    members: list[Member],
    docs: Mapping[str, dict[str, Any]],
    failed: Mapping[str, MemberError],
) -> list[dict[str, Any]]:
    """Each member: whether it answered, how long it took, or its error."""
    out = []
    for m in members:
        one: dict[str, Any] = {
            "logspace": m.name,
            "site": m.site.name if m.site else None,
            "ok": m.name in docs,
            "took_ms": docs[m.name].get("took_ms") if m.name in docs else None,
        }
        # the archived days the member read in place (indexer/ARCHIVE.md §7), as it said
        arch = docs[m.name].get("archive") if m.name in docs else None
        if isinstance(arch, dict):
            one["archive"] = arch
        e = failed.get(m.name)
        if e is not None and m.name not in docs:
            one["error"] = {"status": e.status, "code": e.code, "message": e.message}
        out.append(one)
    return out


# ---------------------------------------------------------------- count, histogram


def count(
    call: Call,
    members: list[Member],
    logspace: str,
    q: str,
    from_us: int,
    to_us: int,
    basis: str,
) -> dict[str, Any]:
    """The count over every member: the totals summed."""
    t0 = time.monotonic()
    warnings: list[str] = []
    params = [("q", q), ("from", rfc3339_us(from_us)), ("to", rfc3339_us(to_us)), ("time", basis)]
    failed: dict[str, MemberError] = {}
    docs = fan_out(call, members, "count", params, warnings, failed)
    _member_warnings(docs, warnings)
    return _common(docs, logspace, from_us, to_us, basis) | {
        "total": sum(int(d.get("total") or 0) for d in docs.values()),
        "took_ms": round((time.monotonic() - t0) * 1000, 3),
        "members": _members_json(members, docs, failed),
        "warnings": warnings,
    }


def histogram(
    call: Call,
    members: list[Member],
    logspace: str,
    q: str,
    from_us: int,
    to_us: int,
    basis: str,
    buckets: int,
) -> dict[str, Any]:
    """The histogram over every member: the same range and bucket count for all, so the
    buckets line up (PROTOCOL.md §4.3); their counts summed."""
    t0 = time.monotonic()
    warnings: list[str] = []
    params = [
        ("q", q),
        ("from", rfc3339_us(from_us)),
        ("to", rfc3339_us(to_us)),
        ("time", basis),
        ("buckets", str(buckets)),
    ]
    failed: dict[str, MemberError] = {}
    docs = fan_out(call, members, "histogram", params, warnings, failed)
    _member_warnings(docs, warnings)
    sums: dict[int, int] = {}
    step = None
    for d in docs.values():
        step = d.get("step_us", step)
        for b in d.get("buckets") or ():
            sums[int(b["from"])] = sums.get(int(b["from"]), 0) + int(b["count"])
    return _common(docs, logspace, from_us, to_us, basis) | {
        "total": sum(sums.values()),
        "step_us": step,
        "buckets": [{"from": k, "count": sums[k]} for k in sorted(sums)],
        "took_ms": round((time.monotonic() - t0) * 1000, 3),
        "members": _members_json(members, docs, failed),
        "warnings": warnings,
    }


# ---------------------------------------------------------------- search


def decode_cursor(raw: str | None, n: int) -> list[int | None]:
    """Each member's cursor (0: from the start, None: it has nothing more) of a federated
    cursor for n members; every member from the start for None or "0".

    :raises ValueError: not a cursor of n members."""
    if raw is None or raw == "0":
        return [0] * n
    if not raw.startswith(CURSOR_PREFIX):
        raise ValueError("a multiple or remote logspace's cursor starts with f")
    parts = raw[len(CURSOR_PREFIX) :].split(".")
    if len(parts) != n:
        raise ValueError(f"not a cursor of this logspace's {n} members")
    out: list[int | None] = []
    for p in parts:
        if p == "x":
            out.append(None)
        elif p.isdigit() and len(p) <= 20:
            out.append(int(p))
        else:
            raise ValueError("malformed")
    return out


def encode_cursor(cursors: list[int | None]) -> str | None:
    """The federated cursor of the members' cursors; None when none has more."""
    if all(c is None for c in cursors):
        return None
    return CURSOR_PREFIX + ".".join("x" if c is None else str(c) for c in cursors)


def _key(hit: dict[str, Any], member: str) -> tuple[int, str, int]:
    return (int(hit.get("received_us") or 0), member, int(hit["id"]))


def merge_pages(
    pages: list[tuple[str, list[dict[str, Any]], int | None]],
    limit: int,
    newest: bool,
) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, tuple[int, int | None]]]:
    """The first limit hits of the members' pages merged by (received, member, id), and how
    far each member's page was taken.

    pages: (member, its hits in order, its next_cursor). The merge stops where a member's page
    runs out while that member has more (next_cursor not None): its next hits could come
    first. Returns (hits as (member, hit), {member: (hits taken, next_cursor)})."""
    pos = {name: 0 for name, _, _ in pages}
    out: list[tuple[str, dict[str, Any]]] = []
    while len(out) < limit:
        best = None
        blocked = False
        for name, hits, nxt in pages:
            i = pos[name]
            if i >= len(hits):
                if nxt is not None:
                    blocked = True
                continue
            k = _key(hits[i], name)
            if best is None or (k > best[0] if newest else k < best[0]):
                best = (k, name, hits[i])
        if best is None or blocked:
            break
        out.append((best[1], best[2]))
        pos[best[1]] += 1
    return out, {name: (pos[name], nxt) for name, _, nxt in pages}


def search(
    call: Call,
    members: list[Member],
    logspace: str,
    q: str,
    from_us: int,
    to_us: int,
    basis: str,
    limit: int,
    order: str,
    cursor: str | None,
    total: bool,
    highlight: bool,
) -> dict[str, Any]:
    """One page of the merged search over every member.

    :raises ValueError: a cursor that is not this logspace's."""
    t0 = time.monotonic()
    cursors = decode_cursor(cursor, len(members))
    warnings: list[str] = []
    base = [("q", q), ("from", rfc3339_us(from_us)), ("to", rfc3339_us(to_us)), ("time", basis),
            ("limit", str(limit)), ("order", order), ("highlight", "1" if highlight else "0")]  # fmt: skip
    by_name = {m.name: i for i, m in enumerate(members)}

    def params(m: Member) -> list[tuple[str, str]] | None:
        c = cursors[by_name[m.name]]
        if c is None:
            return None
        return base + [("cursor", str(c)), ("total", "1" if total else "0")]

    failed: dict[str, MemberError] = {}
    docs = fan_out(call, members, "search", params, warnings, failed)
    totals: dict[str, int] = {}
    if total:  # members already done still count
        done = [m for m in members if cursors[by_name[m.name]] is None]
        counted = fan_out(
            call,
            done,
            "count",
            [("q", q), ("from", rfc3339_us(from_us)), ("to", rfc3339_us(to_us)), ("time", basis)],
            warnings,
        )
        for name, d in counted.items():
            totals[name] = int(d.get("total") or 0)
    for name, d in docs.items():
        if total:
            totals[name] = int(d.get("total") or 0)
    _member_warnings(docs, warnings)
    for m in members:  # a member with nothing more answered: an empty page
        if cursors[by_name[m.name]] is None:
            docs[m.name] = {"hits": [], "next_cursor": None, "took_ms": None}
    pages = []
    for m in members:
        d = docs.get(m.name)
        if d is None:
            continue
        nxt = d.get("next_cursor")
        pages.append((m.name, list(d.get("hits") or ()), int(nxt) if nxt is not None else None))
    merged, taken = merge_pages(pages, limit, order == "newest")
    new = list(cursors)
    for name, (n, nxt) in taken.items():
        i = by_name[name]
        hits = next(h for nm, h, _ in pages if nm == name)
        if n == 0 and hits:
            continue  # nothing of it on this page: it starts there again
        new[i] = nxt if n == len(hits) else int(hits[n - 1]["id"])
    hits_out = []
    for name, h in merged:
        hits_out.append(dict(h, logspace=name))
    return _common(docs, logspace, from_us, to_us, basis) | {
        "hits": hits_out,
        "total": sum(totals.values()) if total else None,
        "next_cursor": encode_cursor(new),
        "took_ms": round((time.monotonic() - t0) * 1000, 3),
        "members": _members_json(members, docs, failed),
        "warnings": warnings,
    }


# ---------------------------------------------------------------- top


def escape_value(fld: str, value: str) -> str:
    """value as a field term's value matches it exactly (QUERY.md "Canonical form"): every
    white space, control byte and one of `( ) " \\ : * ?` escaped by a backslash, one pass."""
    if fld in ("facility", "severity"):
        return value
    return "".join(
        f"\\{c}" if c in _SPECIAL or ord(c) < 0x21 or ord(c) == 0x7F else c for c in value
    )


_SPECIAL = frozenset('()"\\:*?')


def _order(counts: Mapping[str, int], fld: str, rank: Mapping[str, int]) -> list[str]:
    """Values by count descending then value bytes ascending (facility, severity: by number)."""

    def key(v: str) -> tuple[int, Any]:
        if fld in ("facility", "severity") and v in rank:
            return (-counts[v], rank[v])
        return (-counts[v], v.encode("utf-8", "surrogateescape"))

    return sorted(counts, key=key)


def _bounds(
    known: Mapping[str, Mapping[str, int]], floor: Mapping[str, int], v: str
) -> tuple[int, int]:
    """The least and most value v can count over every member: the counts known, plus at most
    each other member's floor (the last count it listed; 0 when it listed all its values)."""
    lo = sum(known[v].values())
    return lo, lo + sum(f for n, f in floor.items() if n not in known[v])


def values_query(q: str, fld: str, values: list[str]) -> str:
    """q narrowed to the messages whose fld is one of values: `(q) AND (fld:v1 OR fld:v2 ...)`."""
    return f"({q}) AND (" + " OR ".join(f"{fld}:{escape_value(fld, v)}" for v in values) + ")"


def _chunks(q: str, fld: str, values: list[str]) -> list[list[str]]:
    """values in groups whose values_query stays within QUERY_MAX bytes and CHUNK values."""
    out: list[list[str]] = []
    cur: list[str] = []
    room = QUERY_MAX - len(q.encode("utf-8", "surrogateescape")) - 16
    used = 0
    for v in values:
        n = len(f" OR {fld}:{escape_value(fld, v)}".encode("utf-8", "surrogateescape"))
        if n > room:
            continue  # this one cannot be asked about: the answer stays inexact for it
        if cur and (used + n > room or len(cur) >= CHUNK):
            out.append(cur)
            cur, used = [], 0
        cur.append(v)
        used += n
    if cur:
        out.append(cur)
    return out


def _exact_counts(
    call: Call,
    members: list[Member],
    known: dict[str, dict[str, int]],
    floor: Mapping[str, int],
    k: int,
    q: str,
    fld: str,
    rng: list[tuple[str, str]],
    rank: Mapping[str, int],
    warnings: list[str],
) -> None:
    """Asks members the counts of values they did not list, adding them to known: first those
    of the top k as they stand (by the counts known), then of any value whose most could still
    reach the k-th count, the highest first. One request counts up to CHUNK values (the top of
    fld among the messages holding one of them); ASKS_MAX requests at most in all."""
    budget = ASKS_MAX
    for _ in range(3):
        counts = {v: _bounds(known, floor, v)[0] for v in known}
        ranked = _order(counts, fld, rank)
        kth = counts[ranked[k - 1]] if len(ranked) >= k else 0
        want = ranked[:k] + sorted(
            (v for v in ranked[k:] if _bounds(known, floor, v)[1] >= kth),
            key=lambda v: -_bounds(known, floor, v)[1],
        )
        asks: dict[str, tuple[Member, list[str]]] = {}
        for m in members:
            if not floor.get(m.name, 0):
                continue  # it listed every value it has (or did not answer)
            missing = [v for v in want if m.name not in known[v]]
            for i, chunk in enumerate(_chunks(q, fld, missing)):
                if len(asks) < budget:
                    asks[f"{m.name} (counts {i + 1})"] = (m, chunk)
        if not asks:
            return
        budget -= len(asks)
        got = fan_out(
            call,
            [Member(name, m.site, m.logspace) for name, (m, _) in asks.items()],
            "top",
            lambda mm, asks=asks: [
                ("q", values_query(q, fld, asks[mm.name][1])),
                *rng,
                ("field", fld),
                ("k", str(len(asks[mm.name][1]))),
            ],
            warnings,
            own=True,
        )
        for name, d in got.items():
            m, chunk = asks[name]
            have = {x["value"]: int(x["count"]) for x in d.get("values") or ()}
            for v in chunk:
                known[v][m.name] = have.get(v, 0)
        if budget <= 0:
            return


def top(
    call: Call,
    members: list[Member],
    logspace: str,
    q: str,
    from_us: int,
    to_us: int,
    basis: str,
    fld: str,
    k: int,
    rank: Mapping[str, int] = RANK,
) -> dict[str, Any]:
    """The exact top-k values of fld over every member (see the module's doc): each member
    lists its first TOP_MAX values (as cheap for it as k: it counts every value either way), a
    member that listed fewer listed all; the values some listed and others did not are counted
    on those others (the whole-value fields, facility, severity); the answer is exact when the
    k-th value's count is above what any value can have that is not known exactly."""
    t0 = time.monotonic()
    warnings: list[str] = []
    rng = [("from", rfc3339_us(from_us)), ("to", rfc3339_us(to_us)), ("time", basis)]
    fld_l = fld.lower() if fld.lower() in (*EXACT_FIELDS, "message") else fld
    failed: dict[str, MemberError] = {}
    docs = fan_out(
        call,
        members,
        "top",
        [("q", q), *rng, ("field", fld), ("k", str(TOP_MAX))],
        warnings,
        failed,
    )
    lists = {
        n: {v["value"]: int(v["count"]) for v in d.get("values") or ()} for n, d in docs.items()
    }
    floor = {n: (min(vs.values()) if len(vs) >= TOP_MAX else 0) for n, vs in lists.items()}
    known: dict[str, dict[str, int]] = {}  # value -> member -> its exact count
    for n, vs in lists.items():
        for v, c in vs.items():
            known.setdefault(v, {})[n] = c
    if fld_l in EXACT_FIELDS and known and any(floor.values()):
        _exact_counts(call, members, known, floor, k, q, fld_l, rng, rank, warnings)
    counts = {v: _bounds(known, floor, v)[0] for v in known}
    ranked = _order(counts, fld_l, rank)
    chosen = ranked[:k]

    def exact(v: str) -> bool:
        lo, hi = _bounds(known, floor, v)
        return lo == hi

    unseen = sum(floor.values())  # the most a value nobody listed can have
    kth = counts[chosen[-1]] if len(chosen) == k else 0
    if not (
        all(exact(v) for v in chosen)
        and all(exact(v) or _bounds(known, floor, v)[1] < kth for v in ranked[k:])
        and (unseen == 0 or unseen < kth)
    ):
        warnings.append(
            f"top: the order may be inexact: a member has more than {TOP_MAX} values, and a "
            f"value it did not list could count up to {unseen} more"
        )
    _member_warnings(docs, warnings)
    return _common(docs, logspace, from_us, to_us, basis) | {
        "field": next((d.get("field") for d in docs.values() if "field" in d), fld_l),
        "total": sum(int(d.get("total") or 0) for d in docs.values()),
        "values": [{"value": v, "count": counts[v]} for v in chosen],
        "took_ms": round((time.monotonic() - t0) * 1000, 3),
        "members": _members_json(members, docs, failed),
        "warnings": warnings,
    }


# ---------------------------------------------------------------- one entry for both apps

DAY_US = 86_400_000_000


def query(
    call: Call,
    members: list[Member],
    what: str,
    logspace: str,
    params: Mapping[str, str],
    rank: Mapping[str, int] = RANK,
) -> dict[str, Any]:
    """The merged answer of searchd's /v1/<what> (search, count, histogram, top) over members,
    given searchd's parameters; from and to are resolved once here (default: the last day) so
    every member covers the same instants.

    :raises ValueError: a parameter this cannot use (the message starts with its name).
    :raises MemberError: a member refused the request as bad (400).
    """
    now = time.time()
    to = parse_time(params["to"], now) if params.get("to") else int(now * 1_000_000)
    frm = parse_time(params["from"], now) if params.get("from") else to - DAY_US
    if frm > to:
        raise ValueError("from: after to")
    basis = params.get("time") or "received"
    q = params["q"]
    if what == "count":
        return count(call, members, logspace, q, frm, to, basis)
    if what == "histogram":
        return histogram(
            call, members, logspace, q, frm, to, basis, int(params.get("buckets", 100))
        )
    if what == "top":
        return top(call, members, logspace, q, frm, to, basis, params["field"],
                   int(params.get("k", 10)), rank)  # fmt: skip
    if what == "search":
        try:
            return search(call, members, logspace, q, frm, to, basis,
                          int(params.get("limit", 100)), params.get("order", "newest"),
                          params.get("cursor"), params.get("total", "1") == "1",
                          params.get("highlight", "0") == "1")  # fmt: skip
        except ValueError as e:
            raise ValueError(f"cursor: {e}") from None
    raise ValueError(f"{what}: not a query of remote or multiple logspaces")


def searchd_call(client: Any) -> Call:
    """A Call answering local members from searchd (client: logbox_core.searchd's, asking as
    the caller) and remote members from their sites."""
    from .searchd import SearchdError

    def call(m: Member, what: str, params: list[tuple[str, str]]) -> dict[str, Any]:
        if m.site is not None:
            return checked(what, remote_call(m, what, params))
        try:
            return checked(what, client.get(f"/v1/{what}", [("logspace", m.logspace), *params]))
        except SearchdError as e:
            raise MemberError(e.status, e.code, e.message, e.position) from None

    return call


def _int(v: object, nullable: bool = False) -> bool:
    return (v is None and nullable) or (isinstance(v, int) and not isinstance(v, bool))


# what a merge and the apps read of each member's hit (PROTOCOL.md §3 "Message object")
HIT_KEYS = ("id", "received", "received_us", "timestamp", "timestamp_us", "host", "program",
            "pid", "msgid", "peer", "sd", "facility", "severity", "flags", "message")  # fmt: skip


def checked(what: str, doc: dict[str, Any]) -> dict[str, Any]:
    """doc, a member's answer to what, when it has what the merge reads, of the right types
    (a site on another version, or a broken one, must not break the merged answer).

    :raises MemberError: 0 bad_response, saying what is wrong."""

    def bad(why: str) -> MemberError:
        return MemberError(0, "bad_response", f"{what}: {why}")

    if not _int(doc.get("total"), nullable=True):
        raise bad("total is not an integer")
    if not isinstance(doc.get("warnings", []), list):
        raise bad("warnings is not a list")
    if what == "histogram":
        b = doc.get("buckets")
        if not _int(doc.get("step_us")) or not isinstance(b, list):
            raise bad("no step_us or buckets")
        if not all(isinstance(x, dict) and _int(x.get("from")) and _int(x.get("count")) for x in b):
            raise bad("a bucket without an integer from or count")
    elif what == "top":
        v = doc.get("values")
        if not isinstance(v, list) or not all(
            isinstance(x, dict) and isinstance(x.get("value"), str) and _int(x.get("count"))
            for x in v
        ):
            raise bad("values are not [{value, count}]")
    elif what == "search":
        hits, nxt = doc.get("hits"), doc.get("next_cursor")
        if not isinstance(hits, list) or not (
            nxt is None or (isinstance(nxt, str) and nxt.isdigit())
        ):
            raise bad("no hits, or a next_cursor that is not an id")
        for h in hits:
            if not isinstance(h, dict) or not all(k in h for k in HIT_KEYS):
                raise bad("a hit without every member of a message")
            if not _int(h["id"]) or not _int(h["received_us"]):
                raise bad("a hit whose id or received_us is not an integer")
    return doc


class Federated:
    """searchd's GET of a query (/v1/search, /v1/count, /v1/histogram, /v1/top) for a remote or
    multiple logspace, failing as searchd fails (SearchdError): what both apps' views call in
    place of the searchd client when the logspace has members."""

    def __init__(self, client: Any, members: list[Member], logspace: str) -> None:
        self.client = client
        self.members = members
        self.logspace = logspace

    def get(
        self, path: str, params: Iterable[tuple[str, str]] | Mapping[str, str]
    ) -> dict[str, Any]:
        """The merged answer; a member's 400 is the request's; when no member answered, a
        remote logspace's own 404, 422 or 429, else 503 (a site that refuses this box's token
        is this box's problem, not the caller's 401/403).

        :raises SearchdError: as searchd's client."""
        from .searchd import SearchdError

        p = dict(params.items() if isinstance(params, Mapping) else params)
        p.pop("logspace", None)
        what = path.removeprefix("/v1/")
        try:
            doc = query(searchd_call(self.client), self.members, what, self.logspace, p)
        except ValueError as e:
            raise SearchdError(400, "bad_parameter", str(e)) from None
        except MemberError as e:
            raise SearchdError(e.status or 503, e.code, e.message, e.position) from None
        if not any(m["ok"] for m in doc["members"]):
            errs = [m["error"] for m in doc["members"] if "error" in m]
            if len(self.members) == 1 and errs and errs[0]["status"] in (404, 422, 429):
                raise SearchdError(
                    errs[0]["status"],
                    errs[0]["code"],
                    f"{self.members[0].name}: {errs[0]['message']}",
                )
            raise SearchdError(
                503, "unavailable", "no member answered: " + "; ".join(doc["warnings"])
            )
        return doc


def remote_message(
    members: list[Member], logspace: str, id: int, q: str | None = None
) -> dict[str, Any]:
    """A remote logspace's message from its site (with spans for q when given).

    :raises SearchdError: a multiple logspace (400: a message id is one member's), or the
        site's error (404 for no such message; 503 when it did not answer)."""
    from .searchd import SearchdError

    if len(members) != 1 or members[0].site is None:
        raise SearchdError(
            400,
            "bad_parameter",
            f"logspace: {logspace!r} is a multiple logspace; a message id is one member's: ask "
            "for it in the member's logspace (each hit names it in `logspace`)",
        )
    m = members[0]
    assert m.site is not None
    try:
        doc = remote_get(
            m.site,
            f"/logspaces/{urllib.parse.quote(m.logspace, safe='')}/messages/{id}",
            {"q": q} if q else None,
        )
    except MemberError as e:
        status = e.status if e.status in (400, 404) else 503
        raise SearchdError(status, e.code, f"{m.site.name}: {e.message}") from None
    if not all(k in doc for k in HIT_KEYS) or not _int(doc["id"]):
        raise SearchdError(503, "bad_response", f"{m.site.name}: the answer is not a message")
    return dict(doc, logspace=logspace)


_LISTED: dict[tuple[str, ...], tuple[float, list[dict[str, Any]], list[str]]] = {}
LISTING_TTL = 15.0  # s: how long a site's list of logspaces is reused (the search page asks)


def listing(
    settings: Sites, can_read: Callable[[str], bool], fresh: bool = True
) -> tuple[list[dict[str, Any]], list[str]]:
    """The sites' logspaces and the multiple logspaces the caller may read (can_read), with a
    warning per site that did not answer. fresh=False reuses a list up to LISTING_TTL old."""
    key = tuple(sorted(f"{s.name} {s.url}" for s in settings.sites.values()))
    hit = _LISTED.get(key)
    if not fresh and hit is not None and time.monotonic() - hit[0] < LISTING_TTL:
        remote, warnings = hit[1], list(hit[2])
    else:
        warnings = []
        remote = site_logspaces(settings.sites, warnings)
        _LISTED[key] = (time.monotonic(), remote, list(warnings))
    out = [ls for ls in remote if can_read(ls["name"])]
    for name, ms in sorted(settings.multiple.items()):
        if can_read(name) and all(can_read(m) for m in ms):
            out.append({"name": name, "members": list(ms)})
    return out, warnings


def unreadable(members: list[Member] | None, can_read: Callable[[str], bool]) -> str | None:
    """The first member the caller may not read (can_read), or None."""
    return next((m.name for m in members or () if not can_read(m.name)), None)


def resolve(path: str | os.PathLike[str], logspace: str) -> list[Member] | None:
    """The members a query on logspace reaches, by the settings file at path; None for a local
    logspace (also when the file cannot be read and the name is not site:logspace).

    :raises FederationError: a remote logspace of no site, or a file that cannot be read."""
    try:
        s = load_settings(path)
    except FederationError:
        if SEP not in logspace:
            return None
        raise
    return members_of(s, logspace)
