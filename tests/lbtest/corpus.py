"""Corpora for the store suites, each message with the fields logbox must give back for it.

- random_corpus(): seeded RFC 5424 messages with every edge case the store must keep exactly
  (empty, multi-line, NUL, bytes >= 0x80, invalid UTF-8, tokens over 255 bytes, a message over
  MSG_MAX, structured data). Newline framing cannot carry all of them: send them with
  octet_frames() and `logbox ingest --framing octet`.
- loghub_corpus(): the loghub 2k samples as RFC 5424 lines through the shared converter
  (loghub_to_syslog.py --msg full), so each message part is the original line.
- big_corpus(): millions of loghub-like lines for benchmarks, streamed to a file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import os
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

MSG_MAX = 262144  # LB_MSG_MAX: message bytes kept, longer messages are cut and flagged
# The shared folder sits beside the repository (on developer machines and in CI).
SHARED = Path(__file__).resolve().parents[3] / "shared"
LOGHUB_DIR = Path(os.environ.get("LOGBOX_LOGHUB", SHARED / "data" / "loghub"))
LOGHUB_TOOL = Path(os.environ.get("LOGBOX_LOGHUB_TOOL", SHARED / "tools" / "loghub_to_syslog.py"))


@dataclass(frozen=True)
class Expected:
    """One message as sent (raw, without framing) and what `logbox cat` must report for it.

    Header strings are None for the RFC 5424 NILVALUE "-". message and sd are bytes; sd is b""
    for "-". flags are the cat flags ("rfc5424", "truncated", ...).
    """

    raw: bytes
    facility: int
    severity: int
    timestamp_us: int | None
    host: str | None
    program: str | None
    pid: str | None
    msgid: str | None
    sd: bytes
    message: bytes
    flags: frozenset[str] = field(default_factory=frozenset)


# ---------------------------------------------------------------- RFC 5424 parsing

_TS = re.compile(rb"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?(Z|[+-]\d\d:\d\d)\Z")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def parse_timestamp(ts: bytes) -> int | None:
    """RFC 5424 TIMESTAMP -> microseconds since the epoch; None for "-".

    :raises ValueError: if ts is not a valid RFC 5424 time stamp.
    """
    if ts == b"-":
        return None
    m = _TS.match(ts)
    if not m:
        raise ValueError(f"bad RFC 5424 time stamp {ts!r}")
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    frac = (m.group(7) or b"").decode()
    zone = m.group(8).decode()
    offset = dt.timedelta(0)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        offset = sign * dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    when = dt.datetime(y, mo, d, h, mi, s, tzinfo=dt.timezone(offset))
    us = (when - _EPOCH) // dt.timedelta(microseconds=1)
    return us + (int(frac.ljust(6, "0")) if frac else 0)


def _split_sd(rest: bytes) -> tuple[bytes, bytes]:
    """Splits STRUCTURED-DATA [SP MSG] into (sd, after-sd). sd is b"-" or the elements."""
    if rest.startswith(b"-"):
        return b"-", rest[1:]
    i = 0
    while i < len(rest) and rest[i : i + 1] == b"[":
        inq = False
        i += 1
        while True:
            if i >= len(rest):
                raise ValueError(f"unterminated SD element in {rest[:80]!r}")
            c = rest[i : i + 1]
            if inq and c == b"\\":
                i += 2
                continue
            if c == b'"':
                inq = not inq
            elif c == b"]" and not inq:
                i += 1
                break
            i += 1
    if i == 0:
        raise ValueError(f"no STRUCTURED-DATA in {rest[:80]!r}")
    return rest[:i], rest[i:]


def parse_5424(raw: bytes) -> Expected:
    """Parses one RFC 5424 message (no framing) into what the store must report for it.

    :raises ValueError: if raw is not RFC 5424.
    """
    m = re.match(rb"<(\d{1,3})>1 ", raw)
    if not m:
        raise ValueError(f"not RFC 5424: {raw[:80]!r}")
    pri = int(m.group(1))
    parts = raw[m.end() :].split(b" ", 5)
    if len(parts) < 6:
        raise ValueError(f"short RFC 5424 header: {raw[:80]!r}")
    ts, host, app, procid, msgid, rest = parts
    sd, after = _split_sd(rest)
    if after and not after.startswith(b" "):
        raise ValueError(f"no SP after STRUCTURED-DATA: {raw[:80]!r}")
    msg = after[1:]

    def nil(v: bytes) -> str | None:
        return None if v == b"-" else v.decode("ascii")

    flags = {"rfc5424"}
    if len(msg) > MSG_MAX:
        msg = msg[:MSG_MAX]
        flags.add("truncated")
    return Expected(
        raw=raw,
        facility=pri >> 3,
        severity=pri & 7,
        timestamp_us=parse_timestamp(ts),
        host=nil(host),
        program=nil(app),
        pid=nil(procid),
        msgid=nil(msgid),
        sd=b"" if sd == b"-" else sd,
        message=msg,
        flags=frozenset(flags),
    )


def sd_params(sd: bytes) -> list[tuple[str, str, bytes]]:
    """(sd-id, param-name, value as received, escapes kept) for every param in sd."""
    out = []
    for elem in re.finditer(rb'\[([^ \]]+)((?: [^ =\]"]+="(?:[^"\\]|\\.)*")*)\]', sd):
        sdid = elem.group(1).decode()
        for p in re.finditer(rb'([^ =\]"]+)="((?:[^"\\]|\\.)*)"', elem.group(2)):
            out.append((sdid, p.group(1).decode(), p.group(2)))
    return out


# ---------------------------------------------------------------- framing


def line_frames(messages: Iterable[bytes]) -> bytes:
    """Newline framing: one message per line. No message may hold a newline."""
    out = []
    for raw in messages:
        if b"\n" in raw:
            raise ValueError(f"a newline-framed message cannot hold a newline: {raw[:80]!r}")
        out.append(raw + b"\n")
    return b"".join(out)


def octet_frame(raw: bytes) -> bytes:
    """RFC 6587 octet counting: "LEN SP MSG"."""
    return b"%d %s" % (len(raw), raw)


def octet_frames(messages: Iterable[bytes]) -> bytes:
    """RFC 6587 octet-counted frames, back to back."""
    return b"".join(octet_frame(raw) for raw in messages)


def parse_octet_frames(data: bytes) -> list[bytes]:
    """Splits back-to-back octet-counted frames.

    :raises ValueError: on a malformed or short frame.
    """
    out, i = [], 0
    while i < len(data):
        sp = data.index(b" ", i)
        count = data[i:sp]
        if not count.isdigit():
            raise ValueError(f"bad octet count {count[:20]!r} at offset {i}")
        end = sp + 1 + int(count)
        if end > len(data):
            raise ValueError(f"frame at offset {i} runs past the end")
        out.append(data[sp + 1 : end])
        i = end
    return out


# ---------------------------------------------------------------- the seeded random corpus

_HOSTS = [
    "web-01",
    "db.example.com",
    "DB-02.Example.COM",
    "10.0.0.5",
    "fe80::1",
    "router_7",
    "mail.corp.example.org",
    "-",
    "h" * 200 + ".example.com",
]
_APPS = ["sshd", "CRON", "kernel", "nginx", "app_worker", "su", "postfix/smtpd", "-", "a" * 48]
_PIDS = ["1", "42", "31337", "4194304", "worker-3", "-"]
_MSGIDS = ["ID47", "TCPIN", "audit", "-", "m" * 32]
_FIXED_WORDS = [
    "Connection:Error",
    "/var/log/syslog",
    "10.0.0.1",
    "web-01",
    "user_id",
    "bob@example.com",
    "Failed",
    "password",
    "for",
    "invalid",
    "user",
    "from",
    "port",
    "ssh2",
    "session",
    "opened",
    "closed",
    "ERROR",
    "Warning",
    "disk",
    "full",
    "key=value",
    "a+b",
    "x.y.z",
    "(paren)",
    "[bracket]",
    "{brace}",
    "<angle>",
    "'quoted'",
    '"dq"',
    "pipe|split",
    "back\\slash",
    "star*glob",
    "semi;colon",
    "amp&ersand",
    "tilde~x",
    "q?mark",
    "bang!",
]
_SEPARATORS = [b" "] * 12 + [b"  ", b"\t", b", ", b": ", b"=", b"/", b" | ", b";", b"\x0b", b"\x0c"]


def _vocabulary(rng: random.Random, n: int) -> list[str]:
    syl = ["ka", "lo", "mi", "nu", "ra", "se", "ti", "vo", "ze", "qu", "ph", "an", "er", "ix"]
    words = set()
    while len(words) < n:
        w = "".join(rng.choice(syl) for _ in range(rng.randint(1, 4)))
        style = rng.random()
        if style < 0.2:
            w = w.capitalize()
        elif style < 0.25:
            w = w.upper()
        elif style < 0.35:
            w += str(rng.randint(0, 999))
        words.add(w)
    return sorted(words)


def _timestamp(rng: random.Random) -> bytes:
    if rng.random() < 0.1:
        return b"-"
    when = dt.datetime(2000, 1, 1) + dt.timedelta(seconds=rng.randint(0, 30 * 365 * 86400))
    ts = when.strftime("%Y-%m-%dT%H:%M:%S")
    nfrac = rng.choice([0, 0, 1, 3, 3, 6])
    if nfrac:
        ts += "." + "".join(rng.choice("0123456789") for _ in range(nfrac))
    if rng.random() < 0.6:
        ts += "Z"
    else:
        ts += "%s%02d:%s" % (rng.choice("+-"), rng.randint(0, 14), rng.choice(["00", "30", "45"]))
    return ts.encode()


def _sd(rng: random.Random, seq: int) -> bytes:
    if rng.random() < 0.6:
        return b"-"
    elems = [b'[meta@32473 seq="%d" app="%s"]' % (seq, rng.choice([b"web", b"db", b"mail"]))]
    if rng.random() < 0.5:
        elems.append(
            b'[origin ip="10.0.%d.%d" software="logbox"]' % (rng.randint(0, 255), seq % 256)
        )
    if rng.random() < 0.2:
        elems.append(b'[ex@32473 quote="a \\"b\\" c\\\\d \\]e" utf8="caf\xc3\xa9"]')
    rng.shuffle(elems)
    return b"".join(elems)


def _text(rng: random.Random, vocab: Sequence[str], nwords: int) -> bytes:
    parts = []
    for i in range(nwords):
        if i:
            parts.append(rng.choice(_SEPARATORS))
        r = rng.random()
        if r < 0.15:
            w = rng.choice(_FIXED_WORDS)
        elif r < 0.2:
            w = str(rng.randint(0, 10 ** rng.randint(1, 9)))
        elif r < 0.23:
            w = "%d.%d.%d.%d" % tuple(rng.randint(0, 255) for _ in range(4))
        elif r < 0.25:
            w = f"{rng.getrandbits(32):08x}"
        elif r < 0.3:  # a compound token, or a word before punctuation (FORMAT.md §6)
            w = rng.choice(vocab)
            for _ in range(rng.randint(0, 3)):
                w += rng.choice(".-_@+#%.") + (
                    rng.choice(vocab) if rng.random() < 0.7 else str(rng.randint(0, 999))
                )
            w += rng.choice(["", "", ".", "...", "-", "%"])
        else:
            w = rng.choice(vocab)
        parts.append(w.encode())
    text = b"".join(parts)
    r = rng.random()
    if r < 0.03:  # sprinkle high bytes, valid and not
        pos = rng.randint(0, len(text))
        text = (
            text[:pos]
            + rng.choice([b"\xc3\xa9t\xc3\xa9", b"\xe2\x82\xac", b"\xff", b"\x80x"])
            + text[pos:]
        )
    elif r < 0.04:
        pos = rng.randint(0, len(text))
        text = text[:pos] + b"\x00" + text[pos:]
    return text


def edge_messages() -> list[bytes]:
    """Message parts (after the header and its SP) the store must keep exactly."""
    words = b" ".join(b"word%d" % i for i in range(40000))
    return [
        b"",  # empty MSG after a SP
        b"first line\nsecond Line\r\nthird\tline",
        b"nul\x00byte token\x00\x00end \x00",
        b"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac r\xe9sum\xe9 na\xc3\xafve",
        b"\xff\xfe bad \xc3 lone \xc0\xaf overlong \xed\xa0\x80 surrogate tail\x80",
        b"high " + bytes(range(0x80, 0x100)) + b" bytes",
        b"Long" + b"X" * 296 + b" after",  # 300-byte run: cut at 255
        b"y" * 255 + b" exact255",
        b"Z" * 256 + b":cut256",
        b"w" * 1000 + b"/after1000",
        b"a" * 254 + b"\xc3\xa9" + b" cut inside a UTF-8 sequence",
        b"Connection:Error /var/log/syslog 10.0.0.1 web-01 user_id bob@example.com",
        b"upstream connection refused. non-existent-user pid-1234 2015-10-18. #tag",
        b" leading space",
        b"trailing spaces   ",
        b"::: /// ,,, ;;; *** !!! ",
        b"ansi \x1b[31mred\x1b[0m \x01\x02 controls",
        b"carriage\rreturn inside",
        b"frame-like\n12 <13>1 - - - - - - not a frame\nend",
        b"bom in the middle \xef\xbb\xbfhere",
        (words * 2)[: MSG_MAX + 37856],  # > MSG_MAX: stored cut, flagged "truncated"
        (words * 2)[:MSG_MAX],  # exactly MSG_MAX: kept whole
    ]


def random_corpus(seed: int, n: int = 3000) -> list[Expected]:
    """n seeded RFC 5424 messages: every edge_messages() case (at seeded positions), one message
    with no MSG at all, and random ones. Same seed, same bytes.
    """
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 400)
    edges: list[bytes | None] = [None, *edge_messages()]
    if n < len(edges):
        raise ValueError(f"n must be at least {len(edges)} to hold every edge case")
    slots = dict(zip(rng.sample(range(n), len(edges)), edges, strict=True))
    out = []
    for i in range(n):
        pri = b"<%d>" % (rng.randint(0, 23) * 8 + rng.randint(0, 7))
        header = b" ".join(
            [
                pri + b"1",
                _timestamp(rng),
                rng.choice(_HOSTS).encode(),
                rng.choice(_APPS).encode(),
                rng.choice(_PIDS).encode(),
                rng.choice(_MSGIDS).encode(),
                _sd(rng, i),
            ]
        )
        if i in slots:
            msg = slots[i]
            raw = header if msg is None else header + b" " + msg
        else:
            msg = _text(rng, vocab, rng.randint(1, 40))
            if msg.endswith((b"\n", b"\r")):  # a trailing newline is framing, not message
                msg += b"."
            raw = header + b" " + msg
        out.append(parse_5424(raw))
    return out


# ---------------------------------------------------------------- loghub


def loghub_tool() -> ModuleType:
    """The shared loghub_to_syslog.py, imported.

    :raises FileNotFoundError: if it is not there (set LOGBOX_LOGHUB_TOOL).
    """
    if not LOGHUB_TOOL.is_file():
        raise FileNotFoundError(f"{LOGHUB_TOOL} not found (set LOGBOX_LOGHUB_TOOL)")
    spec = importlib.util.spec_from_file_location("loghub_to_syslog", LOGHUB_TOOL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def loghub_systems(root: Path = LOGHUB_DIR) -> list[str]:
    """The systems with a <root>/<System>/<System>_2k.log sample, in the converter's order."""
    return sorted(
        (p.parent.name for p in root.glob("*/*_2k.log") if p.name == f"{p.parent.name}_2k.log"),
        key=str.lower,
    )


