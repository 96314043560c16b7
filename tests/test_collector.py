# Scenario: the syslog-ng configuration collector/render.py makes is accepted by syslog-ng 3.38,
# and a real syslog-ng on it is pure transport into the spool: every listener (newline TCP,
# octet-counted TCP, TLS with each client-certificate mode, UDP) writes each message unparsed
# as one spool record (indexer/FORMAT.md §13) with the right listener, peer and receive time and
# the raw bytes as received (LF, NUL, non-UTF-8 and long messages exactly); files are named per
# UTC second per run; a SIGTERM under load loses nothing syslog-ng had read; TLS 1.1 is refused;
# route tables are still checked at render time (and never rendered).
from __future__ import annotations

import calendar
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from lbtest.collector import (
    PKI,
    SYSLOG_NG,
    Collector,
    Record,
    octet,
    render,
    send_tcp,
    send_tls,
    send_udp,
    stop_under_load,
    tls_context,
)
from lbtest.spool import FILE_RE, decode_file

# A route value with everything the configuration language treats specially: quotes,
# backslashes, backticks (substituted even inside strings), braces, semicolons, comment marks,
# template and pragma characters, control characters, non-ASCII.
HOSTILE = "a\"b\\c`x`y}d;e'f$g#h@i{j)k\tl~\u00e9m"
INJECTION = '"); }; destination d_x { file("PWNED"); }; log { source(s_tcp); destination(d_x); }; #'

ROUTES = [
    {"name": "secure", "facility": ["auth", "authpriv"]},
    {"name": "web", "host": "^web-[0-9]+$", "listener": ["tcp", "tls"]},
    {"name": "hostile", "message": re.escape(HOSTILE)},
    {"name": "injection", "message": re.escape(INJECTION)},
]


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    return PKI.make(tmp_path_factory.mktemp("pki"))


def tls_doc(pki: PKI, verify: str) -> dict:
    return {
        "cert": str(pki.server[0]),
        "key": str(pki.server[1]),
        "ca": str(pki.ca),
        "verify": verify,
    }


@pytest.fixture(scope="module")
def col(tmp_path_factory: pytest.TempPathFactory, pki: PKI) -> Iterator[Collector]:
    """One syslog-ng with every listener, the routes above and tls.verify = "optional"."""
    c = Collector(
        tmp_path_factory.mktemp("col"), doc={"logspace": ROUTES, "tls": tls_doc(pki, "optional")}
    )
    c.start()
    yield c
    c.close()


def syntax_ok(conf: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SYSLOG_NG, "--syntax-only", "-f", str(conf)], capture_output=True, text=True
    )


def refused(port: int, ctx: ssl.SSLContext, data: bytes) -> str:
    """The error a TLS client gets when the server refuses it (the alert can race with the
    client's first write in TLS 1.3: then the client sees the connection end)."""
    try:
        send_tls(port, ctx, data)
    except (ssl.SSLError, ConnectionError) as e:
        return str(e)
    pytest.fail("the server accepted the client")


def assert_record(r: Record, listener: str, peer: str = "127.0.0.1") -> None:
    """r came in on listener from peer, now, and sits in the file of its UTC second."""
    assert (r.listener, r.peer) == (listener, peer), r
    assert re.fullmatch(r"[0-9]+\.[0-9]{6}", r.rtime), r.rtime
    assert abs(float(r.rtime) - time.time()) < 120
    second = time.strftime("%Y%m%dT%H%M%S", time.gmtime(int(float(r.rtime))))
    assert r.file.startswith(second + "."), (r.file, r.rtime)


# ------------------------------------------------------------------------ configuration


