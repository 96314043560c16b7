"""Alert delivery channels (rpc/API.md "Delivery"): email over SMTP, a syslog message to a
remote collector, an HTTPS webhook and an SNMP trap, and the admin's settings file that says
where each goes (notify.json).

The one idea: every delivery is one bounded, verified, synchronous attempt that either returns
or raises DeliveryError with a message naming the channel, the peer and what failed, never a
secret (no password, community, passphrase or HMAC key reaches a message, a log line or an API
answer). TLS is always 1.2 or later and always verified, against the system CAs or a CA given
in PEM. Retrying, cooldown and queueing are the caller's (logbox-alertd, reports).

No Flask here: the API, the web UI, logbox-alertd and the reports call these functions.
"""

from __future__ import annotations

import email.utils
import fcntl
import hashlib
import hmac
import http.client
import ipaddress
import json
import os
import re
import shutil
import smtplib
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

from logbox_core import atomicfile
from logbox_core.constants import FACILITIES

VERSION = 1
MAX_FILE_BYTES = 1 << 20
DEFAULT_TIMEOUT = 10.0  # seconds per network step
DEADLINE_STEPS = 3  # a whole delivery gives up after this many timeouts (a peer that trickles)
MAX_TIMEOUT = 60.0
SYSLOG_UDP_MAX = 2048  # bytes: RFC 5426 says a receiver SHOULD take this much
WEBHOOK_ANSWER_MAX = 64 * 1024  # bytes of a webhook's answer read (the rest is ignored)
SIGNATURE_HEADER = "X-Logbox-Signature-256"  # "sha256=" + hex HMAC-SHA256(secret, body)

# SNMP (appliance/mibs/LOGBOX-ALERT-MIB.txt): the documentation enterprise of RFC 5612
ENTERPRISE = "1.3.6.1.4.1.32473"
SNMP_ROOT = ENTERPRISE + ".21"  # logboxAlertMIB
SNMP_TRAP_FIRING = SNMP_ROOT + ".0.1"  # logboxAlertFiring
SNMP_TRAP_TEST = SNMP_ROOT + ".0.2"  # logboxAlertTest
SNMP_OBJECTS = SNMP_ROOT + ".1"
# varbind: (suffix under SNMP_OBJECTS, name, event member, net-snmp type letter)
SNMP_VARBINDS: tuple[tuple[int, str, str, str], ...] = (
    (1, "logboxAlertId", "alert_id", "s"),
    (2, "logboxAlertName", "alert", "s"),
    (3, "logboxAlertLogspace", "logspace", "s"),
    (4, "logboxAlertState", "state", "s"),
    (5, "logboxAlertCount", "count", "u"),
    (6, "logboxAlertCondition", "condition", "s"),
    (7, "logboxAlertWindow", "window_s", "u"),
    (8, "logboxAlertGroupField", "group.field", "s"),
    (9, "logboxAlertGroupValue", "group.value", "s"),
    (10, "logboxAlertTime", "time", "s"),
    (11, "logboxAlertBox", "box", "s"),
    (12, "logboxAlertUrl", "url", "s"),
    (13, "logboxAlertQuery", "query", "s"),
)
SNMP_STRING_MAX = 255  # octets of a string varbind (the MIB's SIZE)
SD_ID = "logbox-alert@32473"  # the syslog message's structured data element

SMTP_SECURITY = ("starttls", "tls")
SYSLOG_TRANSPORTS = ("udp", "tcp", "tls")
SNMP_VERSIONS = ("2c", "3")
SNMP_AUTH = ("SHA", "SHA-256", "SHA-512")
SNMP_PRIV = ("AES", "AES-256")
CHANNELS = ("email", "syslog", "webhook", "snmp")  # action types
CHANNEL_SECTIONS = ("smtp", "syslog", "webhook", "snmp")  # the settings file's members

_write_lock = threading.Lock()


class DeliveryError(Exception):
    """A delivery or a settings value that failed; the message says which channel, which peer
    and what went wrong, and never holds a secret."""


class SettingsError(DeliveryError):
    """A delivery settings value or file that cannot be used (the message names the member)."""


# ---------------------------------------------------------------- settings


