# Scenario: the API's error codes are one table (rpc/logbox_rpc/errors.py STATUS_CODES): the
# OpenAPI document describes every error status with its code from it, the accounts store's
# codes map back through it, and logbox_client's copy (a package that depends on nothing of
# logbox) equals it, with a gateway's 502 and 504 as unavailable besides.
from __future__ import annotations

from logbox_client import client
from logbox_core.accounts import (
    Conflict,
    Invalid,
    NotFound,
    StoreFull,
    StoreUnavailable,
    TokenError,
)
from logbox_rpc import errors, openapi


def test_openapi_describes_each_status_by_its_code() -> None:
    assert set(openapi.ERROR_TEXT) == set(errors.STATUS_CODES)
    for status, code in errors.STATUS_CODES.items():
        assert code in openapi.ERROR_TEXT[status], status


def test_accounts_codes_are_in_the_table() -> None:
    codes = {c.code for c in (Invalid, NotFound, Conflict, TokenError, StoreFull, StoreUnavailable)}
    assert set(errors.ACCOUNTS_STATUS) == codes
    assert all(errors.STATUS_CODES[s] == c for c, s in errors.ACCOUNTS_STATUS.items())


def test_client_copy() -> None:
    gateway = {502: "unavailable", 504: "unavailable"}
    assert client._STATUS_CODES == {**errors.STATUS_CODES, **gateway}
