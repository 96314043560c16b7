"""The admin page of the alert delivery channels, /admin/delivery (webui/UI.md "Delivery"):
one form per channel (SMTP relay, syslog collector, webhook signing, SNMP manager) and a test
button per channel. The settings and the sending are logbox_core.deliver's, the same file and
rules as the API's /delivery. Secrets are password fields that are never filled in: left empty
they keep the stored secret, "clear" removes it. Every save and every test is audited
(delivery_settings, delivery_test)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, url_for
from logbox_core import deliver as dl
from logbox_core.alerts import AlertStore, run_delivery_test
from logbox_core.constants import FACILITIES

from .auth import admin_required, audit, current_user
from .state import accounts

bp = Blueprint("delivery", __name__, url_prefix="/admin/delivery")

# section -> its form fields: (member, label, input kind, choices); kinds: text, number,
# select, secret (a password field, never filled), pem (a textarea)
FIELDS: dict[str, tuple[tuple[str, str, str, tuple[str, ...]], ...]] = {
    "smtp": (
        ("host", "relay host", "text", ()),
        ("port", "port (587 STARTTLS, 465 TLS)", "number", ()),
        ("security", "security", "select", dl.SMTP_SECURITY),
        ("sender", "sender address", "text", ()),
        ("username", "AUTH user (empty: no AUTH)", "text", ()),
        ("password", "AUTH password", "secret", ()),
        ("ca", "CA certificates, PEM (empty: the system CAs)", "pem", ()),
        ("timeout", "timeout, seconds", "number", ()),
    ),
    "syslog": (
        ("host", "collector host", "text", ()),
        ("port", "port (514; 6514 for TLS)", "number", ()),
        ("transport", "transport", "select", dl.SYSLOG_TRANSPORTS),
        ("facility", "facility", "select", tuple(FACILITIES)),
        ("ca", "CA certificates for TLS, PEM (empty: the system CAs)", "pem", ()),
        ("timeout", "timeout, seconds", "number", ()),
    ),
    "webhook": (
        ("secret", "HMAC-SHA256 signing key", "secret", ()),
        ("timeout", "timeout, seconds", "number", ()),
    ),
    "snmp": (
        ("host", "manager host", "text", ()),
        ("port", "port", "number", ()),
        ("version", "SNMP version", "select", dl.SNMP_VERSIONS),
        ("community", "community (v2c)", "secret", ()),
        ("user", "security name (v3)", "text", ()),
        ("auth_protocol", "auth protocol (v3)", "select", dl.SNMP_AUTH),
        ("auth_password", "auth passphrase (v3)", "secret", ()),
        ("priv_protocol", "privacy protocol (v3)", "select", dl.SNMP_PRIV),
        ("priv_password", "privacy passphrase (v3)", "secret", ()),
        ("engine_id", "engine id, hex (v3)", "text", ()),
        ("timeout", "timeout, seconds", "number", ()),
    ),
}
TITLES = {
    "smtp": "Email (SMTP relay)",
    "syslog": "Syslog collector",
    "webhook": "HTTPS webhook",
    "snmp": "SNMP trap",
}
# the test form of each channel: the section it needs
TEST_OF = {"email": "smtp", "syslog": "syslog", "webhook": "webhook", "snmp": "snmp"}


def _path() -> str:
    return str(current_app.config["DELIVERY_SETTINGS"])


def _page(status: int = 200, error: tuple[str, str] | None = None, result: Any = None) -> Any:
    """The page; error: (section, message) shown at that section's form."""
    file_error = None
    try:
        view = dl.settings_json(dl.load_settings(_path()))
    except dl.SettingsError as e:
        file_error = str(e)
        view = {k: None for k in dl.CHANNEL_SECTIONS}
    body = render_template(
        "admin/delivery.html",
        view=view,
        fields=FIELDS,
        titles=TITLES,
        path=_path(),
        file_error=file_error,
        error=error,
        result=result,
        form=request.form if request.method == "POST" else {},
    )
    return body, status


def _section_from_form(section: str) -> dict[str, Any]:
    """The form's values as the update body's object for section: empty text fields are left
    out (their default) or null (optional ones), an empty secret is left out (kept) unless its
    "clear" box is ticked."""
    out: dict[str, Any] = {}
    for name, _, kind, _ in FIELDS[section]:
        raw = request.form.get(name, "")
        if kind == "secret":
            if request.form.get(f"clear_{name}"):
                out[name] = None
            elif raw:
                out[name] = raw
            continue
        raw = raw.strip()
        if raw == "":
            if name in ("ca", "username", "user", "engine_id"):
                out[name] = None
            continue
        if kind == "number":
            try:
                out[name] = float(raw) if name == "timeout" else int(raw)
            except ValueError:
                msg = f"{section}.{name}: expected a number, got {raw[:40]!r}"
                raise dl.SettingsError(msg) from None
        else:
            out[name] = raw.replace("\r\n", "\n") if kind == "pem" else raw
    return out


@bp.route("", methods=["GET"])
@admin_required
def page() -> Any:
    """GET /admin/delivery."""
    return _page()


@bp.route("/<section>", methods=["POST"])
@admin_required
def save(section: str) -> Any:
    """POST /admin/delivery/<section>: the section's form saved (or removed: "remove")."""
    if section not in FIELDS:
        abort(404)
    try:
        value = None if request.form.get("remove") else _section_from_form(section)
        dl.write_settings(_path(), {section: value})
    except dl.SettingsError as e:
        audit("delivery_settings", status=400, detail=f"{section}: refused: {e}")
        return _page(400, (section, str(e)))
    what = "removed" if value is None else "set"
    audit("delivery_settings", detail=f"{section}={what}")
    flash(f"{TITLES[section]}: {what}.")
    return redirect(url_for("delivery.page") + f"#delivery-{section}", 303)


@bp.route("/test/<channel>", methods=["POST"])
@admin_required
def test(channel: str) -> Any:
    """POST /admin/delivery/test/<channel>: a test message over the channel; the result shown
    on the page."""
    if channel not in TEST_OF:
        abort(404)
    action: dict[str, Any] = {"type": channel}
    if channel == "email":
        action["to"] = [a.strip() for a in request.form.get("to", "").split(",") if a.strip()]
    elif channel == "webhook":
        action["url"] = request.form.get("url", "").strip()
        action["ca"] = request.form.get("ca", "").strip().replace("\r\n", "\n") or None
    try:
        dl.load_settings(_path())  # a broken settings file is said here; alertd sends
    except dl.SettingsError as e:
        return _page(500, (TEST_OF[channel], str(e)))
    user = current_user()
    assert user is not None
    result = run_delivery_test(
        AlertStore(accounts()), action, user.name, current_app.config.get("ALERTD_STATUS")
    )
    audit(
        "delivery_test",
        results=1 if result["delivered"] else 0,
        detail=f"{channel}: "
        + ("delivered" if result["delivered"] else f"failed: {result['error']}"),
    )
    return _page(result=result)