@dataclass
class SmtpRelay:
    """The SMTP relay alert and report mails go through."""

    host: str
    port: int = 587
    security: str = "starttls"  # "starttls" (required, not optional) | "tls" (implicit, 465)
    sender: str = "logbox@localhost"  # the envelope and From address
    username: str | None = None  # AUTH only when set
    password: str | None = field(default=None, repr=False)
    ca: str | None = None  # PEM CA certificates; None: the system CAs
    timeout: float = DEFAULT_TIMEOUT


@dataclass
class SyslogTarget:
    """The remote syslog collector alert messages go to."""

    host: str
    port: int = 514
    transport: str = "udp"  # "udp" | "tcp" (octet-counted, RFC 6587) | "tls" (RFC 5425)
    facility: str = "user"
    ca: str | None = None  # PEM, for "tls"; None: the system CAs
    timeout: float = DEFAULT_TIMEOUT


@dataclass
class WebhookSettings:
    """What every webhook action shares: the HMAC key and the timeout."""

    secret: str | None = field(default=None, repr=False)  # signs the body when set
    timeout: float = DEFAULT_TIMEOUT


@dataclass
class SnmpTarget:
    """The SNMP manager traps go to (sent by net-snmp's snmptrap)."""

    host: str
    port: int = 162
    version: str = "2c"  # "2c" | "3" (authPriv)
    community: str | None = field(default=None, repr=False)  # v2c
    user: str | None = None  # v3 security name
    auth_protocol: str = "SHA"
    auth_password: str | None = field(default=None, repr=False)
    priv_protocol: str = "AES"
    priv_password: str | None = field(default=None, repr=False)
    engine_id: str | None = None  # v3: this box's engine id (hex); the manager's createUser -e
    timeout: float = DEFAULT_TIMEOUT


@dataclass
class Settings:
    """The admin's delivery settings; None: the channel is not configured."""

    smtp: SmtpRelay | None = None
    syslog: SyslogTarget | None = None
    snmp: SnmpTarget | None = None
    webhook: WebhookSettings | None = None


# members that are secrets: never in an answer or a message, kept when an update omits them
SECRETS: dict[str, tuple[str, ...]] = {
    "smtp": ("password",),
    "syslog": (),
    "webhook": ("secret",),
    "snmp": ("community", "auth_password", "priv_password"),
}
_CLASSES: dict[str, type] = {
    "smtp": SmtpRelay,
    "syslog": SyslogTarget,
    "webhook": WebhookSettings,
    "snmp": SnmpTarget,
}
_HOST = re.compile(r"^[A-Za-z0-9._:-]{1,253}$")
_EMAIL = re.compile(r"^[^@\s<>\"(),;:]{1,64}@[A-Za-z0-9.-]{1,253}$")
_SNMP_WORD = re.compile(r"^[^\s\"'\\#]+$")
_ENGINE = re.compile(r"^(0x)?[0-9A-Fa-f]{10,64}$")


def _check(section: str, name: str, value: Any) -> Any:
    """value of section.name checked (the member's rule); raises SettingsError."""
    where = f"{section}.{name}"

    def bad(expected: str) -> SettingsError:
        shown = "(secret)" if name in SECRETS[section] else repr(value)[:80]
        return SettingsError(f"{where}: expected {expected}, got {shown}")

    if name == "host":
        if not isinstance(value, str) or not _HOST.match(value):
            raise bad("a host name or IP address")
        return value
    if name == "port":
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
            raise bad("a port 1..65535")
        return value
    if name == "timeout":
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise bad(f"seconds 1..{MAX_TIMEOUT:g}")
        if not 1 <= value <= MAX_TIMEOUT:
            raise bad(f"seconds 1..{MAX_TIMEOUT:g}")
        return float(value)
    if name == "ca":
        if value is None:
            return None
        if not isinstance(value, str) or "-----BEGIN CERTIFICATE-----" not in value:
            raise bad("PEM CA certificates or null")
        try:
            ssl.create_default_context(cadata=value)
        except (ssl.SSLError, ValueError):
            raise SettingsError(f"{where}: not a usable PEM certificate") from None
        return value
    enums = {
        "security": SMTP_SECURITY,
        "transport": SYSLOG_TRANSPORTS,
        "version": SNMP_VERSIONS,
        "auth_protocol": SNMP_AUTH,
        "priv_protocol": SNMP_PRIV,
        "facility": tuple(FACILITIES),
    }
    if name in enums:
        if value not in enums[name]:
            raise bad(" or ".join(enums[name]))
        return value
    if name == "sender":
        if not isinstance(value, str) or not _EMAIL.match(value):
            raise bad("an email address")
        return value
    if name == "engine_id":
        if value is None:
            return None
        if not isinstance(value, str) or not _ENGINE.match(value):
            raise bad("hex digits (5..32 bytes) or null")
        return value if value.startswith("0x") else "0x" + value
    # user names and secrets: printable text without line breaks, or null
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= 256 or not value.isprintable():
        raise bad("printable text of 1..256 characters or null")
    if name in ("auth_password", "priv_password") and len(value) < 8:
        raise SettingsError(f"{where}: net-snmp needs at least 8 characters")
    if section == "snmp" and not _SNMP_WORD.match(value):
        # one word of snmp.conf (no white space, quotes, backslash or #)
        raise bad("one word without spaces, quotes, backslashes or #")
    return value


