# Scenario: the store's limits that the Python suites restate (lbtest/frames.py: what indexd
# decodes in one piece, what the store keeps of a message and of each header field) are the
# values liblogbox defines, read from indexer/lib/lb_format.h and logbox.h. A limit changed in
# C without its Python copy fails here instead of making the ingest tests check the wrong cut.
from __future__ import annotations

from pathlib import Path

from lbtest import csource, frames

PINS = {
    "LB_FRAME_HDR_MAX": frames.HDR_MAX,
    "LB_FRAME_MAX": frames.FRAME_MAX,
    "LB_MSG_MAX": frames.MSG_MAX,
    "LB_FIELD_MAX": frames.FIELD_MAX,
    "LB_SD_MAX": frames.SD_MAX,
}


def test_python_copies_match_the_headers(top: Path) -> None:
    lib = top / "indexer" / "lib"
    defs = csource.numbers(lib / "lb_format.h", lib / "logbox.h")
    for name, value in PINS.items():
        assert name in defs, f"{name} is not defined in indexer/lib/lb_format.h or logbox.h"
        assert defs[name] == value, f"{name} is {defs[name]} in C, {value} in lbtest/frames.py"
