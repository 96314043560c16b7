"""Declared parameters: each view states its query and path parameters, its body, its answer
and its errors once (declare); the same declaration validates the request and makes the view's
OpenAPI operation (openapi.py)."""

from __future__ import annotations

import functools
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import request
from logbox_core import times
from logbox_core.constants import PARAM_MAX, QUERY_MAX

from .errors import ApiError, bad_parameter


@dataclass(frozen=True)
class Param:
    """One parameter: name, type ("string", "integer", "time", "query"), where ("query" or
    "path"), whether required, default, range or enum, and what it means."""

    name: str
    type: str
    description: str
    required: bool = False
    default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    enum: tuple[str, ...] | None = None
    where: str = "query"
    pattern: str | None = None

    def parse(self, raw: str) -> Any:
        """raw checked and converted (int for integers, str otherwise).

        :raises ApiError: 400 bad_parameter, the message starting with the name.
        """
        limit = QUERY_MAX if self.type == "query" else PARAM_MAX
        if len(raw.encode("utf-8", "surrogateescape")) > limit:
            raise bad_parameter(f"{self.name}: longer than {limit} bytes")
        if self.type != "query" and "\0" in raw:
            raise bad_parameter(f"{self.name}: holds a NUL byte")
        if self.type == "integer":
            if not re.fullmatch(r"[0-9]{1,30}", raw) or not self._in_range(int(raw)):
                raise bad_parameter(
                    f"{self.name}: expected an integer {self._range()}, got {raw!r}"
                )
            return int(raw)
        if self.enum is not None and raw not in self.enum:
            raise bad_parameter(f"{self.name}: expected one of {', '.join(self.enum)}, got {raw!r}")
        if self.pattern is not None and not re.fullmatch(self.pattern, raw):
            raise bad_parameter(f"{self.name}: expected {self.pattern}, got {raw!r}")
        return raw

    def _in_range(self, v: int) -> bool:
        """Whether v is within minimum..maximum."""
        return (self.minimum is None or v >= self.minimum) and (
            self.maximum is None or v <= self.maximum
        )

    def _range(self) -> str:
        """The range for messages: '1..10000', '>= 1'."""
        if self.minimum is not None and self.maximum is not None:
            return f"{self.minimum}..{self.maximum}"
        if self.minimum is not None:
            return f">= {self.minimum}"
        return ""

    def schema(self) -> dict[str, Any]:
        """The OpenAPI schema object of the value."""
        s: dict[str, Any] = {"type": "integer" if self.type == "integer" else "string"}
        if self.minimum is not None:
            s["minimum"] = self.minimum
        if self.maximum is not None:
            s["maximum"] = self.maximum
        if self.enum is not None:
            s["enum"] = list(self.enum)
        if self.default is not None:
            s["default"] = self.default
        if self.pattern is not None:
            s["pattern"] = f"^{self.pattern}$"
        if self.type == "query":
            s["maxLength"] = QUERY_MAX
        elif self.type != "integer":
            s["maxLength"] = PARAM_MAX
        return s

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI parameter object."""
        return {
            "name": self.name,
            "in": self.where,
            "required": self.required or self.where == "path",
            "description": self.description,
            "schema": self.schema(),
        }


@dataclass(frozen=True)
class Spec:
    """What a view declares: summary, parameters, body schema name, answer, errors, who."""

    summary: str
    params: tuple[Param, ...] = ()
    body: str | None = None  # components/schemas name of the JSON request body
    ok: int = 200
    answer: str | None = None  # components/schemas name of the answer (None: see media)
    media: dict[str, str] = field(default_factory=dict)  # other media types -> description
    errors: tuple[int, ...] = ()
    auth: bool = True
    admin: bool = False
    headers: dict[str, str] = field(default_factory=dict)  # answer headers -> description

    @property
    def query_params(self) -> tuple[Param, ...]:
        """The query-string parameters."""
        return tuple(p for p in self.params if p.where == "query")


def query_pairs() -> list[tuple[str, str]]:
    """The request's query string as (name, value) pairs; bytes that are not UTF-8 as \\udcXX."""
    return urllib.parse.parse_qsl(
        request.query_string.decode("latin-1"),
        keep_blank_values=True,
        encoding="utf-8",
        errors="surrogateescape",
    )


def parse_query(params: tuple[Param, ...]) -> dict[str, Any]:
    """The request's query parameters checked against params: {name: value} with defaults.

    :raises ApiError: 400 bad_parameter for an unknown, repeated, missing or bad parameter.
    """
    by_name = {p.name: p for p in params if p.where == "query"}
    out: dict[str, Any] = {}
    for name, raw in query_pairs():
        p = by_name.get(name)
        if p is None:
            raise bad_parameter(f"{name}: unknown parameter")
        if name in out:
            raise bad_parameter(f"{name}: given more than once")
        out[name] = p.parse(raw)
    for p in by_name.values():
        if p.name not in out:
            if p.required:
                raise bad_parameter(f"{p.name}: required")
            if p.default is not None:
                out[p.name] = p.default
    return out


def declare(spec: Spec) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Attaches spec to a view; the view gets its parsed query parameters as `args`."""

    def wrap(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def run(**kwargs: Any) -> Any:
            for p in spec.params:
                if p.where == "path" and p.name in kwargs:
                    kwargs[p.name] = p.parse(kwargs[p.name])
            return view(args=parse_query(spec.params), **kwargs)

        run.spec = spec  # type: ignore[attr-defined]
        return run

    return wrap


def spec_of(view: Callable[..., Any]) -> Spec | None:
    """The Spec a view was declared with."""
    return getattr(view, "spec", None)


# ---------------------------------------------------------------- request bodies

MAX_BODY = 64 * 1024


def json_body(allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The request's JSON object body, with only allowed members and every required one.

    :raises ApiError: 413 over 64 KiB, 415 not application/json, 400 not a JSON object or a
        member unknown or missing.
    """
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise ApiError(413, "too_large", "request body over 64 KiB")
    if request.mimetype != "application/json":
        raise ApiError(415, "unsupported_media_type", "the body must be application/json")
    data = request.get_data(cache=True)
    if len(data) > MAX_BODY:
        raise ApiError(413, "too_large", "request body over 64 KiB")
    try:
        body = request.get_json(force=True, silent=False)
    except Exception:
        raise bad_parameter("body: not valid JSON") from None
    if not isinstance(body, dict):
        raise bad_parameter("body: expected a JSON object")
    for k in body:
        if k not in allowed:
            raise bad_parameter(f"{k}: unknown member")
    for k in required:
        if k not in body:
            raise bad_parameter(f"{k}: required")
    return body


def member(body: dict[str, Any], name: str, typ: type | tuple[type, ...], what: str) -> Any:
    """body[name] (None when absent) checked to be of typ.

    :raises ApiError: 400 bad_parameter "name: expected what".
    """
    v = body.get(name)
    if v is not None and (not isinstance(v, typ) or isinstance(v, bool) and bool not in _t(typ)):
        raise bad_parameter(f"{name}: expected {what}")
    return v


def _t(typ: type | tuple[type, ...]) -> tuple[type, ...]:
    """typ as a tuple."""
    return typ if isinstance(typ, tuple) else (typ,)


# ---------------------------------------------------------------- times (the audit log)


def parse_time(name: str, raw: str, now: float | None = None) -> int:
    """A time as searchd takes it (logbox_core.times) in µs.

    :raises ApiError: 400 bad_parameter, the message starting with name.
    """
    try:
        return times.parse_time(raw, now)
    except ValueError as e:
        raise bad_parameter(f"{name}: {e}") from None