def _section(name: str, obj: Any, old: Any = None) -> Any:
    """The dataclass of section name from its JSON object; members it omits keep old's secrets
    (when old is given) and otherwise take their defaults."""
    if not isinstance(obj, dict):
        raise SettingsError(f"{name}: expected an object or null")
    cls = _CLASSES[name]
    known = {f.name for f in fields(cls)}
    for k in obj:
        if k not in known:
            raise SettingsError(f"{name}.{k}: unknown member (known: {', '.join(sorted(known))})")
    kw = {k: _check(name, k, v) for k, v in obj.items()}
    if old is not None:
        for s in SECRETS[name]:
            if s not in obj:
                kw[s] = getattr(old, s)
    if "host" in known and "host" not in kw:
        raise SettingsError(f"{name}.host: missing")
    out = cls(**kw)
    if name == "syslog" and "port" not in obj and out.transport == "tls":
        out.port = 6514
    if name == "smtp" and "port" not in obj and out.security == "tls":
        out.port = 465
    if name == "smtp" and out.username is None and out.password is not None:
        raise SettingsError("smtp.password: set without smtp.username")
    if name == "snmp":
        if out.version == "2c" and not out.community:
            raise SettingsError("snmp.community: needed for version 2c")
        if out.version == "3":
            for k in ("user", "auth_password", "priv_password", "engine_id"):
                if not getattr(out, k):
                    raise SettingsError(f"snmp.{k}: needed for version 3 (authPriv)")
    return out


def parse_settings(doc: Any) -> Settings:
    """Settings from the file's JSON document.

    :raises SettingsError: a member that is missing, unknown or not valid.
    """
    if not isinstance(doc, dict):
        raise SettingsError("expected a JSON object")
    if doc.get("version", VERSION) != VERSION:
        raise SettingsError(f"version: expected {VERSION}, got {doc.get('version')!r}")
    for k in doc:
        if k != "version" and k not in _CLASSES:
            raise SettingsError(f"{k}: unknown member")
    return Settings(**{k: None if doc.get(k) is None else _section(k, doc[k]) for k in _CLASSES})


def load_settings(path: str | os.PathLike[str]) -> Settings:
    """The delivery settings in the file at path; all channels None when it does not exist.

    :raises SettingsError: the file cannot be read or is not valid (the message names it).
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return Settings()
    except OSError as e:
        raise SettingsError(f"{p}: cannot read: {e.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise SettingsError(f"{p}: larger than {MAX_FILE_BYTES} bytes")
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise SettingsError(f"{p}: not JSON: {e}") from None
    try:
        return parse_settings(doc)
    except SettingsError as e:
        raise SettingsError(f"{p}: {e}") from None


def settings_json(s: Settings, secrets: bool = False) -> dict[str, Any]:
    """The settings as JSON. Without secrets (every answer): each secret member is replaced by
    "<member>_set": true/false. With secrets: the file's document."""
    out: dict[str, Any] = {"version": VERSION} if secrets else {}
    for name in _CLASSES:
        obj = getattr(s, name)
        if obj is None:
            out[name] = None
            continue
        d: dict[str, Any] = {}
        for f in fields(obj):
            v = getattr(obj, f.name)
            if f.name in SECRETS[name] and not secrets:
                d[f"{f.name}_set"] = bool(v)
            else:
                d[f.name] = v
        out[name] = d
    return out


