"""Reading constants out of the C sources, for the tests that pin a Python copy to its C owner
(test_constants_pinned.py, test_limits_pinned.py, test_routes_pinned.py): #defines of numbers
and strings, and the string literals of an array. Text only: nothing is compiled.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

# `#define NAME value`, the value running to a comment or the end of the line; a trailing
# backslash continues it on the next line.
_DEFINE = re.compile(r"^#define[ \t]+([A-Z][A-Z0-9_]*)[ \t]+((?:[^\n]*\\\n)*[^\n]*)$", re.M)
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def defines(*paths: Path) -> dict[str, str]:
    """The text of every #define in the files (comments and continuations removed)."""
    out: dict[str, str] = {}
    for path in paths:
        for name, value in _DEFINE.findall(path.read_text()):
            out[name] = " ".join(_COMMENT.sub(" ", value).replace("\\\n", " ").split())
    return out


def number(expr: str) -> int:
    """The value of a #define made of integers, parentheses, *, + and - (suffixes U/L/ULL
    allowed)."""
    expr = re.sub(r"\b(0x[0-9a-fA-F]+|[0-9]+)[uUlL]+\b", r"\1", expr)
    if not re.fullmatch(r"[0-9a-fA-Fx()*+\- <]+", expr):
        raise ValueError(f"not a plain number: {expr!r}")
    return eval(expr, {"__builtins__": {}})  # digits, parentheses and operators only


def numbers(*paths: Path) -> dict[str, int]:
    """Every #define of the files whose value is a plain number."""
    out: dict[str, int] = {}
    for name, value in defines(*paths).items():
        try:
            out[name] = number(value)
        except (ValueError, SyntaxError):
            pass
    return out


def string(literal: str) -> str:
    """A C string literal ("..." with \\\\ and \\" escapes) as Python text."""
    return ast.literal_eval(literal)


def strings(expr: str, defs: dict[str, str]) -> list[str]:
    """The strings of a comma-separated list of string literals and names of string #defines."""
    out = []
    for item in (s.strip() for s in expr.split(",")):
        if item in defs:
            item = defs[item]
        if not _STRING.fullmatch(item):
            raise ValueError(f"not a string: {item!r}")
        out.append(string(item))
    return out


def array(path: Path, name: str) -> list[str]:
    """The string literals of `name[] = { ... };` in a C file."""
    m = re.search(re.escape(name) + r"\[[0-9]*\]\s*=\s*\{(.*?)\};", path.read_text(), re.S)
    if m is None:
        raise AssertionError(f"no {name}[] in {path}")
    return [string(s) for s in _STRING.findall(m.group(1))]
