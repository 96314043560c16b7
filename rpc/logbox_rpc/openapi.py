"""The OpenAPI 3.0.3 document of the API, built from the app's routes and the Spec each view
declares (params.py), served at GET /api/v1/openapi.json."""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, Flask, current_app, jsonify
from logbox_core.accounts import (
    SEARCH_COLUMNS_MAX,
    SEARCH_NAME_MAX,
    SEARCH_QUERY_MAX,
    SEARCH_TIME_MAX,
)
from logbox_core.constants import LOGSPACE_PATTERN, USER_NAME_PATTERN
from logbox_core.origin import UNSAFE_METHODS

from .errors import STATUS_CODES
from .params import Spec, declare, spec_of

bp = Blueprint("openapi", __name__)

PREFIX = "/api/v1"
# What an error status's description says besides its code (errors.STATUS_CODES, as {code}).
_ERROR_MORE = {
    400: "bad_query or {code}",
    401: "{code} (WWW-Authenticate: Bearer)",
    403: "{code}; password_change_required (an authenticated route, or login, for a user "
    "whose generated password must be changed first); a POST, PATCH or DELETE whose Origin is "
    "another site",
    429: "{code} (login) or too_many_requests (searches waiting) (Retry-After)",
    507: "{code} (the accounts store has no space for the change or its audit "
    "entry; nothing was changed)",
}
ERROR_TEXT = {s: _ERROR_MORE.get(s, "{code}").format(code=c) for s, c in STATUS_CODES.items()}


def _obj(props: dict[str, Any], required: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    """An object schema; every property required unless told."""
    out: dict[str, Any] = {"type": "object", "properties": props}
    req = list(props) if required is None else required
    if req:  # OpenAPI 3.0: "required" holds at least one name
        out["required"] = req
    return {**out, **kw}


def _ref(name: str) -> dict[str, str]:
    """A $ref to components/schemas/name."""
    return {"$ref": f"#/components/schemas/{name}"}


STR = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}
TIME = {"type": "string", "format": "date-time"}
NTIME = {"type": "string", "format": "date-time", "nullable": True}
NSTR = {"type": "string", "nullable": True}
NINT = {"type": "integer", "nullable": True}
STRS = {"type": "array", "items": STR}

_COUNT = {
    "logspace": STR,
    "query": {**STR, "description": "the canonical form of q"},
    "from": {**INT, "description": "µs since the epoch"},
    "to": {**INT, "description": "µs since the epoch"},
    "time": {
        **STR,
        "enum": ["received", "event"],
        "description": "which time from and to selected by",
    },
    "total": NINT,
    "took_ms": NUM,
    "segments": INT,
    "tail": INT,
    "warnings": STRS,
}