def loghub_lines(system: str, root: Path = LOGHUB_DIR) -> list[bytes]:
    """The original lines of a sample, split as the converter splits them."""
    text = (root / system / f"{system}_2k.log").read_bytes()
    lines = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def loghub_raw(system: str, root: Path = LOGHUB_DIR, tool: ModuleType | None = None) -> list[bytes]:
    """A sample turned into RFC 5424 messages (no framing) with MSG = the original line."""
    tool = tool or loghub_tool()
    args = argparse.Namespace(msg="full", format="5424", sd=False, facility=None)
    lines, _, _ = tool.convert(system, str(root / system / f"{system}_2k.log"), args)
    return [ln.encode("utf-8", "surrogateescape") for ln in lines]


def loghub_corpus(root: Path = LOGHUB_DIR) -> list[Expected]:
    """Every loghub sample as RFC 5424 messages, systems in the converter's order.

    :raises FileNotFoundError: if the samples or the converter are missing.
    """
    systems = loghub_systems(root)
    if not systems:
        raise FileNotFoundError(f"no loghub samples under {root} (set LOGBOX_LOGHUB)")
    tool = loghub_tool()
    return [parse_5424(raw) for s in systems for raw in loghub_raw(s, root, tool)]


# ---------------------------------------------------------------- the benchmark corpus