def test_default_and_appliance_settings_pass_syntax_check(
    tmp_path: Path, pki: PKI, top: Path
) -> None:
    dev = render.load_settings(None)
    assert (dev.bind, dev.tcp_port, dev.octet_port, dev.tls_port, dev.udp_port) == (
        "127.0.0.1",
        5514,
        5601,
        6514,
        5514,
    )
    assert dev.log_msg_size == 320 * 1024 and not dev.spool_fsync
    app = render.load_settings(top / "collector" / "appliance.toml")
    assert (app.bind, app.tcp_port, app.octet_port, app.tls_port, app.udp_port) == (
        "0.0.0.0",
        514,
        601,
        6514,
        514,
    )
    assert app.warnings == ()
    for i, s in enumerate((dev, app)):
        s = replace(s, tls_cert=pki.server[0], tls_key=pki.server[1], tls_ca=pki.ca)
        conf = tmp_path / f"{i}.conf"
        conf.write_text(render.render(s, data=tmp_path / "data", run=tmp_path / "run"))
        r = syntax_ok(conf)
        assert r.returncode == 0, r.stderr
        assert "WARNING" not in r.stderr, r.stderr
        text = conf.read_text()
        # pure transport: no parser, no disk buffer, no pipe, one destination, flow control
        for gone in ("parser", "disk-buffer", "pipe(", 'rewrite { set("- -'):
            assert gone not in text, gone
        assert text.count("destination d_") == 1 and text.count("flags(no-parse)") == 4
        assert text.count("flags(flow-control)") == text.count("\nlog {") == 2
        assert f'"{tmp_path}/data/spool/${{R_YEAR}}' in text


def test_routes_are_checked_but_not_rendered(tmp_path: Path) -> None:
    nasty = [HOSTILE, INJECTION, "\\", '"', "`", "``", "`x", "\\`", "a\nb\r\x01\x1f\x7f", "}"]
    routes = []
    for i, v in enumerate(nasty):
        routes.append({"name": f"r{i}", "message": re.escape(v)})
        routes.append({"name": f"h{i}", "host": re.escape(v), "program": re.escape(v)})
    routes.append({"name": "by-listener", "listener": ["udp", "internal"], "facility": "auth"})
    s = render.settings_from_dict({"logspace": routes, "ports": {"tls": 0}})
    assert s.routes[-1].listener == ("udp", "internal")
    plain = render.settings_from_dict({"ports": {"tls": 0}})
    assert render.render(s, data=tmp_path, run=tmp_path, token="t") == render.render(
        plain, data=tmp_path, run=tmp_path, token="t"
    )
    # The same values as the settings file says them (TOML escapes) give the same settings.
    toml = "[ports]\ntls = 0\n" + "".join(
        f'[[logspace]]\nname = "r{i}"\nmessage = {toml_str(re.escape(v))}\n'
        for i, v in enumerate(nasty)
    )
    path = tmp_path / "hostile.toml"
    path.write_text(toml)
    loaded = render.load_settings(path)
    assert [r.message for r in loaded.routes] == [re.escape(v) for v in nasty]


def toml_str(v: str) -> str:
    out = ['"']
    for ch in v:
        if ch in '"\\' or ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out) + '"'


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ({"logspace": [{"name": "x", "message": "a\0b"}]}, "NUL"),
        ({"logspace": [{"name": "Main"}]}, "name"),
        ({"logspace": [{"name": "../x"}]}, "name"),
        ({"logspace": [{"name": "x" * 65}]}, "name"),
        ({"logspace": [{"name": "x", "facility": ["auth", "nope"]}]}, "facility"),
        ({"logspace": [{"name": "x", "facility": []}]}, "facility"),
        ({"logspace": [{"name": "x", "listener": ["tcp", "TCP"]}]}, "listener"),
        ({"logspace": [{"name": "x", "listener": []}]}, "listener"),
        ({"logspace": [{"name": "x", "listener": 1}]}, "listener"),
        ({"logspace": [{"name": "x", "program": "a(b"}]}, "regular expression"),
        ({"logspace": [{"name": "x", "colour": "red"}]}, "unknown"),
        ({"logspace": [{"message": "x"}]}, "name"),
        ({"ports": {"tcp": 70000}}, "ports.tcp"),
        ({"ports": {"tcp": True}}, "boolean"),
        ({"ports": {"tcp": 1000, "octet": 1000}}, "differ"),
        ({"ports": {"tcp": 0, "octet": 0, "tls": 0, "udp": 0}}, "every listener"),
        ({"tls": {"verify": "maybe"}}, "tls.verify"),
        ({"tls": {"cert": 'x"\0'}}, "NUL"),
        ({"bind": '127.0.0.1") ; #'}, "bind"),
        ({"spool_fsync": "yes"}, "spool_fsync"),
        ({"buffer": "big"}, "buffer"),
        ({"log_msg_size": "16M"}, "log_msg_size"),
        ({"colour": "red"}, "unknown"),
    ],
)
def test_bad_settings_are_refused(tmp_path: Path, doc: dict, why: str) -> None:
    with pytest.raises(render.SettingsError, match=re.escape(why)):
        s = render.settings_from_dict(doc)
        render.render(s, data=tmp_path, run=tmp_path)


