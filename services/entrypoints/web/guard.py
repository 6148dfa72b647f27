"""The web view's door (ASGI middleware around the routes), applying the rules
of `access` to every request before any route runs:

1. a Host this view does not answer to: 421 (no Host at all: 400), one line,
   nothing else read;
2. the sign-in page, its script and style, `/api/signin`, `/healthz` and the
   icon are open (they hold no data); everything else needs the token (Bearer) or a
   session cookie: else 401 for `/api/…`, a redirect to the sign-in page for
   pages;
3. a request that changes something and came with the cookie must come from
   this view's own pages (Origin, else Referer, naming this host): else 403;
   a request naming another origin is refused whatever it carries."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from http.cookies import SimpleCookie
from urllib.parse import quote

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from agentledger.services.entrypoints.web.access import (
    SAFE_METHODS,
    Access,
    bearer_ok,
    host_allowed,
    safe_next,
    same_origin,
    session_ok,
)

OPEN = frozenset(
    {"/signin", "/api/signin", "/healthz", "/favicon.ico", "/static/signin.js", "/static/app.css"}
)


class Guard:
    def __init__(
        self, app: ASGIApp, access: Access, clock: Callable[[], float] = time.time
    ) -> None:
        self.app = app
        self.access = access
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refused = self._refusal(scope, headers)
        if refused is None:
            await self.app(scope, receive, send)
        else:
            status, body, extra = refused
            await _answer(send, status, body, extra)

    def _refusal(
        self, scope: Scope, headers: Headers
    ) -> tuple[int, dict[str, str], dict[str, str]] | None:
        host = headers.get("host")
        if not host:
            return 400, _said("no host", "the request names no Host"), {}
        if not host_allowed(self.access, host):
            return 421, _said("wrong host", "this view does not answer to that Host name"), {}
        method = scope["method"]
        origin, referer = headers.get("origin"), headers.get("referer")
        crossing = (origin is not None or referer is not None) and not same_origin(
            origin, referer, host
        )
        if method not in SAFE_METHODS and crossing:
            return 403, _said("cross-site", f"a request from {origin or referer!r} is refused"), {}
        path = scope["path"]
        if path in OPEN:
            return None
        by_bearer = bearer_ok(self.access, headers.get("authorization"))
        by_cookie = not by_bearer and session_ok(self.access, self._cookie(headers), self.clock())
        if not (by_bearer or by_cookie):
            if path.startswith("/api/"):
                return 401, _said("not signed in", "sign in first: the sign-in URL `agentledger ui` printed, "
                                  "or Authorization: Bearer <token>"), {"www-authenticate": "Bearer"}  # fmt: skip
            return 303, {}, {"location": f"/signin?next={quote(safe_next(path))}"}
        if method not in SAFE_METHODS and by_cookie and not same_origin(origin, referer, host):
            return (
                403,
                _said(
                    "cross-site",
                    "a change sent with the session cookie must come from this view's pages",
                ),
                {},
            )
        return None

    def _cookie(self, headers: Headers) -> str | None:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 -- a malformed Cookie header is no session
            return None
        found = jar.get(self.access.cookie)
        return found.value if found is not None else None


def _said(error: str, message: str) -> dict[str, str]:
    return {"error": error, "message": message}


async def _answer(send: Send, status: int, body: dict[str, str], extra: dict[str, str]) -> None:
    data = json.dumps(body).encode() if body else b""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
               (b"cache-control", b"no-store")]  # fmt: skip
    headers += [(k.encode(), v.encode()) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
