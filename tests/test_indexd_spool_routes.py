"""Routing and the peer, end to end from the spool: logbox-indexd with --routes (collector.toml's
[[logspace]] tables) sends each spool record to the logspace of the first rule it matches (by
listener, host, facility; else main); the record's peer is stored as the message's peer, and is
its host when the header has none; a bad rule file on SIGHUP is refused with its line and the
old rules stay; a good one applies to the records read after it."""

from __future__ import annotations

import signal
from pathlib import Path

from lbtest.indexd import Indexd, messages
from lbtest.spool import file_name, record, wait_spool_empty, write_file

T0 = 1795359974.0
RULES = """\
[ports]
tcp = 5514

[[logspace]]
name = "secure"
facility = ["auth", "authpriv"]

[[logspace]]
name = "network"
host = '^(sw|rtr)-[0-9]+$'
listener = ["udp"]
"""


def test_spool_records_are_routed_and_keep_their_peer(
    indexd_bin: Path, tmp_path: Path, store_cli: Path
) -> None:
    data = tmp_path / "data"
    spool = data / "spool"
    routes = tmp_path / "collector.toml"
    routes.write_text(RULES)
    d = Indexd(indexd_bin, data, tmp_path / "status.json", args=["--routes", str(routes)])
    d.start()
    recs = [
        record(b"<38>Nov 22 10:00:00 web1 sshd[7]: auth one", T0, "tcp", "10.0.0.5"),
        record(b"<14>Nov 22 10:00:00 sw-12 ifmgr: link down", T0, "udp", "10.9.9.9"),
        record(b"<14>Nov 22 10:00:00 sw-12 ifmgr: over tcp", T0, "tcp", "10.9.9.9"),
        record(b"no header at all", T0, "udp", "2001:db8::7"),
        record(b"<14>Nov 22 10:00:00 web2 app: no peer", T0, "octet", "-"),
    ]
    write_file(spool, file_name(T0, "a"), b"".join(recs))
    wait_spool_empty(spool)
    # A bad file on SIGHUP: refused with its line; the old rules stay.
    routes.write_text(RULES + '\n[[logspace]]\nname = "x"\nbogus = 1\n')
    d.signal(signal.SIGHUP)
    write_file(spool, file_name(T0 + 1, "a"), record(b"<38>Nov 22 10:00:01 h sshd: two", T0 + 1))
    wait_spool_empty(spool)
    # A good one: applies from then on.
    routes.write_text('[[logspace]]\nname = "all-udp"\nlistener = ["udp"]\n')
    d.signal(signal.SIGHUP)
    d.wait_logged("routes: " + str(routes) + ": 1 rule", "indexd read the good routes", 30)
    write_file(
        spool, file_name(T0 + 2, "a"), record(b"<14>Nov 22 10:00:02 sw-1 x: y", T0 + 2, "udp")
    )
    wait_spool_empty(spool)
    assert d.stop() == 0, d.stderr()[-3000:]
    err = d.stderr()
    assert f"{routes}:" in err and "keeping the rules in force" in err, err[-3000:]

    def got(ls: str) -> list[tuple[str, str, str]]:
        return [(m["message"], m["host"], m["peer"]) for m in messages(store_cli, data, ls)]

    assert got("secure") == [("auth one", "web1", "10.0.0.5"), ("two", "h", "")]
    assert got("network") == [("link down", "sw-12", "10.9.9.9")]
    assert got("main") == [
        ("over tcp", "sw-12", "10.9.9.9"),
        ("no header at all", "2001:db8::7", "2001:db8::7"),
        ("no peer", "web2", ""),
    ]
    assert got("all-udp") == [("y", "sw-1", "")]
