# Scenario: every constant rpc/logbox_core/constants.py states for Python (the logspace name
# rule and reserved names, the default delimiters and settings limits, facility and severity
# names, searchd's request limits) is its C owner's value, read from indexer/lib/logbox.h,
# lb_format.h, lb_name.c, lb_query.c, indexd's settings.c and searchd's sources, in the manner
# of indexer/tests/t_format.c; the test oracles' copies agree; and no other Python file of the
# apps or the collector spells one of them again. A value changed on one side fails here.
from __future__ import annotations

import re
from pathlib import Path

import pytest
from lbtest import csource, oracle, query
from logbox_client import cli
from logbox_core import constants


@pytest.fixture(scope="module")
def lib(top: Path) -> Path:
    return top / "indexer" / "lib"


@pytest.fixture(scope="module")
def defs(lib: Path) -> dict[str, str]:
    return csource.defines(lib / "logbox.h", lib / "lb_format.h")


@pytest.fixture(scope="module")
def nums(lib: Path) -> dict[str, int]:
    return csource.numbers(lib / "logbox.h", lib / "lb_format.h")


def test_logspace_name_rule(lib: Path, defs: dict[str, str], nums: dict[str, int]) -> None:
    assert constants.LOGSPACE_NAME_MAX == nums["LB_NAME_MAX"]
    assert constants.LOGSPACE_PATTERN == f"[a-z0-9_-]{{1,{nums['LB_NAME_MAX']}}}"
    reserved = csource.strings(defs["LB_RESERVED_NAMES"], defs)
    assert sorted(constants.RESERVED_LOGSPACES) == sorted(reserved)
    # The reasons are indexd's words: lb_name.c's strings, with LB_NAME_MAX in the length one.
    c_why = set(re.findall(r'bad = "([^"]*)"', (lib / "lb_name.c").read_text()))
    py_why = {
        constants.logspace_name_problem(n)
        for n in ("", "x" * (constants.LOGSPACE_NAME_MAX + 1), "Main", "../x", reserved[0])
    }
    assert py_why == c_why


@pytest.mark.parametrize(
    "name",
    ["main", "web-01_x", "0", "x" * 64, "catalogs", "spool-2", "tls_in"],
)
def test_logspace_names_allowed(name: str) -> None:
    assert constants.logspace_name_ok(name)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "x" * 65,
        "Main",
        "a.b",
        "a b",
        "../x",
        "é",
        "a\0",
        None,
        7,
        *constants.RESERVED_LOGSPACES,
    ],
)
def test_logspace_names_refused(name: object) -> None:
    assert not constants.logspace_name_ok(name)


def test_settings(lib: Path, defs: dict[str, str], top: Path) -> None:
    assert constants.DEFAULT_DELIMITERS == csource.string(defs["LB_DEFAULT_DELIMS"])
    m = re.search(
        r"struct lb_lsconf \{[^}]*char\s+delims\[([0-9]+)\]", (lib / "logbox.h").read_text()
    )
    assert m, "no delims[] in struct lb_lsconf"
    assert constants.DELIMITERS_MAX == int(m.group(1)) - 1  # the NUL
    settings = csource.numbers(top / "indexer" / "indexd" / "settings.c")
    assert constants.RETENTION_MAX == settings["RETENTION_MAX"]


def test_names(lib: Path) -> None:
    assert list(constants.FACILITIES) == csource.array(lib / "lb_query.c", "facilities")
    assert list(constants.SEVERITIES) == csource.array(lib / "lb_query.c", "severities")


def test_searchd_limits(top: Path, nums: dict[str, int]) -> None:
    searchd = top / "indexer" / "searchd"
    own = csource.numbers(*sorted(searchd.glob("*.[ch]")))
    assert constants.QUERY_MAX == nums["LB_QUERY_MAX"]
    assert constants.BUCKETS_MAX == nums["LB_HIST_MAX"]
    assert constants.TOP_MAX == nums["LB_TOP_MAX"]
    assert constants.PARAM_MAX == own["PARAM_MAX"]
    assert constants.LIMIT_MAX == own["LIMIT_MAX"]
    assert constants.URI_MAX == own["SD_URI_MAX"]


def test_boundary_copies() -> None:
    """Copies kept on purpose still agree: the test oracles (ground truth written apart) and
    logbox_client (a package that depends on nothing of logbox)."""
    assert cli.SEVERITIES == constants.SEVERITIES
    assert oracle.DEFAULT_DELIMS == constants.DEFAULT_DELIMITERS.encode()
    assert tuple(query.FACILITIES) == constants.FACILITIES
    assert tuple(query.SEVERITIES) == constants.SEVERITIES
    assert query.QUERY_MAX == constants.QUERY_MAX


def test_token_forms_constants(defs: dict[str, str], nums: dict[str, int]) -> None:
    """The oracle's copy of the forms rule (lbtest/oracle.py forms(), FORMAT.md §6) uses
    lb_tokenize's separators and flags; its punctuation is the table's (t_tokenize.c checks
    lb_form_punct byte by byte, test_token_forms.py the whole rule through a segment)."""
    assert oracle.FORM_SEPS == frozenset(csource.strings(defs["LB_FORM_SEPS"], defs)[0].encode())
    assert (oracle.FORM_START, oracle.FORM_END, oracle.TERM_FORM) == (
        nums["LB_FORM_START"],
        nums["LB_FORM_END"],
        nums["LB_TERM_FORM"],
    )
    assert oracle.PUNCT == frozenset(c for c in range(0x21, 0x7F) if not chr(c).isalnum())


# What a Python file spells when it writes one of the constants again.
COPIES = {
    "the logspace name pattern": re.compile(r"\[a-z0-9_\\?-\]\{1,64\}"),
    "the user name pattern": re.compile(r"\[a-z0-9_\.\\?-\]\{1,64\}"),
    "the default delimiters": re.compile(re.escape(r"&:~?![]=,;()'\"/\\|<>{}*")),
    "the facility names": re.compile(r"solaris-cron"),
    "a reserved-name list": re.compile(r"[\"']collector[\"'],\s*[\"']accounts[\"']"),
}


def test_no_python_copies(top: Path) -> None:
    owner = top / "rpc" / "logbox_core" / "constants.py"
    found = []
    for folder in ("appliance", "collector", "rpc", "webui"):
        for path in sorted(p for ext in ("*.py", "*.html") for p in (top / folder).rglob(ext)):
            if path == owner:
                continue
            text = path.read_text()
            found += [
                f"{path.relative_to(top)}: {what}" for what, rx in COPIES.items() if rx.search(text)
            ]
    assert not found, "copies of logbox_core.constants: " + "; ".join(found)


def test_html_pattern() -> None:
    """The form's pattern is the name rule, with the one escape the "v" flag needs."""
    assert constants.LOGSPACE_HTML_PATTERN.endswith("_\\-]{1,64}")
    assert re.fullmatch(constants.LOGSPACE_HTML_PATTERN, "web-01_a")
    assert not re.fullmatch(constants.LOGSPACE_HTML_PATTERN, "Web.01")
    assert re.fullmatch(constants.USER_NAME_PATTERN, "j.doe-2")
    assert constants.USER_NAME_HTML_PATTERN.endswith("_.\\-]{1,64}")
    assert re.fullmatch(constants.USER_NAME_HTML_PATTERN, "j.doe-2")
