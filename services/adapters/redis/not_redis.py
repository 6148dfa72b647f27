"""What answers at an address where a Redis was expected, when it is not one:
a message for the user naming what was found (an HTTP server, a TLS port, an
echo, a server that closed the connection, or the first bytes it sent). One
raw look (`sniff`): connect, send a PING as Redis's protocol writes it, read
what comes back within a moment; `describe` turns those bytes into words."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

PING = b"*1\r\n$4\r\nPING\r\n"
READ_BYTES = 256
TIMEOUT_S = 2.0


def describe(answer: bytes | None, *, sent: bytes = PING) -> str:
    """What the bytes a server sent back to a PING say it is (None: it sent nothing in time)."""
    if answer is None:
        return f"it accepted the connection but said nothing within {TIMEOUT_S:g}s"
    if not answer:
        return "it closed the connection without a word (as a TLS port does: rediss:// speaks TLS)"
    if answer.startswith(b"HTTP/"):
        first = answer.split(b"\r\n", 1)[0].decode(errors="replace")
        return f"an HTTP server (it answered {first!r})"
    if answer.lstrip()[:1] == b"<" or b"<html" in answer.lower():
        return "an HTTP server (it answered with HTML)"
    if (
        answer[:1] in (b"\x15", b"\x16") and answer[1:2] == b"\x03"
    ):  # a TLS record: alert, handshake
        return "a TLS server (rediss:// speaks TLS; redis:// does not)"
    if sent.startswith(answer) or answer.startswith(sent):
        return "an echo: it sent back what it was sent"
    return f"it answered {answer[:40]!r}"


def speaks_redis(answer: bytes | None) -> bool:
    """A reply in Redis's protocol (PONG, or an error such as -LOADING or -NOAUTH),
    not merely our own bytes sent back."""
    if not answer or answer[:1] not in (b"+", b"-"):
        return False
    return answer.endswith(b"\r\n") and b"\r\n" not in answer[:-2]


def sniff(url: str) -> bytes | None:
    """What the server at `url` sends back to one PING (b"": it closed the
    connection; None: nothing within TIMEOUT_S). OSError when nothing listens."""
    parts = urlsplit(url)
    address: str | tuple[str, int]
    if parts.scheme == "unix":
        family, address = socket.AF_UNIX, parts.path
    else:
        host = parts.hostname or "127.0.0.1"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        address = (host, parts.port or 6379)
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(TIMEOUT_S)
        s.connect(address)
        try:
            s.sendall(PING)
            return s.recv(READ_BYTES)
        except TimeoutError:
            return None
        except OSError:  # reset while we spoke: it closed on us
            return b""


def found_at(url: str) -> str | None:
    """`describe` of what the server at `url` sends back; None when nothing listens
    there, when a Redis does (its own error stands), or for rediss:// (a raw look
    would only see TLS fail)."""
    if urlsplit(url).scheme == "rediss":
        return None
    try:
        answer = sniff(url)
    except OSError:
        return None
    return None if speaks_redis(answer) else describe(answer)
