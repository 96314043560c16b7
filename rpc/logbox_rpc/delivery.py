"""The alert delivery settings (API.md §10): where alert mail, syslog messages, webhooks and
SNMP traps go, read and changed by admins, and a test message over one channel. Secrets are
never answered (`"password_set": true`); every change and every test is audited. The settings
and the sending are logbox_core.deliver's."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, g, jsonify
from logbox_core import deliver as dl
from logbox_core.alerts import AlertStore, run_delivery_test

from .auth import audit
from .errors import STORE_ERRORS, ApiError, bad_parameter
from .params import Spec, declare, json_body, member
from .state import accounts

bp = Blueprint("delivery", __name__)

ADMIN_ERRORS = (400, 401, 403)
BODY_ERRORS = (400, 401, 403, 413, 415, *STORE_ERRORS)


def _path() -> str:
    """The settings file (DELIVERY_SETTINGS)."""
    return str(current_app.config["DELIVERY_SETTINGS"])


def _load() -> dl.Settings:
    """The settings; a file that cannot be used is a 500 naming it."""
    try:
        return dl.load_settings(_path())
    except dl.SettingsError as e:
        raise ApiError(500, "internal", str(e)) from None


@bp.route("/delivery", methods=["GET"])
@declare(
    Spec(
        "The alert delivery settings (secrets shown only as <name>_set)",
        answer="Delivery",
        errors=(*ADMIN_ERRORS, 500),
        admin=True,
    )
)
def get_delivery(args: dict[str, Any]) -> Any:
    """GET /delivery."""
    return jsonify(dl.settings_json(_load()))


@bp.route("/delivery", methods=["PUT"])
@declare(
    Spec(
        "Changes the delivery settings: a channel given replaces it (secrets it omits are kept), "
        "null removes it, a channel not named is kept",
        body="DeliveryUpdate",
        answer="Delivery",
        errors=(*BODY_ERRORS, 500),
        admin=True,
    )
)
def put_delivery(args: dict[str, Any]) -> Any:
    """PUT /delivery."""
    body = json_body(dl.CHANNEL_SECTIONS)
    try:
        new = dl.write_settings(_path(), body)
    except dl.SettingsError as e:
        msg = str(e)
        if msg.startswith(_path()):
            raise ApiError(500, "internal", msg) from None
        raise bad_parameter(msg) from None
    changed = ", ".join(f"{k}={'removed' if body[k] is None else 'set'}" for k in body)
    audit("delivery_settings", detail=changed or "nothing")
    return jsonify(dl.settings_json(new))


@bp.route("/delivery/test", methods=["POST"])
@declare(
    Spec(
        "Sends a test message over one channel; the answer says whether it was delivered",
        body="DeliveryTest",
        answer="DeliveryTestResult",
        errors=(*BODY_ERRORS, 500),
        admin=True,
    )
)
def test_delivery(args: dict[str, Any]) -> Any:
    """POST /delivery/test: body {"channel", "to" (email), "url", "ca" (webhook)}."""
    body = json_body(("channel", "to", "url", "ca"), ("channel",))
    channel = member(body, "channel", str, " or ".join(dl.CHANNELS))
    if channel not in dl.CHANNELS:
        raise bad_parameter(f"channel: expected {' or '.join(dl.CHANNELS)}, got {channel!r}")
    action: dict[str, Any] = {"type": channel}
    if channel == "email":
        to = member(body, "to", list, "a list of email addresses")
        if not to or not all(isinstance(a, str) for a in to):
            raise bad_parameter("to: expected a list of email addresses")
        action["to"] = to
    elif channel == "webhook":
        url = member(body, "url", str, "an https:// URL")
        if not url:
            raise bad_parameter("url: required for the webhook channel")
        action["url"] = url
        action["ca"] = member(body, "ca", str, "PEM text or null")
    for k in ("to", "url", "ca"):
        if k in body and k not in action:
            raise bad_parameter(f"{k}: not a member for channel {channel}")
    _load()  # a broken settings file is the admin's to hear about here (500)
    result = run_delivery_test(
        AlertStore(accounts()), action, g.user.name, current_app.config["ALERTD_STATUS"]
    )
    audit(
        "delivery_test",
        status=200,
        results=1 if result["delivered"] else 0,
        detail=f"{channel}: "
        + ("delivered" if result["delivered"] else f"failed: {result['error']}"),
    )
    return jsonify(result)