SCHEMAS: dict[str, Any] = {
    "Error": _obj(
        {
            "error": _obj(
                {
                    "code": STR,
                    "message": STR,
                    "position": {**INT, "description": "bad_query: byte offset in q"},
                },
                ["code", "message"],
            )
        }
    ),
    "Message": _obj(
        {
            "id": INT,
            "received": TIME,
            "received_us": INT,
            "timestamp": NSTR,
            "timestamp_us": NINT,
            "host": STR,
            "peer": STR,
            "program": STR,
            "pid": STR,
            "msgid": STR,
            "sd": STR,
            "facility": {"type": "integer", "nullable": True, "minimum": 0, "maximum": 23},
            "severity": {"type": "integer", "nullable": True, "minimum": 0, "maximum": 7},
            "flags": STRS,
            "message": STR,
            "spans": {
                "type": "array",
                "items": {"type": "array", "items": INT, "minItems": 2, "maxItems": 2},
                "description": "with highlight=1: [start, end) byte offsets of the message "
                "tokens the query matched (indexer/PROTOCOL.md §4.1)",
            },
        },
        [
            "id",
            "received",
            "received_us",
            "timestamp",
            "timestamp_us",
            "host",
            "peer",
            "program",
            "pid",
            "msgid",
            "sd",
            "facility",
            "severity",
            "flags",
            "message",
        ],
        description="a stored message, as `logbox cat` prints it (indexer/PROTOCOL.md §3)",
    ),
    "SearchResult": _obj(
        {**_COUNT, "hits": {"type": "array", "items": _ref("Message")}, "next_cursor": NSTR},
        ["logspace", "query", "from", "to", "hits", "total", "next_cursor", "took_ms", "warnings"],
    ),
    "Count": _obj(_COUNT, ["logspace", "query", "from", "to", "total", "took_ms", "warnings"]),
    "Histogram": _obj(
        {
            **_COUNT,
            "step_us": INT,
            "buckets": {"type": "array", "items": _obj({"from": INT, "count": INT})},
        },
        ["logspace", "query", "from", "to", "total", "step_us", "buckets", "warnings"],
    ),
    "Top": _obj(
        {
            **_COUNT,
            "field": STR,
            "values": {"type": "array", "items": _obj({"value": STR, "count": INT})},
        },
        ["logspace", "query", "from", "to", "total", "field", "values", "warnings"],
    ),
    "Logspaces": _obj(
        {
            "logspaces": {
                "type": "array",
                "items": _obj(
                    {
                        "name": STR,
                        "first_id": INT,
                        "next_id": INT,
                        "messages": INT,
                        "delimiters": {
                            **STR,
                            "description": "the delimiters beside white space the catalog "
                            "applies to the logspace's messages",
                        },
                    }
                ),
            }
        }
    ),
    "User": _obj(
        {
            "name": STR,
            "role": {"type": "string", "enum": ["admin", "searcher"]},
            "logspaces": STRS,
            "disabled": {"type": "boolean"},
            "created": TIME,
        }
    ),
    "Token": _obj(
        {
            "id": {"type": "string", "pattern": "^[0-9a-f]{12}$"},
            "user": STR,
            "name": STR,
            "kind": {"type": "string", "enum": ["session", "api", "web"]},
            "created": TIME,
            "expires": NTIME,
            "revoked": NTIME,
            "last_used": NTIME,
        }
    ),
    "AuditEntry": _obj(
        {
            "id": {
                **STR,
                "pattern": "^[0-9]{1,20}$",
                "description": "decimal: it exceeds 2^53 (what a JSON number keeps exactly)",
            },
            "time": TIME,
            "user": NSTR,
            "address": NSTR,
            "action": STR,
            "logspace": NSTR,
            "query": NSTR,
            "results": NINT,
            "status": INT,
            "detail": NSTR,
        }
    ),
    "Status": _obj(
        {
            "time": TIME,
            "health": {"type": "string", "enum": ["ok", "degraded"]},
            "problems": STRS,
            "services": {
                "type": "object",
                "additionalProperties": _obj(
                    {
                        "state": {"type": "string", "enum": ["running", "down", "unknown"]},
                        "pid": NINT,
                        "uptime_s": {"type": "number", "nullable": True},
                        "holding": NSTR,
                        "disk_full": {"type": "boolean", "nullable": True},
                        "held_back_bytes": NINT,
                        "reserve_bytes": NINT,
                        "resources": _obj(
                            {
                                "source": {"type": "string", "enum": ["cgroup", "proc"]},
                                "cpu_s": {
                                    **NUM,
                                    "description": "CPU seconds (user + system) since it started",
                                },
                                "rss_bytes": NINT,
                                "io_read_bytes": NINT,
                                "io_write_bytes": NINT,
                                "processes": NINT,
                            },
                            ["source", "cpu_s"],
                            nullable=True,
                            description="what the service uses (admins only; null when "
                            "unknown): logbox_core/usage.py",
                        ),
                        "sealing": _obj(
                            {
                                "setup": {"type": "boolean"},
                                "epoch": NINT,
                                "last_sealed": {**TIME, "nullable": True},
                                "error": NSTR,
                                "tsa_url": NSTR,
                                "tsa_error": NSTR,
                            },
                            ["setup", "epoch", "last_sealed", "error", "tsa_url", "tsa_error"],
                        ),
                    },
                    ["state"],
                ),
            },
            "eps": {"type": "object", "additionalProperties": {"type": "number", "nullable": True}},
            "stored": NINT,
            "malformed": NINT,
            "quarantined": NINT,
            "deadletter": {
                "type": "object",
                "nullable": True,
                "properties": {
                    "records": NINT,
                    "last_reason": NSTR,
                    "last_at": NTIME,
                },
            },
            "spool": {
                "type": "object",
                "nullable": True,
                "properties": {
                    "files": NINT,
                    "waiting_bytes": NINT,
                    "oldest_waiting": NSTR,
                    "lag_s": {"type": "number", "nullable": True},
                    "torn": NINT,
                    "malformed": NINT,
                },
            },
            "logspaces": {
                "type": "array",
                "items": _obj(
                    {
                        "name": STR,
                        "next_id": NINT,
                        "indexed_id": NINT,
                        "index_lag": NINT,
                        "last_received": NTIME,
                        "bytes": NINT,
                    },
                    ["name"],
                ),
            },
            "disk": {"type": "object", "nullable": True},
            "raid": {"type": "object", "nullable": True},
        },
        ["time", "health", "services", "logspaces", "disk", "raid"],
        description="a caller who is not an admin gets only the logspaces they may read, null "
        "pids, disk.path and raid.device, no RAID members, problems cut to their part, and "
        "null eps, stored, malformed and disk.store_bytes unless they may read every logspace",
    ),
    "System": _obj(
        {
            "logbox": _obj({"version": STR, "commit": NSTR}),
            "host": _obj(
                {
                    "hostname": STR,
                    "kernel": STR,
                    "os": NSTR,
                    "arch": STR,
                    "boot_time": NTIME,
                    "virtualization": NSTR,
                }
            ),
            "cpu": _obj(
                {
                    "model": NSTR,
                    "cores": INT,
                    "threads_per_core": NINT,
                    "mhz": {"type": "number", "nullable": True},
                }
            ),
            "memory": _obj(
                {"total_bytes": NINT, "available_bytes": NINT, "swap_total_bytes": NINT}
            ),
            "disks": {
                "type": "array",
                "items": _obj(
                    {
                        "name": STR,
                        "size_bytes": NINT,
                        "model": NSTR,
                        "rotational": {"type": "boolean", "nullable": True},
                    }
                ),
            },
            "store": _obj(
                {
                    "path": STR,
                    "filesystem": NSTR,
                    "device": NSTR,
                    "encrypted": {"type": "boolean", "nullable": True},
                    "total_bytes": NINT,
                    "free_bytes": NINT,
                }
            ),
            "raid": {"type": "object", "nullable": True},
            "settings": _obj(
                {
                    "logspaces": {
                        "type": "object",
                        "additionalProperties": _obj({"retention_days": NINT}),
                    },
                    "sealing": {"type": "boolean", "nullable": True},
                    "inputs": STRS,
                    "routes": NINT,
                    "indexd_max_memory_mb": NINT,
                }
            ),
        }
    ),
    "OpenAPI": {"type": "object", "description": "an OpenAPI 3.0.3 document"},
    "Health": _obj({"status": {"type": "string", "enum": ["ok"]}}),
    "LoginRequest": _obj({"username": STR, "password": STR}, additionalProperties=False),
    "LoginResult": _obj(
        {
            "token": {**STR, "description": "lbx_<id>_<secret>: send as Authorization: Bearer"},
            "id": STR,
            "expires": NTIME,
            "user": _ref("User"),
        }
    ),
    "Me": _obj({"user": _ref("User"), "token": _ref("Token")}),
    "Revoked": _obj({"revoked": STR}),
    "Deleted": _obj({"deleted": STR}),
    "TokenList": _obj({"tokens": {"type": "array", "items": _ref("Token")}}),
    "TokenCreate": _obj(
        {
            "user": {**STR, "description": "default: the caller"},
            "name": {**STR, "description": "default: api"},
            "expires_in": {
                "type": "integer",
                "nullable": True,
                "minimum": 1,
                "description": "seconds; null: never; default 90 days",
            },
        },
        [],
        additionalProperties=False,
    ),
    "NewToken": {
        "allOf": [
            _ref("Token"),
            _obj({"token": {**STR, "description": "the secret, shown this once"}}),
        ]
    },
    "SavedSearch": _obj(
        {
            "id": STR,
            "owner": STR,
            "name": STR,
            "logspace": STR,
            "query": STR,
            "from": NSTR,
            "to": NSTR,
            "time": {**STR, "enum": ["received", "event"]},
            "columns": STRS,
            "shared": {"type": "boolean"},
            "created": TIME,
            "updated": TIME,
        }
    ),
    "SavedSearchList": _obj({"searches": {"type": "array", "items": _ref("SavedSearch")}}),
    "SavedSearchCreate": _obj(
        {
            "name": {"type": "string", "minLength": 1, "maxLength": SEARCH_NAME_MAX},
            "logspace": {"type": "string", "pattern": f"^{LOGSPACE_PATTERN}$"},
            "query": {"type": "string", "maxLength": SEARCH_QUERY_MAX},
            "from": {**NSTR, "maxLength": SEARCH_TIME_MAX, "description": "as search takes it"},
            "to": {**NSTR, "maxLength": SEARCH_TIME_MAX},
            "time": {**STR, "enum": ["received", "event"], "default": "received"},
            "columns": {**STRS, "maxItems": SEARCH_COLUMNS_MAX},
            "shared": {"type": "boolean", "default": False},
        },
        ["name", "logspace", "query"],
        additionalProperties=False,
    ),
    "SavedSearchUpdate": _obj(
        {
            "name": {"type": "string", "minLength": 1, "maxLength": SEARCH_NAME_MAX},
            "logspace": {"type": "string", "pattern": f"^{LOGSPACE_PATTERN}$"},
            "query": {"type": "string", "maxLength": SEARCH_QUERY_MAX},
            "from": {**NSTR, "maxLength": SEARCH_TIME_MAX},
            "to": {**NSTR, "maxLength": SEARCH_TIME_MAX},
            "time": {**STR, "enum": ["received", "event"]},
            "columns": {**STRS, "maxItems": SEARCH_COLUMNS_MAX},
            "shared": {"type": "boolean"},
        },
        [],
        additionalProperties=False,
    ),
    "UserList": _obj({"users": {"type": "array", "items": _ref("User")}}),
    "UserCreate": _obj(
        {
            "name": {"type": "string", "pattern": f"^{USER_NAME_PATTERN}$"},
            "password": {"type": "string", "minLength": 12},
            "role": {"type": "string", "enum": ["admin", "searcher"], "default": "searcher"},
            "logspaces": {**STRS, "default": ["*"]},
        },
        ["name", "password"],
        additionalProperties=False,
    ),
    "UserUpdate": _obj(
        {
            "password": {"type": "string", "minLength": 12},
            "role": {"type": "string", "enum": ["admin", "searcher"]},
            "logspaces": STRS,
            "disabled": {"type": "boolean"},
        },
        [],
        additionalProperties=False,
    ),
    "Integrity": _obj(
        {
            "logspace": STR,
            "verified_at": {**TIME, "nullable": True},
            "integrity_only": {"type": "boolean"},
            "checked_with_key": {"type": "boolean"},
            "ok": {"type": "boolean"},
            "messages": NINT,
            "sealing": {"type": "object", "nullable": True},
            "days_signed": NINT,
            "days_timestamped": NINT,
            "problems": {
                "type": "array",
                "items": _obj({"path": STR, "what": STR, "day": NSTR}, ["path", "what"]),
            },
            "days": {
                "type": "array",
                "items": _obj(
                    {
                        "day": STR,
                        "messages": INT,
                        "intact": {"type": "boolean"},
                        "chained": {"type": "boolean"},
                        "sealed_epoch": NINT,
                        "sealed_through": {**TIME, "nullable": True},
                        "signed": {"type": "string", "enum": ["yes", "no", "bad"]},
                        "timestamped": {"type": "string", "enum": ["yes", "no", "bad"]},
                        "problems": INT,
                    }
                ),
            },
        }
    ),
    "AuditPage": _obj(
        {"entries": {"type": "array", "items": _ref("AuditEntry")}, "next_cursor": NSTR}
    ),
}


