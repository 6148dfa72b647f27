"""Who may reach the web view, as rules without I/O (the time comes in):

- **Host**: a request names, in its Host header, a host this view answers to —
  loopback (`localhost`, `127.0.0.1`, `[::1]`), the address it listens on, and
  those the operator allows (`--allow-host`, AGENTLEDGER_UI_ALLOW_HOSTS). A page
  of another site whose name was made to resolve to this machine (DNS
  rebinding) sends its own name: refused before anything is read.
- **Sign-in**: reading and acting need the operator's token, as
  `Authorization: Bearer <token>` (scripts) or as the session cookie the
  sign-in page gets for it (HttpOnly, SameSite=Strict): `<issued>.<mac>`, the
  mac an HMAC of the issue time keyed with the token, valid SESSION_S (a new
  token ends every session).
- **Same origin**: a request that changes something (approve, deny, reply,
  cancel, …) and rides on the cookie must say, in Origin (or else Referer),
  that it comes from this view's own pages: the same scheme-less host and port
  as its Host header."""

from __future__ import annotations

import hashlib
import hmac
import string
from dataclasses import dataclass
from urllib.parse import urlsplit

LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
WILDCARD = ("", "0.0.0.0", "::", "[::]")
SESSION_S = 12 * 3600
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_HOST_CHARS = frozenset(string.ascii_lowercase + string.digits + ".-_:[]")


@dataclass(frozen=True)
class Access:
    token: str
    hosts: frozenset[str]  # host names as `host_name` gives them (lower case, no port)

    @property
    def cookie(self) -> str:
        """The session cookie's name: one per token, so two views on one machine
        (cookies are shared by every port of a host) never overwrite each other's."""
        return "agentledger_ui_" + hashlib.sha256(self.token.encode()).hexdigest()[:8]


def allowed_hosts(bound: str, extra: list[str]) -> frozenset[str]:
    """Loopback, the address the view listens on (unless it is every address),
    and the operator's names."""
    names = {*LOOPBACK, *(host_name(h) or "" for h in extra)}
    if bound not in WILDCARD:
        names.add(host_name(f"[{bound}]" if ":" in bound else bound) or "")
    return frozenset(n for n in names if n)


def host_name(header: str) -> str | None:
    """`Example.COM:8080` -> `example.com`, `[::1]:80` -> `[::1]`; None for what is
    not a host (empty, a user part, a path, odd characters)."""
    text = header.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or (text[end + 1 :] and not _is_port(text[end + 1 :])):
            return None
        name = text[: end + 1]
    else:
        name, colon, port = text.partition(":")
        if colon and not port.isdigit():
            return None
    name = name.rstrip(".") if not name.startswith("[") else name
    if not name or not set(name) <= _HOST_CHARS:
        return None
    return name


def _is_port(text: str) -> bool:
    return text.startswith(":") and text[1:].isdigit()


def host_allowed(access: Access, header: str | None) -> bool:
    name = host_name(header or "")
    return name is not None and name in access.hosts


def bearer_ok(access: Access, authorization: str | None) -> bool:
    scheme, _, token = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and token_ok(access, token.strip())


def token_ok(access: Access, token: str) -> bool:
    return hmac.compare_digest(token.encode(), access.token.encode())


def session_value(access: Access, now: float) -> str:
    issued = str(int(now))
    return f"{issued}.{_mac(access, issued)}"


def session_ok(access: Access, value: str | None, now: float) -> bool:
    issued, _, mac = (value or "").partition(".")
    if not issued.isdigit() or not hmac.compare_digest(mac.encode(), _mac(access, issued).encode()):
        return False
    return 0 <= now - int(issued) < SESSION_S


def _mac(access: Access, issued: str) -> str:
    return hmac.new(
        access.token.encode(), f"agentledger-ui-session:{issued}".encode(), hashlib.sha256
    ).hexdigest()


def same_origin(origin: str | None, referer: str | None, host: str | None) -> bool:
    """Whether Origin (or, without it, Referer) names this view as `host` (the
    request's Host header) names it; False when neither says."""
    said = origin if origin and origin != "null" else referer
    if not said or not host:
        return False
    try:
        parts = urlsplit(said)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.strip().lower()


def safe_next(path: str | None) -> str:
    """Where the sign-in page sends the browser afterwards: a path of this view only."""
    if not path or not path.startswith("/") or path.startswith("//") or "\\" in path:
        return "/"
    return path
