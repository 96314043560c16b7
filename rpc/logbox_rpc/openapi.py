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
from logbox_core.alerts import (
    ACTION_TYPES,
    ACTIONS_MAX,
    ALERT_NAME_MAX,
    CONDITION_KINDS,
    COOLDOWN_MAX_S,
    EMAIL_TO_MAX,
    GROUP_FIELDS,
    N_MAX,
    WINDOW_MAX_S,
)
from logbox_core.alerts import STATES as ALERT_STATES
from logbox_core.constants import LOGSPACE_PATTERN, USER_NAME_PATTERN
from logbox_core.origin import UNSAFE_METHODS
from logbox_core.reports import PERIODS, RECIPIENTS_MAX, REPORT_NAME_MAX, REPORT_SEARCHES_MAX

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
    503: "{code}; archive_unavailable (a search over archived days whose object store did "
    "not answer)",
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

_REPORT_MEMBERS = {
    "name": {"type": "string", "minLength": 1, "maxLength": REPORT_NAME_MAX},
    "logspace": {"type": "string", "pattern": f"^{LOGSPACE_PATTERN}$"},
    "searches": {**STRS, "maxItems": REPORT_SEARCHES_MAX},
    "period": {"type": "string", "enum": list(PERIODS)},
    "recipients": {**STRS, "maxItems": RECIPIENTS_MAX},
    "enabled": {"type": "boolean", "default": True},
}
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
    "archive": {
        "type": "object",
        "description": "when the query read archived days in place (indexer/ARCHIVE.md §7): "
        "which, the ms reading them took, the bytes fetched from the object store and read "
        "from the local cache, and the GET requests",
        "properties": {
            "days": {"type": "array", "items": {"type": "string", "format": "date"}},
            "ms": NUM,
            "fetched_bytes": INT,
            "cached_bytes": INT,
            "requests": INT,
        },
    },
    "members": {
        "type": "array",
        "description": "a remote or multiple logspace (§4.1): each member, whether it answered "
        "and how long it took",
        "items": {
            "type": "object",
            "properties": {
                "logspace": STR,
                "site": NSTR,
                "ok": {"type": "boolean"},
                "took_ms": {**NUM, "nullable": True},
                "archive": {"type": "object", "description": "as the member's own `archive`"},
            },
        },
    },
}

_HOST = {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,253}$"}
_PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
_TIMEOUT = {"type": "number", "minimum": 1, "maximum": 60, "default": 10}
_CA = {
    "type": "string",
    "nullable": True,
    "description": "PEM CA certificates; null: the system CAs",
}
_SECRET = {"type": "string", "nullable": True, "minLength": 1, "maxLength": 256,
           "description": "written only; omitted: kept as it is"}  # fmt: skip