_DIGITS = re.compile(rb"\d+")


class _Variants:
    """Makes variants of loghub lines: host and pid get random digits of the same length, and
    each digit run of the message does with probability `vary` (digits sliced out of one
    pre-drawn pool: no per-digit work). Uniform random digits are harder to compress than real
    numbers, which repeat (times within a second, the same ports, addresses, counters): gzip -1
    gives ~30 % with every run redrawn (vary=1), ~24 % with vary=0.3, 13 % on the samples."""

    def __init__(self, rng: random.Random, vary: float) -> None:
        self.rng = rng
        self.vary = vary
        self.pool = "".join(rng.choices("0123456789", k=1 << 20)).encode()

    def digits(self, n: int) -> bytes:
        o = self.rng.randrange(len(self.pool) - n)
        return self.pool[o : o + n]

    def sub(self, text: bytes, vary: float = 1.0) -> bytes:
        rnd = self.rng.random
        return _DIGITS.sub(
            lambda m: self.digits(len(m.group())) if rnd() < vary else m.group(), text
        )

    def make(self, parts: list[bytes]) -> bytes:
        pri_ver, ts, host, app, pid, msgid, sd, msg = parts
        if _DIGITS.search(host):
            host = self.sub(host)
        else:
            host += b"-" + self.digits(2)
        if pid != b"-":
            pid = self.sub(pid)
        msg = self.sub(msg, self.vary)
        return b" ".join([pri_ver, ts, host, app, pid, msgid, sd, msg]) + b"\n"


