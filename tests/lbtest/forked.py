"""Running a check in a forked child of the test process: what the suites use to show that a
client or a store opens its own connection or environment after fork() and leaves the
parent's alone."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any


def in_forked_child(report: Callable[[], Any]) -> Any:
    """What report() returned in a forked child, passed back as JSON (None when the child
    wrote nothing: it raised). The child never returns into pytest."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, json.dumps(report()).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = json.loads(f.read() or b"null")
    os.waitpid(pid, 0)
    return got
