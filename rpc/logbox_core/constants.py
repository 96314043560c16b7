"""The rules and constants that C owns and Python needs, stated once for every Python part.

liblogbox and the daemons own them (the name of each owner is beside it); the web UI, the RPC
API, accounts and the collector's renderer import them from here, and
tests/test_constants_pinned.py parses the C headers and sources and fails when one of these
stops agreeing with its owner. Plain Python 3.11, stdlib only: collector/render.py runs it
outside the web apps.
"""

from __future__ import annotations

import re

# ---------------------------------------------------------------- logspace names
# lb_logspace_name_ok() (indexer/lib/lb_name.c): [a-z0-9_-]{1,LB_NAME_MAX}, and not one of the
# data directory's own folders (LB_RESERVED_NAMES, indexer/lib/lb_format.h), since a logspace
# lives in <data>/<name>/.
LOGSPACE_NAME_MAX = 64  # LB_NAME_MAX (logbox.h)
LOGSPACE_PATTERN = "[a-z0-9_-]{1,64}"  # the form alone (OpenAPI's pattern, a path's shape)
LOGSPACE_RE = re.compile(LOGSPACE_PATTERN)
# The same for an HTML form's pattern attribute, which browsers compile with the "v" flag: there a
# "-" that ends a class must be escaped.
LOGSPACE_HTML_PATTERN = LOGSPACE_PATTERN.replace("_-]", "_\\-]")

# ---------------------------------------------------------------- user names
# The accounts store's rule (logbox_core.accounts); "." is allowed in user names, not in logspaces.
USER_NAME_PATTERN = "[a-z0-9_.-]{1,64}"
USER_NAME_HTML_PATTERN = USER_NAME_PATTERN.replace(".-]", ".\\-]")
RESERVED_LOGSPACES = ("indexd", "catalog", "collector", "accounts", "run", "tls", "spool")


def logspace_name_problem(name: object) -> str | None:
    """Why name may not name a logspace, in indexd's words (lb_logspace_name_ok()); None
    when it may."""
    if not isinstance(name, str):
        return "logspace name not a string"
    if not 1 <= len(name.encode("utf-8", "surrogateescape")) <= LOGSPACE_NAME_MAX:
        return f"logspace name length not 1..{LOGSPACE_NAME_MAX}"
    if not LOGSPACE_RE.fullmatch(name):
        return "logspace name not [a-z0-9_-]"
    if name in RESERVED_LOGSPACES:
        return "reserved logspace name"
    return None


def logspace_name_ok(name: object) -> bool:
    """True when name may name a logspace (lb_logspace_name_ok())."""
    return logspace_name_problem(name) is None


# ---------------------------------------------------------------- logspace settings
DEFAULT_DELIMITERS = "&:~?![]=,;()'\"/\\|<>{}*"  # LB_DEFAULT_DELIMS (logbox.h), beside whitespace
DELIMITERS_MAX = 63  # bytes: struct lb_lsconf's delims[64] (logbox.h) holds them with a NUL
RETENTION_MAX = 36500  # days (0 keeps messages forever): indexd's RETENTION_MAX (settings.c)

# ---------------------------------------------------------------- message fields
# The facility names, code n at index n: liblogbox's facilities[] (indexer/lib/lb_query.c),
# which the query language (facility:auth) and indexd's routes (facility = [...]) take.
FACILITIES = tuple(
    "kern user mail daemon auth syslog lpr news uucp cron authpriv ftp ntp security console "
    "solaris-cron local0 local1 local2 local3 local4 local5 local6 local7".split()
)

# The severity names, code n at index n: liblogbox's severities[] (lb_query.c).
SEVERITIES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")

# ---------------------------------------------------------------- searchd's request limits
# indexer/PROTOCOL.md; searchd answers 400 bad_parameter beyond them.
QUERY_MAX = 16384  # bytes of q: LB_QUERY_MAX (logbox.h)
URI_MAX = 64 * 1024  # bytes of a request target (q %-encoded): searchd's SD_URI_MAX
PARAM_MAX = 256  # bytes of every other decoded parameter: searchd's PARAM_MAX
LIMIT_MAX = 10000  # hits per /v1/search page: searchd's LIMIT_MAX
BUCKETS_MAX = 10000  # /v1/histogram buckets: LB_HIST_MAX (logbox.h)
TOP_MAX = 1000  # /v1/top values: LB_TOP_MAX (logbox.h)
