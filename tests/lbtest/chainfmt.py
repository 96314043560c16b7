"""The store's hash chain and seal formats (indexer/FORMAT.md §14) read and written in Python
from the document alone: a second reader of the format, for the tests."""

from __future__ import annotations

import hashlib
import hmac
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

HDR, TRAILER = 32, 68  # LB_CHR_HDR_SIZE, LB_CHR_TRAILER_SIZE
SEAL_SLOT = 96  # LB_SEAL_SLOT_SIZE
KINDS = {1: "genesis", 2: "block", 3: "segment", 4: "tomb", 5: "seal", 6: "day root"}


@dataclass
class Rec:
    """One chain record as FORMAT.md §14.1 lays it out."""

    off: int
    raw: bytes
    kind: int
    seq: int
    body: bytes
    prev: bytes
    hash: bytes


def read_chain(path: Path) -> list[Rec]:
    """Every record of a chain file; fails on anything the format does not allow."""
    b = path.read_bytes()
    out: list[Rec] = []
    off = 0
    while off < len(b):
        magic, ln = struct.unpack_from("<II", b, off)
        assert magic == 0x5243424C and HDR + TRAILER <= ln <= len(b) - off, (path, off)
        raw = b[off : off + ln]
        assert hashlib.sha256(raw[: ln - 36]).digest() == raw[ln - 36 : ln - 4], (path, off)
        assert struct.unpack_from("<I", raw, ln - 4)[0] == ln
        seq = struct.unpack_from("<Q", raw, 16)[0]
        prev = raw[ln - 68 : ln - 36]
        assert seq == len(out), (path, off, seq)
        if out:
            assert prev == out[-1].hash, (path, off)
        out.append(Rec(off, raw, raw[8], seq, raw[HDR : ln - TRAILER], prev, raw[ln - 36 : ln - 4]))
        off += ln
    return out


def encode(kind: int, flags: int, seq: int, time_us: int, body: bytes, prev: bytes) -> bytes:
    """A record (FORMAT.md §14.1) with its hash and trailer."""
    ln = HDR + len(body) + TRAILER
    head = struct.pack("<IIBB6xQq", 0x5243424C, ln, kind, flags, seq, time_us) + body + prev
    return head + hashlib.sha256(head).digest() + struct.pack("<I", ln)


def key_now(data: Path) -> tuple[int, bytes]:
    """The key in the key file now (what whoever holds the box has) and its epoch."""
    b = (data / "indexd" / "seal").read_bytes()
    best = (0, b"")
    for s in (0, 1):
        slot = b[s * SEAL_SLOT : (s + 1) * SEAL_SLOT]
        if slot[:4] == b"LBSK" and zlib.crc32(slot[:92]) == struct.unpack_from("<I", slot, 92)[0]:
            epoch = struct.unpack_from("<Q", slot, 8)[0]
            if epoch > best[0]:
                best = (epoch, slot[32:64])
    return best


def seal_mac(key: bytes, ls: str, day: int, epoch: int, started: int, prev: bytes) -> bytes:
    """FORMAT.md §14.5."""
    msg = b"LBSEAL01" + ls.encode().ljust(64, b"\0") + struct.pack("<IQq", day, epoch, started)
    return hmac.new(key, msg + prev, hashlib.sha256).digest()


def rebuild(path: Path, recs: list[Rec], key: bytes, ls: str, day: int) -> list[bytes]:
    """Writes recs again as one chain, every link and seal made anew with key (the first
    record linking recs[0].prev); the new hashes."""
    out = b""
    prev = recs[0].prev
    hashes = []
    for i, r in enumerate(recs):
        body = r.body
        if r.kind == 5:
            epoch, started = struct.unpack_from("<Qq", body, 0)
            body = body[:16] + seal_mac(key, ls, day, epoch, started, prev)
        time_us = struct.unpack_from("<q", r.raw, 24)[0]
        raw = encode(r.kind, r.raw[9], i, time_us, body, prev)
        prev = raw[-36:-4]
        hashes.append(prev)
        out += raw
    path.write_bytes(out)
    return hashes