def merge_settings(old: Settings, body: Any) -> Settings:
    """old changed by an update body {"smtp": {...} | null, ...}: a channel given as an object
    replaces that channel (secret members it omits are kept from the old one), null removes
    it, a channel not named stays as it is.

    :raises SettingsError: an unknown channel or a bad member.
    """
    if not isinstance(body, dict):
        raise SettingsError("expected a JSON object")
    new = replace(old)
    for k, v in body.items():
        if k not in _CLASSES:
            raise SettingsError(f"{k}: unknown channel (known: {', '.join(_CLASSES)})")
        setattr(new, k, None if v is None else _section(k, v, getattr(old, k)))
    return new


def write_settings(path: str | os.PathLike[str], body: Any) -> Settings:
    """Applies an update body (merge_settings) to the file at path under a lock and writes it
    atomically (a temporary file beside it, fsync, rename, fsync of the directory; mode 0640:
    it holds secrets). The file is unchanged when anything is refused.

    :raises SettingsError: a bad body, an unreadable or invalid existing file, a failed write.
    """
    p = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(p))
    with _write_lock:
        try:
            dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:
            raise SettingsError(f"{p}: cannot open its directory: {e.strerror}") from None
        try:
            fcntl.flock(dfd, fcntl.LOCK_EX)
            new = merge_settings(load_settings(p), body)
            data = json.dumps(settings_json(new, secrets=True), indent=2).encode() + b"\n"
            _write_atomically(p, data)
        finally:
            os.close(dfd)
    return new


def _write_atomically(p: str, data: bytes) -> None:
    """Replaces the file at p with data, mode 0640 (it holds secrets)."""
    try:
        atomicfile.write_atomically(p, data, 0o640)
    except OSError as e:
        raise SettingsError(f"{p}: cannot write: {e.strerror or e}") from None


# ---------------------------------------------------------------- TLS