def openapi_path(rule: str) -> str:
    """A Flask rule as an OpenAPI path: <x> and <conv:x> become {x}."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


def operation(endpoint: str, spec: Spec, method: str = "GET") -> dict[str, Any]:
    """The OpenAPI operation object of one view (method: a foreign Origin is a 403 on the
    methods that change something)."""
    ok: dict[str, Any] = {"description": "success"}
    if spec.answer:
        ok["content"] = {"application/json": {"schema": _ref(spec.answer)}}
    if spec.media:
        ok["content"] = {
            m: {"schema": {"type": "string", "description": d}} for m, d in spec.media.items()
        }
    if spec.headers:
        ok["headers"] = {
            h: {"description": d, "schema": {"type": "integer"}} for h, d in spec.headers.items()
        }
    responses: dict[str, Any] = {str(spec.ok): ok}
    errors = {*spec.errors, 500}  # a bug can fail any route
    if spec.auth or method.upper() in UNSAFE_METHODS:
        errors.add(403)  # password_change_required; a foreign Origin
    for status in sorted(errors):
        r: dict[str, Any] = {
            "description": ERROR_TEXT[status],
            "content": {"application/json": {"schema": _ref("Error")}},
        }
        if status == 401:
            r["headers"] = {"WWW-Authenticate": {"schema": STR}}
        if status == 429:
            r["headers"] = {"Retry-After": {"schema": INT}}
        responses[str(status)] = r
    op: dict[str, Any] = {
        "operationId": endpoint.replace(".", "_"),
        "summary": spec.summary,
        "tags": [endpoint.split(".")[0]],
        "parameters": [p.openapi() for p in spec.params],
        "responses": responses,
    }
    if spec.body:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(spec.body)}},
        }
    op["security"] = [{"bearer": []}] if spec.auth else []
    return op


def document(app: Flask) -> dict[str, Any]:
    """The OpenAPI 3.0.3 document of app's /api/v1 routes."""
    paths: dict[str, dict[str, Any]] = {}
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if not rule.rule.startswith(PREFIX + "/"):
            continue
        spec = spec_of(app.view_functions[rule.endpoint])
        if spec is None:
            raise RuntimeError(f"{rule.endpoint} declares no Spec")
        item = paths.setdefault(openapi_path(rule.rule[len(PREFIX) :]), {})
        for method in sorted(rule.methods or ()):
            if method in ("HEAD", "OPTIONS"):
                continue
            item[method.lower()] = operation(rule.endpoint, spec, method)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "logbox API",
            "version": "1",
            "description": "The HTTPS JSON API of logbox (rpc/API.md). Every failure is an "
            "Error object with the HTTP status.",
        },
        "servers": [{"url": PREFIX}],
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a token lbx_<id>_<secret> from POST /login or POST /tokens",
                }
            },
        },
        "security": [{"bearer": []}],
    }


@bp.route("/openapi.json", methods=["GET"])
@declare(Spec("This document (OpenAPI 3.0.3)", answer="OpenAPI", errors=(400, 401)))
def openapi_json(args: dict[str, Any]) -> Any:
    """GET /openapi.json."""
    doc = current_app.extensions.get("logbox_openapi")
    if doc is None:
        doc = current_app.extensions["logbox_openapi"] = document(current_app)
    return jsonify(doc)
