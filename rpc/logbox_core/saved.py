"""Saved searches' one check against searchd, for the API and the web UI (rpc/API.md §6.1):
the query must parse and the time range must be one searchd takes. The members themselves are
checked by logbox_core.accounts.check_saved_search; the store is the accounts store."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .searchd import Searchd

# A token no message holds: a time range is checked by counting it (the range parsed by
# searchd, the count a dictionary miss, whatever the range).
PROBE = "logboxsavedsearchtimeprobe"


def check_with_searchd(sd: Searchd, logspace: str, members: Mapping[str, Any]) -> None:
    """searchd parses the query (over an empty range: from 0 to 1 s since the epoch) and the
    time range (a probe token counted over it): nothing is read from the store.

    :raises SearchdError: bad_query (with the position), bad_parameter, or searchd's others.
    """
    if members.get("query") is not None:
        sd.get("/v1/count", {"logspace": logspace, "q": members["query"], "from": "0", "to": "1"})
    times = {k: members[k] for k in ("from", "to", "time") if members.get(k) is not None}
    if times:
        sd.get("/v1/count", {"logspace": logspace, "q": PROBE, **times})