def tls_context(ca: str | None) -> ssl.SSLContext:
    """A client context: TLS 1.2 or later, the peer's certificate and name verified against
    ca (PEM) or else the system CAs."""
    ctx = ssl.create_default_context(cadata=ca) if ca else ssl.create_default_context()
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _why(e: BaseException) -> str:
    """A short text of a network or TLS failure (no secret can be in these)."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"certificate not trusted: {e.verify_message}"
    if isinstance(e, TimeoutError | socket.timeout):
        return "timed out"
    if isinstance(e, ssl.SSLError):
        return f"TLS failed: {e.reason or e}"
    if isinstance(e, socket.gaierror):
        return f"cannot resolve: {e.strerror}"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return f"{type(e).__name__}: {e}"


def _peer(host: str, port: int) -> str:
    """host:port, IPv6 addresses in brackets."""
    try:
        if ipaddress.ip_address(host).version == 6:
            return f"[{host}]:{port}"
    except ValueError:
        pass
    return f"{host}:{port}"


class _Deadline:
    """Whether the deadline of a delivery passed (the socket was shut down then)."""

    passed = False


@contextmanager
def _deadline(seconds: float, sock: Callable[[], socket.socket | None]) -> Iterator[_Deadline]:
    """Bounds a whole exchange: after seconds the socket sock() gives is shut down, so that a
    peer answering a byte at a time (each step within its timeout) cannot hold a delivery."""
    d = _Deadline()

    def fire() -> None:
        s = sock()
        d.passed = True
        if s is not None:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()
    try:
        yield d
    finally:
        t.cancel()


# ---------------------------------------------------------------- email


def send_email(relay: SmtpRelay, msg: EmailMessage) -> None:
    """Sends msg through the relay, to the addresses of its To, Cc and Bcc. STARTTLS is
    required (a relay that does not offer it is refused before anything is sent) or the
    connection is TLS from the start ("tls"); AUTH when the relay has a username. The message
    goes as it is (MIME parts, inline images untouched); msg is changed only in its headers:
    From, Date and Message-ID are added when it has none, Bcc is removed.

    :raises DeliveryError: "email via HOST:PORT: ..." (never the password).
    """
    where = f"email via {_peer(relay.host, relay.port)}"
    if "From" not in msg:
        msg["From"] = relay.sender
    if "Date" not in msg:
        msg["Date"] = email.utils.formatdate(usegmt=True)
    if "Message-ID" not in msg:
        msg["Message-ID"] = email.utils.make_msgid(domain=relay.sender.rpartition("@")[2])
    rcpts = [a for _, a in email.utils.getaddresses(msg.get_all("To", []) + msg.get_all("Cc", []) + msg.get_all("Bcc", []))]  # fmt: skip
    if not rcpts:
        raise DeliveryError(f"{where}: the message has no recipient")
    ctx = tls_context(relay.ca)
    if relay.security == "tls":
        smtp: smtplib.SMTP = smtplib.SMTP_SSL(timeout=relay.timeout, context=ctx)
    else:
        smtp = smtplib.SMTP(timeout=relay.timeout)
    # made before connect() (so the deadline can reach its socket): the name the certificate
    # is checked against is what the constructor would have set
    smtp._host = relay.host  # type: ignore[attr-defined]
    step = "connect"
    total = relay.timeout * DEADLINE_STEPS
    try:
        with _deadline(total, lambda: getattr(smtp, "sock", None)) as late:
            smtp.connect(relay.host, relay.port)
            step = "EHLO"
            smtp.ehlo()
            if relay.security == "starttls":
                if not smtp.has_extn("starttls"):
                    raise DeliveryError(f"{where}: the relay does not offer STARTTLS (refused)")
                step = "STARTTLS"
                smtp.starttls(context=ctx)
                step = "EHLO"
                smtp.ehlo()
            if relay.username:
                step = "AUTH"
                smtp.login(relay.username, relay.password or "")
            step = "send"
            del msg["Bcc"]
            refused = smtp.send_message(msg, from_addr=relay.sender, to_addrs=rcpts)
            if refused:
                raise DeliveryError(f"{where}: recipients refused: {', '.join(sorted(refused))}")
    except DeliveryError:
        raise
    except (smtplib.SMTPException, OSError) as e:
        if late.passed:
            raise DeliveryError(f"{where}: {step}: gave up after {total:g} s") from None
        _smtp_failure(where, step, relay, e)
    finally:
        try:
            smtp.quit()
        except (smtplib.SMTPException, OSError):
            smtp.close()


def _smtp_failure(where: str, step: str, relay: SmtpRelay, e: BaseException) -> None:
    """Raises the DeliveryError of an SMTP failure (never the password)."""
    try:
        raise e
    except smtplib.SMTPAuthenticationError as e:
        raise DeliveryError(
            f"{where}: login as {relay.username!r} refused: {e.smtp_code}"
        ) from None
    except smtplib.SMTPNotSupportedError:
        raise DeliveryError(f"{where}: {step}: not supported by the relay") from None
    except smtplib.SMTPResponseException as e:
        text = e.smtp_error.decode("utf-8", "replace")[:200] if isinstance(e.smtp_error, bytes) else str(e.smtp_error)[:200]  # fmt: skip
        raise DeliveryError(f"{where}: {step}: {e.smtp_code} {text}") from None
    except smtplib.SMTPRecipientsRefused as e:
        raise DeliveryError(
            f"{where}: recipients refused: {', '.join(sorted(e.recipients))}"
        ) from None
    except (smtplib.SMTPException, OSError) as e:
        raise DeliveryError(f"{where}: {step}: {_why(e)}") from None


def alert_summary(event: dict[str, Any]) -> str:
    """One line saying what happened: 'alert "x" firing: 12 matches in logspace main'."""
    what = "test of" if event.get("state") == "test" else event.get("state", "firing")
    line = (
        f'logbox alert "{event.get("alert", "")}" {what}: {event.get("count", 0)} matches '
        f"in logspace {event.get('logspace', '')}"
    )
    g = event.get("group")
    if g:
        line += f" ({g.get('field')}={g.get('value')})"
    return line


def alert_email(to: list[str], event: dict[str, Any], sender: str) -> EmailMessage:
    """The plain-text mail of an alert event."""
    msg = EmailMessage()
    state = event.get("state", "firing")
    msg["Subject"] = (
        f"[logbox] {'TEST ' if state == 'test' else ''}alert {event.get('alert', '')}: "
        f"{event.get('count', 0)} matches in {event.get('logspace', '')}"
    )
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    msg["X-Logbox-Alert"] = str(event.get("alert_id", ""))
    lines = [
        alert_summary(event),
        "",
        f"alert:      {event.get('alert', '')} ({event.get('alert_id', '')})",
        f"state:      {state}",
        f"logspace:   {event.get('logspace', '')}",
        f"query:      {event.get('query', '')}",
        f"condition:  {event.get('condition', '')}",
        f"count:      {event.get('count', 0)}",
        f"time:       {event.get('time', '')}",
        f"box:        {event.get('box', '')}",
    ]
    if event.get("url"):
        lines.append(f"matches:    {event['url']}")
    samples = event.get("samples") or []
    if samples:
        lines += ["", "first matches:"]
        for m in samples[:5]:
            raw = m.get("raw") or m.get("message") or json.dumps(m, ensure_ascii=False)
            lines.append(f"  {str(raw)[:1000]}")
    msg.set_content("\n".join(lines) + "\n")
    return msg


# ---------------------------------------------------------------- syslog


def _sd_value(v: Any) -> str:
    """An RFC 5424 PARAM-VALUE: '"', '\\' and ']' escaped."""
    return re.sub(r'(["\\\]])', r"\\\1", str(v))


def syslog_line(target: SyslogTarget, event: dict[str, Any]) -> bytes:
    """The RFC 5424 message of an event (without framing): facility from the target, severity
    warning (firing) or notice (test), APP-NAME logbox, MSGID alert, structured data
    [logbox-alert@32473 id name state logspace count (window) (group_field group_value)]."""
    severity = 5 if event.get("state") == "test" else 4
    pri = FACILITIES.index(target.facility) * 8 + severity
    ts = event.get("time") or datetime.now(UTC).isoformat(timespec="microseconds")
    ts = re.sub(r"\+00:00$", "Z", str(ts))
    if not re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)$", ts):
        ts = "-"
    host = re.sub(r"[^!-~]", "", str(event.get("box") or socket.gethostname()))[:255] or "-"
    params = [
        ("id", event.get("alert_id", "")),
        ("name", event.get("alert", "")),
        ("state", event.get("state", "")),
        ("logspace", event.get("logspace", "")),
        ("count", event.get("count", 0)),
    ]
    if event.get("window_s") is not None:
        params.append(("window", event["window_s"]))
    g = event.get("group")
    if g:
        params += [("group_field", g.get("field", "")), ("group_value", g.get("value", ""))]
    sd = "[" + SD_ID + "".join(f' {k}="{_sd_value(v)}"' for k, v in params) + "]"
    text = alert_summary(event)
    if event.get("condition"):
        text += f"; condition: {event['condition']}"
    if event.get("url"):
        text += f"; {event['url']}"
    head = f"<{pri}>1 {ts} {host} logbox - alert {sd} ".encode()
    return head + b"\xef\xbb\xbf" + text.encode("utf-8", "replace")


def send_syslog(target: SyslogTarget, event: dict[str, Any]) -> None:
    """Sends the event's RFC 5424 message: one UDP datagram (cut to 2048 bytes), or octet
    counted ("LEN SP MSG") over TCP or TLS (verified, TLS 1.2+).

    :raises DeliveryError: "syslog to HOST:PORT (transport): ...".
    """
    where = f"syslog to {_peer(target.host, target.port)} ({target.transport})"
    line = syslog_line(target, event)
    try:
        if target.transport == "udp":
            infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_DGRAM)
            fam, typ, proto, _, addr = infos[0]
            with socket.socket(fam, typ, proto) as s:
                s.settimeout(target.timeout)
                s.sendto(line[:SYSLOG_UDP_MAX], addr)
            return
        framed = str(len(line)).encode() + b" " + line
        with socket.create_connection((target.host, target.port), timeout=target.timeout) as s:
            if target.transport == "tls":
                with tls_context(target.ca).wrap_socket(s, server_hostname=target.host) as t:
                    t.sendall(framed)
            else:
                s.sendall(framed)
    except OSError as e:
        raise DeliveryError(f"{where}: {_why(e)}") from None


# ---------------------------------------------------------------- webhook


def webhook_signature(secret: str, body: bytes) -> str:
    """The signature header's value: "sha256=" + the hex HMAC-SHA256 of body keyed by secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def send_webhook(url: str, ca: str | None, event: dict[str, Any], hook: WebhookSettings) -> None:
    """POSTs the event as JSON to url (https only, verified against ca or the system CAs, no
    redirects followed), signed with the configured secret (SIGNATURE_HEADER) when one is set.
    Any answer but 2xx fails.

    :raises DeliveryError: "webhook to HOST:PORT: ..." (the URL's path and query are not
        shown: they may hold a token).
    """
    u = urllib.parse.urlsplit(url)
    if u.scheme != "https" or not u.hostname:
        raise DeliveryError("webhook: the URL must be https://HOST[:PORT]/PATH")
    try:
        port = u.port or 443
    except ValueError:
        raise DeliveryError("webhook: the URL's port is not valid") from None
    where = f"webhook to {_peer(u.hostname, port)}"
    try:
        ctx = tls_context(ca)
    except (ssl.SSLError, ValueError):
        raise DeliveryError(f"{where}: the CA is not usable PEM") from None
    body = json.dumps(event, ensure_ascii=False).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "logbox-alert/1",
        "X-Logbox-Event": str(event.get("state", "")),
    }
    if hook.secret:
        headers[SIGNATURE_HEADER] = webhook_signature(hook.secret, body)
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    conn = http.client.HTTPSConnection(u.hostname, port, timeout=hook.timeout, context=ctx)
    total = hook.timeout * DEADLINE_STEPS
    try:
        with _deadline(total, lambda: conn.sock) as late:
            conn.request("POST", path, body=body, headers=headers)
            r = conn.getresponse()
            r.read(WEBHOOK_ANSWER_MAX)
    except (OSError, http.client.HTTPException) as e:
        if late.passed:
            raise DeliveryError(f"{where}: gave up after {total:g} s") from None
        raise DeliveryError(f"{where}: {_why(e)}") from None
    finally:
        conn.close()
    if not 200 <= r.status < 300:
        raise DeliveryError(f"{where}: answered {r.status} {r.reason}")