def big_corpus(
    n: int,
    path: Path,
    seed: int = 1,
    root: Path = LOGHUB_DIR,
    variants: int = 3,
    chunk: int = 100_000,
    refresh: float = 0.04,
    vary: float = 0.3,
) -> int:
    """Writes n newline-framed RFC 5424 messages built from the loghub samples to path.

    Each line is a variant of a loghub line (see _Variants; `vary` is the share of the
    message's digit runs redrawn), drawn from a pool of `variants` per
    source line. Lines come in runs of 20-400 consecutive source lines of one system, as real
    streams do (a random mix of 16 systems line by line would compress far worse than any real
    log). After every `chunk` lines a `refresh` fraction of the pool is redrawn, so the
    vocabulary keeps growing with the volume. Streams: memory stays bounded by the pool
    whatever n is. Same seed, same bytes. Returns the bytes written.

    :raises FileNotFoundError: if the samples or the converter are missing.
    """
    rng = random.Random(seed)
    gen = _Variants(rng, vary)
    systems = loghub_systems(root)
    if not systems:
        raise FileNotFoundError(f"no loghub samples under {root} (set LOGBOX_LOGHUB)")
    tool = loghub_tool()
    templates = []
    for s in systems:
        for raw in loghub_raw(s, root, tool):
            parts = raw.split(b" ", 7)
            if len(parts) == 8 and parts[6] == b"-":
                templates.append(parts)
    pool = [[gen.make(t) for _ in range(variants)] for t in templates]
    ntpl = len(pool)
    nrefresh = max(1, int(ntpl * refresh))
    written = 0
    with open(path, "wb") as f:
        left = n
        while left > 0:
            k = min(chunk, left)
            lines: list[bytes] = []
            while len(lines) < k:
                start = rng.randrange(ntpl)
                run = min(rng.randint(20, 400), k - len(lines))
                picks = rng.choices(range(variants), k=run)
                lines += [pool[(start + i) % ntpl][v] for i, v in enumerate(picks)]
            data = b"".join(lines)
            f.write(data)
            written += len(data)
            left -= k
            for j in rng.sample(range(ntpl), nrefresh):
                pool[j][rng.randrange(variants)] = gen.make(templates[j])
    return written


def iter_lines(path: Path) -> Iterator[bytes]:
    """The lines of a newline-framed corpus file, without their newline."""
    with open(path, "rb") as f:
        for line in f:
            yield line.rstrip(b"\n")
