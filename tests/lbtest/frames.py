"""Hand-off frames (indexer/FORMAT.md §11.1) encoded in Python, for tests and benchmarks that feed
logbox-indexd: the same bytes the collector's template and lb_frame_encode() produce.

    frame(b"hello", ls="main", host=b"web1", rtime=1795359974.984039)

Every field is bytes (str is UTF-8 encoded) and goes into the payload exactly as given: LF, NUL
and bytes that are not UTF-8 are fine. Nothing is checked beyond what is needed to build the
header; pass invalid values on purpose to make malformed frames."""

from __future__ import annotations

import time
from collections.abc import Iterable

MAGIC = b"LB1 "
HDR_MAX = 256  # header line bytes, LF included (LB_FRAME_HDR_MAX)
FRAME_MAX = 512 * 1024  # what indexd decodes in one piece (LB_FRAME_MAX)
MSG_MAX = 256 * 1024  # message bytes the store keeps (LB_MSG_MAX)
FIELD_MAX = 255  # host, program, pid, msgid bytes the store keeps (LB_FIELD_MAX)
SD_MAX = 16 * 1024  # structured-data bytes the store keeps (LB_SD_MAX)

Bytes = bytes | str


def _b(v: Bytes) -> bytes:
    return v.encode("utf-8") if isinstance(v, str) else bytes(v)


def fmt_time(t: float | int | str | None) -> bytes:
    """A time field: seconds as "S.ffffff" (floats), "S" (ints), a str as given, None as "-"."""
    if t is None:
        return b"-"
    if isinstance(t, str):
        return t.encode()
    if isinstance(t, int):
        return str(t).encode()
    neg = t < 0
    us = round(abs(t) * 1_000_000)
    s = f"{'-' if neg else ''}{us // 1_000_000}.{us % 1_000_000:06d}"
    return s.encode()


def frame(
    msg: Bytes,
    ls: Bytes = "main",
    host: Bytes = b"",
    program: Bytes = b"",
    pid: Bytes = b"",
    msgid: Bytes = b"",
    sd: Bytes = b"",
    rtime: float | int | str | None = None,
    stime: float | int | str | None = None,
    tzoff: str | None = None,
    pri: int | str | None = None,
    fmt: str = "-",
) -> bytes:
    """One frame: the header line, the seven payload fields back to back, a LF.

    rtime defaults to now; stime, tzoff and pri to "-" (absent)."""
    fields = [_b(ls), _b(host), _b(program), _b(pid), _b(msgid), _b(sd), _b(msg)]
    hdr = b" ".join(
        [
            b"LB1",
            fmt_time(time.time() if rtime is None else rtime),
            fmt_time(stime),
            b"-" if tzoff is None else tzoff.encode(),
            b"-" if pri is None else str(pri).encode(),
            fmt.encode(),
        ]
        + [str(len(f)).encode() for f in fields]
    )
    return hdr + b"\n" + b"".join(fields) + b"\n"


def frames(msgs: Iterable[Bytes], ls: Bytes = "main", **kw: object) -> bytes:
    """Frames for several messages of one logspace, back to back."""
    return b"".join(frame(m, ls=ls, **kw) for m in msgs)  # type: ignore[arg-type]