def test_cli_prints_the_configuration_and_ignores_the_old_buffer(tmp_path: Path, top: Path) -> None:
    settings = tmp_path / "c.toml"
    settings.write_text(
        'bind = "127.0.0.2"\n[ports]\ntls = 0\n[buffer]\nsize = 10737418240\n'
        '[[logspace]]\nname = "a"\nlistener = ["udp"]\n'
    )
    argv = [sys.executable, str(top / "collector/render.py"), "--settings", str(settings)]
    argv += ["--data", str(tmp_path), "--run", str(tmp_path / "run")]
    r = subprocess.run(argv + ["--spool", str(tmp_path / "sp")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "render: warning: buffer: ignored: the spool" in r.stderr
    (token,) = re.findall(r"# run token ([0-9a-z]+):", r.stdout)
    s = render.load_settings(settings)
    assert r.stdout == render.render(
        s, data=tmp_path, run=tmp_path / "run", spool=tmp_path / "sp", token=token
    )
    assert 'ip("127.0.0.2")' in r.stdout and 'source "tls"' not in r.stdout
    again = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    (other,) = re.findall(r"# run token ([0-9a-z]+):", again)
    assert other != token and f"{tmp_path}/spool/" in again  # a fresh token every time
    settings.write_text("[ports]\ntcp = -1\n")
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 1 and "ports.tcp" in r.stderr and not r.stdout


def warnings_of(c: Collector) -> list[bytes]:
    """syslog-ng's own messages of severity warning or worse (their raw bytes)."""
    c.spool.poll()
    out = []
    for r in c.spool.internal:
        pri = int(r.raw[1 : r.raw.index(b">")])
        if pri % 8 <= 4:
            out.append(r.raw)
    return out


def test_starts_without_warnings(col: Collector) -> None:
    assert "WARNING" not in col.stderr() and "rror" not in col.stderr(), col.stderr()
    assert col.started() == 1
    assert warnings_of(col) == []
    (r,) = (r for r in col.spool.internal if b" syslog-ng starting up" in r.raw)
    # syslog-ng's own messages: listener internal, as RFC 5424 lines, program syslog-ng
    assert re.fullmatch(
        rb"<45>1 [0-9-]{10}T[0-9:]{8}\.[0-9]{6}[+-][0-9:]{5} \S+ syslog-ng %d - - "
        rb"syslog-ng starting up; version='3\.[0-9.]+'" % col.proc.pid,  # type: ignore[union-attr]
        r.raw,
    ), r.raw
    assert r.listener == "internal"
    assert not any(b"Syslog connection accepted" in r.raw for r in col.spool.internal)


# ------------------------------------------------------------------------ listeners


def test_every_listener_writes_records_with_its_name_and_peer(col: Collector, pki: PKI) -> None:
    send_tcp(col.ports["tcp"], b"<13>Nov 22 10:00:00 h p: via tcp\n")
    send_tcp(col.ports["octet"], octet(b"<13>1 - h p - - - via octet"))
    send_tls(col.ports["tls"], tls_context(pki, pki.client), octet(b"<13>1 - h p - - - via tls"))
    send_udp(col.ports["udp"], b"<13>1 - h p - - - via udp")
    got = {r.raw: r for r in col.spool.take(4)}
    assert set(got) == {
        b"<13>Nov 22 10:00:00 h p: via tcp",
        b"<13>1 - h p - - - via octet",
        b"<13>1 - h p - - - via tls",
        b"<13>1 - h p - - - via udp",
    }
    for raw, r in got.items():
        assert_record(r, raw.rsplit(b" ", 1)[1].decode())
    # a peer other than 127.0.0.1: the listeners bind 127.0.0.1 only, so the source address
    # of the connection (127.0.0.2 is loopback too) is what comes out
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", col.ports["octet"]))
        s.sendall(octet(b"from .2"))
    (r,) = col.spool.take(1)
    assert r.raw == b"from .2"
    assert_record(r, "octet", "127.0.0.2")


def test_ipv6_bind_gives_ipv6_and_v4_mapped_peers(tmp_path: Path) -> None:
    c = Collector(tmp_path, doc={"bind": "::", "ports": {"tls": 0}})
    c.start()
    try:
        for fam, addr in ((socket.AF_INET6, "::1"), (socket.AF_INET, "127.0.0.1")):
            with socket.socket(fam) as s:
                s.connect((addr, c.ports["octet"]))
                s.sendall(octet(b"from " + addr.encode()))
            with socket.socket(fam, socket.SOCK_DGRAM) as u:
                u.sendto(b"udp from " + addr.encode(), (addr, c.ports["udp"]))
        got = {(r.listener, r.raw): r.peer for r in c.spool.take(4)}
    finally:
        c.close()
    assert got == {
        ("octet", b"from ::1"): "::1",
        ("udp", b"udp from ::1"): "::1",
        ("octet", b"from 127.0.0.1"): "::ffff:127.0.0.1",
        ("udp", b"udp from 127.0.0.1"): "::ffff:127.0.0.1",
    }


def test_newline_tcp_passes_lines_unparsed(col: Collector) -> None:
    l3164 = b"<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on /dev/pts/8"
    l5424 = (
        b"<165>1 2003-10-11T22:14:15.003+02:00 mymachine.example.com evntslog 1234 ID47 "
        b'[exampleSDID@32473 iut="3" eventSource="Application"] \xef\xbb\xbfAn application event'
    )
    stream = (
        l3164 + b"\n" + l5424 + b"\n"
        b"\xef\xbb\xbfBOM first, CR last\r\n"  # a trailing CR is dropped, a BOM kept
        b"\n\n"  # empty lines are no messages
        b"  spaces kept  \n"
        b"bad \xff\xfe utf-8 \x01 and <999> pri\n"
        b"nul\x00ends a line too\n"  # NUL ends a line on the newline port
        b"last line without LF"  # the connection's end ends it
    )
    send_tcp(col.ports["tcp"], stream)
    got = col.spool.take(8)
    assert [r.raw for r in got] == [
        l3164,
        l5424,
        b"\xef\xbb\xbfBOM first, CR last",
        b"  spaces kept  ",
        b"bad \xff\xfe utf-8 \x01 and <999> pri",
        b"nul",
        b"ends a line too",
        b"last line without LF",
    ]
    assert all(r.listener == "tcp" and r.peer == "127.0.0.1" for r in got)
    assert col.spool.quiet(0.3) == []


def test_octet_counting_is_byte_exact_with_lf_nul_and_non_utf8(col: Collector) -> None:
    body = b"line1\nline2\x00after nul \xff\xfe\xc3( \xe2\x82 end\r\nLS1 1 tcp - 3\nabc"
    msgs = [
        b"<13>1 2026-11-22T10:00:00Z host-a app 42 - - " + body,
        b"\xef\xbb\xbf<13>1 BOM before the PRI",
        body,
        b"trailing CR kept\r",
    ]
    with socket.create_connection(("127.0.0.1", col.ports["octet"])) as s:
        s.sendall(b"".join(octet(m) for m in msgs))
        s.sendall(octet(b"trailing LFs dropped\n\n"))
    got = col.spool.take(5)
    assert [r.raw for r in got] == msgs + [b"trailing LFs dropped"]
    for r in got:
        assert_record(r, "octet")
    # one record, whole file bytes: the header then the raw bytes then LF
    path = col.spool.spool / got[2].file
    whole = path.read_bytes()
    at = got[2].offset
    head = f"LS1 {got[2].rtime} octet 127.0.0.1 {len(body)}\n".encode()
    assert whole[at : at + len(head) + len(body) + 1] == head + body + b"\n"


def test_long_messages_arrive_whole_up_to_log_msg_size(col: Collector) -> None:
    limit = col.settings.log_msg_size  # 320 KiB by default
    msg = (bytes(range(256)) * (limit // 256))[: limit - 40]  # every byte value
    m = b"<13>1 2026-11-22T10:00:00Z h app - - - " + msg
    assert len(m) <= limit
    over = b"o" * (limit + 1000)
    send_tcp(col.ports["octet"], octet(m) + octet(over) + octet(b"next"))
    line = b"<13>Nov 22 10:00:00 h " + b"p" * 10000 + b": " + b"x" * (limit - 11000)
    send_tcp(col.ports["tcp"], line + b"\n")
    got = col.spool.take(4, timeout=30)
    octets = [r.raw for r in got if r.listener == "octet"]
    assert octets == [m, over[:limit], b"next"]  # longer: cut to log_msg_size, next intact
    assert [r.raw for r in got if r.listener == "tcp"] == [line]


def test_udp_datagrams(col: Collector) -> None:
    grams = [
        b"<14>Nov 22 10:00:00 router-1 kernel: link up",
        b"udp\x00nul\nlf inside \xff",
        b"CR kept, LF dropped\r",
    ]
    for g in grams:
        send_udp(col.ports["udp"], g)
    send_udp(col.ports["udp"], b"trailing LF dropped\n")
    got = col.spool.take(4)
    assert sorted(r.raw for r in got) == sorted(grams + [b"trailing LF dropped"])
    for r in got:
        assert_record(r, "udp")


def test_tls_with_optional_client_certificates(col: Collector, pki: PKI) -> None:
    port = col.ports["tls"]
    m = b"<13>1 2026-11-22T10:00:00Z tls-host app - - - over tls \x00\n\xff"
    send_tls(port, tls_context(pki, pki.client), octet(m + b" with cert"))
    send_tls(port, tls_context(pki), octet(m + b" without cert"))
    got = col.spool.take(2)
    assert sorted(r.raw for r in got) == [m + b" with cert", m + b" without cert"]
    assert all(r.listener == "tls" and r.peer == "127.0.0.1" for r in got)
    # "optional" still verifies a certificate that is presented: another CA's is refused.
    why = refused(port, tls_context(pki, pki.stranger), octet(m + b" stranger"))
    assert re.search("UNKNOWN_CA|EOF|reset|Broken pipe", why), why
    assert col.spool.quiet() == []


def test_tls_refuses_tls_1_1_and_accepts_1_2_and_1_3(col: Collector, pki: PKI) -> None:
    port = col.ports["tls"]
    # The server's alert: this client offers TLS 1.1 only, at a security level that allows it.
    why = refused(port, tls_context(pki, pki.client, ssl.TLSVersion.TLSv1_1), octet(b"<13>x"))
    assert "PROTOCOL_VERSION" in why, why
    for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        send_tls(port, tls_context(pki, pki.client, v), octet(v.name.encode()))
    assert sorted(r.raw for r in col.spool.take(2)) == [b"TLSv1_2", b"TLSv1_3"]
    assert col.spool.quiet(0.3) == []


def test_tls_required_rejects_a_client_without_certificate(tmp_path: Path, pki: PKI) -> None:
    c = Collector(tmp_path, doc={"tls": tls_doc(pki, "required")})
    c.start()
    try:
        port = c.ports["tls"]
        why = refused(port, tls_context(pki), octet(b"<13>1 - h a - - - no cert"))
        assert re.search("CERTIFICATE_REQUIRED|EOF|reset|Broken pipe", why), why
        why = refused(port, tls_context(pki, pki.stranger), octet(b"<13>1 - h a - - - stranger"))
        assert re.search("UNKNOWN_CA|EOF|reset|Broken pipe", why), why
        send_tls(port, tls_context(pki, pki.client), octet(b"with cert"))
        assert [r.raw for r in c.spool.take(1)] == [b"with cert"]
        assert c.spool.quiet() == []
        # syslog-ng says why, in its own messages (listener internal)
        assert any(b"SSL error" in m for m in warnings_of(c)), c.spool.internal
    finally:
        c.close()


def test_injection_attempt_in_a_message_is_data(col: Collector) -> None:
    send_udp(col.ports["udp"], f"<13>Nov 22 10:00:00 h app: x {INJECTION} y".encode())
    (r,) = col.spool.take(1)
    assert r.raw == f"<13>Nov 22 10:00:00 h app: x {INJECTION} y".encode()
    assert not list(col.data.rglob("PWNED")) and not Path("PWNED").exists()


def test_hostile_spool_path(tmp_path: Path) -> None:
    spool = tmp_path / "sp ool\"`x`\\;{}#'"
    c = Collector(tmp_path, doc={"ports": {"tls": 0}}, spool_dir=spool)
    c.start()
    try:
        send_tcp(c.ports["tcp"], b"into a hostile path\n")
        assert [r.raw for r in c.spool.take(1)] == [b"into a hostile path"]
        assert [p.parent for p in c.spool.files()] == [spool] * len(c.spool.files())
    finally:
        c.close()
    with pytest.raises(render.SettingsError, match=re.escape("$")):
        render.render(c.settings, data=tmp_path, run=tmp_path, spool=tmp_path / "a$b")


# ------------------------------------------------------------------------ files and stops


def test_files_are_named_per_second_per_run(tmp_path: Path) -> None:
    c = Collector(tmp_path, doc={"ports": {"tls": 0}})
    c.start()
    try:
        for i in range(3):
            send_tcp(c.ports["tcp"], b"first run %d\n" % i)
            time.sleep(1.1)
        first = c.spool.take(3)
        c.stop()
        c.start()
        send_tcp(c.ports["tcp"], b"second run\n")
        (second,) = c.spool.take(1)
    finally:
        c.close()
    t1, t2 = c.tokens[-2:]
    assert t1 != t2 and all(re.fullmatch(r"[0-9a-f]{16}", t) for t in (t1, t2))
    assert len({r.file for r in first}) == 3  # one file per second of receipt
    for r in first:
        assert FILE_RE.fullmatch(r.file)[2] == t1  # type: ignore[index]
        assert_record(r, "tcp")
    assert FILE_RE.fullmatch(second.file)[2] == t2  # type: ignore[index]
    for p in c.spool.files():
        assert os.stat(p).st_mode & 0o777 == 0o640, p
        recs, torn = decode_file(p.read_bytes())
        assert torn == 0 and recs


@pytest.mark.slow
def test_sigterm_under_load_loses_nothing_read(tmp_path: Path) -> None:
    """Two connections send as fast as they can; syslog-ng is frozen, what it has read is
    measured, then it gets SIGTERM: every line it had read is in the spool, each connection's
    lines in order with no gap and no duplicate (a tail it never read is missing). With
    log_msg_size 64 KiB its input buffers hold little: its 100 ms of grace after SIGTERM
    drain them (the default's figures: collector/README.md "What each failure can lose")."""
    c = Collector(tmp_path, doc={"ports": {"tls": 0}, "log_msg_size": 65536})
    c.start()
    try:
        got = stop_under_load(c, signal.SIGTERM, conns=2, n=100_000)
    finally:
        c.close()
    print(f"SIGTERM under load: {got}")
    assert got.in_flight > 0, got  # the stop came with messages read but not yet written
    assert got.gap_free, got  # per connection in order, no gap, no duplicate
    assert got.lost == 0, got  # every line syslog-ng had read is in the spool


# ------------------------------------------------------------------------ limits and load


def test_newline_lines_longer_than_log_msg_size_are_split(tmp_path: Path) -> None:
    c = Collector(tmp_path, doc={"log_msg_size": 65536, "ports": {"tls": 0}})
    c.start()
    try:
        line = b"<13>1 2026-11-22T10:00:00Z h a - - - " + b"y" * 150000
        send_tcp(c.ports["tcp"], line + b"\n")
        recs = c.spool.wait(3, timeout=5)
        # syslog-ng 3.38 splits it at log_msg_size: documented in collector/README.md
        assert [len(r.raw) for r in recs] == [65536, 65536, len(line) - 2 * 65536]
        assert b"".join(r.raw for r in recs) == line
        c.spool.records = []
        m = b"<13>1 2026-11-22T10:00:00Z h a - - - " + b"z" * 150000
        send_tcp(c.ports["octet"], octet(m) + octet(b"next"))
        got = c.spool.take(2)  # framed: trimmed to log_msg_size, never split
        assert got[0].raw == m[:65536] and got[1].raw == b"next"
        assert c.spool.quiet(0.3) == []
    finally:
        c.close()


@pytest.mark.slow
def test_five_thousand_connections_with_flow_control(col: Collector) -> None:
    n = 5000
    before = warnings_of(col)
    socks = []
    try:
        for _ in range(n):
            socks.append(socket.create_connection(("127.0.0.1", col.ports["tcp"]), timeout=30))
        for i, s in enumerate(socks):
            s.sendall(b"<13>Nov 22 10:00:00 h p: conn %d\n" % i)
        recs = col.spool.take(n, timeout=60)
    finally:
        for s in socks:
            s.close()
    assert sorted(r.raw for r in recs) == sorted(
        b"<13>Nov 22 10:00:00 h p: conn %d" % i for i in range(n)
    )
    assert warnings_of(col) == before


def test_spool_records_rtime_is_utc_unix_time(col: Collector) -> None:
    t0 = time.time()
    send_tcp(col.ports["tcp"], b"now\n")
    (r,) = col.spool.take(1)
    assert t0 - 1 <= float(r.rtime) <= time.time() + 1
    assert calendar.timegm(time.strptime(r.file[:15], "%Y%m%dT%H%M%S")) == int(float(r.rtime))


def test_the_tests_spool_reader_agrees_with_render() -> None:
    """lbtest/spool.py is the tests' copy of FORMAT.md §13: its file name and listener rules
    are the ones render.py writes by."""
    from lbtest import spool

    token = render.run_token()
    assert render.RUN_TOKEN_RE.fullmatch(token)
    assert spool.FILE_RE.fullmatch(f"20261125T101010.{token}.lbs")
    assert spool.FILE_RE.pattern.split(r"\.")[1] == "(" + render.RUN_TOKEN_RE.pattern + ")"
    assert render.LISTENER_RE.pattern in spool.HEADER_RE.pattern.decode()
    for name in (*render.LISTENERS, render.INTERNAL):
        assert render.LISTENER_RE.fullmatch(name)
    assert render.RECORD_TEMPLATE.startswith(spool.MAGIC.decode())
