"""Seeded generators for the search oracle suite: hostile RFC 5424 messages (structured data,
odd hosts/programs/pids, bytes outside UTF-8, punctuation, long tokens, the SSB examples),
loghub lines re-stamped so receive times spread over several days, random time ranges and
random queries built from what the corpus holds (and does not hold)."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence
from dataclasses import dataclass

from lbtest import corpus, query
from lbtest.oracle import DEFAULT_TABLE, FORM_END, FORM_START, TERM_FORM, WHITESPACE, forms

DAY_US = 86_400_000_000
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

# Messages the SSB examples of the issue must find (and must not).
SSB_MESSAGES = [
    b"Connection Error occurred on eth0",
    b"Error:Connection reset by peer",
    b"Error Connection refused",
    b"user username logged in",
    b"usermame is a typo of username",
    b"restart requested by admin",
    b"systemd-logind started a session",
    b"systemctl restart nginx",
    b"mytool and systool ran",
    b"user closed the session",
    b"user opened the session",
    b"user closing down",
    b"server1 is down",
    b"server32 is up",
    b"server50 answers",
    b"server3 is slow",
    b"server33 must not match",
    b"server5 must not match either",
]
SSB_QUERIES = [
    "username",
    "restart",
    "user?ame",
    "system*",
    "*tool",
    "NOT user",
    "user AND NOT close*",
    "server1 OR server32 OR server50 OR server3",
    "Connection Error",
    "Connection:Error",
    '"connection error"',
]

_HOSTS = [
    "web-01",
    "WEB-02",
    "db.example.com",
    "10.0.0.5",
    "fe80::1",
    "star*host",
    "q?host",
    "back\\slash",
    "paren(host)",
    "server1",
    "server3",
    "server32",
    "server50",
    "h" * 300,
    "-",
]
_APPS = ["sshd", "CRON", "systemd", "nginx", "postfix/smtpd", "su", "app:worker", "-", "a" * 48]
_PIDS = ["1", "42", "31337", "worker-3", "-", "[9]", "007"]
_MSGIDS = ["ID47", "TCPIN", "audit", "-", "AND", "x:y", "m" * 32]
_SD = [
    b'[meta sequenceId="%(n)d" app="web"]',
    b'[origin ip="10.0.%(a)d.%(b)d" software="logbox" swVersion="1.2-3"]',
    b'[timeQuality tzKnown="1" isSynced="0"]',
    b'[ex@32473 quote="a \\"b\\" c\\\\d \\]e" utf8="caf\xc3\xa9 na\xc3\xafve"]',
    b'[ex@32473 dup="p q" dup="r s"][ex@32473 other="t"]',
    b'[ex@32473 d="x" du="y x" dup="z"]',
    b'[Mixed@1 Key="Value Two" key="lower one"]',
    b'[long@2 v="' + b"L" * 300 + b' tail"]',
    b"[bad@1 x=1]",
]
_WORDS = [
    "Connection",
    "Error",
    "user",
    "username",
    "restart",
    "system",
    "systemd",
    "close",
    "closed",
    "session",
    "server1",
    "server3",
    "server32",
    "Failed",
    "password",
    "10.0.0.1",
    "web-01",
    "user_id",
    "bob@example.com",
    "key=value",
    "a+b",
    "(paren)",
    "[bracket]",
    "{brace}",
    "<angle>",
    "'quoted'",
    '"dq"',
    "pipe|split",
    "back\\slash",
    "star*glob",
    "q?mark",
    "semi;colon",
    "amp&ersand",
    "tilde~x",
    "bang!",
    "AND",
    "or",
    "Not",
    "/var/log/syslog",
    "Connection:Error",
    "x.y.z",
    "-dash",
    "--opt",
    "caf\udcc3\udca9",
    "\udcff\udcfe",
    "na\udcefve",
    "tab\there",
    "nul\x00byte",
    "esc\x1b[31mred",
]
_SEPS = [" "] * 10 + ["  ", "\t", ", ", ": ", "=", "/", " | ", ";", "\x0b", "::", "\n"]


def _syllables(rng: random.Random) -> str:
    syl = ["ka", "lo", "mi", "nu", "ra", "se", "ti", "vo", "ze", "qu", "ph", "an", "er", "ix"]
    w = "".join(rng.choice(syl) for _ in range(rng.randint(1, 4)))
    r = rng.random()
    if r < 0.2:
        return w.capitalize()
    if r < 0.25:
        return w.upper()
    if r < 0.35:
        return w + str(rng.randint(0, 999))
    return w


def _compound(rng: random.Random) -> str:
    """A token with punctuation: words and numbers joined at the separators of compound tokens
    (. - _ @ / + and others that are not), or a word with punctuation around it."""
    r = rng.random()
    if r < 0.3:
        return (
            rng.choice(["", "", "#", "-", "..", "'", "`"])
            + _syllables(rng)
            + rng.choice([".", ".", "...", "-", "%", "#", "@"])
        )
    if r < 0.4:
        return ".".join(str(rng.randint(0, 255)) for _ in range(4))
    if r < 0.45:
        return "%d-%02d-%02d" % (rng.randint(2000, 2030), rng.randint(1, 12), rng.randint(1, 28))
    parts = []
    for i in range(rng.randint(2, 4)):
        if i:
            parts.append(rng.choice(".-_@+.-#$^%~/"))
        parts.append(_syllables(rng) if rng.random() < 0.75 else str(rng.randint(0, 9999)))
    return "".join(parts)


def _text(rng: random.Random) -> bytes:
    parts = []
    for i in range(rng.randint(1, 25)):
        if i:
            parts.append(rng.choice(_SEPS))
        r = rng.random()
        if r < 0.12:
            parts.append(_compound(rng))
        elif r < 0.3:
            parts.append(rng.choice(_WORDS))
        elif r < 0.33:
            parts.append(rng.choice("XyZ") * rng.randint(250, 300))
        elif r < 0.4:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 6))))
        else:
            parts.append(_syllables(rng))
    return "".join(parts).encode("utf-8", "surrogateescape")


def hostile_messages(rng: random.Random, n: int) -> list[bytes]:
    """n RFC 5424 messages without a time stamp field yet ("TS" stands in for it)."""
    out = []
    for i in range(n):
        pri = rng.randint(0, 23) * 8 + rng.randint(0, 7)
        sd = b"-"
        if rng.random() < 0.5:
            elems = rng.sample(_SD, rng.randint(1, 3))
            vals = {b"n": i, b"a": rng.randint(0, 3), b"b": rng.randint(0, 255)}
            sd = b"".join(e % vals if b"%(" in e else e for e in elems)
        msg = SSB_MESSAGES[i % len(SSB_MESSAGES)] if i % 7 == 0 else _text(rng)
        header = b"<%d>1 TS %s %s %s %s %s" % (
            pri,
            rng.choice(_HOSTS).encode(),
            rng.choice(_APPS).encode(),
            rng.choice(_PIDS).encode(),
            rng.choice(_MSGIDS).encode(),
            sd,
        )
        out.append(header + b" " + msg)
    return out


def loghub_messages(per_system: int) -> list[bytes]:
    """The first per_system lines of every loghub sample as RFC 5424 with "TS" for the time."""
    tool = corpus.loghub_tool()
    out = []
    for s in corpus.loghub_systems():
        for raw in corpus.loghub_raw(s, tool=tool)[:per_system]:
            pri_ver, _ts, rest = raw.split(b" ", 2)
            out.append(pri_ver + b" TS " + rest)
    return out


def receive_times(rng: random.Random, n: int, start_us: int, days: int) -> list[int]:
    """n sorted times over `days` days from start_us, bunched into busy seconds (many messages
    share a second; some sit exactly on a whole second)."""
    seconds = sorted(rng.sample(range(days * 86_400), max(1, n // 5)))
    out = []
    for _ in range(n):
        s = rng.choice(seconds)
        frac = 0 if rng.random() < 0.1 else rng.randrange(1_000_000)
        out.append(start_us + s * 1_000_000 + frac)
    return sorted(out)


def stamp(raw: bytes, us: int) -> bytes:
    """raw with its "TS" field replaced by the RFC 5424 time stamp of us (UTC, µs)."""
    when = EPOCH + dt.timedelta(microseconds=us)
    ts = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode()
    pri_ver, placeholder, rest = raw.split(b" ", 2)
    assert placeholder == b"TS", raw[:60]
    return pri_ver + b" " + ts + b" " + rest


def time_arg(us: int) -> str:
    """us as an RFC 3339 UTC time with microseconds (lb_time_parse form)."""
    return (EPOCH + dt.timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ---------------------------------------------------------------- queries


def _argv_safe(b: bytes) -> bool:
    return bool(b) and b"\x00" not in b


def escape_value(v: bytes) -> bytes:
    """A field value as query text: the bytes the lexer or globbing would take escaped."""
    out = bytearray()
    for c in v:
        if c in WHITESPACE or c in b'()"\\*?':
            out += b"\\"
        out.append(c)
    return bytes(out)


def _mangle_case(rng: random.Random, b: bytes) -> bytes:
    r = rng.random()
    if r < 0.6:
        return b
    if r < 0.8:
        return b.upper()
    return bytes(c - 32 if 0x61 <= c <= 0x7A and rng.random() < 0.5 else c for c in b)


@dataclass
class Vocab:
    """What the corpus holds, to build queries from."""

    texts: list[list[bytes]]  # the text tokens of each message (without their forms)
    tokens: list[bytes]  # distinct text terms (tokens and their forms)
    fields: dict[int, list[bytes]]  # ns -> distinct folded values (as stored: cut at 255)
    raw_fields: dict[int, list[bytes]]  # ns -> values as sent
    sd: dict[bytes, list[list[bytes]]]  # sdname -> token lists of its values

    @classmethod
    def of(cls, c: query.Corpus) -> Vocab:
        texts = [
            [t for ns, t, fl in ts if ns == query.NS_TEXT and not fl & TERM_FORM and _argv_safe(t)]
            for ts in c.terms
        ]
        tokens = sorted(
            {t for ts in c.terms for ns, t, _ in ts if ns == query.NS_TEXT and _argv_safe(t)}
        )
        fields: dict[int, set[bytes]] = {}
        raw: dict[int, set[bytes]] = {}
        sd: dict[bytes, list[list[bytes]]] = {}
        for m, ts in zip(c.msgs, c.terms, strict=True):
            for ns, name in query.NS_FIELD.items():
                v = getattr(m, name)
                if v:
                    raw.setdefault(ns, set()).add(v)
            per: dict[bytes, list[bytes]] = {}
            for ns, t, _ in ts:
                if ns in query.NS_FIELD:
                    fields.setdefault(ns, set()).add(t)
                elif ns == query.NS_SD:
                    name, _, tok = t.partition(b"\x00")
                    per.setdefault(name, []).append(tok)
            for name, toks in per.items():
                sd.setdefault(name, []).append(toks)
        usable = {
            n: v
            for n, v in sd.items()
            if query.is_sd_name(n) and not any(c in WHITESPACE or c in b'()"\\:*?' for c in n)
        }
        return cls(
            texts=[t for t in texts if t],
            tokens=tokens,
            fields={k: sorted(v) for k, v in fields.items()},
            raw_fields={k: sorted(v) for k, v in raw.items()},
            sd=usable,
        )


class QueryGen:
    """Random query texts over a corpus's vocabulary (seeded)."""

    def __init__(self, rng: random.Random, vocab: Vocab) -> None:
        self.rng = rng
        self.v = vocab

    def token(self) -> bytes:
        r = self.rng.random()
        if r < 0.5:
            toks = self.rng.choice(self.v.texts)
            return self.rng.choice(toks)
        return self.rng.choice(self.v.tokens)

    def wild(self, tok: bytes) -> bytes:
        """tok, or a wildcard pattern made from it."""
        rng = self.rng
        n = len(tok)
        r = rng.random()
        if r < 0.45 or n < 2:
            return tok
        if r < 0.6:
            return tok[: rng.randint(1, min(n, 4))] + b"*"
        if r < 0.7:
            return b"*" + tok[rng.randint(1, n - 1) :]
        if r < 0.8:
            a = rng.randint(1, n - 1)
            return tok[:a] + b"*" + tok[rng.randint(a, n) :]
        if r < 0.9:
            k = rng.randrange(n)
            return tok[:k] + b"?" + tok[k + 1 :]
        k = rng.randrange(n)
        return tok[:k] + b"*" + tok[k:] + b"*"

    def phrase(self) -> bytes:
        """2-4 consecutive tokens of a message, quoted or joined by a delimiter."""
        rng = self.rng
        toks = [t for t in rng.choice(self.v.texts) if b"\x00" not in t]
        if len(toks) < 2:
            return self.word()
        k = rng.randint(2, min(4, len(toks)))
        i = rng.randrange(len(toks) - k + 1)
        words = list(toks[i : i + k])
        # The first word may be the end of its token, the last the start (QUERY.md §1).
        ends = [f for f, _, fl in forms(words[0]) if fl & FORM_END]
        starts = [f for f, _, fl in forms(words[-1]) if fl & FORM_START]
        if ends and rng.random() < 0.5:
            words[0] = rng.choice(ends)
        if starts and rng.random() < 0.5:
            words[-1] = rng.choice(starts)
        if rng.random() < 0.3:
            j = rng.randrange(k)
            words[j] = self.wild(words[j])
        if rng.random() < 0.5:
            return b'"' + b" ".join(_mangle_case(rng, w) for w in words) + b'"'
        sep = rng.choice([b":", b"/", b",", b"=", b";", b"|", b"&", b"!", b"~", b"<>", b"::"])
        return sep.join(_mangle_case(rng, w) for w in words)

    def word(self) -> bytes:
        rng = self.rng
        r = rng.random()
        if r < 0.1:
            return b"zz%dnothere" % rng.randrange(1000)
        tok = self.token()
        if r < 0.13 and len(tok) > 1:
            return tok[:-1] + b"\\" + tok[-1:]  # an escaped literal byte is still that byte
        return _mangle_case(rng, self.wild(tok))

    def field(self) -> bytes:
        rng = self.rng
        ns = rng.choice(list(self.v.raw_fields))
        name = _mangle_case(rng, query.NS_FIELD[ns].encode())
        v = rng.choice(self.v.raw_fields[ns])
        r = rng.random()
        if r < 0.05:
            return name + b":*"
        if r < 0.1:
            return name + b":zznothere"
        if r < 0.5 and len(v) > 1:
            lit = escape_value(v[: rng.randint(1, min(4, len(v) - 1))])
            pat = lit + b"*" if rng.random() < 0.6 else b"*" + escape_value(v[-2:])
            return name + b":" + pat
        if r < 0.6 and b'"' not in v and b"\\" not in v:
            return name + b':"' + _mangle_case(rng, v) + b'"'
        return name + b":" + escape_value(_mangle_case(rng, v))

    def level(self) -> bytes:
        rng = self.rng
        if rng.random() < 0.4:
            f = rng.randrange(24)
            return b"facility:" + (str(f) if rng.random() < 0.3 else query.FACILITIES[f]).encode()
        names = [*query.SEVERITIES, *query.SEVERITY_ALIASES]
        v = rng.choice(names) if rng.random() < 0.8 else str(rng.randrange(8))
        if rng.random() < 0.5:
            return b"severity:" + v.encode()
        op = rng.choice(["<=", ">="] + (["<"] if v not in ("emerg", "panic", "0") else []))
        return b"severity" + op.encode() + v.encode()

    def sd(self) -> bytes:
        rng = self.rng
        if not self.v.sd:
            return self.word()
        name = rng.choice(sorted(self.v.sd))
        toks = [t for t in rng.choice(self.v.sd[name]) if _argv_safe(t)]
        if not toks or rng.random() < 0.1:
            return name + b":" + (b"*" if rng.random() < 0.5 else b"zznothere")
        if len(toks) >= 2 and rng.random() < 0.3:
            i = rng.randrange(len(toks) - 1)
            return name + b':"' + toks[i] + b" " + toks[i + 1] + b'"'
        return name + b":" + _mangle_case(rng, self.wild(rng.choice(toks)))

    def atom(self) -> bytes:
        rng = self.rng
        r = rng.random()
        if r < 0.4:
            return self.word()
        if r < 0.55:
            return self.phrase()
        if r < 0.7:
            return self.field()
        if r < 0.8:
            return self.level()
        if r < 0.9:
            return self.sd()
        if r < 0.93:
            return b"*"
        if r < 0.96:
            return b"message:" + self.word()
        return rng.choice([b"Foo:bar", b"and", b"x\\:y", b"\\(paren\\)", b"(user)", b"a\\ b"])

    def expr(self, depth: int) -> tuple[bytes, bool]:
        """(query text, whether it is compound)."""
        rng = self.rng
        if depth == 0 or rng.random() < 0.35:
            return self.atom(), False
        r = rng.random()
        if r < 0.2:
            return b"NOT " + self._kid(depth), True
        kids = [self._kid(depth) for _ in range(rng.randint(2, 3))]
        if r < 0.55:
            return b" OR ".join(kids), True
        sep = [b" AND " if rng.random() < 0.5 else b" " for _ in kids]
        return kids[0] + b"".join(s + k for s, k in zip(sep, kids[1:], strict=False)), True

    def _kid(self, depth: int) -> bytes:
        e, compound = self.expr(depth - 1)
        if (compound and self.rng.random() < 0.85) or self.rng.random() < 0.05:
            return b"(" + e + b")"
        return e

    def query(self) -> bytes:
        return self.expr(self.rng.randint(0, 3))[0]


def time_range(
    rng: random.Random, lo_us: int, hi_us: int, msgs: Sequence[query.Msg]
) -> tuple[int, int]:
    """A random [from, to) around the corpus's receive times [lo_us, hi_us]."""
    r = rng.random()
    if r < 0.25:
        return lo_us - DAY_US, hi_us + DAY_US
    if r < 0.5:  # edges on a message's own receive time: the rounding matters
        a, b = sorted(rng.choice(msgs).received_us for _ in range(2))
        a, b = a + rng.choice([0, 1, -1]), b + rng.choice([0, 1, -1, 999_999])
        return min(a, b), max(a, b)
    if r < 0.55:
        t = rng.choice(msgs).received_us
        return t, t
    a = rng.randint(lo_us - 3_600_000_000, hi_us)
    span = rng.choice([1_000_000, 60_000_000, 3_600_000_000, DAY_US, 3 * DAY_US])
    b = a + rng.randint(0, span)
    if rng.random() < 0.3:
        a, b = a // 1_000_000 * 1_000_000, b // 1_000_000 * 1_000_000
    return a, b


def delimited(b: bytes) -> bool:
    return any(c in DEFAULT_TABLE for c in b)