# ---------------------------------------------------------------- SNMP


def _member(event: dict[str, Any], key: str) -> Any:
    """event[key], where "group.field" looks into event["group"]."""
    if "." in key:
        a, b = key.split(".", 1)
        return (event.get(a) or {}).get(b)
    return event.get(key)


def snmp_varbinds(event: dict[str, Any]) -> list[str]:
    """snmptrap's OID TYPE VALUE arguments of an event (members that are null left out)."""
    out: list[str] = []
    for suffix, _, key, typ in SNMP_VARBINDS:
        v = _member(event, key)
        if v is None:
            continue
        if typ == "u":
            v = str(max(0, min(int(v), 0xFFFFFFFF)))
        else:
            v = str(v).encode("utf-8", "replace")[:SNMP_STRING_MAX].decode("utf-8", "ignore")
        out += [f"{SNMP_OBJECTS}.{suffix}", typ, v]
    return out


def send_snmp_trap(target: SnmpTarget, event: dict[str, Any]) -> None:
    """Sends an SNMPv2c or v3 (authPriv) trap with the event's varbinds through net-snmp's
    snmptrap. The community and passphrases go in a private snmp.conf (0600, in a temporary
    directory), never on the command line.

    :raises DeliveryError: "snmp trap to HOST:PORT: ..." (snmptrap's message, which carries no
        secret).
    """
    where = f"snmp trap to {_peer(target.host, target.port)}"
    exe = shutil.which("snmptrap") or "/usr/bin/snmptrap"
    if not os.access(exe, os.X_OK):
        raise DeliveryError(f"{where}: snmptrap not installed (Debian package snmp)")
    trap = SNMP_TRAP_TEST if event.get("state") == "test" else SNMP_TRAP_FIRING
    six = ":" in target.host
    peer = f"udp6:[{target.host}]:{target.port}" if six else f"udp:{target.host}:{target.port}"
    with tempfile.TemporaryDirectory(prefix="logbox-snmp.") as d:
        conf = ["defVersion " + target.version]
        args = [exe, "-m", "", "-M", d, "-Le", "-t", str(int(target.timeout)), "-r", "0"]
        if target.version == "2c":
            conf.append(f"defCommunity {target.community}")
        else:
            conf += [
                f"defSecurityName {target.user}",
                "defSecurityLevel authPriv",
                f"defAuthType {target.auth_protocol}",
                f"defPrivType {target.priv_protocol}",
                f"defAuthPassphrase {target.auth_password}",
                f"defPrivPassphrase {target.priv_password}",
            ]
            args += ["-e", str(target.engine_id)]
        fd = os.open(os.path.join(d, "snmp.conf"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(conf) + "\n")
        env = {
            "PATH": "/usr/bin:/bin",
            "SNMPCONFPATH": d,
            "SNMP_PERSISTENT_DIR": d,
            "MIBS": "",
            "MIBDIRS": d,
            "HOME": d,
        }
        args += [peer, "", trap, *snmp_varbinds(event)]
        try:
            p = subprocess.run(
                args, env=env, capture_output=True, timeout=target.timeout + 5, check=False
            )
        except subprocess.TimeoutExpired:
            raise DeliveryError(f"{where}: snmptrap timed out") from None
        except OSError as e:
            raise DeliveryError(f"{where}: cannot run snmptrap: {e.strerror}") from None
    if p.returncode != 0:
        text = p.stderr.decode("utf-8", "replace").strip().splitlines()
        for s in (target.community, target.auth_password, target.priv_password):
            if s:
                text = [t.replace(s, "(secret)") for t in text]
        raise DeliveryError(f"{where}: snmptrap failed: {'; '.join(text)[:300] or p.returncode}")


# ---------------------------------------------------------------- dispatch


def deliver(action: dict[str, Any], event: dict[str, Any], settings: Settings) -> None:
    """Delivers event by action (contract: rpc/API.md "Delivery"):
    {"type": "email", "to": [...]}, {"type": "syslog"}, {"type": "webhook", "url", "ca"},
    {"type": "snmp"}. Each network step is bounded by the channel's timeout (10 s default).

    :raises DeliveryError: an unknown action, a channel not configured, or the delivery failed.
    """
    kind = action.get("type") if isinstance(action, dict) else None
    if kind == "email":
        if settings.smtp is None:
            raise DeliveryError("email: no SMTP relay is configured")
        to = action.get("to")
        if isinstance(to, str):
            to = [to]
        if not isinstance(to, list) or not to or not all(isinstance(a, str) and _EMAIL.match(a) for a in to):  # fmt: skip
            raise DeliveryError("email: 'to' must be a list of email addresses")
        send_email(settings.smtp, alert_email(to, event, settings.smtp.sender))
    elif kind == "syslog":
        if settings.syslog is None:
            raise DeliveryError("syslog: no remote collector is configured")
        send_syslog(settings.syslog, event)
    elif kind == "webhook":
        url = action.get("url")
        if not isinstance(url, str):
            raise DeliveryError("webhook: 'url' missing")
        ca = action.get("ca")
        if ca is not None and not isinstance(ca, str):
            raise DeliveryError("webhook: 'ca' must be PEM text or null")
        send_webhook(url, ca, event, settings.webhook or WebhookSettings())
    elif kind == "snmp":
        if settings.snmp is None:
            raise DeliveryError("snmp: no SNMP manager is configured")
        send_snmp_trap(settings.snmp, event)
    else:
        raise DeliveryError(f"unknown action type {kind!r} (known: {', '.join(CHANNELS)})")


def probe_event(box: str | None = None, url: str | None = None) -> dict[str, Any]:
    """The event a test delivery sends (state "test")."""
    return {
        "alert_id": "test",
        "alert": "delivery test",
        "logspace": "-",
        "query": "",
        "condition": "a test message sent by an admin",
        "state": "test",
        "count": 0,
        "window_s": None,
        "group": None,
        "time": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "box": box or socket.gethostname(),
        "url": url,
        "samples": [],
    }


def try_delivery(
    action: dict[str, Any], settings: Settings, box: str | None = None
) -> dict[str, Any]:
    """Delivers probe_event() by action (the admin's test): {"channel", "delivered": bool,
    "error": the DeliveryError's message or null, "seconds"}."""
    t0 = time.monotonic()
    error = None
    try:
        deliver(action, probe_event(box), settings)
    except DeliveryError as e:
        error = str(e)
    return {
        "channel": action.get("type"),
        "delivered": error is None,
        "error": error,
        "seconds": round(time.monotonic() - t0, 3),
    }