_SET = {"type": "boolean", "description": "whether the secret is set (it is never answered)"}
_DELIVERY_SECTIONS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # section -> (its members but secrets, its secrets)
    "smtp": (
        {"host": _HOST, "port": {**_PORT, "default": 587},
         "security": {"type": "string", "enum": ["starttls", "tls"], "default": "starttls"},
         "sender": {"type": "string", "format": "email"},
         "username": {"type": "string", "nullable": True, "minLength": 1, "maxLength": 256},
         "ca": _CA, "timeout": _TIMEOUT},
        {"password": _SECRET},
    ),
    "syslog": (
        {"host": _HOST, "port": {**_PORT, "description": "default 514, 6514 for tls"},
         "transport": {"type": "string", "enum": ["udp", "tcp", "tls"], "default": "udp"},
         "facility": {"type": "string", "default": "user"}, "ca": _CA, "timeout": _TIMEOUT},
        {},
    ),
    "webhook": ({"timeout": _TIMEOUT}, {"secret": _SECRET}),
    "snmp": (
        {"host": _HOST, "port": {**_PORT, "default": 162},
         "version": {"type": "string", "enum": ["2c", "3"], "default": "2c"},
         "user": {"type": "string", "nullable": True, "minLength": 1, "maxLength": 256},
         "auth_protocol": {"type": "string", "enum": ["SHA", "SHA-256", "SHA-512"]},
         "priv_protocol": {"type": "string", "enum": ["AES", "AES-256"]},
         "engine_id": {"type": "string", "nullable": True, "pattern": "^(0x)?[0-9A-Fa-f]{10,64}$"},
         "timeout": _TIMEOUT},
        {"community": _SECRET, "auth_password": {**_SECRET, "minLength": 8},
         "priv_password": {**_SECRET, "minLength": 8}},
    ),
}  # fmt: skip
DELIVERY_SCHEMAS: dict[str, Any] = {
    "Delivery": {
        "type": "object",
        "properties": {
            k: {
                **_obj({**m, **{f"{s}_set": _SET for s in sec}}),
                "nullable": True,
            }
            for k, (m, sec) in _DELIVERY_SECTIONS.items()
        },
    },
    "DeliveryUpdate": _obj(
        {
            k: {
                **_obj({**m, **sec}, ["host"] if "host" in m else [], additionalProperties=False),
                "nullable": True,
            }
            for k, (m, sec) in _DELIVERY_SECTIONS.items()
        },
        [],
        additionalProperties=False,
    ),
    "DeliveryTest": _obj(
        {
            "channel": {"type": "string", "enum": ["email", "syslog", "webhook", "snmp"]},
            "to": {
                "type": "array",
                "items": {"type": "string", "format": "email"},
                "minItems": 1,
                "description": "email: the recipients",
            },
            "url": {"type": "string", "pattern": "^https://", "description": "webhook"},
            "ca": {**_CA, "description": "webhook: PEM CA certificates; null: the system CAs"},
        },
        ["channel"],
        additionalProperties=False,
    ),  # fmt: skip
    "DeliveryTestResult": _obj(
        {
            "channel": STR,
            "delivered": {"type": "boolean"},
            "error": {**NSTR, "description": "what failed (never a secret)"},
            "seconds": NUM,
        }
    ),
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
                        "site": {**STR, "description": "a site's logspace (site:logspace)"},
                        "members": {**STRS, "description": "a multiple logspace's members"},
                    },
                    ["name"],
                ),
            },
            "warnings": {**STRS, "description": "each site that did not answer"},
        },
        ["logspaces"],
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
            "alerts": {
                "type": "array",
                "description": "the caller's alerts (an admin's: all) and their states",
                "items": {
                    "allOf": [
                        _obj(
                            {
                                "id": STR,
                                "name": STR,
                                "owner": STR,
                                "logspace": NSTR,
                                "enabled": {"type": "boolean"},
                            }
                        ),
                        _ref("AlertState"),
                    ]
                },
            },
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
    "ArchiveTargetUpdate": _obj(
        {
            "endpoint": {
                "type": "string",
                "pattern": "^https://",
                "description": "https://host[:port]",
            },
            "bucket": STR,
            "prefix": {"type": "string", "description": "object names start with it and /"},
            "region": STR,
            "access_key": STR,
            "secret_key": {"type": "string", "description": "kept when omitted; never answered"},
            "ca_file": {
                "type": "string",
                "nullable": True,
                "description": "PEM CA (null: the system's)",
            },
            "archive_days": {"type": "integer", "minimum": 0, "description": "0: forever"},
            "part_mb": {"type": "integer", "minimum": 5, "maximum": 1024},
        },
        ["endpoint", "bucket", "access_key"],
        additionalProperties=False,
    ),
    "ArchiveTarget": _obj(
        {
            "endpoint": STR,
            "bucket": STR,
            "prefix": STR,
            "region": STR,
            "access_key": STR,
            "secret_key_set": _SET,
            "ca_file": {"type": "string", "nullable": True},
            "archive_days": INT,
            "part_mb": INT,
            "status": {
                "type": "object",
                "nullable": True,
                "description": "logbox-archive's last pass for the logspace (ARCHIVE.md Status)",
            },
        }
    ),
    "Archive": _obj({"targets": {"type": "object", "additionalProperties": _ref("ArchiveTarget")}}),
    "SiteUpdate": _obj(
        {
            "url": {"type": "string", "pattern": "^https://", "description": "https://host[:port]"},
            "token": {
                "type": "string",
                "description": "an API token of a user on that box; "
                "kept when omitted; never answered",
            },
            "ca": {
                "type": "string",
                "nullable": True,
                "description": "PEM CA its certificate must chain to (null: the system's)",
            },
            "deadline_ms": {"type": "integer", "minimum": 100, "maximum": 120000, "default": 10000},
        },
        ["url"],
        additionalProperties=False,
    ),
    "Site": _obj({"url": STR, "token_set": _SET, "ca": NSTR, "deadline_ms": INT}),
    "Sites": _obj(
        {
            "sites": {"type": "object", "additionalProperties": _ref("Site")},
            "multiple": {"type": "object", "additionalProperties": STRS},
        }
    ),
    "MultipleUpdate": _obj({"members": STRS}, ["members"], additionalProperties=False),
    "Multiple": _obj({"name": STR, "members": STRS}),
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
    "Report": _obj(
        {
            "id": STR,
            "owner": STR,
            "name": STR,
            "logspace": STR,
            "searches": {
                **STRS,
                "description": "saved search ids, one section each; none: every message",
            },
            "period": {"type": "string", "enum": list(PERIODS)},
            "recipients": STRS,
            "enabled": {"type": "boolean"},
            "created": TIME,
            "updated": TIME,
            "last_sent": {**NSTR, "description": "the id of the last period the schedule sent"},
            "last_run": NTIME,
            "last_error": NSTR,
        }
    ),
    "ReportList": _obj({"reports": {"type": "array", "items": _ref("Report")}}),
    "ReportCreate": _obj(
        _REPORT_MEMBERS, ["name", "logspace", "period"], additionalProperties=False
    ),
    "ReportUpdate": _obj(_REPORT_MEMBERS, [], additionalProperties=False),
    "ReportSent": _obj({"report": STR, "period": STR, "to": STRS}),
    "ReportData": _obj(
        {
            "report": _ref("Report"),
            "period": _obj({"id": STR, "kind": STR, "from": TIME, "to": TIME}),
            "sections": {
                "type": "array",
                "items": _obj(
                    {
                        "title": STR,
                        "query": {**NSTR, "description": "null: its saved search is gone"},
                        "total": INT,
                        "severities": {"type": "object", "additionalProperties": INT},
                        "hosts": {"type": "array", "items": _obj({"value": STR, "count": INT})},
                        "programs": {"type": "array", "items": _obj({"value": STR, "count": INT})},
                        "step_us": INT,
                        "histogram": {"type": "array", "items": _obj({"from": INT, "count": INT})},
                        "warnings": STRS,
                    }
                ),
            },
            "alerts": {
                "type": "object",
                "nullable": True,
                "additionalProperties": INT,
                "description": "alert name -> times fired in the period; null: no alerts defined",
            },
        }
    ),
    "AlertCondition": _obj(
        {
            "kind": {"type": "string", "enum": list(CONDITION_KINDS)},
            "n": {"type": "integer", "minimum": 0, "maximum": N_MAX},
            "window_s": {"type": "integer", "minimum": 1, "maximum": WINDOW_MAX_S},
            "group_by": {"type": "string", "nullable": True, "enum": [*GROUP_FIELDS, None]},
        },
        ["kind"],
        additionalProperties=False,
        description="any: every new match; above/below: the matches of the last window_s "
        "seconds above or below n (per host or program with group_by)",
    ),
    "AlertAction": _obj(
        {
            "type": {"type": "string", "enum": list(ACTION_TYPES)},
            "to": {**STRS, "maxItems": EMAIL_TO_MAX, "description": "email: the addresses"},
            "url": {**STR, "description": "webhook: an https:// URL"},
            "ca": {**NSTR, "description": "webhook: PEM CA certificates to trust, or null"},
        },
        ["type"],
        additionalProperties=False,
    ),
    "AlertState": _obj(
        {
            "state": {
                "type": "string",
                "enum": [*ALERT_STATES, "pending", "unknown"],
            },
            "reason": NSTR,
            "last_fired": {**TIME, "nullable": True},
        }
    ),
    "Alert": _obj(
        {
            "id": STR,
            "owner": STR,
            "name": STR,
            "search": {**STR, "description": "the saved search's id"},
            "logspace": NSTR,
            "query": NSTR,
            "condition": _ref("AlertCondition"),
            "condition_text": STR,
            "actions": {"type": "array", "items": _ref("AlertAction")},
            "cooldown_s": INT,
            "enabled": {"type": "boolean"},
            "created": TIME,
            "updated": TIME,
            "status": _ref("AlertState"),
        }
    ),
    "AlertList": _obj({"alerts": {"type": "array", "items": _ref("Alert")}}),
    "AlertCreate": _obj(
        {
            "name": {"type": "string", "minLength": 1, "maxLength": ALERT_NAME_MAX},
            "search": {"type": "string", "pattern": "^[0-9a-f]{12}$"},
            "condition": _ref("AlertCondition"),
            "actions": {
                "type": "array",
                "items": _ref("AlertAction"),
                "maxItems": ACTIONS_MAX,
            },
            "cooldown_s": {
                "type": "integer",
                "minimum": 0,
                "maximum": COOLDOWN_MAX_S,
                "default": 300,
            },
            "enabled": {"type": "boolean", "default": True},
        },
        ["name", "search", "condition", "actions"],
        additionalProperties=False,
    ),
    "AlertUpdate": _obj(
        {
            "name": {"type": "string", "minLength": 1, "maxLength": ALERT_NAME_MAX},
            "search": {"type": "string", "pattern": "^[0-9a-f]{12}$"},
            "condition": _ref("AlertCondition"),
            "actions": {
                "type": "array",
                "items": _ref("AlertAction"),
                "maxItems": ACTIONS_MAX,
            },
            "cooldown_s": {"type": "integer", "minimum": 0, "maximum": COOLDOWN_MAX_S},
            "enabled": {"type": "boolean"},
        },
        [],
        additionalProperties=False,
    ),
    "AlertTest": _obj({"alert": STR, "request": STR}),
    "AlertHistoryEntry": _obj(
        {
            "id": STR,
            "time": TIME,
            "kind": {"type": "string", "enum": ["firing", "test"]},
            "request": {**STR, "description": "test: the request's id"},
            "by": {**STR, "description": "test: who asked"},
            "count": INT,
            "group": {"type": "object", "nullable": True},
            "condition": STR,
            "event_time": TIME,
            "samples": {"type": "array", "items": INT},
            "results": {"type": "array", "items": {"type": "object"}},
            "ok": {"type": "boolean"},
            "error": NSTR,
        }
    ),
    "AlertHistory": _obj(
        {
            "alert": STR,
            "entries": {"type": "array", "items": _ref("AlertHistoryEntry")},
            "next_before": NSTR,
        }
    ),
    # alert delivery (logbox_core.deliver): secrets are written, never answered (<name>_set)
    **DELIVERY_SCHEMAS,
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
